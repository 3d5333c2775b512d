#!/usr/bin/env bash
# Runs the NKI library's kernels that have a torch reference on nkisim at small shapes:
#   scripts/check-nki-library.sh PATH   (PATH: a checkout of aws-neuron/nki-library)
# Needs build/python (scripts/setup.sh) and Debian's python3-torch. Prints a markdown table:
# kernel, case, PASS / WRONG (max error) / ERROR (first missing API) / NOT RUN.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/nki-python.sh"
nki_python_run src/nkilib_src check_nki_library.py nki-library "$@"
