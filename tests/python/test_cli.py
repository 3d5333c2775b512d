"""`nkisim python [--ranks N] [--profile P] [--report] SCRIPT [ARGS...]`: the packages on the
path, the script's arguments and exit code passed through, errors named."""
import os
import subprocess

HERE = os.path.dirname(__file__)
NKISIM = os.environ.get("NKISIM_BIN", os.path.join(HERE, "..", "..", "build", "launcher", "nkisim"))

SCRIPT = """
import os, sys
import nki, nkisim
print("ARGS", sys.argv[1:], os.environ.get("NKISIM_PROFILE"), os.environ.get("NKISIM_REPORT"),
      os.environ.get("NKISIM_TIMING_ONLY"))
sys.exit(int(sys.argv[1]))
"""


def _nkisim(*args, env=None):
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nkisim python sets it
    return subprocess.run([NKISIM, "python", *args], capture_output=True, text=True, timeout=120,
                          env=dict(full, **(env or {})))


def test_arguments_and_exit_code_pass_through(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    out = _nkisim("--profile", "trn3", "--report", "--timing-only", str(script), "3", "--ranks", "x")
    assert out.returncode == 3, out.stderr
    assert "ARGS ['3', '--ranks', 'x'] trn3 1 1" in out.stdout


def test_missing_script_is_a_bad_config_error(tmp_path):
    out = _nkisim(str(tmp_path / "absent.py"))
    assert out.returncode == 14
    assert "bad config: python: script" in out.stderr and "absent.py" in out.stderr


def test_script_is_required():
    out = _nkisim()
    assert out.returncode != 0 and "SCRIPT is required" in out.stderr
