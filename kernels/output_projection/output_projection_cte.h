// output_projection_cte: the prefill (context-encoding) output projection,
//   out[b, s, h] = sum_{n, k} attention[b, n, k, s] * weight[n*D + k, h] + bias[0, h],
// i.e. attention.permute(0, 3, 1, 2).reshape(B, S, N*D) @ weight + bias, written on tiles:
// head dim D on the partitions (the contraction), the N heads accumulated in one PSUM bank,
// S in 512-row tiles of 128-row subtiles, H in 512-column subtiles, weights in SBUF blocks of a
// third of SBUF, heads packed (g = the largest divisor of N with g*D <= 128: a pure view).
// LNC = 2 shards H: core p computes and writes columns [p*H/2, (p+1)*H/2) of out; the cores never
// exchange data (no sendrecv, no collective).
//
// Quantization:
//   NONE    float weights (not fp8); the attention is cast to the weight dtype, as the reference.
//   STATIC  fp8 weights, input_scale and weight_scale (128, 1):
//           out = (clip(A / s_in, +-max fp8) @ W) * (s_w * s_in) + bias, fp8 double-row matmuls.
//   ROW     refused with kInvalidArgument (the seed's rule: the public reference silently
//           ignores the scales and returns wrong results).
//   MX, STATIC_MX, ROW_MX  on the MX matmul (NeuronCore-v4 profiles only, e.g.
//           configs/hardware/trn3.textproto; kNotSupported on a profile without the MX path):
//           weights x4-packed [N*D/4, H] along the contraction, no head packing; see
//           output_projection_cte_mx.h for the inputs, math and tiling of each.
// Limits (the reference's): B*S <= 131072, H <= 20705, H % LNC == 0; D <= 128 and N <= 17 except
// for the MX modes, which need N*D >= 128 and N*D % 128 == 0.
// Sizes are in elements. Every rejection is an nkisim::Error naming the parameter, the value and
// the rule (see ValidateOutputProjectionCte).
#pragma once

#include <optional>

#include "kernels/output_projection/output_projection.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// attention [B, N, D, S]; STATIC / STATIC_MX scales (128, 1) each; MX weight_scale uint8
// [N*D/32, H]; ROW_MX weight_scale (128, H).
struct OutputProjectionCteParams : OutputProjectionInputs {
  TensorView out;  // [B, S, H], float
};

// [B, S, H] from attention [B, N, D, S] and weight [N*D, H] (MX modes: [N*D/4, H]); throws
// kInvalidArgument when their ranks are wrong.
Shape OutputProjectionCteOutputShape(const TensorView& attention, const TensorView& weight);

// Throws Error(kInvalidArgument) on the first rule broken, or Error(kNotSupported) for an MX mode
// on a profile without the MX path (pe_mx_speedup = 0, e.g. the built-in trn2); returns normally
// when the kernel can run on `lnc` cores of `profile`.
void ValidateOutputProjectionCte(const OutputProjectionCteParams& params, int lnc,
                                 const HardwareProfile& profile);

// The SPMD body: program ctx.prg_id writes its H / n_prgs columns of params.out.
// REQUIRES: ValidateOutputProjectionCte(params, ctx.n_prgs, profile) passed.
void OutputProjectionCteKernel(const KernelContext& ctx, const OutputProjectionCteParams& params);

// Creates params.out [B, S, H] in output_dtype (default: the attention dtype; bf16 for the MX
// modes, as the reference), validates and launches the kernel on lnc; returns out.
TensorView OutputProjectionCte(LogicalCore& lnc, OutputProjectionCteParams params,
                               std::optional<DType> output_dtype = std::nullopt);

namespace oproj {
class ParamChecker;
// The rules every CTE mode shares, after its own: B * S <= 131072, H <= 20705 (the reference's
// limits), H % LNC == 0, bias [1, H] float, out [B, S, H] float.
void CheckCteRowsColumnsAndOutput(const ParamChecker& check, const OutputProjectionCteParams& p,
                                  int lnc);
}  // namespace oproj

}  // namespace nkisim::kernels
