#include "runtime/language/memory_ops.h"

#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {
namespace {

std::string DescribeHbm(const TensorView& v) {
  return StrCat("'", v.name(), "' ", ShapeString(v.shape()), " ", DTypeName(v.dtype()), " HBM");
}

// Throws unless `from` broadcasts to `to`: same rank, each dim equal or 1 in `from`.
void CheckBroadcastable(const std::string& what, const Shape& from, const Shape& to) {
  bool ok = from.size() == to.size();
  for (size_t d = 0; ok && d < from.size(); ++d) ok = from[d] == to[d] || from[d] == 1;
  if (!ok) {
    Fail("broadcast_to", StrCat(what, " cannot broadcast to ", ShapeString(to), ": needs the ",
                                "same rank and each dim equal or 1"));
  }
}

}  // namespace

Tile load(const TensorView& src, OptDType dtype) {
  const int64_t parts = CurrentCore().profile().partitions();
  Shape shape = src.shape();
  if (shape.empty()) shape.push_back(1);
  if (shape.size() == 1) shape.push_back(1);
  if (shape[0] > parts) {
    Fail("load", StrCat("src ", DescribeHbm(src), ": dim 0 (", shape[0], ") becomes the partition ",
                        "dim and must be <= ", parts, "; slice it into tiles"));
  }
  Tile t = NewTile("load", shape, dtype.value_or(src.dtype()));
  nisa::dma_copy(t, src);
  return t;
}

void store(const TensorView& dst, const Tile& value) {
  CheckTile("store", "value", value);
  nisa::dma_copy(dst, value);
}

Tile copy(const Tile& src, OptDType dtype) {
  CheckTile("copy", "src", src);
  Tile t = NewTile("copy", src.shape(), dtype.value_or(src.dtype()));
  nisa::tensor_copy(t, src, Engine::kVector);
  return t;
}

Tile load_transpose2d(const TensorView& src, OptDType dtype, nisa::DgeMode dge) {
  const int64_t parts = CurrentCore().profile().partitions();
  if (src.rank() != 2) {
    Fail("load_transpose2d", StrCat("src ", DescribeHbm(src), ": must be a 2-D view [R, C]"));
  }
  if (src.dim(1) > parts) {
    Fail("load_transpose2d", StrCat("src ", DescribeHbm(src), ": its C = ", src.dim(1),
                                    " columns become partitions and must be <= ", parts));
  }
  const std::string violation = nisa::HardwareDgeViolation(src, parts);
  if (dge == nisa::DgeMode::kHardware && !violation.empty()) {
    Fail("load_transpose2d", StrCat("src ", DescribeHbm(src), ": ", violation, " (dge = ",
                                    nisa::DgeModeName(dge), "; kAuto falls back to software DGE)"));
  }
  Tile t = NewTile("load_transpose2d", {src.dim(1), src.dim(0)}, dtype.value_or(src.dtype()));
  nisa::dma_transpose(t, src, dge);
  return t;
}

void atomic_rmw(const Memref& dst, const Tile& value, Op op) {
  CheckTile("atomic_rmw", "value", value);
  if (op != Op::kAdd) {
    Fail("atomic_rmw",
         StrCat("op = ", Info(op).name, ": only add is supported ", "(err_atomic_rmw_add_only)"));
  }
  if (!dst.dynamic()) {
    Fail("atomic_rmw", StrCat("dst ", DescribeHbm(dst.view()), " is indexed statically: dst must ",
                              "be indexed by a dynamic index tile, Memref(tensor, indices) ",
                              "(err_atomic_rmw_dynamic_index)"));
  }
  nisa::dma_scatter_add(dst.view(), dst.row_indices(), value);
}

Tile broadcast_to(const Tile& src, const Shape& shape) {
  CheckTile("broadcast_to", "src", src);
  if (!shape.empty() && shape[0] != src.partitions()) {
    Fail("broadcast_to", StrCat("src ", src.Describe(), ": the partition dim never broadcasts ",
                                "(load the data onto each partition instead)"));
  }
  CheckBroadcastable(StrCat("src ", src.Describe()), src.shape(), shape);
  return BroadcastView(src, shape);
}

TensorView broadcast_to(const TensorView& src, const Shape& shape) {
  CheckBroadcastable(StrCat("src ", DescribeHbm(src)), src.shape(), shape);
  AccessPattern pattern;
  pattern.offset = src.offset();
  for (size_t d = 0; d < shape.size(); ++d) {
    pattern.dims.emplace_back(src.shape()[d] == shape[d] ? src.strides()[d] : 0, shape[d]);
  }
  return src.ap(pattern);
}

}  // namespace nkisim::nl
