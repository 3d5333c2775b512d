#include "kernels/reference/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/error.h"

namespace nkisim::reference {

std::string Comparison::ToString() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "%s %lld elements, %lld outside the bound; max abs err %.3e at [%lld] (bound %.3e), "
                "max rel err %.3e",
                pass() ? "PASS" : "FAIL", static_cast<long long>(elements),
                static_cast<long long>(failures), max_abs_error, static_cast<long long>(worst_index),
                bound, max_rel_error);
  return line;
}

namespace {

template <typename Golden>
Comparison CompareTo(const std::vector<float>& actual, const std::vector<Golden>& golden,
                     const Tolerance& tolerance) {
  if (actual.size() != golden.size()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("compare: actual has ", actual.size(),
                                              " elements, golden has ", golden.size()));
  }
  Comparison c;
  c.elements = static_cast<int64_t>(golden.size());
  double max_golden = 0;
  for (float g : golden) max_golden = std::max(max_golden, std::fabs(static_cast<double>(g)));
  c.bound = tolerance.atol + tolerance.rtol * max_golden;
  for (size_t i = 0; i < golden.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - golden[i]);
    if (!(err <= c.bound)) ++c.failures;  // NaN fails
    if (std::isnan(err) || err > c.max_abs_error) {
      if (!std::isnan(c.max_abs_error)) {
        c.max_abs_error = err;
        c.worst_index = static_cast<int64_t>(i);
      }
    }
    const double rel = err / std::max(std::fabs(static_cast<double>(golden[i])), 1e-30);
    if (std::isnan(rel) || rel > c.max_rel_error) c.max_rel_error = rel;
  }
  return c;
}

}  // namespace

Comparison Compare(const std::vector<float>& actual, const std::vector<float>& golden,
                   const Tolerance& tolerance) {
  return CompareTo(actual, golden, tolerance);
}

Comparison Compare(const std::vector<float>& actual, const std::vector<double>& golden,
                   const Tolerance& tolerance) {
  return CompareTo(actual, golden, tolerance);
}

}  // namespace nkisim::reference
