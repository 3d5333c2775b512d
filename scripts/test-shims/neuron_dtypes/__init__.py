"""TEST-ONLY stand-in for the Neuron SDK's `neuron_dtypes` (see scripts/test-shims/README.md):
enough for the NKI library's test and reference modules to import and for their non-MX paths to
run. Not part of nkisim's `nki` package."""
import numpy as np

SHIM = "neuron_dtypes test-only stand-in (scripts/test-shims)"


def _refuse(what):
    raise NotImplementedError(f"{what} is not provided by the {SHIM}: it needs the real "
                              "neuron_dtypes package (Neuron SDK)")


class _Packed:
    """A packed fp8 / fp4 x4 dtype: named so modules import; any use refuses."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"neuron_dtypes.{self.name} ({SHIM})"


float8_e4m3fn_x4 = _Packed("float8_e4m3fn_x4")
float8_e5m2_x4 = _Packed("float8_e5m2_x4")
float4_e2m1fn_x4 = _Packed("float4_e2m1fn_x4")


class _BFloat16:
    name = "bfloat16"

    def __repr__(self):
        return f"neuron_dtypes.bfloat16 ({SHIM}: float32 storage, bf16 values)"


bfloat16 = _BFloat16()


def _name(dtype):
    return getattr(dtype, "name", None) or str(dtype)


def _round_bf16(x):
    """float32 values rounded to bf16 (nearest even), kept in float32 storage."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return np.where(np.isnan(x), x, rounded.view(np.float32)).astype(np.float32)


def static_cast(data, dtype):
    """data cast to dtype with numpy's rules (bfloat16: bf16 values in float32 storage)."""
    name = _name(dtype)
    if isinstance(dtype, _Packed) or "x4" in name or "float8" in name or "fp8" in name:
        _refuse(f"static_cast to {name}")
    arr = np.asarray(data)
    if name in ("bfloat16", "bf16"):
        return _round_bf16(arr.astype(np.float32))
    return arr.astype(np.dtype(name))


def is_float_type(dtype):
    name = _name(dtype)
    if name in ("bfloat16", "bf16") or "float" in name:
        return True
    try:
        return np.issubdtype(np.dtype(name), np.floating)
    except TypeError:
        return False


def sizeinbytes(dtype):
    name = _name(dtype)
    if name in ("bfloat16", "bf16"):
        return 2
    if isinstance(dtype, _Packed):
        return 4
    return np.dtype(name).itemsize


def finfo(dtype):
    name = _name(dtype)
    if name in ("bfloat16", "bf16"):
        _refuse("finfo(bfloat16)")
    return np.finfo(np.dtype(name))
