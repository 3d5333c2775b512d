// Collectives over one replica group, on this rank's HBM tensors, over real MPI.
//
// Each call is collective over the group (every member calls it, in the same order). It moves
// the data with one MPI call whose datatypes describe the tensors in place (no copies), except
// the reductions of non-fp32 dtypes, which accumulate in fp64 scratch and round once into the
// dtype (integers saturate). The clock join is a non-blocking MPI_Iallreduce(MAX) that overlaps
// the payload. It also joins the simulated clocks
// of the group's ranks (the latest `now` of any member), adds the alpha-beta cost of its algorithm
// (collective_cost.h), records a Collective event on core 0's timeline and moves every engine of
// the rank's cores past its end.
//
// Shapes: all_gather: output = input with dim `dim` multiplied by the group size G, member j's
// input landing at [j * n, (j + 1) * n) of that dim. all_reduce: sum, output shape = input shape
// (may be the same tensor). reduce_scatter: input dim 0 = G * output dim 0; member j gets the sum
// of chunk j. all_to_all: input and output of one shape with dim `dim` = G * m; chunk j of the
// input goes to member j, chunk i of the output comes from member i.
// Throws Error(kInvalidArgument) naming the operand and the rule, Error(kCommError) on MPI errors.
#pragma once

#include <cstdint>

#include "collectives/communicator.h"
#include "runtime/tensor_view.h"

namespace nkisim::collectives {

struct CollectiveResult {
  double start_ns = 0;  // simulated: when the latest member was ready
  double end_ns = 0;
  int64_t bytes = 0;  // payload bytes this rank sent
};

CollectiveResult all_gather(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output, int dim = 0);
CollectiveResult all_reduce(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output);
CollectiveResult reduce_scatter(RankContext& ctx, const GroupComm& group, const TensorView& input,
                                const TensorView& output);
CollectiveResult all_to_all(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output, int dim = 0);

// Point to point between world ranks; the receiver's clock joins the sender's.
CollectiveResult send(RankContext& ctx, const TensorView& tensor, int dest_rank, int tag = 0);
CollectiveResult recv(RankContext& ctx, const TensorView& tensor, int source_rank, int tag = 0);

}  // namespace nkisim::collectives
