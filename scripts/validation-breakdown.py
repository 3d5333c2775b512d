#!/usr/bin/python3
"""Per published row of docs/validation.md, one decode layer's and one prefill layer's phases as
two nkisim builds price them (e.g. the one-queue DMA model before, the engine model after), side
by side, with the per-layer time the published TPOT leaves for the layers.

Usage: /usr/bin/python3 scripts/validation-breakdown.py BEFORE_NKISIM AFTER_NKISIM [BEFORE_HW_DIR]
(the rows come from scripts/validate-published.sh --rows). BEFORE_HW_DIR holds the hardware
profiles the BEFORE build reads (a row's --profile configs/hardware/X is taken from there for
it), e.g. `git show 1de958b:configs/hardware/trn1.textproto > /tmp/hw/trn1.textproto`."""
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts/validate-published.sh"), "--rows"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        name, model, flags, ttft, tpot, _source = line.split("|")
        yield name, model, flags, float(ttft), float(tpot)


def predict(nkisim, model, flags, hw_dir=None):
    if hw_dir:
        flags = flags.replace("configs/hardware/", hw_dir.rstrip("/") + "/")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.json")
        cmd = [nkisim, "predict", "--model", os.path.join(ROOT, f"configs/models/{model}.config.json"),
               *shlex.split(flags), "--json", path]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            return None
        with open(path) as f:
            return json.load(f)["plans"][0]


def layers(model):
    with open(os.path.join(ROOT, f"configs/models/{model}.config.json")) as f:
        return json.load(f)["num_hidden_layers"]


def table(title, key, before, after, extra=None):
    phases = list(dict.fromkeys(list(before[key]) + list(after[key])))
    print(f"\n{title}\n")
    print("| phase | before (us) | after (us) | after / before |")
    print("|---|---|---|---|")
    tb = ta = 0.0
    for ph in phases:
        b, a = before[key].get(ph, 0.0), after[key].get(ph, 0.0)
        tb, ta = tb + b, ta + a
        print(f"| {ph} | {b:.2f} | {a:.2f} | {a / b if b else float('nan'):.2f}x |")
    print(f"| layer | {tb:.2f} | {ta:.2f} | {ta / tb:.2f}x |")
    if extra:
        print(extra)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    before_bin, after_bin = sys.argv[1], sys.argv[2]
    before_hw = sys.argv[3] if len(sys.argv) == 4 else None
    for name, model, flags, _ttft, tpot in rows():
        before, after = predict(before_bin, model, flags, before_hw), predict(after_bin, model, flags)
        print(f"\n### {name}")
        if before is None or after is None:
            print("\nnot predicted by one of the builds")
            continue
        n = layers(model)
        left = (tpot - after["host_ms_per_step"] - after["lm_head_decode_ms"]) / n * 1000.0
        table(f"decode layer at KV {after['decode_phases_kv_length']} (TPOT {before['tpot_ms']:.2f} -> "
              f"{after['tpot_ms']:.2f} ms, published {tpot:.2f})", "decode_layer_phases_us", before, after,
              f"\nThe published TPOT leaves {left:.1f} us a layer (after the host's "
              f"{after['host_ms_per_step']:.3f} ms and the LM head's {after['lm_head_decode_ms']:.3f} ms a "
              f"step, over {n} layers); the model gives {after['decode_layers_mean_ns'] / n / 1000.0:.1f} us.")
        table("prefill layer (one chunk)", "prefill_layer_phases_us", before, after)


if __name__ == "__main__":
    main()
