#include "runtime/allocator.h"

#include <algorithm>

#include "runtime/error.h"

namespace nkisim {

const char* MemorySpaceName(MemorySpace space) {
  return space == MemorySpace::kSbuf ? "SBUF" : "PSUM";
}

OnChipAllocator::OnChipAllocator(MemorySpace space, uint64_t bytes_per_partition, uint64_t granule)
    : space_(space), capacity_(bytes_per_partition), granule_(granule) {}

uint64_t OnChipAllocator::Allocate(const std::string& what, uint64_t bytes) {
  const uint64_t rounded = (std::max<uint64_t>(bytes, 1) + granule_ - 1) / granule_ * granule_;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t candidate = 0;  // first fit: walk the used ranges in address order
  for (const auto& [offset, size] : used_) {
    if (offset - candidate >= rounded) break;
    candidate = offset + size;
  }
  if (candidate + rounded > capacity_) {
    Raise(ErrorCode::kOutOfResources,
          StrCat(MemorySpaceName(space_), " allocation of tile ", what, " needs ", bytes,
                 " B per partition", rounded != bytes ? StrCat(" (", rounded, " B in ", granule_, " B units)") : "",
                 "; free ", capacity_ - used_bytes_, " B of ", capacity_,
                 " B per partition, largest free range ", LargestFreeRangeLocked(), " B"));
  }
  used_.emplace(candidate, rounded);
  used_bytes_ += rounded;
  return candidate;
}

void OnChipAllocator::Free(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = used_.find(offset);
  if (it == used_.end()) return;
  used_bytes_ -= it->second;
  used_.erase(it);
}

uint64_t OnChipAllocator::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

uint64_t OnChipAllocator::largest_free_range() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return LargestFreeRangeLocked();
}

uint64_t OnChipAllocator::LargestFreeRangeLocked() const {
  uint64_t largest = 0, cursor = 0;
  for (const auto& [offset, size] : used_) {
    largest = std::max(largest, offset - cursor);
    cursor = offset + size;
  }
  return std::max(largest, capacity_ - cursor);
}

}  // namespace nkisim
