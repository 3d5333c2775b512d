// The MX paths of output_projection_cte (MX, STATIC_MX, ROW_MX): the prefill output projection on
// NeuronCore-v4's microscaling matmul (nisa::nc_matmul_mx, runtime/nisa/mx.h), which contracts 4
// values per partition, i.e. 512 values of K = N*D per instruction. Entered through
// OutputProjectionCte / ValidateOutputProjectionCte / OutputProjectionCteKernel
// (output_projection_cte.h), which dispatch here for the MX modes.
//
// Inputs (K = N*D, c = n*D + d the contraction index, A[b*S + s, c] = attention[b, n, d, s]):
//   attention [B, N, D, S] bf16 or fp16. The weight is x4-packed along K, MX_CONTIGUOUS
//   (kernels/common/mx_weights.h: packed row r holds contraction rows 4 r .. 4 r + 3).
//   MX         weight fp4_e2m1fn_x4 [K/4, H] (PackMxWeights), weight_scale uint8 [K/32, H]: the
//              E8M0 block scales (2^(s - 127)), one per 32 consecutive rows of K and column;
//              no input_scale.
//   STATIC_MX  weight fp8_e4m3fn_x4 [K/4, H]: per-tensor fp8_e4m3fn weights repacked by
//              PackFp8WeightsX4; input_scale and weight_scale (128, 1) as STATIC.
//   ROW_MX     weight fp8_e4m3fn_x4 [K/4, H]: per-column fp8_e4m3fn weights
//              (s_w[h] = max_k |W[k, h]| / 448) repacked by PackFp8WeightsX4; weight_scale
//              (128, H), rows identical, as TKG ROW; no input_scale. This simulator's definition:
//              the snapshot has no ROW_MX (newer upstream adds ROW / ROW_MX to CTE).
// Math:
//   MX         y = sum over blocks of MXQ(A) * deq(W) + bias: the attention quantized online per
//              block of 32 consecutive c (nisa::quantize_mx into fp8_e4m3fn_x4 with E8M0
//              scales), both operands' scales applied inside the matmul, no dequant after it.
//   STATIC_MX  y = (fp8(clip(A / s_in, +-448)) @ W_fp8) * (s_w * s_in) + bias: A * (1/s_in)
//              stored into fp8_e4m3fn (saturating at 448, the trn3 fp8 max) by a tensor_scalar,
//              viewed as fp8_e4m3fn_x4 (Tile::bitcast); both scale tiles constant
//              mx::kNeutralScale (127 = x1, the reference's create_constant_mx_scales); the
//              dequant is one tensor_scalar at the PSUM eviction.
//   ROW_MX     y = (MXQ(A) @ W_fp8) * s_w[h] + bias: the attention as MX, the weights' scale
//              tile neutral, the per-column scale applied at the eviction.
//   The output is bf16 unless output_dtype says otherwise (the reference writes bf16 for MX).
// Tiling: K in chunks of 512 (128 partitions x 4 values); a remainder of 128 k' values takes
// 32 k' partitions. A chunk's activation [P, S_tile] x4 comes from quantize_mx of a bf16 tile
// [P, S_tile * 4] whose element (p, 4 s + j) is A[b, 512 chunk + 4 p + j, s], loaded by one
// strided DMA view of attention[b] as [K, S] -> [P, 4, S] -> [P, S, 4]. Per 128-row subtile x
// 512-column group the chunks accumulate into one PSUM bank (stationary = activation x4
// [P, <=128], moving = weight x4 [P, <=512] with its scale tile: scale rows 16 chunk .. +16 sit at
// partitions 0-3, 32-35, 64-67, 96-99), which is evicted with the dequant and bias and stored.
// H is sharded over LNC (core p writes columns [p H/LNC, (p+1) H/LNC)), no collective; weight
// blocks and row steps are pipelined one step ahead as the float path (tiling.h).
// Needs a hardware profile with the MX path (pe_mx_speedup > 0, configs/hardware/trn3.textproto).
#pragma once

#include "kernels/output_projection/output_projection_cte.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels::oproj {

// The MX modes' rules, each an Error naming the parameter, the value and the rule:
//   kNotSupported: the profile has no MX path (checked first);
//   kInvalidArgument: attention bf16 / fp16, rank 4, contiguous; N*D >= 128 and a multiple of 128;
//   weight dtype (fp4_e2m1fn_x4 for MX, fp8_e4m3fn_x4 for STATIC_MX / ROW_MX) and shape
//   [N*D/4, H]; MX weight_scale uint8 [N*D/32, H]; STATIC_MX input_scale and weight_scale
//   (128, 1); ROW_MX weight_scale (128, H); input_scale absent for MX and ROW_MX; B*S <= 131072,
//   H <= 20705, H % LNC == 0; bias [1, H]; out [B, S, H] float. D > 128 and N > 17 are allowed.
// REQUIRES: IsMx(params.quantization).
void ValidateOutputProjectionCteMx(const OutputProjectionCteParams& params, int lnc,
                                   const HardwareProfile& profile);

// The SPMD body of the MX modes. REQUIRES: ValidateOutputProjectionCteMx passed.
void OutputProjectionCteMxKernel(const KernelContext& ctx, const OutputProjectionCteParams& params);

}  // namespace nkisim::kernels::oproj
