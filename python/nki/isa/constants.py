"""nki.isa.constants: the enums NKI 0.6 kernels name (engines, DMA modes, reduce commands, matmul
modes, NeuronCore versions). They import nothing, so a kernel module can take them without the
instructions (``from nki.isa.constants import oob_mode``); nki.isa re-exports them."""
import enum


class engine(enum.Enum):
    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    dma = 4
    sync = 6
    unknown = 0


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    """Ordered: kernels branch on ``nisa.get_nc_version() <= nisa.nc_version.gen2``."""
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(enum.Enum):
    dma = 1
    gpsimd_dma = 2
