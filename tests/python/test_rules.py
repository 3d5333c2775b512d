"""Kernels that break a hardware rule raise NkiValidationError (an AssertionError, as the NKI
simulator documents) naming the rule; an API nkisim does not implement raises
NotImplementedError naming it and the pinned version."""
import numpy as np
import pytest

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl


def test_validation_error_is_an_assertion_error():
    assert issubclass(nisa.NkiValidationError, AssertionError)


def test_256_partition_tile():
    @nki.jit
    def k(x):
        t = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)

    with pytest.raises(nisa.NkiValidationError, match=r"256.*128|128.*256"):
        k(np.zeros((256, 512), np.float32))


@nki.jit
def _matmul_into_psum(a, b):
    """One nc_matmul of a^T b into a PSUM tile as wide as b."""
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))


def test_psum_tile_over_one_bank():
    with pytest.raises(nisa.NkiValidationError, match="bank|512"):
        _matmul_into_psum(np.zeros((128, 128), np.float32), np.zeros((128, 1024), np.float32))


def test_sbuf_over_capacity():
    @nki.jit
    def k():
        keep = [nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        return keep

    with pytest.raises(nisa.NkiValidationError, match="out of resources.*SBUF"):
        k()


def test_matmul_mismatched_contraction():
    with pytest.raises(nisa.NkiValidationError, match="nc_matmul.*moving.*partition"):
        _matmul_into_psum(np.zeros((128, 128), np.float32), np.zeros((64, 256), np.float32))


def test_error_names_operand_and_rule():
    @nki.jit
    def k(x):
        t = nl.load(x)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=t, data2=t[:, 0:32], op=nl.add)

    with pytest.raises(nisa.NkiValidationError) as e:
        k(np.zeros((128, 64), np.float32))
    assert "tensor_tensor" in str(e.value) and "invalid argument" in str(e.value)


def test_lnc2_error_reaches_python_without_hanging():
    @nki.jit
    def k(x):
        if nl.program_id() == 1:
            raise ValueError("program 1 gives up")
        t = nl.load(x)
        nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)

    with pytest.raises(ValueError, match="program 1 gives up"):
        k[2](np.zeros((128, 8), np.float32))


def test_sendrecv_outside_lnc2():
    @nki.jit
    def k(x):
        t = nl.load(x)
        nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)

    with pytest.raises(nisa.NkiValidationError, match="LNC 2"):
        k(np.zeros((128, 8), np.float32))


@pytest.mark.parametrize("call", [
    lambda: nisa.topk(None, None, None, 8),
    lambda: nl.prelu(None),
    lambda: nl.average(None),
])
def test_unimplemented_api_names_itself_and_the_version(call):
    with pytest.raises(NotImplementedError, match="NKI 0.6"):
        call()


def test_a_replica_group_that_is_not_a_list_of_ranks_is_refused_by_name():
    for group in (None, 3, [["a"]]):
        with pytest.raises(nisa.NkiValidationError, match="replica_group: .* must be a ReplicaGroup or a list"):
            ncc.collective_permute_implicit([], [], group)


def test_unimplemented_messages():
    with pytest.raises(NotImplementedError, match=r"nki\.isa\.topk \(NKI 0\.6, Neuron SDK 2\.32\)"):
        nisa.topk(None, None, None, 8)
    with pytest.raises(NotImplementedError, match=r"nki\.language\.tfloat32"):
        nl.ndarray((128, 4), dtype=nl.tfloat32)


def test_replica_groups_must_partition_the_world():
    import os
    import subprocess
    import sys
    code = """
import numpy as np, nki, nki.collectives as ncc, nki.language as nl
@nki.jit
def g(x, groups):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([x], [out], replica_group=groups, collective_dim=0)
    return out
x = np.ones((128, 4), np.float32)
assert (g(x, ncc.ReplicaGroup([[0]])) == 1).all()   # a world of one rank outside mpirun
for bad in ([[0, 1]], [[0], [0]]):
    try:
        g(x, bad)
    except AssertionError as e:
        print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "rank 1 is outside the world" in out.stdout and "rank 0 is in two groups" in out.stdout
