// Internal to kernels/mlp: the SPMD programs of the two variants. Each runs on every physical core
// of the logical core (ctx.prg_id of ctx.n_prgs) after ValidateMlp accepted the parameters, and
// writes into the outputs Mlp() allocated.
#pragma once

#include "kernels/mlp/config.h"
#include "kernels/mlp/mlp.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels {

// Decode: H on the partitions; LNC shards gate / up's H (partials exchanged) and down's output H.
void MlpTkgKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result);

// Prefill: the tokens in 128-row tiles, blocks of up to 4 tiles; LNC shards the tiles.
void MlpCteKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result);

}  // namespace nkisim::kernels
