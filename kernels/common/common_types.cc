#include "kernels/common/common_types.h"

namespace nkisim::kernels {

const char* NormTypeName(NormType norm) {
  switch (norm) {
    case NormType::kNoNorm:
      return "NO_NORM";
    case NormType::kRmsNorm:
      return "RMS_NORM";
    case NormType::kLayerNorm:
      return "LAYER_NORM";
    case NormType::kRmsNormSkipGamma:
      return "RMS_NORM_SKIP_GAMMA";
  }
  return "?";
}

const char* QuantizationTypeName(QuantizationType quant) {
  switch (quant) {
    case QuantizationType::kNone:
      return "NONE";
    case QuantizationType::kStatic:
      return "STATIC";
    case QuantizationType::kRow:
      return "ROW";
    case QuantizationType::kMx:
      return "MX";
    case QuantizationType::kStaticMx:
      return "STATIC_MX";
    case QuantizationType::kRowMx:
      return "ROW_MX";
  }
  return "?";
}

}  // namespace nkisim::kernels
