// LocalFabric: the clock joins and point-to-point clocks of ranks run as threads (timing-only).
#include "collectives/local_fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

// Every member of every group gets its group's largest clock, round after round, while the
// groups of a set (and two sets) join concurrently.
TEST(LocalFabricTest, JoinMaxGivesEachGroupItsLargestClockEveryRound) {
  constexpr int kWorld = 16, kGroup = 4, kRounds = 200;
  LocalFabric fabric(kWorld);
  std::vector<std::vector<double>> got(kWorld, std::vector<double>(2 * kRounds));
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < kRounds; ++round) {
        // Set "blocks": groups of 4 consecutive ranks; set "all": one group of 16.
        got[r][2 * round] = fabric.JoinMax("blocks", r / kGroup, kGroup, round * 100.0 + r);
        got[r][2 * round + 1] = fabric.JoinMax("all", 0, kWorld, round * 100.0 - r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    for (int round = 0; round < kRounds; ++round) {
      const int last_in_block = (r / kGroup) * kGroup + kGroup - 1;
      ASSERT_EQ(got[r][2 * round], round * 100.0 + last_in_block) << "rank " << r;
      ASSERT_EQ(got[r][2 * round + 1], round * 100.0) << "rank " << r;  // rank 0 has the largest
    }
  }
}

TEST(LocalFabricTest, PointToPointClocksArriveInOrder) {
  LocalFabric fabric(2);
  std::thread sender([&] {
    for (int i = 0; i < 100; ++i) fabric.Send(0, 1, 7, i * 1.5);
  });
  std::vector<double> received;
  for (int i = 0; i < 100; ++i) received.push_back(fabric.Receive(0, 1, 7));
  sender.join();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(received[i], i * 1.5);
}

// A failing rank's Abort wakes the members waiting for it, with a communication error, and no
// later join or receive waits either.
TEST(LocalFabricTest, AbortWakesEveryWaiter) {
  LocalFabric fabric(4);
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int r = 0; r < 3; ++r) {
    waiters.emplace_back([&, r] {
      try {
        fabric.JoinMax("tp", 0, 4, r);  // rank 3 never joins
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kCommError) ++woken;
      }
    });
  }
  std::thread receiver([&] {
    try {
      fabric.Receive(3, 0, 1);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kCommError) ++woken;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fabric.Abort("rank 3 failed");
  for (std::thread& t : waiters) t.join();
  receiver.join();
  EXPECT_EQ(woken.load(), 4);
  EXPECT_THROW(fabric.JoinMax("tp", 0, 4, 0), Error);
  EXPECT_THROW(fabric.Send(0, 1, 1, 0), Error);
}

}  // namespace
}  // namespace nkisim::collectives
