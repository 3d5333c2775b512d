// Element types of the simulated NeuronCore and their conversions to and from fp32.
//
// Values are stored in their dtype's own width and computed in fp32 (PSUM always holds fp32).
// Float conversions round to nearest, ties to even, and keep subnormals. Overflow follows the
// hardware: bf16 and fp16 overflow to infinity; every fp8 format saturates to its largest finite
// value (infinity saturates too); NaN stays NaN. Float-to-integer conversion rounds to nearest
// even, saturates to the integer range and maps NaN to 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace nkisim {

enum class DType : uint8_t {
  kFloat32,
  kBFloat16,
  kFloat16,
  kFp8E4M3,    // trn2 flavour: IEEE-style with inf/NaN, largest finite 240
  kFp8E4M3FN,  // OCP "fn" flavour: no inf, NaN = S.1111.111, largest finite 448
  kFp8E5M2,    // IEEE-style, largest finite 57344
  kInt8,
  kUInt8,
  kInt32,
  kUInt16,
  kUInt32,
  // MX containers (NeuronCore-v4): one element packs 4 narrow floats, value j in bits
  // [j * w, (j + 1) * w) (lowest first), w = 8 for fp8 and 4 for fp4. Only DMA (a byte copy),
  // nisa::quantize_mx and nisa::nc_matmul_mx handle them; scalar conversions refuse them.
  kFp8E4M3FNx4,  // 4 x fp8_e4m3fn in 32 bits
  kFp8E5M2x4,    // 4 x fp8_e5m2 in 32 bits
  kFp4E2M1FNx4,  // 4 x fp4_e2m1fn (OCP: no inf, no NaN, largest finite 6) in 16 bits
  kInt16,        // last: the values above keep their numbers
};

inline constexpr DType kAllDTypes[] = {
    DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3,
    DType::kFp8E4M3FN, DType::kFp8E5M2, DType::kInt8, DType::kUInt8,
    DType::kInt32, DType::kUInt16, DType::kUInt32, DType::kInt16};
// The x4 containers, kept out of kAllDTypes: they hold no single value to convert.
inline constexpr DType kX4DTypes[] = {DType::kFp8E4M3FNx4, DType::kFp8E5M2x4, DType::kFp4E2M1FNx4};

size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);  // "fp32", "bf16", "fp16", "fp8_e4m3", ...
// Accepts DTypeName spellings and common aliases ("float32", "bfloat16", "int32", ...).
// Throws Error(kInvalidArgument) naming the accepted spellings on anything else.
DType ParseDType(std::string_view name);
bool IsFloat(DType dtype);  // scalar floats only: false for the x4 containers
bool IsFp8(DType dtype);
bool IsX4(DType dtype);
inline bool IsInteger(DType dtype) { return !IsFloat(dtype) && !IsX4(dtype); }
// Largest finite value of a float dtype, or the largest integer of an integer dtype.
double MaxValue(DType dtype);

// Scalar conversions. An x4 dtype throws Error(kInvalidArgument): it holds 4 values (use the
// x4 helpers below).
float ToFloat(DType dtype, const void* element);
void FromFloat(DType dtype, float value, void* element);

// Bulk conversions of n contiguous elements.
void ToFloat(DType dtype, const void* src, float* dst, size_t n);
void FromFloat(DType dtype, const float* src, void* dst, size_t n);

// Bit-level helpers, exposed for tests and for npy bf16 exchange. The bf16 pair is inline: the
// collectives' reductions round every addition through it (collectives/reduction.cc). Without a
// branch (a select), so bulk loops over it vectorise (tensor initialisation, the reductions).
inline uint16_t FloatToBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;  // ties to even
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;                      // keep a NaN quiet
  return static_cast<uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}
inline float Bf16BitsToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}
uint16_t FloatToFp16Bits(float value);
float Fp16BitsToFloat(uint16_t bits);
uint8_t FloatToFp8Bits(DType fp8_dtype, float value);
float Fp8BitsToFloat(DType fp8_dtype, uint8_t bits);

// Rounds value to the nearest representable value of dtype (the round trip through storage).
float RoundTo(DType dtype, float value);

// x4 containers. The value format of an x4 dtype: 8 or 4 bits per value; the largest finite value
// (448, 57344, 6). Encoding rounds to nearest, ties to even, and saturates like the fp8 dtypes
// (infinity saturates too); fp4 has no NaN, so NaN encodes as +0 (an MX block holding NaN is
// marked by its scale, runtime/mx.h). All throw Error(kInternal) for a dtype that is not x4.
int X4ValueBits(DType x4);
double X4MaxValue(DType x4);
uint8_t X4EncodeValue(DType x4, float value);  // the value's code in the low X4ValueBits bits
float X4DecodeValue(DType x4, uint8_t code);
// n elements <-> 4 n values (value j of element e at index 4 e + j).
void UnpackX4(DType x4, const void* src, float* dst, size_t n_elements);
void PackX4(DType x4, const float* src, void* dst, size_t n_elements);

}  // namespace nkisim
