#include "runtime/neuron_core.h"

#include <algorithm>

#include "runtime/cost_model.h"
#include "runtime/error.h"

namespace nkisim {
namespace {
thread_local NeuronCore* current_core = nullptr;
}  // namespace

NeuronCore::NeuronCore(int id, const HardwareProfile& profile, LogicalCore* owner)
    : id_(id), profile_(profile), owner_(owner),
      sbuf_(std::make_shared<OnChipAllocator>(MemorySpace::kSbuf,
                                              profile.sbuf_bytes_per_partition(), 64)),
      psum_(std::make_shared<OnChipAllocator>(
          MemorySpace::kPsum, profile.psum_bytes_per_partition(),
          profile.psum_bytes_per_partition() / profile.psum_banks())),
      dma_(profile_) {}

Tile NeuronCore::AllocateSbuf(const std::string& name, const Shape& shape, DType dtype) {
  return Allocate(sbuf_, name, shape, dtype);
}

Tile NeuronCore::AllocatePsum(const std::string& name, const Shape& shape, DType dtype) {
  return Allocate(psum_, name, shape, dtype);
}

Tile NeuronCore::Allocate(const std::shared_ptr<OnChipAllocator>& allocator,
                          const std::string& name, const Shape& shape, DType dtype) {
  const bool rank_ok = shape.size() >= 2 && shape.size() <= 1 + static_cast<size_t>(kMaxFreeRank);
  const bool dims_ok = std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d > 0; });
  if (!rank_ok || !dims_ok || shape[0] > profile_.partitions()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(MemorySpaceName(allocator->space()), " tile '", name, "' ", ShapeString(shape),
                 ": needs {partitions, free...} with 1 <= partitions <= ", profile_.partitions(),
                 ", 1 to ", kMaxFreeRank, " free dims, every dim > 0"));
  }
  Shape free_shape(shape.begin() + 1, shape.end());
  return Tile(std::make_shared<TileBuffer>(this, allocator, name, dtype, shape[0], free_shape));
}

NeuronCore& CurrentCore() {
  if (current_core == nullptr) {
    Raise(ErrorCode::kInternal,
          "no current NeuronCore on this thread: issue instructions inside LogicalCore::Launch "
          "or under a ScopedCurrentCore");
  }
  return *current_core;
}

bool HasCurrentCore() { return current_core != nullptr; }

ScopedCurrentCore::ScopedCurrentCore(NeuronCore& core) : previous_(current_core) {
  current_core = &core;
}

ScopedCurrentCore::~ScopedCurrentCore() { current_core = previous_; }

}  // namespace nkisim
