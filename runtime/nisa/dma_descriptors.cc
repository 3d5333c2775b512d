#include "runtime/nisa/dma_descriptors.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

std::string DescribeHbm(const TensorView& v) {
  return StrCat("'", v.name(), "' ", ShapeString(v.shape()), " ", DTypeName(v.dtype()), " HBM");
}

[[noreturn]] void IllegalHbm(const char* inst, const char* operand, const TensorView& v,
                             const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument,
        StrCat(inst, ": operand '", operand, "' ", DescribeHbm(v), ": ", rule));
}

int64_t Bytes(const Tile& t) { return t.numel() * static_cast<int64_t>(SizeOf(t.dtype())); }

}  // namespace

double GenerateDgeDescriptors(int64_t elements) {
  Issue issue("dge_descriptors", Engine::kGpSimd);
  const int64_t per_lane =
      (elements + issue.profile().partitions() - 1) / issue.profile().partitions();
  return issue.Commit(ComputeOpNs(issue.profile(), Engine::kGpSimd, per_lane, false), 0, 0);
}

double FinishDmaOnChip(Issue& issue, double earliest_ns, const Tile& chip, int64_t bytes,
                       int64_t hbm_bytes, double efficiency) {
  DmaRequest request;
  request.ready_ns = earliest_ns;
  request.hbm_bytes = hbm_bytes;
  request.efficiency = efficiency;
  const int64_t row = std::max<int64_t>(1, bytes / chip.partitions());
  request.split = SplitOverEngines(issue.profile(), chip.partition_start(), chip.partitions(), row,
                                   row, false, true);
  return issue.FinishTransfer(request, bytes);
}

const char* DgeModeName(DgeMode mode) {
  static constexpr const char* kNames[] = {"auto", "hardware", "software"};
  return kNames[static_cast<int>(mode)];
}

std::string HardwareDgeViolation(const TensorView& src, int64_t partitions) {
  if (src.rank() != 2) return StrCat("the DGE transposes 2-D views, not rank ", src.rank());
  if (src.dim(0) > kHwDgeMaxRows) {
    return StrCat("R = ", src.dim(0), " rows exceed the hardware DGE's ", kHwDgeMaxRows);
  }
  if (src.dim(1) > partitions) {
    return StrCat("C = ", src.dim(1), " columns exceed the ", partitions, " partitions");
  }
  if (SizeOf(src.dtype()) != 2) {
    return StrCat("dtype ", DTypeName(src.dtype()), " is not 2 bytes wide (bf16, fp16, uint16)");
  }
  return "";
}

void dma_transpose(const Tile& dst, const TensorView& src, DgeMode mode) {
  constexpr const char* kInst = "dma_transpose";
  NeuronCore& core = CurrentCore();
  Issue issue(kInst, DmaQueue(core.EarliestDmaQueue()));
  issue.Reads("src", src).Writes("dst", dst);
  const std::string hw_violation = HardwareDgeViolation(src, core.profile().partitions());
  if (mode == DgeMode::kHardware && !hw_violation.empty()) {
    IllegalHbm(kInst, "src", src, StrCat(hw_violation, " (hardware DGE rule)"));
  }
  if (src.rank() != 2) IllegalHbm(kInst, "src", src, "must be a 2-D view [R, C]");
  const int64_t rows = src.dim(0), cols = src.dim(1);
  if (dst.memory() != MemorySpace::kSbuf || dst.partitions() != cols || dst.free_size() != rows) {
    Illegal(kInst, "dst", dst,
            StrCat("must be an SBUF tile [", cols, ", ", rows, "], the transpose of src"));
  }
  // The queue was picked above; the descriptor writer runs on GpSimd and gates the DMA's start.
  const bool software = mode == DgeMode::kSoftware || !hw_violation.empty();
  const double descriptors_ready = software ? GenerateDgeDescriptors(src.numel()) : 0.0;

  const std::vector<float> values = Functional() ? src.ToFloats() : std::vector<float>();
  float* column = ScratchRow(0, rows);
  for (int64_t c = 0; Functional() && c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) column[r] = values[r * cols + c];
    dst.WriteRow(c, column);
  }
  // The engines transpose at dma_transpose_hbm_efficiency of their copy rate.
  const int64_t bytes = std::max(src.size_bytes(), Bytes(dst));
  FinishDmaOnChip(issue, descriptors_ready, dst, bytes, src.size_bytes(),
            core.profile().dma_transpose_hbm_efficiency());
}

void dma_scatter_add(const TensorView& dst, const Tile& indices, const Tile& src) {
  constexpr const char* kInst = "dma_scatter_add";
  NeuronCore& core = CurrentCore();
  Issue issue(kInst, DmaQueue(core.EarliestDmaQueue()));
  issue.Reads("indices", indices).Reads("src", src).Reads("dst", dst).Writes("dst", dst);
  if (dst.rank() != 2) IllegalHbm(kInst, "dst", dst, "must be a 2-D view [R, M]");
  const int64_t rows = dst.dim(0), m = dst.dim(1), n = src.partitions();
  if (indices.memory() != MemorySpace::kSbuf || !IsInteger(indices.dtype()) ||
      indices.partitions() != n || indices.free_size() != 1) {
    Illegal(kInst, "indices", indices, StrCat("must be an integer SBUF tile [", n, ", 1]"));
  }
  if (src.memory() != MemorySpace::kSbuf || src.free_size() != m) {
    Illegal(kInst, "src", src,
            StrCat("must be an SBUF tile with ", m, " elements per partition (dst's row)"));
  }
  // Timing-only: no values, so no row-index check and no accumulation.
  const std::vector<float> index_values = Functional() ? indices.ToFloats() : std::vector<float>();
  for (int64_t i = 0; Functional() && i < n; ++i) {
    const float row = index_values[i];
    if (!(row >= 0 && row < static_cast<float>(rows))) {
      Illegal(kInst, "indices", indices,
              StrCat("partition ", i, " holds row index ", row, ", outside dst's rows [0, ", rows,
                     ")"));
    }
  }
  const DType dt = dst.dtype();
  const int64_t width = static_cast<int64_t>(SizeOf(dt));
  float* x = ScratchRow(0, m);
  for (int64_t i = 0; Functional() && i < n; ++i) {
    src.ReadRow(i, x);
    std::byte* row =
        dst.buffer().data() +
        (dst.offset() + static_cast<int64_t>(index_values[i]) * dst.strides()[0]) * width;
    for (int64_t j = 0; j < m; ++j) {
      std::byte* element = row + j * dst.strides()[1] * width;
      FromFloat(dt, ToFloat(dt, element) + x[j], element);
    }
  }
  // Each row is read and written back: twice the rows' bytes cross the port; one descriptor a row.
  FinishDmaOnChip(issue, 0.0, src, n * m * width, 2 * n * m * width, 1.0);
}

}  // namespace nkisim::nisa
