#include "serving/step_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace nkisim::serving {

int BucketIndex(const std::vector<int>& buckets, int64_t n) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? -1 : static_cast<int>(it - buckets.begin());
}

double PrefillDeviceMs(const StepCostTable& t, int64_t tokens) {
  const int i = BucketIndex(t.prefill_buckets, tokens);
  if (i < 0 || tokens < 1) {
    Raise(ErrorCode::kInternal, StrCat("prefill of ", tokens, " tokens: outside the buckets"));
  }
  return t.prefill_ms[i];
}

double DecodeDeviceMs(const StepCostTable& t, int64_t live, int64_t kv) {
  const int b = BucketIndex(t.batch_buckets, live), k = BucketIndex(t.kv_buckets, kv);
  if (b < 0 || k < 0 || live < 1) {
    Raise(ErrorCode::kInternal, StrCat("decode of ", live, " sequences at KV ", kv, ": outside the buckets"));
  }
  return t.decode_ms[b][k];
}

double StepMs(const StepCostTable& t, double device_ms, bool async_mode) {
  return async_mode ? std::max(device_ms, t.host_ms_per_step) : device_ms + t.host_ms_per_step;
}

namespace {

void CheckBuckets(const std::vector<int>& b, const char* field) {
  if (b.empty()) Raise(ErrorCode::kBadConfig, StrCat(field, ": empty: at least one bucket is needed"));
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] < 1) Raise(ErrorCode::kBadConfig, StrCat(field, ": ", b[i], ": must be >= 1"));
    if (i > 0 && b[i] <= b[i - 1]) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": ", b[i], " after ", b[i - 1], ": must be strictly ascending"));
    }
  }
}

void CheckMs(double v, const std::string& field) {
  if (!std::isfinite(v) || v < 0) Raise(ErrorCode::kBadConfig, StrCat(field, ": ", v, ": must be finite and >= 0"));
}

}  // namespace

void CheckStepCostTable(const StepCostTable& t) {
  CheckBuckets(t.prefill_buckets, "context_encoding_buckets");
  CheckBuckets(t.batch_buckets, "token generation batch buckets");
  CheckBuckets(t.kv_buckets, "token_generation_buckets");
  if (t.prefill_ms.size() != t.prefill_buckets.size()) {
    Raise(ErrorCode::kBadConfig, StrCat("prefill_ms: ", t.prefill_ms.size(), " times for ", t.prefill_buckets.size(),
                                        " buckets: must be one per bucket"));
  }
  for (double v : t.prefill_ms) CheckMs(v, "prefill_ms");
  if (t.decode_ms.size() != t.batch_buckets.size()) {
    Raise(ErrorCode::kBadConfig, StrCat("decode_ms: ", t.decode_ms.size(), " rows for ", t.batch_buckets.size(),
                                        " batch buckets: must be one per bucket"));
  }
  for (const auto& row : t.decode_ms) {
    if (row.size() != t.kv_buckets.size()) {
      Raise(ErrorCode::kBadConfig, StrCat("decode_ms: a row of ", row.size(), " times for ", t.kv_buckets.size(),
                                          " KV buckets: must be one per bucket"));
    }
    for (double v : row) CheckMs(v, "decode_ms");
  }
  CheckMs(t.host_ms_per_step, "host_ms_per_step");
  if (t.kv_blocks < 0) Raise(ErrorCode::kBadConfig, StrCat("kv_blocks: ", t.kv_blocks, ": must be >= 0"));
}

std::string StepCostTableJson(const StepCostTable& t) {
  nlohmann::ordered_json j;
  j["plan"] = t.plan;
  j["context_encoding_buckets"] = t.prefill_buckets;
  j["prefill_ms"] = t.prefill_ms;
  j["batch_buckets"] = t.batch_buckets;
  j["token_generation_buckets"] = t.kv_buckets;
  j["decode_ms"] = t.decode_ms;
  j["host_ms_per_step"] = t.host_ms_per_step;
  j["kv_blocks"] = t.kv_blocks;
  return j.dump(2) + "\n";
}

StepCostTable ParseStepCostTable(const std::string& text, const std::string& source) {
  StepCostTable t;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    t.plan = j.value("plan", std::string());
    t.prefill_buckets = j.at("context_encoding_buckets").get<std::vector<int>>();
    t.prefill_ms = j.at("prefill_ms").get<std::vector<double>>();
    t.batch_buckets = j.at("batch_buckets").get<std::vector<int>>();
    t.kv_buckets = j.at("token_generation_buckets").get<std::vector<int>>();
    t.decode_ms = j.at("decode_ms").get<std::vector<std::vector<double>>>();
    t.host_ms_per_step = j.at("host_ms_per_step").get<double>();
    t.kv_blocks = j.at("kv_blocks").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ": not a step-cost table (", e.what(), ")"));
  }
  try {
    CheckStepCostTable(t);
  } catch (const Error& e) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ": ", e.what()));
  }
  return t;
}

std::vector<int> ParseBuckets(const std::string& text, const std::string& field) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > (1 << 24)) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": '", item, "': must be an integer in [1, 16777216]"));
    }
    if (!out.empty() && v <= out.back()) {
      Raise(ErrorCode::kBadConfig, StrCat(field, ": ", v, " after ", out.back(), ": must be strictly ascending"));
    }
    out.push_back(static_cast<int>(v));
    start = comma + 1;
  }
  return out;
}

std::vector<int> PowerOfTwoBuckets(int lo, int hi) {
  std::vector<int> out;
  for (int64_t v = std::max(1, lo); v < hi; v *= 2) out.push_back(static_cast<int>(v));
  out.push_back(hi);
  return out;
}

}  // namespace nkisim::serving
