// Output files written whole or not at all: the content goes to a temporary file beside the
// target, which is renamed over it once complete, so a reader (or a killed run) never sees half a
// file, and a failed write leaves the previous file untouched.
#pragma once

#include <string>
#include <string_view>

namespace nkisim {

// Writes `content` to `path` atomically. Throws Error(kInvalidArgument) "what 'path': reason"
// when the directory cannot take the file or the write fails (the temporary file is removed).
void WriteFileAtomically(const std::string& path, std::string_view content, const char* what);

// Checks, before any work, that `path` can be written: its directory exists and takes a file
// (a probe is created and removed). Throws Error(kInvalidArgument) "what 'path': reason".
void CheckWritable(const std::string& path, const char* what);

// Makes `dir` ready for outputs, before any work: an existing directory that takes a file, or a
// new directory made as the last component of a path whose parent exists. Parents are never
// created: a typo in --out-dir must not build a tree of directories (as root, anywhere).
// Throws Error(kInvalidArgument) "what 'dir': <the rule it breaks>", the class of every output
// path that cannot be written (CheckWritable's too).
void PrepareOutputDir(const std::string& dir, const char* what);

}  // namespace nkisim
