"""The tiled matmul written in Python (kernels.tiled_matmul, nisa) and the same kernel in C++
(kernels/examples/tiled_matmul.cc) give the same outputs and the same simulated time, event for
event on the timeline and in the written trace; so do the row softmax in Python nl ops
(kernels.row_softmax) and kernels/examples/row_softmax.cc in C++ nl."""
import json

import numpy as np
import pytest

import _nkisim
import nki.language as nl
import nkisim

import kernels
from conftest import bf16_exact


def _cpp_tiled_matmul(a, b, lnc, dtype):
    run = _nkisim.KernelRun(lnc, "", "tiled_matmul_cpp")
    ta = _nkisim.TensorView.create(list(a.shape), dtype.c, "a")
    tb = _nkisim.TensorView.create(list(b.shape), dtype.c, "b")
    tc = _nkisim.TensorView.create([a.shape[0], b.shape[1]], _nkisim.DType.fp32, "c")
    ta.write(a)
    tb.write(b)
    _nkisim.examples.tiled_matmul(run, ta, tb, tc)
    return run, tc.read()


def _assert_same_runs(py, cpp, lnc, tmp_path):
    assert py.simulated_ns == cpp.simulated_ns
    for core in range(lnc):
        py_records, cpp_records = py.records(core), cpp.records(core)
        assert len(py_records) == len(cpp_records) > 0
        for i, (p, c) in enumerate(zip(py_records, cpp_records)):
            assert p == c, f"core {core} instruction {i}: python {p} vs C++ {c}"

    py.write_trace(tmp_path / "py.json")
    cpp.write_trace(str(tmp_path / "cpp.json"))
    events = [json.loads((tmp_path / f).read_text())["traceEvents"]
              for f in ("py.json", "cpp.json")]
    assert events[0] == events[1]


@pytest.mark.parametrize("lnc", [1, 2])
def test_python_and_cpp_tiled_matmul_agree_event_for_event(rng, lnc, tmp_path):
    a, b = bf16_exact(rng, (256, 512)), bf16_exact(rng, (512, 1536))
    c_py = kernels.tiled_matmul[lnc](nkisim.typed(a, nl.bfloat16), nkisim.typed(b, nl.bfloat16))
    py = nkisim.last_run()
    cpp, c_cpp = _cpp_tiled_matmul(a, b, lnc, nl.bfloat16)
    np.testing.assert_array_equal(c_py, c_cpp)
    _assert_same_runs(py, cpp, lnc, tmp_path)


@pytest.mark.parametrize("lnc", [1, 2])
def test_python_and_cpp_nl_row_softmax_agree_event_for_event(rng, lnc, tmp_path):
    x = rng.standard_normal((384, 1280), dtype=np.float32)  # a partial block, a partial chunk
    y_py = kernels.row_softmax[lnc](nkisim.typed(x, nl.bfloat16))
    py = nkisim.last_run()
    cpp = _nkisim.KernelRun(lnc, "", "row_softmax_cpp")
    tx = _nkisim.TensorView.create(list(x.shape), _nkisim.DType.bf16, "x")
    ty = _nkisim.TensorView.create(list(x.shape), _nkisim.DType.bf16, "y")
    tx.write(x)
    _nkisim.examples.row_softmax(cpp, tx, ty)
    np.testing.assert_array_equal(y_py, ty.read())
    _assert_same_runs(py, cpp, lnc, tmp_path)
