#include "kernels/common/residual_add.h"

#include <algorithm>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/nl.h"

namespace nkisim::kernels {
namespace {

// The add is element-wise, so the layout is free: each core takes a contiguous half of the flat
// elements and moves them as pieces of [up to 128 partitions, c] whose bytes are contiguous in
// HBM, c chosen so a core's pieces number about as many as its DMA queues (one queue alone
// moves a 128 KiB load in 4.8 us; the core's HBM port takes it in 0.36 us), at least 64 elements
// a partition so a DMA's fixed cost stays a fraction of its bytes, and at most what keeps the
// tiles in flight (two waves of x and y, and one sum; fp32 at worst) in half of SBUF: without
// that cap a large add (a prefill's [S, H] at S 2000, H 8192) asked for more SBUF than a core has.
int64_t PieceColumns(const HardwareProfile& p, int64_t elements) {
  const int64_t queues = std::max<int64_t>(1, p.dma_queues());
  const int64_t per_wave = queues * p.partitions();
  const int64_t wave = std::max<int64_t>(1, queues / 2);
  const int64_t in_flight = 4 * wave + 1;
  const int64_t cap = std::max<int64_t>(64, static_cast<int64_t>(p.sbuf_bytes_per_partition()) / 2 / (in_flight * 4));
  return std::max<int64_t>(64, std::min(cap, (elements + per_wave - 1) / per_wave));
}

void Check(const TensorView& a, const TensorView& b, const TensorView& out) {
  for (const auto& [name, t] : {std::pair{"a", &a}, std::pair{"b", &b}, std::pair{"out", &out}}) {
    if (t->rank() != 2 || t->shape() != out.shape() || !IsFloat(t->dtype()) || !t->is_contiguous()) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("residual_add: operand '", name, "' is ", ShapeString(t->shape()), " ",
                   DTypeName(t->dtype()), "; all three must be contiguous 2-D float views of out's shape ",
                   ShapeString(out.shape())));
    }
  }
}

}  // namespace

void ResidualAdd(LogicalCore& lnc, const TensorView& a, const TensorView& b, const TensorView& out) {
  Check(a, b, out);
  const int64_t n = out.numel();
  const TensorView fa = a.reshape({n}), fb = b.reshape({n}), fo = out.reshape({n});
  lnc.Launch([&](const KernelContext& ctx) {
    const HardwareProfile& prof = ctx.core.profile();
    const int64_t p = prof.partitions();
    const int64_t e0 = n * ctx.prg_id / ctx.n_prgs, e1 = n * (ctx.prg_id + 1) / ctx.n_prgs;
    const int64_t c = PieceColumns(prof, e1 - e0);
    struct Piece {
      int64_t off, len;
      Shape shape;
      Tile x, y;
    };
    std::vector<Piece> pieces;
    for (int64_t off = e0; off < e1;) {
      const int64_t full_rows = std::min(p, (e1 - off) / c);
      const int64_t len = full_rows > 0 ? full_rows * c : e1 - off;
      pieces.push_back({off, len, full_rows > 0 ? Shape{full_rows, c} : Shape{1, len}, {}, {}});
      off += len;
    }
    auto view = [](const TensorView& t, const Piece& q) {
      return t.slice(0, q.off, q.off + q.len).reshape(q.shape);
    };
    // Software-pipelined in waves of half the queues' worth of pieces: wave k + 1's loads are
    // issued before wave k's stores, which the core's HBM port takes in issue order, so the
    // loads stream while the adds of the wave before run.
    const size_t wave = std::max<size_t>(1, prof.dma_queues() / 2);
    auto load = [&](size_t first) {
      for (size_t i = first; i < std::min(pieces.size(), first + wave); ++i) {
        pieces[i].x = nl::load(view(fa, pieces[i]));
        pieces[i].y = nl::load(view(fb, pieces[i]));
      }
    };
    load(0);
    for (size_t first = 0; first < pieces.size(); first += wave) {
      load(first + wave);
      for (size_t i = first; i < std::min(pieces.size(), first + wave); ++i) {
        nl::store(view(fo, pieces[i]), nl::add(pieces[i].x, pieces[i].y, out.dtype()));
        pieces[i].x = pieces[i].y = Tile();  // frees the SBUF for the waves after
      }
    }
  });
}

}  // namespace nkisim::kernels
