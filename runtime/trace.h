// Chrome trace-event JSON (the format the Perfetto UI and chrome://tracing open): processes
// (a core, or a rank), threads (an engine, or a core's engine), one complete ("X") event per
// instruction. Timestamps are microseconds as the format defines (simulated ns / 1000); each
// event's args repeat the exact nanoseconds, operand shapes, bytes and flops.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/timeline.h"

namespace nkisim {

class ChromeTrace {
 public:
  struct Event {
    std::string name;
    std::string category;  // the engine
    int pid;
    int tid;
    double start_ns;
    double end_ns;
    int64_t bytes;
    int64_t flops;
    std::string operands;
  };

  // One core's timeline as process `pid` named `name`, one thread per engine.
  void AddProcess(int pid, const std::string& name, const Timeline& timeline);
  // Physical core `core` of a process holding several cores: thread "core <c> <engine>".
  void AddCore(int pid, int core, const std::vector<InstructionRecord>& records);
  // The records as events of process `pid`, one thread per engine.
  void AddRecords(int pid, const std::vector<InstructionRecord>& records);

  void NameProcess(int pid, const std::string& name);
  void NameThread(int pid, int tid, const std::string& name);
  void AddEvent(Event event);

  std::string ToJson() const;
  // Throws Error(kBadConfig) naming the path when it cannot be written.
  void WriteFile(const std::string& path) const;

  // Thread id of an engine of physical core `core` (AddCore's numbering).
  static int CoreEngineTid(int core, Engine engine) { return core * 64 + EngineIndex(engine); }

 private:
  std::map<int, std::string> process_names_;
  std::map<std::pair<int, int>, std::string> thread_names_;
  std::vector<Event> events_;
};

}  // namespace nkisim
