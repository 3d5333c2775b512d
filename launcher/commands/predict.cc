#include "launcher/commands/predict.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands/common_options.h"
#include "model/predict.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "serving/step_costs.h"

namespace nkisim::launcher {

void AddPredictCommand(CLI::App* cmd, int* exit_code) {
  struct Options {
    std::string model, json;
    int tp = 0, attention_dp = 1, lnc = 2, replicas = 1, moe_ep = 0, moe_tp = 0;
    std::string router_skew = "uniform", cte_buckets, tkg_buckets;
    std::vector<std::string> plans;
    PredictRequest request;
    CommonOptions common;  // --profile
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Hugging Face config.json (configs/models/)")->required();
  cmd->add_option("--tp", o->tp, "TP degree of the plan (or give --plan)");
  cmd->add_option("--attention-dp", o->attention_dp, "attention-DP G of the --tp plan (decode)")
      ->capture_default_str();
  cmd->add_option("--lnc", o->lnc, "physical cores per rank of the --tp plan, 1 or 2")->capture_default_str();
  cmd->add_option("--replicas", o->replicas, "TP replicas of the --tp plan, each serving --batch requests")
      ->capture_default_str();
  cmd->add_option("--moe-ep", o->moe_ep, "MoE models: expert-parallel ranks of the --tp plan (divides the experts)");
  cmd->add_option("--moe-tp", o->moe_tp, "MoE models: ranks splitting each expert's I (moe_ep x moe_tp = tp)");
  cmd->add_option("--plan", o->plans,
                  "a plan tp=N[,attention_dp=G][,lnc=L][,replicas=R][,moe_ep=E][,moe_tp=T] (repeatable, side by side)");
  cmd->add_option("--router-skew", o->router_skew,
                  "MoE models: the router's expert loads: uniform, zipf:S (hot experts first) or counts:FILE "
                  "(one count per expert of a routed sample, optionally after 'tokens: N'; scaled to each step)")
      ->capture_default_str();
  cmd->add_option("--instances", o->request.instances, "instances the plans may span")->capture_default_str();
  cmd->add_option("--batch", o->request.batch, "requests decoded together (B)")->required();
  cmd->add_option("--input-tokens", o->request.input_tokens, "prompt length S")->required();
  cmd->add_option("--output-tokens", o->request.output_tokens, "generated tokens N")->required();
  cmd->add_option("--decode-samples", o->request.decode_samples,
                  "KV lengths simulated for the TPOT, interpolated in between")
      ->capture_default_str();
  cmd->add_option("--max-prefill-chunk", o->request.max_prefill_chunk,
                  "longest prefill chunk simulated; a longer prompt is prefilled in chunks")
      ->capture_default_str();
  cmd->add_option("--context-encoding-buckets", o->cte_buckets,
                  "compiled prefill buckets, ascending (e.g. 2048,4096,8192,12288): the prompt is prefilled padded "
                  "to the smallest bucket >= --input-tokens (default: none, unpadded)");
  cmd->add_option("--token-generation-buckets", o->tkg_buckets,
                  "compiled decode KV-length buckets, ascending: each step's attention reads its bucket's KV, "
                  "simulated once per bucket crossed (default: none, the KV unpadded and --decode-samples)");
  cmd->add_flag("--max-batch", o->request.max_batch,
                "also print each plan's largest batch whose HBM fits at input + output tokens");
  cmd->add_flag("--max-context", o->request.max_context,
                "also print each plan's longest context (prompt + output tokens) whose HBM fits at --batch");
  cmd->add_option("--json", o->json, "write the predictions as JSON here");
  AddCommonOptions(cmd, &o->common, kProfileFlag | kTraceFlag, {})
      .trace->description("Chrome/Perfetto traces of each plan's simulated layers: PATH with .<plan>.decode "
                          "and .<plan>.prefill before its extension ('': none)");
  cmd->callback([o, exit_code] {
    if (!o->json.empty()) CheckWritable(o->json, "--json");
    o->request.trace_path = o->common.trace_path;
    o->request.model = LoadHfConfig(o->model);
    o->request.skew_text = StrCat("--router-skew ", o->router_skew);
    o->request.skew = ParseRouterSkew(o->router_skew, "--router-skew", &o->request.skew_sample_tokens);
    o->request.profile_path = o->common.profile_path;
    if (!o->cte_buckets.empty()) {
      o->request.context_encoding_buckets = serving::ParseBuckets(o->cte_buckets, "--context-encoding-buckets");
    }
    if (!o->tkg_buckets.empty()) {
      o->request.token_generation_buckets = serving::ParseBuckets(o->tkg_buckets, "--token-generation-buckets");
    }
    if (o->tp != 0 || o->plans.empty()) {
      PredictPlan p{"", o->tp, o->attention_dp, o->lnc, o->replicas, o->moe_ep, o->moe_tp};
      p.name = DefaultPlanName(p);
      o->request.plans.push_back(p);
    }
    for (const std::string& text : o->plans) o->request.plans.push_back(ParsePlan(text));
    if (!o->request.trace_path.empty()) {
      for (const PredictPlan& p : o->request.plans) {
        const auto [decode, prefill] = TracePaths(o->request.trace_path, p);
        CheckWritable(decode, "--trace");
        CheckWritable(prefill, "--trace");
      }
    }
    const std::vector<PlanPrediction> predictions = Predict(o->request);
    std::printf("%s", FormatPredictions(o->request, predictions).c_str());
    if (!o->json.empty()) {
      WriteFileAtomically(o->json, PredictionsJson(o->request, predictions), "--json");
      std::printf("json: %s\n", o->json.c_str());
    }
    if (!o->request.trace_path.empty()) {
      for (const PlanPrediction& p : predictions) {
        if (!p.simulated) continue;
        const auto [decode, prefill] = TracePaths(o->request.trace_path, p.plan);
        std::printf("trace: %s, %s (open in the Perfetto UI)\n", decode.c_str(), prefill.c_str());
      }
    }
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
