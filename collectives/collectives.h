// Collectives over one replica group, on this rank's HBM tensors, over real MPI.
//
// Each call is collective over the group (every member calls it, in the same order). It runs one
// skeleton: the group set's algorithm (collectives/algorithms.h: chosen by size and group shape
// as the runtime does, or forced per set) is planned first, and a forced algorithm that cannot
// serve the op or the group is refused before any data moves; then the data moves while a
// non-blocking MPI_Iallreduce(MAX) joins the members' simulated clocks; then the schedule's cost
// on the link model (collectives/link_model.h) is charged from the latest member's clock, as a
// Collective event on core 0's timeline naming the algorithm, and every engine of the rank's
// cores moves past its end.
//
// Data: copies (all_gather, all_to_all) move with one MPI call whose datatypes describe the
// tensors in place. Reductions follow the set's reduction mode: "algorithm" (the default) runs
// the schedule's steps over MPI and adds in its order, rounding to the dtype at every step
// (collectives/reduction.h); "exact" accumulates in fp64 (fp32 contiguous: MPI_SUM in place) and
// rounds once. Integers saturate.
//
// Shapes: all_gather: output = input with dim `dim` multiplied by the group size G, member j's
// input landing at [j * n, (j + 1) * n) of that dim. all_reduce: sum, output shape = input shape
// (may be the same tensor). reduce_scatter: input dim 0 = G * output dim 0; member j gets the sum
// of chunk j. all_to_all: input and output of one shape with dim `dim` = G * m; chunk j of the
// input goes to member j, chunk i of the output comes from member i.
// Throws Error(kInvalidArgument) naming the operand and the rule (or the algorithm, the group
// and the rule), Error(kCommError) on MPI errors.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/communicator.h"
#include "runtime/tensor_view.h"

namespace nkisim::collectives {

struct CollectiveResult {
  double start_ns = 0;  // simulated: when the latest member was ready
  double end_ns = 0;
  int64_t bytes = 0;  // payload bytes this rank sent
  std::string algorithm;  // the row of collectives/algorithms.h that ran ("" for send / recv)
  std::string reason;     // why it was chosen
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
