"""NKI 0.6 (Neuron SDK 2.32) on nkisim: run NKI kernels written in Python on the simulated
NeuronCore, with its hardware rules, simulated costs and traces. ``import nki.language as nl``,
``import nki.isa as nisa``, ``import nki.collectives as ncc``; see docs/python.md."""
from nki import _api
from nki._api import NKI_VERSION
from nki._kernel import Kernel, jit, simulate  # noqa: F401
from nki import language, isa  # noqa: F401

__version__ = NKI_VERSION + ".0+nkisim"

_api.reference_names("nki", "jit simulate")
