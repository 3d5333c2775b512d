#include "runtime/nisa/affine_select.h"

#include <algorithm>
#include <utility>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

bool IsComparison(AluOp op) {
  // A comparison maps (v, 0) to 0 or 1 for every v; probe it on values either side of 0.
  for (float v : {-2.0f, 0.0f, 3.0f}) {
    const float r = ApplyAlu(op, v, 0.0f);
    if (r != 0.0f && r != 1.0f) return false;
  }
  return ApplyAlu(op, -2.0f, 0.0f) != ApplyAlu(op, 0.0f, 0.0f) ||
         ApplyAlu(op, 3.0f, 0.0f) != ApplyAlu(op, 0.0f, 0.0f);
}

}  // namespace

void affine_select(const Tile& dst, const std::vector<std::pair<int64_t, int64_t>>& pattern,
                   int64_t channel_multiplier, const Tile& on_true, float on_false_value,
                   AluOp cmp_op, int64_t offset) {
  constexpr const char* kInst = "affine_select";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Reads("on_true_tile", on_true).Writes("dst", dst);
  if (dst.memory() != MemorySpace::kSbuf) Illegal(kInst, "dst", dst, "must be in SBUF");
  if (on_true.memory() != MemorySpace::kSbuf) {
    Illegal(kInst, "on_true_tile", on_true, "must be in SBUF");
  }
  CheckSamePartitions(kInst, "dst", dst, "on_true_tile", on_true);
  int64_t count = 1;
  for (const auto& [step, n] : pattern) count *= n;
  if (pattern.empty() || pattern.size() > 4 || count != dst.free_size() ||
      count != on_true.free_size()) {
    std::string text;
    for (const auto& [step, n] : pattern) text += StrCat("[", step, ", ", n, "]");
    Illegal(kInst, "dst", dst,
            StrCat("pattern ", text, " (", count, " elements) must have 1 to 4 dims whose ",
                   "counts multiply to the elements per partition of dst and on_true_tile (",
                   dst.free_size(), ", ", on_true.free_size(), ")"));
  }
  if (!IsComparison(cmp_op)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": cmp_op ", AluOpName(cmp_op), " is not a comparison"));
  }
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  std::vector<int64_t> idx(pattern.size());
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    on_true.ReadRow(p, x);
    std::fill(idx.begin(), idx.end(), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t v = offset + channel_multiplier * p;
      for (size_t d = 0; d < pattern.size(); ++d) v += pattern[d].first * idx[d];
      if (ApplyAlu(cmp_op, static_cast<float>(v), 0.0f) == 0.0f) x[e] = on_false_value;
      for (size_t d = pattern.size(); d-- > 0;) {  // row-major increment
        if (++idx[d] < pattern[d].second) break;
        idx[d] = 0;
      }
    }
    dst.WriteRow(p, x);
  }
  const int64_t bytes = dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype())) +
                        on_true.numel() * static_cast<int64_t>(SizeOf(on_true.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kGpSimd, n, SizeOf(dst.dtype()) <= 2), bytes,
               0);
}

}  // namespace nkisim::nisa
