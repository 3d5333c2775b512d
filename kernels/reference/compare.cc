#include "kernels/reference/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/error.h"

namespace nkisim::reference {

std::string Comparison::ToString() const {
  // With no element off its golden there is no worst element to name.
  char where[48] = " (every element exact)";
  if (worst_index >= 0) {
    std::snprintf(where, sizeof where, " at [%lld]", static_cast<long long>(worst_index));
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "%s %lld elements, %lld outside the bound; max abs err %.3e%s (bound %.3e), "
                "max rel err %.3e",
                pass() ? "PASS" : "FAIL", static_cast<long long>(elements),
                static_cast<long long>(failures), max_abs_error, where, bound, max_rel_error);
  return line;
}

template <typename Golden>
void StreamingCompare::AddBlock(int64_t first_index, const float* actual, const Golden* golden,
                                int64_t n) {
  if (first_index != c_.elements || n < 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("compare: a block of ", n, " elements at flat index ", first_index,
                 "; blocks go in flat order and the next one starts at ", c_.elements));
  }
  for (int64_t i = 0; i < n; ++i) {
    max_golden_ = std::max(max_golden_, std::fabs(static_cast<double>(golden[i])));
  }
  const double running_bound = tolerance_.atol + tolerance_.rtol * max_golden_;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - golden[i]);
    if (!(err <= running_bound)) candidates_.push_back(err);  // NaN is kept: it fails
    if (std::isnan(err) || err > c_.max_abs_error) {
      if (!std::isnan(c_.max_abs_error)) {
        c_.max_abs_error = err;
        c_.worst_index = first_index + i;
      }
    }
    const double rel = err / std::max(std::fabs(static_cast<double>(golden[i])), 1e-30);
    if (std::isnan(rel) || rel > c_.max_rel_error) c_.max_rel_error = rel;
  }
  c_.elements += n;
}

void StreamingCompare::Add(int64_t first_index, const float* actual, const double* golden,
                           int64_t n) {
  AddBlock(first_index, actual, golden, n);
}

void StreamingCompare::Add(int64_t first_index, const float* actual, const float* golden,
                           int64_t n) {
  AddBlock(first_index, actual, golden, n);
}

Comparison StreamingCompare::Finish() {
  c_.bound = tolerance_.atol + tolerance_.rtol * max_golden_;
  c_.failures = 0;
  for (double err : candidates_) c_.failures += !(err <= c_.bound);
  candidates_.clear();
  return c_;
}

namespace {

template <typename Golden>
Comparison CompareTo(const std::vector<float>& actual, const std::vector<Golden>& golden,
                     const Tolerance& tolerance) {
  if (actual.size() != golden.size()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("compare: actual has ", actual.size(),
                                              " elements, golden has ", golden.size()));
  }
  StreamingCompare stream(tolerance);
  stream.Add(0, actual.data(), golden.data(), static_cast<int64_t>(golden.size()));
  return stream.Finish();
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
