#include "kernels/common/mx_weights.h"

#include <cmath>
#include <vector>

#include "runtime/error.h"
#include "runtime/mx.h"

namespace nkisim::kernels {
namespace {

void RequireMatrix(const TensorView& w, const std::string& name, int64_t k_multiple) {
  if (!w.valid() || w.rank() != 2 || w.dim(0) % k_multiple != 0 || w.dim(0) == 0 || w.dim(1) == 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(name, ": weights ", w.valid() ? ShapeString(w.shape()) : std::string("<none>"),
                 " must be a non-empty [K, N] matrix with K a multiple of ", k_multiple,
                 " (one MX block is 32 values of K)"));
  }
}

}  // namespace

const char* MxWeightLayoutName(MxWeightLayout layout) {
  return layout == MxWeightLayout::kContiguous ? "MX_CONTIGUOUS" : "MX_INTERLEAVED";
}

MxWeightLayout ParseMxWeightLayout(const std::string& name) {
  if (name == "MX_CONTIGUOUS" || name == "contiguous") return MxWeightLayout::kContiguous;
  if (name == "MX_INTERLEAVED" || name == "interleaved") return MxWeightLayout::kInterleaved;
  Raise(ErrorCode::kInvalidArgument,
        StrCat("weight layout '", name, "': must be MX_CONTIGUOUS or MX_INTERLEAVED"));
}

int64_t MxSourceRow(MxWeightLayout layout, int64_t k, int64_t packed_row, int j) {
  if (layout == MxWeightLayout::kContiguous) return 4 * packed_row + j;
  return (j / 2) * (k / 2) + 2 * packed_row + (j % 2);
}

MxPackedWeights PackMxWeights(const TensorView& w, MxWeightLayout layout, DType x4,
                              const std::string& name) {
  RequireMatrix(w, name, mx::kBlockValues);
  if (!IsX4(x4)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(name, ": dtype ", DTypeName(x4), " is not an x4 container (fp8_e4m3fn_x4, ",
                 "fp8_e5m2_x4, fp4_e2m1fn_x4)"));
  }
  const int64_t k = w.dim(0), n = w.dim(1), rows = k / 4, groups = k / mx::kBlockValues;
  const std::vector<float> src = w.ToFloats();
  MxPackedWeights out{TensorView::Create({rows, n}, x4, name + "_mx"),
                      TensorView::Create({groups, n}, DType::kUInt8, name + "_mx_scale")};
  std::byte* data = out.data.buffer().data();
  auto* scales = reinterpret_cast<uint8_t*>(out.scales.buffer().data());
  const size_t elem = SizeOf(x4);
  std::vector<float> block(mx::kBlockValues);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < n; ++c) {
      float amax = 0.0f;
      bool non_finite = false;
      for (int r = 0; r < mx::kBlockPartitions; ++r) {
        for (int j = 0; j < 4; ++j) {
          const float v = src[MxSourceRow(layout, k, 8 * g + r, j) * n + c];
          block[4 * r + j] = v;
          non_finite |= !std::isfinite(v);
          amax = std::fmax(amax, std::fabs(v));
        }
      }
      const uint8_t scale = mx::BlockScale(x4, amax, non_finite);
      scales[g * n + c] = scale;
      for (int r = 0; r < mx::kBlockPartitions; ++r) {
        float scaled[4];
        for (int j = 0; j < 4; ++j) {
          // The code QuantizeValue picks, decoded back: PackX4 re-encodes it exactly.
          scaled[j] = X4DecodeValue(x4, mx::QuantizeValue(x4, block[4 * r + j], scale));
        }
        PackX4(x4, scaled, data + ((8 * g + r) * n + c) * elem, 1);
      }
    }
  }
  return out;
}

MxPackedWeights PackFp8WeightsX4(const TensorView& w_fp8, MxWeightLayout layout,
                                 const std::string& name) {
  RequireMatrix(w_fp8, name, mx::kBlockValues);
  if (w_fp8.dtype() != DType::kFp8E4M3FN) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(name, ": weights are ", DTypeName(w_fp8.dtype()),
                 "; per-tensor / per-row MX packing takes fp8_e4m3fn weights"));
  }
  const int64_t k = w_fp8.dim(0), n = w_fp8.dim(1), rows = k / 4;
  const std::vector<float> src = w_fp8.ToFloats();
  MxPackedWeights out{TensorView::Create({rows, n}, DType::kFp8E4M3FNx4, name + "_x4"),
                      TensorView::Create({k / mx::kBlockValues, n}, DType::kUInt8, name + "_x4_scale")};
  std::byte* data = out.data.buffer().data();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float v[4];
      for (int j = 0; j < 4; ++j) v[j] = src[MxSourceRow(layout, k, r, j) * n + c];
      PackX4(DType::kFp8E4M3FNx4, v, data + (r * n + c) * 4, 1);
    }
  }
  std::vector<float> neutral(static_cast<size_t>(out.scales.numel()), mx::kNeutralScale);
  out.scales.FromFloats(neutral);
  return out;
}

TensorView UnpackMxWeights(const MxPackedWeights& packed, MxWeightLayout layout,
                           const std::string& name) {
  const TensorView& d = packed.data;
  const TensorView& s = packed.scales;
  if (!d.valid() || !s.valid() || d.rank() != 2 || s.rank() != 2 || !IsX4(d.dtype()) ||
      s.dtype() != DType::kUInt8 || d.dim(0) % 8 != 0 || s.dim(0) != d.dim(0) / 8 ||
      s.dim(1) != d.dim(1) || !d.is_contiguous() || !s.is_contiguous()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(name, ": packed weights must be x4 data [K/4, N] and uint8 scales [K/32, N]; got ",
                 d.valid() ? ShapeString(d.shape()) + " " + DTypeName(d.dtype()) : "<none>", " and ",
                 s.valid() ? ShapeString(s.shape()) + " " + DTypeName(s.dtype()) : "<none>"));
  }
  const int64_t rows = d.dim(0), n = d.dim(1), k = 4 * rows;
  TensorView out = TensorView::Create({k, n}, DType::kFloat32, name);
  auto* o = reinterpret_cast<float*>(out.buffer().data());
  const std::byte* data = d.buffer().data() + d.offset() * SizeOf(d.dtype());
  const auto* scales = reinterpret_cast<const uint8_t*>(s.buffer().data() + s.offset());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float v[4];
      UnpackX4(d.dtype(), data + (r * n + c) * SizeOf(d.dtype()), v, 1);
      const double factor = mx::E8M0ToFloat(scales[(r / 8) * n + c]);
      for (int j = 0; j < 4; ++j) {
        o[MxSourceRow(layout, k, r, j) * n + c] = static_cast<float>(v[j] * factor);
      }
    }
  }
  return out;
}

}  // namespace nkisim::kernels
