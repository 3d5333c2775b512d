#include "launcher/job/mpirun.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include <boost/process.hpp>

#include "runtime/error.h"

namespace nkisim::launcher {

namespace bp = boost::process;

std::vector<std::string> MpirunCommand(const MpirunOptions& o) {
  std::vector<std::string> argv{o.mpirun};
  if (o.as_root) argv.push_back("--allow-run-as-root");
  if (!o.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", o.hostfile});
  } else if (o.ranks > o.host_cores) {
    argv.push_back("--oversubscribe");
  }
  argv.insert(argv.end(), {"-n", std::to_string(o.ranks)});
  argv.insert(argv.end(), o.rank_command.begin(), o.rank_command.end());
  return argv;
}

bool RunningUnderMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

std::string SelfExecutable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "nkisim";
}

struct Job::Impl {
  bp::group group;
  bp::child child;
  std::optional<int> exit_code;
};

Job::Job(const std::vector<std::string>& argv) : impl_(std::make_unique<Impl>()) {
  // A name is looked up on PATH; a path (absolute or relative, anything with a '/') is used as is.
  const bool is_path = argv.at(0).find('/') != std::string::npos;
  const boost::filesystem::path program =
      is_path ? boost::filesystem::path(argv[0]) : bp::search_path(argv[0]);
  if (program.empty()) {
    Raise(ErrorCode::kBadConfig, StrCat("cannot start '", argv[0], "': not found on PATH"));
  }
  if (is_path && (::access(program.c_str(), X_OK) != 0 || boost::filesystem::is_directory(program))) {
    Raise(ErrorCode::kBadConfig,
          StrCat("cannot start '", argv[0], "': not an executable file"));
  }
  try {
    impl_->child = bp::child(program, std::vector<std::string>(argv.begin() + 1, argv.end()),
                             impl_->group);
  } catch (const std::exception& e) {
    Raise(ErrorCode::kBadConfig, StrCat("cannot start '", argv[0], "': ", e.what()));
  }
}

Job::~Job() {
  if (!Poll()) Stop();
}

std::optional<int> Job::Poll() {
  if (impl_->exit_code) return impl_->exit_code;
  std::error_code ec;
  if (impl_->child.running(ec) || ec) return std::nullopt;
  const int native = impl_->child.native_exit_code();
  impl_->exit_code = WIFSIGNALED(native) ? 128 + WTERMSIG(native) : WEXITSTATUS(native);
  return impl_->exit_code;
}

bool Job::WaitFor(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!Poll() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Poll().has_value();
}

void Job::Stop(std::chrono::milliseconds grace) {
  if (Poll()) {
    // mpirun is gone (it may have been killed): ranks it left behind are still in its process
    // group, and nothing else will end them.
    ::kill(-impl_->group.native_handle(), SIGKILL);
    return;
  }
  ::kill(-impl_->group.native_handle(), SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!Poll() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!Poll()) {
    std::error_code ec;
    impl_->group.terminate(ec);  // SIGKILL to every process of the group
    impl_->child.wait(ec);
    Poll();
  }
}

}  // namespace nkisim::launcher
