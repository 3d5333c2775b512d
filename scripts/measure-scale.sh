#!/usr/bin/env bash
# Scale on one machine: runs a multi-instance `nkisim run` job and a bare MPI job of the same
# process count (build/bench/raw_mpi_job: start-up, the job's all_reduce and all_gather traffic,
# shut-down) back to back, and prints for both the wall time, CPU time, minor page faults and peak
# RSS (largest rank and summed over ranks), the wall-time ratio, and what nkisim adds in CPU time
# and fresh pages (on a VM where a page fault traps into the hypervisor, the pages dominate).
#   bash scripts/measure-scale.sh [CONFIG [PAIRS]]
#     CONFIG: default configs/tp128_two_instances_decode.textproto
#     PAIRS:  how many raw / nkisim pairs to run (default 1), alternating which goes first; with
#             more than one, each pair's ratio is printed and then their median: on a VM whose
#             speed drifts by 20% or more within the hour, one pair decides little.
# Targets (issue 12): nkisim at most 2x the raw job's wall time, at most 120 MiB per rank; a
# 256-rank job under 20 GiB summed.
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/tp128_two_instances_decode.textproto}
pairs=${2:-1}
if ! [[ $pairs =~ ^[1-9][0-9]?$ ]]; then
  echo "measure-scale.sh: PAIRS '$pairs' must be a whole number from 1 to 99" >&2
  exit 2
fi
for tool in raw_mpi_job job_usage; do
  [[ -x build/bench/$tool ]] || cmake --build build --target $tool > /dev/null
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
build/launcher/nkisim validate "$config" > "$scratch/validate.txt"
ranks=$(grep -o '; [0-9]* ranks' "$scratch/validate.txt" | head -1 | grep -o '[0-9]*')
batch=$(grep -o '^batch: *[0-9]*' "$config" | grep -o '[0-9]*$')
hidden=$(grep -o 'hidden: *[0-9]*' "$config" | grep -o '[0-9]*$')
plans=$(grep -c '^plans' "$config")
root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)

echo "config $config: $ranks ranks, $plans plans"
# Each job runs under build/bench/job_usage, which writes `wall user sys minor_faults max_rss` of
# the job and every process of it.
run_raw() {
  build/bench/job_usage "$scratch/raw.usage" -- mpirun "${root[@]}" --oversubscribe -n "$ranks" \
    build/bench/raw_mpi_job --batch "$batch" --hidden "$hidden" --plans "$plans" > "$scratch/raw.txt"
}
run_sim() {
  if ! build/bench/job_usage "$scratch/sim.usage" -- build/launcher/nkisim run "$config" \
      --report "$scratch/report.json" --trace '' > "$scratch/run.txt"; then
    cat "$scratch/run.txt" >&2
    echo "measure-scale.sh: nkisim run $config failed" >&2
    exit 1
  fi
}
field() { grep -o "\"$1\": *[0-9.]*" "$scratch/report.json" | head -1 | grep -o '[0-9.]*$'; }
ratios=()
for ((pair = 1; pair <= pairs; ++pair)); do
  if ((pair % 2 == 1)); then run_raw; run_sim; else run_sim; run_raw; fi
  ((pairs > 1)) && echo "pair $pair of $pairs ($( ((pair % 2 == 1)) && echo "raw first" || echo "nkisim first" ))"
  cat "$scratch/raw.txt"
  grep -E '^result:' "$scratch/run.txt"
  read -r raw raw_user raw_sys raw_faults _ < "$scratch/raw.usage"
  read -r sim sim_user sim_sys sim_faults _ < "$scratch/sim.usage"
  printf '%-26s %9s %9s %9s %13s %15s %17s\n' "job" "wall (s)" "user (s)" "sys (s)" "minor faults" \
    "RSS/rank (MiB)" "RSS summed (GiB)"
  raw_rss=$(grep -o 'peak RSS [0-9.]*' "$scratch/raw.txt" | grep -o '[0-9.]*$')
  raw_sum=$(grep -o '[0-9.]* GiB summed' "$scratch/raw.txt" | grep -o '^[0-9.]*')
  printf '%-26s %9.1f %9.1f %9.1f %13d %15.1f %17.2f\n' "raw MPI ($ranks ranks)" "$raw" "$raw_user" \
    "$raw_sys" "$raw_faults" "$raw_rss" "$raw_sum"
  # The report gives the largest rank's peak RSS and the ranks' peaks added up.
  printf '%-26s %9.1f %9.1f %9.1f %13d %15.1f %17.2f\n' "nkisim run ($ranks ranks)" "$sim" "$sim_user" \
    "$sim_sys" "$sim_faults" "$(field peakRssMib)" \
    "$(awk -v m="$(field peakRssSummedMib)" 'BEGIN { print m / 1024 }')"
  ratio=$(awk -v a="$raw" -v b="$sim" 'BEGIN { printf "%.2f", b / a }')
  ratios+=("$ratio")
  echo "nkisim / raw wall: ${ratio}x (target <= 2x)"
  # Where the difference goes: CPU time (two cores share every rank) and the fresh pages the
  # simulation touches for its inputs, SBUF tiles and goldens (each minor fault is one 4 KiB page).
  awk -v ru="$raw_user" -v rs="$raw_sys" -v su="$sim_user" -v ss="$sim_sys" -v rf="$raw_faults" \
    -v sf="$sim_faults" -v n="$ranks" 'BEGIN {
      printf "nkisim adds %.1f s of CPU (user %+.1f, sys %+.1f) and %d page faults (%.1f MiB of fresh pages per rank)\n",
        su + ss - ru - rs, su - ru, ss - rs, sf - rf, (sf - rf) * 4 / 1024 / n }'
done
if ((pairs > 1)); then
  printf '%s\n' "${ratios[@]}" | sort -n | awk -v n="$pairs" '
    { r[NR] = $1 }
    END {
      median = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
      printf "nkisim / raw wall over %d pairs: median %.2fx, range %.2f-%.2fx (target <= 2x)\n", n, median, r[1], r[n]
    }'
fi
