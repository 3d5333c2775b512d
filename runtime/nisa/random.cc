#include "runtime/nisa/random.h"

#include <mutex>
#include <unordered_map>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"
#include "runtime/rng.h"

namespace nkisim::nisa {
namespace {

struct Stream {
  uint32_t seed = 0;
  uint64_t position = 0;
};

// The streams of all cores, keyed by the core object (NeuronCore has no slot for engine state).
struct Streams {
  std::mutex mutex;
  std::unordered_map<const NeuronCore*, Stream> by_core;
};
Streams& AllStreams() {
  static auto* streams = new Streams();  // never destroyed: cores may draw during exit
  return *streams;
}

// Takes `count` draws from core's stream; returns the seed and the first draw's position.
Stream Take(const NeuronCore& core, int64_t count) {
  Streams& all = AllStreams();
  std::lock_guard<std::mutex> lock(all.mutex);
  Stream& s = all.by_core[&core];
  const Stream first = s;
  s.position += static_cast<uint64_t>(count);
  return first;
}

int64_t Bytes(const Tile& t) { return t.numel() * static_cast<int64_t>(SizeOf(t.dtype())); }

bool Narrow(const Tile& a, const Tile& b) {
  return SizeOf(a.dtype()) <= 2 && SizeOf(b.dtype()) <= 2;
}

void CheckProb(const char* inst, const Tile& dst, const Tile& data, const Scalar& prob) {
  if (!prob.is_column()) {
    if (!(prob.value() >= 0.0f && prob.value() <= 1.0f)) {
      Illegal(inst, "data", data, StrCat("drop probability ", prob.value(), " must be in [0, 1]"));
    }
    return;
  }
  const Tile& column = prob.column();
  if (column.partitions() != dst.partitions() || column.free_size() != 1) {
    Illegal(inst, "prob", column,
            StrCat("a per-partition probability must be [", dst.partitions(), ", 1]"));
  }
  if (!IsFloat(column.dtype()) || (IsInteger(data.dtype()) && column.dtype() != DType::kFloat32)) {
    Illegal(inst, "prob", column, "must be a float column, and fp32 when data is an integer tile");
  }
}

}  // namespace

void random_seed(uint32_t seed) {
  Issue issue("random_seed", Engine::kGpSimd);
  {
    Streams& all = AllStreams();
    std::lock_guard<std::mutex> lock(all.mutex);
    all.by_core[&issue.core()] = Stream{seed, 0};
  }
  issue.CommitRow(cost_rows::kGeneric, 1, false, 0, 0);  // GpSimd: start-up + 1 (no ISA row)
}

void random(const Tile& dst) {
  constexpr const char* kInst = "random";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Writes("dst", dst);
  if (!IsFloat(dst.dtype())) Illegal(kInst, "dst", dst, "random fills a float dtype");
  const int64_t n = dst.free_size();
  const Stream first = Take(issue.core(), dst.numel());
  const CounterRng rng(first.seed, kPrngStreamId);
  float* row = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    for (int64_t i = 0; i < n; ++i) row[i] = rng.Uniform(first.position + p * n + i);
    dst.WriteRow(p, row);
  }
  // No ISA row for random: GpSimd start-up + N, as iota (inferred).
  issue.CommitRow(cost_rows::kIota, n, SizeOf(dst.dtype()) <= 2, Bytes(dst), 0);
}

void dropout(const Tile& dst, const Tile& data, const Scalar& prob) {
  constexpr const char* kInst = "dropout";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Writes("dst", dst);
  if (prob.is_column()) issue.Reads("prob", prob.column());
  if (dst.partitions() != data.partitions() || dst.free_shape() != data.free_shape()) {
    Illegal(kInst, "dst", dst, StrCat("shape must equal data's ", ShapeString(data.shape())));
  }
  if (IsInteger(data.dtype()) && dst.dtype() != data.dtype()) {
    Illegal(kInst, "dst", dst, StrCat("must keep data's integer dtype ", DTypeName(data.dtype())));
  }
  CheckProb(kInst, dst, data, prob);
  const int64_t n = dst.free_size();
  const Stream first = Take(issue.core(), dst.numel());
  const CounterRng rng(first.seed, kPrngStreamId);
  float* x = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, x);
    float rate = prob.value();
    if (prob.is_column()) prob.column().ReadRow(p, &rate);
    for (int64_t i = 0; i < n; ++i) {
      if (rng.Uniform(first.position + p * n + i) < rate) x[i] = 0.0f;
    }
    dst.WriteRow(p, x);
  }
  issue.CommitRow(cost_rows::kDropout, n, Narrow(dst, data), Bytes(dst) + Bytes(data), 0);
}

}  // namespace nkisim::nisa
