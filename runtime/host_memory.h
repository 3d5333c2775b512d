// How a process that hosts ranks uses the machine's memory (glibc malloc).
//
// Many ranks share one host, and every page a rank touches for the first time costs a page fault,
// which is expensive on virtual machines (measured on a 2-core VM: the default 64-rank job spent
// 46 of its 55 s in the kernel with every buffer of 256 KiB and more mapped and unmapped on its
// own; 3.9 M faults against 1.1 M when the heap keeps them). So a rank keeps freed buffers in its
// heap for reuse while a phase runs, and hands large free space back between phases, which keeps
// the ranks' summed memory bounded when one phase (a prefill check) needs far more than the rest.
#pragma once

#include <cstddef>

namespace nkisim {

// False in a build whose sanitizer (ASan, TSan, MSan) replaces malloc: there is no glibc heap
// to tune, SetRankMemoryPolicy() does nothing, FreeHeapBytes() is 0 and ReturnFreeHeap() returns
// false.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kGlibcHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
inline constexpr bool kGlibcHeap = false;
#else
inline constexpr bool kGlibcHeap = true;
#endif
#else
inline constexpr bool kGlibcHeap = true;
#endif

// Buffers below this come from the heap and are reused; larger ones are mapped on their own and
// returned to the system when freed.
inline constexpr size_t kRankMmapThresholdBytes = size_t{32} << 20;
// Free heap a rank may keep between phases; more is returned (ReturnFreeHeap).
inline constexpr size_t kRankKeepFreeHeapBytes = size_t{64} << 20;

// Sets the policy above for this process (fixed mmap threshold; the heap top is trimmed only
// beyond 256 MiB, so trimming happens where ReturnFreeHeap decides; one heap shared by all
// threads, so what the cores' threads free the main thread reuses and the other way round).
// Call once, early, before the process starts threads that allocate.
void SetRankMemoryPolicy();

// If the heap holds more than `keep_bytes` free, returns the free pages to the system
// (malloc_trim) and returns true; otherwise leaves them for reuse and returns false.
// Thread-safe (ranks run as threads in the in-process timing-only job).
bool ReturnFreeHeap(size_t keep_bytes = kRankKeepFreeHeapBytes);

// Bytes free inside the heap (glibc's fordblks).
size_t FreeHeapBytes();

}  // namespace nkisim
