#include "launcher/control/framing.h"

#include "runtime/error.h"

namespace nkisim::launcher::control {

std::string EncodeFrame(const proto::RankMessage& message) {
  const std::string body = message.SerializeAsString();
  if (body.size() > kMaxFrameBytes) {
    Raise(ErrorCode::kInternal, StrCat("control message of ", body.size(), " bytes exceeds ",
                                       kMaxFrameBytes));
  }
  const auto n = static_cast<uint32_t>(body.size());
  std::string frame{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                    static_cast<char>(n >> 8), static_cast<char>(n)};
  return frame + body;
}

uint32_t DecodeLength(const unsigned char header[4]) {
  return (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) | (uint32_t{header[2]} << 8) |
         uint32_t{header[3]};
}

}  // namespace nkisim::launcher::control
