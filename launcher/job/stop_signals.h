// While a StopSignals lives, SIGINT, SIGTERM and SIGHUP are recorded instead of ending the
// process, so a launcher can stop what it started (mpirun and its ranks, a sweep's `nkisim run`,
// each in a process group of its own that the terminal's Ctrl-C does not reach), keep what it has
// and exit 128 + the signal. The previous handlers come back when it dies.
//
// Thread safety: one StopSignals at a time per process; Received() may be read from any thread.
#pragma once

#include <array>
#include <csignal>

namespace nkisim::launcher {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The last signal received since construction, 0 when none.
  static int Received();

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

}  // namespace nkisim::launcher
