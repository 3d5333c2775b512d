// Seeded inputs of an MoE case, shared by `nkisim kernel moe` and the kernel tests: a bf16 HBM
// tensor of N(0, scale^2) values and the floats it holds after rounding (what the golden reads).
// Same (shape, scale, seed) -> same values. The view owns its buffer; `values` is a copy.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::kernels::moe {

struct Operand {
  TensorView view;
  std::vector<float> values;
};

inline Operand Random(const Shape& shape, float scale, uint32_t seed, const char* name) {
  Operand o{TensorView::Create(shape, DType::kBFloat16, name), {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(static_cast<size_t>(o.view.numel()));
  for (float& x : v) x = d(rng);
  o.view.FromFloats(v);
  o.values = o.view.ToFloats();
  return o;
}

}  // namespace nkisim::kernels::moe
