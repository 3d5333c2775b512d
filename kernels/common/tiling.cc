#include "kernels/common/tiling.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

int64_t DmaTargetBytes(const HardwareProfile& p) {
  const double queues_gbps = p.dma_queues() * p.dma_queue_gbps();
  // n queues each moving b bytes in (fixed + b / q) ns deliver the port's rate h when
  // b = fixed * h * q / (n * q - h)  (GB/s = bytes/ns).
  if (queues_gbps > p.hbm_gbps_per_core()) {
    const double break_even = p.dma_fixed_ns() * p.hbm_gbps_per_core() * p.dma_queue_gbps() /
                              (queues_gbps - p.hbm_gbps_per_core());
    return static_cast<int64_t>(std::ceil(2 * break_even));
  }
  return static_cast<int64_t>(std::ceil(20 * p.dma_fixed_ns() * p.dma_queue_gbps()));
}

int64_t QueueSpreadPieces(const HardwareProfile& prof, int64_t bytes) {
  if (prof.dma_queues() * prof.dma_queue_gbps() > prof.hbm_gbps_per_core()) return 1;
  const double smallest = 4 * prof.dma_fixed_ns() * prof.dma_queue_gbps();
  return std::max<int64_t>(1, std::min<int64_t>(prof.dma_queues(),
                                                static_cast<int64_t>(bytes / smallest)));
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
  const int64_t wanted = std::max((bytes + target - 1) / target, QueueSpreadPieces(prof, bytes));
  const int64_t pieces = std::clamp<int64_t>(wanted, 1, extent);
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t lo = extent * i / pieces, hi = extent * (i + 1) / pieces;
    nisa::dma_copy(dst.slice(dim, lo, hi), src.slice(dim, lo, hi));
  }
}

void DmaOverQueues(const Tile& dst, const TensorView& src, int dim, int64_t pieces) {
  if (dst.shape() != src.shape() || dim < 1 || dim >= src.rank()) {
    Raise(ErrorCode::kInternal, StrCat("DmaOverQueues: dst ", dst.Describe(), " and src ",
                                       ShapeString(src.shape()), " cut along dim ", dim));
  }
  const int64_t extent = src.dim(dim), n = std::clamp<int64_t>(pieces, 1, extent);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = extent * i / n, hi = extent * (i + 1) / n;
    nisa::dma_copy(dst.slice(dim, lo, hi), src.slice(dim, lo, hi));
  }
}

void StoreAcrossQueues(const TensorView& dst, const Tile& src) {
  const int64_t queues = src.core()->profile().dma_queues() / 2;
  const int64_t pieces = std::clamp<int64_t>(queues, 1, src.partitions());
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t r0 = src.partitions() * i / pieces, r1 = src.partitions() * (i + 1) / pieces;
    nisa::dma_copy(dst.slice(0, r0, r1), src.slice(0, r0, r1));
  }
}

void StoreInPieces(const TensorView& dst, const Tile& src) {
  const HardwareProfile& prof = src.core()->profile();
  const int64_t row_bytes = src.free_size() * static_cast<int64_t>(SizeOf(dst.dtype()));
  const auto piece_bytes = static_cast<int64_t>(prof.dma_fixed_ns() * prof.dma_queue_gbps());
  const int64_t rows = std::max<int64_t>(1, piece_bytes / std::max<int64_t>(1, row_bytes));
  for (int64_t r0 = 0; r0 < src.partitions(); r0 += rows) {
    const int64_t r1 = std::min(src.partitions(), r0 + rows);
    nisa::dma_copy(dst.slice(0, r0, r1), src.slice(0, r0, r1));
  }
}

int64_t SbufFreeBytes(const NeuronCore& core) {
  return static_cast<int64_t>(core.sbuf().largest_free_range());
}

Tile LoadRowBroadcast(NeuronCore& core, const std::string& name, const TensorView& rows,
                      int64_t partitions, DType dtype, int64_t pieces) {
  const TensorView row = rows.select(0, 0);
  const int64_t f = row.dim(0), n = std::clamp<int64_t>(pieces, 1, f);
  Tile t = core.AllocateSbuf(name, {partitions, f}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t lo = f * i / n, hi = f * (i + 1) / n;
    AccessPattern pattern{row.offset() + lo * row.strides()[0],
                          {{0, partitions}, {row.strides()[0], hi - lo}}};
    nisa::dma_copy(t.slice(1, lo, hi), rows.ap(pattern));
  }
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

void WeightStream::SplitFirst(int64_t k, int64_t pieces) {
  split_chunks_ = k;
  split_pieces_ = std::max<int64_t>(1, pieces);
}

void WeightStream::SplitLast(int64_t k, int64_t pieces) {
  split_last_chunks_ = k;
  split_last_pieces_ = std::max<int64_t>(1, pieces);
}

void WeightStream::Issue(int64_t k) {
  const size_t slot = static_cast<size_t>(k % slots());
  TensorView view = source_(k);
  const Tile dst = SlotView(slot, view);
  const int last = view.rank() - 1;
  const int64_t wanted = k < split_chunks_                ? split_pieces_
                         : k >= chunks_ - split_last_chunks_ ? split_last_pieces_
                                                              : 1;
  const int64_t pieces = std::min(wanted, view.dim(last));
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t lo = view.dim(last) * i / pieces, hi = view.dim(last) * (i + 1) / pieces;
    nisa::dma_copy(dst.slice(last, lo, hi), view.slice(last, lo, hi));
  }
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
