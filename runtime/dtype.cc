#include "runtime/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/error.h"

namespace nkisim {
namespace {

// A binary float format narrower than fp32, described well enough to encode and decode it.
struct MiniFloat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  double max_finite;
  bool saturate;       // overflow and infinity go to +-max_finite instead of infinity
  uint32_t inf_code;   // magnitude bits of infinity (unused when the format has none)
  uint32_t nan_code;   // magnitude bits of the canonical NaN
  bool ieee_top_exponent;  // the all-ones exponent holds only inf/NaN
  bool has_nan = true;     // false: every code is a finite number (fp4 e2m1)
};

constexpr MiniFloat kFp16{5, 10, 15, 65504.0, false, 0x7C00, 0x7E00, true};
constexpr MiniFloat kE4M3{4, 3, 7, 240.0, true, 0x78, 0x7F, true};
constexpr MiniFloat kE4M3FN{4, 3, 7, 448.0, true, 0, 0x7F, false};
constexpr MiniFloat kE5M2{5, 2, 15, 57344.0, true, 0x7C, 0x7F, true};
constexpr MiniFloat kE2M1{2, 1, 1, 6.0, true, 0, 0, false, false};

const MiniFloat& Fp8Format(DType dtype) {
  switch (dtype) {
    case DType::kFp8E4M3: return kE4M3;
    case DType::kFp8E4M3FN: return kE4M3FN;
    case DType::kFp8E5M2: return kE5M2;
    default: Raise(ErrorCode::kInternal, StrCat("not an fp8 dtype: ", DTypeName(dtype)));
  }
}

uint32_t Encode(const MiniFloat& f, float x) {
  const int total_bits = 1 + f.exponent_bits + f.mantissa_bits;
  const uint32_t sign = std::signbit(x) ? (1u << (total_bits - 1)) : 0u;
  const uint32_t max_code = [&] {
    uint32_t top_exp = (1u << f.exponent_bits) - 1;
    if (f.ieee_top_exponent) return ((top_exp - 1) << f.mantissa_bits) | ((1u << f.mantissa_bits) - 1);
    if (!f.has_nan) return (top_exp << f.mantissa_bits) | ((1u << f.mantissa_bits) - 1);
    return (top_exp << f.mantissa_bits) | ((1u << f.mantissa_bits) - 2);  // all-ones is NaN
  }();
  if (std::isnan(x)) return f.has_nan ? (sign | f.nan_code) : 0u;
  double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | (f.saturate ? max_code : f.inf_code);
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int min_normal_exp = 1 - f.bias;
  int exp = std::max(e - 1, min_normal_exp);
  double quantum = std::ldexp(1.0, exp - f.mantissa_bits);
  double q = std::nearbyint(a / quantum);  // exact scaling, then ties-to-even rounding
  const double implicit_one = std::ldexp(1.0, f.mantissa_bits);
  if (q >= 2 * implicit_one) {
    q /= 2;
    ++exp;
  }
  if (q * std::ldexp(1.0, exp - f.mantissa_bits) > f.max_finite) {
    return sign | (f.saturate ? max_code : f.inf_code);
  }
  if (q < implicit_one) return sign | static_cast<uint32_t>(q);  // subnormal
  uint32_t exp_field = static_cast<uint32_t>(exp + f.bias);
  return sign | (exp_field << f.mantissa_bits) | static_cast<uint32_t>(q - implicit_one);
}

float Decode(const MiniFloat& f, uint32_t code) {
  const int total_bits = 1 + f.exponent_bits + f.mantissa_bits;
  const bool negative = (code >> (total_bits - 1)) & 1u;
  const uint32_t magnitude = code & ((1u << (total_bits - 1)) - 1);
  const uint32_t exp_field = magnitude >> f.mantissa_bits;
  const uint32_t mantissa = magnitude & ((1u << f.mantissa_bits) - 1);
  const uint32_t top_exp = (1u << f.exponent_bits) - 1;
  double value;
  if (f.ieee_top_exponent && exp_field == top_exp) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee_top_exponent && f.has_nan && magnitude == f.nan_code) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exp_field == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<double>(mantissa + (1u << f.mantissa_bits)),
                       static_cast<int>(exp_field) - f.bias - f.mantissa_bits);
  }
  return static_cast<float>(negative ? -value : value);
}

using Fp8Table = std::array<float, 256>;

Fp8Table MakeFp8Table(const MiniFloat& f) {
  Fp8Table table{};
  for (uint32_t code = 0; code < 256; ++code) table[code] = Decode(f, code);
  return table;
}

const Fp8Table& DecodeTable(DType dtype) {
  static const Fp8Table e4m3 = MakeFp8Table(kE4M3);
  static const Fp8Table e4m3fn = MakeFp8Table(kE4M3FN);
  static const Fp8Table e5m2 = MakeFp8Table(kE5M2);
  switch (dtype) {
    case DType::kFp8E4M3: return e4m3;
    case DType::kFp8E4M3FN: return e4m3fn;
    default: return e5m2;
  }
}

template <typename Int>
Int SaturateToInt(float value) {
  if (std::isnan(value)) return 0;
  double r = std::nearbyint(static_cast<double>(value));
  if (r <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (r >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(r);
}

template <typename T>
T LoadRaw(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void StoreRaw(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFp8E4M3FNx4: case DType::kFp8E5M2x4: return 4;
    case DType::kBFloat16: case DType::kFloat16: case DType::kUInt16: case DType::kInt16: return 2;
    case DType::kFp4E2M1FNx4: return 2;
    default: return 1;
  }
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
    case DType::kFp8E4M3: return "fp8_e4m3";
    case DType::kFp8E4M3FN: return "fp8_e4m3fn";
    case DType::kFp8E5M2: return "fp8_e5m2";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kUInt32: return "uint32";
    case DType::kFp8E4M3FNx4: return "fp8_e4m3fn_x4";
    case DType::kFp8E5M2x4: return "fp8_e5m2_x4";
    case DType::kFp4E2M1FNx4: return "fp4_e2m1fn_x4";
  }
  return "?";
}

DType ParseDType(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (name == DTypeName(d)) return d;
  }
  for (DType d : kX4DTypes) {
    if (name == DTypeName(d)) return d;
  }
  struct Alias { std::string_view name; DType dtype; };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kFloat32}, {"bfloat16", DType::kBFloat16}, {"float16", DType::kFloat16},
      {"float8_e4m3", DType::kFp8E4M3}, {"float8_e4m3fn", DType::kFp8E4M3FN},
      {"float8_e5m2", DType::kFp8E5M2}, {"float8_e4m3fn_x4", DType::kFp8E4M3FNx4},
      {"float8_e5m2_x4", DType::kFp8E5M2x4}, {"float4_e2m1fn_x4", DType::kFp4E2M1FNx4}};
  for (const Alias& a : kAliases) {
    if (name == a.name) return a.dtype;
  }
  std::string accepted;
  for (DType d : kAllDTypes) accepted += StrCat(accepted.empty() ? "" : ", ", DTypeName(d));
  for (DType d : kX4DTypes) accepted += StrCat(", ", DTypeName(d));
  Raise(ErrorCode::kInvalidArgument,
        StrCat("dtype: unknown name '", name, "'; accepted: ", accepted));
}

bool IsFloat(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kBFloat16: case DType::kFloat16:
    case DType::kFp8E4M3: case DType::kFp8E4M3FN: case DType::kFp8E5M2: return true;
    default: return false;
  }
}

bool IsX4(DType dtype) {
  return dtype == DType::kFp8E4M3FNx4 || dtype == DType::kFp8E5M2x4 ||
         dtype == DType::kFp4E2M1FNx4;
}

bool IsFp8(DType dtype) {
  return dtype == DType::kFp8E4M3 || dtype == DType::kFp8E4M3FN || dtype == DType::kFp8E5M2;
}

double MaxValue(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return std::numeric_limits<float>::max();
    case DType::kBFloat16: return Bf16BitsToFloat(0x7F7F);
    case DType::kFloat16: return kFp16.max_finite;
    case DType::kFp8E4M3: case DType::kFp8E4M3FN: case DType::kFp8E5M2:
      return Fp8Format(dtype).max_finite;
    case DType::kInt8: return std::numeric_limits<int8_t>::max();
    case DType::kUInt8: return std::numeric_limits<uint8_t>::max();
    case DType::kInt32: return std::numeric_limits<int32_t>::max();
    case DType::kUInt16: return std::numeric_limits<uint16_t>::max();
    case DType::kInt16: return std::numeric_limits<int16_t>::max();
    case DType::kUInt32: return std::numeric_limits<uint32_t>::max();
    case DType::kFp8E4M3FNx4: case DType::kFp8E5M2x4: case DType::kFp4E2M1FNx4:
      return X4MaxValue(dtype);
  }
  return 0;
}

uint16_t FloatToFp16Bits(float value) { return static_cast<uint16_t>(Encode(kFp16, value)); }
float Fp16BitsToFloat(uint16_t bits) { return Decode(kFp16, bits); }

uint8_t FloatToFp8Bits(DType fp8_dtype, float value) {
  return static_cast<uint8_t>(Encode(Fp8Format(fp8_dtype), value));
}

float Fp8BitsToFloat(DType fp8_dtype, uint8_t bits) {
  Fp8Format(fp8_dtype);  // validates the dtype
  return DecodeTable(fp8_dtype)[bits];
}

float ToFloat(DType dtype, const void* e) {
  switch (dtype) {
    case DType::kFloat32: return LoadRaw<float>(e);
    case DType::kBFloat16: return Bf16BitsToFloat(LoadRaw<uint16_t>(e));
    case DType::kFloat16: return Fp16BitsToFloat(LoadRaw<uint16_t>(e));
    case DType::kFp8E4M3: case DType::kFp8E4M3FN: case DType::kFp8E5M2:
      return DecodeTable(dtype)[LoadRaw<uint8_t>(e)];
    case DType::kInt8: return static_cast<float>(LoadRaw<int8_t>(e));
    case DType::kUInt8: return static_cast<float>(LoadRaw<uint8_t>(e));
    case DType::kInt32: return static_cast<float>(LoadRaw<int32_t>(e));
    case DType::kUInt16: return static_cast<float>(LoadRaw<uint16_t>(e));
    case DType::kInt16: return static_cast<float>(LoadRaw<int16_t>(e));
    case DType::kUInt32: return static_cast<float>(LoadRaw<uint32_t>(e));
    case DType::kFp8E4M3FNx4: case DType::kFp8E5M2x4: case DType::kFp4E2M1FNx4: break;
  }
  Raise(ErrorCode::kInvalidArgument,
        StrCat("dtype ", DTypeName(dtype), " packs 4 values per element: only DMA, quantize_mx and ",
               "nc_matmul_mx take it, not an instruction that reads single values"));
}

void FromFloat(DType dtype, float v, void* e) {
  switch (dtype) {
    case DType::kFloat32: StoreRaw(e, v); return;
    case DType::kBFloat16: StoreRaw(e, FloatToBf16Bits(v)); return;
    case DType::kFloat16: StoreRaw(e, FloatToFp16Bits(v)); return;
    case DType::kFp8E4M3: case DType::kFp8E4M3FN: case DType::kFp8E5M2:
      StoreRaw(e, FloatToFp8Bits(dtype, v)); return;
    case DType::kInt8: StoreRaw(e, SaturateToInt<int8_t>(v)); return;
    case DType::kUInt8: StoreRaw(e, SaturateToInt<uint8_t>(v)); return;
    case DType::kInt32: StoreRaw(e, SaturateToInt<int32_t>(v)); return;
    case DType::kUInt16: StoreRaw(e, SaturateToInt<uint16_t>(v)); return;
    case DType::kInt16: StoreRaw(e, SaturateToInt<int16_t>(v)); return;
    case DType::kUInt32: StoreRaw(e, SaturateToInt<uint32_t>(v)); return;
    case DType::kFp8E4M3FNx4: case DType::kFp8E5M2x4: case DType::kFp4E2M1FNx4: break;
  }
  Raise(ErrorCode::kInvalidArgument,
        StrCat("dtype ", DTypeName(dtype), " packs 4 values per element: only quantize_mx writes ",
               "it, not an instruction that writes single values"));
}

void ToFloat(DType dtype, const void* src, float* dst, size_t n) {
  if (n == 0) return;  // empty tensors may have null data; memcpy of null is undefined
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if (dtype == DType::kBFloat16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = Bf16BitsToFloat(s[i]);
  } else {
    const auto* s = static_cast<const std::byte*>(src);
    const size_t w = SizeOf(dtype);
    for (size_t i = 0; i < n; ++i) dst[i] = ToFloat(dtype, s + i * w);
  }
}

void FromFloat(DType dtype, const float* src, void* dst, size_t n) {
  if (n == 0) return;
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if (dtype == DType::kBFloat16) {
    auto* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = FloatToBf16Bits(src[i]);
  } else {
    auto* d = static_cast<std::byte*>(dst);
    const size_t w = SizeOf(dtype);
    for (size_t i = 0; i < n; ++i) FromFloat(dtype, src[i], d + i * w);
  }
}

namespace {

const MiniFloat& X4Format(DType x4) {
  switch (x4) {
    case DType::kFp8E4M3FNx4: return kE4M3FN;
    case DType::kFp8E5M2x4: return kE5M2;
    case DType::kFp4E2M1FNx4: return kE2M1;
    default: Raise(ErrorCode::kInternal, StrCat("not an x4 dtype: ", DTypeName(x4)));
  }
}

}  // namespace

int X4ValueBits(DType x4) {
  const MiniFloat& f = X4Format(x4);
  return 1 + f.exponent_bits + f.mantissa_bits;
}

double X4MaxValue(DType x4) { return X4Format(x4).max_finite; }

uint8_t X4EncodeValue(DType x4, float value) {
  return static_cast<uint8_t>(Encode(X4Format(x4), value));
}

float X4DecodeValue(DType x4, uint8_t code) {
  const MiniFloat& f = X4Format(x4);
  const int bits = 1 + f.exponent_bits + f.mantissa_bits;
  return Decode(f, code & ((1u << bits) - 1));
}

void UnpackX4(DType x4, const void* src, float* dst, size_t n_elements) {
  const int bits = X4ValueBits(x4);
  const auto* s = static_cast<const uint8_t*>(src);
  if (bits == 8) {
    const Fp8Table& table = DecodeTable(x4 == DType::kFp8E4M3FNx4 ? DType::kFp8E4M3FN : DType::kFp8E5M2);
    for (size_t i = 0; i < 4 * n_elements; ++i) dst[i] = table[s[i]];
    return;
  }
  for (size_t e = 0; e < n_elements; ++e) {
    const uint16_t word = static_cast<uint16_t>(s[2 * e] | (s[2 * e + 1] << 8));
    for (int j = 0; j < 4; ++j) dst[4 * e + j] = X4DecodeValue(x4, (word >> (4 * j)) & 0xF);
  }
}

void PackX4(DType x4, const float* src, void* dst, size_t n_elements) {
  const int bits = X4ValueBits(x4);
  auto* d = static_cast<uint8_t*>(dst);
  if (bits == 8) {
    for (size_t i = 0; i < 4 * n_elements; ++i) d[i] = X4EncodeValue(x4, src[i]);
    return;
  }
  for (size_t e = 0; e < n_elements; ++e) {
    uint16_t word = 0;
    for (int j = 0; j < 4; ++j) word |= static_cast<uint16_t>(X4EncodeValue(x4, src[4 * e + j]) << (4 * j));
    d[2 * e] = static_cast<uint8_t>(word & 0xFF);
    d[2 * e + 1] = static_cast<uint8_t>(word >> 8);
  }
}

float RoundTo(DType dtype, float value) {
  alignas(4) std::byte storage[4];
  FromFloat(dtype, value, storage);
  return ToFloat(dtype, storage);
}

}  // namespace nkisim
