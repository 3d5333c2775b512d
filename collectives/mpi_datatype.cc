#include "collectives/mpi_datatype.h"

namespace nkisim::collectives {

MpiDatatype& MpiDatatype::operator=(MpiDatatype&& other) noexcept {
  std::swap(type_, other.type_);
  return *this;
}

MpiDatatype::~MpiDatatype() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

MpiDatatype ViewDatatype(const TensorView& view, int64_t extent_bytes) {
  const int64_t width = static_cast<int64_t>(SizeOf(view.dtype()));
  MPI_Datatype type;
  MPI_Type_contiguous(static_cast<int>(width), MPI_BYTE, &type);
  for (int d = view.rank() - 1; d >= 0; --d) {  // innermost dim first
    MPI_Datatype outer;
    MPI_Type_create_hvector(static_cast<int>(view.shape()[d]), 1, view.strides()[d] * width, type,
                            &outer);
    MPI_Type_free(&type);
    type = outer;
  }
  MPI_Datatype resized;
  MPI_Type_create_resized(type, 0, extent_bytes, &resized);
  MPI_Type_free(&type);
  MPI_Type_commit(&resized);
  return MpiDatatype(resized);
}

void* ViewData(const TensorView& view) {
  return view.buffer().data() + view.offset() * static_cast<int64_t>(SizeOf(view.dtype()));
}

}  // namespace nkisim::collectives
