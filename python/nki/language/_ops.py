"""nl's element-wise ops, reductions and composites, built from the runtime's routing table.

Each nl function calls the runtime's dispatcher for its family with its op token
(runtime/language/dispatch.h), so an op lands on the same engines with the same instructions as
from C++ (docs/nl-ops.md). The same function objects are NKI's op tokens for nisa calls
(``nisa.tensor_tensor(..., op=nl.add)``): ``alu_of`` and ``act_of`` map them onto the ISA's ALU
op and activation function.
"""
from nki._runtime import _nkisim
from nki import dtype as _dtypes
from nki.tensor import NkiTensor, wrap

_nl = _nkisim.nl
_OP_ROWS = {row[0]: row for row in _nl.op_table()}  # name -> (name, family, op, alu, act)

_ALU = {}  # nl function -> _nkisim.AluOp
_ACT = {}  # nl function -> _nkisim.ActFn


def _h(x, op="nl op", operand="x"):
    """A tile operand's handle, or an immediate's float."""
    return _tile(x, op, operand) if isinstance(x, NkiTensor) else float(x)


def _tile(x, op, operand):
    if not isinstance(x, NkiTensor) or not x.on_chip:
        raise _nkisim.NkiValidationError(
            f"invalid argument: {op}: operand '{operand}' must be an SBUF or PSUM tile, got "
            f"{x!r} (load HBM tensors with nl.load or nisa.dma_copy first)")
    return x._h


def _axes(x, axis):
    if isinstance(axis, int):
        axis = (axis,)
    rank = x.ndim
    return [a + rank if a < 0 else a for a in axis]


def _register(fn, name):
    row = _OP_ROWS.get(name)
    alu = getattr(_nkisim.AluOp, _ALU_NAMES.get(name, name), None)
    if row is not None and row[3] != _nkisim.AluOp.bypass:
        alu = row[3]
    if alu is not None:
        _ALU[fn] = alu
    act = getattr(_nkisim.ActFn, _ACT_NAMES.get(name, name), None)
    if act is not None:
        _ACT[fn] = act
    fn.__name__ = name
    fn.__qualname__ = name
    return fn


# nl names whose ALU op / activation has another runtime spelling.
_ALU_NAMES = {"maximum": "max", "minimum": "min", "power": "pow", "max": "max", "min": "min",
              "sum": "add", "prod": "multiply", "all": "logical_and"}
_ACT_NAMES = {"copy": "identity"}


def _unary(name, op):
    def fn(x, dtype=None):
        return wrap(_nl.unary_op(_tile(x, name, "x"), op, _dtypes.c_of(dtype)))
    return _register(fn, name)


def _activation(name, op):
    def fn(x, dtype=None):
        return wrap(_nl.activation(_tile(x, name, "x"), op, _dtypes.c_of(dtype)))
    return _register(fn, name)


def _binary(name, op, dispatcher):
    def fn(x, y, dtype=None):
        return wrap(dispatcher(_h(x, name, "x"), _h(y, name, "y"), op, _dtypes.c_of(dtype)))
    return _register(fn, name)


def _reduce(name, op):
    def fn(x, axis, dtype=None, keepdims=False):
        return wrap(_nl.tensor_reduce(_tile(x, name, "x"), op, _axes(x, axis), keepdims,
                                      _dtypes.c_of(dtype)))
    return _register(fn, name)


_FAMILY = {"unary_op": _unary, "activation": _activation}
_made = {}
for _name, _family, _op, _alu, _act in _OP_ROWS.values():
    if _family in _FAMILY:
        _made[_name] = _FAMILY[_family](_name, _op)
    elif _family == "binary_op" and _name != "divide":
        _made[_name] = _binary(_name, _op, _nl.binary_op)
    elif _family == "bitwise_op":
        _made[_name] = _binary(_name, _op, _nl.bitwise_op)
    elif _family == "tensor_reduce":
        _made[_name] = _reduce(_name, _op)
globals().update(_made)


def divide(x, y, dtype=None):
    return wrap(_nl.divide(_h(x), _h(y), _dtypes.c_of(dtype)))


def reciprocal(x, dtype=None):
    return wrap(_nl.reciprocal(_tile(x, "reciprocal", "x"), _dtypes.c_of(dtype)))


def copy(x, dtype=None):
    return wrap(_nl.copy(_tile(x, "copy", "x"), _dtypes.c_of(dtype)))


_ABS_MAX_REASON = ("NKI 0.6's nl.abs_max returns the signed value of larger magnitude; the "
                   "runtime's abs_max ALU op gives max(|x|, |y|), which is what it means as a nisa "
                   "op token (op=nl.abs_max)")


def abs_max(x, y, dtype=None):
    from nki._api import unsupported_error
    raise unsupported_error("nki.language.abs_max", _ABS_MAX_REASON)


def var(x, axis, dtype=None, keepdims=False):
    return wrap(_nl.var(_tile(x, "var", "x"), _axes(x, axis), keepdims, _dtypes.c_of(dtype)))


def softmax(x, axis=-1, dtype=None):
    return wrap(_nl.softmax(_tile(x, "softmax", "x"), _axes(x, axis), _dtypes.c_of(dtype)))


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None):
    compute = _dtypes.c_of(compute_dtype) if compute_dtype is not None else _nkisim.DType.fp32
    return wrap(_nl.rms_norm(_tile(x, "rms_norm", "x"), _tile(w, "rms_norm", "w"), _axes(x, axis),
                             int(n), float(epsilon), _dtypes.c_of(dtype), compute))


def where(condition, x, y, dtype=None):
    return wrap(_nl.where(_tile(condition, "where", "condition"), _tile(x, "where", "x"),
                          _tile(y, "where", "y"), _dtypes.c_of(dtype)))


def dropout(x, rate, dtype=None):
    return wrap(_nl.dropout(_tile(x, "dropout", "x"), _h(rate), _dtypes.c_of(dtype)))


def matmul(x, y, transpose_x=False):
    return wrap(_nl.matmul(_tile(x, "matmul", "x"), _tile(y, "matmul", "y"), bool(transpose_x)))


def transpose(x, dtype=None):
    return wrap(_nl.transpose(_tile(x, "transpose", "x"), _dtypes.c_of(dtype)))


def _token(name, alu=None, act=None):
    """An op token with no nl function of its own (nl.bypass)."""
    def fn(*args, **kwargs):
        raise TypeError(f"nl.{name} is an op token for nisa instructions, not a function")
    fn.__name__ = name
    if alu is not None:
        _ALU[fn] = alu
    if act is not None:
        _ACT[fn] = act
    return fn


bypass = _token("bypass", alu=_nkisim.AluOp.bypass)
for _fn, _name in ((divide, "divide"), (reciprocal, "reciprocal"), (copy, "copy"),
                   (abs_max, "abs_max")):
    _register(_fn, _name)
abs_max._nkisim_unsupported = _ABS_MAX_REASON


def _lookup(table, op, instruction, what):
    try:
        return table[op]
    except (KeyError, TypeError):
        raise _nkisim.NkiValidationError(
            f"invalid argument: {instruction}: {what[0]} {getattr(op, '__name__', op)!r} is not "
            f"{what[1]}") from None


def alu_of(op, instruction, operand="op"):
    """The ALU op of an nl op token (None: bypass), or NkiValidationError naming the instruction."""
    if op is None:
        return _nkisim.AluOp.bypass
    return _lookup(_ALU, op, instruction,
                   (operand, "an ALU operator (use nl.add, nl.multiply, nl.maximum, ...)"))


def act_of(op, instruction):
    """The activation function of an nl op token, or NkiValidationError."""
    return _lookup(_ACT, op, instruction, ("op", "an activation function of the Scalar engine "
                                                 "(nl.exp, nl.copy, nl.gelu, ...)"))


__all__ = sorted(list(_made) + ["divide", "reciprocal", "copy", "abs_max", "var", "softmax",
                                "rms_norm", "where", "dropout", "matmul", "transpose", "bypass"])
