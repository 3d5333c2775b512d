#!/usr/bin/env bash
# Measures the main job as the README states it: wall time of `nkisim run` from launch to exit,
# and the largest peak RSS (VmHWM) of any rank, read from the run's JSON report.
#   bash scripts/measure-main-job.sh [CONFIG]      (default configs/tp64_tp8dp8.textproto)
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/tp64_tp8dp8.textproto}
scratch=$(mktemp -d)
report=$scratch/report.json
trace=$scratch/trace.json
start=$(date +%s.%N)
build/launcher/nkisim run "$config" --report "$report" --trace "$trace" > /dev/null
end=$(date +%s.%N)
rss=$(grep -o '"peakRssMib": *[0-9.]*' "$report" | grep -o '[0-9.]*$')
printf 'config %s\nwall %.1f s (launch to exit)\npeak RSS %s MiB per rank (largest rank)\n' \
  "$config" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$rss"
rm -rf "$scratch"
