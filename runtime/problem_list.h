// The problems one check of an input finds, capped: the first kShown are kept as written, the
// rest only counted, so a file with millions of bad entries costs memory and output by the cap,
// not by the file. Drop-in for the std::vector<std::string> the checks used to fill.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nkisim {

class ProblemList {
 public:
  static constexpr size_t kShown = 40;

  void push_back(std::string problem) {
    if (shown_.size() < kShown) shown_.push_back(std::move(problem));
    ++count_;
  }
  // Counts one more problem without its text: for loops over millions of entries, where writing
  // each message would cost the time the cap saves (`if (full()) CountOnly(); else push_back(..)`).
  void CountOnly() { ++count_; }
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }  // every problem found, shown or not
  bool full() const { return shown_.size() >= kShown; }
  std::vector<std::string>::const_iterator begin() const { return shown_.begin(); }
  std::vector<std::string>::const_iterator end() const { return shown_.end(); }

  // The kept problems, then "... and N more (M problems in all)" when some were only counted.
  std::vector<std::string> Lines() const;
  // "source: N problem(s):" and one indented line per kept problem (the message of the error a
  // check raises).
  std::string Message(const std::string& source) const;

 private:
  std::vector<std::string> shown_;
  size_t count_ = 0;
};

}  // namespace nkisim
