#include "runtime/nisa/matmul.h"

#include <cblas.h>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

// Copies a [K-rows, cols] operand into row-major fp32 (row k = contraction index).
// Double-row operands [128, 2, cols] become 256 rows: row r * 128 + p.
const float* GatherOperand(const Tile& t, bool double_row, int which, int64_t* rows, int64_t* cols) {
  const int64_t p = t.partitions();
  *cols = double_row ? t.free_shape()[1] : t.free_size();
  *rows = double_row ? 2 * p : p;
  float* buf = ScratchRow(which, *rows * *cols);
  if (!double_row) {
    for (int64_t i = 0; i < p; ++i) t.ReadRow(i, buf + i * *cols);
    return buf;
  }
  for (int r = 0; r < 2; ++r) {
    Tile half = t.select(1, r);
    for (int64_t i = 0; i < p; ++i) half.ReadRow(i, buf + (r * p + i) * *cols);
  }
  return buf;
}

void CheckInSbuf(const char* inst, const char* name, const Tile& t) {
  if (t.memory() != MemorySpace::kSbuf) Illegal(inst, name, t, "must be in SBUF");
}

}  // namespace

void nc_matmul(const Tile& dst, const Tile& stationary, const Tile& moving,
               const MatmulOptions& options) {
  constexpr const char* kInst = "nc_matmul";
  Issue issue(kInst, Engine::kPE);
  issue.Reads("stationary", stationary).Reads("moving", moving).Writes("dst", dst);
  if (options.accumulate) issue.Reads("dst", dst);
  const HardwareProfile& prof = issue.profile();
  const bool double_row = options.perf_mode == PerfMode::kDoubleRow;

  CheckInSbuf(kInst, "stationary", stationary);
  CheckInSbuf(kInst, "moving", moving);
  CheckSamePartitions(kInst, "stationary", stationary, "moving", moving);
  for (const auto& [name, t] : {std::pair<const char*, const Tile&>{"stationary", stationary},
                                {"moving", moving}}) {
    if (!IsFloat(t.dtype())) Illegal(kInst, name, t, "dtype must be a float type");
    if (double_row && !IsFp8(t.dtype())) Illegal(kInst, name, t, "double_row perf mode needs fp8");
    if (double_row && (t.free_shape().size() != 2 || t.free_shape()[0] != 2)) {
      Illegal(kInst, name, t, "double_row perf mode needs free dims [2, n] (K = 2 x partitions)");
    }
    if (!double_row && t.free_shape().size() != 1) {
      Illegal(kInst, name, t, "needs exactly one free dim: [K, M] or [K, N]");
    }
  }
  if ((stationary.dtype() == DType::kFloat32) != (moving.dtype() == DType::kFloat32)) {
    Illegal(kInst, "moving", moving,
            StrCat("mixes fp32 with ", DTypeName(stationary.dtype()),
                   " stationary; both operands must be fp32 or both narrower"));
  }
  const int64_t m = stationary.free_shape().back();
  const int64_t n = moving.free_shape().back();
  CheckMatmulOutput(kInst, stationary, moving, dst, m, n);

  // The simulator runs one BLAS thread per core thread: many ranks share few host cores.
  static const bool single_threaded_blas = (openblas_set_num_threads(1), true);
  (void)single_threaded_blas;
  const int64_t k = double_row ? 2 * stationary.partitions() : stationary.partitions();
  if (Functional()) {
    int64_t rows = 0, cols_a = 0, cols_b = 0;
    const float* a = GatherOperand(stationary, double_row, 0, &rows, &cols_a);
    const float* b = GatherOperand(moving, double_row, 1, &rows, &cols_b);
    auto* c = reinterpret_cast<float*>(dst.element_ptr(0, dst.free_offset()));
    const int ldc = static_cast<int>(dst.buffer().row_elements());
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(m), b, static_cast<int>(n),
                options.accumulate ? 1.0f : 0.0f, c, ldc);
  }

  const int64_t bytes = stationary.numel() * SizeOf(stationary.dtype()) +
                        moving.numel() * SizeOf(moving.dtype()) + dst.numel() * 4;
  issue.CommitOnPe(MatmulNs(prof, m, n, moving.dtype()), bytes, 2 * k * m * n);
}

void nc_transpose(const Tile& dst, const Tile& src, Engine engine) {
  constexpr const char* kInst = "nc_transpose";
  if (engine != Engine::kPE && engine != Engine::kVector) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": engine ", EngineName(engine), " cannot transpose; use PE or Vector"));
  }
  Issue issue(kInst, engine);
  issue.Reads("src", src).Writes("dst", dst);
  const HardwareProfile& prof = issue.profile();
  const int64_t p = src.partitions(), f = src.free_size();
  if (src.free_shape().size() != 1 || f > prof.pe_cols()) {
    Illegal(kInst, "src", src, StrCat("must be [P, F] with one free dim, F <= ", prof.pe_cols()));
  }
  if (dst.partitions() != f || dst.free_size() != p) {
    Illegal(kInst, "dst", dst, StrCat("must be [", f, ", ", p, "], the transpose of src"));
  }
  if (engine == Engine::kPE) {
    CheckInSbuf(kInst, "src", src);
    if (dst.memory() != MemorySpace::kPsum ||
        (dst.dtype() != src.dtype() && dst.dtype() != DType::kFloat32)) {
      Illegal(kInst, "dst", dst, "a PE transpose writes PSUM in src's dtype or fp32");
    }
  } else if (dst.memory() != MemorySpace::kSbuf) {
    Illegal(kInst, "dst", dst, "a Vector transpose writes SBUF");
  }
  if (Functional()) {
    float* in = ScratchRow(0, p * f);
    float* out = ScratchRow(1, p * f);
    for (int64_t i = 0; i < p; ++i) src.ReadRow(i, in + i * f);
    for (int64_t i = 0; i < p; ++i) {
      for (int64_t j = 0; j < f; ++j) out[j * p + i] = in[i * f + j];
    }
    for (int64_t j = 0; j < f; ++j) dst.WriteRow(j, out + j * p);
  }

  const bool narrow = SizeOf(src.dtype()) <= 2 && SizeOf(dst.dtype()) <= 2;
  const int64_t bytes = src.numel() * SizeOf(src.dtype()) + dst.numel() * SizeOf(dst.dtype());
  if (engine == Engine::kPE) {
    // ISA l.1054: max(P, min(64, F)) PE cycles = a matmul with M = F stationary, N = P moving
    // (fp32 keeps the fp32 factor: the ISA row is silent on dtypes).
    issue.CommitOnPe(MatmulNs(prof, f, p, src.dtype()), bytes, 0);
  } else {
    issue.CommitRow(cost_rows::kTranspose, p, narrow, bytes, 0);  // ISA l.1052: max(MIN_II, N)
  }
}

}  // namespace nkisim::nisa
