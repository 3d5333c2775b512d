// Shared plumbing of the commands that run one kernel on one logical core (`nkisim demo`,
// `nkisim kernel ...`): inputs from .npy files or seeded random values, .npy outputs, the cost
// summary and the trace. Kernels themselves never print; these helpers do.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {

// With npy_path empty: a new tensor of `shape`/`dtype` filled with Uniform[lo, hi) values of the
// counter-based RNG keyed by (seed, name). Otherwise the file, which must hold exactly `shape`
// (bf16 / fp8 exchanged as float32). Throws Error(kBadConfig) naming the file, the expected and
// the found shape.
TensorView LoadOrRandomInput(const std::string& npy_path, const std::string& name,
                             const Shape& shape, DType dtype, uint64_t seed, float lo, float hi);

// .npy exchange of the x4 MX containers, which numpy has no dtype for: an x4 tensor is written and
// read as its same-width unsigned integer (uint32 for fp8 x4, uint16 for fp4 x4; the labels the
// reference accepts for MX containers). Other tensors pass through unchanged. ReadX4Npy raises
// Error(kBadConfig) naming the file, its dtype or shape and the one expected.
TensorView NpyExchangeView(const TensorView& tensor);
TensorView ReadX4Npy(const std::string& npy_path, const std::string& name, const Shape& shape,
                     DType x4);

// One integer flag of a kernel command, for CheckKernelFlags.
struct SizeFlag {
  const char* flag;
  int64_t value;
};

// The checks every kernel command makes before it allocates anything: each size flag in
// [1, 2^24]; the host bytes the case needs (inputs, outputs and the fp64 golden, estimated by
// the caller) at most 16 GiB. Throws Error(kInvalidArgument) "<command>: --b -1 must be in
// [1, 16777216]" or Error(kOutOfResources) naming the bytes and the limit.
void CheckKernelFlags(const char* command, std::initializer_list<SizeFlag> sizes,
                      double host_bytes);

// Before any work, in the functional mode (the timing-only mode writes nothing): out_dir is an
// existing directory that takes files, or is made as the last component of an existing parent
// (runtime/output_file.h PrepareOutputDir; parents are never created). Error(kInvalidArgument).
void PrepareKernelOutputDir(const std::string& out_dir, const char* what);
// Both outputs of a kernel command, before any work: --out-dir as above, and --trace (unless '')
// writable (CheckWritable), named "<command>: --out-dir" and "<command>: --trace".
void PrepareKernelOutputs(const std::string& command, const std::string& out_dir,
                          const std::string& trace_path);

// Writes tensor to <out_dir>/<name>.npy (PrepareOutputDir first); returns the path. In the
// timing-only mode writes nothing (the tensor holds no values) and says so in the returned text.
std::string WriteOutput(const std::string& out_dir, const std::string& name,
                        const TensorView& tensor);

// Prints each physical core's summary and the logical core's totals (simulated time, achieved
// TFLOP/s for `flops` of useful work), and writes the Chrome trace to trace_path when non-empty.
void ReportLogicalCore(const LogicalCore& lnc, double flops, const std::string& trace_path);

// Prints "host time: N.N ms", the host wall time since `start`.
void PrintHostTime(std::chrono::steady_clock::time_point start);

// The roofline of a kernel run on `lnc` physical cores: the larger of moving hbm_bytes at the
// cores' HBM share and doing `flops` at their bf16 PE peak. Prints both bounds, which one
// dominates and the simulated time as a multiple of it; when HBM dominates, also the stream
// floor (runtime/cost_model.h StreamFloorNs, the traffic shared evenly by the cores) and the
// simulated time against it; the engine floor (the instruction time of the busiest compute
// engine, PE, Vector, Scalar or GpSimd, of any core, which no ordering of the same instructions
// beats) when the PE dominates or when it is above the stream floor; and the target: the bound,
// or the higher floor where one is above it, with the simulated time as a multiple of it
// ("target: the engine floor, 146.2 ns; simulated = 1.09x the target"). Returns the bound in ns.
double ReportRoofline(const LogicalCore& lnc, double hbm_bytes, double flops, bool mx = false);

}  // namespace nkisim::launcher
