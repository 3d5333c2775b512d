// One timing-only job of `nkisim predict`: the scenario's ranks as threads of this process over a
// LocalFabric, each running exactly what a rank of `nkisim run --timing-only` runs
// (RunRankPlans), with no supervisor, no progress output and no files; the report folded as
// `nkisim run` folds it (BuildReport). With a trace path, the ranks keep their trace events and
// the job's Chrome/Perfetto trace is written there as `nkisim run --trace` writes it
// (WriteRunTrace). Throws the first rank's error.
#pragma once

#include "model/scenario_config.h"
#include "proto/report.pb.h"

#include <string>

namespace nkisim::launcher {

proto::RunReport RunTimingJob(const ResolvedScenario& scenario, const std::string& trace_path = "");

}  // namespace nkisim::launcher
