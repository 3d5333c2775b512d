#include "kernels/qkv/epilogue.h"

#include <algorithm>

#include "kernels/common/tiling.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

using nisa::AluOp;

Epilogue::Epilogue(NeuronCore& core, const QkvConfig& cfg, const QkvParams& params,
                   int64_t partitions, DType bias_dtype, bool add_bias)
    : cfg_(cfg) {
  if (add_bias && params.bias.valid()) {
    bias_ = LoadRowBroadcast(core, "bias", params.bias, partitions, bias_dtype);
  }
  if (cfg.quant == QuantizationType::kRow) {
    col_scale_ = LoadRowBroadcast(core, "w_scale", params.qkv_w_scale, partitions, DType::kFloat32);
  }
  if (cfg.quant == QuantizationType::kStatic) {
    seg_scale_ = LoadRowBroadcast(core, "w_scale", params.qkv_w_scale, partitions, DType::kFloat32);
    Tile in = LoadRowBroadcast(core, "in_scale", params.qkv_in_scale, partitions, DType::kFloat32);
    nisa::tensor_scalar(seg_scale_, seg_scale_, {.op0 = AluOp::kMultiply, .operand0 = in});
  }
}

void Epilogue::Evict(const Tile& dst, const Tile& psum, int64_t col0, Engine engine) const {
  const int64_t n = psum.partitions(), width = psum.free_size(), col1 = col0 + width;
  const bool bias = bias_.valid();
  auto bias_cols = [&](int64_t a, int64_t b) { return bias_.slice(0, 0, n).slice(1, a, b); };
  if (cfg_.quant == QuantizationType::kStatic) {
    const int64_t bounds[4] = {0, cfg_.q_dim, cfg_.q_dim + cfg_.kv_dim, cfg_.i};
    for (int seg = 0; seg < 3; ++seg) {
      const int64_t a = std::max(bounds[seg], col0), b = std::min(bounds[seg + 1], col1);
      if (a >= b) continue;
      const Tile d = dst.slice(1, a - col0, b - col0), p = psum.slice(1, a - col0, b - col0);
      const Tile scale = seg_scale_.slice(0, 0, n).slice(1, seg, seg + 1);
      if (bias) {
        nisa::scalar_tensor_tensor(d, p, AluOp::kMultiply, scale, AluOp::kAdd, bias_cols(a, b),
                                   engine);
      } else {
        nisa::tensor_scalar(d, p, {.op0 = AluOp::kMultiply, .operand0 = scale}, engine);
      }
    }
    return;
  }
  if (cfg_.quant == QuantizationType::kRow) {
    nisa::tensor_tensor(psum, psum, col_scale_.slice(0, 0, n).slice(1, col0, col1),
                        AluOp::kMultiply, engine);
  }
  if (bias) {
    nisa::tensor_tensor(dst, psum, bias_cols(col0, col1), AluOp::kAdd, engine);
  } else {
    nisa::tensor_copy(dst, psum, engine);
  }
}

FusedOutput::FusedOutput(const TensorView& output, QkvOutputLayout layout, int64_t d)
    : layout_(layout), d_(d) {
  const Shape& s = output.shape();
  rows_ = layout == QkvOutputLayout::kNBSd ? output.reshape({s[0], s[1] * s[2], s[3]})
                                           : output.reshape({s[0] * s[1], s[2]});
}

void FusedOutput::Store(const Tile& tile, int64_t r0, int64_t c0, int64_t pieces) const {
  const int64_t n = tile.partitions(), w = tile.free_size();
  pieces = std::clamp<int64_t>(pieces, 1, n);
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t a = n * i / pieces, b = n * (i + 1) / pieces;
    const Tile part = tile.slice(0, a, b);
    if (layout_ != QkvOutputLayout::kNBSd) {
      nisa::dma_copy(rows_.slice(0, r0 + a, r0 + b).slice(1, c0, c0 + w), part);
      continue;
    }
    const TensorView heads =
        rows_.slice(0, c0 / d_, (c0 + w) / d_).slice(1, r0 + a, r0 + b).permute({1, 0, 2});
    nisa::dma_copy(heads, part.reshape({w / d_, d_}));
  }
}

}  // namespace nkisim::kernels
