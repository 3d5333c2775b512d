"""nki.collectives.collective_permute_implicit / _reduce / _current_processing_rank_id across the
ranks of `nkisim python --ranks N`: a ring all-gather built from n - 1 implicit permutes (each
chunk placed where current_processing_rank_id says it came from), two channels, a reduce permute,
rings of non-contiguous groups, and the documented misuse errors; every rank checks against numpy
goldens built from everyone's inputs. Prints one line per rank; exits 1 when a check fails. Run
by test_collectives.py."""
import sys

import numpy as np

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl

ROWS, COLS = 4, 32


def rank_input(r):
    return (100 * r + np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS))


@nki.jit
def ring_all_gather(x, world):
    """out[r] = rank r's x, by n - 1 ring steps: at step i this rank holds the chunk of rank
    current_processing_rank_id(i) and forwards it."""
    group = ncc.ReplicaGroup([list(range(world))])
    out = nl.ndarray((world, ROWS, COLS), dtype=x.dtype, buffer=nl.shared_hbm)
    bufs = [nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.shared_hbm) for _ in range(2)]
    nisa.dma_copy(dst=bufs[0], src=x)
    for i in range(world):
        src = ncc.collective_permute_implicit_current_processing_rank_id(
            iteration_id=i, replica_group=group)
        nisa.dma_copy(dst=out[src], src=bufs[i % 2])
        if i < world - 1:
            ncc.collective_permute_implicit(srcs_by_channel=[[bufs[i % 2]]],
                                            dsts_by_channel=[[bufs[(i + 1) % 2]]],
                                            replica_group=group)
    return out


@nki.jit
def two_channels_and_reduce(x, groups):
    group = ncc.ReplicaGroup(groups)
    ten = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(ten, nl.multiply(t, 10.0))
    d0 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    d1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit(srcs_by_channel=[[x], [ten]], dsts_by_channel=[[d0], [d1]],
                                    replica_group=group, channel_ids=[0, 1])
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[x]], srcs1_by_channel=[[ten]],
                                           dsts_by_channel=[[r]], replica_group=group, op=nl.add)
    return d0, d1, r


@nki.jit
def misuse(x, case):
    group = ncc.ReplicaGroup([])  # the whole world
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if case == "two_tensors":
        ncc.collective_permute_implicit([[x, x]], [[d, d]], group)
    elif case == "channel_ids":
        ncc.collective_permute_implicit([[x]], [[d]], group, channel_ids=[1])
    elif case == "channels":
        ncc.collective_permute_implicit([[x], [x]], [[d]], group, channel_ids=[0, 1])
    elif case == "sbuf":
        ncc.collective_permute_implicit([[nl.load(x)]], [[d]], group)
    elif case == "shape":
        ncc.collective_permute_implicit([[x]], [[d[0:2, :]]], group)
    elif case == "iteration":
        ncc.collective_permute_implicit_current_processing_rank_id(-1, group)
    elif case == "max":
        ncc.collective_permute_implicit_reduce([[x]], [[x]], [[d]], group, op=nl.maximum)
    return d


MISUSE = {
    "two_tensors": (nki.isa.NkiValidationError, "must hold exactly one tensor"),
    "channel_ids": (nki.isa.NkiValidationError, "must be consecutive integers from 0"),
    "channels": (nki.isa.NkiValidationError, "has 1 channels but channel_ids has 2"),
    "sbuf": (nki.isa.NkiValidationError, "must be an HBM tensor"),
    "shape": (nki.isa.NkiValidationError, "must have one shape and dtype"),
    "iteration": (nki.isa.NkiValidationError, "iteration_id -1: must be at least 0"),
    "max": (NotImplementedError, "reduce by sum (nl.add) only"),
}


def main():
    world = int(sys.argv[1])
    rank = ncc.rank_id()
    errors = []
    x = rank_input(rank)
    got = np.asarray(ring_all_gather(x, world))
    want = np.stack([rank_input(r) for r in range(world)])
    if not np.array_equal(got, want):
        errors.append(f"ring all-gather: max diff {np.abs(got - want).max()}")
    # the ring of the whole world, then rings of the even and the odd ranks
    for groups in ([list(range(world))],
                   [list(range(0, world, 2)), list(range(1, world, 2))]):
        ring = next(g for g in groups if rank in g)
        pred = ring[(ring.index(rank) - 1) % len(ring)]
        d0, d1, r = (np.asarray(a) for a in two_channels_and_reduce(x, groups))
        px = rank_input(pred)
        for what, a, b in (("channel 0", d0, px), ("channel 1", d1, px * np.float32(10)),
                           ("reduce", r, px + px * np.float32(10))):
            if not np.array_equal(a, b):
                errors.append(f"{groups} {what}: max diff {np.abs(a - b).max()}")
        for i in range(2 * len(ring)):
            got_id = ncc.collective_permute_implicit_current_processing_rank_id(i, groups)
            if got_id != ring[(ring.index(rank) - i) % len(ring)]:
                errors.append(f"{groups} step {i}: rank id {got_id}")
    for case, (kind, text) in MISUSE.items():
        try:
            misuse(x, case)
            errors.append(f"{case}: no error")
        except kind as e:
            if text not in str(e):
                errors.append(f"{case}: {e}")
    ok = not errors
    print(f"rank {rank}: {'OK' if ok else 'WRONG'} {errors}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
