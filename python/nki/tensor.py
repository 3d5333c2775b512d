"""NkiTensor: NKI's tensor type over the runtime's handles.

An on-chip tensor (SBUF, PSUM) holds a ``_nkisim.Tile``, an HBM tensor a ``_nkisim.TensorView``;
every view method maps onto the runtime's view of the same name, so the view rules and their
errors are the runtime's. Indexing follows NKI: on chip, dim 0 is the partition dim and an integer
on it keeps a size-1 slice (a result is always at least 2-D); in HBM an integer removes its dim
(a result is at least 1-D).
"""
import numbers
import typing

from nki._runtime import _nkisim
from nki._api import unsupported_error
from nki import dtype as _dtypes


class DynSlice:
    """``nl.ds(start, size)``: the slice [start, start + size) of one dim."""

    __slots__ = ("start", "size", "step")

    def __init__(self, start, size, step=1):
        if isinstance(start, NKIObject) or isinstance(size, NKIObject):
            raise unsupported_error("nki.language.ds with a tensor start or size",
                                    "dynamic (run-time) slicing is not modelled")
        self.start, self.size, self.step = int(start), int(size), int(step)

    def __repr__(self):
        return f"nl.ds({self.start}, {self.size})"


def ds(start, size):
    return DynSlice(start, size)


class NKIObject:
    """Base class of NKI's user classes: NKI compiles every subclass as a data class whose
    fields all default to ``None`` unless they give a default (the NKI language guide's "Class
    Support": ``def __init__(self, x = None, y = False)``).

    So here: a subclass's annotated fields without a default get ``None`` as their default, and
    its public class attributes without an annotation (``section_idx = None``) get an
    annotation, so ``@dataclass`` on the subclass takes both as arguments of its ``__init__``,
    as NKI's kernels construct them (the NKI library leaves fields out of such calls). Without
    ``@dataclass`` the default ``__init__`` takes the annotated fields, positionally in order or
    by keyword."""

    def __init__(self, *args, **kwargs):
        if args:
            names = _field_names(type(self))
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__}() takes {len(names)} positional "
                                f"field(s) ({', '.join(names) or 'none'}), got {len(args)}")
            for name, value in zip(names, args):
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__}() got field {name!r} twice")
                kwargs[name] = value
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__")
        for name, annotation in (own or {}).items():
            if name not in cls.__dict__ and not _is_classvar(annotation):
                setattr(cls, name, None)  # NKI's default for a field given no default
        added = {}
        for name, value in list(cls.__dict__.items()):
            if name.startswith("_") or (own and name in own):
                continue
            if isinstance(value, (list, dict, set, type)) or callable(value) or \
                    hasattr(value, "__get__"):
                continue
            added[name] = "typing.Any"
        if added:
            annotations = dict(own or {})
            annotations.update(added)  # after the annotated ones: each has a default
            cls.__annotations__ = annotations


def _is_classvar(annotation):
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return annotation is typing.ClassVar or text.startswith(("ClassVar", "typing.ClassVar"))


def _field_names(cls):
    names = []
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            if name not in names and not _is_classvar(annotation):
                names.append(name)
    return names


def _not_here(what):
    return unsupported_error(f"nki.language.NkiTensor.{what}", _REASONS[what])


_REASONS = {
    "permute": "on-chip tiles have no free-dim permutation in the runtime's Tile views "
               "(HBM tensors permute)",
    "rearrange": "einops-style patterns are not parsed; use reshape / permute",
    "indirect": "tensor indirection (NeuronCore-v4) is not modelled",
}


class NkiTensor(NKIObject):
    """A tensor in SBUF, PSUM or HBM; views share storage with the tensor they come from."""

    __slots__ = ("_h", "buffer", "_base", "_acc", "name")

    def __init__(self, handle, buffer=_dtypes.sbuf, name="", base=None):
        self._h = handle
        self.buffer = buffer
        self.name = name
        # The tensor this is a view of (None for a tensor that owns its storage: a reference to
        # itself would make a cycle, and the tile would wait for the cycle collector to be freed).
        self._base = base
        self._acc = None  # nc_matmul's accumulate=None inference, kept on the base tensor

    # --- attributes -------------------------------------------------------------------------
    @property
    def shape(self):
        return self._h.shape

    @property
    def dtype(self):
        return _dtypes.from_c(self._h.dtype)

    @property
    def ndim(self):
        return len(self._h.shape)

    @property
    def size(self):
        n = 1
        for s in self._h.shape:
            n *= s
        return n

    @property
    def on_chip(self):
        return isinstance(self._h, _nkisim.Tile)

    @property
    def strides(self):
        if not self.on_chip:
            return self._h.strides
        return (self._partition_stride(),) + self._h.free_strides

    @property
    def offset(self):
        return self._h.offset if not self.on_chip else self._h.free_offset

    def _partition_stride(self):
        # Partitions are separate memories: report the row length of the buffer's free dims.
        n = 1
        for s in self._h.shape[1:]:
            n *= s
        return n

    def __repr__(self):
        return f"NkiTensor({self.shape}, {self.dtype!r}, buffer={self.buffer.name})"

    def _view(self, handle):
        base = self._base if self._base is not None else self
        return NkiTensor(handle, self.buffer, self.name, base)

    # --- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        key = _expand_ellipsis(key, len(self._h.shape))
        h = self._h
        on_chip = isinstance(h, _nkisim.Tile)
        dim = 0
        for k in key:
            if isinstance(k, slice):
                size = h.shape[dim]
                start, stop, step = _slice_bounds(k, size)
                if (start, stop, step) != (0, size, 1):
                    h = h.slice(dim, start, stop, step)
                dim += 1
            elif isinstance(k, DynSlice):
                h = h.slice(dim, k.start, k.start + k.size * k.step, k.step)
                dim += 1
            elif isinstance(k, numbers.Integral):
                index = int(k)
                if index < 0:
                    index += h.shape[dim]
                keep = (dim == 0 or len(h.shape) <= 2) if on_chip else len(h.shape) <= 1
                if keep:
                    h = h.slice(dim, index, index + 1)
                    dim += 1
                else:
                    h = h.select(dim, index)
            else:
                raise TypeError(f"NkiTensor index {k!r}: use int, slice, ..., or nl.ds")
        return self._view(h)

    def __setitem__(self, key, value):
        """t[key] = tensor (a tensor_copy on chip, else a DMA) or a number (a memset)."""
        dst = self[key]
        isa = _nkisim.isa
        if isinstance(value, NkiTensor):
            if dst.on_chip and value.on_chip:
                isa.tensor_copy(dst._h, value._h, _nkisim.Engine.Vector)
            else:
                isa.dma_copy(dst._h, value._h)
        elif dst.on_chip:
            isa.memset(dst._h, float(value), _nkisim.Engine.Vector)
        else:
            raise _nkisim.NkiValidationError(
                f"invalid argument: NkiTensor.__setitem__: {dst!r} = {value!r}: a number can be "
                f"set only in SBUF or PSUM (memset), not in HBM")

    # --- views ------------------------------------------------------------------------------
    def slice(self, dim, start, end, step=1):
        return self._view(self._h.slice(dim, start, end, step))

    def select(self, dim, index):
        """Drops `dim` at `index`: an int, a register, or a one-element tensor whose value is read
        now (the kernel runs eagerly, so the hardware's run-time index is known)."""
        return self._view(self._h.select(dim, host_int(index)))

    def reshape(self, shape):
        shape = tuple(int(s) for s in shape)
        shape = _infer(shape, self.size)
        if self.on_chip:
            if shape[0] != self.shape[0]:
                raise _nkisim.NkiValidationError(
                    f"invalid argument: reshape: on-chip tensor {self.shape} to {shape}: the "
                    f"partition dim {self.shape[0]} must stay")
            return self._view(self._h.reshape(list(shape[1:])))
        return self._view(self._h.reshape(list(shape)))

    def permute(self, dims):
        dims = tuple(int(d) for d in dims)
        if dims == tuple(range(self.ndim)):
            return self
        if self.on_chip:
            raise _not_here("permute")
        return self._view(self._h.permute(list(dims)))

    def broadcast(self, dim, size):
        if self.on_chip:
            return self._view(self._h.broadcast(dim, size))
        shape = list(self.shape)
        shape[dim] = int(size)
        return self._view(_nkisim.nl.broadcast_to(self._h, shape))

    def expand_dim(self, dim):
        shape = list(self.shape)
        shape.insert(dim, 1)
        return self.reshape(shape)

    def squeeze_dim(self, dim):
        shape = list(self.shape)
        if shape[dim] != 1:
            raise _nkisim.NkiValidationError(
                f"invalid argument: squeeze_dim: dim {dim} of {self.shape} has size "
                f"{shape[dim]}, not 1")
        del shape[dim]
        return self.reshape(shape)

    def reshape_dim(self, dim, shape):
        inner = _infer(tuple(int(s) for s in shape), self.shape[dim])
        full = self.shape[:dim] + inner + self.shape[dim + 1:]
        return self.reshape(full)

    def flatten_dims(self, start_dim, end_dim):
        merged = 1
        for s in self.shape[start_dim:end_dim + 1]:
            merged *= s
        return self.reshape(self.shape[:start_dim] + (merged,) + self.shape[end_dim + 1:])

    def view(self, dtype):
        return self._view(self._h.bitcast(_dtypes.c_of(dtype)))

    reinterpret_cast = view

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0,
           dtype=None):
        if self.on_chip:
            if vector_offset is not None:
                raise _nkisim.NkiValidationError(
                    f"invalid argument: NkiTensor.ap of {self!r}: vector_offset on an on-chip "
                    f"tensor; per-partition indirect addressing (vector_offset) addresses HBM "
                    f"tensors only")
            return self._tile_ap(pattern, offset, scalar_offset, indirect_dim, dtype)
        h = self._h if dtype is None else self._h.bitcast(_dtypes.c_of(dtype))
        base = h.offset + (0 if offset is None else int(offset))
        if vector_offset is not None:
            return _IndirectView.make(self, h, base, pattern, scalar_offset, vector_offset,
                                      indirect_dim)
        if scalar_offset is not None:
            # The offset's value is known now (an int, a register, or a one-element tensor read
            # by the host): the access lands where the hardware's indirect DMA would put it.
            base += host_int(scalar_offset) * h.strides[indirect_dim]
        return self._view(h.ap(base, [(int(s), int(c)) for s, c in pattern]))

    def _tile_ap(self, pattern, offset, scalar_offset, indirect_dim, dtype):
        """SBUF / PSUM: pattern[0] is [partition step, partitions] (the partitions are always
        consecutive; the step is the row length the storage offset counts in), the rest the
        free dims' [step, count]; offsets are elements from this view's first element."""
        pattern = [(int(s), int(c)) for s, c in pattern]
        if not pattern:
            raise _nkisim.NkiValidationError(
                f"invalid argument: NkiTensor.ap of {self!r}: the pattern is empty; it needs "
                f"[partition step, partitions] first")
        h = self._h if dtype is None else self._h.bitcast(_dtypes.c_of(dtype))
        base = 0 if offset is None else int(offset)
        if scalar_offset is not None:
            base += host_int(scalar_offset) * self.strides[indirect_dim]
        try:
            return self._view(h.ap(pattern[0][1], pattern[1:], base))
        except _nkisim.NkiValidationError as e:
            # NKI builds an access pattern without checking it; only an access through it is
            # checked (kernels make such views in loops and use only those in range).
            return _OutOfRangeView(e, self.buffer, self.name)

    def get_pattern(self):
        return [[int(s), int(c)] for s, c in zip(self.strides, self.shape)]

    def is_contiguous(self):
        if self.on_chip:
            return self._h.free_contiguous()
        return self._h.is_contiguous()

    def is_indirect(self):
        return False

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        raise _not_here("rearrange")

    def vector_select(self, dim, vector_offset):
        """Per-partition indirect addressing of an HBM tensor (NKI 0.6): row p of the result is
        row vector_offset[p] of dim 0; the result has vector_offset.shape[0] rows and this
        tensor's other dims, and is an operand of nisa.dma_copy (a gather when it is the source,
        a scatter when it is the destination; runtime/nisa/dma_indirect.h). The reference's
        rules, each refused by name: dim 0 only, HBM tensors only, one dynamic select per tensor,
        not on a broadcast dim (stride 0), vector_offset an SBUF [P, 1] integer tile."""
        where = f"NkiTensor.vector_select of {self!r}"
        if self.on_chip:
            raise _nkisim.NkiValidationError(
                f"invalid argument: {where}: the tensor is on chip; vector_select addresses HBM "
                f"tensors only (per-partition indirect DMA addressing)")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim != 0:
            raise _nkisim.NkiValidationError(
                f"invalid argument: {where}: dim {dim!r}: vector_select selects dim 0 only")
        h = self._h
        if h.strides[0] == 0:
            raise _nkisim.NkiValidationError(
                f"invalid argument: {where}: dim 0 is a broadcast (stride 0); vector_select "
                f"needs a dim with a stride")
        if (not isinstance(vector_offset, NkiTensor) or not vector_offset.on_chip
                or len(vector_offset.shape) != 2 or vector_offset.shape[1] != 1
                or _nkisim.dtype_is_float(vector_offset.dtype.c)):
            raise _nkisim.NkiValidationError(
                f"invalid argument: {where}: vector_offset {vector_offset!r} must be an SBUF "
                f"tile of one integer index per partition, shape (P, 1)")
        pattern = [(h.strides[0], vector_offset.shape[0])]
        pattern += [(st, c) for st, c in zip(h.strides[1:], h.shape[1:])]
        return _IndirectView.make(self, h, h.offset, pattern, None, vector_offset, 0)

    def indirect(self, index, num_elem=None):
        raise _not_here("indirect")

    # Host read of the values (debugging, device_print): no simulated cost.
    def numpy(self):
        return self._h.read()

    def __bool__(self):
        """Always true, without a read: NKI compiles a kernel by tracing it, where a tensor is
        an object that is there (kernels test optional tensors with ``if params.expert_index:``,
        on chip and in HBM alike). Compare values with ``.numpy()``, not with ``if``/``assert``."""
        return True


class _OutOfRangeView(NkiTensor):
    """An access pattern that addresses outside its tile: any use raises the error it had."""

    __slots__ = ("_error",)

    def __init__(self, error, buffer, name):
        NkiTensor.__init__(self, None, buffer, name)
        self._error = error

    @property
    def _h(self):
        raise _nkisim.NkiValidationError(str(self._error))

    @_h.setter
    def _h(self, value):
        pass

    def __repr__(self):
        return f"NkiTensor(out-of-range access pattern: {self._error})"


class _IndirectView(NkiTensor):
    """An HBM access pattern whose first dim is addressed per partition by a run-time index
    tile (``ap(..., vector_offset=idx, indirect_dim=d)``): row p is at the pattern's offset +
    idx[p] x the stride of dim d. Only dma_copy moves data through it
    (runtime/nisa/dma_indirect.h); anything else refuses it."""

    __slots__ = ("_rows", "_index", "_index_stride")

    @classmethod
    def make(cls, tensor, h, base, pattern, scalar_offset, vector_offset, indirect_dim):
        pattern = [(int(st), int(c)) for st, c in pattern]
        if not isinstance(vector_offset, NkiTensor) or not vector_offset.on_chip:
            raise _nkisim.NkiValidationError(
                f"invalid argument: NkiTensor.ap of {tensor!r}: vector_offset must be an SBUF "
                f"tile of one index per partition, got {vector_offset!r}")
        if not pattern or not 0 <= int(indirect_dim) < len(h.shape):
            raise _nkisim.NkiValidationError(
                f"invalid argument: NkiTensor.ap of {tensor!r}: with vector_offset the pattern "
                f"needs [stride, rows] first and indirect_dim {indirect_dim} must be a dim of "
                f"{tuple(h.shape)}")
        stride = h.strides[int(indirect_dim)]
        if scalar_offset is not None:
            base += host_int(scalar_offset) * stride
        view = cls(None, tensor.buffer, tensor.name)
        # dim 0's stride is 0: each row's start comes from the index at run time
        view._rows = h.ap(base, [(0, pattern[0][1])] + pattern[1:])
        view._index = vector_offset._h
        view._index_stride = int(stride)
        return view

    @property
    def _h(self):
        raise _nkisim.NkiValidationError(
            "invalid argument: an indirect HBM view (NkiTensor.ap with vector_offset) is an "
            "operand of nisa.dma_copy only")

    @_h.setter
    def _h(self, value):
        pass

    @property
    def shape(self):
        return self._rows.shape

    @property
    def dtype(self):
        return _dtypes.from_c(self._rows.dtype)

    def is_indirect(self):
        return True

    def vector_select(self, dim, vector_offset):
        raise _nkisim.NkiValidationError(
            f"invalid argument: NkiTensor.vector_select of {self!r}: the view is already "
            f"indirect; one dynamic select per tensor")

    def __repr__(self):
        return f"NkiTensor(indirect HBM rows {tuple(self._rows.shape)} of '{self.name}')"


def host_int(x):
    """An index known now: an int, a register (anything with __index__), or the first element of
    a tensor, read on the host (the kernel runs eagerly)."""
    if x is None:
        return 0
    if isinstance(x, NkiTensor):
        return int(x.numpy().ravel()[0])
    return int(x)


def _expand_ellipsis(key, rank):
    if not any(k is Ellipsis for k in key):
        return key
    i = next(i for i, k in enumerate(key) if k is Ellipsis)
    fill = rank - (len(key) - 1)
    return key[:i] + (slice(None),) * fill + key[i + 1:]


def _slice_bounds(k, size):
    step = 1 if k.step is None else int(k.step)
    start = 0 if k.start is None else int(k.start)
    stop = size if k.stop is None else int(k.stop)
    if start < 0:
        start += size
    if stop < 0:
        stop += size
    return start, stop, step


def _infer(shape, total):
    if -1 not in shape:
        return shape
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    return tuple(total // known if s == -1 else s for s in shape)


def wrap(handle, buffer=None, name=""):
    """An NkiTensor for a runtime handle (an op's result)."""
    if buffer is None:
        if isinstance(handle, _nkisim.Tile):
            buffer = _dtypes.psum if handle.is_psum else _dtypes.sbuf
        else:
            buffer = _dtypes.shared_hbm
    return NkiTensor(handle, buffer, name)
