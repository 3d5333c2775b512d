#include "launcher/commands/kernel_moe.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/moe/moe.h"
#include "kernels/moe/moe_case.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/moe_ref.h"
#include "launcher/commands/common_options.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::launcher {
namespace {

namespace moe = kernels::moe;

struct MoeOptions {
  std::string model = "qwen3-30b-a3b";  // qwen3-30b-a3b | gpt-oss-120b | custom
  std::string family;                   // default: the model's
  int64_t h = 0, experts = 0, top_k = 0, inter = 0;  // 0: the model's
  int64_t tokens = 4;
  int64_t capacity = -1;
  std::string skew = "router";  // router | uniform | zipf:S | counts:FILE
  bool shared = false;
  bool check = false;
  CommonOptions common;
};

using moe::Operand;
using moe::Random;

moe::RouterSkew ParseSkew(const std::string& text, int64_t experts) {
  moe::RouterSkew s;
  if (text == "uniform") return s;
  if (text.rfind("zipf:", 0) == 0) {
    s.kind = moe::RouterSkew::Kind::kZipf;
    char* end = nullptr;
    s.zipf_s = std::strtod(text.c_str() + 5, &end);
    if (*end != '\0' || end == text.c_str() + 5) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel moe: --skew '", text, "': zipf:S needs a number S >= 0"));
    }
    return s;
  }
  if (text.rfind("counts:", 0) == 0) {
    s.kind = moe::RouterSkew::Kind::kCounts;
    std::ifstream in(text.substr(7));
    if (!in) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel moe: --skew '", text, "': cannot read ", text.substr(7)));
    }
    int64_t c;
    while (in >> c) s.counts.push_back(c);
    (void)experts;
    return s;
  }
  Raise(ErrorCode::kInvalidArgument,
        StrCat("kernel moe: --skew '", text, "' is not one of router, uniform, zipf:S, counts:FILE"));
}

int Run(MoeOptions o) {
  if (o.model == "qwen3-30b-a3b") {
    if (o.family.empty()) o.family = "qwen3";
    if (!o.h) o.h = 2048;
    if (!o.experts) o.experts = 128;
    if (!o.top_k) o.top_k = 8;
    if (!o.inter) o.inter = 768;
  } else if (o.model == "gpt-oss-120b") {
    if (o.family.empty()) o.family = "gpt_oss";
    if (!o.h) o.h = 2880;
    if (!o.experts) o.experts = 128;
    if (!o.top_k) o.top_k = 4;
    if (!o.inter) o.inter = 2880;
  } else if (o.model != "custom") {
    Raise(ErrorCode::kInvalidArgument, StrCat("kernel moe: --model '", o.model,
                                              "' is not one of qwen3-30b-a3b, gpt-oss-120b, custom"));
  }
  for (auto [name, v] : {std::pair{"--h", o.h}, {"--experts", o.experts}, {"--top-k", o.top_k},
                         {"--inter", o.inter}, {"--tokens", o.tokens}}) {
    if (v < 1 || v > (1 << 20)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("kernel moe: ", name, " = ", v, "; the rule is 1 <= value <= 1048576"));
    }
  }
  if (o.top_k > o.experts) {
    Raise(ErrorCode::kInvalidArgument, StrCat("kernel moe: --top-k = ", o.top_k,
                                              "; the rule is top_k <= experts (", o.experts, ")"));
  }
  const reference::RouterFamily family = reference::ParseRouterFamily(o.family);
  const HardwareProfile profile = LoadProfile(o.common);
  const uint32_t seed = static_cast<uint32_t>(o.common.seed);
  std::printf("nkisim kernel moe: %s (family %s), T = %lld, H = %lld, E = %lld, top %lld, I = %lld, "
              "%s, skew %s, LNC 1, profile %s\n",
              o.model.c_str(), o.family.c_str(), static_cast<long long>(o.tokens),
              static_cast<long long>(o.h), static_cast<long long>(o.experts),
              static_cast<long long>(o.top_k), static_cast<long long>(o.inter),
              o.capacity >= 0 ? StrCat("capacity ", o.capacity).c_str() : "dropless",
              o.skew.c_str(), profile.name().c_str());
  LogicalCore lnc(1, profile);
  Operand x = Random({o.tokens, o.h}, 1.0f, seed * 7 + 1, "x");
  moe::Routing routing;
  double t = lnc.now();
  if (o.skew == "router") {
    Operand w = Random({o.h, o.experts}, 1.0f / std::sqrt(float(o.h)), seed * 7 + 2, "w_router");
    TensorView logits = TensorView::Create({o.tokens, o.experts}, DType::kFloat32, "logits");
    lnc.Launch([&](const KernelContext& c) { moe::RouterLogitsKernel(c, x.view, w.view, logits); });
    routing = moe::SelectExperts(logits, o.top_k, family);
  } else {
    routing = moe::SkewedRouting(o.tokens, o.experts, o.top_k, ParseSkew(o.skew, o.experts), seed);
  }
  std::printf("router     %10.3f us\n", (lnc.now() - t) / 1e3);
  const moe::DispatchPlan plan = moe::PlanDispatch(routing, o.experts, o.capacity);
  const int64_t rows = std::max<int64_t>(plan.rows(), 1);
  TensorView x_perm = TensorView::Create({rows, o.h}, DType::kBFloat16, "x_perm");
  TensorView y_perm = TensorView::Create({rows, o.h}, DType::kBFloat16, "y_perm");
  t = lnc.now();
  lnc.Launch([&](const KernelContext& c) {
    moe::DispatchKernel(c, plan, x.view, x_perm.slice(0, 0, plan.rows()));
  });
  std::printf("dispatch   %10.3f us  (%lld rows, %lld dropped)\n", (lnc.now() - t) / 1e3,
              static_cast<long long>(plan.rows()), static_cast<long long>(plan.dropped));
  const float ws = 1.0f / std::sqrt(float(o.h)), wds = 1.0f / std::sqrt(float(o.inter));
  std::vector<double> gold(static_cast<size_t>(o.tokens * o.h), 0.0);
  t = lnc.now();
  int64_t active = 0, busiest = -1, busiest_rows = 0;
  double slowest = 0;
  for (int64_t e = 0; e < o.experts; ++e) {
    const int64_t n = plan.offset[e + 1] - plan.offset[e];
    if (n == 0) continue;
    ++active;
    Operand wg = Random({o.h, o.inter}, ws, seed * 1000003u + 3 * e, "wg");
    Operand wu = Random({o.h, o.inter}, ws, seed * 1000003u + 3 * e + 1, "wu");
    Operand wd = Random({o.inter, o.h}, wds, seed * 1000003u + 3 * e + 2, "wd");
    const TensorView xe = x_perm.slice(0, plan.offset[e], plan.offset[e + 1]);
    const TensorView ye = y_perm.slice(0, plan.offset[e], plan.offset[e + 1]);
    const double s = lnc.now();
    lnc.Launch([&](const KernelContext& c) { moe::ExpertMlpKernel(c, xe, wg.view, wu.view, wd.view, ye); });
    if (lnc.now() - s > slowest) {
      slowest = lnc.now() - s;
      busiest = e;
      busiest_rows = n;
    }
    if (o.check) {  // the golden: this expert's tokens gathered from the routing, in token order
      std::vector<float> in;
      std::vector<int64_t> slots;
      std::vector<int64_t> held(static_cast<size_t>(o.experts), 0);
      for (int64_t s2 = 0; s2 < o.tokens * o.top_k; ++s2) {
        const int ex = routing.expert[static_cast<size_t>(s2)];
        if (o.capacity >= 0 && held[ex] >= o.capacity) continue;
        ++held[ex];
        if (ex != e) continue;
        const int64_t tok = s2 / o.top_k;
        slots.push_back(s2);
        in.insert(in.end(), x.values.begin() + tok * o.h, x.values.begin() + (tok + 1) * o.h);
      }
      const std::vector<double> y = reference::ExpertMlpRef(
          in, static_cast<int64_t>(slots.size()), o.h, o.inter, wg.values, wu.values, wd.values);
      for (size_t r = 0; r < slots.size(); ++r) {
        const int64_t tok = slots[r] / o.top_k;
        const double w = routing.weight[static_cast<size_t>(slots[r])];
        for (int64_t hh = 0; hh < o.h; ++hh) {
          gold[static_cast<size_t>(tok * o.h + hh)] += w * y[r * o.h + hh];
        }
      }
    }
  }
  std::printf("experts    %10.3f us  (%lld active; slowest: expert %lld, %lld rows, %.3f us)\n",
              (lnc.now() - t) / 1e3, static_cast<long long>(active),
              static_cast<long long>(busiest), static_cast<long long>(busiest_rows), slowest / 1e3);
  TensorView shared = TensorView::Create({o.tokens, o.h}, DType::kBFloat16, "shared");
  if (o.shared) {
    Operand wg = Random({o.h, o.inter}, ws, seed * 17 + 1, "sg");
    Operand wu = Random({o.h, o.inter}, ws, seed * 17 + 2, "su");
    Operand wd = Random({o.inter, o.h}, wds, seed * 17 + 3, "sd");
    t = lnc.now();
    lnc.Launch([&](const KernelContext& c) { moe::ExpertMlpKernel(c, x.view, wg.view, wu.view, wd.view, shared); });
    std::printf("shared     %10.3f us\n", (lnc.now() - t) / 1e3);
    if (o.check) {
      const std::vector<double> y =
          reference::ExpertMlpRef(x.values, o.tokens, o.h, o.inter, wg.values, wu.values, wd.values);
      for (size_t i = 0; i < y.size(); ++i) gold[i] += y[i];
    }
  }
  TensorView weights = TensorView::Create({o.tokens, o.top_k}, DType::kFloat32, "weights");
  weights.FromFloats(routing.weight);
  TensorView out = TensorView::Create({o.tokens, o.h}, DType::kBFloat16, "out");
  t = lnc.now();
  lnc.Launch([&](const KernelContext& c) {
    moe::CombineKernel(c, plan, weights, y_perm, o.shared ? &shared : nullptr, out);
  });
  std::printf("combine    %10.3f us\n", (lnc.now() - t) / 1e3);
  std::printf("layer      %10.3f us simulated\n", lnc.now() / 1e3);
  if (!o.check) return 0;
  const reference::Comparison c = reference::Compare(out.ToFloats(), gold, {1e-2, 1e-2});
  std::printf("check vs fp64 golden (atol 1e-2, rtol 1e-2): %s\n", c.ToString().c_str());
  return c.pass() ? 0 : 1;
}

}  // namespace

void AddKernelMoeCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<MoeOptions>();
  cmd->add_option("--model", o->model, "qwen3-30b-a3b, gpt-oss-120b or custom")->capture_default_str();
  cmd->add_option("--family", o->family, "router rule: qwen3, mixtral, gpt_oss, llama4 (default: the model's)");
  cmd->add_option("--h", o->h, "hidden size (default: the model's)");
  cmd->add_option("--experts", o->experts, "routed experts (default: the model's)");
  cmd->add_option("--top-k", o->top_k, "experts per token (default: the model's)");
  cmd->add_option("--inter", o->inter, "expert intermediate size (default: the model's)");
  cmd->add_option("--tokens", o->tokens, "tokens in the step (decode: few; prefill: many)")->capture_default_str();
  cmd->add_option("--capacity", o->capacity, "rows an expert takes at most (-1: dropless)")->capture_default_str();
  cmd->add_option("--skew", o->skew, "router (the router kernel), uniform, zipf:S or counts:FILE")
      ->capture_default_str();
  cmd->add_flag("--shared", o->shared, "add a shared expert (the routed experts' shape)");
  cmd->add_flag("--check", o->check, "compare with the fp64 golden; exit 1 outside the tolerance");
  AddCommonOptions(cmd, &o->common, kSeedFlag | kProfileFlag,
                   {.profile_path = "", .seed = 1, .lnc = 1, .trace_path = ""});
  cmd->callback([o, exit_code] { *exit_code = Run(*o); });
}

}  // namespace nkisim::launcher
