// The quantization modes of the output-projection kernels: the reference's QuantizationType enum
// (core/utils/common_types.py: NONE=0, STATIC=1, ROW=2, MX=3, STATIC_MX=4, ROW_MX=5), which QKV
// shares; its one definition (with QuantizationTypeName) lives in kernels/common/common_types.h. Which kernel
// accepts which mode is each kernel's Validate's business.
#pragma once

#include <string_view>

#include "kernels/common/common_types.h"

namespace nkisim::kernels::oproj {

// Accepts the QuantizationTypeName spellings in any case ("static", "ROW", "static_mx").
// Throws Error(kInvalidArgument) naming the accepted ones.
QuantizationType ParseQuantizationType(std::string_view name);
// MX, STATIC_MX and ROW_MX: the microscaling modes (CTE only, on NeuronCore-v4 profiles).
bool IsMx(QuantizationType type);

}  // namespace nkisim::kernels::oproj
