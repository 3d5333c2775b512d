#include "kernels/common/psum_eviction.h"

#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

using nisa::AluOp;

void Evict(const Tile& dst, const Tile& psum, const EvictionTerms& e, Engine engine) {
  if (e.scale_row.valid()) {
    EvictionTerms rest = e;
    rest.scale_row = Tile();
    const bool more =
        rest.scale_column.valid() || rest.bias_column.valid() || rest.bias_row.valid();
    // Keep the scaled product in fp32 when a bias follows, so the output is rounded once.
    Tile scaled =
        more ? dst.core()->AllocateSbuf("evict_scaled", dst.shape(), DType::kFloat32) : dst;
    nisa::tensor_tensor(scaled, psum, e.scale_row, AluOp::kMultiply, engine);
    if (more) Evict(dst, scaled, rest, engine);
    return;
  }
  if (e.bias_row.valid()) {
    if (e.scale_column.valid()) {
      nisa::scalar_tensor_tensor(dst, psum, AluOp::kMultiply, e.scale_column, AluOp::kAdd,
                                 e.bias_row, engine);
    } else {
      nisa::tensor_tensor(dst, psum, e.bias_row, AluOp::kAdd, engine);
    }
    return;
  }
  nisa::TensorScalarOps ops;
  if (e.scale_column.valid()) {
    ops.op0 = AluOp::kMultiply;
    ops.operand0 = e.scale_column;
    if (e.bias_column.valid()) {
      ops.op1 = AluOp::kAdd;
      ops.operand1 = e.bias_column;
    }
  } else if (e.bias_column.valid()) {
    ops.op0 = AluOp::kAdd;
    ops.operand0 = e.bias_column;
  } else {
    nisa::tensor_copy(dst, psum, engine);
    return;
  }
  nisa::tensor_scalar(dst, psum, ops, engine);
}

}  // namespace nkisim::kernels
