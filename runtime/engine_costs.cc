#include "runtime/engine_costs.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace nkisim {

double LaneRate(const HardwareProfile& p, Engine engine, bool narrow) {
  double elems_per_cycle = 0;
  switch (engine) {
    case Engine::kVector:
      elems_per_cycle = narrow ? p.vector_elems_per_cycle_16bit() : p.vector_elems_per_cycle_other();
      break;
    case Engine::kScalar:
      elems_per_cycle = p.scalar_elems_per_cycle();
      break;
    case Engine::kGpSimd:
      elems_per_cycle = p.gpsimd_elems_per_cycle();
      break;
    default:
      Raise(ErrorCode::kInternal, StrCat("LaneRate: ", EngineName(engine), " is not a compute engine"));
  }
  return elems_per_cycle / p.partitions();
}

double EngineFreqGhz(const HardwareProfile& p, Engine engine) {
  switch (engine) {
    case Engine::kVector: return p.vector_freq_ghz();
    case Engine::kScalar: return p.scalar_freq_ghz();
    case Engine::kGpSimd: return p.gpsimd_freq_ghz();
    case Engine::kPE: return p.pe_freq_ghz();
    default:
      Raise(ErrorCode::kInternal, StrCat("EngineFreqGhz: ", EngineName(engine), " has no clock"));
  }
}

double RowCycles(const HardwareProfile& p, Engine engine, const CostRow& row, int64_t n, bool narrow) {
  const double n_cycles = std::ceil(row.n_factor * static_cast<double>(n) / LaneRate(p, engine, narrow));
  const double min_ii = p.engine_min_ii_cycles();
  if (engine == Engine::kGpSimd) {  // GPSIMD_START + N replaces the MIN_II floor
    return p.gpsimd_start_cycles() + n_cycles + (row.plus_min_ii ? min_ii : 0.0);
  }
  const double floored = row.min_ii_floor ? std::max(min_ii, n_cycles) : n_cycles;
  return floored + (row.plus_min_ii ? min_ii : 0.0);
}

double RowNs(const HardwareProfile& p, Engine engine, const CostRow& row, int64_t n, bool narrow,
             bool dependent) {
  const double overhead = dependent ? p.engine_dependent_overhead_cycles() : 0.0;
  return (RowCycles(p, engine, row, n, narrow) + overhead) / EngineFreqGhz(p, engine);
}

double GatherCycles(const HardwareProfile& p, int64_t valid_indices, int64_t elems_per_index,
                    int64_t dtype_bytes) {
  constexpr double kT = 4;  // "Currently, t is a constant 4" (ISA l.634)
  const double e = static_cast<double>(elems_per_index);
  const double c = ((28 + kT * e) / (kT * e)) / std::min(4.0 / static_cast<double>(dtype_bytes), e);
  return p.gpsimd_start_cycles() + std::ceil(static_cast<double>(valid_indices) * e / c);
}

double PeMatmulCycles(const HardwareProfile& p, int64_t stationary_free, int64_t moving_free,
                      bool fp32) {
  const double floor = std::min<double>(p.pe_min_cycles(), static_cast<double>(stationary_free));
  const double cycles = std::max(floor, static_cast<double>(moving_free));
  return fp32 ? cycles * p.pe_fp32_cycle_factor() : cycles;
}

}  // namespace nkisim
