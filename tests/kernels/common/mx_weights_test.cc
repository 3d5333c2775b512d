// kernels/common/mx_weights.h against the independent reference (kernels/reference/mx_ref.h) and
// against the layouts written out here: pack and unpack are inverse on MX-representable data,
// PackMxWeights quantizes exactly as the reference does, the interleaved order is numpy's
// reshape/transpose, PackFp8WeightsX4 only moves codes, and bad inputs are refused.
#include "kernels/common/mx_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/mx_ref.h"
#include "runtime/error.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels {
namespace {

using ::nkisim::reference::MxFormatRef;
using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::HasSubstr;

constexpr MxWeightLayout kLayouts[] = {MxWeightLayout::kContiguous, MxWeightLayout::kInterleaved};

MxFormatRef FormatOf(DType x4) {
  switch (x4) {
    case DType::kFp8E4M3FNx4: return MxFormatRef::kE4M3FN;
    case DType::kFp8E5M2x4: return MxFormatRef::kE5M2;
    default: return MxFormatRef::kE2M1;
  }
}

bool Interleaved(MxWeightLayout layout) { return layout == MxWeightLayout::kInterleaved; }

const uint8_t* Bytes(const TensorView& t) {
  return reinterpret_cast<const uint8_t*>(t.buffer().data()) + t.offset() * SizeOf(t.dtype());
}

bool SameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Value j of x4 element e of a packed buffer (fp8: byte j; fp4: nibble j, low nibble first).
uint8_t CodeOf(DType x4, const uint8_t* data, int64_t e, int j) {
  if (x4 == DType::kFp4E2M1FNx4) return static_cast<uint8_t>((data[2 * e + j / 2] >> (4 * (j % 2))) & 0xF);
  return data[4 * e + j];
}

void SetCodeOf(DType x4, uint8_t* data, int64_t e, int j, uint8_t code) {
  if (x4 == DType::kFp4E2M1FNx4) {
    const int shift = 4 * (j % 2);
    uint8_t& b = data[2 * e + j / 2];
    b = static_cast<uint8_t>((b & ~(0xF << shift)) | (code << shift));
  } else {
    data[4 * e + j] = code;
  }
}

// Codes the packer can give a block: finite, magnitude at most 2^emax (the largest scaled value
// lands in [2^(emax-1), 2^emax)); `top` the codes in that top binade.
void CanonicalCodes(MxFormatRef format, std::vector<uint8_t>* any, std::vector<uint8_t>* top) {
  const std::vector<double>& values = reference::MxFormatValuesRef(format);
  const int emax = std::ilogb(reference::MxFormatMaxRef(format));
  for (size_t c = 0; c < values.size(); ++c) {
    const double a = std::fabs(values[c]);
    if (!std::isfinite(a) || a >= std::ldexp(1.0, emax)) continue;
    any->push_back(static_cast<uint8_t>(c));
    if (a >= std::ldexp(1.0, emax - 1)) top->push_back(static_cast<uint8_t>(c));
  }
}

// Random packed weights [K/4, N] + scales [K/32, N] in the canonical form PackMxWeights produces:
// each block holds one top-binade code, the other codes random, its scale random in [100, 150].
MxPackedWeights RandomCanonical(DType x4, int64_t k, int64_t n, uint32_t seed) {
  MxPackedWeights p{TensorView::Create({k / 4, n}, x4, "p"),
                    TensorView::Create({k / 32, n}, DType::kUInt8, "s")};
  std::vector<uint8_t> any, top;
  CanonicalCodes(FormatOf(x4), &any, &top);
  std::mt19937 rng(seed);
  auto* data = reinterpret_cast<uint8_t*>(p.data.buffer().data());
  auto* scales = reinterpret_cast<uint8_t*>(p.scales.buffer().data());
  for (int64_t g = 0; g < k / 32; ++g) {
    for (int64_t c = 0; c < n; ++c) {
      scales[g * n + c] = static_cast<uint8_t>(100 + rng() % 51);
      const int top_slot = static_cast<int>(rng() % 32);
      for (int i = 0; i < 32; ++i) {
        const uint8_t code = i == top_slot ? top[rng() % top.size()] : any[rng() % any.size()];
        SetCodeOf(x4, data, (8 * g + i / 4) * n + c, i % 4, code);
      }
    }
  }
  return p;
}

TEST(MxWeightsTest, PackAndUnpackAreInverseOnMxRepresentableWeights) {
  for (DType x4 : kX4DTypes) {
    for (MxWeightLayout layout : kLayouts) {
      SCOPED_TRACE(std::string(DTypeName(x4)) + " " + MxWeightLayoutName(layout));
      const int64_t k = 128, n = 24;
      const MxPackedWeights original = RandomCanonical(x4, k, n, 17);
      // unpack: equals the reference's decoding of the same bytes.
      const TensorView w = UnpackMxWeights(original, layout, "w");
      ASSERT_EQ(w.shape(), (Shape{k, n}));
      ASSERT_EQ(w.dtype(), DType::kFloat32);
      const std::vector<double> ref = reference::MxUnpackWeightsRef(
          FormatOf(x4), Interleaved(layout), Bytes(original.data), Bytes(original.scales), k, n);
      const std::vector<float> wv = w.ToFloats();
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(wv[i], ref[i]) << "element " << i;
      // unpack -> pack: the same bytes and scales.
      const MxPackedWeights again = PackMxWeights(w, layout, x4, "w");
      ASSERT_EQ(again.data.dtype(), x4);
      ASSERT_EQ(again.data.shape(), original.data.shape());
      ASSERT_EQ(again.scales.shape(), original.scales.shape());
      ASSERT_EQ(std::memcmp(Bytes(again.scales), Bytes(original.scales), k / 32 * n), 0);
      for (int64_t e = 0; e < k / 4 * n; ++e) {
        for (int j = 0; j < 4; ++j) {
          ASSERT_EQ(CodeOf(x4, Bytes(again.data), e, j), CodeOf(x4, Bytes(original.data), e, j))
              << "element " << e << " value " << j;
        }
      }
      // pack -> unpack: the same weights.
      EXPECT_EQ(UnpackMxWeights(again, layout, "w2").ToFloats(), wv);
    }
  }
}

TEST(MxWeightsTest, PackMatchesTheReferenceOnGaussianWeights) {
  const int64_t k = 256, n = 40;
  TensorView w;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(k * n));
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      // Columns of different magnitudes; a few rows of outliers; some zero blocks' worth of zeros.
      const float column_scale = std::ldexp(1.0f, static_cast<int>(c % 9) * 3 - 12);
      float x = normal(rng) * column_scale * (r % 37 == 0 ? 50.0f : 1.0f);
      if (c == 3 && r < 64) x = 0.0f;
      v[r * n + c] = x;
    }
  }
  // Stored as bf16: with 8 significant bits, many values fall exactly halfway between two codes
  // after scaling, so the ties-to-even rule is exercised.
  w = TensorView::Create({k, n}, DType::kBFloat16, "w");
  w.FromFloats(v);
  v = w.ToFloats();
  for (DType x4 : kX4DTypes) {
    for (MxWeightLayout layout : kLayouts) {
      SCOPED_TRACE(std::string(DTypeName(x4)) + " " + MxWeightLayoutName(layout));
      const MxPackedWeights p = PackMxWeights(w, layout, x4, "w");
      const std::vector<double> unpacked = reference::MxUnpackWeightsRef(
          FormatOf(x4), Interleaved(layout), Bytes(p.data), Bytes(p.scales), k, n);
      for (int64_t c = 0; c < n; ++c) {
        std::vector<double> column(static_cast<size_t>(k));
        for (int64_t r = 0; r < k; ++r) column[r] = v[r * n + c];
        const std::vector<double> want =
            reference::MxQuantizeDequantizeRef(FormatOf(x4), Interleaved(layout), column);
        for (int64_t r = 0; r < k; ++r) {
          ASSERT_TRUE(SameValue(unpacked[r * n + c], want[r])) << "row " << r << ", column " << c;
        }
      }
      // The library's own unpack agrees with the reference's.
      const std::vector<float> mine = UnpackMxWeights(p, layout, "w").ToFloats();
      for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(mine[i], unpacked[i]) << i;
    }
  }
  // The layout matters: the two orders group different rows into a block.
  const MxPackedWeights a = PackMxWeights(w, MxWeightLayout::kContiguous, DType::kFp8E4M3FNx4, "w");
  const MxPackedWeights b = PackMxWeights(w, MxWeightLayout::kInterleaved, DType::kFp8E4M3FNx4, "w");
  EXPECT_NE(std::memcmp(Bytes(a.data), Bytes(b.data), static_cast<size_t>(a.data.size_bytes())), 0);
}

TEST(MxWeightsTest, NonFiniteWeightsMarkTheirBlock) {
  TensorView w = TensorView::Create({64, 2}, DType::kFloat32, "w");
  std::vector<float> v(128, 1.0f);
  v[5 * 2 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 5, column 1: block 0 either way
  w.FromFloats(v);
  const MxPackedWeights p = PackMxWeights(w, MxWeightLayout::kContiguous, DType::kFp8E4M3FNx4, "w");
  EXPECT_EQ(Bytes(p.scales)[0 * 2 + 1], 255);
  EXPECT_EQ(Bytes(p.scales)[0 * 2 + 0], 127 - 8 + 1);  // amax 1: 127 + 0 - emax + 1
  EXPECT_EQ(Bytes(p.scales)[1 * 2 + 1], 127 - 8 + 1);
  const std::vector<float> back = UnpackMxWeights(p, MxWeightLayout::kContiguous, "w").ToFloats();
  for (int r = 0; r < 64; ++r) {
    EXPECT_EQ(std::isnan(back[r * 2 + 1]), r < 32) << r;
    EXPECT_EQ(back[r * 2], 1.0f) << r;
  }
}

// numpy: h_idx = arange(K).reshape(2, K/4, 2).transpose(1, 0, 2).flatten(), transcribed as the
// nested loops numpy runs: the transposed array t[a][b][c] = x[b][a][c], flattened row-major.
std::vector<int64_t> NumpyHIdx(int64_t k) {
  std::vector<int64_t> x(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) x[i] = i;  // arange(K)
  const int64_t d0 = 2, d1 = k / 4, d2 = 2;   // reshape(2, K/4, 2): x[b][a][c] = x[(b*d1 + a)*d2 + c]
  std::vector<int64_t> flat;
  for (int64_t a = 0; a < d1; ++a) {       // transposed dim 0 = source dim 1
    for (int64_t b = 0; b < d0; ++b) {     // transposed dim 1 = source dim 0
      for (int64_t c = 0; c < d2; ++c) {   // transposed dim 2 = source dim 2
        flat.push_back(x[(b * d1 + a) * d2 + c]);
      }
    }
  }
  return flat;
}

TEST(MxWeightsTest, InterleavedOrderIsTheNumpyPermutation) {
  // numpy prints this for K = 16.
  EXPECT_EQ(NumpyHIdx(16), (std::vector<int64_t>{0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15}));
  for (int64_t k : {16, 32, 48, 256, 4096, 8192}) {
    SCOPED_TRACE(k);
    const std::vector<int64_t> h = NumpyHIdx(k);
    std::vector<bool> seen(static_cast<size_t>(k), false);
    for (int64_t r = 0; r < k / 4; ++r) {
      for (int j = 0; j < 4; ++j) {
        const int64_t row = MxSourceRow(MxWeightLayout::kInterleaved, k, r, j);
        ASSERT_EQ(row, h[4 * r + j]) << r << ", " << j;
        ASSERT_EQ(reference::MxPackedSourceRowRef(true, k, r, j), h[4 * r + j]) << r << ", " << j;
        ASSERT_EQ(MxSourceRow(MxWeightLayout::kContiguous, k, r, j), 4 * r + j);
        ASSERT_FALSE(seen[row]);
        seen[row] = true;
      }
    }
  }
}

TEST(MxWeightsTest, PackFp8WeightsX4KeepsCodesWithNeutralScales) {
  const int64_t k = 64, n = 5;
  TensorView w = TensorView::Create({k, n}, DType::kFp8E4M3FN, "w_fp8");
  auto* raw = reinterpret_cast<uint8_t*>(w.buffer().data());
  std::mt19937 rng(9);
  for (int64_t i = 0; i < k * n; ++i) raw[i] = static_cast<uint8_t>(rng());
  raw[0] = 0x7E;  // 448
  raw[1] = 0x80;  // -0
  for (MxWeightLayout layout : kLayouts) {
    SCOPED_TRACE(MxWeightLayoutName(layout));
    const MxPackedWeights p = PackFp8WeightsX4(w, layout, "w");
    ASSERT_EQ(p.data.dtype(), DType::kFp8E4M3FNx4);
    ASSERT_EQ(p.data.shape(), (Shape{k / 4, n}));
    ASSERT_EQ(p.scales.shape(), (Shape{k / 32, n}));
    for (int64_t i = 0; i < k / 32 * n; ++i) ASSERT_EQ(Bytes(p.scales)[i], 127) << i;
    for (int64_t r = 0; r < k / 4; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        for (int j = 0; j < 4; ++j) {
          const int64_t src = reference::MxPackedSourceRowRef(Interleaved(layout), k, r, j);
          const uint8_t want = raw[src * n + c], got = Bytes(p.data)[(r * n + c) * 4 + j];
          if ((want & 0x7F) == 0x7F) {
            ASSERT_EQ(got & 0x7F, 0x7F) << "NaN stays NaN";
          } else {
            ASSERT_EQ(got, want) << r << ", " << c << ", " << j;
          }
        }
      }
    }
  }
}

TEST(MxWeightsTest, BadInputsAreRefused) {
  TensorView k48 = TensorView::Create({48, 4}, DType::kFloat32, "k48");
  TensorView w = TensorView::Create({64, 4}, DType::kFloat32, "w");
  TensorView rank1 = TensorView::Create({64}, DType::kFloat32, "rank1");
  TensorView rank3 = TensorView::Create({2, 64, 4}, DType::kFloat32, "rank3");
  EXPECT_THAT(InvalidArgumentMessage([&] {
                PackMxWeights(k48, MxWeightLayout::kContiguous, DType::kFp8E4M3FNx4, "wq");
              }),
              HasSubstr("wq: weights [48, 4] must be a non-empty [K, N] matrix with K a multiple of 32"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                PackMxWeights(w, MxWeightLayout::kContiguous, DType::kFp8E4M3FN, "wq");
              }),
              HasSubstr("wq: dtype fp8_e4m3fn is not an x4 container"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                PackMxWeights(rank1, MxWeightLayout::kInterleaved, DType::kFp8E5M2x4, "wq");
              }),
              HasSubstr("weights [64] must be a non-empty [K, N] matrix"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                PackMxWeights(rank3, MxWeightLayout::kInterleaved, DType::kFp8E5M2x4, "wq");
              }),
              HasSubstr("weights [2, 64, 4] must be"));
  EXPECT_THAT(InvalidArgumentMessage([&] { PackFp8WeightsX4(w, MxWeightLayout::kContiguous, "wo"); }),
              HasSubstr("wo: weights are fp32; per-tensor / per-row MX packing takes fp8_e4m3fn"));
  TensorView fp8_k48 = TensorView::Create({48, 4}, DType::kFp8E4M3FN, "f");
  EXPECT_THAT(InvalidArgumentMessage([&] { PackFp8WeightsX4(fp8_k48, MxWeightLayout::kContiguous, "wo"); }),
              HasSubstr("K a multiple of 32"));

  const MxPackedWeights good = PackMxWeights(w, MxWeightLayout::kContiguous, DType::kFp8E4M3FNx4, "w");
  MxPackedWeights bad_scales{good.data, TensorView::Create({3, 4}, DType::kUInt8, "s")};
  EXPECT_THAT(InvalidArgumentMessage([&] { UnpackMxWeights(bad_scales, MxWeightLayout::kContiguous, "wu"); }),
              HasSubstr("wu: packed weights must be x4 data [K/4, N] and uint8 scales [K/32, N]; got "
                        "[16, 4] fp8_e4m3fn_x4 and [3, 4] uint8"));
  MxPackedWeights not_x4{TensorView::Create({16, 4}, DType::kUInt32, "d"), good.scales};
  EXPECT_THAT(InvalidArgumentMessage([&] { UnpackMxWeights(not_x4, MxWeightLayout::kContiguous, "wu"); }),
              HasSubstr("got [16, 4] uint32 and [2, 4] uint8"));
  MxPackedWeights fp8_scales{good.data, TensorView::Create({2, 4}, DType::kFp8E4M3FN, "s")};
  EXPECT_THAT(InvalidArgumentMessage([&] { UnpackMxWeights(fp8_scales, MxWeightLayout::kContiguous, "wu"); }),
              HasSubstr("[2, 4] fp8_e4m3fn"));
  EXPECT_THAT(InvalidArgumentMessage([] { ParseMxWeightLayout("MX_STRIPED"); }),
              HasSubstr("weight layout 'MX_STRIPED': must be MX_CONTIGUOUS or MX_INTERLEAVED"));
  EXPECT_EQ(ParseMxWeightLayout("MX_INTERLEAVED"), MxWeightLayout::kInterleaved);
  EXPECT_EQ(ParseMxWeightLayout("contiguous"), MxWeightLayout::kContiguous);
}

}  // namespace
}  // namespace nkisim::kernels
