#include "kernels/output_projection/quantization.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "runtime/error.h"

namespace nkisim::kernels::oproj {

QuantizationType ParseQuantizationType(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (QuantizationType t :
       {QuantizationType::kNone, QuantizationType::kStatic, QuantizationType::kRow,
        QuantizationType::kMx, QuantizationType::kStaticMx, QuantizationType::kRowMx}) {
    if (upper == QuantizationTypeName(t)) return t;
  }
  Raise(ErrorCode::kInvalidArgument, StrCat("quantization type '", name,
                                            "': must be one of none, static, row, mx, static_mx, "
                                            "row_mx"));
}

bool IsMx(QuantizationType type) {
  return type == QuantizationType::kMx || type == QuantizationType::kStaticMx ||
         type == QuantizationType::kRowMx;
}

}  // namespace nkisim::kernels::oproj
