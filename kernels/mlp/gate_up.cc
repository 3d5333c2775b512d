#include "kernels/mlp/gate_up.h"

#include "kernels/common/tiling.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

using nisa::AluOp;

namespace {

nisa::ActFn ActivationFunction(MlpActivation act) {
  switch (act) {
    case MlpActivation::kSilu:
      return nisa::ActFn::kSilu;
    case MlpActivation::kGelu:
      return nisa::ActFn::kGelu;
    case MlpActivation::kRelu:
      return nisa::ActFn::kRelu;
  }
  return nisa::ActFn::kSilu;
}

}  // namespace

Tile LoadColumns(NeuronCore& core, const char* name, const TensorView& rows, int64_t np) {
  const int64_t n = rows.dim(1), full = n / np, rem = n % np;
  const TensorView row = rows.select(0, 0);
  Tile t = core.AllocateSbuf(name, {np, full + (rem > 0 ? 1 : 0)}, DType::kFloat32);
  if (full > 0) {
    nisa::dma_copy(t.slice(1, 0, full),
                   row.slice(0, 0, full * np).reshape({full, np}).permute({1, 0}));
  }
  if (rem > 0) {
    nisa::dma_copy(t.slice(0, 0, rem).slice(1, full, full + 1),
                   row.slice(0, full * np, n).reshape({rem, 1}));
  }
  return t;
}

Tile StaticDequant(NeuronCore& core, const TensorView& w_scale, const TensorView& in_scale,
                   int64_t np) {
  Tile s = LoadRowBroadcast(core, "w_scale", w_scale, np, DType::kFloat32);
  if (!in_scale.valid()) return s;
  const Tile in = LoadRowBroadcast(core, "in_scale", in_scale, np, DType::kFloat32);
  nisa::tensor_tensor(s, s, in, AluOp::kMultiply);
  return s;
}

Tile QuantizeInputSubtiles(NeuronCore& core, const Tile& x, const TensorView& in_scale,
                           DType dtype) {
  const int64_t np = x.partitions(), t = x.free_shape()[0], subtiles = x.free_shape()[1];
  Tile inv = LoadRowBroadcast(core, "inverse_in_scale", in_scale, np, DType::kFloat32);
  nisa::reciprocal(inv, inv);
  Tile q = core.AllocateSbuf("x_fp8", {np, subtiles, t}, dtype);
  constexpr Engine kEngines[] = {Engine::kGpSimd, Engine::kVector, Engine::kScalar};
  for (int64_t j = 0; j < subtiles; ++j) {
    nisa::tensor_scalar(q.select(1, j), x.select(2, j), {.op0 = AluOp::kMultiply, .operand0 = inv},
                        kEngines[j % 3]);
  }
  return q;
}

GateUp::GateUp(NeuronCore& core, const MlpConfig& cfg, const MlpParams& p, int64_t free)
    : cfg_(cfg), fn_(ActivationFunction(cfg.act)) {
  const int64_t np = cfg.partitions;
  if (p.gate_bias.valid()) gate_bias_ = LoadColumns(core, "gate_bias", p.gate_bias, np);
  if (p.up_bias.valid()) up_bias_ = LoadColumns(core, "up_bias", p.up_bias, np);
  if (cfg.is_row()) {
    gate_scale_ = LoadColumns(core, "gate_w_scale", p.gate_w_scale, np);
    up_scale_ = LoadColumns(core, "up_w_scale", p.up_w_scale, np);
  }
  if (cfg.is_static()) {
    gate_scale_ = StaticDequant(core, p.gate_w_scale, p.gate_up_in_scale, np);
    up_scale_ = StaticDequant(core, p.up_w_scale, p.gate_up_in_scale, np);
    inverse_down_in_ =
        LoadRowBroadcast(core, "down_in_scale", p.down_in_scale, np, DType::kFloat32);
    nisa::reciprocal(inverse_down_in_, inverse_down_in_);
    up_scale_quant_ = core.AllocateSbuf("up_scale_quant", {np, 1}, DType::kFloat32);
    nisa::tensor_tensor(up_scale_quant_, up_scale_, inverse_down_in_, AluOp::kMultiply);
  }
  for (int k = 0; k < 2; ++k) {
    act_[k] = core.AllocateSbuf("act", {np, free}, DType::kFloat32);
    if (up_bias_.valid()) up_[k] = core.AllocateSbuf("up_biased", {np, free}, DType::kFloat32);
  }
}

nisa::Scalar GateUp::Column(const Tile& cols, int64_t c, int64_t rows) const {
  if (!cols.valid()) return 1.0f;
  const int64_t k = cols.free_size() == 1 ? 0 : c;  // STATIC: one column for every chunk
  return cols.slice(0, 0, rows).slice(1, k, k + 1);
}

void GateUp::Apply(const Tile& dst, const Tile& gate, const Tile& up, int64_t c) {
  const Tile act = act_[turn_++ % 2].slice(0, 0, dst.partitions()).slice(1, 0, dst.free_size());
  Activate(act, gate, c);
  Combine(dst, up, act, c);
}

void GateUp::Activate(const Tile& act, const Tile& gate, int64_t c) {
  const int64_t rows = act.partitions();
  nisa::ActivationOptions options;
  options.scale = Column(gate_scale_, c, rows);
  if (gate_bias_.valid()) options.bias = gate_bias_.slice(0, 0, rows).slice(1, c, c + 1);
  nisa::activation(act, fn_, gate, options);
}

void GateUp::Combine(const Tile& dst, const Tile& up, const Tile& act, int64_t c) {
  const int64_t rows = dst.partitions(), f = dst.free_size();
  const int k = combine_turn_++ % 2;
  if (!up_bias_.valid()) {
    const Tile& s = cfg_.is_static() ? up_scale_quant_ : up_scale_;
    nisa::scalar_tensor_tensor(dst, up, AluOp::kMultiply, Column(s, c, rows), AluOp::kMultiply,
                               act);
    return;
  }
  const Tile u = up_[k].slice(0, 0, rows).slice(1, 0, f);
  nisa::tensor_scalar(u, up,
                      {.op0 = AluOp::kMultiply,
                       .operand0 = Column(up_scale_, c, rows),
                       .op1 = AluOp::kAdd,
                       .operand1 = up_bias_.slice(0, 0, rows).slice(1, c, c + 1)});
  nisa::scalar_tensor_tensor(dst, u, AluOp::kMultiply, Column(inverse_down_in_, c, rows),
                             AluOp::kMultiply, act);
}

DownTerms::DownTerms(NeuronCore& core, const MlpConfig& cfg, const MlpParams& p, int64_t rows,
                     int64_t h0, int64_t h1)
    : h0_(h0) {
  if (h1 < 0) h1 = cfg.h;
  if (p.down_bias.valid()) {
    bias_ = LoadRowBroadcast(core, "down_bias", p.down_bias.slice(1, h0, h1), rows,
                             DType::kFloat32);
  }
  if (cfg.is_row()) {
    scale_row_ = LoadRowBroadcast(core, "down_w_scale", p.down_w_scale.slice(1, h0, h1), rows,
                                  DType::kFloat32);
  }
  if (cfg.is_static()) scale_column_ = StaticDequant(core, p.down_w_scale, p.down_in_scale, rows);
}

EvictionTerms DownTerms::Cut(int64_t rows, int64_t c0, int64_t width) const {
  auto cols = [&](const Tile& t) {
    return t.valid() ? t.slice(0, 0, rows).slice(1, c0 - h0_, c0 - h0_ + width) : Tile();
  };
  EvictionTerms e;
  e.scale_row = cols(scale_row_);
  e.bias_row = cols(bias_);
  if (scale_column_.valid()) e.scale_column = scale_column_.slice(0, 0, rows);
  return e;
}

}  // namespace nkisim::kernels
