#include "runtime/error.h"

#include <cstdarg>
#include <cstdio>

namespace nkisim {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotSupported: return "not supported";
    case ErrorCode::kOutOfResources: return "out of resources";
    case ErrorCode::kBadConfig: return "bad config";
    case ErrorCode::kCommError: return "communication error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

int ExitCodeFor(ErrorCode code) { return 10 + static_cast<int>(code); }

std::string StrPrintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

}  // namespace nkisim
