// Reduction across partitions on GpSimd (NKI 0.6 nisa.tensor_partition_reduce).
#pragma once
#include "runtime/nisa/alu.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// dst[0, i] = data[0, i] <op> data[1, i] <op> ... <op> data[P-1, i] for every free element i, in
// partition order, in fp32 (bitwise ops on the integer values). Rules: dst has 1 partition and
// data's elements per partition; op is add, max, min, bitwise_or or bitwise_and (bitwise ops on
// integer dtypes). Cost: ComputeOpNs over P * the free size on GpSimd (each partition's row
// streams through the engine).
void tensor_partition_reduce(const Tile& dst, AluOp op, const Tile& data);

}  // namespace nkisim::nisa
