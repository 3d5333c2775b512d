"""all_gather (HBM and SBUF), all_reduce, reduce_scatter, all_to_all and collective_permute
kernels across the ranks of `nkisim python --ranks N`, each rank checking its result against
numpy (inputs are f(rank, index), so every rank knows everyone's). Prints one line per rank and
exits 1 when a check fails. Run by test_collectives.py."""
import sys

import numpy as np

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl
import nkisim


def rank_input(rank, shape):
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 7 + rank
    return values.astype(np.float32)


@nki.jit
def gather_rows(x, world):
    """out[world * R, C]: every rank's x stacked in rank order."""
    r, c = x.shape
    out = nl.ndarray((world * r, c), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([list(range(world))]),
                   collective_dim=0)
    return out


@nki.jit
def reduce_then_scale(x, world):
    """out = 2 * sum over ranks of x: all_reduce in HBM, then one Vector op."""
    summed = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[x], dsts=[summed], replica_group=ncc.ReplicaGroup([list(range(world))]),
                   op=nl.add)
    t = nl.load(summed)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    scaled = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=scaled, data=t, op0=nl.multiply, operand0=2.0)
    nl.store(out, scaled)
    return out


@nki.jit
def gather_in_pairs(x, world):
    """all_gather within the groups [0, 1], [2, 3], ...: out = the pair's two inputs."""
    pairs = [[2 * i, 2 * i + 1] for i in range(world // 2)]
    out = nl.ndarray((2 * x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather([x], [out], replica_group=pairs, collective_dim=0)
    return out


@nki.jit
def gather_sbuf_columns(x, world):
    """all_gather of an SBUF tile along its free dim (collective_dim=1): out[P, world * F]."""
    t = nl.load(x)
    g = nl.ndarray((x.shape[0], world * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    ncc.all_gather([t], [g], replica_group=[list(range(world))], collective_dim=1)
    out = nl.ndarray(g.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, g)
    return out


@nki.jit
def scatter_alltoall_permute(x, world):
    """reduce_scatter (rank r gets chunk r of the sum), all_to_all (chunk j to rank j) and a ring
    collective_permute (rank r's x to rank r + 1) of x[world * 128, C]."""
    rows, cols = x.shape
    group = ncc.ReplicaGroup([list(range(world))])
    mine = nl.ndarray((rows // world, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.reduce_scatter([x], [mine], replica_group=group, collective_dim=0, op=nl.add)
    swapped = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all([x], [swapped], replica_group=group, collective_dim=0)
    passed = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = [(r, (r + 1) % world) for r in range(world)]
    ncc.collective_permute([x], [passed], source_target_pairs=ring)
    return mine, swapped, passed


def check_scatter_alltoall_permute(rank, world):
    shape = (world * 128, 64)
    mine, swapped, passed = scatter_alltoall_permute(rank_input(rank, shape), world)
    chunk = lambda a, j: a[j * 128:(j + 1) * 128]  # noqa: E731
    total = sum(rank_input(r, shape) for r in range(world))
    ok = np.array_equal(mine, chunk(total, rank))
    ok &= np.array_equal(swapped, np.concatenate([chunk(rank_input(r, shape), rank)
                                                  for r in range(world)]))
    return ok & np.array_equal(passed, rank_input((rank - 1) % world, shape))


def main():
    world = int(sys.argv[1])
    rank = ncc.rank_id()
    shape = (128, 256)
    ok = True
    gathered = gather_rows(rank_input(rank, shape), world)
    ok &= np.array_equal(gathered, np.concatenate([rank_input(r, shape) for r in range(world)]))
    t_gather = nkisim.last_run().simulated_ns
    busy = nkisim.last_run().engine_busy_ns.get("Collective", 0)
    reduced = reduce_then_scale(rank_input(rank, shape), world)
    ok &= np.array_equal(reduced, 2 * sum(rank_input(r, shape) for r in range(world)))
    t_reduce = nkisim.last_run().simulated_ns
    pair = gather_in_pairs(rank_input(rank, shape), world)
    mate = rank ^ 1
    first, second = sorted((rank, mate))
    both = np.concatenate([rank_input(first, shape), rank_input(second, shape)])
    ok &= np.array_equal(pair, both)
    ok &= check_scatter_alltoall_permute(rank, world)
    cols = gather_sbuf_columns(rank_input(rank, (128, 16)), world)
    ok &= np.array_equal(cols, np.concatenate([rank_input(r, (128, 16)) for r in range(world)], 1))
    print(f"rank {rank}/{world}: {'OK' if ok else 'WRONG'} all_gather {t_gather:.0f} ns "
          f"(collective busy {busy:.0f} ns), all_reduce {t_reduce:.0f} ns", flush=True)
    return 0 if ok and busy > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
