#include "launcher/commands/kernel_oproj.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "kernels/common/mx_weights.h"
#include "kernels/output_projection/inputs.h"
#include "kernels/output_projection/output_projection_cte.h"
#include "kernels/output_projection/output_projection_tkg.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/output_projection_ref.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/npy.h"

namespace nkisim::launcher {
namespace {

using kernels::OutputProjectionInputs;
using reference::OprojKernel;

// Replaces a generated input by the file's contents (fp32 scales; others keep their dtype).
void Override(TensorView& t, const std::string& path, const char* name, DType dtype,
              uint64_t seed) {
  if (path.empty()) return;
  t = t.valid() ? LoadOrRandomInput(path, name, t.shape(), t.dtype(), seed, 0, 0)
                : ReadNpyAs(path, dtype);
}

// The MX modes' --weight: the real [N*D, H] weights (float values for MX, fp8_e4m3fn values for
// STATIC_MX / ROW_MX), packed x4 MX_CONTIGUOUS as the kernel takes them; MX also takes the E8M0
// scales of that packing, so --weight-scale is refused with MX.
void OverrideMxWeight(OutputProjectionInputs& in, const OprojOptions& o,
                      const kernels::OprojCase& c) {
  const bool mx = c.quantization == kernels::QuantizationType::kMx;
  if (mx && !o.weight_scale_path.empty()) {
    Raise(ErrorCode::kInvalidArgument,
          "kernel oproj: --weight-scale with --quant mx: the E8M0 weight scales come from packing "
          "the weights (give the real [N*D, H] weights with --weight)");
  }
  if (o.weight_path.empty()) return;
  const Shape shape{c.n * c.d, c.h};
  if (mx) {
    const kernels::MxPackedWeights packed = kernels::PackMxWeights(
        LoadOrRandomInput(o.weight_path, "weight", shape, DType::kFloat32, o.common.seed, 0, 0),
        kernels::MxWeightLayout::kContiguous, DType::kFp4E2M1FNx4, "weight");
    in.weight = packed.data;
    in.weight_scale = packed.scales;
    return;
  }
  in.weight = kernels::PackFp8WeightsX4(LoadOrRandomInput(o.weight_path, "weight", shape,
                                                          DType::kFp8E4M3FN, o.common.seed, 0, 0),
                                        kernels::MxWeightLayout::kContiguous, "weight")
                  .data;
}

OutputProjectionInputs MakeInputs(const OprojOptions& o, const kernels::OprojCase& c,
                                  OprojKernel kernel, int64_t partitions) {
  OutputProjectionInputs in = kernel == OprojKernel::kCte
                                  ? kernels::MakeCteInputs(c, o.common.seed, partitions)
                                  : kernels::MakeTkgInputs(c, o.common.seed, partitions);
  Override(in.attention, o.attention_path, "attention", c.dtype, o.common.seed);
  if (kernels::oproj::IsMx(c.quantization)) {
    OverrideMxWeight(in, o, c);
  } else {
    Override(in.weight, o.weight_path, "weight", c.dtype, o.common.seed);
  }
  Override(in.bias, o.bias_path, "bias", c.dtype, o.common.seed);
  Override(in.input_scale, o.input_scale_path, "input_scale", DType::kFloat32, o.common.seed);
  Override(in.weight_scale, o.weight_scale_path, "weight_scale", DType::kFloat32, o.common.seed);
  return in;
}

TensorView Run(LogicalCore& lnc, const OprojOptions& o, OprojKernel kernel,
               const OutputProjectionInputs& in) {
  if (kernel == OprojKernel::kCte) {
    std::optional<DType> out_dtype;
    if (!o.output_dtype.empty()) out_dtype = ParseDType(o.output_dtype);
    return kernels::OutputProjectionCte(lnc, {in}, out_dtype);
  }
  return kernels::OutputProjectionTkg(lnc, {in, o.transpose_out});
}

// The bytes a kernel must move: every input once and the output, but of the ROW / ROW_MX
// weight_scale (P, H), whose rows are identical by contract, one row. (MX: the x4 weights and
// their uint8 scales as stored.)
int64_t RooflineBytes(const OutputProjectionInputs& in, const TensorView& out) {
  int64_t bytes = out.size_bytes();
  for (const TensorView* t : {&in.attention, &in.weight, &in.bias, &in.input_scale}) {
    if (t->valid()) bytes += t->size_bytes();
  }
  if (in.weight_scale.valid()) {
    const bool row = in.quantization == kernels::QuantizationType::kRow ||
                     in.quantization == kernels::QuantizationType::kRowMx;
    bytes +=
        row ? in.weight_scale.size_bytes() / in.weight_scale.dim(0) : in.weight_scale.size_bytes();
  }
  return bytes;
}

}  // namespace

void AddKernelOprojCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<OprojOptions>();
  cmd->add_option("--variant", o->variant, "cte (attention [B,N,D,S]) or tkg (attention [D,B,N,S])")
      ->check(CLI::IsMember({"cte", "tkg"}))
      ->capture_default_str();
  cmd->add_option("--b", o->b, "batch B")->capture_default_str();
  cmd->add_option("--n", o->n, "heads N")->capture_default_str();
  cmd->add_option("--d", o->d, "head dim D")->capture_default_str();
  cmd->add_option("--s", o->s, "sequence length S")->capture_default_str();
  cmd->add_option("--h", o->h, "hidden size H (output columns)")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "attention / bias / float weight dtype")
      ->capture_default_str();
  cmd->add_option("--quant", o->quantization,
                  "none, static, row (tkg), mx, static_mx, row_mx (cte on an MX profile, e.g. "
                  "--profile configs/hardware/trn3.textproto)")
      ->capture_default_str();
  cmd->add_flag("--no-bias", o->no_bias, "no bias term");
  cmd->add_flag("--transpose-out", o->transpose_out,
                "tkg: out [128, LNC, H/(128 LNC), B*S] instead of [B*S, H]");
  cmd->add_option("--output-dtype", o->output_dtype, "cte: output dtype (default: attention's)");
  cmd->add_option("--attention", o->attention_path, ".npy attention (default: seeded random)");
  cmd->add_option("--weight", o->weight_path,
                  ".npy weight [N*D, H] (MX modes: the real weights, packed x4 MX_CONTIGUOUS)");
  cmd->add_option("--bias", o->bias_path, ".npy bias [1, H]");
  cmd->add_option("--input-scale", o->input_scale_path, ".npy STATIC input scale (128, 1)");
  cmd->add_option("--weight-scale", o->weight_scale_path,
                  ".npy weight scale: STATIC / STATIC_MX (128, 1), ROW / ROW_MX (128, H)");
  cmd->add_option("--out-dir", o->out_dir, "where out.npy goes")->capture_default_str();
  AddCommonOptions(cmd, &o->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag | kTimingOnlyFlag,
                   {.profile_path = "", .seed = 1, .lnc = 2,
                    .trace_path = "nkisim-oproj.trace.json"});
  cmd->add_flag("--check", o->check, "compare with the golden at the reference tolerance");
  cmd->callback([o, exit_code] { *exit_code = RunKernelOproj(*o); });
}

int RunKernelOproj(const OprojOptions& o) {
  const auto host_start = std::chrono::steady_clock::now();
  {
    const double rows = static_cast<double>(o.b) * static_cast<double>(o.s);
    const double k = static_cast<double>(o.n) * static_cast<double>(o.d);
    CheckKernelFlags("kernel oproj",
                     {{"--b", o.b}, {"--n", o.n}, {"--d", o.d}, {"--s", o.s}, {"--h", o.h}},
                     (rows * k + k * static_cast<double>(o.h) + rows * static_cast<double>(o.h)) *
                         12.0);  // fp32 inputs, output, fp64 golden
  }
  ApplySimMode("kernel oproj", o.common, o.check);
  PrepareKernelOutputs("kernel oproj", o.out_dir, o.common.trace_path);
  const HardwareProfile profile = LoadProfile(o.common);
  const OprojKernel kernel = o.variant == "cte" ? OprojKernel::kCte : OprojKernel::kTkg;
  const kernels::OprojCase c{o.b,        o.n,
                             o.d,        o.s,
                             o.h,        kernels::oproj::ParseQuantizationType(o.quantization),
                             !o.no_bias, ParseDType(o.dtype)};
  const OutputProjectionInputs in = MakeInputs(o, c, kernel, profile.partitions());

  std::printf(
      "nkisim kernel oproj: %s, B = %lld, N = %lld, D = %lld, S = %lld, H = %lld, %s, "
      "quantization %s%s%s, LNC = %d, profile %s\n",
      kernel == OprojKernel::kCte ? "CTE attention [B, N, D, S] -> out [B, S, H]"
                                  : "TKG attention [D, B, N, S] -> out [B*S, H]",
      static_cast<long long>(o.b), static_cast<long long>(o.n), static_cast<long long>(o.d),
      static_cast<long long>(o.s), static_cast<long long>(o.h), DTypeName(in.attention.dtype()),
      kernels::QuantizationTypeName(c.quantization), in.bias.valid() ? ", bias" : "",
      o.transpose_out ? ", transposed out" : "", o.common.lnc, profile.name().c_str());
  LogicalCore lnc(o.common.lnc, profile);
  const TensorView out = Run(lnc, o, kernel, in);
  std::printf("out %s %s: %s\n", ShapeString(out.shape()).c_str(), DTypeName(out.dtype()),
              WriteOutput(o.out_dir, "out", out).c_str());

  const double flops = 2.0 * o.b * o.s * o.n * o.d * o.h;
  ReportLogicalCore(lnc, flops, o.common.trace_path);
  // The MX modes' PE bound is at the MX rate (PeakMxTflops).
  ReportRoofline(lnc, static_cast<double>(RooflineBytes(in, out)), flops,
                 kernels::oproj::IsMx(c.quantization));

  int status = 0;
  if (o.check) {
    const reference::OprojRefInputs ref = kernels::ReferenceInputs(in);
    std::vector<float> golden = reference::OutputProjectionRef(kernel, in.attention, ref);
    if (o.transpose_out) {
      golden = reference::TransposedOutLayout(golden, o.b * o.s, o.h, o.common.lnc, profile.partitions());
    }
    const reference::Tolerance tol = reference::OprojTolerance(kernel, ref.quant);
    const reference::Comparison check = reference::Compare(out.ToFloats(), golden, tol);
    std::printf("check vs fp64 golden (atol %g, rtol %g, the reference suite's): %s\n", tol.atol,
                tol.rtol, check.ToString().c_str());
    status = check.pass() ? 0 : 1;
  }
  PrintHostTime(host_start);
  return status;
}

}  // namespace nkisim::launcher
