"""The core's handle on the runtime: the ``_nkisim`` extension (loaded after the host BLAS is
set up), the hardware profile a run uses, timing-only mode, and the HBM tensors an LNC 2 launch
shares. Everything in the package may import this module; it imports nothing of the package but
nki._host."""
import functools
import os

from nki import _host

_host.configure_openblas()  # before the first import of the extension

import _nkisim  # noqa: E402

_TARGETS = {"trn2": "trn2", "gen3": "trn2", "trn3": "trn3", "gen4": "trn3"}


def profile_spec():
    spec = os.environ.get("NKISIM_PROFILE")
    if spec:
        return spec
    target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "")
    if target in ("trn1", "gen2", "inf2"):
        raise _nkisim.SimulatorError(
            f"bad config: NEURON_PLATFORM_TARGET_OVERRIDE={target}: nkisim models trn2 and "
            f"trn3 (set NKISIM_PROFILE to a profile file for anything else)")
    return _TARGETS.get(target, "")


@functools.lru_cache(maxsize=8)
def _profile_info(spec):
    return _nkisim.profile_info(spec)


def timing_only():
    return os.environ.get("NKISIM_TIMING_ONLY", "0") not in ("", "0")


def profile_info():
    return _profile_info(profile_spec())


class SharedHbm:
    """The HBM tensors an LNC 2 launch allocates, shared by its two programs in allocation order."""

    def __init__(self):
        self.tensors = []
        self.count = {}

    def get(self, shape, dtype, name, make):
        prg = _nkisim.program_id()
        n = self.count.get(prg, 0)
        self.count[prg] = n + 1
        if n == len(self.tensors):
            self.tensors.append(make())
        t = self.tensors[n]
        if list(t.shape) != list(shape) or t.dtype is not dtype:
            raise _nkisim.NkiValidationError(
                f"invalid argument: nl.ndarray: shared HBM allocation {n} of program {prg} is "
                f"{tuple(shape)} {dtype!r}, the other program's is {t.shape} {t.dtype!r}: both "
                f"programs of an LNC 2 launch must allocate the same shared tensors in order")
        return t


shared = {"hbm": None, "placed": None}


def placed_tile(key, make):
    """The on-chip tile a kernel placed at an explicit address (nl.ndarray(address=...)), key
    (memory, address, shape, dtype): the same address, shape and dtype as the last tile placed
    there in one program is the same storage (kernels reuse PSUM banks this way: attention_cte
    puts a tile per loop step at one of four bank addresses). Another shape or dtype at that
    address is a new tile, and the last one is released when the kernel drops it."""
    placed = shared["placed"]
    if placed is None:
        return make()
    where, what = (_nkisim.program_id(),) + key[:2], key[2:]
    if where not in placed or placed[where][0] != what:
        placed[where] = (what, make())  # another tile at that address replaces the last one
    return placed[where][1]


def shared_allocation(shape, dtype, name, make):
    """The launch's shared tensor for this allocation (dtype: a resolved nki.dtype.DType)."""
    return shared["hbm"].get(shape, dtype, name, make)
