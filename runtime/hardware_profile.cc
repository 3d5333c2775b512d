#include "runtime/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/trn2_profile_text.h"

namespace nkisim {
namespace {

HardwareProfile MakeTrn2() {
  HardwareProfile p;
  ParseConfigText(kTrn2ProfileText, "built-in trn2 profile (configs/hardware/trn2.textproto)", &p);
  return p;
}

// No figure of a machine comes near 1e12 (GHz, GB/s, bytes per partition, counts, ns), and none
// that must be positive is below 1e-6 (1 kB/s, 1 kHz); a value beyond either is a typo that would
// make every time 0 or astronomically large. The tuning rows are held to the same bounds.
constexpr double kMinFigure = 1e-6;
constexpr double kMaxFigure = 1e12;
constexpr uint64_t kMaxThresholdBytes = 1ULL << 40;

// The collectives each algorithm row of collectives/algorithms.cc implements (its `serves`);
// collectives_tests checks that the two tables agree. A tuning row for an op its algorithm does
// not implement could never apply.
struct TunedAlgorithm {
  const char* name;
  std::vector<std::string> ops;
};
const std::vector<TunedAlgorithm>& TunedAlgorithms() {
  static const std::vector<std::string> kGatherAndReductions = {"all_gather", "reduce_scatter",
                                                                "all_reduce"};
  static const std::vector<TunedAlgorithm> kTable = {
      {"ring", kGatherAndReductions},     {"mesh", kGatherAndReductions},
      {"mesh_1step", {"all_reduce"}},     {"rdh", kGatherAndReductions},
      {"kangaring", kGatherAndReductions}, {"hierarchical", kGatherAndReductions},
      {"pairwise", {"all_to_all"}},
  };
  return kTable;
}

// The integer fields: counts and sizes, each bounded by what a chip could have (trn2's figure in
// brackets), so that no table or product sized by them can be huge or overflow.
void CheckCounts(const HardwareProfile& p, const std::string& source_name) {
  struct Count { const char* field; uint64_t value, lo, hi; };
  const Count counts[] = {
      {"pe_cols", p.pe_cols(), 1, 1024},                                     // [128]
      {"pe_max_moving_free", p.pe_max_moving_free(), 1, 65536},              // [512]
      {"pe_min_cycles", p.pe_min_cycles(), 0, 1000000},                      // [64]
      {"access_overhead_cycles", p.access_overhead_cycles(), 0, 1000000},    // [60]
      {"engine_min_ii_cycles", p.engine_min_ii_cycles(), 0, 1000000},        // [64]
      {"gpsimd_start_cycles", p.gpsimd_start_cycles(), 0, 1000000},          // [150]
      {"engine_dependent_overhead_cycles", p.engine_dependent_overhead_cycles(), 0, 1000000},  // [200]
      {"sbuf_bytes_per_partition", p.sbuf_bytes_per_partition(), 1, 1ULL << 30},  // [224 KiB]
      {"psum_bytes_per_partition", p.psum_bytes_per_partition(), 1, 1ULL << 30},  // [16 KiB]
      {"psum_banks", p.psum_banks(), 1, 1024},                               // [8]
      {"dma_queues", p.dma_queues(), 1, 16},                                 // [16]
      {"dma_engines", p.dma_engines(), 1, 16},                               // [16]
      {"dma_descriptor_max_bytes", p.dma_descriptor_max_bytes(), 1, 1ULL << 20},  // [4 KiB]
      {"dma_collective_packet_bytes", p.dma_collective_packet_bytes(), 1, 1ULL << 30},  // [64 KiB]
      {"hbm_bytes_per_chip", p.hbm_bytes_per_chip(), 1, 1ULL << 50},         // [96 GiB]
      {"physical_cores_per_chip", p.physical_cores_per_chip(), 1, 256},      // [8]
      {"chips_per_instance", p.chips_per_instance(), 1, 4096},               // [16]
      {"torus_x", p.torus_x(), 1, 4096},                                     // [4]
      {"torus_y", p.torus_y(), 1, 4096},                                     // [4]
  };
  for (const Count& c : counts) {
    if (c.value < c.lo || c.value > c.hi) {
      Raise(ErrorCode::kBadConfig,
            StrCat(source_name, ": hardware profile field '", c.field, "' is ", c.value,
                   "; it must be in [", c.lo, ", ", c.hi, "]",
                   c.hi == 16 ? " (the simulator models at most 16)" : ""));
    }
  }
}

std::string JoinOps(const std::vector<std::string>& ops) {
  std::string s;
  for (const std::string& op : ops) s += StrCat(s.empty() ? "" : ", ", op);
  return s;
}

void CheckTuningFigure(const std::string& where, const char* field, bool has, double v, double lo) {
  if (has && !(v >= lo && v <= kMaxFigure)) {
    Raise(ErrorCode::kBadConfig, StrCat(where, ".", field, ": ", v, " must be in [",
                                        lo == 0 ? "0" : "1e-6", ", 1e12]"));
  }
}

void CheckTuningRow(const proto::CollectiveTuning& t, const std::string& where) {
  static const char* const kOps[] = {"", "all_gather", "reduce_scatter", "all_reduce", "all_to_all"};
  if (std::find(std::begin(kOps), std::end(kOps), t.op()) == std::end(kOps)) {
    Raise(ErrorCode::kBadConfig, StrCat(where, ".op: '", t.op(), "' is not one of all_gather, ",
                                        "reduce_scatter, all_reduce, all_to_all (or empty)"));
  }
  if (!t.algorithm().empty()) {
    const std::vector<std::string>* ops = TuningAlgorithmOps(t.algorithm());
    if (ops == nullptr) {
      Raise(ErrorCode::kBadConfig, StrCat(where, ".algorithm: '", t.algorithm(), "' is not one of ",
                                          TuningAlgorithmNames(), " (or empty)"));
    }
    if (!t.op().empty() && std::find(ops->begin(), ops->end(), t.op()) == ops->end()) {
      Raise(ErrorCode::kBadConfig,
            StrCat(where, ": algorithm '", t.algorithm(), "' does not implement ", t.op(),
                   ", so the row could never apply (", t.algorithm(), " serves ",
                   JoinOps(*ops), ")"));
    }
  }
  CheckTuningFigure(where, "step_latency_ns", t.has_step_latency_ns(), t.step_latency_ns(), 0);
  CheckTuningFigure(where, "fixed_ns", t.has_fixed_ns(), t.fixed_ns(), 0);
  CheckTuningFigure(where, "link_gbps", t.has_link_gbps(), t.link_gbps(), kMinFigure);
}

}  // namespace

const std::vector<std::string>* TuningAlgorithmOps(const std::string& algorithm) {
  for (const TunedAlgorithm& a : TunedAlgorithms()) {
    if (algorithm == a.name) return &a.ops;
  }
  return nullptr;
}

std::string TuningAlgorithmNames() {
  std::string names;
  for (const TunedAlgorithm& a : TunedAlgorithms()) names += StrCat(names.empty() ? "" : ", ", a.name);
  return names;
}

std::string LncProblem(const HardwareProfile& p, int64_t lnc) {
  if (lnc != 1 && lnc != 2) return "must be 1 or 2 (physical cores per rank)";
  if (p.physical_cores_per_chip() % lnc != 0) {
    return StrCat("does not divide the profile's physical_cores_per_chip (",
                  p.physical_cores_per_chip(), "): a rank's physical cores must be on one chip");
  }
  return "";
}

int RanksPerChip(const HardwareProfile& p, int64_t lnc, const std::string& source) {
  const std::string problem = LncProblem(p, lnc);
  if (!problem.empty()) Raise(ErrorCode::kBadConfig, StrCat(source, ": lnc ", lnc, " ", problem));
  return static_cast<int>(p.physical_cores_per_chip() / lnc);
}

const HardwareProfile& Trn2Profile() {
  static const HardwareProfile kTrn2 = MakeTrn2();
  return kTrn2;
}

namespace {

// Fields of earlier profiles that the DMA engine model replaced: a profile that sets one is
// refused with what replaced it (the text parser alone would say only "no field named").
struct RemovedField {
  const char* name;
  const char* removed_with;
  const char* replaced_by;
};
constexpr RemovedField kRemovedFields[] = {
    {"dma_queue_gbps", "the one-queue DMA model", "dma_engines x dma_engine_gbps (docs/dma.md)"},
    {"dma_fixed_ns", "the one-queue DMA model", "dma_issue_ns and dma_latency_ns (docs/dma.md)"},
    {"core_link_gbps", "the one-queue DMA model",
     "the DMA engines: an LNC sendrecv is a DMA on the sender's engines"},
    {"collective_dma_gbps_per_rank", "the fitted collective DMA rate",
     "the DMA engines: dma_engines x dma_collective_packet_bytes packets, bounded by "
     "hbm_gbps_per_core, per physical core (docs/collectives.md)"},
    {"collective_in_graph_fixed_ns", "the one-queue DMA model",
     "collective_barrier_ns + dma_latency_ns (docs/collectives.md)"},
};

}  // namespace

HardwareProfile ParseHardwareProfile(const std::string& text, const std::string& source_name) {
  HardwareProfile profile = Trn2Profile();
  try {
    ParseConfigText(text, source_name, &profile);
  } catch (const Error& e) {
    for (const RemovedField& f : kRemovedFields) {
      if (std::string(e.what()).find(StrCat("no field named \"", f.name, "\"")) != std::string::npos) {
        Raise(ErrorCode::kBadConfig, StrCat(source_name, ": field '", f.name,
                                            "' was removed with ", f.removed_with, "; use ",
                                            f.replaced_by));
      }
    }
    throw;
  }
  ValidateHardwareProfile(profile, source_name);
  return profile;
}

HardwareProfile LoadHardwareProfile(const std::string& path) {
  return ParseHardwareProfile(ReadConfigFile(path, "hardware profile"), path);
}

// Fractions of a rate or of a window: in [0, 1].
static void CheckFractions(const HardwareProfile& p, const std::string& source_name) {
  struct Fraction { const char* field; double value; };
  const Fraction fractions[] = {
      {"pe_throttle_start_fraction", p.pe_throttle_start_fraction()},
      {"pe_throttle_min_utilization", p.pe_throttle_min_utilization()},
  };
  for (const Fraction& f : fractions) {
    if (!(f.value >= 0 && f.value <= 1)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be in [0, 1]"));
    }
  }
}

void ValidateHardwareProfile(const HardwareProfile& p, const std::string& source_name) {
  struct Positive { const char* field; double value; };
  const Positive positives[] = {
      {"pe_freq_ghz", p.pe_freq_ghz()}, {"pe_fp32_cycle_factor", p.pe_fp32_cycle_factor()},
      {"vector_freq_ghz", p.vector_freq_ghz()},
      {"vector_elems_per_cycle_16bit", p.vector_elems_per_cycle_16bit()},
      {"vector_elems_per_cycle_other", p.vector_elems_per_cycle_other()},
      {"scalar_freq_ghz", p.scalar_freq_ghz()}, {"scalar_elems_per_cycle", p.scalar_elems_per_cycle()},
      {"gpsimd_freq_ghz", p.gpsimd_freq_ghz()}, {"gpsimd_elems_per_cycle", p.gpsimd_elems_per_cycle()},
      {"hbm_gbps_per_core", p.hbm_gbps_per_core()}, {"dma_engine_gbps", p.dma_engine_gbps()},
      {"dma_engine_raw_gbps", p.dma_engine_raw_gbps()},
      {"neuronlink_gbps_per_chip", p.neuronlink_gbps_per_chip()},
      {"interinstance_gbps_per_chip", p.interinstance_gbps_per_chip()},
      {"intrachip_gbps", p.intrachip_gbps()},
      {"pe_throttle_window_ns", p.pe_throttle_window_ns()},
  };
  for (const Positive& f : positives) {
    if (!(f.value >= kMinFigure && f.value <= kMaxFigure)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be in [1e-6, 1e12]"));
    }
  }
  struct NonNegative { const char* field; double value; };
  const NonNegative non_negatives[] = {
      {"neuronlink_latency_ns", p.neuronlink_latency_ns()},
      {"collective_step_latency_ns", p.collective_step_latency_ns()},
      {"collective_fixed_ns", p.collective_fixed_ns()},
      {"collective_barrier_ns", p.collective_barrier_ns()},
      {"interinstance_latency_ns", p.interinstance_latency_ns()},
      {"dma_issue_ns", p.dma_issue_ns()},
      {"dma_latency_ns", p.dma_latency_ns()},
      {"core_link_latency_ns", p.core_link_latency_ns()},
      {"pe_mx_speedup", p.pe_mx_speedup()},
      {"host_ms_per_step", p.host_ms_per_step()},
      {"pe_throttle_ramp_ns", p.pe_throttle_ramp_ns()},
  };
  for (const NonNegative& f : non_negatives) {
    if (!(f.value >= 0 && f.value <= kMaxFigure)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be in [0, 1e12]"));
    }
  }
  CheckCounts(p, source_name);
  CheckFractions(p, source_name);
  // Strings go into cache keys and reports as protobuf strings, which must be UTF-8.
  auto check_utf8 = [&](const std::string& field, const std::string& value) {
    if (ValidUtf8(value) != value) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", field, "' '",
                                          ValidUtf8(value), "' is not valid UTF-8"));
    }
  };
  check_utf8("name", p.name());
  for (int i = 0; i < p.collective_tuning_size(); ++i) {
    check_utf8(StrCat("collective_tuning[", i, "].algorithm"), p.collective_tuning(i).algorithm());
    check_utf8(StrCat("collective_tuning[", i, "].source"), p.collective_tuning(i).source());
  }
  if (p.rdh_max_bytes_per_rank() > kMaxThresholdBytes) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile field 'rdh_max_bytes_per_rank' is ",
                 p.rdh_max_bytes_per_rank(), "; it must be <= 2^40 (1 TiB, beyond any HBM)"));
  }
  if (p.mesh_max_bytes_per_rank() > p.rdh_max_bytes_per_rank()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: mesh_max_bytes_per_rank (",
                 p.mesh_max_bytes_per_rank(), ") must not exceed rdh_max_bytes_per_rank (",
                 p.rdh_max_bytes_per_rank(), ")"));
  }
  if (static_cast<uint64_t>(p.torus_x()) * p.torus_y() != p.chips_per_instance()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: torus_x x torus_y (", p.torus_x(), " x ",
                 p.torus_y(), ") must equal chips_per_instance (", p.chips_per_instance(), ")"));
  }
  for (int i = 0; i < p.collective_tuning_size(); ++i) {
    CheckTuningRow(p.collective_tuning(i),
                   StrCat(source_name, ": hardware profile: collective_tuning[", i, "]"));
  }
  if (p.partitions() == 0 || p.partitions() > 128 || p.pe_rows() != p.partitions()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile field 'partitions' is ", p.partitions(),
                 "; it must be in [1, 128] and equal pe_rows (", p.pe_rows(), ")"));
  }
  if (p.dma_engine_gbps() > p.dma_engine_raw_gbps()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: dma_engine_gbps (", p.dma_engine_gbps(),
                 ") must not exceed dma_engine_raw_gbps (", p.dma_engine_raw_gbps(),
                 "): an engine cannot sustain more than its raw rate"));
  }
  if (p.dma_issue_ns() > p.dma_latency_ns()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: dma_issue_ns (", p.dma_issue_ns(),
                 ") must not exceed dma_latency_ns (", p.dma_latency_ns(),
                 "), the whole fixed latency it is part of"));
  }
  if (!(p.dma_transpose_hbm_efficiency() >= 0.01 && p.dma_transpose_hbm_efficiency() <= 1)) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile field 'dma_transpose_hbm_efficiency' is ",
                 p.dma_transpose_hbm_efficiency(), "; it must be in [0.01, 1]"));
  }
  if (p.psum_bytes_per_partition() % p.psum_banks() != 0 ||
      p.psum_bytes_per_partition() / p.psum_banks() < 4 * p.pe_max_moving_free()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: psum_bytes_per_partition (",
                 p.psum_bytes_per_partition(), ") must split into psum_banks (", p.psum_banks(),
                 ") banks that each hold pe_max_moving_free (", p.pe_max_moving_free(), ") fp32"));
  }
}

double PeakBf16Tflops(const HardwareProfile& p) {
  return 2.0 * p.pe_rows() * p.pe_cols() * p.pe_freq_ghz() / 1000.0;
}

double PeakMxTflops(const HardwareProfile& p) { return PeakBf16Tflops(p) * p.pe_mx_speedup(); }

}  // namespace nkisim
