// attention_cte: causal prefill (context-encoding) attention with grouped KV heads,
//   out[b, h, :, s] = sum_{t <= s} softmax_t(q[h, b, s, :] . k[g, b, t, :] / sqrt(d)) v[g, b, t, :],
//   g = h / (n_q / n_kv),
// written on tiles as flash attention: 128 query rows x 1024 keys per block, an online softmax
// (running max and sum per query row, the fp32 accumulator rescaled when the max moves), blocks
// above the diagonal never computed, the diagonal 128 x 128 square masked (key t <= query s).
//
// Layouts (sizes in elements):
//   q    [n_q,  B, S, d]  NBSd, as the QKV CTE kernel writes it (QkvOutputLayout::kNBSd, d = 128):
//   k, v [n_kv, B, S, d]  the QKV output [n_q + 2 n_kv, B, S, d] sliced along dim 0 into
//                         [0, n_q), [n_q, n_q + n_kv), [n_q + n_kv, n_q + 2 n_kv) (pure views).
//   out  [B, n_q, d, S]   the input layout of output_projection_cte (attention [B, N, D, S]).
//   q, k, v share one dtype: bf16, fp16 or fp32; out has it too. The matmuls run in that dtype
//   (fp32 at the PE's fp32 rate), softmax statistics and the accumulator in fp32.
//
// On tiles, per (b, KV head g, 128-row query tile i, group of up to 4 query heads of g):
//   QK^T   PE: S [128 q, 1024 k] (two PSUM banks, one 512-key matmul each) = (Q^T [d, 128 q])^T
//          (K^T [d, k]), unscaled; the diagonal square gets the mask
//          (0 / -30000) accumulated by one identity matmul.
//   max    Vector: -max_k of the PSUM scores over the block (GpSimd cannot read PSUM); GpSimd
//          scales it by 1/sqrt(d) and merges it into the running -max (statistics in scaled
//          units: no pass scales K).
//   exp    Scalar: P = exp(S / sqrt(d) - m) (activation scale + bias) in the compute dtype, with its row sum (the running sum is
//          rescaled by alpha = exp(m_old - m_new) on later blocks).
//   P^T    Vector: 128 x 128 transposes into [128 k, chunk, heads, 128 q].
//   PV     PE: O^T [d, heads x 128 q] (PSUM, fp32) += (V [128 k, d])^T P^T, so the moving operand
//          is 512 columns wide for 4 heads; on later blocks Scalar first multiplies O^T by alpha
//          broadcast along the free axis (a Vector transpose of the alpha column makes the rows).
//   out    O^T / l (the same broadcast trick, the multiply on Scalar), stored per head as
//          out[b, h, :, rows].
//   The stages run as a software pipeline over the (block, head) units of this core, so the PE,
//   GpSimd, Scalar and Vector work on different units at once; each step issues the P^T / PV
//   stage of an old unit before the softmax of a new one, so that the rescale PV waits for is
//   ahead of the new exp in Scalar's queue. Vector then sets the pace (~95% busy at S 2048):
//   its row maxima and P transposes are ~1.86x the PE bound's time (the `engine floor` the
//   roofline report prints).
// LNC = 2 splits the query tiles: tile i goes to core 0 when i % 4 is 0 or 3, else to core 1
// (zigzag, so both cores get the same causal work); each core writes its own output columns,
// with no core-to-core traffic.
//
// Limits: d <= 128 (the contraction on the partitions); |scores| / sqrt(d) far below 30000
// (the mask value); the K^T and V of one (b, g) kept in SBUF three times over:
// 6 x S x dtype bytes <= half of SBUF per partition (S <= 9557 in bf16 on trn2).
// Errors: Error(kInvalidArgument) "attention_cte: <operand> <shape>: <rule>" (see
// ValidateAttentionCte); a tile that does not fit raises kOutOfResources.
// Threads: AttentionCte() runs the SPMD program on the LogicalCore's threads; call it from one
// host thread at a time per LogicalCore.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

struct AttentionCteParams {
  TensorView q;  // [n_q, B, S, d]
  TensorView k;  // [n_kv, B, S, d]
  TensorView v;  // [n_kv, B, S, d]
};

// [B, n_q, d, S] from q [n_q, B, S, d]. REQUIRES: q is 4-D.
Shape AttentionCteOutputShape(const TensorView& q);

// The longest S ValidateAttentionCte admits for `dtype` on `profile` (the K^T / V slots in half of
// SBUF): 9557 in bf16 on trn2. What `nkisim predict` chunks a longer prefill by.
int64_t AttentionCteMaxSeqLen(const HardwareProfile& profile, DType dtype);

// Throws Error(kInvalidArgument) on the first rule broken: q, k, v given, 4-D, bf16 / fp16 /
// fp32 and of one dtype; S >= 1, B >= 1, 1 <= d <= 128; k and v [n_kv, B, S, d] with q's B, S
// and d; n_q % n_kv == 0; the SBUF limit above; out (when valid) [B, n_q, d, S] float.
void ValidateAttentionCte(const AttentionCteParams& params, const TensorView& out,
                          const HardwareProfile& profile);

// The SPMD body: program ctx.prg_id computes its query tiles and writes their columns of out.
// REQUIRES: ValidateAttentionCte(params, out, profile) passed.
void AttentionCteKernel(const KernelContext& ctx, const AttentionCteParams& params,
                        const TensorView& out);

// Validates, allocates out [B, n_q, d, S] in q's dtype, runs on every core of lnc, returns out.
TensorView AttentionCte(LogicalCore& lnc, const AttentionCteParams& params);

// The query tiles (128 rows each) of S that program prg_id of n_prgs computes, ascending.
std::vector<int64_t> AttentionCteTilesOfProgram(int64_t seq_len, int prg_id, int n_prgs);

// The PE work the kernel does, in flops: for every (b, h) and query tile i, 2 matmuls of
// 2 x rows x keys x d with keys = min(S, 128 (i + 1)) (the causal triangle rounded up to whole
// 128 x 128 squares; the masked upper half of each diagonal square is computed and discarded).
double AttentionCteFlops(int64_t b, int64_t n_q, int64_t s, int64_t d);
// The exact causal flops, 4 d per (query, key <= query) pair: 4 d B n_q S (S + 1) / 2.
double AttentionCausalFlops(int64_t b, int64_t n_q, int64_t s, int64_t d);

}  // namespace nkisim::kernels
