#include "launcher/commands/common_options.h"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {

CommonOptionHandles AddCommonOptions(CLI::App* cmd, CommonOptions* o, unsigned flags,
                                     const CommonOptions& defaults) {
  CommonOptionHandles h;
  if (flags & kLncFlag) {
    o->lnc = defaults.lnc;
    h.lnc = cmd->add_option("--lnc", o->lnc, "physical cores per logical core")
                ->check(CLI::IsMember({1, 2}))
                ->capture_default_str();
  }
  if (flags & kSeedFlag) {
    o->seed = defaults.seed;
    h.seed = cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  }
  if (flags & kProfileFlag) {
    o->profile_path = defaults.profile_path;
    h.profile = cmd->add_option(
        "--profile", o->profile_path,
        "hardware profile (text proto, merged over trn2); default: built-in trn2");
  }
  if (flags & kTraceFlag) {
    o->trace_path = defaults.trace_path;
    h.trace = cmd->add_option("--trace", o->trace_path,
                              "Chrome/Perfetto trace output ('' for none)")
                  ->capture_default_str();
  }
  if (flags & kTimingOnlyFlag) {
    o->timing_only = defaults.timing_only;
    h.timing_only = cmd->add_flag(
        "--timing-only", o->timing_only,
        "advance the clocks only: compute, move and check no values (same simulated times)");
  }
  return h;
}

HardwareProfile LoadProfile(const CommonOptions& o) {
  return o.profile_path.empty() ? Trn2Profile() : LoadHardwareProfile(o.profile_path);
}

void ApplySimMode(const char* command, const CommonOptions& o, bool check) {
  if (o.timing_only && check) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(command, ": --check and --timing-only exclude each other: timing-only computes no ",
                 "values to compare"));
  }
  SetSimMode(o.timing_only ? SimMode::kTimingOnly : SimMode::kFunctional);
  if (o.timing_only) PrintTimingOnlyBanner();
}

}  // namespace nkisim::launcher
