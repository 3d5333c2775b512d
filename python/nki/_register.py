"""Engine registers (nisa.VirtualRegister) as host integers.

nkisim runs a kernel eagerly, so a register's value is known when it is set: register_load reads
its tile's value then (a host read), and loops over registers (nl.fori_loop, nl.while_loop,
dynamic_range) are Python loops. What is not modelled: register moves and loads cost nothing on
the timeline (on hardware each is an engine instruction)."""
from nki._runtime import _nkisim
from nki.tensor import NKIObject, host_int


class VirtualRegister(NKIObject):
    """A register holding one integer; usable wherever an int is (range bounds, offsets)."""

    def __init__(self, state=None, frozen=False):
        self.value = _int(state)
        self.frozen = frozen

    def __int__(self):
        return self.value

    __index__ = __int__

    def __bool__(self):
        return self.value != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"


_int = host_int


def register_alloc(x=None):
    return VirtualRegister(x)


def register_move(dst, src):
    dst.value = _int(src)


def register_load(dst, src):
    """dst = the first element of src (an SBUF tile or HBM tensor), read now."""
    dst.value = _int(src)


def register_store(dst, src):
    """dst (a tile) = the register's value: one memset."""
    if dst.on_chip:
        _nkisim.isa.memset(dst._h, float(_int(src)), _nkisim.Engine.Vector)
    else:
        import numpy as np
        dst._h.write(np.full(dst.shape, _int(src), dtype=np.float32))
