#include "runtime/pe_throttle.h"

#include <algorithm>
#include <cmath>

namespace nkisim {

bool PeThrottles(const HardwareProfile& p) {
  return p.pe_throttle_start_fraction() > 0 && p.pe_throttle_start_fraction() < 1 &&
         p.pe_throttle_ramp_ns() > 0;
}

double RampedNs(double a, double slope_per_ns, double full_rate_ns) {
  if (a >= 1 || slope_per_ns <= 0) return full_rate_ns / std::max(a, 1e-9);
  const double ramp_left_ns = (1 - a) / slope_per_ns;
  const double work_in_ramp_ns = a * ramp_left_ns + slope_per_ns * ramp_left_ns * ramp_left_ns / 2;
  if (full_rate_ns >= work_in_ramp_ns) return ramp_left_ns + (full_rate_ns - work_in_ramp_ns);
  // slope/2 t^2 + a t = W
  return (-a + std::sqrt(a * a + 2 * slope_per_ns * full_rate_ns)) / slope_per_ns;
}

double PeThrottle::BusyNsSince(double since_ns) const {
  double busy = 0;
  for (const auto& [s, e] : busy_) busy += std::max(0.0, e - std::max(s, since_ns));
  return busy;
}

bool PeThrottle::Cold(const HardwareProfile& p, double start_ns) const {
  if (!warm_) return true;
  const double window = p.pe_throttle_window_ns();
  if (start_ns - ramp_start_ns_ < window) return false;  // still in its first window
  return BusyNsSince(start_ns - window) < p.pe_throttle_min_utilization() * window;
}

double PeThrottle::LimitAt(const HardwareProfile& p, double start_ns) const {
  if (!PeThrottles(p)) return 1.0;
  const double f0 = p.pe_throttle_start_fraction();
  if (Cold(p, start_ns)) return f0;
  const double progress = std::min(1.0, (start_ns - ramp_start_ns_) / p.pe_throttle_ramp_ns());
  return f0 + (1 - f0) * progress;
}

double PeThrottle::Run(const HardwareProfile& p, double start_ns, double full_rate_ns) {
  if (!PeThrottles(p)) return full_rate_ns;
  const double limit = LimitAt(p, start_ns);
  if (Cold(p, start_ns)) {
    warm_ = true;
    ramp_start_ns_ = start_ns;
  }
  const double slope = (1 - p.pe_throttle_start_fraction()) / p.pe_throttle_ramp_ns();
  const double ns = RampedNs(limit, slope, full_rate_ns);
  busy_.emplace_back(start_ns, start_ns + ns);
  const double keep_from = start_ns + ns - p.pe_throttle_window_ns();
  while (!busy_.empty() && busy_.front().second <= keep_from) busy_.pop_front();
  return ns;
}

}  // namespace nkisim
