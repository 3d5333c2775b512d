#include "model/golden_chain.h"

#include <mpi.h>

#include <algorithm>

#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

// Member j's block of a flat tensor of `total` elements over n members.
int64_t BlockFirst(int64_t total, int n, int j) {
  return j * (total / n) + std::min<int64_t>(j, total % n);
}

}  // namespace

GroupGolden::GroupGolden(const collectives::GroupComm& group, int64_t rows, int64_t h)
    : group_(&group), rows_(rows), h_(h) {
  const int n = group.size();
  first_ = BlockFirst(rows * h, n, group.position);
  block_.assign(static_cast<size_t>(BlockFirst(rows * h, n, group.position + 1) - first_), 0.0);
}

GroupGolden GroupGolden::FromLocal(const collectives::GroupComm& group, const TensorView& t) {
  const int64_t h = t.shape().back(), rows = t.numel() / h;
  GroupGolden g(group, rows, h);
  g.local_ = t.reshape({rows * h});
  const std::vector<float> mine =
      g.local_.slice(0, g.first_, g.first_ + static_cast<int64_t>(g.block_.size())).ToFloats();
  std::copy(mine.begin(), mine.end(), g.block_.begin());
  return g;
}

void GroupGolden::Split(int64_t lo, int64_t hi, std::vector<int>* counts,
                        std::vector<int>* offsets) const {
  const int n = group_->size();
  counts->assign(static_cast<size_t>(n), 0);
  offsets->assign(static_cast<size_t>(n), 0);
  for (int j = 0; j < n; ++j) {
    const int64_t a = std::max(lo, BlockFirst(rows_ * h_, n, j));
    const int64_t b = std::min(hi, BlockFirst(rows_ * h_, n, j + 1));
    (*counts)[j] = static_cast<int>(std::max<int64_t>(0, b - a));
    (*offsets)[j] = static_cast<int>(std::clamp<int64_t>(a, lo, hi) - lo);
  }
}

void GroupGolden::AddGroupSum(int64_t r0, int64_t r1, const std::vector<double>& part) {
  const int64_t lo = r0 * h_, hi = r1 * h_;
  if (static_cast<int64_t>(part.size()) != hi - lo) {
    Raise(ErrorCode::kInternal, StrCat("golden sum of rows [", r0, ", ", r1, "): ", part.size(),
                                       " values for ", hi - lo, " elements"));
  }
  std::vector<int> counts, offsets;
  Split(lo, hi, &counts, &offsets);
  const int me = group_->position;
  std::vector<double> piece(static_cast<size_t>(std::max(1, counts[me])));
  collectives::CheckMpi(MPI_Reduce_scatter(part.data(), piece.data(), counts.data(), MPI_DOUBLE,
                                           MPI_SUM, group_->comm),
                        "golden reduce_scatter");
  const int64_t at = std::max(lo, first_) - first_;
  for (int i = 0; i < counts[me]; ++i) block_[static_cast<size_t>(at + i)] += piece[static_cast<size_t>(i)];
}

std::vector<double> GroupGolden::Rows(int64_t r0, int64_t r1) const {
  const int64_t lo = r0 * h_, hi = r1 * h_;
  std::vector<double> out(static_cast<size_t>(hi - lo));
  if (local_.valid()) {
    const std::vector<float> values = local_.slice(0, lo, hi).ToFloats();
    std::copy(values.begin(), values.end(), out.begin());
    return out;
  }
  std::vector<int> counts, offsets;
  Split(lo, hi, &counts, &offsets);
  const int me = group_->position;
  const int64_t at = std::max(lo, first_) - first_;
  collectives::CheckMpi(MPI_Allgatherv(block_.data() + std::min<int64_t>(at, block_.size()),
                                       counts[me], MPI_DOUBLE, out.data(), counts.data(),
                                       offsets.data(), MPI_DOUBLE, group_->comm),
                        "golden gather");
  return out;
}

TensorView GroupGolden::RowsTensor(int64_t r0, int64_t r1, const Shape& shape,
                                   const std::string& name) const {
  return GoldenTensor(shape, Rows(r0, r1), name);
}

GroupGolden SumOf(const GroupGolden& a, const GroupGolden& b) {
  if (!a.valid() || !b.valid() || a.rows() != b.rows() || a.h() != b.h()) {
    Raise(ErrorCode::kInternal, "golden sum of tensors of different shapes or groups");
  }
  GroupGolden out = a;
  out.block_ = a.block_;  // the sum is held, not read from a's local tensor
  out.local_ = TensorView();
  for (size_t i = 0; i < out.block_.size(); ++i) out.block_[i] += b.block_[i];
  return out;
}

TensorView GoldenTensor(const Shape& shape, const std::vector<double>& values, const std::string& name) {
  return GoldenTensor(shape, std::vector<float>(values.begin(), values.end()), name);
}

TensorView GoldenTensor(const Shape& shape, const std::vector<float>& values, const std::string& name) {
  TensorView t = TensorView::Create(shape, DType::kFloat32, name);
  if (t.numel() != static_cast<int64_t>(values.size())) {
    Raise(ErrorCode::kInternal, StrCat("golden tensor '", name, "': ", values.size(),
                                       " values for ", t.numel(), " elements"));
  }
  t.FromFloats(values);
  return t;
}

}  // namespace nkisim::launcher
