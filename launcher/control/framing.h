// Wire framing of the control plane: a 4-byte big-endian length, then one serialized
// proto::RankMessage. Shared by the launcher's server and the ranks' client.
#pragma once

#include <cstdint>
#include <string>

#include "proto/control.pb.h"

namespace nkisim::launcher::control {

// Messages above this size are refused as corrupt (a rank's result with its trace is far smaller).
inline constexpr uint32_t kMaxFrameBytes = 256u << 20;

std::string EncodeFrame(const proto::RankMessage& message);
uint32_t DecodeLength(const unsigned char header[4]);

}  // namespace nkisim::launcher::control
