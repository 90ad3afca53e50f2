#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-pipeline.md; no make target.
# On a lent GPU, after `scripts/gpu/gpu_carry_ort.sh receive`: the archive on the GPU device path.
# `sealcheck run` on the clip with [archive] keep = "fail" on the host path (ONNX Runtime CPU)
# and the device path (ONNX Runtime CUDA + CUDA preprocessing); counts, and masks compared by seq.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-archive}; mkdir -p "$OUT"
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
B=/tmp/sealcheck-carry/bin
mkdir -p results
for v in host device; do
  case $v in
    host) be='backend = "onnxruntime"\ndevice = "cpu"\npreprocess = "cpu"' ;;
    device) be='backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"' ;;
  esac
  rm -rf /tmp/arch_$v results/arch_$v.jsonl
  sed -e "s|^backend = .*|$be|" -e "s|^results = .*|results = \"../results/arch_$v.jsonl\"|" config/demo.toml >config/arch_$v.toml
  printf '\n[archive]\ndir = "/tmp/arch_%s"\nkeep = "fail"\nformat = "png"\n' $v >>config/arch_$v.toml
  timeout 200 $B/sealcheck run --config config/arch_$v.toml >$OUT/arch_$v.log 2>&1
  echo "$v: exit $?; results $(wc -l <results/arch_$v.jsonl); fails $(grep -c '"verdict":"fail"' results/arch_$v.jsonl); frames $(find /tmp/arch_$v -name '*.png' ! -name '*_mask.png' | wc -l); masks $(find /tmp/arch_$v -name '*_mask.png' | wc -l)"
  grep -E "level=(warn|error)" $OUT/arch_$v.log | head -5
  (cd /tmp/arch_$v && find . -name '*_mask.png' | while read f; do seq=$(basename $f | cut -d_ -f2); echo "$seq $(sha256sum <$f | cut -c1-16)"; done | sort -n) >/tmp/masks_$v.txt
done
echo "masks identical by seq: $(join /tmp/masks_host.txt /tmp/masks_device.txt | awk '$2==$3' | wc -l) of $(wc -l </tmp/masks_host.txt)"
join /tmp/masks_host.txt /tmp/masks_device.txt | awk '$2!=$3 {print "differs: seq " $1}' | head -5
rm -f config/arch_*.toml
