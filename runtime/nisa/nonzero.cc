#include "runtime/nisa/nonzero.h"

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {

void nonzero_with_count(const Tile& dst, const Tile& src, int32_t index_offset,
                        int32_t padding_val) {
  constexpr const char* kInst = "nonzero_with_count";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Reads("src", src).Writes("dst", dst);
  if (src.memory() != MemorySpace::kSbuf) Illegal(kInst, "src", src, "must be in SBUF");
  if (dst.memory() != MemorySpace::kSbuf) Illegal(kInst, "dst", dst, "must be in SBUF");
  if (src.dtype() != DType::kFloat32 && src.dtype() != DType::kInt32) {
    Illegal(kInst, "src", src, "dtype must be fp32 or int32");
  }
  if (dst.dtype() != DType::kInt32) Illegal(kInst, "dst", dst, "dtype must be int32");
  CheckSamePartitions(kInst, "dst", dst, "src", src);
  const int64_t t = src.free_size();
  if (dst.free_size() != t + 1) {
    Illegal(kInst, "dst", dst, StrCat("must have src's elements per partition + 1 (", t + 1,
                                      ": the indices, then the count)"));
  }
  float* x = ScratchRow(0, t);
  float* y = ScratchRow(1, t + 1);
  for (int64_t p = 0; Functional() && p < src.partitions(); ++p) {
    if ((src.partition_start() + p) % 16 != 0) continue;
    src.ReadRow(p, x);
    int64_t n = 0;
    for (int64_t i = 0; i < t; ++i) {
      if (x[i] != 0.0f) y[n++] = static_cast<float>(i + index_offset);
    }
    for (int64_t i = n; i < t; ++i) y[i] = static_cast<float>(padding_val);
    y[t] = static_cast<float>(n);
    dst.WriteRow(p, y);
  }
  const int64_t bytes = src.numel() * static_cast<int64_t>(SizeOf(src.dtype())) +
                        dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kGpSimd, t, false), bytes, 0);
}

}  // namespace nkisim::nisa
