#include "runtime/timeline.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/error.h"

namespace nkisim {

std::string EngineName(Engine e) {
  switch (e) {
    case Engine::kPE: return "PE";
    case Engine::kVector: return "Vector";
    case Engine::kScalar: return "Scalar";
    case Engine::kGpSimd: return "GpSimd";
    case Engine::kLink: return "Link";
    case Engine::kCollective: return "Collective";
    default:
      if (IsDmaQueue(e)) return StrCat("DMA queue ", EngineIndex(e) - EngineIndex(Engine::kDmaQueue0));
      return StrCat("DMA", EngineIndex(e) - EngineIndex(Engine::kDma0));
  }
}

double CoreSummary::busy_percent(Engine e) const {
  return sim_time_ns > 0 ? 100.0 * busy_ns[EngineIndex(e)] / sim_time_ns : 0.0;
}

double Timeline::now() const { return *std::max_element(free_at_.begin(), free_at_.end()); }

void Timeline::AdvanceAllTo(double t) {
  for (double& f : free_at_) f = std::max(f, t);
}

void Timeline::Occupy(Engine e, double start_ns, double end_ns) {
  const int i = EngineIndex(e);
  free_at_[i] = std::max(free_at_[i], end_ns);
  busy_ns_[i] += end_ns - start_ns;
}

void Timeline::Record(const char* name, Engine e, double start_ns, double end_ns, int64_t bytes,
                      int64_t flops, std::string_view shapes) {
  ++instructions_;
  flops_ += flops;
  if (IsDmaQueue(e)) dma_bytes_ += bytes;
  if (IsDmaQueue(e) || e == Engine::kLink || e == Engine::kCollective) moved_bytes_ += bytes;
  last_end_ns_ = std::max(last_end_ns_, end_ns);
  if (keep_ == Keep::kNone || (keep_ == Keep::kCollectives && e != Engine::kCollective)) return;
  KeepRecord(records_, name, e, start_ns, end_ns, bytes, flops, shapes);
}

void Timeline::RecordShare(const char* name, Engine engine, double start_ns, double end_ns,
                           double busy_ns, int64_t bytes, std::string_view shapes) {
  const int i = EngineIndex(engine);
  free_at_[i] = std::max(free_at_[i], end_ns);
  busy_ns_[i] += busy_ns;
  last_end_ns_ = std::max(last_end_ns_, end_ns);
  if (keep_ == Keep::kAll && keep_shares_) KeepRecord(shares_, name, engine, start_ns, end_ns, bytes, 0, shapes);
}

void Timeline::KeepRecord(std::vector<InstructionRecord>& into, const char* name, Engine e,
                          double start_ns, double end_ns, int64_t bytes, int64_t flops,
                          std::string_view shapes) {
  InstructionRecord r{name, e, start_ns, end_ns, bytes, flops, {}};
  const size_t n = std::min(shapes.size(), r.shapes.size() - 1);
  std::memcpy(r.shapes.data(), shapes.data(), n);
  r.shapes[n] = '\0';
  into.push_back(r);
}

CoreSummary Timeline::Summarize(int core_id, const HardwareProfile& profile) const {
  CoreSummary s;
  s.core_id = core_id;
  s.busy_ns = busy_ns_;
  s.instructions = instructions_;
  s.sim_time_ns = last_end_ns_;
  s.flops = flops_;
  s.dma_bytes = dma_bytes_;
  s.peak_tflops = PeakBf16Tflops(profile);
  s.achieved_tflops = s.sim_time_ns > 0 ? s.flops / s.sim_time_ns / 1000.0 : 0.0;
  return s;
}

std::string FormatSummary(const CoreSummary& s) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof line,
                "core %d: simulated time %.1f ns, %lld instructions, %.3f GFLOP, %.3f MB moved by DMA\n",
                s.core_id, s.sim_time_ns, static_cast<long long>(s.instructions), s.flops / 1e9,
                s.dma_bytes / 1e6);
  out += line;
  std::snprintf(line, sizeof line,
                "  achieved %.2f TFLOP/s of %.2f TFLOP/s bf16 peak (%.1f%%)\n", s.achieved_tflops,
                s.peak_tflops, s.peak_tflops > 0 ? 100.0 * s.achieved_tflops / s.peak_tflops : 0.0);
  out += line;
  double dma_busy = 0;
  for (int e = 0; e < kMaxDmaEngineRows; ++e) dma_busy += s.busy_ns[EngineIndex(DmaEngine(e))];
  std::snprintf(line, sizeof line,
                "  busy %%: PE %.1f  Vector %.1f  Scalar %.1f  GpSimd %.1f  DMA (mean of %d engines) %.1f"
                "  Link %.1f\n",
                s.busy_percent(Engine::kPE), s.busy_percent(Engine::kVector),
                s.busy_percent(Engine::kScalar), s.busy_percent(Engine::kGpSimd), kMaxDmaEngineRows,
                s.sim_time_ns > 0 ? 100.0 * dma_busy / kMaxDmaEngineRows / s.sim_time_ns : 0.0,
                s.busy_percent(Engine::kLink));
  out += line;
  return out;
}

}  // namespace nkisim
