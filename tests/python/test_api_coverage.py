"""Small kernels over the rest of the supported API, each against numpy."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
import nkisim

from conftest import assert_close, bf16_exact


def test_nl_matmul_transpose_and_load_transpose2d(rng):
    @nki.jit
    def k(x, y):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        xt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x)
        prod = nl.matmul(a, nl.load(y))                   # x @ y (x transposed on the way)
        nl.store(out, nl.copy(prod))
        nl.store(xt, nl.copy(nl.transpose(a)))
        return out, xt

    x = rng.standard_normal((128, 128), dtype=np.float32)
    y = rng.standard_normal((128, 512), dtype=np.float32)
    out, xt = k(x, y)
    assert_close(out, x.astype(np.float64) @ y, 1e-4, 1e-4)
    np.testing.assert_array_equal(xt, x.T)


def test_dma_transpose_and_load_transpose2d(rng):
    @nki.jit
    def k(x):
        a = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=a, src=x)
        out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, a)
        out2 = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out2, nl.load_transpose2d(x))
        return out, out2

    x = bf16_exact(rng, (16, 128))
    out, out2 = k(nkisim.typed(x, nl.bfloat16))
    np.testing.assert_array_equal(out, x.T)
    np.testing.assert_array_equal(out2, x.T)


def test_bn_stats_aggr(rng):
    @nki.jit
    def k(x):
        t = nl.load(x)
        stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=t)
        mv = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, mv)
        return out

    x = rng.standard_normal((128, 256), dtype=np.float32)
    out = k(x)
    assert_close(out[:, 0], x.mean(1), 1e-5, 1e-5)
    assert_close(out[:, 1], x.var(1), 1e-5, 1e-5)


def test_predicated_copy_where_and_scalar_tensor_tensor(rng):
    @nki.jit
    def k(x, y):
        a, b = nl.load(x), nl.load(y)
        pred = nl.greater(a, b)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        picked = nl.copy(b)
        nisa.tensor_copy_predicated(dst=picked, src=a, predicate=pred)  # max(a, b)
        w = nl.where(pred, a, b)
        stt = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=stt, data=a, op0=nl.multiply, operand0=3.0, op1=nl.subtract,
                                  operand1=w)
        both = nl.add(picked, stt)
        nl.store(out, both)
        return out

    x = rng.standard_normal((128, 64), dtype=np.float32)
    y = rng.standard_normal((128, 64), dtype=np.float32)
    m = np.maximum(x, y)
    assert_close(k(x, y), m + (3 * x - m), 1e-5, 1e-5)


def test_views_reshape_bitcast_and_hbm_permute(rng):
    @nki.jit
    def k(x):
        out = nl.ndarray((4, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x[0])  # [128, 128]: an integer index drops an HBM dim
        r = t.reshape((128, 4, 32))
        for i in nl.static_range(4):
            nisa.dma_copy(dst=out[i], src=r[:, i, :])
        return out

    x = rng.standard_normal((2, 128, 128), dtype=np.float32)
    out = k(x)
    np.testing.assert_array_equal(out, x[0].reshape(128, 4, 32).transpose(1, 0, 2))

    @nki.jit
    def perm(x):
        out = nl.ndarray((128, 8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x.permute((1, 0, 2)))
        bits = nl.ndarray((128, 16), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=bits, src=x[0].view(nl.int32))
        return out, bits

    x = rng.standard_normal((8, 128, 16), dtype=np.float32)
    out, bits = perm(x)
    np.testing.assert_array_equal(out, x.transpose(1, 0, 2))
    np.testing.assert_array_equal(bits, x[0].view(np.int32))


def test_access_pattern_on_hbm(rng):
    @nki.jit
    def every_other_row(x):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[64, 64], [1, 32]], offset=0))
        nl.store(out, t)
        return out

    x = rng.standard_normal((128, 32), dtype=np.float32)
    np.testing.assert_array_equal(every_other_row(x), x[::2])


def test_gather_dropout_rand_constants(rng):
    @nki.jit
    def k(x, idx):
        t = nl.load(x)
        g = nl.gather_flattened(t, nl.load(idx))
        nl.random_seed(7)
        dropped = nl.dropout(t, 1.0)
        u = nl.rand((128, 64), dtype=nl.float32)
        c = nl.load(nl.shared_constant(np.full((128, 4), 2.0, np.float32)))
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(g, c))
        lim = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        both = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=both[:, 0:1], op=nl.maximum, data=dropped[0:1, :], axis=1)
        nisa.tensor_reduce(dst=both[:, 1:2], op=nl.maximum, data=u[0:1, :], axis=1)
        nl.store(lim, both)
        return out, lim

    x = rng.standard_normal((128, 64), dtype=np.float32)
    idx = rng.integers(0, 64, (128, 4)).astype(np.int32)
    out, lim = k(x, idx)
    np.testing.assert_array_equal(out, 2 * np.take_along_axis(x, idx, 1))
    assert lim[0, 0] == 0.0 and 0.0 < lim[0, 1] < 1.0


def test_partition_offsets_and_lnc_program_ids():
    @nki.jit
    def ids():
        out = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=nl.program_id() * 10 + nl.num_programs())
        nisa.dma_copy(dst=out[nl.program_id():nl.program_id() + 1, :], src=t)
        return out

    np.testing.assert_array_equal(ids[2](), [[2], [12]])
    np.testing.assert_array_equal(ids(), [[1], [0]])


def test_mx_needs_a_trn3_profile():
    @nki.jit
    def k():
        src = nl.zeros((32, 16), dtype=nl.bfloat16)
        dst = nl.ndarray((32, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        scale = nl.ndarray((32, 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=dst, src=src, dst_scale=scale)

    with pytest.raises(nisa.NkiValidationError, match="not supported"):
        k()


def test_mx_quantize_and_matmul_on_trn3(monkeypatch):
    monkeypatch.setenv("NKISIM_PROFILE", "trn3")

    @nki.jit
    def k():
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        ones = nl.full((128, 512), 1.0, dtype=nl.bfloat16)
        twos = nl.full((128, 2048), 2.0, dtype=nl.bfloat16)
        s = nl.ndarray((128, 128), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s_scale = nl.ndarray((128, 128), dtype=nl.uint8, buffer=nl.sbuf)
        m = nl.ndarray((128, 512), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        m_scale = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=s_scale, value=127)
        nisa.memset(dst=m_scale, value=127)
        nisa.quantize_mx(dst=s, src=ones, dst_scale=s_scale)
        nisa.quantize_mx(dst=m, src=twos, dst_scale=m_scale)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=s, moving=m, stationary_scale=s_scale,
                          moving_scale=m_scale)
        nl.store(out, nl.copy(acc))
        return out

    out = k()
    np.testing.assert_array_equal(out, np.full((128, 512), 4 * 128 * 2.0))
    assert nkisim.last_run().profile["peak_mx_tflops"] > 0
    assert nisa.get_nc_version() is nisa.nc_version.gen4


def test_registers_fori_loop_while_loop_and_scalar_offsets():
    @nki.jit
    def k(data, count):
        n = data.shape[1]
        out = nl.ndarray((1, n), dtype=nl.float32, buffer=nl.shared_hbm)
        bound = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bound, src=count)
        reg = nisa.register_alloc()
        nisa.register_load(reg, bound)
        cell = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

        def copy_one(i):  # out[0, i] = 10 * data[0, i] for i < count
            nisa.dma_copy(dst=cell, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
            nisa.tensor_scalar(dst=cell, data=cell, op0=nl.multiply, operand0=10.0)
            nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=cell)

        nl.fori_loop(0, reg, copy_one)
        left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=left, src=count)
        one = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=one, value=1)
        total = nl.zeros((1, 1), dtype=nl.float32)

        def add_one(r):  # total = count, one loop trip at a time
            nisa.tensor_scalar(dst=total, data=total, op0=nl.add, operand0=1.0)
            nisa.tensor_tensor(dst=left, data1=left, data2=one, op=nl.subtract)
            nisa.register_load(r, left)
            return r

        nl.while_loop(reg, add_one)
        summed = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(summed, total)
        return out, summed, data.select(1, bound)

    data = np.arange(8, dtype=np.float32).reshape(1, 8)
    out, summed, picked = k(data, np.array([[5]], np.int32))
    np.testing.assert_array_equal(out, [[0, 10, 20, 30, 40, 0, 0, 0]])
    assert summed[0, 0] == 5 and picked[0] == 5


def test_a_kernel_called_from_a_kernel_runs_inline():
    @nki.jit
    def inner(t):
        return nl.multiply(t, 3.0)

    @nki.jit
    def outer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, inner(nl.load(x)))
        return out

    x = np.ones((128, 4), np.float32)
    np.testing.assert_array_equal(outer(x), 3 * x)
    assert nkisim.last_run().name == "outer"


def test_identity_in_sbuf_and_1d_tiles():
    @nki.jit
    def k():
        eye = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        ones = nl.full((128, 128), 1.0, dtype=nl.float32)
        result = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=result, src=nl.matmul(eye, ones, transpose_x=True))
        column = nl.full((128,), 2.0, dtype=nl.float32)  # a 1-D tile: (128, 1)
        def all_equal(a, b):
            return bool(np.all(nl.equal(a, b).numpy() != 0))
        return (all_equal(result, ones), all_equal(result, eye), column.shape,
                all_equal(nl.abs(nl.negative(ones)), ones))

    assert k() == (True, False, (128, 1), True)
