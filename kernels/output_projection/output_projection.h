// The inputs both output-projection kernels take (output_projection_cte.h and
// output_projection_tkg.h add their outputs and options): the reference signatures' tensors, with
// an invalid TensorView meaning "not given". Sizes in elements.
#pragma once

#include "kernels/output_projection/quantization.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

struct OutputProjectionInputs {
  TensorView attention;  // CTE [B, N, D, S]; TKG [D, B, N, S]; float, contiguous
  TensorView weight;     // [N * D, H], contiguous; fp8 for STATIC and ROW; CTE MX modes: x4
                         // [N * D / 4, H] (fp4_e2m1fn_x4 MX, fp8_e4m3fn_x4 STATIC_MX / ROW_MX)
  TensorView bias;       // [1, H], or invalid: no bias
  QuantizationType quantization = QuantizationType::kNone;
  TensorView input_scale;   // STATIC, STATIC_MX: [128, 1]
  TensorView weight_scale;  // STATIC, STATIC_MX: [128, 1]; ROW (TKG), ROW_MX (CTE): [128, H],
                            // rows identical; MX (CTE): uint8 E8M0 [N * D / 32, H]
};

}  // namespace nkisim::kernels
