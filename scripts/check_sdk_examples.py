"""Runs the NKI examples of the Neuron SDK (aws-neuron/aws-neuron-sdk, nki/examples) that use
`import nki` on nkisim, unmodified: `scripts/check-sdk-examples.sh PATH` (PATH: a checkout of
that repository). Each example file runs as its own `__main__` in its own directory (their
self-checks print "match"); the fused-mamba kernels v1 / v2 / v3 are also compared with each
other and with an independent numpy implementation of the selective scan, on random inputs.
Nothing of the SDK is copied: the examples are run and imported from PATH."""
import importlib.util
import os
import subprocess
import sys

import numpy as np

EXAMPLES = [
    "getting_started_baremetal.py",
    "tensor_addition/tensor_addition_nki_kernels.py",
    "transpose2d/transpose2d_nki_kernels.py",
    "matrix_multiplication/matrix_multiplication_nki_kernels.py",
    "average_pool2d/average_pool2d_nki_kernels.py",
    "fused_mamba/mamba_nki_kernels.py",
    "simulate/nki_simulate_example.py",
]


def mamba_numpy(delta, u, A, B, C):
    """out[b, c, t] = sum_s C[b, s, t] h[b, c, s, t], h_t = exp(delta A) h_{t-1} + delta u B."""
    batch, channels, seq = delta.shape
    out = np.zeros((batch, channels, seq))
    for b in range(batch):
        for s in range(A.shape[1]):
            h = np.zeros(channels)
            for t in range(seq):
                h = np.exp(delta[b, :, t] * A[:, s]) * h + delta[b, :, t] * u[b, :, t] * B[b, s, t]
                out[b, :, t] += C[b, s, t] * h
    return out


def check_mamba(root):
    path = os.path.join(root, "nki", "examples", "fused_mamba", "mamba_nki_kernels.py")
    spec = importlib.util.spec_from_file_location("sdk_mamba", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(0)
    batch, channels, seq, state = 1, 256, 512, 4
    delta = rng.uniform(0.01, 0.1, (batch, channels, seq)).astype(np.float32)
    u = rng.standard_normal((batch, channels, seq)).astype(np.float32)
    A = -rng.uniform(0.5, 2.0, (channels, state)).astype(np.float32)
    B = rng.standard_normal((batch, state, seq)).astype(np.float32)
    C = rng.standard_normal((batch, state, seq)).astype(np.float32)
    golden = mamba_numpy(delta, u, A, B, C)
    scale = np.abs(golden).max()
    rows = []
    outs = {}
    for v in ("mamba_v1", "mamba_v2", "mamba_v3"):
        outs[v] = np.asarray(getattr(mod, v)(delta, u, A, B, C), dtype=np.float64)
        err = np.abs(outs[v] - golden).max() / scale
        rows.append((f"fused_mamba {v} vs numpy", "PASS" if err <= 1e-4 else "WRONG", err))
    for v in ("mamba_v2", "mamba_v3"):
        err = np.abs(outs[v] - outs["mamba_v1"]).max() / scale
        rows.append((f"fused_mamba {v} vs v1", "PASS" if err <= 1e-5 else "WRONG", err))
    return rows


def check_matmuls(root):
    """The matmul kernels against numpy on the SDK's blocking sizes (bf16 in; the result is
    stored in bf16, so the bound is one bf16 rounding, 2^-8 of max |golden|), and the
    fully-optimized one again in timing-only mode: the same instructions and simulated time."""
    import nkisim
    import nki.language as nl
    path = os.path.join(root, "nki", "examples", "matrix_multiplication",
                        "matrix_multiplication_nki_kernels.py")
    spec = importlib.util.spec_from_file_location("sdk_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(0)
    K, M, N = 1024, 2048, 1024
    lhs_t = (rng.integers(-8, 9, (K, M)) / 8).astype(np.float32)   # exact in bf16
    rhs = (rng.integers(-8, 9, (K, N)) / 8).astype(np.float32)
    golden = lhs_t.T.astype(np.float64) @ rhs
    rows = []
    for name in ("nki_matmul_tiled_", "nki_matmul_hoist_load_",
                 "nki_matmul_block_free_dimension_", "nki_matmul_fully_optimized_"):
        out = getattr(mod, name)(nkisim.typed(lhs_t, nl.bfloat16), nkisim.typed(rhs, nl.bfloat16))
        err = np.abs(np.asarray(out, np.float64) - golden).max() / np.abs(golden).max()
        rows.append((f"matmul {name} [{K}x{M}]^T [{K}x{N}] bf16", "PASS" if err <= 2 ** -8 else
                     "WRONG", f"max error {err:.2g} of max abs, "
                              f"{nkisim.last_run().simulated_ns / 1e3:.1f} us simulated"))
    full = nkisim.last_run()
    os.environ["NKISIM_TIMING_ONLY"] = "1"
    try:
        mod.nki_matmul_fully_optimized_(nkisim.typed(lhs_t, nl.bfloat16),
                                        nkisim.typed(rhs, nl.bfloat16))
    finally:
        del os.environ["NKISIM_TIMING_ONLY"]
    timed = nkisim.last_run()
    same = timed.instructions == full.instructions and timed.simulated_ns == full.simulated_ns
    rows.append(("matmul nki_matmul_fully_optimized_ under NKISIM_TIMING_ONLY=1",
                 "PASS" if same else "WRONG",
                 f"{timed.instructions} instructions, {timed.simulated_ns / 1e3:.1f} us "
                 f"simulated, as the functional run"))
    return rows


def missing_examples(root):
    """The example files this script runs that are not under root/nki/examples."""
    base = os.path.join(root, "nki", "examples")
    return [rel for rel in EXAMPLES if not os.path.isfile(os.path.join(base, rel))]


def main():
    root = os.path.abspath(sys.argv[1])
    missing = missing_examples(root)
    if missing:
        print(f"check-sdk-examples: {root} is not a usable aws-neuron-sdk checkout: "
              f"nki/examples lacks {', '.join(missing)} (the examples this script runs; "
              "check out aws-neuron/aws-neuron-sdk whole)", file=sys.stderr)
        sys.exit(2)
    commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    print(f"Neuron SDK {root} at {commit}")
    print("| example | result | detail |")
    print("|---|---|---|")
    failed = 0
    for rel in EXAMPLES:
        path = os.path.join(root, "nki", "examples", rel)
        r = subprocess.run([sys.executable, os.path.basename(path)], cwd=os.path.dirname(path),
                           capture_output=True, text=True, timeout=900)
        tail = (r.stdout + r.stderr).strip().splitlines()
        last = tail[-1][:120] if tail else ""
        matches = [line for line in tail if "match" in line.lower()]
        detail = "; ".join(m.strip()[:60] for m in matches[:3]) or last
        failed += r.returncode != 0
        print(f"| {rel} | {'runs' if r.returncode == 0 else 'ERROR'} | {detail} |", flush=True)
    for name, result, err in check_mamba(root):
        failed += result != "PASS"
        print(f"| {name} | {result} | max error {err:.2g} of max abs |")
    for name, result, detail in check_matmuls(root):
        failed += result != "PASS"
        print(f"| {name} | {result} | {detail} |", flush=True)
    if failed:
        print(f"check-sdk-examples: {failed} row(s) not runs / PASS", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
