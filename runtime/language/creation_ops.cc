#include "runtime/language/creation_ops.h"

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {

Tile ndarray(const Shape& shape, DType dtype, Buffer buffer, const std::string& name) {
  return NewTile(name, shape, dtype, buffer);
}

Tile full(const Shape& shape, float fill_value, DType dtype, Buffer buffer,
          const std::string& name) {
  Tile t = NewTile(name, shape, dtype, buffer);
  nisa::memset(t, fill_value);
  return t;
}

Tile zeros(const Shape& shape, DType dtype, Buffer buffer, const std::string& name) {
  return full(shape, 0.0f, dtype, buffer, name);
}

Tile ones(const Shape& shape, DType dtype, Buffer buffer, const std::string& name) {
  return full(shape, 1.0f, dtype, buffer, name);
}

Tile zeros_like(const Tile& a, OptDType dtype, Buffer buffer) {
  CheckTile("zeros_like", "a", a);
  return full(a.shape(), 0.0f, dtype.value_or(a.dtype()), buffer, "zeros_like");
}

Tile empty_like(const Tile& a, OptDType dtype, Buffer buffer) {
  CheckTile("empty_like", "a", a);
  return NewTile("empty_like", a.shape(), dtype.value_or(a.dtype()), buffer);
}

Tile rand(const Shape& shape, DType dtype) {
  Tile t = NewTile("rand", shape, dtype);
  nisa::random(t);
  return t;
}

void random_seed(uint32_t seed) { nisa::random_seed(seed); }

TensorView shared_constant(const std::vector<float>& values, const Shape& shape, DType dtype,
                           const std::string& name) {
  if (static_cast<int64_t>(values.size()) != NumElements(shape)) {
    Fail("shared_constant", StrCat("'", name, "' ", ShapeString(shape), " needs ",
                                   NumElements(shape), " values, got ", values.size()));
  }
  TensorView t = TensorView::Create(shape, dtype, name);
  t.FromFloats(values);
  return t;
}

TensorView shared_identity_matrix(int64_t n, DType dtype) {
  if (n < 1) Fail("shared_identity_matrix", StrCat("n = ", n, " must be >= 1"));
  std::vector<float> values(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i * n + i)] = 1.0f;
  return shared_constant(values, {n, n}, dtype, "shared_identity_matrix");
}

}  // namespace nkisim::nl
