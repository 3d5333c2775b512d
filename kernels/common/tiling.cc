#include "kernels/common/tiling.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

int64_t DmaTargetBytes(const HardwareProfile& p) {
  return static_cast<int64_t>(p.partitions()) * 2 * p.dma_descriptor_max_bytes();
}

void DmaInPieces(const Tile& dst, const TensorView& src, int dim) {
  if (dst.shape() != src.shape() || dim < 1 || dim >= src.rank()) {
    Raise(ErrorCode::kInternal, StrCat("DmaInPieces: dst ", dst.Describe(), " and src ",
                                       ShapeString(src.shape()), " cut along dim ", dim));
  }
  const int64_t extent = src.dim(dim);
  const int64_t bytes =
      src.numel() * static_cast<int64_t>(std::max(SizeOf(src.dtype()), SizeOf(dst.dtype())));
  const HardwareProfile& prof = dst.core()->profile();
  const int64_t target = DmaTargetBytes(prof);
  const int64_t wanted = (bytes + target - 1) / target;
  const int64_t pieces = std::clamp<int64_t>(wanted, 1, extent);
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t lo = extent * i / pieces, hi = extent * (i + 1) / pieces;
    nisa::dma_copy(dst.slice(dim, lo, hi), src.slice(dim, lo, hi));
  }
}

int64_t SbufFreeBytes(const NeuronCore& core) {
  return static_cast<int64_t>(core.sbuf().largest_free_range());
}

Tile LoadRowBroadcast(NeuronCore& core, const std::string& name, const TensorView& rows,
                      int64_t partitions, DType dtype) {
  const TensorView row = rows.select(0, 0);
  const int64_t f = row.dim(0);
  Tile t = core.AllocateSbuf(name, {partitions, f}, dtype);
  AccessPattern pattern{row.offset(), {{0, partitions}, {row.strides()[0], f}}};
  nisa::dma_copy(t, rows.ap(pattern));
  return t;
}

void ReciprocalStd(const Tile& dst, const Tile& data, float scale, const Tile& eps) {
  nisa::ActivationOptions options;
  options.scale = scale;
  options.bias = eps;
  nisa::activation(dst, nisa::ActFn::kRsqrt, data, options);
}

WeightStream::WeightStream(NeuronCore& core, int64_t slot_elements, DType dtype, int64_t chunks,
                           int64_t slots, std::function<TensorView(int64_t)> source)
    : resident_(static_cast<size_t>(slots)), source_(std::move(source)), chunks_(chunks) {
  for (int64_t i = 0; i < slots; ++i) {
    slots_.push_back(core.AllocateSbuf(StrCat("w_slot", i),
                                       {core.profile().partitions(), slot_elements}, dtype));
  }
}

Tile WeightStream::SlotView(size_t slot, const TensorView& view) const {
  const Shape free(view.shape().begin() + 1, view.shape().end());
  return slots_[slot].slice(0, 0, view.dim(0)).slice(1, 0, NumElements(free)).reshape(free);
}

void WeightStream::Start() { IssueUpTo(chunks_); }

void WeightStream::IssueUpTo(int64_t k) {
  while (issued_ < std::min({k, chunks_, released_ + slots()})) Issue(issued_);
}

void WeightStream::Issue(int64_t k) {
  const size_t slot = static_cast<size_t>(k % slots());
  TensorView view = source_(k);
  const Tile dst = SlotView(slot, view);
  nisa::dma_copy(dst, view);
  resident_[slot] = view;
  ++issued_;
}

Tile WeightStream::Get(int64_t k) const {
  if (k < released_ || k >= issued_) {
    Raise(ErrorCode::kInternal, StrCat("WeightStream: chunk ", k, " is not resident (released ",
                                       released_, ", issued ", issued_, ")"));
  }
  const size_t slot = static_cast<size_t>(k % slots());
  return SlotView(slot, resident_[slot]);
}

void WeightStream::Release(int64_t k) {
  if (k != released_) {
    Raise(ErrorCode::kInternal,
          StrCat("WeightStream: chunk ", k, " released out of order (next is ", released_, ")"));
  }
  ++released_;
  if (issued_ < chunks_) Issue(issued_);
}

}  // namespace nkisim::kernels
