#!/usr/bin/env bash
# Runs the NKI library's kernels that have a torch reference on nkisim at small shapes:
#   scripts/check-nki-library.sh PATH   (PATH: a checkout of aws-neuron/nki-library)
# Needs build/python (scripts/setup.sh) and Debian's python3-torch. Prints a markdown table:
# kernel, case, PASS / WRONG (max error) / ERROR (first missing API) / NOT RUN.
set -euo pipefail
if [[ $# -ne 1 || ! -d "$1/src/nkilib_src" ]]; then
  echo "usage: $0 PATH-TO-nki-library-CHECKOUT" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${NKISIM_BUILD:-$here/../build}"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/check_nki_library.py" "$1"
