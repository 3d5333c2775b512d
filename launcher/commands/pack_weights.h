// `nkisim pack-weights`: MX weight packing on the host (kernels/common/mx_weights.h), files in and
// out, no simulated core.
//
//   nkisim pack-weights --in W.npy --out-weights P.npy --out-scales S.npy
//                       [--dtype fp8_e4m3fn_x4|fp8_e5m2_x4|fp4_e2m1fn_x4] [--layout MX_CONTIGUOUS|MX_INTERLEAVED]
//     W [K, N] ('<f4' fp32, '<f2' fp16, or '<u2' taken as bf16 bits, the way runtime/npy.h
//     exchanges bf16) -> P [K/4, N] x4 data written as its containers ('<u4' for the fp8 x4
//     dtypes, '<u2' for fp4_e2m1fn_x4) and S [K/32, N] '|u1' E8M0 scales. Prints one line: shapes,
//     dtype, layout, the largest |dequantized - original| and the element where it occurs.
//   nkisim pack-weights --unpack --weights P.npy --scales S.npy --out W.npy [--dtype ..] [--layout ..]
//     The inverse: the dequantized weights [K, N] as '<f4' fp32.
//
// Defaults: --dtype fp8_e4m3fn_x4, --layout MX_CONTIGUOUS. Errors (the message names the flag,
// the value and the rule): a flag of the other mode, or a missing one -> exit 2 (usage); an
// input that cannot be read or is not the array the flag needs (rank, descr, shape against the
// other input) -> Error(kBadConfig), exit 14; K not a multiple of 32, an unknown --dtype or
// --layout, an output that cannot be written -> Error(kInvalidArgument), exit 11. Nothing is
// written unless every input is good.
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim pack-weights` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddPackWeightsCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
