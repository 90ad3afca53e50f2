#!/usr/bin/env python3
# Run by: hand, to (re)make samples/demo_cavities/ (`make demo-cavities` judges it);
# samples/demo_cavities/README.md.
"""A multi-cavity machine for the sealcheck demo: one frame = one machine cycle.

A 2x3 grid of trays on a web, seen from above: frame 1920x720 RGB, each cavity's cell
640x360, cavity 1 centred at (320, 180), pitch (640, 360) -- the layout of
config/demo-cavities.toml:

    [source.layout]
    rows = 2
    cols = 3
    first = [320, 180]
    pitch = [640, 360]
    size = [600, 340]

Cavities are numbered from 1 row by row, as machines number them (1 2 3 on the top row,
left to right; 4 5 6 below).

Each cavity is one gen_seals scene (the 1280x720 top view the demo models were trained on),
downscaled to its 640x360 cell with Pillow's antialiased Lanczos filter, as a camera that
sees the tray at half the size would. A cell is exactly half a training frame in each
direction, so a crop of the cell keeps the training frames' 16:9 framing.

Defects: every cavity at a steady `--rate` (10 %) except the drifting one (`--drift-cavity`,
5), whose sealing head goes bad: its defect rate climbs linearly from `--drift-from` (5 %)
on the first cycle to `--drift-to` (60 %) on the last. The defect kind is drawn evenly from
gen_seals.KINDS.

Deterministic: the schedule (which cavity of which cycle is defective, and how) comes from
numpy Generator(PCG64([seed, 0])) alone, and cavity c of cycle i is rendered by
gen_seals.render from Generator(PCG64([seed, 1, i, c])) alone, so the same seed gives the
same bytes (for a given numpy/Pillow/libjpeg build) whatever the worker count.

Writes DIR/frame_%05d.jpg (JPEG quality 72, as the demo clip) and DIR/labels.jsonl, one line
per frame:
    {"frame": i, "cavities": [{"cavity": 1, "label": "ok"|"defect", "kind": "..."}, ...]}

  python3 scripts/demo/gen_cavities.py --seed 7007 --count 150 --out samples/demo_cavities

numpy + Pillow only.
"""
import argparse
import io
import json
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_seals as G  # noqa: E402

ROWS, COLS = 2, 3
CELL_W, CELL_H = 640, 360
FRAME_W, FRAME_H = COLS * CELL_W, ROWS * CELL_H
# The layout the frames are drawn for (config/demo-cavities.toml's [source.layout]).
LAYOUT = {"rows": ROWS, "cols": COLS, "first": [CELL_W // 2, CELL_H // 2],
          "pitch": [CELL_W, CELL_H], "size": [600, 340]}


def cavity_origin(cavity):
    """Top-left pixel of cavity n's cell (n from 1, row by row)."""
    r, c = divmod(cavity - 1, COLS)
    return c * CELL_W, r * CELL_H


def defect_rate(cavity, frame, count, rate, drift_cavity, drift_from, drift_to):
    if cavity == drift_cavity:
        t = frame / max(count - 1, 1)
        return drift_from + (drift_to - drift_from) * t
    return rate


def schedule(seed, count, rate=0.10, drift_cavity=5, drift_from=0.05, drift_to=0.60):
    """kinds[i][c-1]: the kind of cavity c in cycle i ("ok" or one of gen_seals.KINDS)."""
    rng = np.random.Generator(np.random.PCG64([int(seed), 0]))
    kinds = []
    for i in range(count):
        row = []
        for cav in range(1, ROWS * COLS + 1):
            p = defect_rate(cav, i, count, rate, drift_cavity, drift_from, drift_to)
            u = rng.uniform()
            k = int(rng.integers(len(G.KINDS)))      # drawn either way: the schedule stays aligned
            row.append(G.KINDS[k] if u < p else "ok")
        kinds.append(row)
    return kinds


def render_cavity(seed, frame, cavity, kind):
    """One cavity's cell: RGB uint8 CELL_H x CELL_W x 3."""
    rng = np.random.Generator(np.random.PCG64([int(seed), 1, int(frame), int(cavity)]))
    img, _mask = G.render(rng, kind)
    return np.asarray(Image.fromarray(img).resize((CELL_W, CELL_H), Image.LANCZOS))


def render_frame(seed, frame, kinds_row):
    out = np.zeros((FRAME_H, FRAME_W, 3), np.uint8)
    for cav, kind in enumerate(kinds_row, start=1):
        x0, y0 = cavity_origin(cav)
        out[y0:y0 + CELL_H, x0:x0 + CELL_W] = render_cavity(seed, frame, cav, kind)
    return out


def _job(a):
    seed, frame, kinds_row, quality, out = a
    img = render_frame(seed, frame, kinds_row)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=int(quality), optimize=True)
    with open(os.path.join(out, f"frame_{frame:05d}.jpg"), "wb") as f:
        f.write(buf.getvalue())
    return frame, len(buf.getvalue())


def label_line(frame, kinds_row):
    return {"frame": frame, "cavities": [
        {"cavity": c, "label": "ok" if k == "ok" else "defect", "kind": k}
        for c, k in enumerate(kinds_row, start=1)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=7007)
    ap.add_argument("--count", type=int, default=150)
    ap.add_argument("--out", default="samples/demo_cavities")
    ap.add_argument("--rate", type=float, default=0.10, help="defect rate of the steady cavities")
    ap.add_argument("--drift-cavity", type=int, default=5)
    ap.add_argument("--drift-from", type=float, default=0.05)
    ap.add_argument("--drift-to", type=float, default=0.60)
    ap.add_argument("--quality", type=int, default=G.DEFAULT_QUALITY)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()

    kinds = schedule(a.seed, a.count, a.rate, a.drift_cavity, a.drift_from, a.drift_to)
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.startswith("frame_") and f.endswith(".jpg"):
            os.remove(os.path.join(a.out, f))
    jobs = [(a.seed, i, kinds[i], a.quality, a.out) for i in range(a.count)]
    if a.workers > 1:
        with Pool(a.workers) as p:
            res = p.map(_job, jobs, chunksize=2)
    else:
        res = []
        for j in jobs:
            res.append(_job(j))
            if (j[1] + 1) % 10 == 0:
                print(f"[cavities] {j[1] + 1}/{a.count}", file=sys.stderr, flush=True)
    with open(os.path.join(a.out, "labels.jsonl"), "w") as f:
        for i in range(a.count):
            f.write(json.dumps(label_line(i, kinds[i])) + "\n")
    total = sum(n for _, n in res)
    per_cav = [sum(kinds[i][c] != "ok" for i in range(a.count)) for c in range(ROWS * COLS)]
    print(f"[cavities] {a.count} frames {FRAME_W}x{FRAME_H} -> {a.out}, {total / 1e6:.2f} MB, "
          f"largest {max(n for _, n in res) / 1e3:.0f} KB, JPEG q{a.quality}, seed {a.seed}; "
          f"defective per cavity {per_cav} of {a.count}", flush=True)


if __name__ == "__main__":
    main()
