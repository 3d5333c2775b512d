#include "collectives/batch_shard.h"

#include "collectives/collectives.h"
#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/dma.h"

namespace nkisim::collectives {
namespace {

constexpr const char* kOp = "attn_q_batch_shard";

// The rule's message is built only when it is broken.
template <typename MakeRule>
void Require(bool ok, MakeRule rule) {
  if (!ok) Raise(ErrorCode::kInvalidArgument, StrCat(kOp, ": ", rule()));
}

int ReadRankId(const TensorView& rank_id_in, int world_size) {
  Require(rank_id_in.shape() == Shape{1, 1} && rank_id_in.dtype() == DType::kInt32, [&] {
    return StrCat("rank_id_in is ", ShapeString(rank_id_in.shape()), " ",
                  DTypeName(rank_id_in.dtype()), "; it must be a (1, 1) int32 tensor");
  });
  const int r = static_cast<int>(rank_id_in.get({0, 0}));
  Require(r >= 0 && r < world_size,
          [&] { return StrCat("rank_id_in holds ", r, ", outside [0, ", world_size, ")"); });
  return r;
}

}  // namespace

BatchShardLayout ParseBatchShardLayout(const std::string& name) {
  if (name == "NBSd") return BatchShardLayout::kNBSd;
  if (name == "dBnS") return BatchShardLayout::kDBnS;
  Raise(ErrorCode::kInvalidArgument, StrCat(kOp, ": layout '", name, "' is not one of NBSd, dBnS"));
}

TensorView attn_q_batch_shard(RankContext& ctx, const TensorView& input,
                              const TensorView& iota_workers, const TensorView& gathered_buf,
                              int gqa_group_size, const GroupComm& replica_group,
                              BatchShardLayout layout, const TensorView* rank_id_in) {
  const int64_t g = gqa_group_size;
  Require(g == replica_group.size(), [&] {
    return StrCat("gqa_group_size ", g, " must equal the replica group's ", replica_group.size(),
                  " ranks");
  });
  Require(input.rank() == 4, [&] {
    return StrCat("input is ", ShapeString(input.shape()),
                  "; it must be 4-D (n, B, S, d) or (d, B, n, S)");
  });
  const bool nbsd = layout == BatchShardLayout::kNBSd;
  const int64_t b = input.dim(1);
  Require(nbsd || input.dim(2) == 1, [&] {
    return StrCat("the dBnS layout needs n = 1; input ", ShapeString(input.shape()),
                  " has n = ", input.dim(2));
  });
  Require(b % g == 0,
          [&] { return StrCat("B = ", b, " must be divisible by gqa_group_size G = ", g); });
  // 5-D (G, n, B, S, d) or (G, d, B, 1, S): the batch is dim 2 in both.
  const Shape gathered_shape = nbsd ? Shape{g, input.dim(0), b, input.dim(2), input.dim(3)}
                                    : Shape{g, input.dim(0), b, 1, input.dim(3)};
  Require(gathered_buf.shape() == gathered_shape && gathered_buf.dtype() == input.dtype() &&
              gathered_buf.is_contiguous(),
          [&] {
            return StrCat("gathered_buf is ", ShapeString(gathered_buf.shape()), " ",
                          DTypeName(gathered_buf.dtype()), "; it must be a contiguous ",
                          ShapeString(gathered_shape), " ", DTypeName(input.dtype()));
          });
  Require(iota_workers.rank() == 2 && iota_workers.dim(0) == 1 &&
              iota_workers.dim(1) == ctx.world_size() && IsInteger(iota_workers.dtype()),
          [&] {
            return StrCat("iota_workers is ", ShapeString(iota_workers.shape()), " ",
                          DTypeName(iota_workers.dtype()), "; it must be an integer (1, ",
                          ctx.world_size(), ") table");
          });

  Shape flat = gathered_shape;
  flat.erase(flat.begin());
  flat[0] *= g;
  all_gather(ctx, replica_group, input, gathered_buf.reshape(flat), 0);

  const int r = rank_id_in ? ReadRankId(*rank_id_in, ctx.world_size()) : ctx.rank();
  const int64_t per_rank = b / g;
  const int64_t expected = replica_group.set->position_of_rank[r] * per_rank;
  const int64_t found = static_cast<int64_t>(iota_workers.get({0, r}));
  if (found != expected) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kOp, ": iota_workers[0, ", r, "] = ", found, " but rank ", r, " is at position ",
                 replica_group.set->position_of_rank[r],
                 " of its replica group, so its batch offset must be ", expected,
                 " (position * B / G = ", replica_group.set->position_of_rank[r], " * ", b, " / ",
                 g, ")"));
  }

  Shape sliced = gathered_shape;
  sliced[2] = per_rank;
  const Shape out_shape = nbsd ? Shape{g * input.dim(0), per_rank, input.dim(2), input.dim(3)}
                               : Shape{g, input.dim(0), per_rank, input.dim(3)};
  TensorView q_out = TensorView::Create(out_shape, input.dtype(), "q_out");
  ScopedCurrentCore on_core(ctx.lnc().core(0));
  nisa::DmaOptions slice_at_offset;  // the batch offset is read from the table by the DMA itself
  slice_at_offset.src_offset =
      nisa::DynamicOffset{iota_workers.select(0, 0).slice(0, r, r + 1), 2, 1, b};
  nisa::dma_copy(q_out.reshape(sliced), gathered_buf.slice(2, 0, per_rank), slice_at_offset);
  return q_out;
}

}  // namespace nkisim::collectives
