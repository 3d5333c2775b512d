// `nkisim python [--ranks N] [--profile P] [--report] [--timing-only] SCRIPT [ARGS...]`: runs a
// Python script (an NKI kernel file, a test) with Debian's /usr/bin/python3 and nkisim's Python
// packages (build/python: nki, nkisim) on PYTHONPATH; with --ranks N > 1 under mpirun, one rank per
// process, for nki.collectives kernels. --profile sets NKISIM_PROFILE, --report NKISIM_REPORT=1
// and --timing-only NKISIM_TIMING_ONLY=1 for the script (docs/python.md).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct PythonOptions {
  int ranks = 1;
  std::string profile;  // NKISIM_PROFILE: a profile name (trn2, trn3) or file; "" keeps it
  bool report = false;       // NKISIM_REPORT=1
  bool timing_only = false;  // NKISIM_TIMING_ONLY=1
  std::string python = "/usr/bin/python3";
  std::string script;
  std::vector<std::string> args;
};

// Adds the options of `nkisim python` to `cmd`; the callback stores its exit code in *exit_code.
void AddPythonCommand(CLI::App* cmd, int* exit_code);

// The command line that runs the script: python + script + args, behind mpirun for ranks > 1.
std::vector<std::string> PythonCommand(const PythonOptions& options, bool as_root, int host_cores);

// build/python beside this executable's build/launcher/ (where CMake assembles the packages).
std::string PythonPackageDir();

// Sets the environment, runs PythonCommand and returns its exit code.
// Throws Error(kBadConfig) when the script or the package directory does not exist.
int RunPython(const PythonOptions& options);

}  // namespace nkisim::launcher
