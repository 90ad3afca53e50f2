#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-pipeline.md ("Issue 38: cavities on
# the device path"); no make target. After `scripts/gpu/gpu_carry_ort.sh receive` (binaries
# `sealcheck` and `gpu_parity` built `--profile ci --features cuda`, in $BIN_DIR).
# Writes $OUT (default ./gpu-out) and prints a summary line per step.
#
# Two layouts: the demo machine's 2x3 (samples/demo_cavities, 1920x720, 6 cavities) and a 3x6
# machine made from it (scripts/gpu/gen_cavities_3x6.py: 3840x1080, 18 cavities, each
# cavity's crop the same tray at the same scale). Each on two paths, ONNX Runtime CUDA and
# the dynamic-batch models, max_batch = the cavities of one cycle:
#   device  preprocess = "cuda": the device path, the frame uploaded once, each cavity the
#           frame kernel over its crop of it, the cycle one batch on one stream
#   host    preprocess = "cpu": the host path, each cavity cropped and preprocessed on the
#           CPU, the cycle one batch on the CUDA sessions
#
#   p  gpu_parity (the kernels against the CPU, the cavity crops, and the device path's
#      per-cavity verdicts against the CPU host path's on the demo machine's frames)
#   b  cycles (and cavities) per second as fast as the pipeline takes them: `sealcheck bench`
#      on the clip decoded beforehand ($FRAMES cycles on the device path, $HOST_FRAMES on the
#      host path, after 10 warm-up ones)
#   l  the line: `sealcheck run` with the clip looped as a live camera at $RATE cycles/s
#      (multifilesrc loop=true, jpegdec, identity sync=true) for $LIVE_SECONDS s, start-up
#      included (the cycles judged are what is left at $RATE a second); capture-to-
#      verdict of every cycle from the first one (p50/p99/max), late and unjudged cycles,
#      the batches made, the device stage's GPU spans; and the per-cavity verdicts of the
#      device path against the host path's on every (frame of the clip, cavity) both judged
#
#   scripts/gpu/gpu_cavities.sh [p] [b] [l]      (default: all; LAYOUTS="23 36", PATHS="device host")
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BIN_DIR=${BIN_DIR:-/tmp/sealcheck-carry/bin}
BIN=${BIN:-$BIN_DIR/sealcheck}
RATE=${RATE:-30}
FRAMES=${FRAMES:-600}
HOST_FRAMES=${HOST_FRAMES:-300}
LIVE_SECONDS=${LIVE_SECONDS:-45}
CLIP36=${CLIP36:-/tmp/sealcheck-cavities-3x6}
LAYOUTS=${LAYOUTS:-23 36}
PATHS=${PATHS:-device host}
HERE=$(dirname "$0")
mkdir -p "$OUT"
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
steps=${*:-p b l}
repo=$PWD
work=$(mktemp -d)

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc
} >"$OUT/machine_cavities.txt" 2>&1
cat "$OUT/machine_cavities.txt"

if [ ! -f "$CLIP36/frame_00049.jpg" ]; then
    python3 "$HERE/gen_cavities_3x6.py" --out "$CLIP36" --count 50
fi

config() { # name layout(23|36) path(device|host) source(images|live) -> $work/<name>.toml
    case $2 in
    23) rows=2 cols=3 clip=$repo/samples/demo_cavities cavities=6 ;;
    36) rows=3 cols=6 clip=$CLIP36 cavities=18 ;;
    esac
    case $3 in
    device) preprocess=cuda ;;
    host) preprocess=cpu ;;
    esac
    case $4 in
    images)
        source="kind = \"images\"
location = \"$clip/frame_%05d.jpg\"
framerate = $RATE"
        ;;
    live)
        source="kind = \"pipeline\"
pipeline = \"multifilesrc location=$clip/frame_%05d.jpg loop=true caps=image/jpeg,framerate=$RATE/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"
live = true"
        ;;
    esac
    cat >"$work/$1.toml" <<EOF
[source]
$source

[source.layout]
rows = $rows
cols = $cols
first = [320, 180]
pitch = [640, 360]
size = [600, 340]
margin = 10

[inference]
backend = "onnxruntime"
device = "cuda"
preprocess = "$preprocess"
max_batch = $cavities

[models.segmentation]
path = "$repo/models/seg_batch.onnx"

[models.classifier]
path = "$repo/models/cls_batch.onnx"

[decision]
defect_threshold = 0.5
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25
deadline_ms = 1000

[output]
results = "$work/$1.jsonl"
log_verdicts = false

[logging]
format = "logfmt"
level = "info"
EOF
}

for step in $steps; do
    case $step in
    p)
        timeout 300 "$BIN_DIR/gpu_parity" >"$OUT/p_gpu_parity.txt" 2>&1
        echo "p gpu_parity exit $?"
        grep -E "^test |gpu_parity:|SKIPPED" "$OUT/p_gpu_parity.txt"
        ;;
    b)
        for layout in $LAYOUTS; do
            for path in $PATHS; do
                name=b_${layout}_$path
                config "$name" "$layout" "$path" images
                frames=$FRAMES
                [ "$path" = host ] && frames=$HOST_FRAMES
                start=$(date +%s)
                timeout 240 "$BIN" bench --config "$work/$name.toml" --frames "$frames" --json \
                    2>"$OUT/$name.log" >"$OUT/$name.json"
                rc=$?
                echo "$name: $(grep -c 'level=warn' "$OUT/$name.log") warnings, $(grep -c 'level=error' "$OUT/$name.log") errors in the log"
                python3 - "$OUT/$name.json" "$name" "$layout" "$rc" "$(($(date +%s) - start))" <<'PY'
import json, sys
path, name, layout, rc, secs = sys.argv[1:]
cavities = 6 if layout == "23" else 18
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
if not rows:
    print("%s: exit %s, no report (%s s)" % (name, rc, secs)); sys.exit()
r = rows[-1]
t = r["latency_ms"]["total"]
b = r.get("batches") or {}
print("%s: exit %s, %s cycles judged, %.1f cycles/s = %.0f cavities/s, total p50/p99 %s/%s ms, "
      "engine runs %s for %s cavities (max_batch %s), GPU memory run %s MiB (%s s with start-up)" % (
    name, rc, r["judged"], r["fps"], r["fps"] * cavities, t["p50"], t["p99"], b.get("runs"),
    b.get("frames"), b.get("max_batch"), round((r.get("gpu_memory") or {}).get("run_mib", 0)), secs))
PY
            done
        done
        ;;
    l)
        for layout in $LAYOUTS; do
            for path in $PATHS; do
                name=l_${layout}_$path
                config "$name" "$layout" "$path" live
                timeout -s TERM "$LIVE_SECONDS" "$BIN" run --config "$work/$name.toml" >"$OUT/$name.log" 2>&1
                cp "$work/$name.jsonl" "$OUT/$name.jsonl" 2>/dev/null
                python3 - "$work/$name.jsonl" "$name" "$LIVE_SECONDS" <<'PY'
import json, sys
path, name, secs = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if l.strip()]
total = sorted(l["latency_ms"]["total"] for l in lines if l.get("latency_ms"))
q = lambda p: total[min(len(total) - 1, int(p * len(total)))] if total else float("nan")
reasons = {}
for l in lines:
    reasons[l["reason"]] = reasons.get(l["reason"], 0) + 1
print("%s: %d cycles judged in a run of %s s (start-up included), %d cavities; capture-to-verdict "
      "p50/p99/max %.2f/%.2f/%.2f ms, first %.2f ms; late %d; reasons %s" % (
    name, len(lines), secs, sum(len(l.get("cavities", [])) for l in lines), q(.5), q(.99),
    total[-1] if total else float("nan"), lines[0]["latency_ms"]["total"] if lines else float("nan"),
    sum(1 for l in lines if l.get("late")), reasons))
PY
                grep -h "batches\|GPU time per batch\|max_batch raised" "$OUT/$name.log" | sed "s/^/$name: /" | cut -c1-600
                echo "$name: $(grep -c 'level=warn' "$OUT/$name.log") warnings, $(grep -c 'level=error' "$OUT/$name.log") errors in the log"
            done
            [ -f "$work/l_${layout}_device.jsonl" ] && [ -f "$work/l_${layout}_host.jsonl" ] || continue
            case $layout in 23) dir=$repo/samples/demo_cavities ;; *) dir=$CLIP36 ;; esac
            python3 - "$work/l_${layout}_device.jsonl" "$work/l_${layout}_host.jsonl" "$layout" \
                "$(ls "$dir"/frame_*.jpg | wc -l)" <<'PY'
import json, sys
dev_path, host_path, layout, clip = sys.argv[1:]
clip = int(clip)  # the looped clip's frames: a cycle's seq modulo this is its frame
def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        for c in r.get("cavities", []):
            if c["reason"] not in ("not_inspected", "overrun", "no_frame"):
                out[(r["seq"] % clip, c["cavity"])] = (c["verdict"], c["reason"])
    return out
dev, host = load(dev_path), load(host_path)
both = set(dev) & set(host)
differ = sorted(k for k in both if dev[k] != host[k])
print("l %s verdicts: %d (frame, cavity) judged by both paths, %d differ %s; errors device %d host %d" % (
    layout, len(both), len(differ), differ[:10],
    sum(1 for v in dev.values() if v[1] == "error"), sum(1 for v in host.values() if v[1] == "error")))
PY
        done
        ;;
    esac
done
rm -rf "$work"
