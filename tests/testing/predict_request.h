// The in-process `nkisim predict` request the model tests build: one model under one plan.
#pragma once

#include <string>

#include "model/hf_config.h"
#include "model/predict.h"

namespace nkisim::testing {

// REQUIRES: plan is a --plan text ("tp=8", "tp=64,lnc=1", ...).
// RETURNS B requests of S prompt tokens and N generated tokens each of `model` under that plan,
// every other field predict's default (no buckets, the built-in trn2).
inline launcher::PredictRequest OnePlanRequest(const launcher::HfModel& model, const std::string& plan, int batch,
                                               int input_tokens, int output_tokens) {
  launcher::PredictRequest r;
  r.model = model;
  r.plans = {launcher::ParsePlan(plan)};
  r.batch = batch;
  r.input_tokens = input_tokens;
  r.output_tokens = output_tokens;
  return r;
}

}  // namespace nkisim::testing
