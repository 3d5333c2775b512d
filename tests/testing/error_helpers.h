// Helpers for tests that check errors: run a callable that must throw nkisim::Error of a given
// code and hand back its message for matching.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "runtime/error.h"

namespace nkisim::testing {

// Runs f, which must throw Error(code); returns its message ("" and a test failure otherwise).
inline std::string ErrorMessageOf(ErrorCode code, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected Error(" << ErrorCodeName(code) << ")";
  return "";
}

inline std::string InvalidArgumentMessage(const std::function<void()>& f) {
  return ErrorMessageOf(ErrorCode::kInvalidArgument, f);
}

inline bool Contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace nkisim::testing
