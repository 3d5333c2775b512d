// Conversions of runtime/dtype.h checked against explicit bit patterns and against independent
// brute-force searches for the nearest representable value.
#include "runtime/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace nkisim {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr DType kFp8Types[] = {DType::kFp8E4M3, DType::kFp8E4M3FN, DType::kFp8E5M2};

float FloatFromBits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t BitsOfFloat(float value) { return std::bit_cast<uint32_t>(value); }

// The largest finite code and the canonical NaN magnitude of each fp8 format, from the specs.
uint8_t MaxCode(DType dtype) {
  switch (dtype) {
    case DType::kFp8E4M3: return 0x77;    // S.1110.111 = 1.875 * 2^7 = 240
    case DType::kFp8E4M3FN: return 0x7E;  // S.1111.110 = 1.75 * 2^8 = 448
    default: return 0x7B;                 // S.11110.11 = 1.75 * 2^15 = 57344
  }
}

bool Fp8HasInf(DType dtype) { return dtype != DType::kFp8E4M3FN; }
uint8_t Fp8InfCode(DType dtype) { return dtype == DType::kFp8E5M2 ? 0x7C : 0x78; }

// Stores value through FromFloat and reads the storage back as integer type T.
template <typename T>
T StoreAs(DType dtype, float value) {
  T out{};
  FromFloat(dtype, value, &out);
  return out;
}

// ---- bf16 ----

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3F800000)), 0x3F80);  // exact
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3F807FFF)), 0x3F80);  // below the tie
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3F808001)), 0x3F81);  // above the tie
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3F818000)), 0x3F82);  // tie, odd goes up to even
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0xBF818000)), 0xBF82);  // negative tie
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x3FFF8000)), 0x4000);  // carry into the exponent
}

TEST(DTypeTest, Bf16SpecialValues) {
  EXPECT_EQ(FloatToBf16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16Bits(kInf), 0x7F80);
  EXPECT_EQ(FloatToBf16Bits(-kInf), 0xFF80);
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x7F7F7FFF)), 0x7F7F);  // stays the largest finite
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds up to inf
  // fp32 subnormals keep their rounding rule.
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x00008000)), 0x0000);
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x00018000)), 0x0002);
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x00000001)), 0x0000);
  EXPECT_EQ(FloatToBf16Bits(FloatFromBits(0x80010000)), 0x8001);
  EXPECT_EQ(Bf16BitsToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16BitsToFloat(0xC040), -3.0f);
  EXPECT_TRUE(std::signbit(Bf16BitsToFloat(0x8000)));
}

TEST(DTypeTest, Bf16NaNStaysQuietNaN) {
  // Quiet NaN, a signalling NaN whose payload is only in the low half, one with a high payload.
  for (uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u}) {
    const uint16_t b = FloatToBf16Bits(FloatFromBits(bits));
    EXPECT_EQ(b & 0x7F80, 0x7F80) << std::hex << bits;
    EXPECT_NE(b & 0x007F, 0) << std::hex << bits;
    EXPECT_NE(b & 0x0040, 0) << "not quiet: " << std::hex << bits;
    EXPECT_EQ(b >> 15, bits >> 31) << std::hex << bits;
    EXPECT_TRUE(std::isnan(Bf16BitsToFloat(b)));
  }
}

TEST(DTypeTest, Bf16AllCodesRoundTrip) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    const float value = Bf16BitsToFloat(static_cast<uint16_t>(code));
    // Decoding is the top half of the fp32 pattern.
    ASSERT_EQ(BitsOfFloat(value), code << 16);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(value))));
    } else {
      ASSERT_EQ(FloatToBf16Bits(value), code) << std::hex << code;
    }
  }
}

// ---- fp16 ----

TEST(DTypeTest, Fp16NormalValuesAndTies) {
  EXPECT_EQ(FloatToFp16Bits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToFp16Bits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToFp16Bits(0.5f + 0.25f), 0x3A00);
  EXPECT_EQ(FloatToFp16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie to even (down)
  EXPECT_EQ(FloatToFp16Bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie to even (up)
  EXPECT_EQ(FloatToFp16Bits(1.0f + std::ldexp(1.1f, -11)), 0x3C01);      // above the tie
  EXPECT_EQ(FloatToFp16Bits(2047.5f), 0x6800);  // tie between 2047 and 2048 -> 2048 (even)
  EXPECT_EQ(Fp16BitsToFloat(0x3C01), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(Fp16BitsToFloat(0x7BFF), 65504.0f);
}

TEST(DTypeTest, Fp16OverflowGoesToInfinity) {
  EXPECT_EQ(FloatToFp16Bits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToFp16Bits(65519.0f), 0x7BFF);  // below the midpoint 65520
  EXPECT_EQ(FloatToFp16Bits(65520.0f), 0x7C00);  // the midpoint ties to the even "next" = inf
  EXPECT_EQ(FloatToFp16Bits(-65520.0f), 0xFC00);
  EXPECT_EQ(FloatToFp16Bits(1e6f), 0x7C00);
  EXPECT_EQ(FloatToFp16Bits(kInf), 0x7C00);
  EXPECT_EQ(FloatToFp16Bits(-kInf), 0xFC00);
  EXPECT_EQ(Fp16BitsToFloat(0x7C00), kInf);
  EXPECT_EQ(Fp16BitsToFloat(0xFC00), -kInf);
}

TEST(DTypeTest, Fp16SubnormalsAndZero) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(FloatToFp16Bits(tiny), 0x0001);
  EXPECT_EQ(Fp16BitsToFloat(0x0001), tiny);
  EXPECT_EQ(FloatToFp16Bits(tiny / 2), 0x0000);             // tie with 0 -> even 0
  EXPECT_EQ(FloatToFp16Bits(-tiny / 2), 0x8000);            // keeps the sign
  EXPECT_EQ(FloatToFp16Bits(tiny * 0.5000001f), 0x0001);    // just above the tie
  EXPECT_EQ(FloatToFp16Bits(tiny * 1.5f), 0x0002);          // tie 1|2 -> 2
  EXPECT_EQ(FloatToFp16Bits(tiny * 2.5f), 0x0002);          // tie 2|3 -> 2
  EXPECT_EQ(FloatToFp16Bits(tiny * 1023.0f), 0x03FF);       // largest subnormal
  EXPECT_EQ(FloatToFp16Bits(tiny * 1023.5f), 0x0400);       // tie -> smallest normal (even)
  EXPECT_EQ(FloatToFp16Bits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(Fp16BitsToFloat(0x03FF), tiny * 1023.0f);
  EXPECT_EQ(FloatToFp16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToFp16Bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(Fp16BitsToFloat(0x8000)));
}

TEST(DTypeTest, Fp16NaNStaysQuietNaN) {
  for (float nan : {kNaN, -kNaN, FloatFromBits(0x7F800001)}) {
    const uint16_t b = FloatToFp16Bits(nan);
    EXPECT_EQ(b & 0x7C00, 0x7C00);
    EXPECT_NE(b & 0x0200, 0) << "not quiet";
    EXPECT_TRUE(std::isnan(Fp16BitsToFloat(b)));
  }
  EXPECT_TRUE(std::isnan(Fp16BitsToFloat(0x7C01)));
  EXPECT_TRUE(std::isnan(Fp16BitsToFloat(0xFE00)));
}

TEST(DTypeTest, Fp16AllCodesRoundTrip) {
  for (uint32_t code = 0; code < 0x10000; ++code) {
    const float value = Fp16BitsToFloat(static_cast<uint16_t>(code));
    const bool nan_code = (code & 0x7C00) == 0x7C00 && (code & 0x03FF) != 0;
    ASSERT_EQ(std::isnan(value), nan_code) << std::hex << code;
    if (!nan_code) {
      ASSERT_EQ(FloatToFp16Bits(value), code) << std::hex << code;
    }
  }
}

// The code of the finite value nearest to x among (code, value) candidates, ties to the even code;
// a plain linear scan that knows nothing of the format's layout.
uint32_t NearestCode(const std::vector<std::pair<uint32_t, double>>& candidates, double x) {
  uint32_t best = candidates[0].first;
  double best_distance = std::fabs(candidates[0].second - x);
  for (const auto& [code, value] : candidates) {
    const double distance = std::fabs(value - x);
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return best;
}

// Random floats of random sign and exponent in [2^min_exp, max_magnitude], plus exact midpoints
// between neighbouring candidates (ties), all representable in fp32.
std::vector<float> SampleFloats(int min_exp, double max_magnitude,
                                const std::vector<std::pair<uint32_t, double>>& positive,
                                int count) {
  std::mt19937 gen(12345);
  std::uniform_int_distribution<int> exponent(min_exp, static_cast<int>(std::log2(max_magnitude)));
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  std::uniform_int_distribution<size_t> pick(0, positive.size() - 2);
  std::vector<float> out;
  for (int i = 0; i < count; ++i) {
    float x = std::ldexp(1.0f + static_cast<float>(mantissa(gen)) / (1 << 23), exponent(gen));
    if (x > max_magnitude) x = static_cast<float>(max_magnitude);
    if (i % 4 == 3) {
      const size_t k = pick(gen);
      x = static_cast<float>((positive[k].second + positive[k + 1].second) / 2);
    }
    out.push_back(i % 2 ? -x : x);
  }
  return out;
}

TEST(DTypeTest, Fp16MatchesBruteForceNearest) {
  std::vector<std::pair<uint32_t, double>> positive;  // every finite non-negative fp16 value
  for (uint32_t code = 0; code < 0x7C00; ++code) {
    positive.emplace_back(code, Fp16BitsToFloat(static_cast<uint16_t>(code)));
  }
  for (float x : SampleFloats(-26, 65504.0, positive, 3000)) {
    const uint32_t expected = NearestCode(positive, std::fabs(x)) | (std::signbit(x) ? 0x8000 : 0);
    ASSERT_EQ(FloatToFp16Bits(x), expected) << "x = " << x;
  }
}

// ---- fp8 ----

TEST(DTypeTest, Fp8E4M3Trn2Flavour) {
  const DType t = DType::kFp8E4M3;
  EXPECT_EQ(FloatToFp8Bits(t, 240.0f), 0x77);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x77), 240.0f);
  EXPECT_EQ(FloatToFp8Bits(t, 248.0f), 0x77);  // would round to 256: saturates
  EXPECT_EQ(FloatToFp8Bits(t, 1e6f), 0x77);
  EXPECT_EQ(FloatToFp8Bits(t, -1e6f), 0xF7);
  EXPECT_EQ(FloatToFp8Bits(t, kInf), 0x77);
  EXPECT_EQ(FloatToFp8Bits(t, -kInf), 0xF7);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x78), kInf);
  EXPECT_EQ(Fp8BitsToFloat(t, 0xF8), -kInf);
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0x7F)));
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0x79)));
  EXPECT_EQ(FloatToFp8Bits(t, kNaN), 0x7F);
  EXPECT_EQ(FloatToFp8Bits(t, 1.0f), 0x38);
  // Subnormals: smallest 2^-9, smallest normal 2^-6.
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -10)), 0x00);      // tie with 0
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(3.0f, -10)), 0x02);      // tie 1|2 -> 2
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -6)), 0x08);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x07), std::ldexp(7.0f, -9));
  // Normal ties: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39).
  EXPECT_EQ(FloatToFp8Bits(t, 1.0625f), 0x38);
  EXPECT_EQ(FloatToFp8Bits(t, 1.1875f), 0x3A);  // between 1.125 (0x39) and 1.25 (0x3A)
  EXPECT_EQ(FloatToFp8Bits(t, -1.1875f), 0xBA);
}

TEST(DTypeTest, Fp8E4M3FnFlavour) {
  const DType t = DType::kFp8E4M3FN;
  EXPECT_EQ(FloatToFp8Bits(t, 448.0f), 0x7E);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x7E), 448.0f);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x78), 256.0f);  // no infinity: the top exponent holds numbers
  EXPECT_EQ(FloatToFp8Bits(t, 464.0f), 0x7E);  // midpoint to the NaN slot: saturates
  EXPECT_EQ(FloatToFp8Bits(t, 1e6f), 0x7E);
  EXPECT_EQ(FloatToFp8Bits(t, kInf), 0x7E);
  EXPECT_EQ(FloatToFp8Bits(t, -kInf), 0xFE);
  EXPECT_EQ(FloatToFp8Bits(t, kNaN), 0x7F);
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0x7F)));
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0xFF)));
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -9)), 0x01);
  // Top binade [256, 448] in steps of 32: 272 ties 256 (0x78, even) | 288; 304 ties 288 | 320.
  EXPECT_EQ(FloatToFp8Bits(t, 288.0f), 0x79);
  EXPECT_EQ(FloatToFp8Bits(t, 272.0f), 0x78);
  EXPECT_EQ(FloatToFp8Bits(t, 304.0f), 0x7A);
}

TEST(DTypeTest, Fp8E5M2) {
  const DType t = DType::kFp8E5M2;
  EXPECT_EQ(FloatToFp8Bits(t, 57344.0f), 0x7B);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x7B), 57344.0f);
  EXPECT_EQ(FloatToFp8Bits(t, 1e6f), 0x7B);
  EXPECT_EQ(FloatToFp8Bits(t, kInf), 0x7B);
  EXPECT_EQ(FloatToFp8Bits(t, -kInf), 0xFB);
  EXPECT_EQ(Fp8BitsToFloat(t, 0x7C), kInf);
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0x7D)));
  EXPECT_TRUE(std::isnan(Fp8BitsToFloat(t, 0x7F)));
  EXPECT_EQ(FloatToFp8Bits(t, kNaN), 0x7F);
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -16)), 0x01);  // smallest subnormal
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -17)), 0x00);  // tie with 0
  EXPECT_EQ(FloatToFp8Bits(t, std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(FloatToFp8Bits(t, 1.125f), 0x3C);  // tie 1|1.25 -> 1 (even)
  EXPECT_EQ(FloatToFp8Bits(t, 1.375f), 0x3E);  // tie 1.25|1.5 -> 1.5 (even)
}

TEST(DTypeTest, Fp8AllCodesRoundTrip) {
  for (DType t : kFp8Types) {
    for (uint32_t code = 0; code < 256; ++code) {
      const float value = Fp8BitsToFloat(t, static_cast<uint8_t>(code));
      const uint8_t back = FloatToFp8Bits(t, value);
      const uint32_t sign = code & 0x80;
      if (std::isnan(value)) {
        EXPECT_EQ(back & 0x7F, 0x7F) << DTypeName(t) << " NaN code " << code;
      } else if (std::isinf(value)) {
        ASSERT_TRUE(Fp8HasInf(t));
        EXPECT_EQ(code & 0x7F, Fp8InfCode(t));
        EXPECT_EQ(back, sign | MaxCode(t)) << DTypeName(t) << ": inf saturates";
      } else {
        EXPECT_EQ(back, code) << DTypeName(t);
      }
    }
  }
}

TEST(DTypeTest, Fp8MatchesBruteForceNearest) {
  for (DType t : kFp8Types) {
    std::vector<std::pair<uint32_t, double>> positive;
    for (uint32_t code = 0; code <= MaxCode(t); ++code) {
      positive.emplace_back(code, Fp8BitsToFloat(t, static_cast<uint8_t>(code)));
    }
    const double max = MaxValue(t);
    for (float x : SampleFloats(-20, max, positive, 2000)) {
      const uint32_t expected = NearestCode(positive, std::fabs(x)) | (std::signbit(x) ? 0x80 : 0);
      ASSERT_EQ(FloatToFp8Bits(t, x), expected) << DTypeName(t) << " x = " << x;
    }
    // Above the largest finite value everything saturates.
    for (float x : {static_cast<float>(max) * 1.01f, static_cast<float>(max) * 1000.0f}) {
      EXPECT_EQ(FloatToFp8Bits(t, x), MaxCode(t)) << DTypeName(t);
      EXPECT_EQ(FloatToFp8Bits(t, -x), 0x80 | MaxCode(t)) << DTypeName(t);
    }
  }
}

// ---- integers ----

TEST(DTypeTest, IntegersRoundHalfToEven) {
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, 2.5f), 2);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, 3.5f), 4);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, -2.5f), -2);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, -3.5f), -4);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, 2.51f), 3);
  EXPECT_EQ(StoreAs<uint8_t>(DType::kUInt8, 0.5f), 0);
  EXPECT_EQ(StoreAs<uint8_t>(DType::kUInt8, 1.5f), 2);
  EXPECT_EQ(StoreAs<int32_t>(DType::kInt32, 2.5f), 2);
  EXPECT_EQ(StoreAs<int32_t>(DType::kInt32, -1234567.5f), -1234568);
  EXPECT_EQ(StoreAs<uint16_t>(DType::kUInt16, 4.5f), 4);
  EXPECT_EQ(StoreAs<uint32_t>(DType::kUInt32, 5.5f), 6u);
}

TEST(DTypeTest, IntegersSaturateAndMapNaNToZero) {
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, 300.0f), 127);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, -300.0f), -128);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, 127.5f), 127);  // rounds to 128, then saturates
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, kInf), 127);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, -kInf), -128);
  EXPECT_EQ(StoreAs<int8_t>(DType::kInt8, kNaN), 0);
  EXPECT_EQ(StoreAs<uint8_t>(DType::kUInt8, -5.0f), 0);
  EXPECT_EQ(StoreAs<uint8_t>(DType::kUInt8, 300.0f), 255);
  EXPECT_EQ(StoreAs<uint8_t>(DType::kUInt8, kNaN), 0);
  EXPECT_EQ(StoreAs<int32_t>(DType::kInt32, 3e9f), 2147483647);
  EXPECT_EQ(StoreAs<int32_t>(DType::kInt32, -3e9f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(StoreAs<int32_t>(DType::kInt32, kNaN), 0);
  EXPECT_EQ(StoreAs<uint16_t>(DType::kUInt16, 70000.0f), 65535);
  EXPECT_EQ(StoreAs<uint16_t>(DType::kUInt16, -1.0f), 0);
  EXPECT_EQ(StoreAs<uint32_t>(DType::kUInt32, 5e9f), 4294967295u);
  EXPECT_EQ(StoreAs<uint32_t>(DType::kUInt32, -1.0f), 0u);
  EXPECT_EQ(StoreAs<uint32_t>(DType::kUInt32, kNaN), 0u);
}

TEST(DTypeTest, IntegersToFloat) {
  const int8_t i8 = -128;
  const uint8_t u8 = 255;
  const int32_t i32 = -2147483647 - 1;
  const uint16_t u16 = 65535;
  const uint32_t u32 = 16777217;  // not representable in fp32: rounds to even 16777216
  EXPECT_EQ(ToFloat(DType::kInt8, &i8), -128.0f);
  EXPECT_EQ(ToFloat(DType::kUInt8, &u8), 255.0f);
  EXPECT_EQ(ToFloat(DType::kInt32, &i32), -2147483648.0f);
  EXPECT_EQ(ToFloat(DType::kUInt16, &u16), 65535.0f);
  EXPECT_EQ(ToFloat(DType::kUInt32, &u32), 16777216.0f);
}

// ---- bulk, RoundTo, names and properties ----

TEST(DTypeTest, BulkAndRoundToMatchScalarConversions) {
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 3.14159f, 1e-8f, 65519.0f, 1e6f,
                                     -1e6f, 300.0f, 0.1f, std::ldexp(1.0f, -24), 2.5f, 255.5f};
  for (DType t : kAllDTypes) {
    const size_t width = SizeOf(t);
    std::vector<std::byte> bulk(values.size() * width), scalar(values.size() * width);
    FromFloat(t, values.data(), bulk.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) FromFloat(t, values[i], scalar.data() + i * width);
    EXPECT_EQ(bulk, scalar) << DTypeName(t);
    std::vector<float> back(values.size());
    ToFloat(t, bulk.data(), back.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(BitsOfFloat(back[i]), BitsOfFloat(ToFloat(t, scalar.data() + i * width)))
          << DTypeName(t) << " value " << values[i];
      EXPECT_EQ(BitsOfFloat(RoundTo(t, values[i])), BitsOfFloat(back[i]))
          << DTypeName(t) << " value " << values[i];
    }
  }
}

// The bf16 conversion is branch-free (its bulk loop vectorises); bulk and scalar must give the
// same bits for every sign, exponent and top mantissa bits, with the low half at the rounding
// edges, and a NaN must stay a quiet NaN.
TEST(DTypeTest, BulkBf16MatchesScalarOverTheRoundingEdges) {
  std::vector<float> values;
  for (uint32_t high = 0; high <= 0xFFFFu; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      values.push_back(std::bit_cast<float>(high << 16 | low));
    }
  }
  std::vector<uint16_t> bulk(values.size());
  FromFloat(DType::kBFloat16, values.data(), bulk.data(), values.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const bool nan_kept = !std::isnan(values[i]) || std::isnan(Bf16BitsToFloat(bulk[i]));
    if ((bulk[i] != FloatToBf16Bits(values[i]) || !nan_kept) && ++mismatches <= 5) {
      ADD_FAILURE() << "fp32 bits 0x" << std::hex << BitsOfFloat(values[i]) << ": bulk 0x"
                    << bulk[i] << ", scalar 0x" << FloatToBf16Bits(values[i]);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DTypeTest, ParseDTypeAcceptsNamesAndAliases) {
  std::set<std::string> names;
  for (DType t : kAllDTypes) {
    EXPECT_EQ(ParseDType(DTypeName(t)), t) << DTypeName(t);
    names.insert(DTypeName(t));
  }
  EXPECT_EQ(names.size(), std::size(kAllDTypes)) << "names must be distinct";
  EXPECT_EQ(ParseDType("fp32"), DType::kFloat32);
  EXPECT_EQ(ParseDType("float32"), DType::kFloat32);
  EXPECT_EQ(ParseDType("bf16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("float16"), DType::kFloat16);
  EXPECT_EQ(ParseDType("float8_e4m3"), DType::kFp8E4M3);
  EXPECT_EQ(ParseDType("float8_e4m3fn"), DType::kFp8E4M3FN);
  EXPECT_EQ(ParseDType("float8_e5m2"), DType::kFp8E5M2);
  EXPECT_EQ(ParseDType("int8"), DType::kInt8);
  EXPECT_EQ(ParseDType("uint32"), DType::kUInt32);
}

TEST(DTypeTest, ParseDTypeRejectsUnknownNames) {
  for (const char* bad : {"float64", "", "FP32", "bf16 "}) {
    try {
      ParseDType(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find(StrCat("'", bad, "'")), std::string::npos) << message;
      EXPECT_NE(message.find("bf16"), std::string::npos) << "lists the accepted names: " << message;
    }
  }
}

TEST(DTypeTest, SizesAndClasses) {
  const std::vector<std::pair<DType, size_t>> sizes = {
      {DType::kFloat32, 4}, {DType::kBFloat16, 2}, {DType::kFloat16, 2}, {DType::kFp8E4M3, 1},
      {DType::kFp8E4M3FN, 1}, {DType::kFp8E5M2, 1}, {DType::kInt8, 1}, {DType::kUInt8, 1},
      {DType::kInt32, 4}, {DType::kUInt16, 2}, {DType::kUInt32, 4}, {DType::kInt16, 2}};
  ASSERT_EQ(sizes.size(), std::size(kAllDTypes));
  for (const auto& [t, size] : sizes) {
    EXPECT_EQ(SizeOf(t), size) << DTypeName(t);
    const bool fp8 = t == DType::kFp8E4M3 || t == DType::kFp8E4M3FN || t == DType::kFp8E5M2;
    const bool is_float = fp8 || t == DType::kFloat32 || t == DType::kBFloat16 ||
                          t == DType::kFloat16;
    EXPECT_EQ(IsFp8(t), fp8) << DTypeName(t);
    EXPECT_EQ(IsFloat(t), is_float) << DTypeName(t);
    EXPECT_EQ(IsInteger(t), !is_float) << DTypeName(t);
  }
}

TEST(DTypeTest, MaxValues) {
  EXPECT_EQ(MaxValue(DType::kFloat32), std::numeric_limits<float>::max());
  EXPECT_EQ(MaxValue(DType::kBFloat16), std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
  EXPECT_EQ(MaxValue(DType::kFloat16), 65504.0);
  EXPECT_EQ(MaxValue(DType::kFp8E4M3), 240.0);
  EXPECT_EQ(MaxValue(DType::kFp8E4M3FN), 448.0);
  EXPECT_EQ(MaxValue(DType::kFp8E5M2), 57344.0);
  EXPECT_EQ(MaxValue(DType::kInt8), 127.0);
  EXPECT_EQ(MaxValue(DType::kUInt8), 255.0);
  EXPECT_EQ(MaxValue(DType::kInt16), 32767.0);
  EXPECT_EQ(MaxValue(DType::kInt32), 2147483647.0);
  EXPECT_EQ(MaxValue(DType::kUInt16), 65535.0);
  EXPECT_EQ(MaxValue(DType::kUInt32), 4294967295.0);
  // Each float max is representable and is what overflow saturates to (fp8) or stays (others).
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3, DType::kFp8E4M3FN,
                  DType::kFp8E5M2}) {
    const float max = static_cast<float>(MaxValue(t));
    EXPECT_EQ(RoundTo(t, max), max) << DTypeName(t);
    EXPECT_EQ(RoundTo(t, -max), -max) << DTypeName(t);
  }
}

TEST(DTypeTest, Fp8ConversionsRejectNonFp8DTypes) {
  EXPECT_THROW(FloatToFp8Bits(DType::kFloat16, 1.0f), Error);
  EXPECT_THROW(Fp8BitsToFloat(DType::kInt8, 0x38), Error);
}

}  // namespace
}  // namespace nkisim
