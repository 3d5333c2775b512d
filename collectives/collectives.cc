#include "collectives/collectives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "collectives/collective_cost.h"
#include "collectives/mpi_datatype.h"
#include "collectives/reduction.h"
#include "runtime/dma_engines.h"
#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/sim_mode.h"

namespace nkisim::collectives {
namespace {

int64_t ElementBytes(const TensorView& t) { return static_cast<int64_t>(SizeOf(t.dtype())); }

// Starts the max-reduction of the members' clocks so it overlaps the data movement. On a
// LocalFabric (timing-only, ranks as threads) the join completes at once: nothing moves.
class ClockJoin {
 public:
  ClockJoin(RankContext& ctx, const GroupComm& group) : local_(ctx.lnc().now()) {
    if (ctx.local() != nullptr) {
      joined_ = ctx.local()->JoinMax(group.set->name, group.index, group.size(), local_);
      return;
    }
    CheckMpi(MPI_Iallreduce(&local_, &joined_, 1, MPI_DOUBLE, MPI_MAX, group.comm, &request_),
             "clock join (MPI_Iallreduce)");
  }
  double Wait() {
    if (request_ != MPI_REQUEST_NULL) {
      CheckMpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "clock join (MPI_Wait)");
    }
    return joined_;
  }

 private:
  double local_;
  double joined_ = 0;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Charges [start, start + cost] to the rank: a Collective event on core 0's timeline, and no
// engine of any core starts before it ends.
CollectiveResult Advance(RankContext& ctx, const char* name, double start, double cost,
                         int64_t bytes, const TensorView& shape_of, const std::string& algorithm,
                         const std::string& reason, Launch launch = Launch::kInGraph) {
  const double end = start + cost;
  Timeline& clock = ctx.lnc().core(0).timeline();
  clock.Occupy(Engine::kCollective, start, end);
  // "algorithm=mesh launch=in_graph [4, 1024]bf16", formatted without streams: this sits on
  // every call. A host-timed loop keeps no records, so it skips the formatting.
  char operands[104] = "";
  if (clock.keeps_records()) {
    int at = algorithm.empty() ? 0
                               : std::snprintf(operands, sizeof(operands), "algorithm=%s launch=%s ",
                                               algorithm.c_str(), LaunchName(launch));
    for (size_t i = 0; i < shape_of.shape().size() && at < 80; ++i) {
      at += std::snprintf(operands + at, sizeof(operands) - at, "%s%lld", i ? ", " : "[",
                          static_cast<long long>(shape_of.shape()[i]));
    }
    std::snprintf(operands + at, sizeof(operands) - at, "]%s", DTypeName(shape_of.dtype()));
  }
  clock.Record(name, Engine::kCollective, start, end, bytes, 0, operands);
  // The collective's DMA rings run on the rank's own DMA engines, which the kernels' transfers
  // share: each core's engines carry its part of what this rank sends, as the rings' packets,
  // from the collective's start (docs/collectives.md, "Cost model"). Nothing of the rank runs
  // beside a collective today (every engine waits for its end), so this shows on the engine rows
  // and in engine_busy_ns and delays nothing; a share finds the engine's first free gap.
  if (bytes > 0) {
    const int cores = ctx.lnc().lnc();
    const int64_t per_core = (bytes + cores - 1) / cores;
    for (int c = 0; c < cores; ++c) {
      NeuronCore& core = ctx.lnc().core(c);
      std::array<double, kMaxDmaEngines> starts{}, ends{};
      core.dma().ReserveAllEngines(start, per_core, core.profile().dma_collective_packet_bytes(),
                                   &starts, &ends);
      const int64_t share = (per_core + core.dma().engines() - 1) / core.dma().engines();
      for (int e = 0; e < core.dma().engines(); ++e) {
        const size_t i = static_cast<size_t>(e);
        core.timeline().RecordShare(name, DmaEngine(e), starts[i], ends[i], ends[i] - starts[i],
                                    share, "collective DMA ring");
      }
    }
  }
  for (int c = 0; c < ctx.lnc().lnc(); ++c) ctx.lnc().core(c).timeline().AdvanceAllTo(end);
  return {start, end, bytes, algorithm, reason};
}

// The rule's message is built only when it is broken: these checks sit on every call.
template <typename MakeRule>
void Require(bool ok, const char* op, MakeRule rule) {
  if (!ok) Raise(ErrorCode::kInvalidArgument, StrCat(op, ": ", rule()));
}

std::string Describe(const char* role, const TensorView& t) {
  return StrCat(role, " '", t.name(), "' ", ShapeString(t.shape()), " ", DTypeName(t.dtype()));
}

void CheckDim(const char* op, const TensorView& t, int dim) {
  Require(dim >= 0 && dim < t.rank(), op, [&] {
    return StrCat("dim ", dim, " is outside the ", t.rank(), " dims of ", Describe("input", t));
  });
}

// The view's block 0 along `dim` (of `block` elements), typed so that counts step to block j.
MpiDatatype BlockDatatype(const TensorView& whole, int dim, int64_t block) {
  const TensorView first = whole.slice(dim, 0, block);
  return ViewDatatype(first, block * whole.strides()[dim] * ElementBytes(whole));
}

// Exact reads and rounding writes through fp64, for the reductions.
std::vector<double> ReadAsDouble(const TensorView& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.numel()));
  const std::byte* base = t.buffer().data();
  const int64_t w = ElementBytes(t);
  t.ForEachOffset([&](int64_t off) {
    const std::byte* p = base + off * w;
    switch (t.dtype()) {
      case DType::kInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      case DType::kUInt32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
        break;
      }
      default:
        out.push_back(ToFloat(t.dtype(), p));
    }
  });
  return out;
}

void WriteFromDouble(const TensorView& t, const std::vector<double>& values) {
  std::byte* base = t.buffer().data();
  const int64_t w = ElementBytes(t);
  size_t i = 0;
  t.ForEachOffset([&](int64_t off) {
    const double v = values[i++];
    std::byte* p = base + off * w;
    if (t.dtype() == DType::kInt32 || t.dtype() == DType::kUInt32) {
      const double lo = t.dtype() == DType::kInt32 ? std::numeric_limits<int32_t>::min() : 0.0;
      const double clamped = std::clamp(std::nearbyint(v), lo, MaxValue(t.dtype()));
      if (t.dtype() == DType::kInt32) {
        const int32_t x = static_cast<int32_t>(clamped);
        std::memcpy(p, &x, 4);
      } else {
        const uint32_t x = static_cast<uint32_t>(clamped);
        std::memcpy(p, &x, 4);
      }
    } else {
      FromFloat(t.dtype(), static_cast<float>(v), p);
    }
  });
}

// Up to this many bytes per member, all_gather packs the clock with the payload (one copy each
// way is cheaper than a second MPI call at these sizes).
constexpr int64_t kPackedClockMaxBytes = 8 * 1024;

bool ZeroCopySum(const TensorView& t) { return t.dtype() == DType::kFloat32 && t.is_contiguous(); }

// The one skeleton of every collective: plan (algorithm, schedule, cost; refused before any data
// moves when a forced algorithm does not fit), blocking bookkeeping for the supervisor, the clock
// join overlapping the data movement, then the cost charged from the latest member's clock.
// A move that carries the members' clocks with its payload returns the joined clock; the others
// return a negative number and the skeleton's own join, started before the move, is used.
template <typename Move>
CollectiveResult RunCollective(RankContext& ctx, const GroupComm& group, CollectiveOp op,
                               double buffer_bytes, int64_t bytes_sent, const TensorView& shape_of,
                               bool move_joins_clocks, Move move) {
  const CollectivePlan& plan = ctx.plan(group, op, buffer_bytes);
  WaitingInCollective waiting(OpName(op));
  // Timing-only: no payload moves; the members' clocks are joined all the same.
  const bool functional = Functional();
  std::optional<ClockJoin> clock;
  if (!move_joins_clocks || !functional) clock.emplace(ctx, group);  // overlaps the payload
  const double joined = functional ? move(plan) : -1.0;
  const double start = clock ? clock->Wait() : joined;
  return Advance(ctx, OpName(op), start, plan.cost.total_ns, bytes_sent, shape_of, plan.algorithm,
                 plan.reason, plan.launch);
}

// A reduction of `input` into the chunks of `output` (all_reduce: the same shape; reduce_scatter:
// this member's chunk), in the group set's reduction mode.
void Reduce(const CollectivePlan& plan, const GroupComm& group, const TensorView& input,
            const TensorView& output, bool in_place) {
  const bool all = plan.op == CollectiveOp::kAllReduce;
  if (group.set->exact_reduction || group.size() < 2) {
    if (ZeroCopySum(input) && ZeroCopySum(output)) {
      if (all) {
        CheckMpi(MPI_Allreduce(in_place ? MPI_IN_PLACE : ViewData(input), ViewData(output),
                               static_cast<int>(input.numel()), MPI_FLOAT, MPI_SUM, group.comm),
                 "all_reduce (MPI_Allreduce)");
      } else {
        CheckMpi(MPI_Reduce_scatter_block(ViewData(input), ViewData(output),
                                          static_cast<int>(output.numel()), MPI_FLOAT, MPI_SUM,
                                          group.comm),
                 "reduce_scatter (MPI_Reduce_scatter_block)");
      }
      return;
    }
    std::vector<double> values = ReadAsDouble(input);
    if (all) {
      CheckMpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                             MPI_DOUBLE, MPI_SUM, group.comm),
               "all_reduce (MPI_Allreduce)");
      WriteFromDouble(output, values);
    } else {
      std::vector<double> mine(static_cast<size_t>(output.numel()));
      CheckMpi(MPI_Reduce_scatter_block(values.data(), mine.data(), static_cast<int>(mine.size()),
                                        MPI_DOUBLE, MPI_SUM, group.comm),
               "reduce_scatter (MPI_Reduce_scatter_block)");
      WriteFromDouble(output, mine);
    }
    return;
  }
  const int64_t n = output.numel(), first = all ? 0 : group.position * n;
  if (IsFloat(input.dtype()) && SizeOf(input.dtype()) <= 4) {  // fp32 holds them exactly
    if (input.is_contiguous() && output.is_contiguous()) {
      // In pieces of kReductionPieceElements (one piece up to that size), so a rank never holds
      // an fp32 copy of a large tensor and its step buffers (a 64-rank prefill all_reduce:
      // 64 MiB a rank, and as much again on the wire).
      const int64_t total = input.numel();
      const TensorView in = input.reshape({total}), out = output.reshape({n});
      RunReductionScheduleInPieces(
          *plan.schedule, group, input.dtype(), total, kReductionPieceElements, first, n,
          [&](int64_t a, int64_t b, float* values) {
            ToFloat(in.dtype(), static_cast<const std::byte*>(ViewData(in)) + a * SizeOf(in.dtype()),
                    values, static_cast<size_t>(b - a));
          },
          [&](int64_t a, const float* v, int64_t count) {
            out.slice(0, a - first, a - first + count).FromFloats(v, count);
          });
      return;
    }
    std::vector<float> values = input.ToFloats();
    RunReductionSchedule(*plan.schedule, group, input.dtype(), values);
    if (!all) values = std::vector<float>(values.begin() + first, values.begin() + first + n);
    output.FromFloats(values);
    return;
  }
  std::vector<double> values = ReadAsDouble(input);
  RunReductionSchedule(*plan.schedule, group, input.dtype(), values);
  if (all) {
    WriteFromDouble(output, values);
  } else {
    WriteFromDouble(output, std::vector<double>(values.begin() + first, values.begin() + first + n));
  }
}

}  // namespace

CollectiveResult all_gather(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output, int dim) {
  constexpr const char* kOp = "all_gather";
  CheckDim(kOp, input, dim);
  Shape expected = input.shape();
  expected[dim] *= group.size();
  Require(output.shape() == expected && output.dtype() == input.dtype(), kOp, [&] {
    return StrCat(Describe("output", output), " must be ", ShapeString(expected), " ",
                  DTypeName(input.dtype()), " (", Describe("input", input), " with dim ", dim,
                  " times the group size ", group.size(), ")");
  });
  const int64_t bytes = input.size_bytes();
  const bool contiguous = input.is_contiguous() && output.is_contiguous() && dim == 0;
  // Small contiguous payloads carry this member's clock in one packed message, so one MPI call
  // moves both; everything else overlaps a separate clock join.
  const bool packed = contiguous && bytes <= kPackedClockMaxBytes;
  // Copies are exact whatever the algorithm: the data moves in one MPI call.
  return RunCollective(ctx, group, CollectiveOp::kAllGather, static_cast<double>(bytes), bytes,
                       output, packed, [&](const CollectivePlan&) -> double {
    if (packed) {
      const int64_t slot = bytes + static_cast<int64_t>(sizeof(double));
      thread_local std::vector<std::byte> send, recv;  // grown, never cleared: no per-call fill
      if (send.size() < static_cast<size_t>(slot)) send.resize(static_cast<size_t>(slot));
      if (recv.size() < static_cast<size_t>(slot * group.size())) {
        recv.resize(static_cast<size_t>(slot * group.size()));
      }
      if (bytes > 0) std::memcpy(send.data(), ViewData(input), static_cast<size_t>(bytes));
      const double now = ctx.lnc().now();
      std::memcpy(send.data() + bytes, &now, sizeof(double));
      CheckMpi(MPI_Allgather(send.data(), static_cast<int>(slot), MPI_BYTE, recv.data(),
                             static_cast<int>(slot), MPI_BYTE, group.comm),
               "all_gather (MPI_Allgather)");
      double latest = now;
      auto* out = static_cast<std::byte*>(ViewData(output));
      for (int j = 0; j < group.size(); ++j) {
        if (bytes > 0) std::memcpy(out + j * bytes, recv.data() + j * slot, static_cast<size_t>(bytes));
        double theirs = 0;
        std::memcpy(&theirs, recv.data() + j * slot + bytes, sizeof(double));
        latest = std::max(latest, theirs);
      }
      return latest;
    }
    if (contiguous) {
      CheckMpi(MPI_Allgather(ViewData(input), static_cast<int>(bytes), MPI_BYTE, ViewData(output),
                             static_cast<int>(bytes), MPI_BYTE, group.comm),
               "all_gather (MPI_Allgather)");
    } else {
      const MpiDatatype send = ViewDatatype(input, bytes);
      const MpiDatatype recv = BlockDatatype(output, dim, input.shape()[dim]);
      CheckMpi(MPI_Allgather(ViewData(input), 1, send.get(), ViewData(output), 1, recv.get(),
                             group.comm),
               "all_gather (MPI_Allgather)");
    }
    return -1.0;
  });
}

CollectiveResult all_reduce(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output) {
  constexpr const char* kOp = "all_reduce";
  Require(output.shape() == input.shape() && output.dtype() == input.dtype(), kOp, [&] {
    return StrCat(Describe("output", output), " must match ", Describe("input", input));
  });
  const bool in_place = input.SameBuffer(output) && input.offset() == output.offset();
  return RunCollective(ctx, group, CollectiveOp::kAllReduce,
                       static_cast<double>(input.size_bytes()), input.size_bytes(), output,
                       false, [&](const CollectivePlan& plan) {
                         Reduce(plan, group, input, output, in_place);
                         return -1.0;
                       });
}

CollectiveResult reduce_scatter(RankContext& ctx, const GroupComm& group, const TensorView& input,
                                const TensorView& output) {
  constexpr const char* kOp = "reduce_scatter";
  Require(input.rank() >= 1, kOp,
          [&] { return StrCat(Describe("input", input), " needs at least one dim"); });
  Shape expected = output.shape();
  if (!expected.empty()) expected[0] *= group.size();
  Require(input.shape() == expected && output.dtype() == input.dtype(), kOp, [&] {
    return StrCat(Describe("input", input), " must be ", Describe("output", output),
                  " with dim 0 times the group size ", group.size());
  });
  return RunCollective(ctx, group, CollectiveOp::kReduceScatter,
                       static_cast<double>(input.size_bytes()), input.size_bytes(), output,
                       false, [&](const CollectivePlan& plan) {
                         Reduce(plan, group, input, output, false);
                         return -1.0;
                       });
}

CollectiveResult all_to_all(RankContext& ctx, const GroupComm& group, const TensorView& input,
                            const TensorView& output, int dim) {
  constexpr const char* kOp = "all_to_all";
  CheckDim(kOp, input, dim);
  Require(output.shape() == input.shape() && output.dtype() == input.dtype(), kOp, [&] {
    return StrCat(Describe("output", output), " must match ", Describe("input", input));
  });
  Require(input.shape()[dim] % group.size() == 0, kOp, [&] {
    return StrCat("dim ", dim, " of ", Describe("input", input),
                  " must be divisible by the group size ", group.size());
  });
  const int64_t block = input.shape()[dim] / group.size();
  const int64_t block_bytes = input.size_bytes() / group.size();
  return RunCollective(ctx, group, CollectiveOp::kAllToAll,
                       static_cast<double>(input.size_bytes()), input.size_bytes(), output, false,
                       [&](const CollectivePlan&) {
    if (input.is_contiguous() && output.is_contiguous() && dim == 0) {
      CheckMpi(MPI_Alltoall(ViewData(input), static_cast<int>(block_bytes), MPI_BYTE,
                            ViewData(output), static_cast<int>(block_bytes), MPI_BYTE, group.comm),
               "all_to_all (MPI_Alltoall)");
    } else {
      const MpiDatatype send = BlockDatatype(input, dim, block);
      const MpiDatatype recv = BlockDatatype(output, dim, block);
      CheckMpi(MPI_Alltoall(ViewData(input), 1, send.get(), ViewData(output), 1, recv.get(),
                            group.comm),
               "all_to_all (MPI_Alltoall)");
    }
    return -1.0;
  });
}

CollectiveResult send(RankContext& ctx, const TensorView& tensor, int dest_rank, int tag) {
  Require(dest_rank >= 0 && dest_rank < ctx.world_size() && dest_rank != ctx.rank(), "send", [&] {
    return StrCat("dest_rank ", dest_rank, " must be another rank in [0, ", ctx.world_size(), ")");
  });
  WaitingInCollective waiting("send");
  const double now = ctx.lnc().now();
  if (ctx.local() != nullptr) {  // timing-only, ranks as threads: the clock alone
    ctx.local()->Send(ctx.rank(), dest_rank, tag, now);
    return Advance(ctx, "send", now,
                   PointToPointNs(ctx.topology(), ctx.profile(), ctx.rank(), dest_rank,
                                  static_cast<double>(tensor.size_bytes())),
                   tensor.size_bytes(), tensor, "", "");
  }
  CheckMpi(MPI_Send(&now, 1, MPI_DOUBLE, dest_rank, tag, ctx.world()), "send (clock)");
  if (Functional()) {  // timing-only: the clock alone
    const MpiDatatype type = ViewDatatype(tensor, tensor.size_bytes());
    CheckMpi(MPI_Send(ViewData(tensor), 1, type.get(), dest_rank, tag, ctx.world()),
             "send (MPI_Send)");
  }
  return Advance(ctx, "send", now,
                 PointToPointNs(ctx.topology(), ctx.profile(), ctx.rank(), dest_rank,
                                static_cast<double>(tensor.size_bytes())),
                 tensor.size_bytes(), tensor, "", "");
}

CollectiveResult recv(RankContext& ctx, const TensorView& tensor, int source_rank, int tag) {
  Require(source_rank >= 0 && source_rank < ctx.world_size() && source_rank != ctx.rank(), "recv",
          [&] {
            return StrCat("source_rank ", source_rank, " must be another rank in [0, ",
                          ctx.world_size(), ")");
          });
  WaitingInCollective waiting("recv");
  double sender_now = 0;
  if (ctx.local() != nullptr) {  // timing-only, ranks as threads: the clock alone
    sender_now = ctx.local()->Receive(source_rank, ctx.rank(), tag);
  } else {
    CheckMpi(MPI_Recv(&sender_now, 1, MPI_DOUBLE, source_rank, tag, ctx.world(), MPI_STATUS_IGNORE),
             "recv (clock)");
  }
  if (Functional()) {  // timing-only: the clock alone
    const MpiDatatype type = ViewDatatype(tensor, tensor.size_bytes());
    MPI_Status status;
    CheckMpi(MPI_Recv(ViewData(tensor), 1, type.get(), source_rank, tag, ctx.world(), &status),
             "recv (MPI_Recv)");
    int received = 0;
    MPI_Get_count(&status, type.get(), &received);
    Require(received == 1, "recv", [&] {
      return StrCat(Describe("tensor", tensor),
                    " did not match the size of the message from rank ", source_rank);
    });
  }
  return Advance(ctx, "recv", std::max(sender_now, ctx.lnc().now()),
                 PointToPointNs(ctx.topology(), ctx.profile(), source_rank, ctx.rank(),
                                static_cast<double>(tensor.size_bytes())),
                 tensor.size_bytes(), tensor, "", "");
}

}  // namespace nkisim::collectives
