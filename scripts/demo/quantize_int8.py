#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`); docs/PERFORMANCE.md, models/README.md.
"""INT8 (QDQ) versions of the sealcheck models, calibrated on sealcheck's own preprocessing.

  python3 scripts/demo/quantize_int8.py --dumps DIR [--models models] [--out models]

DIR holds what `sealcheck inspect --dump DIR IMAGE...` writes: one folder per image with
`seg_input.npy` (1x3x640x640) and `cls_input.npy` (1x4x224x512, RGB + the FP32 seal mask).
Those are the exact tensors the Rust pipeline feeds the models (the same path TensorRT's INT8
calibrator takes), so the calibration ranges match the line, not a Python re-implementation.

Writes `seg_int8.onnx` and `cls_int8.onnx` (ONNX Runtime static quantization, QDQ format:
per-channel symmetric INT8 weights, INT8 activations, float32 inputs and outputs, so the IO
contract is unchanged) and `int8_summary.json` (versions, settings, calibration frames).
Needs numpy, onnx and onnxruntime (scripts/requirements.txt).
"""
import argparse
import glob
import hashlib
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

MODELS = {  # file stem -> the dump tensor that is its input
    "seg": "seg_input.npy",
    "cls": "cls_input.npy",
}


class DumpReader(CalibrationDataReader):
    """Feeds the dumped input tensor of every calibration frame, in folder order."""

    def __init__(self, folders, tensor, input_name):
        self.paths = [os.path.join(d, tensor) for d in folders]
        self.input_name = input_name
        self.next = 0

    def get_next(self):
        if self.next >= len(self.paths):
            return None
        x = np.load(self.paths[self.next]).astype(np.float32, copy=False)
        self.next += 1
        return {self.input_name: x}

    def rewind(self):
        self.next = 0


def sha256_12(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dumps", required=True, help="folder written by `sealcheck inspect --dump`")
    ap.add_argument("--models", default="models", help="folder with seg.onnx and cls.onnx (FP32)")
    ap.add_argument("--out", default=None, help="where the INT8 models go (default: --models)")
    ap.add_argument("--method", choices=["minmax", "entropy", "percentile"], default="minmax")
    a = ap.parse_args()
    out = a.out or a.models
    os.makedirs(out, exist_ok=True)

    folders = sorted(d for d in glob.glob(os.path.join(a.dumps, "*")) if os.path.isdir(d))
    missing = [d for d in folders for t in MODELS.values() if not os.path.exists(os.path.join(d, t))]
    if not folders or missing:
        sys.exit(f"quantize_int8: {a.dumps} must hold one folder per calibration image with "
                 f"{' and '.join(MODELS.values())} (run `sealcheck inspect --dump {a.dumps} IMAGE...`); "
                 f"found {len(folders)} folders, {len(missing)} tensors missing")
    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[a.method]
    summary = {"onnxruntime": ort.__version__, "onnx": onnx.__version__, "format": "QDQ",
               "weights": "int8 per-channel symmetric", "activations": "int8",
               "calibration_method": a.method, "calibration_frames": len(folders), "models": {}}
    for stem, tensor in MODELS.items():
        src = os.path.join(a.models, f"{stem}.onnx")
        dst = os.path.join(out, f"{stem}_int8.onnx")
        pre = dst + ".pre.onnx"
        # Shape inference + graph cleanup first, as ONNX Runtime's quantization guide advises.
        quant_pre_process(src, pre, skip_symbolic_shape=True)
        input_name = onnx.load(pre, load_external_data=False).graph.input[0].name
        reader = DumpReader(folders, tensor, input_name)
        quantize_static(pre, dst, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=method,
                        extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
        os.remove(pre)
        onnx.checker.check_model(dst)
        summary["models"][stem] = {"fp32": os.path.basename(src), "fp32_sha256_12": sha256_12(src),
                                   "int8": os.path.basename(dst), "int8_sha256_12": sha256_12(dst),
                                   "bytes": os.path.getsize(dst)}
        print(f"quantize_int8: {src} -> {dst} ({os.path.getsize(dst)} bytes, {len(folders)} calibration frames)",
              file=sys.stderr)
    with open(os.path.join(out, "int8_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
