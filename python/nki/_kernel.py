"""nki.jit kernels and nki.simulate on nkisim.

A call runs the kernel as Python on a fresh simulated logical core (LNC 1, or 2 with
``kernel[2]``): array arguments become HBM tensors (nki/_arrays.py), every nl / nisa call runs
on the runtime as it is made, and the result comes back as host arrays. The run (simulated time,
engine busy time, instructions, trace) is then ``nkisim.last_run()``; NKISIM_REPORT=1 prints its
summary. NKISIM_TIMING_ONLY=1 runs the kernel in nkisim's timing-only mode: the same instructions,
checks and simulated times, no values (outputs are zeros; reading a tile's values raises). The
hardware profile is NKISIM_PROFILE (a name such as trn2 / trn3 or a profile file),
else NEURON_PLATFORM_TARGET_OVERRIDE (trn2 / gen3, trn3 / gen4), else trn2.
"""
import functools
import inspect
import os

from nki._runtime import _nkisim
from nki import _arrays
from nki._runtime import profile_info, profile_spec, timing_only  # noqa: F401
from nki import _runtime
from nki import dtype as _dtypes

_last = {"run": None, "hbm_bytes": 0, "flops_hint": None}


class Kernel:
    """A kernel function made by nki.jit; ``kernel[2]`` launches it on LNC 2."""

    def __init__(self, fn, lnc=1, options=None):
        self.fn = fn
        self.lnc = lnc
        self.options = dict(options or {})
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        lnc = grid[0] if isinstance(grid, tuple) else grid
        if int(lnc) not in (1, 2):
            raise _nkisim.NkiValidationError(
                f"invalid argument: {self.fn.__name__}[{grid}]: LNC must be 1 or 2")
        return Kernel(self.fn, int(lnc), self.options)

    def __call__(self, *args, **kwargs):
        if _nkisim.in_kernel():
            return self.fn(*args, **kwargs)  # a kernel called from a kernel runs inline
        return run_kernel(self.fn, self.lnc, args, kwargs)


def jit(fn=None, **kwargs):
    """Makes fn an NKI kernel (options such as platform_target are accepted and ignored)."""
    if fn is None:
        return lambda f: Kernel(f, 1, kwargs)
    return Kernel(fn, 1, kwargs)


def simulate(kernel):
    """The callable that runs `kernel` (an nki.jit kernel or a plain function) on nkisim."""
    if not isinstance(kernel, Kernel):
        kernel = Kernel(kernel)
    return kernel


def _bind(fn, args, kwargs, buffer):
    """Arguments with every host array replaced by an HBM NkiTensor named after its parameter."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    arrays = []

    def convert(value, name):
        if not _arrays.is_array(value):
            return value
        arg = _arrays.Argument(value, name, buffer)
        arrays.append(arg)
        return arg.tensor

    new_args = [convert(v, names[i] if i < len(names) else f"arg{i}") for i, v in enumerate(args)]
    new_kwargs = {k: convert(v, k) for k, v in kwargs.items()}
    return new_args, new_kwargs, arrays


def run_kernel(fn, lnc, args, kwargs):
    buffer = _dtypes.shared_hbm if lnc == 2 else _dtypes.hbm
    new_args, new_kwargs, arrays = _bind(fn, args, kwargs, buffer)
    run = _nkisim.KernelRun(lnc, profile_spec(), fn.__name__)
    results = [None] * lnc

    def body(prg_id):
        results[prg_id] = fn(*new_args, **new_kwargs)

    _runtime.shared["hbm"] = _runtime.SharedHbm()
    _runtime.shared["placed"] = {}
    _nkisim.set_timing_only(timing_only())
    try:
        run.run(body)
    finally:
        _runtime.shared["hbm"] = None
        _runtime.shared["placed"] = None
        _nkisim.set_timing_only(False)
    for arg in arrays:
        arg.write_back()
    hbm_bytes = sum(a.tensor._h.size_bytes for a in arrays)
    hbm_bytes += _result_bytes(results[0])
    _last.update(run=run, hbm_bytes=hbm_bytes)
    if os.environ.get("NKISIM_REPORT", "0") not in ("", "0"):
        import nkisim
        print(nkisim.last_run().summary(), flush=True)
    torch_out = any(a.torch_dtype is not None for a in arrays)
    return _arrays.to_host(results[0], torch_out)


def _result_bytes(value):
    from nki.tensor import NkiTensor
    if isinstance(value, NkiTensor):
        return 0 if value.on_chip else value._h.size_bytes
    if isinstance(value, (list, tuple)):
        return sum(_result_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_result_bytes(v) for v in value.values())
    return 0
