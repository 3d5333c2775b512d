// `nkisim predict --model CONFIG.json --tp N ...`: TTFT, TPOT, tokens/s and HBM per logical core
// of a whole Hugging Face model under each plan (model/predict.h, docs/predict.md).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

void AddPredictCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
