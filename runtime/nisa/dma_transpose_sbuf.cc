#include "runtime/nisa/dma_transpose_sbuf.h"

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr const char* kInst = "dma_transpose";

std::string HardwareDgeViolation(const Tile& src, int64_t partitions) {
  if (src.partitions() > kHwDgeMaxRows) {
    return StrCat("R = ", src.partitions(), " rows exceed the hardware DGE's ", kHwDgeMaxRows);
  }
  if (src.free_size() > partitions) {
    return StrCat("C = ", src.free_size(), " columns exceed the ", partitions, " partitions");
  }
  if (SizeOf(src.dtype()) != 2) {
    return StrCat("dtype ", DTypeName(src.dtype()), " is not 2 bytes wide (bf16, fp16, uint16)");
  }
  return "";
}

}  // namespace

void dma_transpose(const Tile& dst, const Tile& src, DgeMode mode) {
  NeuronCore& core = CurrentCore();
  Issue issue(kInst, DmaQueue(core.EarliestDmaQueue()));
  issue.Reads("src", src).Writes("dst", dst);
  if (src.memory() != MemorySpace::kSbuf) {
    Illegal(kInst, "src", src, "must be in SBUF (or HBM) for a DMA transpose, not PSUM");
  }
  const int64_t rows = src.partitions(), cols = src.free_size();
  if (dst.memory() != MemorySpace::kSbuf || dst.partitions() != cols || dst.free_size() != rows) {
    Illegal(kInst, "dst", dst,
            StrCat("must be an SBUF tile [", cols, ", ", rows, "], the transpose of src"));
  }
  const std::string hw_violation = HardwareDgeViolation(src, core.profile().partitions());
  if (mode == DgeMode::kHardware && !hw_violation.empty()) {
    Illegal(kInst, "src", src, StrCat(hw_violation, " (hardware DGE rule)"));
  }
  const bool software = mode == DgeMode::kSoftware || !hw_violation.empty();
  const double descriptors_ready = software ? GenerateDgeDescriptors(src.numel()) : 0.0;

  if (Functional()) {
    const std::vector<float> values = src.ToFloats();  // [rows][cols]
    float* column = ScratchRow(0, rows);
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t r = 0; r < rows; ++r) column[r] = values[r * cols + c];
      dst.WriteRow(c, column);
    }
  }
  const int64_t bytes = std::max(src.numel() * static_cast<int64_t>(SizeOf(src.dtype())),
                                 dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype())));
  // SBUF -> SBUF: split by dst's partitions, at the engines' transpose rate.
  FinishDmaOnChip(issue, descriptors_ready, dst, bytes, 0,
                  issue.profile().dma_transpose_hbm_efficiency());
}

}  // namespace nkisim::nisa
