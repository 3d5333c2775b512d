#!/usr/bin/env bash
# The decode (TKG) attention kernel over a grid of 96 cases (d 64 / 128, LNC 1 / 2, Bl 1 / 4 / 32,
# G 1 / 8, T 1024 / 1025 / 4096 / 32768, bf16), timing-only: per case the simulated time, the
# HBM roofline, the stream floor (the roofline plus the first load's and the store's fixed DMA
# costs, which no kernel hides: runtime/cost_model.h StreamFloorNs) and the two ratios. Then the
# count of cases within 1.25x of the roofline, of those whose floor alone is above 1.25x (no
# kernel can meet it under the profile's DMA costs), and of those the kernel misses although the
# floor allows it, with their geometric means.
#   bash scripts/attention-grid.sh [path/to/nkisim]      (about 40 s)
set -euo pipefail
nkisim=${1:-build/launcher/nkisim}
[[ -x $nkisim ]] || { echo "attention-grid.sh: no nkisim binary at '$nkisim' (build first)" >&2; exit 2; }
printf '%-4s %-4s %-4s %-3s %-6s %12s %12s %12s %8s %8s\n' d lnc Bl G T "sim (ns)" "bound (ns)" \
  "floor (ns)" "x bound" "x floor"
rows=()
for d in 64 128; do for lnc in 1 2; do for b in 1 4 32; do for g in 1 8; do
  for t in 1024 1025 4096 32768; do
    out=$("$nkisim" kernel attention --variant tkg --b "$b" --g "$g" --t "$t" --d "$d" \
      --lnc "$lnc" --timing-only --trace '')
    sim=$(sed -nE 's/^roofline: .*simulated ([0-9.]+) ns = .*/\1/p' <<<"$out")
    bound=$(sed -nE 's/^roofline: HBM ([0-9.]+) ns .*/\1/p' <<<"$out")
    floor=$(sed -nE 's/^stream floor: ([0-9.]+) ns .*/\1/p' <<<"$out")
    if [[ -z $sim || -z $bound || -z $floor ]]; then
      echo "attention-grid.sh: no roofline or stream floor line for d $d lnc $lnc Bl $b G $g T $t:" >&2
      echo "$out" >&2
      exit 1
    fi
    row=$(awk -v d="$d" -v l="$lnc" -v b="$b" -v g="$g" -v t="$t" -v s="$sim" -v h="$bound" \
      -v f="$floor" 'BEGIN { printf "%-4s %-4s %-4s %-3s %-6s %12.1f %12.1f %12.1f %7.2fx %7.2fx",
                             d, l, b, g, t, s, h, f, s / h, s / f }')
    echo "$row"
    rows+=("$row")
  done
done; done; done; done
printf '%s\n' "${rows[@]}" | awk '{
  r = $6 / $7; fl = $6 / $8; fb = $8 / $7  # exact ratios (a printed 1.25x may be 1.254x)
  n++; all += log(r)
  if (r <= 1.25) { ok++ }
  else if (fb > 1.25) { blocked++; lb += log(r); lfb += log(fb) }
  else { gap++; lg += log(r); lgf += log(fl) }
} END {
  printf "\n%d cases, geomean %.3fx the roofline\n", n, exp(all / n)
  printf "  within 1.25x of the roofline:              %d\n", ok
  if (blocked) printf "  floor alone above 1.25x (out of reach):    %d (geomean %.2fx the roofline; their floors %.2fx)\n", blocked, exp(lb / blocked), exp(lfb / blocked)
  if (gap) printf "  above 1.25x although the floor allows it:  %d (geomean %.2fx the roofline, %.2fx the floor)\n", gap, exp(lg / gap), exp(lgf / gap)
}'
