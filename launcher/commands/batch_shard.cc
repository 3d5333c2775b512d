#include "launcher/commands/batch_shard.h"

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/batch_shard.h"
#include "collectives/communicator.h"
#include "collectives/topology.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {
namespace {

using collectives::BatchShardLayout;

constexpr const char* kWhat = "collective batch_shard";

// The options after every check that needs no file and no other rank.
struct Plan {
  BatchShardLayout layout = BatchShardLayout::kNBSd;
  std::string layout_name;  // the CLI spelling, lower case
  DType dtype = DType::kBFloat16;
};

Plan CheckFlags(const BatchShardCaseOptions& o) {
  Plan plan;
  std::string lower = o.layout;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "nbsd") {
    plan.layout = collectives::ParseBatchShardLayout("NBSd");
  } else if (lower == "dbns") {
    plan.layout = collectives::ParseBatchShardLayout("dBnS");
  } else {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kWhat, ": --layout '", o.layout,
                 "' is not one of nbsd ((n, B, S, d) -> (G*n, B/G, S, d)) or dbns ((d, B, 1, S) -> "
                 "(G, d, B/G, S)), in any case"));
  }
  plan.layout_name = lower;
  try {
    plan.dtype = ParseDType(o.dtype);
  } catch (const Error& e) {
    Raise(e.code(), StrCat(kWhat, ": --dtype: ", e.what()));
  }
  // Sizes and the host bytes of one rank's input, gathered buffer and output (inputs of every
  // member are gathered once more for the check): refused before anything is allocated.
  const double per_rank = static_cast<double>(o.n) * o.s * o.d * std::max(o.b, 1);
  CheckKernelFlags(kWhat, {{"--n", o.n}, {"--s", o.s}, {"--d", o.d}}, per_rank * 8 * 4);
  if (o.b < 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kWhat, ": --b ", o.b, " must be >= 1 (or 0: the topology's batch)"));
  }
  if (plan.layout == BatchShardLayout::kDBnS && o.n != 1) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kWhat, ": --layout dbns takes input (d, B, 1, S) and needs --n 1; got --n ", o.n));
  }
  if (o.topology.empty()) {
    Raise(ErrorCode::kInvalidArgument, StrCat(kWhat, ": --topology FILE is required"));
  }
  return plan;
}

// The topology, resolved and checked against the flags and the job.
collectives::ResolvedTopology LoadAndCheckTopology(const BatchShardCaseOptions& o, int world) {
  collectives::ResolvedTopology t = collectives::ResolveTopology(
      collectives::LoadTopology(o.topology), Trn2Profile(), o.topology);
  if (t.batch_shard_group.empty()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(kWhat, ": topology ", o.topology,
                 " has no batch_shard block; this mode needs one naming the replica group set and "
                 "the batch (batch_shard { replica_group: \"...\" batch: B })"));
  }
  if (o.b != 0 && o.b != t.batch) {
    Raise(ErrorCode::kInvalidArgument, StrCat(kWhat, ": --b ", o.b, " does not match batch ",
                                              t.batch, " of the batch_shard block in ", o.topology,
                                              "; pass --b ", t.batch, " or leave --b out"));
  }
  if (o.common.lnc != t.lnc) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kWhat, ": --lnc ", o.common.lnc, " does not match lnc ", t.lnc, " of ", o.topology,
                 " (its placement assumes it); pass --lnc ", t.lnc));
  }
  if (o.b == 0) {  // the file's batch sizes the tensors: held to the flags' limits
    const double per_rank = static_cast<double>(o.n) * o.s * o.d * t.batch;
    CheckKernelFlags(kWhat, {{"batch_shard.batch", t.batch}}, per_rank * (world + 2) * 4);
  }
  if (world != t.world_size) {
    Raise(ErrorCode::kBadConfig,
          StrCat(kWhat, ": topology ", o.topology, " has world_size ", t.world_size,
                 " but the job has ", world, " ranks; run it under mpirun -n ", t.world_size));
  }
  return t;
}

// Contiguous row-major bytes of a contiguous view.
const std::byte* Data(const TensorView& t) {
  if (!t.is_contiguous()) {
    Raise(ErrorCode::kInternal, StrCat(kWhat, ": tensor '", t.name(), "' is not contiguous"));
  }
  return t.element_ptr(std::vector<int64_t>(static_cast<size_t>(t.rank()), 0));
}

// Values for the seeded inputs: small, different on every element, in range of every dtype.
void SeedRange(DType dtype, float* lo, float* hi) {
  const bool is_unsigned =
      dtype == DType::kUInt8 || dtype == DType::kUInt16 || dtype == DType::kUInt32;
  *lo = IsFloat(dtype) ? -2.0f : is_unsigned ? 0.0f : -100.0f;
  *hi = IsFloat(dtype) ? 2.0f : 100.0f;
}

}  // namespace

void AddBatchShardCaseOptions(CLI::App* cmd, BatchShardCaseOptions* o) {
  CLI::Option* topology = cmd->add_option(
      "--topology", o->topology,
      "batch_shard only: a topology file with a batch_shard block; runs one attn_q_batch_shard on "
      "real inputs (its group set, B and iota_workers) instead of the size sweep");
  auto needs_topology = [topology](CLI::Option* option) {
    option->needs(topology);
    return option;
  };
  needs_topology(cmd->add_option("--layout", o->layout,
                                 "with --topology: nbsd ((n, B, S, d) -> (G*n, B/G, S, d)) or dbns "
                                 "((d, B, 1, S) -> (G, d, B/G, S)); any case"))
      ->capture_default_str();
  needs_topology(cmd->add_option(
      "--b", o->b, "with --topology: batch B; must equal the file's batch (default: the file's)"));
  needs_topology(cmd->add_option("--n", o->n, "with --topology: heads n per rank"))
      ->capture_default_str();
  needs_topology(cmd->add_option("--s", o->s, "with --topology: sequence length S"))
      ->capture_default_str();
  needs_topology(cmd->add_option("--d", o->d, "with --topology: head dim d"))
      ->capture_default_str();
  needs_topology(cmd->add_option(
      "--in-dir", o->in_dir,
      "with --topology: rank R reads DIR/q.rank<R>.npy (default: seeded random inputs)"));
  needs_topology(cmd->add_option("--out-dir", o->out_dir,
                                 "with --topology: rank R writes DIR/q_out.rank<R>.npy"));
  needs_topology(AddCommonOptions(cmd, &o->common, kSeedFlag, {}).seed)
      ->description("with --topology: seed of the random inputs");
}

int RunBatchShardCase(const BatchShardCaseOptions& o) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    const Plan plan = CheckFlags(o);
    const collectives::ResolvedTopology topology = LoadAndCheckTopology(o, world);
    if (!o.out_dir.empty()) PrepareKernelOutputDir(o.out_dir, "--out-dir");
    const bool nbsd = plan.layout == BatchShardLayout::kNBSd;
    const collectives::GroupSet& set = topology.group_set(topology.batch_shard_group);
    const collectives::Group& members = set.group_of(rank);
    const int64_t g = static_cast<int64_t>(members.size());
    const int64_t p = set.position_of_rank[rank];
    const int64_t b = topology.batch, n = o.n, s = o.s, d = o.d, rows = b / g;

    const Shape in_shape = nbsd ? Shape{n, b, s, d} : Shape{d, b, 1, s};
    const Shape gathered_shape = nbsd ? Shape{g, n, b, s, d} : Shape{g, d, b, 1, s};
    const Shape out_shape = nbsd ? Shape{g * n, rows, s, d} : Shape{g, d, rows, s};
    const int64_t width = static_cast<int64_t>(SizeOf(plan.dtype));
    const int64_t in_bytes = NumElements(in_shape) * width;
    if (in_bytes > INT_MAX) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kWhat, ": the input ", ShapeString(in_shape), " ", DTypeName(plan.dtype), " is ",
                   in_bytes, " bytes per rank; this check gathers at most ", INT_MAX));
    }

    const std::string name = StrCat("q.rank", rank);
    const std::string in_path = o.in_dir.empty() ? "" : StrCat(o.in_dir, "/", name, ".npy");
    float lo = 0, hi = 0;
    SeedRange(plan.dtype, &lo, &hi);
    const TensorView input = LoadOrRandomInput(in_path, name, in_shape, plan.dtype, o.common.seed, lo, hi);

    TensorView iota = TensorView::Create({1, world}, DType::kInt32, "iota_workers");
    for (int r = 0; r < world; ++r) iota.set({0, r}, static_cast<float>(topology.iota_workers[r]));
    const TensorView gathered = TensorView::Create(gathered_shape, plan.dtype, "gathered_buf");

    LogicalCore lnc(topology.lnc, Trn2Profile(), rank);
    collectives::RankContext ctx(MPI_COMM_WORLD, topology, lnc);
    const collectives::GroupComm& group = ctx.group(topology.batch_shard_group);
    const double before = ctx.lnc().now();
    const TensorView out = collectives::attn_q_batch_shard(ctx, input, iota, gathered,
                                                           static_cast<int>(g), group, plan.layout);
    const double sim_ns = ctx.lnc().now() - before;
    if (out.shape() != out_shape || out.dtype() != plan.dtype) {
      Raise(ErrorCode::kInternal,
            StrCat(kWhat, ": attn_q_batch_shard returned ", ShapeString(out.shape()), " ",
                   DTypeName(out.dtype()), "; expected ", ShapeString(out_shape), " ",
                   DTypeName(plan.dtype)));
    }
    if (!o.out_dir.empty()) WriteOutput(o.out_dir, StrCat("q_out.rank", rank), out);

    // The plain expectation: every rank's input bytes, then index arithmetic on them.
    std::vector<std::byte> all(static_cast<size_t>(in_bytes * world));
    collectives::CheckMpi(
        MPI_Allgather(Data(input), static_cast<int>(in_bytes), MPI_BYTE, all.data(),
                      static_cast<int>(in_bytes), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgather of the inputs");
    const std::byte* got = Data(out);
    int64_t wrong = 0, i = 0;
    auto check = [&](int member, int64_t source_index) {
      const std::byte* want = all.data() + member * in_bytes + source_index * width;
      if (std::memcmp(got + i * width, want, static_cast<size_t>(width)) != 0) {
        if (wrong == 0) {
          std::fprintf(stderr,
                       "nkisim: rank %d: q_out element %lld is %g; expected %g (element %lld of "
                       "rank %d's input)\n",
                       rank, static_cast<long long>(i), ToFloat(plan.dtype, got + i * width),
                       ToFloat(plan.dtype, want), static_cast<long long>(source_index), member);
        }
        ++wrong;
      }
      ++i;
    };
    for (int64_t j = 0; j < g; ++j) {
      const int member = members[static_cast<size_t>(j)];
      if (nbsd) {  // out[j * n + h, r, t, e] = in_member[h, p * rows + r, t, e]
        for (int64_t h = 0; h < n; ++h)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t t = 0; t < s; ++t)
              for (int64_t e = 0; e < d; ++e)
                check(member, ((h * b + p * rows + r) * s + t) * d + e);
      } else {  // out[j, e, r, t] = in_member[e, p * rows + r, 0, t]
        for (int64_t e = 0; e < d; ++e)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t t = 0; t < s; ++t) check(member, (e * b + p * rows + r) * s + t);
      }
    }

    int64_t wrong_all = 0;
    double sim_max = 0;
    collectives::CheckMpi(
        MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce of the wrong counts");
    collectives::CheckMpi(MPI_Reduce(&sim_ns, &sim_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
                          "MPI_Reduce of the simulated times");
    if (rank == 0) {
      const std::string inputs = o.in_dir.empty() ? StrCat("seeded (--seed ", o.common.seed, ")")
                                                  : StrCat(o.in_dir, "/q.rank<R>.npy");
      std::string table;
      for (int r = 0; r < world; ++r) table += StrCat(r ? ", " : "", topology.iota_workers[r]);
      std::printf(
          "nkisim collective batch_shard: %d ranks x LNC %d, topology %s\n"
          "  group set '%s': %zu groups of G = %lld; B = %lld, iota_workers [%s]\n"
          "  layout %s, %s: input %s -> output %s per rank\n"
          "  inputs: %s\n",
          world, topology.lnc, o.topology.c_str(), set.name.c_str(), set.groups.size(),
          static_cast<long long>(g), static_cast<long long>(b), table.c_str(),
          plan.layout_name.c_str(), DTypeName(plan.dtype), ShapeString(in_shape).c_str(),
          ShapeString(out_shape).c_str(), inputs.c_str());
      if (!o.out_dir.empty()) std::printf("  outputs: %s/q_out.rank<R>.npy\n", o.out_dir.c_str());
      std::printf("  simulated time of the call: %.3f us (slowest rank)\n", sim_max / 1000.0);
      std::printf("batch_shard: %s (%lld of %lld elements wrong over %d ranks)\n",
                  wrong_all ? "FAIL" : "PASS", static_cast<long long>(wrong_all),
                  static_cast<long long>(NumElements(out_shape) * world), world);
      std::fflush(stdout);
    }
    return wrong_all ? 1 : 0;
  } catch (const Error& e) {
    // Every rank that fails reports; MPI_Abort ends the job so no rank waits forever.
    std::fprintf(stderr, "nkisim: rank %d: %s: %s\n", rank, ErrorCodeName(e.code()), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, ExitCodeFor(e.code()));
    return ExitCodeFor(e.code());  // not reached
  }
}

}  // namespace nkisim::launcher
