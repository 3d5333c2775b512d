#include "runtime/host_memory.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace nkisim {
namespace {

// Frees `count` touched blocks of `bytes` each (below the mmap threshold, so they stay in the
// heap once the policy is set).
void AllocateTouchAndFree(size_t count, size_t bytes) {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (size_t i = 0; i < count; ++i) {
    blocks.emplace_back(new char[bytes]);
    std::memset(blocks.back().get(), 1, bytes);
  }
}

TEST(HostMemoryTest, FreedBlocksStayInTheHeapUntilTheyExceedWhatARankKeeps) {
  SetRankMemoryPolicy();
  if (!kGlibcHeap) {
    // A sanitizer's allocator: no heap to measure or trim, as documented.
    AllocateTouchAndFree(96, size_t{1} << 20);
    EXPECT_EQ(FreeHeapBytes(), 0u);
    EXPECT_FALSE(ReturnFreeHeap(0));
    return;
  }
  AllocateTouchAndFree(8, size_t{1} << 20);  // 8 MiB: kept for reuse
  EXPECT_GE(FreeHeapBytes(), size_t{8} << 20);
  EXPECT_FALSE(ReturnFreeHeap(FreeHeapBytes()));  // not more than the budget: left alone
  AllocateTouchAndFree(96, size_t{1} << 20);      // 96 MiB of 1 MiB blocks, all below the threshold
  EXPECT_GE(FreeHeapBytes(), size_t{96} << 20);
  EXPECT_TRUE(ReturnFreeHeap());                  // more than kRankKeepFreeHeapBytes: returned
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// What another thread freed (a core's tiles) this thread reuses (a golden) without touching
// fresh pages: 16 MiB again costs well under the 4,096 faults of fresh memory.
TEST(HostMemoryTest, OneHeapServesEveryThread) {
  SetRankMemoryPolicy();
  if (!kGlibcHeap) {  // a sanitizer's allocator: no glibc heap to share, as documented
    EXPECT_EQ(FreeHeapBytes(), 0u);
    return;
  }
  std::thread([] { AllocateTouchAndFree(16, size_t{1} << 20); }).join();
  const long before = MinorFaults();
  AllocateTouchAndFree(16, size_t{1} << 20);
  const long fresh = MinorFaults() - before;
  EXPECT_LT(fresh, 1024) << fresh << " page faults for 16 MiB the other thread freed";
}

}  // namespace
}  // namespace nkisim
