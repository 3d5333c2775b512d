// Deterministic, counter-based random numbers for tensor initialisation.
//
// The value at (seed, tensor_id, flat_index) is a pure function of the three: nothing advances,
// so any rank or thread can generate any slice of a global tensor -- its own shard, one row --
// and get exactly the values the whole tensor holds there, whatever the order of the calls.
//
// Bits(i) is the i-th output of splitmix64 started from a key mixed out of (seed, tensor_id),
// a generator that passes BigCrush. Its output mixer is a bijection, so within one tensor
// distinct indices always give distinct 64-bit values. Bits and Uniform are bit-exact on every
// platform; Normal goes through the C library's log and cos, so it may differ in the last float
// bit between libraries. The mixing is part of the contract: changing it changes every tensor a
// seed makes.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/tensor_view.h"

namespace nkisim {

class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t tensor_id);

  uint64_t seed() const { return seed_; }
  uint64_t tensor_id() const { return tensor_id_; }

  uint64_t Bits(uint64_t index) const;
  // lo + (hi - lo) * k / 2^24 for the top 24 bits k of Bits(index), rounded to fp32 but kept
  // below hi, so in [lo, hi); lo == hi gives lo.
  // REQUIRES: lo and hi finite, lo <= hi (else Error kInvalidArgument).
  float Uniform(uint64_t index, float lo = 0.0f, float hi = 1.0f) const;
  // out[j] = Uniform(indices[j], lo, hi) for j in [0, n): the same values, the range checked once
  // and the loop vectorised where the CPU allows (bulk tensor initialisation).
  void UniformMany(const uint64_t* indices, int64_t n, float lo, float hi, float* out) const;
  // Normal(mean, stddev) by Box-Muller on two uniforms cut from Bits(index); |z| < 6.8.
  float Normal(uint64_t index, float mean = 0.0f, float stddev = 1.0f) const;

 private:
  uint64_t seed_;
  uint64_t tensor_id_;
  uint64_t key_;
};

// Fill the view in its row-major order with Uniform(first_index), Uniform(first_index + 1), ...
// rounded into the view's dtype by FromFloat (so a narrow dtype may hold hi itself, and integer
// dtypes get the nearest integers). Filling element [r, c] of an [R, C] tensor and filling
// row r alone with first_index r * C give the same values.
// REQUIRES: a valid view, first_index >= 0, the range rule of Uniform.
void FillUniform(const TensorView& view, const CounterRng& rng, float lo, float hi,
                 int64_t first_index = 0);
// As FillUniform, with Normal(index, mean, stddev).
void FillNormal(const TensorView& view, const CounterRng& rng, float mean, float stddev,
                int64_t first_index = 0);

// A stable 64-bit FNV-1a hash of a name, so tensors can be identified by name.
uint64_t TensorIdFromName(std::string_view name);

}  // namespace nkisim
