"""nki.collectives kernels across 4 and 8 MPI ranks, through `nkisim python --ranks N`."""
import os
import subprocess

import pytest

HERE = os.path.dirname(__file__)
NKISIM = os.environ.get("NKISIM_BIN", os.path.join(HERE, "..", "..", "build", "launcher", "nkisim"))


def _ranks(n, script, *args):
    return subprocess.run([NKISIM, "python", "--ranks", str(n), os.path.join(HERE, script),
                           *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("n", [4, 8])
def test_all_gather_and_all_reduce_across_ranks(n):
    out = _ranks(n, "collective_kernels.py", str(n))
    assert out.returncode == 0, out.stdout + out.stderr
    # The ranks' lines may interleave: count them.
    assert out.stdout.count(": OK ") == n and "WRONG" not in out.stdout, out.stdout


def test_a_failing_rank_ends_the_job():
    out = _ranks(2, "collective_failure.py")
    assert out.returncode != 0
    assert "rank 1 refuses" in out.stderr


def test_all_to_all_v_and_all_gather_v_across_ranks():
    # counts known only in the metadata tensor; each rank checks against a numpy golden, and
    # the misuse errors (displacements, metadata shape) on every rank
    out = _ranks(4, "collective_all_to_all_v.py", "4")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": OK ") == 4 and "WRONG" not in out.stdout, out.stdout


@pytest.mark.parametrize("n", [4])
def test_collective_permute_implicit_rings_across_ranks(n):
    # a ring all-gather of n - 1 implicit permutes, two channels, the reduce form, rings of the
    # even and odd ranks, and the misuse errors, each rank against numpy
    out = _ranks(n, "collective_permute_implicit.py", str(n))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": OK ") == n and "WRONG" not in out.stdout, out.stdout
