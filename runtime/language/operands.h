// What nl ops take and hand back: operands (a tile or an immediate), result tiles allocated on the
// current core (as NKI allocates an op's result in the current scope), numpy-style broadcasting of
// size-1 free dims, dtype promotion, the free-axis rule of reductions, and the nl error wording
// "<op>: <operand or parameter> <what it is>: <rule>" (Error kInvalidArgument).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nl {

using OptDType = std::optional<DType>;

// NKI's bool: comparisons, logical ops and `all` give 0 / 1 in this dtype.
inline constexpr DType kBool = DType::kUInt8;

// Where a new tile lives (NKI's buffer=): HBM tensors are TensorViews, made on the host.
enum class Buffer : uint8_t { kSbuf, kPsum };

// An operand of a binary op: a tile, or an immediate scalar (NKI accepts both).
class Operand {
 public:
  Operand(const Tile& tile) : tile_(tile) {}  // NOLINT: implicit, as in nl.add(x, y)
  Operand(float value) : value_(value) {}     // NOLINT: implicit, as in nl.add(x, 1.0)
  bool is_tile() const { return tile_.valid(); }
  const Tile& tile() const { return tile_; }
  float value() const { return value_; }
  std::string Describe() const;  // the tile's Describe(), or "immediate 1.5"

 private:
  Tile tile_;
  float value_ = 0.0f;
};

// A new, uninitialised tile {partitions, free...} on the current core, named after its op.
// Throws as NeuronCore::AllocateSbuf / AllocatePsum do (bad shape, out of SBUF / PSUM).
Tile NewTile(const std::string& op, const Shape& shape, DType dtype, Buffer buffer = Buffer::kSbuf);

// The result dtype of mixing a and b: equal stays; float with integer gives the float; two
// different floats give fp32; two different integers give int32.
DType PromoteDTypes(DType a, DType b);

// Throws Error(kInvalidArgument) with "<op>: <message>".
[[noreturn]] void Fail(const std::string& op, const std::string& message);
// Throws unless t is a valid tile: "<op>: operand '<operand>' is a null tile".
void CheckTile(const std::string& op, const char* operand, const Tile& t);

// The common shape of x and y: partitions must match; each free dim must match or be 1 in one of
// them. An operand holding one element per partition ([P, 1], [P, 1, 1]) broadcasts against any
// free rank; otherwise the free ranks must match. Errors name the operands x_name and y_name.
Shape BroadcastShape(const std::string& op, const Tile& x, const Tile& y, const char* x_name = "x",
                     const char* y_name = "y");
// A view of t repeated along its size-1 free dims (zero stride) to `shape` (from BroadcastShape).
Tile BroadcastView(const Tile& t, const Shape& shape);

// The reduction axes of x in increasing order. Rules: at least one axis; no partition axis (0);
// a contiguous run of free dims ending at the last one (NKI's "last contiguous dims").
std::vector<int> CheckFreeAxes(const std::string& op, const Tile& x, const std::vector<int>& axis);
// x's shape with `axes` kept as size 1 (keepdims) or dropped; a tile keeps at least one free dim,
// so reducing every free dim without keepdims gives [P, 1].
Shape ReducedShape(const Tile& x, const std::vector<int>& axes, bool keepdims);

}  // namespace nkisim::nl
