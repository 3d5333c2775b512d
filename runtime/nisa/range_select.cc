#include "runtime/nisa/range_select.h"

#include <utility>
#include <algorithm>
#include <limits>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

bool IsRangeComparison(AluOp op) {
  return op == AluOp::kEqual || op == AluOp::kLess || op == AluOp::kLessEqual ||
         op == AluOp::kGreater || op == AluOp::kGreaterEqual;
}

void CheckColumn(const char* inst, const char* name, const Tile& t, int64_t partitions) {
  if (t.partitions() != partitions || t.free_size() != 1) {
    Illegal(inst, name, t, StrCat("must be [", partitions, ", 1]"));
  }
}

}  // namespace

void range_select(const Tile& dst, const Tile& on_true, AluOp cmp0, AluOp cmp1,
                  const Tile& bound0, const Tile& bound1, const Tile& reduce_res,
                  int64_t range_start, float on_false_value) {
  constexpr const char* kInst = "range_select";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("on_true_tile", on_true).Reads("bound0", bound0).Reads("bound1", bound1);
  issue.Writes("dst", dst);
  if (reduce_res.valid()) issue.Writes("reduce_res", reduce_res);
  for (AluOp op : {cmp0, cmp1}) {
    if (!IsRangeComparison(op)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kInst, ": comparison ", AluOpName(op),
                   " must be equal, less, less_equal, greater or greater_equal"));
    }
  }
  if (on_true.partitions() != dst.partitions() || on_true.free_size() != dst.free_size()) {
    Illegal(kInst, "on_true_tile", on_true, StrCat("must have dst's shape ",
                                                   ShapeString(dst.shape())));
  }
  if (!IsFloat(on_true.dtype())) Illegal(kInst, "on_true_tile", on_true, "must be a float dtype");
  CheckColumn(kInst, "bound0", bound0, dst.partitions());
  CheckColumn(kInst, "bound1", bound1, dst.partitions());
  for (const auto& [name, t] : {std::pair<const char*, const Tile*>{"bound0", &bound0},
                                {"bound1", &bound1}}) {
    if (t->dtype() != DType::kFloat32) Illegal(kInst, name, *t, "bounds must be fp32");
  }
  if (reduce_res.valid()) CheckColumn(kInst, "reduce_res", reduce_res, dst.partitions());
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    on_true.ReadRow(p, x);
    float b0, b1;
    bound0.ReadRow(p, &b0);
    bound1.ReadRow(p, &b1);
    for (int64_t i = 0; i < n; ++i) {
      const float j = static_cast<float>(range_start + i);
      if (ApplyAlu(cmp0, j, b0) == 0.0f || ApplyAlu(cmp1, j, b1) == 0.0f) x[i] = on_false_value;
    }
    dst.WriteRow(p, x);
    if (!reduce_res.valid()) continue;
    dst.ReadRow(p, x);  // the max of what was stored
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    reduce_res.WriteRow(p, &m);
  }
  const int64_t bytes = dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype())) +
                        on_true.numel() * static_cast<int64_t>(SizeOf(on_true.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n,
                           SizeOf(dst.dtype()) <= 2 && SizeOf(on_true.dtype()) <= 2),
               bytes, 0);
}

}  // namespace nkisim::nisa
