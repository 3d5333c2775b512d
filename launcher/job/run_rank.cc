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
#include "model/phase_runner.h"
#include "model/workload.h"
#include "model/rank_plans.h"
#include "launcher/job/run_job.h"
#include "model/scenario_config.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

std::pair<std::string, uint16_t> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    Raise(ErrorCode::kInvalidArgument, StrCat("--control: '", address, "' is not host:port"));
  }
  return {address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

// Under a plain mpirun the supervisor thread of rank 0 decides the job's exit code from the
// first classified failure and ends rank 0 with it, which makes mpirun end the rest. A failed rank
// therefore reports and waits this long before aborting with its own code, so that mpirun never
// sees a later symptom first (a control-plane send that fails because rank 0 is already gone).
constexpr auto kSupervisorGrace = std::chrono::seconds(10);

// Reports the error (when the control plane is still there) and ends the job.
[[noreturn]] void FailRank(control::Client* client, const std::string& phase, const Error& e,
                           int rank, bool plain_mpirun) {
  if (client != nullptr) {
    proto::RankMessage m;
    m.mutable_error()->set_phase(phase);
    // proto3 strings must be UTF-8 or the launcher cannot parse the message (and would report a
    // dead rank instead of this error): bytes of a path or value that are not become '?'.
    m.mutable_error()->set_message(ValidUtf8(StrCat(ErrorCodeName(e.code()), ": ", e.what())));
    m.mutable_error()->set_code(static_cast<uint32_t>(e.code()));
    try {
      client->Send(m);
    } catch (const Error&) {
      // The launcher is gone: it has already decided how the job ends.
    }
  }
  std::fprintf(stderr, "nkisim: rank %d: %s: %s\n", rank, ErrorCodeName(e.code()), e.what());
  std::fflush(stderr);
  if (plain_mpirun) std::this_thread::sleep_for(kSupervisorGrace);
  MPI_Abort(MPI_COMM_WORLD, ExitCodeFor(e.code()));
  std::_Exit(ExitCodeFor(e.code()));  // MPI_Abort does not return
}

}  // namespace

int RunRank(const RunOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  SetSimMode(o.timing_only ? SimMode::kTimingOnly : SimMode::kFunctional);
  SetRankMemoryPolicy();  // runtime/host_memory.h: reuse freed buffers within a phase
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
  const bool plain_mpirun = o.control.empty();
  std::unique_ptr<control::Client> client;
  std::string phase;
  try {
    const auto [host, port] = SplitAddress(address);
    client = std::make_unique<control::Client>(host, port, rank);
    const ResolvedScenario sc = LoadScenario(o.config);
    proto::RankMessage hello;
    hello.mutable_hello()->set_world_size(static_cast<uint32_t>(world));
    hello.mutable_hello()->set_pid(static_cast<uint32_t>(::getpid()));
    client->Send(hello);
    client->StartHeartbeat(
        std::chrono::milliseconds(static_cast<int64_t>(sc.spec.control().heartbeat_s() * 1000)),
        collectives::CollectiveInProgress);
    proto::RankResult result = RunRankPlans(
        sc, rank,
        [](const collectives::ResolvedTopology& topology, LogicalCore& lnc) {
          return std::make_unique<collectives::RankContext>(MPI_COMM_WORLD, topology, lnc);
        },
        [&client](const proto::RankMessage& m) { client->Send(m); }, &phase, !o.trace.empty());
    result.set_peak_rss_mib(PeakRssMib());
    proto::RankMessage done;
    *done.mutable_result() = std::move(result);
    client->Send(done);
    client->StopHeartbeat();
    if (supervisor.joinable()) supervisor.join();
  } catch (const Error& e) {
    FailRank(client.get(), phase, e, rank, plain_mpirun);
  }
  MPI_Finalize();
  return supervisor_code;
}

}  // namespace nkisim::launcher
