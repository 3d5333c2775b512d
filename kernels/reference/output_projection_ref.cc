#include "kernels/reference/output_projection_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernels/reference/blas.h"
#include "kernels/reference/mx_ref.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace nkisim::reference {
namespace {

// The matmul input after the STATIC quantization step (identity otherwise).
double QuantizedInput(double a, const OprojRefInputs& in, double s_in, double fp8_max) {
  if (in.quant != OprojQuant::kStatic) return a;
  const double q = std::clamp(a / s_in, -fp8_max, fp8_max);
  return in.round_quantized_input ? RoundTo(in.weight.dtype(), static_cast<float>(q)) : q;
}

// The MX value format of an x4 weight dtype.
MxFormatRef X4Format(DType x4) {
  switch (x4) {
    case DType::kFp4E2M1FNx4:
      return MxFormatRef::kE2M1;
    case DType::kFp8E5M2x4:
      return MxFormatRef::kE5M2;
    case DType::kFp8E4M3FNx4:
      return MxFormatRef::kE4M3FN;
    default:
      Raise(ErrorCode::kInvalidArgument, StrCat("output projection golden: weight dtype ",
                                                DTypeName(x4), " is not an x4 container"));
  }
}

// The raw bytes of columns [h0, h1) of a rank-2 view whose last dim is contiguous, row-major.
std::vector<uint8_t> ColumnBytes(const TensorView& t, int64_t h0, int64_t h1) {
  if (t.strides()[1] != 1) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("output projection golden: ", t.name(), " ", ShapeString(t.shape()),
                 " needs a contiguous last dim"));
  }
  const size_t row_bytes = static_cast<size_t>(h1 - h0) * SizeOf(t.dtype());
  std::vector<uint8_t> bytes(static_cast<size_t>(t.dim(0)) * row_bytes);
  for (int64_t r = 0; r < t.dim(0); ++r) {
    std::memcpy(bytes.data() + r * row_bytes, t.element_ptr({r, h0}), row_bytes);
  }
  return bytes;
}

// Columns [h0, h1) of the weights as fp64 [K, h1 - h0]: the stored values, or for the MX modes
// the x4 codes dequantized by their E8M0 block scales (MX) or the neutral scale (STATIC_MX, ROW_MX).
std::vector<double> WeightColumns(const OprojRefInputs& in, int64_t h0, int64_t h1) {
  if (!IsMxQuant(in.quant)) return MatrixAsDoubles(in.weight.slice(1, h0, h1));
  const int64_t k = 4 * in.weight.dim(0), n = h1 - h0;
  const std::vector<uint8_t> data = ColumnBytes(in.weight, h0, h1);
  const std::vector<uint8_t> scales =
      in.quant == OprojQuant::kMx
          ? ColumnBytes(in.weight_scale, h0, h1)
          : std::vector<uint8_t>(static_cast<size_t>(k / 32 * n), uint8_t{127});
  return MxUnpackWeightsRef(X4Format(in.weight.dtype()), /*interleaved=*/false, data.data(),
                            scales.data(), k, n);
}

// The activation rows a [rows, K] after the MX modes' quantization: the MX fp8_e4m3fn round trip
// of every 32 consecutive values (MX, ROW_MX), or fp8_e4m3fn(clip(a / s_in, +-448)) (STATIC_MX).
void QuantizeMxRows(int64_t rows, int64_t k, const OprojRefInputs& in, double s_in, double* a) {
  std::vector<double> x(static_cast<size_t>(k));
  const double fp8_max = MxFormatMaxRef(MxFormatRef::kE4M3FN);
  for (int64_t r = 0; r < rows; ++r) {
    double* row = a + r * k;
    if (in.quant == OprojQuant::kStaticMx) {
      for (int64_t c = 0; c < k; ++c) {
        const double q = std::clamp(row[c] / s_in, -fp8_max, fp8_max);
        row[c] = MxDecodeRef(MxFormatRef::kE4M3FN, MxEncodeRef(MxFormatRef::kE4M3FN, q));
      }
      continue;
    }
    x.assign(row, row + k);
    const std::vector<double> q = MxQuantizeDequantizeRef(MxFormatRef::kE4M3FN, false, x);
    std::copy(q.begin(), q.end(), row);
  }
}

// Fills rows [r0, r1) of A (row r = b*S + s, column c = n*D + k) into a [r1 - r0, N*D].
using FillRows = std::function<void(int64_t r0, int64_t r1, double* a)>;

// y [rows, H] = A @ W, scaled and biased: kRowBlock rows of A at a time, one dgemm per block with
// the fp64 weights: converted once per call when they fit one chunk, else a chunk of H columns
// at a time (a large weight never sits in memory whole in fp64, 8x its bf16 size).
std::vector<float> Project(int64_t rows, const FillRows& fill, const OprojRefInputs& in) {
  const bool mx = IsMxQuant(in.quant);
  const int64_t k_total = mx ? 4 * in.weight.dim(0) : in.weight.dim(0), h = in.weight.dim(1);
  const int64_t w_chunk =
      std::max<int64_t>(1, WeightChunkElements(rows) / std::max<int64_t>(1, k_total));
  const bool one_chunk = w_chunk >= h;
  const std::vector<double> w_whole = one_chunk ? WeightColumns(in, 0, h) : std::vector<double>();
  const bool quant = in.quant != OprojQuant::kNone && in.quant != OprojQuant::kMx;
  const bool per_tensor = in.quant == OprojQuant::kStatic || in.quant == OprojQuant::kStaticMx;
  const double s_in = per_tensor ? in.input_scale.get({0, 0}) : 1.0;
  const double fp8_max = IsFp8(in.weight.dtype()) ? MaxValue(in.weight.dtype()) : 0.0;
  std::vector<double> scale(static_cast<size_t>(h), 1.0);
  if (per_tensor) {
    std::fill(scale.begin(), scale.end(), in.weight_scale.get({0, 0}) * s_in);
  } else if (in.quant == OprojQuant::kRow || in.quant == OprojQuant::kRowMx) {
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
    if (mx) {
      QuantizeMxRows(nr, k_total, in, s_in, a_block.data());
    } else {
      for (int64_t e = 0; e < nr * k_total; ++e) {
        a_block[e] = QuantizedInput(a_block[e], in, s_in, fp8_max);
      }
    }
    if (one_chunk) {
      Dgemm(nr, h, k_total, 1.0, a_block.data(), k_total, w_whole.data(), h, false, 0.0, acc.data(), h);
    } else {
      for (int64_t h0 = 0; h0 < h; h0 += w_chunk) {
        const int64_t h1 = std::min(h, h0 + w_chunk);
        const std::vector<double> w = WeightColumns(in, h0, h1);  // [K, h1 - h0]
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

bool IsMxQuant(OprojQuant quant) {
  return quant == OprojQuant::kMx || quant == OprojQuant::kStaticMx || quant == OprojQuant::kRowMx;
}

Tolerance OprojTolerance(OprojKernel kernel, OprojQuant quant) {
  if (quant == OprojQuant::kStaticMx) return kOprojCteStaticMxTolerance;
  if (IsMxQuant(quant)) return kOprojCteMxTolerance;
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
