#!/usr/bin/env bash
# Prints the markdown table of docs/attention.md: simulated time, bound and ratio of the decode
# (TKG) and prefill (CTE) attention kernels on a set of cases, from `nkisim kernel attention`, and
# the floor with the simulated time against it: for decode (HBM-bound) the stream floor (the HBM
# bound plus the first load's and the store's fixed DMA costs: what no kernel beats under the
# profile), for prefill (PE-bound) the engine floor (the busiest compute engine's instruction
# time: what no ordering of the kernel's instructions beats).
#   bash scripts/attention-table.sh [path/to/nkisim]
set -euo pipefail
nkisim=${1:-build/launcher/nkisim}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
row() {
  local label=$1; shift
  local out line floor_line engine_line floor_cols
  out=$("$nkisim" kernel attention --out-dir "$scratch" --trace "" "$@")
  line=$(grep '^roofline:' <<<"$out")
  floor_line=$(grep '^stream floor:' <<<"$out" || true)
  engine_line=$(grep '^engine floor:' <<<"$out" || true)
  floor_cols="- | -"
  if [[ -n $floor_line ]]; then
    floor_cols=$(sed -E 's/^stream floor: ([0-9.]+) ns .* simulated = ([0-9.]+)x the floor.*/\1 \2/' \
      <<<"$floor_line" | awk '{ printf "%.1f us | %sx", $1 / 1000, $2 }')
  elif [[ -n $engine_line ]]; then
    floor_cols=$(sed -E 's/^engine floor: ([A-Za-z]+) ([0-9.]+) ns .* simulated = ([0-9.]+)x the floor.*/\1 \2 \3/' \
      <<<"$engine_line" | awk '{ printf "%.1f us (%s) | %sx", $2 / 1000, $1, $3 }')
  fi
  local bound_kind sim bound ratio
  bound_kind=$(sed -E 's/.*; (HBM|PE)-bound;.*/\1/' <<<"$line")
  sim=$(sed -E 's/.*simulated ([0-9.]+) ns.*/\1/' <<<"$line")
  ratio=$(sed -E 's/.* = ([0-9.]+)x the bound.*/\1/' <<<"$line")
  bound=$(awk -v s="$sim" -v r="$ratio" 'BEGIN { printf "%.1f", s / r / 1000 }')
  printf '| %s | %.1f us | %s us (%s) | %sx | %s |\n' "$label" \
    "$(awk -v s="$sim" 'BEGIN{print s/1000}')" "$bound" "$bound_kind" "$ratio" "$floor_cols"
}
echo "| case (bf16, d 128 unless stated) | simulated | bound | ratio | floor | x floor |"
echo "|---|---|---|---|---|---|"
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
