#!/bin/sh
# Issue 29's figures (docs/PERFORMANCE.md "Parts", docs/PERFORMANCE-gpu-pipeline.md "Issue 29"):
# `sealcheck bench --trigger plc` on a live 640x480 test camera at 30 frames/s, parts
# triggered through the Modbus server by the bench's PLC (polling every 1 ms).
#
#   PATH_KIND=cpu|gpu RATE=10 PARTS=300 BIN=target/release/sealcheck scripts/bench/parts_bench.sh
#
# cpu: ONNX Runtime on the CPU, 2 threads (the 2-core goal: trigger -> ResultsValid p99 <= 60 ms
# at 10 parts/s). gpu: the full GPU path (ONNX Runtime CUDA, CUDA preprocessing; the H100 goal:
# frame -> ResultsValid p99 <= 3 ms at 30 parts/s).
set -eu
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/sealcheck}
PATH_KIND=${PATH_KIND:-cpu}
RATE=${RATE:-10}
PARTS=${PARTS:-300}
WARMUP=${WARMUP:-20}
conf=$(mktemp --suffix=.toml)
trap 'rm -f "$conf"' EXIT
case $PATH_KIND in
cpu) inference='backend = "onnxruntime"
threads = 2' ;;
gpu) inference='backend = "onnxruntime"
device = "cuda"
preprocess = "cuda"' ;;
*) echo "PATH_KIND must be cpu or gpu" >&2; exit 2 ;;
esac
cat >"$conf" <<CONF
[source]
kind = "pipeline"
pipeline = "videotestsrc is-live=true pattern=ball ! video/x-raw,width=640,height=480,framerate=30/1 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink"

[inference]
$inference

[models.segmentation]
path = "$PWD/models/seg.onnx"

[models.classifier]
path = "$PWD/models/cls.onnx"

[output]
results = "/tmp/parts-bench-unused.jsonl"

[logging]
level = "warn"

[trigger]
mode = "plc"
CONF
"$BIN" bench --config "$conf" --trigger plc --rate "$RATE" --frames "$PARTS" --warmup "$WARMUP"
