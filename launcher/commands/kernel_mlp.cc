#include "launcher/commands/kernel_mlp.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "kernels/mlp/mlp.h"
#include "kernels/mlp/mlp_case.h"
#include "kernels/output_projection/quantization.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/mlp_ref.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {
namespace {

using kernels::MlpActivation;
using kernels::MlpParams;
using kernels::MlpVariant;
using kernels::NormType;

MlpVariant ParseVariant(const std::string& v) {
  return v == "tkg" ? MlpVariant::kTkg : v == "cte" ? MlpVariant::kCte : MlpVariant::kAuto;
}
MlpActivation ParseActivation(const std::string& a) {
  return a == "gelu"   ? MlpActivation::kGelu
         : a == "relu" ? MlpActivation::kRelu
                       : MlpActivation::kSilu;
}
NormType ParseNorm(const std::string& n) {
  return n == "none" ? NormType::kNoNorm : n == "layer" ? NormType::kLayerNorm : NormType::kRmsNorm;
}

// Replaces a generated tensor by the file's contents (same shape and dtype).
void Override(TensorView& t, const std::string& path, const char* name, uint64_t seed) {
  if (!path.empty()) t = LoadOrRandomInput(path, name, t.shape(), t.dtype(), seed, 0, 0);
}

MlpParams MakeInputs(const MlpOptions& o) {
  kernels::MlpCaseOptions c;
  c.b = o.b;
  c.s = o.s;
  c.h = o.h;
  c.i = o.i;
  c.dtype = ParseDType(o.dtype);
  c.norm = ParseNorm(o.norm);
  c.act = ParseActivation(o.activation);
  c.quant = kernels::oproj::ParseQuantizationType(o.quantization);
  c.residual = o.residual || !o.residual_path.empty();
  c.store_fused_hidden = o.store_fused_hidden;
  c.bias = o.bias;
  c.variant = ParseVariant(o.variant);
  c.seed = o.common.seed;
  MlpParams p = kernels::MakeMlpCase(c);
  Override(p.hidden, o.hidden_path, "hidden", c.seed);
  Override(p.residual, o.residual_path, "residual", c.seed);
  Override(p.gamma, o.gamma_path, "gamma", c.seed);
  Override(p.gate_w, o.gate_w_path, "gate_w", c.seed);
  Override(p.up_w, o.up_w_path, "up_w", c.seed);
  Override(p.down_w, o.down_w_path, "down_w", c.seed);
  return p;
}

// Every input once (of a scale with identical rows, one row) and the outputs.
double RooflineBytes(const MlpParams& p, const kernels::MlpResult& r) {
  double bytes = 0;
  for (const TensorView* t :
       {&p.hidden, &p.residual, &p.gamma, &p.beta, &p.gate_w, &p.up_w, &p.down_w, &p.gate_bias,
        &p.up_bias, &p.down_bias, &r.output, &r.fused_hidden}) {
    if (t->valid()) bytes += static_cast<double>(t->size_bytes());
  }
  for (const TensorView* t :
       {&p.gate_w_scale, &p.up_w_scale, &p.down_w_scale, &p.gate_up_in_scale, &p.down_in_scale}) {
    if (t->valid()) bytes += static_cast<double>(t->size_bytes() / t->dim(0));
  }
  return bytes;
}

int Check(const MlpParams& p, const kernels::MlpResult& r) {
  const reference::MlpGolden golden = reference::MlpReference(p);
  const reference::Tolerance tol = reference::MlpTolerance(p.quantization);
  const reference::Comparison out = reference::Compare(r.output.ToFloats(), golden.output, tol);
  std::printf("check vs fp64 golden (atol %g, rtol %g): %s\n", tol.atol, tol.rtol,
              out.ToString().c_str());
  bool pass = out.pass();
  if (r.fused_hidden.valid()) {
    const reference::Comparison fused = reference::Compare(
        r.fused_hidden.ToFloats(), golden.fused_hidden, reference::kMlpTolerance);
    std::printf("fused_hidden vs golden: %s\n", fused.ToString().c_str());
    pass = pass && fused.pass();
  }
  return pass ? 0 : 1;
}

void ListVariants() {
  for (const kernels::MlpVariantInfo& v : kernels::MlpVariants()) {
    std::printf("%-4s %s\n", v.name, v.description);
  }
}

}  // namespace

void AddKernelMlpCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<MlpOptions>();
  cmd->add_option("--variant", o->variant, "auto (tkg for B*S <= 96, else cte), tkg or cte")
      ->check(CLI::IsMember({"auto", "tkg", "cte"}))
      ->capture_default_str();
  cmd->add_option("--b", o->b, "batch B")->capture_default_str();
  cmd->add_option("--s", o->s, "sequence length S")->capture_default_str();
  cmd->add_option("--h", o->h, "hidden size H")->capture_default_str();
  cmd->add_option("--i", o->i, "intermediate size I (this rank's columns)")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "I/O dtype: bf16 or fp32 (fp16 too)")->capture_default_str();
  cmd->add_option("--act", o->activation, "activation")
      ->check(CLI::IsMember({"silu", "gelu", "relu"}))
      ->capture_default_str();
  cmd->add_option("--quant", o->quantization, "none, static or row (fp8 weights, tkg only)")
      ->capture_default_str();
  cmd->add_option("--norm", o->norm, "none, rms or layer")
      ->check(CLI::IsMember({"none", "rms", "layer"}))
      ->capture_default_str();
  cmd->add_flag("--residual", o->residual, "fused residual add x = hidden + residual");
  cmd->add_flag("--store-fused-hidden", o->store_fused_hidden, "also write x (needs --residual)");
  cmd->add_flag("--bias", o->bias, "gate, up and down biases");
  cmd->add_option("--hidden", o->hidden_path, ".npy hidden [B, S, H]");
  cmd->add_option("--residual-npy", o->residual_path,
                  ".npy residual [B, S, H] (implies --residual)");
  cmd->add_option("--gamma", o->gamma_path, ".npy norm weight [1, H]");
  cmd->add_option("--gate-w", o->gate_w_path, ".npy gate weights [H, I]");
  cmd->add_option("--up-w", o->up_w_path, ".npy up weights [H, I]");
  cmd->add_option("--down-w", o->down_w_path, ".npy down weights [I, H]");
  cmd->add_option("--out-dir", o->out_dir, "where out.npy goes")->capture_default_str();
  AddCommonOptions(
      cmd, &o->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag | kTimingOnlyFlag,
      {.profile_path = "", .seed = 1, .lnc = 2, .trace_path = "nkisim-mlp.trace.json"});
  cmd->add_flag("--check", o->check, "compare with the golden; exit 1 outside the tolerance");
  cmd->add_flag("--list-variants", o->list_variants, "list the kernel variants and exit");
  cmd->callback([o, exit_code] { *exit_code = RunKernelMlp(*o); });
}

int RunKernelMlp(const MlpOptions& o) {
  if (o.list_variants) {
    ListVariants();
    return 0;
  }
  const auto host_start = std::chrono::steady_clock::now();
  {
    const double rows = static_cast<double>(o.b) * static_cast<double>(o.s);
    const double h = static_cast<double>(o.h), i = static_cast<double>(o.i);
    // fp32 inputs and outputs, the fp64 golden's activations and one weight piece
    CheckKernelFlags("kernel mlp", {{"--b", o.b}, {"--s", o.s}, {"--h", o.h}, {"--i", o.i}},
                     (3 * rows * h + 3 * h * i) * 4.0 + (rows * h + 2 * rows * i) * 8.0);
  }
  ApplySimMode("kernel mlp", o.common, o.check);
  PrepareKernelOutputs("kernel mlp", o.out_dir, o.common.trace_path);
  const HardwareProfile profile = LoadProfile(o.common);
  const MlpParams p = MakeInputs(o);
  std::printf(
      "nkisim kernel mlp: B = %lld, S = %lld, H = %lld, I = %lld, %s, norm %s, act %s, "
      "quantization %s%s%s, LNC = %d, profile %s\n",
      static_cast<long long>(o.b), static_cast<long long>(o.s), static_cast<long long>(o.h),
      static_cast<long long>(o.i), DTypeName(p.hidden.dtype()), kernels::NormTypeName(p.norm_type),
      kernels::MlpActivationName(p.activation), kernels::QuantizationTypeName(p.quantization),
      p.residual.valid() ? ", residual" : "", o.bias ? ", biases" : "", o.common.lnc,
      profile.name().c_str());
  LogicalCore lnc(o.common.lnc, profile);
  const kernels::MlpResult r = kernels::Mlp(lnc, p);
  std::printf("variant %s (%s)\n", kernels::MlpVariantName(r.variant),
              kernels::DispatchMlp(p).reason.c_str());
  std::printf("out %s %s: %s\n", ShapeString(r.output.shape()).c_str(), DTypeName(r.output.dtype()),
              WriteOutput(o.out_dir, "out", r.output).c_str());
  if (r.fused_hidden.valid()) {
    std::printf("fused_hidden: %s\n",
                WriteOutput(o.out_dir, "fused_hidden", r.fused_hidden).c_str());
  }
  const double flops = 6.0 * o.b * o.s * static_cast<double>(o.h) * static_cast<double>(o.i);
  ReportLogicalCore(lnc, flops, o.common.trace_path);
  ReportRoofline(lnc, RooflineBytes(p, r), flops);
  const int status = o.check ? Check(p, r) : 0;
  PrintHostTime(host_start);
  return status;
}

}  // namespace nkisim::launcher
