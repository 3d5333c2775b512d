// The per-instruction cost table of the compute engines (docs/engine-costs.md): each nisa compute
// instruction is priced by its row of the "Estimated instruction cost" table of the NKI ISA
// docstrings (aws-neuron-sdk 61e24ff, nki/api/nki/isa/__init__.py), in engine cycles, plus
// engine_dependent_overhead_cycles when it waits on an operand. Pure functions of the profile.
#pragma once

#include <cstdint>

#include "runtime/hardware_profile.h"
#include "runtime/timeline.h"

namespace nkisim {

// A row's rule: cycles = n_factor x N' (N' = N over the engine's per-lane rate), floored at MIN_II
// when min_ii_floor, plus MIN_II when plus_min_ii. On GpSimd the floor is replaced by
// gpsimd_start_cycles added (ISA l.291, l.567).
struct CostRow {
  const char* name;
  double n_factor;
  bool min_ii_floor;
  bool plus_min_ii;
};

namespace cost_rows {
inline constexpr CostRow kActivation{"activation", 1, true, false};              // ISA l.168
inline constexpr CostRow kActivationReduce{"activation_reduce", 1, true, true};  // ISA l.237
inline constexpr CostRow kBnAggr{"bn_aggr", 13.0 / 3.0, true, false};            // ISA l.337
inline constexpr CostRow kBnStats{"bn_stats", 1, true, false};                   // ISA l.386
inline constexpr CostRow kDropout{"dropout", 1, true, false};                    // ISA l.529
inline constexpr CostRow kIota{"iota", 1, false, false};                         // ISA l.567
inline constexpr CostRow kMemset{"memset", 1, true, false};                      // ISA l.715
inline constexpr CostRow kMemsetZero16{"memset_zero_16bit", 0.5, true, false};   // ISA l.714
inline constexpr CostRow kTranspose{"nc_transpose_vector", 1, true, false};      // ISA l.1052
inline constexpr CostRow kReciprocal{"reciprocal", 8, true, false};              // ISA l.1189
inline constexpr CostRow kStt{"scalar_tensor_tensor", 2, false, false};          // ISA l.1225
inline constexpr CostRow kSttFast{"scalar_tensor_tensor_bf16", 1, false, false}; // ISA l.1223
inline constexpr CostRow kCopy{"tensor_copy", 1, true, false};                   // ISA l.1398
inline constexpr CostRow kSelect{"tensor_copy_predicated", 2, true, false};      // ISA l.1523
inline constexpr CostRow kSelectPsum{"tensor_copy_predicated_psum", 1, true, false};  // ISA l.1521
inline constexpr CostRow kReduce{"tensor_reduce", 1, false, false};              // ISA l.1607
inline constexpr CostRow kReduceFast{"tensor_reduce_bf16", 0.5, false, false};   // ISA l.1605
inline constexpr CostRow kTensorScalar{"tensor_scalar", 1, true, false};         // ISA l.1678
inline constexpr CostRow kTensorTensor{"tensor_tensor", 2, true, false};         // ISA l.1812
inline constexpr CostRow kTensorTensorFast{"tensor_tensor_fast", 1, true, false};  // ISA l.1803-1810
// No row in the ISA table: GpSimd's random / software DGE descriptors, and quantize_mx (not in
// that SDK); priced as GpSimd start-up + N / a Vector copy (inferred, docs/engine-costs.md).
inline constexpr CostRow kGeneric{"generic", 1, true, false};
}  // namespace cost_rows

// The per-lane elements per cycle of a Vector/Scalar/GpSimd engine on this profile (1 on
// NeuronCore-v2; trn2's Vector 4 for 16-bit operands, 2 otherwise). Throws for other engines.
double LaneRate(const HardwareProfile& p, Engine engine, bool narrow);
double EngineFreqGhz(const HardwareProfile& p, Engine engine);
// The row's cycles for N free elements per partition on `engine`.
double RowCycles(const HardwareProfile& p, Engine engine, const CostRow& row, int64_t n, bool narrow);
// RowCycles / freq, plus engine_dependent_overhead_cycles / freq when `dependent`.
double RowNs(const HardwareProfile& p, Engine engine, const CostRow& row, int64_t n, bool narrow,
             bool dependent);
// local_gather (ISA l.630-634): 150 + valid x per_idx / C GpSimd cycles,
// C = ((28 + t x per_idx) / (t x per_idx)) / min(4 / dtype_bytes, per_idx), t = 4.
double GatherCycles(const HardwareProfile& p, int64_t valid_indices, int64_t elems_per_index,
                    int64_t dtype_bytes);
// nc_matmul (ISA l.908-911): max(min(pe_min_cycles, M), N) PE cycles, x pe_fp32_cycle_factor
// for fp32; PE nc_transpose (ISA l.1054): max(P, min(64, F)), priced by the caller through this.
double PeMatmulCycles(const HardwareProfile& p, int64_t stationary_free, int64_t moving_free,
                      bool fp32);

}  // namespace nkisim
