#include "runtime/hardware_profile.h"
#include "runtime/config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>
#include <map>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <fstream>

#include <google/protobuf/text_format.h>

#include "runtime/error.h"

namespace nkisim {
namespace {

using ::testing::HasSubstr;

TEST(HardwareProfileTest, Trn2DefaultsMatchThePublicFigures) {
  const HardwareProfile& p = Trn2Profile();
  EXPECT_EQ(p.name(), "trn2");
  EXPECT_DOUBLE_EQ(p.pe_freq_ghz(), 2.4);
  EXPECT_EQ(p.sbuf_bytes_per_partition(), 224u * 1024);
  EXPECT_EQ(p.psum_bytes_per_partition() / p.psum_banks(), 2048u);
  EXPECT_NEAR(PeakBf16Tflops(p), 78.64, 0.01);  // 2 * 128 * 128 * 2.4 GHz
}

// configs/hardware/trn1.textproto loads (and so passes ValidateHardwareProfile) and its per-core
// figures give back the chip and instance totals of the public Trainium tables (trainium.rst,
// trn1-arch.rst): 190 BF16 TFLOPS, 32 GiB at 820 GB/s, 1 TB/s of DMA per chip; 16 chips, 32 cores.
TEST(HardwareProfileTest, Trn1ProfileLoadsAndAddsUpToThePublishedChip) {
  const HardwareProfile p = LoadHardwareProfile(std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn1.textproto");
  EXPECT_EQ(p.name(), "trn1");
  EXPECT_EQ(p.physical_cores_per_chip(), 2u);
  EXPECT_EQ(p.chips_per_instance() * p.physical_cores_per_chip(), 32u);
  EXPECT_EQ(p.torus_x() * p.torus_y(), p.chips_per_instance());
  EXPECT_NEAR(PeakBf16Tflops(p) * p.physical_cores_per_chip(), 190, 190 * 0.04);  // 183.5: 2.8 GHz x 128 x 128
  EXPECT_DOUBLE_EQ(p.hbm_gbps_per_core() * p.physical_cores_per_chip(), 820);
  EXPECT_EQ(p.hbm_bytes_per_chip(), 32ull << 30);
  EXPECT_EQ(p.dma_engines() * p.physical_cores_per_chip(), 32u);  // N1: 32 DMA engines a chip
  EXPECT_DOUBLE_EQ(p.dma_engine_gbps(), 17);                        // I, J: 17 B/ns an engine
  EXPECT_EQ(p.sbuf_bytes_per_partition() * p.partitions() * p.physical_cores_per_chip(), 48ull << 20);
  EXPECT_DOUBLE_EQ(p.neuronlink_gbps_per_chip(), 384);
  EXPECT_LT(p.vector_elems_per_cycle_16bit(), Trn2Profile().vector_elems_per_cycle_16bit());
}

TEST(HardwareProfileTest, ShippedTextFileEqualsBuiltInDefaults) {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn2.textproto");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  // Parsed into an empty message (not merged over the defaults), so every field must be there.
  HardwareProfile from_file;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &from_file));
  EXPECT_EQ(from_file.SerializeAsString(), Trn2Profile().SerializeAsString());
}

TEST(HardwareProfileTest, FileOverridesOnlyWhatItNames) {
  HardwareProfile p = ParseHardwareProfile("pe_freq_ghz: 3.0\nname: 'fast'", "fast.textproto");
  EXPECT_DOUBLE_EQ(p.pe_freq_ghz(), 3.0);
  EXPECT_EQ(p.name(), "fast");
  EXPECT_EQ(p.dma_queues(), 16u);
}

TEST(HardwareProfileTest, UnknownFieldReportsLineAndColumn) {
  try {
    ParseHardwareProfile("pe_freq_ghz: 3.0\n  pe_frequency: 2", "bad.textproto");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), HasSubstr("bad.textproto:2:"));
    EXPECT_THAT(e.what(), HasSubstr("pe_frequency"));
  }
}

TEST(HardwareProfileTest, OutOfRangeValuesNameTheField) {
  try {
    ParseHardwareProfile("vector_freq_ghz: 0", "zero.textproto");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'vector_freq_ghz' is 0"));
  }
  EXPECT_THROW(ParseHardwareProfile("partitions: 256\npe_rows: 256", "p"), Error);
  EXPECT_THROW(ParseHardwareProfile("dma_queues: 32", "q"), Error);
  EXPECT_THROW(ParseHardwareProfile("psum_banks: 16", "banks"), Error);  // 1 KiB banks < 512 fp32
}

TEST(HardwareProfileTest, ZeroNanAndInconsistentTopologyAndCollectiveFieldsAreRefused) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"chips_per_instance: 0", "'chips_per_instance' is 0; it must be in [1, 4096]"},
      {"torus_x: 0", "'torus_x' is 0"},
      {"pe_max_moving_free: 0", "'pe_max_moving_free' is 0"},
      {"neuronlink_gbps_per_chip: nan", "'neuronlink_gbps_per_chip' is nan"},
      {"dma_engine_raw_gbps: inf", "'dma_engine_raw_gbps' is inf"},
      {"collective_dma_gbps_per_rank: 110",
       "field 'collective_dma_gbps_per_rank' was removed with the fitted collective DMA rate; use the DMA engines"},
      {"collective_in_graph_fixed_ns: 969", "use collective_barrier_ns + dma_latency_ns"},
      {"collective_barrier_ns: nan", "'collective_barrier_ns' is nan"},
      {"collective_barrier_ns: -1", "'collective_barrier_ns' is -1; it must be in [0, 1e12]"},
      {"collective_step_latency_ns: -1", "'collective_step_latency_ns' is -1; it must be in [0, 1e12]"},
      {"torus_x: 2", "torus_x x torus_y (2 x 4) must equal chips_per_instance (16)"},
      {"mesh_max_bytes_per_rank: 1000000000", "mesh_max_bytes_per_rank (1000000000) must not exceed"},
      {"intrachip_gbps: 0", "'intrachip_gbps' is 0"},
      {"interinstance_latency_ns: nan", "'interinstance_latency_ns' is nan"},
      {"collective_tuning { op: 'allreduce' }", "collective_tuning[1].op: 'allreduce' is not one of"},
      {"collective_tuning { op: 'all_gather' link_gbps: 0 }", "collective_tuning[1]"},
      {"name: 'trn2-\\351'", "p.textproto: name: 'trn2-?' is not valid UTF-8"},
      {"collective_tuning { op: 'all_gather' source: '\\377x' }",
       "p.textproto: collective_tuning[0].source: '?x' is not valid UTF-8"},
      // The tuning rows have the top-level figures' bounds, and a row must be able to apply.
      {"collective_tuning { op: 'all_gather' fixed_ns: 1e300 }",
       "collective_tuning[1].fixed_ns: 1e+300 must be in [0, 1e12]"},
      {"collective_tuning { op: 'all_gather' step_latency_ns: 1e13 }",
       "collective_tuning[1].step_latency_ns: 1e+13 must be in [0, 1e12]"},
      {"collective_tuning { op: 'all_gather' link_gbps: 1e-300 }",
       "collective_tuning[1].link_gbps: 1e-300 must be in [1e-6, 1e12]"},
      {"collective_tuning { op: 'all_to_all' algorithm: 'ring' fixed_ns: 1 }",
       "collective_tuning[1]: algorithm 'ring' does not implement all_to_all, so the row could "
       "never apply (ring serves all_gather, reduce_scatter, all_reduce)"},
      {"collective_tuning { op: 'all_gather' algorithm: 'pairwise' fixed_ns: 1 }",
       "algorithm 'pairwise' does not implement all_gather"},
      {"collective_tuning { op: 'reduce_scatter' algorithm: 'mesh_1step' fixed_ns: 1 }",
       "algorithm 'mesh_1step' does not implement reduce_scatter"},
      {"neuronlink_gbps_per_chip: 1e-300", "'neuronlink_gbps_per_chip' is 1e-300; it must be in [1e-6, 1e12]"},
      {"physical_cores_per_chip: 4294967295", "'physical_cores_per_chip' is 4294967295; it must be in [1, 256]"},
      {"torus_x: 65536 torus_y: 65536 chips_per_instance: 0", "'chips_per_instance' is 0"},
  };
  for (const auto& c : cases) {
    try {
      ParseHardwareProfile(c.text, "p.textproto");
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.text;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.text << ": " << e.what();
    }
  }
}

// Every numeric field of the profile, by reflection, with 0, -1 (signed fields), NaN, infinity
// and 1e300 (floating fields): each is refused as a bad config naming the field, except 0 for
// the fields where it means something (listed with why). A new field is covered the day it is
// added, and must be given a range or a place in that list.
TEST(HardwareProfileTest, EveryNumericFieldIsRangeChecked) {
  const std::map<std::string, const char*> zero_means_something = {
      {"pe_min_cycles", "no minimum matmul length"},
      {"pe_mx_speedup", "no MX path (trn2)"},
      {"host_ms_per_step", "no exposed host time a decode step (async mode)"},
      {"access_overhead_cycles", "no per-instruction access bubble"},
      {"dma_issue_ns", "no serial issue stage a queue"},
      {"engine_min_ii_cycles", "no floor on a Vector/Scalar instruction"},
      {"gpsimd_start_cycles", "no GpSimd start-up"},
      {"engine_dependent_overhead_cycles", "no overhead for a dependent instruction"},
      {"pe_throttle_start_fraction", "no PE throttling"},
      {"pe_throttle_ramp_ns", "no PE throttling"},
      {"pe_throttle_min_utilization", "the PE never cools after its first ramp"},
      {"core_link_latency_ns", "no latency between the two cores"},
      {"neuronlink_latency_ns", "no per-hop latency"},
      {"collective_step_latency_ns", "no per-step latency"},
      {"collective_fixed_ns", "no host launch cost"},
      {"collective_barrier_ns", "no device barrier per collective"},
      {"interinstance_latency_ns", "no EFA latency"},
      {"mesh_max_bytes_per_rank", "Mesh never chosen"},
      {"rdh_max_bytes_per_rank", "RDH never chosen (needs mesh_max_bytes_per_rank 0 too)"},
  };
  const google::protobuf::Descriptor* d = proto::HardwareProfile::descriptor();
  int cases = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING ||
        f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
        f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      continue;
    }
    const bool floating = f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE ||
                          f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_FLOAT;
    const bool is_signed = floating ||
                           f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT32 ||
                           f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64;
    std::vector<std::string> values = {"0"};
    if (is_signed) values.push_back("-1");
    if (floating) values.insert(values.end(), {"nan", "inf", "1e300", "1e13"});
    // A positive figure has a floor too (1e-300 GB/s would make times of 300 digits).
    if (floating && !zero_means_something.count(f->name())) values.push_back("1e-300");
    // Every integer has a bound below its type's maximum, derived from what a chip could have.
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32) values.push_back("4294967295");
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
      values.push_back("18446744073709551615");
    }
    for (const std::string& v : values) {
      if (v == "0" && zero_means_something.count(f->name())) {
        if (f->name() == "rdh_max_bytes_per_rank") continue;  // checked with its pair below
        EXPECT_NO_THROW(ParseHardwareProfile(f->name() + ": 0", "p")) << f->name();
        continue;
      }
      ++cases;
      const std::string text = f->name() + ": " + v;
      try {
        ParseHardwareProfile(text, "p.textproto");
        ADD_FAILURE() << text << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << text;
        EXPECT_THAT(e.what(), HasSubstr(f->name())) << text;
        EXPECT_THAT(e.what(), HasSubstr("p.textproto")) << text;
      }
    }
  }
  EXPECT_NO_THROW(ParseHardwareProfile("mesh_max_bytes_per_rank: 0 rdh_max_bytes_per_rank: 0", "p"));
  EXPECT_GT(cases, 90);  // the reflection found the fields
}

TEST(HardwareProfileTest, MissingFileIsABadConfig) {
  try {
    LoadHardwareProfile("/nonexistent/profile.textproto");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/profile.textproto"));
  }
}

// Every non-repeated scalar of the profile given twice is refused, whatever its first value:
// "f: 0 f: 1" included, which proto3 (no presence on a scalar) would let pass with the last
// value winning. The same field once, at zero, still overrides the trn2 default.
TEST(ConfigFileTest, ScalarGivenTwiceIsRefusedEvenWhenTheFirstIsZero) {
  namespace pb = google::protobuf;
  const pb::Descriptor* d = HardwareProfile::descriptor();
  int checked = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string zero = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING ? "\"\""
                             : f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL ? "false"
                             : f->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM
                                 ? f->enum_type()->value(0)->name()
                                 : "0";
    const std::string text = f->name() + ": " + zero + "\n" + f->name() + ": " + zero;
    HardwareProfile p;
    try {
      ParseConfigText(text, "twice.textproto", &p);
      ADD_FAILURE() << text << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_THAT(e.what(), HasSubstr("twice.textproto:2:"));
      EXPECT_THAT(e.what(), HasSubstr("\"" + f->name() + "\" is specified multiple times"));
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
  // Nested: a field of a repeated message's entry.
  HardwareProfile p;
  EXPECT_THROW(ParseConfigText("collective_tuning { op: \"\" op: \"all_reduce\" }", "t", &p), Error);
  // Once, at zero, over a non-zero default: taken.
  ASSERT_NE(Trn2Profile().mesh_max_bytes_per_rank(), 0u);
  EXPECT_EQ(ParseHardwareProfile("mesh_max_bytes_per_rank: 0", "p").mesh_max_bytes_per_rank(), 0u);
}

// Config readers take regular files of bounded size only, and say which rule a path breaks.
TEST(ConfigFileTest, OnlyRegularFilesOfBoundedSizeAreRead) {
  const std::string fifo = ::testing::TempDir() + "nkisim_config_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = ::testing::TempDir() + "nkisim_config_big.textproto";
  {
    std::ofstream out(big);
    out << std::string(static_cast<size_t>(kMaxConfigFileBytes) + 1, ' ');
  }
  const struct {
    std::string path;
    const char* message;
  } cases[] = {
      {fifo, "is a FIFO; it must be a regular file"},
      {"/dev/zero", "is a device; it must be a regular file"},
      {::testing::TempDir(), "is a directory; it must be a regular file"},
      {big, "bytes; at most 67108864 are read"},
      {"/nonexistent/p.textproto", "cannot open hardware profile: No such file or directory"},
  };
  for (const auto& c : cases) {
    try {
      LoadHardwareProfile(c.path);
      ADD_FAILURE() << c.path << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.path;
      EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.path;
    }
  }
  ::unlink(fifo.c_str());
  ::unlink(big.c_str());
}

}  // namespace
}  // namespace nkisim
