#!/usr/bin/env bash
# Prints the markdown table of docs/attention.md: simulated time, bound and ratio of the decode
# (TKG) and prefill (CTE) attention kernels on a set of cases, from `nkisim kernel attention`.
#   bash scripts/attention-table.sh [path/to/nkisim]
set -euo pipefail
nkisim=${1:-build/launcher/nkisim}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
row() {
  local label=$1; shift
  local line
  line=$("$nkisim" kernel attention --out-dir "$scratch" --trace "" "$@" | grep '^roofline:')
  local bound_kind sim bound ratio
  bound_kind=$(sed -E 's/.*; (HBM|PE)-bound;.*/\1/' <<<"$line")
  sim=$(sed -E 's/.*simulated ([0-9.]+) ns.*/\1/' <<<"$line")
  ratio=$(sed -E 's/.* = ([0-9.]+)x the bound.*/\1/' <<<"$line")
  bound=$(awk -v s="$sim" -v r="$ratio" 'BEGIN { printf "%.1f", s / r / 1000 }')
  printf '| %s | %.1f us | %s us (%s) | %sx |\n' "$label" "$(awk -v s="$sim" 'BEGIN{print s/1000}')" \
    "$bound" "$bound_kind" "$ratio"
}
echo "| case (bf16, d 128 unless stated) | simulated | bound | ratio |"
echo "|---|---|---|---|"
for lnc in 1 2; do
  for t in 1024 4096 8192; do
    row "decode B 32, G 8, T $t, LNC $lnc" --variant tkg --b 32 --g 8 --t "$t" --lnc "$lnc"
  done
  row "decode B 4, G 8, T 4096, LNC $lnc" --variant tkg --b 4 --g 8 --t 4096 --lnc "$lnc"
  row "decode B 4, G 8, T 1025, LNC $lnc (default job, TP8DP8)" --variant tkg --b 4 --g 8 --t 1025 --lnc "$lnc"
  row "decode B 32, G 1, T 1025, LNC $lnc (default job, TP64)" --variant tkg --b 32 --g 1 --t 1025 --lnc "$lnc"
  row "decode B 1, G 8, T 32768, d 64, LNC $lnc (virtual rows)" --variant tkg --b 1 --g 8 --t 32768 --d 64 --lnc "$lnc"
done
for lnc in 1 2; do
  for heads in "32 8" "64 8"; do
    set -- $heads
    row "prefill S 2048, n_q $1, n_kv $2, LNC $lnc" --variant cte --s 2048 --nq "$1" --nkv "$2" --lnc "$lnc"
  done
done
