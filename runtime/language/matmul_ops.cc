#include "runtime/language/matmul_ops.h"

#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {
namespace {

// Throws unless t has one free dim within [partitions, free] limits; `role` names the layout.
void CheckMatrix(const char* op, const char* operand, const Tile& t, int64_t max_partitions,
                 int64_t max_free, const char* role) {
  CheckTile(op, operand, t);
  if (t.free_shape().size() != 1 || t.partitions() > max_partitions || t.free_size() > max_free) {
    Fail(op, StrCat(operand, " ", t.Describe(), ": must be ", role, " with one free dim, ",
                    "partitions <= ", max_partitions, " and free size <= ", max_free));
  }
}

}  // namespace

Tile matmul(const Tile& x, const Tile& y, bool transpose_x) {
  const HardwareProfile& prof = CurrentCore().profile();
  const int64_t parts = prof.partitions(), cols = prof.pe_cols();
  CheckMatrix("matmul", "x", x, parts, cols, transpose_x ? "[K, M] (transpose_x)" : "[M, K]");
  CheckMatrix("matmul", "y", y, parts, prof.pe_max_moving_free(), "[K, N]");
  const int64_t k = transpose_x ? x.partitions() : x.free_size();
  const int64_t m = transpose_x ? x.free_size() : x.partitions();
  if (y.partitions() != k) {
    Fail("matmul", StrCat("y ", y.Describe(), " has ", y.partitions(), " partitions but x ",
                          x.Describe(), " contracts over K = ", k));
  }
  Tile stationary = x;
  if (!transpose_x) {
    stationary = NewTile("matmul_xT", {k, m}, x.dtype());
    nisa::nc_transpose(stationary, x, Engine::kVector);
  }
  Tile out = NewTile("matmul", {m, y.free_size()}, DType::kFloat32, Buffer::kPsum);
  nisa::nc_matmul(out, stationary, y);
  return out;
}

Tile transpose(const Tile& x, OptDType dtype) {
  const HardwareProfile& prof = CurrentCore().profile();
  CheckMatrix("transpose", "x", x, prof.partitions(), prof.pe_cols(), "[P, F]");
  Tile out = NewTile("transpose", {x.free_size(), x.partitions()}, dtype ? *dtype : x.dtype(),
                     Buffer::kPsum);
  nisa::nc_transpose(out, x, Engine::kPE);
  return out;
}

}  // namespace nkisim::nl
