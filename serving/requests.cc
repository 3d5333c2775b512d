#include "serving/requests.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/error.h"

namespace nkisim::serving {
namespace {

double ParseNumber(const std::string& text, const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) {
    Raise(ErrorCode::kBadConfig, StrCat(field, ": '", text, "': must be a number"));
  }
  return v;
}

std::pair<std::string, std::string> SplitPair(const std::string& text) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return {text, ""};
  return {text.substr(0, comma), text.substr(comma + 1)};
}

int Sample(const LengthDist& d, std::mt19937_64& rng) {
  switch (d.kind) {
    case LengthDist::Kind::kFixed:
      return static_cast<int>(d.mean);
    case LengthDist::Kind::kNormal: {
      std::normal_distribution<double> n(d.mean, d.std);
      return std::max(1, static_cast<int>(std::lround(n(rng))));
    }
    case LengthDist::Kind::kUniform:
      return std::uniform_int_distribution<int>(d.lo, d.hi)(rng);
    case LengthDist::Kind::kHistogram: {
      std::vector<double> w;
      for (const auto& [v, weight] : d.histogram) w.push_back(weight);
      std::discrete_distribution<size_t> pick(w.begin(), w.end());
      return d.histogram[pick(rng)].first;
    }
  }
  return 1;
}

}  // namespace

LengthDist ParseLengthDist(const std::string& text, const std::string& field) {
  LengthDist d;
  const size_t colon = text.find(':');
  const std::string kind = colon == std::string::npos ? "fixed" : text.substr(0, colon);
  const std::string args = colon == std::string::npos ? text : text.substr(colon + 1);
  const std::string rule = "a length is N, fixed:N, normal:MEAN,STD, uniform:LO,HI or histogram:FILE";
  if (kind == "fixed") {
    d.mean = ParseNumber(args, field);
    if (d.mean < 1 || d.mean != std::floor(d.mean)) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": '", text, "': must be an integer >= 1"));
    }
  } else if (kind == "normal") {
    d.kind = LengthDist::Kind::kNormal;
    const auto [m, s] = SplitPair(args);
    d.mean = ParseNumber(m, field);
    d.std = ParseNumber(s, field);
    if (d.mean < 1 || d.std < 0) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": '", text, "': mean must be >= 1 and std >= 0"));
    }
  } else if (kind == "uniform") {
    d.kind = LengthDist::Kind::kUniform;
    const auto [lo, hi] = SplitPair(args);
    d.lo = static_cast<int>(ParseNumber(lo, field));
    d.hi = static_cast<int>(ParseNumber(hi, field));
    if (d.lo < 1 || d.hi < d.lo) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": '", text, "': must have 1 <= LO <= HI"));
    }
    d.mean = 0.5 * (d.lo + d.hi);
  } else if (kind == "histogram") {
    d.kind = LengthDist::Kind::kHistogram;
    std::ifstream in(args);
    if (!in) Raise(ErrorCode::kBadConfig, StrCat(field, ": histogram file '", args, "': cannot be read"));
    std::string line;
    int n = 0;
    double total = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream s(line);
      double v = 0, w = 0;
      if (!(s >> v >> w) || v < 1 || v != std::floor(v) || w < 0) {
        Raise(ErrorCode::kBadConfig, StrCat(field, ": ", args, ":", n, ": '", line,
                                            "': must be 'LENGTH WEIGHT', LENGTH an integer >= 1, WEIGHT >= 0"));
      }
      d.histogram.emplace_back(static_cast<int>(v), w);
      total += w * v;
      d.mean += w;
    }
    if (d.histogram.empty() || d.mean <= 0) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": histogram file '", args, "': no positive weight"));
    }
    d.mean = total / d.mean;
  } else {
    Raise(ErrorCode::kBadConfig, StrCat(field, ": '", text, "': unknown distribution '", kind, "'; ", rule));
  }
  return d;
}

std::vector<Request> GenerateRequests(const GeneratorSpec& spec) {
  const bool closed = spec.arrival == GeneratorSpec::Arrival::kConcurrency;
  if (!closed && !(spec.request_rate > 0 && std::isfinite(spec.request_rate))) {
    Raise(ErrorCode::kBadConfig, StrCat("--request-rate: ", spec.request_rate, ": must be > 0"));
  }
  if (closed && spec.concurrency < 1) {
    Raise(ErrorCode::kBadConfig, StrCat("--concurrency: ", spec.concurrency, ": must be >= 1"));
  }
  if (spec.num_prompts < 1) Raise(ErrorCode::kBadConfig, StrCat("--num-prompts: ", spec.num_prompts, ": must be >= 1"));
  if (spec.prefix_groups < 0 || spec.prefix_tokens < 0) {
    Raise(ErrorCode::kBadConfig, StrCat("--prefix-groups / --prefix-tokens: ", spec.prefix_groups, " / ",
                                        spec.prefix_tokens, ": must be >= 0"));
  }
  // Separate streams: arrivals do not shift when a length distribution changes.
  std::mt19937_64 arrivals(spec.seed * 3 + 1), inputs(spec.seed * 3 + 2), outputs(spec.seed * 3 + 3);
  std::exponential_distribution<double> gap(spec.request_rate > 0 ? spec.request_rate / 1000.0 : 1.0);
  std::vector<Request> out;
  out.reserve(static_cast<size_t>(spec.num_prompts));
  double t = 0;
  for (int64_t i = 0; i < spec.num_prompts; ++i) {
    Request r;
    r.id = i;
    if (spec.arrival == GeneratorSpec::Arrival::kPoisson) {
      t += gap(arrivals);
    } else if (spec.arrival == GeneratorSpec::Arrival::kFixedRate) {
      t = i * 1000.0 / spec.request_rate;
    }
    r.arrival_ms = closed ? 0 : t;
    r.input_tokens = Sample(spec.input, inputs);
    r.output_tokens = Sample(spec.output, outputs);
    if (spec.prefix_groups > 0 && spec.prefix_tokens > 0) {
      r.prefix_id = i % spec.prefix_groups;
      r.prefix_tokens = std::min(spec.prefix_tokens, r.input_tokens);
    }
    out.push_back(r);
  }
  return out;
}

namespace {

bool Number(const nlohmann::json& o, std::initializer_list<const char*> keys, double* v, std::string* key) {
  for (const char* k : keys) {
    const auto it = o.find(k);
    if (it == o.end()) continue;
    *key = k;
    if (!it->is_number()) return false;
    *v = it->get<double>();
    return true;
  }
  key->clear();
  return false;
}

}  // namespace

std::vector<Request> ParseTrace(const std::string& text, const std::string& source) {
  std::vector<Request> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  double last = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = StrCat(source, ":", n, ": ");
    nlohmann::json o;
    try {
      o = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      Raise(ErrorCode::kBadConfig, StrCat(at, "not JSON (", e.what(), ")"));
    }
    if (!o.is_object()) Raise(ErrorCode::kBadConfig, StrCat(at, "must be a JSON object"));
    auto need = [&](std::initializer_list<const char*> keys, const char* names) {
      double v = 0;
      std::string key;
      if (!Number(o, keys, &v, &key)) {
        Raise(ErrorCode::kBadConfig, key.empty() ? StrCat(at, names, ": missing: required")
                                                 : StrCat(at, key, ": ", o[key].dump(), ": must be a number"));
      }
      return std::make_pair(v, key);
    };
    Request r;
    r.id = static_cast<int64_t>(out.size());
    double v = 0;
    std::string key;
    if (Number(o, {"arrival_ms"}, &v, &key)) {
      r.arrival_ms = v;
    } else if (key.empty() && Number(o, {"arrival_s", "timestamp"}, &v, &key)) {
      r.arrival_ms = v * 1000.0;
    } else {
      need({"arrival_ms", "arrival_s", "timestamp"}, "arrival_ms (or arrival_s / timestamp)");
    }
    if (!std::isfinite(r.arrival_ms) || r.arrival_ms < 0) {
      Raise(ErrorCode::kBadConfig, StrCat(at, key, ": ", o[key].dump(), ": must be >= 0"));
    }
    if (r.arrival_ms < last) {
      Raise(ErrorCode::kBadConfig, StrCat(at, key, ": ", o[key].dump(), ": must not be before the previous line's (",
                                          last, " ms): arrivals must be in time order"));
    }
    last = r.arrival_ms;
    auto length = [&](std::initializer_list<const char*> keys, const char* names) {
      const auto [value, k] = need(keys, names);
      if (value < 1 || value != std::floor(value) || value > 1e8) {
        Raise(ErrorCode::kBadConfig, StrCat(at, k, ": ", o[k].dump(), ": must be an integer >= 1"));
      }
      return static_cast<int>(value);
    };
    r.input_tokens = length({"input_tokens", "prompt_len", "input_len", "prompt_tokens"}, "input_tokens");
    r.output_tokens = length({"output_tokens", "output_len", "completion_tokens"}, "output_tokens");
    if (o.contains("prefix_id") || o.contains("prefix_tokens")) {
      const auto [id, ik] = need({"prefix_id"}, "prefix_id");
      const auto [pt, pk] = need({"prefix_tokens"}, "prefix_tokens");
      if (id < 0 || id != std::floor(id) || id > 2147483647.0) {
        Raise(ErrorCode::kBadConfig, StrCat(at, "prefix_id: ", o["prefix_id"].dump(),
                                            ": must be an integer in [0, 2147483647]"));
      }
      if (pt < 0 || pt > r.input_tokens || pt != std::floor(pt)) {
        Raise(ErrorCode::kBadConfig, StrCat(at, "prefix_tokens: ", o["prefix_tokens"].dump(),
                                            ": must be an integer in [0, input_tokens = ", r.input_tokens, "]"));
      }
      r.prefix_id = static_cast<int64_t>(id);
      r.prefix_tokens = static_cast<int>(pt);
    }
    out.push_back(r);
  }
  if (out.empty()) Raise(ErrorCode::kBadConfig, StrCat(source, ": no requests: a trace needs at least one line"));
  return out;
}

std::vector<Request> ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Raise(ErrorCode::kBadConfig, StrCat("--trace-file: '", path, "': cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTrace(text.str(), path);
}

}  // namespace nkisim::serving
