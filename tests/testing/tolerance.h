// The golden check of the kernel tests: the reference rule |actual - golden| <= atol + rtol *
// max|golden| (kernels/reference/compare.h), printed and recorded with the worst element.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "kernels/reference/compare.h"

namespace nkisim::testing {

// Compares actual with expected (float or double goldens); prints and records
// "<label>: <comparison>" and fails with that line when an element is outside the bound.
template <typename Golden>
::testing::AssertionResult WithinTolerance(const std::vector<float>& actual,
                                           const std::vector<Golden>& expected,
                                           const reference::Tolerance& tolerance,
                                           const std::string& label) {
  const reference::Comparison c = reference::Compare(actual, expected, tolerance);
  const std::string line = label + ": " + c.ToString();
  std::cout << line << "\n";
  ::testing::Test::RecordProperty(label, c.ToString());
  if (c.pass()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << line;
}

}  // namespace nkisim::testing
