#include "runtime/nisa/reduce.h"

#include <algorithm>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

int64_t TileBytes(const Tile& t) { return t.numel() * static_cast<int64_t>(SizeOf(t.dtype())); }

void CommitVector(Issue& issue, const Tile& dst, const Tile& data, const CostRow& row) {
  const bool narrow = SizeOf(dst.dtype()) <= 2 && SizeOf(data.dtype()) <= 2;
  issue.CommitRow(row, data.free_size(), narrow, TileBytes(dst) + TileBytes(data), 0);
}

// ISA l.1605-1607: N/2 when input and output are bf16 and the op is add or max; N otherwise.
const CostRow& ReduceRow(const Tile& dst, const Tile& data, AluOp op) {
  const bool fast = dst.dtype() == DType::kBFloat16 && data.dtype() == DType::kBFloat16 &&
                    (op == AluOp::kAdd || op == AluOp::kMax);
  return fast ? cost_rows::kReduceFast : cost_rows::kReduce;
}

}  // namespace

void tensor_reduce(const Tile& dst, AluOp op, const Tile& data, const std::vector<int>& axes,
                   const ReduceOptions& options, Engine engine) {
  constexpr const char* kInst = "tensor_reduce";
  if (engine != Engine::kVector && engine != Engine::kGpSimd) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": engine ", EngineName(engine), " cannot reduce; use Vector or GpSimd"));
  }
  Issue issue(kInst, engine);
  issue.Reads("data", data).Writes("dst", dst);
  if (!IsReduction(op)) {
    Illegal(kInst, "data", data, StrCat("op ", AluOpName(op), " is not a reduction"));
  }
  if (options.mean && op != AluOp::kAdd) {
    Illegal(kInst, "data", data, StrCat("the mean option needs op add, not ", AluOpName(op)));
  }
  const int free_rank = static_cast<int>(data.free_shape().size());
  std::vector<bool> reduced(free_rank, false);
  for (int axis : axes) {
    if (axis == 0) {
      Illegal(kInst, "data", data,
              "axis 0 is the partition dim, which cannot be reduced; reduce free axes (>= 1) only, "
              "or transpose first");
    }
    if (axis < 0 || axis > free_rank) {
      Illegal(kInst, "data", data, StrCat("axis ", axis, " outside the free dims [1, ", free_rank, "]"));
    }
    reduced[axis - 1] = true;
  }
  if (axes.empty()) Illegal(kInst, "data", data, "needs at least one axis to reduce");
  // Output slot of each free element: the row-major index over the kept dims.
  Shape slot_strides(free_rank, 0);
  int64_t kept = 1, count = 1;
  for (int d = free_rank - 1; d >= 0; --d) {
    if (reduced[d]) {
      count *= data.free_shape()[d];
    } else {
      slot_strides[d] = kept;
      kept *= data.free_shape()[d];
    }
  }
  if (dst.partitions() != data.partitions() || dst.free_size() != kept) {
    Illegal(kInst, "dst", dst, StrCat("must have ", data.partitions(), " partitions and ", kept,
                                      " elements per partition (the kept free dims)"));
  }
  const int64_t n = data.free_size();
  float* x = ScratchRow(0, n);
  float* out = ScratchRow(1, kept);
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    std::fill(out, out + kept, ReductionIdentity(op));
    int64_t i = 0;
    ForEachStridedOffset(data.free_shape(), slot_strides, 0,
                         [&](int64_t slot) { out[slot] = ApplyAlu(op, out[slot], x[i++]); });
    for (int64_t j = 0; j < kept; ++j) {
      if (options.mean) out[j] /= static_cast<float>(count);
      if (options.negate) out[j] = -out[j];
    }
    dst.WriteRow(p, out);
  }
  CommitVector(issue, dst, data, ReduceRow(dst, data, op));
}

void bn_stats(const Tile& dst, const Tile& data) {
  constexpr const char* kInst = "bn_stats";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Writes("dst", dst);
  const int64_t f = data.free_size();
  if (f > issue.profile().pe_max_moving_free() || f < 2) {
    Illegal(kInst, "data", data, StrCat("free size ", f, " must be in [2, ",
                                        issue.profile().pe_max_moving_free(), "]"));
  }
  if (dst.partitions() != data.partitions() || dst.free_size() != 6) {
    Illegal(kInst, "dst", dst, StrCat("must be [", data.partitions(), ", 6]"));
  }
  float* x = ScratchRow(0, f);
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    float stats[6];
    for (int parity = 0; parity < 2; ++parity) {
      double sum = 0, sq = 0;
      int64_t c = 0;
      for (int64_t i = parity; i < f; i += 2, ++c) sum += x[i];
      const double mean = sum / c;
      for (int64_t i = parity; i < f; i += 2) sq += (x[i] - mean) * (x[i] - mean);
      stats[3 * parity] = static_cast<float>(c);
      stats[3 * parity + 1] = static_cast<float>(mean);
      stats[3 * parity + 2] = static_cast<float>(sq / c);
    }
    dst.WriteRow(p, stats);
  }
  CommitVector(issue, dst, data, cost_rows::kBnStats);
}

void bn_aggr(const Tile& dst, const Tile& data) {
  constexpr const char* kInst = "bn_aggr";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Writes("dst", dst);
  const int64_t f = data.free_size();
  if (f % 3 != 0 || f == 0) {
    Illegal(kInst, "data", data, "free size must be a multiple of 3 (bn_stats groups)");
  }
  if (dst.partitions() != data.partitions() || dst.free_size() != 2) {
    Illegal(kInst, "dst", dst, StrCat("must be [", data.partitions(), ", 2]"));
  }
  float* x = ScratchRow(0, f);
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    double n = 0, weighted_mean = 0;
    for (int64_t g = 0; g < f; g += 3) {
      n += x[g];
      weighted_mean += x[g] * static_cast<double>(x[g + 1]);
    }
    const double mean = weighted_mean / n;
    double var = 0;
    for (int64_t g = 0; g < f; g += 3) {
      const double d = x[g + 1] - mean;
      var += x[g] * (x[g + 2] + d * d);
    }
    const float out[2] = {static_cast<float>(mean), static_cast<float>(var / n)};
    dst.WriteRow(p, out);
  }
  CommitVector(issue, dst, data, cost_rows::kBnAggr);
}

}  // namespace nkisim::nisa
