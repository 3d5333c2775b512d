// Wall-clock (and memory) bounds of the end-to-end and CLI tests, scaled for slow builds.
//
// NKISIM_TEST_TIME_SCALE (default 1) multiplies every wall-clock limit, hard timeout and settling
// sleep of those tests: a sanitizer build (scripts/sanitize.sh sets 6) runs several times slower
// and is held to the same behaviour at its own speed. The figures the issues and docs state are
// the bounds at the default 1, which the normal build's tests enforce.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nkisim::testing {

// The factor in environment variable `name` (1 when unset); aborts the test binary with a
// message naming the variable unless it is a number in [1, 100].
inline double ScaleFromEnv(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (*end != '\0' || !(value >= 1.0 && value <= 100.0)) {
    std::fprintf(stderr, "%s='%s': must be a number in [1, 100]\n", name, text);
    std::abort();
  }
  return value;
}

inline double TimeScale() {
  static const double scale = ScaleFromEnv("NKISIM_TEST_TIME_SCALE");
  return scale;
}
// NKISIM_TEST_MEMORY_SCALE (default 1) likewise multiplies the per-process memory bounds (the
// bad-input suite's 200 MiB): a sanitizer's redzones, shadow and quarantine add to every process.
inline double MemoryScale() {
  static const double scale = ScaleFromEnv("NKISIM_TEST_MEMORY_SCALE");
  return scale;
}

inline double Scaled(double seconds) { return seconds * TimeScale(); }
inline int ScaledSeconds(int seconds) { return static_cast<int>(seconds * TimeScale() + 0.5); }
inline std::chrono::milliseconds ScaledMs(int64_t ms) {
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(ms) * TimeScale()));
}

}  // namespace nkisim::testing
