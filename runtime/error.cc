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

std::string ValidUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size() && !(n == 2 && c < 0xC2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(text, i, n);
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

}  // namespace nkisim
