#include "launcher/commands/python.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "launcher/job/mpirun.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

void PrependPath(const char* variable, const std::string& dir) {
  const char* old = std::getenv(variable);
  const std::string value = old && *old ? dir + ":" + old : dir;
  ::setenv(variable, value.c_str(), 1);
}

void CheckExists(const std::string& path, const char* what) {
  if (!std::filesystem::exists(path)) {
    Raise(ErrorCode::kBadConfig, StrCat("python: ", what, " '", path, "' does not exist"));
  }
}

}  // namespace

void AddPythonCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<PythonOptions>();
  cmd->add_option("--ranks", o->ranks, "MPI ranks (processes); > 1 runs under mpirun")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--profile", o->profile,
                  "hardware profile for the kernels (NKISIM_PROFILE): trn2, trn3 or a file");
  cmd->add_flag("--report", o->report, "print each kernel's cost summary (NKISIM_REPORT=1)");
  cmd->add_flag("--timing-only", o->timing_only,
                "same instructions and simulated times, no values (NKISIM_TIMING_ONLY=1)");
  cmd->add_option("--python", o->python, "the Python interpreter")->capture_default_str();
  // Everything from SCRIPT on belongs to the script, options included.
  cmd->prefix_command();
  cmd->footer(
      "Usage: nkisim python [--ranks N] [--profile P] [--report] [--timing-only] SCRIPT [ARGS...]");
  cmd->callback([o, cmd, exit_code] {
    const std::vector<std::string> rest = cmd->remaining();
    if (rest.empty()) Raise(ErrorCode::kInvalidArgument, "python: SCRIPT is required");
    o->script = rest.front();
    o->args.assign(rest.begin() + 1, rest.end());
    *exit_code = RunPython(*o);
  });
}

std::vector<std::string> PythonCommand(const PythonOptions& o, bool as_root, int host_cores) {
  std::vector<std::string> script{o.python, o.script};
  script.insert(script.end(), o.args.begin(), o.args.end());
  if (o.ranks <= 1) return script;
  MpirunOptions m;
  m.ranks = o.ranks;
  m.as_root = as_root;
  m.host_cores = host_cores;
  m.rank_command = script;
  return MpirunCommand(m);
}

std::string PythonPackageDir() {
  const std::filesystem::path exe(SelfExecutable());
  return (exe.parent_path().parent_path() / "python").string();
}

int RunPython(const PythonOptions& o) {
  const std::string packages = PythonPackageDir();
  CheckExists(packages + "/nki/__init__.py", "nkisim's Python package");
  CheckExists(o.script, "script");
  PrependPath("PYTHONPATH", packages);
  if (!o.profile.empty()) ::setenv("NKISIM_PROFILE", o.profile.c_str(), 1);
  if (o.report) ::setenv("NKISIM_REPORT", "1", 1);
  if (o.timing_only) ::setenv("NKISIM_TIMING_ONLY", "1", 1);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Job job(PythonCommand(o, ::geteuid() == 0, cores));
  while (!job.WaitFor(std::chrono::seconds(1))) {
  }
  return job.Poll().value_or(1);
}

}  // namespace nkisim::launcher
