"""Every element-wise and reduction op of nl (built from the runtime's routing table) against
numpy, on one tile."""
import math

import numpy as np
import pytest

import nki
import nki.language as nl

from conftest import assert_close

X = np.linspace(0.05, 0.95, 128 * 64, dtype=np.float32).reshape(128, 64)
Y = np.linspace(1.5, 0.2, 128 * 64, dtype=np.float32).reshape(128, 64)
_erf = np.vectorize(math.erf)
_sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731

UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": _sig, "relu": lambda x: np.maximum(x, 0), "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "arctan": np.arctan, "abs": np.abs, "negative": np.negative,
    "sign": np.sign, "square": np.square, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "reciprocal": lambda x: 1 / x, "erf": _erf, "silu": lambda x: x * _sig(x),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "softplus": lambda x: np.log1p(np.exp(x)),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "copy": lambda x: x,
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "fmod": np.fmod,
    "greater": np.greater, "less": np.less, "equal": np.equal, "not_equal": np.not_equal,
    "greater_equal": np.greater_equal, "less_equal": np.less_equal,
}
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod,
          "var": np.var}


def _run(body, *arrays):
    @nki.jit
    def k(*xs):
        out = nl.ndarray(expected_shape[0], dtype=nl.float32, buffer=nl.shared_hbm)
        res = body(*[nl.load(x) for x in xs])
        nl.store(out, nl.copy(res, dtype=nl.float32))
        return out

    expected_shape = [None]

    def call(shape):
        expected_shape[0] = shape
        return k(*arrays)
    return call


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    out = _run(lambda t: getattr(nl, name)(t), X)((128, 64))
    assert_close(out, UNARY[name](X.astype(np.float64)), 1e-4, 1e-3)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tiles_and_immediates(name):
    golden = BINARY[name](X.astype(np.float64), Y)
    assert_close(_run(lambda a, b: getattr(nl, name)(a, b), X, Y)((128, 64)), golden, 1e-4, 1e-3)
    golden = BINARY[name](X.astype(np.float64), 0.5)
    assert_close(_run(lambda a: getattr(nl, name)(a, 0.5), X)((128, 64)), golden, 1e-4, 1e-3)


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reductions(name):
    out = _run(lambda t: getattr(nl, name)(t[:, 0:8], axis=1, keepdims=True), X)((128, 1))
    golden = REDUCE[name](X[:, 0:8].astype(np.float64), axis=1, keepdims=True)
    assert_close(out, golden, 1e-5, 1e-4)


def test_bitwise_and_shifts():
    a = np.arange(128 * 8, dtype=np.int32).reshape(128, 8)

    @nki.jit
    def k(x):
        out = nl.ndarray((3, 128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[0], nl.bitwise_and(t, 6))
        nl.store(out[1], nl.left_shift(t, 2))
        nl.store(out[2], nl.bitwise_xor(t, nl.right_shift(t, 1)))
        return out

    out = k(a)
    np.testing.assert_array_equal(out, np.stack([a & 6, a << 2, a ^ (a >> 1)]))
