"""nki.collectives.all_to_all_v and all_gather_v across the ranks of `nkisim python --ranks N`: rank i sends
member j count(i, j) elements (counts known only in the metadata tensor), every rank checks what
it received against a plain numpy golden built from everyone's inputs, then the documented
misuse errors. Prints one line per rank; exits 1 when a check fails. Run by test_collectives.py."""
import sys

import numpy as np

import nki
import nki.collectives as ncc
import nki.language as nl


def count(i, j):
    return (3 * i + j) % 4 + 1  # 1..4 elements, different per pair


def rank_input(i, n):
    return (1000 * i + np.arange(n)).astype(np.float32)


def metadata(i, world, displs=None):
    counts = [count(i, j) for j in range(world)]
    if displs is None:
        displs = list(np.cumsum([0] + counts[:-1]))
    return np.array([counts, displs], dtype=np.uint32)


@nki.jit
def exchange(x, meta, world, out_len):
    out = nl.ndarray((out_len,), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all_v(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([list(range(world))]),
                     metadata_tensor=meta)
    return out


@nki.jit
def gather_v(x, meta, world, slot):
    out = nl.ndarray((world * slot,), dtype=x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather_v(srcs=[x], dsts=[out], replica_group=ncc.ReplicaGroup([list(range(world))]),
                     metadata_tensor=meta)
    return out


def gather_golden(world, slot):
    """Member s sends its elements [1, 1 + s + 1) (count s + 1 at displacement 1); slot s of
    every rank's dst holds them, the rest of the slot stays 0."""
    out = np.zeros(world * slot, dtype=np.float32)
    for s in range(world):
        out[s * slot:s * slot + s + 1] = rank_input(s, 8)[1:s + 2]
    return out


def golden(rank, world):
    parts = []
    for i in range(world):
        counts = [count(i, j) for j in range(world)]
        start = sum(counts[:rank])
        parts.append(rank_input(i, sum(counts))[start:start + counts[rank]])
    return np.concatenate(parts)


def main():
    world = int(sys.argv[1])
    rank = ncc.rank_id()
    sent = sum(count(rank, j) for j in range(world))
    want = golden(rank, world)
    out_len = 4 * world  # capacity; the received elements come first
    got = np.asarray(exchange(rank_input(rank, sent), metadata(rank, world), world, out_len))
    ok = np.array_equal(got[:want.size], want)
    errors = []
    try:  # displacements that are not the running sums of the counts
        bad = metadata(rank, world, displs=[0] * world)
        exchange(rank_input(rank, sent), bad, world, out_len)
        errors.append("no error for bad displacements")
    except nki.isa.NkiValidationError as e:
        if "must be the running sums of the send counts" not in str(e):
            errors.append(str(e))
    try:  # a metadata tensor with a column per world rank missing
        exchange(rank_input(rank, sent), metadata(rank, world)[:, :-1], world, out_len)
        errors.append("no error for a short metadata tensor")
    except nki.isa.NkiValidationError as e:
        if "one column per member" not in str(e):
            errors.append(str(e))
    slot = world + 1
    meta = np.array([[rank + 1] * world, [1] * world], dtype=np.uint32)
    gathered = np.asarray(gather_v(rank_input(rank, 8), meta, world, slot))
    if not np.array_equal(gathered, gather_golden(world, slot)):
        errors.append(f"all_gather_v {gathered} want {gather_golden(world, slot)}")
    try:  # a chunk larger than dst's slot
        big = np.array([[slot + 1] * world, [0] * world], dtype=np.uint32)
        gather_v(rank_input(rank, 8), big, world, slot)
        errors.append("no error for a chunk larger than the slot")
    except nki.isa.NkiValidationError as e:
        if "exceeds dst's slot" not in str(e):
            errors.append(str(e))
    print(f"rank {rank}: {'OK' if ok and not errors else 'WRONG'} received {got[:want.size]} "
          f"want {want} {errors}", flush=True)
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
