// Plain reference for the MX numerics (mx_ref.h). Deliberately shares nothing with the simulator's
// runtime/dtype.cc and runtime/mx.cc: each format's values are enumerated from its bit layout,
// encoding is a search for the nearest enumerated value, and the interleaved row order is the
// numpy reshape/transpose spelled out as index arithmetic.
#include "kernels/reference/mx_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace nkisim::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The bit layout of one format, from the OCP MX v1.0 / OCP 8-bit float specs.
struct Layout {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_specials;  // the all-ones exponent is inf (mantissa 0) / NaN (e5m2)
  bool fn_nan;         // only the all-ones magnitude is NaN (e4m3fn)
};

Layout LayoutOf(MxFormatRef format) {
  switch (format) {
    case MxFormatRef::kE4M3FN: return {4, 3, 7, false, true};
    case MxFormatRef::kE5M2: return {5, 2, 15, true, false};
    case MxFormatRef::kE2M1: return {2, 1, 1, false, false};
  }
  throw std::invalid_argument("mx_ref: unknown format");
}

int TotalBits(const Layout& l) { return 1 + l.exponent_bits + l.mantissa_bits; }

// The value of one magnitude code (sign bit clear).
double MagnitudeValue(const Layout& l, unsigned magnitude) {
  const unsigned exp_field = magnitude >> l.mantissa_bits;
  const unsigned mantissa = magnitude & ((1u << l.mantissa_bits) - 1);
  const unsigned top = (1u << l.exponent_bits) - 1;
  const unsigned all_ones = (1u << (l.exponent_bits + l.mantissa_bits)) - 1;
  if (l.ieee_specials && exp_field == top) return mantissa == 0 ? kInf : kNaN;
  if (l.fn_nan && magnitude == all_ones) return kNaN;
  const double fraction = static_cast<double>(mantissa) / static_cast<double>(1u << l.mantissa_bits);
  if (exp_field == 0) return fraction * std::pow(2.0, 1 - l.bias);  // subnormal
  return (1.0 + fraction) * std::pow(2.0, static_cast<int>(exp_field) - l.bias);
}

std::vector<double> BuildTable(MxFormatRef format) {
  const Layout l = LayoutOf(format);
  const unsigned codes = 1u << TotalBits(l);
  const unsigned sign_bit = codes / 2;
  std::vector<double> table(codes);
  for (unsigned c = 0; c < codes; ++c) {
    const double m = MagnitudeValue(l, c & (sign_bit - 1));
    table[c] = (c & sign_bit) ? -m : m;
  }
  return table;
}

// Finite magnitudes of the format by magnitude code, 0 .. last finite (they increase with the
// code in every format here, which the lookup below relies on and checks once).
struct Magnitudes {
  std::vector<double> values;
  uint8_t nan_code;  // the format's canonical NaN, all-ones magnitude (0 for fp4, which has none)
};

Magnitudes BuildMagnitudes(MxFormatRef format) {
  const std::vector<double>& table = MxFormatValuesRef(format);
  const unsigned half = static_cast<unsigned>(table.size() / 2);
  Magnitudes m;
  m.nan_code = 0;
  for (unsigned c = 0; c < half; ++c) {
    if (std::isnan(table[c])) {
      m.nan_code = static_cast<uint8_t>(c);  // the last: the all-ones magnitude S.1111.111
      continue;
    }
    if (std::isinf(table[c])) continue;
    if (!m.values.empty() && !(table[c] > m.values.back())) {
      throw std::logic_error("mx_ref: magnitudes do not increase with the code");
    }
    if (c != m.values.size()) throw std::logic_error("mx_ref: finite codes are not a prefix");
    m.values.push_back(table[c]);
  }
  return m;
}

const Magnitudes& MagnitudesOf(MxFormatRef format) {
  static const Magnitudes e4m3fn = BuildMagnitudes(MxFormatRef::kE4M3FN);
  static const Magnitudes e5m2 = BuildMagnitudes(MxFormatRef::kE5M2);
  static const Magnitudes e2m1 = BuildMagnitudes(MxFormatRef::kE2M1);
  switch (format) {
    case MxFormatRef::kE4M3FN: return e4m3fn;
    case MxFormatRef::kE5M2: return e5m2;
    default: return e2m1;
  }
}

// Flat index of numpy's arange(k).reshape(2, k/4, 2).transpose(1, 0, 2).flatten() at position i:
// unravel i over the transposed shape (k/4, 2, 2), permute back to the source axes (2, k/4, 2) and
// ravel with the source's row-major strides.
int64_t InterleavedIndex(int64_t k, int64_t i) {
  const int64_t source_shape[3] = {2, k / 4, 2};
  const int axes[3] = {1, 0, 2};  // transposed axis t is source axis axes[t]
  int64_t transposed_shape[3];
  for (int t = 0; t < 3; ++t) transposed_shape[t] = source_shape[axes[t]];
  int64_t transposed_index[3];
  int64_t rest = i;
  for (int t = 2; t >= 0; --t) {
    transposed_index[t] = rest % transposed_shape[t];
    rest /= transposed_shape[t];
  }
  int64_t source_index[3];
  for (int t = 0; t < 3; ++t) source_index[axes[t]] = transposed_index[t];
  int64_t flat = 0;
  for (int s = 0; s < 3; ++s) flat = flat * source_shape[s] + source_index[s];
  return flat;  // arange: the element at that position is its own flat index
}

void RequireK(int64_t k, const char* what) {
  if (k <= 0 || k % 32 != 0) {
    throw std::invalid_argument(std::string("mx_ref: ") + what + ": k = " + std::to_string(k) +
                                " must be a positive multiple of 32");
  }
}

}  // namespace

double MxFormatMaxRef(MxFormatRef format) {
  double best = 0;
  for (double v : MxFormatValuesRef(format)) {
    if (std::isfinite(v)) best = std::max(best, v);
  }
  return best;
}

const std::vector<double>& MxFormatValuesRef(MxFormatRef format) {
  static const std::vector<double> e4m3fn = BuildTable(MxFormatRef::kE4M3FN);
  static const std::vector<double> e5m2 = BuildTable(MxFormatRef::kE5M2);
  static const std::vector<double> e2m1 = BuildTable(MxFormatRef::kE2M1);
  switch (format) {
    case MxFormatRef::kE4M3FN: return e4m3fn;
    case MxFormatRef::kE5M2: return e5m2;
    default: return e2m1;
  }
}

uint8_t MxEncodeRef(MxFormatRef format, double v) {
  const Magnitudes& m = MagnitudesOf(format);
  if (std::isnan(v)) return m.nan_code;
  const unsigned sign_bit = static_cast<unsigned>(MxFormatValuesRef(format).size() / 2);
  const unsigned sign = std::signbit(v) ? sign_bit : 0u;
  const double a = std::fabs(v);
  // The nearest finite magnitude; beyond the largest (infinity too) that is the largest.
  const auto above = std::lower_bound(m.values.begin(), m.values.end(), a);
  unsigned code;
  if (above == m.values.end()) {
    code = static_cast<unsigned>(m.values.size() - 1);
  } else if (above == m.values.begin()) {
    code = 0;
  } else {
    const unsigned hi = static_cast<unsigned>(above - m.values.begin());
    const unsigned lo = hi - 1;
    const double d_lo = a - m.values[lo], d_hi = m.values[hi] - a;
    if (d_lo < d_hi) {
      code = lo;
    } else if (d_hi < d_lo) {
      code = hi;
    } else {
      code = (lo % 2 == 0) ? lo : hi;  // a tie: the even code
    }
  }
  return static_cast<uint8_t>(sign | code);
}

double MxDecodeRef(MxFormatRef format, uint8_t code) {
  const std::vector<double>& table = MxFormatValuesRef(format);
  return table[code % table.size()];
}

double E8M0Ref(uint8_t scale) {
  if (scale == 255) return kNaN;
  return std::ldexp(1.0, static_cast<int>(scale) - 127);
}

uint8_t MxBlockScaleRef(MxFormatRef format, const double* values, int n) {
  double amax = 0;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return 255;
    amax = std::max(amax, std::fabs(values[i]));
  }
  if (amax == 0) return 0;
  const int emax = std::ilogb(MxFormatMaxRef(format));  // floor(log2 max finite)
  const int e = std::ilogb(amax);                        // floor(log2 amax)
  return static_cast<uint8_t>(std::clamp(e - emax + 1 + 127, 0, 254));
}

uint8_t MxQuantizeBlockRef(MxFormatRef format, const double* values, int n, uint8_t* codes) {
  const uint8_t scale = MxBlockScaleRef(format, values, n);
  for (int i = 0; i < n; ++i) {
    codes[i] = scale == 255 ? MxEncodeRef(format, kNaN)
                            : MxEncodeRef(format, values[i] / E8M0Ref(scale));
  }
  return scale;
}

int64_t MxPackedSourceRowRef(bool interleaved, int64_t k, int64_t packed_row, int j) {
  if (!interleaved) return 4 * packed_row + j;
  return InterleavedIndex(k, 4 * packed_row + j);
}

std::vector<double> MxQuantizeDequantizeRef(MxFormatRef format, bool interleaved,
                                            const std::vector<double>& x) {
  const int64_t k = static_cast<int64_t>(x.size());
  RequireK(k, "MxQuantizeDequantizeRef");
  std::vector<double> out(x.size(), kNaN);
  for (int64_t g = 0; g < k / 32; ++g) {
    int64_t rows[32];
    double block[32];
    for (int r = 0; r < 8; ++r) {
      for (int j = 0; j < 4; ++j) {
        rows[4 * r + j] = MxPackedSourceRowRef(interleaved, k, 8 * g + r, j);
        block[4 * r + j] = x[rows[4 * r + j]];
      }
    }
    uint8_t codes[32];
    const uint8_t scale = MxQuantizeBlockRef(format, block, 32, codes);
    for (int i = 0; i < 32; ++i) out[rows[i]] = MxDecodeRef(format, codes[i]) * E8M0Ref(scale);
  }
  return out;
}

std::vector<double> MxUnpackWeightsRef(MxFormatRef format, bool interleaved, const uint8_t* data,
                                       const uint8_t* scales, int64_t k, int64_t n) {
  RequireK(k, "MxUnpackWeightsRef");
  const bool fp4 = format == MxFormatRef::kE2M1;
  const int64_t element_bytes = fp4 ? 2 : 4;
  std::vector<double> out(static_cast<size_t>(k * n), kNaN);
  for (int64_t r = 0; r < k / 4; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const uint8_t* e = data + (r * n + c) * element_bytes;
      const double factor = E8M0Ref(scales[(r / 8) * n + c]);
      for (int j = 0; j < 4; ++j) {
        // fp8: byte j; fp4: nibble j of the little-endian 16-bit word (low nibble first).
        const uint8_t code = fp4 ? static_cast<uint8_t>((e[j / 2] >> (4 * (j % 2))) & 0xF) : e[j];
        out[MxPackedSourceRowRef(interleaved, k, r, j) * n + c] = MxDecodeRef(format, code) * factor;
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
