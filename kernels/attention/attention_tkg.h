// Decode (token-generation, TKG) attention for one KV head and the G query heads that share it
// (GQA), over a KV cache of T tokens per batch row: for every batch row b and head g,
//   out[g, b, :] = softmax_t(q[g, b, :] . K[b, :, t] / sqrt(d)) @ V[b, t, :].
//
// Cache layout (chosen for the hardware). Position T - 1 is this step's token: either the
// caller appends it before the call, or it passes k_new / v_new (AttentionTkgParams) and the
// kernel takes that token from them and writes it into the caches itself:
//   k_cache [Bl, d, T]: the head dim on the partitions, so a [d, 512-token] tile is one plain DMA
//                       (each partition reads a contiguous token run; no transposing DMA);
//   v_cache [Bl, T, d]: the tokens on the partitions, the contraction of P @ V.
//   q [G, Bl, d] and out [G, Bl, d] (out in q's dtype).
//
// Algorithm (flash-decoding): each core's tokens are walked in ceil(n / 512) blocks of equal
// width (a multiple of 128, at most pe_max_moving_free = 512; the last block takes the rest).
//   * Scores: q_b^T [d, G] stationary, the K block [d, 512] moving, all G heads in one matmul;
//     with d <= 64, floor(128 / d) rows share one matmul (a block-diagonal stationary, the rows'
//     K blocks stacked on the contraction). Up to floor(128 / G) rows form a group whose scores sit
//     on the partitions of one PSUM bank, so every softmax instruction covers the whole group.
//   * Online softmax per group in fp32: running max (kept as nb = -max / sqrt(d)), running sum,
//     and an accumulator rescaled by exp(old max - new max) each block; P = exp(s / sqrt(d) + nb)
//     in the V dtype, transposed on the PE 128 tokens at a time, then P @ V per 128 tokens. When
//     c * G < c * d (and c * d > 64), in the V-stationary form: the V block [128, c * d]
//     stationary, P^T [128, c * G] moving (a matmul costs max(c * G, 64) instead of max(c * d, 64)
//     cycles), giving the block's output transposed, [c * d, rows * G], which one Vector transpose
//     from PSUM per block brings back to the accumulator's [rows * G, c * d]; otherwise P^T
//     stationary, V moving. A block's running-sum and accumulator updates are issued one block
//     late, after the next block's P^T eviction, so the in-order GpSimd queue never holds that
//     eviction (and the PE) behind a softmax chain.
//   * The K / V blocks stream from HBM through a pool of SBUF slots in the order the PE consumes
//     them (the scores of block k + L interleaved with P @ V of block k), each chunk one DMA
//     (one transfer already uses all 16 DMA engines: docs/dma.md), shaped for long contiguous
//     runs a partition: K of a pack goes as a span of consecutive blocks (4 KiB a partition where
//     the slots it keeps resident fit, else 2 KiB), V with partition p holding the block's
//     tokens p n + j (n = w / 128; P^T chunk j is P's columns j, j + n, ..., so both operands of
//     the contraction share the order), one DMA per row. q and k_new load as transposing DMAs of
//     their contiguous rows (a permuted view costs one descriptor an element).
//   * LNC = 2 with an even Bl splits the rows (core 0 the first Bl / 2) when a core's softmax
//     still trails its half of the stream (cost-model estimate; a core's instructions cover one
//     group, so halving a single group doubles its softmax time): each core streams all T tokens
//     of its rows, half of the cache, and stores its rows; no partial crosses the link.
//     Otherwise the tokens split evenly (core 0 the first ceil(T / 2)): each core keeps its
//     partial (max, sum, unnormalised output) per group; the partials are exchanged with
//     sendrecv and merged exactly (log-sum-exp), and core c stores half of the group's rows (or,
//     for a one-row group, half of its heads).
//   * One batch row whose PE work per block reaches 85% of its HBM time (the plan's estimate; on
//     trn2 d 64 and fp32, not d 128 in bf16) with at least 16384 tokens per core: AttentionTkgInto() runs it
//     as V virtual rows (up to 8 per core, at least 2048 tokens each; the caches seen as
//     [V, d, T / V]), which share the PE transposes, the softmax instructions and (d <= 64) the
//     matmuls, and merge exactly on chip: the per-head max across the partitions by a PE
//     transpose and a 1-row matmul broadcast, then one matmul of identity stacks scaled by
//     exp(m_b - M); at LNC 2 each core merges its half of the virtual rows and the two halves
//     cross with one sendrecv (AttentionTkgPlan::virtual_rows).
//   * With k_new / v_new, the core holding token T - 1 loads k_new (as [c * d, packs], the
//     scores' layout) and v_new in one DMA each; the token's scores come from one extra matmul
//     per row group (one row per pack: all rows against all K columns, the own column masked and
//     summed into the block's last score column; d <= 64: one per pack), its P @ V from one extra
//     1-partition matmul per pack. The cache's position T - 1 is not loaded when it is alone in
//     its 128-token chunk; in a longer chunk it rides along unused, so the chunk stays one DMA.
//     AttentionTkgInto() then writes k_new / v_new into the caches (AttentionTkgAppendKernel).
//
// Errors: Error(kInvalidArgument) worded "attention_tkg: <operand> <shape>: <rule>" (see
// ValidateAttentionTkg); Error(kOutOfResources) if a tile does not fit. Nothing is written when
// validation fails.
// Threads: AttentionTkgInto() runs the SPMD program on the LogicalCore's threads and returns when
// every physical core is done; call it from one host thread at a time per LogicalCore.
#pragma once

#include <cstdint>

#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

struct AttentionTkgParams {
  TensorView q;        // [G, Bl, d]: G query heads sharing one KV head, Bl batch rows
  TensorView k_cache;  // [Bl, d, T]: T cached tokens, this step's included
  TensorView v_cache;  // [Bl, T, d]
  // Optional, both or neither: this step's K and V rows, [Bl, d] in the caches' dtype. When
  // given, position T - 1 of the caches is this step's token: the kernel reads tokens [0, T - 1)
  // from the caches and the last one from k_new / v_new (one DMA each, used from SBUF), and
  // AttentionTkgInto() writes k_new into k_cache[:, :, T - 1] and v_new into
  // v_cache[:, T - 1, :], so the caller issues no append of its own. Whatever the caches held at
  // T - 1 is ignored.
  TensorView k_new = {};
  TensorView v_new = {};
};

// Throws Error(kInvalidArgument) unless: q, k_cache and v_cache are 3-D float tensors; d <= the
// partitions (128); G <= pe_cols (128); T >= 1; k_cache is [Bl, d, T] and v_cache [Bl, T, d]
// with the same Bl, d and T; q's Bl and d match the caches'; k_new and v_new are both absent or
// both [Bl, d] in the caches' dtype.
void ValidateAttentionTkg(const AttentionTkgParams& params, const HardwareProfile& profile);

// How the kernel tiles a case (exposed for tests and listings).
struct AttentionTkgPlan {
  int64_t heads = 0;         // G
  int64_t rows = 0;          // Bl
  int64_t d = 0;
  int64_t tokens = 0;        // T
  int64_t rows_per_pack = 0;   // rows sharing one scores matmul (stacked on the contraction)
  int64_t rows_per_group = 0;  // rows sharing one online softmax (group * G <= 128 partitions)
  int64_t block = 0;           // largest KV block (512); a core uses ceil(n / 512) equal blocks
  bool split_rows = false;     // LNC 2: the cores split the rows (no merge), else the tokens
  int64_t core0_rows = 0;      // LNC 2 split_rows: core 0 takes rows [0, core0_rows), core 1 the
                               // rest; rows_per_pack / rows_per_group are then over a core's rows
  int64_t core0_tokens = 0;    // LNC 2 token split: core 0 takes [0, core0_tokens), core 1 the
                               // rest (= tokens when the rows split)
  int64_t virtual_rows = 1;    // > 1: AttentionTkgInto() runs the one batch row as this many rows of
                               // T / virtual_rows tokens each (2 to 8 per core), merged on chip
};
// split_even_rows: at LNC 2 an even Bl splits the rows whatever the estimate (virtual rows).
// REQUIRES: params valid (ValidateAttentionTkg).
AttentionTkgPlan PlanAttentionTkg(const AttentionTkgParams& params, int lnc,
                                  const HardwareProfile& profile, bool split_even_rows = false);

// The SPMD body on core ctx.prg_id of ctx.n_prgs; writes this core's part of out [G, Bl, d].
// Reads the caches only (with k_new / v_new, tokens [0, T - 1)); never writes them. With
// `row_out` [G, 1, d] given, the Bl rows are virtual rows of one batch row (token segments, one
// softmax group per core; at LNC 2 the cores split them): their partials merge on chip and the
// result goes to row_out (each core stores half of the heads at LNC 2); out is not written (its
// dtype is the result's).
// REQUIRES: params valid; out [G, Bl, d] float; row_out absent or [G, 1, d] float.
void AttentionTkgKernel(const KernelContext& ctx, const AttentionTkgParams& params,
                        const TensorView& out, const TensorView& row_out = {});

// The SPMD append of k_new / v_new into position T - 1 of the caches: each core writes its share
// of the rows, one HBM-to-HBM DMA per cache (K's column seen as [d, rows], so its one-element
// descriptors spread over every engine), on the last DMA queue. Run it in
// a launch after AttentionTkgKernel's: the simulator orders HBM writes per buffer, so a write
// into a cache while a core still reads it would hold those reads. No-op without k_new.
// REQUIRES: params valid.
void AttentionTkgAppendKernel(const KernelContext& ctx, const AttentionTkgParams& params);

// Validates (nothing is read or written if that fails; out must be a float tensor of q's
// shape), runs AttentionTkgKernel on every core of lnc into out and then, with k_new / v_new,
// AttentionTkgAppendKernel. With plan.virtual_rows = V > 1 (one batch row, T a multiple of V and
// at least 16384 tokens per core) the kernel runs on the row as V rows of T / V tokens (views, no
// copies) and merges them on chip into out; with k_new / v_new the append runs first there.
void AttentionTkgInto(LogicalCore& lnc, const AttentionTkgParams& params, const TensorView& out);

// AttentionTkgInto into a new out [G, Bl, d] in q's dtype.
TensorView AttentionTkg(LogicalCore& lnc, const AttentionTkgParams& params);

}  // namespace nkisim::kernels
