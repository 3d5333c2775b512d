// One timing-only job of `nkisim predict`: the scenario's ranks as threads of this process over a
// LocalFabric, each running exactly what a rank of `nkisim run --timing-only` runs
// (RunRankPlans), with no supervisor, no progress output and no files; the report folded as
// `nkisim run` folds it (BuildReport). Throws the first rank's error.
#pragma once

#include "launcher/scenarios/scenario_config.h"
#include "proto/report.pb.h"

namespace nkisim::launcher {

proto::RunReport RunTimingJob(const ResolvedScenario& scenario);

}  // namespace nkisim::launcher
