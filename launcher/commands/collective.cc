#include "launcher/commands/collective.h"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/all_to_all_v.h"
#include "collectives/batch_shard.h"
#include "collectives/collective_cost.h"
#include "collectives/collectives.h"
#include "collectives/communicator.h"
#include "collectives/reduction.h"
#include "collectives/topology.h"
#include "launcher/commands/batch_shard.h"
#include "launcher/commands/common_options.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/sim_mode.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

using collectives::GroupComm;
using collectives::RankContext;

// Timed calls per size of a --baseline sweep when -n is not given (21 blocks of 25 of a call of
// up to 200 us, 525 single-call blocks of a call of kBaselineBlockUs or more).
constexpr int kBaselineIters = 525;
// How long one block of a --baseline sweep should last (microseconds of host time).
constexpr double kBaselineBlockUs = 5000;

struct Options {
  std::string op;
  std::string min_bytes = "4K";
  std::string max_bytes = "4M";
  int factor = 2;
  std::string dtype = "fp32";
  int group_size = 0;  // 0: the whole world
  int iters = 20;
  int warmup = 5;
  bool baseline = false;
  std::string json_path;
  CommonOptions common;  // --lnc --profile
  std::string algorithm = "auto";
  std::string reduction = "algorithm";
  bool model_only = false;
  int ranks = 0;  // --model-only: world size
  std::string launch = "host";  // where the collective is issued: host (as nccom-test) | in-graph
  bool per_rank = false;        // -b / -e count each rank's buffer, not nccom-test's size column
  bool steps = false;           // --model-only: print each row's steps and their terms
};

// The rank's element count for a row whose size is `bytes`: nccom-test's (and nccl-tests') size
// column counts the gathered output of an all_gather and the input of a reduce_scatter (G chunks),
// so a rank holds size / G of it; all_reduce and all_to_all count one rank's buffer. --per-rank
// takes `bytes` as the rank's own (the all_gather input, the reduce_scatter output chunk).
int64_t RankCount(const Options& o, double size_in_ranks, int g, int64_t bytes, int64_t width) {
  const int64_t per_rank = o.per_rank || size_in_ranks != 0 ? bytes : bytes / g;
  return std::max<int64_t>(per_rank / width, 1);
}

HardwareProfile ProfileOf(const Options& o) { return LoadProfile(o.common); }

const char* LaunchWords(const Options& o) {
  return o.launch == "host" ? "from the host per call (host launch cost included)"
                            : "in a compiled graph (no host launch cost)";
}



int64_t ParseSize(const std::string& text, const char* option) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  const double scale = unit.empty() || unit == "B" ? 1
                       : unit == "K"               ? 1024
                       : unit == "M"               ? 1 << 20
                       : unit == "G"               ? 1 << 30
                                                   : -1;
  if (end == text.c_str() || scale < 0 || !(number > 0) || !std::isfinite(number)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(option, ": '", text,
                 "' is not a size; use a positive number of bytes with an optional K, M or G "
                 "suffix"));
  }
  // One buffer of one rank; sweeps past this would not fit any machine this runs on.
  constexpr double kMaxBytes = 64.0 * (1 << 30);
  if (number * scale > kMaxBytes) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(option, ": '", text, "' is ", number * scale, " bytes; the limit is 64G per rank"));
  }
  return std::max<int64_t>(1, static_cast<int64_t>(number * scale));
}

// The checks every sweep shares, before any work: group size, iterations, size range.
void CheckSweep(const Options& o, int world, int64_t min_bytes, int64_t max_bytes) {
  if (o.group_size < 0 || (o.group_size > 0 && world % o.group_size != 0)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("collective: -g ", o.group_size, " must be >= 1 and divide the world size ", world,
                 " (or 0: the whole world)"));
  }
  if (o.iters < 1 || o.warmup < 0) {
    Raise(ErrorCode::kInvalidArgument, StrCat("collective: -n ", o.iters, " must be >= 1 and -w ",
                                              o.warmup, " >= 0"));
  }
  if (o.factor < 2 || max_bytes < min_bytes) {
    Raise(ErrorCode::kInvalidArgument, StrCat("collective: -f ", o.factor, " must be >= 2 and -e (",
                                              max_bytes, ") >= -b (", min_bytes, ")"));
  }
  if (!o.json_path.empty()) CheckWritable(o.json_path, "collective: --json");
}

// Data exactly representable in every dtype and different on every rank and element.
float Value(DType dtype, int rank, int64_t index) {
  const int v = static_cast<int>((rank * 5 + index * 3) % 7);
  return (dtype == DType::kUInt8 || dtype == DType::kUInt16 || dtype == DType::kUInt32) ? v : v - 3;
}

void Fill(const TensorView& t, int rank) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = Value(t.dtype(), rank, static_cast<int64_t>(i));
  t.FromFloats(values);
}

// One collective at one size: its buffers, its nkisim call, its raw MPI twin on the same
// communicator and buffers, and the independent expectation of every output element.
struct Buffers {
  TensorView input, output, iota, gathered;
};

struct Case {
  std::shared_ptr<Buffers> buf = std::make_shared<Buffers>();
  std::function<collectives::CollectiveResult()> run;
  std::function<void()> raw_mpi;
  std::function<float(int64_t)> expected;
};

using CaseMaker = std::function<Case(RankContext&, const GroupComm&, DType, int64_t count)>;

struct OpSpec {
  const char* name;
  double size_in_ranks;  // nccl-tests "size" (what algbw counts) = per-rank bytes x this (0: x G)
  double (*busbw_factor)(double g);
  CaseMaker make;
};

double RingFactor(double g) { return (g - 1) / g; }
double AllReduceFactor(double g) { return 2 * (g - 1) / g; }

float SumRounded(DType dtype, const std::vector<int>& members, int64_t index) {
  double sum = 0;
  for (int m : members) sum += Value(dtype, m, index);
  return RoundTo(dtype, static_cast<float>(sum));
}

Case AllGatherCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  b->input = TensorView::Create({n}, dt, "input");
  b->output = TensorView::Create({group.size() * n}, dt, "output");
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b] { return collectives::all_gather(ctx, group, b->input, b->output); };
  c.raw_mpi = [&group, b] {
    const int bytes = static_cast<int>(b->input.size_bytes());
    MPI_Allgather(b->input.buffer().data(), bytes, MPI_BYTE, b->output.buffer().data(), bytes,
                  MPI_BYTE, group.comm);
  };
  const std::vector<int> members = *group.members;
  c.expected = [dt, members, n](int64_t i) { return Value(dt, members[i / n], i % n); };
  return c;
}

Case AllReduceCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  b->input = TensorView::Create({n}, dt, "input");
  b->output = TensorView::Create({n}, dt, "output");
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b] { return collectives::all_reduce(ctx, group, b->input, b->output); };
  c.raw_mpi = [&group, b] {
    MPI_Allreduce(b->input.buffer().data(), b->output.buffer().data(),
                  static_cast<int>(b->input.size_bytes() / 4), MPI_FLOAT, MPI_SUM, group.comm);
  };
  const std::vector<int> members = *group.members;
  c.expected = [dt, members](int64_t i) { return SumRounded(dt, members, i); };
  return c;
}

Case ReduceScatterCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  b->input = TensorView::Create({group.size() * n}, dt, "input");
  b->output = TensorView::Create({n}, dt, "output");
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b] {
    return collectives::reduce_scatter(ctx, group, b->input, b->output);
  };
  c.raw_mpi = [&group, b] {
    MPI_Reduce_scatter_block(b->input.buffer().data(), b->output.buffer().data(),
                             static_cast<int>(b->output.size_bytes() / 4), MPI_FLOAT, MPI_SUM,
                             group.comm);
  };
  const std::vector<int> members = *group.members;
  const int64_t base = group.position * n;
  c.expected = [dt, members, base](int64_t i) { return SumRounded(dt, members, base + i); };
  return c;
}

Case AllToAllCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  const int64_t m = std::max<int64_t>(n / group.size(), 1);
  b->input = TensorView::Create({group.size() * m}, dt, "input");
  b->output = TensorView::Create({group.size() * m}, dt, "output");
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b] { return collectives::all_to_all(ctx, group, b->input, b->output); };
  c.raw_mpi = [&group, b] {
    const int block = static_cast<int>(b->input.size_bytes() / group.size());
    MPI_Alltoall(b->input.buffer().data(), block, MPI_BYTE, b->output.buffer().data(), block,
                 MPI_BYTE, group.comm);
  };
  const std::vector<int> members = *group.members;
  const int64_t p = group.position;
  c.expected = [dt, members, m, p](int64_t i) { return Value(dt, members[i / m], p * m + i % m); };
  return c;
}

// all_to_all_v on a fixed skew: member i sends member j rows(i, j) = ((i + 2j) mod 3) * m / 2
// elements (m = count / G: 0, m / 2 or m; one more to itself so no buffer is empty); the counts
// are exchanged at run time as an expert-parallel token exchange's are.
Case AllToAllVCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  const int g = group.size(), p = group.position;
  const int64_t m = std::max<int64_t>(n / g, 1);
  auto rows = [m](int i, int j) { return ((i + 2 * j) % 3) * m / 2 + (i == j ? 1 : 0); };
  auto send = std::make_shared<std::vector<int64_t>>();
  int64_t sent = 0, received = 0;
  for (int j = 0; j < g; ++j) {
    send->push_back(rows(p, j));
    sent += rows(p, j);
    received += rows(j, p);
  }
  b->input = TensorView::Create({sent}, dt, "input");
  b->output = TensorView::Create({received}, dt, "output");
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b, send] {
    return static_cast<collectives::CollectiveResult>(
        collectives::all_to_all_v(ctx, group, b->input, *send, b->output));
  };
  const int64_t width = static_cast<int64_t>(SizeOf(dt));
  c.raw_mpi = [&group, b, g, p, rows, width] {
    std::vector<int> sc(g), sd(g), rc(g), rd(g);
    int s_at = 0, r_at = 0;
    for (int j = 0; j < g; ++j) {
      sc[j] = static_cast<int>(rows(p, j) * width);
      rc[j] = static_cast<int>(rows(j, p) * width);
      sd[j] = s_at;
      rd[j] = r_at;
      s_at += sc[j];
      r_at += rc[j];
    }
    MPI_Alltoallv(b->input.buffer().data(), sc.data(), sd.data(), MPI_BYTE,
                  b->output.buffer().data(), rc.data(), rd.data(), MPI_BYTE, group.comm);
  };
  const std::vector<int> members = *group.members;
  c.expected = [dt, members, g, p, rows](int64_t k) {
    for (int i = 0; i < g; ++i) {
      if (k < rows(i, p)) {
        int64_t offset = k;
        for (int j = 0; j < p; ++j) offset += rows(i, j);
        return Value(dt, members[i], offset);
      }
      k -= rows(i, p);
    }
    return -999.0f;
  };
  return c;
}

// NBSd with n = 1 head, S = 1, B = G rows of d = count / G elements: each rank keeps one row.
Case BatchShardCase(RankContext& ctx, const GroupComm& group, DType dt, int64_t n) {
  Case c;
  auto b = c.buf;
  const int64_t g = group.size(), d = std::max<int64_t>(n / g, 1);
  b->input = TensorView::Create({1, g, 1, d}, dt, "q");
  b->gathered = TensorView::Create({g, 1, g, 1, d}, dt, "gathered_buf");
  b->iota = TensorView::Create({1, ctx.world_size()}, DType::kInt32, "iota_workers");
  for (int r = 0; r < ctx.world_size(); ++r) b->iota.set({0, r}, group.set->position_of_rank[r]);
  Fill(b->input, ctx.rank());
  c.run = [&ctx, &group, b, g] {
    const double before = ctx.lnc().now();
    b->output = collectives::attn_q_batch_shard(ctx, b->input, b->iota, b->gathered,
                                                static_cast<int>(g), group);
    return collectives::CollectiveResult{before, ctx.lnc().now(), b->input.size_bytes(), "", ""};
  };
  c.raw_mpi = [&group, b] {
    const int bytes = static_cast<int>(b->input.size_bytes());
    MPI_Allgather(b->input.buffer().data(), bytes, MPI_BYTE, b->gathered.buffer().data(), bytes,
                  MPI_BYTE, group.comm);
  };
  const std::vector<int> members = *group.members;
  const int64_t p = group.position;
  c.expected = [dt, members, d, p](int64_t i) { return Value(dt, members[i / d], p * d + i % d); };
  return c;
}

const OpSpec* FindOp(const std::string& name) {
  static const OpSpec kOps[] = {
      {"all_gather", 0, RingFactor, AllGatherCase},
      {"all_reduce", 1, AllReduceFactor, AllReduceCase},
      {"reduce_scatter", 0, RingFactor, ReduceScatterCase},
      {"all_to_all", 1, RingFactor, AllToAllCase},
      {"all_to_all_v", 1, RingFactor, AllToAllVCase},
      {"batch_shard", 0, RingFactor, BatchShardCase},
  };
  for (const OpSpec& op : kOps) {
    if (name == op.name) return &op;
  }
  Raise(ErrorCode::kInvalidArgument,
        StrCat("collective: '", name, "' is not one of all_gather, all_reduce, reduce_scatter, ",
               "all_to_all, all_to_all_v, batch_shard"));
}

int64_t CountWrong(const Case& c) {
  const std::vector<float> got = c.buf->output.ToFloats();
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = c.expected(static_cast<int64_t>(i));
    if (!(got[i] == want)) ++wrong;
  }
  return wrong;
}

// Mean host time of one call in us, the slowest rank's.
double TimeUs(const std::function<void()>& call, int iters, int warmup, MPI_Comm comm) {
  for (int i = 0; i < warmup; ++i) call();
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) call();
  double us = (MPI_Wtime() - start) * 1e6 / iters, slowest = 0;
  MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

struct Row {
  int64_t per_rank_bytes, count;
  double size_bytes, host_us, algbw, busbw, sim_us, mpi_us, mpi_ratio;
  int64_t wrong;
  std::string algorithm;
  int blocks = 0, calls_per_block = 0;  // --baseline: the alternating blocks of each side
};

int RunSweep(const Options& o) {
  // The sweep calls each collective many times: its reductions keep their wire buffers between
  // calls (collectives/reduction.h).
  const collectives::KeepReductionBuffers keep_buffers;
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const OpSpec& op = *FindOp(o.op);
  const DType dtype = ParseDType(o.dtype);
  const int64_t min_bytes = ParseSize(o.min_bytes, "-b"), max_bytes = ParseSize(o.max_bytes, "-e");
  CheckSweep(o, world, min_bytes, max_bytes);
  const int g = o.group_size == 0 ? world : o.group_size;
  if (o.baseline && o.common.timing_only) {
    Raise(ErrorCode::kInvalidArgument,
          "collective: --baseline and --timing-only exclude each other: the baseline compares "
          "host time moving real payloads");
  }
  if (rank == 0) {
    ApplySimMode("collective", o.common, false);
  } else {
    SetSimMode(o.common.timing_only ? SimMode::kTimingOnly : SimMode::kFunctional);
  }
  if (o.baseline && dtype != DType::kFloat32) {
    Raise(ErrorCode::kInvalidArgument,
          "collective: --baseline compares fp32 data; use --dtype fp32");
  }
  const HardwareProfile profile = ProfileOf(o);
  proto::Topology spec;
  spec.set_world_size(world);
  spec.set_lnc(o.common.lnc);
  auto* set = spec.add_replica_groups();
  set->set_name("bench");
  set->mutable_contiguous()->set_group_size(g);
  set->set_algorithm(o.algorithm);
  set->set_reduction(o.reduction);
  const collectives::ResolvedTopology topology =
      collectives::ResolveTopology(spec, profile, "collective --group-size");
  LogicalCore lnc(o.common.lnc, profile, rank);
  // Thousands of timed calls and no trace: keep the totals, not a record per call.
  for (int c = 0; c < lnc.lnc(); ++c) lnc.core(c).timeline().set_keep_records(false);
  RankContext ctx(MPI_COMM_WORLD, topology, lnc);
  ctx.set_launch(collectives::ParseLaunch(o.launch, "collective: --launch"));
  const GroupComm& group = ctx.group("bench");

  if (rank == 0) {
    std::printf(
        "# nkisim collective %s: %d ranks, groups of %d, %s, %d iterations after %d warm-up;"
        " profile %s, algorithm %s, reduction %s\n"
        "# size = bytes algbw counts (nccl-tests, nccom-test; -b / -e count it%s); per-rank = bytes"
        " each rank contributes; GB = 1e9 B; sim = simulated time, launched %s\n",
        op.name, world, g, DTypeName(dtype), o.iters, o.warmup, profile.name().c_str(),
        o.algorithm.c_str(), o.reduction.c_str(), o.per_rank ? " per rank (--per-rank)" : "",
        LaunchWords(o));
    std::printf("%12s %12s %12s %8s %11s %9s %9s %10s %-12s %7s%s\n", "size(B)", "count",
                "per-rank(B)", "dtype", "time(us)", "algbw", "busbw", "sim(us)", "algorithm", "#wrong",
                o.baseline ? "     mpi(us)  ratio" : "");
  }
  std::vector<Row> rows;
  int64_t total_wrong = 0;
  const int64_t width = static_cast<int64_t>(SizeOf(dtype));
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= o.factor) {
    const int64_t count = RankCount(o, op.size_in_ranks, g, bytes, width);
    Case c = op.make(ctx, group, dtype, count);
    collectives::CollectiveResult last;
    double host_us = 0, mpi_us = 0, mpi_ratio = 0;
    int baseline_blocks = 0, baseline_calls_per_block = 0;
    if (o.baseline) {
      // Side by side: blocks of nkisim calls and raw MPI calls alternate, so both see the same
      // machine (an oversubscribed host drifts), and which of the pair goes first alternates
      // too (ABBA), so neither profits from following the other. Each time is the median of its
      // blocks' means; the ratio is the median of the ratios of neighbouring blocks, which a
      // drift that moves both alike leaves alone. A block lasts about kBaselineBlockUs (a probe
      // of three raw calls sets its length: at most -n / 7 calls and 25, at least one), so a
      // call of a few milliseconds is its own block and the pairs follow the host's drift
      // closely; the blocks are odd in number (one middle element), at least 7, and together
      // time about -n calls of each.
      const double probe_us = TimeUs(c.raw_mpi, 3, o.warmup, MPI_COMM_WORLD);
      const int longest = std::clamp(o.iters / 7, 1, 25);
      const int per_block =
          std::clamp(static_cast<int>(kBaselineBlockUs / std::max(probe_us, 1e-3)), 1, longest);
      const int blocks = std::max(7, o.iters / per_block) | 1;
      std::vector<double> ours, raw, ratios;
      for (int blk = 0; blk < blocks; ++blk) {
        // After the first block, one warm-up call re-warms what the other side's block evicted,
        // unless the block is that one call (a call of milliseconds warms itself).
        const int warmup = blk == 0 ? o.warmup : per_block > 1 ? 1 : 0;
        auto time_ours = [&] {
          ours.push_back(TimeUs([&] { last = c.run(); }, per_block, warmup, MPI_COMM_WORLD));
        };
        auto time_raw = [&] { raw.push_back(TimeUs(c.raw_mpi, per_block, warmup, MPI_COMM_WORLD)); };
        if (blk % 2 == 0) {
          time_ours();
          time_raw();
        } else {
          time_raw();
          time_ours();
        }
        ratios.push_back(ours.back() / raw.back());
      }
      std::sort(ours.begin(), ours.end());
      std::sort(raw.begin(), raw.end());
      std::sort(ratios.begin(), ratios.end());
      host_us = ours[blocks / 2];
      mpi_us = raw[blocks / 2];
      mpi_ratio = ratios[blocks / 2];
      baseline_blocks = blocks;
      baseline_calls_per_block = per_block;
      last = c.run();  // the raw calls wrote the same output buffer: check nkisim's own result
    } else {
      host_us = TimeUs([&] { last = c.run(); }, o.iters, o.warmup, MPI_COMM_WORLD);
    }
    // Timing-only: nothing to check (no payload moved).
    int64_t wrong = Functional() ? CountWrong(c) : 0, wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += wrong_all;
    Row row{count * width, count,    0, host_us, 0, 0, (last.end_ns - last.start_ns) / 1000.0,
            mpi_us,        mpi_ratio, wrong_all, last.algorithm, baseline_blocks,
            baseline_calls_per_block};
    row.size_bytes = row.per_rank_bytes * (op.size_in_ranks == 0 ? g : op.size_in_ranks);
    row.algbw = row.size_bytes / (host_us * 1e3);  // B/us -> GB/s
    row.busbw = row.algbw * op.busbw_factor(g);
    rows.push_back(row);
    if (rank == 0) {
      std::printf("%12.0f %12lld %12lld %8s %11.2f %9.3f %9.3f %10.3f %-12s %7lld",
                  row.size_bytes, static_cast<long long>(count),
                  static_cast<long long>(row.per_rank_bytes), DTypeName(dtype), host_us, row.algbw,
                  row.busbw, row.sim_us, row.algorithm.empty() ? "-" : row.algorithm.c_str(),
                  static_cast<long long>(wrong_all));
      if (o.baseline) std::printf(" %11.2f %6.3f", mpi_us, mpi_ratio);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (rank == 0 && !o.json_path.empty()) {
    nlohmann::json j = {{"op", op.name},
                        {"ranks", world},
                        {"group_size", g},
                        {"dtype", DTypeName(dtype)},
                        {"rows", nlohmann::json::array()}};
    for (const Row& r : rows) {
      j["rows"].push_back({{"size_bytes", r.size_bytes},
                           {"count", r.count},
                           {"per_rank_bytes", r.per_rank_bytes},
                           {"host_us", r.host_us},
                           {"algbw_gbps", r.algbw},
                           {"busbw_gbps", r.busbw},
                           {"sim_us", r.sim_us},
                           {"algorithm", r.algorithm},
                           {"wrong", r.wrong},
                           {"mpi_us", r.mpi_us},
                           {"mpi_ratio", r.mpi_ratio},
                           {"baseline_blocks", r.blocks},
                           {"baseline_calls_per_block", r.calls_per_block}});
    }
    WriteFileAtomically(o.json_path, j.dump(2) + "\n", "collective: --json");
  }
  if (rank == 0) {
    if (Functional()) {
      std::printf("# %s: %lld wrong element(s) in all\n", total_wrong ? "FAIL" : "PASS",
                  static_cast<long long>(total_wrong));
    } else {
      std::printf("# timing-only: simulated times only, no element checked\n");
    }
  }
  return total_wrong ? 1 : 0;
}

// --steps: each step's terms as collectives/link_model.h adds them (docs/collectives.md,
// "Per-step arithmetic").
void PrintSteps(const collectives::ScheduleCost& cost) {
  std::printf("#   %-28s %9s %10s %10s %9s %12s %12s %12s %-9s\n", "step", "transfers", "latency(ns)",
              "move(ns)", "hbm(ns)", "link(B)", "rank-dma(B)", "chip-hbm(B)", "bound");
  for (const collectives::StepCost& s : cost.per_step) {
    std::printf("#   %-28s %9d %10.1f %10.1f %9.1f %12.0f %12.0f %12.0f %-9s\n", s.label.c_str(),
                s.transfers, s.latency_ns, s.move_ns, s.hbm_ns, s.link_bytes, s.dma_bytes,
                s.hbm_bytes, s.bound.c_str());
  }
}

// --model-only: the sweep priced from the schedules alone, for any world size, without MPI.
int RunModelOnly(const Options& o) {
  // Each size builds and drops a schedule of up to millions of chunk entries: reuse that memory
  // from size to size instead of faulting in fresh pages each time.
  SetRankMemoryPolicy();
  const OpSpec& op = *FindOp(o.op);
  if (o.op == "batch_shard") {
    Raise(ErrorCode::kInvalidArgument,
          "collective --model-only: batch_shard moves real tensors; price its all_gather instead");
  }
  if (o.op == "all_to_all_v") {
    Raise(ErrorCode::kInvalidArgument,
          "collective --model-only: all_to_all_v's counts are known only at run time; run it "
          "under mpiexec (its price is collectives::PlanAllToAllV of the count matrix)");
  }
  if (o.ranks < 1 || o.ranks > 16384) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("collective --model-only: --ranks ", o.ranks,
                 " must be in [1, 16384] (the world size)"));
  }
  const int g = o.group_size == 0 ? o.ranks : o.group_size;
  const HardwareProfile profile = ProfileOf(o);
  const DType dtype = ParseDType(o.dtype);
  const int64_t min_bytes = ParseSize(o.min_bytes, "-b"), max_bytes = ParseSize(o.max_bytes, "-e");
  CheckSweep(o, o.ranks, min_bytes, max_bytes);
  const collectives::CollectiveOp cop = collectives::ParseOp(o.op);
  // The first group of contiguous ranks 0 .. g - 1, placed as the default topology places them.
  RanksPerChip(profile, o.common.lnc,
               StrCat("collective: --lnc ", o.common.lnc, " on profile ",
                      o.common.profile_path.empty() ? "trn2 (built in)" : o.common.profile_path));
  collectives::GroupPlacement all = collectives::DefaultPlacement(o.ranks, o.common.lnc, profile);
  collectives::GroupPlacement group = all;
  group.world_rank.resize(static_cast<size_t>(g));
  group.chip.resize(static_cast<size_t>(g));
  group.ranks_on_chip.resize(static_cast<size_t>(g));
  const int per_chip = all.ranks_on_chip.empty() ? 1 : all.ranks_on_chip[0];
  const int chips = (o.ranks + per_chip - 1) / per_chip;
  std::printf(
      "# nkisim collective %s --model-only: %d ranks (%d chips, %d instances) at LNC %d, group of "
      "%d; profile %s, algorithm %s\n"
      "# size = bytes algbw counts (nccl-tests); per-rank = bytes each rank contributes; GB = 1e9 B;"
      " sim = simulated time from the schedule on the link model, launched %s\n",
      op.name, o.ranks, chips,
      (chips + static_cast<int>(profile.chips_per_instance()) - 1) /
          static_cast<int>(profile.chips_per_instance()),
      o.common.lnc, g, profile.name().c_str(), o.algorithm.c_str(), LaunchWords(o));
  const collectives::Launch launch = collectives::ParseLaunch(o.launch, "collective: --launch");
  std::printf("%12s %12s %-12s %-8s %6s %12s %12s %9s %9s  %s\n", "size(B)", "per-rank(B)",
              "algorithm", "launch", "steps", "sim(us)", "fixed(us)", "algbw", "busbw", "why");
  const auto started = std::chrono::steady_clock::now();
  nlohmann::json rows = nlohmann::json::array();
  const int64_t width = static_cast<int64_t>(SizeOf(dtype));
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= o.factor) {
    const int64_t per_rank = RankCount(o, op.size_in_ranks, g, bytes, width) * width;
    const collectives::CollectivePlan plan = collectives::PlanCollective(
        cop, group, static_cast<double>(per_rank), profile, o.algorithm, launch);
    const double size = static_cast<double>(per_rank) * (op.size_in_ranks == 0 ? g : op.size_in_ranks);
    const double us = plan.cost.total_ns / 1000.0;
    const double algbw = us > 0 ? size / (us * 1e3) : 0, busbw = algbw * op.busbw_factor(g);
    const double fixed_us = (plan.cost.fixed_ns + plan.cost.in_graph_fixed_ns) / 1000.0;
    std::printf("%12.0f %12lld %-12s %-8s %6d %12.3f %12.3f %9.3f %9.3f  %s\n", size,
                static_cast<long long>(per_rank), plan.algorithm.c_str(),
                collectives::LaunchName(launch), plan.cost.steps, us, fixed_us, algbw, busbw,
                plan.reason.c_str());
    if (o.steps) PrintSteps(plan.cost);
    rows.push_back({{"size_bytes", size}, {"per_rank_bytes", per_rank}, {"algorithm", plan.algorithm},
                    {"launch", collectives::LaunchName(launch)}, {"fixed_us", fixed_us},
                    {"steps", plan.cost.steps}, {"sim_us", us}, {"algbw_gbps", algbw},
                    {"busbw_gbps", busbw}, {"reason", plan.reason}});
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::printf("# priced %zu sizes in %.1f ms of host time\n", rows.size(), ms);
  if (!o.json_path.empty()) {
    const nlohmann::json j = {{"op", op.name},   {"ranks", o.ranks},          {"group_size", g},
                              {"lnc", o.common.lnc},    {"profile", profile.name()}, {"rows", rows}};
    WriteFileAtomically(o.json_path, j.dump(2) + "\n", "collective: --json");
  }
  return 0;
}

}  // namespace

void AddCollectiveCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<Options>();
  cmd->add_option("op", o->op,
                  "all_gather | all_reduce | reduce_scatter | all_to_all | all_to_all_v | batch_shard")
      ->required();
  cmd->add_option("-b,--minbytes", o->min_bytes,
                  "smallest size as nccom-test counts it (all_gather: the gathered output; "
                  "reduce_scatter: the input; K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", o->max_bytes, "largest size, counted as -b")->capture_default_str();
  cmd->add_flag("--per-rank", o->per_rank,
                "-b / -e count each rank's own buffer (the all_gather input, the reduce_scatter "
                "output chunk) instead of nccom-test's size column");
  cmd->add_option("--launch", o->launch,
                  "host: launched from the host per call, as nccom-test measures (the host launch "
                  "cost included); in-graph: issued inside a compiled graph, as a model's layers")
      ->check(CLI::IsMember({"host", "in-graph", "in_graph"}))
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", o->factor, "size multiplier between rows")
      ->capture_default_str();
  cmd->add_option("-d,--dtype", o->dtype, "element type")->capture_default_str();
  cmd->add_option("-g,--group-size", o->group_size,
                  "ranks per replica group (contiguous blocks); default: the whole world");
  cmd->add_option("-n,--iters", o->iters,
                  "timed calls per size; with --baseline and no -n: " +
                      std::to_string(kBaselineIters) + " (alternating blocks of about 5 ms)")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", o->warmup, "untimed calls per size")->capture_default_str();
  const CommonOptionHandles common =
      AddCommonOptions(cmd, &o->common, kLncFlag | kProfileFlag | kTimingOnlyFlag, {});
  common.lnc->description("physical cores per rank");
  cmd->add_flag("--baseline", o->baseline,
                "also time the raw MPI call on the same communicator and buffers; print the ratio");
  cmd->add_option("--json", o->json_path, "also write the rows as JSON");
  cmd->add_option("--algorithm", o->algorithm,
                  "auto (as the runtime chooses) or one of " + collectives::AlgorithmNames())
      ->capture_default_str();
  cmd->add_option("--reduction", o->reduction,
                  "algorithm (add in the schedule's order, rounding every step) | exact")
      ->check(CLI::IsMember({"algorithm", "exact"}))
      ->capture_default_str();
  cmd->add_flag("--model-only", o->model_only,
                "price the sweep from the schedules alone for --ranks N; no MPI, no data");
  cmd->add_option("--ranks", o->ranks, "world size for --model-only");
  cmd->add_flag("--steps", o->steps,
                "with --model-only: print every step's latency, data-movement and HBM terms and "
                "the bytes behind them");
  auto batch_shard = std::make_shared<BatchShardCaseOptions>();
  AddBatchShardCaseOptions(cmd, batch_shard.get());
  cmd->callback([o, batch_shard, cmd, exit_code] {
    if (o->model_only) {
      try {
        *exit_code = RunModelOnly(*o);
      } catch (const Error& e) {
        std::fprintf(stderr, "nkisim: %s: %s\n", ErrorCodeName(e.code()), e.what());
        *exit_code = ExitCodeFor(e.code());
      }
      return;
    }
    // A ratio of two host timings on an oversubscribed machine needs many alternating blocks to
    // be steady: 7 blocks of the plain default's 20 calls moved the 1-4 MiB ratios by up to 6%
    // from run to run; 525 calls in blocks of about 5 ms keep them within 2%
    // (docs/collectives.md).
    if (o->baseline && cmd->count("--iters") == 0) o->iters = kBaselineIters;
    if (o->steps) {
      Raise(ErrorCode::kInvalidArgument,
            "collective: --steps applies to --model-only only (it prints the priced schedule)");
    }
    if (cmd->count("--ranks") > 0) {
      // Without --model-only the world size is mpirun's -np; a --ranks that did nothing would
      // let a user believe they priced N ranks.
      Raise(ErrorCode::kInvalidArgument,
            StrCat("collective: --ranks ", o->ranks,
                   " applies to --model-only only (a launched sweep runs on mpirun's ranks)"));
    }
    // As a job's ranks do (runtime/host_memory.h): without it each call's fp32 copy and wire
    // buffers are handed back to the system and faulted in again by the next call (a 64-rank
    // 512 KiB bf16 all_reduce: 2.2 MiB of fresh pages per rank and call).
    SetRankMemoryPolicy();
    MPI_Init(nullptr, nullptr);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    try {
      if (!batch_shard->topology.empty()) {
        if (o->op != "batch_shard") {
          Raise(ErrorCode::kInvalidArgument,
                StrCat("collective: --topology runs batch_shard only, not '", o->op, "'"));
        }
        if (o->common.timing_only) {
          Raise(ErrorCode::kInvalidArgument,
                "collective: --timing-only does not apply to the --topology batch_shard case, "
                "which exists to check its values; time batch_shard with `nkisim run "
                "--timing-only`");
        }
        if (cmd->count("--dtype") > 0) batch_shard->dtype = o->dtype;  // bf16 stays this mode's default
        batch_shard->common.lnc = o->common.lnc;
        *exit_code = RunBatchShardCase(*batch_shard);
      } else {
        *exit_code = RunSweep(*o);
      }
    } catch (const Error& e) {
      // Every rank that fails reports; MPI_Abort ends the job so no rank waits forever.
      std::fprintf(stderr, "nkisim: rank %d: %s: %s\n", rank, ErrorCodeName(e.code()), e.what());
      MPI_Abort(MPI_COMM_WORLD, ExitCodeFor(e.code()));
    }
    MPI_Finalize();
  });
}

}  // namespace nkisim::launcher
