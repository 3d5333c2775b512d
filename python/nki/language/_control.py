"""Iterators, program ids and hardware tile sizes. In nkisim a kernel runs as plain Python, as in
the NKI simulator: every iterator is a Python range (the simulator has no compiler to hand
affine / sequential / static hints to; the scoreboard orders instructions by their data)."""
import contextlib

from nki._runtime import _nkisim
from nki import _runtime


def _range(start, stop=None, step=1):
    # Bounds may be ints or registers (dynamic_range): a register's value is known, as the kernel
    # runs eagerly.
    if stop is None:
        start, stop = 0, start
    return range(int(start), int(stop), int(step))


affine_range = _range
sequential_range = _range
static_range = _range
dynamic_range = _range


def fori_loop(lower, upper, body_fun, step=1):
    """Calls body_fun(i) for i in range(lower, upper, step), i as a VirtualRegister."""
    from nki._register import VirtualRegister
    for i in range(int(lower), int(upper), int(step)):
        body_fun(VirtualRegister(i))


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r)."""
    r = init
    while int(r) != 0:
        r = body_fun(r)


def program_id(axis=0):
    """This program's index in the launch (0 or 1 under LNC 2)."""
    return _nkisim.program_id() if axis == 0 else 0


def num_programs(axes=0):
    return _nkisim.num_programs() if axes in (0, None) else 1


def program_ndim():
    return 1


@contextlib.contextmanager
def _no_reorder():
    yield


def no_reorder():
    """A context in which instructions keep program order (they always do in nkisim)."""
    return _no_reorder()


class _TileSize:
    """Hardware tile limits of the active hardware profile (NKISIM_PROFILE, default trn2)."""

    def _p(self):
        return _runtime.profile_info()

    @property
    def pmax(self):
        return self._p()["partitions"]

    @property
    def psum_bank_fmax(self):
        p = self._p()
        return p["psum_bytes_per_partition"] // p["psum_banks"] // 4

    psum_fmax = psum_bank_fmax

    @property
    def psum_bank_fmax_bytes(self):
        p = self._p()
        return p["psum_bytes_per_partition"] // p["psum_banks"]

    @property
    def gemm_stationary_fmax(self):
        return self._p()["pe_cols"]

    @property
    def gemm_moving_fmax(self):
        return self._p()["pe_max_moving_free"]

    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 4

    @property
    def psum_num_banks(self):
        return self._p()["psum_banks"]

    @property
    def sbuf_fmax_bytes(self):
        return self._p()["sbuf_bytes_per_partition"]

    @property
    def sbuf_fmax(self):
        return self.sbuf_fmax_bytes // 4

    @property
    def sbuf_size_bytes(self):
        return self.sbuf_fmax_bytes * self.pmax

    total_available_sbuf_size = sbuf_fmax_bytes


tile_size = _TileSize()
