// Creation ops of the nl language. Tiles are allocated on the current core (SBUF unless buffer
// says PSUM), as NKI's nki_ctx.cur_scope.buffer does; allocation is not an instruction, a fill is
// a memset. Uninitialised float tiles read as NaN, so a use before write shows up in results.
// HBM constants (shared_constant, shared_identity_matrix) are host-initialised TensorViews.
// Throws as NeuronCore::AllocateSbuf / AllocatePsum for a bad shape or a tile that does not fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/language/operands.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nl {

// An uninitialised tile of shape {partitions, free...}.
Tile ndarray(const Shape& shape, DType dtype, Buffer buffer = Buffer::kSbuf,
             const std::string& name = "ndarray");
// A tile filled with fill_value (rounded into dtype) by one memset on the Vector engine.
Tile full(const Shape& shape, float fill_value, DType dtype, Buffer buffer = Buffer::kSbuf,
          const std::string& name = "full");
Tile zeros(const Shape& shape, DType dtype, Buffer buffer = Buffer::kSbuf,
           const std::string& name = "zeros");
Tile ones(const Shape& shape, DType dtype, Buffer buffer = Buffer::kSbuf,
          const std::string& name = "ones");
// a's shape, dtype default a's: zeros_like fills 0, empty_like leaves it uninitialised.
Tile zeros_like(const Tile& a, OptDType dtype = std::nullopt, Buffer buffer = Buffer::kSbuf);
Tile empty_like(const Tile& a, OptDType dtype = std::nullopt, Buffer buffer = Buffer::kSbuf);

// Uniform [0, 1) values from the current core's PRNG stream (nisa::random, GpSimd).
// REQUIRES: a float dtype.
Tile rand(const Shape& shape, DType dtype = DType::kFloat32);
// Restarts the current core's PRNG stream: rand and dropout after the same seed repeat.
void random_seed(uint32_t seed);

// A read-only HBM constant holding `values` (row-major, rounded into dtype). Throws
// Error(kInvalidArgument) unless values has NumElements(shape) entries.
TensorView shared_constant(const std::vector<float>& values, const Shape& shape, DType dtype,
                           const std::string& name = "shared_constant");
// The n x n identity in HBM (the stationary operand of transposes and permutations).
TensorView shared_identity_matrix(int64_t n, DType dtype = DType::kUInt8);

}  // namespace nkisim::nl
