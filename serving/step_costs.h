// The per-plan step-cost table the serving simulator runs on (docs/serving.md): what one step of
// a replica costs, by the compiled bucket it runs in. Built once per plan (from predict's
// simulation by `nkisim serve`, or by hand in tests); the simulator only looks it up, it knows
// nothing of kernels.
//   * prefill (context encoding): a graph per bucket length; a prefill of n tokens pays the
//     smallest bucket >= n (n larger than the largest bucket: refused, as the server refuses it);
//   * decode (token generation): a graph per (batch bucket, KV-length bucket); a step with b live
//     sequences, the longest holding k tokens, pays the smallest batch bucket >= b and KV bucket
//     >= k, however many slots are live;
//   * host time per step, added to every step (async mode: overlapped with the device, the step
//     takes the longer of the two).
// Pure data and pure functions; times in milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nkisim::serving {

struct StepCostTable {
  std::string plan;                        // the plan's name (reports)
  std::vector<int> prefill_buckets;        // context_encoding_buckets, tokens, ascending
  std::vector<double> prefill_ms;          // device ms of one prefill of each bucket
  std::vector<int> batch_buckets;          // token-generation batch sizes, ascending
  std::vector<int> kv_buckets;             // token_generation_buckets (KV lengths), ascending
  std::vector<std::vector<double>> decode_ms;  // [batch bucket][kv bucket] device ms of one step
  double host_ms_per_step = 0;
  // KV-cache blocks one replica holds (the HBM left after weights over the bytes of a block);
  // 0: unbounded.
  int64_t kv_blocks = 0;
};

// Index of the smallest bucket >= n in ascending `buckets`; -1 when n exceeds the largest.
int BucketIndex(const std::vector<int>& buckets, int64_t n);

// REQUIRES: the table passed CheckStepCostTable, 1 <= tokens <= the largest prefill bucket.
// RETURNS the device ms of a prefill of `tokens` (its bucket's).
double PrefillDeviceMs(const StepCostTable& t, int64_t tokens);
// REQUIRES: 1 <= live <= the largest batch bucket, 1 <= kv <= the largest KV bucket.
// RETURNS the device ms of one decode step of `live` sequences, the longest `kv` tokens.
double DecodeDeviceMs(const StepCostTable& t, int64_t live, int64_t kv);
// The step's wall time from its device time: device + host, or in async mode max(device, host).
double StepMs(const StepCostTable& t, double device_ms, bool async_mode);

// Throws Error(kBadConfig) naming the field, value and rule: buckets empty, not ascending or < 1,
// times negative or not finite, sizes that disagree.
void CheckStepCostTable(const StepCostTable& t);

// The table as JSON (`nkisim serve --save-step-costs`), and back: ParseStepCostTable checks it
// (CheckStepCostTable) and throws Error(kBadConfig) naming `source` and the field.
std::string StepCostTableJson(const StepCostTable& t);
StepCostTable ParseStepCostTable(const std::string& text, const std::string& source);

// "128,512,2048" -> {128, 512, 2048}; throws Error(kBadConfig) naming `field` when a value is not
// a positive integer or the list is not strictly ascending.
std::vector<int> ParseBuckets(const std::string& text, const std::string& field);
// The powers of two from `lo` up to `hi` and `hi` itself (the buckets NxD Inference's
// enable_bucketing generates by default), ascending.
std::vector<int> PowerOfTwoBuckets(int lo, int hi);

}  // namespace nkisim::serving
