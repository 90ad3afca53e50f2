#!/usr/bin/env bash
# Run by: `make demo-assets`; models/README.md.
# Regenerates every sealcheck demo asset: training data -> train -> ONNX export + check ->
# held-out evaluation -> demo clip -> INT8 -> dynamic-batch + FP16 versions.
# Needs python3 with scripts/demo/requirements-demo.txt.
# A CUDA GPU is used for training when torch sees one (CPU works, but takes hours).
#
#   bash scripts/demo/make_demo_assets.sh            # writes models/ and samples/demo_clip/
#
# Override with env vars: TRAIN_SEED TRAIN_COUNT TORCH_SEED EVAL_SEED EVAL_COUNT CLIP_SEED
# WORK (scratch dir) MODELS (model dir) CLIP (clip dir) TRAIN_ARGS (extra train.py flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
TRAIN_SEED=${TRAIN_SEED:-1001}      # training frames (never used for evaluation or the clip)
TRAIN_COUNT=${TRAIN_COUNT:-3000}
TORCH_SEED=${TORCH_SEED:-1234}      # weight init + batch sampling
EVAL_SEED=${EVAL_SEED:-2002}        # held-out evaluation frames
EVAL_COUNT=${EVAL_COUNT:-1000}
CLIP_SEED=${CLIP_SEED:-4004}        # samples/demo_clip
WORK=${WORK:-/tmp/sealcheck-demo}
MODELS=${MODELS:-models}
CLIP=${CLIP:-samples/demo_clip}
start=$SECONDS
echo "[assets] $(date -u +%FT%TZ) train seed $TRAIN_SEED x$TRAIN_COUNT, torch seed $TORCH_SEED, eval seed $EVAL_SEED x$EVAL_COUNT, clip seed $CLIP_SEED"
rm -rf "$WORK/train"
python3 scripts/demo/gen_seals.py --seed "$TRAIN_SEED" --count "$TRAIN_COUNT" --out "$WORK/train" --defect-rate 0.5
echo "[assets] generated in $((SECONDS - start))s"
python3 scripts/demo/train.py --data "$WORK/train" --out "$MODELS" --seed "$TORCH_SEED" ${TRAIN_ARGS:-}
echo "[assets] trained+exported at $((SECONDS - start))s"
rc=0
python3 scripts/demo/evaluate.py --seed "$EVAL_SEED" --count "$EVAL_COUNT" --models "$MODELS" \
  --json "$MODELS/eval_seed${EVAL_SEED}.json" || rc=$?
echo "[assets] evaluated at $((SECONDS - start))s (rc $rc)"
python3 scripts/demo/make_clip.py --seed "$CLIP_SEED" --count 300 --out "$CLIP"
# reference per-frame outputs for the clip (what the Rust pipeline should reproduce)
python3 scripts/demo/evaluate.py --frames "$CLIP" --models "$MODELS" --per-frame "$CLIP/expected.jsonl" || true
# INT8 (QDQ) models, calibrated on tensors from sealcheck's own preprocessing of frames of a
# seed used nowhere else: the ranges the line will see, not a re-implementation's.
CALIB_SEED=${CALIB_SEED:-5005}
SEALCHECK=${SEALCHECK:-target/release/sealcheck}
rm -rf "$WORK/calib" "$WORK/calib_dump"
python3 scripts/demo/gen_seals.py --seed "$CALIB_SEED" --count 96 --out "$WORK/calib" --no-masks
models_abs=$(cd "$MODELS" && pwd)
sed -e "s|^backend = .*|backend = \"onnxruntime\"|" -e "s|\"\.\./models/|\"$models_abs/|" \
    -e "s|\"\.\./|\"$PWD/|" config/demo.toml >"$WORK/calib.toml"
"$SEALCHECK" inspect --config "$WORK/calib.toml" --dump "$WORK/calib_dump" "$WORK"/calib/*.jpg >/dev/null
python3 scripts/demo/quantize_int8.py --dumps "$WORK/calib_dump" --models "$MODELS"
echo "[assets] INT8 models at $((SECONDS - start))s"
# Dynamic-batch (seg_batch, cls_batch) and FP16 (X_fp16 beside each X) versions, converted from the
# FP32 files with onnx alone: deterministic, byte-for-byte (tests/demo_assets_batch.rs checks).
# `--check` compares them on onnxruntime (models/README.md has the numbers).
python3 scripts/demo/export_batch_fp16.py --models "$MODELS"
echo "[assets] batch + FP16 models at $((SECONDS - start))s"
echo "[assets] done in $((SECONDS - start))s $(date -u +%FT%TZ)"
exit $rc
