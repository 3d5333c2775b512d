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

}  // namespace nkisim::kernels::oproj
