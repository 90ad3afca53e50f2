#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE.md and docs/PERFORMANCE-gpu-pipeline.md.
# On a lent GPU, after `scripts/gpu/gpu_carry_ort.sh receive` (binary sealcheck carried, and a
# swapped-class classifier carried as .device/cls_swapped.onnx, made here with
# `scripts/demo/swap_classes.py models/cls.onnx .device/cls_swapped.onnx`): the shadow beside the
# full GPU path (ONNX Runtime CUDA, preprocess = "cuda").
#   a: verdicts: `sealcheck run` on the clip with the swapped classifier as shadow; every line
#      there, production's verdicts as without the shadow, flips recounted from the lines.
#   b: cost: scripts/bench/bench_shadow.sh, production's capture-to-verdict with and without a
#      shadow (the same FP32 models on ONNX Runtime, host path, on each device of
#      SHADOW_DEVICES, default "cuda cpu", judging every EVERY-th frame, default 1),
#      offered at RATE.
set -u
cd "$(dirname "$0")/../.."
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
BIN=${BIN:-/tmp/sealcheck-carry/bin/sealcheck}
mkdir -p results
sed -e 's|^backend = .*|backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"|' \
    -e 's|^results = .*|results = "../results/gpu_shadow_off.jsonl"|' config/demo.toml >config/gpu_shadow_off.toml
sed -e 's|gpu_shadow_off|gpu_shadow_on|' config/gpu_shadow_off.toml >config/gpu_shadow_on.toml
printf '\n[shadow]\nclassifier = "%s"\n' "$PWD/.device/cls_swapped.onnx" >>config/gpu_shadow_on.toml
case "${1:-ab}" in *a*)
    timeout 120 "$BIN" run --config config/gpu_shadow_off.toml 2>/dev/null | grep -E '^(backend|verdicts)'
    timeout 120 "$BIN" run --config config/gpu_shadow_on.toml 2>results/gpu_shadow_on.log | grep -E '^(backend|verdicts|shadow)'
    grep -E 'shadow (running|refused)' results/gpu_shadow_on.log | cut -c1-300
    python3 - <<'PY'
import json
off = [json.loads(l) for l in open("results/gpu_shadow_off.jsonl")]
on = [json.loads(l) for l in open("results/gpu_shadow_on.jsonl")]
same = all((a["seq"], a["verdict"], a["reason"]) == (b["seq"], b["verdict"], b["reason"]) for a, b in zip(off, on))
shadowed = [l for l in on if "shadow" in l and "verdict" in l["shadow"]]
p2f = sum(l["verdict"] == "pass" and l["shadow"]["verdict"] == "fail" for l in shadowed)
f2p = sum(l["verdict"] == "fail" and l["shadow"]["verdict"] == "pass" for l in shadowed)
print(f"lines {len(off)} / {len(on)}, seq contiguous {[l['seq'] for l in on] == list(range(len(on)))}, "
      f"production verdicts identical {same and len(off) == len(on)}, shadowed {len(shadowed)}, "
      f"recounted flips pass_to_fail {p2f} fail_to_pass {f2p}")
PY
;; esac
case "${1:-ab}" in *b*)
    for device in ${SHADOW_DEVICES:-cuda cpu}; do
    printf '[shadow]\ndevice = "%s"\nevery = %s\n' "$device" "${EVERY:-1}" >/tmp/shadow_same.toml
    BIN=$BIN scripts/bench/bench_shadow.sh config/gpu_shadow_off.toml /tmp/shadow_same.toml "${ROUNDS:-2}" "${FRAMES:-3000}" "${RATE:-100}" \
        | python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("#"): print(line.strip()); continue
    r = json.loads(line); rep = r["report"]; t = rep["latency_ms"]["total"]; s = rep.get("shadow") or {}
    print(r["round"], r["shadow"], "judged", rep["judged"], "dropped", rep["dropped"], "total p50/p99 ms", t["p50"], t["p99"],
          "| shadow compared", (s.get("since_start") or {}).get("compared"), "skipped", s.get("skipped"), "engine", s.get("engine"))
'
    done
;; esac
rm -f config/gpu_shadow_off.toml config/gpu_shadow_on.toml
