// The baseline of scripts/measure-scale.sh: a bare MPI job of the same process count as a
// `nkisim run` job, doing the job's MPI traffic without any simulation: start-up, per plan one
// all_reduce of the layer output ([B, H] fp32 per rank) and one all_gather of a heartbeat-sized
// message, then shut-down. It prints the largest and the summed peak RSS (VmHWM) of its ranks.
//   mpirun -n 128 build/bench/raw_mpi_job --batch 16 --hidden 16384 --plans 2
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

long Flag(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const long batch = Flag(argc, argv, "--batch", 32), hidden = Flag(argc, argv, "--hidden", 8192);
  const long plans = Flag(argc, argv, "--plans", 2);
  std::vector<float> partial(static_cast<size_t>(batch * hidden), 1.0f / static_cast<float>(rank + 1));
  std::vector<float> total(partial.size());
  std::vector<char> hello(64, 'x'), hellos(64 * static_cast<size_t>(world));
  for (long p = 0; p < plans; ++p) {
    MPI_Allgather(hello.data(), 64, MPI_CHAR, hellos.data(), 64, MPI_CHAR, MPI_COMM_WORLD);
    MPI_Allreduce(partial.data(), total.data(), static_cast<int>(partial.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  double rss = PeakRssMib(), max_rss = 0, sum_rss = 0;
  MPI_Reduce(&rss, &max_rss, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&rss, &sum_rss, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("raw MPI job: %d ranks, %ld plans; peak RSS %.1f MiB per rank (largest), %.2f GiB "
                "summed\n", world, plans, max_rss, sum_rss / 1024.0);
  }
  MPI_Finalize();
  return 0;
}
