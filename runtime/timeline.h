// The scoreboard clock and instruction timeline of one physical core.
//
// Each engine (PE, Vector, Scalar, GpSimd, the 16 DMA engines, the intra-LNC link, the rank's
// collective engine) has a free_at time. DMA transfers are recorded twice: once whole, trigger to
// completion, on their queue's row (an instruction), and once per engine as that engine's share
// (runtime/dma_engines.h), which is what occupies the engine. An instruction starts at max(engine free_at, ready time
// of its operands) and holds its engine until it ends. All times are simulated nanoseconds.
// Recording is O(1) per instruction and allocates nothing per record beyond amortised growth.
// Not thread-safe: one core's timeline is written by that core's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/hardware_profile.h"

namespace nkisim {

enum class Engine : uint8_t {
  kPE = 0,
  kVector = 1,
  kScalar = 2,
  kGpSimd = 3,
  kDma0 = 4,  // kDma0 + e for DMA engine e, e < kMaxDmaEngineRows
  kLink = 20,
  kCollective = 21,
  kDmaQueue0 = 22,  // kDmaQueue0 + q: the row of DMA queue q's transfers, q < kMaxDmaQueues
};
inline constexpr int kMaxDmaQueues = 16;
inline constexpr int kMaxDmaEngineRows = 16;
inline constexpr int kNumEngines = 38;

inline Engine DmaEngine(int e) { return static_cast<Engine>(static_cast<int>(Engine::kDma0) + e); }
inline Engine DmaQueue(int q) {
  return static_cast<Engine>(static_cast<int>(Engine::kDmaQueue0) + q);
}
inline int EngineIndex(Engine e) { return static_cast<int>(e); }
// A DMA engine (what a transfer's share occupies).
inline bool IsDma(Engine e) {
  return EngineIndex(e) >= EngineIndex(Engine::kDma0) &&
         EngineIndex(e) < EngineIndex(Engine::kDma0) + kMaxDmaEngineRows;
}
// A DMA queue's row (whole transfers, trigger to completion).
inline bool IsDmaQueue(Engine e) {
  return EngineIndex(e) >= EngineIndex(Engine::kDmaQueue0) &&
         EngineIndex(e) < EngineIndex(Engine::kDmaQueue0) + kMaxDmaQueues;
}
// "PE", "Vector", "Scalar", "GpSimd", "DMA3" (engine 3), "Link", "Collective", "DMA queue 3".
std::string EngineName(Engine e);

struct InstructionRecord {
  const char* name;  // static string: the instruction's mnemonic
  Engine engine;
  double start_ns;
  double end_ns;
  int64_t bytes;     // bytes moved (DMA, link) or read+written (compute); a share: its bytes
  int64_t flops;
  std::array<char, 104> shapes;  // operands, e.g. "dst[128,512]fp32 stationary[128,128]bf16 ..."
};

struct CoreSummary {
  int core_id = 0;
  double sim_time_ns = 0;  // end of the last instruction
  std::array<double, kNumEngines> busy_ns{};
  int64_t instructions = 0;
  int64_t flops = 0;
  int64_t dma_bytes = 0;
  double achieved_tflops = 0;
  double peak_tflops = 0;
  double busy_percent(Engine e) const;
};

class Timeline {
 public:
  double free_at(Engine e) const { return free_at_[EngineIndex(e)]; }
  // Latest free_at over all engines: when everything issued so far has completed.
  double now() const;
  // Moves every engine's free_at to at least t (barriers and joins).
  void AdvanceAllTo(double t);

  // Holds engine e over [start, end]. REQUIRES: start >= free_at(e).
  void Occupy(Engine e, double start_ns, double end_ns);
  void Record(const char* name, Engine e, double start_ns, double end_ns, int64_t bytes,
              int64_t flops, std::string_view shapes);
  // One DMA engine's share of a transfer: occupies the engine over [start, end] and is kept in
  // shares() (with `shapes`, e.g. "queue 3, 8 descriptors") when every record is kept; it is not
  // an instruction and its bytes are counted with the transfer's Record on its queue row.
  // busy_ns: the engine time it takes (<= end - start).
  void RecordShare(const char* name, Engine engine, double start_ns, double end_ns, double busy_ns,
                   int64_t bytes, std::string_view shapes);

  // Which Record calls are kept as records (every call adds to the totals Summarize reports):
  //   kAll: every one (a trace is written from them; the default);
  //   kCollectives: only Collective-engine ones, a handful a phase (a job without a trace, whose
  //     report names each collective's algorithm), so memory stays flat however many
  //     instructions a phase runs;
  //   kNone: none (a long host-timed loop), and callers may skip formatting `shapes`.
  enum class Keep { kAll, kCollectives, kNone };
  void set_keep(Keep keep) { keep_ = keep; }
  void set_keep_records(bool keep) { keep_ = keep ? Keep::kAll : Keep::kNone; }
  // Whether kAll also keeps the DMA engines' shares (default: yes). A multi-rank job's trace
  // leaves them out (16 a transfer on every rank would outgrow its control messages): it has the
  // transfers on their queues' rows; a kernel command's or Python run's trace has the shares.
  void set_keep_shares(bool keep) { keep_shares_ = keep; }
  // True when some records are kept (callers format `shapes` then).
  bool keeps_records() const { return keep_ != Keep::kNone; }
  // True when a Record on engine e is kept (callers skip formatting `shapes` otherwise: in a
  // timing job that keeps only collectives, formatting every operand was a third of its host time).
  bool keeps(Engine e) const {
    return keep_ == Keep::kAll || (keep_ == Keep::kCollectives && e == Engine::kCollective);
  }
  // True when a RecordShare is kept (callers skip formatting its label otherwise).
  bool keeps_shares() const { return keep_ == Keep::kAll && keep_shares_; }
  // Every kept record since the start.
  const std::vector<InstructionRecord>& records() const { return records_; }
  // Every kept DMA engine share since the start (RecordShare), in the order recorded.
  const std::vector<InstructionRecord>& shares() const { return shares_; }
  // Bytes moved by DMA transfers, the Link and collectives since the start, kept or not.
  int64_t moved_bytes() const { return moved_bytes_; }
  CoreSummary Summarize(int core_id, const HardwareProfile& profile) const;

 private:
  void KeepRecord(std::vector<InstructionRecord>& into, const char* name, Engine e,
                  double start_ns, double end_ns, int64_t bytes, int64_t flops,
                  std::string_view shapes);

  std::array<double, kNumEngines> free_at_{};
  std::array<double, kNumEngines> busy_ns_{};
  std::vector<InstructionRecord> records_;
  std::vector<InstructionRecord> shares_;
  Keep keep_ = Keep::kAll;
  bool keep_shares_ = true;
  // Totals over every Record call, kept or not.
  int64_t instructions_ = 0, flops_ = 0, dma_bytes_ = 0, moved_bytes_ = 0;
  double last_end_ns_ = 0;
};

// Multi-line human summary with units, e.g. "core 0: simulated time 1234.5 ns ...".
std::string FormatSummary(const CoreSummary& summary);

}  // namespace nkisim
