#include "launcher/commands/commands.h"

#include <CLI/CLI.hpp>

#include "launcher/commands/calibrate.h"
#include "launcher/commands/collective.h"
#include "launcher/commands/demo.h"
#include "launcher/commands/dma_curve.h"
#include "launcher/commands/example.h"
#include "launcher/commands/example_matmul.h"
#include "launcher/commands/kernel_attention.h"
#include "launcher/commands/kernel_mlp.h"
#include "launcher/commands/kernel_moe.h"
#include "launcher/commands/kernel_oproj.h"
#include "launcher/commands/kernel_qkv.h"
#include "launcher/commands/pack_weights.h"
#include "launcher/commands/predict.h"
#include "launcher/commands/python.h"
#include "launcher/commands/run.h"
#include "launcher/commands/serve.h"
#include "launcher/commands/sweep.h"
#include "launcher/commands/validate.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

constexpr Command kCommands[] = {
    {"demo", "", AddDemoCommand,
     "Tiled matmul on one simulated logical core: cost summary, golden check, trace"},
    {"dma-curve", "", AddDmaCurveCommand,
     "The DMA engine model beside the published figures: throughput against bytes per partition, "
     "the DMA overview's examples, a mixed-DGE kernel"},
    {"example", "", nullptr,
     "Run an example kernel written in the nl language: cost summary, check, trace"},
    {"softmax", "example", AddSoftmaxExampleCommand,
     "Row softmax y = softmax(x) over each row of x[rows, cols], in nl"},
    {"matmul", "example", AddMatmulExampleCommand,
     "One matmul written the naive way ([128, 512] tiles) and the careful way ([128, 2048+] "
     "blocks) for the DMA engines, side by side"},
    {"validate", "", AddValidateCommand,
     "Check a scenario file (plans: groups, rank -> heads map, memory) or a topology file (text "
     "proto or JSON) and print what it resolves to"},
    {"run", "", AddRunCommand,
     "Run a scenario on many ranks under mpirun: live progress, checks, report, trace"},
    {"sweep", "", AddSweepCommand,
     "Run a grid of scenarios (plans x batch x KV length x ...) as nkisim run jobs, or with a model "
     "axis a grid of whole-model predictions: table, verdict, plots"},
    {"predict", "", AddPredictCommand,
     "TTFT, TPOT, tokens/s and HBM per logical core of a whole model (Hugging Face config.json) "
     "under each plan, from one simulated decoder layer"},
    {"serve", "", AddServeCommand,
     "Serve a request trace or generated load (Poisson, fixed rate, N users) on replicas of a plan: "
     "continuous batching into compiled buckets, chunked prefill, prefix caching; TTFT / TPOT "
     "percentiles, throughput, goodput, --find-max-rate"},
    {"collective", "", AddCollectiveCommand,
     "Sweep one collective over sizes under mpirun (nccl-tests style)"},
    {"calibrate", "", AddCalibrateCommand,
     "Fit the collective cost model (step latency, link bandwidth, fixed cost per op and "
     "algorithm) to nccom-test logs and write the calibrated hardware profile"},
    {"pack-weights", "", AddPackWeightsCommand,
     "Pack [K, N] weights into MX x4 data + E8M0 block scales (MX_CONTIGUOUS / MX_INTERLEAVED), "
     "or --unpack them back to fp32"},
    {"python", "", AddPythonCommand,
     "Run a Python script of NKI 0.6 kernels on nkisim (nki, nkisim on PYTHONPATH; --ranks N "
     "under mpirun)"},
    {"kernel", "", nullptr,
     "Run one kernel case on one logical core: outputs, cost summary, trace, golden check"},
    {"qkv", "kernel", AddKernelQkvCommand,
     "Fused QKV projection (TKG decode / CTE prefill) on one logical core"},
    {"oproj", "kernel", AddKernelOprojCommand,
     "Output projection (CTE prefill or TKG decode): outputs, cost, roofline, trace, check"},
    {"attention", "kernel", AddKernelAttentionCommand,
     "Decode (tkg) or causal prefill (cte) attention: outputs, cost, roofline, trace, check"},
    {"mlp", "kernel", AddKernelMlpCommand,
     "MLP block (TKG decode / CTE prefill): norm, gate / up, act, down; roofline, trace, check"},
    {"moe", "kernel", AddKernelMoeCommand,
     "MoE layer (router, dispatch, expert MLPs, shared expert, combine) on one core; --check"},
};

}  // namespace

std::span<const Command> Commands() { return kCommands; }

std::string CommandWordProblem(CLI::App& app, int argc, char** argv) {
  CLI::App* group = &app;
  std::string path = "nkisim";
  for (int i = 1;; ++i) {
    std::string names;
    CLI::App* next = nullptr;
    for (CLI::App* sub : group->get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      if (i < argc && sub->get_name() == argv[i]) next = sub;
    }
    if (names.empty()) return "";  // a command, not a group: CLI11 parses its flags
    if (i < argc && argv[i][0] == '-') {
      const std::string flag = argv[i];
      if (flag == "-h" || flag == "--help" || flag == "--version") return "";  // CLI11 answers
      return StrCat("'", path, "' needs a command before '", flag, "': ", names);
    }
    if (i >= argc) return StrCat("'", path, "' needs a command: ", names);
    if (next == nullptr) {
      return StrCat("'", argv[i], "' is not a command", group == &app ? "" : StrCat(" of '", path, "'"),
                    "; ", group == &app ? "the" : "its", " commands are ", names);
    }
    path += StrCat(" ", argv[i]);
    group = next;
  }
}


}  // namespace nkisim::launcher
