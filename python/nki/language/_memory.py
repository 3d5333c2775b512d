"""nl's creation and memory ops: tensors in SBUF / PSUM (tiles on the current core) or HBM
(runtime TensorViews), DMA between them (load / store), and views that move nothing."""
import numbers

import numpy as np

from nki._runtime import _nkisim
from nki import _runtime
from nki import dtype as _dtypes
from nki.language._ops import _tile
from nki.tensor import NkiTensor, wrap

_nl = _nkisim.nl


def _shape(shape, op="nl.ndarray"):
    """The shape as a list of ints; anything but positive integers raises NkiValidationError."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise _nkisim.NkiValidationError(
            f"invalid argument: {op}: shape {shape!r}: must be a tuple of positive "
            f"integers") from None
    out = []
    for i, s in enumerate(dims):
        integral = isinstance(s, numbers.Integral) or hasattr(s, "__index__")
        if not integral or isinstance(s, (bool, float)):
            raise _nkisim.NkiValidationError(
                f"invalid argument: {op}: shape {tuple(dims)!r}: dim {i} is {s!r} "
                f"({type(s).__name__}); every dim must be a positive integer")
        v = int(s)
        if v <= 0:
            raise _nkisim.NkiValidationError(
                f"invalid argument: {op}: shape {tuple(dims)!r}: dim {i} is {v}; every dim "
                f"must be a positive integer")
        out.append(v)
    return out


def _check_hbm_capacity(shape, dtype, op):
    """An HBM tensor must fit in the logical core's HBM (its share of the chip's)."""
    info = _runtime.profile_info()
    lnc = max(1, _nkisim.num_programs()) if _nkisim.in_kernel() else 1
    capacity = info["hbm_bytes_per_chip"] * lnc // max(1, info["physical_cores_per_chip"])
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    if nbytes > capacity:
        raise _nkisim.NkiValidationError(
            f"out of resources: {op}: HBM tensor {tuple(shape)} {dtype.name} needs {nbytes} B; "
            f"the logical core (LNC {lnc}) of profile {info['name']} has {capacity} B of HBM "
            f"(hbm_bytes_per_chip * LNC / physical_cores_per_chip)")


def _tile_shape(shape, op="nl.ndarray"):
    """An on-chip shape: a 1-D (P,) becomes (P, 1), as a tile has a partition and a free dim."""
    if not _nkisim.in_kernel():
        raise _nkisim.NkiValidationError(
            f"invalid argument: {op}: SBUF and PSUM tensors exist only while a kernel runs: call "
            f"it from an nki.jit function (kernel(...) or nki.simulate(kernel)(...))")
    shape = _shape(shape, op)
    return shape + [1] if len(shape) == 1 else shape


def _hbm(shape, dtype, buffer, name):
    """A new HBM tensor. Under LNC 2 the programs run the same allocations in the same order, and
    the n-th shared one (nl.shared_hbm or nl.hbm) of either program is one tensor of both, as
    the two cores share HBM; nl.private_hbm stays each program's own."""
    region = _dtypes._region(buffer)
    if region is not _dtypes.private_hbm and _nkisim.num_programs() > 1:
        return _runtime.shared_allocation(_shape(shape), dtype, name,
                                         lambda: _new_hbm(shape, dtype, region, name))
    return _new_hbm(shape, dtype, region, name)


def _new_hbm(shape, dtype, region, name):
    _check_hbm_capacity(_shape(shape), dtype, "nl.ndarray")
    view = _nkisim.TensorView.create(_shape(shape), _dtypes.c_of(dtype), name or "hbm_tensor")
    return NkiTensor(view, region, name)


def ndarray(shape, dtype, buffer=_dtypes.sbuf, name="", address=None):
    """An uninitialised tensor (float tiles read as NaN until written; HBM starts at zero)."""
    dtype = _dtypes.resolve(dtype)
    if _dtypes.is_hbm(buffer):
        return _hbm(shape, dtype, buffer, name)
    psum = _dtypes.is_psum(buffer)
    make = lambda: _nl.ndarray(_tile_shape(shape), dtype.c, psum, name or "ndarray")  # noqa: E731
    if address is not None:
        tile = _runtime.placed_tile((psum, _address(address), tuple(_shape(shape)), dtype.name),
                                    make)
    else:
        tile = make()
    return NkiTensor(tile, _dtypes._region(buffer), name)


def _address(address):
    """nl.ndarray's address=(partition, byte offset) (or a byte offset): integers >= 0."""
    parts = tuple(address) if isinstance(address, (tuple, list)) else (0, address)
    if len(parts) != 2 or not all(isinstance(a, int) and a >= 0 for a in parts):
        raise _nkisim.NkiValidationError(
            f"invalid argument: nl.ndarray: address={address!r} must be (partition, byte offset) "
            f"with non-negative integers")
    return parts


def full(shape, fill_value, dtype, buffer=_dtypes.sbuf, name=""):
    """A tensor filled with fill_value (on chip: one memset on the Vector engine)."""
    dtype = _dtypes.resolve(dtype)
    if _dtypes.is_hbm(buffer):
        t = _hbm(shape, dtype, buffer, name)
        t._h.write(np.full(_shape(shape), fill_value, dtype=np.float32))
        return t
    tile = _nl.full(_tile_shape(shape, "nl.full"), float(fill_value), dtype.c,
                    _dtypes.is_psum(buffer), name or "full")
    return NkiTensor(tile, _dtypes._region(buffer), name)


def zeros(shape, dtype, buffer=_dtypes.sbuf, name=""):
    if _dtypes.is_hbm(buffer):
        return _hbm(shape, _dtypes.resolve(dtype), buffer, name)  # HBM tensors start zeroed
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=_dtypes.sbuf, name=""):
    return full(shape, 1.0, dtype, buffer, name)


def zeros_like(x, dtype=None, buffer=None, name=""):
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def empty_like(x, dtype=None, buffer=None, name=""):
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def rand(shape, dtype, buffer=_dtypes.sbuf, name=""):
    return wrap(_nl.rand(_shape(shape), _dtypes.c_of(dtype)))


def random_seed(seed):
    if isinstance(seed, NkiTensor):
        seed = int(np.asarray(seed.numpy()).ravel()[0])
    _nl.random_seed(int(seed) & 0xFFFFFFFF)


def _hbm_handle(x, op, operand):
    if not isinstance(x, NkiTensor) or x.on_chip:
        raise _nkisim.NkiValidationError(
            f"invalid argument: {op}: operand '{operand}' must be an HBM tensor, got {x!r}")
    return x._h


def load(src, dtype=None):
    """A new SBUF tile holding src (an HBM tensor): one DMA."""
    return wrap(_nl.load(_hbm_handle(src, "load", "src"), _dtypes.c_of(dtype)))


def store(dst, value):
    """dst (HBM) = value (a tile): one DMA."""
    _nl.store(_hbm_handle(dst, "store", "dst"), _tile(value, "store", "value"))


def load_transpose2d(src, dtype=None):
    return wrap(_nl.load_transpose2d(_hbm_handle(src, "load_transpose2d", "src"),
                                     _dtypes.c_of(dtype)))


def gather_flattened(data, indices, axis=0, dtype=None):
    return wrap(_nl.gather_flattened(_tile(data, "gather_flattened", "data"),
                                     _tile(indices, "gather_flattened", "indices"),
                                     _dtypes.c_of(dtype)))


def expand_dims(x, axis):
    if not x.on_chip:
        return x.expand_dim(axis)
    return x._view(_nl.expand_dims(x._h, int(axis)))


def broadcast_to(x, shape, dtype=None):
    """A view of x repeated along its size-1 free dims. An on-chip x of one partition broadcast
    to more partitions is copied instead (the partition dim has no zero stride): a ones-vector
    nc_matmul on the PE per 512 columns, each evacuated from PSUM by a Vector tensor_copy, as the
    hardware's partition broadcast is done."""
    shape = _shape(shape, "nl.broadcast_to")
    if x.on_chip and x.shape[0] == 1 and shape[0] > 1:
        x = _partition_broadcast(x, shape[0])
    view = x._view(_nl.broadcast_to(x._h, shape))
    if dtype is None or _dtypes.resolve(dtype) is x.dtype:
        return view
    from nki.language._ops import copy
    return copy(view, dtype)


def _partition_broadcast(x, partitions):
    """x [1, free...] (on chip) copied onto `partitions` partitions: out = ones[1, P].T @ x."""
    if not _nkisim.dtype_is_float(x.dtype.c):
        raise _nkisim.NkiValidationError(
            f"invalid argument: nl.broadcast_to: {x!r} to {partitions} partitions: a partition "
            f"broadcast runs on the PE, which takes float dtypes, not {x.dtype.name}")
    if partitions > 128:
        raise _nkisim.NkiValidationError(
            f"invalid argument: nl.broadcast_to: {x!r} to {partitions} partitions: at most 128")
    n = x.size
    src = x._h
    if not src.free_contiguous():
        src = _nl.ndarray([1, n], x.dtype.c, False, "broadcast_to.src")
        _nkisim.isa.tensor_copy(src.reshape(list(x.shape[1:])), x._h, _nkisim.Engine.Vector)
    src = src.reshape([n])
    ones = _nl.full([1, partitions], 1.0, x.dtype.c, False, "broadcast_to.ones")
    out = _nl.ndarray([partitions, n], x.dtype.c, False, "broadcast_to")
    for c0 in range(0, n, 512):
        w = min(512, n - c0)
        acc = _nl.ndarray([partitions, w], _dtypes.float32.c, True, "broadcast_to.psum")
        _nkisim.isa.nc_matmul(acc, ones, src.slice(1, c0, c0 + w), False)
        _nkisim.isa.tensor_copy(out.slice(1, c0, c0 + w), acc, _nkisim.Engine.Vector)
    return NkiTensor(out.reshape(list(x.shape[1:])), _dtypes.sbuf, x.name)


def shared_constant(constant, dtype=None):
    """An HBM tensor holding a host array or a .npy file's (a constant the kernel reads; loaded
    before the kernel runs, so it costs no instruction)."""
    array = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    d = _dtypes.resolve(dtype) if dtype is not None else _dtypes.resolve(array.dtype)
    t = _hbm(array.shape, d, _dtypes.shared_hbm, "shared_constant")
    t._h.write(array)
    return t


def shared_identity_matrix(n, dtype=_dtypes.uint8, dst=None):
    """The n x n identity in SBUF (or in dst), a constant loaded before the kernel runs: written
    by the host, no instruction."""
    if dst is None:
        dst = ndarray((int(n), int(n)), dtype, buffer=_dtypes.sbuf, name="identity")
    dst._h.write(np.eye(int(n), dtype=np.float32))
    return dst


def device_print(print_prefix, tensor):
    """Prints the tensor's values now (a host read: no simulated cost)."""
    print(print_prefix, tensor.numpy() if isinstance(tensor, NkiTensor) else tensor)
