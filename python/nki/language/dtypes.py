"""nki.language.dtypes: NKI's element types (the same objects as nki.dtype and nl.float32 ...)."""
from nki.dtype import (  # noqa: F401
    DType, bfloat16, bool_, float16, float32, float4_e2m1fn_x4, float8_e4m3, float8_e4m3fn,
    float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, int8, int16, int32, tfloat32,
    uint8, uint16, uint32)
