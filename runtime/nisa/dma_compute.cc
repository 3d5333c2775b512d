#include "runtime/nisa/dma_compute.h"

#include <algorithm>
#include <string>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr const char* kInst = "dma_compute";

Shape ShapeOf(const DmaOperand& x) {
  return std::visit([](const auto& v) { return Shape(v.shape()); }, x);
}

Shape WithoutUnitDims(Shape s) {
  s.erase(std::remove(s.begin(), s.end(), int64_t{1}), s.end());
  return s;
}

std::string Describe(const DmaOperand& x) {
  if (const Tile* t = std::get_if<Tile>(&x)) {
    return StrCat("'", t->name(), "' ", ShapeString(t->shape()), " ", DTypeName(t->dtype()), " ",
                  MemorySpaceName(t->memory()));
  }
  const TensorView& v = std::get<TensorView>(x);
  return StrCat("'", v.name(), "' ", ShapeString(v.shape()), " ", DTypeName(v.dtype()), " HBM");
}

[[noreturn]] void Bad(const std::string& operand, const DmaOperand& x, const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument,
        StrCat(kInst, ": operand '", operand, "' ", Describe(x), ": ", rule));
}

int64_t Bytes(const DmaOperand& x) {
  return std::visit(
      [](const auto& v) { return v.numel() * static_cast<int64_t>(SizeOf(v.dtype())); }, x);
}

bool InHbm(const DmaOperand& x) { return std::holds_alternative<TensorView>(x); }

}  // namespace

void dma_compute(const DmaOperand& dst, const std::vector<DmaOperand>& srcs,
                 const std::vector<float>& scales) {
  NeuronCore& core = CurrentCore();
  Issue issue(kInst, DmaQueue(core.EarliestDmaQueue()));
  for (const DmaOperand& s : srcs) std::visit([&](const auto& v) { issue.Reads("srcs", v); }, s);
  std::visit([&](const auto& v) { issue.Writes("dst", v); }, dst);
  if (srcs.empty()) {
    Raise(ErrorCode::kInvalidArgument, StrCat(kInst, ": srcs is empty: give at least one source"));
  }
  if (scales.size() != srcs.size()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": scales has ", scales.size(), " values for ", srcs.size(),
                 " sources: one scale per source"));
  }
  const Shape want = WithoutUnitDims(ShapeOf(dst));
  const auto check_memory = [](const std::string& name, const DmaOperand& x) {
    const Tile* t = std::get_if<Tile>(&x);
    if (t != nullptr && t->memory() != MemorySpace::kSbuf) {
      Bad(name, x, "must be in HBM or SBUF, not PSUM (the DMA engines reach neither PSUM)");
    }
  };
  check_memory("dst", dst);
  for (size_t i = 0; i < srcs.size(); ++i) {
    const std::string name = StrCat("srcs[", i, "]");
    check_memory(name, srcs[i]);
    if (WithoutUnitDims(ShapeOf(srcs[i])) != want) {
      Bad(name, srcs[i],
          StrCat("must have dst's shape ", ShapeString(ShapeOf(dst)),
                 " once size-1 dims are dropped"));
    }
    if (scales[i] != 1.0f) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kInst, ": scales[", i, "] = ", scales[i],
                   ": every scale must be 1.0 (NKI 0.6 supports no other)"));
    }
  }

  if (Functional()) {
    std::vector<float> sum;
    for (const DmaOperand& s : srcs) {
      const std::vector<float> v = std::visit([](const auto& x) { return x.ToFloats(); }, s);
      if (sum.empty()) {
        sum = v;
      } else {
        for (size_t j = 0; j < v.size(); ++j) sum[j] += v[j];
      }
    }
    std::visit([&](const auto& x) { x.FromFloats(sum); }, dst);
  }

  int64_t bytes = Bytes(dst), hbm_bytes = InHbm(dst) ? Bytes(dst) : 0;
  for (const DmaOperand& s : srcs) {
    bytes += Bytes(s);
    if (InHbm(s)) hbm_bytes += Bytes(s);
  }
  // On the engines by the partitions of its on-chip operand (dst's, else the first SBUF source's);
  // HBM only: the outer rows over the engines in order, as an HBM -> HBM copy.
  const Tile* chip = std::get_if<Tile>(&dst);
  for (size_t i = 0; chip == nullptr && i < srcs.size(); ++i) chip = std::get_if<Tile>(&srcs[i]);
  if (chip != nullptr) {
    FinishDmaOnChip(issue, 0.0, *chip, bytes, hbm_bytes, 1.0);
    return;
  }
  DmaRequest request;
  request.hbm_bytes = hbm_bytes;
  const HardwareProfile& prof = issue.profile();
  const int64_t rows = std::clamp<int64_t>(bytes / prof.dma_descriptor_max_bytes(), 1, prof.dma_engines());
  const int64_t row = std::max<int64_t>(1, bytes / rows);
  request.split = SplitOverEngines(prof, 0, rows, row, row, false, false);
  issue.FinishTransfer(request, bytes);
}

}  // namespace nkisim::nisa
