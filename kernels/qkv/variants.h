// Internal to kernels/qkv: the SPMD programs of the two variants. Each runs on every physical core
// of the logical core (ctx.prg_id of ctx.n_prgs) after ValidateQkv accepted the parameters, and
// writes into the outputs Qkv() allocated.
#pragma once

#include "kernels/qkv/config.h"
#include "kernels/qkv/qkv.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels {

// Decode: H on the partitions, LNC shards H and the partial products are exchanged and added.
void QkvTkgKernel(const KernelContext& ctx, const QkvConfig& cfg, const QkvParams& params,
                  const QkvResult& result);

// Prefill: the sequence tiled on the partitions, LNC shards the sequence, final core barrier.
void QkvCteKernel(const KernelContext& ctx, const QkvConfig& cfg, const QkvParams& params,
                  const QkvResult& result);

}  // namespace nkisim::kernels
