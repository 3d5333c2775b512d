#!/usr/bin/env bash
# Runs one scenario N times in a row (default: the 8-rank small job, 100 times) and checks that no
# run hangs or fails and that every report equals the first except for host measurements (wall
# time, host times, peak RSS). Prints one line per run and a summary; exits 1 on any difference.
#   bash scripts/repeat-run.sh [N] [CONFIG] [extra nkisim run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
config=${2:-configs/small_8ranks.textproto}
shift $(( $# > 2 ? 2 : $# ))
nkisim=build/launcher/nkisim
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The report without its host measurements, one field per line, for comparison.
normalize() {
  python3 - "$1" <<'PY'
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("hostMs", "wallS", "peakRssMib")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
print(json.dumps(strip(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
}
failures=0
for i in $(seq 1 "$n"); do
  start=$(date +%s.%N)
  if ! timeout 120 "$nkisim" run "$config" --report "$scratch/r.json" --trace '' "$@" \
      > "$scratch/out.txt" 2>&1; then
    echo "run $i: FAILED or timed out"; tail -3 "$scratch/out.txt"; failures=$((failures + 1)); continue
  fi
  normalize "$scratch/r.json" > "$scratch/r$i.txt"
  verdict=same
  if [[ $i -gt 1 ]] && ! cmp -s "$scratch/r1.txt" "$scratch/r$i.txt"; then
    verdict=DIFFERENT; failures=$((failures + 1)); diff "$scratch/r1.txt" "$scratch/r$i.txt" | head -10
  fi
  printf 'run %d: %.1f s, report %s\n' "$i" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$verdict"
done
echo "$n runs of $config: $failures failed or differed"
[[ $failures -eq 0 ]]
