"""The copyable examples of docs/python.md run as they are written: each ```python block under
"## Examples" is saved to a file and run with Debian's Python (the all-gather one with
`nkisim python --ranks 4`)."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
DOC = os.path.join(HERE, "..", "..", "docs", "python.md")
NKISIM = os.environ.get("NKISIM_BIN", os.path.join(HERE, "..", "..", "build", "launcher", "nkisim"))


def _examples():
    text = open(DOC).read()
    section = text.split("## Examples", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"### (.+?)\n(.*?)```python\n(.*?)```", section, re.S)
    return [(title, code) for title, _, code in found]


EXAMPLES = _examples()


def test_the_four_examples_are_there():
    assert len(EXAMPLES) == 4


@pytest.mark.parametrize("title,code", EXAMPLES, ids=[t for t, _ in EXAMPLES])
def test_example_runs(title, code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    ranks = ["--ranks", "4"] if "ranks" in title or "4 ranks" in title else []
    out = subprocess.run([NKISIM, "python", *ranks, str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    for line in out.stdout.splitlines():
        if line.startswith("max error"):
            assert float(line.split()[-1]) < 2e-3, line
