#include "runtime/nisa/partition_reduce.h"

#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {

void tensor_partition_reduce(const Tile& dst, AluOp op, const Tile& data) {
  constexpr const char* kInst = "tensor_partition_reduce";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Reads("data", data).Writes("dst", dst);
  if (op != AluOp::kAdd && op != AluOp::kMax && op != AluOp::kMin &&
      op != AluOp::kBitwiseOr && op != AluOp::kBitwiseAnd) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": op ", AluOpName(op),
                 " must be add, max, min, bitwise_or or bitwise_and"));
  }
  if (dst.partitions() != 1 || dst.free_size() != data.free_size()) {
    Illegal(kInst, "dst", dst, StrCat("must be 1 partition of data's ", data.free_size(),
                                      " elements"));
  }
  if (IsBitwise(op) && (!IsInteger(dst.dtype()) || !IsInteger(data.dtype()))) {
    Illegal(kInst, "data", data, StrCat(AluOpName(op), " needs integer dtypes on every operand"));
  }
  const int64_t n = data.free_size();
  float* acc = ScratchRow(0, n);
  float* x = ScratchRow(1, n);
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, p == 0 ? acc : x);
    if (p > 0) {
      for (int64_t i = 0; i < n; ++i) acc[i] = ApplyAlu(op, acc[i], x[i]);
    }
  }
  if (Functional()) dst.WriteRow(0, acc);
  const int64_t bytes = data.numel() * static_cast<int64_t>(SizeOf(data.dtype())) +
                        dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kGpSimd, data.partitions() * n,
                           SizeOf(data.dtype()) <= 2),
               bytes, data.numel());
}

}  // namespace nkisim::nisa
