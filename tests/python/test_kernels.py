"""The project's NKI 0.6 kernels (kernels.py) against numpy goldens."""
import numpy as np

import nki
import nki.language as nl
import nkisim

import kernels
from conftest import assert_close, bf16_exact


def test_tiled_matmul_bf16_accumulates_over_k(rng):
    a, b = bf16_exact(rng, (256, 512)), bf16_exact(rng, (512, 1024))
    c = kernels.tiled_matmul(nkisim.typed(a, nl.bfloat16), nkisim.typed(b, nl.bfloat16))
    assert c.dtype == np.float32
    assert_close(c, a.astype(np.float64) @ b, 1e-5, 1e-6)  # exact products, fp32 sums
    r = nkisim.last_run()
    assert r.engine_busy_ns["PE"] > 0 and r.instructions > 0


def test_tiled_matmul_lnc2_fp32(rng):
    a = rng.standard_normal((128, 256), dtype=np.float32)
    b = rng.standard_normal((256, 1024), dtype=np.float32)
    c = kernels.tiled_matmul[2](a, b)
    assert_close(c, a.astype(np.float64) @ b, 1e-4, 1e-4)
    assert nkisim.last_run().lnc == 2


def test_matmul_default_accumulate_overwrites_then_adds(rng):
    lhs_t = rng.standard_normal((384, 128), dtype=np.float32)
    rhs = rng.standard_normal((384, 256), dtype=np.float32)
    out = nki.simulate(kernels.matmul_auto_accumulate)(lhs_t, rhs)
    assert_close(out, lhs_t.T.astype(np.float64) @ rhs, 1e-4, 1e-4)


def test_transpose_bf16(rng):
    x = bf16_exact(rng, (256, 384))
    y = kernels.transpose(nkisim.typed(x, nl.bfloat16))
    np.testing.assert_array_equal(y, x.T)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_isa(rng):
    x = rng.standard_normal((256, 512), dtype=np.float32)
    assert_close(kernels.softmax_isa(x), _softmax(x.astype(np.float64)), 1e-6, 1e-5)


def test_softmax_nl_composite(rng):
    x = rng.standard_normal((128, 1024), dtype=np.float32)
    assert_close(kernels.softmax_nl(x), _softmax(x.astype(np.float64)), 1e-6, 1e-5)


def test_rms_norm_bf16(rng):
    x = bf16_exact(rng, (256, 512))
    w = bf16_exact(rng, (1, 512))
    y = kernels.rms_norm(nkisim.typed(x, nl.bfloat16), nkisim.typed(w, nl.bfloat16), 1e-6)
    x64 = x.astype(np.float64)
    golden = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    assert_close(y, golden, 1e-2, 1e-2)  # bf16 output: 8 bits of mantissa


def test_lnc2_rows_split_between_programs(rng):
    x = rng.standard_normal((512, 256), dtype=np.float32)
    y = kernels.lnc2_gelu_rows[2](x)
    from math import erf
    golden = 2 * x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    assert_close(y, golden, 1e-3, 1e-3)
    cores = nkisim.last_run().cores
    assert cores[0]["instructions"] == cores[1]["instructions"] > 0


def test_lnc2_partials_reduced_with_sendrecv(rng):
    lhs_t = rng.standard_normal((512, 128), dtype=np.float32)
    rhs = rng.standard_normal((512, 256), dtype=np.float32)
    out = kernels.lnc2_matmul_sendrecv[2](lhs_t, rhs)
    assert_close(out, lhs_t.T.astype(np.float64) @ rhs, 1e-4, 1e-4)
    r = nkisim.last_run()
    # The exchange is a DMA on each core's engines (docs/dma.md): a queue's row records it and
    # every one of the 16 engines carries a share.
    exchanges = [rec for rec in r.records(0) if rec[0] == "sendrecv"]
    assert exchanges and exchanges[0][1].startswith("DMA queue")
    assert all(r.engine_busy_ns.get("DMA%d" % e, 0) > 0 for e in range(16))


def test_inputs_updated_in_place(rng):
    @nki.jit
    def double_in_place(x):
        t = nl.load(x)
        nl.store(x, nl.add(t, t))

    x = rng.standard_normal((128, 64), dtype=np.float32)
    expected = 2 * x
    assert double_in_place(x) is None
    np.testing.assert_array_equal(x, expected)


def test_nl_elementwise_reductions_and_views(rng):
    @nki.jit
    def mix(x):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        parts = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        parts[:, 0:1] = nl.sum(nl.exp(t), axis=1, keepdims=True)
        parts[:, 1:2] = nl.max(nl.abs(t), axis=[1], keepdims=True)
        parts[:, 2:3] = nl.mean(nl.square(t[:, 0:32]), axis=-1, keepdims=True)
        parts[:, 3:4] = nl.minimum(t[:, 5:6], 0.5)
        nl.store(out, parts)
        return out

    x = rng.standard_normal((128, 64), dtype=np.float32)
    golden = np.stack([np.exp(x).sum(1), np.abs(x).max(1), (x[:, :32] ** 2).mean(1),
                       np.minimum(x[:, 5], 0.5)], axis=1)
    assert_close(mix(x), golden, 1e-5, 1e-5)


def test_iota_memset_and_hbm_views():
    @nki.jit
    def fill():
        out = nl.ndarray((4, 128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
        import nki.isa as nisa
        nisa.iota(dst=t, pattern=[[1, 8]], offset=3, channel_multiplier=8)
        for i in nl.static_range(4):
            nisa.dma_copy(dst=out[i], src=t)
        z = nl.zeros((128, 8), dtype=nl.int32)
        nisa.dma_copy(dst=out[3, :, 4:8], src=z[:, 0:4])
        return out

    out = fill()
    golden = np.tile((3 + np.arange(128)[:, None] * 8 + np.arange(8)[None, :])[None], (4, 1, 1))
    golden[3, :, 4:8] = 0
    np.testing.assert_array_equal(out, golden)


def test_tile_size_and_dtypes():
    assert nl.tile_size.pmax == 128
    assert nl.tile_size.psum_bank_fmax == 512
    assert nl.tile_size.gemm_stationary_fmax == 128 and nl.tile_size.gemm_moving_fmax == 512
    assert nl.bfloat16 == "bfloat16" and nl.float32 == np.float32
    assert nl.bfloat16.itemsize == 2


def _busiest_engine_ns(p, row_bytes):
    """One [128, row_bytes / dtype] transfer's share on its busiest engine, by the DMA model's
    rules written out plainly (docs/dma.md): 128 / dma_engines partitions an engine, each row cut
    into descriptors of at most dma_descriptor_max_bytes, a descriptor costing
    max / dma_engine_gbps - max / dma_engine_raw_gbps beyond its bytes at the raw rate, and one
    4-byte completion semaphore."""
    mx, raw = p["dma_descriptor_max_bytes"], p["dma_engine_raw_gbps"]
    per_descriptor = mx / p["dma_engine_gbps"] - mx / raw
    rows = p["partitions"] // p["dma_engines"]
    descriptors = rows * -(-row_bytes // mx)
    return descriptors * per_descriptor + rows * row_bytes / raw + per_descriptor + 4 / raw


def test_naive_matmul_is_slower_by_what_the_dma_curve_implies(rng):
    # The same product, the same PE tiles and the same bytes moved; only the DMA shapes differ.
    m, k, n = 256, 1024, 4096
    a, b = bf16_exact(rng, (m, k)), bf16_exact(rng, (k, n))
    golden = a.astype(np.float64) @ b
    runs = {}
    for name, kernel in (("naive", kernels.tiled_matmul), ("careful", kernels.blocked_matmul)):
        c = kernel(nkisim.typed(a, nl.bfloat16), nkisim.typed(b, nl.bfloat16))
        assert_close(c, golden, 1e-5, 1e-6)
        runs[name] = nkisim.last_run()
    p = runs["naive"].profile
    eng = lambda cols, size: _busiest_engine_ns(p, cols * size)
    mb, kt = m // P, k // P
    # naive: [128, 128] a loads, [128, 512] b loads, [128, 512] fp32 stores
    naive = mb * kt * eng(P, 2) + mb * (n // BANK) * (kt * eng(BANK, 2) + eng(BANK, 4))
    # careful: [128, K] a loads, [128, 2048] b loads, [128, 2048] fp32 stores
    careful = mb * eng(k, 2) + mb * (n // BLOCK) * (kt * eng(BLOCK, 2) + eng(BLOCK, 4))
    implied = naive / careful
    ratio = runs["naive"].simulated_ns / runs["careful"].simulated_ns
    assert implied > 1.3  # the shapes make a difference worth showing
    assert abs(ratio / implied - 1) < 0.15, (ratio, implied)
    # Why: the naive kernel's engines are busy for longer (descriptors), and it is engine-bound.
    dma = lambda r: max(v for e, v in r.engine_busy_ns.items() if e.startswith("DMA") and e[3:].isdigit())
    assert dma(runs["naive"]) / dma(runs["careful"]) > 0.85 * implied
    assert dma(runs["naive"]) > 0.85 * runs["naive"].simulated_ns


P, BANK, BLOCK = kernels.P, kernels.BANK, kernels.BLOCK
