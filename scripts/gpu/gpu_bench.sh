#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-preprocess.md (benches/gpu_preprocess.rs).
# Kernel benchmark and its PyTorch peer, on the same GPU in the same run.
#
#   scripts/gpu/gpu_bench.sh [BENCH_BINARY] [OUT_DIR]
#
# BENCH_BINARY defaults to the one `cargo bench --features cuda --no-run`
# built (target/release/deps/gpu_preprocess-*); OUT_DIR to results/gpu_bench.
# Writes kernels.json/.txt (ours), torch.json/.txt (PyTorch, with the side by
# side table and the check of our output against F.interpolate).
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-}
if [ -z "$BIN" ]; then
    BIN=$(ls -t target/release/deps/gpu_preprocess-* 2>/dev/null | grep -v '\.d$' | head -n 1 || true)
fi
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
    echo "no benchmark binary: build it with 'cargo bench --features cuda --no-run' or pass its path" >&2
    exit 2
fi
OUT=${2:-results/gpu_bench}
RUNS=${RUNS:-300}
WARMUP=${WARMUP:-30}
DUMP=$(mktemp -d)
trap 'rm -rf "$DUMP"' EXIT
mkdir -p "$OUT"
"$BIN" --runs "$RUNS" --warmup "$WARMUP" --out "$OUT/kernels.json" --dump "$DUMP" | tee "$OUT/kernels.txt"
PYTHONUNBUFFERED=1 ${PYTHON:-python3} scripts/gpu/gpu_bench_torch.py --runs "$RUNS" --warmup "$WARMUP" \
    --ours "$OUT/kernels.json" --dump "$DUMP" --out "$OUT/torch.json" | tee "$OUT/torch.txt"
