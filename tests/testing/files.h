// Small file helpers of the end-to-end tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace nkisim::testing {

// The whole file ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A path in the temporary directory: <tmp>/<prefix><name>.
inline std::string TempPath(const std::string& prefix, const std::string& name) {
  return (std::filesystem::temp_directory_path() / (prefix + name)).string();
}

// `base` + `extra` as one textproto config, where a config gives each field once: a line of
// `base` that opens a block `extra` opens too ("control {") is dropped, so extra's block replaces
// it. Base's blocks of those names must sit on one line each.
inline std::string OverrideConfig(std::string base, const std::string& extra) {
  std::istringstream lines(extra);
  for (std::string line; std::getline(lines, line);) {
    const size_t open = line.find(" {");
    if (open == std::string::npos || line.find_first_not_of(' ') != 0) continue;
    const std::string opener = line.substr(0, open + 2);
    for (size_t at = base.find(opener); at != std::string::npos; at = base.find(opener, at)) {
      if (at == 0 || base[at - 1] == '\n') {
        const size_t end = base.find('\n', at);
        base.erase(at, end == std::string::npos ? std::string::npos : end - at + 1);
      } else {
        ++at;
      }
    }
  }
  return base + extra;
}

}  // namespace nkisim::testing
