"""nki.isa (nisa) of NKI 0.6 on nkisim: each instruction is the runtime's nisa instruction
(runtime/nisa/*.h), with its operand rules, result and cost on the current core's timeline. A
broken rule raises NkiValidationError (an AssertionError, as the NKI simulator guide shows) with
the runtime's message: instruction, operand, shape, dtype, memory and the rule."""
import itertools

from nki import _api, _runtime
from nki._runtime import _nkisim
from nki import dtype as _dtypes
from nki.isa.constants import (  # noqa: F401
    dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode, nc_version, oob_mode,
    reduce_cmd, scalar_engine, tensor_engine, unknown_engine, vector_engine)
from nki.language._ops import act_of, alu_of, equal, maximum, power, rsqrt
from nki.tensor import NKIObject, NkiTensor, _IndirectView

_isa = _nkisim.isa
NkiValidationError = _nkisim.NkiValidationError

_RC = reduce_cmd  # the parameters named reduce_cmd shadow the class


class NkiInstruction(NKIObject):
    """What an instruction returns. depends_on() is accepted and changes nothing: nkisim's
    scoreboard already orders every instruction after the writes it reads."""

    def __init__(self, handle=None):
        self.handle = handle

    def depends_on(self, *producers):
        return self


_DONE = NkiInstruction()
_ENGINES = {engine.tensor: _nkisim.Engine.PE, engine.vector: _nkisim.Engine.Vector,
            engine.scalar: _nkisim.Engine.Scalar, engine.gpsimd: _nkisim.Engine.GpSimd}
_M = "nki.isa"


def _engine(e, default, instruction):
    if e is None or e is engine.unknown:
        return default
    try:
        return _ENGINES[e]
    except KeyError:
        raise NkiValidationError(
            f"invalid argument: {instruction}: engine {e} cannot run it") from None


def _t(x, instruction, operand):
    if not isinstance(x, NkiTensor):
        raise NkiValidationError(
            f"invalid argument: {instruction}: operand '{operand}' must be an NkiTensor, got "
            f"{type(x).__name__}")
    return x._h


def _tile(x, instruction, operand):
    h = _t(x, instruction, operand)
    if not isinstance(h, _nkisim.Tile):
        raise NkiValidationError(
            f"invalid argument: {instruction}: operand '{operand}' {x!r} must be in SBUF or "
            f"PSUM, not HBM")
    return h


def _scalar(x, instruction, operand):
    return _tile(x, instruction, operand) if isinstance(x, NkiTensor) else float(x)


def get_nc_version():
    return nc_version.gen4 if _runtime.profile_info()["peak_mx_tflops"] > 0 else nc_version.gen3


def get_nc_sub_version():
    return 0


# --- DMA ------------------------------------------------------------------------------------
_OOB_SKIP = oob_mode.skip  # dma_copy's argument of that name hides the enum


def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None):
    """dst = src by one DMA on the queue that frees first (any direction). An HBM side made with
    ``.ap(..., vector_offset=idx)`` is addressed per partition (runtime/nisa/dma_indirect.h);
    oob_mode.skip then skips rows outside the tensor instead of raising."""
    skip = oob_mode == _OOB_SKIP
    if isinstance(src, _IndirectView):
        _isa.dma_copy_indirect_in(_tile(dst, "dma_copy", "dst"), src._rows, src._index,
                                  src._index_stride, skip)
    elif isinstance(dst, _IndirectView):
        _isa.dma_copy_indirect_out(dst._rows, dst._index, dst._index_stride, skip,
                                   _tile(src, "dma_copy", "src"))
    else:
        _isa.dma_copy(_t(dst, "dma_copy", "dst"), _t(src, "dma_copy", "src"))
    return _DONE


_DGE = {dge_mode.unknown: _nkisim.DgeMode.auto, dge_mode.hwdge: _nkisim.DgeMode.hardware,
        dge_mode.swdge: _nkisim.DgeMode.software, dge_mode.none: _nkisim.DgeMode.auto}


def _transpose_pairs(dst, src):
    """The 2-D transposes a dma_transpose is: [R, C] -> [C, R] itself; a 3-D / 4-D one swaps the
    first and last dims ([R, i, j, C] -> [C, i, j, R], the NKI library's attention kernels), one
    2-D transpose per index of the middle dims (each its own DMA)."""
    ss, ds = tuple(src.shape), tuple(dst.shape)
    if len(ss) == 2 and len(ds) == 2:
        return [(dst, src)]
    if len(ss) != len(ds) or not 3 <= len(ss) <= 4 or ss[1:-1] != ds[1:-1] or (
            ss[0], ss[-1]) != (ds[-1], ds[0]):
        raise NkiValidationError(
            f"invalid argument: dma_transpose: src {ss} -> dst {ds}: a 3-D / 4-D transpose "
            f"swaps the first and last dims ([R, ..., C] -> [C, ..., R], middle dims equal)")
    pairs = []
    for idx in itertools.product(*(range(n) for n in ss[1:-1])):
        sel = (slice(None),) + idx + (slice(None),)
        d, s_ = dst[sel], src[sel]  # integer indices drop the middle dims
        pairs.append((d if len(d.shape) == 2 else d.reshape((ds[0], ds[-1])),
                      s_ if len(s_.shape) == 2 else s_.reshape((ss[0], ss[-1]))))
    return pairs


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None):
    """dst[C, R] (SBUF) = src[R, C]^T (HBM or SBUF) by the DMA's descriptor-generation engine;
    3-D / 4-D views swap their first and last dims."""
    n = len(src.shape)
    if axes is not None and tuple(axes) != (n - 1,) + tuple(range(1, n - 1)) + (0,):
        raise _api.unsupported_error(f"nki.isa.dma_transpose(axes={tuple(axes)})",
                                     "only the transpose that swaps the first and last dims "
                                     "is modelled")
    for d, s in _transpose_pairs(dst, src):
        _isa.dma_transpose(_tile(d, "dma_transpose", "dst"), _t(s, "dma_transpose", "src"),
                           _DGE[dge_mode])
    return _DONE


def dma_compute(dst, srcs, reduce_op=None, scales=None, unique_indices=True,
                oob_mode=oob_mode.error, name=None):
    """dst = srcs[0] * scales[0] + srcs[1] * scales[1] + ... on the DMA engines, in fp32
    (runtime/nisa/dma_compute.h); operands in HBM or SBUF. NKI 0.6: reduce_op nl.add, scales
    1.0 (None: all 1.0)."""
    if reduce_op is not None and alu_of(reduce_op, "dma_compute",
                                        "reduce_op") != _nkisim.AluOp.add:
        raise NkiValidationError(
            f"invalid argument: dma_compute: reduce_op={getattr(reduce_op, '__name__', reduce_op)}"
            f": only nl.add is supported")
    srcs = list(srcs)
    scales = [1.0] * len(srcs) if scales is None else [float(x) for x in scales]
    _isa.dma_compute(_t(dst, "dma_compute", "dst"),
                     [_t(x, "dma_compute", f"srcs[{i}]") for i, x in enumerate(srcs)], scales)
    return _DONE


# --- Tensor engine --------------------------------------------------------------------------
def _auto_accumulate(dst):
    """accumulate=None: the first matmul into a PSUM location overwrites, later ones add."""
    base = dst._base if dst._base is not None else dst
    if base._acc is None:
        base._acc = set()
    h = dst._h
    key = (h.partition_start, h.free_offset, h.shape)
    seen = key in base._acc
    base._acc.add(key)
    return seen


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    """dst (PSUM) = or += stationary.T @ moving on the PE array."""
    # is_transpose=True (transpose mode: an identity as moving) is the same product on the PE;
    # what nkisim leaves out is its bit accuracy for NaN / Inf (here 0 * Inf is NaN as in any
    # matmul).
    _check_tiling(stationary, tile_position, tile_size)
    if is_transpose and dst.dtype != _dtypes.float32:
        return _pe_transpose_mode(dst, stationary, moving)
    if accumulate is None:
        accumulate = _auto_accumulate(dst)
    _isa.nc_matmul(_tile(dst, "nc_matmul", "dst"), _tile(stationary, "nc_matmul", "stationary"),
                   _tile(moving, "nc_matmul", "moving"), bool(accumulate),
                   perf_mode in (matmul_perf_mode.double_row, "double_row"))
    return _DONE


def _pe_transpose_mode(dst, stationary, moving):
    """Transpose mode into a PSUM tile of stationary's dtype (NeuronCore-v3 on, the NKI library's
    bf16 transposes): a bit-accurate data move, dst = stationary^T, with moving the identity the
    mode requires (checked: a [K, K] identity, K = stationary's partitions)."""
    n = "nc_matmul(is_transpose=True)"
    k = stationary.shape[0]
    if tuple(moving.shape) != (k, k):
        raise NkiValidationError(
            f"invalid argument: {n}: operand 'moving' {moving!r}: must be the [{k}, {k}] "
            f"identity (transpose mode)")
    if not _runtime.timing_only():
        import numpy as np
        if not np.array_equal(moving.numpy(), np.eye(k)):
            raise NkiValidationError(
                f"invalid argument: {n}: operand 'moving' {moving!r}: must be the identity "
                f"(transpose mode moves stationary's bits; other moving values are not modelled)")
    _isa.nc_transpose(_tile(dst, n, "dst"), _tile(stationary, n, "stationary"),
                      _nkisim.Engine.PE)
    return _DONE


def _check_tiling(stationary, tile_position, tile_size):
    # PE row/column tiling runs small matmuls side by side on hardware; nkisim checks the tile
    # fits its position and size and costs the matmul as on the whole array.
    if not tile_position and not tile_size:
        return
    (row0, col0), (rows, cols) = tile_position, tile_size
    k, m = stationary.shape[0], stationary.size // stationary.shape[0]
    if k > rows or m > cols or row0 % rows or col0 % cols or row0 + rows > 128 or col0 + cols > 128:
        raise NkiValidationError(
            f"invalid argument: nc_matmul: operand 'stationary' {stationary.shape}: does not fit "
            f"tile_size {tuple(tile_size)} at tile_position {tuple(tile_position)} (the position "
            f"must be a multiple of the size, inside the 128 x 128 array)")


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """MX matmul (NeuronCore-v4 profiles: NKISIM_PROFILE=trn3)."""
    if accumulate is None:
        accumulate = _auto_accumulate(dst)
    # kernels hand over views like [128, 1, 128]: one free dim once size-1 dims are dropped
    stationary, moving, stationary_scale, moving_scale = (
        _drop_unit_free_dims(x) for x in (stationary, moving, stationary_scale, moving_scale))
    _isa.nc_matmul_mx(_tile(dst, "nc_matmul_mx", "dst"),
                      _tile(stationary, "nc_matmul_mx", "stationary"),
                      _tile(moving, "nc_matmul_mx", "moving"),
                      _tile(stationary_scale, "nc_matmul_mx", "stationary_scale"),
                      _tile(moving_scale, "nc_matmul_mx", "moving_scale"), bool(accumulate))
    return _DONE


def _drop_unit_free_dims(x):
    """An on-chip view with its size-1 free dims dropped (the same elements in the same order);
    left as it is when nothing drops or when it is not a tile."""
    if not isinstance(x, NkiTensor) or not x.on_chip or len(x.shape) <= 2:
        return x
    free = [n for n in x.shape[1:] if n != 1] or [1]
    if len(free) == len(x.shape) - 1:
        return x
    return x.reshape((x.shape[0],) + tuple(free))


def quantize_mx(dst, src, dst_scale, name=None):
    _isa.quantize_mx(_tile(dst, "quantize_mx", "dst"), _tile(src, "quantize_mx", "src"),
                     _tile(dst_scale, "quantize_mx", "dst_scale"))
    return _DONE


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    """dst = data^T on the PE array (dst in PSUM) or the Vector engine (dst in SBUF)."""
    d = _tile(dst, "nc_transpose", "dst")
    default = _nkisim.Engine.PE if d.is_psum else _nkisim.Engine.Vector
    _isa.nc_transpose(d, _tile(data, "nc_transpose", "data"),
                      _engine(engine, default, "nc_transpose"))
    return _DONE


# --- Vector / Scalar / GpSimd ----------------------------------------------------------------
def _free_shapes_matched(*tensors):
    """Operands of one elementwise instruction whose free dims differ in shape but not in size
    (dst [128, 112] with a broadcast view [128, 2, 56]: the access patterns walk the same
    elements in order) viewed at one free shape; other shapes are left for the instruction to
    refuse."""
    first = tensors[0].shape if isinstance(tensors[0], NkiTensor) else None
    if all(not isinstance(t, NkiTensor) or t.shape == first for t in tensors[1:]):
        return tensors  # the common case: one shape, nothing to do
    shapes = {tuple(t.shape) for t in tensors if isinstance(t, NkiTensor)}
    if len({(s[0], _prod(s[1:])) for s in shapes}) != 1:
        return tensors
    for target in sorted(shapes, key=len, reverse=True):
        try:
            return tuple(t.reshape(target) if isinstance(t, NkiTensor) and tuple(t.shape) != target
                         else t for t in tensors)
        except NkiValidationError:
            continue
    return tensors


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    dst, data1, data2 = _free_shapes_matched(dst, data1, data2)
    default = _nkisim.Engine.GpSimd if op is power else _nkisim.Engine.Vector
    _isa.tensor_tensor(_tile(dst, "tensor_tensor", "dst"), _tile(data1, "tensor_tensor", "data1"),
                       _tile(data2, "tensor_tensor", "data2"), alu_of(op, "tensor_tensor"),
                       _engine(engine, default, "tensor_tensor"))
    return _DONE


def tensor_scalar(dst, data, op0, operand0=None, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=engine.unknown, name=None):
    dst, data = _free_shapes_matched(dst, data)
    default = _nkisim.Engine.Vector
    if op0 is rsqrt:
        # The unary op0 the reference allows here (GpSimd is the engine it names for it): one
        # GpSimd ALU instruction data ** -0.5.
        if operand0 not in (None, 0, 0.0):
            raise NkiValidationError(
                f"invalid argument: tensor_scalar: op0 rsqrt is unary: operand0 must be None or "
                f"0, got {operand0!r}")
        op0, operand0, reverse0, default = power, -0.5, False, _nkisim.Engine.GpSimd
    elif operand0 is None:
        raise NkiValidationError(
            f"invalid argument: tensor_scalar: operand0 is None but op0 {op0!r} is binary")
    _isa.tensor_scalar(_tile(dst, "tensor_scalar", "dst"), _tile(data, "tensor_scalar", "data"),
                       alu_of(op0, "tensor_scalar", "op0"),
                       _scalar(operand0, "tensor_scalar", "operand0"), bool(reverse0),
                       alu_of(op1, "tensor_scalar", "op1"),
                       _scalar(0.0 if operand1 is None else operand1, "tensor_scalar", "operand1"),
                       bool(reverse1), _engine(engine, default, "tensor_scalar"))
    return _DONE


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None):
    """Per partition, in order: state = (data0[i] op0 state) op1 data1[i]; dst[i] = state, from
    state = initial (a number or a [P, 1] tile), on the Vector engine."""
    n = "tensor_tensor_scan"
    _isa.tensor_tensor_scan(_tile(dst, n, "dst"), _tile(data0, n, "data0"),
                            _tile(data1, n, "data1"), _scalar(initial, n, "initial"),
                            alu_of(op0, n, "op0"), alu_of(op1, n, "op1"), bool(reverse0),
                            bool(reverse1))
    return _DONE


def max8(dst, src, name=None):
    """dst[P, 8] = the 8 largest values of each partition of src, descending (Vector engine)."""
    _isa.max8(_tile(dst, "max8", "dst"), _tile(src, "max8", "src"))
    return _DONE


def nc_find_index8(dst, data, vals, name=None):
    """dst[P, 8] (uint32 / uint16) = the index of the first occurrence in each partition of data
    of each of the 8 vals of that partition; all ones where a value does not occur."""
    n = "nc_find_index8"
    _isa.nc_find_index8(_tile(dst, n, "dst"), _tile(data, n, "data"), _tile(vals, n, "vals"))
    return _DONE


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Within each 32-partition quadrant, dst partition i = src partition shuffle_mask[i] (255:
    dst partition i unmodified), on the Vector engine; dst may be src."""
    n = "nc_stream_shuffle"
    _isa.nc_stream_shuffle(_tile(dst, n, "dst"), _tile(src, n, "src"),
                           [int(m) for m in shuffle_mask])
    return _DONE


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=equal,
                  offset=0, name=None):
    """dst = cmp_op(offset + channel_multiplier * p + sum step * i, 0) ? on_true_tile :
    on_false_value, the predicate generated per element on GpSimd (causal masks)."""
    n = "affine_select"
    _isa.affine_select(_tile(dst, n, "dst"), [(int(s), int(c)) for s, c in pattern],
                       int(channel_multiplier), _tile(on_true_tile, n, "on_true_tile"),
                       float(on_false_value), alu_of(cmp_op, n, "cmp_op"), int(offset))
    return _DONE


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """On partitions 0, 16, ..., 112: dst = [indices of src's nonzeros + index_offset, then
    padding_val, then their count] (GpSimd)."""
    n = "nonzero_with_count"
    _isa.nonzero_with_count(_tile(dst, n, "dst"), _tile(src, n, "src"), int(index_offset),
                            int(padding_val))
    return _DONE


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """On GpSimd, per 16-partition group: the group's uint16 indices flattened partition dim
    first, the first num_valid_indices of them; each partition p of the group gets
    src_buffer[p, idx : idx + num_elem_per_idx] for each idx, in order (no cast)."""
    n = "local_gather"
    _isa.local_gather(_tile(dst, n, "dst"), _tile(src_buffer, n, "src_buffer"),
                      _tile(index, n, "index"), int(num_elem_per_idx),
                      -1 if num_valid_indices is None else int(num_valid_indices))
    return _DONE


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each of the 8 vals (taken from the last) replaced
    by imm; dst_idx, if given, gets their indices (Vector engine)."""
    n = "nc_match_replace8"
    _isa.nc_match_replace8(_tile(dst, n, "dst"), _tile(data, n, "data"), _tile(vals, n, "vals"),
                           float(imm), None if dst_idx is None else _tile(dst_idx, n, "dst_idx"))
    return _DONE


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None,
                         reduce_res_negate=False, name=None):
    """dst = data op0 operand0 and reduce_res[P, 1] = reduce_op over dst's free elements, from
    reduce_op's identity (reset_reduce) or reduce_init (load_reduce), on the Vector engine."""
    n = "tensor_scalar_reduce"
    if reverse0:
        raise NkiValidationError(f"invalid argument: {n}: reverse0=True is not supported (the "
                                 f"0.6 reference marks it 'not supported yet')")
    if reduce_cmd not in (_RC.reset_reduce, _RC.load_reduce):
        raise _api.unsupported_error(
            f"nki.isa.{n}(reduce_cmd={reduce_cmd})",
            "the Vector engine's accumulator registers are not kept between instructions; "
            "reset_reduce and load_reduce are modelled")
    load = reduce_cmd is _RC.load_reduce
    if load and reduce_init is None:
        raise NkiValidationError(f"invalid argument: {n}: reduce_cmd load_reduce needs "
                                 f"reduce_init")
    if not load and reduce_init is not None:
        raise NkiValidationError(f"invalid argument: {n}: reduce_init is set only with "
                                 f"reduce_cmd load_reduce, not {reduce_cmd}")
    _isa.tensor_scalar_reduce(
        _tile(dst, n, "dst"), _tile(data, n, "data"), alu_of(op0, n, "op0"),
        _scalar(operand0, n, "operand0"), alu_of(reduce_op, n, "reduce_op"),
        None if reduce_res is None else _tile(reduce_res, n, "reduce_res"), load,
        _scalar(0.0 if reduce_init is None else reduce_init, n, "reduce_init"),
        bool(reduce_res_negate))
    return _DONE


def tensor_partition_reduce(dst, op, data, name=None):
    """dst[1, ...] = op over data's partitions (add, max, min, bitwise_or, bitwise_and) on
    GpSimd."""
    n = "tensor_partition_reduce"
    _isa.tensor_partition_reduce(_tile(dst, n, "dst"), alu_of(op, n, "op"), _tile(data, n, "data"))
    return _DONE


def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p].flat[indices[p, j]] per partition on GpSimd: the runtime's
    gather_flattened (runtime/nisa/gather.h), with the 0.6 reference's dtype rules."""
    n = "nc_n_gather"
    d, src, idx = _tile(dst, n, "dst"), _tile(data, n, "data"), _tile(indices, n, "indices")
    if dst.dtype is not data.dtype:
        raise NkiValidationError(f"invalid argument: {n}: operand 'dst' {dst!r}: dtype must "
                                 f"equal data's {data.dtype.name}")
    if indices.dtype is not _dtypes.uint32:
        raise NkiValidationError(f"invalid argument: {n}: operand 'indices' {indices!r}: dtype "
                                 f"must be uint32")
    _isa.gather_flattened(d, src, idx)
    return _DONE


_FP32_MIN = -3.4028234663852886e38


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=reduce_cmd.reset_reduce, reduce_res=None, reduce_op=maximum,
                 range_start=0, on_false_value=_FP32_MIN, name=None):
    """dst = on_true_tile where comp_op0(j, bound0) and comp_op1(j, bound1) for the free index
    j + range_start, else on_false_value; reduce_res = the max of each dst row (Vector)."""
    n = "range_select"
    if reduce_op is not maximum:
        raise NkiValidationError(f"invalid argument: {n}: reduce_op must be nl.maximum (the "
                                 f"only one the 0.6 reference supports), got {reduce_op!r}")
    if reduce_cmd is not _RC.reset_reduce:
        raise _api.unsupported_error(
            f"nki.isa.{n}(reduce_cmd={reduce_cmd})",
            "the Vector engine's accumulator registers are not kept between instructions")
    if float(on_false_value) != _FP32_MIN:
        raise NkiValidationError(f"invalid argument: {n}: on_false_value {on_false_value!r}: "
                                 f"the hardware takes only FP32_MIN (-3.4028235e+38)")
    _isa.range_select(_tile(dst, n, "dst"), _tile(on_true_tile, n, "on_true_tile"),
                      alu_of(comp_op0, n, "comp_op0"), alu_of(comp_op1, n, "comp_op1"),
                      _tile(bound0, n, "bound0"), _tile(bound1, n, "bound1"),
                      None if reduce_res is None else _tile(reduce_res, n, "reduce_res"),
                      int(range_start), _FP32_MIN)
    return _DONE


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         name=None):
    if reverse0 or reverse1:
        raise _api.unsupported_error("nki.isa.scalar_tensor_tensor(reverse0/reverse1)",
                                     "the runtime's instruction has no reverse flags")
    _isa.scalar_tensor_tensor(_tile(dst, "scalar_tensor_tensor", "dst"),
                              _tile(data, "scalar_tensor_tensor", "data"),
                              alu_of(op0, "scalar_tensor_tensor", "op0"),
                              _scalar(operand0, "scalar_tensor_tensor", "operand0"),
                              alu_of(op1, "scalar_tensor_tensor", "op1"),
                              _tile(operand1, "scalar_tensor_tensor", "operand1"),
                              _nkisim.Engine.Vector)
    return _DONE


def _bias_tile(bias, data):
    """A bias immediate becomes a [P, 1] fp32 column (one memset), as the ISA takes a column."""
    if bias is None or isinstance(bias, NkiTensor):
        return None if bias is None else _tile(bias, "activation", "bias")
    if float(bias) == 0.0:
        return None
    from nki.language import full
    return full((data.shape[0], 1), float(bias), _dtypes.float32)._h


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
    """dst = op(data * scale + bias) on the Scalar engine, optionally reducing each row."""
    if reduce_cmd in (_RC.reduce, _RC.load_reduce) or (
            reduce_cmd is _RC.reset and reduce_res is None):
        raise _api.unsupported_error(
            f"nki.isa.activation(reduce_cmd={reduce_cmd.name})",
            "accumulator registers that persist across instructions are not modelled; pass "
            "reduce_res to reduce one instruction's rows")
    if reduce_res is not None and reduce_op is None:
        from nki.language import add as reduce_op
    _isa.activation(_tile(dst, "activation", "dst"), act_of(op, "activation"),
                    _tile(data, "activation", "data"), _scalar(scale, "activation", "scale"),
                    _bias_tile(bias, data),
                    alu_of(reduce_op, "activation", "reduce_op"),
                    None if reduce_res is None else _tile(reduce_res, "activation", "reduce_res"))
    return _DONE


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    return activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                      reduce_res=reduce_res, reduce_cmd=_RC.reset_reduce)


def tensor_copy(dst, src, engine=engine.unknown, name=None):
    dst, src = _free_shapes_matched(dst, src)
    _isa.tensor_copy(_tile(dst, "tensor_copy", "dst"), _tile(src, "tensor_copy", "src"),
                     _engine(engine, _nkisim.Engine.Vector, "tensor_copy"))
    return _DONE


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = predicate ? src : dst (reverse_pred: where the predicate is 0)."""
    d = _tile(dst, "tensor_copy_predicated", "dst")
    s = _tile(src, "tensor_copy_predicated", "src")
    p = _tile(predicate, "tensor_copy_predicated", "predicate")
    on_true, on_false = (d, s) if reverse_pred else (s, d)
    _isa.select(d, p, on_true, on_false, _nkisim.Engine.Vector)
    return _DONE


def memset(dst, value, engine=engine.unknown, name=None):
    _isa.memset(_tile(dst, "memset", "dst"), float(value),
                _engine(engine, _nkisim.Engine.Vector, "memset"))
    return _DONE


def reciprocal(dst, data, name=None):
    _isa.reciprocal(_tile(dst, "reciprocal", "dst"), _tile(data, "reciprocal", "data"))
    return _DONE


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """dst[p, ...] = offset + channel_multiplier * p + sum of step * index over the pattern."""
    d = _tile(dst, "iota", "dst")
    pairs = [(int(step), int(num)) for step, num in pattern]
    counts = tuple(n for _, n in pairs)
    if counts != tuple(d.shape[1:]):
        total = 1
        for n in counts:
            total *= n
        if total == dst.size // dst.shape[0] and d.free_contiguous():
            d = d.reshape(list(counts))
    _isa.iota(d, int(offset), int(channel_multiplier), pairs)
    return _DONE


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    axes = [axis] if isinstance(axis, int) else list(axis)
    rank = len(data.shape)
    axes = [a + rank if a < 0 else a for a in axes]
    _isa.tensor_reduce(_tile(dst, "tensor_reduce", "dst"), alu_of(op, "tensor_reduce"),
                       _tile(data, "tensor_reduce", "data"), axes, False, bool(negate))
    return _DONE


def bn_stats(dst, data, name=None):
    _isa.bn_stats(_tile(dst, "bn_stats", "dst"), _tile(data, "bn_stats", "data"))
    return _DONE


def bn_aggr(dst, data, name=None):
    _isa.bn_aggr(_tile(dst, "bn_aggr", "dst"), _tile(data, "bn_aggr", "data"))
    return _DONE


def dropout(dst, data, prob, name=None):
    _isa.dropout(_tile(dst, "dropout", "dst"), _tile(data, "dropout", "data"),
                 _scalar(prob, "dropout", "prob"))
    return _DONE


def set_rng_seed(src_seeds, name=None):
    from nki.language import random_seed
    random_seed(src_seeds)
    return _DONE


# --- LNC 2: the two cores of a logical core --------------------------------------------------
def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma,
             name=None):
    """Sends src to the peer core's dst and receives the peer's src into this core's dst."""
    from nki.language import num_programs, program_id
    peer = 1 - program_id()
    if num_programs() != 2 or int(send_to_rank) != peer or int(recv_from_rank) != peer:
        raise NkiValidationError(
            f"invalid argument: sendrecv: send_to_rank {send_to_rank} / recv_from_rank "
            f"{recv_from_rank} on program {program_id()} of {num_programs()}: both must be the "
            f"peer core of an LNC 2 launch (kernel[2])")
    _isa.sendrecv(_tile(src, "sendrecv", "src"), _tile(dst, "sendrecv", "dst"))
    return _DONE


def core_barrier(data, cores, engine=engine.gpsimd, name=None):
    """Both cores of an LNC 2 launch wait for each other (their clocks join)."""
    if tuple(cores) != (0, 1):
        raise NkiValidationError(
            f"invalid argument: core_barrier: cores {tuple(cores)}: only (0, 1) is supported")
    _isa.core_barrier()
    return _DONE


# --- The 0.6 instructions nkisim's ISA does not have -------------------------------------------
_NO_INSTRUCTION = "the runtime's ISA has no such instruction"
for _name, _reason in {
        "activate2": _NO_INSTRUCTION,
        "exponential": _NO_INSTRUCTION,
        "select_reduce": _NO_INSTRUCTION, "sequence_bounds": _NO_INSTRUCTION,
        "tensor_scalar_cumulative": _NO_INSTRUCTION,
        "topk": _NO_INSTRUCTION,
        "rng": "the PRNG is modelled as uniform floats (nl.rand); raw random bits are not",
        "rand2": "the PRNG is modelled as uniform floats in [0, 1) (nl.rand)",
        "rand_get_state": "the PRNG state is not exposed", "rand_set_state": "use nl.random_seed",
}.items():
    globals()[_name] = _api.unsupported(_M, _name, _reason)


from nki._register import (  # noqa: E402,F401
    VirtualRegister, register_alloc, register_load, register_move, register_store)
_api.reference_names(_M, """
NkiInstruction NkiValidationError VirtualRegister activate2 activation activation_reduce
affine_select bn_aggr bn_stats core_barrier dge_mode dma_compute dma_copy dma_engine
dma_transpose dropout engine exponential get_nc_sub_version get_nc_version gpsimd_engine iota
local_gather matmul_perf_mode max8 memset nc_find_index8 nc_match_replace8 nc_matmul
nc_matmul_mx nc_n_gather nc_stream_shuffle nc_transpose nc_version nonzero_with_count oob_mode
quantize_mx rand2 rand_get_state rand_set_state range_select reciprocal reduce_cmd register_alloc
register_load register_move register_store rng scalar_engine scalar_tensor_tensor select_reduce
sendrecv sequence_bounds set_rng_seed tensor_copy tensor_copy_predicated tensor_engine
tensor_partition_reduce tensor_reduce tensor_scalar tensor_scalar_cumulative
tensor_scalar_reduce tensor_tensor tensor_tensor_scan topk unknown_engine vector_engine
""")
