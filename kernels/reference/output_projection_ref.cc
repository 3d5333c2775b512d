#include "kernels/reference/output_projection_ref.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/reference/blas.h"
#include "runtime/dtype.h"

namespace nkisim::reference {
namespace {

// The matmul input after the STATIC quantization step (identity otherwise).
double QuantizedInput(double a, const OprojRefInputs& in, double s_in, double fp8_max) {
  if (in.quant != OprojQuant::kStatic) return a;
  const double q = std::clamp(a / s_in, -fp8_max, fp8_max);
  return in.round_quantized_input ? RoundTo(in.weight.dtype(), static_cast<float>(q)) : q;
}

// Fills rows [r0, r1) of A (row r = b*S + s, column c = n*D + k) into a [r1 - r0, N*D].
using FillRows = std::function<void(int64_t r0, int64_t r1, double* a)>;

// Largest chunk of the weight converted to fp64 at once (elements; 1 Mi = 8 MiB).
constexpr int64_t kMaxWeightChunkElements = int64_t{1} << 20;

// y [rows, H] = A @ W, scaled and biased: kRowBlock rows of A at a time, one dgemm per block with
// the fp64 weights: converted once per call when they fit one chunk, else a chunk of H columns
// at a time (a large weight never sits in memory whole in fp64, 8x its bf16 size).
std::vector<float> Project(int64_t rows, const FillRows& fill, const OprojRefInputs& in) {
  const int64_t k_total = in.weight.dim(0), h = in.weight.dim(1);
  const int64_t w_chunk = std::max<int64_t>(1, kMaxWeightChunkElements / std::max<int64_t>(1, k_total));
  const bool one_chunk = w_chunk >= h;
  const std::vector<double> w_whole = one_chunk ? MatrixAsDoubles(in.weight) : std::vector<double>();
  const bool quant = in.quant != OprojQuant::kNone;
  const double s_in = in.quant == OprojQuant::kStatic ? in.input_scale.get({0, 0}) : 1.0;
  const double fp8_max = IsFp8(in.weight.dtype()) ? MaxValue(in.weight.dtype()) : 0.0;
  std::vector<double> scale(static_cast<size_t>(h), 1.0);
  if (in.quant == OprojQuant::kStatic) {
    std::fill(scale.begin(), scale.end(), in.weight_scale.get({0, 0}) * s_in);
  } else if (in.quant == OprojQuant::kRow) {
    for (int64_t j = 0; j < h; ++j) scale[j] = in.weight_scale.get({0, j});
  }
  std::vector<double> bias(static_cast<size_t>(h), 0.0);
  if (in.bias.valid()) {
    const std::vector<float> bv = in.bias.ToFloats();
    bias.assign(bv.begin(), bv.end());
  }

  std::vector<float> y(static_cast<size_t>(rows * h));
  const int64_t block = std::min(kRowBlock, rows);
  std::vector<double> acc(static_cast<size_t>(block * h));
  std::vector<double> a_block(static_cast<size_t>(block * k_total));
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    fill(r0, r0 + nr, a_block.data());
    for (int64_t e = 0; e < nr * k_total; ++e) {
      a_block[e] = QuantizedInput(a_block[e], in, s_in, fp8_max);
    }
    if (one_chunk) {
      Dgemm(nr, h, k_total, 1.0, a_block.data(), k_total, w_whole.data(), h, false, 0.0, acc.data(), h);
    } else {
      for (int64_t h0 = 0; h0 < h; h0 += w_chunk) {
        const int64_t h1 = std::min(h, h0 + w_chunk);
        const std::vector<double> w = MatrixAsDoubles(in.weight.slice(1, h0, h1));  // [K, h1 - h0]
        Dgemm(nr, h1 - h0, k_total, 1.0, a_block.data(), k_total, w.data(), h1 - h0, false, 0.0,
              acc.data() + h0, h);
      }
    }
    for (int64_t i = 0; i < nr; ++i) {
      for (int64_t j = 0; j < h; ++j) {
        const double v = acc[i * h + j];
        y[(r0 + i) * h + j] = static_cast<float>((quant ? v * scale[j] : v) + bias[j]);
      }
    }
  }
  return y;
}

}  // namespace

std::vector<float> OutputProjectionCteRef(const TensorView& attention, const OprojRefInputs& in) {
  const int64_t n = attention.dim(1), d = attention.dim(2), s = attention.dim(3);
  // Row r = b*S + sq, column c = n*D + k  <-  attention[b, n, k, sq] ([B, N, D, S]).
  const FillRows fill = [&](int64_t r0, int64_t r1, double* a) {
    ForEachBatchPiece(r0, r1, s, [&](int64_t b, int64_t s0, int64_t s1, int64_t offset) {
      const int64_t len = s1 - s0;
      const std::vector<float> part = attention.select(0, b).slice(2, s0, s1).ToFloats();
      for (int64_t c = 0; c < n * d; ++c) {  // part [N, D, len]
        for (int64_t i = 0; i < len; ++i) a[(offset + i) * n * d + c] = part[c * len + i];
      }
    });
  };
  return Project(attention.dim(0) * s, fill, in);
}

std::vector<float> OutputProjectionTkgRef(const TensorView& attention, const OprojRefInputs& in) {
  const int64_t d = attention.dim(0), n = attention.dim(2), s = attention.dim(3);
  // Row r = b*S + sq, column c = hd*D + k  <-  attention[k, b, hd, sq] ([D, B, N, S]).
  const FillRows fill = [&](int64_t r0, int64_t r1, double* a) {
    ForEachBatchPiece(r0, r1, s, [&](int64_t b, int64_t s0, int64_t s1, int64_t offset) {
      const int64_t len = s1 - s0;
      const std::vector<float> part = attention.select(1, b).slice(2, s0, s1).ToFloats();
      for (int64_t k = 0; k < d; ++k) {  // part [D, N, len]
        for (int64_t hd = 0; hd < n; ++hd) {
          for (int64_t i = 0; i < len; ++i) {
            a[(offset + i) * n * d + hd * d + k] = part[(k * n + hd) * len + i];
          }
        }
      }
    });
  };
  return Project(attention.dim(1) * s, fill, in);
}

std::vector<float> OutputProjectionRef(OprojKernel kernel, const TensorView& attention,
                                       const OprojRefInputs& in) {
  return kernel == OprojKernel::kCte ? OutputProjectionCteRef(attention, in)
                                     : OutputProjectionTkgRef(attention, in);
}

Tolerance OprojTolerance(OprojKernel kernel, OprojQuant quant) {
  const bool quantized = quant != OprojQuant::kNone;
  if (kernel == OprojKernel::kCte) return quantized ? kOprojCteStaticTolerance : kOprojCteTolerance;
  return quantized ? kOprojTkgQuantTolerance : kOprojTkgTolerance;
}

int64_t TransposedOutIndex(int64_t r, int64_t col, int64_t rows, int64_t h, int lnc,
                           int64_t partitions) {
  const int64_t shard = h / lnc, h2 = shard / partitions;
  const int64_t core = col / shard, h1 = col % shard / h2, j = col % shard % h2;
  return ((h1 * lnc + core) * h2 + j) * rows + r;
}

std::vector<float> TransposedOutLayout(const std::vector<float>& y, int64_t rows, int64_t h,
                                       int lnc, int64_t partitions) {
  std::vector<float> out(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < h; ++col) {
      out[TransposedOutIndex(r, col, rows, h, lnc, partitions)] = y[r * h + col];
    }
  }
  return out;
}

}  // namespace nkisim::reference
