// Tensor-engine (PE) instructions: nc_matmul and the PE / Vector transposes.
#pragma once

#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::nisa {

enum class PerfMode { kNone, kDoubleRow };

struct MatmulOptions {
  // false: dst = product (opens an accumulation group); true: dst += product.
  bool accumulate = false;
  // kDoubleRow (fp8 only): stationary [128, 2, M] and moving [128, 2, N] present K = 256, with
  // contraction index k = r * 128 + p for free index r and partition p, at the cost of K = 128.
  PerfMode perf_mode = PerfMode::kNone;
};

// dst[M, N] (PSUM, fp32) = or += stationary[K, M]^T @ moving[K, N].
// Rules: stationary and moving in SBUF with the same K <= 128 partitions; M <= pe_cols (128);
// N <= pe_max_moving_free (512); dst in PSUM, fp32, contiguous, inside one 2 KiB bank; operands
// both fp32 or both 16/8-bit floats; double-row needs fp8 operands. Cost: MatmulNs(M, N), then the PE throttle.
void nc_matmul(const Tile& dst, const Tile& stationary, const Tile& moving,
               const MatmulOptions& options = {});

// dst[F, P] = src[P, F]^T.
// Engine::kPE: the identity-matmul transpose, src in SBUF (P, F <= 128), dst in PSUM with src's
// dtype or fp32; costs max(P, min(64, F)): a matmul with M = F, N = P, then the PE throttle.
// Engine::kVector: src in SBUF or PSUM (P, F <= 128), dst in SBUF; costs the Vector transpose
// row max(MIN_II, P).
void nc_transpose(const Tile& dst, const Tile& src, Engine engine = Engine::kPE);

}  // namespace nkisim::nisa
