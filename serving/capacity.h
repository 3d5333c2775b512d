// `nkisim serve --find-max-rate`: the highest request rate whose run meets the SLOs, by
// bracketing then bisection; each point a full simulation (`run`). Pure given `run`.
#pragma once

#include <functional>
#include <vector>

#include "serving/metrics.h"

namespace nkisim::serving {

struct RatePoint {
  double request_rate = 0;
  Metrics metrics;
  bool meets = false;
};

struct CapacityResult {
  double max_rate = 0;  // the highest rate found meeting the SLOs; 0 when even the lowest tried fails
  std::vector<RatePoint> points;  // in the order run
};

// REQUIRES start_rate > 0, 0 < relative_tolerance < 1, max_points >= 2. Doubles (or halves) from
// start_rate until the SLO verdict changes, then bisects until the bracket [meets, fails] is
// narrower than relative_tolerance of its top, or max_points runs. `progress` (may be empty) is
// called after each point.
CapacityResult FindMaxRate(const std::function<Metrics(double)>& run, const Slo& slo, double start_rate,
                           double relative_tolerance, int max_points,
                           const std::function<void(const RatePoint&)>& progress = {});

}  // namespace nkisim::serving
