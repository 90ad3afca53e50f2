#!/bin/bash
# CPU time per thread over `sealcheck bench` on the full GPU path, for each binary named.
# Prints each thread (name/tid) with its CPU ms; run after gpu_carry_ort.sh receive:
#   scripts/gpu_threads.sh sealcheck_base sealcheck
set -u
cd "$(dirname "$0")/.."
eval "$(scripts/gpu_carry_ort.sh env)"
BIN=/tmp/sealcheck-carry/bin
mkdir -p results
sed -e 's|^backend = .*|backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"|' \
    -e 's|^results = .*|results = "../results/gpu_thr.jsonl"|' config/demo.toml >config/gpu_thr.toml
tck=$(getconf CLK_TCK)
BINS=("$@")
for round in 1 2; do
for b in "${BINS[@]}"; do
  start=$(date +%s%N)
  "$BIN/$b" bench --config config/gpu_thr.toml --frames ${FRAMES:-4000} >/tmp/thr_$b.log 2>&1 &
  pid=$!
  declare -A last=()
  while kill -0 $pid 2>/dev/null; do
    for t in /proc/$pid/task/*; do
      read -r line < $t/stat 2>/dev/null || continue
      name=$(cat $t/comm 2>/dev/null) || continue
      rest=${line#*) }; set -- $rest
      last[$name/${t##*/}]=$(( ${12} + ${13} ))
    done
    sleep 0.05
  done
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "== $b round $round: $(grep '^throughput' /tmp/thr_$b.log), wall ${wall} ms"
  for k in "${!last[@]}"; do printf '%-16s %6d ms\n' "$k" $(( ${last[$k]} * 1000 / tck )); done | sort -k2 -n -r | head -12
  unset last
done
done
rm -f config/gpu_thr.toml
