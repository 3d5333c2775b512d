"""nki.collectives of NKI 0.6 on nkisim's collectives layer: one MPI rank per process (run the
script with ``nkisim python --ranks N script.py``), HBM tensors moved over MPI, each collective
priced by the collective model (algorithm chosen by size and group shape) and joined into the
ranks' simulated clocks. Outside mpirun the world is one rank."""
import atexit
import dataclasses
import sys

import numpy as np

from nki._runtime import _nkisim
from nki import _api
from nki import dtype as _dtypes
from nki.language._ops import add
from nki.tensor import NKIObject, NkiTensor

_coll = _nkisim.coll
_M = "nki.collectives"
_started = False


@dataclasses.dataclass
class ReplicaGroup(NKIObject):
    """Groups of world ranks taking part in a collective together: ``ReplicaGroup([[0, 1, 2,
    3]])``. The 0.6 reference leaves the field unnamed; nkisim calls it ``replica_groups`` and
    also accepts a plain list of rank lists wherever a ReplicaGroup goes. Groups must not
    overlap and (in nkisim) must cover every rank."""
    replica_groups: list = dataclasses.field(default_factory=list)


def _world():
    global _started
    rank, size = _coll.world()
    if not _started:
        _started = True
        atexit.register(_coll.finalize)
        if size > 1:
            _abort_on_uncaught_exception()
    return rank, size


def _abort_on_uncaught_exception():
    # An exception on one rank must end the job, not leave the others waiting in a collective.
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.flush()
        _coll.abort(1)

    sys.excepthook = hook


def _groups(replica_group):
    groups = replica_group.replica_groups if isinstance(replica_group, ReplicaGroup) \
        else replica_group
    try:
        groups = [[int(r) for r in g] for g in groups]
    except (TypeError, ValueError):
        raise _nkisim.NkiValidationError(
            f"invalid argument: replica_group: {replica_group!r}: must be a ReplicaGroup or a list "
            "of lists of integer ranks") from None
    if not groups:
        groups = [list(range(_world()[1]))]
    _world()
    return groups


def _pairs(srcs, dsts, name, sbuf_ok=True):
    """(src, dst) runtime handle pairs, all HBM or all SBUF as the 0.6 reference requires. An
    SBUF pair is staged through host-side HBM tensors (see _Staged); the collective's cost is the
    collective model's, as for HBM tensors."""
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    dsts = list(dsts) if isinstance(dsts, (list, tuple)) else [dsts]
    if len(srcs) != len(dsts):
        raise _nkisim.NkiValidationError(
            f"invalid argument: {name}: {len(srcs)} srcs but {len(dsts)} dsts")
    for t in srcs + dsts:
        if not isinstance(t, NkiTensor):
            raise _nkisim.NkiValidationError(
                f"invalid argument: {name}: {t!r} is not an NkiTensor")
    on_chip = {t.on_chip for t in srcs + dsts}
    if on_chip == {False}:
        return [(s._h, d._h) for s, d in zip(srcs, dsts)]
    if len(on_chip) > 1 or len(srcs) > 1:
        raise _nkisim.NkiValidationError(
            f"invalid argument: {name}: tensors must be all in HBM or all in SBUF, and SBUF "
            f"collectives take one tensor each (the 0.6 reference's rule)")
    if not sbuf_ok:
        raise _api.unsupported_error(f"{_M}.{name} on SBUF tensors",
                                     "the 0.6 reference supports HBM tensors only")
    return [_Staged(srcs[0], dsts[0])]


class _Staged:
    """An SBUF collective run on HBM copies: the source tile's values into an HBM tensor before,
    the result into the destination tile after (host copies, no instruction: the collective
    advances every engine past its end, so later instructions wait for it as for the hardware's
    SBUF collective)."""

    def __init__(self, src, dst):
        self.src, self.dst = src, dst

    def stage(self):
        """The HBM (src, dst) pair the collective runs on."""
        s = _nkisim.TensorView.create(list(self.src.shape), self.src._h.dtype, "sbuf_src")
        s.write(self.src.numpy())
        self.out = _nkisim.TensorView.create(list(self.dst.shape), self.dst._h.dtype, "sbuf_dst")
        return s, self.out

    def finish(self):
        self.dst._h.write(self.out.read())


def _run(pairs, collective):
    for pair in pairs:
        staged = isinstance(pair, _Staged)
        collective(*(pair.stage() if staged else pair))
        if staged:
            pair.finish()


def _check_sum(op, name):
    if op is not add:
        raise _api.unsupported_error(f"{_M}.{name}(op={getattr(op, '__name__', op)})",
                                     "nkisim's collectives reduce by sum (nl.add) only")


def rank_id(name=None):
    """This process's world rank."""
    return _world()[0]


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    groups = _groups(replica_group)
    _run(_pairs(srcs, dsts, "all_gather"),
         lambda s, d: _coll.all_gather(groups, s, d, int(collective_dim)))


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    _check_sum(op, "all_reduce")
    groups = _groups(replica_group)
    _run(_pairs(srcs, dsts, "all_reduce"), lambda s, d: _coll.all_reduce(groups, s, d))


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None):
    _check_sum(op, "reduce_scatter")
    if int(collective_dim) != 0:
        raise _api.unsupported_error(f"{_M}.reduce_scatter(collective_dim != 0)",
                                     "the 0.6 reference supports only 0")
    groups = _groups(replica_group)
    _run(_pairs(srcs, dsts, "reduce_scatter"), lambda s, d: _coll.reduce_scatter(groups, s, d))


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    groups = _groups(replica_group)
    _run(_pairs(srcs, dsts, "all_to_all", sbuf_ok=False),
         lambda s, d: _coll.all_to_all(groups, s, d, int(collective_dim)))


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    """Each (source, target) pair sends source's src to target's dst. Every rank walks the pairs
    in the same order, so the exchanges cannot deadlock."""
    ((s, d),) = _pairs(srcs, dsts, "collective_permute", sbuf_ok=False)
    rank = _world()[0]
    for i, (source, target) in enumerate(source_target_pairs):
        if rank == source and rank == target:
            _nkisim.isa.dma_copy(d, s)
        elif rank == source:
            _coll.send(s, int(target), i)
        elif rank == target:
            _coll.recv(d, int(source), i)


def _bad(name, what):
    return _nkisim.NkiValidationError(f"invalid argument: {name}: {what}")


def _one_hbm(tensors, name, field):
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if len(tensors) != 1 or not isinstance(tensors[0], NkiTensor) or tensors[0].on_chip:
        raise _bad(name, f"{field} must be exactly one HBM NkiTensor (the 0.6 reference's rule), "
                         f"got {tensors!r}")
    return tensors[0]


def _flat(t, n):
    """The first n elements of HBM tensor t as rows [n, 1] (the v-collectives count elements)."""
    size = 1
    for d in t.shape:
        size *= d
    return t.reshape((size, 1))[0:n, :]._h


def _metadata(metadata_tensor, group, name, rows_needed):
    """The uint32 metadata rows [rows, len(group)] as integer lists."""
    if not isinstance(metadata_tensor, NkiTensor) or metadata_tensor.on_chip:
        raise _bad(name, f"metadata_tensor must be an HBM NkiTensor, got {metadata_tensor!r}")
    shape = tuple(metadata_tensor.shape)
    if len(shape) != 2 or shape[0] < rows_needed or shape[0] > 4 or shape[1] != len(group):
        raise _bad(name, f"metadata_tensor shape {shape} must be ({rows_needed}..4, "
                         f"{len(group)}): rows of counts / displacements, one column per member "
                         f"of the replica group {group}")
    values = metadata_tensor.numpy().astype("int64")
    return [list(map(int, row)) for row in values]


def _running_sum(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def _variable_operands(op, srcs, dsts, replica_group, metadata_tensor, recv_counts_known,
                       has_rdispls):
    """The operands of a variable collective: src and dst, the replica groups, this rank's group,
    the metadata's row count (2, + recv counts, + recv displacements) and its rows, checked."""
    src, dst = _one_hbm(srcs, op, "srcs"), _one_hbm(dsts, op, "dsts")
    rank = _world()[0]
    groups = _groups(replica_group)
    group = next(g for g in groups if rank in g)
    rows = 2 + bool(recv_counts_known) + bool(has_rdispls)
    meta = _metadata(metadata_tensor, group, op, rows)
    return src, dst, groups, group, rows, meta


def all_to_all_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, priority=None, name=None):
    """A variable all-to-all over flat element buffers (collectives/all_to_all_v.h): metadata row
    0 the elements this rank sends each member, row 1 their displacements in src; row 2 (with
    recv_counts_known) the elements expected from each member, row 3 (with has_rdispls) where
    they land in dst. nkisim sends each member's elements in member order, so the displacements
    must be the running sums of the counts; received elements are packed in member order."""
    op = "all_to_all_v"
    src, dst, groups, group, rows, meta = _variable_operands(
        op, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls)
    counts, displs = meta[0], meta[1]
    if any(c < 0 for c in counts):
        raise _bad(op, f"send counts {counts} (metadata row 0) must be >= 0")
    if displs != _running_sum(counts):
        raise _bad(op, f"send displacements {displs} (metadata row 1) must be the running sums "
                       f"of the send counts {counts}: nkisim sends each member's elements in "
                       f"member order")
    total = sum(counts)
    src_size = _size(src)
    if total > src_size:
        raise _bad(op, f"send counts {counts} sum to {total}, more than src's {src_size} elements")
    recv = _coll.all_to_all_v(groups, _flat(src, total), counts, _flat(dst, _size(dst)))
    if recv_counts_known and meta[2] != list(recv):
        raise _bad(op, f"recv counts {meta[2]} (metadata row 2) differ from the counts the "
                       f"members sent, {list(recv)}")
    if has_rdispls and meta[rows - 1] != _running_sum(recv):
        raise _bad(op, f"recv displacements {meta[rows - 1]} (metadata row {rows - 1}) must be "
                       f"the running sums of the received counts {list(recv)}: nkisim packs "
                       f"received elements in member order")


def all_gather_v(srcs, dsts, replica_group, metadata_tensor, recv_counts_known=False,
                 has_rdispls=False, priority=None, name=None):
    """A variable all-gather over flat element buffers: each member sends the one chunk
    src[displ : displ + count] (metadata rows 0 / 1, first column) to every member; dst is cut
    into one equal slot per member and member s's chunk lands at the start of slot s. Run as an
    all_to_all_v of that chunk to every member (the same bytes on the links; host copies stage
    the chunk and place the received ones). With has_rdispls the receive displacements must be
    the slot starts; with recv_counts_known the counts are checked against what arrived."""
    op = "all_gather_v"
    src, dst, groups, group, rows, meta = _variable_operands(
        op, srcs, dsts, replica_group, metadata_tensor, recv_counts_known, has_rdispls)
    count, displ = meta[0][0], meta[1][0]
    n, dst_size = len(group), _size(dst)
    slot = dst_size // n
    if count < 0 or displ < 0 or displ + count > _size(src):
        raise _bad(op, f"send count {count} at displacement {displ} (metadata rows 0 / 1, first "
                       f"column) must lie within src's {_size(src)} elements")
    if count > slot:
        raise _bad(op, f"send count {count} exceeds dst's slot of {slot} elements ({dst_size} "
                       f"elements over {n} members)")
    if has_rdispls and meta[rows - 1] != [s * slot for s in range(n)]:
        raise _bad(op, f"recv displacements {meta[rows - 1]} (metadata row {rows - 1}) must be "
                       f"the slot starts {[s * slot for s in range(n)]} in nkisim")
    chunk = src.numpy().reshape(-1)[displ:displ + count]
    stage_in = _nkisim.TensorView.create([n * count, 1], src._h.dtype, "all_gather_v_src")
    stage_in.write(np.tile(chunk, n).reshape(n * count, 1).astype(np.float32))
    stage_out = _nkisim.TensorView.create([max(n * slot, 1), 1], dst._h.dtype, "all_gather_v_dst")
    recv = list(_coll.all_to_all_v(groups, stage_in, [count] * n, stage_out))
    if recv_counts_known and meta[2] != recv:
        raise _bad(op, f"recv counts {meta[2]} (metadata row 2) differ from the counts the "
                       f"members sent, {recv}")
    got = np.asarray(stage_out.read()).reshape(-1)
    out = np.asarray(dst.numpy(), dtype=np.float32).reshape(-1).copy()
    at = 0
    for s_, c in enumerate(recv):
        out[s_ * slot:s_ * slot + c] = got[at:at + c]
        at += c
    dst._h.write(out.reshape(tuple(dst.shape)))


def _size(t):
    n = 1
    for d in t.shape:
        n *= d
    return n


# --- Ring permutes with implicit sources and targets (NKI 0.6) ------------------------------------
_MAX_CHANNELS = 4  # the reference's maximum (4 within a node; 2 for other groups)


def _ring_of(groups, name):
    """This rank's ring (its replica group, in the group's order) and its place in it."""
    rank = _world()[0]
    for g in groups:
        if rank in g:
            return g, g.index(rank)
    raise _bad(name, f"rank {rank} is in no group of the replica group {groups}")


def _channels(by_channel, channel_ids, name, field):
    """The one tensor of each channel, after the reference's rules on channels."""
    if not isinstance(by_channel, (list, tuple)) or not by_channel:
        raise _bad(name, f"{field} must be a non-empty list with one list per channel, got "
                         f"{by_channel!r}")
    ids = [int(c) for c in channel_ids]
    if ids != list(range(len(ids))) or len(ids) > _MAX_CHANNELS:
        raise _bad(name, f"channel_ids {list(channel_ids)}: must be consecutive integers "
                         f"from 0, at most {_MAX_CHANNELS} channels")
    if len(by_channel) != len(ids):
        raise _bad(name, f"{field} has {len(by_channel)} channels but channel_ids has {len(ids)}")
    out = []
    for c, tensors in enumerate(by_channel):
        if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
            raise _bad(name, f"{field}[{c}] must hold exactly one tensor (coalesced collectives "
                             f"are not supported), got {tensors!r}")
        t = tensors[0]
        if not isinstance(t, NkiTensor) or t.on_chip:
            raise _bad(name, f"{field}[{c}][0] {t!r} must be an HBM tensor")
        out.append(t)
    return out


def _ring_pairs(groups):
    """(source, target) of every group's ring, each rank to its successor; every rank builds
    the same list, so collective_permute's walk over it cannot deadlock."""
    return [(g[j], g[(j + 1) % len(g)]) for g in groups for j in range(len(g))]


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=[0],
                                priority=None, name=None):
    """Each rank sends its channel's source to its successor in its replica group's ring and
    receives its predecessor's into the channel's destination (a collective_permute over the
    ring's pairs, one per channel)."""
    n = "collective_permute_implicit"
    groups = _groups(replica_group)
    srcs = _channels(srcs_by_channel, channel_ids, n, "srcs_by_channel")
    dsts = _channels(dsts_by_channel, channel_ids, n, "dsts_by_channel")
    _ring_of(groups, n)
    for s, d in zip(srcs, dsts):
        if tuple(s.shape) != tuple(d.shape) or s.dtype is not d.dtype:
            raise _bad(n, f"src {s!r} and dst {d!r} must have one shape and dtype")
        collective_permute([s], [d], _ring_pairs(groups))


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel,
                                       replica_group, op, channel_ids=[0], priority=None,
                                       name=None):
    """op(srcs0, srcs1) on this rank (a dma_compute: DMA arithmetic, priced as a DMA), sent to
    the ring successor; the predecessor's result lands in dsts. nkisim reduces by sum only."""
    n = "collective_permute_implicit_reduce"
    _check_sum(op, n)
    groups = _groups(replica_group)
    srcs0 = _channels(srcs0_by_channel, channel_ids, n, "srcs0_by_channel")
    srcs1 = _channels(srcs1_by_channel, channel_ids, n, "srcs1_by_channel")
    dsts = _channels(dsts_by_channel, channel_ids, n, "dsts_by_channel")
    _ring_of(groups, n)
    for a, b, d in zip(srcs0, srcs1, dsts):
        if not (tuple(a.shape) == tuple(b.shape) == tuple(d.shape)) or not (
                a.dtype is b.dtype is d.dtype):
            raise _bad(n, f"srcs0 {a!r}, srcs1 {b!r} and dst {d!r} must have one shape and dtype")
        reduced = _nkisim.TensorView.create(list(d.shape), d._h.dtype, "permute_reduce")
        _nkisim.isa.dma_compute(reduced, [a._h, b._h], [1.0, 1.0])
        collective_permute([NkiTensor(reduced, _dtypes.hbm, "permute_reduce")], [d],
                           _ring_pairs(groups))


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group,
                                                           channel_id=0, name=None):
    """The rank whose data this rank holds at ring step iteration_id: itself at 0, then its
    predecessors in turn (the data moves one place down the ring a step)."""
    n = "collective_permute_implicit_current_processing_rank_id"
    if not 0 <= int(channel_id) < _MAX_CHANNELS:
        raise _bad(n, f"channel_id {channel_id}: must be in [0, {_MAX_CHANNELS})")
    if int(iteration_id) < 0:
        raise _bad(n, f"iteration_id {iteration_id}: must be at least 0")
    ring, at = _ring_of(_groups(replica_group), n)
    return ring[(at - int(iteration_id)) % len(ring)]


_api.reference_names(_M, """
ReplicaGroup all_gather all_gather_v all_reduce all_to_all all_to_all_v collective_permute
collective_permute_implicit collective_permute_implicit_current_processing_rank_id
collective_permute_implicit_reduce rank_id reduce_scatter
""")
