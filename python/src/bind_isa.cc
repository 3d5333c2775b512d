// The nisa instructions, one binding each, taking the runtime's own operands (Tile, TensorView,
// enums). Operand rules, results and costs are the C++ instruction's; the nki.isa package
// (python/nki/isa/__init__.py) maps the NKI 0.6 signatures onto these. The instructions that write
// HBM go through OrderedHbmWrite (session.h): under LNC 2 the two programs' writes land in
// simulated-time order (runtime/hbm_write_order.h). The two instructions that
// wait for the peer core (sendrecv, core_barrier) release the GIL while they wait, so the other
// program's thread can run.
#include <pybind11/stl.h>

#include <type_traits>
#include <variant>

#include "python/src/bindings.h"
#include "python/src/session.h"
#include "runtime/nisa/nisa.h"
#include "runtime/nisa/scan.h"
#include "runtime/nisa/top8.h"
#include "runtime/nisa/shuffle.h"
#include "runtime/nisa/affine_select.h"
#include "runtime/nisa/nonzero.h"
#include "runtime/nisa/local_gather.h"
#include "runtime/nisa/scalar_reduce.h"
#include "runtime/nisa/partition_reduce.h"
#include "runtime/nisa/range_select.h"
#include "runtime/nisa/dma_transpose_sbuf.h"
#include "runtime/nisa/dma_compute.h"
#include "runtime/nisa/dma_indirect.h"
#include "runtime/sim_mode.h"

namespace nkisim::python {
namespace {

using ScalarArg = std::variant<Tile, float>;

nisa::Scalar ToScalar(const ScalarArg& arg) {
  if (const Tile* t = std::get_if<Tile>(&arg)) return nisa::Scalar(*t);
  return nisa::Scalar(std::get<float>(arg));
}

void BindOpEnums(py::module_& m) {
  py::enum_<nisa::AluOp> alu(m, "AluOp");
  for (int i = 0; i <= static_cast<int>(nisa::AluOp::kShiftRight); ++i) {
    const auto op = static_cast<nisa::AluOp>(i);
    alu.value(nisa::AluOpName(op), op);
  }
  py::enum_<nisa::ActFn> act(m, "ActFn");
  for (int i = 0; i <= static_cast<int>(nisa::ActFn::kAbs); ++i) {
    const auto fn = static_cast<nisa::ActFn>(i);
    act.value(nisa::ActFnName(fn), fn);
  }
  py::enum_<nisa::DgeMode>(m, "DgeMode")
      .value("auto", nisa::DgeMode::kAuto)
      .value("hardware", nisa::DgeMode::kHardware)
      .value("software", nisa::DgeMode::kSoftware);
}

// dma_compute into HBM that one of its HBM sources shares the buffer of: a read-modify-write
// (dst += ...), left in host order as accumulations are (runtime/hbm_write_order.h).
bool Accumulates(const TensorView& dst, const std::vector<nisa::DmaOperand>& srcs) {
  for (const nisa::DmaOperand& src : srcs) {
    const TensorView* hbm = std::get_if<TensorView>(&src);
    if (hbm != nullptr && hbm->SameBuffer(dst)) return true;
  }
  return false;
}

// The elements (of rows' dtype, from its buffer's start) an indirect HBM write puts values in:
// row p at rows.offset() + index[p] * index_stride, walked by rows' free dims; rows outside the
// tensor are left out (the instruction skips or refuses them), as are all when the index tile is
// not an integer [P, 1] SBUF tile of P partitions (the instruction refuses it).
std::vector<int64_t> ScatteredOffsets(const nisa::IndirectRows& r) {
  std::vector<int64_t> offsets;
  const TensorView& v = r.rows;
  if (v.rank() < 1 || r.index.partitions() != v.shape()[0] || r.index.free_size() != 1 ||
      !Functional()) {
    return offsets;
  }
  const Shape row_shape(v.shape().begin() + 1, v.shape().end());
  const Shape row_strides(v.strides().begin() + 1, v.strides().end());
  std::vector<int64_t> row;
  ForEachStridedOffset(row_shape, row_strides, 0, [&](int64_t off) { row.push_back(off); });
  const auto capacity = static_cast<int64_t>(v.buffer().size_bytes() / SizeOf(v.dtype()));
  const std::vector<int64_t> first(r.index.free_shape().size(), 0);
  for (int64_t p = 0; p < r.index.partitions(); ++p) {
    const int64_t start = v.offset() + static_cast<int64_t>(r.index.get(p, first)) * r.index_stride;
    bool inside = true;
    for (int64_t off : row) inside = inside && start + off >= 0 && start + off < capacity;
    if (!inside) continue;
    for (int64_t off : row) offsets.push_back(start + off);
  }
  return offsets;
}

// dma_copy for one direction; pybind11 picks the overload by the operands' types.
template <typename Dst, typename Src>
void DefDmaCopy(py::module_& m) {
  DefNoGil(
      m, "dma_copy",
      [](const Dst& dst, const Src& src, int queue) {
        nisa::DmaOptions options;
        options.queue = queue;
        if constexpr (std::is_same_v<Dst, TensorView>) {
          OrderedHbmWrite(dst, [&] { nisa::dma_copy(dst, src, options); });
        } else {
          nisa::dma_copy(dst, src, options);
        }
      },
      py::arg("dst"), py::arg("src"), py::arg("queue") = -1);
}

void BindDma(py::module_& m) {
  DefDmaCopy<Tile, TensorView>(m);  // the common load first: overloads are tried in order
  DefDmaCopy<TensorView, Tile>(m);
  DefDmaCopy<Tile, Tile>(m);
  DefDmaCopy<TensorView, TensorView>(m);
  // HBM -> SBUF first (the common load), then SBUF -> SBUF (runtime/nisa/dma_transpose_sbuf.h)
  DefNoGil(m, "dma_transpose",
           static_cast<void (*)(const Tile&, const TensorView&, nisa::DgeMode)>(
               &nisa::dma_transpose),
           py::arg("dst"), py::arg("src"), py::arg("mode") = nisa::DgeMode::kAuto);
  DefNoGil(m, "dma_transpose",
           static_cast<void (*)(const Tile&, const Tile&, nisa::DgeMode)>(&nisa::dma_transpose),
           py::arg("dst"), py::arg("src"), py::arg("mode") = nisa::DgeMode::kAuto);
  // Accumulates onto HBM (a read-modify-write): additions commute, so not ordered (hbm_write_order.h).
  DefNoGil(m, "dma_scatter_add", &nisa::dma_scatter_add);
  DefNoGil(
      m, "dma_compute",
      [](const nisa::DmaOperand& dst, const std::vector<nisa::DmaOperand>& srcs,
         const std::vector<float>& scales) {
        const TensorView* hbm = std::get_if<TensorView>(&dst);
        if (hbm != nullptr && !Accumulates(*hbm, srcs)) {
          OrderedHbmWrite(*hbm, [&] { nisa::dma_compute(dst, srcs, scales); });
        } else {
          nisa::dma_compute(dst, srcs, scales);
        }
      },
      py::arg("dst"), py::arg("srcs"), py::arg("scales"));
  // dma_copy with an indirect HBM side (runtime/nisa/dma_indirect.h): in = HBM rows -> tile.
  DefNoGil(
      m, "dma_copy_indirect_in",
      [](const Tile& dst, const TensorView& rows, const Tile& index, int64_t index_stride,
         bool skip_out_of_bounds) {
        nisa::dma_copy_indirect(dst, nisa::IndirectRows{rows, index, index_stride,
                                                        skip_out_of_bounds});
      },
      py::arg("dst"), py::arg("rows"), py::arg("index"), py::arg("index_stride"),
      py::arg("skip_out_of_bounds"));
  DefNoGil(
      m, "dma_copy_indirect_out",
      [](const TensorView& rows, const Tile& index, int64_t index_stride, bool skip_out_of_bounds,
         const Tile& src) {
        const nisa::IndirectRows dst{rows, index, index_stride, skip_out_of_bounds};
        if (!OrderingHbmWrites()) return nisa::dma_copy_indirect(dst, src);
        OrderedHbmWrite(rows, ScatteredOffsets(dst), [&] { nisa::dma_copy_indirect(dst, src); });
      },
      py::arg("rows"), py::arg("index"), py::arg("index_stride"),
      py::arg("skip_out_of_bounds"), py::arg("src"));
}

void BindPe(py::module_& m) {
  DefNoGil(
      m, "nc_matmul",
      [](const Tile& dst, const Tile& stationary, const Tile& moving, bool accumulate,
         bool double_row) {
        nisa::nc_matmul(
            dst, stationary, moving,
            {.accumulate = accumulate,
             .perf_mode = double_row ? nisa::PerfMode::kDoubleRow : nisa::PerfMode::kNone});
      },
      py::arg("dst"), py::arg("stationary"), py::arg("moving"), py::arg("accumulate"),
      py::arg("double_row") = false);
  DefNoGil(m, "nc_transpose", &nisa::nc_transpose);
  DefNoGil(m, "quantize_mx", &nisa::quantize_mx);
  DefNoGil(
      m, "nc_matmul_mx",
      [](const Tile& dst, const Tile& s, const Tile& mv, const Tile& ss, const Tile& ms,
         bool accumulate) { nisa::nc_matmul_mx(dst, s, mv, ss, ms, {.accumulate = accumulate}); });
}

void BindElementwise(py::module_& m) {
  DefNoGil(m, "tensor_tensor", &nisa::tensor_tensor);
  DefNoGil(m, "tensor_scalar",
           [](const Tile& dst, const Tile& data, nisa::AluOp op0, const ScalarArg& operand0,
              bool reverse0, nisa::AluOp op1, const ScalarArg& operand1, bool reverse1, Engine e) {
             nisa::tensor_scalar(
                 dst, data, {op0, ToScalar(operand0), reverse0, op1, ToScalar(operand1), reverse1},
                 e);
           });
  DefNoGil(m, "scalar_tensor_tensor",
           [](const Tile& dst, const Tile& data0, nisa::AluOp op0, const ScalarArg& scalar,
              nisa::AluOp op1, const Tile& data1, Engine e) {
             nisa::scalar_tensor_tensor(dst, data0, op0, ToScalar(scalar), op1, data1, e);
           });
  DefNoGil(m, "activation",
           [](const Tile& dst, nisa::ActFn fn, const Tile& data, const ScalarArg& scale,
              const std::optional<Tile>& bias, nisa::AluOp reduce_op,
              const std::optional<Tile>& reduce_res) {
             nisa::activation(dst, fn, data,
                              {.scale = ToScalar(scale),
                               .bias = bias.value_or(Tile()),
                               .reduce_op = reduce_op,
                               .reduce_res = reduce_res.value_or(Tile())});
           });
  DefNoGil(m, "tensor_copy", &nisa::tensor_copy);
  DefNoGil(m, "reciprocal", &nisa::reciprocal);
  DefNoGil(m, "select", &nisa::select);
  DefNoGil(m, "memset", &nisa::memset);
  DefNoGil(m, "iota", &nisa::iota);
}

void BindReduceGatherRandom(py::module_& m) {
  DefNoGil(m, "tensor_reduce",
           [](const Tile& dst, nisa::AluOp op, const Tile& data, const std::vector<int>& axes,
              bool mean, bool negate) {
             nisa::tensor_reduce(dst, op, data, axes, {.mean = mean, .negate = negate});
           });
  DefNoGil(m, "bn_stats", &nisa::bn_stats);
  DefNoGil(m, "bn_aggr", &nisa::bn_aggr);
  DefNoGil(m, "gather_flattened", &nisa::gather_flattened);
  DefNoGil(m, "random_seed", &nisa::random_seed);
  DefNoGil(m, "random", &nisa::random);
  DefNoGil(m, "dropout", [](const Tile& dst, const Tile& data, const ScalarArg& prob) {
    nisa::dropout(dst, data, ToScalar(prob));
  });
}

// The instructions of issue 41 (runtime/nisa/scan.h, top8.h).
void BindScanTop8(py::module_& m) {
  DefNoGil(m, "tensor_tensor_scan",
           [](const Tile& dst, const Tile& data0, const Tile& data1, const ScalarArg& initial,
              nisa::AluOp op0, nisa::AluOp op1, bool reverse0, bool reverse1) {
             nisa::tensor_tensor_scan(dst, data0, data1, ToScalar(initial), op0, op1, reverse0,
                                      reverse1);
           });
  DefNoGil(m, "max8", &nisa::max8);
  DefNoGil(m, "nc_find_index8", &nisa::nc_find_index8);
  DefNoGil(m, "nc_match_replace8",
           [](const Tile& dst, const Tile& data, const Tile& vals, float imm,
              const std::optional<Tile>& dst_idx) {
             nisa::nc_match_replace8(dst, data, vals, imm, dst_idx.value_or(Tile()));
           });
  DefNoGil(m, "nc_stream_shuffle", &nisa::nc_stream_shuffle);
  DefNoGil(m, "affine_select", &nisa::affine_select);
  DefNoGil(m, "nonzero_with_count", &nisa::nonzero_with_count);
  DefNoGil(m, "local_gather", &nisa::local_gather);
  DefNoGil(m, "tensor_partition_reduce", &nisa::tensor_partition_reduce);
  DefNoGil(m, "range_select",
           [](const Tile& dst, const Tile& on_true, nisa::AluOp cmp0, nisa::AluOp cmp1,
              const Tile& bound0, const Tile& bound1, const std::optional<Tile>& reduce_res,
              int64_t range_start, float on_false_value) {
             nisa::range_select(dst, on_true, cmp0, cmp1, bound0, bound1,
                                reduce_res.value_or(Tile()), range_start, on_false_value);
           });
  DefNoGil(m, "tensor_scalar_reduce",
           [](const Tile& dst, const Tile& data, nisa::AluOp op0, const ScalarArg& operand0,
              nisa::AluOp reduce_op, const std::optional<Tile>& reduce_res, bool load_init,
              const ScalarArg& reduce_init, bool negate) {
             nisa::tensor_scalar_reduce(dst, data, op0, ToScalar(operand0), reduce_op,
                                        reduce_res.value_or(Tile()), load_init,
                                        ToScalar(reduce_init), negate);
           });
}

void BindCoreSync(py::module_& m) {
  DefNoGil(m, "sendrecv", &nisa::sendrecv);
  DefNoGil(m, "core_barrier", &nisa::core_barrier);
}

}  // namespace

void BindIsa(py::module_& m) {
  py::module_ isa = m.def_submodule("isa", "nisa instructions");
  BindOpEnums(m);
  BindDma(isa);
  BindPe(isa);
  BindElementwise(isa);
  BindReduceGatherRandom(isa);
  BindScanTop8(isa);
  BindCoreSync(isa);
}

}  // namespace nkisim::python
