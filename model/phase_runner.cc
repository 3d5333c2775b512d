#include "model/phase_runner.h"
#include "model/scenario_config.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kernels/reference/compare.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"

namespace nkisim::launcher {
namespace {

// The InProcessRanks alive: phases return free heap only when none is.
std::atomic<int> in_process_scopes{0};

}  // namespace

InProcessRanks::InProcessRanks() { ++in_process_scopes; }

InProcessRanks::~InProcessRanks() {
  if (--in_process_scopes == 0) ReturnFreeHeap();
}

PhaseRunner::PhaseRunner(ProgressSink sink, LogicalCore& lnc, int rank, std::string scenario,
                         const proto::Scenario& spec, proto::RankResult& result)
    : sink_(std::move(sink)), lnc_(lnc), rank_(rank), scenario_(std::move(scenario)), spec_(spec),
      result_(result) {}

int64_t MovedBytes(const LogicalCore& lnc) {
  int64_t bytes = 0;
  for (int c = 0; c < lnc.lnc(); ++c) bytes += lnc.core(c).timeline().moved_bytes();
  return bytes;
}

std::string AlgorithmsSince(const LogicalCore& lnc, size_t first_record) {
  std::string out;
  const auto& records = lnc.core(0).timeline().records();
  for (size_t i = first_record; i < records.size(); ++i) {
    if (records[i].engine != Engine::kCollective) continue;
    const std::string operands(records[i].shapes.data());
    if (operands.rfind("algorithm=", 0) != 0) continue;
    // "algorithm=mesh launch=in_graph [...]" -> "all_reduce:mesh@in_graph".
    const size_t end = operands.find(' ');
    const std::string name = operands.substr(10, end - 10);
    std::string launch;
    if (end != std::string::npos && operands.compare(end + 1, 7, "launch=") == 0) {
      launch = "@" + operands.substr(end + 8, operands.find(' ', end + 1) - end - 8);
    }
    const std::string entry = StrCat(records[i].name, ":", name, launch);
    if (out.find(entry) == std::string::npos) out += (out.empty() ? "" : ",") + entry;
  }
  return out;
}

namespace {

// Minor page faults of the whole process so far (every thread: the kernels run on the cores'
// threads). Ranks that are threads of one process share them, so their reports leave fresh bytes
// out (run_report.cc) and the count is not taken: getrusage sums every thread of the process,
// 2% of `nkisim serve`'s 70B step-cost table.
int64_t MinorFaults() {
  if (in_process_scopes.load() > 0) return 0;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

}  // namespace

void PhaseRunner::Progress(const std::string& phase, bool done) {
  proto::RankMessage m;
  m.mutable_progress()->set_scenario(scenario_);
  m.mutable_progress()->set_phase(phase);
  m.mutable_progress()->set_done(done);
  sink_(m);
}

bool PhaseRunner::CorruptsInput(const std::string& name) const {
  const proto::Fault& f = spec_.fault();
  return f.kind() == proto::Fault::CORRUPT_INPUT && static_cast<int>(f.rank()) == rank_ &&
         (f.phase() == name || f.phase() == PhaseBase(name));
}

void PhaseRunner::InjectFault(const std::string& phase) {
  const proto::Fault& f = spec_.fault();
  if (f.kind() == proto::Fault::NONE || static_cast<int>(f.rank()) != rank_ ||
      (f.phase() != phase && f.phase() != PhaseBase(phase))) {
    return;
  }
  switch (f.kind()) {
    case proto::Fault::THROW:
      Raise(ErrorCode::kInternal, StrCat("injected fault: rank ", rank_, " throws in phase ", phase));
    case proto::Fault::KILL:
      ::raise(SIGKILL);
      break;
    case proto::Fault::STALL:  // hangs with its heartbeat still beating, as a deadlock would
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    default:
      break;
  }
}

void PhaseRunner::Run(const std::string& name, const std::function<PhaseOutput()>& body) {
  current_ = name;
  Progress(name, false);
  // Collectives are recorded on core 0 (collectives.cc), so only its records are looked at.
  const size_t first_record = lnc_.core(0).timeline().records().size();
  const int64_t moved_start = MovedBytes(lnc_);
  const double sim_start = lnc_.now();
  const auto host_start = std::chrono::steady_clock::now();
  const int64_t faults_start = MinorFaults();
  InjectFault(name);
  PhaseOutput out = body();

  const auto tol = spec_.tolerances().find(PhaseBase(name));
  const reference::Tolerance tolerance =
      tol == spec_.tolerances().end() ? reference::Tolerance{0, 0}
                                      : reference::Tolerance{tol->second.atol(), tol->second.rtol()};
  const reference::Tolerance chain_tolerance{spec_.chain_tolerance().atol(),
                                             spec_.chain_tolerance().rtol()};
  std::pair<reference::Comparison, reference::Comparison> both;
  if (out.both) {
    both = out.both(tolerance, chain_tolerance);
  } else {
    both.first = out.check ? out.check(tolerance) : reference::Compare(out.actual, out.golden, tolerance);
    if (out.chain) both.second = out.chain(chain_tolerance);
  }
  const reference::Comparison& check = both.first;
  const reference::Comparison& chain = both.second;
  // Host time includes the check: a streamed check computes its golden there.
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
  proto::PhaseResult& r = *result_.add_phases();
  r.set_scenario(scenario_);
  r.set_phase(name);
  r.set_bound(check.bound);
  r.set_elements(check.elements);
  r.set_failures(check.failures);
  r.set_max_abs_error(check.max_abs_error);
  r.set_max_rel_error(check.max_rel_error);
  r.set_chain_max_abs_error(chain.max_abs_error);
  r.set_chain_bound(chain.bound);
  r.set_chain_failures(chain.failures);
  r.set_sim_ns(lnc_.now() - sim_start);
  r.set_start_ns(sim_start);
  r.set_end_ns(lnc_.now());
  r.set_host_ms(host_ms);
  r.set_fresh_bytes((MinorFaults() - faults_start) * static_cast<int64_t>(::sysconf(_SC_PAGESIZE)));
  r.set_bytes_moved(MovedBytes(lnc_) - moved_start);
  r.set_algorithm(AlgorithmsSince(lnc_, first_record));
  Progress(name, true);
  current_.clear();
  // The phase's buffers are free now: keep a little of the heap for reuse, not the phase's peak.
  out = PhaseOutput();
  if (in_process_scopes.load() == 0) ReturnFreeHeap();
}

}  // namespace nkisim::launcher
