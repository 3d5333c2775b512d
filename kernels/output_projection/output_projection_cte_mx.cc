#include "kernels/output_projection/output_projection_cte_mx.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/output_projection/checks.h"
#include "kernels/output_projection/epilogue.h"
#include "kernels/output_projection/tiling.h"
#include "runtime/cost_model.h"
#include "runtime/mx.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels::oproj {
namespace {

constexpr const char* kKernel = "output_projection_cte";
// The reference kernel's limits (output_projection_cte_parameters.py:458-597).
// An x4 element holds 4 values of the contraction; an MX block is 32 of them (8 partitions).
constexpr int64_t kX4Values = 4;
constexpr int64_t kBlockValues = mx::kBlockValues;
constexpr int64_t kQuadrant = mx::kQuadrantPartitions;
// Scale rows of one quadrant: its 32 partitions hold 4 blocks, whose scales sit at its top 4.
constexpr int64_t kScaleRowsPerQuadrant = kQuadrant / mx::kBlockPartitions;
// The contraction values of one 32-partition quadrant: N*D must be a multiple of this.
constexpr int64_t kKMultiple = kQuadrant * kX4Values;
// Rows of a row step: the PSUM tile's 512 at most, 32 at least (one quadrant of output rows).
constexpr int64_t kMinStepRows = 32;

DType WeightX4(QuantizationType q) {
  return q == QuantizationType::kMx ? DType::kFp4E2M1FNx4 : DType::kFp8E4M3FNx4;
}

bool HasMxPath(const HardwareProfile& profile) { return profile.pe_mx_speedup() > 0; }

void ValidateScales(const ParamChecker& check, const OutputProjectionCteParams& p, int64_t k,
                    int64_t h, int64_t partitions) {
  const QuantizationType q = p.quantization;
  switch (q) {
    case QuantizationType::kMx:
      check.ExpectShape("weight_scale", p.weight_scale, {k / kBlockValues, h},
                        "[N * D / 32, H] for MX (one E8M0 scale per 32 values of N*D and column)");
      check.Require(p.weight_scale.dtype() == DType::kUInt8,
                    StrCat("weight_scale dtype ", DTypeName(p.weight_scale.dtype()),
                           ": must be uint8 for MX (E8M0 block scales, 2^(s - 127))"));
      check.ExpectContiguous("weight_scale", p.weight_scale);
      check.ExpectAbsent("input_scale", p.input_scale, q);
      return;
    case QuantizationType::kStaticMx:
      check.ExpectShape("input_scale", p.input_scale, {partitions, 1},
                        "(partitions, 1) for STATIC_MX");
      check.ExpectShape("weight_scale", p.weight_scale, {partitions, 1},
                        "(partitions, 1) for STATIC_MX");
      check.ExpectFloat("input_scale", p.input_scale);
      check.ExpectFloat("weight_scale", p.weight_scale);
      return;
    default:  // ROW_MX
      check.ExpectShape("weight_scale", p.weight_scale, {partitions, h},
                        "(partitions, H) for ROW_MX (s_w[h], rows identical)");
      check.ExpectFloat("weight_scale", p.weight_scale);
      check.ExpectAbsent("input_scale", p.input_scale, q);
      return;
  }
}

// ---- The plan of one core ----------------------------------------------------------------------

struct Plan {
  QuantizationType quant = QuantizationType::kMx;
  int64_t k = 0;                // N * D
  std::vector<Range> chunks;    // packed weight rows of each contraction chunk (<= P partitions)
  int64_t full = 0;             // chunks of P partitions (all but a remainder)
  int64_t partitions = 0;       // P
  Range shard;                  // this core's columns of H
  std::vector<Range> s_tiles;   // rows of a batch per row step
  int64_t subtile = 0;          // rows per PSUM group (<= 128)
  StaticScales scales;          // STATIC_MX: 1 / s_in and s_w * s_in columns
  Tile neutral_moving;          // STATIC_MX, ROW_MX: [P, 512] uint8 127
  Tile neutral_stationary;      // STATIC_MX: [P, 128] uint8 127
  Tile bias_row;                // [1, shard], or invalid
  Tile scale_row;               // ROW_MX: s_w [1, shard] fp32
  Tile ones;                    // [1, broadcast rows] in the bias dtype, for the broadcasts
  Tile ones_fp32;               // ROW_MX: the same in fp32
  int64_t dma_piece_bytes = 0;  // the size loads and stores are cut to
  size_t tail_groups = 0;       // the last groups, whose stores are split finely
  int64_t steps_per_batch() const { return static_cast<int64_t>(s_tiles.size()); }
  int64_t broadcast_rows() const { return subtile; }
};

// Rows per row step: the attention tiles of a step (bf16 staging, x4 data and scales of every
// chunk) within AttentionTileBudget; 512 (4 subtiles) when they fit, whole subtiles of 128 when
// possible, else whole quadrants of 32.
int64_t StepRows(const HardwareProfile& prof, int64_t chunks, DType attention, int64_t s) {
  const int64_t per_row =
      chunks * (kX4Values * static_cast<int64_t>(SizeOf(attention)) + 4 + 1);
  int64_t rows = std::clamp<int64_t>(AttentionTileBudget(prof) / per_row, kMinStepRows,
                                     prof.pe_max_moving_free());
  rows = rows >= prof.pe_cols() ? rows / prof.pe_cols() * prof.pe_cols()
                                : rows / kMinStepRows * kMinStepRows;
  return std::min(rows, s);
}

// The size DMAs are cut to: about kPiecesPerQueue pieces per queue over the core's whole traffic
// (attention, its weight and scale columns, its output columns), so a small kernel's loads
// spread over every queue and land together, within [kMinPieceBytes, kMaxPieceBytes]. The
// floor keeps the fixed cost of a DMA under half of it (on trn3 the 16 queues together just
// match the HBM port, so every fixed cost paid is port time lost); the ceiling bounds how long
// one tile waits for its own DMA (a queue moves 64 KiB in 2.3 us on trn3), which mattered more
// in the measured cases (docs/output-projection.md, "MX paths") than the few percent of port
// time a bigger DMA would save.
constexpr int64_t kPiecesPerQueue = 4;
constexpr int64_t kMinPieceBytes = 32 * 1024;
constexpr int64_t kMaxPieceBytes = 64 * 1024;
int64_t DmaPieceBytes(const HardwareProfile& prof, const OutputProjectionCteParams& p,
                      int64_t shard) {
  const int64_t h = p.weight.dim(1);
  int64_t bytes = p.attention.size_bytes() + p.weight.size_bytes() / h * shard +
                  p.out.size_bytes() / h * shard;
  if (p.quantization == QuantizationType::kMx) bytes += p.weight_scale.size_bytes() / h * shard;
  return std::clamp<int64_t>(bytes / (kPiecesPerQueue * prof.dma_queues()), kMinPieceBytes,
                             kMaxPieceBytes);
}

Tile Constant(NeuronCore& core, const char* name, const Shape& shape, DType dtype, float value) {
  Tile t = core.AllocateSbuf(name, shape, dtype);
  nisa::memset(t, value, Engine::kGpSimd);
  return t;
}

Plan MakePlan(const KernelContext& ctx, const OutputProjectionCteParams& p) {
  NeuronCore& core = ctx.core;
  const HardwareProfile& prof = core.profile();
  Plan plan;
  plan.quant = p.quantization;
  plan.partitions = prof.partitions();
  plan.k = p.attention.dim(1) * p.attention.dim(2);
  plan.chunks = Split(0, plan.k / kX4Values, plan.partitions);
  plan.full = plan.k / kX4Values / plan.partitions;
  const int64_t h = p.weight.dim(1), shard = h / ctx.n_prgs;
  plan.shard = {ctx.prg_id * shard, shard};
  const int64_t s = p.attention.dim(3);
  const int64_t step_rows =
      StepRows(prof, static_cast<int64_t>(plan.chunks.size()), p.attention.dtype(), s);
  plan.s_tiles = Split(0, s, step_rows);
  plan.subtile = std::min<int64_t>(prof.pe_cols(), step_rows);
  plan.dma_piece_bytes = DmaPieceBytes(prof, p, shard);
  // The groups at the end whose normal stores would still run when the last matmul is done.
  const double group_ns =
      static_cast<double>(plan.chunks.size()) * MxMatmulNs(prof, prof.pe_max_moving_free());
  plan.tail_groups = static_cast<size_t>(
      std::ceil((prof.dma_latency_ns() + plan.dma_piece_bytes / (prof.dma_engines() * prof.dma_engine_gbps())) /
                std::max(1.0, group_ns)));

  // Small loads first: they lead the HBM port's queue.
  if (p.bias.valid()) {
    plan.bias_row = core.AllocateSbuf("oproj_bias_row", {1, shard}, p.bias.dtype());
    nisa::dma_copy(plan.bias_row, p.bias.slice(1, plan.shard.begin, plan.shard.end()));
  }
  if (plan.quant == QuantizationType::kRowMx) {
    plan.scale_row = core.AllocateSbuf("oproj_row_scale_row", {1, shard}, DType::kFloat32);
    nisa::dma_copy(plan.scale_row,
                   p.weight_scale.slice(0, 0, 1).slice(1, plan.shard.begin, plan.shard.end()));
    plan.ones_fp32 =
        Constant(core, "oproj_ones", {1, plan.broadcast_rows()}, DType::kFloat32, 1.0f);
  }
  if (p.bias.valid()) {
    plan.ones = Constant(core, "oproj_ones", {1, plan.broadcast_rows()}, p.bias.dtype(), 1.0f);
  }
  if (plan.quant == QuantizationType::kStaticMx) {
    plan.scales = LoadStaticScales(core, p.input_scale, p.weight_scale);
    plan.neutral_stationary = Constant(core, "oproj_mx_neutral_stationary_scale",
                                       {plan.partitions, prof.pe_cols()}, DType::kUInt8,
                                       mx::kNeutralScale);
  }
  if (plan.quant != QuantizationType::kMx) {
    plan.neutral_moving = Constant(core, "oproj_mx_neutral_moving_scale",
                                   {plan.partitions, prof.pe_max_moving_free()}, DType::kUInt8,
                                   mx::kNeutralScale);
  }
  return plan;
}

// ---- DMAs ------------------------------------------------------------------------------------

// Loads src into dst in DMAs of whole partitions of about piece_bytes each.
void LoadSplit(const Tile& dst, const TensorView& src, int64_t piece_bytes) {
  const int64_t p = dst.partitions();
  const int64_t pieces = std::clamp<int64_t>(
      (src.size_bytes() + piece_bytes / 2) / piece_bytes, 1, p);
  for (const Range& r : Split(0, p, (p + pieces - 1) / pieces)) {
    nisa::dma_copy(dst.slice(0, r.begin, r.end()), src.slice(0, r.begin, r.end()));
  }
}

// Stores a result group in DMAs of about piece_bytes while more groups follow; the kernel's
// last groups (the tail) in pieces of about one DMA fixed cost's worth of bytes spread over the
// queues (StoreInPieces), so the last store ends soon after the last eviction.
void StoreGroup(const TensorView& dst, const Tile& src, int64_t piece_bytes, bool last) {
  if (last) {
    nisa::dma_copy(dst, src);
    return;
  }
  const int64_t bytes = src.numel() * static_cast<int64_t>(SizeOf(dst.dtype()));
  const int64_t pieces =
      std::clamp<int64_t>((bytes + piece_bytes / 2) / piece_bytes, 1, src.partitions());
  const int64_t rows = (src.partitions() + pieces - 1) / pieces;
  for (const Range& r : Split(0, src.partitions(), rows)) {
    nisa::dma_copy(dst.slice(0, r.begin, r.end()), src.slice(0, r.begin, r.end()));
  }
}

// ---- Weight blocks -----------------------------------------------------------------------------

// The weights of a block of output columns, in 512-column pieces (a PSUM bank's width): a tile
// per (piece, chunk), so a matmul waits only for its own, and (MX) the E8M0 scales: one scale
// tile for the block, or, when the block's scales are big, one for its first piece and one for
// the rest (4 DMAs each, one per quadrant).
struct MxBlock {
  Range columns;                          // of H
  std::vector<Range> pieces;              // columns within the block
  std::vector<std::vector<Tile>> weight;  // [piece][chunk] x4 [Pc, piece size]
  std::vector<Range> scale_ranges;        // MX: columns within the block of each scale tile
  std::vector<Tile> scale;                // MX: [P, chunks, range size] uint8
  // Column-wise eviction terms per piece, [rows, piece size], broadcast on chip before the
  // block's first group.
  std::vector<Tile> bias;
  std::vector<Tile> row_scale;            // ROW_MX
};

int64_t BlockBytesPerColumn(const Plan& plan, const OutputProjectionCteParams& p) {
  const auto chunks = static_cast<int64_t>(plan.chunks.size());
  int64_t bytes = chunks * static_cast<int64_t>(SizeOf(p.weight.dtype()));
  if (plan.quant == QuantizationType::kMx) bytes += chunks;  // uint8 scales
  if (p.bias.valid()) bytes += static_cast<int64_t>(SizeOf(p.bias.dtype()));
  if (plan.quant == QuantizationType::kRowMx) bytes += static_cast<int64_t>(SizeOf(DType::kFloat32));
  return bytes;
}

// The E8M0 scales of columns `cols` of H: scale row (P / 8) c + 4 q + r of chunk c goes to
// partition 32 q + r (runtime/mx.h), one DMA per quadrant q for all full chunks and one for the
// remainder chunk.
Tile LoadScales(NeuronCore& core, const Plan& plan, const TensorView& weight_scale,
                const Range& cols) {
  const auto chunks = static_cast<int64_t>(plan.chunks.size());
  Tile scale = core.AllocateSbuf("oproj_mx_weight_scale", {plan.partitions, chunks, cols.size},
                                 DType::kUInt8);
  const int64_t quadrants = plan.partitions / kQuadrant;
  const int64_t rows_per_chunk = plan.partitions / mx::kBlockPartitions;
  for (int64_t q = 0; q < quadrants; ++q) {
    const Tile top = scale.slice(0, q * kQuadrant, q * kQuadrant + kScaleRowsPerQuadrant);
    if (plan.full > 0) {
      nisa::dma_copy(top.slice(1, 0, plan.full),
                     weight_scale.slice(0, 0, plan.full * rows_per_chunk)
                         .reshape({plan.full, quadrants, kScaleRowsPerQuadrant, weight_scale.dim(1)})
                         .select(1, q)
                         .slice(2, cols.begin, cols.end())
                         .permute({1, 0, 2}));
    }
    if (plan.full < chunks && q * kQuadrant < plan.chunks.back().size) {
      const int64_t row = plan.full * rows_per_chunk + q * kScaleRowsPerQuadrant;
      nisa::dma_copy(top.select(1, plan.full), weight_scale.slice(0, row, row + kScaleRowsPerQuadrant)
                                                   .slice(1, cols.begin, cols.end()));
    }
  }
  return scale;
}

// A block of columns; issues its MX scales (the weights: LoadWeights).
MxBlock LoadBlock(NeuronCore& core, const Plan& plan, const OutputProjectionCteParams& p,
                  const Range& cols) {
  const HardwareProfile& prof = core.profile();
  MxBlock block;
  block.columns = cols;
  block.pieces = Split(0, cols.size, prof.pe_max_moving_free());
  block.bias.resize(block.pieces.size());
  block.row_scale.resize(block.pieces.size());
  if (plan.quant == QuantizationType::kMx) {
    // The first piece's scales apart (the first group waits for them) when the block's are big.
    const int64_t quadrant_bytes =
        kScaleRowsPerQuadrant * static_cast<int64_t>(plan.chunks.size()) * cols.size;
    const int64_t head =
        quadrant_bytes > plan.dma_piece_bytes ? block.pieces.front().size : cols.size;
    block.scale_ranges.push_back({0, head});
    if (head < cols.size) block.scale_ranges.push_back({head, cols.size - head});
    for (const Range& r : block.scale_ranges) {
      block.scale.push_back(
          LoadScales(core, plan, p.weight_scale, {cols.begin + r.begin, r.size}));
    }
  }
  block.weight.resize(block.pieces.size());
  return block;
}

// Issues the weights of pieces [first, last) of the block, piece-major (the order the groups
// consume them).
void LoadWeights(NeuronCore& core, const Plan& plan, const OutputProjectionCteParams& p,
                 size_t first, size_t last, MxBlock& block) {
  for (size_t i = first; i < last; ++i) {
    const Range& piece = block.pieces[i];
    const int64_t c0 = block.columns.begin + piece.begin;
    for (const Range& chunk : plan.chunks) {
      Tile t = core.AllocateSbuf("oproj_mx_weight", {chunk.size, piece.size}, p.weight.dtype());
      LoadSplit(t, p.weight.slice(0, chunk.begin, chunk.end()).slice(1, c0, c0 + piece.size),
                plan.dma_piece_bytes);
      block.weight[i].push_back(std::move(t));
    }
  }
}

// ---- Row steps ---------------------------------------------------------------------------------

// One row step's activations, a tile per (subtile, chunk) so a matmul waits only for its own.
struct MxRows {
  int64_t step = 0;
  std::vector<Range> subtiles;               // rows within the step
  std::vector<std::vector<Tile>> data;       // [subtile][chunk] x4 [Pc, rows]
  std::vector<std::vector<Tile>> scale;      // [subtile][chunk] uint8 [Pc, rows]
  std::vector<Tile> staging;                 // the bf16 tiles, live for the step
};

MxRows PlanRows(const Plan& plan, int64_t step) {
  MxRows rows;
  rows.step = step;
  rows.subtiles =
      Split(0, plan.s_tiles[static_cast<size_t>(step % plan.steps_per_batch())].size, plan.subtile);
  rows.data.resize(rows.subtiles.size());
  rows.scale.resize(rows.subtiles.size());
  return rows;
}

// Loads the subtiles [first, last) of a row step: A[b, c, s] of their rows, c in a chunk, as
// [Pc, rows, 4] (element (p, s, j) = A[b, 4 (chunk row + p) + j, s]), and quantizes it: MX /
// ROW_MX by quantize_mx, STATIC_MX by x * (1 / s_in) into fp8_e4m3fn viewed as x4.
void LoadRows(NeuronCore& core, const Plan& plan, const OutputProjectionCteParams& p,
              size_t first, size_t last, MxRows& rows) {
  const int64_t b = rows.step / plan.steps_per_batch();
  const Range st = plan.s_tiles[static_cast<size_t>(rows.step % plan.steps_per_batch())];
  const int64_t s = p.attention.dim(3);
  const TensorView att = p.attention.select(0, b).reshape({plan.k, s});
  const DType dtype = p.attention.dtype();
  for (size_t i = first; i < last; ++i) {
    const Range& sub = rows.subtiles[i];
    for (const Range& chunk : plan.chunks) {
      const int64_t pc = chunk.size;
      // The rows load as they lie in HBM ([Pc, 4, rows]: four runs of the subtile's s a
      // partition); loading them straight into [Pc, rows, 4] would be one 2-byte descriptor per
      // element (docs/dma.md). Four copies (Vector and GpSimd alternating) interleave the values.
      const TensorView src = att.slice(0, kX4Values * chunk.begin, kX4Values * chunk.end())
                                 .reshape({pc, kX4Values, s})
                                 .slice(2, st.begin + sub.begin, st.begin + sub.end());
      Tile raw = core.AllocateSbuf("oproj_mx_attention_rows", {pc, kX4Values, sub.size}, dtype);
      LoadSplit(raw, src, plan.dma_piece_bytes);
      Tile staging = core.AllocateSbuf("oproj_mx_attention", {pc, sub.size, kX4Values}, dtype);
      for (int64_t j = 0; j < kX4Values; ++j) {
        nisa::tensor_copy(staging.select(2, j), raw.select(1, j),
                          j % 2 == 0 ? Engine::kVector : Engine::kGpSimd);
      }
      const Tile flat = staging.reshape({sub.size * kX4Values});
      if (plan.quant == QuantizationType::kStaticMx) {
        Tile fp8 = core.AllocateSbuf("oproj_mx_fp8_attention", {pc, sub.size * kX4Values},
                                     DType::kFp8E4M3FN);
        nisa::tensor_scalar(fp8, flat,
                            {.op0 = nisa::AluOp::kMultiply,
                             .operand0 = plan.scales.inverse_input.slice(0, 0, pc)},
                            Engine::kVector);
        rows.data[i].push_back(fp8.bitcast(DType::kFp8E4M3FNx4));
        rows.scale[i].push_back(plan.neutral_stationary.slice(0, 0, pc).slice(1, 0, sub.size));
      } else {
        Tile x4 = core.AllocateSbuf("oproj_mx_x4_attention", {pc, sub.size}, DType::kFp8E4M3FNx4);
        Tile e8m0 = core.AllocateSbuf("oproj_mx_attention_scale", {pc, sub.size}, DType::kUInt8);
        nisa::quantize_mx(x4, flat, e8m0);
        rows.data[i].push_back(x4);
        rows.scale[i].push_back(e8m0);
      }
      rows.staging.push_back(std::move(staging));
    }
  }
}

// ---- Groups ------------------------------------------------------------------------------------

Tile MovingScaleOf(const Plan& plan, const MxBlock& block, size_t chunk, const Range& cols) {
  const int64_t pc = plan.chunks[chunk].size;
  if (plan.quant != QuantizationType::kMx) {
    return plan.neutral_moving.slice(0, 0, pc).slice(1, 0, cols.size);
  }
  for (size_t i = 0; i < block.scale_ranges.size(); ++i) {
    const Range& r = block.scale_ranges[i];
    if (cols.begin >= r.begin && cols.end() <= r.end()) {
      return SliceLast(block.scale[i].slice(0, 0, pc).select(1, static_cast<int64_t>(chunk)),
                       {cols.begin - r.begin, cols.size});
    }
  }
  Raise(ErrorCode::kInternal, "output_projection_cte MX: columns outside the block's scales");
}

// Every (128-row, 512-column) group of the block and step, column-piece-major (a new block's
// weights stream in piece order, and every subtile of the step consumes a piece before the next
// one is needed): the chunks accumulate into one PSUM bank, which is evicted (dequant, bias) and
// stored to the core's own columns.
// [rows, piece] copies of a piece of an SBUF row [1, C] (the bias, the ROW_MX scales): a K = 1
// matmul of a ones row against it into PSUM and a copy out on `engine` (an eviction engine: the
// copy is in program order with the evictions that read it).
Tile BroadcastPiece(NeuronCore& core, const char* name, const Tile& ones, const Tile& row,
                    const Range& piece, Engine engine) {
  const int64_t rows = ones.free_size();
  Tile psum = core.AllocatePsum("oproj_broadcast_psum", {rows, piece.size});
  nisa::nc_matmul(psum, ones, SliceLast(row, piece));
  Tile result = core.AllocateSbuf(name, {rows, piece.size}, row.dtype());
  nisa::tensor_copy(result, psum, engine);
  return result;
}

// Broadcasts the bias and ROW_MX scale of every piece of the block not broadcast yet (each its
// own tile: a group waits only for its own piece). Called before a step's first group: at a
// block's start the PE waits for the block's first weights anyway, and the K = 1 matmuls then
// stay out of the stream of groups; later steps of the block find them done.
void BroadcastPieces(const Plan& plan, MxBlock& block, EvictionEngines& engines) {
  NeuronCore& core = CurrentCore();
  for (size_t i = 0; i < block.pieces.size(); ++i) {
    const Range piece{block.columns.begin - plan.shard.begin + block.pieces[i].begin,
                      block.pieces[i].size};
    if (plan.bias_row.valid() && !block.bias[i].valid()) {
      block.bias[i] =
          BroadcastPiece(core, "oproj_bias", plan.ones, plan.bias_row, piece, engines.Next());
    }
    if (plan.scale_row.valid() && !block.row_scale[i].valid()) {
      block.row_scale[i] = BroadcastPiece(core, "oproj_row_scale", plan.ones_fp32,
                                          plan.scale_row, piece, engines.Next());
    }
  }
}

// The eviction terms of piece i of the block for `rows` rows. REQUIRES: BroadcastPieces ran.
EvictionTerms Terms(const Plan& plan, const MxBlock& block, size_t i, int64_t rows) {
  EvictionTerms t;
  if (plan.bias_row.valid()) t.bias_row = block.bias[i].slice(0, 0, rows);
  if (plan.scale_row.valid()) t.scale_row = block.row_scale[i].slice(0, 0, rows);
  if (plan.scales.dequant.valid()) t.scale_column = plan.scales.dequant.slice(0, 0, rows);
  return t;
}

// last: this is the kernel's last step, whose last groups' stores are the tail.
void ProjectStep(const Plan& plan, MxBlock& block, const MxRows& rows,
                 const TensorView& out_rows, bool last, EvictionEngines& engines) {
  NeuronCore& core = CurrentCore();
  const size_t groups = block.pieces.size() * rows.subtiles.size();
  BroadcastPieces(plan, block, engines);
  size_t group = 0;
  for (size_t i = 0; i < block.pieces.size(); ++i) {
    const Range& cols = block.pieces[i];
    for (size_t r = 0; r < rows.subtiles.size(); ++r, ++group) {
      const Range& sub = rows.subtiles[r];
      const EvictionTerms terms = Terms(plan, block, i, sub.size);
      Tile psum = core.AllocatePsum("oproj_psum", {sub.size, cols.size});
      for (size_t c = 0; c < plan.chunks.size(); ++c) {
        nisa::nc_matmul_mx(psum, rows.data[r][c], block.weight[i][c], rows.scale[r][c],
                           MovingScaleOf(plan, block, c, cols), {.accumulate = c > 0});
      }
      Tile result = core.AllocateSbuf("oproj_result", {sub.size, cols.size}, out_rows.dtype());
      Evict(result, psum, terms, engines.Next());
      const int64_t h = block.columns.begin + cols.begin;
      StoreGroup(out_rows.slice(0, sub.begin, sub.end()).slice(1, h, h + cols.size), result,
                 plan.dma_piece_bytes, last && group + plan.tail_groups >= groups);
    }
  }
}

}  // namespace

void ValidateOutputProjectionCteMx(const OutputProjectionCteParams& p, int lnc,
                                   const HardwareProfile& profile) {
  const ParamChecker check(kKernel);
  const QuantizationType q = p.quantization;
  const char* mode = QuantizationTypeName(q);
  if (!HasMxPath(profile)) {
    check.Fail(StrCat("quantization_type = ", mode, ": hardware profile '", profile.name(),
                      "' has no MX path (pe_mx_speedup = ", profile.pe_mx_speedup(),
                      "); MX runs on NeuronCore-v4 profiles such as "
                      "configs/hardware/trn3.textproto"),
               ErrorCode::kNotSupported);
  }
  OutputProjectionCteOutputShape(p.attention, p.weight);  // the ranks, before any dim is read
  const int64_t n = p.attention.dim(1), d = p.attention.dim(2), h = p.weight.dim(1), k = n * d;
  check.Require(p.attention.dtype() == DType::kBFloat16 || p.attention.dtype() == DType::kFloat16,
                StrCat("attention dtype ", DTypeName(p.attention.dtype()), ": quantization_type ",
                       mode, " needs bf16 or fp16 attention (quantize_mx's input)"));
  check.ExpectContiguous("attention", p.attention);
  check.Require(k >= kKMultiple, StrCat("N * D = ", k, ": must be >= ", kKMultiple,
                                        " for quantization_type ", mode,
                                        " (one 32-partition quadrant of 4 values)"));
  check.Require(k % kKMultiple == 0,
                StrCat("N * D = ", k, ": must be a multiple of ", kKMultiple,
                       " for quantization_type ", mode,
                       " (the contraction runs on whole 32-partition quadrants of 4 values)"));
  const DType x4 = WeightX4(q);
  check.Require(p.weight.dtype() == x4,
                StrCat("weight dtype ", DTypeName(p.weight.dtype()), ": quantization_type ", mode,
                       " needs ", DTypeName(x4), " weights (x4-packed along N*D, MX_CONTIGUOUS; ",
                       q == QuantizationType::kMx ? "PackMxWeights" : "PackFp8WeightsX4",
                       " in kernels/common/mx_weights.h)"));
  check.ExpectShape("weight", p.weight, {k / kX4Values, h},
                    "[N * D / 4, H] (4 values of N*D per x4 element)");
  check.ExpectContiguous("weight", p.weight);
  ValidateScales(check, p, k, h, profile.partitions());
  CheckCteRowsColumnsAndOutput(check, p, lnc);
}

void OutputProjectionCteMxKernel(const KernelContext& ctx, const OutputProjectionCteParams& p) {
  NeuronCore& core = ctx.core;
  const HardwareProfile& prof = core.profile();
  const Plan plan = MakePlan(ctx, p);
  const std::vector<Range> blocks =
      Split(plan.shard.begin, plan.shard.size,
            BlockColumns(plan.shard.size, prof.pe_max_moving_free(), BlockBytesPerColumn(plan, p),
                         WeightBlockBudget(prof)));
  // Steps are (block, row step) pairs, block-major, run one step ahead as RunBlockPipeline
  // (tiling.h): the loads of step i + 1 are issued before the compute of step i. A step that
  // starts a block issues its first subtile's activations, the block's first weight piece, its
  // other subtiles, then the block's other pieces: the order its column-major groups consume
  // them in (the HBM port serves DMAs in issue order).
  const int64_t row_steps = p.attention.dim(0) * plan.steps_per_batch();
  const size_t steps = blocks.size() * static_cast<size_t>(row_steps);
  struct Loaded {
    size_t block = 0;
    std::shared_ptr<MxBlock> weights;
    MxRows rows;
  };
  auto load = [&](size_t i, const Loaded* previous) {
    Loaded next{i / static_cast<size_t>(row_steps), nullptr,
                PlanRows(plan, static_cast<int64_t>(i % static_cast<size_t>(row_steps)))};
    const size_t subtiles = next.rows.subtiles.size();
    if (previous != nullptr && previous->block == next.block) {
      next.weights = previous->weights;
      LoadRows(core, plan, p, 0, subtiles, next.rows);
      return next;
    }
    LoadRows(core, plan, p, 0, 1, next.rows);
    next.weights = std::make_shared<MxBlock>(LoadBlock(core, plan, p, blocks[next.block]));
    MxBlock& block = *next.weights;
    LoadWeights(core, plan, p, 0, 1, block);
    LoadRows(core, plan, p, 1, subtiles, next.rows);
    LoadWeights(core, plan, p, 1, block.pieces.size(), block);
    return next;
  };
  // Evictions on Scalar while Vector quantizes each row tile (quantize_mx: MX, ROW_MX); STATIC_MX
  // quantizes with one Vector multiply, so its evictions alternate Scalar and Vector (2.17x ->
  // 2.09x its PE bound at S 4096, H 4096; MX alternating: 1.93x -> 1.99x).
  const Engine second =
      plan.quant == QuantizationType::kStaticMx ? Engine::kVector : Engine::kScalar;
  EvictionEngines engines(Engine::kScalar, second);
  Loaded next = load(0, nullptr);
  for (size_t i = 0; i < steps; ++i) {
    Loaded current = std::move(next);
    if (i + 1 < steps) next = load(i + 1, &current);
    const int64_t step = current.rows.step;
    const Range st = plan.s_tiles[static_cast<size_t>(step % plan.steps_per_batch())];
    ProjectStep(plan, *current.weights, current.rows,
                p.out.select(0, step / plan.steps_per_batch()).slice(0, st.begin, st.end()),
                i + 1 == steps, engines);
  }
}

}  // namespace nkisim::kernels::oproj
