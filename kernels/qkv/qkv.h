// Fused QKV projection: out = norm(x [+ mlp_prev + attention_prev]) @ W_qkv [+ bias], one matmul
// over the fused output axis I = (n_q + 2 n_kv) d; Q, K and V are the column slices
// [0, q_dim), [q_dim, q_dim + kv_dim) and [q_dim + kv_dim, I). The prefill variant (CTE) can also
// rotate the Q and K heads (fused RoPE). The seed's kernel (shared/seeds/000, QKV half) with the
// public reference's parameters, rules and rejects; docs/qkv.md lists where they differ.
//
// Contract (all sizes in elements):
//   input [B, S, H] bf16, fp16 or fp32, H % 128 == 0. fused_qkv_weights [H, I]: a 16/32-bit float
//   for NONE, an fp8 type for STATIC and ROW. bias [1, I]. gamma / layer_norm_bias [1, H].
//   mlp_prev / attention_prev [B, S, H]. cos_cache / sin_cache [B, S, d]. STATIC: qkv_w_scale
//   [1 | 128, 3] (columns Q, K, V), qkv_in_scale [1 | 128, 1]. ROW: qkv_w_scale [1 | 128, I].
//   MX (NeuronCore-v4 profiles only): fused_qkv_weights [H / 4, I] fp8_e4m3fn_x4 or fp8_e5m2_x4
//   packed MX_CONTIGUOUS or MX_INTERLEAVED (weight_layout), qkv_w_scale its E8M0 block scales
//   [H / 32, I] uint8 (absent: the neutral 127); the input is quantized online per 32-value block
//   (nisa::quantize_mx) and both scales apply inside nisa::nc_matmul_mx. H % 512 == 0.
//   Output: BSD [B, S, I] or NBSd [I / d, B, S, d], in the input dtype, except CTE with STATIC,
//   which writes bf16. TKG with fused_residual_add also returns x + mlp_prev + attention_prev.
//   Dispatch (kAuto): CTE if fused_rope or S > 96 or B * S > 128 (the partitions), else TKG.
// Errors: every rejected request throws Error(kInvalidArgument) worded
//   "qkv: <parameter> = <value>: <rule>"; MX on a profile without the MX path, and STATIC_MX /
//   ROW_MX (o_proj modes), throw Error(kNotSupported) naming the profile or mode; a tile that
//   does not fit throws Error(kOutOfResources). Nothing is written when validation fails.
// Threads: Qkv() runs the SPMD program on the LogicalCore's threads and returns when both
//   physical cores are done; call it from one host thread at a time per LogicalCore.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/common_types.h"  // NormType, QuantizationType
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

enum class QkvOutputLayout { kBSD = 0, kNBSd = 1, kNBdS = 2 };
enum class QkvVariant { kAuto, kTkg, kCte };
// How fused_qkv_weights are stored (the reference's QKVWeightLayout): CONTIGUOUS [H, I] for the
// non-MX modes; the two x4 packings of kernels/common/mx_weights.h for MX.
enum class QkvWeightLayout { kContiguous = 0, kMxContiguous = 1, kMxInterleaved = 2 };

const char* QkvOutputLayoutName(QkvOutputLayout layout);   // "BSD", "NBSd", "NBdS"
const char* QkvVariantName(QkvVariant variant);            // "auto", "tkg", "cte"
const char* QkvWeightLayoutName(QkvWeightLayout layout);   // "CONTIGUOUS", "MX_CONTIGUOUS", ...

// The reference's parameters (qkv.py:44-95); an invalid TensorView means "not given".
struct QkvParams {
  TensorView input;
  TensorView fused_qkv_weights;
  QkvOutputLayout output_layout = QkvOutputLayout::kBSD;
  TensorView bias;
  QuantizationType quantization_type = QuantizationType::kNone;
  TensorView qkv_w_scale;
  TensorView qkv_in_scale;
  bool fused_residual_add = false;
  TensorView mlp_prev;
  TensorView attention_prev;
  NormType fused_norm_type = NormType::kNoNorm;
  TensorView gamma_norm_weights;
  TensorView layer_norm_bias;
  std::optional<double> norm_eps = 1e-6;
  std::optional<int64_t> hidden_actual;  // RMS divides the sum of squares by this, not by H
  bool fused_rope = false;
  TensorView cos_cache;
  TensorView sin_cache;
  std::optional<int64_t> d_head;
  std::optional<int64_t> num_q_heads;
  std::optional<int64_t> num_kv_heads;
  // MX: the input's H axis (and the residuals', gamma's and beta's) is already in the packed
  // weights' row order (the reference's is_h_dim_4h_transposed / is_input_swizzled), so each run of
  // 4 columns is one x4 element. Required by TKG MX; CTE MX takes either.
  bool is_h_dim_4h_transposed = false;
  QkvWeightLayout weight_layout = QkvWeightLayout::kContiguous;
};

// SEQLEN_THRESHOLD_FOR_QKV_CTE of the reference dispatcher.
inline constexpr int64_t kSeqlenThresholdForQkvCte = 96;

struct QkvDispatch {
  QkvVariant variant;  // kTkg or kCte
  std::string reason;  // e.g. "S = 2048 > 96"
};
// The dispatcher's rule. REQUIRES: params.input is [B, S, H].
QkvDispatch DispatchQkv(const QkvParams& params, const HardwareProfile& profile);

// Throws (see above) unless `variant` (kAuto: the dispatcher's choice) accepts params on `lnc`
// physical cores. Checks the input's rank before anything else.
void ValidateQkv(const QkvParams& params, int lnc, QkvVariant variant,
                 const HardwareProfile& profile);

struct QkvResult {
  QkvVariant variant;       // the variant that ran
  TensorView output;        // BSD [B, S, I] or NBSd [I / d, B, S, d]
  TensorView fused_hidden;  // [B, S, H] for TKG with fused_residual_add; invalid otherwise
};

// Validates, allocates the outputs and runs the chosen variant on every core of `lnc`.
// variant kAuto applies the dispatch rule; kTkg / kCte force one (still validated).
QkvResult Qkv(LogicalCore& lnc, const QkvParams& params, QkvVariant variant = QkvVariant::kAuto);

// The variants, for listings (`nkisim kernel qkv --list-variants`).
struct QkvVariantInfo {
  QkvVariant variant;
  const char* name;
  const char* description;
};
const std::vector<QkvVariantInfo>& QkvVariants();

}  // namespace nkisim::kernels
