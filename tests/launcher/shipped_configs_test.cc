// The shipped model configs as a user runs them (label slow: up to 128 ranks on 2 cores): every
// phase of every plan passes on every rank, and the plans of a file compute the same layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/run_command.h"

namespace {

class ShippedConfigTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShippedConfigTest, EveryPlanPassesAndThePlansAgree) {
  const std::string name = GetParam();
  const std::string report = (std::filesystem::temp_directory_path() / ("nkisim_" + name + ".json")).string();
  std::filesystem::remove(report);
  const auto start = std::chrono::steady_clock::now();
  const nkisim::testing::CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " run " + NKISIM_SOURCE_DIR + "/configs/" + name +
          ".textproto --report " + report + " --trace ''",
      590);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["pass"].get<bool>());
  for (const auto& s : j["scenarios"]) EXPECT_TRUE(s["pass"].get<bool>()) << s["name"];
  for (const auto& a : j["agreement"]) EXPECT_TRUE(a["pass"].get<bool>()) << a;
  EXPECT_THAT(r.output, ::testing::HasSubstr("result: PASS"));
  std::cout << name << ": " << wall << " s wall, peak RSS " << j["peakRssMib"] << " MiB per rank\n";
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfigTest,
                         ::testing::Values("llama3_8b_tp8_decode", "llama3_70b_tp32_lnc1_decode",
                                           "llama3_70b_tp64_prefill_s2048",
                                           "tp128_two_instances_decode",
                                           "llama3_70b_tp64_2layers_decode"));

}  // namespace
