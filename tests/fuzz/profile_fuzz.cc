// Fuzz target: hardware profiles (ParseHardwareProfile: merged over trn2, then validated). An
// accepted profile is then used as a rank and `nkisim calibrate` use it: an 8-rank placement, an
// all_reduce priced on it, and the text `calibrate` writes for it, which must load back.
#include "collectives/calibration.h"
#include "collectives/collective_cost.h"
#include "runtime/hardware_profile.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  const std::string text = nkisim::fuzz::Text(data, size);
  nkisim::HardwareProfile profile;
  bool accepted = false;
  nkisim::fuzz::Guarded("ParseHardwareProfile", [&] {
    profile = nkisim::ParseHardwareProfile(text, nkisim::fuzz::kSource);
    accepted = true;
  });
  if (!accepted) return 0;
  (void)nkisim::PeakBf16Tflops(profile);
  nkisim::fuzz::Guarded("PlanCollective on an accepted profile", [&] {
    namespace c = nkisim::collectives;
    for (int lnc : {1, 2}) {
      const c::GroupPlacement placement = c::DefaultPlacement(8, lnc, profile);
      for (c::CollectiveOp op : {c::CollectiveOp::kAllGather, c::CollectiveOp::kAllReduce,
                                 c::CollectiveOp::kReduceScatter, c::CollectiveOp::kAllToAll}) {
        (void)c::PlanCollective(op, placement, 1 << 20, profile, "auto", c::Launch::kHost);
      }
    }
  });
  // `nkisim calibrate` writes FormatProfileText and loads it back: that must succeed.
  const std::string written = nkisim::collectives::FormatProfileText(profile, "fuzz");
  try {
    (void)nkisim::ParseHardwareProfile(written, "written profile");
  } catch (const nkisim::Error& e) {
    nkisim::fuzz::Finding(nkisim::StrCat("an accepted profile, written by FormatProfileText, does "
                                         "not load back: ",
                                         e.what()));
  }
  return 0;
}
