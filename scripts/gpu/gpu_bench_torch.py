#!/usr/bin/env python3
# Run by: scripts/gpu/gpu_bench.sh, for docs/PERFORMANCE-gpu-preprocess.md.
"""The PyTorch peer of the CUDA preprocessing kernels (benches/gpu_preprocess.rs).

The same work done the way a user would reach for it in PyTorch, on the same
GPU, timed the same way: CUDA events around each run, median of --runs runs
after --warmup, a torch.cuda._sleep queued first so the host gets ahead of the
GPU, and inputs rotating over 12 sets (larger together than L2).

  frame   : uint8 HxWx3 frame -> permute -> float -> F.interpolate(bilinear,
            align_corners=False) to 640x640 and to 224x512 -> (x/255-mean)/std
            (-> .half() for the f16 case)
  mask    : 1x2x640x640 logits -> argmax(1) == 1 -> uint8 mask, and its sum
  mask+channel : the same, then mask -> float -> F.interpolate to 224x512 ->
            (m-0.5)/0.5 -> torch.cat([rgb, m], 1)   (our one launch writes
            channel 3 in place; the RGB channels are already there)

With --ours (the bench's JSON) it prints both side by side with the speedup;
with --dump (the bench's dump folder) it also checks our frame kernel's f32
output against F.interpolate itself, the definition of the contract.
"""

import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

SETS = 12
SLEEP_CYCLES = 80_000_000
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def timed(fn, runs, warmup):
    """Median, p10, p90 (microseconds) of per-run CUDA event pairs."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    torch.cuda._sleep(SLEEP_CYCLES)
    for i in range(runs):
        starts[i].record()
        fn(i)
        ends[i].record()
    torch.cuda.synchronize()
    us = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    pick = lambda q: us[round((len(us) - 1) * q)]
    return pick(0.5), pick(0.1), pick(0.9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--ours", help="JSON written by the Rust bench (--out)")
    ap.add_argument("--dump", help="folder written by the Rust bench (--dump)")
    ap.add_argument("--out", help="write this script's results as JSON here")
    args = ap.parse_args()

    dev = torch.device("cuda")
    torch.manual_seed(0)
    mean = torch.tensor(MEAN, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=dev).view(1, 3, 1, 1)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
          f"{args.runs} runs after {args.warmup} warm-up; {SETS} rotating input sets")
    rows = []

    # Device-to-device copy bandwidth, for reference (bytes read + written).
    n = 256 << 20
    src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(0x5A)
    dst = torch.empty_like(src)
    med, p10, p90 = timed(lambda i: dst.copy_(src), args.runs, args.warmup)
    rows.append(dict(kernel="memcpy D2D", case="256 MiB", bytes=2 * n, median_us=med, p10_us=p10, p90_us=p90))
    del src, dst

    def frame_to_tensors(frame, dtype, bgrx):
        x = frame[..., [2, 1, 0]] if bgrx else frame  # BGRx -> RGB (drops x)
        x = x.permute(2, 0, 1).unsqueeze(0).float()
        seg = (F.interpolate(x, size=(640, 640), mode="bilinear", align_corners=False) / 255 - mean) / std
        cls = (F.interpolate(x, size=(224, 512), mode="bilinear", align_corners=False) / 255 - mean) / std
        return seg.to(dtype), cls.to(dtype)

    for (w, h) in [(1280, 720), (1920, 1080)]:
        for layout, channels in [("Rgb", 3), ("Bgrx", 4)]:
            frames = [torch.randint(0, 256, (h, w, channels), dtype=torch.uint8, device=dev) for _ in range(SETS)]
            for dtype, name in [(torch.float32, "F32"), (torch.float16, "F16")]:
                fn = lambda i: frame_to_tensors(frames[i % SETS], dtype, layout == "Bgrx")
                med, p10, p90 = timed(fn, args.runs, args.warmup)
                el = 4 if dtype == torch.float32 else 2
                rows.append(dict(kernel="frame_to_tensors", case=f"{w}x{h} {layout} -> {name}",
                                 bytes=w * h * channels + 3 * 640 * 640 * el + 3 * 224 * 512 * el,
                                 median_us=med, p10_us=p10, p90_us=p90))
            del frames

    for dtype, name in [(torch.float32, "F32"), (torch.float16, "F16")]:
        el = 4 if dtype == torch.float32 else 2
        logits = [(torch.rand(1, 2, 640, 640, device=dev) * 8 - 4).to(dtype) for _ in range(SETS)]
        rgbs = [torch.randn(1, 3, 224, 512, device=dev).to(dtype) for _ in range(SETS)]

        def mask_fn(i):
            m = logits[i % SETS].argmax(1) == 1
            return m.to(torch.uint8), m.sum()

        def mask_channel_fn(i):
            mask, count = mask_fn(i)
            m = F.interpolate(mask.unsqueeze(1).float(), size=(224, 512), mode="bilinear", align_corners=False)
            m = ((m - 0.5) / 0.5).to(dtype)
            return mask, count, torch.cat([rgbs[i % SETS], m], 1)

        med, p10, p90 = timed(mask_fn, args.runs, args.warmup)
        rows.append(dict(kernel="logits_to_mask", case=f"2x640x640 {name} logits -> mask, count",
                         bytes=2 * 640 * 640 * el + 640 * 640, median_us=med, p10_us=p10, p90_us=p90))
        med, p10, p90 = timed(mask_channel_fn, args.runs, args.warmup)
        rows.append(dict(kernel="logits_to_mask+channel",
                         case=f"2x640x640 {name} logits -> mask, count, 224x512 channel",
                         bytes=2 * 640 * 640 * el + 640 * 640 + 224 * 512 * el,
                         median_us=med, p10_us=p10, p90_us=p90))
        del logits, rgbs

    copy_gbps = rows[0]["bytes"] / (rows[0]["median_us"] * 1e-6) / 1e9
    for r in rows:
        r["gbps"] = r["bytes"] / (r["median_us"] * 1e-6) / 1e9
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)

    ours = {}
    if args.ours and os.path.exists(args.ours):
        with open(args.ours) as f:
            ours = {(r["kernel"], r["case"]): r for r in json.load(f)}
    print("\n| kernel | case | PyTorch median µs | ours median µs | speedup | ours GB/s | ours % of copy |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        o = ours.get((r["kernel"], r["case"]))
        if o:
            print(f"| {r['kernel']} | {r['case']} | {r['median_us']:.2f} | {o['median_us']:.2f} | "
                  f"{r['median_us'] / o['median_us']:.1f}x | {o['gbps']:.0f} | {100 * o['gbps'] / o['copy_gbps']:.0f}% |")
        else:
            print(f"| {r['kernel']} | {r['case']} | {r['median_us']:.2f} | - | - | - | - |")
    print(f"\nPyTorch device-to-device copy: {copy_gbps:.0f} GB/s (read + write)")

    if args.dump and os.path.exists(os.path.join(args.dump, "meta.json")):
        check_against_torch(args.dump, dev)


def check_against_torch(folder, dev):
    """Our frame kernel's f32 output against F.interpolate on the same frame."""
    import numpy as np

    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    w, h = meta["width"], meta["height"]
    frame = np.fromfile(os.path.join(folder, "frame_rgb_u8.bin"), dtype=np.uint8)[: w * h * 3].reshape(h, w, 3)
    x = torch.from_numpy(frame).to(dev).permute(2, 0, 1).unsqueeze(0).float()
    worst = {}
    for name, hw, key in [("seg", meta["seg_hw"], "seg"), ("cls", meta["cls_hw"], "cls")]:
        m = torch.tensor(meta[f"{key}_mean"], device=dev).view(1, 3, 1, 1)
        s = torch.tensor(meta[f"{key}_std"], device=dev).view(1, 3, 1, 1)
        ref = (F.interpolate(x, size=tuple(hw), mode="bilinear", align_corners=False) / 255 - m) / s
        ours = np.fromfile(os.path.join(folder, f"{name}_f32.bin"), dtype=np.float32)[: 3 * hw[0] * hw[1]]
        ours = torch.from_numpy(ours).to(dev).view(1, 3, hw[0], hw[1])
        worst[name] = (ours - ref).abs().max().item()
    print(f"\nour frame kernel vs PyTorch F.interpolate on one {w}x{h} frame: max |diff| "
          f"seg {worst['seg']:.2e}, cls {worst['cls']:.2e} (f32; PyTorch folds the normalization differently)")


if __name__ == "__main__":
    sys.exit(main())
