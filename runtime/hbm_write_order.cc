#include "runtime/hbm_write_order.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim {
namespace {

// True when landing `a` (already in the byte) stays over a write of program prg landing at ns.
bool Stays(const HbmWriteOrder::Landing& a, double ns, int prg) {
  return a.ns > ns || (a.ns == ns && a.prg > prg);
}

}  // namespace

HbmWriteOrder::HbmWriteOrder()
    : landings_{{-std::numeric_limits<double>::infinity(), -1}} {}

void HbmWriteOrder::Write(const TensorView& dst, int prg, const std::function<void()>& write) {
  WriteOffsets(
      dst, [&](const std::function<void(int64_t)>& fn) { dst.ForEachOffset(fn); },
      static_cast<size_t>(dst.numel()), prg, write);
}

void HbmWriteOrder::Write(const TensorView& base, const std::vector<int64_t>& offsets, int prg,
                          const std::function<void()>& write) {
  WriteOffsets(
      base,
      [&](const std::function<void(int64_t)>& fn) {
        for (int64_t offset : offsets) fn(offset);
      },
      offsets.size(), prg, write);
}

void HbmWriteOrder::WriteOffsets(const TensorView& base, const ForEach& each, size_t count,
                                 int prg, const std::function<void()>& write) {
  if (!Functional()) {  // no values to order
    write();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t width = SizeOf(base.dtype());
  std::byte* data = base.buffer().data();
  std::vector<std::byte> before(count * width);
  size_t at = 0;
  each([&](int64_t offset) {
    std::memcpy(before.data() + at, data + offset * width, width);
    at += width;
  });

  HbmBuffer::ClearLastMarkedOnThread();
  write();
  const double ns = HbmBuffer::LastMarkedOnThread();
  if (std::isnan(ns)) return;  // the instruction wrote no HBM

  Stamps& stamps = stamps_[&base.buffer()];
  if (stamps.write.empty()) {
    stamps.keep = base;
    stamps.write.assign(base.buffer().size_bytes(), 0);
  }
  landings_.push_back({ns, prg});
  const auto mine = static_cast<uint32_t>(landings_.size() - 1);
  at = 0;
  each([&](int64_t offset) {
    for (size_t k = 0; k < width; ++k, ++at) {
      const size_t byte = static_cast<size_t>(offset) * width + k;
      uint32_t& stamp = stamps.write[byte];
      const Landing& held = landings_[stamp];
      if (held.prg == prg) {
        if (held.ns <= ns) stamp = mine;  // else: the new value lands with the earlier write
      } else if (held.prg >= 0 && Stays(held, ns, prg)) {
        data[byte] = before[at];  // the other program's later write stays
      } else {
        stamp = mine;
      }
    }
  });
}

HbmWriteOrder::Landing HbmWriteOrder::LandingOf(const TensorView& dst, int64_t byte) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = stamps_.find(&dst.buffer());
  if (it == stamps_.end()) return landings_[0];
  if (byte < 0 || static_cast<size_t>(byte) >= it->second.write.size()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("HbmWriteOrder::LandingOf: byte ", byte, " outside the buffer's ",
                 it->second.write.size(), " bytes"));
  }
  return landings_[it->second.write[static_cast<size_t>(byte)]];
}

}  // namespace nkisim
