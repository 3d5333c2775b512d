"""nki.typing: the annotations NKI kernels put on their parameters (``x: nt.tensor``,
``out: nt.mutable_tensor[shape, dtype]``). They are for readers and tools; nkisim checks
nothing from them (every operand is checked by the instruction that takes it)."""
from nki.tensor import NkiTensor


class _Annotation(type):
    """A class usable bare or subscripted: ``tensor`` and ``tensor[(128, 64), nl.float32]``."""

    def __getitem__(cls, params):
        return cls

    def __instancecheck__(cls, obj):
        return isinstance(obj, NkiTensor)


class tensor(metaclass=_Annotation):
    """An NkiTensor argument the kernel reads."""


class mutable_tensor(metaclass=_Annotation):
    """An NkiTensor argument the kernel writes."""


class scalar(metaclass=_Annotation):
    """A scalar argument."""
