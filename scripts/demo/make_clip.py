#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`); models/README.md.
"""Write the demo clip: numbered 1280x720 JPEGs + labels.jsonl.

  python3 scripts/demo/make_clip.py --seed 4004 --count 300 --out samples/demo_clip

Frames are frame_00000.jpg ... (GStreamer: multifilesrc location=frame_%05d.jpg ! jpegdec).
Kinds follow a fixed schedule (ok ~60%, the rest split evenly over the defect kinds), shuffled
with numpy Generator(PCG64(seed)); frame i is rendered by gen_seals with PCG64([seed, i]).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_seals as G  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=4004)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--out", default="samples/demo_clip")
    ap.add_argument("--ok-frac", type=float, default=0.6)
    ap.add_argument("--quality", type=int, default=G.DEFAULT_QUALITY)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    n_ok = int(round(a.count * a.ok_frac))
    rest = a.count - n_ok
    kinds = ["ok"] * n_ok
    for i, k in enumerate(G.KINDS):
        kinds += [k] * (rest // len(G.KINDS) + (1 if i < rest % len(G.KINDS) else 0))
    rng = np.random.Generator(np.random.PCG64(a.seed))
    kinds = [kinds[i] for i in rng.permutation(len(kinds))]
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.startswith("frame_") and f.endswith(".jpg"):
            os.remove(os.path.join(a.out, f))
    res, total = G.generate(a.seed, a.count, a.out, quality=a.quality, workers=a.workers, kinds=kinds,
                            masks=False, name_fmt="frame_{:05d}")
    os.remove(os.path.join(a.out, "gen_meta.json"))
    counts = {}
    for _, k, _, _ in res:
        counts[k] = counts.get(k, 0) + 1
    big = max(r[3] for r in res)
    print(f"[clip] {len(res)} frames -> {a.out}, {total / 1e6:.2f} MB total, largest {big / 1e3:.0f} KB, "
          f"JPEG q{a.quality}, seed {a.seed}, kinds {counts}", flush=True)


if __name__ == "__main__":
    main()
