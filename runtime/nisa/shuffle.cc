#include "runtime/nisa/shuffle.h"

#include <algorithm>
#include <utility>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {

void nc_stream_shuffle(const Tile& dst, const Tile& src, const std::vector<int>& mask) {
  constexpr const char* kInst = "nc_stream_shuffle";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("src", src).Writes("dst", dst);
  if (mask.size() != 32) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": shuffle_mask has ", mask.size(), " entries; it must have 32"));
  }
  for (size_t i = 0; i < mask.size(); ++i) {
    if ((mask[i] < 0 || mask[i] >= 32) && mask[i] != kShuffleKeep) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kInst, ": shuffle_mask[", i, "] is ", mask[i],
                   "; each entry must be a partition in [0, 32) of the quadrant or 255 (keep)"));
    }
  }
  if (dst.dtype() != src.dtype()) Illegal(kInst, "dst", dst, "dtype must equal src's");
  if (dst.free_size() != src.free_size()) {
    Illegal(kInst, "dst", dst, StrCat("must have src's ", src.free_size(),
                                      " elements per partition"));
  }
  const int64_t most = std::max(dst.partitions(), src.partitions());
  const int64_t active = (most + 31) / 32 * 32;
  for (const auto& [name, t] : {std::pair<const char*, const Tile*>{"src", &src}, {"dst", &dst}}) {
    const int64_t start = t->partition_start();
    const bool ok = active >= 96 ? start == 0 : active == 64 ? start % 64 == 0 : start % 32 == 0;
    if (!ok) {
      Illegal(kInst, name, *t,
              StrCat("starts at partition ", start, "; with ", active, " active partitions a ",
                     "start must be ", active >= 96 ? "0" : active == 64 ? "0 or 64" :
                                                                     "a multiple of 32"));
    }
  }
  for (int64_t p = 0; p < dst.partitions(); ++p) {
    const int m = mask[p % 32];
    if (m != kShuffleKeep && (p / 32) * 32 + m >= src.partitions()) {
      Illegal(kInst, "src", src,
              StrCat("has no partition ", (p / 32) * 32 + m, " for dst partition ", p,
                     " (shuffle_mask[", p % 32, "] = ", m, ")"));
    }
  }
  const int64_t n = src.free_size();
  if (Functional()) {
    std::vector<float> rows(static_cast<size_t>(src.partitions() * n));
    for (int64_t p = 0; p < src.partitions(); ++p) src.ReadRow(p, rows.data() + p * n);
    for (int64_t p = 0; p < dst.partitions(); ++p) {
      const int m = mask[p % 32];
      if (m == kShuffleKeep) continue;
      dst.WriteRow(p, rows.data() + ((p / 32) * 32 + m) * n);
    }
  }
  const int64_t bytes = (src.numel() + dst.numel()) * static_cast<int64_t>(SizeOf(src.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, SizeOf(src.dtype()) <= 2), bytes,
               0);
}

}  // namespace nkisim::nisa
