// nisa::quantize_mx and nisa::nc_matmul_mx on a core built from configs/hardware/trn3.textproto:
// block scales on hand-made blocks, the quadrant scale layout, bit-exact codes and scales against
// the independent reference (kernels/reference/mx_ref.h) on random data, the matmul bit-exact
// against an fp64 golden on data whose fp32 accumulation is exact, every legality rule, the trn2
// refusal and the cost.
#include "runtime/nisa/mx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/mx_ref.h"
#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/matmul.h"
#include "runtime/rng.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::reference::E8M0Ref;
using ::nkisim::reference::MxDecodeRef;
using ::nkisim::reference::MxFormatRef;
using ::nkisim::reference::MxFormatValuesRef;
using ::nkisim::reference::MxQuantizeBlockRef;
using ::nkisim::testing::ErrorMessageOf;
using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const HardwareProfile& Trn3() {
  static const HardwareProfile profile =
      LoadHardwareProfile(std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn3.textproto");
  return profile;
}

MxFormatRef FormatOf(DType x4) {
  switch (x4) {
    case DType::kFp8E4M3FNx4: return MxFormatRef::kE4M3FN;
    case DType::kFp8E5M2x4: return MxFormatRef::kE5M2;
    default: return MxFormatRef::kE2M1;
  }
}

// The scale-tile row of the block that starts at data partition p, written from the layout's
// description: four scale rows at the top of each 32-partition quadrant, one per 8-partition block.
int64_t ScaleRow(int64_t p) {
  const int64_t quadrant = p / 32;
  const int64_t block_in_quadrant = (p % 32) / 8;
  return quadrant * 32 + block_in_quadrant;
}

// Value j of x4 element (p, c) of a tile: byte j (fp8) or nibble j of the little-endian 16-bit
// element (fp4).
uint8_t CodeAt(const Tile& t, int64_t p, int64_t c, int j) {
  const auto* e = reinterpret_cast<const uint8_t*>(t.element_ptr(p, t.free_offset() + c));
  if (t.dtype() == DType::kFp4E2M1FNx4) return static_cast<uint8_t>((e[j / 2] >> (4 * (j % 2))) & 0xF);
  return e[j];
}

void SetCode(const Tile& t, int64_t p, int64_t c, int j, uint8_t code) {
  auto* e = reinterpret_cast<uint8_t*>(t.element_ptr(p, t.free_offset() + c));
  if (t.dtype() == DType::kFp4E2M1FNx4) {
    const int shift = 4 * (j % 2);
    e[j / 2] = static_cast<uint8_t>((e[j / 2] & ~(0xF << shift)) | ((code & 0xF) << shift));
  } else {
    e[j] = code;
  }
}

uint8_t ByteAt(const Tile& t, int64_t p, int64_t c) {
  return *reinterpret_cast<const uint8_t*>(t.element_ptr(p, t.free_offset() + c));
}

void SetByte(const Tile& t, int64_t p, int64_t c, uint8_t v) {
  *reinterpret_cast<uint8_t*>(t.element_ptr(p, t.free_offset() + c)) = v;
}

bool SameDouble(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

class MxTest : public ::testing::Test {
 protected:
  MxTest() : core_(0, Trn3()), scope_(core_) {}

  Tile Src(const std::string& name, int64_t p, int64_t f, const std::vector<float>& values,
           DType dtype = DType::kBFloat16) {
    Tile t = core_.AllocateSbuf(name, {p, f}, dtype);
    t.FromFloats(values);
    return t;
  }

  Tile Scales(const std::string& name, int64_t p, int64_t cols, uint8_t fill) {
    Tile t = core_.AllocateSbuf(name, {p, cols}, DType::kUInt8);
    t.FromFloats(std::vector<float>(static_cast<size_t>(p * cols), fill));
    return t;
  }

  // Checks dst / dst_scale against the reference on every block of src (values as stored).
  static void ExpectMatchesReference(const Tile& src, const Tile& dst, const Tile& dst_scale) {
    const std::vector<float> v = src.ToFloats();
    const int64_t f = src.free_size(), cols = f / 4;
    const MxFormatRef format = FormatOf(dst.dtype());
    for (int64_t g = 0; g < src.partitions() / 8; ++g) {
      for (int64_t c = 0; c < cols; ++c) {
        double block[32];
        for (int r = 0; r < 8; ++r) {
          for (int j = 0; j < 4; ++j) block[4 * r + j] = v[(8 * g + r) * f + 4 * c + j];
        }
        uint8_t codes[32];
        const uint8_t scale = MxQuantizeBlockRef(format, block, 32, codes);
        ASSERT_EQ(ByteAt(dst_scale, ScaleRow(8 * g), c), scale) << "block " << g << ", column " << c;
        for (int r = 0; r < 8; ++r) {
          for (int j = 0; j < 4; ++j) {
            ASSERT_EQ(CodeAt(dst, 8 * g + r, c, j), codes[4 * r + j])
                << "block " << g << ", column " << c << ", value " << block[4 * r + j];
          }
        }
      }
    }
  }

  NeuronCore core_;
  ScopedCurrentCore scope_;
};

// ---- quantize_mx ----

TEST_F(MxTest, QuantizeScalesHandMadeBlocks) {
  // 32 partitions x 6 x4 columns: blocks (g, c), g = 0..3 of 8 partitions.
  std::vector<float> v(32 * 24, 0.0f);
  auto fill = [&](int g, int c, auto value_of) {
    for (int r = 0; r < 8; ++r) {
      for (int j = 0; j < 4; ++j) v[(8 * g + r) * 24 + 4 * c + j] = value_of(r, j);
    }
  };
  const float bf16_max = std::ldexp(255.0f / 128.0f, 127);  // 0x7F7F = 1.9921875 * 2^127
  fill(0, 0, [](int, int) { return 1.0f; });
  fill(0, 1, [](int r, int j) { return std::ldexp(j % 2 ? -1.0f : 1.0f, r - 4); });  // amax 2^3
  fill(0, 2, [](int r, int j) { return r == 3 && j == 1 ? -0.0f : 0.0f; });
  fill(0, 3, [](int r, int j) { return r == 0 && j == 0 ? 510.0f : 1.0f; });  // 510 = 1.99 * 2^8
  fill(0, 4, [](int, int) { return std::ldexp(1.0f, -130); });               // bf16 subnormal
  fill(0, 5, [](int r, int j) { return r == 5 && j == 2 ? kNaN : 2.0f; });
  fill(1, 0, [](int r, int j) { return r == 7 && j == 3 ? kInf : 0.5f; });
  fill(1, 1, [](int r, int j) { return r == 0 && j == 0 ? -kInf : 0.5f; });
  fill(1, 2, [&](int r, int j) { return r == 2 && j == 2 ? -bf16_max : 1.0f; });
  Tile src = Src("src", 32, 24, v);

  for (DType x4 : {DType::kFp8E4M3FNx4, DType::kFp8E5M2x4}) {
    SCOPED_TRACE(DTypeName(x4));
    const MxFormatRef format = FormatOf(x4);
    // emax: the exponent of the format's largest value (448 = 1.75 * 2^8, 57344 = 1.75 * 2^15).
    const int emax = x4 == DType::kFp8E4M3FNx4 ? 8 : 15;
    Tile dst = core_.AllocateSbuf("dst", {32, 6}, x4);
    Tile scale = Scales("scale", 32, 6, 0xAB);
    quantize_mx(dst, src, scale);
    auto dequantized = [&](int g, int c, int r, int j) {
      return MxDecodeRef(format, CodeAt(dst, 8 * g + r, c, j)) * E8M0Ref(ByteAt(scale, g, c));
    };
    // scale = 127 + floor(log2 amax) - emax + 1.
    EXPECT_EQ(ByteAt(scale, 0, 0), 127 + 0 - emax + 1);
    EXPECT_EQ(ByteAt(scale, 0, 1), 127 + 3 - emax + 1);
    EXPECT_EQ(ByteAt(scale, 0, 2), 0);  // all zero
    EXPECT_EQ(ByteAt(scale, 0, 3), 127 + 8 - emax + 1);
    EXPECT_EQ(ByteAt(scale, 0, 4), 0);  // 127 - 130 - emax + 1 < 0: clamped
    EXPECT_EQ(ByteAt(scale, 0, 5), 255);  // NaN
    EXPECT_EQ(ByteAt(scale, 1, 0), 255);  // +Inf
    EXPECT_EQ(ByteAt(scale, 1, 1), 255);  // -Inf
    EXPECT_EQ(ByteAt(scale, 1, 2), 127 + 127 - emax + 1);
    EXPECT_EQ(ByteAt(scale, 2, 0), 0);  // untouched zero blocks
    for (int r = 0; r < 8; ++r) {
      for (int j = 0; j < 4; ++j) {
        // Powers of two are exact; the largest lands in [2^(emax-1), 2^emax) before scaling back.
        EXPECT_EQ(dequantized(0, 0, r, j), 1.0);
        EXPECT_EQ(dequantized(0, 1, r, j), std::ldexp(j % 2 ? -1.0 : 1.0, r - 4));
        EXPECT_EQ(CodeAt(dst, r, 2, j), r == 3 && j == 1 ? 0x80 : 0x00);  // -0 keeps its sign
        EXPECT_EQ(dequantized(0, 4, r, j), std::ldexp(1.0, -130));
        EXPECT_TRUE(std::isnan(MxDecodeRef(format, CodeAt(dst, r, 5, j))));
        EXPECT_TRUE(std::isnan(MxDecodeRef(format, CodeAt(dst, 8 + r, 0, j))));
        EXPECT_TRUE(std::isnan(MxDecodeRef(format, CodeAt(dst, 8 + r, 1, j))));
      }
    }
    // 510 / 2^(8 - emax + 1) = 255 * 2^(emax - 8) rounds up to 2^emax (nearest, ties to even).
    EXPECT_EQ(MxDecodeRef(format, CodeAt(dst, 0, 3, 0)), std::ldexp(1.0, emax));
    EXPECT_EQ(dequantized(0, 3, 0, 0), 512.0);
    EXPECT_EQ(dequantized(0, 3, 1, 0), 1.0);
    // -bf16_max scaled: -(255/128) * 2^(emax - 1), rounded up in magnitude to -2^emax.
    EXPECT_EQ(MxDecodeRef(format, CodeAt(dst, 8 + 2, 2, 2)), -std::ldexp(1.0, emax));
    // Partitions 4..31 of the scale tile are not scale rows: untouched.
    for (int p = 4; p < 32; ++p) {
      for (int c = 0; c < 6; ++c) ASSERT_EQ(ByteAt(scale, p, c), 0xAB) << p;
    }
    ExpectMatchesReference(src, dst, scale);
  }
}

TEST_F(MxTest, QuantizeWritesScalesAtTheTopOfEachQuadrant) {
  std::vector<float> v(128 * 8);
  CounterRng rng(3, 1);
  // Every block gets its own magnitude, so a scale in the wrong row cannot match by accident.
  for (size_t i = 0; i < v.size(); ++i) {
    const int block = static_cast<int>(i / 8 / 8) * 2 + static_cast<int>(i % 8) / 4;
    v[i] = rng.Uniform(i, -1.0f, 1.0f) * std::ldexp(1.0f, block - 16);
  }
  Tile src = Src("src", 128, 8, v);
  Tile dst = core_.AllocateSbuf("dst", {128, 2}, DType::kFp8E4M3FNx4);
  Tile scale = Scales("scale", 128, 2, 0xAB);
  quantize_mx(dst, src, scale);
  for (int64_t p = 0; p < 128; ++p) {
    const bool scale_row = p % 32 < 4;
    for (int64_t c = 0; c < 2; ++c) {
      if (!scale_row) {
        ASSERT_EQ(ByteAt(scale, p, c), 0xAB) << "partition " << p;
        continue;
      }
      const int64_t first = 32 * (p / 32) + 8 * (p % 32);  // the block's first data partition
      double block[32];
      for (int r = 0; r < 8; ++r) {
        for (int j = 0; j < 4; ++j) block[4 * r + j] = src.get(first + r, {4 * c + j});
      }
      EXPECT_EQ(ByteAt(scale, p, c),
                reference::MxBlockScaleRef(MxFormatRef::kE4M3FN, block, 32))
          << "partition " << p;
    }
  }
  ExpectMatchesReference(src, dst, scale);

  // A view on quadrants 2 and 3 writes rows 64-67 and 96-99 of the buffer only.
  Tile scale2 = Scales("scale2", 128, 2, 0xCD);
  quantize_mx(dst.slice(0, 64, 128), src.slice(0, 64, 128), scale2.slice(0, 64, 128));
  for (int64_t p = 0; p < 128; ++p) {
    for (int64_t c = 0; c < 2; ++c) {
      const bool written = p >= 64 && p % 32 < 4;
      if (written) {
        EXPECT_EQ(ByteAt(scale2, p, c), ByteAt(scale, p, c)) << p;
      } else {
        EXPECT_EQ(ByteAt(scale2, p, c), 0xCD) << p;
      }
    }
  }
}

struct QuantizeCase {
  int64_t p, f;
  DType x4;
  DType src;
};

std::ostream& operator<<(std::ostream& os, const QuantizeCase& c) {
  return os << "src [" << c.p << ", " << c.f << "] " << DTypeName(c.src) << " -> " << DTypeName(c.x4);
}

class MxQuantizeRandomTest : public MxTest, public ::testing::WithParamInterface<QuantizeCase> {};

TEST_P(MxQuantizeRandomTest, CodesAndScalesMatchTheReferenceBitForBit) {
  const QuantizeCase c = GetParam();
  std::vector<float> v(static_cast<size_t>(c.p * c.f));
  CounterRng rng(7, static_cast<uint64_t>(c.p * 1000 + c.f));
  for (size_t i = 0; i < v.size(); ++i) {
    // Normal values spread over 2^-24 .. 2^24 (fp16: 2^-12 .. 2^12), some blocks very uneven,
    // a sprinkling of exact zeros.
    const int spread = c.src == DType::kFloat16 ? 12 : 24;
    const int e = static_cast<int>(rng.Bits(2 * i) % (2 * spread + 1)) - spread;
    v[i] = rng.Bits(2 * i + 1) % 17 == 0 ? 0.0f : std::ldexp(rng.Normal(i), e);
  }
  Tile src = Src("src", c.p, c.f, v, c.src);
  Tile dst = core_.AllocateSbuf("dst", {c.p, c.f / 4}, c.x4);
  Tile scale = Scales("scale", c.p, c.f / 4, 0);
  quantize_mx(dst, src, scale);
  ExpectMatchesReference(src, dst, scale);
  const InstructionRecord& r = core_.timeline().records().back();
  EXPECT_STREQ(r.name, "quantize_mx");
  EXPECT_EQ(r.engine, Engine::kVector);
  EXPECT_DOUBLE_EQ(r.end_ns - r.start_ns, ComputeOpNs(Trn3(), Engine::kVector, c.f, true));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MxQuantizeRandomTest,
    ::testing::Values(QuantizeCase{32, 4, DType::kFp8E4M3FNx4, DType::kBFloat16},
                      QuantizeCase{32, 4, DType::kFp8E5M2x4, DType::kBFloat16},
                      QuantizeCase{64, 36, DType::kFp8E4M3FNx4, DType::kBFloat16},
                      QuantizeCase{96, 100, DType::kFp8E5M2x4, DType::kBFloat16},
                      QuantizeCase{128, 512, DType::kFp8E4M3FNx4, DType::kBFloat16},
                      QuantizeCase{128, 512, DType::kFp8E5M2x4, DType::kBFloat16},
                      QuantizeCase{64, 64, DType::kFp8E4M3FNx4, DType::kFloat16},
                      QuantizeCase{64, 64, DType::kFp8E5M2x4, DType::kFloat16}));

TEST_F(MxTest, QuantizeRulesAreRefusedNamingTheRule) {
  Tile src = Src("src", 32, 8, std::vector<float>(256, 1.0f));
  Tile dst = core_.AllocateSbuf("dst", {32, 2}, DType::kFp8E4M3FNx4);
  Tile scale = Scales("scale", 32, 2, 0);
  Tile src_fp32 = core_.AllocateSbuf("src_fp32", {32, 8}, DType::kFloat32);
  Tile dst_fp4 = core_.AllocateSbuf("dst_fp4", {32, 2}, DType::kFp4E2M1FNx4);
  Tile dst_bf16 = core_.AllocateSbuf("dst_bf16", {32, 2}, DType::kBFloat16);
  Tile scale_bf16 = core_.AllocateSbuf("scale_bf16", {32, 2}, DType::kBFloat16);
  Tile src48 = core_.AllocateSbuf("src48", {48, 8}, DType::kBFloat16);
  Tile dst48 = core_.AllocateSbuf("dst48", {48, 2}, DType::kFp8E4M3FNx4);
  Tile scale48 = Scales("scale48", 48, 2, 0);
  Tile src64 = core_.AllocateSbuf("src64", {64, 8}, DType::kBFloat16);
  Tile dst64 = core_.AllocateSbuf("dst64", {64, 2}, DType::kFp8E4M3FNx4);
  Tile scale64 = Scales("scale64", 64, 2, 0);
  Tile src10 = core_.AllocateSbuf("src10", {32, 10}, DType::kBFloat16);
  Tile dst3 = core_.AllocateSbuf("dst3", {32, 3}, DType::kFp8E4M3FNx4);
  Tile scale3 = Scales("scale3", 32, 3, 0);
  Tile src_psum = core_.AllocatePsum("src_psum", {32, 8}, DType::kBFloat16);

  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src_fp32, scale); }),
              HasSubstr("operand 'src' 'src_fp32' [32, 8] fp32 SBUF: dtype must be bf16 or fp16"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst_fp4, src, scale); }),
              HasSubstr("operand 'dst' 'dst_fp4' [32, 2] fp4_e2m1fn_x4 SBUF: dtype must be fp8_e4m3fn_x4 or fp8_e5m2_x4"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst_bf16, src, scale); }),
              HasSubstr("dtype must be fp8_e4m3fn_x4 or fp8_e5m2_x4"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src, scale_bf16); }),
              HasSubstr("operand 'dst_scale' 'scale_bf16' [32, 2] bf16 SBUF: dtype must be uint8"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst48, src48, scale48); }),
              HasSubstr("needs a multiple of 32 partitions starting on a 32-partition quadrant"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                quantize_mx(dst64.slice(0, 16, 48), src64.slice(0, 16, 48), scale64.slice(0, 16, 48));
              }),
              HasSubstr("(it starts at partition 16)"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src64, scale); }),
              HasSubstr("has 32 partitions but operand 'src' has 64; they must match"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src10, scale); }),
              HasSubstr("operand 'src' 'src10' [32, 10] bf16 SBUF: free size 10 must be a multiple of 4"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst3, src, scale); }),
              HasSubstr("operand 'dst' 'dst3' [32, 3] fp8_e4m3fn_x4 SBUF: needs one contiguous free dim of 2 elements"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src, scale3); }),
              HasSubstr("operand 'dst_scale' 'scale3' [32, 3] uint8 SBUF: needs one contiguous free dim of 2"));
  EXPECT_THAT(InvalidArgumentMessage([&] { quantize_mx(dst, src_psum, scale); }),
              HasSubstr("operand 'src' 'src_psum' [32, 8] bf16 PSUM: must be in SBUF"));
  // Nothing refused was recorded.
  EXPECT_TRUE(core_.timeline().records().empty());
}

// ---- nc_matmul_mx ----

// The codes of a format whose values are multiples of 0.5 with |v| <= 3: with block scales within
// a factor 16 of each other, every product is a multiple of a common power of two and every
// partial sum of a 512-long contraction stays below 2^24 of them, so fp32 accumulation is exact.
std::vector<uint8_t> SmallCodes(MxFormatRef format) {
  std::vector<uint8_t> codes;
  const std::vector<double>& values = MxFormatValuesRef(format);
  for (size_t c = 0; c < values.size(); ++c) {
    const double v = values[c];
    if (std::isfinite(v) && std::fabs(v) <= 3 && v * 2 == std::floor(v * 2)) {
      codes.push_back(static_cast<uint8_t>(c));
    }
  }
  return codes;
}

struct MxOperand {
  Tile data;
  Tile scale;
  std::vector<double> dequantized;  // [4 P, cols] row-major, contraction index k = 4 p + j
};

class MxMatmulTest : public MxTest {
 protected:
  // A [P, cols] x4 operand of random small codes and random block scales in
  // [scale_lo, scale_lo + 4]; `dequantized` is built from the reference's decoding.
  MxOperand Operand(const std::string& name, int64_t p, int64_t cols, DType x4, int scale_lo,
                    uint32_t seed) {
    MxOperand op{core_.AllocateSbuf(name, {p, cols}, x4),
                 core_.AllocateSbuf(name + "_scale", {p, cols}, DType::kUInt8), {}};
    const MxFormatRef format = FormatOf(x4);
    const std::vector<uint8_t> codes = SmallCodes(format);
    std::mt19937 rng(seed);
    for (int64_t q = 0; q < p; ++q) {
      for (int64_t c = 0; c < cols; ++c) {
        SetByte(op.scale, q, c, static_cast<uint8_t>(scale_lo + rng() % 5));
        for (int j = 0; j < 4; ++j) SetCode(op.data, q, c, j, codes[rng() % codes.size()]);
      }
    }
    op.dequantized.assign(static_cast<size_t>(4 * p * cols), 0.0);
    for (int64_t q = 0; q < p; ++q) {
      for (int64_t c = 0; c < cols; ++c) {
        const double factor = E8M0Ref(ByteAt(op.scale, ScaleRow(q - q % 8), c));
        for (int j = 0; j < 4; ++j) {
          op.dequantized[(4 * q + j) * cols + c] = MxDecodeRef(format, CodeAt(op.data, q, c, j)) * factor;
        }
      }
    }
    return op;
  }

  // out[m][n] = sum_k a[k][m] * b[k][n] in fp64.
  static std::vector<double> Golden(const MxOperand& a, const MxOperand& b, int64_t k, int64_t m,
                                    int64_t n) {
    std::vector<double> out(static_cast<size_t>(m * n), 0.0);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t i = 0; i < m; ++i) {
        const double s = a.dequantized[kk * m + i];
        for (int64_t j = 0; j < n; ++j) out[i * n + j] += s * b.dequantized[kk * n + j];
      }
    }
    return out;
  }
};

struct MatmulCase {
  int64_t p, m, n;
  DType stationary, moving;
  int stationary_scale_lo, moving_scale_lo;
};

std::ostream& operator<<(std::ostream& os, const MatmulCase& c) {
  return os << "P " << c.p << ", M " << c.m << ", N " << c.n << ", " << DTypeName(c.stationary)
            << " (scales " << c.stationary_scale_lo << "+) x " << DTypeName(c.moving) << " (scales "
            << c.moving_scale_lo << "+)";
}

class MxMatmulExactTest : public MxMatmulTest, public ::testing::WithParamInterface<MatmulCase> {};

TEST_P(MxMatmulExactTest, BitExactAgainstTheFp64GoldenAndAccumulates) {
  const MatmulCase c = GetParam();
  MxOperand s = Operand("s", c.p, c.m, c.stationary, c.stationary_scale_lo, 1);
  MxOperand x1 = Operand("x1", c.p, c.n, c.moving, c.moving_scale_lo, 2);
  MxOperand x2 = Operand("x2", c.p, c.n, c.moving, c.moving_scale_lo, 3);
  Tile out = core_.AllocatePsum("out", {c.m, c.n});
  nc_matmul_mx(out, s.data, x1.data, s.scale, x1.scale);
  std::vector<double> want = Golden(s, x1, 4 * c.p, c.m, c.n);
  std::vector<float> got = out.ToFloats();
  int64_t nonzero = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(static_cast<double>(got[i]), want[i]) << "element " << i;
    nonzero += want[i] != 0;
  }
  EXPECT_GT(nonzero, static_cast<int64_t>(want.size()) / 2);  // not a trivially zero product
  nc_matmul_mx(out, s.data, x2.data, s.scale, x2.scale, {.accumulate = true});
  const std::vector<double> second = Golden(s, x2, 4 * c.p, c.m, c.n);
  got = out.ToFloats();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(static_cast<double>(got[i]), want[i] + second[i]) << "element " << i;
  }
  EXPECT_EQ(core_.timeline().records().back().flops, 2 * 4 * c.p * c.m * c.n);
}

INSTANTIATE_TEST_SUITE_P(
    Operands, MxMatmulExactTest,
    ::testing::Values(
        // Scales 125..129 around the neutral 127 on both sides.
        MatmulCase{128, 128, 512, DType::kFp8E4M3FNx4, DType::kFp8E4M3FNx4, 125, 125},
        MatmulCase{128, 64, 100, DType::kFp8E5M2x4, DType::kFp8E4M3FNx4, 125, 125},
        MatmulCase{64, 32, 512, DType::kFp4E2M1FNx4, DType::kFp4E2M1FNx4, 125, 125},
        MatmulCase{96, 128, 48, DType::kFp4E2M1FNx4, DType::kFp8E5M2x4, 125, 125},
        // Far from neutral: 2^23 .. 2^27 times 2^-37 .. 2^-33.
        MatmulCase{32, 16, 64, DType::kFp8E4M3FNx4, DType::kFp4E2M1FNx4, 150, 90}));

TEST_F(MxMatmulTest, NeutralScalesGiveThePlainProductOfTheCodes) {
  MxOperand s = Operand("s", 32, 8, DType::kFp8E4M3FNx4, 127, 4);
  MxOperand x = Operand("x", 32, 16, DType::kFp8E5M2x4, 127, 5);
  s.scale.FromFloats(std::vector<float>(32 * 8, 127));
  x.scale.FromFloats(std::vector<float>(32 * 16, 127));
  Tile out = core_.AllocatePsum("out", {8, 16});
  nc_matmul_mx(out, s.data, x.data, s.scale, x.scale);
  for (int64_t m = 0; m < 8; ++m) {
    for (int64_t n = 0; n < 16; ++n) {
      double want = 0;
      for (int64_t p = 0; p < 32; ++p) {
        for (int j = 0; j < 4; ++j) {
          want += MxDecodeRef(MxFormatRef::kE4M3FN, CodeAt(s.data, p, m, j)) *
                  MxDecodeRef(MxFormatRef::kE5M2, CodeAt(x.data, p, n, j));
        }
      }
      ASSERT_EQ(static_cast<double>(out.get(m, {n})), want) << m << ", " << n;
    }
  }
}

TEST_F(MxMatmulTest, ANaNScaleMakesItsBlocksProductsNaN) {
  MxOperand s = Operand("s", 64, 16, DType::kFp8E4M3FNx4, 125, 6);
  MxOperand x = Operand("x", 64, 32, DType::kFp4E2M1FNx4, 125, 7);
  SetByte(s.scale, 32, 5, 255);  // stationary block: partitions 32-39, column m = 5
  SetByte(x.scale, 1, 7, 255);   // moving block: partitions 8-15, column n = 7
  // A NaN-scaled block poisons its products even where its codes are zero.
  for (int64_t p = 8; p < 16; ++p) {
    for (int j = 0; j < 4; ++j) SetCode(x.data, p, 7, j, 0);
  }
  Tile out = core_.AllocatePsum("out", {16, 32});
  nc_matmul_mx(out, s.data, x.data, s.scale, x.scale);
  const std::vector<double> want = Golden(s, x, 256, 16, 32);  // dequantized before the edits
  for (int64_t m = 0; m < 16; ++m) {
    for (int64_t n = 0; n < 32; ++n) {
      const float v = out.get(m, {n});
      if (m == 5 || n == 7) {
        EXPECT_TRUE(std::isnan(v)) << m << ", " << n;
      } else {
        EXPECT_TRUE(SameDouble(v, want[m * 32 + n])) << m << ", " << n;
      }
    }
  }
}

TEST_F(MxMatmulTest, RulesAreRefusedNamingTheRule) {
  auto x4 = [&](const std::string& name, int64_t p, int64_t cols, DType d = DType::kFp8E4M3FNx4) {
    return core_.AllocateSbuf(name, {p, cols}, d);
  };
  auto u8 = [&](const std::string& name, int64_t p, int64_t cols) { return Scales(name, p, cols, 127); };
  Tile two_banks = core_.AllocatePsum("two_banks", {16, 1024});  // banks 0 and 1
  Tile s = x4("s", 32, 16), ss = u8("ss", 32, 16);
  Tile x = x4("x", 32, 64), xs = u8("xs", 32, 64);
  Tile out = core_.AllocatePsum("out", {16, 64});
  Tile s_bf16 = core_.AllocateSbuf("s_bf16", {32, 16}, DType::kBFloat16);
  Tile ss_bf16 = core_.AllocateSbuf("ss_bf16", {32, 16}, DType::kBFloat16);
  Tile s40 = x4("s40", 40, 16), ss40 = u8("ss40", 40, 16), x40 = x4("x40", 40, 64), xs40 = u8("xs40", 40, 64);
  Tile s64 = x4("s64", 64, 16), ss64 = u8("ss64", 64, 16), x64 = x4("x64", 64, 64), xs64 = u8("xs64", 64, 64);
  Tile x513 = x4("x513", 32, 513), xs513 = u8("xs513", 32, 513);
  Tile out513 = core_.AllocatePsum("out513", {16, 513});
  Tile s129 = x4("s129", 32, 129), ss129 = u8("ss129", 32, 129);
  Tile sbuf_out = core_.AllocateSbuf("sbuf_out", {16, 64}, DType::kFloat32);
  Tile fp16_out = core_.AllocatePsum("fp16_out", {16, 64}, DType::kFloat16);
  Tile out_wrong = core_.AllocatePsum("out_wrong", {16, 32});
  Tile x512 = x4("x512", 32, 512), xs512 = u8("xs512", 32, 512);
  Tile ss17 = u8("ss17", 32, 17);
  Tile xs_short = u8("xs_short", 64, 64);

  const auto refused = [](const std::function<void()>& f) { return InvalidArgumentMessage(f); };
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s_bf16, x, ss, xs); }),
              HasSubstr("operand 'stationary' 's_bf16' [32, 16] bf16 SBUF: dtype must be an x4 container"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s, x, ss_bf16, xs); }),
              HasSubstr("operand 'stationary_scale' 'ss_bf16' [32, 16] bf16 SBUF: dtype must be uint8 (E8M0)"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s40, x40, ss40, xs40); }),
              HasSubstr("needs a multiple of 32 partitions starting on a 32-partition quadrant"));
  EXPECT_THAT(refused([&] {
                nc_matmul_mx(out, s64.slice(0, 8, 40), x64.slice(0, 8, 40), ss64.slice(0, 8, 40),
                             xs64.slice(0, 8, 40));
              }),
              HasSubstr("(it starts at partition 8)"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s, x64, ss, xs64); }),
              HasSubstr("operand 'moving' 'x64' [64, 64] fp8_e4m3fn_x4 SBUF: has 64 partitions but "
                        "operand 'stationary' has 32; they must match"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out513, s, x513, ss, xs513); }),
              HasSubstr("free size N = 513 exceeds 512"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s129, x, ss129, xs); }),
              HasSubstr("free size M = 129 exceeds 128"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(sbuf_out, s, x, ss, xs); }),
              HasSubstr("operand 'dst' 'sbuf_out' [16, 64] fp32 SBUF: must be an fp32 PSUM tile"));
  // NeuronCore-v4 writes fp32 or bf16 (NKI 0.6), nothing else
  EXPECT_THAT(refused([&] { nc_matmul_mx(fp16_out, s, x, ss, xs); }),
              HasSubstr("operand 'dst' 'fp16_out' [16, 64] fp16 PSUM: must be an fp32 or bf16 PSUM tile"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out_wrong, s, x, ss, xs); }),
              HasSubstr("must be a contiguous [M, N] = [16, 64] view"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(two_banks.slice(1, 256, 768), s, x512, ss, xs512); }),
              HasSubstr("bank boundary"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s, x, ss17, xs); }),
              HasSubstr("operand 'stationary_scale' 'ss17' [32, 17] uint8 SBUF: needs one contiguous "
                        "free dim of 16 elements"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s, x, ss, xs_short); }),
              HasSubstr("operand 'moving_scale' 'xs_short' [64, 64] uint8 SBUF: has 64 partitions"));
  EXPECT_THAT(refused([&] { nc_matmul_mx(out, s, x, ss, x); }),
              HasSubstr("operand 'moving_scale'"));
  EXPECT_TRUE(core_.timeline().records().empty());
  // Inside one bank is fine, even at an offset.
  nc_matmul_mx(two_banks.slice(1, 512, 1024), s, x512, ss, xs512);
}

TEST(MxTrn2Test, BothInstructionsAreNotSupportedOnTrn2) {
  NeuronCore core(0, Trn2Profile());
  ScopedCurrentCore scope(core);
  Tile src = core.AllocateSbuf("src", {32, 8}, DType::kBFloat16);
  Tile dst = core.AllocateSbuf("dst", {32, 2}, DType::kFp8E4M3FNx4);
  Tile scale = core.AllocateSbuf("scale", {32, 2}, DType::kUInt8);
  Tile out = core.AllocatePsum("out", {2, 2});
  const std::string q = ErrorMessageOf(ErrorCode::kNotSupported, [&] { quantize_mx(dst, src, scale); });
  EXPECT_THAT(q, HasSubstr("quantize_mx: hardware profile 'trn2' has no MX path (pe_mx_speedup = 0)"));
  const std::string m = ErrorMessageOf(ErrorCode::kNotSupported,
                                       [&] { nc_matmul_mx(out, dst, dst, scale, scale); });
  EXPECT_THAT(m, HasSubstr("nc_matmul_mx: hardware profile 'trn2' has no MX path"));
  EXPECT_THAT(m, HasSubstr("configs/hardware/trn3.textproto"));
  EXPECT_TRUE(core.timeline().records().empty());
}

TEST_F(MxMatmulTest, CostIsMxMatmulNsFourOverSpeedupTimesTheBf16Matmul) {
  const HardwareProfile& prof = Trn3();
  ASSERT_GT(prof.pe_mx_speedup(), 0);
  // Both run through trn3's PE throttle (trn2's fields): a mirror of that state gives each one's
  // wall time from its full-rate time (docs/engine-costs.md).
  PeThrottle mirror;
  for (int64_t n : {512, 200, 16}) {
    SCOPED_TRACE(n);
    Tile sb = core_.AllocateSbuf("sb", {128, 128}, DType::kBFloat16);
    Tile xb = core_.AllocateSbuf("xb", {128, n}, DType::kBFloat16);
    sb.FromFloats(std::vector<float>(128 * 128, 1.0f));
    xb.FromFloats(std::vector<float>(static_cast<size_t>(128 * n), 1.0f));
    Tile out = core_.AllocatePsum("out", {128, n});
    nc_matmul(out, sb, xb);
    const InstructionRecord bf16 = core_.timeline().records().back();
    MxOperand s = Operand("s", 128, 128, DType::kFp8E4M3FNx4, 127, 8);
    MxOperand x = Operand("x", 128, n, DType::kFp4E2M1FNx4, 127, 9);
    nc_matmul_mx(out, s.data, x.data, s.scale, x.scale);
    const InstructionRecord mx = core_.timeline().records().back();
    EXPECT_STREQ(mx.name, "nc_matmul_mx");
    EXPECT_EQ(mx.engine, Engine::kPE);
    EXPECT_DOUBLE_EQ(mx.start_ns, bf16.end_ns);  // the same PE, in order
    const double bf16_ns = bf16.end_ns - bf16.start_ns, mx_ns = mx.end_ns - mx.start_ns;
    EXPECT_NEAR(bf16_ns, mirror.Run(prof, bf16.start_ns, MatmulNs(prof, n, DType::kBFloat16)), 1e-9);
    EXPECT_NEAR(mx_ns, mirror.Run(prof, mx.start_ns, MxMatmulNs(prof, n)), 1e-9);
    // At full rate the PE cycles scale by 4 / pe_mx_speedup.
    EXPECT_NEAR(MxMatmulNs(prof, n),
                MatmulNs(prof, n, DType::kBFloat16) * 4 / prof.pe_mx_speedup(), 1e-9);
    EXPECT_EQ(mx.flops, 2 * 512 * 128 * n);
  }
}

}  // namespace
}  // namespace nkisim::nisa
