// NumPy .npy files to and from HBM tensors.
//
// Reads format versions 1.0, 2.0 and 3.0; writes 1.0, or 2.0 if the header outgrows the 16-bit
// length field of 1.0. Only little-endian, C-order arrays of these descrs are exchanged:
//   '<f4' fp32   '<f2' fp16   '|i1' int8   '|u1' uint8   '<i4' int32   '<u2' uint16   '<u4' uint32
// The '=' (native order) spellings of the multi-byte descrs ('=f4', ...) read as their '<' forms,
// because nkisim only runs on little-endian hosts.
//
// bf16 and the fp8 formats have no NumPy dtype; NpyExchange chooses how they cross the boundary:
//   kAsFloat32  as '<f4' values: exact when writing, rounded to nearest even (with the dtype's
//               overflow rule, see dtype.h) when reading.
//   kRawBits    as their storage bits: bf16 as '<u2', fp8 as '|u1' (the file does not record which
//               fp8 format; the reader names it). Bit-exact both ways, NaN payloads included.
//
// Every problem with a file being read (missing, bad magic, unsupported version or descr,
// truncated or malformed header, big-endian or Fortran-order data, a shape of negative dims or
// rank > kMaxRank, data shorter or longer than the shape needs) and a file that cannot be written
// raise Error(kBadConfig) naming the file and the rule broken.
#pragma once

#include <string>

#include "runtime/dtype.h"
#include "runtime/tensor_view.h"

namespace nkisim {

enum class NpyExchange {
  kAsFloat32,  // bf16/fp8 travel as '<f4' values
  kRawBits,    // bf16 travels as '<u2', fp8 as '|u1'
};

// Writes any valid view (strided, permuted, rank 0..kMaxRank) as a C-order array in row-major
// order of the view. exchange matters only for bf16 and fp8 views.
void WriteNpy(const std::string& path, const TensorView& tensor,
              NpyExchange exchange = NpyExchange::kAsFloat32);

// Reads a file into a new contiguous tensor (named after the file's stem) whose dtype is the
// file's: '<u2' reads as uint16 and '|u1' as uint8, never as bf16 or fp8 (use ReadNpyAs).
TensorView ReadNpy(const std::string& path);

// Reads a file into a new contiguous tensor of dtype want. Accepted file descrs:
//   want == the file's dtype      any want: read as is (exchange is ignored).
//   want bf16 or fp8              kAsFloat32: '<f4' only, converted by FromFloat (nearest even).
//                                 kRawBits: '<u2' for bf16, '|u1' for fp8, bits taken as they are.
//   want fp16                     also '<f4', converted by FromFloat (nearest even).
// Anything else, e.g. '<i4' for int8 or '<f2' for fp32, raises Error(kBadConfig) naming the
// file's descr and the descrs accepted for want; nkisim never narrows or widens silently.
TensorView ReadNpyAs(const std::string& path, DType want,
                     NpyExchange exchange = NpyExchange::kAsFloat32);

}  // namespace nkisim
