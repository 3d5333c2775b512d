#include "kernels/output_projection/epilogue.h"

#include "runtime/nisa/nisa.h"

namespace nkisim::kernels::oproj {

using nisa::AluOp;

StaticScales LoadStaticScales(NeuronCore& core, const TensorView& input_scale,
                              const TensorView& weight_scale) {
  const int64_t p = input_scale.dim(0);
  Tile in = core.AllocateSbuf("oproj_input_scale", {p, 1}, DType::kFloat32);
  Tile w = core.AllocateSbuf("oproj_weight_scale", {p, 1}, DType::kFloat32);
  nisa::dma_copy(in, input_scale);
  nisa::dma_copy(w, weight_scale);
  StaticScales s{core.AllocateSbuf("oproj_inverse_input_scale", {p, 1}, DType::kFloat32),
                 core.AllocateSbuf("oproj_dequant_scale", {p, 1}, DType::kFloat32)};
  nisa::reciprocal(s.inverse_input, in);
  nisa::tensor_tensor(s.dequant, w, in, AluOp::kMultiply);
  return s;
}

Tile Quantize(const Tile& x, const Tile& inverse_input, DType dtype) {
  Tile q = x.core()->AllocateSbuf("oproj_quantized_attention", x.shape(), dtype);
  nisa::tensor_scalar(
      q, x, {.op0 = AluOp::kMultiply, .operand0 = inverse_input.slice(0, 0, x.partitions())},
      Engine::kGpSimd);
  return q;
}

EvictionTerms Epilogue::Cut(int64_t partitions, const Range& columns) const {
  auto row = [&](const PiecedTile& t) {
    return t.valid() ? t.Slice(columns).slice(0, 0, partitions) : Tile();
  };
  return {scale_column.valid() ? scale_column.slice(0, 0, partitions) : Tile(), row(scale_row),
          Tile(), row(bias_row)};
}

void Evict(const Tile& dst, const Tile& psum, const EvictionTerms& e, Engine engine) {
  if (e.scale_row.valid()) {
    EvictionTerms rest = e;
    rest.scale_row = Tile();
    const bool more =
        rest.scale_column.valid() || rest.bias_column.valid() || rest.bias_row.valid();
    // Keep the scaled product in fp32 when a bias follows, so the output is rounded once.
    Tile scaled =
        more ? dst.core()->AllocateSbuf("oproj_scaled", dst.shape(), DType::kFloat32) : dst;
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

}  // namespace nkisim::kernels::oproj
