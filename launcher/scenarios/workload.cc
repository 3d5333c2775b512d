#include "launcher/scenarios/workload.h"

#include <mpi.h>

#include <algorithm>

#include "collectives/collectives.h"
#include "runtime/error.h"
#include "runtime/nisa/dma.h"

namespace nkisim::launcher {

const std::vector<WorkloadInfo>& Workloads() {
  static const std::vector<WorkloadInfo> table = {
      {Workload::kDecode, "decode", RunDecode,
       "qkv (TKG) -> [batch_shard] -> attention (TKG) -> [unshard] -> o_proj (TKG) -> all_reduce, "
       "per step"},
      {Workload::kPrefill, "prefill", RunPrefill,
       "qkv (CTE, RoPE) -> causal attention (CTE) -> o_proj (CTE) -> all_reduce or reduce_scatter"},
  };
  return table;
}

const WorkloadInfo& FindWorkload(Workload kind) {
  for (const WorkloadInfo& w : Workloads()) {
    if (w.kind == kind) return w;
  }
  Raise(ErrorCode::kInternal, "workload without a row in the table");
}

std::vector<std::byte> RawGather(const collectives::GroupComm& group, const TensorView& t) {
  const int bytes = static_cast<int>(t.size_bytes());
  std::vector<std::byte> all(static_cast<size_t>(bytes) * group.size());
  TensorView dense = t;
  if (!t.is_contiguous()) {
    dense = TensorView::Create(t.shape(), t.dtype(), "gather_src");
    dense.FromFloats(t.ToFloats());
  }
  collectives::CheckMpi(MPI_Allgather(dense.buffer().data() + dense.offset() * SizeOf(dense.dtype()),
                                      bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, group.comm),
                        "reference gather");
  return all;
}

float ElementAt(const std::vector<std::byte>& raw, DType dtype, int64_t index) {
  return ToFloat(dtype, raw.data() + index * static_cast<int64_t>(SizeOf(dtype)));
}

std::vector<double> AsDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void DmaOnCore0(LogicalCore& lnc, const TensorView& dst, const TensorView& src) {
  ScopedCurrentCore on_core(lnc.core(0));
  nisa::dma_copy(dst, src);
}

std::vector<double> ReduceScatterGolden(const collectives::GroupComm& group,
                                        const std::vector<float>& partial, int64_t* first) {
  const std::vector<double> mine = AsDoubles(partial);
  const int n = group.size();
  std::vector<int> counts(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    counts[i] = static_cast<int>(mine.size() / n + (i < static_cast<int>(mine.size() % n)));
  }
  *first = 0;
  for (int i = 0; i < group.position; ++i) *first += counts[i];
  std::vector<double> golden(static_cast<size_t>(counts[group.position]));
  collectives::CheckMpi(MPI_Reduce_scatter(mine.data(), golden.data(), counts.data(), MPI_DOUBLE,
                                           MPI_SUM, group.comm),
                        "reference reduce_scatter");
  return golden;
}

void RecordLayerSample(proto::RankResult& result, const std::string& plan, int replica, int step,
                       int64_t total, int64_t first, const std::vector<float>& values) {
  const int64_t stride = std::max<int64_t>(1, total / 65536);
  proto::LayerSample& s = *result.add_layer_samples();
  s.set_scenario(plan);
  s.set_replica(static_cast<uint32_t>(replica));
  s.set_step(static_cast<uint32_t>(step));
  const int64_t end = first + static_cast<int64_t>(values.size());
  for (int64_t i = (first + stride - 1) / stride * stride; i < end; i += stride) {
    s.add_index(i);
    s.add_value(values[static_cast<size_t>(i - first)]);
  }
}

}  // namespace nkisim::launcher
