#include "serving/capacity.h"

#include "runtime/error.h"

namespace nkisim::serving {

CapacityResult FindMaxRate(const std::function<Metrics(double)>& run, const Slo& slo, double start_rate,
                           double relative_tolerance, int max_points,
                           const std::function<void(const RatePoint&)>& progress) {
  if (!(start_rate > 0)) Raise(ErrorCode::kBadConfig, StrCat("--request-rate: ", start_rate, ": must be > 0"));
  CapacityResult out;
  auto eval = [&](double rate) {
    RatePoint p{rate, run(rate), false};
    p.meets = MeetsSlo(p.metrics, slo);
    out.points.push_back(p);
    if (progress) progress(p);
    return p.meets;
  };
  double lo = 0, hi = 0;  // lo meets (0: none found), hi fails (0: none found)
  if (eval(start_rate)) {
    lo = start_rate;
    while (static_cast<int>(out.points.size()) < max_points) {
      if (!eval(lo * 2)) {
        hi = lo * 2;
        break;
      }
      lo *= 2;
    }
  } else {
    hi = start_rate;
    while (static_cast<int>(out.points.size()) < max_points && hi > start_rate * 1e-6) {
      if (eval(hi / 2)) {
        lo = hi / 2;
        break;
      }
      hi /= 2;
    }
  }
  while (lo > 0 && hi > 0 && (hi - lo) > relative_tolerance * hi &&
         static_cast<int>(out.points.size()) < max_points) {
    const double mid = 0.5 * (lo + hi);
    (eval(mid) ? lo : hi) = mid;
  }
  out.max_rate = lo;
  return out;
}

}  // namespace nkisim::serving
