#include "runtime/logical_core.h"

// Boost 1.74's Asio misses this include under C++20 (std::exchange); see docs/toolchain notes.
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <future>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim {

LogicalCore::LogicalCore(int lnc, const HardwareProfile& profile, int id) : id_(id) {
  if (lnc != 1 && lnc != 2) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("logical core ", id, ": lnc is ", lnc, "; it must be 1 or 2"));
  }
  for (int i = 0; i < lnc; ++i) cores_.push_back(std::make_unique<NeuronCore>(i, profile, this));
  // Program 0 runs on the launching thread, the others on the pool: one thread fewer per
  // logical core, and no hand-off (futex wake, context switch) for program 0 at every launch.
  if (lnc > 1) pool_ = std::make_unique<boost::asio::thread_pool>(static_cast<size_t>(lnc - 1));
}

LogicalCore::~LogicalCore() {
  if (pool_) pool_->join();
}

double LogicalCore::now() const {
  double t = 0;
  for (const auto& c : cores_) t = std::max(t, c->timeline().now());
  return t;
}

void LogicalCore::Launch(const std::function<void(const KernelContext&)>& kernel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = false;
    abort_reason_.clear();
    inbox_[0].clear();
    inbox_[1].clear();
    barrier_arrived_ = 0;
  }
  std::vector<std::promise<void>> done(cores_.size());
  std::vector<std::future<void>> results;
  for (auto& d : done) results.push_back(d.get_future());
  // Each program's exception, moved in after its catch block has ended and before done[i] is
  // set, so the pool thread keeps no reference to it: the main thread drops the last one and
  // frees it. (promise::set_exception would not do: it takes the exception_ptr by value and
  // copies it, and the pool thread's copy, released after the main thread is woken, could free
  // the exception; ThreadSanitizer cannot see the reference count in libsupc++ and reports a
  // race between that free and the main thread's reads of the exception.)
  std::vector<std::exception_ptr> failures(cores_.size());
  auto program = [this, &kernel, &done, &failures](int i) {
    NeuronCore& core = *cores_[i];
    ScopedCurrentCore scope(core);
    std::exception_ptr failure;
    try {
      kernel(KernelContext{i, lnc(), core, *this});
    } catch (const std::exception& e) {
      Abort(StrCat("program ", i, " failed: ", e.what()));
      failure = std::current_exception();
    } catch (...) {  // program 0 must not leave Launch while the pool still runs the others
      Abort(StrCat("program ", i, " failed"));
      failure = std::current_exception();
    }
    failures[i] = std::move(failure);
    done[i].set_value();
  };
  for (int i = 1; i < lnc(); ++i) boost::asio::post(*pool_, [&program, i] { program(i); });
  program(0);
  std::exception_ptr root, consequence;  // a program's own error beats the one it caused
  for (size_t i = 0; i < results.size(); ++i) {
    try {
      results[i].get();
      if (failures[i]) std::rethrow_exception(std::move(failures[i]));
    } catch (const Error& e) {
      std::exception_ptr& slot = e.code() == ErrorCode::kCommError ? consequence : root;
      if (!slot) slot = std::current_exception();
    } catch (...) {
      if (!root) root = std::current_exception();
    }
  }
  if (root) std::rethrow_exception(root);
  if (consequence) std::rethrow_exception(consequence);
}

void LogicalCore::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) abort_reason_ = reason;
  aborted_ = true;
  changed_.notify_all();
}

template <typename Pred>
void LogicalCore::WaitFor(std::unique_lock<std::mutex>& lock, NeuronCore& self, const char* what,
                          Pred pred) {
  const bool ok = changed_.wait_for(lock, wait_timeout_, [&] { return aborted_ || pred(); });
  if (aborted_) {
    Raise(ErrorCode::kCommError, StrCat(what, " on core ", self.id(), " of logical core ", id_,
                                        " abandoned: ", abort_reason_));
  }
  if (!ok) {
    Raise(ErrorCode::kTimeout,
          StrCat(what, " on core ", self.id(), " of logical core ", id_, ": the peer core did not ",
                 "arrive within ", wait_timeout_.count(), " ms"));
  }
}

void LogicalCore::SendRecv(NeuronCore& self, const Tile& send, const Tile& recv) {
  if (lnc() != 2) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("sendrecv on logical core ", id_, ": needs LNC = 2, this logical core has ",
                 lnc(), " physical core"));
  }
  if (send.core() != &self || recv.core() != &self) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("sendrecv on core ", self.id(), ": tiles ", send.Describe(), " and ",
                 recv.Describe(), " must both live on the issuing core"));
  }
  const int me = self.id(), peer = 1 - me;
  Timeline& clock = self.timeline();
  Message out{{}, send.dtype(), send.shape(),
              std::max({send.buffer().ready_at, recv.buffer().readers_done_at,
                        recv.buffer().ready_at, clock.free_at(Engine::kLink)})};
  // (kLink's free_at moves only with barriers: nothing crosses before one is released.)
  const size_t width = SizeOf(send.dtype());
  // Timing-only: the message carries its shape and ready time, no payload.
  if (Functional()) out.data.resize(static_cast<size_t>(send.numel()) * width);
  std::byte* cursor = out.data.data();
  for (int64_t p = 0; Functional() && p < send.partitions(); ++p) {
    const std::byte* row = send.element_ptr(p, 0);
    send.ForEachFreeOffset([&](int64_t off) {
      std::memcpy(cursor, row + off * width, width);
      cursor += width;
    });
  }
  const double my_ready = out.ready_ns;
  Message in;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    inbox_[peer].push_back(std::move(out));
    changed_.notify_all();
    WaitFor(lock, self, "sendrecv", [&] { return !inbox_[me].empty(); });
    in = std::move(inbox_[me].front());
    inbox_[me].pop_front();
  }
  if (in.dtype != recv.dtype() || in.shape != recv.shape()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("sendrecv on core ", me, ": receive tile ", recv.Describe(), " does not match ",
                 "the peer's send of ", ShapeString(in.shape), " ", DTypeName(in.dtype)));
  }
  cursor = in.data.data();
  for (int64_t p = 0; Functional() && p < recv.partitions(); ++p) {
    std::byte* row = recv.element_ptr(p, 0);
    recv.ForEachFreeOffset([&](int64_t off) {
      std::memcpy(row + off * width, cursor, width);
      cursor += width;
    });
  }
  const int64_t bytes = NumElements(in.shape) * static_cast<int64_t>(width);
  // A DMA of the send tile on this core's engines into the peer's SBUF (the peer does the same the
  // other way); the receive tile is taken ready when this core's transfer completes (the peer's
  // is the same transfer mirrored, on its own engines).
  DmaRequest request;
  request.queue = self.EarliestDmaQueue();
  request.ready_ns = std::max(my_ready, in.ready_ns);
  const int64_t row = std::max<int64_t>(1, bytes / send.partitions());
  request.split = SplitOverEngines(self.profile(), send.partition_start(), send.partitions(), row,
                                   row, false, true);
  const DmaTiming timing = self.dma().Schedule(request);
  RecordDmaTransfer(clock, self.profile(), "sendrecv", request, timing, bytes,
                    clock.keeps(DmaQueue(request.queue)) ? StrCat(ShapeString(recv.shape()), DTypeName(recv.dtype()),
                                                   " core ", me, "<->", peer)
                                          : std::string());
  const double end = timing.done_ns;
  send.buffer().readers_done_at = std::max(send.buffer().readers_done_at, end);
  recv.buffer().ready_at = std::max(recv.buffer().ready_at, end);
}

void LogicalCore::Barrier(NeuronCore& self) {
  Timeline& clock = self.timeline();
  const double arrive = clock.now();
  double release;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = barrier_generation_;
    barrier_latest_ = std::max(barrier_latest_, arrive);
    if (++barrier_arrived_ == lnc()) {
      barrier_release_ = barrier_latest_ + (lnc() > 1 ? self.profile().core_link_latency_ns() : 0.0);
      barrier_arrived_ = 0;
      barrier_latest_ = 0.0;
      ++barrier_generation_;
      changed_.notify_all();
    } else {
      WaitFor(lock, self, "core_barrier", [&] { return barrier_generation_ != generation; });
    }
    release = barrier_release_;
  }
  clock.Record("core_barrier", Engine::kLink, arrive, release, 0, 0, "");
  clock.AdvanceAllTo(release);
}

}  // namespace nkisim
