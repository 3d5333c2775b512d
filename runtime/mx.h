// Microscaling (MX, OCP MX v1.0) numerics shared by the ISA (nisa::quantize_mx, nisa::nc_matmul_mx),
// the weight packer (kernels/common/mx_weights.h) and the kernels. An MX block is 32 values that
// share one E8M0 scale (a uint8 s meaning 2^(s - 127); 255 is NaN). On the NeuronCore-v4 layout a
// block is 8 partitions x the 4 values of one x4 element: partitions [8 g, 8 g + 8) of free column f
// form block (g, f), and its scale sits on partition 32 (g / 4) + g % 4, column f, of the scale tile
// (four scale rows at the top of each 32-partition quadrant: partitions 0-3, 32-35, 64-67, 96-99).
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace nkisim::mx {

inline constexpr int kBlockValues = 32;      // values per block
inline constexpr int kBlockPartitions = 8;   // partitions per block
inline constexpr int kQuadrantPartitions = 32;
inline constexpr uint8_t kNeutralScale = 127;  // 2^0 = 1.0, MX_NEUTRAL_SCALE of the reference
inline constexpr uint8_t kNaNScale = 255;

// 2^(s - 127); NaN for 255.
float E8M0ToFloat(uint8_t scale);

// The exponent e of the largest power of two with 2^e <= |x| of an x4 format's largest finite
// value (8 for fp8_e4m3fn: 448 = 1.75 * 2^8; 15 for fp8_e5m2; 2 for fp4_e2m1fn).
int X4MaxExponent(DType x4);

// The scale quantize_mx gives a block whose largest magnitude is amax. As the NeuronCore-v4 does
// (nki.isa.quantize_mx: "a block scale two times larger" than OCP's floor(log2 amax) - emax), the
// exponent is floor(log2 amax) - emax + 1, so the block's largest value lands in [2^(emax-1), 2^emax)
// and never saturates. Biased by 127 and clamped to [0, 254]; 0 (2^-127) for an all-zero block;
// kNaNScale when the block holds a NaN or an infinity (has_non_finite).
uint8_t BlockScale(DType x4, float amax, bool has_non_finite);

// The code of value / 2^(scale - 127) in x4's value format (round to nearest even, saturating);
// under kNaNScale the value code of NaN (fp8) or 0 (fp4, which has no NaN).
uint8_t QuantizeValue(DType x4, float value, uint8_t scale);

// The partition of the scale tile that holds the scale of the block starting at data partition p
// (p a multiple of 8): 32 (p / 32) + (p % 32) / 8.
inline int64_t ScalePartition(int64_t data_partition) {
  return kQuadrantPartitions * (data_partition / kQuadrantPartitions) +
         (data_partition % kQuadrantPartitions) / kBlockPartitions;
}

}  // namespace nkisim::mx
