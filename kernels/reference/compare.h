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
  // "PASS 262144 elements, max abs err 1.2e-03 at [517] (bound 8.0e-02), max rel err 3.1e-03"
  std::string ToString() const;
};

Comparison Compare(const std::vector<float>& actual, const std::vector<float>& golden,
                   const Tolerance& tolerance);
Comparison Compare(const std::vector<float>& actual, const std::vector<double>& golden,
                   const Tolerance& tolerance);

}  // namespace nkisim::reference
