#include "collectives/schedule.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

// A set of contributing members, as bits.
class Members {
 public:
  Members() = default;
  explicit Members(int n) : words_(static_cast<size_t>((n + 63) / 64), 0) {}
  void Add(int m) { words_[m / 64] |= uint64_t{1} << (m % 64); }
  bool Disjoint(const Members& o) const {
    for (size_t i = 0; i < words_.size(); ++i)
      if (words_[i] & o.words_[i]) return false;
    return true;
  }
  void Union(const Members& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  }
  bool operator==(const Members& o) const { return words_ == o.words_; }
  std::string ToString() const {
    std::string s;
    int shown = 0;
    for (size_t i = 0; i < words_.size() * 64; ++i) {
      if (!(words_[i / 64] >> (i % 64) & 1)) continue;
      if (shown == 8) return s + ", ...";
      s += StrCat(shown++ ? ", " : "", i);
    }
    return s.empty() ? "none" : s;
  }

 private:
  std::vector<uint64_t> words_;
};

// What each member holds: per chunk, the contributors of its copy (empty optional: none).
struct Holding {
  bool held = false;
  Members from;
};

}  // namespace

const char* OpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllToAll: return "all_to_all";
  }
  return "?";
}

CollectiveOp ParseOp(const std::string& name) {
  if (name == "all_gather" || name == "allg") return CollectiveOp::kAllGather;
  if (name == "reduce_scatter" || name == "redsct") return CollectiveOp::kReduceScatter;
  if (name == "all_reduce" || name == "allr") return CollectiveOp::kAllReduce;
  if (name == "all_to_all" || name == "alltoall") return CollectiveOp::kAllToAll;
  Raise(ErrorCode::kInvalidArgument,
        StrCat("collective op '", name,
               "' is not one of all_gather, reduce_scatter, all_reduce, all_to_all"));
}

int NumChunks(CollectiveOp op, int n, int split) {
  return op == CollectiveOp::kAllToAll ? n * n : n * split;
}

double ChunkBytes(const Schedule& s, double buffer_bytes) {
  if (s.num_chunks == 0) return 0;
  switch (s.op) {
    case CollectiveOp::kAllGather:  // buffer = one member's input = its split chunks
      return buffer_bytes * s.members / s.num_chunks;
    case CollectiveOp::kReduceScatter:  // buffer = one member's input = all chunks
    case CollectiveOp::kAllReduce:
      return buffer_bytes / s.num_chunks;
    case CollectiveOp::kAllToAll:  // buffer = one member's input = n chunks
      return buffer_bytes / s.members;
  }
  return 0;
}

int ChunkOwner(const Schedule& s, int chunk) {
  if (s.op == CollectiveOp::kAllToAll) return chunk / s.members;
  return chunk / std::max(s.num_chunks / std::max(s.members, 1), 1);
}

std::string CheckSchedule(const Schedule& s) {
  const int n = s.members, c_count = s.num_chunks;
  if (n <= 0 || c_count <= 0) return StrCat("empty schedule: ", n, " members, ", c_count, " chunks");
  const int split = s.op == CollectiveOp::kAllToAll ? 1 : c_count / n;
  if (s.op != CollectiveOp::kAllToAll && split * n != c_count) {
    return StrCat(c_count, " chunks do not split evenly over ", n, " members");
  }
  auto owner = [&](int c) { return ChunkOwner(s, c); };
  std::vector<std::vector<Holding>> state(static_cast<size_t>(n),
                                          std::vector<Holding>(static_cast<size_t>(c_count)));
  for (int m = 0; m < n; ++m) {
    for (int c = 0; c < c_count; ++c) {
      const bool held = s.op == CollectiveOp::kReduceScatter || s.op == CollectiveOp::kAllReduce
                            ? true
                            : owner(c) == m;
      if (!held) continue;
      Holding& h = state[m][c];
      h.held = true;
      h.from = Members(n);
      h.from.Add(m);
    }
  }
  for (size_t si = 0; si < s.steps.size(); ++si) {
    const Step& step = s.steps[si];
    const auto where = [&](size_t ti) {
      return StrCat("step ", si, " (", step.label, "), transfer ", ti, ": ");
    };
    const std::vector<std::vector<Holding>> before = state;
    for (size_t ti = 0; ti < step.transfers.size(); ++ti) {
      const Transfer& t = step.transfers[ti];
      if (t.srcs.empty()) return where(ti) + "no source";
      if (t.dst < 0 || t.dst >= n) return where(ti) + StrCat("destination ", t.dst, " is no member");
      for (int src : t.srcs) {
        if (src < 0 || src >= n) return where(ti) + StrCat("source ", src, " is no member");
      }
      for (int c : t.chunks) {
        if (c < 0 || c >= c_count) return where(ti) + StrCat("chunk ", c, " does not exist");
        Holding payload;
        if (t.reduce) {
          payload.from = Members(n);
          for (int src : t.srcs) {
            const Holding& h = before[src][c];
            if (!h.held) return where(ti) + StrCat("member ", src, " sends chunk ", c, " it does not hold");
            if (!payload.from.Disjoint(h.from)) {
              return where(ti) + StrCat("chunk ", c, ": the sources' contributions overlap");
            }
            payload.from.Union(h.from);
          }
          payload.held = true;
          Holding& dst = state[t.dst][c];
          if (dst.held && t.dst != t.srcs[0] &&
              std::find(t.srcs.begin(), t.srcs.end(), t.dst) == t.srcs.end()) {
            if (!dst.from.Disjoint(payload.from)) {
              return where(ti) + StrCat("member ", t.dst, " adds chunk ", c, " from ", payload.from.ToString(),
                                        " to a copy already holding ", dst.from.ToString());
            }
            dst.from.Union(payload.from);
          } else {
            dst = payload;  // the destination is among the sources: it takes the sum
          }
        } else {
          const int from = std::find(t.srcs.begin(), t.srcs.end(), owner(c)) != t.srcs.end()
                               ? owner(c)
                               : t.srcs[0];
          if (!before[from][c].held) {
            return where(ti) + StrCat("member ", from, " sends chunk ", c, " it does not hold");
          }
          state[t.dst][c] = before[from][c];
        }
      }
    }
  }
  Members all(n);
  for (int m = 0; m < n; ++m) all.Add(m);
  for (int m = 0; m < n; ++m) {
    for (int c = 0; c < c_count; ++c) {
      const Holding& h = state[m][c];
      Members want(n);
      bool needed = false;
      switch (s.op) {
        case CollectiveOp::kAllGather:
          needed = true;
          want.Add(owner(c));
          break;
        case CollectiveOp::kReduceScatter:
          needed = owner(c) == m;
          want = all;
          break;
        case CollectiveOp::kAllReduce:
          needed = true;
          want = all;
          break;
        case CollectiveOp::kAllToAll:
          needed = c % n == m;
          want.Add(c / n);
          break;
      }
      if (!needed) continue;
      if (!h.held) return StrCat("at the end member ", m, " lacks chunk ", c);
      if (!(h.from == want)) {
        return StrCat("at the end member ", m, " holds chunk ", c, " with contributions of ",
                      h.from.ToString(), ", not ", want.ToString());
      }
    }
  }
  return "";
}

void MergeSteps(std::vector<Step>& outer, size_t first_step, std::vector<Step> inner) {
  if (outer.size() < first_step + inner.size()) outer.resize(first_step + inner.size());
  for (size_t k = 0; k < inner.size(); ++k) {
    Step& into = outer[first_step + k];
    if (into.label.empty()) into.label = std::move(inner[k].label);
    into.transfers.insert(into.transfers.end(), std::make_move_iterator(inner[k].transfers.begin()),
                          std::make_move_iterator(inner[k].transfers.end()));
  }
}

void ReserveMerged(std::vector<Step>& outer, const std::vector<Step>& inner, size_t copies) {
  if (outer.size() < inner.size()) outer.resize(inner.size());
  for (size_t k = 0; k < inner.size(); ++k) {
    outer[k].transfers.reserve(outer[k].transfers.size() + copies * inner[k].transfers.size());
  }
}

std::vector<Step> Lift(const std::vector<Step>& virtual_steps, const std::vector<int>& members,
                       const std::vector<std::vector<int>>& chunk_sets) {
  std::vector<Step> real;
  real.reserve(virtual_steps.size());
  for (const Step& vs : virtual_steps) {
    Step rs;
    rs.label = vs.label;
    rs.transfers.reserve(vs.transfers.size());
    for (const Transfer& vt : vs.transfers) {
      Transfer t;
      t.reduce = vt.reduce;
      t.shares_read = vt.shares_read;
      t.dst = members[vt.dst];
      t.srcs.reserve(vt.srcs.size());
      for (int src : vt.srcs) t.srcs.push_back(members[src]);
      size_t chunks = 0;
      for (int vc : vt.chunks) chunks += chunk_sets[vc].size();
      t.chunks.reserve(chunks);
      for (int vc : vt.chunks) {
        t.chunks.insert(t.chunks.end(), chunk_sets[vc].begin(), chunk_sets[vc].end());
      }
      rs.transfers.push_back(std::move(t));
    }
    real.push_back(std::move(rs));
  }
  return real;
}

}  // namespace nkisim::collectives
