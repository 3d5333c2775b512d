// TensorE current-ramp throttling (tools/neuron-explorer/overview-summary-page.rst l.131; Trn2 and
// Trn3): the PE's rate limit is a state of the engine, built from its utilization history. A cold
// PE runs at pe_throttle_start_fraction of its full rate; from the start of a burst the limit
// rises linearly to 1 over pe_throttle_ramp_ns; when the PE's busy time over the last
// pe_throttle_window_ns falls below pe_throttle_min_utilization of that window (an idle gap, or
// sparse work), it is cold again and the next instruction starts a new ramp.
#pragma once

#include <deque>
#include <utility>

#include "runtime/hardware_profile.h"

namespace nkisim {

class PeThrottle {
 public:
  // The wall time of an instruction starting at start_ns that takes full_rate_ns at full rate,
  // under the limit; records its busy interval [start_ns, start_ns + result).
  double Run(const HardwareProfile& p, double start_ns, double full_rate_ns);
  // The limit (fraction of the full rate) an instruction starting at start_ns would see, without
  // recording anything. 1 when the profile has no throttling.
  double LimitAt(const HardwareProfile& p, double start_ns) const;

 private:
  bool Cold(const HardwareProfile& p, double start_ns) const;
  double BusyNsSince(double since_ns) const;

  bool warm_ = false;
  double ramp_start_ns_ = 0;
  std::deque<std::pair<double, double>> busy_;  // [start, end) of recent instructions, in order
};

// True when the profile throttles the PE (0 < pe_throttle_start_fraction < 1).
bool PeThrottles(const HardwareProfile& p);
// Wall time of full_rate_ns of work starting at limit `a`, rising at `slope_per_ns` to 1:
// the integral of the limit over the result equals full_rate_ns.
double RampedNs(double a, double slope_per_ns, double full_rate_ns);

}  // namespace nkisim
