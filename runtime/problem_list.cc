#include "runtime/problem_list.h"

#include "runtime/error.h"

namespace nkisim {

std::vector<std::string> ProblemList::Lines() const {
  std::vector<std::string> lines = shown_;
  if (count_ > shown_.size()) {
    lines.push_back(StrCat("... and ", count_ - shown_.size(), " more (", count_,
                           " problems in all; the first ", shown_.size(), " are listed)"));
  }
  return lines;
}

std::string ProblemList::Message(const std::string& source) const {
  std::string message = StrCat(source, ": ", count_, " problem", count_ == 1 ? "" : "s", ":");
  for (const std::string& line : Lines()) message += "\n  " + line;
  return message;
}

}  // namespace nkisim
