#!/usr/bin/env bash
# Builds the test binaries of the given CTest labels (default: unit) with ThreadSanitizer into
# build-tsan/ and runs those labels under it: the logical cores' threads (LogicalCore::Launch,
# SendRecv, Barrier), the control plane's I/O and heartbeat threads, everything else the unit
# tests drive. Any data race, lock-order inversion or thread leak fails the test that caused it.
# Suppressions (third-party false positives only, each with its reason) are in
# scripts/sanitizers/tsan.supp.
#   bash scripts/tsan.sh                 # the unit label
#   bash scripts/tsan.sh unit            # same
#   TSAN_TARGETS="runtime_tests" bash scripts/tsan.sh unit   # build only these binaries
# Environment: BUILD_DIR (default build-tsan), JOBS (build parallelism, default nproc),
# CXX (default clang++ when installed, else g++).
set -euo pipefail
cd "$(dirname "$0")/.."
labels=${*:-unit}
build_dir=${BUILD_DIR:-build-tsan}
cxx=${CXX:-$(command -v clang++ || command -v g++)}

# The binaries that carry a label are declared `nkisim_gtest(<binary> <label> ...)`.
targets=${TSAN_TARGETS:-}
if [[ -z $targets ]]; then
  for label in $labels; do
    targets+=" $(grep -rhoE "nkisim_gtest\([A-Za-z0-9_]+ ${label}\b" tests --include=CMakeLists.txt |
                 sed -E 's/nkisim_gtest\(([A-Za-z0-9_]+) .*/\1/' | tr '\n' ' ')"
  done
fi
[[ -n ${targets// /} ]] || { echo "tsan.sh: no test binaries carry the label(s) '$labels'" >&2; exit 2; }

flags="-fsanitize=thread -fno-omit-frame-pointer"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
echo "== tsan: building$targets with $cxx"
# shellcheck disable=SC2086
cmake --build "$build_dir" --parallel "${JOBS:-$(nproc)}" --target $targets

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:report_thread_leaks=1:suppressions=$PWD/scripts/sanitizers/tsan.supp}
# nkisim runs BLAS single-threaded; OpenBLAS (not instrumented) is kept from starting its pool.
export OPENBLAS_NUM_THREADS=1
status=0
for label in $labels; do
  echo "== tsan: label $label"
  ctest --test-dir "$build_dir" -L "^${label}\$" --output-on-failure -j "${JOBS:-$(nproc)}" \
    --timeout 900 || status=1
done
exit $status
