"""Host speed of the Python front end against the C++ nl path on the same kernel, in one run.

The tiled matmul of tests/python/kernels.py (Python, NKI 0.6 API) and of
kernels/examples/tiled_matmul.cc (C++), on the same bf16 inputs and one logical core, alternating
runs; prints each one's median host time, the ratio (target <= 3x at 2048 x 2048 x 2048) and the
Python overhead per instruction. The two runs' simulated times must be equal (they are the same
instructions; tests/python/test_equal_cost.py checks it event for event).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_frontend_bench.py [--size 2048] [--reps 3]

With NKISIM_TIMING_ONLY=1 both run in the timing-only mode (no arithmetic): what is left is the
front ends' own cost per instruction.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
import _nkisim  # noqa: E402
import kernels  # noqa: E402
import nki.language as nl  # noqa: E402
from nki import _kernel  # noqa: E402
import nkisim  # noqa: E402


def run_python(a, b):
    start = time.perf_counter()
    kernels.tiled_matmul(nkisim.typed(a, nl.bfloat16), nkisim.typed(b, nl.bfloat16))
    return time.perf_counter() - start, nkisim.last_run()


def run_cpp(a, b):
    # In the mode the Python run uses (NKISIM_TIMING_ONLY), as nki._kernel sets it per run.
    _nkisim.set_timing_only(_kernel.timing_only())
    try:
        return _run_cpp(a, b)
    finally:
        _nkisim.set_timing_only(False)


def _run_cpp(a, b):
    start = time.perf_counter()
    run = _nkisim.KernelRun(1, "", "tiled_matmul_cpp")
    ta = _nkisim.TensorView.create(list(a.shape), _nkisim.DType.bf16, "a")
    tb = _nkisim.TensorView.create(list(b.shape), _nkisim.DType.bf16, "b")
    tc = _nkisim.TensorView.create([a.shape[0], b.shape[1]], _nkisim.DType.fp32, "c")
    ta.write(a)
    tb.write(b)
    _nkisim.examples.tiled_matmul(run, ta, tb, tc)
    tc.read()
    return time.perf_counter() - start, run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=2048, help="M = K = N")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    n = args.size
    a = (rng.integers(-8, 9, (n, n)) / 8).astype(np.float32)
    b = (rng.integers(-8, 9, (n, n)) / 8).astype(np.float32)
    py_times, cpp_times, py_kernel, cpp_kernel = [], [], [], []
    for rep in range(args.reps):
        # Alternate which front end goes first, so a drift in the machine's load hits both.
        order = (run_python, run_cpp) if rep % 2 == 0 else (run_cpp, run_python)
        for fn in order:
            t, run = fn(a, b)
            if fn is run_python:
                py, py_t = run, py_times
                py_kernel.append(run.host_ns / 1e9)
            else:
                cpp, py_t = run, cpp_times
                cpp_kernel.append(run.host_ns / 1e9)
            py_t.append(t)
    assert py.simulated_ns == cpp.simulated_ns, (py.simulated_ns, cpp.simulated_ns)
    py_s, cpp_s = statistics.median(py_times), statistics.median(cpp_times)
    py_k, cpp_k = statistics.median(py_kernel), statistics.median(cpp_kernel)
    per_instr_us = (py_k - cpp_k) / py.instructions * 1e6
    mode = "timing-only" if _kernel.timing_only() else "functional"
    print(f"tiled matmul {n} x {n} x {n} bf16, LNC 1, {mode}, {py.instructions} instructions, "
          f"simulated {py.simulated_ns / 1e3:.1f} us (both front ends)")
    print(f"kernel host time (median of {args.reps}): Python {py_k * 1e3:.1f} ms, C++ "
          f"{cpp_k * 1e3:.1f} ms, ratio {py_k / cpp_k:.2f}x; Python overhead "
          f"{per_instr_us:.1f} us per instruction")
    print(f"whole call (with the input / output copies): Python {py_s * 1e3:.1f} ms, C++ "
          f"{cpp_s * 1e3:.1f} ms, ratio {py_s / cpp_s:.2f}x")


if __name__ == "__main__":
    main()
