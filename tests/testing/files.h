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

}  // namespace nkisim::testing
