// Internal to kernels/qkv: the sizes and dtypes one qkv call derives from its parameters, shared by
// validation, dispatch and the two variants. Callers outside kernels/qkv include qkv.h only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/qkv/qkv.h"
#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"

namespace nkisim::kernels {

struct QkvConfig {
  QkvVariant variant = QkvVariant::kTkg;
  int lnc = 1;
  int64_t b = 0, s = 0, h = 0, i = 0;
  int64_t tokens = 0;  // B * S, the rows of the fused [B * S, I] result
  // Head geometry; 0 when not given (CTE infers d = I / (n_q + 2 n_kv) from the head counts).
  int64_t d = 0, n_q = 0, n_kv = 0;
  int64_t q_dim = 0, kv_dim = 0;  // n_q * d and n_kv * d when all three are known
  NormType norm = NormType::kNoNorm;
  QuantizationType quant = QuantizationType::kNone;
  double eps = 0;
  double hidden_actual = 0;                // the RMS divisor: hidden_actual if given, else H
  DType io_dtype = DType::kBFloat16;       // input, fused_hidden
  DType compute_dtype = DType::kBFloat16;  // matmul operands: bf16 for fp32 input, else io_dtype
  DType weight_dtype = DType::kBFloat16;   // as stored in HBM
  DType out_dtype = DType::kBFloat16;
  int64_t partitions = 128;  // profile partitions: the PE contraction tile and the P_MAX limit
  int64_t bank_cols = 512;   // profile pe_max_moving_free: one PSUM bank of fp32
  QkvWeightLayout weight_layout = QkvWeightLayout::kContiguous;
  bool h_transposed = false;  // is_h_dim_4h_transposed

  bool quantized() const {
    return quant == QuantizationType::kStatic || quant == QuantizationType::kRow;
  }
  bool has_heads() const { return q_dim > 0; }
  bool mx() const { return quant == QuantizationType::kMx; }
  // MX: the contraction chunk of one nc_matmul_mx (4 values on each partition) and the number of
  // them over H; the kernel reads the input's columns in interleaved order unless it was given
  // already transposed into the packed order.
  int64_t mx_chunk() const { return 4 * partitions; }
  int64_t mx_chunks() const { return h / mx_chunk(); }
  // TKG MX: the partitions one core's H shard fills (its H / (4 L) rows of x4 elements, at most
  // the partitions: H = 512 on LNC 2 fills 64) and the chunks of them.
  int64_t mx_tkg_partitions() const { return std::min(partitions, h / (4 * lnc)); }
  int64_t mx_tkg_chunks() const { return h / (4 * lnc * mx_tkg_partitions()); }
  bool mx_interleaved_input() const {
    return weight_layout == QkvWeightLayout::kMxInterleaved && !h_transposed;
  }
  // TKG: the 128-row H subtiles of one core's shard, H / (partitions * LNC).
  int64_t shard_subtiles() const { return h / (partitions * lnc); }
  // The dtype the matmul's stationary (input) operand takes: the weights' fp8 for STATIC.
  DType matmul_input_dtype() const {
    return quant == QuantizationType::kStatic ? weight_dtype : compute_dtype;
  }
  // The dtype the weights take in SBUF: fp8 as stored when quantized, else the compute dtype.
  DType matmul_weight_dtype() const {
    return quantized() || mx() ? weight_dtype : compute_dtype;
  }
};

// TKG splits the norm's tokens between the two cores above these B * S (rmsnorm_tkg.py:31,
// layernorm_tkg.py:36); the fused residual add then needs an even B * S (qkv_tkg.py:714).
inline constexpr int64_t kTkgRmsNormSplitTokens = 18;
inline constexpr int64_t kTkgLayerNormSplitTokens = 10;
bool TkgSplitsNormTokens(const QkvConfig& cfg);

// REQUIRES: input is [B, S, H] and fused_qkv_weights [H', I] (ValidateQkv checks this first).
QkvConfig MakeQkvConfig(const QkvParams& params, const HardwareProfile& profile, int lnc,
                        QkvVariant variant);

// The output tensor's shape for cfg's layout: BSD [B, S, I] or NBSd [I / d, B, S, d].
Shape QkvOutputShape(const QkvConfig& cfg, QkvOutputLayout layout);

}  // namespace nkisim::kernels
