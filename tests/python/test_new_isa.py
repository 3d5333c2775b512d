"""Instructions added for issue 41 (runtime/nisa/scan.cc, top8.cc), each against a plain numpy
golden written from the NKI 0.6 ISA reference, and their documented error cases."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
import nkisim
from conftest import assert_close


# --- tensor_tensor_scan ---------------------------------------------------------------------
def scan_golden(d0, d1, init, op0, op1, reverse0=False, reverse1=False):
    out = np.empty_like(d0, dtype=np.float64)
    state = np.broadcast_to(np.asarray(init, np.float64).reshape(-1), (d0.shape[0],)).copy()
    for i in range(d0.shape[1]):
        a = op0(state, d0[:, i]) if reverse0 else op0(d0[:, i], state)
        state = op1(d1[:, i], a) if reverse1 else op1(a, d1[:, i])
        out[:, i] = state
    return out


@nki.jit
def _scan(d0, d1, init, op0, op1, reverse0=False, reverse1=False):
    a = nl.load(d0)
    b = nl.load(d1)
    out = nl.ndarray(d0.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray(d0.shape, dtype=nl.float32, buffer=nl.sbuf)
    if not isinstance(init, (int, float)):
        init = nl.load(init)
    nisa.tensor_tensor_scan(dst=res, data0=a, data1=b, initial=init, op0=op0, op1=op1,
                            reverse0=reverse0, reverse1=reverse1)
    nl.store(out, res)
    return out


def test_scan_cumsum(rng):
    # cumsum in the NKI library's form: state = (1 * state) + x
    x = rng.standard_normal((128, 300)).astype(np.float32)
    ones = np.ones_like(x)
    out = _scan(ones, x, 0.0, nl.multiply, nl.add)
    assert_close(out, np.cumsum(x.astype(np.float64), axis=1), atol=1e-4, rtol=1e-5)
    assert_close(out, scan_golden(ones, x, 0.0, np.multiply, np.add), atol=1e-4, rtol=1e-5)


def test_scan_linear_recurrence_with_tile_initial(rng):
    # h = a * h + b, from a per-partition initial state (the mamba recurrence)
    a = rng.uniform(0.5, 1.0, (64, 40)).astype(np.float32)
    b = rng.standard_normal((64, 40)).astype(np.float32)
    h0 = rng.standard_normal((64, 1)).astype(np.float32)
    out = _scan(a, b, h0, nl.multiply, nl.add)
    assert_close(out, scan_golden(a, b, h0[:, 0], np.multiply, np.add), atol=1e-4, rtol=1e-5)


def test_scan_reversed_operands(rng):
    a = rng.standard_normal((32, 16)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    out = _scan(a, b, 1.5, nl.subtract, nl.subtract, True, True)
    golden = scan_golden(a, b, 1.5, np.subtract, np.subtract, True, True)
    assert_close(out, golden, atol=1e-3, rtol=1e-5)


def test_scan_shape_mismatch_is_refused():
    @nki.jit
    def k():
        a = nl.zeros((128, 64), dtype=nl.float32)
        b = nl.zeros((128, 32), dtype=nl.float32)
        d = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=d, data0=a, data1=b, initial=0.0, op0=nl.multiply,
                                op1=nl.add)

    with pytest.raises(nisa.NkiValidationError,
                       match=r"tensor_tensor_scan: operand 'data1'.*64 elements per partition"):
        k()


def test_scan_both_in_psum_is_refused():
    @nki.jit
    def k():
        a = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
        b = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
        d = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=d, data0=a, data1=b, initial=0.0, op0=nl.multiply,
                                op1=nl.add)

    with pytest.raises(nisa.NkiValidationError, match=r"tensor_tensor_scan.*both be in PSUM"):
        k()


def test_scan_bad_initial_tile_is_refused():
    @nki.jit
    def k():
        a = nl.zeros((128, 64), dtype=nl.float32)
        init = nl.zeros((128, 2), dtype=nl.float32)
        nisa.tensor_tensor_scan(dst=a, data0=a, data1=a, initial=init, op0=nl.multiply,
                                op1=nl.add)

    with pytest.raises(nisa.NkiValidationError, match=r"operand 'initial'.*\[128, 1\]"):
        k()


def test_scan_costs_vector_time_growing_with_length():
    @nki.jit
    def k(n):
        a = nl.zeros((128, n), dtype=nl.float32)
        nisa.tensor_tensor_scan(dst=a, data0=a, data1=a, initial=0.0, op0=nl.multiply,
                                op1=nl.add)

    busy = []
    for n in (512, 4096):
        k(n)
        busy.append(nkisim.last_run().engine_busy_ns["Vector"])
    assert 0 < busy[0] < busy[1]


# --- max8 / nc_find_index8 ------------------------------------------------------------------
def max8_golden(x):
    return -np.sort(-x.reshape(x.shape[0], -1).astype(np.float64), axis=1)[:, :8]


def find_index8_golden(data, vals, sentinel):
    flat = data.reshape(data.shape[0], -1)
    out = np.full(vals.shape, sentinel, dtype=np.float64)
    for p in range(flat.shape[0]):
        for k in range(8):
            hits = np.nonzero(flat[p] == vals[p, k])[0]
            if hits.size:
                out[p, k] = hits[0]
    return out


@nki.jit
def _max8(x):
    out = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.shared_hbm)
    top = nl.ndarray((x.shape[0], 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=nl.load(x))
    nl.store(out, top)
    return out


def test_max8(rng):
    x = rng.standard_normal((128, 1000)).astype(np.float32)
    np.testing.assert_array_equal(_max8(x), max8_golden(x))


def test_max8_with_ties_and_3d_source(rng):
    x = rng.integers(-3, 4, size=(16, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(_max8(x), max8_golden(x))


@nki.jit
def _find_index8(data, vals, dtype):
    out = nl.ndarray((data.shape[0], 8), dtype=dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((data.shape[0], 8), dtype=dtype, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=nl.load(data), vals=nl.load(vals))
    nl.store(out, idx)
    return out


def test_max8_then_find_index8_is_top8_argmax(rng):
    x = rng.standard_normal((128, 512)).astype(np.float32)
    vals = max8_golden(x).astype(np.float32)
    idx = _find_index8(x, vals, nl.uint32)
    np.testing.assert_array_equal(idx, find_index8_golden(x, vals, 0xFFFFFFFF))
    np.testing.assert_array_equal(idx, np.argsort(-x, axis=1, kind="stable")[:, :8])


def test_find_index8_missing_value_is_all_ones(rng):
    x = rng.integers(0, 50, size=(8, 64)).astype(np.float32)
    vals = np.tile(np.array([0, 1, 2, 3, 100, 101, 5, 7], np.float32), (8, 1))
    for dtype, sentinel in ((nl.uint32, 0xFFFFFFFF), (nl.uint16, 0xFFFF)):
        idx = np.asarray(_find_index8(x, vals, dtype)).astype(np.int64)
        np.testing.assert_array_equal(idx, find_index8_golden(x, vals, sentinel))


def test_max8_too_few_elements_is_refused():
    with pytest.raises(nisa.NkiValidationError,
                       match=r"max8: operand 'src'.*8 to 16384 elements per partition, has 4"):
        _max8(np.zeros((128, 4), np.float32))


def test_max8_bad_dst_is_refused():
    @nki.jit
    def k():
        src = nl.zeros((128, 64), dtype=nl.float32)
        nisa.max8(dst=nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf), src=src)

    with pytest.raises(nisa.NkiValidationError, match=r"max8: operand 'dst'.*\[P, 8\]"):
        k()


def test_find_index8_float_dst_is_refused(rng):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"nc_find_index8.*uint32 or uint16"):
        _find_index8(x, x[:, :8], nl.float32)


def test_find_index8_vals_not_8_is_refused(rng):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError,
                       match=r"nc_find_index8: operand 'vals'.*8 elements per partition, has 4"):
        _find_index8(x, np.zeros((16, 4), np.float32), nl.uint32)


# --- API corners: .ap on SBUF / PSUM tiles ----------------------------------------------------
@nki.jit
def _tile_ap(x, pattern, offset, out_shape):
    t = nl.load(x)
    v = t.ap(pattern, offset=offset)
    res = nl.ndarray(out_shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res.reshape(v.shape), src=v)
    out = nl.ndarray(out_shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out


def ap_golden(x, pattern, offset):
    """numpy as_strided over the tile's storage (row-major [P, F]), from element `offset`."""
    flat = x.reshape(-1)
    row = x.shape[1]
    (pstep, pcount), free = pattern[0], pattern[1:]
    out = np.empty([pcount] + [c for _, c in free], x.dtype)
    for p in range(pcount):
        for idx in np.ndindex(*[c for _, c in free]):
            e = offset % row + sum(i * s for i, (s, _) in zip(idx, free))
            out[(p,) + idx] = flat[(offset // row + p) * row + e]
    return out.reshape(pcount, -1)


@pytest.mark.parametrize("pattern, offset", [
    ([[32, 128], [1, 32]], None),              # the whole tile, as the reference's example
    ([[32, 64], [2, 16]], 32 * 8 + 1),         # every other element of rows 8..71 from col 1
    ([[32, 16], [1, 2], [2, 8]], 0),           # interleave: [1, 2] inner of [2, 8]
    ([[32, 128], [0, 8]], 5),                  # column 5 repeated 8 times
])
def test_ap_on_sbuf(pattern, offset):
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    shape = (pattern[0][1], int(np.prod([c for _, c in pattern[1:]])))
    out = _tile_ap(x, pattern, offset, shape)
    np.testing.assert_array_equal(out, ap_golden(x, pattern, offset or 0))


def test_ap_outside_the_tile_is_refused_when_used():
    # Making the view is not an access (kernels make such views and use only those in range)
    @nki.jit
    def k():
        t = nl.zeros((128, 32), dtype=nl.float32)
        v = t.ap([[32, 128], [1, 33]])
        with pytest.raises(nisa.NkiValidationError, match=r"inside its row of 32"):
            nisa.tensor_copy(dst=t, src=v)
        return True

    assert k()
    x = np.zeros((128, 32), np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"ap of tile.*inside its row of 32"):
        _tile_ap(x, [[32, 128], [1, 33]], 0, (128, 33))
    with pytest.raises(nisa.NkiValidationError, match=r"ap of tile.*partitions inside"):
        _tile_ap(x, [[32, 128], [1, 32]], 32, (128, 32))


def test_ap_on_psum():
    @nki.jit
    def k(x):
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=acc, src=nl.load(x))
        res = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc.ap([[64, 128], [2, 32]]))
        out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, res)
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(k(x), x[:, ::2])


# --- API corners: partition broadcast, rsqrt on GpSimd ----------------------------------------
@pytest.mark.parametrize("n", [64, 1300])
def test_broadcast_to_from_one_partition(rng, n):
    @nki.jit
    def k(row):
        r = nl.load(row)                       # [1, n]
        b = nl.broadcast_to(r, (128, n))
        out = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, b)
        return out

    row = rng.standard_normal((1, n)).astype(np.float32)
    np.testing.assert_array_equal(k(row), np.repeat(row, 128, axis=0))
    busy = nkisim.last_run().engine_busy_ns
    assert busy["PE"] > 0  # the copy across partitions is the PE's


def test_broadcast_to_one_partition_and_free_dim():
    @nki.jit
    def k(v):
        b = nl.broadcast_to(nl.load(v), (64, 16))   # [1, 1] -> [64, 16]
        out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, b)
        return out

    np.testing.assert_array_equal(k(np.full((1, 1), 3.5, np.float32)), np.full((64, 16), 3.5))


def test_broadcast_to_integer_partitions_is_refused():
    @nki.jit
    def k(v):
        nl.broadcast_to(nl.load(v), (128, 8))

    with pytest.raises(nisa.NkiValidationError, match=r"broadcast_to.*float dtypes, not int32"):
        k(np.zeros((1, 8), np.int32))


def test_tensor_scalar_rsqrt_on_gpsimd(rng):
    @nki.jit
    def k(x):
        t = nl.load(x)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.rsqrt, operand0=None, op1=nl.multiply,
                           operand1=2.0, engine=nisa.gpsimd_engine)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    x = rng.uniform(0.01, 100.0, (128, 256)).astype(np.float32)
    out = k(x)
    assert_close(out, 2.0 / np.sqrt(x.astype(np.float64)), atol=0, rtol=1e-5)
    busy = nkisim.last_run().engine_busy_ns
    assert busy["GpSimd"] > 0 and busy.get("Vector", 0) == 0


def test_tensor_scalar_rsqrt_with_an_operand_is_refused():
    @nki.jit
    def k():
        t = nl.ones((128, 8), dtype=nl.float32)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.rsqrt, operand0=2.0)

    with pytest.raises(nisa.NkiValidationError, match=r"rsqrt is unary: operand0 must be None"):
        k()


# --- nc_stream_shuffle ------------------------------------------------------------------------
def shuffle_golden(dst, src, mask):
    out = dst.copy()
    for p in range(dst.shape[0]):
        m = mask[p % 32]
        if m != 255:
            out[p] = src[(p // 32) * 32 + m]
    return out


@nki.jit
def _shuffle(x, init, mask, in_place=False):
    s = nl.load(x)
    d = s if in_place else nl.load(init)
    nisa.nc_stream_shuffle(dst=d, src=s, shuffle_mask=mask)
    out = nl.ndarray(init.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_stream_shuffle_reverse_each_quadrant(rng):
    x = rng.standard_normal((128, 40)).astype(np.float32)
    init = rng.standard_normal((128, 40)).astype(np.float32)
    mask = list(range(31, -1, -1))
    np.testing.assert_array_equal(_shuffle(x, init, mask), shuffle_golden(init, x, mask))


def test_stream_shuffle_keep_and_broadcast_in_place(rng):
    x = rng.standard_normal((64, 8)).astype(np.float32)
    mask = [0] * 16 + [255] * 16   # partition 0 of the quadrant to the first 16, rest kept
    np.testing.assert_array_equal(_shuffle(x, x, mask, True), shuffle_golden(x, x, mask))


def test_stream_shuffle_bad_mask_is_refused():
    x = np.zeros((32, 8), np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"shuffle_mask has 31 entries.*32"):
        _shuffle(x, x, list(range(31)))
    with pytest.raises(nisa.NkiValidationError, match=r"shuffle_mask\[3\] is 40.*255"):
        _shuffle(x, x, [0, 1, 2, 40] + [0] * 28)


def test_stream_shuffle_start_partition_rule():
    @nki.jit
    def k():
        t = nl.zeros((128, 8), dtype=nl.float32)
        nisa.nc_stream_shuffle(dst=t[32:96, :], src=t[32:96, :], shuffle_mask=list(range(32)))

    with pytest.raises(nisa.NkiValidationError,
                       match=r"starts at partition 32; with 64 active partitions.*0 or 64"):
        k()


# --- affine_select ----------------------------------------------------------------------------
def affine_select_golden(on_true, pattern, cm, on_false, cmp, offset):
    P = on_true.shape[0]
    counts = [c for _, c in pattern]
    out = on_true.reshape(P, -1).astype(np.float64).copy()
    for p in range(P):
        for e, idx in enumerate(np.ndindex(*counts)):
            v = offset + cm * p + sum(s * i for (s, _), i in zip(pattern, idx))
            if not cmp(v, 0):
                out[p, e] = on_false
    return out


@nki.jit
def _affine_select(x, pattern, cm, on_false, cmp_op, offset):
    t = nl.load(x)
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(dst=d, pattern=pattern, channel_multiplier=cm, on_true_tile=t,
                       on_false_value=on_false, cmp_op=cmp_op, offset=offset)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_affine_select_causal_mask(rng):
    # keep x[p, j] where p - j >= 0 (lower triangle), -inf-like elsewhere
    x = rng.standard_normal((128, 128)).astype(np.float32)
    out = _affine_select(x, [[-1, 128]], 1, -9984.0, nl.greater_equal, 0)
    np.testing.assert_array_equal(out, affine_select_golden(x, [(-1, 128)], 1, -9984.0,
                                                            np.greater_equal, 0))
    np.testing.assert_array_equal(out, np.where(np.tril(np.ones((128, 128))) > 0, x, -9984.0))


def test_affine_select_2d_pattern_equal(rng):
    x = rng.standard_normal((16, 24)).astype(np.float32)
    pattern = [[4, 4], [-1, 6]]
    out = _affine_select(x, pattern, -2, 0.0, nl.equal, 3)
    np.testing.assert_array_equal(out, affine_select_golden(x, pattern, -2, 0.0, np.equal, 3))


def test_affine_select_pattern_size_mismatch_is_refused():
    with pytest.raises(nisa.NkiValidationError,
                       match=r"affine_select.*pattern \[1, 10\].*multiply to the elements"):
        _affine_select(np.zeros((8, 12), np.float32), [[1, 10]], 0, 0.0, nl.equal, 0)


def test_affine_select_non_comparison_is_refused():
    with pytest.raises(nisa.NkiValidationError, match=r"cmp_op add is not a comparison"):
        _affine_select(np.zeros((8, 12), np.float32), [[1, 12]], 0, 0.0, nl.add, 0)


# --- nonzero_with_count -----------------------------------------------------------------------
def nonzero_golden(src, init, index_offset, padding_val):
    out = init.astype(np.int64).copy()
    for p in range(0, src.shape[0], 16):
        idx = [i + index_offset for i in range(src.shape[1]) if src[p, i] != 0]
        row = idx + [padding_val] * (src.shape[1] - len(idx)) + [len(idx)]
        out[p] = row
    return out


@nki.jit
def _nonzero(x, init, index_offset, padding_val):
    s = nl.load(x)
    d = nl.load(init)
    nisa.nonzero_with_count(dst=d, src=s, index_offset=index_offset, padding_val=padding_val)
    out = nl.ndarray(init.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_nonzero_with_count(rng):
    x = (rng.random((128, 40)) > 0.6).astype(np.float32) * rng.standard_normal((128, 40))
    x = x.astype(np.float32)
    init = np.full((128, 41), 7, np.int32)   # partitions other than 0, 16, ... stay as they are
    out = _nonzero(x, init, 16, -1)
    np.testing.assert_array_equal(out, nonzero_golden(x, init, 16, -1))


def test_nonzero_with_count_reference_example():
    x = np.zeros((16, 8), np.float32)
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    out = _nonzero(x, np.zeros((16, 9), np.int32), 16, -1)
    np.testing.assert_array_equal(out[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])


def test_nonzero_with_count_rules():
    x = np.ones((16, 8), np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"operand 'dst'.*elements per partition \+ 1"):
        _nonzero(x, np.zeros((16, 8), np.int32), 0, -1)

    @nki.jit
    def k():
        s = nl.ones((16, 8), dtype=nl.float32)
        d = nl.ndarray((16, 9), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=d, src=s)

    with pytest.raises(nisa.NkiValidationError, match=r"operand 'dst'.*dtype must be int32"):
        k()


# --- nc_find_index8 duplicates / nc_match_replace8 ---------------------------------------------
def find_index8_dup_golden(data, vals, sentinel, reverse=False):
    """Each val takes the first occurrence no equal val before it (in processing order) took."""
    flat = data.reshape(data.shape[0], -1)
    out = np.full(vals.shape, sentinel, dtype=np.float64)
    replaced = flat.astype(np.float64).copy()
    for p in range(flat.shape[0]):
        taken = set()
        for k in (range(7, -1, -1) if reverse else range(8)):
            for i in range(flat.shape[1]):
                if flat[p, i] == vals[p, k] and i not in taken:
                    taken.add(i)
                    out[p, k] = i
                    break
        for i in taken:
            replaced[p, i] = np.nan
    return out, replaced


def test_find_index8_duplicate_vals_take_successive_occurrences():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    idx = _find_index8(data, vals, nl.uint32)
    np.testing.assert_array_equal(idx[0], [2, 4, 5, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(idx, find_index8_dup_golden(data, vals, 0xFFFFFFFF)[0])


@nki.jit
def _match_replace8(data, vals, imm):
    d = nl.load(data)
    out = nl.ndarray(data.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    idx_out = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    r = nl.ndarray(data.shape, dtype=nl.float32, buffer=nl.sbuf)
    idx = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=r, data=d, vals=nl.load(vals), imm=imm, dst_idx=idx)
    nl.store(out, r)
    nl.store(idx_out, idx)
    return out, idx_out


def test_match_replace8_reference_example():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = _match_replace8(data, vals, -1.0)
    np.testing.assert_array_equal(idx[0], [2, 10, 9, 8, 7, 6, 5, 4])
    np.testing.assert_array_equal(out[0], [1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1])


def test_match_replace8_top8_mask(rng):
    x = rng.standard_normal((128, 300)).astype(np.float32)
    vals = max8_golden(x).astype(np.float32)
    out, idx = _match_replace8(x, vals, -1e9)
    g_idx, g_rep = find_index8_dup_golden(x, vals, 0xFFFFFFFF, reverse=True)
    np.testing.assert_array_equal(idx, g_idx)
    np.testing.assert_array_equal(out, np.where(np.isnan(g_rep), -1e9, x))


def test_match_replace8_bad_dst_is_refused():
    @nki.jit
    def k():
        d = nl.zeros((16, 64), dtype=nl.float32)
        v = nl.zeros((16, 8), dtype=nl.float32)
        nisa.nc_match_replace8(dst=nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf),
                               data=d, vals=v, imm=0.0)

    with pytest.raises(nisa.NkiValidationError,
                       match=r"nc_match_replace8: operand 'dst'.*64 elements per partition"):
        k()


# --- tensor_scalar_reduce ---------------------------------------------------------------------
@nki.jit
def _ts_reduce(x, op0, operand0, reduce_op, cmd=nisa.reduce_cmd.reset_reduce, init=None,
               negate=False):
    t = nl.load(x)
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    if init is not None and not isinstance(init, float):
        init = nl.load(init)
    nisa.tensor_scalar_reduce(dst=d, data=t, op0=op0, operand0=operand0, reduce_op=reduce_op,
                              reduce_res=r, reduce_cmd=cmd, reduce_init=init,
                              reduce_res_negate=negate)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, d)
    nl.store(red, r)
    return out, red


def test_tensor_scalar_reduce_add_and_max(rng):
    x = rng.standard_normal((128, 200)).astype(np.float32)
    out, red = _ts_reduce(x, nl.multiply, 0.5, nl.add)
    assert_close(out, x * 0.5, atol=0, rtol=1e-6)
    assert_close(red, (x.astype(np.float64) * 0.5).sum(1, keepdims=True), atol=1e-4, rtol=1e-5)
    out, red = _ts_reduce(x, nl.subtract, 1.0, nl.maximum, negate=True)
    np.testing.assert_array_equal(red, -(x - 1.0).max(1, keepdims=True))


def test_tensor_scalar_reduce_load_reduce(rng):
    x = rng.standard_normal((64, 50)).astype(np.float32)
    init = rng.standard_normal((64, 1)).astype(np.float32)
    _, red = _ts_reduce(x, nl.add, 2.0, nl.add, nisa.reduce_cmd.load_reduce, init)
    assert_close(red, init + (x.astype(np.float64) + 2.0).sum(1, keepdims=True),
                 atol=1e-4, rtol=1e-5)


def test_tensor_scalar_reduce_rules():
    x = np.zeros((16, 8), np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"reduce_op subtract must be add, multiply"):
        _ts_reduce(x, nl.add, 1.0, nl.subtract)
    with pytest.raises(nisa.NkiValidationError, match=r"load_reduce needs reduce_init"):
        _ts_reduce(x, nl.add, 1.0, nl.add, nisa.reduce_cmd.load_reduce)
    with pytest.raises(NotImplementedError, match=r"accumulator registers are not kept"):
        _ts_reduce(x, nl.add, 1.0, nl.add, nisa.reduce_cmd.reduce)


# --- tensor_partition_reduce ------------------------------------------------------------------
@nki.jit
def _partition_reduce(x, op, dtype):
    d = nl.ndarray((1, x.shape[1]), dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(d, op, nl.load(x))
    out = nl.ndarray((1, x.shape[1]), dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_tensor_partition_reduce(rng):
    x = rng.standard_normal((128, 96)).astype(np.float32)
    assert_close(_partition_reduce(x, nl.add, nl.float32), x.astype(np.float64).sum(0, keepdims=True),
                 atol=1e-4, rtol=1e-5)
    np.testing.assert_array_equal(_partition_reduce(x, nl.maximum, nl.float32), x.max(0, keepdims=True))
    xi = rng.integers(0, 1 << 20, (32, 16)).astype(np.int32)
    np.testing.assert_array_equal(_partition_reduce(xi, nl.bitwise_or, nl.int32),
                                  np.bitwise_or.reduce(xi, axis=0, keepdims=True))


def test_tensor_partition_reduce_rules(rng):
    x = rng.standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"op subtract must be add, max"):
        _partition_reduce(x, nl.subtract, nl.float32)

    @nki.jit
    def k():
        t = nl.zeros((16, 8), dtype=nl.float32)
        nisa.tensor_partition_reduce(nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf),
                                     nl.add, t)

    with pytest.raises(nisa.NkiValidationError, match=r"must be 1 partition"):
        k()


# --- range_select -----------------------------------------------------------------------------
FP32_MIN = np.float32(-3.4028235e38)


@nki.jit
def _range_select(x, b0, b1, cmp0, cmp1, range_start):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=d, on_true_tile=nl.load(x), comp_op0=cmp0, comp_op1=cmp1,
                      bound0=nl.load(b0), bound1=nl.load(b1), reduce_res=r,
                      range_start=range_start)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, d)
    nl.store(red, r)
    return out, red


def test_range_select_window(rng):
    # the reference's numpy equivalent, written out
    x = rng.standard_normal((128, 64)).astype(np.float32)
    b0 = rng.integers(0, 80, (128, 1)).astype(np.float32)
    b1 = b0 + rng.integers(1, 20, (128, 1)).astype(np.float32)
    out, red = _range_select(x, b0, b1, nl.greater_equal, nl.less, 16)
    idx = 16 + np.arange(64, dtype=np.float32)[None, :]
    golden = np.where((idx >= b0) & (idx < b1), x, FP32_MIN)
    np.testing.assert_array_equal(out, golden)
    np.testing.assert_array_equal(red, golden.max(1, keepdims=True))


def test_range_select_rules(rng):
    x = rng.standard_normal((16, 8)).astype(np.float32)
    b = np.zeros((16, 1), np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"comparison add must be equal, less"):
        _range_select(x, b, b, nl.add, nl.less, 0)

    @nki.jit
    def k():
        t = nl.zeros((16, 8), dtype=nl.float32)
        bb = nl.zeros((16, 1), dtype=nl.float32)
        nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.less, comp_op1=nl.less,
                          bound0=bb, bound1=bb, on_false_value=0.0)

    with pytest.raises(nisa.NkiValidationError, match=r"only FP32_MIN"):
        k()


# --- nc_n_gather ------------------------------------------------------------------------------
@nki.jit
def _n_gather(data, idx):
    d = nl.ndarray(idx.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=d, data=nl.load(data), indices=nl.load(idx))
    out = nl.ndarray(idx.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_nc_n_gather(rng):
    data = rng.standard_normal((128, 4, 100)).astype(np.float32)
    idx = rng.integers(0, 400, (128, 700)).astype(np.uint32)
    golden = np.take_along_axis(data.reshape(128, -1), idx.astype(np.int64), axis=1)
    np.testing.assert_array_equal(_n_gather(data, idx), golden)


def test_nc_n_gather_rules(rng):
    data = rng.standard_normal((16, 32)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"nc_n_gather.*'indices'.*uint32"):
        _n_gather(data, np.zeros((16, 8), np.int32))
    with pytest.raises(nisa.NkiValidationError, match=r"\[0, 32\)|index|range"):
        _n_gather(data, np.full((16, 8), 40, np.uint32))


# --- local_gather -----------------------------------------------------------------------------
def local_gather_golden(src, index, num_elem_per_idx, num_valid):
    """The NKI 0.6 reference's numpy semantics: per 16-partition group, the indices flattened
    partition dim first; each partition reads num_elem_per_idx elements at each index of its
    own flattened row."""
    parts = src.shape[0]
    flat = src.reshape(parts, -1)
    out = np.zeros((parts, num_valid * num_elem_per_idx), src.dtype)
    for g in range(0, parts, 16):
        idx = index[g:g + 16].flatten(order="F")[:num_valid]
        for p in range(g, g + 16):
            out[p] = np.concatenate([flat[p, i:i + num_elem_per_idx] for i in idx])
    return out


@nki.jit
def _local_gather(src, index, num_elem_per_idx, num_valid, out_dtype=None):
    s = nl.load(src)
    i = nl.ndarray(index.shape, dtype=nl.uint16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=i, src=nl.load(index))
    n = num_valid if num_valid is not None else 16 * index.shape[1]
    d = nl.ndarray((src.shape[0], n * num_elem_per_idx), dtype=out_dtype or s.dtype,
                   buffer=nl.sbuf)
    nisa.local_gather(dst=d, src_buffer=s, index=i, num_elem_per_idx=num_elem_per_idx,
                      num_valid_indices=num_valid)
    out = nl.ndarray(d.shape, dtype=d.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_local_gather_reference_example(rng):
    # the reference's example: src [128, 512, 4], one group's [16, 4] indices replicated to the
    # eight groups, 4 elements per index (indices in elements: index * 4), 64 valid indices
    src = (rng.random((128, 512, 4)) * 100).astype(np.float32)
    per_core = rng.integers(0, 512, (16, 4))
    index = (np.tile(per_core, (8, 1)) * 4).astype(np.int32)
    out = _local_gather(src, index, 4, 64)
    np.testing.assert_array_equal(out, local_gather_golden(src, index, 4, 64))
    # the reference's own form of the result: np.take along the 512 axis, index order 'F'
    want = np.stack([np.take(src[p], per_core.flatten(order="F")[:64], axis=0)
                     for p in range(128)])
    np.testing.assert_array_equal(out.reshape(128, 64, 4), want)


def test_local_gather_groups_differ_and_default_count(rng):
    src = rng.standard_normal((32, 40)).astype(np.float32)
    index = rng.integers(0, 40, (32, 3)).astype(np.int32)   # each group its own indices
    out = _local_gather(src, index, 1, None)                  # 16 x 3 = 48 valid by default
    np.testing.assert_array_equal(out, local_gather_golden(src, index, 1, 48))


def test_local_gather_bf16_keeps_its_dtype(rng):
    from conftest import bf16_exact

    @nki.jit
    def k(src, index):
        s = nl.ndarray(src.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=nl.load(src))
        i = nl.ndarray(index.shape, dtype=nl.uint16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=i, src=nl.load(index))
        d = nl.ndarray((16, 20 * 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.local_gather(dst=d, src_buffer=s, index=i, num_elem_per_idx=8,
                          num_valid_indices=20)
        f = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=d)
        out = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, f)
        return out

    src = bf16_exact(rng, (16, 64))
    index = (rng.integers(0, 8, (16, 2)) * 8).astype(np.int32)
    np.testing.assert_array_equal(k(src, index), local_gather_golden(src, index, 8, 20))


@pytest.mark.parametrize("kwargs, rule", [
    (dict(num_elem_per_idx=3), r"num_elem_per_idx 3 must be one of 1, 2, 4, 8, 16, 32"),
    (dict(num_valid=49), r"num_valid_indices 49 must be in \[1, min\(48"),
    (dict(index_hi=40), r"operand 'index'.*reads outside src_buffer's 40 elements"),
    (dict(out_dtype=nl.bfloat16), r"operand 'dst'.*dtype must be src_buffer's fp32"),
])
def test_local_gather_rules(rng, kwargs, rule):
    src = rng.standard_normal((16, 40)).astype(np.float32)
    index = np.full((16, 3), kwargs.pop("index_hi", 0), np.int32)
    args = dict(num_elem_per_idx=1, num_valid=None) | kwargs
    with pytest.raises(nisa.NkiValidationError, match=rule):
        _local_gather(src, index, args["num_elem_per_idx"], args["num_valid"],
                      args.get("out_dtype"))


def test_local_gather_operand_rules():
    @nki.jit
    def k(parts, index_dtype):
        s = nl.zeros((parts, 8), dtype=nl.float32)
        i = nl.zeros((parts, 1), dtype=index_dtype)
        d = nl.ndarray((parts, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.local_gather(dst=d, src_buffer=s, index=i)

    with pytest.raises(nisa.NkiValidationError, match=r"operand 'index'.*dtype must be uint16"):
        k(16, nl.int32)
    with pytest.raises(nisa.NkiValidationError, match=r"operand 'src_buffer'.*16-partition"):
        k(24, nl.uint16)


# --- dma_copy through an indirect HBM side (ap vector_offset) ----------------------------------
@nki.jit
def _gather_rows(table, idx, oob_skip=False, row_offset=0):
    i = nl.load(idx)                                   # [P, 1] int32, one row index a partition
    p, h = idx.shape[0], table.shape[1]
    d = nl.full((p, h), -7.0, dtype=table.dtype)       # rows skipped keep this
    nisa.dma_copy(dst=d, src=table.ap([[h, p], [1, h]], offset=row_offset * h, vector_offset=i,
                                      indirect_dim=0),
                  oob_mode=nisa.oob_mode.skip if oob_skip else nisa.oob_mode.error)
    out = nl.ndarray((p, h), dtype=table.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_indirect_gather_rows(rng):
    table = rng.standard_normal((40, 24)).astype(np.float32)
    idx = rng.integers(0, 40, (128, 1)).astype(np.int32)
    np.testing.assert_array_equal(_gather_rows(table, idx), table[idx[:, 0]])
    # the pattern's offset shifts every row: row p at (offset + idx[p]) rows
    idx = rng.integers(0, 30, (16, 1)).astype(np.int32)
    np.testing.assert_array_equal(_gather_rows(table, idx, row_offset=10), table[idx[:, 0] + 10])


def test_indirect_scatter_into_a_flat_tensor(rng):
    # the NKI library's router_topk form: a [P, 1] column scattered to flat positions of [T * E]
    @nki.jit
    def k(values, positions, n):
        v = nl.load(values)
        i = nl.load(positions)
        out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)   # zeros
        nisa.dma_copy(dst=out.ap([[1, values.shape[0]], [1, 1]], offset=0, vector_offset=i,
                                 indirect_dim=0), src=v)
        return out

    values = rng.standard_normal((32, 1)).astype(np.float32)
    positions = rng.permutation(200)[:32].reshape(32, 1).astype(np.int32)
    golden = np.zeros(200, np.float32)
    golden[positions[:, 0]] = values[:, 0]
    np.testing.assert_array_equal(k(values, positions, 200), golden)


def test_indirect_out_of_bounds_raises_or_skips(rng):
    table = rng.standard_normal((8, 4)).astype(np.float32)
    idx = np.array([[1], [8], [-1], [3]], np.int32)
    with pytest.raises(nisa.NkiValidationError,
                       match=r"vector_offset .* partition 1 holds 8: its row .* outside the "
                             r"tensor's \[0, 32\)"):
        _gather_rows(table, idx)
    out = _gather_rows(table, idx, oob_skip=True)
    golden = np.full((4, 4), -7.0, np.float32)
    golden[[0, 3]] = table[[1, 3]]
    np.testing.assert_array_equal(out, golden)


def test_indirect_view_rules():
    table = np.zeros((8, 4), np.float32)

    @nki.jit
    def float_index(t):
        i = nl.full((4, 1), 1.0, dtype=nl.float32)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=t.ap([[4, 4], [1, 4]], vector_offset=i, indirect_dim=0))

    with pytest.raises(nisa.NkiValidationError, match=r"'vector_offset'.*integer dtype"):
        float_index(table)

    @nki.jit
    def wrong_rows(t):
        i = nl.full((4, 1), 1, dtype=nl.int32)
        d = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=t.ap([[4, 4], [1, 4]], vector_offset=i, indirect_dim=0))

    with pytest.raises(nisa.NkiValidationError, match=r"'dst'.*one partition per indexed row"):
        wrong_rows(table)

    @nki.jit
    def not_a_dma(t):
        i = nl.full((4, 1), 1, dtype=nl.int32)
        d = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=t.ap([[4, 4], [1, 4]], vector_offset=i, indirect_dim=0))

    with pytest.raises(nisa.NkiValidationError, match=r"operand of nisa.dma_copy only"):
        not_a_dma(table)


# --- nc_matmul transpose mode into PSUM of the input dtype ---------------------------------------
@nki.jit
def _transpose_mode(x, moving_scale=1.0):
    s = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=nl.load(x))
    k = x.shape[0]
    eye = nl.shared_identity_matrix(k, dtype=nl.bfloat16)
    if moving_scale != 1.0:
        scaled = nl.ndarray((k, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=scaled, data=eye, op0=nl.multiply, operand0=moving_scale)
        eye = scaled
    p = nl.ndarray((x.shape[1], k), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=s, moving=eye, is_transpose=True)
    f = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=f, src=p)
    out = nl.ndarray(p.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, f)
    return out


def test_transpose_mode_into_bf16_psum(rng):
    from conftest import bf16_exact
    x = bf16_exact(rng, (64, 96))
    np.testing.assert_array_equal(_transpose_mode(x), x.T)
    with pytest.raises(nisa.NkiValidationError, match=r"'moving'.*must be the identity"):
        _transpose_mode(x, 2.0)


# --- nc_matmul_mx into a bf16 PSUM tile (NeuronCore-v4) ---------------------------------------
def _fp8_e5m2(bytes_):
    """Decode fp8_e5m2 bytes (finite) with plain numpy."""
    b = bytes_.astype(np.int64)
    sign = np.where(b >> 7 & 1, -1.0, 1.0)
    exp, man = b >> 2 & 0x1F, b & 3
    mag = np.where(exp == 0, man / 4.0 * 2.0 ** -14, (1 + man / 4.0) * 2.0 ** (exp - 15.0))
    return sign * mag


def _random_fp8_x4(rng, p, f):
    """[P, F] uint32 of four finite fp8_e5m2 bytes each, and the [4 P, F] values (k = 4 p + j)."""
    raw = (rng.integers(0, 2, (p, f, 4)) << 7 | rng.integers(13, 18, (p, f, 4)) << 2
           | rng.integers(0, 4, (p, f, 4))).astype(np.uint32)
    packed = (raw << np.array([0, 8, 16, 24], np.uint32)).sum(-1).astype(np.uint32)
    return packed, _fp8_e5m2(raw).transpose(0, 2, 1).reshape(4 * p, f)


def test_matmul_mx_bf16_psum_and_unit_free_dims(rng, monkeypatch):
    monkeypatch.setenv("NKISIM_PROFILE", "trn3")

    @nki.jit
    def k(s_bits, m_bits, dst_dtype):
        p, mm = s_bits.shape
        n = m_bits.shape[1]
        s = nl.ndarray((p, 1, mm), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)   # a size-1 dim
        nisa.dma_copy(dst=s[:, 0, :], src=s_bits.view(nl.float8_e5m2_x4))
        m = nl.ndarray((p, n), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=m, src=m_bits.view(nl.float8_e5m2_x4))
        s_scale = nl.ndarray((p, 1, mm), dtype=nl.uint8, buffer=nl.sbuf)
        m_scale = nl.ndarray((p, n), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=s_scale, value=127)   # neutral scales: 2^0
        nisa.memset(dst=m_scale, value=127)
        acc = nl.ndarray((mm, n), dtype=dst_dtype, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=s, moving=m, stationary_scale=s_scale,
                          moving_scale=m_scale, accumulate=False)
        nisa.nc_matmul_mx(dst=acc, stationary=s, moving=m, stationary_scale=s_scale,
                          moving_scale=m_scale, accumulate=True)
        f = nl.ndarray((mm, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=acc)
        out = nl.ndarray((mm, n), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, f)
        return out

    s_bits, a = _random_fp8_x4(rng, 32, 64)
    m_bits, b = _random_fp8_x4(rng, 32, 16)
    golden = 2 * a.T @ b
    assert_close(k(s_bits, m_bits, nl.float32), golden, atol=0, rtol=1e-6)
    out = k(s_bits, m_bits, nl.bfloat16)
    assert_close(out, golden, atol=0, rtol=2 ** -7)   # two bf16 roundings
    assert not np.array_equal(out, k(s_bits, m_bits, nl.float32))   # it did round to bf16

    @nki.jit
    def wrong_memory(s_bits):
        s = nl.ndarray(s_bits.shape, dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=s_bits.view(nl.float8_e5m2_x4))
        sc = nl.ndarray(s_bits.shape, dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=sc, value=127)
        d = nl.ndarray((s_bits.shape[1], s_bits.shape[1]), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.nc_matmul_mx(dst=d, stationary=s, moving=s, stationary_scale=sc, moving_scale=sc)

    with pytest.raises(nisa.NkiValidationError, match=r"operand 'dst'.*must be a PSUM tile"):
        wrong_memory(s_bits)


# --- nl.int16 -----------------------------------------------------------------------------------
def test_int16_round_trips_converts_and_saturates(rng):
    @nki.jit
    def k(x, y):
        a = nl.load(x)                                         # int16 in HBM and SBUF
        wide = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=wide, src=a)
        narrowed = nl.ndarray(y.shape, dtype=nl.int16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=narrowed, src=nl.load(y))         # fp32 -> int16 saturates
        summed = nl.ndarray(x.shape, dtype=nl.int16, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=summed, data1=a, data2=narrowed, op=nl.add)
        out = nl.ndarray(x.shape, dtype=nl.int16, buffer=nl.shared_hbm)
        nl.store(out, summed)
        w = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(w, wide)
        return out, w

    x = rng.integers(-20000, 20000, (64, 32)).astype(np.int16)
    y = rng.uniform(-70000, 70000, (64, 32)).astype(np.float32)
    out, wide = k(x, y)
    assert out.dtype == np.int16
    np.testing.assert_array_equal(wide, x.astype(np.int32))
    narrowed = np.clip(np.rint(y), -32768, 32767)
    np.testing.assert_array_equal(out, np.clip(x + narrowed, -32768, 32767).astype(np.int16))


# --- NkiTensor.vector_select (HBM, dim 0) -------------------------------------------------------
@nki.jit
def _vector_select_gather(table, idx):
    """The NKI reference's example: table (R, 128, 8) HBM, idx (P, 1); row p of the view is
    table[idx[p]], gathered into a [P, 128, 8] tile."""
    i = nl.load(idx)
    p = idx.shape[0]
    d = nl.ndarray((p,) + tuple(table.shape[1:]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=table.vector_select(0, i))
    out = nl.ndarray(d.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


def test_vector_select_gathers_rows(rng):
    table = rng.standard_normal((64, 128, 8)).astype(np.float32)
    idx = rng.integers(0, 64, (128, 1)).astype(np.int32)
    np.testing.assert_array_equal(_vector_select_gather(table, idx), table[idx[:, 0]])
    # a sliced view: rows counted from its first row, within its columns
    idx = rng.integers(0, 16, (32, 1)).astype(np.int32)

    @nki.jit
    def sliced(table, idx):
        i = nl.load(idx)
        d = nl.ndarray((32, 4), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=table[8:24, 2:6].vector_select(0, i))
        out = nl.ndarray((32, 4), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=d)
        return out

    flat = rng.standard_normal((40, 10)).astype(np.float32)
    np.testing.assert_array_equal(sliced(flat, idx), flat[8:24, 2:6][idx[:, 0]])


def test_vector_select_scatters_rows(rng):
    @nki.jit
    def scatter(values, idx, rows):
        v = nl.load(values)
        i = nl.load(idx)
        out = nl.ndarray((rows, values.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out.vector_select(0, i), src=v)
        return out

    values = rng.standard_normal((48, 16)).astype(np.float32)
    idx = rng.permutation(100)[:48].reshape(48, 1).astype(np.int32)
    golden = np.zeros((100, 16), np.float32)
    golden[idx[:, 0]] = values
    np.testing.assert_array_equal(scatter(values, idx, 100), golden)


@pytest.mark.parametrize("case, match", [
    ("on_chip", r"vector_select of .*: the tensor is on chip; vector_select addresses HBM"),
    ("dim1", r"vector_select of .*: dim 1: vector_select selects dim 0 only"),
    ("twice", r"vector_select of .*: the view is already indirect; one dynamic select"),
    ("broadcast", r"vector_select of .*: dim 0 is a broadcast \(stride 0\)"),
    ("float_offset", r"vector_offset .* must be an SBUF tile of one integer index per partition"),
    ("hbm_offset", r"vector_offset .* must be an SBUF tile of one integer index per partition"),
    ("wide_offset", r"vector_offset .* must be an SBUF tile of one integer index per partition"),
    ("ap_on_chip", r"vector_offset on an on-chip tensor; .* addresses HBM tensors only"),
])
def test_vector_select_rules(case, match):
    @nki.jit
    def k(table, idx):
        i = nl.load(idx)
        if case == "on_chip":
            t = nl.load(table)
            t.vector_select(0, i)
        elif case == "dim1":
            table.vector_select(1, i)
        elif case == "twice":
            table.vector_select(0, i).vector_select(0, i)
        elif case == "broadcast":
            nl.broadcast_to(table[0:1, :], (8, table.shape[1])).vector_select(0, i)
        elif case == "float_offset":
            table.vector_select(0, nl.load(table[0:8, 0:1]))
        elif case == "hbm_offset":
            table.vector_select(0, idx)
        elif case == "wide_offset":
            table.vector_select(0, nl.load(table[0:8, 0:2]).view(nl.int32))
        elif case == "ap_on_chip":
            nl.load(table).ap([[16, 8], [1, 16]], vector_offset=i, indirect_dim=0)
        return table

    table = np.zeros((8, 16), np.float32)
    idx = np.zeros((8, 1), np.int32)
    with pytest.raises(nisa.NkiValidationError, match=match):
        k(table, idx)
