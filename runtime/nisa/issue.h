// How every nisa instruction is issued on the current core: collect its operands (checking they
// live on that core), find its start on the scoreboard, record it on the timeline and advance its
// operands' ready times. Also the shared legality-error helper, so every instruction words its
// errors the same way: "<instruction>: operand '<name>' <tile>: <rule>".
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "runtime/dma_engines.h"
#include "runtime/engine_costs.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::nisa {

class Issue {
 public:
  Issue(const char* name, Engine engine);

  NeuronCore& core() const { return *core_; }
  const HardwareProfile& profile() const { return core_->profile(); }
  Engine engine() const { return engine_; }

  Issue& Reads(const char* operand, const Tile& tile);
  Issue& Writes(const char* operand, const Tile& tile);
  Issue& Reads(const char* operand, const TensorView& tensor);
  Issue& Writes(const char* operand, const TensorView& tensor);

  // Earliest start: the engine is free, every read operand is written, every written tile's
  // earlier readers are done.
  double Start() const;
  // Records the instruction over [start, end] and advances the operands' ready times.
  void Finish(double start_ns, double end_ns, int64_t bytes, int64_t flops);
  // Finish(Start(), Start() + duration_ns, ...); returns the end time.
  double Commit(double duration_ns, int64_t bytes, int64_t flops);
  // A DMA transfer (the Issue's engine is its queue's row, DmaQueue(q)): schedules it on the
  // core's DMA engines no earlier than Start() and request.ready_ns, records it whole on the
  // queue's row and each engine's share on that engine's row, and makes its written operands
  // ready at its completion. Returns the completion time.
  double FinishTransfer(DmaRequest request, int64_t bytes);
  // True when a read tile became ready exactly when this engine became free: it is the output of
  // the engine's previous instruction, which this one directly follows, so it pays
  // engine_dependent_overhead_cycles (the perf guide's back-to-back dependent case). A wait on
  // another engine's or a DMA's output does not (that producer's completion is already priced).
  bool WaitsOnOperand() const;
  // A Vector/Scalar/GpSimd instruction priced by its cost-table row (runtime/engine_costs.h),
  // with the dependent overhead when WaitsOnOperand(); returns the end time.
  double CommitRow(const CostRow& row, int64_t n, bool narrow, int64_t bytes, int64_t flops);
  // A PE instruction of full_rate_ns at the PE's full rate, stretched by the current-ramp limit
  // (runtime/pe_throttle.h); returns the end time.
  double CommitOnPe(double full_rate_ns, int64_t bytes, int64_t flops);

 private:
  void AddShape(const char* operand, const Shape& shape, DType dtype);
  void CheckCore(const char* operand, const Tile& tile) const;

  const char* name_;
  Engine engine_;
  NeuronCore* core_;
  bool keep_shapes_;  // the record is kept: AddShape formats the operands' text
  std::array<TileBuffer*, 6> tile_reads_{};
  std::array<TileBuffer*, 2> tile_writes_{};
  std::array<HbmBuffer*, 4> hbm_reads_{};
  std::array<HbmBuffer*, 2> hbm_writes_{};
  int n_tile_reads_ = 0, n_tile_writes_ = 0, n_hbm_reads_ = 0, n_hbm_writes_ = 0;
  std::string shapes_;
};

// Per-thread fp32 scratch rows for the functional path, reused across instructions so the hot
// loop does not allocate. Slots 0..5; each holds at least n floats after the call.
float* ScratchRow(int slot, int64_t n);

// Throws Error(kInvalidArgument): "<instruction>: operand '<operand>' <tile>: <rule>".
[[noreturn]] void Illegal(const char* instruction, const char* operand, const Tile& tile,
                          const std::string& rule);
// Throws unless the PSUM view dst lies inside one bank of its partitions (a matmul output).
void CheckPsumOneBank(const char* instruction, const char* operand, const Tile& dst);
// The PE's output rules shared by nc_matmul and nc_matmul_mx: M = stationary's free size <=
// pe_cols, N = moving's <= pe_max_moving_free, dst an fp32 PSUM [M, N] contiguous view in one bank.
void CheckMatmulOutput(const char* instruction, const Tile& stationary, const Tile& moving,
                       const Tile& dst, int64_t m, int64_t n);
// Throws unless every operand has the same partition count as the first.
void CheckSamePartitions(const char* instruction, const char* a_name, const Tile& a,
                         const char* b_name, const Tile& b);

}  // namespace nkisim::nisa
