// Functional or timing-only simulation. In the functional mode (the default) every instruction,
// DMA, core-to-core transfer and collective computes its values and moves its payload; in the
// timing-only mode they validate their operands and advance the clocks exactly as they would,
// but compute no tile values and move no payloads. The cost model never looks at data, so the
// simulated times of the two modes are identical (tests/runtime/timing_only_test.cc and
// tests/launcher/timing_only_e2e_test.cc compare them event for event).
//
// What timing-only skips besides the arithmetic: the checks that read values (an index in range
// for gather_flattened and dma_scatter_add, a dynamic DMA offset read from HBM, which counts as 0).
//
// The mode is process-wide: set it once before any kernel runs (the launcher does so from
// --timing-only). Reading it is a relaxed atomic load, cheap enough for every instruction.
#pragma once

#include <string>

namespace nkisim {

enum class SimMode { kFunctional, kTimingOnly };

void SetSimMode(SimMode mode);
SimMode CurrentSimMode();
// True in the functional mode: compute values and move payloads.
bool Functional();
const char* SimModeName(SimMode mode);  // "functional", "timing-only"
// The line a command prints when it runs timing-only:
// "mode: timing-only (clocks advance as in the functional mode; no values are computed, moved or
// checked)"; `how` (e.g. "; 64 ranks as threads of this process") is appended before the newline.
void PrintTimingOnlyBanner(const std::string& how = "");

// Sets the mode for a scope and restores the previous one (tests that run both modes).
class ScopedSimMode {
 public:
  explicit ScopedSimMode(SimMode mode);
  ~ScopedSimMode();
  ScopedSimMode(const ScopedSimMode&) = delete;
  ScopedSimMode& operator=(const ScopedSimMode&) = delete;

 private:
  SimMode previous_;
};

}  // namespace nkisim
