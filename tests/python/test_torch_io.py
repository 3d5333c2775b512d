"""The torch input path: a torch tensor enters HBM in its own dtype (bfloat16 included) and the
outputs come back as torch tensors of the kernel's dtypes; inputs the kernel wrote are updated
in place. Skipped where `import torch` fails (Debian's python3-torch, scripts/setup.sh)."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

torch = pytest.importorskip("torch")


@nki.jit
def _scale_and_copy(x, y):
    """Returns 2 * x in x's dtype, and writes x + 1 into y."""
    t = nl.load(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=2.0)
    nl.store(out, r)
    nisa.tensor_scalar(dst=r, data=t, op0=nl.add, operand0=1.0)
    nl.store(y, r)
    return out


def test_bf16_in_and_out():
    # values bf16 holds exactly, so 2x and x + 1 are exact too
    g = torch.Generator().manual_seed(0)
    x = (torch.randint(-64, 64, (128, 96), generator=g).float() / 8).to(torch.bfloat16)
    y = torch.zeros((128, 96), dtype=torch.bfloat16)
    out = _scale_and_copy(x, y)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    golden = 2 * x.float().numpy()
    np.testing.assert_array_equal(out.float().numpy(), golden)
    np.testing.assert_array_equal(y.float().numpy(), x.float().numpy() + 1)


def test_bf16_rounding_on_the_way_out():
    # the kernel computes in fp32 and stores bf16: x / 3 rounds as torch rounds fp32 -> bf16
    @nki.jit
    def third(x):
        t = nl.load(x)
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=t, op0=nl.divide, operand0=3.0)
        nl.store(out, r)
        return out

    x = torch.linspace(-4, 4, 128 * 16).reshape(128, 16)
    out = third(x)
    assert out.dtype == torch.bfloat16
    golden = (x / 3).to(torch.bfloat16).float().numpy()
    err = np.abs(out.float().numpy() - golden).max()
    # one bf16 ulp at most (division vs multiply-by-reciprocal rounding)
    assert err <= 2 ** -7 * np.abs(golden).max(), err


def test_float32_torch_in_float32_out():
    x = torch.arange(128 * 4, dtype=torch.float32).reshape(128, 4)
    y = torch.zeros_like(x)
    out = _scale_and_copy(x, y)
    assert out.dtype == torch.float32
    assert torch.equal(out, 2 * x) and torch.equal(y, x + 1)


def test_unsupported_torch_dtype_is_named():
    x = torch.zeros((128, 4), dtype=torch.complex64)
    with pytest.raises(nki.isa.NkiValidationError, match=r"'x'.*torch.complex64"):
        _scale_and_copy(x, torch.zeros((128, 4)))
