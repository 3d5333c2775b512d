// Seeded random cases of the qkv kernel for the CLI, the tests and the benchmark, generated the
// way the reference tests generate theirs (test_qkv_common.py:146-358):
//   * every tensor Gaussian N(0, 1), in the input dtype;
//   * STATIC: input and weights clipped to [-1, 1], weights stored in fp8 (trn2 e4m3), scales
//     (1 / 240) * U(0.995, 1.005) as [128, 3] and [128, 1] with identical rows;
//   * ROW: s_w[i] = max_h |W[h, i]| / 240, weights stored as W / s_w in fp8, s_w as [128, I];
//   * RoPE caches: cos and sin of random angles, the first half duplicated into the second.
//   * MX: Gaussian fp32 weights packed by PackMxWeights (fp8_e4m3fn_x4, weight_layout) with their
//     E8M0 scales as qkv_w_scale; the H-axis tensors are random, so "given transposed" needs no
//     permutation (is_h_dim_4h_transposed only says which order they are in).
// A value depends only on (seed, tensor name, index) through CounterRng::Bits, so a case is the
// same in every process and on every run (up to the last bit of the C library's log, cos, sin).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/qkv/qkv.h"
#include "runtime/dtype.h"

namespace nkisim::kernels {

struct QkvCaseOptions {
  int64_t b = 1, s = 1, h = 128;
  int64_t n_q = 1, n_kv = 1, d = 128;  // I = (n_q + 2 n_kv) d
  DType dtype = DType::kBFloat16;
  NormType norm = NormType::kNoNorm;
  QuantizationType quant = QuantizationType::kNone;
  QkvOutputLayout layout = QkvOutputLayout::kBSD;
  bool fused_add = false;
  bool bias = false;       // qkv bias [1, I]
  bool norm_bias = false;  // LayerNorm beta [1, H]
  bool rope = false;
  double eps = 1e-6;
  std::optional<int64_t> hidden_actual = std::nullopt;
  QkvWeightLayout weight_layout = QkvWeightLayout::kMxContiguous;  // MX only
  bool h_transposed = false;                                        // is_h_dim_4h_transposed
  uint64_t seed = 0;
};

// Builds the parameters and fills their tensors. d_head, num_q_heads and num_kv_heads are set.
QkvParams MakeQkvCase(const QkvCaseOptions& options);

// Every tensor parameter by its reference name ("input", "fused_qkv_weights", "bias",
// "qkv_w_scale", "qkv_in_scale", "mlp_prev", "attention_prev", "gamma_norm_weights",
// "layer_norm_bias", "cos_cache", "sin_cache"), given or not.
std::vector<std::pair<const char*, TensorView*>> QkvTensors(QkvParams& params);

}  // namespace nkisim::kernels
