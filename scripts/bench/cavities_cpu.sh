#!/usr/bin/env bash
# Run by hand, for docs/PERFORMANCE.md ("A machine cycle of cavities", issue 38).
# A 2x3 cavity layout on this machine's CPU (ONNX Runtime), three ways, round by round:
#
#   cycle, batched   config/demo-cavities.toml: each cycle's six crops in one engine run
#                    (the dynamic-batch models, max_batch 6)
#   cycle, 1 by 1    the same layout and crops with the batch-1 models (seg.onnx, cls.onnx):
#                    the six crops one engine run after another
#   single seals     config/demo.toml: single-seal 1280x720 frames with the batch-1 models;
#                    six of them are what a cycle would cost judged as separate frames
#
# each with `sealcheck bench` as fast as the pipeline takes the frames (FRAMES after 10
# warm-up ones), then the line's view: `sealcheck run` on the cavity clip as a live camera
# at 1 cycle/s (the clip looped, paced by the pipeline) for LIVE_SECONDS, with a 1000 ms
# deadline: capture-to-verdict of every cycle from the first, and the late ones.
#
#   scripts/bench/cavities_cpu.sh [ROUNDS]       (BIN, FRAMES, LIVE_SECONDS)
#
# Waits (up to QUIET_WAIT s) for no cargo or rustc running before each round; each line says
# the load average it ran at.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
BIN=${BIN:-target/ci/sealcheck}
FRAMES=${FRAMES:-120}
LIVE_SECONDS=${LIVE_SECONDS:-60}
QUIET_WAIT=${QUIET_WAIT:-900}
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/.ort/lib/libonnxruntime.so.1.31.1}
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

quiet() {
  local waited=0
  while pgrep -x cargo >/dev/null || pgrep -x rustc >/dev/null; do
    [ "$waited" -ge "$QUIET_WAIT" ] && { echo "cavities_cpu: cargo or rustc still running after ${QUIET_WAIT}s" >&2; exit 1; }
    sleep 5; waited=$((waited + 5))
  done
}
load() { cut -d' ' -f1 /proc/loadavg; }

# The cavity config with the batch-1 models, in the config folder (its paths are relative).
sed -e 's#\.\./models/seg_batch\.onnx#../models/seg.onnx#' -e 's#\.\./models/cls_batch\.onnx#../models/cls.onnx#' \
  config/demo-cavities.toml > config/.bench-cavities-one-by-one.toml
trap 'rm -rf "$work" config/.bench-cavities-one-by-one.toml' EXIT

bench() { # label config
  "$BIN" bench --config "$2" --frames "$FRAMES" --json 2>/dev/null | python3 -c '
import json, sys
label = sys.argv[1]
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    b = r.get("batches") or {}
    t = r["latency_ms"]["total"]
    print(json.dumps({"what": label, "frames_per_s": round(r["fps"], 3), "judged": r["judged"],
        "total_p50_ms": t["p50"], "total_p99_ms": t["p99"],
        "engine_runs": b.get("runs"), "seals": b.get("frames"), "load": float(sys.argv[2])}))
' "$1" "$(load)"
}

live() {
  cat > "$work/live.toml" <<EOF
[source]
kind = "pipeline"
pipeline = "multifilesrc location=$repo/samples/demo_cavities/frame_%05d.jpg loop=true caps=image/jpeg,framerate=1/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink"
live = true

[source.layout]
rows = 2
cols = 3
first = [320, 180]
pitch = [640, 360]
size = [600, 340]
margin = 10

[inference]
backend = "onnxruntime"
max_batch = 6

[models.segmentation]
path = "$repo/models/seg_batch.onnx"

[models.classifier]
path = "$repo/models/cls_batch.onnx"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25
deadline_ms = 1000

[output]
results = "$work/live.jsonl"
log_verdicts = false
EOF
  rm -f "$work/live.jsonl"
  local started
  started=$(load)
  timeout -s TERM "$LIVE_SECONDS" "$BIN" run --config "$work/live.toml" >/dev/null 2>&1 || true
  python3 - "$work/live.jsonl" "$started" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
total = sorted(l["latency_ms"]["total"] for l in lines if l.get("latency_ms"))
q = lambda p: total[min(len(total) - 1, int(p * len(total)))] if total else None
print(json.dumps({"what": "live, 1 cycle/s, from the first cycle", "cycles": len(lines),
    "cavities": sum(len(l.get("cavities", [])) for l in lines),
    "first_ms": lines[0]["latency_ms"]["total"] if lines else None,
    "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": total[-1] if total else None,
    "late": sum(1 for l in lines if l["late"]), "load": float(sys.argv[2])}))
PY
}

for round in $(seq "$ROUNDS"); do
  quiet
  bench "cycle, batched (round $round)" config/demo-cavities.toml
  quiet
  bench "cycle, 1 by 1 (round $round)" config/.bench-cavities-one-by-one.toml
  quiet
  bench "single seals (round $round)" config/demo.toml
done
quiet
live
