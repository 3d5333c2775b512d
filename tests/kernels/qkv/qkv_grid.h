// Shorthands for the qkv grid tables: the reference grids list each case as
// (B, S, H, n_q, n_kv, d, norm, quant, layout, fused add, bias, LayerNorm bias, eps, H_actual).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "kernels/qkv/qkv_case.h"
#include "tests/kernels/qkv/qkv_test_util.h"

namespace nkisim::kernels::testing {

inline constexpr NormType kNo = NormType::kNoNorm, kRms = NormType::kRmsNorm,
                          kLn = NormType::kLayerNorm, kSkip = NormType::kRmsNormSkipGamma;
inline constexpr QuantizationType kNone = QuantizationType::kNone,
                                  kStatic = QuantizationType::kStatic,
                                  kRow = QuantizationType::kRow;
inline constexpr QkvOutputLayout kBsd = QkvOutputLayout::kBSD, kNbsd = QkvOutputLayout::kNBSd;

inline QkvCaseOptions Case(int64_t b, int64_t s, int64_t h, int64_t n_q, int64_t n_kv, int64_t d,
                           NormType norm, QuantizationType quant = kNone,
                           QkvOutputLayout layout = kBsd, bool add = false, bool bias = false,
                           bool beta = false, double eps = 1e-6,
                           std::optional<int64_t> hidden_actual = std::nullopt) {
  QkvCaseOptions o;
  o.b = b, o.s = s, o.h = h, o.n_q = n_q, o.n_kv = n_kv, o.d = d;
  o.norm = norm, o.quant = quant, o.layout = layout;
  o.fused_add = add, o.bias = bias, o.norm_bias = beta, o.eps = eps;
  o.hidden_actual = hidden_actual;
  return o;
}

// Grid rows whose dispatch must choose TKG or CTE.
inline QkvGridCase Tkg(std::string name, int lnc, const QkvCaseOptions& o) {
  return {std::move(name), lnc, o, QkvVariant::kTkg};
}
inline QkvGridCase Cte(std::string name, int lnc, const QkvCaseOptions& o) {
  return {std::move(name), lnc, o, QkvVariant::kCte};
}

// The same case with fused RoPE, or another input dtype.
inline QkvCaseOptions WithRope(QkvCaseOptions o) {
  o.rope = true;
  return o;
}
inline QkvCaseOptions WithDType(QkvCaseOptions o, DType dtype) {
  o.dtype = dtype;
  return o;
}

}  // namespace nkisim::kernels::testing
