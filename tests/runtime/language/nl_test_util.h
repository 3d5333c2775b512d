// Shared fixture and helpers of the nl language tests: a trn2 core made current, tiles filled
// from host values (no instruction), seeded inputs, the instructions an op left on the timeline,
// and the golden comparison that prints the worst per-element error of every numeric check.
// Goldens are the tests' own plain fp64 code, never the code under test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/compare.h"
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/rng.h"
#include "runtime/tile.h"

namespace nkisim::nl::testing {

// Tolerances of the language tests (|actual - golden| <= atol + rtol * max|golden|): an fp32
// result is the fp64 value rounded once (half an ulp, 6e-8 relative); a bf16 result carries half
// a bf16 ulp, at most 2^-8 = 3.9e-3 relative, so 8e-3 leaves room for a bf16 intermediate.
inline constexpr reference::Tolerance kFp32Tolerance{1e-6, 1e-6};
inline constexpr reference::Tolerance kBf16Tolerance{1e-6, 8e-3};
inline reference::Tolerance ToleranceFor(DType dtype) {
  return dtype == DType::kFloat32 ? kFp32Tolerance : kBf16Tolerance;
}

// Checks actual against golden, prints "<what>: <comparison>" (worst element and its error) and
// records it as a test property.
inline void ExpectClose(const std::string& what, const std::vector<float>& actual,
                        const std::vector<double>& golden, const reference::Tolerance& tol) {
  const reference::Comparison c =
      reference::Compare(actual, std::vector<float>(golden.begin(), golden.end()), tol);
  std::cout << "  " << what << ": " << c.ToString() << "\n";
  ::testing::Test::RecordProperty(what, c.ToString());
  EXPECT_TRUE(c.pass()) << what << ": " << c.ToString();
}

// One timeline record reduced to what the routing table speaks of.
struct Emitted {
  std::string instruction;
  Engine engine;
  bool operator==(const Emitted& o) const {
    return instruction == o.instruction &&
           (engine == o.engine || ((IsDma(engine) || IsDmaQueue(engine)) && (IsDma(o.engine) || IsDmaQueue(o.engine))));
  }
};
inline std::ostream& operator<<(std::ostream& out, const Emitted& e) {
  return out << e.instruction << "@"
             << (IsDma(e.engine) || IsDmaQueue(e.engine) ? std::string("DMA") : EngineName(e.engine));
}

inline std::vector<Emitted> RecordsSince(const NeuronCore& core, size_t mark) {
  std::vector<Emitted> out;
  const auto& records = core.timeline().records();
  for (size_t i = mark; i < records.size(); ++i)
    out.push_back({records[i].name, records[i].engine});
  return out;
}

class NlTest : public ::testing::Test {
 protected:
  NlTest() : core_(0, Trn2Profile()), scope_(core_) {}

  // A tile holding `values` rounded into dtype (host set-up: no instruction).
  Tile FromValues(const Shape& shape, DType dtype, const std::vector<float>& values) {
    Tile t = core_.AllocateSbuf("input", shape, dtype);
    t.FromFloats(values);
    return t;
  }
  // A tile of Uniform[lo, hi) values keyed by seed, rounded into dtype.
  Tile Input(const Shape& shape, DType dtype, float lo, float hi, uint64_t seed = 1) {
    const CounterRng rng(seed, 7);
    std::vector<float> values(static_cast<size_t>(NumElements(shape)));
    for (size_t i = 0; i < values.size(); ++i) values[i] = rng.Uniform(i, lo, hi);
    return FromValues(shape, dtype, values);
  }
  // The values a tile holds, as fp64 (the goldens' inputs: what the op really read).
  static std::vector<double> Values(const Tile& t) {
    const std::vector<float> v = t.ToFloats();
    return std::vector<double>(v.begin(), v.end());
  }
  size_t Mark() const { return core_.timeline().records().size(); }
  std::vector<Emitted> Since(size_t mark) const { return RecordsSince(core_, mark); }

  NeuronCore core_;
  ScopedCurrentCore scope_;
};

}  // namespace nkisim::nl::testing
