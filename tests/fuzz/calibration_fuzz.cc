// Fuzz target: nccom-test logs as `nkisim calibrate` reads them (ParseNccomTestLog), and the fit
// (Calibrate) over the rows of an accepted log, as the command runs it.
#include "collectives/calibration.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  const std::string text = nkisim::fuzz::Text(data, size);
  nkisim::fuzz::Guarded("ParseNccomTestLog/Calibrate", [&] {
    namespace c = nkisim::collectives;
    const c::NccomTestLog log = c::ParseNccomTestLog(text, nkisim::fuzz::kSource);
    if (log.rows.empty() || log.rows.size() > 64) return;  // Calibrate refuses none; bound the time
    c::CalibrationOptions options;
    options.logs = {nkisim::fuzz::kSource};
    (void)c::Calibrate(log.rows, nkisim::Trn2Profile(), options);
  });
  return 0;
}
