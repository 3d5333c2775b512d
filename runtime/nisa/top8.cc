#include "runtime/nisa/top8.h"

#include <algorithm>
#include <functional>

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
  for (int64_t p = 0; Functional() && p < data.partitions(); ++p) {
    data.ReadRow(p, x);
    vals.ReadRow(p, v);
    for (int k = 0; k < 8; ++k) {
      const float* hit = std::find(x, x + n, v[k]);
      out[k] = hit == x + n ? none : static_cast<float>(hit - x);
    }
    dst.WriteRow(p, out);
  }
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n, SizeOf(data.dtype()) <= 2),
               Bytes(data, dst) + vals.numel() * SizeOf(vals.dtype()), 0);
}

}  // namespace nkisim::nisa
