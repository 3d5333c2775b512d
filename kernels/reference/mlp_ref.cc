#include "kernels/reference/mlp_ref.h"

#include <algorithm>
#include <cmath>

#include "kernels/reference/blas.h"

namespace nkisim::reference {
namespace {

using kernels::MlpActivation;
using kernels::MlpParams;
using kernels::NormType;
using kernels::QuantizationType;

std::vector<double> Doubles(const TensorView& t) {
  const std::vector<float> f = t.ToFloats();
  return {f.begin(), f.end()};
}

double Scale0(const TensorView& t) { return t.valid() ? t.ToFloats()[0] : 1.0; }

// out [t, n] = x [t, k] @ w [k, n], w converted to fp64 a column piece at a time.
std::vector<double> Product(const std::vector<double>& x, int64_t t, const TensorView& w) {
  const int64_t k = w.dim(0), n = w.dim(1);
  const int64_t piece = std::max<int64_t>(1, (int64_t{1} << 20) / k);
  std::vector<double> out(static_cast<size_t>(t * n));
  for (int64_t n0 = 0; n0 < n; n0 += piece) {
    const int64_t n1 = std::min(n, n0 + piece);
    const std::vector<double> wd = MatrixAsDoubles(w.slice(1, n0, n1));
    Dgemm(t, n1 - n0, k, 1.0, x.data(), k, wd.data(), n1 - n0, false, 0.0, out.data() + n0, n);
  }
  return out;
}

void Normalize(const MlpParams& p, int64_t t, int64_t h, std::vector<double>* x) {
  if (p.norm_type == NormType::kNoNorm) return;
  const std::vector<double> gamma = Doubles(p.gamma);
  const std::vector<double> beta = p.beta.valid() ? Doubles(p.beta) : std::vector<double>(h, 0.0);
  for (int64_t r = 0; r < t; ++r) {
    double* row = x->data() + r * h;
    double mean = 0;
    if (p.norm_type == NormType::kLayerNorm) {
      for (int64_t k = 0; k < h; ++k) mean += row[k];
      mean /= static_cast<double>(h);
    }
    double sq = 0;
    for (int64_t k = 0; k < h; ++k) sq += (row[k] - mean) * (row[k] - mean);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(h) + p.eps);
    for (int64_t k = 0; k < h; ++k) row[k] = (row[k] - mean) * rstd * gamma[k] + beta[k];
  }
}

// v = fp8(clip(stored(v) / s, +-max)), stored(v) = v rounded to `stored` first (kFloat32: not).
void QuantizeFp8(DType fp8, double s, DType stored, std::vector<double>* v) {
  const double max = MaxValue(fp8);
  for (double& e : *v) {
    const double held = stored == DType::kFloat32 ? e : RoundTo(stored, static_cast<float>(e));
    e = RoundTo(fp8, static_cast<float>(std::clamp(held / s, -max, max)));
  }
}

// y [t, n] = y * scale (STATIC: one value; ROW: per column) + bias.
void Dequantize(const MlpParams& p, const TensorView& w_scale, double in_scale,
                const TensorView& bias, int64_t t, int64_t n, std::vector<double>* y) {
  std::vector<double> col(static_cast<size_t>(n), 1.0), b(static_cast<size_t>(n), 0.0);
  if (p.quantization == QuantizationType::kStatic)
    std::fill(col.begin(), col.end(), Scale0(w_scale) * in_scale);
  if (p.quantization == QuantizationType::kRow) {
    const std::vector<float> s = w_scale.ToFloats();
    std::copy(s.begin(), s.begin() + n, col.begin());
  }
  if (bias.valid()) b = Doubles(bias);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t c = 0; c < n; ++c) (*y)[r * n + c] = (*y)[r * n + c] * col[c] + b[c];
  }
}

double Activation(MlpActivation act, double x) {
  switch (act) {
    case MlpActivation::kSilu:
      return x / (1.0 + std::exp(-x));
    case MlpActivation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case MlpActivation::kRelu:
      return x > 0 ? x : 0.0;
  }
  return x;
}

}  // namespace

MlpGolden MlpReference(const MlpParams& p) {
  const int64_t t = p.hidden.dim(0) * p.hidden.dim(1), h = p.hidden.dim(2), i = p.gate_w.dim(1);
  const bool is_static = p.quantization == QuantizationType::kStatic;
  MlpGolden golden;
  std::vector<double> x = Doubles(p.hidden);
  if (p.residual.valid()) {
    const std::vector<float> r = p.residual.ToFloats();
    for (size_t k = 0; k < x.size(); ++k) x[k] += r[k];
    golden.fused_hidden.assign(x.begin(), x.end());
  }
  Normalize(p, t, h, &x);
  const double s_in = is_static ? Scale0(p.gate_up_in_scale) : 1.0;
  // The kernel holds x_hat in its compute dtype (bf16 for fp32 I/O) before quantizing it: one
  // rounding more or less moves a value to the next fp8 code, so the golden rounds there too.
  const DType compute = p.hidden.dtype() == DType::kFloat32 ? DType::kBFloat16 : p.hidden.dtype();
  if (is_static) QuantizeFp8(p.gate_w.dtype(), s_in, compute, &x);
  std::vector<double> g = Product(x, t, p.gate_w);
  Dequantize(p, p.gate_w_scale, s_in, p.gate_bias, t, i, &g);
  std::vector<double> u = Product(x, t, p.up_w);
  Dequantize(p, p.up_w_scale, s_in, p.up_bias, t, i, &u);
  x = {};
  for (size_t k = 0; k < g.size(); ++k) g[k] = Activation(p.activation, g[k]) * u[k];
  u = {};
  const double s_down = is_static ? Scale0(p.down_in_scale) : 1.0;
  if (is_static) QuantizeFp8(p.down_w.dtype(), s_down, DType::kFloat32, &g);
  std::vector<double> out = Product(g, t, p.down_w);
  Dequantize(p, p.down_w_scale, s_down, p.down_bias, t, h, &out);
  golden.output.assign(out.begin(), out.end());
  return golden;
}

Tolerance MlpTolerance(QuantizationType quant) {
  return quant == QuantizationType::kNone ? kMlpTolerance : kMlpQuantTolerance;
}

}  // namespace nkisim::reference
