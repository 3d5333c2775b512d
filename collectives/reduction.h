// Reductions that add the way the algorithm does: the schedule's steps run over MPI between the
// group's members, each transfer carrying its chunks' current values, and every addition is
// done in fp64 and rounded to the wire dtype at once (through fp32 for the float dtypes; integers
// round to nearest and saturate), in the order the schedule gives (collectives/schedule.h).
// So a bf16 all_reduce shows the error a real one has, and two algorithms can differ in the last
// bits, as on the hardware.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/schedule.h"
#include "runtime/dtype.h"

namespace nkisim::collectives {

// A value rounded to dtype (saturating for the integer types).
double RoundToWire(DType dtype, double value);

// Element range [begin, end) of chunk c when `elements` are cut into num_chunks chunks.
int64_t ChunkBegin(int64_t elements, int num_chunks, int chunk);

// REQUIRES: s is a reduce_scatter or all_reduce schedule over group's members; values is this
// rank's buffer (reduce_scatter: its whole input; all_reduce: the buffer), already rounded to
// dtype; every member calls it with the same schedule and size.
// On return the chunks the op promises hold their sums: reduce_scatter, this member's chunks;
// all_reduce, every chunk. Other chunks hold partial sums. Throws Error(kCommError) on MPI errors.
void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<double>& values);
// The same with the values held (and sent) as fp32: every value on the wire is rounded to dtype,
// which for the float dtypes (fp32 and narrower) fp32 holds exactly, and each addition is still
// done in fp64 and rounded at once, so the results are those of the fp64 form at half the memory.
// REQUIRES: dtype a float dtype of at most 4 bytes.
void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<float>& values);

// Elements per piece of RunReductionScheduleInPieces as the collectives call it (16 MiB of fp32).
inline constexpr int64_t kReductionPieceElements = int64_t{1} << 22;

// While a KeepReductionBuffers lives on a thread, that thread's reductions keep their wire
// buffers and fp32 piece from one call to the next, up to kKeptScratchBytes (a call that needed
// more frees them), so a loop of calls takes no fresh pages whatever the malloc policy; when the
// last one on the thread ends, they are freed. Without one, each call frees its buffers when it
// returns, so what follows the call (a job's fp64 golden, the next phase's tensors) reuses that
// memory: kept across a whole 128-rank job, they cost 0.4 GiB more fresh pages.
inline constexpr size_t kKeptScratchBytes = size_t{16} << 20;
class KeepReductionBuffers {
 public:
  KeepReductionBuffers();
  ~KeepReductionBuffers();
  KeepReductionBuffers(const KeepReductionBuffers&) = delete;
  KeepReductionBuffers& operator=(const KeepReductionBuffers&) = delete;
};

// The fp32 form over `total` elements in pieces: piece p holds part p of every chunk (chunk c cut
// into as many parts as there are pieces), so every element meets exactly the additions of the
// whole run, in the same order (bit-identical results), while only one piece's values and wire
// buffers are held: about piece_elements of each instead of `total`. read(a, b, out) writes
// elements [a, b) of this member's input, rounded to dtype, to out[0, b - a) (a buffer of the
// call's, see KeepReductionBuffers); write(a, values, count) takes the final values
// of elements [a, a + count), called only for elements in [first, first + n) (the ones the op
// promises). REQUIRES: as RunReductionSchedule's; piece_elements >= 1; every member calls it with
// the same schedule, total and piece_elements.
void RunReductionScheduleInPieces(
    const Schedule& s, const GroupComm& group, DType dtype, int64_t total, int64_t piece_elements,
    int64_t first, int64_t n, const std::function<void(int64_t, int64_t, float*)>& read,
    const std::function<void(int64_t, const float*, int64_t)>& write);

}  // namespace nkisim::collectives
