#include "serving/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <list>
#include <unordered_map>

#include "runtime/error.h"
#include "serving/metrics.h"

namespace nkisim::serving {

void CheckSchedulerConfig(const SchedulerConfig& c, const StepCostTable& t) {
  auto bad = [](const std::string& what) { Raise(ErrorCode::kBadConfig, what); };
  if (c.max_num_seqs < 1) bad(StrCat("--max-num-seqs: ", c.max_num_seqs, ": must be >= 1"));
  if (!t.batch_buckets.empty() && c.max_num_seqs > t.batch_buckets.back()) {
    bad(StrCat("--max-num-seqs: ", c.max_num_seqs, ": must be <= the largest token-generation batch bucket (",
               t.batch_buckets.back(), ")"));
  }
  if (c.max_num_batched_tokens < 1) {
    bad(StrCat("--max-num-batched-tokens: ", c.max_num_batched_tokens, ": must be >= 1"));
  }
  if (c.enable_chunked_prefill && c.max_num_batched_tokens <= c.max_num_seqs) {
    bad(StrCat("--max-num-batched-tokens: ", c.max_num_batched_tokens,
               ": must be > --max-num-seqs (", c.max_num_seqs, ") with chunked prefill (room for a prompt chunk)"));
  }
  if (c.max_model_len < 0) bad(StrCat("--max-model-len: ", c.max_model_len, ": must be >= 0"));
  if (!t.kv_buckets.empty() && c.max_model_len > t.kv_buckets.back()) {
    bad(StrCat("--max-model-len: ", c.max_model_len, ": must be <= the largest token_generation_bucket (",
               t.kv_buckets.back(), ")"));
  }
  if (c.block_size < 1) bad(StrCat("--block-size: ", c.block_size, ": must be >= 1"));
  if (c.replicas < 1) bad(StrCat("--replicas: ", c.replicas, ": must be >= 1"));
  if (c.closed_loop_users < 0) bad(StrCat("--concurrency: ", c.closed_loop_users, ": must be >= 1"));
  if (!(c.timeline_interval_ms >= 0)) bad(StrCat("timeline interval: ", c.timeline_interval_ms, ": must be >= 0"));
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr size_t kMaxTimeline = 4096;

struct Seq {
  int64_t req = 0;
  int64_t admit_order = 0;
  int prompt_len = 0;   // tokens of the current (re)prefill: input + tokens generated before a preemption
  int to_prefill = 0;   // of them still to run
  int context = 0;      // tokens in the KV cache
  int generated = 0;
  int64_t private_blocks = 0;
  int prefix_blocks = 0;  // shared prefix blocks referenced
  int step_tokens = 0;    // this step: prompt tokens (prefill) or 1 (decode); 0 not in the step
  bool step_prefill = false;
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device ms of a prefill of n tokens: its bucket's, or whole largest buckets then the rest's.
double PrefillCostMs(const StepCostTable& t, int64_t n) {
  double ms = 0;
  const int64_t largest = t.prefill_buckets.back();
  while (n > largest) {
    ms += t.prefill_ms.back();
    n -= largest;
  }
  return ms + PrefillDeviceMs(t, n);
}

class Replica {
 public:
  Replica(const StepCostTable& t, const SchedulerConfig& c, std::vector<RequestRecord>& records, SimulationResult& out)
      : t_(t), c_(c), records_(records), out_(out) {}

  double step_end = kNever;  // kNever: idle
  size_t Outstanding() const { return waiting_.size() + running_.size(); }
  int Running() const { return static_cast<int>(running_.size()); }
  int Waiting() const { return static_cast<int>(waiting_.size()); }
  int64_t UsedBlocks() const { return private_used_ + static_cast<int64_t>(cache_.size()); }
  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }

  void Enqueue(int64_t req) {
    Seq s;
    s.req = req;
    waiting_.push_back(s);
  }

  // Plans and starts a step at `now`; sets step_end.
  void StartStep(double now) {
    double device_ms = c_.enable_chunked_prefill ? PlanChunked(now) : PlanPrefillFirst(now);
    if (device_ms < 0) Raise(ErrorCode::kInternal, "serve: a replica with work could schedule nothing");
    ++out_.steps;
    step_end = now + StepMs(t_, device_ms, c_.async_mode);
  }

  // Applies the step that ends now; calls done(req) for each finished request.
  template <typename Done>
  void EndStep(double now, Done done) {
    step_end = kNever;
    for (size_t i = 0; i < running_.size();) {
      Seq& s = running_[i];
      bool token = false;
      if (s.step_tokens > 0 && s.step_prefill) {
        s.to_prefill -= s.step_tokens;
        s.context = s.prompt_len - s.to_prefill;
        token = s.to_prefill == 0;
      } else if (s.step_tokens > 0) {
        ++s.context;
        token = true;
      }
      s.step_tokens = 0;
      if (token) {
        ++s.generated;
        RequestRecord& r = records_[s.req];
        if (r.first_token_ms < 0) r.first_token_ms = now;
        if (r.last_token_ms >= 0) {
          r.itls_running.push_back(now - r.last_token_ms);
          ++out_.itl_counts[now - r.last_token_ms];
        }
        r.last_token_ms = now;
        if (s.generated >= r.request.output_tokens) {
          r.finish_ms = now;
          FinishItl(r);
          Free(s);
          const int64_t req = s.req;
          running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
          done(req);
          continue;
        }
      }
      ++i;
    }
  }

 private:
  // The request's ITL summary from its gaps, which are then freed (memory flat in the requests).
  static void FinishItl(RequestRecord& r) {
    if (!r.itls_running.empty()) {
      r.itl_max_ms = *std::max_element(r.itls_running.begin(), r.itls_running.end());
      r.itl_p50_ms = Percentile(r.itls_running, 50);
      r.itl_p99_ms = Percentile(r.itls_running, 99);
    }
    std::vector<double>().swap(r.itls_running);
  }

  bool Unbounded() const { return t_.kv_blocks == 0; }
  int64_t FreeBlocks() const { return t_.kv_blocks - UsedBlocks(); }
  static uint64_t Key(int64_t prefix, int64_t block) { return (static_cast<uint64_t>(prefix) << 24) | uint64_t(block); }

  bool Allocate(int64_t n) {
    if (Unbounded()) return true;
    while (FreeBlocks() < n && !lru_.empty()) {
      cache_.erase(lru_.front());
      lru_.pop_front();
    }
    return FreeBlocks() >= n;
  }

  void Unref(uint64_t key) {
    CacheEntry& e = cache_.at(key);
    if (--e.refs == 0) e.lru = lru_.insert(lru_.end(), key);
  }
  void Ref(uint64_t key) {
    CacheEntry& e = cache_.at(key);
    if (e.refs++ == 0) lru_.erase(e.lru);
  }

  void Free(Seq& s) {
    private_used_ -= s.private_blocks;
    s.private_blocks = 0;
    const Request& q = records_[s.req].request;
    for (int j = 0; j < s.prefix_blocks; ++j) Unref(Key(q.prefix_id, j));
    s.prefix_blocks = 0;
  }

  // Admits the front of the waiting queue when it fits `budget` tokens (always when `first`) and
  // the free blocks: blocks for its whole prompt, the cached prefix blocks referenced.
  bool AdmitFront(double now, int64_t budget, bool first) {
    Seq s = waiting_.front();
    RequestRecord& r = records_[s.req];
    const Request& q = r.request;
    const int total = q.input_tokens + s.generated;
    int prefix_blocks = 0, hits = 0;
    if (c_.enable_prefix_caching && q.prefix_id >= 0) {
      prefix_blocks = q.prefix_tokens / c_.block_size;
      while (hits < prefix_blocks && cache_.count(Key(q.prefix_id, hits))) ++hits;
    }
    const int cached = std::min<int>(hits * c_.block_size, total - 1);
    if (!first && total - cached > budget) return false;
    // Every cached block of the prefix referenced (also past a gap: only the first `hits` skip
    // prefill), so that the allocation below cannot evict them; the missing ones allocated.
    std::vector<int> present;
    for (int j = 0; j < prefix_blocks; ++j) {
      if (cache_.count(Key(q.prefix_id, j))) {
        Ref(Key(q.prefix_id, j));
        present.push_back(j);
      }
    }
    const int64_t priv = CeilDiv(total, c_.block_size) - prefix_blocks;
    if (!Allocate(priv + prefix_blocks - static_cast<int64_t>(present.size()))) {
      for (int j : present) Unref(Key(q.prefix_id, j));
      return false;
    }
    for (int j = 0; j < prefix_blocks; ++j) {
      if (!cache_.count(Key(q.prefix_id, j))) cache_[Key(q.prefix_id, j)].refs = 1;
    }
    private_used_ += priv;
    s.private_blocks = priv;
    s.prefix_blocks = prefix_blocks;
    s.prompt_len = total;
    s.context = cached;
    s.to_prefill = total - cached;
    s.admit_order = next_order_++;
    if (r.first_scheduled_ms < 0) {
      r.first_scheduled_ms = now;
      r.cached_tokens = cached;
      if (c_.enable_prefix_caching) {
        out_.prefix_hit_tokens += cached;
        out_.prefix_lookup_tokens += total;
      }
    }
    waiting_.pop_front();
    running_.push_back(s);
    return true;
  }

  // The latest-admitted running sequence back to the front of the queue, its blocks freed.
  void PreemptLatest() {
    auto it = std::max_element(running_.begin(), running_.end(),
                               [](const Seq& a, const Seq& b) { return a.admit_order < b.admit_order; });
    Seq s = *it;
    running_.erase(it);
    Free(s);
    s.context = 0;
    s.to_prefill = 0;
    s.step_tokens = 0;
    ++records_[s.req].preemptions;
    ++out_.preemptions;
    waiting_.push_front(s);
  }

  // Grows every decoding sequence by the block its next token needs, preempting the latest
  // admitted while none is free. Returns the decoders' count and their longest KV length.
  std::pair<int, int> PrepareDecodes() {
    for (size_t i = 0; i < running_.size();) {
      Seq& s = running_[i];
      if (s.to_prefill > 0) {
        ++i;
        continue;
      }
      const int64_t need = CeilDiv(s.context + 1, c_.block_size) - s.prefix_blocks - s.private_blocks;
      if (need <= 0 || Allocate(need)) {
        if (need > 0) {
          s.private_blocks += need;
          private_used_ += need;
        }
        s.step_tokens = 1;
        s.step_prefill = false;
        ++i;
        continue;
      }
      const int64_t order = s.admit_order;
      PreemptLatest();
      // The preempted one was this or a later one: this index holds the next to look at.
      if (i < running_.size() && running_[i].admit_order != order) continue;
    }
    int n = 0, kv = 0;
    for (const Seq& s : running_) {
      if (s.step_tokens == 1 && !s.step_prefill) {
        ++n;
        kv = std::max(kv, s.context + 1);
      }
    }
    return {n, kv};
  }

  double PlanPrefillFirst(double now) {
    int64_t budget = c_.max_num_batched_tokens;
    double ms = 0;
    bool any = false;
    while (!waiting_.empty() && static_cast<int>(running_.size()) < c_.max_num_seqs) {
      if (!AdmitFront(now, budget, !any)) break;
      Seq& s = running_.back();
      s.step_tokens = s.to_prefill;
      s.step_prefill = true;
      budget -= s.to_prefill;
      ms += PrefillCostMs(t_, s.to_prefill);
      any = true;
    }
    if (any) {
      ++out_.prefill_steps;
      return ms;
    }
    if (running_.empty()) return -1;
    const auto [n, kv] = PrepareDecodes();
    if (n == 0) return PlanPrefillFirst(now);  // all preempted: they are waiting again
    ++out_.decode_steps;
    return DecodeDeviceMs(t_, n, kv);
  }

  double PlanChunked(double now) {
    const auto [n, kv] = PrepareDecodes();
    int64_t cap = std::min<int64_t>(c_.max_num_batched_tokens - n, t_.prefill_buckets.back());
    int64_t chunk_tokens = 0;
    for (Seq& s : running_) {
      if (s.to_prefill == 0 || cap <= 0) continue;
      s.step_tokens = static_cast<int>(std::min<int64_t>(s.to_prefill, cap));
      s.step_prefill = true;
      cap -= s.step_tokens;
      chunk_tokens += s.step_tokens;
    }
    while (cap > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < c_.max_num_seqs) {
      if (!AdmitFront(now, cap, true)) break;
      Seq& s = running_.back();
      s.step_tokens = static_cast<int>(std::min<int64_t>(s.to_prefill, cap));
      s.step_prefill = true;
      cap -= s.step_tokens;
      chunk_tokens += s.step_tokens;
    }
    if (n == 0 && chunk_tokens == 0) return -1;
    if (n > 0) ++out_.decode_steps;
    if (chunk_tokens > 0) ++out_.prefill_steps;
    return (n > 0 ? DecodeDeviceMs(t_, n, kv) : 0) + (chunk_tokens > 0 ? PrefillCostMs(t_, chunk_tokens) : 0);
  }

  struct CacheEntry {
    int refs = 0;
    std::list<uint64_t>::iterator lru;
  };

  const StepCostTable& t_;
  const SchedulerConfig& c_;
  std::vector<RequestRecord>& records_;
  SimulationResult& out_;
  std::deque<Seq> waiting_;
  std::vector<Seq> running_;
  std::unordered_map<uint64_t, CacheEntry> cache_;
  std::list<uint64_t> lru_;  // unreferenced cached blocks, least recently used first
  int64_t private_used_ = 0;
  int64_t next_order_ = 0;
};

}  // namespace

SimulationResult Simulate(const StepCostTable& table, const SchedulerConfig& config,
                          const std::vector<Request>& requests,
                          const std::function<void(int64_t, int64_t)>& progress) {
  SimulationResult out;
  out.records.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) out.records[i].request = requests[i];
  std::vector<Replica> replicas;
  replicas.reserve(static_cast<size_t>(config.replicas));
  for (int i = 0; i < config.replicas; ++i) replicas.emplace_back(table, config, out.records, out);

  const int max_len = config.max_model_len > 0 ? config.max_model_len : table.kv_buckets.back();
  const int64_t total = static_cast<int64_t>(requests.size());
  const bool closed = config.closed_loop_users > 0;
  // Open loop: requests in order at their times. Closed loop: the first N at 0, then one each
  // time a request ends (finished or refused), at that time.
  int64_t next = 0;
  std::deque<std::pair<double, int64_t>> sent;  // closed loop: (time, request)
  if (closed) {
    for (; next < std::min<int64_t>(config.closed_loop_users, total); ++next) sent.emplace_back(0.0, next);
  }
  auto next_arrival = [&]() -> double {
    if (closed) return sent.empty() ? kNever : sent.front().first;
    return next < total ? requests[next].arrival_ms : kNever;
  };

  int64_t in_system = 0, ended = 0;
  double last_t = std::numeric_limits<double>::quiet_NaN(), first_t = 0, next_sample = 0;
  int64_t rr = 0;
  double interval = config.timeline_interval_ms;
  auto advance = [&](double t) {
    if (std::isnan(last_t)) {
      last_t = first_t = next_sample = t;
    }
    int running = 0, waiting = 0;
    int64_t blocks = 0;
    for (const Replica& r : replicas) {
      running += r.Running();
      waiting += r.Waiting();
      blocks += r.UsedBlocks();
    }
    const double dt = t - last_t;
    out.in_system_area_ms += in_system * dt;
    out.slot_area_ms += running * dt;
    out.kv_block_area_ms += static_cast<double>(blocks) * dt;
    out.max_waiting = std::max(out.max_waiting, waiting);
    if (config.timeline_interval_ms > 0 && t >= next_sample) {
      out.timeline.push_back({t, running, waiting, blocks});
      if (out.timeline.size() >= kMaxTimeline) {  // bounded: every other sample, half as often
        for (size_t i = 0; 2 * i < out.timeline.size(); ++i) out.timeline[i] = out.timeline[2 * i];
        out.timeline.resize((out.timeline.size() + 1) / 2);
        interval *= 2;
      }
      next_sample = t + interval;
    }
    last_t = t;
  };
  auto on_end = [&](double t) {
    ++ended;
    if (progress && ended % 2000 == 0) progress(ended, total);
    if (closed && next < total) sent.emplace_back(t, next++);
  };

  for (;;) {
    double step_t = kNever;
    int who = -1;
    for (int i = 0; i < config.replicas; ++i) {
      if (replicas[i].step_end < step_t) {
        step_t = replicas[i].step_end;
        who = i;
      }
    }
    const double arrive_t = next_arrival();
    if (who < 0 && arrive_t == kNever) break;
    if (who >= 0 && step_t <= arrive_t) {
      advance(step_t);
      replicas[who].EndStep(step_t, [&](int64_t) {
        --in_system;
        on_end(step_t);
      });
      if (replicas[who].HasWork()) replicas[who].StartStep(step_t);
      continue;
    }
    advance(arrive_t);
    int64_t id = 0;
    if (closed) {
      id = sent.front().second;
      sent.pop_front();
    } else {
      id = next++;
    }
    RequestRecord& r = out.records[id];
    r.arrival_ms = arrive_t;
    const Request& q = r.request;
    const int64_t blocks = CeilDiv(int64_t{q.input_tokens} + q.output_tokens, config.block_size);
    if (!config.enable_chunked_prefill && q.input_tokens > table.prefill_buckets.back()) {
      r.reject_reason = StrCat("input_tokens ", q.input_tokens, " > the largest context-encoding bucket (",
                               table.prefill_buckets.back(), ")");
    } else if (!config.enable_chunked_prefill && q.input_tokens > config.max_num_batched_tokens) {
      r.reject_reason = StrCat("input_tokens ", q.input_tokens, " > max_num_batched_tokens (",
                               config.max_num_batched_tokens, ")");
    } else if (int64_t{q.input_tokens} + q.output_tokens > max_len) {
      r.reject_reason = StrCat("input_tokens + output_tokens ", int64_t{q.input_tokens} + q.output_tokens,
                               " > max_model_len (", max_len, ")");
    } else if (table.kv_blocks > 0 && blocks > table.kv_blocks) {
      r.reject_reason = StrCat("needs ", blocks, " KV blocks > the ", table.kv_blocks, " a replica holds");
    }
    if (!r.reject_reason.empty()) {
      r.rejected = true;
      on_end(arrive_t);
      continue;
    }
    int target = 0;
    if (config.load_balance == LoadBalance::kRoundRobin) {
      target = static_cast<int>(rr++ % config.replicas);
    } else {
      for (int i = 1; i < config.replicas; ++i) {
        if (replicas[i].Outstanding() < replicas[target].Outstanding()) target = i;
      }
    }
    r.replica = target;
    ++in_system;
    replicas[target].Enqueue(id);
    if (replicas[target].step_end == kNever) replicas[target].StartStep(arrive_t);
  }
  out.duration_ms = std::isnan(last_t) ? 0 : last_t - first_t;
  if (progress && ended % 2000 != 0) progress(ended, total);
  return out;
}

}  // namespace nkisim::serving
