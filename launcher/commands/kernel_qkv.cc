#include "launcher/commands/kernel_qkv.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "kernels/qkv/qkv.h"
#include "kernels/qkv/qkv_case.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/qkv_ref.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::launcher {
namespace {

using kernels::NormType;
using kernels::QkvOutputLayout;
using kernels::QkvVariant;
using kernels::QuantizationType;

const std::map<std::string, NormType> kNorms = {{"none", NormType::kNoNorm},
                                                {"rms", NormType::kRmsNorm},
                                                {"layer", NormType::kLayerNorm},
                                                {"rms_skip_gamma", NormType::kRmsNormSkipGamma}};
const std::map<std::string, QuantizationType> kQuants = {{"none", QuantizationType::kNone},
                                                         {"static", QuantizationType::kStatic},
                                                         {"row", QuantizationType::kRow},
                                                         {"mx", QuantizationType::kMx},
                                                         {"static_mx", QuantizationType::kStaticMx},
                                                         {"row_mx", QuantizationType::kRowMx}};
const std::map<std::string, QkvOutputLayout> kLayouts = {{"bsd", QkvOutputLayout::kBSD},
                                                         {"nbsd", QkvOutputLayout::kNBSd},
                                                         {"nbds", QkvOutputLayout::kNBdS}};
const std::map<std::string, kernels::QkvWeightLayout> kWeightLayouts = {
    {"mx_contiguous", kernels::QkvWeightLayout::kMxContiguous},
    {"mx_interleaved", kernels::QkvWeightLayout::kMxInterleaved}};
const std::map<std::string, QkvVariant> kVariants = {
    {"auto", QkvVariant::kAuto}, {"tkg", QkvVariant::kTkg}, {"cte", QkvVariant::kCte}};

template <typename T>
std::vector<std::string> Keys(const std::map<std::string, T>& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  return keys;
}

kernels::QkvCaseOptions CaseOptions(const KernelQkvOptions& o) {
  kernels::QkvCaseOptions c;
  c.b = o.b, c.s = o.s, c.h = o.h, c.n_q = o.n_q, c.n_kv = o.n_kv, c.d = o.d;
  c.dtype = ParseDType(o.dtype);
  c.norm = kNorms.at(o.norm), c.quant = kQuants.at(o.quant), c.layout = kLayouts.at(o.layout);
  c.fused_add = o.fused_add, c.bias = o.bias, c.norm_bias = o.norm_bias, c.rope = o.rope;
  c.eps = o.eps;
  if (!o.weight_layout.empty()) c.weight_layout = kWeightLayouts.at(o.weight_layout);
  c.h_transposed = o.h_transposed;
  if (o.hidden_actual > 0) c.hidden_actual = o.hidden_actual;
  c.seed = o.common.seed;
  return c;
}

// Replaces each tensor the case holds by <in_dir>/<name>.npy when that file exists; returns the
// bytes of all inputs (for the roofline).
double ReadInputs(const std::string& in_dir, kernels::QkvParams& params) {
  double bytes = 0;
  for (auto& [name, tensor] : kernels::QkvTensors(params)) {
    if (!tensor->valid()) continue;
    const std::filesystem::path path = std::filesystem::path(in_dir) / (std::string(name) + ".npy");
    if (!in_dir.empty() && std::filesystem::exists(path)) {
      *tensor = IsX4(tensor->dtype())
                    ? ReadX4Npy(path.string(), name, tensor->shape(), tensor->dtype())
                    : LoadOrRandomInput(path.string(), name, tensor->shape(), tensor->dtype(), 0, 0, 0);
      std::printf("input %s: %s\n", name, path.string().c_str());
    }
    bytes += static_cast<double>(tensor->size_bytes());
  }
  return bytes;
}

void ListVariants() {
  for (const kernels::QkvVariantInfo& v : kernels::QkvVariants()) {
    std::printf("%-4s %s\n", v.name, v.description);
  }
}

}  // namespace

void AddKernelQkvCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<KernelQkvOptions>();
  cmd->add_option("--b", o->b, "batch B")->capture_default_str();
  cmd->add_option("--s", o->s, "sequence length S")->capture_default_str();
  cmd->add_option("--h", o->h, "hidden size H (multiple of 128)")->capture_default_str();
  cmd->add_option("--nq", o->n_q, "query heads")->capture_default_str();
  cmd->add_option("--nkv", o->n_kv, "key/value heads; I = (nq + 2 nkv) d")->capture_default_str();
  cmd->add_option("--d", o->d, "head size d_head")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "input dtype: bf16, fp16, fp32")->capture_default_str();
  cmd->add_option("--norm", o->norm, "fused norm")
      ->check(CLI::IsMember(Keys(kNorms)))
      ->capture_default_str();
  cmd->add_option("--quant", o->quant, "quantization type")
      ->check(CLI::IsMember(Keys(kQuants)))
      ->capture_default_str();
  cmd->add_option("--layout", o->layout, "output layout")
      ->check(CLI::IsMember(Keys(kLayouts)))
      ->capture_default_str();
  cmd->add_option("--variant", o->variant, "auto (the dispatch rule), or force tkg / cte")
      ->check(CLI::IsMember(Keys(kVariants)))
      ->capture_default_str();
  cmd->add_flag("--fused-add", o->fused_add, "fused residual add of mlp_prev + attention_prev");
  cmd->add_flag("--bias", o->bias, "qkv bias [1, I]");
  cmd->add_flag("--norm-bias", o->norm_bias, "LayerNorm bias (beta) [1, H]");
  cmd->add_flag("--rope", o->rope, "fused RoPE on Q and K (forces CTE)");
  cmd->add_option("--eps", o->eps, "norm epsilon")->capture_default_str();
  cmd->add_option("--hidden-actual", o->hidden_actual, "RMS divisor instead of H (0: H)")
      ->capture_default_str();
  cmd->add_option("--weight-layout", o->weight_layout,
                  "MX weight packing (kernels/common/mx_weights.h): the case packs its weights so; "
                  "default mx_contiguous")
      ->check(CLI::IsMember(Keys(kWeightLayouts)));
  cmd->add_flag("--h-transposed", o->h_transposed,
                "MX: the input's H is already in the packed weights' order "
                "(is_h_dim_4h_transposed; TKG MX needs it)");
  cmd->add_option("--in-dir", o->in_dir, "read <name>.npy inputs from here when present");
  cmd->add_option("--out-dir", o->out_dir, "write qkv_out.npy / fused_hidden.npy here")
      ->capture_default_str();
  cmd->add_flag("--write-inputs", o->write_inputs, "also write the inputs used into --out-dir");
  AddCommonOptions(cmd, &o->common, kLncFlag | kSeedFlag | kTraceFlag | kProfileFlag | kTimingOnlyFlag,
                   {.profile_path = "", .seed = 1, .lnc = 2,
                    .trace_path = "nkisim-qkv.trace.json"});
  cmd->add_flag("--check", o->check, "compare with the golden; exit 1 outside the tolerance");
  cmd->add_flag("--list-variants", o->list_variants, "list the kernel variants and exit");
  cmd->callback([o, exit_code] { *exit_code = RunKernelQkv(*o); });
}

int RunKernelQkv(const KernelQkvOptions& o) {
  if (o.list_variants) {
    ListVariants();
    return 0;
  }
  const auto host_start = std::chrono::steady_clock::now();
  {
    const double rows = static_cast<double>(o.b) * static_cast<double>(o.s);
    const double cols = (static_cast<double>(o.n_q) + 2 * static_cast<double>(o.n_kv)) *
                        static_cast<double>(o.d);
    CheckKernelFlags("kernel qkv",
                     {{"--b", o.b}, {"--s", o.s}, {"--h", o.h}, {"--nq", o.n_q},
                      {"--nkv", o.n_kv}, {"--d", o.d}},
                     (rows * static_cast<double>(o.h) + static_cast<double>(o.h) * cols +
                      rows * cols) * 12.0);  // fp32 inputs, output, fp64 golden
    if (!(o.eps >= 0) || !std::isfinite(o.eps)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel qkv: --eps ", o.eps, " must be finite and >= 0"));
    }
    if (o.hidden_actual < 0) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel qkv: --hidden-actual ", o.hidden_actual, " must be >= 0 (0: H)"));
    }
    if (!o.weight_layout.empty() && o.quant != "mx") {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel qkv: --weight-layout ", o.weight_layout, " with --quant ", o.quant,
                   ": the MX layouts pack x4 weights for --quant mx only"));
    }
    // Before the inputs are allocated (B * S * H of them): the TKG bound of ValidateQkv.
    if (o.variant == "tkg" && rows > 128) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel qkv: B * S = ", rows, ": the TKG variant (--variant tkg) keeps the ",
                   "tokens on the partitions, so B * S must be <= 128"));
    }
    if (!o.in_dir.empty() && !std::filesystem::is_directory(o.in_dir)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel qkv: --in-dir ", o.in_dir, ": not a directory"));
    }
  }
  ApplySimMode("kernel qkv", o.common, o.check);
  PrepareKernelOutputs("kernel qkv", o.out_dir, o.common.trace_path);
  const HardwareProfile profile = LoadProfile(o.common);
  kernels::QkvParams params = kernels::MakeQkvCase(CaseOptions(o));
  const double input_bytes = ReadInputs(o.in_dir, params);
  const int64_t i = params.fused_qkv_weights.dim(1);
  std::printf(
      "nkisim kernel qkv: B = %lld, S = %lld, H = %lld, I = %lld (n_q %lld, n_kv %lld, "
      "d %lld), %s, %s, quant %s%s, layout %s%s%s%s, LNC = %d, profile %s\n",
      static_cast<long long>(o.b), static_cast<long long>(o.s), static_cast<long long>(o.h),
      static_cast<long long>(i), static_cast<long long>(o.n_q), static_cast<long long>(o.n_kv),
      static_cast<long long>(o.d), o.dtype.c_str(), kernels::NormTypeName(params.fused_norm_type),
      kernels::QuantizationTypeName(params.quantization_type),
      params.quantization_type == QuantizationType::kMx
          ? StrCat(" (", kernels::QkvWeightLayoutName(params.weight_layout),
                   params.is_h_dim_4h_transposed ? ", input H transposed" : "", ")").c_str()
          : "",
      kernels::QkvOutputLayoutName(params.output_layout), o.fused_add ? ", fused add" : "",
      o.bias ? ", bias" : "", o.rope ? ", fused RoPE" : "", o.common.lnc, profile.name().c_str());
  const QkvVariant requested = kVariants.at(o.variant);
  kernels::ValidateQkv(params, o.common.lnc, requested, profile);
  const kernels::QkvDispatch dispatch = kernels::DispatchQkv(params, profile);
  std::printf(
      "variant: %s (dispatcher: %s, because %s)\n",
      kernels::QkvVariantName(requested == QkvVariant::kAuto ? dispatch.variant : requested),
      kernels::QkvVariantName(dispatch.variant), dispatch.reason.c_str());

  LogicalCore lnc(o.common.lnc, profile);
  const kernels::QkvResult result = kernels::Qkv(lnc, params, requested);
  const double flops = 2.0 * o.b * o.s * o.h * static_cast<double>(i);
  ReportLogicalCore(lnc, flops, o.common.trace_path);
  ReportRoofline(lnc, input_bytes + result.output.size_bytes(), flops,
                 params.quantization_type == QuantizationType::kMx);

  std::printf("output: %s\n", WriteOutput(o.out_dir, "qkv_out", result.output).c_str());
  if (result.fused_hidden.valid()) {
    std::printf("output: %s\n",
                WriteOutput(o.out_dir, "fused_hidden", result.fused_hidden).c_str());
  }
  if (o.write_inputs) {
    for (auto& [name, tensor] : kernels::QkvTensors(params)) {
      if (tensor->valid()) WriteOutput(o.out_dir, name, *tensor);
    }
    std::printf("inputs written to %s\n", o.out_dir.c_str());
  }
  bool pass = true;
  if (o.check) {
    const reference::QkvGolden golden = reference::QkvReference(params);
    const reference::Tolerance tol =
        reference::QkvTolerance(result.variant, params.quantization_type);
    auto report = [&](const char* what, const TensorView& t, const std::vector<float>& want) {
      const reference::Comparison c = reference::Compare(t.ToFloats(), want, tol);
      std::printf("check %s vs golden (atol %.0e, rtol %.0e): %s\n", what, tol.atol, tol.rtol,
                  c.ToString().c_str());
      pass = pass && c.pass();
    };
    report("qkv_out", result.output, golden.output);
    if (result.fused_hidden.valid())
      report("fused_hidden", result.fused_hidden, golden.fused_hidden);
  }
  PrintHostTime(host_start);
  return pass ? 0 : 1;
}

}  // namespace nkisim::launcher
