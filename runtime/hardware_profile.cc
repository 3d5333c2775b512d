#include "runtime/hardware_profile.h"

#include "runtime/config_file.h"
#include "runtime/error.h"

namespace nkisim {
namespace {

HardwareProfile MakeTrn2() {
  HardwareProfile p;
  p.set_name("trn2");
  p.set_pe_freq_ghz(2.4);
  p.set_pe_rows(128);
  p.set_pe_cols(128);
  p.set_pe_max_moving_free(512);
  p.set_pe_min_cycles(64);
  p.set_pe_fp32_cycle_factor(4.0);
  p.set_vector_freq_ghz(0.96);
  p.set_vector_elems_per_cycle_16bit(512);
  p.set_vector_elems_per_cycle_other(256);
  p.set_scalar_freq_ghz(1.2);
  p.set_scalar_elems_per_cycle(128);
  p.set_gpsimd_freq_ghz(1.2);
  p.set_gpsimd_elems_per_cycle(128);
  p.set_access_overhead_cycles(60);
  p.set_partitions(128);
  p.set_sbuf_bytes_per_partition(224 * 1024);
  p.set_psum_bytes_per_partition(16 * 1024);
  p.set_psum_banks(8);
  p.set_hbm_gbps_per_core(2900.0 / 8);   // 2.9 TB/s per chip over 8 physical cores
  p.set_dma_queues(16);
  p.set_dma_queue_gbps(3500.0 / 128);    // 3.5 TB/s per chip over 128 queues
  p.set_dma_fixed_ns(600);
  p.set_core_link_gbps(2900.0 / 8);      // a shared-HBM copy runs at the core's HBM share
  p.set_core_link_latency_ns(600);       // one DMA's fixed cost
  p.set_physical_cores_per_chip(8);
  p.set_chips_per_instance(16);
  p.set_torus_x(4);
  p.set_torus_y(4);
  p.set_neuronlink_gbps_per_chip(1024);
  p.set_interinstance_gbps_per_chip(256);
  p.set_neuronlink_latency_ns(2000);     // not published; a typical collective step latency
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
      {"dma_queues", static_cast<double>(p.dma_queues())},
      {"core_link_gbps", p.core_link_gbps()}, {"psum_banks", static_cast<double>(p.psum_banks())},
      {"sbuf_bytes_per_partition", static_cast<double>(p.sbuf_bytes_per_partition())},
      {"psum_bytes_per_partition", static_cast<double>(p.psum_bytes_per_partition())},
      {"neuronlink_gbps_per_chip", p.neuronlink_gbps_per_chip()},
  };
  for (const Positive& f : positives) {
    if (!(f.value > 0)) {
      Raise(ErrorCode::kBadConfig, StrCat(source_name, ": hardware profile field '", f.field,
                                          "' is ", f.value, "; it must be > 0"));
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

}  // namespace nkisim
