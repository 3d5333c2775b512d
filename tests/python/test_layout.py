"""python/nki imports downward only: a small core (the extension handle, dtypes, tensors,
registers) that language, isa, collectives and the launcher import, and nothing importing back.
The graph is read from the sources (every import statement, at module level or inside a
function), so a lazy import that closes a circle fails here too. The NKI 0.6 import surface the
NKI library and its test harness use is checked in fresh interpreters."""
import ast
import os
import subprocess
import sys

import pytest

import nki

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nki.__file__)))  # build/python
# The sources (build/python may hold copies of files since removed from python/).
SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")

# Layer of each module: a module may import only modules of a lower layer or of its own layer
# that come earlier in ORDER. The package __init__ modules (nki, nki.language, nki.isa) are the
# tops that assemble the public names.
ORDER = [
    "nki._api", "nki._host", "nki._runtime", "nki.dtype", "nki.tensor", "nki._register",
    "nki.typing", "nki.compiler", "nki.isa.constants",
    "nki.language._ops", "nki.language._memory", "nki.language._control",
    "nki.language.dtypes", "nki.language",
    "nki.isa", "nki.collectives", "nki._arrays", "nki._kernel", "nki.builtin", "nki",
]


def module_files():
    out = {}
    for dirpath, _, files in os.walk(os.path.join(SOURCES, "nki")):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), SOURCES)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join(rel)] = os.path.join(dirpath, f)
    return out


def imports_of(path, modules):
    """The nki modules a source file imports anywhere in it (from x import y: y when y is a
    module, else x)."""
    tree = ast.parse(open(path).read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules:
                    found.add(a.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in modules:
                    found.add(sub)
                elif node.module in modules:
                    found.add(node.module)
    return found


def graph():
    files = module_files()
    return {m: imports_of(p, files) - {m} for m, p in files.items()}


def find_cycle(g):
    """A list of modules forming a circle in g, or None."""
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                c = visit(n)
                if c:
                    return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            c = visit(m)
            if c:
                return c
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_under_python_nki():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_place_in_the_order():
    assert sorted(module_files()) == sorted(ORDER)


def test_modules_import_downward_only():
    rank = {m: i for i, m in enumerate(ORDER)}
    bad = [f"{m} imports {n}" for m, deps in graph().items() for n in deps
           if rank[n] >= rank[m]]
    assert not bad, "upward imports: " + "; ".join(sorted(bad))


def _fresh(code):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_each_module_imports_alone_in_dependency_order():
    for m in ORDER:
        r = _fresh(f"import importlib; importlib.import_module({m!r})")
        assert r.returncode == 0, f"import {m} alone:\n{r.stderr}"


HARNESS = """
import nki_cpu_simulator.nki.builtin as sim_builtin
import nki_cpu_simulator.nki.compiler as sim_ncc
import nki_cpu_simulator.nki.isa as sim_nisa
import nki_cpu_simulator.nki.isa.constants as sim_nisa_constants
import nki_cpu_simulator.nki.language as sim_nl
import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
import nki_cpu_simulator.nki.tensor as sim_ntensor
import nki_cpu_simulator.nki.typing as sim_nt
from nki_cpu_simulator import nki as sim_nki
import nki, nki.isa, nki.language
assert sim_nki is nki and sim_nisa is nki.isa and sim_nl is nki.language
assert sim_nisa_constants.oob_mode is nki.isa.oob_mode
assert sim_dtypes.bfloat16 is nki.language.bfloat16 is nki.dtype.bfloat16
import numpy as np

@nki.jit
def double(x):
    out = nki.language.ndarray(x.shape, dtype=x.dtype, buffer=nki.language.shared_hbm)
    t = nki.language.load(x)
    nki.isa.tensor_scalar(dst=t, data=t, op0=nki.language.multiply, operand0=2.0)
    nki.language.store(out, t)
    return out

x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
for lnc in (1, 2):
    out = sim_nki.cpu_simulate(double)[lnc](x=x)
    assert np.array_equal(out, 2 * x), (lnc, out)
print("ok")
"""


def test_the_library_harness_imports_and_runs_through_nki_cpu_simulator():
    r = _fresh(HARNESS)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


SURFACE = """
import nki, nki.dtype, nki.typing as nt, nki.compiler, nki.tensor, nki.builtin
import nki.language as nl, nki.language.dtypes, nki.isa as nisa
from nki.isa.constants import dge_mode, oob_mode, engine, matmul_perf_mode, nc_version
from nki.language import NKIObject
import dataclasses

@dataclasses.dataclass
class Cfg(nl.NKIObject):
    dtype: nki.dtype = nl.bfloat16

def f(x: nt.tensor, y: nt.mutable_tensor[(128, 4), nl.float32]) -> nt.tensor:
    return x

assert Cfg().dtype is nki.dtype.bfloat16
assert oob_mode.skip is nisa.oob_mode.skip and dge_mode.hwdge is nisa.dge_mode.hwdge
assert engine.gpsimd is nisa.gpsimd_engine
print("ok")
"""


def test_the_import_surface_kernels_name():
    r = _fresh(SURFACE)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
