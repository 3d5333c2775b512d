// Decode attention for one KV head, written in nl: for every batch row b of the shard and every
// Q head h sharing that KV head,
//   out[h, b, :] = softmax(q[h, b, :] . K[b, t, :] / sqrt(d) over t) @ V[b, :, :].
// On tiles: d on the partitions for the scores (q^T stationary, K^T moving in 512-token PSUM
// banks), the softmax along the free axis in fp32, then the tokens on the partitions for P @ V
// (128-token chunks of P transposed on the PE array, accumulated in one PSUM bank). LNC = 2
// splits the batch rows between the two cores (row b on core b % 2); no core-to-core traffic.
#pragma once

#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

struct DecodeAttentionParams {
  TensorView q;        // [Hq, Bl, d]: Hq heads sharing one KV head, Bl batch rows
  TensorView k_cache;  // [Bl, T, d]: T cached tokens, this step's included
  TensorView v_cache;  // [Bl, T, d]
};

// Throws Error(kInvalidArgument) "decode_attention: <operand> <shape>: <rule>": 3-D operands;
// Hq <= 128; d <= 128; matching Bl, T and d; float dtypes.
void ValidateDecodeAttention(const DecodeAttentionParams& params, const HardwareProfile& profile);

// The SPMD body; writes out [Hq, Bl, d] (q's dtype).
void DecodeAttentionKernel(const KernelContext& ctx, const DecodeAttentionParams& params,
                           const TensorView& out);

// Validates, allocates out and runs on every core of lnc.
TensorView DecodeAttention(LogicalCore& lnc, const DecodeAttentionParams& params);

}  // namespace nkisim::kernels
