"""scripts/check-sdk-examples.sh and scripts/check-nki-library.sh on a bad checkout path: a
clear error naming the path and what is missing, exit 2, no traceback."""
import os
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPTS = {"check-sdk-examples.sh": "nki/examples", "check-nki-library.sh": "src/nkilib_src"}


def _run(script, *args):
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", script), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_no_such_directory(script, tmp_path):
    out = _run(script, str(tmp_path / "absent"))
    assert out.returncode == 2
    assert "no such directory" in out.stderr and "absent" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_not_a_checkout(script, tmp_path):
    out = _run(script, str(tmp_path))
    assert out.returncode == 2
    assert f"has no {SCRIPTS[script]}/" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_sdk_checkout_missing_examples(tmp_path):
    (tmp_path / "nki" / "examples" / "fused_mamba").mkdir(parents=True)
    (tmp_path / "nki" / "examples" / "getting_started_baremetal.py").write_text("")
    out = _run("check-sdk-examples.sh", str(tmp_path))
    assert out.returncode == 2
    assert "fused_mamba/mamba_nki_kernels.py" in out.stderr
    assert "getting_started_baremetal.py," not in out.stderr  # present, so not listed
    assert "Traceback" not in out.stderr + out.stdout


def test_usage(tmp_path):
    out = _run("check-sdk-examples.sh")
    assert out.returncode == 2 and "usage:" in out.stderr
