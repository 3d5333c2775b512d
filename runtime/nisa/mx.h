// The MX (microscaling) instructions of NeuronCore-v4: online quantization of activations into x4
// containers with E8M0 block scales, and the matmul that applies both operands' block scales
// inside the PE array. Block and scale layout: runtime/mx.h. Both need a hardware profile with an
// MX path (pe_mx_speedup > 0, e.g. configs/hardware/trn3.textproto); on one without (the built-in
// trn2) they throw Error(kNotSupported) naming the profile.
#pragma once

#include "runtime/tile.h"

namespace nkisim::nisa {

// dst[P, F/4] (x4) and dst_scale[P, F/4] (uint8) = MX quantization of src[P, F].
// Block (g, f) is src partitions [8 g, 8 g + 8) x free elements [4 f, 4 f + 4); its scale is
// mx::BlockScale of the block's largest magnitude (NaN or Inf anywhere in it: scale 255 and NaN
// codes), written at partition mx::ScalePartition(8 g) of dst_scale; the other partitions of
// dst_scale are left as they were. Each value is stored as value / 2^(scale - 127), rounded to
// nearest even in dst's value format.
// Rules: all three in SBUF, starting on a 32-partition quadrant, with the same partition count P,
// a multiple of 32; src bf16 or fp16 with F (its free size, row-major) a multiple of 4; dst
// fp8_e4m3fn_x4 or fp8_e5m2_x4 and dst_scale uint8, each with one contiguous free dim of F / 4.
// Cost: a Vector copy's row over F elements per partition (16-bit rate).
void quantize_mx(const Tile& dst, const Tile& src, const Tile& dst_scale);

struct MatmulMxOptions {
  bool accumulate = false;  // false: dst = product; true: dst += product
};

// dst[M, N] (PSUM, fp32 or bf16: the fp32 product rounded once) = or += sum over k < 4 P of
//   S[k, m] * 2^(ss[k, m] - 127) * V[k, n] * 2^(ms[k, n] - 127),
// where contraction index k = 4 p + j is value j of element p of a column of stationary [P, M] or
// moving [P, N] (x4 tiles), and ss / ms are the stationary_scale / moving_scale of the block that
// holds it (partition mx::ScalePartition(p - p % 8) of the [P, M] / [P, N] uint8 scale tiles). A
// scale of 255 makes its block's products NaN. Pass tiles filled with mx::kNeutralScale (127) for
// an operand without block scales (per-tensor fp8, dequantized after the matmul).
// Rules: stationary and moving in SBUF, each an x4 dtype with one free dim, on the same P
// partitions (a multiple of 32, starting on a quadrant); M <= pe_cols, N <= pe_max_moving_free;
// the scale tiles uint8 in SBUF with the data's partitions and free size; dst an fp32 or bf16 PSUM
// [M, N] contiguous view inside one bank.
// Cost: MxMatmulNs(N): the bf16 matmul time x 4 / pe_mx_speedup, for a contraction of 4 P,
// then the PE throttle.
void nc_matmul_mx(const Tile& dst, const Tile& stationary, const Tile& moving,
                  const Tile& stationary_scale, const Tile& moving_scale,
                  const MatmulMxOptions& options = {});

}  // namespace nkisim::nisa
