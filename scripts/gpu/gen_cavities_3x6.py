#!/usr/bin/env python3
# Run by: scripts/gpu/gpu_cavities.sh (on the lent GPU, before its 3x6 steps); by hand.
"""A 3x6 multi-cavity machine from the 2x3 demo machine (samples/demo_cavities): frame i of
the 3x6 clip is three consecutive 2x3 frames (3i, 3i+1, 3i+2), each one's two rows of three
640x360 cells laid side by side as one row of six: 3840x1080, 18 cavities, cavity 1 centred
at (320, 180), pitch (640, 360), the demo's cell size, so each cavity's crop (size 600x340,
margin 10) holds the same tray at the same scale as a 2x3 crop and the models see what they
were trained on. The grid for config: rows = 3, cols = 6, first = [320, 180],
pitch = [640, 360], size = [600, 340], margin = 10.

  python3 scripts/gpu/gen_cavities_3x6.py --out DIR [--count 50] [--quality 90]

Pillow only. Writes DIR/frame_%05d.jpg.
"""
import argparse
import os

from PIL import Image

CELL_W, CELL_H = 640, 360
SRC = "samples/demo_cavities/frame_%05d.jpg"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--quality", type=int, default=90)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sources = sorted(f for f in os.listdir(os.path.dirname(SRC)) if f.endswith(".jpg"))
    for i in range(args.count):
        frame = Image.new("RGB", (6 * CELL_W, 3 * CELL_H))
        for row in range(3):
            src = Image.open(SRC % ((3 * i + row) % len(sources))).convert("RGB")
            for half in range(2):
                strip = src.crop((0, half * CELL_H, 3 * CELL_W, (half + 1) * CELL_H))
                frame.paste(strip, (half * 3 * CELL_W, row * CELL_H))
        frame.save(os.path.join(args.out, "frame_%05d.jpg" % i), quality=args.quality)
    print("gen_cavities_3x6: %d frames of %dx%d in %s" % (args.count, 6 * CELL_W, 3 * CELL_H, args.out))


if __name__ == "__main__":
    main()
