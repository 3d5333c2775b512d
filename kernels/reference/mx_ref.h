// Plain reference for the MX (microscaling) numerics, written apart from the simulator's
// (runtime/mx.h, runtime/dtype.cc, kernels/common/mx_weights.cc) so goldens and ISA tests compare
// two independent implementations of one documented rule:
//   * value formats: fp8_e4m3fn (max 448, NaN = S.1111.111, no inf), fp8_e5m2 (max 57344, IEEE
//     inf/NaN), fp4_e2m1fn (values 0, 0.5, 1, 1.5, 2, 3, 4, 6; no inf, no NaN); rounding to nearest,
//     ties to the even code, saturating at the largest finite value (infinity too);
//   * a block of 32 values shares the E8M0 scale s (2^(s - 127), 255 = NaN):
//     s = clamp(floor(log2 amax) - emax + 1 + 127, 0, 254), emax = 8 / 15 / 2 (the exponent of
//     the format's largest value), s = 0 for an all-zero block, 255 if the block holds NaN or inf;
//   * a value is stored as round(value / 2^(s - 127)) in the format;
//   * weight packing along the contraction K: packed row r, value j holds source row
//     4 r + j (MX_CONTIGUOUS) or h_idx[4 r + j] with
//     h_idx = arange(K).reshape(2, K/4, 2).transpose(1, 0, 2).flatten() (MX_INTERLEAVED); a block is
//     packed rows [8 g, 8 g + 8) of one column (32 values), scale row g.
// Everything in fp64; no tiles, no ISA, no kernel code.
#pragma once

#include <cstdint>
#include <vector>

namespace nkisim::reference {

enum class MxFormatRef { kE4M3FN, kE5M2, kE2M1 };

double MxFormatMaxRef(MxFormatRef format);
// Every code of the format (256 for fp8, 16 for fp4) decoded; NaN codes decode to NaN.
const std::vector<double>& MxFormatValuesRef(MxFormatRef format);
// The code nearest to v (ties: the even code), saturating; NaN: the format's NaN code with the
// all-ones magnitude, 0x7F (fp4, which has no NaN: 0).
uint8_t MxEncodeRef(MxFormatRef format, double v);
double MxDecodeRef(MxFormatRef format, uint8_t code);

double E8M0Ref(uint8_t scale);  // 2^(scale - 127); NaN for 255
// The block scale of `n` values by the rule above.
uint8_t MxBlockScaleRef(MxFormatRef format, const double* values, int n);
// One block quantized: returns its scale (MxBlockScaleRef) and writes codes[i], the code of
// values[i] / 2^(scale - 127) (under scale 255: the NaN code, 0 for fp4).
uint8_t MxQuantizeBlockRef(MxFormatRef format, const double* values, int n, uint8_t* codes);

// Source row of packed value (packed_row, j) for a contraction of k rows.
int64_t MxPackedSourceRowRef(bool interleaved, int64_t k, int64_t packed_row, int j);

// The MX round trip of one contraction vector x[k] (k % 32 == 0): every block (32 values at the
// source rows of packed rows [8 g, 8 g + 8)) quantized with its own scale and dequantized.
std::vector<double> MxQuantizeDequantizeRef(MxFormatRef format, bool interleaved,
                                            const std::vector<double>& x);

// Packed weights -> fp64 [k, n] row-major in source row order. data: (k/4) * n x4 elements, row
// major, each 4 bytes (fp8) or 2 bytes (fp4, value j in bits [4 j, 4 j + 4)); scales: (k/32) * n.
std::vector<double> MxUnpackWeightsRef(MxFormatRef format, bool interleaved, const uint8_t* data,
                                       const uint8_t* scales, int64_t k, int64_t n);

}  // namespace nkisim::reference
