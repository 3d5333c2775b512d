// `nkisim kernel moe`: one MoE layer on one simulated logical core (LNC 1): the router kernel (or
// a routing of the given skew), dispatch, every active expert's MLP, an optional shared expert and
// the combine (kernels/moe/moe.h); prints each stage's simulated time and, with --check, compares
// the output with the fp64 golden (kernels/reference/moe_ref.h).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

void AddKernelMoeCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
