// attn_q_batch_shard under mpiexec: the public reference's own case (run with -n 4), the TP64 ->
// TP8DP8 case (run with -n 64) and the table check (-n 4). Goldens follow the reference test:
// rank r's result is Q_global[members of r's group] sliced over the batch at r's position.
#include "collectives/batch_shard.h"

#include <mpi.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

using ::testing::HasSubstr;

// Q_global[r] element at flat index i: distinct for every rank and element, exact in fp32.
float Q(int rank, int64_t index) { return static_cast<float>(rank * 100000 + index); }

struct Job {
  int rank = 0, world = 0;
  ResolvedTopology topology;
  std::unique_ptr<LogicalCore> lnc;
  std::unique_ptr<RankContext> ctx;
};

std::unique_ptr<Job> StartJob(const std::string& topology_text, int expected_world) {
  auto job = std::make_unique<Job>();
  MPI_Comm_rank(MPI_COMM_WORLD, &job->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job->world);
  EXPECT_EQ(job->world, expected_world) << "run this test with mpiexec -n " << expected_world;
  job->topology = ResolveTopology(ParseTopology(topology_text, "test"), Trn2Profile(), "test");
  job->lnc = std::make_unique<LogicalCore>(2, Trn2Profile(), job->rank);
  job->ctx = std::make_unique<RankContext>(MPI_COMM_WORLD, job->topology, *job->lnc);
  return job;
}

TensorView IotaTable(const Job& job) {
  TensorView t = TensorView::Create({1, job.world}, DType::kInt32, "iota_workers");
  for (int r = 0; r < job.world; ++r) t.set({0, r}, job.topology.iota_workers[r]);
  return t;
}

// Runs one layout and checks every element against the formula of the reference test.
void CheckBatchShard(Job& job, BatchShardLayout layout, int64_t b, int64_t s, int64_t d,
                     bool rank_from_tensor) {
  const GroupComm& group = job.ctx->group("gqa");
  const int64_t g = group.size(), per = b / g;
  const bool nbsd = layout == BatchShardLayout::kNBSd;
  // NBSd input (1, B, S, d); dBnS input (d, B, 1, S).
  const Shape in_shape = nbsd ? Shape{1, b, s, d} : Shape{d, b, 1, s};
  TensorView input = TensorView::Create(in_shape, DType::kFloat32, "q");
  std::vector<float> values(static_cast<size_t>(input.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = Q(job.rank, static_cast<int64_t>(i));
  input.FromFloats(values);
  const Shape gathered_shape = nbsd ? Shape{g, 1, b, s, d} : Shape{g, d, b, 1, s};
  TensorView gathered = TensorView::Create(gathered_shape, DType::kFloat32, "gathered_buf");
  TensorView rank_id = TensorView::Create({1, 1}, DType::kInt32, "rank_id");
  rank_id.set({0, 0}, static_cast<float>(job.rank));
  TensorView out = attn_q_batch_shard(*job.ctx, input, IotaTable(job), gathered,
                                      static_cast<int>(g), group, layout,
                                      rank_from_tensor ? &rank_id : nullptr);
  const Shape want = nbsd ? Shape{g, per, s, d} : Shape{g, d, per, s};
  ASSERT_EQ(out.shape(), want);
  const int64_t pos = group.position;
  int64_t wrong = 0;
  for (int64_t m = 0; m < g; ++m) {
    const int member = (*group.members)[m];
    for (int64_t bb = 0; bb < per; ++bb) {
      for (int64_t x = 0; x < s * d; ++x) {
        const int64_t ss = x / d, k = x % d;  // NBSd: (s, k); dBnS: k over d, ss over S
        const int64_t batch = pos * per + bb;
        const float golden = nbsd ? Q(member, (batch * s + ss) * d + k)
                                  : Q(member, (k * b + batch) * s + ss);
        const float got = nbsd ? out.get({m, bb, ss, k}) : out.get({m, k, bb, ss});
        wrong += got != golden;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "rank " << job.rank;
}

constexpr const char* kReferenceTopology =
    "world_size: 4 lnc: 2 replica_groups { name: 'gqa' explicit { groups { ranks: [0, 1] }"
    " groups { ranks: [2, 3] } } } batch_shard { replica_group: 'gqa' batch: 8"
    " iota_workers: [0, 4, 0, 4] }";

TEST(BatchShardReference, NBSdWithRankFromRuntimeAndFromTensor) {
  auto job = StartJob(kReferenceTopology, 4);
  CheckBatchShard(*job, BatchShardLayout::kNBSd, 8, 1, 64, false);
  CheckBatchShard(*job, BatchShardLayout::kNBSd, 8, 1, 64, true);
}

TEST(BatchShardReference, DBnSWithRankFromRuntimeAndFromTensor) {
  auto job = StartJob(kReferenceTopology, 4);
  CheckBatchShard(*job, BatchShardLayout::kDBnS, 8, 1, 64, false);
  CheckBatchShard(*job, BatchShardLayout::kDBnS, 8, 1, 64, true);
}

TEST(BatchShardReference, StridedGroupWithModuloTableIsRefused) {
  // Groups [[0, 2], [1, 3]] with the caller's (r % G) * B / G table: ranks 1 and 2 would read the
  // wrong rows. The table comes in as a tensor, unchecked by the config, as in the reference.
  auto job = StartJob("world_size: 4 lnc: 2 replica_groups { name: 'gqa' strided { group_size: 2 } }",
                      4);
  const GroupComm& group = job->ctx->group("gqa");
  TensorView modulo = TensorView::Create({1, 4}, DType::kInt32, "iota_workers");
  for (int r = 0; r < 4; ++r) modulo.set({0, r}, (r % 2) * 4);
  TensorView input = TensorView::Create({1, 8, 1, 64}, DType::kFloat32, "q");
  TensorView gathered = TensorView::Create({2, 1, 8, 1, 64}, DType::kFloat32, "gathered_buf");
  const bool mismatched = job->rank == 1 || job->rank == 2;
  try {
    attn_q_batch_shard(*job->ctx, input, modulo, gathered, 2, group);
    EXPECT_FALSE(mismatched) << "rank " << job->rank << " should have been refused";
  } catch (const Error& e) {
    EXPECT_TRUE(mismatched) << e.what();
    const int expected = job->rank == 1 ? 0 : 4, found = job->rank == 1 ? 4 : 0;
    EXPECT_THAT(e.what(), HasSubstr(StrCat("iota_workers[0, ", job->rank, "] = ", found)));
    EXPECT_THAT(e.what(), HasSubstr(StrCat("batch offset must be ", expected)));
  }
}

TEST(BatchShardTp64, Tp64ToTp8Dp8BothLayouts) {
  auto job = StartJob(
      "world_size: 64 lnc: 2 replica_groups { name: 'gqa' contiguous { group_size: 8 } }"
      " batch_shard { replica_group: 'gqa' batch: 32 }",
      64);
  CheckBatchShard(*job, BatchShardLayout::kNBSd, 32, 1, 128, false);
  CheckBatchShard(*job, BatchShardLayout::kDBnS, 32, 1, 128, true);
}

}  // namespace
}  // namespace nkisim::collectives
