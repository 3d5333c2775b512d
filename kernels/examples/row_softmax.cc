#include "kernels/examples/row_softmax.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/language/nl.h"

namespace nkisim::kernels {

void ValidateRowSoftmax(const TensorView& x, const TensorView& y) {
  auto fail = [](const std::string& what) {
    Raise(ErrorCode::kInvalidArgument, StrCat("row_softmax: ", what));
  };
  if (x.rank() != 2 || x.dim(0) < 1 || x.dim(1) < 1) {
    fail(StrCat("x is ", ShapeString(x.shape()), "; must be 2-D [R, C] with R, C >= 1"));
  }
  if (y.shape() != x.shape()) {
    fail(StrCat("y is ", ShapeString(y.shape()), "; must match x's ", ShapeString(x.shape())));
  }
  if (!IsFloat(x.dtype()) || !IsFloat(y.dtype())) {
    fail(StrCat("x is ", DTypeName(x.dtype()), " and y ", DTypeName(y.dtype()),
                "; both must be float dtypes"));
  }
}

namespace {

// Softmax of the rows of one block x_block [P, C] into y_block, chunk by chunk.
void SoftmaxBlock(const TensorView& x_block, const TensorView& y_block, int64_t chunk) {
  const int64_t cols = x_block.dim(1);
  std::vector<Tile> parts;
  Tile row_max;
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    parts.push_back(nl::load(x_block.slice(1, c0, std::min(cols, c0 + chunk))));
    nl::loop_reduce(nl::max(parts.back(), {1}, /*keepdims=*/true), nl::Op::kMaximum, &row_max);
  }
  Tile row_sum;
  for (Tile& part : parts) {
    part = nl::exp(nl::subtract(part, row_max, DType::kFloat32));
    nl::loop_reduce(nl::sum(part, {1}, /*keepdims=*/true), nl::Op::kAdd, &row_sum);
  }
  const Tile inverse_sum = nl::reciprocal(row_sum);
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t c0 = static_cast<int64_t>(i) * chunk;
    nl::store(y_block.slice(1, c0, std::min(cols, c0 + chunk)),
              nl::multiply(parts[i], inverse_sum, y_block.dtype()));
  }
}

}  // namespace

void RowSoftmaxKernel(const KernelContext& ctx, const TensorView& x, const TensorView& y) {
  const HardwareProfile& profile = ctx.core.profile();
  const int64_t rows = x.dim(0), block = profile.partitions();
  const int64_t begin = rows * ctx.prg_id / ctx.n_prgs;
  const int64_t end = rows * (ctx.prg_id + 1) / ctx.n_prgs;
  for (int64_t r0 = begin; r0 < end; r0 += block) {
    const int64_t r1 = std::min(end, r0 + block);
    SoftmaxBlock(x.slice(0, r0, r1), y.slice(0, r0, r1), profile.pe_max_moving_free());
  }
}

std::vector<float> RowSoftmaxGolden(const TensorView& x) {
  const std::vector<float> v = x.ToFloats();
  const int64_t rows = x.dim(0), cols = x.dim(1);
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = v.data() + r * cols;
    const double m = *std::max_element(row, row + cols);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(row[c] - m);
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(std::exp(row[c] - m) / sum);
  }
  return out;
}

}  // namespace nkisim::kernels
