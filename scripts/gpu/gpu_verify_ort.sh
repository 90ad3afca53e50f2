#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-pipeline.md; tests/pipeline.rs names its step a.
# On a lent GPU machine, after scripts/gpu/gpu_carry_ort.sh has joined ONNX
# Runtime's CUDA build there: checks and measures sealcheck's GPU paths,
# writing logs under $OUT (default ./gpu-out).
#
#   a  `sealcheck run` on the sample clip, preprocess = "cpu" vs "cuda"
#      (ONNX Runtime CPU inference): same verdict on every frame (issue 4);
#      and the full GPU path as shipped (ONNX Runtime CUDA, CUDA graphs, two
#      frames in flight) against the same CPU run, and the same with
#      zero_copy = true (mapped ring slots read in place: the Jetson's path);
#      each run's log must say "model opened" once per model
#   b  tests/parity.rs: every inference path the machine has (ONNX Runtime CPU,
#      CUDA host, CUDA device path) vs tract, on every clip frame
#   c  `sealcheck bench --frames $FRAMES`, 3 runs each: the full GPU path
#      (onnxruntime cuda + preprocess cuda, one stream), ONNX Runtime CUDA with
#      CPU preprocessing (host tensors), ONNX Runtime CPU; and the two Python
#      peers on the same GPU (OpenCV + onnxruntime-gpu with host copies;
#      PyTorch on the GPU + IO binding)
#   d  the full GPU path with frames_in_flight = 1 and = 2, and the PyTorch
#      peer, in turn, $RUNS times (what keeping two frames on the stream gives)
#   e  [inference.onnxruntime] cuda_graph and cuda_prefer_nhwc: parity with
#      both on, then the full GPU path plain / graph / nhwc / both, in turn
#
#   scripts/gpu/gpu_verify_ort.sh [a] [b] [c] [d] [e]     (default: all)
# Binaries (sealcheck, parity) come from /tmp/sealcheck-carry/bin, where
# `gpu_carry_ort.sh receive` unpacks them; built here with
#   cargo build --release --features cuda --bin sealcheck --test parity
# (the test binary copied to the plain name `parity` before `gpu_carry_ort.sh prepare`)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
FRAMES=${FRAMES:-1000}
RUNS=${RUNS:-3}
BIN=${BIN:-/tmp/sealcheck-carry/bin}
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT" results
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
steps=${*:-a b c d e}

config() { # name backend device preprocess -> config/gpu_<name>.toml
    sed -e "s|^backend = .*|backend = \"$2\"\ndevice = \"$3\"\npreprocess = \"$4\"|" \
        -e "s|^results = .*|results = \"../results/gpu_$1.jsonl\"|" config/demo.toml >"config/gpu_$1.toml"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc
    $PY -c 'import torch, onnxruntime as o; print("torch", torch.__version__, "onnxruntime", o.__version__, o.get_available_providers())'
    ldd "$BIN/sealcheck" | grep "not found" || echo "ldd: all libraries found"
} >"$OUT/machine.txt" 2>&1

for step in $steps; do
    case $step in
    a)
        config pre_cpu onnxruntime cpu cpu
        config pre_cuda onnxruntime cpu cuda
        config full_gpu onnxruntime cuda cuda
        config full_gpu_mapped onnxruntime cuda cuda
        sed -i 's|^preprocess = .*|&\nzero_copy = true|' config/gpu_full_gpu_mapped.toml
        for v in pre_cpu pre_cuda full_gpu full_gpu_mapped; do
            rm -f "results/gpu_$v.jsonl"
            timeout 200 "$BIN/sealcheck" run --config "config/gpu_$v.toml" >"$OUT/a_$v.log" 2>&1
            echo "exit $?" >>"$OUT/a_$v.log"
        done
        # Each model opened once per run (issue 11), the device path included.
        for v in pre_cpu pre_cuda full_gpu full_gpu_mapped; do
            echo "$v: \"model opened\" lines: $(grep -c 'model opened' "$OUT/a_$v.log") (2 expected)" >>"$OUT/a_compare.txt"
        done
        for other in pre_cuda full_gpu full_gpu_mapped; do
            $PY - results/gpu_pre_cpu.jsonl "results/gpu_$other.jsonl" "$other" >>"$OUT/a_compare.txt" 2>&1 <<'EOF'
import json, sys
def load(p):
    return {r.get("seq"): r for r in map(json.loads, open(p))}
cpu, other = load(sys.argv[1]), load(sys.argv[2])
diff = [s for s in cpu if cpu[s].get("verdict") != other.get(s, {}).get("verdict")]
print(f"{sys.argv[3]}: frames: cpu {len(cpu)}, {sys.argv[3]} {len(other)}; verdicts differ on {len(diff)}: {diff[:20]}")
print("SAME VERDICTS ON EVERY FRAME" if cpu and len(cpu) == len(other) and not diff else "MISMATCH")
EOF
        done
        ;;
    b)
        SEALCHECK_PARITY_STRIDE=1 timeout 500 "$BIN/parity" >"$OUT/b_parity.log" 2>&1
        echo "exit $?" >>"$OUT/b_parity.log"
        ;;
    c)
        config bench_gpu onnxruntime cuda cuda
        config bench_ortcuda_host onnxruntime cuda cpu
        config bench_ortcpu onnxruntime cpu cpu
        for r in $(seq 1 "$RUNS"); do
            for v in bench_gpu bench_ortcuda_host bench_ortcpu; do
                timeout 200 "$BIN/sealcheck" bench --config "config/gpu_$v.toml" --frames "$FRAMES" >>"$OUT/c_$v.log" 2>&1
            done
            timeout 200 $PY scripts/bench/peer_pipeline.py --device cuda --frames "$FRAMES" --json >>"$OUT/c_peer_cuda.log" 2>&1
            timeout 200 $PY scripts/bench/peer_pipeline_torch.py --frames "$FRAMES" --json >>"$OUT/c_peer_torch.log" 2>&1
        done
        ;;
    d)
        config bench_gpu_1 onnxruntime cuda cuda
        config bench_gpu_2 onnxruntime cuda cuda
        sed -i 's|^preprocess = .*|&\nframes_in_flight = 1|' config/gpu_bench_gpu_1.toml
        sed -i 's|^preprocess = .*|&\nframes_in_flight = 2|' config/gpu_bench_gpu_2.toml
        for r in $(seq 1 "$RUNS"); do
            for v in bench_gpu_1 bench_gpu_2; do
                timeout 200 "$BIN/sealcheck" bench --config "config/gpu_$v.toml" --frames "$FRAMES" >>"$OUT/d_$v.log" 2>&1
            done
            timeout 200 $PY scripts/bench/peer_pipeline_torch.py --frames "$FRAMES" --json >>"$OUT/d_peer_torch.log" 2>&1
        done
        ;;
    e)
        for v in plain graph nhwc both; do config "e_$v" onnxruntime cuda cuda; done
        # Each variant names both settings: the shipped defaults change.
        printf '\n[inference.onnxruntime]\ncuda_graph = false\ncuda_prefer_nhwc = false\n' >>config/gpu_e_plain.toml
        printf '\n[inference.onnxruntime]\ncuda_graph = true\ncuda_prefer_nhwc = false\n' >>config/gpu_e_graph.toml
        printf '\n[inference.onnxruntime]\ncuda_graph = false\ncuda_prefer_nhwc = true\n' >>config/gpu_e_nhwc.toml
        printf '\n[inference.onnxruntime]\ncuda_graph = true\ncuda_prefer_nhwc = true\n' >>config/gpu_e_both.toml
        cp config/demo.toml config/demo.toml.orig
        printf '\n[inference.onnxruntime]\ncuda_graph = true\ncuda_prefer_nhwc = true\n' >>config/demo.toml
        SEALCHECK_PARITY_STRIDE=1 timeout 500 "$BIN/parity" >"$OUT/e_parity_graph_nhwc.log" 2>&1
        echo "exit $?" >>"$OUT/e_parity_graph_nhwc.log"
        mv config/demo.toml.orig config/demo.toml
        for r in $(seq 1 "$RUNS"); do
            for v in plain graph nhwc both; do
                timeout 200 "$BIN/sealcheck" bench --config "config/gpu_e_$v.toml" --frames "$FRAMES" >>"$OUT/e_$v.log" 2>&1
            done
        done
        ;;
    esac
done
rm -f config/gpu_*.toml
