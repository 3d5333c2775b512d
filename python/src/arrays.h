// numpy arrays <-> HBM tensors and tiles. A dtype numpy has (fp32, fp16, int8, uint8, int32,
// uint16, uint32) crosses as its own bytes; bf16 and the fp8 formats, which numpy lacks, cross as
// float32 values, rounded to nearest even (fp8: saturating) on the way in and exact on the way
// out. The package (python/nki/_arrays.py) states the rule for users.
#pragma once

#include <pybind11/numpy.h>

#include <optional>

#include "runtime/dtype.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::python {

namespace py = pybind11;

// The numpy dtype holding `dtype`'s values bit for bit, if numpy has one.
std::optional<py::dtype> NativeNumpyDType(DType dtype);

// Writes `array` (row-major, t's element count) into the contiguous HBM tensor t: as bytes when
// array has t's native numpy dtype, else as float32 values (any float / int array is cast).
// Throws Error(kInvalidArgument) naming both shapes when the element counts differ.
void WriteArray(const TensorView& t, const py::array& array);

// t's values as a new array of t's shape: its native numpy dtype, else float32.
py::array ReadArray(const TensorView& t);
// A tile's values as a new float32 array of its shape (host read: no simulated cost).
py::array ReadTile(const Tile& t);
// Writes `array` (t's element count, any numeric dtype: cast to float32) into the tile (host
// write: no simulated cost). Throws Error(kInvalidArgument) naming both sizes on a mismatch.
void WriteTile(const Tile& t, const py::array& array);

}  // namespace nkisim::python
