#!/usr/bin/env bash
# Runs the NKI library's own pytest harness in simulation mode on nkisim (it reaches nkisim
# through the package nki_cpu_simulator), with the TEST-ONLY stand-ins of scripts/test-shims for
# the packages Debian lacks and the two modules missing from the public repository:
#   scripts/run-nki-library-tests.sh PATH [TEST-PATH ...] [PYTEST-ARGS ...]
#   e.g. scripts/run-nki-library-tests.sh ~/nki-library test/integration/nkilib/core/cumsum
# Needs build/python (scripts/setup.sh) and Debian's python3-torch, python3-boto3,
# python3-botocore, python3-fabric, python3-filelock, python3-paramiko, python3-allpairspy,
# python3-pytest-xdist. The library's slow_simulation shapes are left out. Output goes to
# $NKI_LIBRARY_TEST_OUT (default: a new temporary directory).
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 PATH-TO-nki-library-CHECKOUT [TEST-PATH ...] [PYTEST-ARGS ...]" >&2
  exit 2
fi
root=$1
shift
if [[ ! -d "$root" ]]; then
  echo "$0: checkout path '$root': no such directory (want a checkout of nki-library)" >&2
  exit 2
fi
if [[ ! -f "$root/test/conftest.py" ]]; then
  echo "$0: checkout path '$root' has no test/conftest.py: not a checkout of nki-library" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${NKISIM_BUILD:-$here/../build}"
out="${NKI_LIBRARY_TEST_OUT:-$(mktemp -d)}"
echo "NKI library harness on nkisim, with the test-only stand-ins of scripts/test-shims; output in $out"
cd "$root"
export PYTHONPATH="$build/python:$here/test-shims:$root/src${PYTHONPATH:+:$PYTHONPATH}"
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 -m pytest -p no:cacheprovider -p nkilib_harness --test-mode simulation \
  --output-directory "$out" -m "not slow_simulation" -q "${@:-test/integration/nkilib/core/cumsum}"
