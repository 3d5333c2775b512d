#include "runtime/rng.h"

#include <cmath>
#include <numbers>

#include "runtime/error.h"

namespace nkisim {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // splitmix64's increment, 2^64 / phi

// splitmix64's output function (Stafford's Mix13): a bijection with full avalanche.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void CheckRange(const char* what, float lo, float hi) {
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi)) {
    Raise(ErrorCode::kInvalidArgument, StrCat(what, ": range [", lo, ", ", hi,
                                              ") must have finite bounds with lo <= hi"));
  }
}

template <typename ValueAt>
void Fill(const char* what, const TensorView& view, int64_t first_index, ValueAt value_at) {
  if (!view.valid()) Raise(ErrorCode::kInvalidArgument, StrCat(what, ": the tensor view is null"));
  if (first_index < 0) {
    Raise(ErrorCode::kInvalidArgument, StrCat(what, " into tensor '", view.name(),
                                              "': first_index ", first_index, " must be >= 0"));
  }
  const DType dtype = view.dtype();
  const int64_t width = static_cast<int64_t>(SizeOf(dtype));
  std::byte* base = view.buffer().data();
  uint64_t index = static_cast<uint64_t>(first_index);
  view.ForEachOffset(
      [&](int64_t offset) { FromFloat(dtype, value_at(index++), base + offset * width); });
}

}  // namespace

CounterRng::CounterRng(uint64_t seed, uint64_t tensor_id)
    : seed_(seed), tensor_id_(tensor_id), key_(Mix64(Mix64(seed) ^ tensor_id)) {}

uint64_t CounterRng::Bits(uint64_t index) const { return Mix64(key_ + (index + 1) * kGamma); }

float CounterRng::Uniform(uint64_t index, float lo, float hi) const {
  CheckRange("CounterRng::Uniform", lo, hi);
  constexpr double kTwoToMinus24 = 1.0 / (1 << 24);  // exact; a multiply, not ldexp (hot path)
  const double u = static_cast<double>(Bits(index) >> 40) * kTwoToMinus24;  // [0, 1 - 2^-24]
  const double lo_d = lo;
  const float value = static_cast<float>(lo_d + (static_cast<double>(hi) - lo_d) * u);
  // Rounding to fp32 can land on hi itself; the largest float below hi keeps the range half-open.
  return value < hi ? value : std::nextafter(hi, lo);
}

// One body, compiled for AVX-512 (F + DQ: 64-bit multiplies and conversions in vectors) and for
// the baseline, picked by the CPU. Integer ops and exactly rounded double ops only (no
// contraction: -std=c++20), so both give the values Uniform gives.
template <typename = void>
inline void UniformManyBody(uint64_t key, const uint64_t* indices, int64_t n, double lo,
                            double span, float hi, float* out) {
  constexpr double kTwoToMinus24 = 1.0 / (1 << 24);
  for (int64_t j = 0; j < n; ++j) {
    uint64_t z = key + (indices[j] + 1) * kGamma;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(static_cast<int32_t>(z >> 40)) * kTwoToMinus24;
    out[j] = static_cast<float>(lo + span * u);
  }
  for (int64_t j = 0; j < n; ++j) {
    if (!(out[j] < hi)) out[j] = std::nextafter(hi, static_cast<float>(lo));
  }
}

__attribute__((target("avx512f,avx512dq"))) void UniformManyAvx512(
    uint64_t key, const uint64_t* indices, int64_t n, double lo, double span, float hi,
    float* out) {
  UniformManyBody(key, indices, n, lo, span, hi, out);
}

void UniformManyBaseline(uint64_t key, const uint64_t* indices, int64_t n, double lo, double span,
                         float hi, float* out) {
  UniformManyBody(key, indices, n, lo, span, hi, out);
}

void CounterRng::UniformMany(const uint64_t* indices, int64_t n, float lo, float hi,
                             float* out) const {
  CheckRange("CounterRng::UniformMany", lo, hi);
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  const double span = static_cast<double>(hi) - static_cast<double>(lo);
  (avx512 ? UniformManyAvx512 : UniformManyBaseline)(key_, indices, n, lo, span, hi, out);
}

float CounterRng::Normal(uint64_t index, float mean, float stddev) const {
  const uint64_t bits = Bits(index);
  const double u1 = std::ldexp(static_cast<double>(bits >> 32) + 0.5, -32);  // (0, 1): log finite
  const double u2 = std::ldexp(static_cast<double>(bits & 0xFFFFFFFFu), -32);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return static_cast<float>(mean + stddev * z);
}

void FillUniform(const TensorView& view, const CounterRng& rng, float lo, float hi,
                 int64_t first_index) {
  CheckRange("FillUniform", lo, hi);
  Fill("FillUniform", view, first_index, [&](uint64_t i) { return rng.Uniform(i, lo, hi); });
}

void FillNormal(const TensorView& view, const CounterRng& rng, float mean, float stddev,
                int64_t first_index) {
  Fill("FillNormal", view, first_index, [&](uint64_t i) { return rng.Normal(i, mean, stddev); });
}

uint64_t TensorIdFromName(std::string_view name) {
  uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a 64-bit offset basis and prime
  for (char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ull;
  }
  return hash;
}

}  // namespace nkisim
