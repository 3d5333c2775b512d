// One physical NeuronCore: its engines' clock (Timeline), its SBUF and PSUM allocators, its DMA
// engines and queues with its port onto HBM (runtime/dma_engines.h). ISA instructions run on the thread's current core, set by
// LogicalCore::Launch (or by ScopedCurrentCore in host code and tests).
#pragma once

#include <memory>
#include <string>

#include "runtime/allocator.h"
#include "runtime/dma_engines.h"
#include "runtime/hardware_profile.h"
#include "runtime/tile.h"
#include "runtime/pe_throttle.h"
#include "runtime/timeline.h"

namespace nkisim {

class LogicalCore;

class NeuronCore {
 public:
  NeuronCore(int id, const HardwareProfile& profile, LogicalCore* owner = nullptr);

  int id() const { return id_; }
  const HardwareProfile& profile() const { return profile_; }
  Timeline& timeline() { return timeline_; }
  const Timeline& timeline() const { return timeline_; }
  LogicalCore* logical_core() const { return owner_; }

  // shape = {partitions, free...}: 1 <= partitions <= profile partitions, 1..4 free dims.
  // Throws Error(kInvalidArgument) for a bad shape, Error(kOutOfResources) when it does not fit.
  Tile AllocateSbuf(const std::string& name, const Shape& shape, DType dtype);
  Tile AllocatePsum(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32);
  const OnChipAllocator& sbuf() const { return *sbuf_; }
  const OnChipAllocator& psum() const { return *psum_; }

  // The DMA queue whose issue stage frees first (lowest index on ties): deterministic spreading.
  int EarliestDmaQueue() const { return dma_.EarliestQueue(); }
  DmaEngines& dma() { return dma_; }
  const DmaEngines& dma() const { return dma_; }
  // Charges bytes to this core's HBM port no earlier than earliest_ns (the first gap that fits);
  // returns when they are through. The port moves hbm_gbps_per_core.
  double ReserveHbm(double earliest_ns, int64_t bytes) { return dma_.ReserveHbm(earliest_ns, bytes); }

  PeThrottle& pe_throttle() { return pe_throttle_; }  // the PE current-ramp state

  CoreSummary Summary() const { return timeline_.Summarize(id_, profile_); }

 private:
  Tile Allocate(const std::shared_ptr<OnChipAllocator>& allocator, const std::string& name,
                const Shape& shape, DType dtype);

  int id_;
  HardwareProfile profile_;
  LogicalCore* owner_;
  Timeline timeline_;
  std::shared_ptr<OnChipAllocator> sbuf_;
  std::shared_ptr<OnChipAllocator> psum_;
  DmaEngines dma_;  // after profile_, which it refers to
  PeThrottle pe_throttle_;
};

// The core the calling thread issues instructions on. Throws Error(kInternal) when none is set.
NeuronCore& CurrentCore();
bool HasCurrentCore();

class ScopedCurrentCore {
 public:
  explicit ScopedCurrentCore(NeuronCore& core);
  ~ScopedCurrentCore();
  ScopedCurrentCore(const ScopedCurrentCore&) = delete;
  ScopedCurrentCore& operator=(const ScopedCurrentCore&) = delete;

 private:
  NeuronCore* previous_;
};

}  // namespace nkisim
