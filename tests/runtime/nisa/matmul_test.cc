#include "runtime/nisa/matmul.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "runtime/error.h"
#include "runtime/cost_model.h"
#include "runtime/neuron_core.h"
#include "runtime/pe_throttle.h"
#include "runtime/rng.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::HasSubstr;

class MatmulTest : public ::testing::Test {
 protected:
  MatmulTest() : core_(0, Trn2Profile()), scope_(core_) {}

  // A tile of seeded values in [-1, 1), rounded to its dtype.
  Tile Random(const std::string& name, const Shape& shape, DType dtype, uint64_t id) {
    Tile t = core_.AllocateSbuf(name, shape, dtype);
    std::vector<float> v(static_cast<size_t>(NumElements(shape)));
    CounterRng rng(11, id);
    for (size_t i = 0; i < v.size(); ++i) v[i] = rng.Uniform(i, -1.0f, 1.0f);
    t.FromFloats(v);
    return t;
  }

  // Plain triple loop over the stored values: out[m][n] = sum_k s[k][m] * x[k][n].
  static std::vector<double> Reference(const std::vector<float>& s, const std::vector<float>& x,
                                       int64_t k, int64_t m, int64_t n) {
    std::vector<double> out(static_cast<size_t>(m * n), 0.0);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) out[i * n + j] += double(s[kk * m + i]) * x[kk * n + j];
      }
    }
    return out;
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
  }


  NeuronCore core_;
  ScopedCurrentCore scope_;
};

TEST_F(MatmulTest, Bf16TileMatchesPlainLoops) {
  Tile s = Random("s", {128, 128}, DType::kBFloat16, 1);
  Tile x = Random("x", {128, 512}, DType::kBFloat16, 2);
  Tile out = core_.AllocatePsum("out", {128, 512});
  nc_matmul(out, s, x);
  ExpectNear(out.ToFloats(), Reference(s.ToFloats(), x.ToFloats(), 128, 128, 512), 1e-4);
}

TEST_F(MatmulTest, AccumulateAddsIntoTheGroup) {
  Tile s = Random("s", {64, 32}, DType::kFloat16, 3);
  Tile x1 = Random("x1", {64, 100}, DType::kFloat16, 4);
  Tile x2 = Random("x2", {64, 100}, DType::kFloat16, 5);
  Tile out = core_.AllocatePsum("out", {32, 100});
  nc_matmul(out, s, x1);
  nc_matmul(out, s, x2, {.accumulate = true});
  std::vector<double> want = Reference(s.ToFloats(), x1.ToFloats(), 64, 32, 100);
  const std::vector<double> second = Reference(s.ToFloats(), x2.ToFloats(), 64, 32, 100);
  for (size_t i = 0; i < want.size(); ++i) want[i] += second[i];
  ExpectNear(out.ToFloats(), want, 1e-4);
}

TEST_F(MatmulTest, Fp32OperandsAndCostFourTimesSlower) {
  Tile s = Random("s", {128, 128}, DType::kFloat32, 6);
  Tile x = Random("x", {128, 512}, DType::kFloat32, 7);
  Tile out = core_.AllocatePsum("out", {128, 512});
  nc_matmul(out, s, x);
  ExpectNear(out.ToFloats(), Reference(s.ToFloats(), x.ToFloats(), 128, 128, 512), 1e-3);
  const InstructionRecord& r = core_.timeline().records().back();
  // 4 x max(64, 512) = 2048 cycles = 853.33 ns at full rate, on a cold PE (trn2 throttle,
  // docs/engine-costs.md): 0.5 d + (0.5 / 3000) d^2 / 2 = 853.33 -> d = 1386.34 ns.
  EXPECT_NEAR(r.end_ns - r.start_ns, RampedNs(0.5, 0.5 / 3000, 4 * 512 / 2.4), 1e-9);
  EXPECT_NEAR(r.end_ns - r.start_ns, 1386.34, 0.01);
}

TEST_F(MatmulTest, DoubleRowFp8ContractsOver256) {
  Tile s = Random("s", {128, 2, 64}, DType::kFp8E4M3, 8);
  Tile x = Random("x", {128, 2, 256}, DType::kFp8E4M3, 9);
  Tile out = core_.AllocatePsum("out", {64, 256});
  nc_matmul(out, s, x, {.perf_mode = PerfMode::kDoubleRow});
  // Contraction index k = r * 128 + p: rebuild both operands as [256, cols] by hand.
  auto rows256 = [](const Tile& t, int64_t cols) {
    std::vector<float> flat = t.ToFloats(), out(256 * cols);
    for (int64_t p = 0; p < 128; ++p) {
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t c = 0; c < cols; ++c) out[(r * 128 + p) * cols + c] = flat[(p * 2 + r) * cols + c];
      }
    }
    return out;
  };
  ExpectNear(out.ToFloats(), Reference(rows256(s, 64), rows256(x, 256), 256, 64, 256), 1e-3);
  EXPECT_EQ(core_.timeline().records().back().flops, 2 * 256 * 64 * 256);
}

TEST_F(MatmulTest, CostOfA128x128x512Bf16MatmulIs213nsWarm400nsCold) {
  Tile s = Random("s", {128, 128}, DType::kBFloat16, 1);
  Tile x = Random("x", {128, 512}, DType::kBFloat16, 2);
  Tile out = core_.AllocatePsum("out", {128, 512});
  nc_matmul(out, s, x);
  const InstructionRecord r = core_.timeline().records().back();  // a copy: the vector grows below
  EXPECT_EQ(r.engine, Engine::kPE);
  // max(64, 512) cycles = 213.33 ns at 2.4 GHz at full rate; the PE is cold (trn2 throttle):
  // 0.5 d + (0.5 / 3000) d^2 / 2 = 213.33 -> d = 400 ns.
  EXPECT_NEAR(MatmulNs(core_.profile(), 512, DType::kBFloat16), 213.3333333, 1e-6);
  EXPECT_NEAR(r.end_ns - r.start_ns, 400.0, 1e-6);
  EXPECT_EQ(r.flops, 2 * 128 * 128 * 512);
  // A second matmul on the same PE starts when the first ends.
  nc_matmul(out, s, x, {.accumulate = true});
  EXPECT_DOUBLE_EQ(core_.timeline().records().back().start_ns, r.end_ns);
}

TEST_F(MatmulTest, LegalityErrorsNameOperandAndRule) {
  Tile s = Random("s", {128, 128}, DType::kBFloat16, 1);
  Tile x = Random("x", {128, 512}, DType::kBFloat16, 2);
  Tile out = core_.AllocatePsum("out", {128, 512});
  Tile wide_s = Random("wide_s", {128, 256}, DType::kBFloat16, 3);
  Tile wide_x = Random("wide_x", {128, 1024}, DType::kBFloat16, 4);
  Tile short_x = Random("short_x", {64, 512}, DType::kBFloat16, 5);
  Tile fp32_x = Random("fp32_x", {128, 512}, DType::kFloat32, 6);
  Tile sbuf_out = core_.AllocateSbuf("sbuf_out", {128, 512}, DType::kFloat32);
  Tile bf16_psum = core_.AllocatePsum("bf16_psum", {128, 512}, DType::kBFloat16);
  Tile two_banks = core_.AllocatePsum("two_banks", {128, 1024});
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, wide_s, x); }), HasSubstr("M = 256 exceeds 128"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, s, wide_x); }), HasSubstr("N = 1024 exceeds 512"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, s, short_x); }), HasSubstr("has 64 partitions"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, s, fp32_x); }), HasSubstr("mixes fp32"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(sbuf_out, s, x); }), HasSubstr("fp32 PSUM tile"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(bf16_psum, s, x); }), HasSubstr("fp32 PSUM tile"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(two_banks.slice(1, 256, 768), s, x); }),
              HasSubstr("bank boundary"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, s, out); }), HasSubstr("operand 'moving'"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_matmul(out, s, x, {.perf_mode = PerfMode::kDoubleRow}); }),
              HasSubstr("needs fp8"));
  // Inside a bank is fine, even at an offset.
  nc_matmul(two_banks.slice(1, 512, 1024), s, x);
}

TEST_F(MatmulTest, PeTransposeGoesThroughPsum) {
  Tile src = Random("src", {96, 40}, DType::kBFloat16, 12);
  Tile dst = core_.AllocatePsum("dst", {40, 96}, DType::kBFloat16);
  nc_transpose(dst, src, Engine::kPE);
  for (int64_t i = 0; i < 96; ++i) {
    for (int64_t j = 0; j < 40; ++j) ASSERT_EQ(dst.get(j, {i}), src.get(i, {j}));
  }
  const InstructionRecord& r = core_.timeline().records().back();
  EXPECT_EQ(r.engine, Engine::kPE);
  // max(P, min(64, F)) = max(96, 40) = 96 cycles = 40 ns at full rate; cold PE:
  // 0.5 d + (0.5 / 3000) d^2 / 2 = 40 -> d = 78.96 ns.
  EXPECT_NEAR(r.end_ns - r.start_ns, RampedNs(0.5, 0.5 / 3000, 96 / 2.4), 1e-9);
  EXPECT_NEAR(r.end_ns - r.start_ns, 78.96, 0.01);
}

TEST_F(MatmulTest, VectorTransposeStaysInSbuf) {
  Tile src = Random("src", {32, 128}, DType::kFloat32, 13);
  Tile dst = core_.AllocateSbuf("dst", {128, 32}, DType::kFloat32);
  nc_transpose(dst, src, Engine::kVector);
  EXPECT_EQ(dst.get(100, {7}), src.get(7, {100}));
  EXPECT_EQ(core_.timeline().records().back().engine, Engine::kVector);
  Tile psum_dst = core_.AllocatePsum("psum_dst", {128, 32});
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_transpose(psum_dst, src, Engine::kVector); }), HasSubstr("writes SBUF"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_transpose(dst, src, Engine::kScalar); }), HasSubstr("cannot transpose"));
  EXPECT_THAT(InvalidArgumentMessage([&] { nc_transpose(dst, src, Engine::kPE); }), HasSubstr("PSUM"));
}

}  // namespace
}  // namespace nkisim::nisa
