"""nkisim's side of the Python front end: what a run of an NKI kernel cost.

    import nkisim
    out = my_kernel(a, b)             # any nki.jit / nki.simulate call
    r = nkisim.last_run()
    r.simulated_ns, r.engine_busy_ns, r.instructions, r.bound_ns, r.ratio
    r.write_trace("kernel.trace.json")   # Perfetto / chrome://tracing

NKISIM_REPORT=1 prints r.summary() after every kernel; NKISIM_PROFILE picks the hardware profile.
``nkisim.typed(array, nl.bfloat16)`` passes an array in a dtype numpy lacks (nki/_arrays.py).
"""
from nki import _kernel  # first: nki sets the host BLAS up before the extension loads it
import _nkisim  # noqa: E402
from nki._api import api_table  # noqa: F401
from nki._arrays import typed  # noqa: F401

NkiValidationError = _nkisim.NkiValidationError
SimulatorError = _nkisim.SimulatorError
CommError = _nkisim.CommError


class RunReport:
    """The figures of one kernel run. Times are simulated nanoseconds unless named host_."""

    def __init__(self, run, hbm_bytes):
        self._run = run
        self.name = run.name
        self.lnc = run.lnc
        self.simulated_ns = run.simulated_ns
        self.host_ns = run.host_ns
        self.cores = [run.core_summary(i) for i in range(run.lnc)]
        self.profile = run.profile
        self.hbm_bytes = hbm_bytes
        busy = {}
        for core in self.cores:
            for engine, ns in core["engine_busy_ns"].items():
                busy[engine] = busy.get(engine, 0.0) + ns
        self.engine_busy_ns = busy  # summed over the physical cores; per core in .cores
        self.instructions = sum(c["instructions"] for c in self.cores)
        self.flops = sum(c["flops"] for c in self.cores)
        self._roofline()

    def _roofline(self):
        # As `nkisim kernel` reports it: HBM traffic of the arguments and results over the
        # cores' HBM ports, PE work at the bf16 peak, whichever is larger.
        p = self.profile
        self.hbm_bound_ns = self.hbm_bytes / (p["hbm_gbps_per_core"] * self.lnc)
        self.pe_bound_ns = self.flops / (p["peak_bf16_tflops"] * 1000.0 * self.lnc)
        self.bound_ns = max(self.hbm_bound_ns, self.pe_bound_ns)
        self.bound = "HBM" if self.hbm_bound_ns >= self.pe_bound_ns else "PE"
        self.ratio = self.simulated_ns / self.bound_ns if self.bound_ns > 0 else None

    def records(self, core=0):
        """Every instruction of a core: (name, engine, start_ns, end_ns, bytes, flops, operands)."""
        return self._run.records(core)

    def write_trace(self, path):
        """Writes the Chrome trace-event JSON (one process per core, one thread per engine)."""
        self._run.write_trace(str(path))

    def summary(self):
        lines = [f"nkisim: {self.name} on LNC {self.lnc}, profile {self.profile['name']}: "
                 f"simulated {self.simulated_ns:.1f} ns, {self.instructions} instructions, "
                 f"host {self.host_ns / 1e6:.1f} ms"]
        for i in range(self.lnc):
            lines.append(self._run.core_summary_text(i).rstrip())
        if self.ratio is not None:
            lines.append(f"roofline: HBM {self.hbm_bound_ns:.1f} ns, PE {self.pe_bound_ns:.1f} ns; "
                         f"{self.bound}-bound; simulated = {self.ratio:.2f}x the bound")
        return "\n".join(lines)

    def __repr__(self):
        return (f"RunReport({self.name!r}, simulated_ns={self.simulated_ns:.1f}, "
                f"instructions={self.instructions})")


def last_run():
    """The report of the most recent kernel run in this process (None before any)."""
    run = _kernel._last["run"]
    return None if run is None else RunReport(run, _kernel._last["hbm_bytes"])
