#include "collectives/reduction.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "runtime/error.h"

namespace nkisim::collectives {

double RoundToWire(DType dtype, double value) {
  switch (dtype) {
    case DType::kInt32:
      return std::clamp(std::nearbyint(value), double{std::numeric_limits<int32_t>::min()},
                        double{std::numeric_limits<int32_t>::max()});
    case DType::kUInt32:
      return std::clamp(std::nearbyint(value), 0.0, double{std::numeric_limits<uint32_t>::max()});
    case DType::kFloat32:
      return static_cast<float>(value);
    default:
      return RoundTo(dtype, static_cast<float>(value));
  }
}

int64_t ChunkBegin(int64_t elements, int num_chunks, int chunk) {
  return elements * chunk / num_chunks;
}

namespace {

template <typename T>
MPI_Datatype MpiTypeOf();
template <>
MPI_Datatype MpiTypeOf<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype MpiTypeOf<float>() { return MPI_FLOAT; }

// The wire buffers (and, in pieces, the piece's values) of a thread's reductions: reused from
// step to step and piece to piece within a call, and from call to call while a
// KeepReductionBuffers lives on the thread (reduction.h).
template <typename T>
struct Scratch {
  std::deque<std::vector<T>> out_pool, in_pool;  // a deque keeps its buffers in place as it grows
  std::vector<T> values;
  std::vector<T> sum;  // a transfer's running sum, where its destination is not a source

  size_t CapacityBytes() const {
    size_t elements = values.capacity() + sum.capacity();
    for (const auto* pool : {&out_pool, &in_pool}) {
      for (const std::vector<T>& v : *pool) elements += v.capacity();
    }
    return elements * sizeof(T);
  }
};

thread_local int keep_depth = 0;  // live KeepReductionBuffers on this thread

template <typename T>
Scratch<T>& ThreadScratch() {
  thread_local Scratch<T> scratch;
  return scratch;
}

// At the end of a call: the buffers go, unless a KeepReductionBuffers keeps them (and they fit).
template <typename T>
void EndOfCall() {
  Scratch<T>& scratch = ThreadScratch<T>();
  if (keep_depth == 0 || scratch.CapacityBytes() > kKeptScratchBytes) scratch = Scratch<T>();
}

// Calls body(round) with round(v) = RoundToWire(dtype, v) as an inline function of the dtypes
// the reductions mostly carry (fp32, bf16), so the adding loops need no call per addition.
template <typename Body>
void WithWireRounding(DType dtype, const Body& body) {
  switch (dtype) {
    case DType::kFloat32:
      body([](double v) { return static_cast<double>(static_cast<float>(v)); });
      return;
    case DType::kBFloat16:
      body([](double v) {
        return static_cast<double>(Bf16BitsToFloat(FloatToBf16Bits(static_cast<float>(v))));
      });
      return;
    default:
      body([dtype](double v) { return RoundToWire(dtype, v); });
  }
}

// Chunk c of values is [bounds[c], bounds[c + 1]).
template <typename T>
void RunSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                 const std::vector<int64_t>& bounds, std::vector<T>& values) {
  const int me = group.position;
  auto begin = [&](int c) { return bounds[static_cast<size_t>(c)]; };
  // The send and receive buffers are reused from step to step (and, under a KeepReductionBuffers,
  // from call to call), so after the largest step no buffer needs fresh memory: a 64-rank prefill
  // all_reduce of 64 MiB a rank would otherwise map new pages for every step's halves.
  Scratch<T>& scratch = ThreadScratch<T>();
  std::deque<std::vector<T>>& out_pool = scratch.out_pool;
  std::deque<std::vector<T>>& in_pool = scratch.in_pool;
  for (const Step& step : s.steps) {
    size_t out_used = 0, in_used = 0;
    auto take = [](std::deque<std::vector<T>>& pool, size_t& used) -> std::vector<T>& {
      if (used == pool.size()) pool.emplace_back();
      return pool[used++];
    };
    auto pack = [&](std::vector<T>& out, const std::vector<int>& chunks) -> std::vector<T>& {
      out.clear();
      for (int c : chunks) {
        out.insert(out.end(), values.begin() + begin(c), values.begin() + begin(c + 1));
      }
      return out;
    };
    // Everything this member sends (or reads for itself) is packed before anything changes:
    // the step's snapshot.
    struct Incoming {
      const Transfer* t;
      std::vector<std::vector<T>*> from;  // per source, in source order
    };
    std::vector<std::vector<T>*> outgoing;
    std::vector<Incoming> incoming;
    std::vector<MPI_Request> requests;
    for (const Transfer& t : step.transfers) {
      if (t.dst != me) {
        for (int src : t.srcs) {
          if (src == me) outgoing.push_back(&pack(take(out_pool, out_used), t.chunks));
        }
      } else {
        Incoming in{&t, {}};
        for (int src : t.srcs) {
          std::vector<T>& buf = take(in_pool, in_used);
          in.from.push_back(src == me ? &pack(buf, t.chunks) : &buf);
        }
        incoming.push_back(std::move(in));
      }
    }
    requests.reserve(outgoing.size() + s.members);
    size_t next_out = 0;
    for (const Transfer& t : step.transfers) {
      if (t.dst == me) continue;
      for (int src : t.srcs) {
        if (src != me) continue;
        std::vector<T>& buf = *outgoing[next_out++];
        requests.emplace_back();
        CheckMpi(MPI_Isend(buf.data(), static_cast<int>(buf.size()), MpiTypeOf<T>(), t.dst, 0,
                           group.comm, &requests.back()),
                 "reduction step (MPI_Isend)");
      }
    }
    for (Incoming& in : incoming) {
      int64_t payload = 0;
      for (int c : in.t->chunks) payload += begin(c + 1) - begin(c);
      for (size_t k = 0; k < in.t->srcs.size(); ++k) {
        if (in.t->srcs[k] == me) continue;
        in.from[k]->resize(static_cast<size_t>(payload));
        requests.emplace_back();
        CheckMpi(MPI_Irecv(in.from[k]->data(), static_cast<int>(payload), MpiTypeOf<T>(),
                           in.t->srcs[k], 0, group.comm, &requests.back()),
                 "reduction step (MPI_Irecv)");
      }
    }
    CheckMpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
             "reduction step (MPI_Waitall)");
    WithWireRounding(dtype, [&](auto round) {
      for (const Incoming& in : incoming) {
        const Transfer& t = *in.t;
        const bool dst_is_source = std::find(t.srcs.begin(), t.srcs.end(), me) != t.srcs.end();
        size_t at = 0;
        for (int c : t.chunks) {
          const int64_t e0 = begin(c), len = begin(c + 1) - e0;
          if (!t.reduce) {
            const int owner = ChunkOwner(s, c);
            size_t copy_from = 0;
            for (size_t k = 0; k < t.srcs.size(); ++k) {
              if (t.srcs[k] == owner) copy_from = k;
            }
            std::copy_n(in.from[copy_from]->begin() + static_cast<int64_t>(at), len, values.begin() + e0);
            at += static_cast<size_t>(len);
            continue;
          }
          // Source by source over the whole range (loops the compiler vectorises): acc = the
          // sources added in order, each addition rounded; a destination that is not a source
          // then adds acc to its own value. The running sums are wire values, which T holds
          // exactly, so this is the element-by-element order's arithmetic.
          std::vector<T>& sum = scratch.sum;
          T* acc = values.data() + e0;
          if (!dst_is_source) {
            sum.resize(static_cast<size_t>(len));
            acc = sum.data();
          }
          const T* first = in.from[0]->data() + at;
          std::copy_n(first, len, acc);
          for (size_t k = 1; k < t.srcs.size(); ++k) {
            const T* next = in.from[k]->data() + at;
            for (int64_t i = 0; i < len; ++i) {
              acc[i] = static_cast<T>(round(static_cast<double>(acc[i]) + static_cast<double>(next[i])));
            }
          }
          if (!dst_is_source) {
            T* dst = values.data() + e0;
            for (int64_t i = 0; i < len; ++i) {
              dst[i] = static_cast<T>(round(static_cast<double>(dst[i]) + static_cast<double>(acc[i])));
            }
          }
          at += static_cast<size_t>(len);
        }
      }
    });
  }
}

std::vector<int64_t> EvenBounds(int64_t elements, int num_chunks) {
  std::vector<int64_t> bounds;
  for (int c = 0; c <= num_chunks; ++c) bounds.push_back(ChunkBegin(elements, num_chunks, c));
  return bounds;
}

void CheckFp32(DType dtype) {
  if (!IsFloat(dtype) || SizeOf(dtype) > 4) {
    Raise(ErrorCode::kInternal, StrCat("fp32 reduction of ", DTypeName(dtype), " values"));
  }
}

}  // namespace

KeepReductionBuffers::KeepReductionBuffers() { ++keep_depth; }

KeepReductionBuffers::~KeepReductionBuffers() {
  if (--keep_depth == 0) {
    ThreadScratch<float>() = Scratch<float>();
    ThreadScratch<double>() = Scratch<double>();
  }
}

void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<double>& values) {
  RunSchedule(s, group, dtype, EvenBounds(static_cast<int64_t>(values.size()), s.num_chunks), values);
  EndOfCall<double>();
}

void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<float>& values) {
  CheckFp32(dtype);
  RunSchedule(s, group, dtype, EvenBounds(static_cast<int64_t>(values.size()), s.num_chunks), values);
  EndOfCall<float>();
}

void RunReductionScheduleInPieces(
    const Schedule& s, const GroupComm& group, DType dtype, int64_t total, int64_t piece_elements,
    int64_t first, int64_t n, const std::function<void(int64_t, int64_t, float*)>& read,
    const std::function<void(int64_t, const float*, int64_t)>& write) {
  CheckFp32(dtype);
  if (piece_elements < 1) {
    Raise(ErrorCode::kInternal, StrCat("reduction pieces of ", piece_elements, " elements"));
  }
  const std::vector<int64_t> chunk = EvenBounds(total, s.num_chunks);
  const int pieces = static_cast<int>(std::max<int64_t>(1, (total + piece_elements - 1) / piece_elements));
  std::vector<int64_t> bounds, part_begin(static_cast<size_t>(s.num_chunks));
  std::vector<float>& values = ThreadScratch<float>().values;
  for (int p = 0; p < pieces; ++p) {
    // Part p of every chunk, laid end to end: the piece's chunk c is bounds [c, c + 1), and
    // holds the tensor's elements [part_begin[c], part_begin[c] + its length).
    bounds.assign(1, 0);
    for (int c = 0; c < s.num_chunks; ++c) {
      const int64_t len = chunk[c + 1] - chunk[c];
      const int64_t a = chunk[c] + ChunkBegin(len, pieces, p), b = chunk[c] + ChunkBegin(len, pieces, p + 1);
      part_begin[static_cast<size_t>(c)] = a;
      bounds.push_back(bounds.back() + (b - a));
    }
    values.resize(static_cast<size_t>(bounds.back()));
    for (int c = 0; c < s.num_chunks; ++c) {
      if (bounds[c + 1] > bounds[c]) {
        read(part_begin[static_cast<size_t>(c)], part_begin[static_cast<size_t>(c)] + bounds[c + 1] - bounds[c],
             values.data() + bounds[c]);
      }
    }
    RunSchedule(s, group, dtype, bounds, values);
    for (int c = 0; c < s.num_chunks; ++c) {
      const int64_t a = part_begin[static_cast<size_t>(c)], b = a + bounds[c + 1] - bounds[c];
      const int64_t lo = std::max(a, first), hi = std::min(b, first + n);
      if (hi > lo) write(lo, values.data() + bounds[c] + (lo - a), hi - lo);
    }
  }
  EndOfCall<float>();
}

}  // namespace nkisim::collectives
