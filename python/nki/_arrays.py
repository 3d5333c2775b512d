"""How host arrays cross into a kernel and back.

The rule (docs/python.md, "Dtypes at the boundary"):
* A numpy array enters HBM in its own dtype: float32, float16, int8, uint8, int16, int32, uint16 and
  uint32 as they are; bool as uint8; float64 / int64 are narrowed to float32 / int32.
* numpy has no bfloat16 or fp8 (and Debian packages no ml_dtypes), so such an input is stated
  explicitly: ``nkisim.typed(array, nl.bfloat16)`` enters HBM as bf16, its values rounded to
  nearest even (fp8: saturating). Outputs in bf16 / fp8 come back as float32 arrays holding the
  exact stored values.
* A torch tensor (when ``import torch`` works) enters in its own dtype, bfloat16 included, and
  outputs come back as torch tensors of the kernel's dtype.
Inputs are updated in place when the kernel wrote their HBM tensor.
"""
import numpy as np

from nki._runtime import _nkisim
from nki import dtype as _dtypes
from nki.tensor import NkiTensor


class Typed:
    """A host array with the NKI dtype it should have in HBM (see the module docstring)."""

    def __init__(self, array, dtype):
        self.array = np.asarray(array)
        self.dtype = _dtypes.resolve(dtype)

    def __repr__(self):
        return f"nkisim.typed({self.array.shape}, {self.dtype!r})"


def typed(array, dtype):
    return Typed(array, dtype)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


_TORCH_NAMES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
                "int8": "int8", "uint8": "uint8", "int32": "int32", "bool": "bool_",
                "float64": "float32", "int64": "int32",
                "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


class Argument:
    """One kernel argument that is an array: its HBM tensor and how to hand results back."""

    def __init__(self, value, name, buffer):
        self.name = name
        self.value = value
        self.torch_dtype = None
        array, dtype = self._host(value)
        self.array = array
        view = _nkisim.TensorView.create(list(array.shape), dtype.c, name)
        view.write(array)
        self.tensor = NkiTensor(view, buffer, name)

    def _host(self, value):
        if isinstance(value, Typed):
            return value.array, value.dtype
        torch = _torch()
        if torch is not None and isinstance(value, torch.Tensor):
            self.torch_dtype = value.dtype
            torch_name = str(value.dtype).replace("torch.", "")
            if torch_name not in _TORCH_NAMES:
                raise _nkisim.NkiValidationError(
                    f"invalid argument: kernel argument '{self_name(self)}': torch dtype "
                    f"{value.dtype} has no HBM dtype in nkisim (supported: "
                    f"{', '.join(sorted(_TORCH_NAMES))})")
            dtype = _dtypes.resolve(_TORCH_NAMES[torch_name])
            return value.detach().cpu().float().numpy() if dtype.c not in _NATIVE else \
                value.detach().cpu().numpy(), dtype
        array = np.asarray(value)
        return array, _dtypes.resolve(array.dtype)

    def write_back(self):
        """Copies the HBM tensor back into the caller's array if the kernel wrote it."""
        if self.tensor._h.written_at <= 0:
            return
        result = self.tensor._h.read()
        if self.torch_dtype is not None:
            self.value.copy_(_torch().from_numpy(result).to(self.torch_dtype))
        elif isinstance(self.value, Typed):
            self.value.array[...] = result
        elif isinstance(self.value, np.ndarray) and self.value.flags.writeable:
            self.value[...] = result


_NATIVE = {d.c for d in (_dtypes.float32, _dtypes.float16, _dtypes.int8, _dtypes.uint8,
                         _dtypes.int32, _dtypes.int16, _dtypes.uint16, _dtypes.uint32)}


def self_name(arg):
    return arg.name


def is_array(value):
    if isinstance(value, (np.ndarray, Typed)):
        return True
    torch = _torch() if type(value).__module__.startswith("torch") else None
    return torch is not None and isinstance(value, torch.Tensor)


def to_host(value, torch_out=False):
    """A kernel's return value with every HBM NkiTensor replaced by a host array."""
    if isinstance(value, NkiTensor):
        if value.on_chip:
            return value.numpy()
        array = value._h.read()
        if torch_out:
            torch = _torch()
            name = "bool" if value.dtype.name == "bool_" else value.dtype.name
            # A dtype torch lacks comes back in one that holds its values: fp8 e4m3 (trn2) as
            # float32, uint16 / uint32 (torch 1.13 has neither) as int32 / int64.
            if array.dtype in (np.uint16, np.uint32):
                array = array.astype(np.int32 if array.dtype == np.uint16 else np.int64)
            t = torch.from_numpy(array)
            return t.to(getattr(torch, name, t.dtype)) if hasattr(torch, name) and \
                name not in ("uint16", "uint32") else t
        return array
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(v, torch_out) for v in value)
    if isinstance(value, dict):
        return {k: to_host(v, torch_out) for k, v in value.items()}
    return value
