// Starting the ranks of a job: the mpirun command line this machine needs, and the running job
// (Boost.Process, in its own process group so that stopping it stops every rank).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nkisim::launcher {

struct MpirunOptions {
  std::string mpirun = "mpirun";
  int ranks = 1;
  std::string hostfile;            // passed through when set
  bool as_root = false;            // adds --allow-run-as-root
  int host_cores = 1;              // adds --oversubscribe when ranks exceed it (single host)
  std::vector<std::string> rank_command;  // program and arguments every rank runs
};

// The argv of mpirun for these options, e.g. {"mpirun", "--allow-run-as-root",
// "--oversubscribe", "-n", "64", "/path/nkisim", "run", ...}.
std::vector<std::string> MpirunCommand(const MpirunOptions& options);

// True when this process is a rank started by mpirun (Open MPI or PMIx environment).
bool RunningUnderMpirun();

// This executable's path (/proc/self/exe; "nkisim" when it cannot be read): what the launcher
// starts as ranks and the sweep as its jobs.
std::string SelfExecutable();

class Job {
 public:
  // Starts argv[0] (looked up on PATH) with the rest as arguments. Throws Error(kBadConfig)
  // naming the program when it cannot be started.
  explicit Job(const std::vector<std::string>& argv);
  ~Job();  // stops the job if it still runs
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // The exit code once the job has ended (128 + signal when killed by a signal).
  std::optional<int> Poll();
  // Waits up to `limit` for the job to end by itself; true when it has.
  bool WaitFor(std::chrono::milliseconds limit);
  // SIGTERM to the whole process group, then SIGKILL after `grace`; waits for the end. When
  // mpirun has already exited, SIGKILL to what is left of its group (ranks it left behind).
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(2));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nkisim::launcher
