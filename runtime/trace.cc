#include "runtime/trace.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim {

void ChromeTrace::NameProcess(int pid, const std::string& name) { process_names_[pid] = name; }

void ChromeTrace::NameThread(int pid, int tid, const std::string& name) {
  thread_names_[{pid, tid}] = name;
}

void ChromeTrace::AddEvent(Event event) { events_.push_back(std::move(event)); }

void ChromeTrace::AddProcess(int pid, const std::string& name, const Timeline& timeline) {
  NameProcess(pid, name);
  for (const InstructionRecord& r : timeline.records()) {
    const int tid = EngineIndex(r.engine);
    NameThread(pid, tid, EngineName(r.engine));
    AddEvent({r.name, EngineName(r.engine), pid, tid, r.start_ns, r.end_ns, r.bytes, r.flops,
              r.shapes.data()});
  }
}

void ChromeTrace::AddCore(int pid, int core, const std::vector<InstructionRecord>& records) {
  for (const InstructionRecord& r : records) {
    const int tid = CoreEngineTid(core, r.engine);
    NameThread(pid, tid, StrCat("core ", core, " ", EngineName(r.engine)));
    AddEvent({r.name, EngineName(r.engine), pid, tid, r.start_ns, r.end_ns, r.bytes, r.flops,
              r.shapes.data()});
  }
}

std::string ChromeTrace::ToJson() const {
  using nlohmann::json;
  json events = json::array();
  for (const auto& [pid, name] : process_names_) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
  }
  for (const auto& [key, name] : thread_names_) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", key.first}, {"tid", key.second},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", key.first},
                      {"tid", key.second}, {"args", {{"sort_index", key.second}}}});
  }
  for (const Event& e : events_) {
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.start_ns / 1000.0},
                      {"dur", (e.end_ns - e.start_ns) / 1000.0},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"args",
                       {{"start_ns", e.start_ns}, {"end_ns", e.end_ns}, {"operands", e.operands},
                        {"bytes", e.bytes}, {"flops", e.flops}}}});
  }
  json trace = {{"traceEvents", events},
                {"displayTimeUnit", "ns"},
                {"otherData", {{"generator", "nkisim"}, {"clock", "simulated time; ts and dur in us"}}}};
  return trace.dump();
}

void ChromeTrace::WriteFile(const std::string& path) const {
  WriteFileAtomically(path, ToJson(), "trace file");
}

}  // namespace nkisim
