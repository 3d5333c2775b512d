"""nki_cpu_simulator: the package the NKI library's test harness imports to run kernels on a CPU
simulator (test/utils/simulation_setup.py, ``--test-mode simulation``). It is a thin alias of
nkisim's ``nki``: ``nki_cpu_simulator.nki`` and each of its modules (``.language``, ``.isa``,
``.isa.constants``, ``.typing``, ``.compiler``, ``.tensor``, ``.language.dtypes``,
``.builtin``, ...) are the very module objects of ``nki``, registered under this package's name,
so there is one implementation and one set of dtypes and classes."""
import importlib
import sys

import nki

_MODULES = ("", ".dtype", ".tensor", ".typing", ".compiler", ".builtin", ".language",
            ".language.dtypes", ".isa", ".isa.constants", ".collectives")

for _suffix in _MODULES:
    _module = importlib.import_module("nki" + _suffix)
    sys.modules[__name__ + ".nki" + _suffix] = _module

del _suffix, _module
