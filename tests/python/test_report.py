"""nkisim.last_run(): simulated time, engine busy time, instruction count, roofline, trace;
NKISIM_REPORT=1 prints it; NKISIM_PROFILE picks the hardware profile."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import kernels
import nkisim


def test_last_run_figures(tmp_path):
    a = np.ones((128, 128), np.float32)
    kernels.tiled_matmul(a, a)
    r = nkisim.last_run()
    assert r.simulated_ns > 0 and r.instructions == len(r.records())
    assert set(r.engine_busy_ns) >= {"PE", "Vector"}
    assert r.flops >= 2 * 128 ** 3
    assert r.bound_ns > 0 and r.ratio >= 1.0
    r.write_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e.get("name") == "nc_matmul" for e in trace["traceEvents"])
    assert "simulated" in r.summary()


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, cwd=os.path.dirname(__file__))


KERNEL = """
    import numpy as np, kernels, nkisim
    kernels.tiled_matmul(np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))
    print("SIM", nkisim.last_run().simulated_ns, nkisim.last_run().profile["name"])
"""


def test_nkisim_report_prints_the_summary():
    out = _run(KERNEL, NKISIM_REPORT="1")
    assert out.returncode == 0, out.stderr
    assert "nkisim: tiled_matmul on LNC 1" in out.stdout and "roofline" in out.stdout


def test_nkisim_profile_selects_the_profile():
    trn2 = _run(KERNEL, NKISIM_PROFILE="trn2")
    trn3 = _run(KERNEL, NKISIM_PROFILE="trn3")
    assert trn2.returncode == 0 and trn3.returncode == 0, trn2.stderr + trn3.stderr
    assert trn2.stdout.split()[-1] != trn3.stdout.split()[-1]
    bad = _run(KERNEL, NKISIM_PROFILE="/nonexistent/profile.textproto")
    assert bad.returncode != 0 and "SimulatorError" in bad.stderr


def test_timing_only_mode_gives_the_same_times():
    code = """
    import numpy as np, kernels, nkisim
    a = np.ones((256, 512), np.float32)
    c = kernels.tiled_matmul(a, np.ones((512, 1024), np.float32))
    r = nkisim.last_run()
    print("RUN", r.simulated_ns, r.instructions, float(c.max()))
    """
    functional, timing = _run(code), _run(code, NKISIM_TIMING_ONLY="1")
    assert functional.returncode == 0 and timing.returncode == 0, functional.stderr + timing.stderr
    f, t = functional.stdout.split()[-3:], timing.stdout.split()[-3:]
    assert f[:2] == t[:2] and float(f[2]) == 512.0 and float(t[2]) == 0.0
    denied = _run("""
    import numpy as np, nki, nki.language as nl
    @nki.jit
    def k():
        return nl.equal(nl.full((128, 4), 1.0, nl.float32), 1.0).numpy()
    k()
    """, NKISIM_TIMING_ONLY="1")
    assert denied.returncode != 0 and "timing-only" in denied.stderr
