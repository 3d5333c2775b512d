// DMA transfers whose descriptors are generated element by element rather than one per contiguous
// run: the transposing load of the descriptor-generation engine (DGE) and the indirect
// scatter-add, an atomic read-modify-write of HBM rows chosen at run time by an index tile.
//
// Cost: like dma_copy (runtime/dma_engines.h), on the queue whose issue stage frees first, split
// over the engines by the SBUF tile's partitions; a transpose runs the engines at
// dma_transpose_hbm_efficiency of their rate (trainium2_arch.rst: up to 90%). A software-DGE
// transpose first spends a GpSimd instruction writing its descriptors (one per element, spread
// over the partition lanes), and its DMA starts when that ends.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

enum class DgeMode {
  kAuto,      // hardware DGE when the transfer meets its rules, else the software fallback
  kHardware,  // hardware DGE only: a transfer outside its rules throws
  kSoftware,  // software DGE: descriptors written by GpSimd, any shape and dtype
};
const char* DgeModeName(DgeMode mode);  // "auto", "hardware", "software"

// The hardware DGE's transpose rules for src [R, C]: R <= kHwDgeMaxRows, C <= the profile's
// partitions, a 2-byte dtype. (HWDGE exists from NeuronCore-v3 on; the profile has no generation
// field and its trn2 default is v3, so it is taken to be present.) Returns "" when src meets them,
// else the first rule broken, worded for an error message.
inline constexpr int64_t kHwDgeMaxRows = 16;
std::string HardwareDgeViolation(const TensorView& src, int64_t partitions);

// dst[C, R] (SBUF) = src[R, C]^T (HBM): the fused load + 2-D transpose. dst's dtype may differ
// from src's (DMA casting). Rules: src is a 2-D view; dst is an SBUF tile [C, R]; with kHardware
// the rules of HardwareDgeViolation. Throws Error(kInvalidArgument) naming the rule broken.
void dma_transpose(const Tile& dst, const TensorView& src, DgeMode mode = DgeMode::kAuto);

// dst[indices[n], :] += src[n, :] for n = 0 .. N-1, in that order, computed in fp32 and rounded
// into dst's dtype; repeated indices accumulate (the add is atomic).
// Rules: dst is a 2-D HBM view [R, M]; indices an integer SBUF tile [N, 1]; src an SBUF tile with
// N partitions and M elements per partition; every index in [0, R).
void dma_scatter_add(const TensorView& dst, const Tile& indices, const Tile& src);

class Issue;
// Shared by the DMA instructions that write descriptors element by element or reach the engines
// from a run-time shape (dma_transpose's SBUF form, dma_compute):
// GpSimd writes one descriptor per element; returns when they are ready for the DMA.
double GenerateDgeDescriptors(int64_t elements);
// The transfer of `bytes` into or out of the on-chip tile `chip` (its partitions split over the
// engines, one run a partition), no earlier than earliest_ns, at `efficiency` of the engines'
// rate; `hbm_bytes` cross the HBM port. Returns the completion time.
double FinishDmaOnChip(Issue& issue, double earliest_ns, const Tile& chip, int64_t bytes,
                       int64_t hbm_bytes, double efficiency);

}  // namespace nkisim::nisa
