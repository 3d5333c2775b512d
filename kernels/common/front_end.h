// What the norm front ends (tkg_prologue.h, cte_prologue.h) take from the kernel they serve: the
// sizes and dtypes of FrontEndConfig and the tensors of FrontEndInputs. QKV's config derives from
// FrontEndConfig (and adds its STATIC / MX input quantization, which the front ends apply); the
// MLP builds one with quantization NONE and quantizes x_hat itself.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/common_types.h"
#include "runtime/dtype.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

struct FrontEndConfig {
  int lnc = 1;
  int64_t tokens = 0;  // B * S
  int64_t h = 0;
  NormType norm = NormType::kNoNorm;
  QuantizationType quant = QuantizationType::kNone;  // STATIC / MX: the front end quantizes
  double eps = 0;
  double hidden_actual = 0;                // the RMS divisor (H unless told otherwise)
  DType io_dtype = DType::kBFloat16;       // input, residuals, fused_hidden
  DType compute_dtype = DType::kBFloat16;  // matmul operands: bf16 for fp32 input, else io_dtype
  DType weight_dtype = DType::kBFloat16;   // as stored in HBM (STATIC: the fp8 x_hat is cast to)
  int64_t partitions = 128;     // profile partitions: the PE contraction tile and the P_MAX limit
  int64_t bank_cols = 512;      // profile pe_max_moving_free: one PSUM bank of fp32
  bool mx_interleaved = false;  // MX: the input's columns are read in MX_INTERLEAVED order
  // TKG, for a kernel whose front end is on its critical path (the MLP: its fp8 weights stream in
  // not much more time than the front end takes): the input and residual are loaded as whole rows
  // and transposed on the PE (kernels/common/transposed_load.h: the direct load of the layout is
  // one DMA descriptor per 32 B run), and RMSNorm multiplies by gamma (GpSimd) while the statistics are computed,
  // then by 1 / rms per H shard, the shard the other core needs first (tkg_prologue.cc). Off for
  // QKV, whose measured numbers are of the plain order.
  bool short_tkg_front_end = false;
  // CTE, not MX: x_t's H subtiles in blocked order, subtile j on partition p holding column
  // p * (H / P) + j (CtePrologue::Transpose), so a kernel's [H, N] weight rows for partition p are
  // the H / P consecutive rows from p * (H / P): whole-row chunks are then one contiguous run a
  // partition. Off: column j * P + p (QKV).
  bool h_blocked = false;

  bool mx() const { return quant == QuantizationType::kMx; }
  // MX: the contraction chunk of one nc_matmul_mx (4 values on each partition) and the number of
  // them over H.
  int64_t mx_chunk() const { return 4 * partitions; }
  int64_t mx_chunks() const { return h / mx_chunk(); }
  // TKG MX: the partitions one core's H shard fills (its H / (4 L) rows of x4 elements, at most
  // the partitions: H = 512 on LNC 2 fills 64) and the chunks of them.
  int64_t mx_tkg_partitions() const { return std::min(partitions, h / (4 * lnc)); }
  int64_t mx_tkg_chunks() const { return h / (4 * lnc * mx_tkg_partitions()); }
  bool mx_interleaved_input() const { return mx_interleaved; }
  // TKG: the 128-row H subtiles of one core's shard, H / (partitions * LNC).
  int64_t shard_subtiles() const { return h / (partitions * lnc); }
  // The dtype the matmul's stationary (input) operand takes: the weights' fp8 for STATIC.
  DType matmul_input_dtype() const {
    return quant == QuantizationType::kStatic ? weight_dtype : compute_dtype;
  }
};

// The front ends' tensors; an invalid view means "not given".
struct FrontEndInputs {
  TensorView input;      // [B, S, H]
  TensorView residual;   // [B, S, H]: x + residual (+ residual2), or invalid: no fused add
  TensorView residual2;  // [B, S, H]: QKV's second residual (attention_prev), or invalid
  TensorView gamma;      // [1, H]
  TensorView beta;       // [1, H], LayerNorm only
  TensorView in_scale;   // STATIC: [1 | P, 1]
  bool residual_add() const { return residual.valid(); }
};

// TKG splits the norm's tokens between the two cores above these B * S (rmsnorm_tkg.py:31,
// layernorm_tkg.py:36); the fused residual add then needs an even B * S (qkv_tkg.py:714).
inline constexpr int64_t kTkgRmsNormSplitTokens = 18;
inline constexpr int64_t kTkgLayerNormSplitTokens = 10;
bool TkgSplitsNormTokens(const FrontEndConfig& cfg);

// STATIC's input scale (row 0 of in_scale [1 | P, 1]) as a [partitions, 1] fp32 column of 1 / s_in.
Tile LoadInverseInputScale(NeuronCore& core, const TensorView& in_scale, int64_t partitions);

}  // namespace nkisim::kernels
