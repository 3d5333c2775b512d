#!/usr/bin/python3
"""Per published row of docs/validation.md, one decode layer's and one prefill layer's phases as
two nkisim builds price them (e.g. the one-queue DMA model before, the engine model after), side
by side, with the per-layer time the published TPOT leaves for the layers.

Usage: /usr/bin/python3 scripts/validation-breakdown.py [--before-unbucketed] BEFORE_NKISIM AFTER_NKISIM
       [BEFORE_HW_DIR]
(the rows come from scripts/validate-published.sh --rows). --before-unbucketed: the BEFORE runs
drop the rows' --context-encoding-buckets / --token-generation-buckets (the same build on both
sides shows what the deployments' buckets change).

       /usr/bin/python3 scripts/validation-breakdown.py --stages LABEL=NKISIM[,hw=DIR][,unbucketed] ...
prints one table per row: TTFT, TPOT, the decode and the prefill layer under each build in turn
(the stages of a change, e.g. before issue 40, the DMA engine model, the collectives, now). BEFORE_HW_DIR holds the hardware
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


def unbucketed(flags):
    words = shlex.split(flags)
    out = []
    for i, w in enumerate(words):
        if w in ("--context-encoding-buckets", "--token-generation-buckets") or \
                (i > 0 and words[i - 1] in ("--context-encoding-buckets", "--token-generation-buckets")):
            continue
        out.append(w)
    return " ".join(out)


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


def stages(specs):
    parsed = []
    for spec in specs:
        label, _, rest = spec.partition("=")
        parts = rest.split(",")
        opts = dict(p.split("=", 1) if "=" in p else (p, True) for p in parts[1:])
        parsed.append((label, parts[0], opts.get("hw"), "unbucketed" in opts))
    for name, model, flags, ttft, tpot in rows():
        n = layers(model)
        print(f"\n### {name}\n")
        print("| stage | TTFT (ms) | TPOT (ms) | decode layer (us) | prefill layer, one chunk (us) |")
        print("|---|---|---|---|---|")
        for label, nkisim, hw, drop in parsed:
            p = predict(nkisim, model, unbucketed(flags) if drop else flags, hw)
            if p is None:
                print(f"| {label} | not predicted | | | |")
                continue
            print(f"| {label} | {p['ttft_ms']:.2f} | {p['tpot_ms']:.2f} | "
                  f"{p['decode_layers_mean_ns'] / n / 1000.0:.1f} | "
                  f"{sum(p['prefill_layer_phases_us'].values()):.1f} ({p['prefill_chunk_tokens']} tokens) |")
        print(f"| published | {ttft:.2f} | {tpot:.2f} | | |")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--stages":
        stages(args[1:])
        return
    drop_buckets = "--before-unbucketed" in args
    args = [a for a in args if a != "--before-unbucketed"]
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    before_bin, after_bin = args[0], args[1]
    before_hw = args[2] if len(args) == 3 else None
    for name, model, flags, _ttft, tpot in rows():
        before_flags = unbucketed(flags) if drop_buckets else flags
        before, after = predict(before_bin, model, before_flags, before_hw), predict(after_bin, model, flags)
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
        table(f"prefill layer (one chunk of {after['prefill_chunk_tokens']} tokens; TTFT {before['ttft_ms']:.2f} -> "
              f"{after['ttft_ms']:.2f} ms)", "prefill_layer_phases_us", before, after)


if __name__ == "__main__":
    main()
