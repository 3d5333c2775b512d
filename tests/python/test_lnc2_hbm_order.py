"""LNC 2: the two programs' writes to shared HBM land in simulated-time order, not in the order
the two host threads run them (runtime/hbm_write_order.h). Each kernel makes the host run the
write that lands earlier in simulated time last (that program sleeps first), so host order would
give the other answer."""
import time

import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
import nkisim


@nki.jit
def same_element_race(x, late, sleeper):
    """Both programs store a [128, 64] tile into the same shared output. Program `late` first runs
    a chain of Vector instructions its tile depends on, so its store completes later in simulated
    time; program `sleeper` waits on the host before its store, so the host runs it last."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(10 * (me + 1)))
    if me == late:
        big = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=big, value=0.0)
        for _ in range(8):
            nisa.tensor_scalar(dst=big, data=big, op0=nl.add, operand0=1.0)
        nisa.tensor_tensor(dst=t, data1=t, data2=big[:, 0:64], op=nl.add)
    if me == sleeper:
        time.sleep(0.3)
    nisa.dma_copy(dst=out, src=t)
    return out


def _store_end(core):
    ends = [r[3] for r in nkisim.last_run().records(core) if r[0] == "dma_copy"]
    return ends[-1]


@pytest.mark.parametrize("late", [0, 1])
def test_the_later_landing_store_wins_though_the_host_runs_it_first(late):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 64
    early = 1 - late
    out = same_element_race[2](x, late, early)
    # The premise: program `late`'s store ends later in simulated time.
    assert _store_end(late) > _store_end(early)
    golden = x + 10 * (late + 1) + 8  # the late program's tile: x + its offset + 8 adds of 1
    np.testing.assert_array_equal(out, golden)


@nki.jit
def equal_time_race(x, sleeper):
    """Both programs run the same instructions (so their stores end at the same simulated time),
    each storing its own value into the same output."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(10 * (me + 1)))
    if me == sleeper:
        time.sleep(0.3)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("sleeper", [0, 1])
def test_equal_landing_times_go_to_program_one_whoever_runs_last(sleeper):
    x = np.ones((128, 64), dtype=np.float32)
    out = equal_time_race[2](x, sleeper)
    assert _store_end(0) == _store_end(1)
    np.testing.assert_array_equal(out, x + 20)


@nki.jit
def zero_then_store_halves(x, sleeper):
    """Each program zeroes the whole shared output, then stores its half of x + 1 (the pattern of
    a library test utility). Program `sleeper` waits on the host first, so the host runs its
    zeroing after the other program's store."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    if me == sleeper:
        time.sleep(0.3)
    z = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    nisa.dma_copy(dst=out, src=z)
    half = cols // 2
    t = nl.ndarray((rows, half), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, me * half:(me + 1) * half])
    for _ in range(4):  # the store's tile comes from compute, after the zeroing is issued
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=0.25)
    nisa.dma_copy(dst=out[:, me * half:(me + 1) * half], src=t)
    return out


@pytest.mark.parametrize("sleeper", [0, 1])
def test_both_zero_then_store_their_halves(sleeper):
    x = np.random.default_rng(3).standard_normal((128, 512)).astype(np.float32)
    out = zero_then_store_halves[2](x, sleeper)
    for core in (0, 1):
        zero_end, store_end = [r[3] for r in nkisim.last_run().records(core)
                               if r[0] == "dma_copy" and r[5] == 0][-2:]
        assert store_end > zero_end
    golden = x.copy()
    for _ in range(4):  # the kernel's four fp32 adds, in order
        golden = golden + np.float32(0.25)
    np.testing.assert_array_equal(out, golden)


def test_lnc1_keeps_program_order():
    x = np.ones((128, 64), dtype=np.float32)
    out = equal_time_race(x, 5)  # LNC 1: one program, no ordering object
    np.testing.assert_array_equal(out, x + 10)


@nki.jit
def scatter_halves(x, idx, sleeper):
    """Each program scatters its half of x's rows to the output rows idx names (a permutation,
    so the halves land on disjoint rows), with the same instructions, so both scatters end at the
    same simulated time. Only the rows a scatter writes are its own: the other program's rows of
    the same output stay as that program wrote them (the moe_cte pattern)."""
    rows, cols = x.shape
    half = rows // 2
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    t = nl.ndarray((half, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[me * half:(me + 1) * half, :])
    i = nl.ndarray((half, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx[me * half:(me + 1) * half, :])
    if me == sleeper:
        time.sleep(0.3)
    nisa.dma_copy(dst=out.ap([[cols, half], [1, cols]], offset=0, vector_offset=i, indirect_dim=0),
                  src=t)
    return out


@pytest.mark.parametrize("sleeper", [0, 1])
def test_scatters_to_disjoint_rows_at_equal_times_both_land(sleeper):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 96)).astype(np.float32)
    idx = rng.permutation(128).reshape(128, 1).astype(np.int32)
    out = scatter_halves[2](x, idx, sleeper)
    assert _store_end(0) == _store_end(1)
    golden = np.zeros_like(x)
    golden[idx[:, 0]] = x
    np.testing.assert_array_equal(out, golden)


@nki.jit
def both_accumulate(x, sleeper):
    """Both programs add their tile onto the same shared output with dma_compute (out = out + t),
    the read-modify-write the NKI library sums partial outputs with: both additions land."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    me = nl.program_id()
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(me + 1))
    if me == sleeper:
        time.sleep(0.3)
    nisa.dma_compute(dst=out, srcs=[out, t], reduce_op=nl.add, scales=[1.0, 1.0])
    return out


@pytest.mark.parametrize("sleeper", [0, 1])
def test_accumulations_of_both_programs_both_land(sleeper):
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32) / 32
    out = both_accumulate[2](x, sleeper)
    np.testing.assert_array_equal(out, x * 1 + x * 2)
