#include "kernels/mlp/mlp_case.h"

#include <cmath>
#include <string>

#include "kernels/common/case_tensors.h"

namespace nkisim::kernels {
namespace {

constexpr DType kFp8 = DType::kFp8E4M3;

// One weight [rows, cols] of fan-in `rows` in the case's mode; sets *scale for STATIC / ROW.
// scale_cols: ROW's scale columns (cols).
TensorView Weight(const MlpCaseOptions& o, const std::string& name, int64_t rows, int64_t cols,
                  TensorView* scale) {
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(rows));
  const std::string scale_name = name + "_scale";
  if (o.quant == QuantizationType::kStatic) {
    *scale = RepeatedRows(scale_name, {std_dev}, 128);
    return GaussianTensor(o.seed, name, {rows, cols}, kFp8, 4.0f);
  }
  if (o.quant == QuantizationType::kRow) {
    const std::vector<float> w =
        GaussianTensor(o.seed, name, {rows, cols}, DType::kFloat32, 0.0f, std_dev).ToFloats();
    const RowQuantized q = RowQuantize(w, rows, cols, kFp8, name, scale_name, 128);
    *scale = q.scale;
    return q.weights;
  }
  return GaussianTensor(o.seed, name, {rows, cols}, o.dtype, 0.0f, std_dev);
}

TensorView Gamma(const MlpCaseOptions& o, int64_t h) {
  TensorView g = GaussianTensor(o.seed, "gamma", {1, h}, DType::kFloat32, 0.0f, 0.1f);
  std::vector<float> v = g.ToFloats();
  for (float& x : v) x += 1.0f;
  TensorView t = TensorView::Create({1, h}, o.dtype, "gamma");
  t.FromFloats(v);
  return t;
}

}  // namespace

MlpParams MakeMlpCase(const MlpCaseOptions& o) {
  const Shape hidden{o.b, o.s, o.h};
  MlpParams p;
  p.hidden = GaussianTensor(o.seed, "hidden", hidden, o.dtype);
  if (o.residual) p.residual = GaussianTensor(o.seed, "residual", hidden, o.dtype);
  p.store_fused_hidden = o.store_fused_hidden;
  p.norm_type = o.norm;
  if (o.norm != NormType::kNoNorm) p.gamma = Gamma(o, o.h);
  if (o.norm_bias) p.beta = GaussianTensor(o.seed, "beta", {1, o.h}, o.dtype);
  p.eps = o.eps;
  p.gate_w = Weight(o, "gate_w", o.h, o.i, &p.gate_w_scale);
  p.up_w = Weight(o, "up_w", o.h, o.i, &p.up_w_scale);
  p.down_w = Weight(o, "down_w", o.i, o.h, &p.down_w_scale);
  if (o.bias) {
    p.gate_bias = GaussianTensor(o.seed, "gate_bias", {1, o.i}, o.dtype);
    p.up_bias = GaussianTensor(o.seed, "up_bias", {1, o.i}, o.dtype);
    p.down_bias = GaussianTensor(o.seed, "down_bias", {1, o.h}, o.dtype);
  }
  p.activation = o.act;
  p.quantization = o.quant;
  if (o.quant == QuantizationType::kStatic) {
    p.gate_up_in_scale = RepeatedRows("gate_up_in_scale", {1.0f / 32}, 128);
    p.down_in_scale = RepeatedRows("down_in_scale", {1.0f / 32}, 128);
  }
  p.variant = o.variant;
  return p;
}

}  // namespace nkisim::kernels
