#!/usr/bin/env bash
# Regenerates the table of docs/validation.md: each published Trainium measurement next to
# `nkisim predict` of the same model, plan and request, with the error of each figure. The rows
# are the test, not the training set: nothing here feeds a profile figure.
# Usage: scripts/validate-published.sh [path/to/nkisim]   (default build/launcher/nkisim)
set -euo pipefail
cd "$(dirname "$0")/.."
NKISIM=${1:-build/launcher/nkisim}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# name | model | predict flags | published TTFT ms | published TPOT ms | source
ROWS=(
  "Llama-3.3-70B trn2 TP64 LNC2 B1 10000/1500 (NxDI)|Llama-3.3-70B|--tp 64 --lnc 2 --batch 1 --input-tokens 10000 --output-tokens 1500|814.2|19.6|aws-neuron-sdk libraries/nxd-inference/tutorials/llama70b_perf_comparison.csv (P50), config trn2-llama3.3-70b-tutorial.rst"
  "Llama-3.1-8B trn2 TP8 LNC2 conc. 2 512/128 (vLLM-Neuron)|Llama-3.1-8B|--tp 8 --lnc 2 --batch 2 --input-tokens 512 --output-tokens 128|51.07|10.52|aws-neuron-sdk vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-llama-3-1.md (median, baseline)"
)

echo "| row | TTFT published (ms) | TTFT predicted (ms) | error | TPOT published (ms) | TPOT predicted (ms) | error | source |"
echo "|---|---|---|---|---|---|---|---|"
i=0
for row in "${ROWS[@]}"; do
  IFS='|' read -r name model flags ttft tpot source <<<"$row"
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$NKISIM" predict --model "configs/models/$model.config.json" $flags --json "$OUT/$i.json" >"$OUT/$i.txt"
  python3 - "$OUT/$i.json" "$name" "$ttft" "$tpot" "$source" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
p = doc["plans"][0]
name, ttft, tpot, source = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
err = lambda pred, pub: f"{100.0 * (pred - pub) / pub:+.1f}%"
print(f"| {name} | {ttft:.2f} | {p['ttft_ms']:.2f} | {err(p['ttft_ms'], ttft)} | {tpot:.2f} | "
      f"{p['tpot_ms']:.2f} | {err(p['tpot_ms'], tpot)} | {source} |")
PY
done
