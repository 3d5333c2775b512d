#include "runtime/language/operands.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/neuron_core.h"

namespace nkisim::nl {

std::string Operand::Describe() const {
  return is_tile() ? tile_.Describe() : StrCat("immediate ", value_);
}

Tile NewTile(const std::string& op, const Shape& shape, DType dtype, Buffer buffer) {
  NeuronCore& core = CurrentCore();
  return buffer == Buffer::kPsum ? core.AllocatePsum(op, shape, dtype)
                                 : core.AllocateSbuf(op, shape, dtype);
}

DType PromoteDTypes(DType a, DType b) {
  if (a == b) return a;
  if (IsFloat(a) != IsFloat(b)) return IsFloat(a) ? a : b;
  return IsFloat(a) ? DType::kFloat32 : DType::kInt32;
}

void Fail(const std::string& op, const std::string& message) {
  Raise(ErrorCode::kInvalidArgument, StrCat(op, ": ", message));
}

void CheckTile(const std::string& op, const char* operand, const Tile& t) {
  if (!t.valid()) Fail(op, StrCat("operand '", operand, "' is a null tile"));
}

namespace {

// t's free dims as `rank` dims: a one-element-per-partition tile becomes [P, 1, ..., 1].
Shape FreeShapeOfRank(const Tile& t, size_t rank) {
  if (t.free_shape().size() == rank || t.free_size() != 1) return t.free_shape();
  return Shape(rank, 1);
}

}  // namespace

Shape BroadcastShape(const std::string& op, const Tile& x, const Tile& y, const char* x_name,
                     const char* y_name) {
  const std::string pair = StrCat(x_name, " ", x.Describe(), " and ", y_name, " ", y.Describe());
  if (x.partitions() != y.partitions()) {
    Fail(op, StrCat(pair, ": partition counts must match (the partition dim never broadcasts)"));
  }
  const size_t rank = std::max(x.free_shape().size(), y.free_shape().size());
  const Shape xs = FreeShapeOfRank(x, rank), ys = FreeShapeOfRank(y, rank);
  if (xs.size() != rank || ys.size() != rank) {
    Fail(op, StrCat(pair,
                    ": free ranks differ; only a one-element-per-partition operand "
                    "broadcasts to another rank"));
  }
  Shape out{x.partitions()};
  for (size_t d = 0; d < rank; ++d) {
    if (xs[d] != ys[d] && xs[d] != 1 && ys[d] != 1) {
      Fail(op, StrCat(pair, ": free dim ", d + 1, " is ", xs[d], " vs ", ys[d],
                      "; each must match or be 1"));
    }
    out.push_back(std::max(xs[d], ys[d]));
  }
  return out;
}

Tile BroadcastView(const Tile& t, const Shape& shape) {
  const size_t rank = shape.size() - 1;
  Tile v = t.free_shape().size() == rank ? t : t.reshape(Shape(rank, 1));
  for (size_t d = 0; d < rank; ++d) {
    if (v.free_shape()[d] == 1 && shape[d + 1] != 1) {
      v = v.broadcast(static_cast<int>(d + 1), shape[d + 1]);
    }
  }
  return v;
}

std::vector<int> CheckFreeAxes(const std::string& op, const Tile& x, const std::vector<int>& axis) {
  const int free_rank = static_cast<int>(x.free_shape().size());
  std::vector<int> axes = axis;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) Fail(op, StrCat("x ", x.Describe(), ": needs at least one axis to reduce"));
  if (axes.front() == 0) {
    Fail(op, StrCat("axis 0 of x ", x.Describe(), " is the partition axis; nl reduces free axes ",
                    "only (transpose first, or all_reduce across programs)"));
  }
  const bool in_range = axes.front() >= 1 && axes.back() <= free_rank;
  const bool last_run =
      axes.back() == free_rank && axes.back() - axes.front() + 1 == static_cast<int>(axes.size());
  if (!in_range || !last_run) {
    std::string seen;
    for (int a : axes) seen += StrCat(seen.empty() ? "" : ", ", a);
    Fail(op, StrCat("axes [", seen, "] of x ", x.Describe(), ": must be a contiguous run of free ",
                    "dims ending at the last one (", free_rank, ")"));
  }
  return axes;
}

Shape ReducedShape(const Tile& x, const std::vector<int>& axes, bool keepdims) {
  Shape out{x.partitions()};
  for (int d = 1; d <= static_cast<int>(x.free_shape().size()); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) {
      out.push_back(x.free_shape()[d - 1]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  if (out.size() == 1) out.push_back(1);
  return out;
}

}  // namespace nkisim::nl
