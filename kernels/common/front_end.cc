#include "kernels/common/front_end.h"

#include "kernels/common/tiling.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

bool TkgSplitsNormTokens(const FrontEndConfig& cfg) {
  if (cfg.lnc != 2 || cfg.norm == NormType::kNoNorm) return false;
  const int64_t threshold =
      cfg.norm == NormType::kLayerNorm ? kTkgLayerNormSplitTokens : kTkgRmsNormSplitTokens;
  return cfg.tokens > threshold;
}

Tile LoadInverseInputScale(NeuronCore& core, const TensorView& in_scale, int64_t partitions) {
  Tile inv = LoadRowBroadcast(core, "in_scale", in_scale, partitions, DType::kFloat32);
  nisa::reciprocal(inv, inv);
  return inv;
}

}  // namespace nkisim::kernels
