#include "runtime/nisa/mx.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/mx.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

void RequireMxPath(const char* inst, const HardwareProfile& prof) {
  if (!(prof.pe_mx_speedup() > 0)) {
    Raise(ErrorCode::kNotSupported,
          StrCat(inst, ": hardware profile '", prof.name(), "' has no MX path (pe_mx_speedup = ",
                 prof.pe_mx_speedup(), "); MX needs a NeuronCore-v4 profile such as ",
                 "configs/hardware/trn3.textproto"));
  }
}

void RequireSbuf(const char* inst, const char* name, const Tile& t) {
  if (t.memory() != MemorySpace::kSbuf) Illegal(inst, name, t, "must be in SBUF");
}

// P a multiple of 32 starting on a quadrant: MX blocks are 8 partitions, scales sit per quadrant.
void RequireQuadrants(const char* inst, const char* name, const Tile& t) {
  if (t.partitions() % mx::kQuadrantPartitions != 0 ||
      t.partition_start() % mx::kQuadrantPartitions != 0) {
    Illegal(inst, name, t,
            StrCat("needs a multiple of ", mx::kQuadrantPartitions, " partitions starting on a ",
                   mx::kQuadrantPartitions, "-partition quadrant (it starts at partition ",
                   t.partition_start(), ")"));
  }
}

void RequireOneContiguousFreeDim(const char* inst, const char* name, const Tile& t, int64_t size) {
  if (t.free_shape().size() != 1 || !t.free_contiguous() || t.free_size() != size) {
    Illegal(inst, name, t, StrCat("needs one contiguous free dim of ", size, " elements"));
  }
}

// Operand [P, F] x4 with its scales [P, F] -> row-major fp32 [4 P, F] of dequantized values.
const float* Dequantize(const Tile& data, const Tile& scale, int slot) {
  const int64_t p_count = data.partitions(), cols = data.free_size();
  float* out = ScratchRow(slot, 4 * p_count * cols);
  float* row = ScratchRow(slot + 2, 4 * cols);
  for (int64_t p = 0; p < p_count; ++p) {
    UnpackX4(data.dtype(), data.element_ptr(p, data.free_offset()), row, static_cast<size_t>(cols));
    const int64_t sp = mx::ScalePartition(p - p % mx::kBlockPartitions);
    const auto* s = reinterpret_cast<const uint8_t*>(scale.element_ptr(sp, scale.free_offset()));
    for (int64_t c = 0; c < cols; ++c) {
      const float factor = mx::E8M0ToFloat(s[c]);
      for (int j = 0; j < 4; ++j) {
        out[(4 * p + j) * cols + c] = static_cast<float>(
            static_cast<double>(row[4 * c + j]) * static_cast<double>(factor));
      }
    }
  }
  return out;
}

}  // namespace

void quantize_mx(const Tile& dst, const Tile& src, const Tile& dst_scale) {
  constexpr const char* kInst = "quantize_mx";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("src", src).Writes("dst", dst).Writes("dst_scale", dst_scale);
  const HardwareProfile& prof = issue.profile();
  RequireMxPath(kInst, prof);
  for (const auto& [name, t] : {std::pair<const char*, const Tile&>{"src", src}, {"dst", dst},
                                {"dst_scale", dst_scale}}) {
    RequireSbuf(kInst, name, t);
    RequireQuadrants(kInst, name, t);
  }
  CheckSamePartitions(kInst, "src", src, "dst", dst);
  CheckSamePartitions(kInst, "src", src, "dst_scale", dst_scale);
  if (src.dtype() != DType::kBFloat16 && src.dtype() != DType::kFloat16) {
    Illegal(kInst, "src", src, "dtype must be bf16 or fp16");
  }
  if (dst.dtype() != DType::kFp8E4M3FNx4 && dst.dtype() != DType::kFp8E5M2x4) {
    Illegal(kInst, "dst", dst, "dtype must be fp8_e4m3fn_x4 or fp8_e5m2_x4");
  }
  if (dst_scale.dtype() != DType::kUInt8) Illegal(kInst, "dst_scale", dst_scale, "dtype must be uint8");
  const int64_t f = src.free_size();
  if (f % 4 != 0) Illegal(kInst, "src", src, StrCat("free size ", f, " must be a multiple of 4"));
  RequireOneContiguousFreeDim(kInst, "dst", dst, f / 4);
  RequireOneContiguousFreeDim(kInst, "dst_scale", dst_scale, f / 4);

  if (Functional()) {
    const int64_t p_count = src.partitions(), cols = f / 4;
    float* block_rows = ScratchRow(0, mx::kBlockPartitions * f);
    for (int64_t g = 0; g < p_count / mx::kBlockPartitions; ++g) {
      const int64_t p0 = g * mx::kBlockPartitions;
      for (int r = 0; r < mx::kBlockPartitions; ++r) src.ReadRow(p0 + r, block_rows + r * f);
      auto* scales = reinterpret_cast<uint8_t*>(
          dst_scale.element_ptr(mx::ScalePartition(p0), dst_scale.free_offset()));
      for (int64_t c = 0; c < cols; ++c) {
        float amax = 0.0f;
        bool non_finite = false;
        for (int r = 0; r < mx::kBlockPartitions; ++r) {
          for (int j = 0; j < 4; ++j) {
            const float v = block_rows[r * f + 4 * c + j];
            non_finite |= !std::isfinite(v);
            amax = std::fmax(amax, std::fabs(v));
          }
        }
        const uint8_t scale = mx::BlockScale(dst.dtype(), amax, non_finite);
        scales[c] = scale;
        for (int r = 0; r < mx::kBlockPartitions; ++r) {
          auto* codes = reinterpret_cast<uint8_t*>(dst.element_ptr(p0 + r, dst.free_offset() + c));
          for (int j = 0; j < 4; ++j) {
            codes[j] = mx::QuantizeValue(dst.dtype(), block_rows[r * f + 4 * c + j], scale);
          }
        }
      }
    }
  }
  const int64_t bytes = src.numel() * static_cast<int64_t>(SizeOf(src.dtype())) +
                        dst.numel() * 4 + dst_scale.numel();
  // No row in the ISA table (quantize_mx is newer): a Vector copy of the source (inferred).
  issue.CommitRow(cost_rows::kCopy, f, /*narrow=*/true, bytes, 0);
}

namespace {

// CheckMatmulOutput's rules for a bf16 dst (it allows fp32 only): PSUM, a contiguous [M, N]
// view inside one bank, M and N within the PE's limits.
void CheckBf16Output(const char* inst, const Tile& stationary, const Tile& moving, const Tile& dst,
                     int64_t m, int64_t n) {
  const HardwareProfile& prof = dst.core()->profile();
  if (m > prof.pe_cols()) {
    Illegal(inst, "stationary", stationary, StrCat("free size M = ", m, " exceeds ", prof.pe_cols()));
  }
  if (n > prof.pe_max_moving_free()) {
    Illegal(inst, "moving", moving,
            StrCat("free size N = ", n, " exceeds ", prof.pe_max_moving_free()));
  }
  if (dst.memory() != MemorySpace::kPsum) Illegal(inst, "dst", dst, "must be a PSUM tile");
  if (dst.partitions() != m || dst.free_size() != n || !dst.free_contiguous()) {
    Illegal(inst, "dst", dst, StrCat("must be a contiguous [M, N] = [", m, ", ", n, "] view"));
  }
  CheckPsumOneBank(inst, "dst", dst);
}

}  // namespace

void nc_matmul_mx(const Tile& dst, const Tile& stationary, const Tile& moving,
                  const Tile& stationary_scale, const Tile& moving_scale,
                  const MatmulMxOptions& options) {
  constexpr const char* kInst = "nc_matmul_mx";
  Issue issue(kInst, Engine::kPE);
  issue.Reads("stationary", stationary).Reads("moving", moving);
  issue.Reads("stationary_scale", stationary_scale).Reads("moving_scale", moving_scale);
  issue.Writes("dst", dst);
  if (options.accumulate) issue.Reads("dst", dst);
  const HardwareProfile& prof = issue.profile();
  RequireMxPath(kInst, prof);
  for (const auto& [name, t] :
       {std::pair<const char*, const Tile&>{"stationary", stationary}, {"moving", moving},
        {"stationary_scale", stationary_scale}, {"moving_scale", moving_scale}}) {
    RequireSbuf(kInst, name, t);
    RequireQuadrants(kInst, name, t);
  }
  CheckSamePartitions(kInst, "stationary", stationary, "moving", moving);
  CheckSamePartitions(kInst, "stationary", stationary, "stationary_scale", stationary_scale);
  CheckSamePartitions(kInst, "stationary", stationary, "moving_scale", moving_scale);
  for (const auto& [name, t] : {std::pair<const char*, const Tile&>{"stationary", stationary},
                                {"moving", moving}}) {
    if (!IsX4(t.dtype())) {
      Illegal(kInst, name, t, "dtype must be an x4 container (fp8_e4m3fn_x4, fp8_e5m2_x4, fp4_e2m1fn_x4)");
    }
  }
  const int64_t m = stationary.free_size(), n = moving.free_size();
  RequireOneContiguousFreeDim(kInst, "stationary", stationary, m);
  RequireOneContiguousFreeDim(kInst, "moving", moving, n);
  for (const auto& [name, t, size] :
       {std::tuple<const char*, const Tile&, int64_t>{"stationary_scale", stationary_scale, m},
        {"moving_scale", moving_scale, n}}) {
    if (t.dtype() != DType::kUInt8) Illegal(kInst, name, t, "dtype must be uint8 (E8M0)");
    RequireOneContiguousFreeDim(kInst, name, t, size);
  }
  // NeuronCore-v4 (the only MX path) writes dst in fp32 or bf16 (NKI 0.6 reference).
  const bool bf16_dst = dst.dtype() == DType::kBFloat16;
  if (dst.dtype() != DType::kFloat32 && !bf16_dst) {
    Illegal(kInst, "dst", dst, "must be an fp32 or bf16 PSUM tile");
  }
  if (bf16_dst) {
    CheckBf16Output(kInst, stationary, moving, dst, m, n);
  } else {
    CheckMatmulOutput(kInst, stationary, moving, dst, m, n);
  }

  static const bool single_threaded_blas = (openblas_set_num_threads(1), true);
  (void)single_threaded_blas;
  const int64_t k = 4 * stationary.partitions();
  if (Functional()) {
    const float* a = Dequantize(stationary, stationary_scale, 0);
    const float* b = Dequantize(moving, moving_scale, 1);
    // bf16: the product in fp32 (the PE accumulates in fp32), rounded once as it lands in PSUM
    std::vector<float> staged(bf16_dst ? m * n : 0);
    if (bf16_dst && options.accumulate) {
      for (int64_t p = 0; p < m; ++p) dst.ReadRow(p, staged.data() + p * n);
    }
    auto* c = bf16_dst ? staged.data()
                       : reinterpret_cast<float*>(dst.element_ptr(0, dst.free_offset()));
    const int ldc = static_cast<int>(bf16_dst ? n : dst.partition_stride());
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(m), b, static_cast<int>(n),
                options.accumulate ? 1.0f : 0.0f, c, ldc);
    for (int64_t p = 0; bf16_dst && p < m; ++p) dst.WriteRow(p, staged.data() + p * n);
  }
  const int64_t bytes = (stationary.numel() + moving.numel()) * 4 + stationary_scale.numel() +
                        moving_scale.numel() + dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype()));
  issue.CommitOnPe(MxMatmulNs(prof, n), bytes, 2 * k * m * n);
}

}  // namespace nkisim::nisa
