// The x4 container dtypes of runtime/dtype.h (4 narrow floats per element): fp4_e2m1fn codes,
// rounding and saturation, PackX4 / UnpackX4 over every code, names, the refusal of scalar
// conversions, and the bitcast views of tiles and HBM tensors onto x4.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "tests/testing/error_helpers.h"

namespace nkisim {
namespace {

using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr DType kFp4 = DType::kFp4E2M1FNx4;

// fp4_e2m1fn from the OCP MX spec: S.EE.M, bias 1; exponent 0 is subnormal (0, 0.5).
double Fp4Spec(uint8_t code) {
  static constexpr double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double m = kMagnitude[code & 7];
  return (code & 8) ? -m : m;
}

TEST(DTypeX4Test, EveryFp4CodeDecodesToItsSpecValueAndRoundTrips) {
  for (int code = 0; code < 16; ++code) {
    const float v = X4DecodeValue(kFp4, static_cast<uint8_t>(code));
    EXPECT_EQ(v, Fp4Spec(static_cast<uint8_t>(code))) << code;
    EXPECT_EQ(std::signbit(v), code >= 8) << code;  // code 8 is -0
    EXPECT_EQ(X4EncodeValue(kFp4, v), code) << code;
  }
  EXPECT_EQ(X4ValueBits(kFp4), 4);
  EXPECT_EQ(X4MaxValue(kFp4), 6.0);
}

TEST(DTypeX4Test, Fp4RoundsToNearestEvenAndSaturates) {
  // Midpoints between neighbours go to the code with the even last bit.
  EXPECT_EQ(X4EncodeValue(kFp4, 0.25f), 0x0);   // 0 (code 0) vs 0.5 (code 1)
  EXPECT_EQ(X4EncodeValue(kFp4, 0.75f), 0x2);   // 0.5 (1) vs 1 (2)
  EXPECT_EQ(X4EncodeValue(kFp4, 1.25f), 0x2);   // 1 (2) vs 1.5 (3)
  EXPECT_EQ(X4EncodeValue(kFp4, 1.75f), 0x4);   // 1.5 (3) vs 2 (4)
  EXPECT_EQ(X4EncodeValue(kFp4, 2.5f), 0x4);    // 2 (4) vs 3 (5)
  EXPECT_EQ(X4EncodeValue(kFp4, 3.5f), 0x6);    // 3 (5) vs 4 (6)
  EXPECT_EQ(X4EncodeValue(kFp4, 5.0f), 0x6);    // 4 (6) vs 6 (7)
  EXPECT_EQ(X4EncodeValue(kFp4, -5.0f), 0xE);
  // Off the midpoints: the nearest.
  EXPECT_EQ(X4EncodeValue(kFp4, 0.2f), 0x0);
  EXPECT_EQ(X4EncodeValue(kFp4, 0.3f), 0x1);
  EXPECT_EQ(X4EncodeValue(kFp4, 5.1f), 0x7);
  EXPECT_EQ(X4EncodeValue(kFp4, -2.6f), 0xD);
  // Saturation: no inf, no NaN.
  EXPECT_EQ(X4DecodeValue(kFp4, X4EncodeValue(kFp4, 7.0f)), 6.0f);
  EXPECT_EQ(X4DecodeValue(kFp4, X4EncodeValue(kFp4, 100.0f)), 6.0f);
  EXPECT_EQ(X4DecodeValue(kFp4, X4EncodeValue(kFp4, kInf)), 6.0f);
  EXPECT_EQ(X4DecodeValue(kFp4, X4EncodeValue(kFp4, -kInf)), -6.0f);
  EXPECT_EQ(X4EncodeValue(kFp4, kNaN), 0x0);
  EXPECT_EQ(X4DecodeValue(kFp4, X4EncodeValue(kFp4, kNaN)), 0.0f);
}

TEST(DTypeX4Test, Fp8ValueFormatsSaturateInfinity) {
  EXPECT_EQ(X4DecodeValue(DType::kFp8E4M3FNx4, X4EncodeValue(DType::kFp8E4M3FNx4, kInf)), 448.0f);
  EXPECT_EQ(X4DecodeValue(DType::kFp8E5M2x4, X4EncodeValue(DType::kFp8E5M2x4, -kInf)), -57344.0f);
  EXPECT_TRUE(std::isnan(X4DecodeValue(DType::kFp8E4M3FNx4, X4EncodeValue(DType::kFp8E4M3FNx4, kNaN))));
  EXPECT_TRUE(std::isnan(X4DecodeValue(DType::kFp8E5M2x4, X4EncodeValue(DType::kFp8E5M2x4, kNaN))));
}

// Every code of x4's value format laid out in elements (4 per element), bytes as stored.
std::vector<uint8_t> AllCodesPacked(DType x4) {
  const int bits = X4ValueBits(x4);
  const int codes = 1 << bits;
  std::vector<uint8_t> bytes(static_cast<size_t>(codes / 4) * SizeOf(x4), 0);
  for (int c = 0; c < codes; ++c) {
    if (bits == 8) {
      bytes[c] = static_cast<uint8_t>(c);
    } else {
      // Element e = c / 4 is a little-endian 16-bit word, value j = c % 4 in bits [4 j, 4 j + 4).
      const uint16_t shifted = static_cast<uint16_t>(c << (4 * (c % 4)));
      bytes[2 * (c / 4)] |= static_cast<uint8_t>(shifted & 0xFF);
      bytes[2 * (c / 4) + 1] |= static_cast<uint8_t>(shifted >> 8);
    }
  }
  return bytes;
}

TEST(DTypeX4Test, PackAndUnpackRoundTripEveryCode) {
  for (DType x4 : kX4DTypes) {
    SCOPED_TRACE(DTypeName(x4));
    const std::vector<uint8_t> packed = AllCodesPacked(x4);
    const size_t elements = packed.size() / SizeOf(x4);
    std::vector<float> values(4 * elements);
    UnpackX4(x4, packed.data(), values.data(), elements);
    for (size_t i = 0; i < values.size(); ++i) {
      const float single = X4DecodeValue(x4, static_cast<uint8_t>(i));
      ASSERT_TRUE(std::memcmp(&values[i], &single, sizeof(float)) == 0 ||
                  (std::isnan(values[i]) && std::isnan(single)))
          << "code " << i;
    }
    std::vector<uint8_t> repacked(packed.size(), 0xEE);
    PackX4(x4, values.data(), repacked.data(), elements);
    for (size_t i = 0; i < values.size(); ++i) {
      const int bits = X4ValueBits(x4);
      const uint8_t got = bits == 8 ? repacked[i]
                                    : static_cast<uint8_t>((repacked[i / 2] >> (4 * (i % 2))) & 0xF);
      if (std::isnan(values[i])) {
        EXPECT_TRUE(std::isnan(X4DecodeValue(x4, got))) << "code " << i;  // any NaN code
      } else if (std::isinf(values[i])) {
        EXPECT_EQ(X4DecodeValue(x4, got), std::copysign(X4MaxValue(x4), values[i])) << "code " << i;
      } else {
        EXPECT_EQ(got, i) << "code " << i;  // the same code, -0 included
      }
    }
  }
}

TEST(DTypeX4Test, ValueJSitsInBitsJTimesWidth) {
  const float v[4] = {0.5f, 1.0f, 1.5f, 2.0f};  // fp4 codes 1, 2, 3, 4
  uint8_t fp4[2];
  PackX4(kFp4, v, fp4, 1);
  EXPECT_EQ(fp4[0], 0x21);
  EXPECT_EQ(fp4[1], 0x43);
  uint8_t fp8[4];
  PackX4(DType::kFp8E4M3FNx4, v, fp8, 1);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(fp8[j], FloatToFp8Bits(DType::kFp8E4M3FN, v[j])) << j;
}

TEST(DTypeX4Test, NamesSizesAndPredicates) {
  for (DType x4 : kX4DTypes) {
    EXPECT_EQ(ParseDType(DTypeName(x4)), x4);
    EXPECT_TRUE(IsX4(x4));
    EXPECT_FALSE(IsFloat(x4));
    EXPECT_FALSE(IsInteger(x4));
    EXPECT_FALSE(IsFp8(x4));
  }
  EXPECT_EQ(ParseDType("fp8_e4m3fn_x4"), DType::kFp8E4M3FNx4);
  EXPECT_EQ(ParseDType("fp8_e5m2_x4"), DType::kFp8E5M2x4);
  EXPECT_EQ(ParseDType("fp4_e2m1fn_x4"), DType::kFp4E2M1FNx4);
  EXPECT_EQ(ParseDType("float8_e4m3fn_x4"), DType::kFp8E4M3FNx4);
  EXPECT_EQ(ParseDType("float4_e2m1fn_x4"), DType::kFp4E2M1FNx4);
  EXPECT_EQ(SizeOf(DType::kFp8E4M3FNx4), 4u);
  EXPECT_EQ(SizeOf(DType::kFp8E5M2x4), 4u);
  EXPECT_EQ(SizeOf(kFp4), 2u);
  EXPECT_FALSE(IsX4(DType::kFp8E4M3FN));
  EXPECT_THAT(InvalidArgumentMessage([] { ParseDType("fp4_x4"); }),
              HasSubstr("fp8_e4m3fn_x4, fp8_e5m2_x4, fp4_e2m1fn_x4"));
}

TEST(DTypeX4Test, ScalarConversionsRefuseX4) {
  const uint32_t element = 0x38383838;
  float out = 0;
  for (DType x4 : kX4DTypes) {
    EXPECT_THAT(InvalidArgumentMessage([&] { ToFloat(x4, &element); }),
                HasSubstr(std::string("dtype ") + DTypeName(x4) + " packs 4 values per element"));
    EXPECT_THAT(InvalidArgumentMessage([&] { ToFloat(x4, &element, &out, 1); }),
                HasSubstr("packs 4 values per element"));
    uint32_t sink = 0;
    EXPECT_THAT(InvalidArgumentMessage([&] { FromFloat(x4, 1.0f, &sink); }),
                HasSubstr("packs 4 values per element"));
  }
  EXPECT_THROW(X4ValueBits(DType::kFp8E4M3FN), Error);  // not an x4 dtype: internal error
}

TEST(DTypeX4Test, TileBitcastSeesTheSameBytes) {
  NeuronCore core(0, Trn2Profile());
  ScopedCurrentCore scope(core);
  Tile fp8 = core.AllocateSbuf("w", {32, 16}, DType::kFp8E4M3FN);
  std::vector<float> v(32 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 37) - 18) / 4;
  fp8.FromFloats(v);
  Tile x4 = fp8.bitcast(DType::kFp8E4M3FNx4);
  EXPECT_EQ(x4.dtype(), DType::kFp8E4M3FNx4);
  EXPECT_EQ(x4.shape(), (Shape{32, 4}));
  EXPECT_EQ(x4.partition_stride(), 4);
  EXPECT_TRUE(x4.SameBuffer(fp8));
  const std::vector<float> stored = fp8.ToFloats();
  for (int64_t p = 0; p < 32; ++p) {
    float row[16];
    UnpackX4(DType::kFp8E4M3FNx4, x4.element_ptr(p, x4.free_offset()), row, 4);
    for (int i = 0; i < 16; ++i) ASSERT_EQ(row[i], stored[p * 16 + i]) << p << ", " << i;
    EXPECT_EQ(x4.element_ptr(p, x4.free_offset() + 1), fp8.element_ptr(p, fp8.free_offset() + 4));
  }
  // A slice at a whole-element offset works: fp8 columns [8, 16) are x4 columns [2, 4).
  Tile right = fp8.slice(1, 8, 16).bitcast(DType::kFp8E4M3FNx4);
  EXPECT_EQ(right.shape(), (Shape{32, 2}));
  EXPECT_EQ(right.element_ptr(3, right.free_offset()), x4.element_ptr(3, x4.free_offset() + 2));
  // And back.
  Tile back = x4.bitcast(DType::kFp8E4M3FN);
  EXPECT_EQ(back.shape(), (Shape{32, 16}));
  EXPECT_EQ(back.ToFloats(), stored);

  Tile odd = core.AllocateSbuf("odd", {32, 6}, DType::kFp8E4M3FN);
  EXPECT_THAT(InvalidArgumentMessage([&] { odd.bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("bitcast of tile 'odd' [32, 6] fp8_e4m3fn SBUF to fp8_e4m3fn_x4"));
  EXPECT_THAT(InvalidArgumentMessage([&] { fp8.slice(1, 0, 16, 2).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("needs contiguous free dims"));
  EXPECT_THAT(InvalidArgumentMessage([&] { fp8.slice(1, 1, 9).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("divide into whole 4 B elements"));  // offset 1 byte
  // 4 whole elements at offset 0, but a 6-byte partition row.
  EXPECT_THAT(InvalidArgumentMessage([&] { odd.slice(1, 0, 4).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("partition row divide"));
}

TEST(DTypeX4Test, TensorViewBitcastSeesTheSameBytes) {
  TensorView u32 = TensorView::Create({8, 3}, DType::kUInt32, "p");
  for (int64_t i = 0; i < 24; ++i) {
    const uint32_t word = 0x01020304u * static_cast<uint32_t>(i + 1);
    std::memcpy(u32.buffer().data() + 4 * i, &word, 4);
  }
  TensorView x4 = u32.bitcast(DType::kFp8E4M3FNx4);
  EXPECT_EQ(x4.dtype(), DType::kFp8E4M3FNx4);
  EXPECT_EQ(x4.shape(), (Shape{8, 3}));
  EXPECT_TRUE(x4.SameBuffer(u32));
  EXPECT_EQ(x4.element_ptr({5, 2}), u32.element_ptr({5, 2}));

  TensorView bytes = TensorView::Create({8, 16}, DType::kUInt8, "b");
  TensorView as_x4 = bytes.bitcast(DType::kFp8E5M2x4);
  EXPECT_EQ(as_x4.shape(), (Shape{8, 4}));
  EXPECT_EQ(as_x4.element_ptr({2, 3}), bytes.element_ptr({2, 12}));
  TensorView u16 = TensorView::Create({4, 4}, DType::kUInt16, "h");
  TensorView fp4 = u16.bitcast(kFp4);
  EXPECT_EQ(fp4.shape(), (Shape{4, 4}));
  EXPECT_EQ(fp4.bitcast(DType::kUInt16).element_ptr({3, 1}), u16.element_ptr({3, 1}));
  // Row 2 of a [8, 16] uint8: offset 32 bytes = x4 element 8.
  TensorView row2 = bytes.select(0, 2).bitcast(DType::kFp8E5M2x4);
  EXPECT_EQ(row2.offset(), 8);
  EXPECT_EQ(row2.shape(), (Shape{4}));

  TensorView odd = TensorView::Create({8, 6}, DType::kUInt8, "odd");
  EXPECT_THAT(InvalidArgumentMessage([&] { odd.bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("bitcast of tensor 'odd' [8, 6] uint8 to fp8_e4m3fn_x4"));
  EXPECT_THAT(InvalidArgumentMessage([&] { bytes.slice(1, 0, 8).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("needs a contiguous view"));  // rows of 8 in a buffer of 16
  EXPECT_THAT(InvalidArgumentMessage([&] { bytes.permute({1, 0}).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("needs a contiguous view"));
  TensorView flat = TensorView::Create({16}, DType::kUInt8, "flat");
  EXPECT_THAT(InvalidArgumentMessage([&] { flat.slice(0, 1, 9).bitcast(DType::kFp8E4M3FNx4); }),
              HasSubstr("and offset divide into whole 4 B elements"));  // offset 1 byte
}

}  // namespace
}  // namespace nkisim
