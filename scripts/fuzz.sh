#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, -fsanitize=fuzzer,address,undefined) into
# build-fuzz/ and runs each for a bounded time from its seed corpus (configs/, tests/, tests/fuzz/
# seeds/). Prints per target the executions, the rate, the corpus size and the new findings (crash,
# leak, timeout or out-of-memory inputs, saved under build-fuzz/artifacts/<target>/); exits 1 when
# any target found something. Installs clang from Debian when it is missing, as setup.sh does.
#   bash scripts/fuzz.sh                        # every target, 60 s each
#   bash scripts/fuzz.sh --seconds 600          # every target, 10 minutes each
#   bash scripts/fuzz.sh topology 30            # one target, 30 s
#   bash scripts/fuzz.sh --keep-going scenario  # go on after a finding (libFuzzer fork mode)
#   bash scripts/fuzz.sh --list                 # the targets
# Targets: scenario topology profile calibration npy control_frame. Reproduce a finding with
#   build-fuzz/fuzz_<target> build-fuzz/artifacts/<target>/crash-...
# Environment: BUILD_DIR (default build-fuzz), JOBS (build parallelism, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(scenario topology profile calibration npy control_frame)
seconds=60
keep_going=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --keep-going) keep_going=1; shift ;;
    --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *[!0-9]*) targets+=("$1"); shift ;;
    *) seconds=$1; shift ;;  # `fuzz.sh TARGET SECONDS`
  esac
done
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || { echo "fuzz.sh: --seconds must be a positive integer" >&2; exit 2; }
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (have: ${all_targets[*]})" >&2; exit 2; }
done

# clang with its libFuzzer runtime, and what the libraries under test need.
packages=(
  clang libclang-rt-dev cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev libboost-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev nlohmann-json3-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz.sh: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${BUILD_DIR:-build-fuzz}
cmake -S tests/fuzz -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build_dir" --parallel "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build_dir/logs"
status=0
summary=()
for t in "${targets[@]}"; do
  # corpus, artifacts, seeds, flags: written by tests/fuzz/CMakeLists.txt.
  corpus="" artifacts="" seeds="" flags=""
  # shellcheck disable=SC1090
  source "$build_dir/targets/$t"
  log="$build_dir/logs/$t.log"
  before=$(find "$artifacts" -type f | wc -l)
  mode=()
  ((keep_going)) && mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  echo "== fuzz: $t for $seconds s (log: $log)"
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout --signal=INT --kill-after=30 $((seconds + 120)) \
    "$build_dir/fuzz_$t" $flags "${mode[@]}" -max_total_time="$seconds" "$corpus" $seeds \
    >"$log" 2>&1 && rc=0 || rc=$?
  elapsed=$(($(date +%s) - start))
  execs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1 || true)
  [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  execs=${execs:-0}
  corpus_size=$(find "$corpus" -type f | wc -l)
  new=$(($(find "$artifacts" -type f | wc -l) - before))
  line=$(printf '%-14s %6s s %12s execs %9s exec/s %7s corpus %3s new findings' "$t" "$elapsed" \
    "$execs" "$((execs / (elapsed > 0 ? elapsed : 1)))" "$corpus_size" "$new")
  if ((new > 0 || rc != 0)); then
    status=1
    line+="  FAILED (exit $rc)"
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FINDING:|Test unit written' "$log" | head -5 | sed 's/^/    /'
  fi
  echo "$line"
  summary+=("$line")
done
echo "== fuzz summary ($seconds s per target; findings in $build_dir/artifacts/<target>/)"
printf '%s\n' "${summary[@]}"
exit $status
