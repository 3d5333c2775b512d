# Sourced by the scripts that run third-party NKI code on nkisim (check-nki-library.sh,
# check-sdk-examples.sh): checks that $1 is a checkout holding `marker`, then runs the Python
# script `runner` (beside the calling script) on it with build/python on the path.
#   nki_python_run MARKER RUNNER WHAT "$@"
nki_python_run() {
  local marker=$1 runner=$2 what=$3
  shift 3
  if [[ $# -ne 1 ]]; then
    echo "usage: $0 PATH-TO-$what-CHECKOUT" >&2
    exit 2
  fi
  if [[ ! -d "$1" ]]; then
    echo "$0: checkout path '$1': no such directory (want a checkout of $what)" >&2
    exit 2
  fi
  if [[ ! -d "$1/$marker" ]]; then
    echo "$0: checkout path '$1' has no $marker/: not a checkout of $what" >&2
    exit 2
  fi
  local here build
  here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
  build="${NKISIM_BUILD:-$here/../build}"
  export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
  export OPENBLAS_NUM_THREADS=1
  exec /usr/bin/python3 "$here/$runner" "$1"
}
