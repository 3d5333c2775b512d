// MPI derived datatypes that describe a TensorView's strided elements in place, so collective
// payloads go from tensor buffers to MPI and back without copies.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "runtime/tensor_view.h"

namespace nkisim::collectives {

// An owned, committed MPI datatype (freed on destruction). Move-only.
class MpiDatatype {
 public:
  MpiDatatype() = default;
  explicit MpiDatatype(MPI_Datatype type) : type_(type) {}
  MpiDatatype(MpiDatatype&& other) noexcept : type_(other.type_) {
    other.type_ = MPI_DATATYPE_NULL;
  }
  MpiDatatype& operator=(MpiDatatype&& other) noexcept;
  ~MpiDatatype();
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// The elements of `view`, relative to its first element (view's data pointer), with the MPI
// extent set to `extent_bytes` so that consecutive counts of the type step by that much.
MpiDatatype ViewDatatype(const TensorView& view, int64_t extent_bytes);

// Address of the view's first element.
void* ViewData(const TensorView& view);

}  // namespace nkisim::collectives
