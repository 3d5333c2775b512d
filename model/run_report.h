// The report of `nkisim run`: folds every rank's result into per-phase summaries (slowest rank's
// times, largest errors, summed bytes), prints them with units, writes the JSON report and the
// Chrome trace of all ranks (one process per rank and scenario, one thread per core and engine).
#pragma once

#include <map>
#include <string>

#include "model/scenario_config.h"
#include "proto/control.pb.h"
#include "proto/report.pb.h"

namespace nkisim::launcher {

// timing_only: the ranks ran --timing-only; the report says nothing was checked and compares no
// plan outputs. in_process: the ranks were threads of one process, so their RSS and page faults
// are that process's: no summed RSS and no per-phase fresh bytes.
proto::RunReport BuildReport(const ResolvedScenario& scenario,
                             const std::map<int, proto::RankResult>& results, double wall_s,
                             bool timing_only = false, bool in_process = false);
std::string FormatReport(const proto::RunReport& report);
// Throws Error(kBadConfig) naming the path when it cannot be written.
void WriteReportJson(const proto::RunReport& report, const std::string& path);
void WriteRunTrace(const ResolvedScenario& scenario,
                   const std::map<int, proto::RankResult>& results, const std::string& path);

}  // namespace nkisim::launcher
