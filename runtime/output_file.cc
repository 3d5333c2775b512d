#include "runtime/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/error.h"

namespace nkisim {
namespace {

std::string TempPathFor(const std::string& path) {
  return StrCat(path, ".tmp.", ::getpid());
}

}  // namespace

void WriteFileAtomically(const std::string& path, std::string_view content, const char* what) {
  const std::string temp = TempPathFor(path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(what, " '", path, "': cannot create ", temp, ": ", std::strerror(errno)));
    }
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      Raise(ErrorCode::kInvalidArgument, StrCat(what, " '", path, "': write failed"));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp.c_str());
    Raise(ErrorCode::kInvalidArgument, StrCat(what, " '", path, "': cannot replace it: ", reason));
  }
}

void CheckWritable(const std::string& path, const char* what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    Raise(ErrorCode::kInvalidArgument, StrCat(what, " '", path, "': is a directory"));
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(dir, ec)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(what, " '", path, "': cannot be written: directory ", dir, " does not exist"));
  }
  const std::string probe = TempPathFor(path);
  std::ofstream out(probe);
  if (!out) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(what, " '", path, "': cannot be written (", std::strerror(errno), ")"));
  }
  out.close();
  std::remove(probe.c_str());
}

void PrepareOutputDir(const std::string& dir, const char* what) {
  namespace fs = std::filesystem;
  if (dir.empty()) Raise(ErrorCode::kInvalidArgument, StrCat(what, ": empty; name a directory"));
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    Raise(ErrorCode::kInvalidArgument, StrCat(what, " '", dir, "': exists and is not a directory"));
  }
  if (!fs::exists(st)) {
    std::string last = dir;
    while (last.size() > 1 && last.back() == '/') last.pop_back();  // "a/b/" -> "a/b"
    const fs::path parent = fs::path(last).parent_path();
    const std::string up = parent.empty() ? "." : parent.string();
    if (!fs::is_directory(up, ec)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(what, " '", dir, "': its parent ", up, " is not an existing directory; only the ",
                   "last component of an output directory is created"));
    }
    if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(what, " '", dir, "': cannot create it: ", std::strerror(errno)));
    }
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(what, " '", dir, "': cannot be written (", std::strerror(errno), ")"));
  }
}

}  // namespace nkisim
