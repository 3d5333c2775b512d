#!/usr/bin/env bash
# Timing-only against functional on one job, back to back in the same run: the functional job
# (every tile computed, every phase checked, ranks under mpirun), then --timing-only with the
# ranks as threads of one process (the default), then --timing-only with the ranks under mpirun.
# Prints each wall time, its ratio to the functional one, and checks that all three give the same
# simulated step times.
#   bash scripts/measure-timing-only.sh [CONFIG]   (default configs/tp64_tp8dp8.textproto)
# Target (issue 13): timing-only at least 10x faster than functional on the default 64-rank job.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/tp64_tp8dp8.textproto}
nkisim=build/launcher/nkisim
[[ -x $nkisim ]] || { echo "measure-timing-only: build first (bash scripts/setup.sh)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

now() { date +%s.%N; }
run() {  # name, flags...
  local name=$1
  shift
  local start
  start=$(now)
  "$nkisim" run "$config" --report "$scratch/$name.json" --trace '' "$@" > "$scratch/$name.txt" ||
    { cat "$scratch/$name.txt"; echo "measure-timing-only: the $name job failed" >&2; exit 1; }
  awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}
steps() { grep -o '"stepSimNs": *[0-9.e+]*' "$scratch/$1.json" | grep -o '[0-9.e+]*$' | tr '\n' ' '; }

echo "config $config"
functional=$(run functional)
threads=$(run threads --timing-only)
processes=$(run processes --timing-only --mpirun-ranks)
printf '%-34s %10s %10s  %s\n' "mode" "wall (s)" "speed-up" "simulated step per plan (ns)"
printf '%-34s %10s %9.1fx  %s\n' "functional (mpirun, all checked)" "$functional" 1 "$(steps functional)"
for m in threads processes; do
  label="timing-only ($m)"
  printf '%-34s %10s %9.1fx  %s\n' "$label" "${!m}" \
    "$(awk -v f="$functional" -v t="${!m}" 'BEGIN { print f / t }')" "$(steps $m)"
done
if [[ "$(steps functional)" != "$(steps threads)" || "$(steps functional)" != "$(steps processes)" ]]; then
  echo "measure-timing-only: FAIL: the simulated step times differ between the modes" >&2
  exit 1
fi
echo "simulated step times identical in all three modes"
