// The golden of the whole layer chain: what every phase of every layer is checked against.
//
// Each phase's golden is its plain reference (kernels/reference, fp64 inside) applied to the
// golden of the phases before it, carried from the job's original inputs — never to the
// simulated values the previous phase produced. So a wrong hand-off between phases (a kernel fed
// the wrong tensor, a layer fed another layer's output) fails the next phase's check, which a
// reference applied to the simulated inputs would pass.
//
// What a rank's phases hand on comes in two kinds:
//   * the rank's own tensors (its Q / K / V heads, their attention, its o_proj and MLP partials):
//     held whole, as fp32 TensorViews, since the references read their inputs through ToFloats
//     (a relative rounding of 6e-8 between phases, against tolerances of 2e-2);
//   * tensors every member of the TP group holds alike (the TP sums, the residual stream, the
//     layer's output): a GroupGolden, fp64, of which each member keeps only its block of the flat
//     tensor, so no rank holds a whole [B S, H] copy (64 MiB of fp32 at S 2048, H 8192). Its rows
//     are gathered from their holders when a reference needs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {

class GroupGolden {
 public:
  GroupGolden() = default;
  // A [rows, h] tensor of zeros over `group`: member j keeps flat elements
  // [first(j), first(j) + count(j)), blocks as even as possible, earlier members one more.
  GroupGolden(const collectives::GroupComm& group, int64_t rows, int64_t h);
  // The values of `t` ([.., h]), which every member holds alike (a layer's original input): each
  // keeps its block, and Rows reads `t` itself, with no exchange.
  static GroupGolden FromLocal(const collectives::GroupComm& group, const TensorView& t);

  bool valid() const { return group_ != nullptr; }
  int64_t rows() const { return rows_; }
  int64_t h() const { return h_; }
  // This member's block: its first flat index and its values.
  int64_t first() const { return first_; }
  const std::vector<double>& block() const { return block_; }
  std::vector<double>& block() { return block_; }

  // Adds to the blocks the group's elementwise sum of every member's `part`, rows [r0, r1)
  // ((r1 - r0) x h values, fp64): an MPI_Reduce_scatter in fp64. Collective: every member calls
  // it with the same r0, r1.
  void AddGroupSum(int64_t r0, int64_t r1, const std::vector<double>& part);
  // Rows [r0, r1), (r1 - r0) x h values, gathered from their holders (MPI_Allgatherv; none for a
  // FromLocal tensor). Collective like AddGroupSum.
  std::vector<double> Rows(int64_t r0, int64_t r1) const;
  // Rows [r0, r1) as an fp32 tensor of `shape` (numel (r1 - r0) x h), for a reference's input.
  TensorView RowsTensor(int64_t r0, int64_t r1, const Shape& shape, const std::string& name) const;

 private:
  // Where the flat range [lo, hi) meets each member's block: counts and offsets into the range.
  void Split(int64_t lo, int64_t hi, std::vector<int>* counts, std::vector<int>* offsets) const;

  const collectives::GroupComm* group_ = nullptr;
  int64_t rows_ = 0, h_ = 0, first_ = 0;
  std::vector<double> block_;
  TensorView local_;  // FromLocal: the tensor itself

  friend GroupGolden SumOf(const GroupGolden& a, const GroupGolden& b);
};

// The elementwise sum of two goldens of the same group and shape, block by block (no exchange).
GroupGolden SumOf(const GroupGolden& a, const GroupGolden& b);

// An fp32 tensor of `shape` holding `values` (a golden handed to the next reference).
TensorView GoldenTensor(const Shape& shape, const std::vector<double>& values, const std::string& name);
TensorView GoldenTensor(const Shape& shape, const std::vector<float>& values, const std::string& name);

// Blocks of at most `max_rows` token rows of a [B, S, ..] tensor that a row-wise reference can
// take one at a time: with S == 1 (decode) rows of the batch, b in [b0, b1); else positions
// [s0, s1) of one batch row b0 (b1 = b0 + 1). Calls fn(b0, b1, s0, s1) in flat row order.
template <typename Fn>
void ForRowBlocks(int64_t b, int64_t s, int64_t max_rows, Fn fn) {
  if (s == 1) {
    for (int64_t b0 = 0; b0 < b; b0 += max_rows) fn(b0, std::min(b, b0 + max_rows), int64_t{0}, int64_t{1});
    return;
  }
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t s0 = 0; s0 < s; s0 += max_rows) fn(bi, bi + 1, s0, std::min(s, s0 + max_rows));
  }
}

}  // namespace nkisim::launcher
