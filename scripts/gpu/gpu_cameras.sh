#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-pipeline.md; no make target.
# On a lent GPU, after `scripts/gpu/gpu_carry_ort.sh receive` (binary sealcheck, built with
# `--features cuda`): several cameras in one process, batches and FP16 (issue 21).
# Writes $OUT (default ./gpu-out) and prints a summary per step.
#
#   a  the full GPU path (ONNX Runtime CUDA, preprocess = "cuda", one stream) with 1, 2,
#      4, 8 cameras at $RATE frames/s each: per-camera capture-to-verdict p50/p99, with
#      the batch-1 models and with the dynamic-batch models (max_batch: one per camera)
#   b  total frames/s as fast as the pipeline takes them, 8 cameras, on the full GPU path
#      with the dynamic-batch models at max_batch 1, 2, 4, 8, and the batch-1 models
#      beside them
#   c  4 cameras in one process against 4 processes of one camera (full GPU path, the same
#      frames, as fast as they go): total frames/s and GPU memory (each bench's
#      cuMemGetInfo figure, and the device's memory.used from nvidia-smi, less idle)
#   d  FP16 against FP32 on the full GPU path: frames/s in turn ($ROUNDS rounds), and
#      `sealcheck evaluate --candidate onnxruntime:cuda:fp16 --gate` on the labelled clip
#
#   e  `sealcheck run` of config/demo-cameras.toml (4 cameras, dynamic-batch models) on the
#      full GPU path with max_batch 4 against max_batch 1: the same verdict and reason for
#      every (camera, seq), one result per frame, and the batches the run made
#
#   f  the line's figure: `sealcheck run` with eight GStreamer cameras (eight [cameras.*]
#      image sequences of the clip at 30 frames/s each, full GPU path), with the batch-1
#      models and with the dynamic-batch models (max_batch 8): p50/p99/max capture-to-verdict
#      from each camera's first frame, per camera p99, and the batches made
#
#   scripts/gpu/gpu_cameras.sh [a] [b] [c] [d] [e] [f]      (default: all)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BIN=${BIN:-/tmp/sealcheck-carry/bin/sealcheck}
RATE=${RATE:-30}
FRAMES=${FRAMES:-1000}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT" results
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
steps=${*:-a b c d e f}

config() { # name device preprocess seg cls [precision] -> config/gpu_<name>.toml
    sed -e "s|^backend = .*|backend = \"onnxruntime\"\ndevice = \"$2\"\npreprocess = \"$3\"${6:+\nprecision = \"$6\"}|" \
        -e "s|seg.onnx|$4|" -e "s|cls.onnx|$5|" \
        -e "s|^results = .*|results = \"../results/gpu_$1.jsonl\"|" config/demo.toml >"config/gpu_$1.toml"
}
config device cuda cuda seg.onnx cls.onnx
config device_batch cuda cuda seg_batch.onnx cls_batch.onnx
config device_fp16 cuda cuda seg.onnx cls.onnx fp16

summary() { # bench JSON lines on stdin -> one line each, labelled $1
    python3 scripts/bench/bench_line.py "$1"
}

smi_start() { # samples the device's memory.used (MiB) every 100 ms into $1
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null &
    SMI=$!
}
smi_stop() { # stops the sampler; prints the peak of $1 less $2 (idle MiB)
    kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null
    sort -n "$1" | tail -1 | awk -v idle="$2" '{print $1 - idle}'
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc
} >"$OUT/machine_cameras.txt" 2>&1
cat "$OUT/machine_cameras.txt"

for step in $steps; do
    case $step in
    a)
        for n in 1 2 4 8; do
            for v in device device_batch; do
                "$BIN" bench --config "config/gpu_$v.toml" --cameras "$n" --rate "$RATE" \
                    --frames "$((RATE * 30))" --json 2>"$OUT/a_${v}_$n.log" | tee "$OUT/a_${v}_$n.json" \
                    | summary "a $v $n cameras at $RATE fps"
            done
        done
        ;;
    b)
        for b in 1 2 4 8; do
            "$BIN" bench --config config/gpu_device_batch.toml --cameras 8 --max-batch "$b" \
                --frames "$((FRAMES / 2))" --json 2>"$OUT/b_$b.log" | tee "$OUT/b_$b.json" | summary "b full GPU path, max_batch $b"
        done
        "$BIN" bench --config config/gpu_device.toml --cameras 8 --frames "$((FRAMES / 2))" --json \
            2>"$OUT/b_device.log" | tee "$OUT/b_device.json" | summary "b full GPU path, batch-1 models"
        ;;
    c)
        sleep 2
        idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
        echo "c: idle device memory.used $idle MiB"
        smi_start "$OUT/c_one.smi"
        start=$(date +%s.%N)
        "$BIN" bench --config config/gpu_device.toml --cameras 4 --frames "$FRAMES" --json \
            2>"$OUT/c_one.log" | tee "$OUT/c_one.json" | summary "c one process, 4 cameras"
        end=$(date +%s.%N)
        echo "c one process: $((4 * FRAMES)) frames in $(python3 -c "print(round($end - $start, 2))") s wall (load included); device memory.used peak +$(smi_stop "$OUT/c_one.smi" "$idle") MiB"
        sleep 2
        smi_start "$OUT/c_four.smi"
        pids=""
        for i in 1 2 3 4; do
            "$BIN" bench --config config/gpu_device.toml --frames "$FRAMES" --json \
                >"$OUT/c_four_$i.json" 2>"$OUT/c_four_$i.log" &
            pids="$pids $!"
        done
        # Only the benches: a bare `wait` would wait for the memory sampler too.
        for pid in $pids; do wait "$pid"; done
        echo "c four processes: device memory.used peak +$(smi_stop "$OUT/c_four.smi" "$idle") MiB"
        for i in 1 2 3 4; do summary "c process $i of 4" <"$OUT/c_four_$i.json"; done
        python3 -c '
import json, sys
out = sys.argv[1]
rs = [json.load(open(out + "/c_four_%d.json" % i)) for i in (1, 2, 3, 4)]
one = json.load(open(out + "/c_one.json"))
one_fps, four = one["fps"], sum(r["fps"] for r in rs)
print("c total frames/s: one process of 4 cameras %.1f, four processes %.1f (sum of each, while all ran) -> %.2fx" % (one_fps, four, one_fps / four))
mem = [r["gpu_memory"]["run_mib"] for r in rs if r.get("gpu_memory")]
if mem and one.get("gpu_memory"):
    print("c cuMemGetInfo run memory: one process %.0f MiB; four processes %s MiB (device-wide, so overlapping runs count each other)" % (one["gpu_memory"]["run_mib"], [round(m) for m in mem]))
' "$OUT"
        ;;
    d)
        for r in $(seq 1 "$ROUNDS"); do
            for v in device device_fp16; do
                "$BIN" bench --config "config/gpu_$v.toml" --frames "$FRAMES" --json 2>"$OUT/d_${v}_$r.log" \
                    | tee "$OUT/d_${v}_$r.json" | summary "d round $r $v"
            done
        done
        timeout 500 "$BIN" evaluate --config config/gpu_device.toml --images samples/demo_clip \
            --candidate onnxruntime:cuda --candidate onnxruntime:cuda:fp16 \
            --report "$OUT/d_evaluation" --gate >"$OUT/d_evaluate.txt" 2>"$OUT/d_evaluate.log"
        echo "d evaluate exit $?"
        cat "$OUT/d_evaluate.txt"
        ;;
    e)
        for b in 1 4; do
            sed -e "s|^backend = .*|backend = \"onnxruntime\"\ndevice = \"cuda\"\npreprocess = \"cuda\"\nmax_batch = $b|" \
                -e "s|^results = .*|results = \"../results/gpu_cams_$b.jsonl\"|" config/demo-cameras.toml >"config/gpu_cams_$b.toml"
            rm -f "results/gpu_cams_$b.jsonl"
            timeout 300 "$BIN" run --config "config/gpu_cams_$b.toml" >"$OUT/e_run_$b.log" 2>&1
            echo "e max_batch $b: exit $?; $(grep -h 'batches' "$OUT/e_run_$b.log" | tail -1)"
        done
        python3 -c '
import json, sys
def load(path):
    rows = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["camera"], r["seq"])
        assert key not in rows, "two results for %s" % (key,)
        rows[key] = (r["verdict"], r["reason"])
    return rows
one, four = load("results/gpu_cams_1.jsonl"), load("results/gpu_cams_4.jsonl")
differ = [k for k in one if one[k] != four.get(k)]
print("e results: max_batch 1 %d, max_batch 4 %d, keys equal %s, verdicts differing %d" % (len(one), len(four), set(one) == set(four), len(differ)))
sys.exit(0 if set(one) == set(four) and not differ and one else 1)
'
        echo "e parity exit $?"
        rm -f config/gpu_cams_1.toml config/gpu_cams_4.toml
        ;;
    f)
        for models in one batch; do
            python3 - "$models" <<'PY'
import re, sys
models = sys.argv[1]
src = open("config/demo-cameras.toml").read()
cams = "".join('[cameras.cam%d]\nkind = "images"\nlocation = "../samples/demo_clip/frame_%%05d.jpg"\nframerate = 30\n' % i
               for i in range(1, 9))
body = src[src.index("[inference]"):]
body = body.replace('backend = "auto"', 'backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"\nmax_batch = 8')
if models == "one":
    body = body.replace("seg_batch.onnx", "seg.onnx").replace("cls_batch.onnx", "cls.onnx")
body = re.sub(r"^results = .*$", 'results = "../results/gpu_line8_%s.jsonl"' % models, body, flags=re.M)
open("config/gpu_line8_%s.toml" % models, "w").write(cams + body)
PY
            rm -f "results/gpu_line8_$models.jsonl"
            timeout 120 "$BIN" run --config "config/gpu_line8_$models.toml" >"$OUT/f_$models.log" 2>&1
            echo "f $models models: exit $?; $(grep -h 'batches' "$OUT/f_$models.log" | tail -1)"
            python3 - "$models" <<'PY'
import json, sys
models = sys.argv[1]
rows = [json.loads(line) for line in open("results/gpu_line8_%s.jsonl" % models)]
by = {}
for r in rows:
    if r.get("latency_ms"):
        by.setdefault(r["camera"], []).append(r["latency_ms"]["total"])
def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
every = [x for v in by.values() for x in v]
print("f %s models: %d results, p50/p99/max %.2f/%.2f/%.2f ms; per camera p99 %s" % (
    models, len(rows), q(every, .5), q(every, .99), max(every),
    " ".join("%s:%.2f" % (k, q(v, .99)) for k, v in sorted(by.items()))))
PY
            rm -f "config/gpu_line8_$models.toml"
        done
        ;;
    esac
done
rm -f config/gpu_device.toml config/gpu_device_batch.toml config/gpu_device_fp16.toml
