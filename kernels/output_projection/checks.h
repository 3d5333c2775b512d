// Parameter checks shared by the output-projection kernels' Validate functions. Each failure
// throws nkisim::Error worded "<kernel>: <parameter> <value seen>: <rule>", e.g.
//   "output_projection_cte: H = 4097: must be divisible by LNC = 2 (core p writes columns
//    [p * H / LNC, (p + 1) * H / LNC))".
#pragma once

#include <cstdint>
#include <string>

#include "kernels/output_projection/quantization.h"
#include "runtime/error.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels::oproj {

class ParamChecker {
 public:
  explicit ParamChecker(const char* kernel) : kernel_(kernel) {}

  [[noreturn]] void Fail(const std::string& what,
                         ErrorCode code = ErrorCode::kInvalidArgument) const;
  void Require(bool ok, const std::string& what) const {
    if (!ok) Fail(what);
  }

  // "<name> shape [..]: must be <layout> = [..]".
  void ExpectShape(const char* name, const TensorView& t, const Shape& want,
                   const char* layout) const;
  void ExpectRank(const char* name, const TensorView& t, int rank, const char* layout) const;
  void ExpectFloat(const char* name, const TensorView& t) const;
  // The kernels view heads by reshaping, which needs contiguous tensors.
  void ExpectContiguous(const char* name, const TensorView& t) const;
  void ExpectFp8(const char* name, const TensorView& t, QuantizationType type) const;
  // A tensor the quantization mode does not use must not be given (it would be ignored).
  void ExpectAbsent(const char* name, const TensorView& t, QuantizationType type) const;
  // MX, STATIC_MX and ROW_MX: Error(kInvalidArgument) for a kernel without an MX path (TKG),
  // "quantization_type = MX: the <variant> kernel has no MX path (<why>)".
  void ExpectNotMx(QuantizationType type, const char* variant, const char* why) const;
  // value <= limit, the reference kernel's limit on `what`.
  void ExpectAtMost(const char* name, int64_t value, int64_t limit, const char* why) const;
  // H % lnc == 0: core p writes columns [p * H / LNC, (p + 1) * H / LNC).
  void ExpectHShardable(int64_t h, int lnc) const;
  // STATIC: input_scale and weight_scale present, each [partitions, 1].
  void ExpectStaticScales(const TensorView& input_scale, const TensorView& weight_scale,
                          int64_t partitions) const;

 private:
  const char* kernel_;
};

}  // namespace nkisim::kernels::oproj
