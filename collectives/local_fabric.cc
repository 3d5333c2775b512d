#include "collectives/local_fabric.h"

#include <algorithm>

#include "runtime/error.h"

namespace nkisim::collectives {

LocalFabric::LocalFabric(int world_size) : world_size_(world_size) {}

void LocalFabric::ThrowIfAborted() const {
  if (!aborted_.empty()) Raise(ErrorCode::kCommError, StrCat("job aborted: ", aborted_));
}

double LocalFabric::JoinMax(const std::string& set_name, int group_index, int group_size,
                            double clock_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  ThrowIfAborted();
  Join& join = joins_[{set_name, group_index}];
  join.latest = join.arrived == 0 ? clock_ns : std::max(join.latest, clock_ns);
  if (++join.arrived == group_size) {
    // The last member in: publish the round's result. It stays valid until every member of this
    // round has left, since the next round completes only when all of them joined it again.
    join.result = join.latest;
    join.arrived = 0;
    ++join.generation;
    changed_.notify_all();
    return join.result;
  }
  const uint64_t generation = join.generation;
  changed_.wait(lock, [&] { return join.generation != generation || !aborted_.empty(); });
  if (join.generation == generation) ThrowIfAborted();
  return join.result;
}

void LocalFabric::Send(int from, int to, int tag, double clock_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  ThrowIfAborted();
  mailboxes_[{from, to, tag}].push_back(clock_ns);
  changed_.notify_all();
}

double LocalFabric::Receive(int from, int to, int tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::deque<double>& box = mailboxes_[{from, to, tag}];
  changed_.wait(lock, [&] { return !box.empty() || !aborted_.empty(); });
  if (box.empty()) ThrowIfAborted();
  const double clock_ns = box.front();
  box.pop_front();
  return clock_ns;
}

void LocalFabric::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.empty()) aborted_ = why.empty() ? "a rank failed" : why;
  changed_.notify_all();
}

}  // namespace nkisim::collectives
