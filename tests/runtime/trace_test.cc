#include "runtime/trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace nkisim {
namespace {

Timeline TwoInstructions(bool keep_records = true) {
  Timeline t;
  t.set_keep_records(keep_records);
  t.Occupy(Engine::kPE, 0, 238.5);
  t.Record("nc_matmul", Engine::kPE, 0, 238.5, 1000, 16777216, "dst[128,512]fp32");
  t.Occupy(DmaQueue(3), 100, 4900);
  t.Record("dma_copy", DmaQueue(3), 100, 4900, 131072, 0, "src[128,512]bf16");
  return t;
}

TEST(TraceTest, JsonParsesBackWithMicrosecondTimestamps) {
  ChromeTrace trace;
  trace.AddProcess(7, "core 7", TwoInstructions());
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  ASSERT_TRUE(j.contains("traceEvents"));
  int complete = 0;
  bool named_process = false, named_dma_thread = false;
  for (const auto& e : j["traceEvents"]) {
    EXPECT_EQ(e["pid"], 7);
    if (e["ph"] == "X") {
      ++complete;
      if (e["name"] == "dma_copy") {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.1);   // 100 ns = 0.1 us
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 4.8);
        EXPECT_EQ(e["tid"], EngineIndex(DmaQueue(3)));
        EXPECT_EQ(e["args"]["bytes"], 131072);
        EXPECT_EQ(e["args"]["operands"], "src[128,512]bf16");
      } else {
        EXPECT_EQ(e["name"], "nc_matmul");
        EXPECT_EQ(e["args"]["flops"], 16777216);
        EXPECT_DOUBLE_EQ(e["args"]["end_ns"].get<double>(), 238.5);
      }
    } else if (e["name"] == "process_name") {
      named_process = e["args"]["name"] == "core 7";
    } else if (e["name"] == "thread_name" && e["tid"] == EngineIndex(DmaQueue(3))) {
      named_dma_thread = e["args"]["name"] == "DMA queue 3";
    }
  }
  EXPECT_EQ(complete, 2);
  EXPECT_TRUE(named_process);
  EXPECT_TRUE(named_dma_thread);
}

// The writer streams the document; it must hold exactly what a DOM of the same events holds:
// escaped strings (quotes, backslashes, control and non-ASCII characters), integral and
// non-terminating doubles, a non-finite time (null, as nlohmann writes it), 64-bit counts.
TEST(TraceTest, StreamedJsonHoldsWhatADomOfTheEventsHolds) {
  ChromeTrace trace;
  trace.NameProcess(3, "rank \"3\" \\ \u00e9");
  trace.NameThread(3, 65, "core 2\tPE");
  const double third = 1.0 / 3.0;
  trace.AddEvent({"q\"uote\n", "DMA\x01", 3, 65, 2000.0, 1e17, int64_t{1} << 40, -1, "x[1]"});
  trace.AddEvent({"thirds", "PE", 3, 65, third, 7 * third, 0, 0, ""});
  trace.AddEvent({"inf", "PE", 3, 1, 5.0, std::numeric_limits<double>::infinity(), 0, 0, "y"});
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  nlohmann::json expected = nlohmann::json::array();
  expected.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 3}, {"tid", 0},
                      {"args", {{"name", "rank \"3\" \\ \u00e9"}}}});
  expected.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", 3}, {"tid", 0},
                      {"args", {{"sort_index", 3}}}});
  expected.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 3}, {"tid", 65},
                      {"args", {{"name", "core 2\tPE"}}}});
  expected.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 3}, {"tid", 65},
                      {"args", {{"sort_index", 65}}}});
  const auto event = [](const char* name, const char* cat, int tid, double start, double end,
                        int64_t bytes, int64_t flops, const char* operands) {
    return nlohmann::json{{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", start / 1000.0},
                          {"dur", (end - start) / 1000.0}, {"pid", 3}, {"tid", tid},
                          {"args", {{"start_ns", start}, {"end_ns", end}, {"operands", operands},
                                    {"bytes", bytes}, {"flops", flops}}}};
  };
  expected.push_back(event("q\"uote\n", "DMA\x01", 65, 2000.0, 1e17, int64_t{1} << 40, -1, "x[1]"));
  expected.push_back(event("thirds", "PE", 65, third, 7 * third, 0, 0, ""));
  expected.push_back(event("inf", "PE", 1, 5.0, std::numeric_limits<double>::infinity(), 0, 0, "y"));
  // A DOM writes NaN and infinity as null; parsed back, so does the stream.
  expected = nlohmann::json::parse(nlohmann::json(expected).dump());
  EXPECT_EQ(j["traceEvents"], expected);
  EXPECT_TRUE(j["traceEvents"][4]["ts"].is_number_float());  // 2000 ns = 2.0 us, not 2
  EXPECT_EQ(j["traceEvents"][5]["args"]["start_ns"].get<double>(), third);  // exact round trip
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_EQ(j["otherData"]["generator"], "nkisim");
}

TEST(TraceTest, WritesFileAndRefusesBadPath) {
  ChromeTrace trace;
  trace.AddProcess(0, "core 0", TwoInstructions());
  const std::string path =
      (std::filesystem::temp_directory_path() / "nkisim_trace_test.json").string();
  trace.WriteFile(path);
  std::ifstream in(path);
  // 2 X events, process name and sort index, name and sort index of 2 threads.
  EXPECT_EQ(nlohmann::json::parse(in)["traceEvents"].size(), 2u + 2 + 4);
  std::remove(path.c_str());
  EXPECT_THROW(trace.WriteFile("/nonexistent-dir/t.json"), Error);
}

TEST(TimelineTest, SummaryCountsBusyTimeFlopsAndBytes) {
  const Timeline t = TwoInstructions();
  const CoreSummary s = t.Summarize(0, Trn2Profile());
  EXPECT_DOUBLE_EQ(s.sim_time_ns, 4900);
  EXPECT_EQ(s.instructions, 2);
  EXPECT_EQ(s.flops, 16777216);
  EXPECT_EQ(s.dma_bytes, 131072);
  EXPECT_NEAR(s.busy_percent(Engine::kPE), 100.0 * 238.5 / 4900, 1e-9);
  EXPECT_NEAR(s.achieved_tflops, 16777216 / 4900.0 / 1000.0, 1e-12);
  const std::string text = FormatSummary(s);
  EXPECT_NE(text.find("simulated time 4900.0 ns"), std::string::npos);
  EXPECT_NE(text.find("TFLOP/s"), std::string::npos);
  EXPECT_NE(text.find("busy %"), std::string::npos);
}

TEST(TimelineTest, WithoutKeptRecordsTheSummaryIsTheSame) {
  const Timeline kept = TwoInstructions(true), totals = TwoInstructions(false);
  EXPECT_EQ(kept.records().size(), 2u);
  EXPECT_TRUE(totals.records().empty());
  const CoreSummary a = kept.Summarize(0, Trn2Profile()), b = totals.Summarize(0, Trn2Profile());
  EXPECT_DOUBLE_EQ(b.sim_time_ns, a.sim_time_ns);
  EXPECT_EQ(b.instructions, a.instructions);
  EXPECT_EQ(b.flops, a.flops);
  EXPECT_EQ(b.dma_bytes, a.dma_bytes);
  EXPECT_EQ(FormatSummary(b), FormatSummary(a));
}

TEST(TraceTest, CoresOfOneProcessGetTheirOwnEngineThreads) {
  ChromeTrace trace;
  trace.NameProcess(3, "rank 3");
  trace.AddCore(3, 1, TwoInstructions().records());
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  bool named = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "nc_matmul") {
      EXPECT_EQ(e["tid"], ChromeTrace::CoreEngineTid(1, Engine::kPE));
    }
    if (e["name"] == "thread_name" && e["tid"] == ChromeTrace::CoreEngineTid(1, DmaQueue(3))) {
      named = e["args"]["name"] == "core 1 DMA queue 3";
    }
  }
  EXPECT_TRUE(named);
  EXPECT_NE(ChromeTrace::CoreEngineTid(0, Engine::kPE), ChromeTrace::CoreEngineTid(1, Engine::kPE));
}

}  // namespace
}  // namespace nkisim
