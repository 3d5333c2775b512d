#include "runtime/sim_mode.h"

#include <atomic>

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

ScopedSimMode::ScopedSimMode(SimMode mode) : previous_(CurrentSimMode()) { SetSimMode(mode); }
ScopedSimMode::~ScopedSimMode() { SetSimMode(previous_); }

}  // namespace nkisim
