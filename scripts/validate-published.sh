#!/usr/bin/env bash
# Regenerates the table of docs/validation.md: each published Trainium measurement next to
# `nkisim predict` of the same model, plan and request, with the error of each figure. The rows
# are the test, not the training set: nothing here feeds a profile figure.
# Usage: scripts/validate-published.sh [path/to/nkisim]   (default build/launcher/nkisim)
#        scripts/validate-published.sh --rows   (prints the rows, one a line, for
#        scripts/validation-breakdown.py)
set -euo pipefail
cd "$(dirname "$0")/.."
NKISIM=${1:-build/launcher/nkisim}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# name | model | predict flags | published TTFT ms | published TPOT ms | source
# (trn1 rows carry --profile configs/hardware/trn1.textproto in their flags.) Each row runs in the
# buckets its deployment compiled (docs/validation.md, "Sources"): the tutorials' explicit
# context / token-generation buckets, else the framework's documented defaults.
ROWS=(
  "Llama-3.3-70B trn2 TP64 LNC2 B1 10000/1500 (NxDI + vLLM)|Llama-3.3-70B|--tp 64 --lnc 2 --batch 1 --input-tokens 10000 --output-tokens 1500 --context-encoding-buckets 2048,4096,8192,12288 --token-generation-buckets 2048,4096,8192,12800|814.2|19.6|aws-neuron-sdk libraries/nxd-inference/tutorials/llama70b_perf_comparison.csv (P50), config trn2-llama3.3-70b-tutorial.rst"
  "Llama-3.1-8B trn2 TP8 LNC2 conc. 2 512/128 (vLLM-Neuron)|Llama-3.1-8B|--tp 8 --lnc 2 --batch 2 --input-tokens 512 --output-tokens 128 --context-encoding-buckets 128,256,512,1024,2048 --token-generation-buckets 128,256,512,1024,2048|51.07|10.52|aws-neuron-sdk vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-llama-3-1.md (median, baseline)"
  "Llama-3.1-405B trn2 TP64 LNC2 B1 10000/1500 (NxDI + vLLM)|Llama-3.1-405B|--tp 64 --lnc 2 --batch 1 --input-tokens 10000 --output-tokens 1500 --context-encoding-buckets 2048,4096,10240,12288 --token-generation-buckets 12800|2442|37.9|aws-neuron-sdk libraries/nxd-inference/tutorials/llama405b_perf_comparison.csv (P50, no speculative decoding), config trn2-llama3.1-405b-speculative-tutorial.rst"
  "Llama-3-70B trn1 TP32 LNC1 B1 128/128 (Transformers NeuronX)|Llama-3.3-70B|--profile configs/hardware/trn1.textproto --tp 32 --lnc 1 --batch 1 --input-tokens 128 --output-tokens 128 --token-generation-buckets 128,256|52.53|26.48|aws-neuron-sdk about-neuron/benchmarks/trn1/latency_data_decoder.csv (P50, Neuron 2.18.1, bf16 weights)"
  "Llama-3-70B trn1 TP32 LNC1 B1 128/1024 (Transformers NeuronX)|Llama-3.3-70B|--profile configs/hardware/trn1.textproto --tp 32 --lnc 1 --batch 1 --input-tokens 128 --output-tokens 1024 --token-generation-buckets 128,256,512,1024,1152|53.2|24.48|aws-neuron-sdk about-neuron/benchmarks/trn1/latency_data_decoder.csv (P50, Neuron 2.18.1, bf16 weights)"
  "Llama-3-70B trn1 TP32 LNC1 B1 2048/2048 (Transformers NeuronX)|Llama-3.3-70B|--profile configs/hardware/trn1.textproto --tp 32 --lnc 1 --batch 1 --input-tokens 2048 --output-tokens 2048 --token-generation-buckets 128,256,512,1024,2048,4096|547|26.2|aws-neuron-sdk about-neuron/benchmarks/trn1/latency_data_decoder.csv (P50, Neuron 2.18.1, bf16 weights)"
)

if [[ "${1:-}" == "--rows" ]]; then
  printf '%s\n' "${ROWS[@]}"
  exit 0
fi

echo "| row | TTFT published (ms) | TTFT predicted (ms) | error | TPOT published (ms) | TPOT predicted (ms) | error | source |"
echo "|---|---|---|---|---|---|---|---|"
: >"$OUT/errors"
i=0
for row in "${ROWS[@]}"; do
  IFS='|' read -r name model flags ttft tpot source <<<"$row"
  i=$((i + 1))
  # A row predict cannot simulate (a kernel limit) is shown with its error, not dropped.
  # shellcheck disable=SC2086
  if ! "$NKISIM" predict --model "configs/models/$model.config.json" $flags --json "$OUT/$i.json" >"$OUT/$i.txt" 2>&1; then
    why=$(grep -m1 '^nkisim:' "$OUT/$i.txt" | sed 's/|/\\|/g' | cut -c1-160)
    echo "| $name | $ttft | not predicted | - | $tpot | not predicted | - | $source; predict: $why |"
    continue
  fi
  python3 - "$OUT/$i.json" "$name" "$ttft" "$tpot" "$source" "$OUT/errors" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
p = doc["plans"][0]
name, ttft, tpot, source = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
err = lambda pred, pub: (pred - pub) / pub
with open(sys.argv[6], "a") as f:
    f.write(f"{err(p['ttft_ms'], ttft)} {err(p['tpot_ms'], tpot)}\n")
pct = lambda e: f"{100.0 * e:+.1f}%"
print(f"| {name} | {ttft:.2f} | {p['ttft_ms']:.2f} | {pct(err(p['ttft_ms'], ttft))} | {tpot:.2f} | "
      f"{p['tpot_ms']:.2f} | {pct(err(p['tpot_ms'], tpot))} | {source} |")
PY
done
python3 - "$OUT/errors" <<'PY'
import math, sys
errors = [abs(float(e)) for line in open(sys.argv[1]) for e in line.split()]
if errors:
    geo = math.exp(sum(math.log(e) for e in errors) / len(errors))
    print(f"\nGeomean of |error| over the {len(errors)} figures of the rows predicted: {100.0 * geo:.0f}%")
PY
