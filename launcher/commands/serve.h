// `nkisim serve` (docs/serving.md): a request trace or generated load served by R data-parallel
// replicas of one plan, each a vLLM-style scheduler over the plan's step-cost table built once
// from predict's simulation (or read back from --step-costs); TTFT / TPOT / e2e percentiles,
// throughput and goodput under SLOs, per-request CSV, plots, and --find-max-rate.
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

void AddServeCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
