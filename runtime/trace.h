// Chrome trace-event JSON (the format the Perfetto UI and chrome://tracing open): one process per
// physical core, one thread per engine, one complete ("X") event per instruction. Timestamps are
// microseconds as the format defines (simulated ns / 1000); each event's args repeat the exact
// nanoseconds, operand shapes, bytes and flops.
#pragma once

#include <string>
#include <vector>

#include "runtime/timeline.h"

namespace nkisim {

class ChromeTrace {
 public:
  // Adds the instructions of one core's timeline as process `pid` named `name`.
  void AddProcess(int pid, const std::string& name, const Timeline& timeline);
  std::string ToJson() const;
  // Throws Error(kBadConfig) naming the path when it cannot be written.
  void WriteFile(const std::string& path) const;

 private:
  struct Process {
    int pid;
    std::string name;
    std::vector<InstructionRecord> records;
  };
  std::vector<Process> processes_;
};

}  // namespace nkisim
