// Shared by the libFuzzer targets of tests/fuzz. The rule every target checks: an input either
// parses or is refused with nkisim::Error. Any other exception, a crash, a sanitizer report, a
// timeout or running out of memory is a finding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "runtime/error.h"

namespace nkisim::fuzz {

// The source name inputs are reported under (it appears in nkisim's messages).
inline const std::string kSource = "fuzz-input";

// Fails the run with `what`: libFuzzer saves the input as a crash-* file.
[[noreturn]] inline void Finding(const std::string& what) {
  std::fprintf(stderr, "\n==nkisim-fuzz== FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `body`; an nkisim::Error is the expected refusal of a bad input, anything else a finding.
template <typename Body>
void Guarded(const char* what, Body&& body) {
  try {
    body();
  } catch (const Error&) {
    // The documented outcome for a bad input.
  } catch (const std::exception& e) {
    Finding(std::string(what) + " threw " + typeid(e).name() + " (not nkisim::Error): " + e.what());
  } catch (...) {
    Finding(std::string(what) + " threw a non-std exception");
  }
}

inline std::string Text(const unsigned char* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace nkisim::fuzz
