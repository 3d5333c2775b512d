// Runs a shell command for the CLI tests: stdout and stderr together, and the exit code (-1 when
// the process did not exit normally, e.g. a signal).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "tests/testing/time_scale.h"

namespace nkisim::testing {

struct CommandResult {
  int exit_code;
  std::string output;
};

// Runs `command` (through /bin/sh) under `timeout seconds` (scaled by NKISIM_TEST_TIME_SCALE,
// tests/testing/time_scale.h); "2>&1" is appended.
inline CommandResult RunCommand(const std::string& command, int timeout_seconds) {
  const std::string line =
      "timeout " + std::to_string(ScaledSeconds(timeout_seconds)) + " " + command + " 2>&1";
  FILE* pipe = popen(line.c_str(), "r");
  if (!pipe) return {-1, "popen failed: " + line};
  std::string output;
  std::array<char, 4096> chunk;
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) output.append(chunk.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace nkisim::testing
