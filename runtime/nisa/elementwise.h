// Element-wise instructions of the Vector, Scalar (ACT) and GpSimd engines. Every operand is a
// tile view with the destination's shape (use Tile::broadcast for a size-1 free dim) and the same
// partition count; values are computed in fp32 and rounded into dst's dtype. Cost: each
// instruction's row of the ISA cost table over dst's free size on the chosen engine
// (runtime/engine_costs.h, docs/engine-costs.md).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/nisa/activation_functions.h"
#include "runtime/nisa/alu.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::nisa {

// An immediate, or a per-partition column: a [P, 1] tile broadcast along the free dims.
class Scalar {
 public:
  Scalar(float value) : value_(value) {}  // NOLINT: implicit on purpose, like the ISA's operands
  Scalar(const Tile& column) : column_(column) {}  // NOLINT
  bool is_column() const { return column_.valid(); }
  const Tile& column() const { return column_; }
  float value() const { return value_; }

 private:
  float value_ = 0.0f;
  Tile column_;
};

// dst = a <op> b.
void tensor_tensor(const Tile& dst, const Tile& a, const Tile& b, AluOp op,
                   Engine engine = Engine::kVector);

// dst = (data <op0> operand0) <op1> operand1; reverse swaps an op's two sides. op1 = kBypass
// leaves the second stage out.
struct TensorScalarOps {
  AluOp op0 = AluOp::kBypass;
  Scalar operand0 = 0.0f;
  bool reverse0 = false;
  AluOp op1 = AluOp::kBypass;
  Scalar operand1 = 0.0f;
  bool reverse1 = false;
};
void tensor_scalar(const Tile& dst, const Tile& data, const TensorScalarOps& ops,
                   Engine engine = Engine::kVector);

// dst = (data0 <op0> scalar) <op1> data1.
void scalar_tensor_tensor(const Tile& dst, const Tile& data0, AluOp op0, const Scalar& scalar,
                          AluOp op1, const Tile& data1, Engine engine = Engine::kVector);

// Scalar engine: dst = fn(data * scale + bias); with reduce_op set (add, max, ...) also
// reduce_res[P, 1] = reduction of each dst row along the free axis.
// Rules: a column scale must be fp32; bias is a [P, 1] column of fp32, fp16 or bf16.
struct ActivationOptions {
  Scalar scale = 1.0f;
  Tile bias;
  AluOp reduce_op = AluOp::kBypass;
  Tile reduce_res;
};
void activation(const Tile& dst, ActFn fn, const Tile& data, const ActivationOptions& options = {});

// dst = src (with dtype conversion); PSUM -> SBUF eviction is a tensor_copy.
void tensor_copy(const Tile& dst, const Tile& src, Engine engine = Engine::kVector);

// dst = 1 / data on the Vector engine.
void reciprocal(const Tile& dst, const Tile& data);

// dst = predicate != 0 ? on_true : on_false.
void select(const Tile& dst, const Tile& predicate, const Tile& on_true, const Tile& on_false,
            Engine engine = Engine::kVector);

// dst = value.
void memset(const Tile& dst, float value, Engine engine = Engine::kVector);

// GpSimd: dst[p, i0, i1, ...] = base + channel_multiplier * p + sum_d pattern[d].first * i_d,
// where pattern[d] = {step, count} and the counts equal dst's free shape.
void iota(const Tile& dst, int64_t base, int64_t channel_multiplier,
          const std::vector<std::pair<int64_t, int64_t>>& pattern);

}  // namespace nkisim::nisa
