// `mpirun -n 4 nkisim collective batch_shard --topology FILE ...` as a user runs it, on the
// reference topology (world 4, groups [[0, 1], [2, 3]], B = 8): .npy inputs with known values go
// in, every rank's .npy output is checked here element by element with plain index arithmetic, and
// bad inputs end the job with the typed exit code and a message naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/npy.h"
#include "runtime/tensor_view.h"

#include "tests/testing/run_command.h"

namespace {

namespace fs = std::filesystem;
using ::nkisim::DType;
using ::nkisim::Shape;
using ::nkisim::TensorView;
using ::testing::HasSubstr;

const std::string kTopology =
    std::string(NKISIM_SOURCE_DIR) + "/configs/topologies/reference_batch_shard.textproto";
constexpr int kWorld = 4, kG = 2, kB = 8;
const std::vector<std::vector<int>> kGroups = {{0, 1}, {2, 3}};  // the reference file's "gqa"

using nkisim::testing::CommandResult;

// Runs `mpirun -n 4 nkisim collective batch_shard --topology <reference> <args>` under a 60 s
// limit; stdout and stderr together.
CommandResult RunBatchShard(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_MPIEXEC) +
                                         " --allow-run-as-root --oversubscribe -n " +
                                         std::to_string(kWorld) + " " + NKISIM_BINARY +
                                         " collective batch_shard --topology " + kTopology + " " +
                                         args,
                                     60);
}

// A fresh, empty directory for one test.
std::string TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nkisim_batch_shard_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Writes <dir>/q.rank<r>.npy holding value(r, i) at row-major element i.
template <typename Value>
void WriteInput(const std::string& dir, int r, const Shape& shape, DType dtype, Value value) {
  TensorView t = TensorView::Create(shape, dtype, "q");
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = value(r, static_cast<int64_t>(i));
  t.FromFloats(values);
  nkisim::WriteNpy(dir + "/q.rank" + std::to_string(r) + ".npy", t);
}

std::vector<float> ReadOutput(const std::string& dir, int r, const Shape& want_shape) {
  const TensorView t = nkisim::ReadNpy(dir + "/q_out.rank" + std::to_string(r) + ".npy");
  EXPECT_EQ(t.shape(), want_shape) << "rank " << r;
  return t.ToFloats();
}

int PositionOf(int r) { return r % kG; }
const std::vector<int>& GroupOf(int r) { return kGroups[r / kG]; }

TEST(BatchShardCliTest, NbsdFromInDirGivesEveryRankItsRowsOfEveryMembersHeads) {
  const std::string in = TempDir("nbsd_in"), out = TempDir("nbsd_out");
  constexpr int64_t n = 2, s = 2, d = 4, rows = kB / kG;
  // fp32: every element of every rank distinct, so any misplaced element shows.
  auto value = [](int r, int64_t i) { return static_cast<float>(r * 10000 + i); };
  for (int r = 0; r < kWorld; ++r) WriteInput(in, r, {n, kB, s, d}, DType::kFloat32, value);

  const CommandResult res = RunBatchShard(
      "--layout nbsd --b 8 --n 2 --s 2 --d 4 --dtype fp32 --in-dir " + in + " --out-dir " + out);
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_THAT(res.output, HasSubstr("batch_shard: PASS (0 of 512 elements wrong over 4 ranks)"));
  EXPECT_THAT(res.output, HasSubstr("group set 'gqa': 2 groups of G = 2; B = 8"));
  EXPECT_THAT(res.output, HasSubstr("input [2, 8, 2, 4] -> output [4, 4, 2, 4] per rank"));
  EXPECT_THAT(res.output, HasSubstr("simulated time of the call: "));

  for (int r = 0; r < kWorld; ++r) {
    const std::vector<float> got = ReadOutput(out, r, {kG * n, rows, s, d});
    ASSERT_EQ(got.size(), static_cast<size_t>(kG * n * rows * s * d));
    int wrong = 0;
    size_t i = 0;
    // out[j * n + h, b, t, e] = member j's q[h, p * rows + b, t, e]
    for (int j = 0; j < kG; ++j)
      for (int64_t h = 0; h < n; ++h)
        for (int64_t b = 0; b < rows; ++b)
          for (int64_t t = 0; t < s; ++t)
            for (int64_t e = 0; e < d; ++e, ++i) {
              const int64_t src = ((h * kB + PositionOf(r) * rows + b) * s + t) * d + e;
              const float want = value(GroupOf(r)[j], src);
              if (got[i] != want && wrong++ < 5) {
                ADD_FAILURE() << "rank " << r << " q_out[" << j * n + h << ", " << b << ", " << t
                              << ", " << e << "] = " << got[i] << ", expected " << want;
              }
            }
    EXPECT_EQ(wrong, 0) << "rank " << r;
  }
}

TEST(BatchShardCliTest, DbnsBf16FromInDirGivesEveryRankItsRows) {
  const std::string in = TempDir("dbns_in"), out = TempDir("dbns_out");
  constexpr int64_t d = 4, s = 2, rows = kB / kG;
  // bf16: r * 64 + i < 256 is exact in bf16 and distinct everywhere.
  auto value = [](int r, int64_t i) { return static_cast<float>(r * 64 + i); };
  for (int r = 0; r < kWorld; ++r) WriteInput(in, r, {d, kB, 1, s}, DType::kBFloat16, value);

  const CommandResult res = RunBatchShard("--layout dBnS --n 1 --s 2 --d 4 --dtype bf16 --in-dir " +
                                          in + " --out-dir " + out);
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_THAT(res.output,
              HasSubstr("layout dbns, bf16: input [4, 8, 1, 2] -> output [2, 4, 4, 2]"));
  EXPECT_THAT(res.output, HasSubstr("batch_shard: PASS (0 of 256 elements wrong over 4 ranks)"));

  for (int r = 0; r < kWorld; ++r) {
    const std::vector<float> got = ReadOutput(out, r, {kG, d, rows, s});
    ASSERT_EQ(got.size(), static_cast<size_t>(kG * d * rows * s));
    int wrong = 0;
    size_t i = 0;
    // out[j, e, b, t] = member j's q[e, p * rows + b, 0, t]
    for (int j = 0; j < kG; ++j)
      for (int64_t e = 0; e < d; ++e)
        for (int64_t b = 0; b < rows; ++b)
          for (int64_t t = 0; t < s; ++t, ++i) {
            const float want = value(GroupOf(r)[j], (e * kB + PositionOf(r) * rows + b) * s + t);
            if (got[i] != want && wrong++ < 5) {
              ADD_FAILURE() << "rank " << r << " q_out[" << j << ", " << e << ", " << b << ", " << t
                            << "] = " << got[i] << ", expected " << want;
            }
          }
    EXPECT_EQ(wrong, 0) << "rank " << r;
  }
}

TEST(BatchShardCliTest, SeededInputsAreDeterministicPerSeed) {
  const std::string a = TempDir("seed_a"), b = TempDir("seed_b"), c = TempDir("seed_c");
  const std::string args = "--layout nbsd --n 2 --s 1 --d 8 --out-dir ";
  ASSERT_EQ(RunBatchShard(args + a + " --seed 7").exit_code, 0);
  const CommandResult again = RunBatchShard(args + b + " --seed 7");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("inputs: seeded (--seed 7)"));
  ASSERT_EQ(RunBatchShard(args + c + " --seed 8").exit_code, 0);
  const Shape shape = {kG * 2, kB / kG, 1, 8};
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(ReadOutput(a, r, shape), ReadOutput(b, r, shape)) << "rank " << r;
    EXPECT_NE(ReadOutput(a, r, shape), ReadOutput(c, r, shape)) << "rank " << r;
  }
}

TEST(BatchShardCliTest, BatchOtherThanTheTopologysIsAnInvalidArgument) {
  const CommandResult r = RunBatchShard("--layout nbsd --b 4 --n 2 --s 1 --d 8");
  EXPECT_EQ(r.exit_code, 11) << r.output;  // 10 + kInvalidArgument
  EXPECT_THAT(r.output, HasSubstr("invalid argument: collective batch_shard: --b 4 does not match "
                                  "batch 8 of the batch_shard block in " +
                                  kTopology));
}

TEST(BatchShardCliTest, SizesOutOfRangeAreRefusedBeforeAllocating) {
  for (const char* args : {"--d 100000000", "--n 0", "--s -3"}) {
    const CommandResult r = RunBatchShard(args);
    EXPECT_EQ(r.exit_code, 11) << args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("must be in [1, 16777216]")) << args;
  }
}

TEST(BatchShardCliTest, InputFileOfTheWrongShapeIsABadConfigNamingTheFileAndBothShapes) {
  const std::string in = TempDir("bad_shape_in");
  auto value = [](int r, int64_t i) { return static_cast<float>(r + i % 7); };
  for (int r = 0; r < kWorld; ++r) {
    const Shape shape = r == 2 ? Shape{2, kB, 1, 4} : Shape{2, kB, 1, 8};
    WriteInput(in, r, shape, DType::kFloat32, value);
  }
  const CommandResult r =
      RunBatchShard("--layout nbsd --n 2 --s 1 --d 8 --dtype fp32 --in-dir " + in);
  EXPECT_EQ(r.exit_code, 14) << r.output;  // 10 + kBadConfig
  EXPECT_THAT(r.output, HasSubstr("nkisim: rank 2: bad config: input 'q.rank2' from " + in +
                                  "/q.rank2.npy has shape [2, 8, 1, 4]; expected [2, 8, 1, 8]"));
}

}  // namespace
