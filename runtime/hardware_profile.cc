#include "runtime/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

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

}  // namespace

const HardwareProfile& Trn2Profile() {
  static const HardwareProfile kTrn2 = MakeTrn2();
  return kTrn2;
}

HardwareProfile ParseHardwareProfile(const std::string& text, const std::string& source_name) {
  HardwareProfile profile = Trn2Profile();
  ParseConfigText(text, source_name, &profile);
  ValidateHardwareProfile(profile, source_name);
  return profile;
}

HardwareProfile LoadHardwareProfile(const std::string& path) {
  return ParseHardwareProfile(ReadConfigFile(path, "hardware profile"), path);
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
      {"hbm_gbps_per_core", p.hbm_gbps_per_core()}, {"dma_queue_gbps", p.dma_queue_gbps()},
      {"hbm_bytes_per_chip", static_cast<double>(p.hbm_bytes_per_chip())},
      {"dma_queues", static_cast<double>(p.dma_queues())},
      {"core_link_gbps", p.core_link_gbps()}, {"psum_banks", static_cast<double>(p.psum_banks())},
      {"sbuf_bytes_per_partition", static_cast<double>(p.sbuf_bytes_per_partition())},
      {"psum_bytes_per_partition", static_cast<double>(p.psum_bytes_per_partition())},
      {"neuronlink_gbps_per_chip", p.neuronlink_gbps_per_chip()},
      {"interinstance_gbps_per_chip", p.interinstance_gbps_per_chip()},
      {"intrachip_gbps", p.intrachip_gbps()},
      {"collective_dma_gbps_per_rank", p.collective_dma_gbps_per_rank()},
      {"physical_cores_per_chip", static_cast<double>(p.physical_cores_per_chip())},
      {"chips_per_instance", static_cast<double>(p.chips_per_instance())},
      {"torus_x", static_cast<double>(p.torus_x())},
      {"torus_y", static_cast<double>(p.torus_y())},
      {"pe_max_moving_free", static_cast<double>(p.pe_max_moving_free())},
      {"pe_cols", static_cast<double>(p.pe_cols())},
  };
  // No figure of a machine comes near 1e12 (GHz, GB/s, bytes per partition, counts, ns); a value
  // beyond it is a typo that would make every time 0 or astronomically large.
  constexpr double kMaxFigure = 1e12;
  for (const Positive& f : positives) {
    if (!(f.value > 0 && f.value <= kMaxFigure)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be finite, > 0 and <= 1e12"));
    }
  }
  struct NonNegative { const char* field; double value; };
  const NonNegative non_negatives[] = {
      {"neuronlink_latency_ns", p.neuronlink_latency_ns()},
      {"collective_step_latency_ns", p.collective_step_latency_ns()},
      {"collective_fixed_ns", p.collective_fixed_ns()},
      {"collective_in_graph_fixed_ns", p.collective_in_graph_fixed_ns()},
      {"interinstance_latency_ns", p.interinstance_latency_ns()},
      {"dma_fixed_ns", p.dma_fixed_ns()},
      {"core_link_latency_ns", p.core_link_latency_ns()},
      {"pe_min_cycles", static_cast<double>(p.pe_min_cycles())},
      {"access_overhead_cycles", static_cast<double>(p.access_overhead_cycles())},
      {"pe_mx_speedup", p.pe_mx_speedup()},
      {"host_ms_per_step", p.host_ms_per_step()},
  };
  for (const NonNegative& f : non_negatives) {
    if (!(f.value >= 0 && f.value <= kMaxFigure)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be finite, >= 0 and <= 1e12"));
    }
  }
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
  if (p.mesh_max_bytes_per_rank() > p.rdh_max_bytes_per_rank()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: mesh_max_bytes_per_rank (",
                 p.mesh_max_bytes_per_rank(), ") must not exceed rdh_max_bytes_per_rank (",
                 p.rdh_max_bytes_per_rank(), ")"));
  }
  if (p.torus_x() * p.torus_y() != p.chips_per_instance()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile: torus_x x torus_y (", p.torus_x(), " x ",
                 p.torus_y(), ") must equal chips_per_instance (", p.chips_per_instance(), ")"));
  }
  for (int i = 0; i < p.collective_tuning_size(); ++i) {
    const proto::CollectiveTuning& t = p.collective_tuning(i);
    const std::string where = StrCat(source_name, ": hardware profile: collective_tuning[", i, "]");
    static const char* const kOps[] = {"", "all_gather", "reduce_scatter", "all_reduce", "all_to_all"};
    if (std::find(std::begin(kOps), std::end(kOps), t.op()) == std::end(kOps)) {
      Raise(ErrorCode::kBadConfig, StrCat(where, ".op: '", t.op(), "' is not one of all_gather, ",
                                          "reduce_scatter, all_reduce, all_to_all (or empty)"));
    }
    // The rows of collectives/algorithms.cc (a tuning row with another name would never apply).
    static const char* const kAlgorithms[] = {"",    "ring",      "mesh",         "mesh_1step",
                                              "rdh", "kangaring", "hierarchical", "pairwise"};
    if (std::find(std::begin(kAlgorithms), std::end(kAlgorithms), t.algorithm()) ==
        std::end(kAlgorithms)) {
      Raise(ErrorCode::kBadConfig,
            StrCat(where, ".algorithm: '", t.algorithm(), "' is not one of ring, mesh, mesh_1step, ",
                   "rdh, kangaring, hierarchical, pairwise (or empty)"));
    }
    if ((t.has_step_latency_ns() && !(t.step_latency_ns() >= 0 && std::isfinite(t.step_latency_ns()))) ||
        (t.has_fixed_ns() && !(t.fixed_ns() >= 0 && std::isfinite(t.fixed_ns()))) ||
        (t.has_link_gbps() && !(t.link_gbps() > 0 && std::isfinite(t.link_gbps())))) {
      Raise(ErrorCode::kBadConfig,
            StrCat(where, ": step_latency_ns (", t.step_latency_ns(), ") and fixed_ns (",
                   t.fixed_ns(), ") must be finite and >= 0, link_gbps (", t.link_gbps(),
                   ") finite and > 0"));
    }
  }
  if (p.partitions() == 0 || p.partitions() > 128 || p.pe_rows() != p.partitions()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source_name, ": hardware profile field 'partitions' is ", p.partitions(),
                 "; it must be in [1, 128] and equal pe_rows (", p.pe_rows(), ")"));
  }
  if (p.dma_queues() > 16) {
    Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field 'dma_queues' is ",
                                        p.dma_queues(), "; the simulator models at most 16"));
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
