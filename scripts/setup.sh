#!/usr/bin/env bash
# Installs what nkisim needs on Debian 12 (only the packages that are missing, so a second run is
# quick), then configures and builds everything into build/. Run as root or with sudo available.
#   bash scripts/setup.sh            # Release build in build/
#   BUILD_DIR=out BUILD_TYPE=Debug bash scripts/setup.sh
#   NKI_LIBRARY_TOOLS=1 bash scripts/setup.sh   # also what the NKI library's own references and
#                                               # harness import that Debian ships (docs/nki-library.md)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev          # MPI: the distributed engine
  libboost-dev libboost-filesystem-dev  # Boost.Asio (header-only), Boost.Process (needs Filesystem)
  libprotobuf-dev protobuf-compiler   # configs, profiles, control-plane messages
  libgtest-dev libgmock-dev           # tests
  libbenchmark-dev                    # benchmarks
  libopenblas-dev                     # tile math (nc_matmul) and the sgemm baseline
  libcli11-dev nlohmann-json3-dev     # command line, JSON traces
  gnuplot-nox                         # the plots of `nkisim sweep` (PNG and SVG)
  pybind11-dev python3-dev python3-numpy python3-pytest  # the Python front end (nki), its tests
  python3-torch                       # torch inputs / outputs of nki kernels; the NKI library check
)
if [[ ${NKI_LIBRARY_TOOLS:-0} != 0 ]]; then
  # scripts/check-nki-library.sh (rotational_topk imports scipy) and
  # scripts/run-nki-library-tests.sh (the library's pytest harness)
  packages+=(python3-scipy python3-boto3 python3-botocore python3-fabric python3-filelock
             python3-paramiko python3-allpairspy python3-pytest-xdist)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$build_dir"
