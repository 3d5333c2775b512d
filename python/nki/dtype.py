"""NKI dtypes and memory regions, over the runtime's DType enum.

A dtype is a ``DType`` object (``nl.bfloat16``); dtype arguments also accept numpy dtypes
(``np.float32``) and names (``"bfloat16"``). How arrays of dtypes numpy lacks cross the boundary:
see nki/_arrays.py.
"""
import enum

import numpy as np

from nki._runtime import _nkisim


class DType:
    """An element type: ``name`` (NKI spelling), ``itemsize`` in bytes, the runtime enum ``c``."""

    __slots__ = ("name", "c", "itemsize")

    def __init__(self, name, c):
        self.name = name
        self.c = c
        self.itemsize = _nkisim.dtype_size(c) if c is not None else 0

    def __repr__(self):
        return f"nl.{self.name}"

    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        try:
            return resolve(other) is self
        except (TypeError, ValueError, NotImplementedError):
            return False

    def __hash__(self):
        return hash(self.name)

    @property
    def dtype(self):
        """The numpy dtype of the same values, so that numpy takes an NKI dtype where it takes
        its own (``np.zeros(shape, dtype=nl.float32)``, as test code written for NKI does).
        TypeError for a dtype numpy lacks (bfloat16, the fp8 and x4 dtypes)."""
        if self.name not in _NUMPY_NAMES:
            raise TypeError(f"nl.{self.name} has no numpy dtype (numpy lacks it; nkisim's arrays "
                            f"carry it as described in nki/_arrays.py)")
        return np.dtype(_NUMPY_NAMES[self.name])


_C = _nkisim.DType
_NUMPY_NAMES = {"float32": "float32", "float16": "float16", "int8": "int8", "uint8": "uint8",
                "int32": "int32", "int16": "int16", "uint16": "uint16", "uint32": "uint32", "bool_": "bool"}
float32 = DType("float32", _C.fp32)
bfloat16 = DType("bfloat16", _C.bf16)
float16 = DType("float16", _C.fp16)
float8_e4m3 = DType("float8_e4m3", _C.fp8_e4m3)
float8_e4m3fn = DType("float8_e4m3fn", _C.fp8_e4m3fn)
float8_e5m2 = DType("float8_e5m2", _C.fp8_e5m2)
int8 = DType("int8", _C.int8)
uint8 = DType("uint8", _C.uint8)
int32 = DType("int32", _C.int32)
int16 = DType("int16", _C.int16)
uint16 = DType("uint16", _C.uint16)
uint32 = DType("uint32", _C.uint32)
float8_e4m3fn_x4 = DType("float8_e4m3fn_x4", _C.fp8_e4m3fn_x4)
float8_e5m2_x4 = DType("float8_e5m2_x4", _C.fp8_e5m2_x4)
float4_e2m1fn_x4 = DType("float4_e2m1fn_x4", _C.fp4_e2m1fn_x4)
# NKI's bool is a byte holding 0 / 1 (comparisons and logical ops give it).
bool_ = DType("bool_", _C.uint8)

# Dtypes of the 0.6 reference the runtime has no storage for: resolve() refuses them by name.
_UNSUPPORTED_DTYPES = {
    "tfloat32": "the runtime has no tf32 dtype (use float32)",
    "float8_e8m0fnu": "E8M0 scales are held as uint8 (nisa.quantize_mx writes them so)",
}

_ALL = [float32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float8_e5m2, int8, uint8, int32,
        int16, uint16, uint32, float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4]
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"bool": bool_, "bool_": bool_, "fp32": float32, "bf16": bfloat16,
                 "fp16": float16, "float": float32, "half": float16})
_BY_C = {d.c: d for d in _ALL}
_BY_NUMPY = {np.dtype(np.float32): float32, np.dtype(np.float16): float16,
             np.dtype(np.int8): int8, np.dtype(np.uint8): uint8, np.dtype(np.int32): int32,
             np.dtype(np.int16): int16, np.dtype(np.uint16): uint16, np.dtype(np.uint32): uint32,
             np.dtype(np.bool_): bool_, np.dtype(np.float64): float32,
             np.dtype(np.int64): int32}


def resolve(dtype):
    """The DType for a DType, numpy dtype or name; None stays None."""
    if dtype is None or isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        if dtype in _UNSUPPORTED_DTYPES:
            from nki._api import unsupported_error
            raise unsupported_error(f"nki.language.{dtype}", _UNSUPPORTED_DTYPES[dtype])
        if dtype in _BY_NAME:
            return _BY_NAME[dtype]
        raise ValueError(f"unknown NKI dtype {dtype!r}; known: {sorted(_BY_NAME)}")
    if isinstance(dtype, _UnsupportedDType):
        from nki._api import unsupported_error
        raise unsupported_error(f"nki.language.{dtype.name}", _UNSUPPORTED_DTYPES[dtype.name])
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError(f"not an NKI dtype: {dtype!r}") from None


def from_c(c):
    return _BY_C[c]


def c_of(dtype):
    """The runtime enum of a dtype argument (None stays None)."""
    d = resolve(dtype)
    return None if d is None else d.c


class _UnsupportedDType:
    """A 0.6 dtype name the runtime cannot store: using it raises NotImplementedError."""

    def __init__(self, name):
        self.name = name
        self._nkisim_unsupported = _UNSUPPORTED_DTYPES[name]

    def __repr__(self):
        return f"nl.{self.name} (not implemented by nkisim)"


tfloat32 = _UnsupportedDType("tfloat32")
float8_e8m0fnu = _UnsupportedDType("float8_e8m0fnu")


class MemoryRegion(enum.Enum):
    """Where a tensor lives. ``hbm`` is the private HBM of a program (LNC 1 inputs)."""
    sbuf = "sbuf"
    psum = "psum"
    hbm = "hbm"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
hbm = MemoryRegion.hbm
private_hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm


def _region(buffer):
    if isinstance(buffer, MemoryRegion):
        return buffer
    return MemoryRegion(str(buffer))


def is_hbm(buffer):
    return _region(buffer) in (hbm, private_hbm, shared_hbm)


def is_on_chip(buffer):
    return _region(buffer) in (sbuf, psum)


def is_psum(buffer):
    return _region(buffer) is psum


def is_sbuf(buffer):
    return _region(buffer) is sbuf
