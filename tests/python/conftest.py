"""Shared helpers of the Python front end's tests (run by CTest with PYTHONPATH=build/python)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))


def bf16_exact(rng, shape, scale=8):
    """Values bf16 represents exactly (multiples of 1/scale in [-1, 1]), as float32."""
    return (rng.integers(-scale, scale + 1, size=shape) / scale).astype(np.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(1)


def assert_close(actual, golden, atol, rtol):
    """The project's rule: |actual - golden| <= atol + rtol * max|golden| for every element."""
    actual = np.asarray(actual, dtype=np.float64)
    golden = np.asarray(golden, dtype=np.float64)
    assert actual.shape == golden.shape
    bound = atol + rtol * np.max(np.abs(golden))
    worst = np.max(np.abs(actual - golden))
    assert worst <= bound, f"max abs error {worst} > {bound}"
