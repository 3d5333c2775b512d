// The requests a serving simulation runs (docs/serving.md): read from a trace file or made by a
// seeded generator. Reproducible: the same spec and seed give the same requests on any host.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nkisim::serving {

struct Request {
  int64_t id = 0;
  double arrival_ms = 0;  // closed loop (concurrency N): set by the simulator when a user sends it
  int input_tokens = 0;
  int output_tokens = 0;
  int64_t prefix_id = -1;  // requests with the same id share their first prefix_tokens tokens
  int prefix_tokens = 0;
};

// A length distribution: fixed, normal (mean, std; rounded, clamped to [1, max]), uniform
// integers in [lo, hi], or a histogram (value, weight) pairs.
struct LengthDist {
  enum class Kind { kFixed, kNormal, kUniform, kHistogram };
  Kind kind = Kind::kFixed;
  double mean = 0, std = 0;
  int lo = 0, hi = 0;
  std::vector<std::pair<int, double>> histogram;
};

// "fixed:1500", "normal:1500,300", "uniform:1000,2000", "histogram:FILE" (lines "value weight");
// a bare number is fixed. Throws Error(kBadConfig) naming `field`, the value and the rule.
LengthDist ParseLengthDist(const std::string& text, const std::string& field);

struct GeneratorSpec {
  enum class Arrival { kPoisson, kFixedRate, kConcurrency };
  Arrival arrival = Arrival::kPoisson;
  double request_rate = 0;  // requests / s (Poisson, fixed rate)
  int concurrency = 0;      // users (closed loop; arrival times 0, set by the simulator)
  int64_t num_prompts = 0;
  LengthDist input, output;
  int prefix_groups = 0;    // > 0: request i shares prefix i % prefix_groups of prefix_tokens tokens
  int prefix_tokens = 0;
  uint64_t seed = 0;
};

// REQUIRES nothing; throws Error(kBadConfig) for rate <= 0 (open loop), concurrency < 1 (closed),
// num_prompts < 1, a prefix longer than... nothing else. RETURNS num_prompts requests, arrivals
// ascending, ids 0, 1, ...; lengths >= 1.
std::vector<Request> GenerateRequests(const GeneratorSpec& spec);

// A JSON Lines trace: one object a line with an arrival time ("arrival_ms", or "arrival_s" /
// "timestamp" in seconds), "input_tokens" (or "prompt_len" / "input_len" / "prompt_tokens"),
// "output_tokens" (or "output_len" / "completion_tokens"), optional "prefix_id" and
// "prefix_tokens" (prefix_id an integer in [0, 2^31 - 1]). Blank lines are skipped. Throws Error(kBadConfig) naming the file, line,
// field, value and rule: not JSON, a field missing or not a number, a time negative or before the
// previous line's, a length < 1, a prefix longer than the prompt, an empty trace.
std::vector<Request> ReadTrace(const std::string& path);
// The same from the text itself (`source` names it in errors).
std::vector<Request> ParseTrace(const std::string& text, const std::string& source);

}  // namespace nkisim::serving
