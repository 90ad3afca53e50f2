#!/usr/bin/env python3
# Run by: scripts/gpu/gpu_verify_ort.sh (steps c, d), for docs/PERFORMANCE-gpu-pipeline.md.
"""The best a Python user could do on a GPU: PyTorch preprocessing on the GPU
and onnxruntime-gpu with IO binding on device tensors (no host copies of the
tensors), for comparison with sealcheck's one-stream device path.

Per frame, one after another: the decoded RGB frame (frames come from memory,
as in `sealcheck bench`) is uploaded from pinned memory, resized and
normalized with `F.interpolate` (bilinear, align_corners=False = half-pixel
centers, the contract in models/README.md), segmentation through IO binding,
argmax mask and its resize, `torch.cat` with the RGB tensor, classification
through IO binding, softmax and threshold. Only the two classifier
probabilities and the mask area come back to the host.

    python3 scripts/bench/peer_pipeline_torch.py --frames 1000
"""
import argparse
import glob
import json
import os
import time

import cv2
import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F

from peer_pipeline import percentile  # the CPU peer's, so both report alike

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def main():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--clip", default=os.path.join(root, "samples/demo_clip"))
    ap.add_argument("--seg", default=os.path.join(root, "models/seg.onnx"))
    ap.add_argument("--cls", default=os.path.join(root, "models/cls.onnx"))
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    dev = torch.device("cuda", 0)
    # A stream of our own, shared with ONNX Runtime: the default stream's handle
    # is 0, which ONNX Runtime reads as "no user stream" and then computes on a
    # stream of its own, racing with PyTorch's reads of the logits.
    stream = torch.cuda.Stream(dev)
    torch.cuda.set_stream(stream)
    files = sorted(glob.glob(os.path.join(args.clip, "frame_*.jpg")))
    frames = [torch.from_numpy(cv2.cvtColor(cv2.imread(f), cv2.COLOR_BGR2RGB)).pin_memory() for f in files]

    providers = [("CUDAExecutionProvider", {"device_id": 0, "user_compute_stream": str(stream.cuda_stream),
                                            "use_tf32": "0"}),
                 "CPUExecutionProvider"]
    opts = ort.SessionOptions()
    seg = ort.InferenceSession(args.seg, opts, providers=providers)
    cls = ort.InferenceSession(args.cls, opts, providers=providers)
    seg_in, cls_in = seg.get_inputs()[0], cls.get_inputs()[0]
    _, _, sh, sw = seg_in.shape
    _, _, ch, cw = cls_in.shape
    mean, std = MEAN.to(dev), STD.to(dev)

    x = torch.empty((1, 3, sh, sw), device=dev)
    logits = torch.empty((1, seg.get_outputs()[0].shape[1], sh, sw), device=dev)
    y = torch.empty((1, 4, ch, cw), device=dev)
    out = torch.empty((1, cls.get_outputs()[0].shape[1]), device=dev)

    def binding(sess, inp, outp, iname, oname):
        b = sess.io_binding()
        b.bind_input(iname, "cuda", 0, np.float32, list(inp.shape), inp.data_ptr())
        b.bind_output(oname, "cuda", 0, np.float32, list(outp.shape), outp.data_ptr())
        return b

    seg_b = binding(seg, x, logits, seg_in.name, seg.get_outputs()[0].name)
    cls_b = binding(cls, y, out, cls_in.name, cls.get_outputs()[0].name)
    run_opts = ort.RunOptions()
    run_opts.add_run_config_entry("disable_synchronize_execution_providers", "1")

    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    gpu = {"preprocess": [], "segment": [], "classify": []}
    total = []
    fails = 0
    started = None
    for i in range(args.warmup + args.frames):
        if i == args.warmup:
            torch.cuda.synchronize()
            started = time.perf_counter()
        t0 = time.perf_counter()
        ev[0].record(stream)
        f = frames[i % len(frames)].to(dev, non_blocking=True).permute(2, 0, 1)[None].float() / 255.0
        x.copy_((F.interpolate(f, size=(sh, sw), mode="bilinear", align_corners=False) - mean) / std)
        rgb = (F.interpolate(f, size=(ch, cw), mode="bilinear", align_corners=False) - mean) / std
        ev[1].record(stream)
        seg.run_with_iobinding(seg_b, run_opts)
        mask = (logits.argmax(1, keepdim=True) == 1).float()
        m = F.interpolate(mask, size=(ch, cw), mode="bilinear", align_corners=False)
        y.copy_(torch.cat([rgb, m], 1))
        ev[2].record(stream)
        cls.run_with_iobinding(cls_b, run_opts)
        p = torch.softmax(out, 1)[0, 1]
        area = mask.mean()
        result = torch.stack([p, area]).cpu()  # the one wait, like sealcheck's
        ev[3].record(stream)
        if i >= args.warmup:
            fails += bool(result[0] >= args.threshold or result[1] < 0.005)
            ev[3].synchronize()
            for k, a, b in zip(gpu, ev[:3], ev[1:]):
                gpu[k].append(a.elapsed_time(b))
            total.append((time.perf_counter() - t0) * 1e3)
    elapsed = time.perf_counter() - started
    report = {
        "peer": "python (PyTorch %s on GPU + onnxruntime-gpu %s IO binding)" % (torch.__version__, ort.__version__),
        "frames": args.frames,
        "fps": args.frames / elapsed,
        "fails": fails,
        "latency_ms": {"total": {"p50": percentile(total, 0.5), "p95": percentile(total, 0.95), "p99": percentile(total, 0.99)}},
        "gpu_ms_p50": {k: percentile(v, 0.5) for k, v in gpu.items()},
        "bytes_h2d_per_frame": int(frames[0].numel()),
        "bytes_d2h_per_frame": 8,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['peer']}: {args.frames} frames, {report['fps']:.2f} frames/s, gpu p50 {report['gpu_ms_p50']}")


if __name__ == "__main__":
    main()
