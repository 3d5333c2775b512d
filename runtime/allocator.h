// Per-core allocator of one on-chip memory (SBUF or PSUM). A tile occupies the same byte range
// [offset, offset + bytes) in every partition, as the hardware's tile allocator does, so the budget
// is bytes per partition. PSUM is allocated in whole banks (a matmul output must sit in one bank).
// Thread-safe: tiles may be released from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace nkisim {

enum class MemorySpace : uint8_t { kSbuf, kPsum };
const char* MemorySpaceName(MemorySpace space);  // "SBUF", "PSUM"

class OnChipAllocator {
 public:
  // granule: allocation unit and alignment in bytes (the bank size for PSUM).
  OnChipAllocator(MemorySpace space, uint64_t bytes_per_partition, uint64_t granule);

  // Returns the byte offset of a new range. Throws Error(kOutOfResources) naming the tile
  // (what), the request and what is free when nothing fits.
  uint64_t Allocate(const std::string& what, uint64_t bytes_per_partition);
  void Free(uint64_t offset);

  MemorySpace space() const { return space_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t granule() const { return granule_; }
  uint64_t used_bytes() const;
  uint64_t largest_free_range() const;

 private:
  uint64_t LargestFreeRangeLocked() const;

  const MemorySpace space_;
  const uint64_t capacity_;
  const uint64_t granule_;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> used_;  // offset -> rounded size
  uint64_t used_bytes_ = 0;
};

}  // namespace nkisim
