"""API corners the NKI library's kernels use that nkisim refused before (issue 41, second
round), each against a plain numpy golden, and their misuse errors."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
from conftest import assert_close


# --- dma_transpose of [S, 1, 1, D] -> [D, 1, 1, S] (attention_tkg's K prior load) -----------
@nki.jit
def _transpose4(src):
    s, _, _, d = src.shape
    t = nl.ndarray((d, 1, 1, s), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, src)
    out = nl.ndarray((d, s), dtype=src.dtype, buffer=nl.shared_hbm)
    nl.store(out, t.reshape((d, s)))
    return out


def test_dma_transpose_4d_unit_middle_dims(rng):
    x = rng.standard_normal((96, 1, 1, 64)).astype(np.float32)
    assert_close(_transpose4(x), x[:, 0, 0, :].T, atol=0, rtol=0)


@nki.jit
def _transpose3(src):
    s, m, d = src.shape
    t = nl.ndarray((d, m, s), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, src)
    out = nl.ndarray((d, m * s), dtype=src.dtype, buffer=nl.shared_hbm)
    nl.store(out, t.reshape((d, m * s)))
    return out


def test_dma_transpose_3d_from_hbm(rng):
    x = rng.standard_normal((16, 4, 8)).astype(np.float32)
    golden = np.transpose(x, (2, 1, 0)).reshape(8, 4 * 16)
    assert_close(_transpose3(x), golden, atol=0, rtol=0)


@nki.jit
def _transpose_axes(src):
    t = nl.ndarray((src.shape[1], src.shape[0]), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, src, axes=(0, 1))
    return src


def test_dma_transpose_other_axes_is_refused(rng):
    with pytest.raises(NotImplementedError, match=r"dma_transpose\(axes=\(0, 1\)\).*swaps the "
                       r"first and last dims"):
        _transpose_axes(rng.standard_normal((16, 8)).astype(np.float32))


# --- tensor_tensor with operands of one free size, different free shapes ---------------------
@nki.jit
def _tt_free_shapes(a, m):
    # dst / a [P, 2 * F]; m [P, F] broadcast to [P, 2, F]: attention_tkg's max subtraction
    p, n = a.shape
    f = m.shape[1]
    at = nl.load(a)
    mt = nl.load(m)
    res = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(res, at, nl.broadcast_to(mt.reshape((p, 1, f)), shape=(p, n // f, f)),
                       op=nl.subtract)
    out = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out


def test_tensor_tensor_same_free_size_other_shape(rng):
    a = rng.standard_normal((128, 112)).astype(np.float32)
    m = rng.standard_normal((128, 56)).astype(np.float32)
    golden = a - np.tile(m, (1, 2))
    assert_close(_tt_free_shapes(a, m), golden, atol=0, rtol=0)


@nki.jit
def _tt_other_size(a, b):
    at = nl.load(a)
    bt = nl.load(b)
    res = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(res, at, bt, op=nl.add)
    return a


def test_tensor_tensor_other_free_size_is_refused(rng):
    a = rng.standard_normal((64, 10)).astype(np.float32)
    b = rng.standard_normal((64, 2, 4)).astype(np.float32)
    with pytest.raises(nki.isa.NkiValidationError, match="shape must equal dst's"):
        _tt_other_size(a, b)


# --- dma_transpose SBUF -> SBUF (runtime/nisa/dma_transpose_sbuf.cc) --------------------------
@nki.jit
def _transpose_sb(x):
    r, c = x.shape
    a = nl.load(x)
    t = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, a)
    out = nl.ndarray((c, r), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


@nki.jit
def _transpose_sb_cast(x):
    # fp32 SBUF -> bf16 SBUF: the DMA casts as it transposes
    r, c = x.shape
    a = nl.load(x)
    t = nl.ndarray((c, r), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_transpose(t, a)
    f = nl.ndarray((c, r), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(f, t)
    out = nl.ndarray((c, r), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, f)
    return out


def test_dma_transpose_sbuf_to_sbuf(rng):
    x = rng.standard_normal((100, 72)).astype(np.float32)
    assert_close(_transpose_sb(x), x.T, atol=0, rtol=0)
    assert_close(_transpose_sb_cast(x), x.T, atol=0, rtol=2 ** -8)


@nki.jit
def _transpose_sb_4d(x):
    # [R, 1, B, C] -> [C, 1, B, R]: attention_cte's exp tile, one 2-D transpose per block b
    r, _, b, c = x.shape
    a = nl.load(x.reshape((r, b * c))).reshape((r, 1, b, c))
    t = nl.ndarray((c, 1, b, r), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, a)
    out = nl.ndarray((c, b * r), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t.reshape((c, b * r)))
    return out


def test_dma_transpose_sbuf_4d_swaps_first_and_last(rng):
    x = rng.standard_normal((64, 1, 3, 32)).astype(np.float32)
    golden = np.transpose(x, (3, 1, 2, 0)).reshape(32, 3 * 64)
    assert_close(_transpose_sb_4d(x), golden, atol=0, rtol=0)


@nki.jit
def _transpose_sb_bad_dst(x):
    a = nl.load(x)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # not [C, R]
    nisa.dma_transpose(t, a)
    return x


@nki.jit
def _transpose_from_psum(x):
    a = nl.load(x)
    p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(p, a)
    t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, p)
    return x


@nki.jit
def _transpose_4d_mismatch(x):
    a = nl.load(x.reshape((16, 8))).reshape((16, 1, 2, 4))
    t = nl.ndarray((4, 1, 2, 8), dtype=x.dtype, buffer=nl.sbuf)  # last dim 8, not 16
    nisa.dma_transpose(t, a)
    return x


def test_dma_transpose_sbuf_misuse(rng):
    x = rng.standard_normal((32, 16)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_transpose: operand 'dst'.*must be an "
                       r"SBUF tile \[16, 32\], the transpose of src"):
        _transpose_sb_bad_dst(x)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_transpose: operand 'src'.*PSUM.*must "
                       r"be in SBUF \(or HBM\)"):
        _transpose_from_psum(x)
    with pytest.raises(nisa.NkiValidationError, match=r"src \(16, 1, 2, 4\) -> dst \(4, 1, 2, 8\)"
                       r": a 3-D / 4-D transpose swaps the first and last dims"):
        _transpose_4d_mismatch(rng.standard_normal((16, 1, 2, 4)).astype(np.float32))


# --- nl.ndarray(address=...): a placed tile is the storage at that address -------------------
@nki.jit
def _placed(x):
    a = nl.load(x)
    bank = 2048
    p1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum, address=(0, 3 * bank))
    nisa.tensor_copy(p1, a)
    p2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum, address=(0, 3 * bank))
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, p2)  # p2 is p1's storage: it reads what p1 was written
    return out


def test_placed_psum_tiles_share_storage(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    assert_close(_placed(x), x, atol=0, rtol=0)


@nki.jit
def _many_placed(x):
    # 64 tiles over 4 bank addresses: more than PSUM's 8 banks if each took its own
    a = nl.load(x)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, 0.0)
    for i in range(64):
        p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum, address=(0, (i % 4) * 2048))
        nisa.tensor_copy(p, a)
        nisa.tensor_tensor(acc, acc, p, op=nl.add)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, acc)
    return out


def test_placed_tiles_reuse_banks(rng):
    x = rng.standard_normal((128, 32)).astype(np.float32)
    assert_close(_many_placed(x), 64 * x.astype(np.float64), atol=1e-4, rtol=1e-6)


@nki.jit
def _bad_address(x):
    nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum, address=(0, -2048))
    return x


def test_placed_bad_address_is_refused(rng):
    with pytest.raises(nisa.NkiValidationError, match=r"address=\(0, -2048\) must be \(partition, "
                       r"byte offset\)"):
        _bad_address(rng.standard_normal((8, 8)).astype(np.float32))


# --- dma_compute (runtime/nisa/dma_compute.cc) -----------------------------------------------
@nki.jit
def _dma_compute_hbm(a, b, c):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_compute(out, (a, b, c), scales=(1.0, 1.0, 1.0), reduce_op=nl.add)
    return out


@nki.jit
def _dma_compute_mixed(a, b):
    # SBUF dst from an HBM source and an SBUF one (a 3-D HBM view with a size-1 dim)
    bt = nl.load(b)
    res = nl.ndarray(b.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_compute(dst=res, srcs=[a[:, 0:1, :], bt], reduce_op=nl.add)
    f = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(f, res)
    out = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, f)
    return out


def test_dma_compute_sums_in_fp32(rng):
    a, b, c = (rng.standard_normal((6, 2, 300)).astype(np.float32) for _ in range(3))
    golden = a.astype(np.float64) + b + c
    assert_close(_dma_compute_hbm(a, b, c), golden, atol=1e-5, rtol=1e-6)


def test_dma_compute_sbuf_dst_casts(rng):
    a = rng.standard_normal((64, 2, 40)).astype(np.float32)
    b = rng.standard_normal((64, 40)).astype(np.float32)
    golden = a[:, 0, :].astype(np.float64) + b
    assert_close(_dma_compute_mixed(a, b), golden, atol=0, rtol=2 ** -8)


@nki.jit
def _dma_compute_bad(a, b, scales, reduce_op, psum):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    if psum:
        p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.dma_compute(p, [a, b], reduce_op=nl.add)
    else:
        nisa.dma_compute(out, [a, b], scales=scales, reduce_op=reduce_op)
    return out


def test_dma_compute_misuse(rng):
    a = rng.standard_normal((8, 16)).astype(np.float32)
    other = rng.standard_normal((8, 15)).astype(np.float32)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_compute: operand 'srcs\[1\]'.*\[8, 15\]"
                       r".*must have dst's shape \[8, 16\]"):
        _dma_compute_bad(a, other, None, nl.add, False)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_compute: scales\[1\] = 2: every scale "
                       r"must be 1.0"):
        _dma_compute_bad(a, a, (1.0, 2.0), nl.add, False)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_compute: scales has 1 values for 2 "
                       r"sources"):
        _dma_compute_bad(a, a, (1.0,), nl.add, False)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_compute: reduce_op=multiply: only "
                       r"nl.add"):
        _dma_compute_bad(a, a, None, nl.multiply, False)
    with pytest.raises(nisa.NkiValidationError, match=r"dma_compute: operand 'dst'.*PSUM: must be "
                       r"in HBM or SBUF, not PSUM"):
        _dma_compute_bad(a[:, :8].copy(), a[:, 8:].copy(), None, nl.add, True)


@nki.jit
def _copy_scalar_free_shapes(x):
    # dst [P, 1, F] from data [P, F]: router_topk's index arithmetic
    p, f = x.shape
    a = nl.load(x)
    c = nl.ndarray((p, 1, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(c, a)
    s = nl.ndarray((p, 1, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(s, a, op0=nl.multiply, operand0=3.0)
    nisa.tensor_tensor(s, s, c, op=nl.add)
    out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, s.reshape((p, f)))
    return out


def test_tensor_copy_and_scalar_same_free_size_other_shape(rng):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    assert_close(_copy_scalar_free_shapes(x), 4.0 * x.astype(np.float64), atol=1e-6, rtol=1e-6)
