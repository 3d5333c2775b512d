// The reference suites' closeness rule, used by every golden check:
//   an element passes when |actual - golden| <= atol + rtol * max|golden|,
// max over the whole golden tensor. Also reports the worst per-element errors, so a loose global
// bound cannot hide a wrong column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nkisim::reference {

struct Tolerance {
  double atol;
  double rtol;
};

struct Comparison {
  int64_t elements = 0;
  int64_t failures = 0;          // elements outside the bound (NaN counts as a failure)
  double max_abs_error = 0;      // max |actual - golden|
  double max_rel_error = 0;      // max |actual - golden| / max(|golden|, tiny)
  int64_t worst_index = -1;      // flat index of max_abs_error
  double bound = 0;              // atol + rtol * max|golden|
  bool pass() const { return failures == 0; }
  // "PASS 262144 elements, 0 outside the bound; max abs err 1.200e-03 at [517] (bound 8.000e-02),
  // max rel err 3.100e-03"; with every element equal to its golden (worst_index -1), "... max abs
  // err 0.000e+00 (every element exact) (bound ...)".
  std::string ToString() const;
};

// The same rule over a tensor fed in blocks, so neither the kernel's output nor the golden is ever
// held whole (a [B, S, H] prefill output is 64 MiB of floats and 128 MiB of doubles per rank).
// Blocks go in flat order: Add(first_index, ...) with first_index the flat index of the block's
// first element, each block starting where the previous one ended. Finish() gives exactly what
// Compare gives on the whole tensor (the same counts, maxima and worst index): an element outside
// the final bound is also outside the bound of the largest |golden| seen so far, so only those are
// kept as candidates until the final bound is known (none when the kernel is right).
// Not thread-safe.
class StreamingCompare {
 public:
  explicit StreamingCompare(const Tolerance& tolerance) : tolerance_(tolerance) {}

  // REQUIRES: first_index == the number of elements added so far; n >= 0; both pointers valid
  // for n elements. Throws Error(kInvalidArgument) naming the indices when out of order.
  void Add(int64_t first_index, const float* actual, const double* golden, int64_t n);
  void Add(int64_t first_index, const float* actual, const float* golden, int64_t n);
  // The comparison of everything added. REQUIRES: called once.
  Comparison Finish();

 private:
  template <typename Golden>
  void AddBlock(int64_t first_index, const float* actual, const Golden* golden, int64_t n);

  Tolerance tolerance_;
  Comparison c_;
  double max_golden_ = 0;
  std::vector<double> candidates_;  // errors above the running bound (NaN included)
};

Comparison Compare(const std::vector<float>& actual, const std::vector<float>& golden,
                   const Tolerance& tolerance);
Comparison Compare(const std::vector<float>& actual, const std::vector<double>& golden,
                   const Tolerance& tolerance);

}  // namespace nkisim::reference
