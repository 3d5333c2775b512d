#!/usr/bin/env bash
# Scale on one machine: runs a multi-instance `nkisim run` job and a bare MPI job of the same
# process count (build/bench/raw_mpi_job: start-up, the job's all_reduce and all_gather traffic,
# shut-down) back to back, and prints both wall times, their ratio, and peak RSS (largest rank and
# summed over ranks).
#   bash scripts/measure-scale.sh [CONFIG]    (default configs/tp128_two_instances_decode.textproto)
# Targets (issue 12): nkisim at most 2x the raw job's wall time, at most 120 MiB per rank; a
# 256-rank job under 20 GiB summed.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/tp128_two_instances_decode.textproto}
[[ -x build/bench/raw_mpi_job ]] || cmake --build build --target raw_mpi_job > /dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
build/launcher/nkisim validate "$config" > "$scratch/validate.txt"
ranks=$(grep -o '; [0-9]* ranks' "$scratch/validate.txt" | head -1 | grep -o '[0-9]*')
batch=$(grep -o '^batch: *[0-9]*' "$config" | grep -o '[0-9]*$')
hidden=$(grep -o 'hidden: *[0-9]*' "$config" | grep -o '[0-9]*$')
plans=$(grep -c '^plans' "$config")
root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)

now() { date +%s.%N; }
echo "config $config: $ranks ranks, $plans plans"
start=$(now)
mpirun "${root[@]}" --oversubscribe -n "$ranks" build/bench/raw_mpi_job --batch "$batch" \
  --hidden "$hidden" --plans "$plans" | tee "$scratch/raw.txt"
raw=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
start=$(now)
build/launcher/nkisim run "$config" --report "$scratch/report.json" --trace '' > "$scratch/run.txt"
sim=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
grep -E '^result:' "$scratch/run.txt"
field() { grep -o "\"$1\": *[0-9.]*" "$scratch/report.json" | head -1 | grep -o '[0-9.]*$'; }
printf '%-28s %10s %14s %16s\n' "job" "wall (s)" "RSS/rank (MiB)" "RSS summed (GiB)"
raw_rss=$(grep -o 'peak RSS [0-9.]*' "$scratch/raw.txt" | grep -o '[0-9.]*$')
raw_sum=$(grep -o '[0-9.]* GiB summed' "$scratch/raw.txt" | grep -o '^[0-9.]*')
printf '%-28s %10.1f %14.1f %16.2f\n' "raw MPI ($ranks ranks)" "$raw" "$raw_rss" "$raw_sum"
# The report gives the largest rank's peak RSS; the summed figure is that times the ranks (an
# upper bound).
printf '%-28s %10.1f %14.1f %16.2f\n' "nkisim run ($ranks ranks)" "$sim" "$(field peakRssMib)" \
  "$(awk -v m="$(field peakRssMib)" -v n="$ranks" 'BEGIN { print m * n / 1024 }')"
awk -v a="$raw" -v b="$sim" 'BEGIN { printf "nkisim / raw wall: %.2fx (target <= 2x)\n", b / a }'
