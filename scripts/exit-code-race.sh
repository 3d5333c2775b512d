#!/usr/bin/env bash
# Runs a plain `mpirun -n N nkisim run CONFIG` of an 8-rank scenario with the wrong rank count
# RUNS times and counts the exit codes: every run must end with 14 (bad config), whichever rank
# reports first (docs/reliability.md, "One failure, one exit code").
#   bash scripts/exit-code-race.sh [RUNS] [N] [CONFIG]
set -u
runs=${1:-50}
n=${2:-4}
config=${3:-configs/small_8ranks.textproto}
nkisim=${NKISIM:-build/launcher/nkisim}
root=""
[ "$(id -u)" = 0 ] && root="--allow-run-as-root"
declare -A codes
out=$(mktemp -d)
for i in $(seq 1 "$runs"); do
  mpirun $root --oversubscribe -n "$n" "$nkisim" run "$config" --report "$out/r.json" --trace '' \
    >"$out/log.$i" 2>&1
  code=$?
  codes[$code]=$(( ${codes[$code]:-0} + 1 ))
  if [ "$code" != 14 ] || grep -q "unknown rank" "$out/log.$i"; then
    echo "run $i: exit $code (log kept: $out/log.$i)"
  else
    rm -f "$out/log.$i"
  fi
done
for code in "${!codes[@]}"; do echo "exit $code: ${codes[$code]} of $runs runs (mpirun -n $n)"; done
[ "${codes[14]:-0}" = "$runs" ]
