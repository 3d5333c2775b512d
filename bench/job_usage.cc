// Runs one command and prints what it and every process it waited for cost the host: wall time,
// user and system CPU time, minor page faults (first touches of fresh memory) and the largest
// single process's peak RSS. scripts/measure-scale.sh runs both of its jobs under it, so the two
// are compared on the same counters.
//   job_usage OUT_FILE -- COMMAND [ARGS...]
// OUT_FILE gets one line, `wall_s user_s sys_s minor_faults max_rss_mib`; the command's own output
// and exit status pass through unchanged (127 when it cannot be started).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: job_usage OUT_FILE -- COMMAND [ARGS...]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("job_usage: fork");
    return 2;
  }
  if (child == 0) {
    ::execvp(argv[3], argv + 3);
    std::fprintf(stderr, "job_usage: cannot start '%s': %s\n", argv[3], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  while (::wait4(child, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      std::perror("job_usage: wait4");
      return 2;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // wait4 gives the child's own usage plus that of every descendant it waited for (mpirun waits
  // for its ranks), which is what getrusage(RUSAGE_CHILDREN) would add up after it.
  std::FILE* out = std::fopen(argv[1], "w");
  if (out == nullptr) {
    std::fprintf(stderr, "job_usage: cannot write '%s': %s\n", argv[1], std::strerror(errno));
    return 2;
  }
  std::fprintf(out, "%.3f %.3f %.3f %ld %.1f\n", wall, Seconds(usage.ru_utime), Seconds(usage.ru_stime),
               usage.ru_minflt, static_cast<double>(usage.ru_maxrss) / 1024.0);
  std::fclose(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
