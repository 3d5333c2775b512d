// The transformer MLP block on one logical core, after the public NKI library's `mlp` kernel:
//   x      = hidden [+ residual]                       (fused residual add; optionally stored)
//   x_hat  = norm(x)                                   (RMSNorm or LayerNorm over H, or none)
//   out    = (act(x_hat Wg + bg) * (x_hat Wu + bu)) Wd + bd
// Two variants, as the library dispatches them: TKG (decode) for B * S <= 96 and CTE (prefill)
// above (kMlpTkgMaxTokens).
//
// Contract (all sizes in elements; I is this rank's intermediate columns):
//   hidden [B, S, H] bf16 or fp32 (fp16 too), H % 128 == 0. residual [B, S, H] in hidden's dtype.
//   gamma / beta [1, H] (beta: LayerNorm only). gate_w, up_w [H, I]; down_w [I, H]: the compute
//   dtype's float (bf16 / fp16 / fp32) for NONE, an fp8 type for STATIC and ROW. gate_bias,
//   up_bias [1, I]; down_bias [1, H] (any float dtype; added in fp32).
//   Scales (TKG only; rows identical, read from row 0, as the QKV kernels take theirs):
//     STATIC: gate_w_scale, up_w_scale, down_w_scale [1 | 128, 1] (per tensor); gate_up_in_scale
//             [1 | 128, 1] quantizes x_hat to the weights' fp8 (x / s, clamped to its range) and
//             down_in_scale [1 | 128, 1] the activation product the same way; each product is
//             dequantized by s_w * s_in.
//     ROW:    gate_w_scale, up_w_scale [1 | 128, I]; down_w_scale [1 | 128, H] (one per output
//             column); the inputs stay in the compute dtype; no input scales.
//   Output [B, S, H] in hidden's dtype; fused_hidden [B, S, H] (x) with store_fused_hidden.
//   fp32 I/O computes in bf16 (the matmul operands), as the QKV kernels do; PSUM is fp32.
//
// LNC 2 sharding:
//   TKG shards the contraction H of gate / up (each core streams its half of the rows of Wg and
//   Wu, as QKV TKG) and the output columns H of down (each core streams its half of Wd's columns
//   and stores them: disjoint writes). Between the two, each core sends its fp32 partial gate and
//   up products [I, B*S] to the other with sendrecv and adds the peer's (2 * I * B*S * 4 bytes per
//   core); both then hold the full intermediate. Why: decode is HBM-bound, so each core must read
//   half of every weight; of the two ways to halve them (this one, or sharding I and summing
//   [B*S, H] partial outputs) this moves 2 I instead of H values per token, less for every
//   per-rank I below H / 2, and the exchange hides under the down weights' stream.
//   CTE shards the tokens (each core runs its 128-row tiles against all the weights): prefill is
//   PE-bound, so halving the PE work matters and no core-to-core traffic is needed.
// Errors: a rejected request throws Error(kInvalidArgument) worded "mlp: <operand> = <value>:
//   <rule>"; a tile that does not fit throws Error(kOutOfResources). Nothing runs when validation
//   fails.
// Timing-only mode (runtime/sim_mode.h): runs the same instructions with the same simulated time.
// Threads: Mlp() runs the SPMD program on the LogicalCore's threads and returns when every
//   physical core is done; call it from one host thread at a time per LogicalCore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/common_types.h"  // NormType, QuantizationType (QKV's and o_proj's)
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

enum class MlpActivation { kSilu, kGelu, kRelu };
// kAuto: TKG when B * S <= kMlpTkgMaxTokens, else CTE (as the library dispatches).
enum class MlpVariant { kAuto, kTkg, kCte };

inline constexpr int64_t kMlpTkgMaxTokens = 96;

const char* MlpActivationName(MlpActivation act);  // "silu", "gelu", "relu"
const char* MlpVariantName(MlpVariant variant);    // "auto", "tkg", "cte"

// An invalid TensorView means "not given".
struct MlpParams {
  TensorView hidden;                // [B, S, H] in HBM, the I/O dtype (bf16 or fp32)
  TensorView residual;              // optional [B, S, H]: fused residual add, x = hidden + residual
  bool store_fused_hidden = false;  // also return x (the sum) in MlpResult::fused_hidden
  NormType norm_type = NormType::kRmsNorm;  // kNoNorm / kRmsNorm / kLayerNorm
  TensorView gamma;                         // [1, H] norm weight (required by RMS and LayerNorm)
  TensorView beta;                          // [1, H] optional, LayerNorm only
  double eps = 1e-6;
  TensorView gate_w, up_w;        // [H, I]
  TensorView down_w;              // [I, H]
  TensorView gate_bias, up_bias;  // optional [1, I]
  TensorView down_bias;           // optional [1, H]
  MlpActivation activation = MlpActivation::kSilu;
  QuantizationType quantization = QuantizationType::kNone;  // STATIC / ROW: TKG only
  TensorView gate_w_scale, up_w_scale, down_w_scale;        // STATIC [1|128, 1]; ROW [1|128, I|I|H]
  TensorView gate_up_in_scale, down_in_scale;               // STATIC only: [1|128, 1]
  MlpVariant variant = MlpVariant::kAuto;
};

struct MlpResult {
  TensorView output;        // [B, S, H]: act(x_hat Wg + bg) * (x_hat Wu + bu) @ Wd + bd
  TensorView fused_hidden;  // [B, S, H] x = hidden + residual with store_fused_hidden, else invalid
  MlpVariant variant = MlpVariant::kTkg;  // the variant that ran (kTkg or kCte)
};

struct MlpDispatch {
  MlpVariant variant;  // kTkg or kCte
  std::string reason;  // e.g. "B * S = 2048 > 96"
};
// The dispatcher's rule for p.variant (kAuto: by B * S). REQUIRES: p.hidden is [B, S, H].
MlpDispatch DispatchMlp(const MlpParams& p);

// Throws (see above) unless the variant p.variant selects accepts p on `lnc` physical cores of
// `profile`. Checks hidden's rank before anything else.
void ValidateMlp(const MlpParams& p, int lnc, const HardwareProfile& profile = Trn2Profile());

// Validates, allocates the outputs and runs the chosen variant on every core of `lnc`.
MlpResult Mlp(LogicalCore& lnc, const MlpParams& p);

// The variants, for listings (`nkisim kernel mlp --list-variants`).
struct MlpVariantInfo {
  MlpVariant variant;
  const char* name;
  const char* description;
};
const std::vector<MlpVariantInfo>& MlpVariants();

}  // namespace nkisim::kernels
