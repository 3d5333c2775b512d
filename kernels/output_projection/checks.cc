#include "kernels/output_projection/checks.h"

namespace nkisim::kernels::oproj {

void ParamChecker::Fail(const std::string& what, ErrorCode code) const {
  Raise(code, StrCat(kernel_, ": ", what));
}

void ParamChecker::ExpectShape(const char* name, const TensorView& t, const Shape& want,
                               const char* layout) const {
  if (!t.valid()) Fail(StrCat(name, " is missing: must be ", layout, " = ", ShapeString(want)));
  Require(t.shape() == want, StrCat(name, " shape ", ShapeString(t.shape()), ": must be ", layout,
                                    " = ", ShapeString(want)));
}

void ParamChecker::ExpectRank(const char* name, const TensorView& t, int rank,
                              const char* layout) const {
  if (!t.valid()) Fail(StrCat(name, " is missing: must be ", layout));
  Require(t.rank() == rank, StrCat(name, " shape ", ShapeString(t.shape()), ": must be ", layout,
                                   " (rank ", rank, ")"));
}

void ParamChecker::ExpectFloat(const char* name, const TensorView& t) const {
  Require(IsFloat(t.dtype()),
          StrCat(name, " dtype ", DTypeName(t.dtype()), ": must be a float type"));
}

void ParamChecker::ExpectContiguous(const char* name, const TensorView& t) const {
  Require(t.is_contiguous(),
          StrCat(name, " view ", ShapeString(t.shape()), " with strides ", ShapeString(t.strides()),
                 ": must be contiguous (heads are viewed by reshaping)"));
}

void ParamChecker::ExpectFp8(const char* name, const TensorView& t, QuantizationType type) const {
  Require(IsFp8(t.dtype()), StrCat(name, " dtype ", DTypeName(t.dtype()), ": quantization_type ",
                                   QuantizationTypeName(type), " needs fp8 weights"));
}

void ParamChecker::ExpectAbsent(const char* name, const TensorView& t,
                                QuantizationType type) const {
  Require(!t.valid(), StrCat(name, " ", ShapeString(t.shape()), " given with quantization_type ",
                             QuantizationTypeName(type), ", which does not use it"));
}

void ParamChecker::ExpectNotMx(QuantizationType type, const char* variant,
                               const char* why) const {
  Require(!IsMx(type), StrCat("quantization_type = ", QuantizationTypeName(type), ": the ", variant,
                              " kernel has no MX path (", why, ")"));
}

void ParamChecker::ExpectAtMost(const char* name, int64_t value, int64_t limit,
                                const char* why) const {
  Require(value <= limit, StrCat(name, " = ", value, ": must be <= ", limit, " (", why, ")"));
}

void ParamChecker::ExpectHShardable(int64_t h, int lnc) const {
  Require(h % lnc == 0, StrCat("H = ", h, ": must be divisible by LNC = ", lnc,
                               " (core p writes columns [p * H / LNC, (p + 1) * H / LNC))"));
}

void ParamChecker::ExpectStaticScales(const TensorView& input_scale, const TensorView& weight_scale,
                                      int64_t partitions) const {
  ExpectShape("input_scale", input_scale, {partitions, 1}, "(partitions, 1) for STATIC");
  ExpectShape("weight_scale", weight_scale, {partitions, 1}, "(partitions, 1) for STATIC");
  ExpectFloat("input_scale", input_scale);
  ExpectFloat("weight_scale", weight_scale);
}

}  // namespace nkisim::kernels::oproj
