"""Front-end defects of issue 41: views keep their base without reading the tile, bad Python
input raises NkiValidationError naming the value and the rule, and a blocked matmul in the style
of the SDK's fully-optimized one runs in timing-only mode."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
import nkisim
from nki.tensor import NkiTensor
from conftest import assert_close


def _no_host_read(monkeypatch):
    def boom(self, *args, **kwargs):
        raise AssertionError("a view read the tile's values on the host")
    monkeypatch.setattr(NkiTensor, "numpy", boom)
    monkeypatch.setattr(NkiTensor, "__bool__", boom)


def test_view_costs_no_host_read(monkeypatch):
    _no_host_read(monkeypatch)
    seen = {}

    @nki.jit
    def k(x):
        t = nl.load(x)
        v = t[0:64, :]
        w = v[:, 8:16]
        seen["bases"] = (v._base is t, w._base is t)
        out = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=w)
        return out

    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    out = k(x)
    assert seen["bases"] == (True, True)
    np.testing.assert_array_equal(out, x[0:64, 8:16])


def test_view_of_all_zero_tile_has_that_tile_as_base():
    seen = {}

    @nki.jit
    def k():
        z = nl.zeros((128, 16), dtype=nl.float32)
        seen["ok"] = z[0:32, :]._base is z and z[0:32, :][0:8, :]._base is z

    k()
    assert seen["ok"]


def test_view_in_timing_only_mode(monkeypatch):
    monkeypatch.setenv("NKISIM_TIMING_ONLY", "1")

    @nki.jit
    def k(x):
        t = nl.load(x)
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[64:128, :])
        return out

    out = k(np.ones((128, 32), np.float32))
    assert out.shape == (64, 32)


@nki.jit
def _blocked_matmul(lhs_t, rhs):
    """out = lhs_t.T @ rhs in the structure of the SDK's fully-optimized matmul: blocks of
    several 128 x 512 tiles held in SBUF as one tile per block, the tiles addressed by views,
    K accumulated in PSUM, results staged in SBUF and stored one block at a time."""
    K, M = lhs_t.shape
    N = rhs.shape[1]
    TK, TM, TN = 128, 128, 512
    BM, BN, BK = 2, 2, 2  # tiles per block
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for bn in nl.affine_range(N // (TN * BN)):
        res = nl.ndarray((TM, BM * BN * TN), dtype=nl.float32, buffer=nl.sbuf)
        for bm in nl.affine_range(M // (TM * BM)):
            accs = [[nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                     for _ in range(BN)] for _ in range(BM)]
            for bk in nl.sequential_range(K // (TK * BK)):
                lhs_blk = nl.ndarray((TK, BK * BM * TM), dtype=lhs_t.dtype, buffer=nl.sbuf)
                rhs_blk = nl.ndarray((TK, BK * BN * TN), dtype=rhs.dtype, buffer=nl.sbuf)
                for ik in nl.affine_range(BK):
                    k0 = (bk * BK + ik) * TK
                    m0, n0 = bm * BM * TM, bn * BN * TN
                    nisa.dma_copy(dst=lhs_blk[:, nl.ds(ik * BM * TM, BM * TM)],
                                  src=lhs_t[k0:k0 + TK, m0:m0 + BM * TM])
                    nisa.dma_copy(dst=rhs_blk[:, nl.ds(ik * BN * TN, BN * TN)],
                                  src=rhs[k0:k0 + TK, n0:n0 + BN * TN])
                for ik in nl.affine_range(BK):
                    for im in nl.affine_range(BM):
                        for jn in nl.affine_range(BN):
                            nisa.nc_matmul(
                                dst=accs[im][jn],
                                stationary=lhs_blk[:, nl.ds((ik * BM + im) * TM, TM)],
                                moving=rhs_blk[:, nl.ds((ik * BN + jn) * TN, TN)],
                                accumulate=bk > 0 or ik > 0)
            for im in nl.affine_range(BM):
                for jn in nl.affine_range(BN):
                    nisa.tensor_copy(dst=res[:, nl.ds((im * BN + jn) * TN, TN)],
                                     src=accs[im][jn])
            for im in nl.affine_range(BM):
                m0 = (bm * BM + im) * TM
                n0 = bn * BN * TN
                nisa.dma_copy(dst=out[m0:m0 + TM, n0:n0 + BN * TN],
                              src=res[:, nl.ds(im * BN * TN, BN * TN)])
    return out


def test_blocked_matmul_values(rng):
    lhs_t = rng.standard_normal((512, 256)).astype(np.float32)
    rhs = rng.standard_normal((512, 1024)).astype(np.float32)
    out = _blocked_matmul(lhs_t, rhs)
    assert_close(out, lhs_t.T.astype(np.float64) @ rhs, atol=1e-3, rtol=1e-4)


def test_blocked_matmul_timing_only(monkeypatch, rng):
    lhs_t = rng.standard_normal((512, 256)).astype(np.float32)
    rhs = rng.standard_normal((512, 1024)).astype(np.float32)
    _blocked_matmul(lhs_t, rhs)
    full = nkisim.last_run()
    monkeypatch.setenv("NKISIM_TIMING_ONLY", "1")
    out = _blocked_matmul(lhs_t, rhs)
    timed = nkisim.last_run()
    assert out.shape == (256, 1024)
    # The same instructions on the same timeline: timing-only changes no simulated cost.
    assert timed.instructions == full.instructions
    assert timed.simulated_ns == pytest.approx(full.simulated_ns, rel=1e-9)


def test_fractional_dim_is_refused():
    @nki.jit
    def k():
        nl.ndarray((128, 64.5), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(nisa.NkiValidationError, match=r"nl\.ndarray.*dim 1 is 64\.5.*positive integer"):
        k()


def test_fractional_dim_in_hbm_is_refused():
    with pytest.raises(nisa.NkiValidationError, match=r"dim 1 is 64\.5"):
        nl.ndarray((128, 64.5), dtype=nl.float32, buffer=nl.shared_hbm)


def test_nonpositive_dim_is_refused():
    @nki.jit
    def k():
        nl.ndarray((128, 0), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(nisa.NkiValidationError, match=r"dim 1 is 0.*positive"):
        k()


def test_hbm_tensor_beyond_the_logical_cores_hbm():
    @nki.jit
    def k():
        # 4 TiB of fp32
        return nl.ndarray((1 << 20, 1 << 20), dtype=nl.float32, buffer=nl.shared_hbm)

    with pytest.raises(nisa.NkiValidationError,
                       match=r"HBM tensor \(1048576, 1048576\) float32 needs 4398046511104 B.*"
                             r"hbm_bytes_per_chip"):
        k()


def test_nkiobject_dataclass_takes_unannotated_attributes_as_fields():
    import dataclasses

    @dataclasses.dataclass
    class Params(nl.NKIObject):
        size: int = 4
        index = None          # no annotation: a field all the same, as NKI kernels use it
        offset = 0

        def total(self):
            return self.size + self.offset

    p = Params(index=3, offset=5)
    assert (p.size, p.index, p.offset, p.total()) == (4, 3, 5, 9)
    assert Params().index is None
    assert [f.name for f in dataclasses.fields(Params)] == ["size", "index", "offset"]


def test_nkiobject_fields_default_to_none_as_nki_compiles_them():
    # NKI's language guide: every class field without a default defaults to None; the NKI
    # library's moe_tkg builds a dataclass leaving one such field out
    import dataclasses
    import typing

    @dataclasses.dataclass
    class Dims(nl.NKIObject):
        T: int
        unused: int
        K: typing.Optional[int] = 2
        LIMIT: typing.ClassVar[int] = 7

    d = Dims(T=4)
    assert (d.T, d.unused, d.K) == (4, None, 2)
    assert [f.name for f in dataclasses.fields(Dims)] == ["T", "unused", "K"]

    class Plain(nl.NKIObject):   # no @dataclass: the default __init__ takes the fields in order
        x: int
        y: bool = False

    p = Plain(1)
    assert (p.x, p.y) == (1, False)
    with pytest.raises(TypeError, match=r"takes 2 positional field\(s\) \(x, y\), got 3"):
        Plain(1, True, 3)


def test_a_tensor_is_true_without_a_read(monkeypatch):
    # `if params.expert_index:` tests an optional tensor for presence, as NKI's tracer does: an
    # index tile holding zeros is there all the same
    def boom(self, *args, **kwargs):
        raise AssertionError("truth read the tile's values on the host")
    monkeypatch.setattr(NkiTensor, "numpy", boom)

    @nki.jit
    def k(x):
        zeros = nl.zeros((4, 4), dtype=nl.float32)
        return bool(x), bool(zeros), bool(nl.equal(zeros, 1.0)), bool(zeros[0:2, 0:1])

    assert k(np.zeros((4, 4), np.float32)) == (True, True, True, True)


def test_nc_version_is_ordered():
    # kernels branch on `nisa.get_nc_version() <= nisa.nc_version.gen2` (the NKI library's sort)
    import nki.isa as nisa
    assert nisa.nc_version.gen2 < nisa.nc_version.gen3 < nisa.nc_version.gen4
    assert not nisa.get_nc_version() <= nisa.nc_version.gen2


def test_nki_dtypes_are_numpy_dtypes_where_numpy_has_them():
    # test code written for NKI makes arrays with NKI dtypes: np.zeros(shape, dtype=nl.float32)
    import numpy as np
    import nki.language as nl
    assert np.zeros(3, dtype=nl.float32).dtype == np.float32
    assert np.zeros(3, dtype=nl.uint32).dtype == np.uint32
    assert np.arange(4).astype(nl.float16).dtype == np.float16
    with pytest.raises(TypeError):
        np.zeros(3, dtype=nl.bfloat16)  # numpy has no bfloat16
