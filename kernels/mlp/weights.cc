#include "kernels/mlp/weights.h"

#include <algorithm>

#include "kernels/common/tiling.h"

namespace nkisim::kernels {

void AppendGateUpChunks(const TensorView& w, int64_t c0, int64_t c1, const MlpConfig& cfg,
                        const HardwareProfile& profile, std::vector<TensorView>* chunks,
                        int64_t target_bytes) {
  if (target_bytes <= 0) target_bytes = DmaTargetBytes(profile);
  const int64_t subtiles = w.dim(1), width = c1 - c0;
  const int64_t bytes =
      cfg.partitions * width * static_cast<int64_t>(SizeOf(cfg.matmul_weight_dtype()));
  int64_t hc = std::clamp<int64_t>(target_bytes / bytes, 1, subtiles);
  if (cfg.is_static() && subtiles >= 2) hc = std::max<int64_t>(2, hc / 2 * 2);  // double-row pairs
  for (int64_t j0 = 0; j0 < subtiles; j0 += hc) {
    chunks->push_back(w.slice(1, j0, std::min(subtiles, j0 + hc)).slice(2, c0, c1));
  }
}

void AppendDownChunks(const TensorView& down_w, int64_t h0, int64_t h1, const MlpConfig& cfg,
                      const HardwareProfile& profile, std::vector<TensorView>* chunks, int64_t c0,
                      int64_t c1, int64_t target_bytes) {
  if (target_bytes <= 0) target_bytes = DmaTargetBytes(profile);
  const int64_t np = cfg.partitions, width = h1 - h0;
  if (c1 < 0) c1 = cfg.i_chunks();
  const int64_t full = std::min(c1, cfg.i / np);  // full 128-row chunks end here
  const int64_t bytes = np * width * static_cast<int64_t>(SizeOf(cfg.matmul_weight_dtype()));
  int64_t cc = std::max<int64_t>(1, target_bytes / bytes);
  if (cfg.is_static()) cc = std::max<int64_t>(2, cc / 2 * 2);  // double-row pairs
  for (int64_t c = c0; c < full; c += cc) {
    const int64_t e = std::min(full, c + cc);
    chunks->push_back(down_w.slice(0, c * np, e * np)
                          .reshape({e - c, np, cfg.h})
                          .permute({1, 0, 2})
                          .slice(2, h0, h1));
  }
  if (cfg.i % np != 0 && c1 == cfg.i_chunks()) {  // the short last chunk of I
    const int64_t rows = cfg.i - full * np;
    chunks->push_back(down_w.slice(0, full * np, cfg.i).reshape({rows, 1, cfg.h}).slice(2, h0, h1));
  }
}

int64_t LargestChunkElements(const std::vector<TensorView>& chunks) {
  int64_t most = 1;
  for (const TensorView& c : chunks) most = std::max(most, c.numel() / c.dim(0));
  return most;
}

int64_t StreamSlots(const NeuronCore& core, int64_t slot_elements, DType dtype, int64_t chunks,
                    int64_t reserve_bytes) {
  const int64_t slot_bytes = slot_elements * static_cast<int64_t>(SizeOf(dtype));
  const int64_t wanted = 2 * core.profile().dma_queues();
  const int64_t free = std::max<int64_t>(0, SbufFreeBytes(core) - reserve_bytes);
  return std::clamp<int64_t>(std::min(free * 3 / 4 / slot_bytes, wanted), 1, chunks);
}

}  // namespace nkisim::kernels
