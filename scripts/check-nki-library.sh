#!/usr/bin/env bash
# Runs the NKI library's kernels that have a torch reference on nkisim at small shapes:
#   scripts/check-nki-library.sh [--shims] PATH   (PATH: a checkout of aws-neuron/nki-library)
# --shims puts scripts/test-shims (test-only stand-ins for packages the library's reference
# modules import, e.g. neuron_dtypes; see its README) on the path; the output says so.
# Needs build/python (scripts/setup.sh) and Debian's python3-torch. Prints a markdown table:
# kernel, case, PASS / WRONG (max error) / ERROR (first missing API) / NOT RUN.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/nki-python.sh"
if [[ ${1:-} == --shims ]]; then
  shift
  export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/test-shims${PYTHONPATH:+:$PYTHONPATH}"
  export CHECK_NKI_LIBRARY_SHIMS=1
fi
nki_python_run src/nkilib_src check_nki_library.py nki-library "$@"
