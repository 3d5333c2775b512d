#include "runtime/nisa/top8.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr int64_t kMinElements = 8;
constexpr int64_t kMaxElements = 16384;

void CheckRow(const char* inst, const char* name, const Tile& t) {
  if (t.free_size() < kMinElements || t.free_size() > kMaxElements) {
    Illegal(inst, name, t,
            StrCat("must have ", kMinElements, " to ", kMaxElements,
                   " elements per partition, has ", t.free_size()));
  }
}

void CheckOut(const char* inst, const Tile& dst, const char* src_name, const Tile& src) {
  if (dst.free_shape().size() != 1 || dst.free_size() != 8) {
    Illegal(inst, "dst", dst, "must be [P, 8]");
  }
  CheckSamePartitions(inst, "dst", dst, src_name, src);
}

int64_t Bytes(const Tile& a, const Tile& b) {
  return a.numel() * SizeOf(a.dtype()) + b.numel() * SizeOf(b.dtype());
}

}  // namespace

void max8(const Tile& dst, const Tile& src) {
  constexpr const char* kInst = "max8";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("src", src).Writes("dst", dst);
  CheckRow(kInst, "src", src);
  CheckOut(kInst, dst, "src", src);
  const int64_t n = src.free_size();
  float* x = ScratchRow(0, n);
  float top[8];
  for (int64_t p = 0; Functional() && p < src.partitions(); ++p) {
    src.ReadRow(p, x);
    std::partial_sort_copy(x, x + n, top, top + 8, std::greater<float>());
    dst.WriteRow(p, top);
  }
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, SizeOf(src.dtype()) <= 2),
               Bytes(src, dst), 0);
}

void nc_find_index8(const Tile& dst, const Tile& data, const Tile& vals) {
  constexpr const char* kInst = "nc_find_index8";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Reads("vals", vals).Writes("dst", dst);
  CheckRow(kInst, "data", data);
  if (vals.free_size() != 8) {
    Illegal(kInst, "vals", vals, StrCat("must have 8 elements per partition, has ",
                                        vals.free_size()));
  }
  CheckSamePartitions(kInst, "data", data, "vals", vals);
  CheckOut(kInst, dst, "data", data);
  if (dst.dtype() != DType::kUInt32 && dst.dtype() != DType::kUInt16) {
    Illegal(kInst, "dst", dst, "index dtype must be uint32 or uint16");
  }
  const float none = dst.dtype() == DType::kUInt32 ? 4294967295.0f : 65535.0f;
  const int64_t n = data.free_size();
  float* x = ScratchRow(0, n);
  float v[8], out[8];
  std::vector<bool> taken;
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    vals.ReadRow(p, v);
    taken.assign(static_cast<size_t>(n), false);
    for (int k = 0; k < 8; ++k) {
      int64_t i = 0;
      while (i < n && (x[i] != v[k] || taken[i])) ++i;
      if (i < n) taken[i] = true;
      out[k] = i == n ? none : static_cast<float>(i);
    }
    dst.WriteRow(p, out);
  }
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, SizeOf(data.dtype()) <= 2),
               Bytes(data, dst) + vals.numel() * SizeOf(vals.dtype()), 0);
}

void nc_match_replace8(const Tile& dst, const Tile& data, const Tile& vals, float imm,
                       const Tile& dst_idx) {
  constexpr const char* kInst = "nc_match_replace8";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Reads("vals", vals).Writes("dst", dst);
  if (dst_idx.valid()) issue.Writes("dst_idx", dst_idx);
  CheckRow(kInst, "data", data);
  if (vals.free_size() != 8) {
    Illegal(kInst, "vals", vals, StrCat("must have 8 elements per partition, has ",
                                        vals.free_size()));
  }
  CheckSamePartitions(kInst, "data", data, "vals", vals);
  CheckSamePartitions(kInst, "data", data, "dst", dst);
  if (dst.free_size() != data.free_size()) {
    Illegal(kInst, "dst", dst, StrCat("must have data's ", data.free_size(),
                                      " elements per partition"));
  }
  float none = -1.0f;
  if (dst_idx.valid()) {
    CheckOut(kInst, dst_idx, "data", data);
    const DType t = dst_idx.dtype();
    if (t != DType::kUInt32 && t != DType::kUInt16 && t != DType::kInt32) {
      Illegal(kInst, "dst_idx", dst_idx, "index dtype must be uint32, uint16 or int32");
    }
    none = t == DType::kUInt32 ? 4294967295.0f : t == DType::kUInt16 ? 65535.0f : -1.0f;
  }
  const int64_t n = data.free_size();
  float* x = ScratchRow(0, n);
  float v[8], idx[8];
  std::vector<bool> taken;
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    vals.ReadRow(p, v);
    taken.assign(static_cast<size_t>(n), false);
    for (int k = 7; k >= 0; --k) {
      int64_t i = 0;
      while (i < n && (x[i] != v[k] || taken[i])) ++i;
      idx[k] = i == n ? none : static_cast<float>(i);
      if (i < n) taken[i] = true;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i]) x[i] = imm;
    }
    dst.WriteRow(p, x);
    if (dst_idx.valid()) dst_idx.WriteRow(p, idx);
  }
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, SizeOf(data.dtype()) <= 2),
               2 * Bytes(data, dst), 0);
}

}  // namespace nkisim::nisa
