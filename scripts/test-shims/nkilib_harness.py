"""TEST-ONLY pytest plugin (`-p nkilib_harness`, scripts/test-shims/README.md): registers
`nki.compiler.frontend`, which the NKI library's kernel tracer imports from the Neuron compiler
(not part of NKI's API and not of nkisim), as classes that refuse when used. The simulation mode
the harness runs on nkisim does not trace kernels."""
import sys
import types


class _Frontend:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        raise NotImplementedError(f"nki.compiler.frontend.{type(self).__name__}.{name}: the "
                                  "Neuron compiler's kernel tracer is not part of nkisim")


class NKIFrontend(_Frontend):
    pass


class ParserFrontend(NKIFrontend):
    pass


class TracerFrontend(NKIFrontend):
    pass


_frontend = types.ModuleType("nki.compiler.frontend")
_frontend.NKIFrontend, _frontend.ParserFrontend = NKIFrontend, ParserFrontend
_frontend.TracerFrontend = TracerFrontend
sys.modules.setdefault("nki.compiler.frontend", _frontend)


# `test/utils/scripts/remote_lock_scripts.py`, which the library's test/utils/core_lock_client.py
# imports, is not in the public repository at d2ad3a5. It locks cores on remote Trainium hosts;
# simulation runs never call it, so only the two names imported are given.
import dataclasses  # noqa: E402
import enum  # noqa: E402


class LockStatus(enum.Enum):
    ALLOCATED = 0
    NO_CORES = 1
    DRAINING = 2
    DRAINED = 3
    FLOCK_TIMEOUT = 4
    ERROR = 5

    @property
    def exit_code(self):
        return self.value

    @classmethod
    def from_exit_code(cls, code):
        return next((s for s in cls if s.value == code), cls.ERROR)


@dataclasses.dataclass
class LockResult:
    status: LockStatus = LockStatus.ERROR
    cores: list = dataclasses.field(default_factory=list)

    @staticmethod
    def from_json(text):
        raise NotImplementedError("remote core locking is not part of a simulation run")


_scripts = types.ModuleType("test.utils.scripts")
_scripts.__path__ = []
_lock = types.ModuleType("test.utils.scripts.remote_lock_scripts")
_lock.LockResult, _lock.LockStatus = LockResult, LockStatus
sys.modules.setdefault("test.utils.scripts", _scripts)
sys.modules.setdefault("test.utils.scripts.remote_lock_scripts", _lock)


# `test/utils/perf_analysis_private.py` (imported by test_orchestrator.py) is not in the public
# repository either: trace analysis of hardware profiles, never reached in simulation.
def analyze_trace(*args, **kwargs):
    raise NotImplementedError("test.utils.perf_analysis_private is not in the public NKI library")


_perf = types.ModuleType("test.utils.perf_analysis_private")
_perf.analyze_trace = analyze_trace
sys.modules.setdefault("test.utils.perf_analysis_private", _perf)


def pytest_configure(config):
    """The library's Orchestrator reads self._compiled_kernel after every inference, but sets it
    only when it compiles, which simulation mode skips (test_orchestrator.py at d2ad3a5): an
    AttributeError on every simulated test. A class-level None (no kernel was compiled) is what
    that code tests for."""
    try:
        from test.utils.test_orchestrator import Orchestrator
    except ImportError:
        return
    if not hasattr(Orchestrator, "_compiled_kernel"):
        Orchestrator._compiled_kernel = None
