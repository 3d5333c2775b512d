"""NKI 0.6 (Neuron SDK 2.32) on nkisim: run NKI kernels written in Python on the simulated
NeuronCore, with its hardware rules, simulated costs and traces. ``import nki.language as nl``,
``import nki.isa as nisa``, ``import nki.collectives as ncc``; see docs/python.md."""
from nki import _runtime  # noqa: F401  (the extension, loaded after the host BLAS is set up)
from nki import _api  # noqa: E402
from nki._api import NKI_VERSION  # noqa: E402
from nki._kernel import Kernel, jit, simulate  # noqa: E402,F401
from nki import dtype, tensor, typing  # noqa: E402,F401
from nki import language, isa  # noqa: E402,F401
from nki import compiler, builtin  # noqa: E402,F401


def cpu_simulate(kernel):
    """The NKI CPU simulator's entry point: ``nki.cpu_simulate(kernel)[lnc](**inputs)`` runs the
    kernel on nkisim (the same as nki.simulate); ``[lnc]`` is optional."""
    return simulate(kernel)


__version__ = NKI_VERSION + ".0+nkisim"

_api.reference_names("nki", "jit simulate")
