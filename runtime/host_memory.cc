#include "runtime/host_memory.h"

#include <malloc.h>

namespace nkisim {

void SetRankMemoryPolicy() {
  if (!kGlibcHeap) return;
  // Setting either value also turns off glibc's self-adjusting threshold, so both stay as set.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kRankMmapThresholdBytes));
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

size_t FreeHeapBytes() { return kGlibcHeap ? mallinfo2().fordblks : 0; }

bool ReturnFreeHeap(size_t keep_bytes) {
  if (FreeHeapBytes() <= keep_bytes) return false;
  malloc_trim(0);
  return true;
}

}  // namespace nkisim
