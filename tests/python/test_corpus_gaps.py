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
def _transpose_bad(src):
    t = nl.ndarray((8, 4, 16), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(t, src)
    return src


def test_dma_transpose_two_large_inner_dims_is_refused(rng):
    with pytest.raises(NotImplementedError, match=r"dma_transpose\(src \(16, 4, 8\).*middle dims are 1"):
        _transpose_bad(rng.standard_normal((16, 4, 8)).astype(np.float32))


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
