"""The pinned NKI API version and how the package says what it leaves out.

Every public name of the NKI 0.6 reference (Neuron SDK 2.32: the stub files nki/api/nki/**/
__init__.py of aws-neuron/aws-neuron-sdk) exists in this package. A name nkisim does not
implement is a stub made by ``unsupported``: calling it (or, for a class, making one) raises
``NotImplementedError`` naming the API, the pinned version and why. ``api_table`` lists every
name with its status; docs/python.md prints that table.
"""

NKI_VERSION = "0.6"
NEURON_SDK = "2.32"

# module -> {name: reason}, filled by unsupported() as the modules load.
_UNSUPPORTED = {}
# module -> [public names of the 0.6 reference], registered by each module.
_REFERENCE = {}


def unsupported_error(qualname, reason):
    return NotImplementedError(
        f"{qualname} (NKI {NKI_VERSION}, Neuron SDK {NEURON_SDK}) is not implemented by nkisim: "
        f"{reason}")


def unsupported(module, name, reason):
    """A stand-in for module.name that raises NotImplementedError when called."""
    qualname = f"{module}.{name}"

    def stub(*args, **kwargs):
        raise unsupported_error(qualname, reason)

    stub.__name__ = name
    stub.__qualname__ = qualname
    stub.__doc__ = f"Not implemented by nkisim ({reason})."
    stub._nkisim_unsupported = reason
    _UNSUPPORTED.setdefault(module, {})[name] = reason
    return stub


def reference_names(module, names):
    """Records the public names the 0.6 reference gives `module` (for api_table)."""
    _REFERENCE[module] = sorted(set(names.split()))


def api_table():
    """Markdown: one row per public name of the NKI 0.6 reference, with nkisim's status."""
    import importlib
    for module in ("nki", "nki.language", "nki.isa", "nki.collectives"):
        importlib.import_module(module)  # each registers its reference names as it loads
    lines = ["| API | status |", "|---|---|"]
    for module in sorted(_REFERENCE):
        mod = importlib.import_module(module)
        for name in _REFERENCE[module]:
            reason = _UNSUPPORTED.get(module, {}).get(name)
            if reason is None and not hasattr(mod, name):
                reason = "missing"
            status = "supported" if reason is None else f"not implemented: {reason}"
            lines.append(f"| `{module}.{name}` | {status} |")
    return "\n".join(lines) + "\n"
