#include "runtime/nisa/gather.h"

#include <utility>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {

void gather_flattened(const Tile& dst, const Tile& data, const Tile& indices) {
  constexpr const char* kInst = "gather_flattened";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Reads("data", data).Reads("indices", indices).Writes("dst", dst);  // no PSUM on GpSimd
  CheckSamePartitions(kInst, "data", data, "indices", indices);
  CheckSamePartitions(kInst, "data", data, "dst", dst);
  if (!IsInteger(indices.dtype())) Illegal(kInst, "indices", indices, "must have an integer dtype");
  if (dst.free_shape() != indices.free_shape()) {
    Illegal(kInst, "dst", dst,
            StrCat("free shape must equal the indices' ", ShapeString(indices.free_shape())));
  }
  const int64_t n = dst.free_size(), f = data.free_size();
  float* values = ScratchRow(0, f);
  float* index = ScratchRow(1, n);
  // Timing-only: no values, so no index check either.
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, values);
    indices.ReadRow(p, index);
    for (int64_t j = 0; j < n; ++j) {
      if (!(index[j] >= 0 && index[j] < static_cast<float>(f))) {
        Illegal(kInst, "indices", indices,
                StrCat("partition ", p, " element ", j, " holds index ", index[j],
                       ", outside data's flattened free size ", f));
      }
      index[j] = values[static_cast<int64_t>(index[j])];
    }
    dst.WriteRow(p, index);
  }
  // local_gather's row (ISA l.630-634): n valid indices of one element each.
  const HardwareProfile& prof = issue.profile();
  const double ns = (GatherCycles(prof, n, 1, SizeOf(data.dtype())) +
                     (issue.WaitsOnOperand() ? prof.engine_dependent_overhead_cycles() : 0.0)) /
                    prof.gpsimd_freq_ghz();
  issue.Commit(ns, dst.numel() * SizeOf(dst.dtype()) + indices.numel() * SizeOf(indices.dtype()), 0);
}

}  // namespace nkisim::nisa
