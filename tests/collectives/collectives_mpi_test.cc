// Collectives under mpiexec (any world size >= 2): every collective and every dtype against
// independent expectations computed from the rank-and-index formula of the inputs.
#include "collectives/collectives.h"

#include <mpi.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "runtime/error.h"
#include "tests/collectives/world_fixture.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::collectives {
namespace {

using ::testing::HasSubstr;

// Small integers: exact in every dtype (unsigned ones non-negative), distinct across ranks.
float Value(DType dtype, int rank, int64_t index) {
  const int v = static_cast<int>((rank * 5 + index * 3) % 7);
  return (dtype == DType::kUInt8 || dtype == DType::kUInt16 || dtype == DType::kUInt32) ? v : v - 3;
}

TensorView Filled(const Shape& shape, DType dtype, int rank) {
  TensorView t = TensorView::Create(shape, dtype, "input");
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = Value(dtype, rank, static_cast<int64_t>(i));
  t.FromFloats(v);
  return t;
}

class CollectivesTest : public WorldFixture<::testing::TestWithParam<DType>> {
 protected:
  float Sum(DType dt, int64_t index) const {
    double s = 0;
    for (int r = 0; r < world_; ++r) s += Value(dt, r, index);
    return RoundTo(dt, static_cast<float>(s));
  }
};

TEST_P(CollectivesTest, AllGatherDim0Concatenates) {
  const DType dt = GetParam();
  TensorView in = Filled({3, 5}, dt, rank_);
  TensorView out = TensorView::Create({3 * world_, 5}, dt, "out");
  all_gather(*ctx_, World(), in, out, 0);
  const std::vector<float> got = out.ToFloats();
  for (int64_t i = 0; i < out.numel(); ++i) {
    EXPECT_EQ(got[i], Value(dt, static_cast<int>(i / 15), i % 15)) << "element " << i;
  }
}

TEST_P(CollectivesTest, AllGatherDim1Interleaves) {
  const DType dt = GetParam();
  TensorView in = Filled({3, 5}, dt, rank_);
  TensorView out = TensorView::Create({3, 5 * world_}, dt, "out");
  all_gather(*ctx_, World(), in, out, 1);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5 * world_; ++j) {
      EXPECT_EQ(out.get({i, j}), Value(dt, static_cast<int>(j / 5), i * 5 + j % 5));
    }
  }
}

TEST_P(CollectivesTest, AllReduceSumsRoundedOnce) {
  const DType dt = GetParam();
  TensorView in = Filled({4, 33}, dt, rank_);
  TensorView out = TensorView::Create({4, 33}, dt, "out");
  all_reduce(*ctx_, World(), in, out);
  const std::vector<float> got = out.ToFloats();
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(got[i], Sum(dt, i)) << "element " << i;
}

TEST_P(CollectivesTest, ReduceScatterGivesEachMemberItsChunk) {
  const DType dt = GetParam();
  TensorView in = Filled({2 * world_, 7}, dt, rank_);
  TensorView out = TensorView::Create({2, 7}, dt, "out");
  reduce_scatter(*ctx_, World(), in, out);
  const std::vector<float> got = out.ToFloats();
  for (int64_t i = 0; i < 14; ++i) EXPECT_EQ(got[i], Sum(dt, rank_ * 14 + i)) << "element " << i;
}

TEST_P(CollectivesTest, AllToAllTransposesChunks) {
  const DType dt = GetParam();
  TensorView in = Filled({world_ * 2, 3}, dt, rank_);
  TensorView out = TensorView::Create({world_ * 2, 3}, dt, "out");
  all_to_all(*ctx_, World(), in, out, 0);
  const std::vector<float> got = out.ToFloats();
  // Chunk i of the output is chunk `rank_` of member i's input.
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int from = static_cast<int>(i / 6);
    EXPECT_EQ(got[i], Value(dt, from, rank_ * 6 + i % 6)) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, CollectivesTest, ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST_F(CollectivesTest, AllToAllAlongDim1AndStridedViews) {
  TensorView in = Filled({3, 2 * world_}, DType::kFloat32, rank_);
  TensorView out = TensorView::Create({3, 2 * world_}, DType::kFloat32, "out");
  all_to_all(*ctx_, World(), in, out, 1);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2 * world_; ++j) {
      EXPECT_EQ(out.get({i, j}), Value(DType::kFloat32, static_cast<int>(j / 2),
                                       i * 2 * world_ + rank_ * 2 + j % 2));
    }
  }
  // A transposed (non-contiguous) input goes through a derived datatype, still without copies.
  TensorView base = Filled({5, 3}, DType::kFloat32, rank_);
  TensorView gathered = TensorView::Create({3 * world_, 5}, DType::kFloat32, "gathered");
  all_gather(*ctx_, World(), base.permute({1, 0}), gathered, 0);
  EXPECT_EQ(gathered.get({3 * (world_ - 1) + 2, 4}), Value(DType::kFloat32, world_ - 1, 4 * 3 + 2));
}

TEST_F(CollectivesTest, AllReduceInPlaceAndLargeInt32) {
  TensorView t = TensorView::Create({2}, DType::kInt32, "t");
  t.set({0}, 100000000.0f);  // beyond fp32's exact integers once summed: int64 accumulation
  t.set({1}, -7.0f);
  all_reduce(*ctx_, World(), t, t);
  int32_t first;
  std::memcpy(&first, t.buffer().data(), 4);
  EXPECT_EQ(first, 100000000 * world_);
  EXPECT_EQ(t.get({1}), -7.0f * world_);
}

TEST_F(CollectivesTest, ClocksJoinAtTheLatestMemberPlusTheCost) {
  {  // Rank r is busy for r memsets before the collective.
    ScopedCurrentCore scope(lnc_->core(0));
    Tile busy = lnc_->core(0).AllocateSbuf("busy", {128, 512}, DType::kFloat32);
    for (int i = 0; i < rank_; ++i) nisa::memset(busy, 0.0f);
  }
  const double mine = lnc_->now();
  double latest = 0;
  MPI_Allreduce(&mine, &latest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  TensorView in = Filled({1024}, DType::kFloat32, rank_);
  TensorView out = TensorView::Create({1024 * world_}, DType::kFloat32, "out");
  const CollectiveResult r = all_gather(*ctx_, World(), in, out);
  EXPECT_DOUBLE_EQ(r.start_ns, latest);
  EXPECT_GT(r.end_ns, r.start_ns);
  EXPECT_DOUBLE_EQ(lnc_->core(1).timeline().now(), r.end_ns);
  const InstructionRecord& event = lnc_->core(0).timeline().records().back();
  EXPECT_STREQ(event.name, "all_gather");
  EXPECT_EQ(event.engine, Engine::kCollective);
  double ends[2] = {r.end_ns, -r.end_ns}, extremes[2];
  MPI_Allreduce(ends, extremes, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_DOUBLE_EQ(extremes[0], -extremes[1]) << "every rank leaves at the same simulated time";
}

// The collective's DMA rings run on the rank's own engines (which the kernels' transfers share):
// each core's 16 engines gain the time of their part of what the rank sent, moved as 64 KiB
// ring packets, and no more.
TEST_F(CollectivesTest, CollectiveDmaOccupiesTheRanksEngines) {
  const HardwareProfile& p = lnc_->core(0).profile();
  std::vector<CoreSummary> before;
  for (int c = 0; c < lnc_->lnc(); ++c) before.push_back(lnc_->core(c).timeline().Summarize(c, p));
  TensorView in = Filled({65536}, DType::kFloat32, rank_);
  TensorView out = TensorView::Create({65536 * world_}, DType::kFloat32, "out");
  const CollectiveResult r = all_gather(*ctx_, World(), in, out);
  ASSERT_GT(r.bytes, 0);
  const int64_t per_core = (r.bytes + lnc_->lnc() - 1) / lnc_->lnc();
  const int64_t share = (per_core + p.dma_engines() - 1) / p.dma_engines();
  const int64_t packet = p.dma_collective_packet_bytes();
  // By hand: descriptors x the descriptor time + bytes at the engine's raw rate.
  const double descriptor_ns = p.dma_descriptor_max_bytes() / p.dma_engine_gbps() -
                               p.dma_descriptor_max_bytes() / p.dma_engine_raw_gbps();
  const double want = static_cast<double>((share + packet - 1) / packet) * descriptor_ns +
                      share / p.dma_engine_raw_gbps();
  for (int c = 0; c < lnc_->lnc(); ++c) {
    const CoreSummary after = lnc_->core(c).timeline().Summarize(c, p);
    for (int e = 0; e < static_cast<int>(p.dma_engines()); ++e) {
      const int i = EngineIndex(DmaEngine(e));
      EXPECT_NEAR(after.busy_ns[i] - before[c].busy_ns[i], want, 1e-6) << "core " << c << " engine " << e;
    }
  }
  EXPECT_LT(want, r.end_ns - r.start_ns);  // the rings' engine time fits in the collective
}

TEST_F(CollectivesTest, SendRecvAroundARing) {
  const int next = (rank_ + 1) % world_, prev = (rank_ + world_ - 1) % world_;
  TensorView out = Filled({64, 3}, DType::kBFloat16, rank_);
  TensorView in = TensorView::Create({64, 3}, DType::kBFloat16, "in");
  if (rank_ % 2 == 0) {
    send(*ctx_, out, next);
    recv(*ctx_, in, prev);
  } else {
    recv(*ctx_, in, prev);
    send(*ctx_, out, next);
  }
  const std::vector<float> got = in.ToFloats();
  for (int64_t i = 0; i < 192; ++i) EXPECT_EQ(got[i], Value(DType::kBFloat16, prev, i));
}

TEST_F(CollectivesTest, ShapeErrorsAreRaisedOnEveryRankBeforeAnyMessage) {
  TensorView in = Filled({3, 5}, DType::kFloat32, rank_);
  TensorView wrong = TensorView::Create({3, 5}, DType::kFloat32, "wrong");
  try {
    all_gather(*ctx_, World(), in, wrong, 0);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("output 'wrong' [3, 5] fp32 must be"));
  }
  TensorView bad_dim = TensorView::Create({3, 5}, DType::kFloat32, "o");
  EXPECT_THROW(all_to_all(*ctx_, World(), Filled({3, 5}, DType::kFloat32, rank_), bad_dim, 2), Error);
}

// For the harness itself: with NKISIM_TEST_FAIL_RANK=r set, rank r alone fails, and CTest checks
// that the whole job reports it.
TEST(MpiHarness, FailsOnTheRankNamedByTheEnvironment) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* fail_rank = std::getenv("NKISIM_TEST_FAIL_RANK");
  EXPECT_FALSE(fail_rank != nullptr && std::atoi(fail_rank) == rank) << "failing on purpose";
}

}  // namespace
}  // namespace nkisim::collectives
