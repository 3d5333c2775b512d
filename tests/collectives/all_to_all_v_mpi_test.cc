// all_to_all_v under mpiexec (any world size >= 2; ctest runs 8 and 64 ranks): random per-peer
// counts including zeros, byte-exact against a plain MPI_Alltoallv of the same buffers; the
// charged time recomputed from the cost functions (never hard-coded); bad counts refused.
#include "collectives/all_to_all_v.h"

#include <mpi.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "runtime/error.h"
#include "tests/collectives/world_fixture.h"

namespace nkisim::collectives {
namespace {

using ::testing::HasSubstr;

class AllToAllVTest : public WorldFixture<> {
 protected:

  // Random counts in [0, 6], with the peer rank + 1 always 0 and one seed per (trial, rank).
  std::vector<int64_t> RandomCounts(int trial) const {
    std::mt19937 rng(1000u * trial + rank_);
    std::vector<int64_t> c(static_cast<size_t>(world_));
    for (int j = 0; j < world_; ++j) c[j] = rng() % 7;
    c[(rank_ + 1) % world_] = 0;
    if (trial % 3 == 2) c[rank_] = 0;
    int64_t total = 0;
    for (int64_t v : c) total += v;
    if (total == 0) c[rank_] = 1;
    return c;
  }

  // Random bit patterns (any bf16, NaNs included) in `rows` rows of `cols`.
  TensorView RandomRows(int64_t rows, int64_t cols, int trial) const {
    TensorView t = TensorView::Create({rows, cols}, DType::kBFloat16, "tokens");
    std::mt19937 rng(7777u * trial + 13u * rank_ + 1);
    std::byte* p = t.buffer().data();
    for (int64_t i = 0; i < t.size_bytes(); ++i) p[i] = static_cast<std::byte>(rng() & 0xff);
    return t;
  }

};

TEST_F(AllToAllVTest, RandomCountsByteExactAgainstMpiAlltoallv) {
  constexpr int64_t kCols = 7;  // 14-byte rows: nothing aligned by accident
  const int64_t row_bytes = kCols * 2;
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<int64_t> send = RandomCounts(trial);
    int64_t total = 0;
    for (int64_t c : send) total += c;
    TensorView in = RandomRows(total, kCols, trial);
    // Capacity larger than needed: the rows past the received ones must stay untouched.
    const int64_t capacity = 7 * world_ + 3;
    TensorView out = TensorView::Create({capacity, kCols}, DType::kBFloat16, "out");
    std::memset(out.buffer().data(), 0x5a, static_cast<size_t>(out.size_bytes()));

    const AllToAllVResult r = all_to_all_v(*ctx_, World(), in, send, out);

    // The reference: counts by MPI_Alltoall, payload by a plain MPI_Alltoallv.
    std::vector<int> sc(world_), sd(world_), rc(world_), rd(world_);
    for (int j = 0; j < world_; ++j) sc[j] = static_cast<int>(send[j] * row_bytes);
    MPI_Alltoall(sc.data(), 1, MPI_INT, rc.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int s_at = 0, r_at = 0;
    for (int j = 0; j < world_; ++j) {
      sd[j] = s_at;
      s_at += sc[j];
      rd[j] = r_at;
      r_at += rc[j];
    }
    std::vector<unsigned char> want(static_cast<size_t>(capacity * row_bytes), 0x5a);
    MPI_Alltoallv(in.buffer().data(), sc.data(), sd.data(), MPI_BYTE, want.data(), rc.data(),
                  rd.data(), MPI_BYTE, MPI_COMM_WORLD);

    ASSERT_EQ(r.rows_received * row_bytes, r_at) << "trial " << trial;
    for (int j = 0; j < world_; ++j) EXPECT_EQ(r.recv_rows[j] * row_bytes, rc[j]) << "from " << j;
    EXPECT_EQ(std::memcmp(out.buffer().data(), want.data(), want.size()), 0)
        << "trial " << trial << ": output differs from MPI_Alltoallv (tail included)";

    // The charge: recomputed from the gathered count matrix by the cost function.
    std::vector<int64_t> matrix(static_cast<size_t>(world_) * world_);
    MPI_Allgather(send.data(), world_, MPI_INT64_T, matrix.data(), world_, MPI_INT64_T,
                  MPI_COMM_WORLD);
    const GroupPlacement g = PlaceGroup(topology_, Trn2Profile(), *World().members);
    const CollectivePlan plan =
        PlanAllToAllV(g, matrix, static_cast<double>(row_bytes), Trn2Profile(), "auto",
                      Launch::kInGraph);
    EXPECT_EQ(r.algorithm, "pairwise");
    EXPECT_DOUBLE_EQ(r.end_ns - r.start_ns, plan.cost.total_ns);
    EXPECT_EQ(plan.cost.steps, world_ - 1);
    // Every member charges the same cost.
    double lo = r.end_ns - r.start_ns, hi = lo;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi);
  }
}

TEST_F(AllToAllVTest, UniformCountsPriceAsAllToAll) {
  // The same rows to every peer: the price is the uniform all_to_all's.
  const int64_t rows = 5, cols = 64;
  const std::vector<int64_t> send(static_cast<size_t>(world_), rows);
  TensorView in = RandomRows(rows * world_, cols, 9);
  TensorView out = TensorView::Create({rows * world_, cols}, DType::kBFloat16, "out");
  const AllToAllVResult r = all_to_all_v(*ctx_, World(), in, send, out);
  TensorView out2 = TensorView::Create({rows * world_, cols}, DType::kBFloat16, "out2");
  const CollectiveResult u = all_to_all(*ctx_, World(), in, out2, 0);
  EXPECT_EQ(std::memcmp(out.buffer().data(), out2.buffer().data(),
                        static_cast<size_t>(out.size_bytes())),
            0);
  EXPECT_NEAR(r.end_ns - r.start_ns, u.end_ns - u.start_ns, 1e-9 * (u.end_ns - u.start_ns));
}

TEST_F(AllToAllVTest, SkewCostsMoreThanBalancedAndHostAddsLaunch) {
  const int n = world_;
  const GroupPlacement g = PlaceGroup(topology_, Trn2Profile(), *World().members);
  const double row_bytes = 2 * 2048;  // one bf16 token of H = 2048
  // Balanced: 8 rows everywhere off the diagonal. Skewed: the same total, all to member 0.
  std::vector<int64_t> balanced(static_cast<size_t>(n) * n, 8), skewed(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i) {
    balanced[static_cast<size_t>(i * n + i)] = 0;
    if (i != 0) skewed[static_cast<size_t>(i * n)] = 8 * (n - 1);
  }
  const auto b = PlanAllToAllV(g, balanced, row_bytes, Trn2Profile(), "auto", Launch::kInGraph);
  const auto s = PlanAllToAllV(g, skewed, row_bytes, Trn2Profile(), "auto", Launch::kInGraph);
  const auto h = PlanAllToAllV(g, balanced, row_bytes, Trn2Profile(), "auto", Launch::kHost);
  EXPECT_GT(s.cost.total_ns, b.cost.total_ns);
  EXPECT_DOUBLE_EQ(h.cost.total_ns - b.cost.total_ns, h.cost.fixed_ns);
  EXPECT_GT(h.cost.fixed_ns, 0);
  std::vector<int64_t> none(static_cast<size_t>(n) * n, 0);
  const auto z = PlanAllToAllV(g, none, row_bytes, Trn2Profile(), "auto", Launch::kInGraph);
  EXPECT_LT(z.cost.total_ns, b.cost.total_ns);
  EXPECT_EQ(z.cost.steps, n - 1);  // every round still runs
  EXPECT_THROW(PlanAllToAllV(g, balanced, row_bytes, Trn2Profile(), "ring", Launch::kInGraph),
               Error);
}

// docs/collectives.md's hand calculation, recomputed from the profile's parameters: 8 ranks on
// one chip (LNC 1), member i sends member j c[j] rows of 4096 B (c = 64, 32, ..., 1, 0). Every
// pairwise round: each member sends one transfer and receives one, the largest c_max rows, all on
// the chip, so round = step_latency + max(c_max / dma, c_max / intrachip) + 2 * sum(c) / hbm.
TEST_F(AllToAllVTest, DocsHandCalculationOneChip) {
  const int n = 8;
  const HardwareProfile& pr = Trn2Profile();
  const GroupPlacement g = DefaultPlacement(n, 1, pr);
  const int64_t c[n] = {64, 32, 16, 8, 4, 2, 1, 0};
  const double row = 4096;
  std::vector<int64_t> rows(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) rows[static_cast<size_t>(i * n + j)] = i == j ? 0 : c[j];
  }
  const CollectiveParams p = ResolveParams(pr, CollectiveOp::kAllToAll, "pairwise");
  const double max_bytes = 64 * row, sum_bytes = 127 * row;
  // LNC 1: 8 ranks on a chip of 8 physical cores, one core's engines a rank. The chip's HBM
  // (every byte read once and written once) overlaps the data movement.
  const double rank_dma_gbps = p.dma_gbps_per_core * (p.physical_cores_per_chip / 8);
  const double round = p.step_latency_ns + std::max({max_bytes / rank_dma_gbps, max_bytes / p.intrachip_gbps,
                                                     2 * sum_bytes / p.hbm_gbps_per_chip});
  const double hand = p.in_graph_fixed_ns + (n - 1) * round;
  for (Launch launch : {Launch::kInGraph, Launch::kHost}) {
    const CollectivePlan plan = PlanAllToAllV(g, rows, row, pr, "auto", launch);
    const double want = hand + (launch == Launch::kHost ? p.fixed_ns : 0.0);
    EXPECT_NEAR(plan.cost.total_ns, want, 1e-9 * want) << LaunchName(launch);
    if (rank_ == 0) {
      std::printf("all_to_all_v docs example, %s: model %.3f ns, hand %.3f ns\n",
                  LaunchName(launch), plan.cost.total_ns, want);
    }
  }
  // LNC 2 (ranks 0-3 on chip 0, 4-7 on chip 1, x-neighbours), round 4 by hand: every member
  // writes across; member 0 receives the largest transfer, 64 rows, after a hop; the link from
  // chip 1 carries c0 + c1 + c2 + c3 = 120 rows (491520 B / 256 GB/s = 1920 ns), more than the
  // receiving rank's DMA (262144 B / 725 GB/s) or the chip's HBM (127 rows / 2900 GB/s), so the
  // round is 1500 + 150 + 1920 = 3570 ns.
  const GroupPlacement g2 = DefaultPlacement(n, 2, pr);
  const CollectivePlan plan2 = PlanAllToAllV(g2, rows, row, pr, "auto", Launch::kInGraph);
  ASSERT_EQ(plan2.cost.per_step.size(), 7u);
  EXPECT_NEAR(plan2.cost.per_step[3].ns, 1500 + 150 + 491520 / 256.0, 1e-6);
  if (rank_ == 0) {
    std::printf("all_to_all_v docs example, LNC 2, in_graph: model %.3f ns; rounds", plan2.cost.total_ns);
    for (const StepCost& s : plan2.cost.per_step) std::printf(" %.3f", s.ns);
    std::printf(" ns\n");
  }
}

TEST_F(AllToAllVTest, BadCountsNameFieldValueAndRule) {
  TensorView in = RandomRows(4, 3, 1);
  TensorView out = TensorView::Create({64 * world_, 3}, DType::kBFloat16, "out");
  auto message = [&](std::vector<int64_t> counts) {
    try {
      all_to_all_v(*ctx_, World(), in, counts, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<int64_t> not_sum(static_cast<size_t>(world_), 0);
  not_sum[0] = 3;  // sums to 3, input has 4 rows
  EXPECT_THAT(message(not_sum), HasSubstr("send_rows"));
  EXPECT_THAT(message(not_sum), HasSubstr("sum to 3; the rule is that they sum to input dim 0 (4)"));
  std::vector<int64_t> negative(static_cast<size_t>(world_), 0);
  negative[0] = 5;
  negative[1] = -1;
  EXPECT_THAT(message(negative), HasSubstr("send_rows[1] = -1; the rule is counts >= 0"));
  EXPECT_THAT(message({4}), HasSubstr("the rule is one per group member"));
  // Too small an output: detected after the counts are known, on the receiving members only;
  // everyone sends all 4 rows to member 0, whose output of 3 rows is too small.
  std::vector<int64_t> to0(static_cast<size_t>(world_), 0);
  to0[0] = 4;
  TensorView small = TensorView::Create({3, 3}, DType::kBFloat16, "small");
  // Every member refuses (none is left waiting); member 0 names its own output.
  int threw = 0;
  try {
    all_to_all_v(*ctx_, World(), in, to0, rank_ == 0 ? small : out);
  } catch (const Error& e) {
    threw = 1;
    EXPECT_THAT(std::string(e.what()), HasSubstr("the rule is output dim 0 >= the rows received"));
    if (rank_ == 0) EXPECT_THAT(std::string(e.what()), HasSubstr("'small' [3, 3]"));
    if (rank_ != 0) EXPECT_THAT(std::string(e.what()), HasSubstr("group member 0's output holds 3"));
  }
  EXPECT_EQ(threw, 1);
}

}  // namespace
}  // namespace nkisim::collectives
