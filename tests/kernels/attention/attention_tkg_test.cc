// Decode (TKG) attention: the golden grid (small batch; the 32768-token and Bl = 32 cases run in
// attention_tkg_slow_tests), k_new / v_new (golden, the append, refusals), LNC 1 vs LNC 2
// agreement, the LNC-2 row split and sendrecv merge on the timeline, the roofline at T >= 1024
// (the default job's shapes among them), and one test per validation rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <utility>
#include <vector>
#include <cstring>
#include <string>

#include "kernels/attention/attention_tkg.h"
#include "kernels/reference/attention_ref.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "tests/kernels/attention/attention_tkg_test_util.h"

namespace nkisim::kernels::testing {
namespace {

constexpr DType kBf16 = DType::kBFloat16, kFp32 = DType::kFloat32;

class TkgGridTest : public ::testing::TestWithParam<TkgCase> {};

TEST_P(TkgGridTest, MatchesGolden) {
  const TkgCase& c = GetParam();
  const AttentionTkgParams p = MakeTkgParams(c);
  const TkgRun run = RunTkg(p, c.lnc);
  ASSERT_EQ(run.out.shape(), p.q.shape());
  ASSERT_EQ(run.out.dtype(), c.dtype);
  EXPECT_TRUE(WithinTolerance(run.out.ToFloats(),
                              reference::AttentionTkgRef(p.q, p.k_cache, p.v_cache),
                              TkgTolerance(c.dtype), c.name));
}

// Every value of every axis appears (T = 32768 and Bl = 32 in the slow binary); T = 1 and 127 at
// LNC 2 leave core 1 without tokens; T = 1000 ends on a partial 128-token chunk; Bl = 3 with
// d = 64 ends on a half pack; G = 64 over Bl = 4 makes two row groups.
INSTANTIATE_TEST_SUITE_P(
    Tkg, TkgGridTest,
    ::testing::Values(TkgCase{"t1_g1_b1_d64_lnc1_bf16", 1, 1, 1, 64, 1, kBf16},
                      TkgCase{"t1_g4_b4_d128_lnc2_fp32", 1, 4, 4, 128, 2, kFp32},
                      TkgCase{"t127_g8_b4_d64_lnc2_bf16", 127, 8, 4, 64, 2, kBf16},
                      TkgCase{"t127_g1_b1_d128_lnc1_fp32", 127, 1, 1, 128, 1, kFp32},
                      TkgCase{"t512_g4_b4_d128_lnc1_bf16", 512, 4, 4, 128, 1, kBf16},
                      TkgCase{"t512_g8_b1_d64_lnc2_fp32", 512, 8, 1, 64, 2, kFp32},
                      TkgCase{"t1024_g8_b4_d128_lnc2_bf16", 1024, 8, 4, 128, 2, kBf16},
                      TkgCase{"t1024_g1_b4_d64_lnc1_bf16", 1024, 1, 4, 64, 1, kBf16},
                      TkgCase{"t1024_g4_b1_d128_lnc2_fp32", 1024, 4, 1, 128, 2, kFp32},
                      TkgCase{"t4096_g8_b4_d128_lnc1_bf16", 4096, 8, 4, 128, 1, kBf16},
                      TkgCase{"t4096_g4_b4_d64_lnc2_bf16", 4096, 4, 4, 64, 2, kBf16},
                      TkgCase{"t4096_g1_b1_d128_lnc2_fp32", 4096, 1, 1, 128, 2, kFp32},
                      TkgCase{"t1000_g8_b3_d64_lnc2_bf16", 1000, 8, 3, 64, 2, kBf16},
                      TkgCase{"t1000_g4_b3_d64_lnc1_fp32", 1000, 4, 3, 64, 1, kFp32},
                      TkgCase{"t600_g64_b4_d64_lnc2_bf16", 600, 64, 4, 64, 2, kBf16},
                      TkgCase{"t2048_g128_b1_d128_lnc1_bf16", 2048, 128, 1, 128, 1, kBf16}),
    TkgCaseName);

// With k_new / v_new: the output matches the golden over the caches holding those rows at
// T - 1 (the caches' own value there, 50.0, is ignored), and afterwards the caches hold them
// there and are unchanged elsewhere. The cases put this step's token in every place the kernel
// handles apart: a block of its own (T = 1, also with core 1 of LNC 2 empty), the only token of
// a block's last V chunk (T 1025 at LNC 2, T 129), the last partition of a full 128-token chunk
// (T 128, 256, 1024), a token-split core 1 (Bl 3), d = 64 packs with a half pack (Bl 3), a
// strided k_new / v_new, and one long row as virtual rows (T 32768).
class TkgNewRowsTest : public ::testing::TestWithParam<TkgCase> {};

TEST_P(TkgNewRowsTest, MatchesGoldenAndAppends) {
  const TkgCase& c = GetParam();
  AttentionTkgParams p = MakeTkgParamsWithNew(c);
  if (c.name.find("strided") != std::string::npos) {
    // k_new / v_new as the odd columns of a [Bl, 2d] tensor: neither row-contiguous.
    for (TensorView* t : {&p.k_new, &p.v_new}) {
      TensorView wide = TensorView::Create({c.bl, 2 * c.d}, c.dtype, t->name() + "_wide");
      for (int64_t b = 0; b < c.bl; ++b) {
        for (int64_t e = 0; e < c.d; ++e) wide.set({b, 2 * e + 1}, t->get({b, e}));
      }
      *t = wide.slice(1, 1, 2 * c.d, 2);
    }
  }
  const TensorView k_ref = KCacheWithNew(p), v_ref = VCacheWithNew(p);
  const std::vector<double> golden = reference::AttentionTkgRef(p.q, k_ref, v_ref);
  const TkgRun run = RunTkg(p, c.lnc);
  EXPECT_TRUE(WithinTolerance(run.out.ToFloats(), golden, TkgTolerance(c.dtype), c.name));
  EXPECT_EQ(p.k_cache.ToFloats(), k_ref.ToFloats()) << "k_cache holds k_new at T - 1, else as before";
  EXPECT_EQ(p.v_cache.ToFloats(), v_ref.ToFloats()) << "v_cache holds v_new at T - 1, else as before";
}

INSTANTIATE_TEST_SUITE_P(
    Tkg, TkgNewRowsTest,
    ::testing::Values(TkgCase{"new_t1_g8_b4_d128_lnc1_bf16", 1, 8, 4, 128, 1, kBf16},
                      TkgCase{"new_t1_g4_b3_d64_lnc2_bf16", 1, 4, 3, 64, 2, kBf16},
                      TkgCase{"new_t2_g4_b1_d128_lnc2_fp32", 2, 4, 1, 128, 2, kFp32},
                      TkgCase{"new_t128_g8_b4_d128_lnc1_bf16", 128, 8, 4, 128, 1, kBf16},
                      TkgCase{"new_t129_g1_b2_d128_lnc1_fp32", 129, 1, 2, 128, 1, kFp32},
                      TkgCase{"new_t256_g8_b2_d128_lnc2_bf16", 256, 8, 2, 128, 2, kBf16},
                      TkgCase{"new_t1024_g8_b4_d128_lnc1_bf16", 1024, 8, 4, 128, 1, kBf16},
                      TkgCase{"new_t1025_g8_b4_d128_lnc2_bf16", 1025, 8, 4, 128, 2, kBf16},
                      TkgCase{"new_t1025_g1_b6_d128_lnc2_bf16", 1025, 1, 6, 128, 2, kBf16},
                      TkgCase{"new_t700_g4_b3_d64_lnc2_fp32", 700, 4, 3, 64, 2, kFp32},
                      // One long row as virtual rows: the append runs first, the rows read it.
                      TkgCase{"new_t32768_g8_b1_d64_lnc1_bf16", 32768, 8, 1, 64, 1, kBf16},
                      TkgCase{"new_t32768_g4_b1_d64_lnc2_bf16", 32768, 4, 1, 64, 2, kBf16},
                      TkgCase{"new_t600_g8_b4_d64_lnc2_bf16", 600, 8, 4, 64, 2, kBf16},
                      TkgCase{"new_t300_g4_b3_d64_lnc1_strided_bf16", 300, 4, 3, 64, 1, kBf16},
                      TkgCase{"new_t513_g8_b2_d128_lnc2_strided_fp32", 513, 8, 2, 128, 2, kFp32}),
    TkgCaseName);

// The same inputs give the same output at LNC 1 and LNC 2, within the tolerance.
TEST(TkgLncTest, Lnc1AndLnc2Agree) {
  for (const TkgCase& c : {TkgCase{"lnc_t1536_g8_b4_d128_bf16", 1536, 8, 4, 128, 1, kBf16},
                           TkgCase{"lnc_t700_g4_b3_d64_fp32", 700, 4, 3, 64, 1, kFp32}}) {
    const AttentionTkgParams p = MakeTkgParams(c);
    const std::vector<float> one = RunTkg(p, 1).out.ToFloats(), two = RunTkg(p, 2).out.ToFloats();
    const std::vector<double> one_d(one.begin(), one.end());
    EXPECT_TRUE(WithinTolerance(two, one_d, TkgTolerance(c.dtype), c.name));
  }
}

// Short streams: the stream floor (the roofline plus the first load's and the store's fixed DMA
// costs) is a lower bound no run beats, and the kernel stays within a stated factor of it where
// the roofline itself is out of reach (docs/attention.md, "What the bound allows"). The limits
// are today's ratios plus about 5%; the default job's TP8DP8 case (B 4, G 8, T 1025, LNC 2) is
// 1.66x its floor of 4.1 us (2.35x the roofline, whose floor is already 1.41x). Re-set with the
// compute engines' per-instruction costs (docs/engine-costs.md): each small dependent instruction
// now pays the 200-cycle dependent overhead and a cold PE its ramp, so these short, latency-bound
// kernels went from 1.54, 2.14 and 1.19x to 1.66, 2.44 and 1.33x their floors.
// Under the DMA engine model (docs/dma.md; the floor is now the bound + 2 x 1.3 us) dev40 ran
// them at 2.78, 2.57, 1.89 and 3.43x the floor (permuted q loads, 256 B V runs, 768 B K runs);
// rescheduled (2026-12-04) 1.57, 1.27, 1.97 and 1.22x: three limits tightened to about that + 5%,
// the d 64 one-row case (its 0.2 us slower start: the 2 KiB K span) keeps 2.56.
TEST(TkgStreamFloorTest, ShortStreamsStayNearTheirFloor) {
  const struct {
    TkgCase c;
    double limit;
  } cases[] = {
      {{"floor_t1025_g8_b4_d128_lnc2", 1025, 8, 4, 128, 2, kBf16}, 1.65},
      {{"floor_t1024_g8_b4_d128_lnc1", 1024, 8, 4, 128, 1, kBf16}, 1.33},
      {{"floor_t1024_g1_b1_d64_lnc1", 1024, 1, 1, 64, 1, kBf16}, 2.56},
      {{"floor_t4096_g8_b4_d64_lnc1", 4096, 8, 4, 64, 1, kBf16}, 1.29},
  };
  for (const auto& [c, limit] : cases) {
    const AttentionTkgParams p = MakeTkgParams(c);
    const double sim = RunTkg(p, c.lnc).lnc->now(), floor = TkgStreamFloorNs(p, c.lnc);
    std::cout << c.name << ": simulated " << sim << " ns = " << sim / floor
              << "x the stream floor (" << floor << " ns), " << sim / TkgRooflineNs(p, c.lnc)
              << "x the roofline\n";
    EXPECT_GE(sim, floor) << c.name;
    EXPECT_LE(sim / floor, limit) << c.name;
  }
}

std::vector<InstructionRecord> Records(const LogicalCore& lnc, int core, const char* name) {
  std::vector<InstructionRecord> out;
  for (const InstructionRecord& r : lnc.core(core).timeline().records()) {
    if (std::strcmp(r.name, name) == 0) out.push_back(r);
  }
  return out;
}

// LNC 2 with an odd Bl splits the tokens: each core exchanges one partial per row group over the
// link, after its last matmul, and merges it (exp of the max difference on ACT) before its
// stores; LNC 1 never uses the link.
TEST(TkgStructureTest, Lnc2MergesPartialsWithSendrecv) {
  const TkgCase c{"t2048_g64_b3_d128", 2048, 64, 3, 128, 2, kBf16};  // two row groups
  const AttentionTkgParams p = MakeTkgParams(c);
  const TkgRun run = RunTkg(p, 2);
  const AttentionTkgPlan plan = PlanAttentionTkg(p, 2, Trn2Profile());
  ASSERT_FALSE(plan.split_rows);
  ASSERT_EQ(plan.rows_per_group, 2);
  ASSERT_EQ(plan.core0_tokens, 1024);
  for (int core = 0; core < 2; ++core) {
    const auto sends = Records(*run.lnc, core, "sendrecv");
    ASSERT_EQ(sends.size(), 2u) << "one exchange per row group, core " << core;
    EXPECT_EQ(sends[0].bytes, 2 * 64 * (128 + 2) * 4) << "[G * rows, d + 2] fp32 partial";
    double last_matmul = 0, first_store_after = 1e30;
    for (const InstructionRecord& r : Records(*run.lnc, core, "nc_matmul")) {
      last_matmul = std::max(last_matmul, r.end_ns);
    }
    EXPECT_LE(sends[1].start_ns, run.lnc->now());
    EXPECT_GE(sends[1].end_ns, last_matmul - 1e-9) << "the last exchange follows the last matmul";
    int merges = 0;
    for (const InstructionRecord& r : Records(*run.lnc, core, "activation")) {
      if (r.start_ns >= sends[1].end_ns) ++merges;
    }
    EXPECT_GE(merges, 2) << "exp(nb - max) for both partials after the exchange";
    for (const InstructionRecord& r : run.lnc->core(core).timeline().records()) {
      if (std::strcmp(r.name, "dma_copy") == 0 && r.start_ns >= sends[1].end_ns) {
        first_store_after = std::min(first_store_after, r.start_ns);
      }
    }
    EXPECT_LT(first_store_after, 1e30) << "the merged rows are stored after the exchange";
  }
  const TkgRun one = RunTkg(p, 1);
  EXPECT_TRUE(Records(*one.lnc, 0, "sendrecv").empty());
}

// LNC 2 with an even Bl splits the rows: each core streams all T tokens of its half of the rows
// (half the cache), normalises its own partial and stores its rows; nothing crosses the link.
TEST(TkgStructureTest, Lnc2SplitsEvenRowsWithoutExchange) {
  const TkgCase c{"t1025_g8_b4_d128", 1025, 8, 4, 128, 2, kBf16};
  const AttentionTkgParams p = MakeTkgParams(c);
  const AttentionTkgPlan plan = PlanAttentionTkg(p, 2, Trn2Profile());
  ASSERT_TRUE(plan.split_rows);
  EXPECT_EQ(plan.core0_rows, 2);
  EXPECT_EQ(plan.core0_tokens, 1025);
  EXPECT_EQ(plan.rows_per_group, 2);
  const TkgRun run = RunTkg(p, 2);
  const int64_t kv = p.k_cache.size_bytes() + p.v_cache.size_bytes();
  for (int core = 0; core < 2; ++core) {
    EXPECT_TRUE(Records(*run.lnc, core, "sendrecv").empty()) << "core " << core;
    int64_t bytes = 0;
    for (const InstructionRecord& r : Records(*run.lnc, core, "dma_copy")) bytes += r.bytes;
    EXPECT_GE(bytes, kv / 2) << "core " << core;
    EXPECT_LE(bytes, kv / 2 + p.q.size_bytes()) << "core " << core << ": half the cache, q and out rows";
  }
  EXPECT_TRUE(WithinTolerance(run.out.ToFloats(),
                              reference::AttentionTkgRef(p.q, p.k_cache, p.v_cache),
                              TkgTolerance(c.dtype), c.name));
}

// The KV stream reads every K and V byte exactly once per core pair.
TEST(TkgStructureTest, ReadsTheCacheOnce) {
  const TkgCase c{"t3000_g8_b4_d128", 3000, 8, 4, 128, 2, kBf16};
  const AttentionTkgParams p = MakeTkgParams(c);
  const TkgRun run = RunTkg(p, 2);
  int64_t bytes = 0;
  for (int core = 0; core < 2; ++core) {
    for (const InstructionRecord& r : Records(*run.lnc, core, "dma_copy")) bytes += r.bytes;
  }
  const int64_t kv = p.k_cache.size_bytes() + p.v_cache.size_bytes();
  EXPECT_GE(bytes, kv);
  EXPECT_LE(bytes, kv + 2 * p.q.size_bytes() * 2) << "K / V once, plus q and the output";
}

// With k_new / v_new the cache is still read at most once (position T - 1 rides along in a longer
// chunk, unused), plus the new rows loaded once and appended once.
TEST(TkgStructureTest, WithNewRowsReadsTheCacheOnce) {
  for (const TkgCase& c : {TkgCase{"new_t1025_g8_b4_d128", 1025, 8, 4, 128, 2, kBf16},
                           TkgCase{"new_t3000_g8_b3_d128", 3000, 8, 3, 128, 2, kBf16}}) {
    const AttentionTkgParams p = MakeTkgParamsWithNew(c);
    const TkgRun run = RunTkg(p, c.lnc);
    int64_t bytes = 0;
    for (int core = 0; core < c.lnc; ++core) {
      for (const InstructionRecord& r : Records(*run.lnc, core, "dma_copy")) bytes += r.bytes;
    }
    const int64_t kv = p.k_cache.size_bytes() + p.v_cache.size_bytes();
    const int64_t rows = p.k_new.size_bytes() + p.v_new.size_bytes();
    EXPECT_GE(bytes, kv) << c.name;
    EXPECT_LE(bytes, kv + 2 * p.q.size_bytes() * 2 + 2 * rows) << c.name;
  }
}

// Small-batch streams (1 - 8 MB per core) cannot reach the 1.25x target under the cost model:
// on top of the HBM time each pays the first DMA's dma_fixed_ns (600 ns) before any byte arrives,
// the last block's P @ V, accumulator update and normalisation after the last byte, and the
// output store's dma_fixed_ns (600 ns). At LNC 2 an even Bl splits the rows, so no partial
// exchange (600 ns link latency) or merge (~0.75 us) is left. At Bl 4 - 8 the PE is ~75% busy
// over a core's HBM time even with P @ V in the V-stationary form (each G = 8 matmul pays 60
// cycles of access overhead on 64 - 512 cycles of work), so it cannot absorb the fill, and the
// 16 DMA queues (27.3 GB/s each, 1.2x the HBM port together) cannot make a 1 - 4 MB stream both
// start early and end on time. The guards are what the kernel achieves (2.35x, 1.15x, 1.47x,
// 1.34x, 1.14x since the compute engines' per-instruction costs, docs/engine-costs.md; 2.19x,
// 1.14x, 1.34x, 1.33x, 1.15x before them), with a little margin.
TEST(TkgPerformanceTest, SmallBatchNoRegression) {
  struct Guard {
    TkgCase c;
    double limit;
  };
  // Re-set 2026-12-04 for the DMA engine model, old bar -> dev40 before rescheduling -> now
  // (x the bound; the stream floor is the bound + 2.6 us: 1.89x, 1.11x, 1.22x, 1.22x, 1.11x):
  // 2.47 -> 5.23 -> 2.95; 1.16 -> 2.36 -> 1.32; 1.54 -> 3.03 -> 1.50; 1.35 -> 3.12 -> 1.61;
  // 1.17 -> 3.90 -> 1.39.
  for (const Guard& g : {Guard{{"perf_t1025_g8_b4_d128_lnc2", 1025, 8, 4, 128, 2, kBf16}, 3.07},
                         Guard{{"perf_t4096_g8_b4_d128_lnc1", 4096, 8, 4, 128, 1, kBf16}, 1.39},
                         Guard{{"perf_t4096_g8_b4_d128_lnc2", 4096, 8, 4, 128, 2, kBf16}, 1.56},
                         Guard{{"perf_t2048_g8_b8_d128_lnc2", 2048, 8, 8, 128, 2, kBf16}, 1.68},
                         Guard{{"perf_t4096_g8_b8_d64_lnc1", 4096, 8, 8, 64, 1, kBf16}, 1.44}}) {
    ExpectTkgWithinRoofline(g.c, g.limit, /*check_golden=*/false);
  }
}

// The default 64-rank job's attention per rank (T = 1024 cached + this step's token, LNC 2), as
// the kernel runs it and with k_new / v_new (the caller then issues no append of its own; the
// bound is the same, the caches holding that token once). The guards are what the kernel
// achieves (2.35x, 2.53x, 1.19x, 1.18x since the compute engines' per-instruction costs,
// docs/engine-costs.md; 2.19x, 2.15x, 1.17x, 1.16x before them) with a little margin.
//  * TP8DP8, Bl 4, G 8 (1 MB per core, bound 2.9 us): the rows split, so no partial crosses the
//    link; what is left is the floor of a 1 MB stream: the first DMA's 600 ns, 16 DMA queues of
//    27.3 GB/s (only 1.2x the HBM port, so a stream that starts early ends late), the last
//    block's P @ V, accumulator update and normalisation (~0.7 us) and the 675 ns store.
//  * TP64, Bl 32, G 1: the rows split; the DMA queues are ~85% busy (about 100 DMAs per core).
TEST(TkgPerformanceTest, DefaultJobShapes) {
  struct Guard {
    TkgCase c;
    double limit;
    bool with_new;
  };
  for (const Guard& g :
       // Re-set 2026-12-04 for the DMA engine model, old bar -> dev40 before rescheduling ->
       // now (x the bound): 2.47 -> 5.23 -> 2.95; 2.66 -> 6.50 -> 3.36; 1.25 -> 2.52 -> 1.34;
       // 1.24 -> 3.31 -> 1.50. The floor of the B 4 shape alone is 1.88x its 2.9 us bound
       // (2 x 1.3 us of DMA latency); with k_new the append's K column (one descriptor an
       // element) follows the kernel.
       {Guard{{"job_t1025_g8_b4_d128_lnc2", 1025, 8, 4, 128, 2, kBf16}, 3.07, false},
        Guard{{"job_t1025_g8_b4_d128_lnc2_new", 1025, 8, 4, 128, 2, kBf16}, 3.50, true},
        Guard{{"job_t1025_g1_b32_d128_lnc2", 1025, 1, 32, 128, 2, kBf16}, 1.39, false},
        Guard{{"job_t1025_g1_b32_d128_lnc2_new", 1025, 1, 32, 128, 2, kBf16}, 1.56, true}}) {
    ExpectTkgWithinRoofline(g.c, g.limit, /*check_golden=*/true, g.with_new);
  }
}

// ---- validation: Error(kInvalidArgument) naming the operand, its shape and the rule ----

void ExpectRejected(const AttentionTkgParams& p, const std::string& fragment) {
  try {
    ValidateAttentionTkg(p, Trn2Profile());
    ADD_FAILURE() << "accepted; expected: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << e.what() << "\n  expected to contain: " << fragment;
    EXPECT_EQ(std::string(e.what()).rfind("attention_tkg: ", 0), 0u) << e.what();
  }
}

AttentionTkgParams Shapes(const Shape& q, const Shape& k, const Shape& v, DType dt = kBf16,
                          DType kdt = kBf16) {
  return {TensorView::Create(q, dt, "q"), TensorView::Create(k, kdt, "k_cache"),
          TensorView::Create(v, kdt, "v_cache")};
}

TEST(TkgValidationTest, AcceptsAGoodCase) {
  EXPECT_NO_THROW(ValidateAttentionTkg(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}),
                                       Trn2Profile()));
}
TEST(TkgValidationTest, RejectsDAbove128) {
  ExpectRejected(Shapes({8, 4, 256}, {4, 256, 64}, {4, 64, 256}),
                 "q [8, 4, 256] bf16: d = 256 must be <= 128 (the partitions)");
}
TEST(TkgValidationTest, RejectsGAbove128) {
  ExpectRejected(Shapes({129, 1, 64}, {1, 64, 64}, {1, 64, 64}),
                 "q [129, 1, 64] bf16: G = 129 heads must be <= 128");
}
TEST(TkgValidationTest, RejectsEmptyCache) {
  ExpectRejected(Shapes({8, 4, 128}, {4, 128, 0}, {4, 0, 128}),
                 "k_cache [4, 128, 0] bf16: T = 0");
}
TEST(TkgValidationTest, RejectsMismatchedCaches) {
  // The former layout for K ([Bl, T, d]) is caught here.
  ExpectRejected(Shapes({8, 4, 128}, {4, 64, 128}, {4, 64, 128}),
                 "v_cache [4, 64, 128] bf16: must be [Bl, T, d] = [4, 128, 64] to match k_cache");
  ExpectRejected(Shapes({8, 4, 128}, {4, 128, 64}, {2, 64, 128}), "v_cache [2, 64, 128]");
}
TEST(TkgValidationTest, RejectsQDisagreeingWithTheCaches) {
  ExpectRejected(Shapes({8, 2, 128}, {4, 128, 64}, {4, 64, 128}),
                 "q [8, 2, 128] bf16: [G, Bl, d] must have Bl = 4 and d = 128");
  ExpectRejected(Shapes({8, 4, 64}, {4, 128, 64}, {4, 64, 128}), "q [8, 4, 64] bf16");
}
TEST(TkgValidationTest, RejectsNonFloatDtypes) {
  ExpectRejected(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}, DType::kInt32),
                 "q [8, 4, 128] int32: dtype must be a float type");
  ExpectRejected(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}, kBf16, DType::kInt8),
                 "k_cache [4, 128, 64] int8: dtype must be a float type");
}
TEST(TkgValidationTest, RejectsMixedCacheDtypes) {
  AttentionTkgParams p = Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128});
  p.v_cache = TensorView::Create({4, 64, 128}, kFp32, "v_cache");
  ExpectRejected(p, "v_cache [4, 64, 128] fp32: dtype must equal k_cache's bf16");
}
TEST(TkgValidationTest, RejectsWrongRank) {
  ExpectRejected(Shapes({8, 4, 128}, {4, 128}, {4, 64, 128}), "k_cache [4, 128] bf16: must be a 3-D tensor");
}
AttentionTkgParams WithNew(AttentionTkgParams p, const Shape& k_new, const Shape& v_new,
                           DType dt = kBf16) {
  p.k_new = TensorView::Create(k_new, dt, "k_new");
  p.v_new = TensorView::Create(v_new, dt, "v_new");
  return p;
}

TEST(TkgValidationTest, AcceptsNewRows) {
  EXPECT_NO_THROW(ValidateAttentionTkg(
      WithNew(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}), {4, 128}, {4, 128}), Trn2Profile()));
}
TEST(TkgValidationTest, RejectsOneNewRowWithoutTheOther) {
  AttentionTkgParams p = WithNew(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}), {4, 128}, {4, 128});
  p.v_new = TensorView();
  ExpectRejected(p, "v_new <none> : must be given with k_new");
  p = WithNew(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}), {4, 128}, {4, 128});
  p.k_new = TensorView();
  ExpectRejected(p, "k_new <none> : must be given with v_new");
}
TEST(TkgValidationTest, RejectsNewRowsOfTheWrongShape) {
  const AttentionTkgParams base = Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128});
  ExpectRejected(WithNew(base, {4, 64}, {4, 128}),
                 "k_new [4, 64] bf16: must be [Bl, d] = [4, 128] (this step's row");
  ExpectRejected(WithNew(base, {4, 128}, {2, 128}), "v_new [2, 128] bf16: must be [Bl, d] = [4, 128]");
  ExpectRejected(WithNew(base, {1, 4, 128}, {4, 128}), "k_new [1, 4, 128] bf16: must be [Bl, d]");
}
TEST(TkgValidationTest, RejectsNewRowsOfAnotherDtype) {
  AttentionTkgParams p = WithNew(Shapes({8, 4, 128}, {4, 128, 64}, {4, 64, 128}), {4, 128}, {4, 128});
  p.v_new = TensorView::Create({4, 128}, kFp32, "v_new");
  ExpectRejected(p, "v_new [4, 128] fp32: dtype must equal k_cache's bf16");
}
// A refused call writes nothing: neither out nor the caches' position T - 1, and no time passes.
TEST(TkgValidationTest, RefusedNewRowsWriteNothing) {
  const TkgCase c{"refused", 64, 8, 4, 128, 2, kBf16};
  AttentionTkgParams p = MakeTkgParamsWithNew(c);
  p.v_new = TensorView::Create({4, 64}, kBf16, "v_new");
  const std::vector<float> k_before = p.k_cache.ToFloats(), v_before = p.v_cache.ToFloats();
  LogicalCore lnc(2, Trn2Profile());
  try {
    AttentionTkg(lnc, p);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("v_new [4, 64] bf16: must be [Bl, d] = [4, 128]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p.k_cache.ToFloats(), k_before);
  EXPECT_EQ(p.v_cache.ToFloats(), v_before);
  EXPECT_EQ(lnc.now(), 0.0);
}

// Through the public entry point the same error ends the call before anything runs (the CLI
// maps it to exit code 11).
TEST(TkgValidationTest, EntryPointThrowsInvalidArgument) {
  LogicalCore lnc(2, Trn2Profile());
  try {
    AttentionTkg(lnc, Shapes({8, 4, 256}, {4, 256, 64}, {4, 64, 256}));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(ExitCodeFor(e.code()), 11);
  }
  EXPECT_EQ(lnc.now(), 0.0);
}

// AttentionTkgInto writes into the caller's tensor: one of another shape or an integer dtype is
// refused, naming out and q's shape, before anything runs.
TEST(TkgValidationTest, IntoRefusesAnOutThatIsNotQsShape) {
  const AttentionTkgParams p = MakeTkgParams(TkgCase{"into", 256, 8, 4, 64, 1, kBf16});
  for (const TensorView& out : {TensorView::Create({8, 3, 64}, DType::kBFloat16, "out"),
                                TensorView::Create({8, 4, 64}, DType::kInt32, "out")}) {
    LogicalCore lnc(1, Trn2Profile());
    try {
      AttentionTkgInto(lnc, p, out);
      ADD_FAILURE() << "accepted " << ShapeString(out.shape());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("out [8, "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("q's shape [8, 4, 64]"), std::string::npos) << e.what();
    }
    EXPECT_EQ(lnc.now(), 0.0);
  }
}

}  // namespace
}  // namespace nkisim::kernels::testing
