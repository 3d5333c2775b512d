// The enums the kernels share, with the public reference's values (nkilib core/utils/
// common_types.py): the fused norm (QKV, MLP) and the weight quantization (QKV, output projection,
// MLP). Which kernel accepts which value is each kernel's Validate's business.
#pragma once

namespace nkisim::kernels {

enum class NormType { kNoNorm = 0, kRmsNorm = 1, kLayerNorm = 2, kRmsNormSkipGamma = 3 };
enum class QuantizationType {
  kNone = 0,
  kStatic = 1,
  kRow = 2,
  kMx = 3,
  kStaticMx = 4,
  kRowMx = 5
};

const char* NormTypeName(NormType norm);                   // "NO_NORM", "RMS_NORM", ...
const char* QuantizationTypeName(QuantizationType quant);  // "NONE", "STATIC", "ROW", "MX", ...

}  // namespace nkisim::kernels
