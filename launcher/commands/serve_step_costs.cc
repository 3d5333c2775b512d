#include "launcher/commands/serve_step_costs.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "model/phase_runner.h"
#include "model/timing_job.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

using serving::StepCostTable;

// The predict of prefill bucket i: batch 1, S = the bucket, N = 1, plain TP (predict.h).
PredictRequest PrefillRequest(const PredictRequest& base, int tokens) {
  PredictRequest r = base;
  r.plans.front().attention_dp = 1;
  r.batch = 1;
  r.input_tokens = tokens;
  r.output_tokens = 1;
  return r;
}

// The predict of decode entry (batch, kv): one step at KV kv (its context kv + 1 within the
// model's, else one token shorter); its prefill is not used: the smallest that runs.
PredictRequest DecodeRequest(const PredictRequest& base, int batch, int kv) {
  PredictRequest r = base;
  r.batch = batch;
  const int64_t limit = base.model.max_positions > 0 ? base.model.max_positions : int64_t{1} << 30;
  r.input_tokens = static_cast<int>(std::min<int64_t>(kv, limit - 1));
  r.output_tokens = 1;
  r.max_prefill_chunk = std::min(32, r.input_tokens);
  return r;
}

// Every entry's predict checked (the kernels' and plans' rules) before any is simulated.
void CheckAll(const PredictRequest& base, const std::vector<int>& prefill, const std::vector<int>& batch,
              const std::vector<int>& kv) {
  for (int s : prefill) CheckPredictRequest(PrefillRequest(base, s));
  for (int b : batch) {
    for (int k : kv) CheckPredictRequest(DecodeRequest(base, b, k));
  }
}

// KV blocks of a replica from the HBM of the largest decode entry (r, its whole-model HBM).
int64_t KvBlocks(const PredictRequest& r, const HbmFootprint& layers, int64_t hbm_bytes, int64_t capacity,
                 int block_size) {
  const double kv_bytes = static_cast<double>(layers.kv_cache_per_layer) * layers.layers;
  const double per_token = kv_bytes / (double(r.batch) * (r.input_tokens + r.output_tokens));
  const double free = static_cast<double>(capacity) - (static_cast<double>(hbm_bytes) - kv_bytes);
  if (!(per_token > 0) || free < per_token * block_size) {
    Raise(ErrorCode::kBadConfig,
          StrCat("serve: plan '", r.plans.front().name, "': the weights leave ", std::max(0.0, free) / (1 << 20),
                 " MiB of HBM per logical core: not one KV block of ", block_size, " tokens"));
  }
  return static_cast<int64_t>(free / (per_token * block_size));
}

// The distinct layer jobs of one table: each added once (keyed by the layer scenario's text),
// then all simulated, `workers` at a time (each job is self-contained: its ranks on its own
// fabric), then looked up.
class LayerJobs {
 public:
  explicit LayerJobs(const PredictRequest& base) : base_(base) {}

  // Adds the job of `spec` (a no-op when an equal one was added); `what` names it.
  void Add(const proto::Scenario& spec, const std::string& what) {
    std::string key = Key(spec);
    if (index_.count(key) > 0) return;
    index_.emplace(std::move(key), jobs_.size());
    jobs_.push_back({spec, what, {}});
  }

  // Simulates every job; throws Error(kBadConfig) naming the first (in the order added) that
  // failed. `progress` (may be empty) gets a line per job as it starts.
  void Run(int workers, void (*progress)(const std::string&)) {
    std::atomic<size_t> next{0};
    std::mutex mutex;
    std::vector<std::string> errors(jobs_.size());
    auto work = [&] {
      for (size_t i = next++; i < jobs_.size(); i = next++) {
        Job& job = jobs_[i];
        if (progress) {
          std::lock_guard<std::mutex> lock(mutex);
          progress(StrCat("step costs: ", job.what, " (job ", i + 1, "/", jobs_.size(), ")"));
        }
        try {
          const ResolvedScenario resolved = Resolve(job.spec, base_.model.source + " (serve step costs)");
          job.times = Layers(RunTimingJob(resolved).scenarios(0));
        } catch (const Error& e) {
          errors[i] = e.what();
          next = jobs_.size();  // start no more
        }
      }
    };
    std::vector<std::thread> threads;
    for (int w = 1; w < std::min<int>(workers, static_cast<int>(jobs_.size())); ++w) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (!errors[i].empty()) {
        Raise(ErrorCode::kBadConfig, StrCat("serve: plan '", base_.plans.front().name, "': ", jobs_[i].what,
                                            " could not be simulated: ", errors[i]));
      }
    }
  }

  // REQUIRES: Run. The layer times of `spec` (added).
  const LayerTimes& Times(const proto::Scenario& spec) const { return jobs_[index_.at(Key(spec))].times; }
  size_t size() const { return jobs_.size(); }

 private:
  struct Job {
    proto::Scenario spec;
    std::string what;
    LayerTimes times;
  };
  static std::string Key(const proto::Scenario& spec) {
    std::string key;
    google::protobuf::TextFormat::PrintToString(spec, &key);
    return key;
  }
  const PredictRequest& base_;
  std::map<std::string, size_t> index_;
  std::vector<Job> jobs_;
};

}  // namespace

StepCostTable BuildStepCostTable(const PredictRequest& base, const std::vector<int>& prefill_buckets,
                                 const std::vector<int>& batch_buckets, const std::vector<int>& kv_buckets,
                                 int block_size, void (*progress)(const std::string&), int workers) {
  CheckAll(base, prefill_buckets, batch_buckets, kv_buckets);
  StepCostTable t;
  t.plan = base.plans.front().name;
  t.prefill_buckets = prefill_buckets;
  t.batch_buckets = batch_buckets;
  t.kv_buckets = kv_buckets;
  // The jobs: a prefill bucket's chunk layer (PredictPrefill's), a decode entry's two layers at
  // its KV length (PredictDecode's first sample).
  auto prefill_spec = [&](const PredictRequest& r) {
    return LayerScenario(r, r.plans.front(), true, PrefillChunks(r).tokens, 1);
  };
  auto decode_spec = [&](const PredictRequest& r) { return LayerScenario(r, r.plans.front(), false, r.input_tokens, 2); };
  LayerJobs jobs(base);
  for (int s : prefill_buckets) {
    const PredictRequest r = PrefillRequest(base, s);
    jobs.Add(prefill_spec(r), StrCat("prefill chunk of ", PrefillChunks(r).tokens, " tokens"));
  }
  for (int b : batch_buckets) {
    for (int k : kv_buckets) jobs.Add(decode_spec(DecodeRequest(base, b, k)), StrCat("decode at batch ", b, ", KV ", k));
  }
  {
    // The heap is returned once, after the last job (not after each: its pages would fault back
    // in the next); the peak is the largest job's either way.
    const InProcessRanks shared_heap;
    jobs.Run(workers, progress);
  }
  // Prefill: PredictPrefill's stack of the chunk's layers + the LM head of one row (predict's TTFT).
  for (int s : prefill_buckets) {
    const PredictRequest r = PrefillRequest(base, s);
    const proto::Scenario spec = prefill_spec(r);
    const HardwareProfile hw = Resolve(spec, base.model.source).profile;
    const double stack_ns = PrefillStackNs(jobs.Times(spec), PrefillChunks(r), r.model);
    t.prefill_ms.push_back((stack_ns + LmHeadNs(r, r.plans.front(), hw, r.batch)) / 1e6);
    t.host_ms_per_step = hw.host_ms_per_step();
  }
  // Decode: predict's first sample, L x (first - (first - steady)), + the LM head of b rows.
  for (int b : batch_buckets) {
    std::vector<double> row;
    for (size_t k = 0; k < kv_buckets.size(); ++k) {
      const PredictRequest r = DecodeRequest(base, b, kv_buckets[k]);
      const proto::Scenario spec = decode_spec(r);
      const LayerTimes& d = jobs.Times(spec);
      const double saving_ns = d.first_ns - d.steady_ns;
      const ResolvedScenario resolved = Resolve(spec, base.model.source);
      row.push_back((r.model.layers * (d.first_ns - saving_ns) + LmHeadNs(r, r.plans.front(), resolved.profile, r.batch)) /
                    1e6);
      if (b == batch_buckets.back() && k + 1 == kv_buckets.size()) {
        HbmFootprint layers;
        const int64_t hbm = ModelHbm(r, resolved, r.batch, &layers);
        t.kv_blocks = KvBlocks(r, layers, hbm, layers.capacity, block_size);
      }
    }
    t.decode_ms.push_back(row);
  }
  serving::CheckStepCostTable(t);
  return t;
}

namespace {

PlanPrediction PredictOne(const PredictRequest& r, const std::string& what) {
  PlanPrediction p = Predict(r).front();
  if (!p.simulated) {
    Raise(ErrorCode::kBadConfig, StrCat("serve: plan '", r.plans.front().name, "': ", what,
                                        " could not be simulated: ", p.error));
  }
  return p;
}

}  // namespace

StepCostTable BuildStepCostTableDirect(const PredictRequest& base, const std::vector<int>& prefill_buckets,
                                       const std::vector<int>& batch_buckets, const std::vector<int>& kv_buckets,
                                       int block_size, void (*progress)(const std::string&)) {
  CheckAll(base, prefill_buckets, batch_buckets, kv_buckets);
  StepCostTable t;
  t.plan = base.plans.front().name;
  t.prefill_buckets = prefill_buckets;
  t.batch_buckets = batch_buckets;
  t.kv_buckets = kv_buckets;
  for (size_t i = 0; i < prefill_buckets.size(); ++i) {
    if (progress) progress(StrCat("step costs (direct): prefill bucket ", prefill_buckets[i]));
    const PlanPrediction p = PredictOne(PrefillRequest(base, prefill_buckets[i]),
                                        StrCat("the prefill of ", prefill_buckets[i], " tokens"));
    t.prefill_ms.push_back(p.ttft_ms);
    t.host_ms_per_step = p.host_ms_per_step;
  }
  // Each (batch bucket, KV bucket) simulated at exactly that KV length: no interpolation.
  for (int b : batch_buckets) {
    std::vector<double> row;
    for (size_t k = 0; k < kv_buckets.size(); ++k) {
      if (progress) progress(StrCat("step costs (direct): decode batch bucket ", b, ", KV bucket ", kv_buckets[k]));
      const PredictRequest r = DecodeRequest(base, b, kv_buckets[k]);
      const PlanPrediction p = PredictOne(r, StrCat("the decode at batch ", b, ", KV ", kv_buckets[k]));
      row.push_back((p.samples.front().second + p.lm_head_decode_ns) / 1e6);
      if (b == batch_buckets.back() && k + 1 == kv_buckets.size()) {
        t.kv_blocks = KvBlocks(r, p.layers_hbm, p.hbm_bytes, p.hbm_capacity, block_size);
      }
    }
    t.decode_ms.push_back(row);
  }
  serving::CheckStepCostTable(t);
  return t;
}

}  // namespace nkisim::launcher
