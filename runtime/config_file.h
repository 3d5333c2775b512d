// Reading configuration files written as protobuf text format or its JSON mapping (chosen by
// content: JSON when the first non-blank character is '{'). Shared by hardware profiles,
// topologies and scenarios, so they all report errors the same way.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace nkisim {

// Parses `text` into `message` (merged over what it holds). Throws Error(kBadConfig)
// "source:line:column: message" for text format, "source: JSON: message" for JSON.
void ParseConfigText(const std::string& text, const std::string& source,
                     google::protobuf::Message* message);

// Config files larger than this are refused (no hand-written config comes near it).
inline constexpr long long kMaxConfigFileBytes = 64LL << 20;

// The whole file; throws Error(kBadConfig) "path: cannot open <what>: <reason>", or names the
// rule the path breaks: a directory, FIFO, device or socket instead of a regular file, or a file
// over kMaxConfigFileBytes.
std::string ReadConfigFile(const std::string& path, const std::string& what);

// ReadConfigFile's checks without the read: for a file nkisim hands to another program (the
// scenario's hostfile to mpirun), before the job starts.
void CheckRegularFile(const std::string& path, const std::string& what);

}  // namespace nkisim
