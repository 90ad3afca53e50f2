#!/bin/sh
# On a lent GPU, after `scripts/gpu_carry_ort.sh receive` (binaries sealcheck_base and
# sealcheck carried): `sealcheck bench` on the full GPU path, each binary in turn, RUNS
# rounds; EXTRA, when set, is added under [inference.onnxruntime] (an A/B of one setting).
set -u
cd "$(dirname "$0")/.."
LOGS=$(mktemp -d); FRAMES=${FRAMES:-10000}; RUNS=${RUNS:-3}
BIN=/tmp/sealcheck-carry/bin
mkdir -p results
eval "$(scripts/gpu_carry_ort.sh env)"
sed -e 's|^backend = .*|backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"|' \
    -e 's|^results = .*|results = "../results/gpu_ab.jsonl"|' config/demo.toml >config/gpu_ab.toml
[ -n "${EXTRA:-}" ] && printf '\n[inference.onnxruntime]\n%s\n' "$EXTRA" >>config/gpu_ab.toml
for r in $(seq 1 "$RUNS"); do
    for b in sealcheck_base sealcheck; do
        timeout 100 "$BIN/$b" bench --config config/gpu_ab.toml --frames "$FRAMES" >>"$LOGS/ab_$b.log" 2>&1
    done
done
for b in sealcheck_base sealcheck; do
    echo "${EXTRA:-defaults} $b: frames/s $(grep -h '^throughput' "$LOGS/ab_$b.log" | awk '{print $2}' | tr '\n' ' ')"
    echo "${EXTRA:-defaults} $b: GPU ms p50 pre/seg/cls $(grep -hE '^  (preprocess|segment|classify) ' "$LOGS/ab_$b.log" | awk '{print $2}' | paste -sd' ')"
done
rm -rf config/gpu_ab.toml "$LOGS"
