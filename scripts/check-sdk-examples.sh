#!/usr/bin/env bash
# Runs the Neuron SDK's NKI examples on nkisim, unmodified:
#   scripts/check-sdk-examples.sh PATH   (PATH: a checkout of aws-neuron/aws-neuron-sdk)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/nki-python.sh"
nki_python_run nki/examples check_sdk_examples.py aws-neuron-sdk "$@"
