// output_projection_tkg: the decode (token-generation) output projection,
//   y[b*S + s, h] = sum_{n, k} attention[k, b, n, s] * weight[n*D + k, h] + bias[0, h],
// i.e. attention.permute(1, 3, 2, 0).reshape(B*S, N*D) @ weight + bias, written on tiles:
// head dim D on the partitions (the contraction), the N heads accumulated in one PSUM bank, B*S
// in blocks of whole batches (128 rows; any B*S, the output goes to HBM), H in 512-column
// subtiles, weights in SBUF blocks of a third of SBUF. Heads are packed (as CTE) only when
// D % 32 == 0.
//
// Output layouts:
//   transpose_out = false  out [B*S, H] = y.
//   transpose_out = true   out [128, LNC, H / (128 LNC), B*S] with
//                          out[h1, p, h2, r] = y[r, p*(H/LNC) + h1*(H/(128 LNC)) + h2];
//                          the weights are the stationary operand, B*S the moving one.
// LNC = 2 shards H: core p writes only columns [p*H/2, (p+1)*H/2) of y (the slice out[:, p] when
// transposed); the cores never exchange data (no sendrecv, no collective).
//
// Quantization:
//   NONE    float weights (not fp8); the attention is cast to the weight dtype.
//   STATIC  fp8 weights, input_scale and weight_scale (128, 1):
//           y = (clip(A / s_in, +-max fp8) @ W) * (s_w * s_in) + bias, fp8 double-row matmuls.
//   ROW     fp8 weights, weight_scale (128, H) (rows identical), no input_scale:
//           y = (A @ W) * s_w[h] + bias, the attention unquantized.
//   MX, STATIC_MX, ROW_MX  refused with kInvalidArgument: the TKG kernel has no MX path (the
//           reference asserts NONE, STATIC or ROW, output_projection_tkg.py:388-393).
// The output dtype is the attention dtype. Limits (the reference's): D <= 128, H % LNC == 0;
// transposed: H % (128 LNC) == 0 and N*H <= 163840 (81920 for fp32 weights).
#pragma once

#include "kernels/output_projection/output_projection.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// attention [D, B, N, S]; STATIC scales (128, 1) each; ROW weight_scale (128, H).
struct OutputProjectionTkgParams : OutputProjectionInputs {
  bool transpose_out = false;
  TensorView out;  // see the output layouts above; the attention dtype
};

// The output shape for attention [D, B, N, S] and weight [N*D, H] on lnc cores with `partitions`
// partitions; throws kInvalidArgument when the ranks are wrong.
Shape OutputProjectionTkgOutputShape(const TensorView& attention, const TensorView& weight,
                                     bool transpose_out, int lnc, int64_t partitions);

// Throws Error(kInvalidArgument) or, for the MX modes, Error(kNotSupported) on the first rule
// broken; returns normally when the kernel can run on `lnc` cores of `profile`.
void ValidateOutputProjectionTkg(const OutputProjectionTkgParams& params, int lnc,
                                 const HardwareProfile& profile);

// The SPMD body. REQUIRES: ValidateOutputProjectionTkg(params, ctx.n_prgs, profile) passed.
void OutputProjectionTkgKernel(const KernelContext& ctx, const OutputProjectionTkgParams& params);

// Creates params.out (attention dtype), validates and launches on lnc; returns out.
TensorView OutputProjectionTkg(LogicalCore& lnc, OutputProjectionTkgParams params);

}  // namespace nkisim::kernels
