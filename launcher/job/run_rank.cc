// The rank side of `nkisim run`: one MPI process, one logical core, the scenario's phases.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "collectives/communicator.h"
#include "launcher/control/client.h"
#include "launcher/control/server.h"
#include "launcher/scenarios/phase_runner.h"
#include "launcher/scenarios/workload.h"
#include "launcher/job/run_job.h"
#include "launcher/scenarios/scenario_config.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

// Peak resident set (VmHWM) of this process, in MiB.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

void AppendTrace(const LogicalCore& lnc, const std::string& scenario, proto::RankResult& result) {
  for (int c = 0; c < lnc.lnc(); ++c) {
    for (const InstructionRecord& r : lnc.core(c).timeline().records()) {
      proto::TraceEvent& e = *result.add_trace();
      e.set_name(r.name);
      e.set_core(static_cast<uint32_t>(c));
      e.set_engine(static_cast<uint32_t>(EngineIndex(r.engine)));
      e.set_start_ns(r.start_ns);
      e.set_end_ns(r.end_ns);
      e.set_bytes(r.bytes);
      e.set_flops(r.flops);
      e.set_operands(r.shapes.data());
      e.set_scenario(scenario);
    }
  }
}

std::pair<std::string, uint16_t> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    Raise(ErrorCode::kInvalidArgument, StrCat("--control: '", address, "' is not host:port"));
  }
  return {address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

// `text` with every byte that does not belong to a well-formed UTF-8 sequence replaced by '?'.
std::string ValidUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xC2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(text, i, n);
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

}  // namespace

int RunRank(const RunOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  MPI_Init(nullptr, nullptr);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // Started by a plain mpirun: rank 0 serves the control plane and supervises from a thread.
  std::unique_ptr<control::Server> server;
  std::thread supervisor;
  int supervisor_code = 0;
  std::string address = o.control;
  if (address.empty()) {
    char buffer[256] = {};
    if (rank == 0) {
      try {
        const ResolvedScenario sc = LoadScenario(o.config);
        server = std::make_unique<control::Server>(sc.spec.control().host(),
                                                   static_cast<uint16_t>(sc.spec.control().port()));
        std::snprintf(buffer, sizeof buffer, "%s:%u", server->host().c_str(), server->port());
        supervisor = std::thread([&o, sc, &server, &supervisor_code, start] {
          supervisor_code = Supervise(o, sc, *server, nullptr, start);
          // Failed: end this process, which makes mpirun end every rank.
          if (supervisor_code != 0 && supervisor_code != 1) {
            std::fflush(nullptr);
            std::_Exit(supervisor_code);
          }
        });
      } catch (const Error& e) {
        std::fprintf(stderr, "nkisim: %s: %s\n", ErrorCodeName(e.code()), e.what());
        MPI_Abort(MPI_COMM_WORLD, ExitCodeFor(e.code()));
      }
    }
    MPI_Bcast(buffer, sizeof buffer, MPI_CHAR, 0, MPI_COMM_WORLD);
    address = buffer;
  }
  const auto [host, port] = SplitAddress(address);
  control::Client client(host, port, rank);
  std::unique_ptr<PhaseRunner> runner;
  try {
    const ResolvedScenario sc = LoadScenario(o.config);
    proto::RankMessage hello;
    hello.mutable_hello()->set_world_size(static_cast<uint32_t>(world));
    hello.mutable_hello()->set_pid(static_cast<uint32_t>(::getpid()));
    client.Send(hello);
    client.StartHeartbeat(
        std::chrono::milliseconds(static_cast<int64_t>(sc.spec.control().heartbeat_s() * 1000)),
        collectives::CollectiveInProgress);
    proto::RankResult result;
    SharedInputs shared;
    const WorkloadInfo& workload = FindWorkload(sc.workload);
    const double steps = sc.workload == Workload::kDecode ? sc.spec.steps() : 1;
    for (const ResolvedPlan& plan : sc.plans) {
      const auto plan_start = std::chrono::steady_clock::now();
      LogicalCore lnc(plan.lnc, sc.profile, rank);
      collectives::RankContext ctx(MPI_COMM_WORLD, plan.topology, lnc);
      runner = std::make_unique<PhaseRunner>([&client](const proto::RankMessage& m) { client.Send(m); },
                                             lnc, rank, plan.name, sc.spec, result);
      PlanRun run{sc, plan, ctx, *runner, shared, result};
      const ScenarioFootprint footprint = workload.run(run);
      (*result.mutable_kv_cache_bytes())[plan.name] = footprint.kv_cache_bytes;
      (*result.mutable_weight_bytes())[plan.name] = footprint.weight_bytes;
      (*result.mutable_step_sim_ns())[plan.name] = lnc.now() / steps;
      (*result.mutable_host_ms())[plan.name] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - plan_start).count();
      AppendTrace(lnc, plan.name, result);
      runner.reset();
    }
    result.set_peak_rss_mib(PeakRssMib());
    proto::RankMessage done;
    *done.mutable_result() = std::move(result);
    client.Send(done);
    client.StopHeartbeat();
    if (supervisor.joinable()) supervisor.join();
  } catch (const Error& e) {
    proto::RankMessage m;
    m.mutable_error()->set_phase(runner ? runner->current() : "");
    // proto3 strings must be UTF-8 or the launcher cannot parse the message (and would report a
    // dead rank instead of this error): bytes of a path or value that are not become '?'.
    m.mutable_error()->set_message(ValidUtf8(StrCat(ErrorCodeName(e.code()), ": ", e.what())));
    m.mutable_error()->set_code(static_cast<uint32_t>(e.code()));
    client.Send(m);
    std::fprintf(stderr, "nkisim: rank %d: %s: %s\n", rank, ErrorCodeName(e.code()), e.what());
    MPI_Abort(MPI_COMM_WORLD, ExitCodeFor(e.code()));
  }
  MPI_Finalize();
  return supervisor_code;
}

}  // namespace nkisim::launcher
