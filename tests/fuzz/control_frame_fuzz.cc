// Fuzz target: the control plane's wire format as the launcher's server reads it from a rank's
// connection (launcher/control/server.cc): a 4-byte big-endian length (DecodeLength), a frame
// above kMaxFrameBytes refused as corrupt, then one proto::RankMessage parsed from the body;
// repeated until the stream ends. A message that parses must encode back (EncodeFrame) to a frame
// that decodes to the same message.
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <google/protobuf/stubs/logging.h>

#include "launcher/control/framing.h"
#include "tests/fuzz/fuzz_common.h"

// protobuf logs every string field with invalid UTF-8 it refuses; the refusal is what matters.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  namespace ctl = nkisim::launcher::control;
  nkisim::fuzz::Guarded("control frame decode", [&] {
    size_t at = 0;
    while (size - at >= 4) {
      const uint32_t n = ctl::DecodeLength(data + at);
      at += 4;
      if (n > ctl::kMaxFrameBytes) return;  // the server closes: "corrupt frame"
      if (n > size - at) return;            // the stream ended inside the body
      nkisim::proto::RankMessage message;
      if (!message.ParseFromArray(data + at, static_cast<int>(n))) return;  // "unparsable"
      at += n;
      const std::string frame = ctl::EncodeFrame(message);
      const auto* f = reinterpret_cast<const unsigned char*>(frame.data());
      if (frame.size() < 4 || ctl::DecodeLength(f) != frame.size() - 4) {
        nkisim::fuzz::Finding("EncodeFrame's length does not match its body");
      }
      nkisim::proto::RankMessage again;
      // NaN doubles (a rank may report one) compare equal to themselves here.
      google::protobuf::util::DefaultFieldComparator comparator;
      comparator.set_treat_nan_as_equal(true);
      google::protobuf::util::MessageDifferencer differencer;
      differencer.set_field_comparator(&comparator);
      if (!again.ParseFromArray(f + 4, static_cast<int>(frame.size() - 4)) ||
          !differencer.Compare(message, again)) {
        nkisim::fuzz::Finding("a parsed RankMessage does not survive EncodeFrame and parse");
      }
    }
  });
  return 0;
}
