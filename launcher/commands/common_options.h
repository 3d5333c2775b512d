// The flags several commands share: --profile, --seed, --lnc and --trace, registered in one place
// so that each means the same, validates the same and shows its default the same way everywhere.
// A command picks the ones it takes; a flag whose help must say more for that command (e.g. "per
// rank in the measured runs") gets its description replaced through the returned handle.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/hardware_profile.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace nkisim::launcher {

struct CommonOptions {
  std::string profile_path;  // --profile; empty: the built-in trn2
  uint64_t seed = 1;         // --seed: of the counter-based input generator
  int lnc = 2;               // --lnc: physical cores per logical core, 1 or 2
  std::string trace_path;    // --trace: Chrome/Perfetto trace output; empty: none
  bool timing_only = false;  // --timing-only: clocks only, no values (runtime/sim_mode.h)
};

// Which of the common flags a command takes (bitwise or).
enum CommonFlag : unsigned {
  kProfileFlag = 1u << 0,
  kSeedFlag = 1u << 1,
  kLncFlag = 1u << 2,
  kTraceFlag = 1u << 3,
  kTimingOnlyFlag = 1u << 4,
};

// The registered options (nullptr for a flag not taken).
struct CommonOptionHandles {
  CLI::Option* profile = nullptr;
  CLI::Option* seed = nullptr;
  CLI::Option* lnc = nullptr;
  CLI::Option* trace = nullptr;
  CLI::Option* timing_only = nullptr;
};

// Registers the `flags` of `cmd`, writing into *options (which must outlive cmd's parse). The
// flags taken start at `defaults`, which --help shows (--profile shows none: empty is trn2).
//   --profile PATH  "hardware profile (text proto, merged over trn2); default: built-in trn2"
//   --seed N        "seed of the random inputs"
//   --lnc {1,2}     "physical cores per logical core"
//   --trace PATH    "Chrome/Perfetto trace output ('' for none)"
//   --timing-only   "advance the clocks only: compute, move and check no values"
CommonOptionHandles AddCommonOptions(CLI::App* cmd, CommonOptions* options, unsigned flags,
                                     const CommonOptions& defaults);

// The profile --profile names, merged over trn2; the built-in trn2 when it names none. Throws
// Error(kBadConfig) naming the file when it cannot be read or parsed.
HardwareProfile LoadProfile(const CommonOptions& options);

// Sets the process's simulation mode from --timing-only (runtime/sim_mode.h) and prints it when
// timing-only. `check` is the command's request to compare values with a golden: refused with
// --timing-only (Error(kInvalidArgument) naming both flags), since no values are computed.
void ApplySimMode(const char* command, const CommonOptions& options, bool check);

}  // namespace nkisim::launcher
