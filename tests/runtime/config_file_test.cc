// The one config reader (runtime/config_file.h) on JSON that protobuf's own JSON parser takes too
// loosely, and on strings that are not UTF-8: each refused with the field path and the rule.
#include "runtime/config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "proto/scenario.pb.h"
#include "proto/topology.pb.h"
#include "runtime/error.h"

namespace nkisim {
namespace {

using ::testing::HasSubstr;

template <typename Message>
std::string Refusal(const std::string& text) {
  Message m;
  try {
    ParseConfigText(text, "c.json", &m);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    return e.what();
  }
  return "(accepted)";
}

std::string Nested(int depth, const std::string& inner) {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

struct JsonCase {
  const char* name;
  std::string text;
  std::string message;
};

// One row per way the mapping can be broken: wrong JSON type, nesting, duplicates, nulls.
TEST(ConfigFileTest, JsonOutsideTheProtobufMappingIsRefusedWithTheFieldPath) {
  const std::string groups = R"("replica_groups": [{"name": "a", )";
  const JsonCase cases[] = {
      {"list given as an object", R"({"world_size": 8, "replica_groups": {"name": "tp"}})",
       "c.json: JSON: replica_groups: expected a list (an array), got an object"},
      {"100,000 nested arrays", "{\"replica_groups\": " + Nested(100000, "") + "}",
       "c.json: JSON: replica_groups[0]: expected an object (message ReplicaGroupSet), got an "
       "array (lists do not nest)"},
      {"nested rank lists",
       "{" + groups + R"("explicit": {"groups": [{"ranks": [[0, 1]]}]}}]})",
       "JSON: replica_groups[0].explicit.groups[0].ranks[0]: expected a number (or a string "
       "holding one), got an array (lists do not nest)"},
      {"key twice", R"({"world_size": 8, "world_size": 4})", "JSON: world_size: given twice"},
      {"key twice by both names", R"({"world_size": 8, "worldSize": 4})",
       "JSON: world_size: given twice"},
      {"nested key twice", "{" + groups + R"("name": "b"}]})",
       "JSON: replica_groups[0].name: given twice"},
      {"two members of a oneof",
       "{" + groups + R"("contiguous": {"group_size": 8}, "strided": {"group_size": 8}}]})",
       "JSON: replica_groups[0].strided: set together with contiguous; at most one field of groups"},
      {"number given a boolean", R"({"world_size": true})",
       "JSON: world_size: expected a number (or a string holding one), got a boolean"},
      {"number given a list", R"({"lnc": [2]})", "JSON: lnc: expected a number"},
      {"string given a number", R"({"replica_groups": [{"name": 5}]})",
       "JSON: replica_groups[0].name: expected a string, got a number"},
      {"message given a string", R"({"batch_shard": "gqa"})",
       "JSON: batch_shard: expected an object (message BatchShard), got a string"},
      {"null in a list", R"({"replica_groups": [null]})",
       "JSON: replica_groups[0]: null is not allowed as an element"},
      {"unknown field, nested", "{" + groups + R"("bogus": 1}]})",
       "JSON: replica_groups[0]: unknown field \"bogus\" (message ReplicaGroupSet)"},
      {"syntax", R"({"world_size": 8,)", "c.json: JSON: parse error at line 1, column 18: syntax error"},
      {"trailing text", R"({"world_size": 8} {)",
       "c.json: JSON: parse error at line 1, column 19: syntax error while parsing value - "
       "unexpected '{'; expected end of input"},
  };
  for (const JsonCase& c : cases) {
    EXPECT_THAT(Refusal<proto::Topology>(c.text), HasSubstr(c.message)) << c.name;
  }
}

TEST(ConfigFileTest, JsonMapKeysAndEnumsFollowTheMapping) {
  EXPECT_THAT(Refusal<proto::Scenario>(
                  R"({"tolerances": {"qkv": {"atol": 1}, "qkv": {"atol": 2}}})"),
              HasSubstr("JSON: tolerances[\"qkv\"]: map key given twice"));
  EXPECT_THAT(Refusal<proto::Scenario>(R"({"tolerances": [{"atol": 1}]})"),
              HasSubstr("JSON: tolerances: expected an object (a map), got an array"));
  EXPECT_THAT(Refusal<proto::Scenario>(R"({"fault": {"kind": true}})"),
              HasSubstr("JSON: fault.kind: expected a name of enum Kind (a string) or its number"));
}

// What the mapping allows stays allowed: both names of a field, numbers as strings, null for a
// default, enum names and numbers.
TEST(ConfigFileTest, JsonOfTheMappingIsAccepted) {
  proto::Topology t;
  ParseConfigText(
      R"({"worldSize": "8", "lnc": 2, "placement": null, "replica_groups": [{"name": "tp",
          "contiguous": {"groupSize": 8}}], "batchShard": {"replica_group": "tp", "batch": 8}})",
      "ok.json", &t);
  EXPECT_EQ(t.world_size(), 8u);
  EXPECT_EQ(t.replica_groups(0).contiguous().group_size(), 8u);
  EXPECT_EQ(t.batch_shard().batch(), 8u);
  proto::Scenario s;
  ParseConfigText(R"({"fault": {"kind": "THROW"}, "tolerances": {"qkv": {"atol": 0.5}}})", "ok.json",
                  &s);
  EXPECT_EQ(s.fault().kind(), proto::Fault::THROW);
  EXPECT_EQ(s.tolerances().at("qkv").atol(), 0.5);
}

// 100,000 nested arrays are refused at the first one, in a bounded time.
TEST(ConfigFileTest, DeeplyNestedJsonIsRefusedQuickly) {
  const std::string text = "{\"replica_groups\": " + Nested(1000000, "1") + "}";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Refusal<proto::Topology>(text), HasSubstr("lists do not nest"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

// Text format takes any bytes in a string; a config's strings must be UTF-8, at any depth.
TEST(ConfigFileTest, StringsThatAreNotUtf8AreRefusedWithTheirPath) {
  EXPECT_THAT(Refusal<proto::Topology>("world_size: 8 replica_groups { name: \"tp\\351\" }"),
              HasSubstr("c.json: replica_groups[0].name: 'tp?' is not valid UTF-8"));
  EXPECT_THAT(Refusal<proto::Scenario>("plans { name: \"a\" } plans { name: \"\\377b\" }"),
              HasSubstr("plans[1].name: '?b' is not valid UTF-8"));
  EXPECT_THAT(Refusal<proto::Scenario>("tolerances { key: \"q\\377\" value { atol: 1 } }"),
              HasSubstr("tolerances[0].key: 'q?' is not valid UTF-8"));
}

}  // namespace
}  // namespace nkisim
