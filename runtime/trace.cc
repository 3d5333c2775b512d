#include "runtime/trace.h"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace nkisim {

void ChromeTrace::AddProcess(int pid, const std::string& name, const Timeline& timeline) {
  processes_.push_back({pid, name, timeline.records()});
}

std::string ChromeTrace::ToJson() const {
  using nlohmann::json;
  json events = json::array();
  for (const Process& p : processes_) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", p.pid}, {"tid", 0},
                      {"args", {{"name", p.name}}}});
    std::set<int> engines;
    for (const InstructionRecord& r : p.records) {
      engines.insert(EngineIndex(r.engine));
      events.push_back({{"name", r.name},
                        {"cat", EngineName(r.engine)},
                        {"ph", "X"},
                        {"ts", r.start_ns / 1000.0},
                        {"dur", (r.end_ns - r.start_ns) / 1000.0},
                        {"pid", p.pid},
                        {"tid", EngineIndex(r.engine)},
                        {"args",
                         {{"start_ns", r.start_ns}, {"end_ns", r.end_ns}, {"operands", r.shapes.data()},
                          {"bytes", r.bytes}, {"flops", r.flops}}}});
    }
    for (int e : engines) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", p.pid}, {"tid", e},
                        {"args", {{"name", EngineName(static_cast<Engine>(e))}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", p.pid}, {"tid", e},
                        {"args", {{"sort_index", e}}}});
    }
  }
  json trace = {{"traceEvents", events},
                {"displayTimeUnit", "ns"},
                {"otherData", {{"generator", "nkisim"}, {"clock", "simulated time; ts and dur in us"}}}};
  return trace.dump();
}

void ChromeTrace::WriteFile(const std::string& path) const {
  std::ofstream out(path);
  if (!out) Raise(ErrorCode::kBadConfig, StrCat("trace file '", path, "': cannot open for writing"));
  out << ToJson();
  if (!out) Raise(ErrorCode::kBadConfig, StrCat("trace file '", path, "': write failed"));
}

}  // namespace nkisim
