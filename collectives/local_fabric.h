// The ranks of one process, run as threads, and what the collectives need of each other when no
// payload moves (the timing-only mode, runtime/sim_mode.h): the largest clock of a replica group
// at each collective, and the sender's clock of a point-to-point transfer. It stands in for MPI
// so that `nkisim run --timing-only` needs no mpirun and no process per rank; the clocks it joins
// are the ones MPI would join, so the simulated times are the same (tests/launcher/timing_only_*).
//
// Thread safety: every method may be called from any thread. A rank that fails calls Abort(),
// which wakes every waiter with Error(kCommError), so no thread waits for a rank that will never
// come (the MPI job's MPI_Abort).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace nkisim::collectives {

class LocalFabric {
 public:
  explicit LocalFabric(int world_size);
  LocalFabric(const LocalFabric&) = delete;
  LocalFabric& operator=(const LocalFabric&) = delete;

  int world_size() const { return world_size_; }

  // Blocks until all `group_size` members of group `group_index` of set `set_name` joined with
  // their clock; returns the largest. Members must join a group's collectives in the same order
  // (as with MPI). Throws Error(kCommError) once Abort() was called.
  double JoinMax(const std::string& set_name, int group_index, int group_size, double clock_ns);

  // A point-to-point transfer's clock: `from` leaves its clock for `to` under `tag`; Receive
  // blocks until it is there (FIFO per (from, to, tag)). Throws Error(kCommError) once aborted.
  void Send(int from, int to, int tag, double clock_ns);
  double Receive(int from, int to, int tag);

  // Ends every present and future wait with Error(kCommError) "<why>".
  void Abort(const std::string& why);

 private:
  struct Join {
    int arrived = 0;
    double latest = 0;
    double result = 0;
    uint64_t generation = 0;
  };
  void ThrowIfAborted() const;  // REQUIRES: mutex_ held

  const int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<std::string, int>, Join> joins_;
  std::map<std::tuple<int, int, int>, std::deque<double>> mailboxes_;
  std::string aborted_;
};

}  // namespace nkisim::collectives
