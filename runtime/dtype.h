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
};

inline constexpr DType kAllDTypes[] = {
    DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3,
    DType::kFp8E4M3FN, DType::kFp8E5M2, DType::kInt8, DType::kUInt8,
    DType::kInt32, DType::kUInt16, DType::kUInt32};

size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);  // "fp32", "bf16", "fp16", "fp8_e4m3", ...
// Accepts DTypeName spellings and common aliases ("float32", "bfloat16", "int32", ...).
// Throws Error(kInvalidArgument) naming the accepted spellings on anything else.
DType ParseDType(std::string_view name);
bool IsFloat(DType dtype);
bool IsFp8(DType dtype);
inline bool IsInteger(DType dtype) { return !IsFloat(dtype); }
// Largest finite value of a float dtype, or the largest integer of an integer dtype.
double MaxValue(DType dtype);

// Scalar conversions.
float ToFloat(DType dtype, const void* element);
void FromFloat(DType dtype, float value, void* element);

// Bulk conversions of n contiguous elements.
void ToFloat(DType dtype, const void* src, float* dst, size_t n);
void FromFloat(DType dtype, const float* src, void* dst, size_t n);

// Bit-level helpers, exposed for tests and for npy bf16 exchange.
uint16_t FloatToBf16Bits(float value);
float Bf16BitsToFloat(uint16_t bits);
uint16_t FloatToFp16Bits(float value);
float Fp16BitsToFloat(uint16_t bits);
uint8_t FloatToFp8Bits(DType fp8_dtype, float value);
float Fp8BitsToFloat(DType fp8_dtype, uint8_t bits);

// Rounds value to the nearest representable value of dtype (the round trip through storage).
float RoundTo(DType dtype, float value);

}  // namespace nkisim
