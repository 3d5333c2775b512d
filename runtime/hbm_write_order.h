// The order in which the writes of the two programs of an LNC 2 launch land in their shared HBM.
//
// The two programs run on two host threads, so without this their writes to one HBM byte land in
// whatever order the threads happen to run (host order). The device orders them by when each
// write completes, so HbmWriteOrder keeps, for every byte of every HBM tensor written through it,
// the value of the write that lands last in simulated time. The rule, per byte:
//   * a write lands at its instruction's simulated end (a DMA: when its last descriptor
//     completes; the whole write at once, not byte by byte);
//   * a program's own writes land in its program order: a later write of the same program lands
//     no earlier than that program's earlier write to the byte (its value wins, at the later of
//     the two times);
//   * between the two programs the later landing time wins; at equal times program 1's write
//     wins (the higher program id), whichever thread ran first.
// So the HBM contents after a launch depend on simulated times only, never on host scheduling.
//
// Accumulating writes (a read-modify-write of HBM such as dma_scatter_add, or dma_compute into one
// of its own sources) are not routed through it: they add onto whatever has landed, and
// additions commute, so their host order gives the device's sum (up to rounding order).
//
// What it does not order: reads. A program reads the bytes that have landed on the host so far;
// a kernel that reads what the other program writes synchronizes first (core_barrier, sendrecv),
// as on the device, and then host order and simulated order agree. Timing-only runs move no
// values and are left alone. Memory: 4 bytes of stamp per byte of each HBM buffer written.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim {

class HbmWriteOrder {
 public:
  HbmWriteOrder();

  // Runs `write`, one instruction issued by program `prg` whose HBM result is `dst`, then applies
  // the rule above to every byte of dst: a byte a later-landing write of the other program already
  // holds gets its value from before `write` back. Writes through one HbmWriteOrder are
  // serialized (the lock is held across `write`, which must not wait for the other program).
  // An exception from `write` propagates with dst's stamps unchanged.
  void Write(const TensorView& dst, int prg, const std::function<void()>& write);
  // The same for an instruction that writes only the elements of base's buffer at `offsets`
  // (in elements of base's dtype, from the buffer's start): a scatter through an index tile.
  void Write(const TensorView& base, const std::vector<int64_t>& offsets, int prg,
             const std::function<void()>& write);

  // The landing time and program of the write whose value byte `byte` of dst's buffer holds
  // ({-inf, -1} if none through this order); for tests.
  struct Landing {
    double ns;
    int prg;
  };
  Landing LandingOf(const TensorView& dst, int64_t byte) const;

 private:
  // each(fn) calls fn(offset) for the `count` element offsets written, twice, in one order.
  using ForEach = std::function<void(const std::function<void(int64_t)>&)>;
  void WriteOffsets(const TensorView& base, const ForEach& each, size_t count, int prg,
                    const std::function<void()>& write);
  struct Stamps {
    TensorView keep;  // holds the buffer, so its address is not reused while stamped
    std::vector<uint32_t> write;  // per byte: index into landings_
  };
  mutable std::mutex mutex_;
  std::vector<Landing> landings_;  // [0]: not written through this order
  std::unordered_map<const HbmBuffer*, Stamps> stamps_;
};

}  // namespace nkisim
