#include "runtime/error.h"

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

}  // namespace nkisim
