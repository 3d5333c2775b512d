#include "runtime/nisa/scan.h"

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {

void tensor_tensor_scan(const Tile& dst, const Tile& data0, const Tile& data1,
                        const Scalar& initial, AluOp op0, AluOp op1, bool reverse0,
                        bool reverse1) {
  constexpr const char* kInst = "tensor_tensor_scan";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data0", data0).Reads("data1", data1).Writes("dst", dst);
  if (initial.is_column()) issue.Reads("initial", initial.column());
  for (const auto& [name, t] : {std::pair<const char*, const Tile*>{"data0", &data0},
                                {"data1", &data1}}) {
    if (t->partitions() != dst.partitions() || t->free_size() != dst.free_size()) {
      Illegal(kInst, name, *t,
              StrCat("must have dst's ", dst.partitions(), " partitions and ", dst.free_size(),
                     " elements per partition"));
    }
  }
  if (data0.memory() == MemorySpace::kPsum && data1.memory() == MemorySpace::kPsum) {
    Illegal(kInst, "data1", data1, "data0 and data1 cannot both be in PSUM");
  }
  if (initial.is_column() &&
      (initial.column().partitions() != dst.partitions() || initial.column().free_size() != 1)) {
    Illegal(kInst, "initial", initial.column(),
            StrCat("a tile initial must be [", dst.partitions(), ", 1]"));
  }
  for (AluOp op : {op0, op1}) {
    if (IsBitwise(op)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kInst, ": op ", AluOpName(op), " is bitwise; the scan takes arithmetic ops"));
    }
  }
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  float* y = ScratchRow(1, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data0.ReadRow(p, x);
    data1.ReadRow(p, y);
    float state = initial.value();
    if (initial.is_column()) initial.column().ReadRow(p, &state);
    for (int64_t i = 0; i < n; ++i) {
      const float a = reverse0 ? ApplyAlu(op0, state, x[i]) : ApplyAlu(op0, x[i], state);
      state = reverse1 ? ApplyAlu(op1, y[i], a) : ApplyAlu(op1, a, y[i]);
      x[i] = state;
    }
    dst.WriteRow(p, x);
  }
  const bool narrow = SizeOf(dst.dtype()) <= 2 && SizeOf(data0.dtype()) <= 2 &&
                      SizeOf(data1.dtype()) <= 2;
  const int64_t bytes = (dst.numel() * SizeOf(dst.dtype())) + data0.numel() * SizeOf(data0.dtype()) +
                        data1.numel() * SizeOf(data1.dtype());
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, narrow), bytes, 2 * dst.numel());
}

}  // namespace nkisim::nisa
