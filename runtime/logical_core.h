// A logical NeuronCore: 1 or 2 physical cores sharing one HBM address space (LNC = 1 or 2).
//
// Launch() runs a kernel SPMD: one program per physical core (prg_id = core index, n_prgs = LNC),
// concurrently: program 0 on the launching thread, the others on the threads of a Boost.Asio
// thread pool (LNC - 1 threads). Inside a kernel the two cores talk
// through SendRecv (tile to peer tile) and Barrier; both join the two cores' simulated clocks
// (max of the two, plus the link's latency and bytes / bandwidth).
//
// Failure never hangs: when one program throws, the other's pending SendRecv / Barrier wakes
// with Error(kCommError) and Launch rethrows the first root error. A wait also ends with
// Error(kTimeout) after wait_timeout of host time (default 120 s).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/tile.h"

namespace boost::asio {
class thread_pool;
}

namespace nkisim {

class LogicalCore;

struct KernelContext {
  int prg_id;      // this program's physical core index in [0, n_prgs)
  int n_prgs;      // LNC
  NeuronCore& core;
  LogicalCore& lnc;
};

class LogicalCore {
 public:
  // Throws Error(kInvalidArgument) unless lnc is 1 or 2.
  LogicalCore(int lnc, const HardwareProfile& profile, int id = 0);
  ~LogicalCore();
  LogicalCore(const LogicalCore&) = delete;
  LogicalCore& operator=(const LogicalCore&) = delete;

  int id() const { return id_; }
  int lnc() const { return static_cast<int>(cores_.size()); }
  NeuronCore& core(int i) { return *cores_.at(i); }
  const NeuronCore& core(int i) const { return *cores_.at(i); }
  const HardwareProfile& profile() const { return cores_[0]->profile(); }

  // Runs kernel once per physical core, concurrently; returns when all finished. Rethrows the
  // first error (a program's own error is preferred over the kCommError it caused in its peer).
  void Launch(const std::function<void(const KernelContext&)>& kernel);

  // Called by both programs, in the same order: sends `send` to the peer core and receives the
  // peer's send into `recv` (same shape and dtype). REQUIRES: lnc() == 2, inside Launch.
  void SendRecv(NeuronCore& self, const Tile& send, const Tile& recv);
  // Waits until both programs arrive; afterwards every engine of both cores is free no earlier
  // than the later core's clock plus the link latency.
  void Barrier(NeuronCore& self);

  void set_wait_timeout(std::chrono::milliseconds timeout) { wait_timeout_ = timeout; }
  // Latest simulated end over all engines of all physical cores, in ns.
  double now() const;

 private:
  struct Message {
    std::vector<std::byte> data;
    DType dtype;
    Shape shape;
    double ready_ns;
  };
  void Abort(const std::string& reason);
  // Waits on lock until pred holds; throws on abort or timeout. what names the operation.
  template <typename Pred>
  void WaitFor(std::unique_lock<std::mutex>& lock, NeuronCore& self, const char* what, Pred pred);

  int id_;
  std::vector<std::unique_ptr<NeuronCore>> cores_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
  std::chrono::milliseconds wait_timeout_{120000};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Message> inbox_[2];  // inbox_[c] holds messages sent to core c
  bool aborted_ = false;
  std::string abort_reason_;
  int barrier_arrived_ = 0;
  uint64_t barrier_generation_ = 0;
  double barrier_latest_ = 0.0;
  double barrier_release_ = 0.0;
};

}  // namespace nkisim
