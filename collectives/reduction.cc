#include "collectives/reduction.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
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

double AddOnWire(DType dtype, double a, double b) { return RoundToWire(dtype, a + b); }

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

template <typename T>
void RunSchedule(const Schedule& s, const GroupComm& group, DType dtype, std::vector<T>& values) {
  const int me = group.position;
  const int64_t elements = static_cast<int64_t>(values.size());
  auto begin = [&](int c) { return ChunkBegin(elements, s.num_chunks, c); };
  auto pack = [&](const std::vector<int>& chunks) {
    std::vector<T> out;
    for (int c : chunks) out.insert(out.end(), values.begin() + begin(c), values.begin() + begin(c + 1));
    return out;
  };
  for (const Step& step : s.steps) {
    // Everything this member sends (or reads for itself) is packed before anything changes:
    // the step's snapshot.
    struct Incoming {
      const Transfer* t;
      std::vector<std::vector<T>> from;  // per source, in source order
    };
    std::vector<std::vector<T>> outgoing;
    std::vector<Incoming> incoming;
    std::vector<MPI_Request> requests;
    for (const Transfer& t : step.transfers) {
      if (t.dst != me) {
        for (int src : t.srcs) {
          if (src == me) outgoing.push_back(pack(t.chunks));
        }
      } else {
        Incoming in{&t, {}};
        for (int src : t.srcs) {
          in.from.push_back(src == me ? pack(t.chunks) : std::vector<T>());
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
        std::vector<T>& buf = outgoing[next_out++];
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
        in.from[k].resize(static_cast<size_t>(payload));
        requests.emplace_back();
        CheckMpi(MPI_Irecv(in.from[k].data(), static_cast<int>(payload), MpiTypeOf<T>(),
                           in.t->srcs[k], 0, group.comm, &requests.back()),
                 "reduction step (MPI_Irecv)");
      }
    }
    CheckMpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
             "reduction step (MPI_Waitall)");
    for (const Incoming& in : incoming) {
      const Transfer& t = *in.t;
      const bool dst_is_source = std::find(t.srcs.begin(), t.srcs.end(), me) != t.srcs.end();
      size_t at = 0;
      for (int c : t.chunks) {
        const int owner = ChunkOwner(s, c);
        size_t copy_from = 0;
        for (size_t k = 0; k < t.srcs.size(); ++k) {
          if (t.srcs[k] == owner) copy_from = k;
        }
        for (int64_t e = begin(c); e < begin(c + 1); ++e, ++at) {
          if (!t.reduce) {
            values[e] = in.from[copy_from][at];
            continue;
          }
          double acc = in.from[0][at];
          for (size_t k = 1; k < t.srcs.size(); ++k) acc = AddOnWire(dtype, acc, in.from[k][at]);
          values[e] = static_cast<T>(dst_is_source ? acc : AddOnWire(dtype, values[e], acc));
        }
      }
    }
  }
}

}  // namespace

void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<double>& values) {
  RunSchedule(s, group, dtype, values);
}

void RunReductionSchedule(const Schedule& s, const GroupComm& group, DType dtype,
                          std::vector<float>& values) {
  if (!IsFloat(dtype) || SizeOf(dtype) > 4) {
    Raise(ErrorCode::kInternal, StrCat("fp32 reduction of ", DTypeName(dtype), " values"));
  }
  RunSchedule(s, group, dtype, values);
}

}  // namespace nkisim::collectives
