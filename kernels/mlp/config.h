// Internal to kernels/mlp: the sizes and dtypes one mlp call derives from its parameters, shared by
// validation, dispatch and the two variants, and the view of it the norm front ends take
// (kernels/common/tkg_prologue.h, cte_prologue.h, shared with QKV).
// Callers outside kernels/mlp include mlp.h only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/front_end.h"
#include "kernels/mlp/mlp.h"
#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"

namespace nkisim::kernels {

struct MlpConfig {
  MlpVariant variant = MlpVariant::kTkg;
  int lnc = 1;
  int64_t b = 0, s = 0, h = 0, i = 0;
  int64_t tokens = 0;  // B * S
  NormType norm = NormType::kNoNorm;
  QuantizationType quant = QuantizationType::kNone;
  MlpActivation act = MlpActivation::kSilu;
  double eps = 0;
  DType io_dtype = DType::kBFloat16;       // hidden, residual, output, fused_hidden
  DType compute_dtype = DType::kBFloat16;  // matmul operands: bf16 for fp32 I/O, else io_dtype
  DType weight_dtype = DType::kBFloat16;   // gate_w as stored in HBM
  int64_t partitions = 128;                // the PE contraction tile
  int64_t bank_cols = 512;                 // one PSUM bank of fp32 (pe_max_moving_free)

  bool quantized() const {
    return quant == QuantizationType::kStatic || quant == QuantizationType::kRow;
  }
  bool is_static() const { return quant == QuantizationType::kStatic; }
  bool is_row() const { return quant == QuantizationType::kRow; }
  // The weights' dtype in SBUF: fp8 as stored when quantized, else the compute dtype.
  DType matmul_weight_dtype() const { return quantized() ? weight_dtype : compute_dtype; }
  // The matmuls' activation operands: the weights' fp8 for STATIC, else the compute dtype.
  DType matmul_input_dtype() const { return is_static() ? weight_dtype : compute_dtype; }
  // 128-row chunks of I (the last may be shorter): the down projection's contraction tiles.
  int64_t i_chunks() const { return (i + partitions - 1) / partitions; }
  int64_t i_rows(int64_t c) const { return std::min(partitions, i - c * partitions); }
  // TKG: the 128-row H subtiles of one core's shard of the gate / up contraction.
  int64_t shard_subtiles() const { return h / (partitions * lnc); }
};

// REQUIRES: hidden is [B, S, H] and gate_w [H', I] (ValidateMlp checks this first).
MlpConfig MakeMlpConfig(const MlpParams& params, const HardwareProfile& profile, int lnc,
                        MlpVariant variant);

// The front ends' view of an MLP call: the norm over H (the RMS divisor H), one residual, no
// quantization (the MLP quantizes x_hat itself). The inputs are views of p's tensors.
FrontEndConfig FrontEnd(const MlpConfig& cfg);
FrontEndInputs FrontEndInputsOf(const MlpParams& p);

}  // namespace nkisim::kernels
