#include "runtime/sim_mode.h"

#include <atomic>
#include <cstdio>

namespace nkisim {
namespace {

std::atomic<SimMode> g_mode{SimMode::kFunctional};

}  // namespace

void SetSimMode(SimMode mode) { g_mode.store(mode, std::memory_order_relaxed); }
SimMode CurrentSimMode() { return g_mode.load(std::memory_order_relaxed); }
bool Functional() { return CurrentSimMode() == SimMode::kFunctional; }

const char* SimModeName(SimMode mode) {
  return mode == SimMode::kFunctional ? "functional" : "timing-only";
}

void PrintTimingOnlyBanner(const std::string& how) {
  std::printf("mode: timing-only (clocks advance as in the functional mode; no values are "
              "computed, moved or checked)%s\n", how.c_str());
}

ScopedSimMode::ScopedSimMode(SimMode mode) : previous_(CurrentSimMode()) { SetSimMode(mode); }
ScopedSimMode::~ScopedSimMode() { SetSimMode(previous_); }

}  // namespace nkisim
