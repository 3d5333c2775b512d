#include "kernels/reference/output_projection_ref.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "runtime/dtype.h"

namespace nkisim::reference {
namespace {

// Rows of y computed together, so each weight row is reused from cache across them.
constexpr int64_t kRowBlock = 32;

std::vector<double> AsDoubles(const TensorView& t) {
  const std::vector<float> f = t.ToFloats();
  return std::vector<double>(f.begin(), f.end());
}

// The matmul input after the STATIC quantization step (identity otherwise).
double QuantizedInput(double a, const OprojRefInputs& in, double s_in, double fp8_max) {
  if (in.quant != OprojQuant::kStatic) return a;
  const double q = std::clamp(a / s_in, -fp8_max, fp8_max);
  return in.round_quantized_input ? RoundTo(in.weight.dtype(), static_cast<float>(q)) : q;
}

// y[r, h] for rows r of A given by a(r, c) (c = n*D + k): blocks of rows times every weight row.
std::vector<float> Project(int64_t rows, const std::function<double(int64_t, int64_t)>& a,
                           const OprojRefInputs& in) {
  const int64_t k_total = in.weight.dim(0), h = in.weight.dim(1);
  const std::vector<double> w = AsDoubles(in.weight);
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
  if (in.bias.valid()) bias = AsDoubles(in.bias);

  std::vector<float> y(static_cast<size_t>(rows * h));
  std::vector<double> acc(static_cast<size_t>(kRowBlock * h));
  std::vector<double> a_block(static_cast<size_t>(kRowBlock * k_total));
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t nr = std::min(kRowBlock, rows - r0);
    for (int64_t i = 0; i < nr; ++i) {
      for (int64_t c = 0; c < k_total; ++c) {
        a_block[i * k_total + c] = QuantizedInput(a(r0 + i, c), in, s_in, fp8_max);
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t c = 0; c < k_total; ++c) {
      const double* w_row = &w[c * h];
      for (int64_t i = 0; i < nr; ++i) {
        const double x = a_block[i * k_total + c];
        double* out = &acc[i * h];
        for (int64_t j = 0; j < h; ++j) out[j] += x * w_row[j];
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
  const std::vector<float> att = attention.ToFloats();  // [B, N, D, S]
  // Row r = b*S + sq, column c = n*D + k  <-  attention[b, n, k, sq].
  return Project(
      attention.dim(0) * s,
      [&](int64_t r, int64_t c) {
        const int64_t b = r / s, sq = r % s;
        return static_cast<double>(att[((b * n) * d + c) * s + sq]);
      },
      in);
}

std::vector<float> OutputProjectionTkgRef(const TensorView& attention, const OprojRefInputs& in) {
  const int64_t d = attention.dim(0), batches = attention.dim(1), n = attention.dim(2);
  const int64_t s = attention.dim(3);
  const std::vector<float> att = attention.ToFloats();  // [D, B, N, S]
  // Row r = b*S + sq, column c = hd*D + k  <-  attention[k, b, hd, sq].
  return Project(
      batches * s,
      [&](int64_t r, int64_t c) {
        const int64_t b = r / s, sq = r % s, hd = c / d, k = c % d;
        return static_cast<double>(att[((k * batches + b) * n + hd) * s + sq]);
      },
      in);
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
