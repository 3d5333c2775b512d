// main() for GoogleTest binaries run under mpiexec: every rank runs every test; only rank 0 prints
// the usual report, other ranks print their failures tagged with the rank; the failure count is
// summed over ranks so every rank exits 1 when any rank failed. Use EXPECT_* (not ASSERT_*)
// before a collective: a rank that returns early leaves the others waiting.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILURE %s:%d\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strcmp(argv[i], "--gtest_list_tests") == 0;
  if (rank != 0 && listing) std::freopen("/dev/null", "w", stdout);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int failed_ranks = 0;
  MPI_Allreduce(&local_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && failed_ranks > 0) {
    std::printf("[MPI] %d of %d rank(s) had failing tests\n", failed_ranks, size);
  }
  MPI_Finalize();
  return failed_ranks > 0 ? 1 : 0;
}
