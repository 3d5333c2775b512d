// Runs the phases of a scenario on one rank: tells the launcher when each starts and ends,
// measures its simulated time (the rank's clock), host time and bytes moved, checks its output
// against the golden with the phase's tolerance, and injects the scenario's test fault.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/reference/compare.h"
#include "proto/control.pb.h"
#include "proto/scenario.pb.h"
#include "runtime/logical_core.h"

namespace nkisim::launcher {

// What a phase hands back for checking, twice:
//   * against its plain reference applied to its own (simulated) inputs, at the phase's
//     tolerance: its output and that golden, flattened alike; or, for an output too large to hold
//     twice, `check`, which the runner calls with the phase's tolerance instead (it compares in
//     blocks through a reference::StreamingCompare and returns the result);
//   * against the golden of the whole layer chain (golden_chain.h): `chain`, called with the
//     scenario's chain_tolerance (absent in timing-only runs);
// or `both`, which makes the two comparisons in one pass (one reference call on the simulated and
// the golden rows stacked) and is called with both tolerances instead.
struct PhaseOutput {
  using Check = std::function<reference::Comparison(const reference::Tolerance&)>;
  std::vector<float> actual;
  std::vector<double> golden;
  Check check;
  Check chain;
  std::function<std::pair<reference::Comparison, reference::Comparison>(
      const reference::Tolerance& local, const reference::Tolerance& chain)>
      both;
};

// Where the runner reports progress: the control-plane client in a job, a recorder in tests.
using ProgressSink = std::function<void(const proto::RankMessage&)>;

class PhaseRunner {
 public:
  // `scenario` names the plan; `spec` gives the tolerances (a phase "qkv[2]", step 2 of a
  // multi-step decode, uses those of "qkv") and the fault to inject.
  PhaseRunner(ProgressSink sink, LogicalCore& lnc, int rank, std::string scenario,
              const proto::Scenario& spec, proto::RankResult& result);

  // Runs `body` as phase `name`; the phase passes when both of its checks do. Throws what the
  // body throws (after the fault, if any, fires).
  void Run(const std::string& name, const std::function<PhaseOutput()>& body);
  // Whether the scenario's CORRUPT_INPUT fault targets phase `name` on this rank: then the
  // workload hands the phase a corrupted input (CorruptedInput, workload.h).
  bool CorruptsInput(const std::string& name) const;
  // The phase now running as "scenario/phase" ("" between phases), for error reports.
  std::string current() const { return current_.empty() ? "" : scenario_ + "/" + current_; }

 private:
  void InjectFault(const std::string& phase);
  void Progress(const std::string& phase, bool done);

  ProgressSink sink_;
  LogicalCore& lnc_;
  int rank_;
  std::string scenario_;
  const proto::Scenario& spec_;
  proto::RankResult& result_;
  std::string current_;
};

// Ranks that run as threads of one process (the in-process timing-only job, model/timing_job.h)
// share its heap, and the return of free heap after every phase (runtime/host_memory.h, sized
// for a process holding one rank) then trims the whole process's heap at every phase of every
// rank: the pages come back as page faults in the next phase. While an InProcessRanks lives,
// phases leave the heap alone; the last one to end returns the free heap once. The job's peak
// is unchanged (its phases reuse what the earlier ones freed); measured on `nkisim serve`'s
// step-cost table of Llama-3.3-70B TP 64 (24 jobs of 64 ranks; three runs each, alternating, on a
// loaded 2-core VM): 23.9-24.5 s of CPU before, 17.1-17.5 s after, 187-198 MiB peak both.
// Thread-safe; nests (several jobs at once).
class InProcessRanks {
 public:
  InProcessRanks();
  ~InProcessRanks();
  InProcessRanks(const InProcessRanks&) = delete;
  InProcessRanks& operator=(const InProcessRanks&) = delete;
};

// Bytes moved by DMA, the intra-LNC link and collectives on every core so far (kept records or
// not).
int64_t MovedBytes(const LogicalCore& lnc);
// The collectives of core 0's records from index `first_record` on (collectives record there)
// and their algorithms, "all_reduce:mesh,all_gather:rdh".
std::string AlgorithmsSince(const LogicalCore& lnc, size_t first_record);

}  // namespace nkisim::launcher
