// all_to_all_v: an all-to-all whose per-peer counts are known only at run time (the token
// exchange of expert parallelism), over one replica group, over real MPI.
//
// Contract. Every member of the group calls it (collective, same order as the other
// collectives). input: this member's rows to send, contiguous, dim 0 = rows; the rows for member
// j are the send_rows[j] rows following those for members 0 .. j - 1 (send_rows has one entry per
// group member, each >= 0, and they must sum to input dim 0). output: contiguous, the same dtype
// and the same trailing dims as input, dim 0 >= the rows received (its capacity; rows past the
// received ones are left as they were). Rows from member i land after those from members
// 0 .. i - 1. The received counts are exchanged at run time (MPI_Alltoall of the counts) and
// returned; the payload moves with one MPI_Alltoallv of bytes, so the data is bit-exact.
//
// Price. Every member learns the whole G x G count matrix (MPI_Allgather of the send counts), so
// all members charge the same cost: the group's all_to_all algorithm (collectives/algorithms.h:
// "pairwise" by default, or the row the group set forces) is built as for a uniform all_to_all,
// and each of its transfers then carries, instead of one block per (source, destination) chunk,
// the rows that source really sends that destination; the schedule is played on the unchanged
// link model (collectives/link_model.h), one chunk = the gcd of the counts in rows. Charged from the latest
// member's clock (MPI_Iallreduce MAX, overlapping the payload) as a Collective event on core 0,
// in the group's launch context (in-graph or host) as the other collectives are.
//
// Errors: Error(kInvalidArgument) naming the field, its value and the rule (send_rows of the
// wrong length, a negative count, counts that do not sum to input dim 0, an output too small, a
// dtype or trailing-dim mismatch, a non-contiguous operand, an algorithm that does not serve
// all_to_all), and on a LocalFabric (timing-only ranks as threads: not yet
// supported); Error(kCommError) on MPI errors.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/communicator.h"
#include "runtime/tensor_view.h"

namespace nkisim::collectives {

struct AllToAllVResult : CollectiveResult {
  std::vector<int64_t> recv_rows;  // per group member: rows received from it
  int64_t rows_received = 0;       // their sum
};

AllToAllVResult all_to_all_v(RankContext& ctx, const GroupComm& group, const TensorView& input,
                             const std::vector<int64_t>& send_rows, const TensorView& output);

// The price of one all_to_all_v, a pure function (what every member charges). rows[i * n + j]:
// rows member i sends member j (the diagonal moves nothing over links); row_bytes: bytes of one
// row. requested: "auto" or an algorithm row serving all_to_all. Throws as ChooseAlgorithm.
CollectivePlan PlanAllToAllV(const GroupPlacement& group, const std::vector<int64_t>& rows,
                             double row_bytes, const HardwareProfile& profile,
                             const std::string& requested, Launch launch);

}  // namespace nkisim::collectives
