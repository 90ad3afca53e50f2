#!/usr/bin/env python3
# Run by hand and by scripts/gpu/gpu_verify_ort.sh (step c), for docs/PERFORMANCE.md.
"""The Python peer: the straightforward pipeline users run today, for comparison.

Per frame, one after another: decode (outside the timed loop: frames come from
memory, as in `sealcheck bench`), OpenCV/NumPy preprocessing following the
contract in models/README.md, onnxruntime segmentation, argmax mask, mask resize,
onnxruntime classification, softmax, threshold. Same ONNX Runtime version and
thread count as sealcheck's run it is compared with.

    python3 scripts/bench/peer_pipeline.py --frames 300 --threads 2
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

import cv2
import numpy as np
import onnxruntime as ort

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


def resize_chw(rgb_u8, h, w):
    # cv2.INTER_LINEAR on float32 = bilinear with half-pixel centers, no antialias
    # (what F.interpolate(align_corners=False) computes).
    return cv2.resize(rgb_u8.astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR).transpose(2, 0, 1)


def session(path, threads, device):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(path, opts, providers=providers)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * len(values) + 0.5)) - 1))]


def main():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--clip", default=os.path.join(root, "samples/demo_clip"))
    ap.add_argument("--seg", default=os.path.join(root, "models/seg.onnx"))
    ap.add_argument("--cls", default=os.path.join(root, "models/cls.onnx"))
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    files = sorted(glob.glob(os.path.join(args.clip, "frame_*.jpg")))
    if not files:
        sys.exit(f"no frames in {args.clip}")
    frames = [cv2.cvtColor(cv2.imread(f), cv2.COLOR_BGR2RGB) for f in files]
    seg, cls = session(args.seg, args.threads, args.device), session(args.cls, args.threads, args.device)
    seg_in, cls_in = seg.get_inputs()[0], cls.get_inputs()[0]
    _, _, sh, sw = seg_in.shape
    _, _, ch, cw = cls_in.shape

    stages = {"preprocess": [], "segment": [], "classify": [], "total": []}
    fails = 0
    started = None
    for i in range(args.warmup + args.frames):
        if i == args.warmup:
            started = time.perf_counter()
        frame = frames[i % len(frames)]
        t0 = time.perf_counter()
        x = ((resize_chw(frame, sh, sw) / 255.0 - MEAN) / STD)[None].astype(np.float32)
        rgb = (resize_chw(frame, ch, cw) / 255.0 - MEAN) / STD
        t1 = time.perf_counter()
        logits = seg.run(None, {seg_in.name: x})[0]
        mask = (logits[0].argmax(0) == 1).astype(np.float32)
        m = cv2.resize(mask, (cw, ch), interpolation=cv2.INTER_LINEAR)[None]
        y = np.concatenate([rgb, m], 0)[None].astype(np.float32)
        t2 = time.perf_counter()
        out = cls.run(None, {cls_in.name: y})[0][0].astype(np.float64)
        p = np.exp(out - out.max())
        p = p[1] / p.sum()
        area = mask.mean()
        if i >= args.warmup:
            fails += bool(p >= args.threshold or area < 0.005)
        t3 = time.perf_counter()
        if i >= args.warmup:
            for k, v in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
                stages[k].append(v * 1e3)
    elapsed = time.perf_counter() - started
    report = {
        "peer": "python (OpenCV/NumPy + onnxruntime %s, %s, %d threads)" % (ort.__version__, args.device, args.threads),
        "frames": args.frames,
        "fps": args.frames / elapsed,
        "fails": fails,
        "latency_ms": {k: {"p50": percentile(v, 0.5), "p95": percentile(v, 0.95), "p99": percentile(v, 0.99)} for k, v in stages.items()},
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['peer']}: {args.frames} frames, {report['fps']:.2f} frames/s")
        for k, v in report["latency_ms"].items():
            print(f"  {k:<11} p50 {v['p50']:8.2f}  p95 {v['p95']:8.2f}  p99 {v['p99']:8.2f} ms")


if __name__ == "__main__":
    main()
