#!/usr/bin/env bash
# Runs the Neuron SDK's NKI examples on nkisim, unmodified:
#   scripts/check-sdk-examples.sh PATH   (PATH: a checkout of aws-neuron/aws-neuron-sdk)
set -euo pipefail
if [[ $# -ne 1 || ! -d "$1/nki/examples" ]]; then
  echo "usage: $0 PATH-TO-aws-neuron-sdk-CHECKOUT" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${NKISIM_BUILD:-$here/../build}"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/check_sdk_examples.py" "$1"
