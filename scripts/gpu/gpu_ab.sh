#!/usr/bin/env bash
# A/B of sealcheck binaries on a lent GPU (docs/PERFORMANCE-gpu-pipeline.md runs it; no make
# target): `sealcheck bench` on the full GPU path, each binary in turn, RUNS rounds, after
# `scripts/gpu/gpu_carry_ort.sh receive` carried the binaries (e.g. sealcheck_base and sealcheck).
#
#   scripts/gpu/gpu_ab.sh [BINARY...]             (default: sealcheck_base sealcheck)
#       frames/s and GPU ms p50 (preprocess/segment/classify) of each binary, RUNS rounds
#       (default 3) of FRAMES frames (default 10000); EXTRA, when set, is added under
#       [inference.onnxruntime] (an A/B of one setting); INFERENCE, when set, is added
#       under [inference] (e.g. INFERENCE='zero_copy = true').
#   THREADS=1 scripts/gpu/gpu_ab.sh [BINARY...]
#       the same runs (default 2 rounds of 4000 frames), sampling each thread's CPU time
#       (/proc/PID/task/*/stat, every 50 ms) and printing it per run, name/tid with its
#       CPU ms, the 12 busiest (what scripts/gpu_threads.sh did before).
set -u
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-0}
if [ "$THREADS" = 1 ]; then FRAMES=${FRAMES:-4000}; RUNS=${RUNS:-2}; else FRAMES=${FRAMES:-10000}; RUNS=${RUNS:-3}; fi
LOGS=$(mktemp -d)
BIN=/tmp/sealcheck-carry/bin
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(sealcheck_base sealcheck)
mkdir -p results
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
sed -e 's|^backend = .*|backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"|' \
    -e 's|^results = .*|results = "../results/gpu_ab.jsonl"|' config/demo.toml >config/gpu_ab.toml
[ -n "${INFERENCE:-}" ] && sed -i "s|^preprocess = .*|&\n$INFERENCE|" config/gpu_ab.toml
[ -n "${EXTRA:-}" ] && printf '\n[inference.onnxruntime]\n%s\n' "$EXTRA" >>config/gpu_ab.toml
tck=$(getconf CLK_TCK)

threads() { # bench of binary $1 in the background, its threads' CPU time sampled; round $2
    local b=$1 round=$2 start pid wall k line name rest
    start=$(date +%s%N)
    "$BIN/$b" bench --config config/gpu_ab.toml --frames "$FRAMES" >"$LOGS/thr_$b.log" 2>&1 &
    pid=$!
    declare -A last=()
    while kill -0 $pid 2>/dev/null; do
        for t in /proc/$pid/task/*; do
            read -r line <"$t/stat" 2>/dev/null || continue
            name=$(cat "$t/comm" 2>/dev/null) || continue
            rest=${line#*) }; set -- $rest
            last[$name/${t##*/}]=$(( ${12} + ${13} ))
        done
        sleep 0.05
    done
    wait $pid
    wall=$(( ($(date +%s%N) - start) / 1000000 ))
    cat "$LOGS/thr_$b.log" >>"$LOGS/ab_$b.log"
    echo "== $b round $round: $(grep '^throughput' "$LOGS/thr_$b.log"), wall ${wall} ms"
    for k in "${!last[@]}"; do printf '%-16s %6d ms\n' "$k" $(( ${last[$k]} * 1000 / tck )); done | sort -k2 -n -r | head -12
}

for r in $(seq 1 "$RUNS"); do
    for b in "${BINS[@]}"; do
        if [ "$THREADS" = 1 ]; then
            threads "$b" "$r"
        else
            timeout 100 "$BIN/$b" bench --config config/gpu_ab.toml --frames "$FRAMES" >>"$LOGS/ab_$b.log" 2>&1
        fi
    done
done
for b in "${BINS[@]}"; do
    echo "${EXTRA:-defaults} $b: frames/s $(grep -h '^throughput' "$LOGS/ab_$b.log" | awk '{print $2}' | tr '\n' ' ')"
    echo "${EXTRA:-defaults} $b: GPU ms p50 pre/seg/cls $(grep -hE '^  (preprocess|segment|classify) ' "$LOGS/ab_$b.log" | awk '{print $2}' | paste -sd' ')"
    # The device thread's span line (binaries from issue 30 on), one per run.
    grep -h "GPU time per batch" "$LOGS/ab_$b.log" | sed -e 's/.*spans="\{0,1\}//' -e 's/"\{0,1\} *$//' -e "s/^/$b spans: /"
done
rm -rf config/gpu_ab.toml "$LOGS"
