#include "runtime/nisa/local_gather.h"

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr int64_t kGroup = 16;           // partitions per GpSimd core
constexpr int64_t kMaxIndices = 4096;    // indices per core (NKI 0.6 reference)

void CheckGroupAligned(const char* inst, const char* name, const Tile& t) {
  if (t.memory() != MemorySpace::kSbuf) Illegal(inst, name, t, "must be in SBUF");
  if (t.partitions() % kGroup != 0 || t.partition_start() % kGroup != 0) {
    Illegal(inst, name, t,
            "must cover whole 16-partition GpSimd groups (partition count and start partition "
            "multiples of 16)");
  }
}

}  // namespace

void local_gather(const Tile& dst, const Tile& src, const Tile& index, int64_t elems_per_index,
                  int64_t valid) {
  constexpr const char* kInst = "local_gather";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Reads("src_buffer", src).Reads("index", index).Writes("dst", dst);
  CheckGroupAligned(kInst, "src_buffer", src);
  CheckGroupAligned(kInst, "index", index);
  CheckGroupAligned(kInst, "dst", dst);
  CheckSamePartitions(kInst, "src_buffer", src, "index", index);
  CheckSamePartitions(kInst, "src_buffer", src, "dst", dst);
  if (index.dtype() != DType::kUInt16) Illegal(kInst, "index", index, "dtype must be uint16");
  if (dst.dtype() != src.dtype()) {
    Illegal(kInst, "dst", dst,
            StrCat("dtype must be src_buffer's ", DTypeName(src.dtype()),
                   " (local_gather does not cast)"));
  }
  const int64_t n = elems_per_index;
  if (n != 1 && n != 2 && n != 4 && n != 8 && n != 16 && n != 32) {
    Raise(ErrorCode::kInvalidArgument,
                StrCat(kInst, ": num_elem_per_idx ", n, " must be one of 1, 2, 4, 8, 16, 32"));
  }
  const int64_t per_group = kGroup * index.free_size();
  if (valid < 0) valid = per_group;
  if (valid < 1 || valid > per_group || valid > kMaxIndices) {
    Raise(ErrorCode::kInvalidArgument,
                StrCat(kInst, ": num_valid_indices ", valid, " must be in [1, min(", per_group,
                       " (16 x index's ", index.free_size(), " elements per partition), ",
                       kMaxIndices, ")]"));
  }
  if (dst.free_size() != valid * n) {
    Illegal(kInst, "dst", dst,
            StrCat("must hold num_valid_indices x num_elem_per_idx = ", valid * n,
                   " elements per partition"));
  }
  const int64_t f = src.free_size(), t = index.free_size();
  float* indices = ScratchRow(0, per_group);
  float* row = ScratchRow(1, t);
  float* values = ScratchRow(2, f);
  float* out = ScratchRow(3, valid * n);
  for (int64_t g = 0; Functional() && g < src.partitions(); g += kGroup) {
    for (int64_t q = 0; q < kGroup; ++q) {  // flattened partition dim first
      index.ReadRow(g + q, row);
      for (int64_t i = 0; i < t; ++i) indices[i * kGroup + q] = row[i];
    }
    for (int64_t j = 0; j < valid; ++j) {
      if (!(indices[j] >= 0 && indices[j] + static_cast<float>(n) <= static_cast<float>(f))) {
        Illegal(kInst, "index", index,
                StrCat("index ", j, " of partitions [", g, ", ", g + kGroup, ") is ", indices[j],
                       ": with num_elem_per_idx ", n, " it reads outside src_buffer's ", f,
                       " elements per partition"));
      }
    }
    for (int64_t p = g; p < g + kGroup; ++p) {
      src.ReadRow(p, values);
      for (int64_t j = 0; j < valid; ++j) {
        const auto at = static_cast<int64_t>(indices[j]);
        for (int64_t e = 0; e < n; ++e) out[j * n + e] = values[at + e];
      }
      dst.WriteRow(p, out);
    }
  }
  const HardwareProfile& prof = issue.profile();
  const double ns = (GatherCycles(prof, valid, n, SizeOf(src.dtype())) +
                     (issue.WaitsOnOperand() ? prof.engine_dependent_overhead_cycles() : 0.0)) /
                    prof.gpsimd_freq_ghz();
  issue.Commit(ns, dst.numel() * SizeOf(dst.dtype()) + index.numel() * SizeOf(index.dtype()), 0);
}

}  // namespace nkisim::nisa
