#!/usr/bin/env bash
# Builds nkisim with AddressSanitizer + UndefinedBehaviorSanitizer (and float-cast-overflow) into
# build-asan/ and runs the given CTest labels (default: unit mpi e2e) under them. Open MPI's own
# leaks are suppressed by scripts/sanitizers/lsan.supp, not by turning leak checking off.
#   bash scripts/sanitize.sh                 # unit, mpi and e2e labels
#   bash scripts/sanitize.sh unit            # one label
set -euo pipefail
cd "$(dirname "$0")/.."
labels=${*:-unit mpi e2e}
build_dir=${BUILD_DIR:-build-asan}
# The sanitized build runs several times slower: the tests' CTest timeouts (tests/CMakeLists.txt)
# and the e2e tests' wall-clock bounds, timeouts and settling sleeps (tests/testing/time_scale.h)
# are multiplied by this.
export NKISIM_TEST_TIME_SCALE=${NKISIM_TEST_TIME_SCALE:-6}
# ASan's redzones, shadow and quarantine add to every process: the per-process memory bounds of
# the tests (the bad-input suite's 200 MiB) are multiplied by this.
export NKISIM_TEST_MEMORY_SCALE=${NKISIM_TEST_MEMORY_SCALE:-3}
flags="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DNKISIM_TEST_TIME_SCALE="$NKISIM_TEST_TIME_SCALE" >/dev/null
cmake --build "$build_dir"
# fast_unwind_on_malloc=0: Open MPI, PMIx and their plugins are built without frame pointers, so
# the fast unwinder stops at their first frame ("<unknown module>") and the suppressions, which
# name those libraries, never see them. The slow unwinder walks the whole stack.
# quarantine_size_mb=32 (default 256): freed memory ASan holds back to catch use-after-free; at
# 256 MiB per process the 64 ranks of the default job do not fit in 24 GiB and get OOM-killed.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1:fast_unwind_on_malloc=0:quarantine_size_mb=32}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for label in $labels; do
  echo "== sanitize: label $label"
  ctest --test-dir "$build_dir" -L "^${label}\$" --output-on-failure -j2 || status=1
done
exit $status
