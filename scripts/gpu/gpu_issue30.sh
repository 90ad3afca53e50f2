#!/bin/sh
# Run by hand on a lent GPU, for docs/PERFORMANCE-gpu-pipeline.md ("Issue 30"); no make target.
# After `scripts/gpu/gpu_carry_ort.sh receive` carried sealcheck_base (the binary before the
# issue) and sealcheck (this tree), and for step `tests` also parity, gpu_parity and
# integration (test binaries built with --features cuda; `integration` holds model_swap's
# tests since issue 36). Every A/B runs the two binaries in turn.
#
#   ab     one camera, batch-1 models (`gpu_ab.sh`, FRAMES=1000, RUNS=5), then the mapped
#          path (zero_copy = true) of the new binary, 2 runs
#   cams   `gpu_cameras.sh b c f` for each binary, in turn, $ROUNDS rounds of b (8 cameras
#          as fast as they go, max_batch 1, 2, 4, 8, and batch-1 models), c (4 cameras in
#          one process against 4 processes) and f once (8 GStreamer cameras at 30 frames/s
#          through `sealcheck run`); and 8 cameras at max_batch 8 on the mapped path
#   line   `gpu_cameras.sh f` alone (8 GStreamer cameras at 30 frames/s through `sealcheck run`,
#          batch-1 and batch models), each of $BINS in turn, $ROUNDS rounds; with each run's
#          GPU spans and host frame spans (`frame spans on the host`) and its result lines
#   verify `gpu_verify_ort.sh a` (new binary): CPU, CUDA preprocessing, the full GPU path and
#          the mapped full GPU path, verdicts on all 300 clip frames
#   tests  parity (every clip frame; the page-locked and mapped slot cases at batch 1, 4, 8),
#          gpu_parity, model_swap's device-path swaps, `gpu_cameras.sh e`, the archive check
#
#   OUT=dir scripts/gpu/gpu_issue30.sh [ab] [cams] [line] [verify] [tests]
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
ROUNDS=${ROUNDS:-2}
B=/tmp/sealcheck-carry/bin
mkdir -p "$OUT"
eval "$(scripts/gpu/gpu_carry_ort.sh env)"
for step in ${*:-ab cams verify tests}; do
    case $step in
    ab)
        FRAMES=1000 RUNS=5 scripts/gpu/gpu_ab.sh sealcheck_base sealcheck 2>&1 | tee "$OUT/ab.txt"
        INFERENCE='zero_copy = true' FRAMES=1000 RUNS=2 scripts/gpu/gpu_ab.sh sealcheck 2>&1 \
            | sed 's/^/mapped /' | tee -a "$OUT/ab.txt"
        ;;
    cams)
        for r in $(seq 1 "$ROUNDS"); do
            for b in sealcheck_base sealcheck; do
                if [ "$r" = 1 ]; then steps="b c f"; else steps="b"; fi
                BIN=$B/$b OUT=$OUT/cams_${b}_$r FRAMES=1000 scripts/gpu/gpu_cameras.sh $steps 2>&1 \
                    | sed "s/^/$b r$r: /" | tee -a "$OUT/cams.txt"
            done
        done
        sed -e 's|^backend = .*|backend = "onnxruntime"\ndevice = "cuda"\npreprocess = "cuda"\nzero_copy = true|' \
            -e 's|seg.onnx|seg_batch.onnx|' -e 's|cls.onnx|cls_batch.onnx|' \
            -e 's|^results = .*|results = "../results/gpu_mapped8.jsonl"|' config/demo.toml >config/gpu_mapped8.toml
        "$B/sealcheck" bench --config config/gpu_mapped8.toml --cameras 8 --max-batch 8 --frames 500 --json \
            2>"$OUT/mapped8.log" | python3 scripts/bench/bench_line.py "mapped, 8 cameras, max_batch 8" | tee -a "$OUT/cams.txt"
        rm -f config/gpu_mapped8.toml
        grep -h "GPU time per batch" "$OUT"/cams_sealcheck_*/*.log "$OUT/mapped8.log" >"$OUT/spans.txt" 2>/dev/null
        ;;
    line)
        for r in $(seq 1 "$ROUNDS"); do
            for b in ${BINS:-sealcheck_base sealcheck}; do
                d=$OUT/line_${b}_$r
                mkdir -p "$d"
                BIN=$B/$b OUT=$d scripts/gpu/gpu_cameras.sh f 2>&1 | sed "s/^/$b r$r: /" | tee -a "$OUT/line.txt"
                grep -h "frame spans on the host\|GPU time per batch" "$d"/*.log | sed "s/^/$b r$r: /" >>"$OUT/line.txt"
                cp results/gpu_line8_*.jsonl "$d/"
            done
        done
        ;;
    verify)
        OUT=$OUT/verify scripts/gpu/gpu_verify_ort.sh a
        cat "$OUT/verify/a_compare.txt"
        ;;
    tests)
        # model_swap finds the tree where it was built and the binary under target/ci.
        mkdir -p /work target/ci && ln -sfn "$PWD" /work/main && ln -sf "$B/sealcheck" target/ci/sealcheck
        OUT=$OUT/verify scripts/gpu/gpu_verify_ort.sh b
        grep -E "^(ok|FAILED|FAIL|SKIPPED)|exit" "$OUT/verify/b_parity.log"
        timeout 120 "$B/gpu_parity" >"$OUT/gpu_parity.log" 2>&1; echo "gpu_parity exit $?"
        tail -4 "$OUT/gpu_parity.log"
        SEALCHECK_BIN=$B/sealcheck timeout 240 "$B/integration" --test-threads=1 model_swap::device_path >"$OUT/model_swap.log" 2>&1
        echo "model_swap exit $?"; grep -E "^test |test result|SKIPPED" "$OUT/model_swap.log"
        BIN=$B/sealcheck OUT=$OUT/cams_e scripts/gpu/gpu_cameras.sh e 2>&1 | tee "$OUT/e.txt"
        OUT=$OUT/archive scripts/gpu/gpu_archive_check.sh 2>&1 | tee "$OUT/archive.txt"
        ;;
    esac
done
