#include "runtime/trace.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <string_view>

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
  AddRecords(pid, timeline.records());
  AddRecords(pid, timeline.shares());
}

void ChromeTrace::AddRecords(int pid, const std::vector<InstructionRecord>& records) {
  for (const InstructionRecord& r : records) {
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

namespace {

// The document is written as it goes, one event at a time (a DOM of 10^5 events took seconds to
// build and copy); nlohmann escapes the strings, std::to_chars writes the numbers in their
// shortest exact form, so the text parses to the same values a DOM would have held.
class JsonWriter {
 public:
  JsonWriter& Raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  JsonWriter& String(const std::string& s) {
    out_.append(nlohmann::json(s).dump());
    return *this;
  }
  template <typename Int>
  JsonWriter& Num(Int v) {
    char buffer[32];
    out_.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
    return *this;
  }
  JsonWriter& Double(double v) {
    if (!std::isfinite(v)) return Raw("null");  // what nlohmann writes for NaN and infinity
    char buffer[64];
    const std::string_view text(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
    out_.append(text);
    // An integral value still reads back as a floating-point number.
    if (text.find_first_of(".e") == std::string_view::npos) out_.append(".0");
    return *this;
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

void Metadata(JsonWriter& w, bool& first, const char* name, int pid, int tid, const char* arg,
              const std::string* text, int number) {
  w.Raw(first ? "{" : ",{");
  first = false;
  w.Raw("\"name\":\"").Raw(name).Raw("\",\"ph\":\"M\",\"pid\":").Num(pid);
  w.Raw(",\"tid\":").Num(tid).Raw(",\"args\":{\"").Raw(arg).Raw("\":");
  if (text) {
    w.String(*text);
  } else {
    w.Num(number);
  }
  w.Raw("}}");
}

}  // namespace

std::string ChromeTrace::ToJson() const {
  JsonWriter w;
  w.Raw("{\"traceEvents\":[");
  bool first = true;
  for (const auto& [pid, name] : process_names_) {
    Metadata(w, first, "process_name", pid, 0, "name", &name, 0);
    Metadata(w, first, "process_sort_index", pid, 0, "sort_index", nullptr, pid);
  }
  for (const auto& [key, name] : thread_names_) {
    Metadata(w, first, "thread_name", key.first, key.second, "name", &name, 0);
    Metadata(w, first, "thread_sort_index", key.first, key.second, "sort_index", nullptr,
             key.second);
  }
  for (const Event& e : events_) {
    w.Raw(first ? "{" : ",{");
    first = false;
    w.Raw("\"name\":").String(e.name).Raw(",\"cat\":").String(e.category);
    w.Raw(",\"ph\":\"X\",\"ts\":").Double(e.start_ns / 1000.0);
    w.Raw(",\"dur\":").Double((e.end_ns - e.start_ns) / 1000.0);
    w.Raw(",\"pid\":").Num(e.pid).Raw(",\"tid\":").Num(e.tid);
    w.Raw(",\"args\":{\"start_ns\":").Double(e.start_ns).Raw(",\"end_ns\":").Double(e.end_ns);
    w.Raw(",\"operands\":").String(e.operands).Raw(",\"bytes\":").Num(e.bytes);
    w.Raw(",\"flops\":").Num(e.flops).Raw("}}");
  }
  w.Raw("],\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":");
  w.String("simulated time; ts and dur in us").Raw(",\"generator\":\"nkisim\"}}");
  return w.Take();
}

void ChromeTrace::WriteFile(const std::string& path) const {
  WriteFileAtomically(path, ToJson(), "trace file");
}

}  // namespace nkisim
