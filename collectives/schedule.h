// Collective schedules: the steps an algorithm runs, as data.
//
// A schedule is written over the positions 0 .. n-1 of one replica group (not world ranks) and
// over the chunks the collective's data is cut into:
//   all_gather      num_chunks = n * split; chunk c is part c % split of member c / split's input.
//   reduce_scatter  num_chunks = n * split; member c / split ends with the full sum of chunk c.
//   all_reduce      num_chunks = n * split; every member ends with the full sum of every chunk.
//   all_to_all      num_chunks = n * n; chunk i * n + j goes from member i to member j.
// Every chunk has chunk_bytes = (bytes of the op's buffer) / num_chunks (see ChunkBytes).
//
// Steps run one after another. Inside a step every transfer reads what its sources held when the
// step began (a snapshot), so the order of transfers inside a step matters only for the order in
// which a receiver adds what it receives, which is the list order. A transfer carries a list of
// chunks from one or more sources (on one chip) to one destination:
//   copy (reduce = false): each chunk is taken from its owner (member c / split; all_to_all:
//     c / n) when the owner is among the sources, else from srcs[0], and replaces the
//     destination's copy.
//   reduce (reduce = true): the payload of each chunk is the sum of the sources' copies, added in
//     source order and rounded to the wire dtype after every addition; the destination then adds
//     the payload to its own copy (or takes it, when it holds none yet) and rounds again.
// A transfer with shares_read set reuses the HBM read of the transfer before it (the hardware's
// duplication: one read feeding two writes).
//
// Pure data and pure functions; no MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nkisim::collectives {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll };

const char* OpName(CollectiveOp op);
// "all_gather", "allg", ... ; throws Error(kInvalidArgument) listing the names on anything else.
CollectiveOp ParseOp(const std::string& name);

struct Transfer {
  std::vector<int> srcs;     // group positions read, all on one chip; srcs[0] drives the write
  int dst = 0;               // group position written
  std::vector<int> chunks;   // chunk indices carried
  bool reduce = false;
  bool shares_read = false;  // one read, two writes: no HBM read charged for this transfer
};

struct Step {
  std::string label;  // e.g. "mesh: routed write", for traces and --explain
  std::vector<Transfer> transfers;
};

struct Schedule {
  CollectiveOp op = CollectiveOp::kAllGather;
  int members = 0;     // n
  int num_chunks = 0;
  std::vector<Step> steps;
};

// Number of chunks of an op over n members cut `split` ways per member.
int NumChunks(CollectiveOp op, int n, int split);

// Bytes of one chunk when the op moves `buffer_bytes`: the per-rank input of all_gather, the
// per-rank input of reduce_scatter (n outputs), the buffer of all_reduce, the per-rank buffer of
// all_to_all.
double ChunkBytes(const Schedule& s, double buffer_bytes);

// The member chunk c belongs to (see above).
int ChunkOwner(const Schedule& s, int chunk);

// Symbolic run: plays the schedule on sets of contributors and checks that every member ends
// with exactly what the op promises (every chunk once, every sum complete, nothing added twice).
// Returns "" when it does, else the first problem ("step 3 (ring): member 2 adds chunk 5 from
// member 1, which it already holds contributions of: 1").
std::string CheckSchedule(const Schedule& s);

// Appends `inner`'s steps to `outer` step by step: inner step k is merged into outer step
// first_step + k (created as needed). Used to run sub-schedules of disjoint sub-groups at once.
void MergeSteps(std::vector<Step>& outer, size_t first_step, std::vector<Step> inner);
// Room in `outer` for `copies` schedules shaped like `inner` merged from step 0, so the merges
// of a sub-schedule lifted onto many disjoint sub-groups do not regrow the steps.
void ReserveMerged(std::vector<Step>& outer, const std::vector<Step>& inner, size_t copies);

// A schedule written for a virtual group (v members, one chunk each) lifted into a real one:
// virtual member i is real position members[i]; virtual chunk j stands for real chunks
// chunk_sets[j]. Returns the real steps.
std::vector<Step> Lift(const std::vector<Step>& virtual_steps, const std::vector<int>& members,
                       const std::vector<std::vector<int>>& chunk_sets);

}  // namespace nkisim::collectives
