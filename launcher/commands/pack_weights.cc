#include "launcher/commands/pack_weights.h"

#include "launcher/commands/kernel_io.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/mx_weights.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/npy.h"
#include "runtime/output_file.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {
namespace {

constexpr const char* kCommand = "pack-weights";

struct Options {
  bool unpack = false;
  std::string in, out_weights, out_scales;  // pack
  std::string weights, scales, out;         // unpack
  std::string dtype = "fp8_e4m3fn_x4";
  std::string layout = "MX_CONTIGUOUS";
};

DType ParseX4(const std::string& name) {
  const std::string rule = "must be fp8_e4m3fn_x4, fp8_e5m2_x4 or fp4_e2m1fn_x4";
  DType d;
  try {
    d = ParseDType(name);
  } catch (const Error&) {
    Raise(ErrorCode::kInvalidArgument, StrCat(kCommand, ": --dtype '", name, "': ", rule));
  }
  if (!IsX4(d)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kCommand, ": --dtype '", name, "' is not an MX x4 container: ", rule));
  }
  return d;
}

kernels::MxWeightLayout ParseLayout(const std::string& name) {
  try {
    return kernels::ParseMxWeightLayout(name);
  } catch (const Error& e) {
    Raise(ErrorCode::kInvalidArgument, StrCat(kCommand, ": --layout: ", e.what()));
  }
}

// The numpy container of an x4 dtype in the files: uint32 for the fp8 x4s, uint16 for fp4.
// The .npy label of an x4 container: the one kernel_io.h exchanges it as.
DType ContainerOf(DType x4) { return NpyExchangeView(TensorView::Create({1}, x4)).dtype(); }

[[noreturn]] void BadInput(const char* flag, const std::string& path, const TensorView& t,
                           const std::string& rule) {
  Raise(ErrorCode::kBadConfig, StrCat(kCommand, ": ", flag, " '", path, "' holds ", DTypeName(t.dtype()),
                                      " ", ShapeString(t.shape()), "; ", rule));
}

// --in: a [K, N] float matrix, as fp32 (bf16 arrives as '<u2' bits).
TensorView ReadWeights(const std::string& path) {
  TensorView t = ReadNpy(path);
  const std::string rule = "needs a [K, N] float matrix: '<f4' fp32, '<f2' fp16 or '<u2' bf16 bits";
  if (t.dtype() == DType::kUInt16) t = t.bitcast(DType::kBFloat16);
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat16 && t.dtype() != DType::kBFloat16) {
    BadInput("--in", path, t, rule);
  }
  if (t.rank() != 2 || t.dim(0) == 0 || t.dim(1) == 0) BadInput("--in", path, t, rule);
  if (t.dim(0) % 32 != 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kCommand, ": --in '", path, "': K = ", t.dim(0), " rows (of ",
                 ShapeString(t.shape()), ") must be a multiple of 32: one MX block is 32 values of K"));
  }
  return t;
}

void Pack(const Options& o) {
  const DType x4 = ParseX4(o.dtype);
  const kernels::MxWeightLayout layout = ParseLayout(o.layout);
  CheckWritable(o.out_weights, "pack-weights: --out-weights");
  CheckWritable(o.out_scales, "pack-weights: --out-scales");
  const TensorView w = ReadWeights(o.in);
  const kernels::MxPackedWeights packed = kernels::PackMxWeights(w, layout, x4, "weights");
  const std::vector<float> original = w.ToFloats();
  const std::vector<float> back = kernels::UnpackMxWeights(packed, layout, "weights").ToFloats();
  const int64_t n = w.dim(1);
  double worst = -1;
  size_t at = 0;
  int64_t non_finite = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    if (!std::isfinite(original[i])) {
      ++non_finite;
      continue;
    }
    const double err = std::fabs(static_cast<double>(back[i]) - original[i]);
    if (err > worst) {
      worst = err;
      at = i;
    }
  }
  WriteNpy(o.out_weights, NpyExchangeView(packed.data));
  WriteNpy(o.out_scales, packed.scales);
  std::string error_text =
      worst < 0 ? std::string("no finite weights")
                : StrPrintf("max |dequantized - original| = %.9g at [%lld, %lld] (original %.9g, "
                            "dequantized %.9g)",
                            worst, static_cast<long long>(at / n), static_cast<long long>(at % n),
                            original[at], back[at]);
  if (non_finite > 0) {
    error_text += StrCat("; ", non_finite, " non-finite weight(s): their blocks have scale 255 (NaN)");
  }
  std::printf("pack-weights: %s %s %s -> %s %s %s (as %s) + %s %s uint8 scales, layout %s; %s\n",
              o.in.c_str(), ShapeString(w.shape()).c_str(), DTypeName(w.dtype()),
              o.out_weights.c_str(), ShapeString(packed.data.shape()).c_str(), DTypeName(x4),
              DTypeName(ContainerOf(x4)), o.out_scales.c_str(),
              ShapeString(packed.scales.shape()).c_str(), kernels::MxWeightLayoutName(layout),
              error_text.c_str());
}

void Unpack(const Options& o) {
  const DType x4 = ParseX4(o.dtype);
  const kernels::MxWeightLayout layout = ParseLayout(o.layout);
  CheckWritable(o.out, "pack-weights: --out");
  const TensorView data = ReadNpy(o.weights);
  const DType container = ContainerOf(x4);
  if (data.dtype() != container || data.rank() != 2 || data.dim(0) == 0 || data.dim(1) == 0 ||
      data.dim(0) % 8 != 0) {
    BadInput("--weights", o.weights, data,
             StrCat(DTypeName(x4), " weights are a [K/4, N] ", DTypeName(container),
                    " matrix ('", container == DType::kUInt32 ? "<u4" : "<u2",
                    "') with K/4 a multiple of 8 (K a multiple of 32)"));
  }
  const TensorView scales = ReadNpy(o.scales);
  if (scales.dtype() != DType::kUInt8 || scales.rank() != 2 || scales.dim(0) != data.dim(0) / 8 ||
      scales.dim(1) != data.dim(1)) {
    BadInput("--scales", o.scales, scales,
             StrCat("the scales of --weights ", ShapeString(data.shape()), " are a uint8 ('|u1') [K/32, N] = ",
                    ShapeString({data.dim(0) / 8, data.dim(1)}), " matrix"));
  }
  const kernels::MxPackedWeights packed{data.bitcast(x4), scales};
  const TensorView w = kernels::UnpackMxWeights(packed, layout, "weights");
  WriteNpy(o.out, w);
  std::printf("pack-weights --unpack: %s %s %s (as %s) + %s %s uint8 scales, layout %s -> %s %s fp32\n",
              o.weights.c_str(), ShapeString(data.shape()).c_str(), DTypeName(x4),
              DTypeName(container), o.scales.c_str(), ShapeString(scales.shape()).c_str(),
              kernels::MxWeightLayoutName(layout), o.out.c_str(), ShapeString(w.shape()).c_str());
}

// The flags each mode needs, as usage errors (exit 2) naming them.
void RequireFlags(const Options& o) {
  const char* mode = o.unpack ? "with --unpack" : "when packing";
  const std::vector<std::pair<const char*, const std::string*>> needed =
      o.unpack ? std::vector<std::pair<const char*, const std::string*>>{
                     {"--weights", &o.weights}, {"--scales", &o.scales}, {"--out", &o.out}}
               : std::vector<std::pair<const char*, const std::string*>>{
                     {"--in", &o.in}, {"--out-weights", &o.out_weights}, {"--out-scales", &o.out_scales}};
  for (const auto& [flag, value] : needed) {
    if (value->empty()) throw CLI::RequiredError(StrCat(flag, " is required ", mode), CLI::ExitCodes::RequiredError);
  }
}

}  // namespace

void AddPackWeightsCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<Options>();
  CLI::Option* unpack =
      cmd->add_flag("--unpack", o->unpack, "dequantize packed weights (--weights, --scales) to --out");
  CLI::Option* in = cmd->add_option("--in", o->in, "weights to pack: [K, N] .npy, fp32 / fp16 / bf16 bits ('<u2')");
  CLI::Option* out_weights = cmd->add_option(
      "--out-weights", o->out_weights, "packed x4 data [K/4, N] to write (.npy, uint32; uint16 for fp4)");
  CLI::Option* out_scales =
      cmd->add_option("--out-scales", o->out_scales, "E8M0 block scales [K/32, N] to write (.npy, uint8)");
  CLI::Option* weights =
      cmd->add_option("--weights", o->weights, "with --unpack: packed x4 data [K/4, N] (.npy, uint32 / uint16)");
  CLI::Option* scales = cmd->add_option("--scales", o->scales, "with --unpack: block scales [K/32, N] (.npy, uint8)");
  CLI::Option* out = cmd->add_option("--out", o->out, "with --unpack: dequantized weights [K, N] to write (.npy, fp32)");
  cmd->add_option("--dtype", o->dtype, "x4 container: fp8_e4m3fn_x4, fp8_e5m2_x4 or fp4_e2m1fn_x4")
      ->capture_default_str();
  cmd->add_option("--layout", o->layout, "packed row order along K: MX_CONTIGUOUS or MX_INTERLEAVED")
      ->capture_default_str();
  unpack->excludes(in)->excludes(out_weights)->excludes(out_scales);
  for (CLI::Option* flag : {weights, scales, out}) flag->needs(unpack);
  cmd->callback([o, exit_code] {
    RequireFlags(*o);
    if (o->unpack) {
      Unpack(*o);
    } else {
      Pack(*o);
    }
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
