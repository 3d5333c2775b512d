#include "launcher/commands/kernel_attention.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/attention_cte.h"
#include "kernels/attention/attention_tkg.h"
#include "kernels/reference/attention_ref.h"
#include "kernels/reference/causal_attention_ref.h"
#include "kernels/reference/compare.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

// Position T - 1 of a cache as [B, d]: k_cache [B, d, T] along dim 2, v_cache [B, T, d] along 1.
TensorView LastPosition(const TensorView& cache, int token_dim) {
  return cache.select(token_dim, cache.dim(token_dim) - 1);
}

// A copy of cache with `rows` [B, d] at position T - 1: what it holds once the kernel appended.
TensorView WithRowsAppended(const TensorView& cache, int token_dim, const TensorView& rows) {
  TensorView out = TensorView::Create(cache.shape(), cache.dtype(), cache.name() + "_appended");
  out.FromFloats(cache.ToFloats());
  LastPosition(out, token_dim).FromFloats(rows.ToFloats());
  return out;
}

// "" when position T - 1 of cache holds `rows` exactly, else the first element that differs.
std::string AppendMismatch(const char* name, const TensorView& cache, int token_dim,
                           const TensorView& rows) {
  const std::vector<float> got = LastPosition(cache, token_dim).ToFloats(), want = rows.ToFloats();
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(got[i] == want[i])) {
      return StrCat(name, " position T - 1, element ", i, " of [B, d] = ", got[i],
                    ", the appended row holds ", want[i]);
    }
  }
  return "";
}

reference::Tolerance ToleranceFor(DType dtype) {
  return dtype == DType::kFloat32 ? reference::Tolerance{1e-5, 1e-4}
                                  : reference::Tolerance{1e-5, 2e-2};
}

}  // namespace

void AddKernelAttentionCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<AttentionOptions>();
  cmd->add_option("--variant", o->variant, "tkg (decode over a KV cache) or cte (causal prefill)")
      ->check(CLI::IsMember({"tkg", "cte"}))
      ->capture_default_str();
  CLI::Option* b = cmd->add_option("--b", o->b, "batch rows B (default: 4 for tkg, 1 for cte)");
  cmd->add_option("--g", o->g, "tkg: query heads per KV head G")->capture_default_str();
  cmd->add_option("--t", o->t, "tkg: cached tokens T (this step's included)")->capture_default_str();
  cmd->add_option("--d", o->d, "head dim d")->capture_default_str();
  cmd->add_option("--s", o->s, "cte: sequence length S")->capture_default_str();
  cmd->add_option("--nq", o->nq, "cte: query heads n_q")->capture_default_str();
  cmd->add_option("--nkv", o->nkv, "cte: KV heads n_kv")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "q, k, v and out dtype")->capture_default_str();
  cmd->add_option("--q", o->q_path, ".npy q (tkg [G, B, d]; cte [n_q, B, S, d])");
  cmd->add_option("--k", o->k_path, ".npy k (tkg [B, d, T]; cte [n_kv, B, S, d])");
  cmd->add_option("--v", o->v_path, ".npy v (tkg [B, T, d]; cte [n_kv, B, S, d])");
  cmd->add_option("--out-dir", o->out_dir, "where out.npy goes")->capture_default_str();
  AddCommonOptions(cmd, &o->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag | kTimingOnlyFlag,
                   {.profile_path = "", .seed = 1, .lnc = 2,
                    .trace_path = "nkisim-attention.trace.json"});
  cmd->add_flag("--check", o->check, "compare with the fp64 golden at the reference tolerance");
  cmd->add_flag("--append", o->append,
                "tkg: pass this step's K / V rows as k_new / v_new (the decode job's form); the "
                "kernel appends them to the caches at T - 1");
  cmd->callback([o, b, exit_code] {
    o->b_given = b->count() > 0;
    *exit_code = RunKernelAttention(*o);
  });
}

int RunKernelAttention(const AttentionOptions& options) {
  const auto host_start = std::chrono::steady_clock::now();
  AttentionOptions o = options;
  if (!o.b_given) o.b = o.variant == "tkg" ? 4 : 1;  // an explicit --b is range-checked below
  ApplySimMode("kernel attention", o.common, o.check);
  PrepareKernelOutputs("kernel attention", o.out_dir, o.common.trace_path);
  const HardwareProfile profile = LoadProfile(o.common);
  const DType dtype = ParseDType(o.dtype);
  const bool tkg = o.variant == "tkg";
  if (o.append && !tkg) {
    Raise(ErrorCode::kInvalidArgument,
          "kernel attention: --append applies to --variant tkg only (this step's K / V rows of "
          "the decode kernel); --variant is " + o.variant);
  }
  // The inputs of one case are bounded by what the machine can hold, checked before allocating.
  // In doubles: the flags are not range-checked yet, and their products may not fit an int64.
  const auto f = [](int64_t v) { return static_cast<double>(v); };
  const double elements = tkg ? f(o.g) * f(o.b) * f(o.d) * 2 + 2 * f(o.b) * f(o.d) * f(o.t)
                              : f(o.b) * f(o.s) * f(o.d) * (2 * f(o.nq) + 2 * f(o.nkv));
  CheckKernelFlags("kernel attention",
                   {{"--b", o.b}, {"--g", o.g}, {"--t", o.t}, {"--d", o.d}, {"--s", o.s},
                    {"--nq", o.nq}, {"--nkv", o.nkv}},
                   elements * (static_cast<double>(SizeOf(dtype)) + 8));  // + the fp64 golden
  LogicalCore lnc(o.common.lnc, profile);
  TensorView q, k, v, out;
  std::vector<double> golden;
  double flops = 0;
  if (tkg) {
    q = LoadOrRandomInput(o.q_path, "q", {o.g, o.b, o.d}, dtype, o.common.seed, -1, 1);
    k = LoadOrRandomInput(o.k_path, "k_cache", {o.b, o.d, o.t}, dtype, o.common.seed, -1, 1);
    v = LoadOrRandomInput(o.v_path, "v_cache", {o.b, o.t, o.d}, dtype, o.common.seed, -1, 1);
    kernels::AttentionTkgParams params{q, k, v};
    if (o.append) {
      params.k_new = LoadOrRandomInput("", "k_new", {o.b, o.d}, dtype, o.common.seed, -1, 1);
      params.v_new = LoadOrRandomInput("", "v_new", {o.b, o.d}, dtype, o.common.seed, -1, 1);
    }
    std::printf(
        "nkisim kernel attention: TKG decode, q [G, B, d] = %s, k_cache [B, d, T] = %s, v_cache "
        "[B, T, d] = %s, %s, LNC = %d, profile %s%s\n",
        ShapeString(q.shape()).c_str(), ShapeString(k.shape()).c_str(),
        ShapeString(v.shape()).c_str(), DTypeName(dtype), o.common.lnc, profile.name().c_str(),
        o.append ? "; this step's K / V rows [B, d] as k_new / v_new, appended at T - 1" : "");
    // The golden's caches with this step's rows at T - 1, built before the kernel writes them.
    if (o.check && o.append) {
      golden = reference::AttentionTkgRef(q, WithRowsAppended(k, 2, params.k_new),
                                          WithRowsAppended(v, 1, params.v_new));
    }
    out = kernels::AttentionTkg(lnc, params);  // validates first
    if (o.append && Functional()) {
      for (const std::string& bad : {AppendMismatch("k_cache", k, 2, params.k_new),
                                     AppendMismatch("v_cache", v, 1, params.v_new)}) {
        if (!bad.empty()) Raise(ErrorCode::kInternal, "kernel attention: append: " + bad);
      }
      std::printf("append: k_new and v_new are at position T - 1 of the caches, bit for bit\n");
    }
    const kernels::AttentionTkgPlan plan =
        kernels::PlanAttentionTkg({q, k, v}, o.common.lnc, profile);
    if (plan.virtual_rows > 1) {
      std::printf("plan: the row as %lld virtual rows of %lld tokens (they share matmuls and "
                  "softmax instructions), merged on chip\n",
                  static_cast<long long>(plan.virtual_rows),
                  static_cast<long long>(plan.tokens / plan.virtual_rows));
    } else {
      const char* split = o.common.lnc == 1 ? ""
                          : plan.split_rows ? ", the cores split the rows"
                                            : ", the cores split the tokens";
      std::printf("plan: %lld row(s) per scores matmul, %lld per softmax group%s\n",
                  static_cast<long long>(plan.rows_per_pack),
                  static_cast<long long>(plan.rows_per_group), split);
    }
    flops = 4.0 * static_cast<double>(o.g * o.b * o.t * o.d);
    if (o.check && !o.append) golden = reference::AttentionTkgRef(q, k, v);
  } else {
    q = LoadOrRandomInput(o.q_path, "q", {o.nq, o.b, o.s, o.d}, dtype, o.common.seed, -1, 1);
    k = LoadOrRandomInput(o.k_path, "k", {o.nkv, o.b, o.s, o.d}, dtype, o.common.seed, -1, 1);
    v = LoadOrRandomInput(o.v_path, "v", {o.nkv, o.b, o.s, o.d}, dtype, o.common.seed, -1, 1);
    std::printf(
        "nkisim kernel attention: CTE causal prefill, q [n_q, B, S, d] = %s, k and v [n_kv, B, "
        "S, d] = %s, %s, LNC = %d, profile %s\n",
        ShapeString(q.shape()).c_str(), ShapeString(k.shape()).c_str(), DTypeName(dtype), o.common.lnc,
        profile.name().c_str());
    out = kernels::AttentionCte(lnc, {q, k, v});
    flops = kernels::AttentionCteFlops(o.b, o.nq, o.s, o.d);
    if (o.check) golden = reference::CausalAttentionRef(q, k, v);
  }
  std::printf("out %s %s: %s\n", ShapeString(out.shape()).c_str(), DTypeName(out.dtype()),
              WriteOutput(o.out_dir, "out", out).c_str());
  ReportLogicalCore(lnc, flops, o.common.trace_path);
  const double bytes = static_cast<double>(q.size_bytes() + k.size_bytes() + v.size_bytes() +
                                           out.size_bytes());
  ReportRoofline(lnc, bytes, flops);
  int status = 0;
  if (o.check) {
    const reference::Tolerance tol = ToleranceFor(dtype);
    const reference::Comparison check = reference::Compare(out.ToFloats(), golden, tol);
    std::printf("check vs fp64 golden (atol %g, rtol %g): %s\n", tol.atol, tol.rtol,
                check.ToString().c_str());
    status = check.pass() ? 0 : 1;
  }
  PrintHostTime(host_start);
  return status;
}

}  // namespace nkisim::launcher
