#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`); models/README.md.
"""Synthetic seal-inspection frames for the sealcheck demo.

Top view (1280x720) of a food tray with a foil lid on a conveyor belt. The
heat-seal is a band around the rim (on the tray flange). Defect kinds:

  gap           break in the seal band (band absent over an arc)
  wrinkle       folds/creases across the band (light/dark streak pairs)
  contamination foreign blob(s) on the seal band
  misaligned    seal band offset from the rim (clipped at the tray edge)
  missing       no seal at all (mask empty)

Each sample has a label and the exact seal mask (visible seal-band pixels,
PNG 0/255). Deterministic: frame i of seed S is rendered from
numpy Generator(PCG64([S, i])) only, so the same seed gives the same bytes
(for a given Pillow/libjpeg build), independent of worker count.

numpy + Pillow only.

CLI:
  python3 scripts/demo/gen_seals.py --seed S --count N --out DIR [--defect-rate 0.5]
      [--quality 85] [--workers K] [--start 0] [--png] [--no-masks]
writes DIR/NNNNNN.jpg, DIR/NNNNNN_mask.png, DIR/labels.jsonl
"""
import argparse
import io
import json
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageFilter

W, H = 1280, 720
KINDS = ["gap", "wrinkle", "contamination", "misaligned", "missing"]
DEFAULT_QUALITY = 72

_GRID = None


def _grid():
    global _GRID
    if _GRID is None:
        yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
        _GRID = (xx, yy)
    return _GRID


def _smooth_noise(rng, h, w, cell_h, cell_w):
    """Low-frequency noise in [-1, 1] of size (h, w) by upsampling a small grid."""
    gh = max(2, int(np.ceil(h / cell_h)) + 1)
    gw = max(2, int(np.ceil(w / cell_w)) + 1)
    small = rng.uniform(-1.0, 1.0, size=(gh, gw)).astype(np.float32)
    img = Image.fromarray(small, mode="F").resize((w, h), Image.BICUBIC)
    return np.asarray(img, dtype=np.float32)


def _sat(x):
    return np.clip(x, 0.0, 1.0)


def _rrect_sdf(u, v, hx, hy, r):
    qx = np.abs(u) - (hx - r)
    qy = np.abs(v) - (hy - r)
    ox = np.maximum(qx, 0.0)
    oy = np.maximum(qy, 0.0)
    return np.sqrt(ox * ox + oy * oy) + np.minimum(np.maximum(qx, qy), 0.0) - r


def _wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def pick_kind(rng, defect_rate):
    if rng.uniform() < defect_rate:
        return KINDS[int(rng.integers(len(KINDS)))]
    return "ok"


def render(rng, kind):
    """Returns (rgb uint8 HxWx3, mask bool HxW). Consumes rng deterministically."""
    xx, yy = _grid()

    # ---------------- conveyor belt ----------------
    belt_base = rng.uniform(45, 95)
    belt_tint = np.array([1.0, rng.uniform(0.97, 1.03), rng.uniform(0.95, 1.08)], np.float32)
    grain = _smooth_noise(rng, H, W, 4, 160) * rng.uniform(3, 7)          # streaks along belt
    blotch = _smooth_noise(rng, H, W, 90, 90) * rng.uniform(3, 8)
    fine = _smooth_noise(rng, H, W, 3, 3) * rng.uniform(1, 2.5)
    belt = belt_base + grain + blotch + fine
    # belt seams (vertical) and side rails (top/bottom)
    period = rng.uniform(260, 420)
    phase = rng.uniform(0, period)
    seam_d = np.abs(((xx - phase) % period) - period / 2) - (period / 2 - 3)
    belt = belt - 18 * _sat(seam_d)
    rail_h = rng.uniform(38, 62)
    rail_val = rng.uniform(120, 170)
    rail = _sat(rail_h - yy) + _sat(yy - (H - rail_h))
    rail_tex = rail_val + 10 * np.sin(yy * 0.35) + _smooth_noise(rng, H, W, 40, 300) * 8
    belt = belt * (1 - rail) + rail_tex * rail
    img = belt[..., None] * belt_tint[None, None, :]

    # ---------------- tray geometry ----------------
    shape = "round" if rng.uniform() < 0.4 else "rect"
    if shape == "round":
        R = rng.uniform(205, 250)
        hx = hy = R
        cr = R
        ang = rng.uniform(-np.pi, np.pi)
        cx = W / 2 + rng.uniform(-150, 150)
        cy = H / 2 + rng.uniform(-45, 45)
    else:
        hx = rng.uniform(265, 330)
        hy = rng.uniform(185, 235)
        cr = rng.uniform(45, 95)
        ang = np.deg2rad(rng.uniform(-10, 10))
        cx = W / 2 + rng.uniform(-120, 120)
        cy = H / 2 + rng.uniform(-35, 35)
    ca, sa = float(np.cos(ang)), float(np.sin(ang))
    dx, dy = xx - cx, yy - cy
    u = ca * dx + sa * dy
    v = -sa * dx + ca * dy
    d = _rrect_sdf(u, v, hx, hy, cr)            # < 0 inside tray outline
    phi = np.arctan2(v, u)
    rad = np.sqrt(u * u + v * v)

    # drop shadow on the belt
    sh_off = rng.uniform(6, 16, size=2)
    us = ca * (dx - sh_off[0]) + sa * (dy - sh_off[1])
    vs = -sa * (dx - sh_off[0]) + ca * (dy - sh_off[1])
    ds = _rrect_sdf(us, vs, hx, hy, cr)
    shadow = _sat(1 - (ds + 4) / 18) * rng.uniform(0.35, 0.6)
    img = img * (1 - shadow[..., None])

    inside = _sat(0.5 - d)                      # antialiased tray coverage

    # tray plastic (visible lip at the outer edge)
    tray_col = [
        np.array([30, 30, 32]), np.array([225, 225, 220]), np.array([40, 70, 140]),
        np.array([35, 110, 60]), np.array([150, 30, 30]), np.array([200, 200, 205]),
    ][int(rng.integers(6))].astype(np.float32) * rng.uniform(0.9, 1.1)
    lip_w = rng.uniform(4, 8)

    # foil lid
    foil_base = rng.uniform(175, 225)
    foil_tint = np.array([1.0, rng.uniform(0.97, 1.02), rng.uniform(0.96, 1.06)], np.float32)
    flange_w = rng.uniform(58, 72)
    band_w = rng.uniform(36, 46)
    band_in = -flange_w + (flange_w - lip_w - band_w) / 2 + rng.uniform(-2, 2)   # inner edge (more negative)
    # the band occupies d in [band_in - 0, band_in + band_w] -> outer edge band_in+band_w
    foil = foil_base + _smooth_noise(rng, H, W, 60, 60) * 6 + _smooth_noise(rng, H, W, 6, 6) * 2.5
    # cavity: foil slightly sags -> soft darker ring at the cavity edge, lighter center
    cav = _sat((-d - flange_w) / 25)
    foil = foil - 22 * np.exp(-((d + flange_w) ** 2) / (2 * 3.0 ** 2)) + 6 * cav
    # a printed stripe/logo block on the lid (within the cavity)
    if rng.uniform() < 0.6:
        lw, lh = rng.uniform(60, 150), rng.uniform(25, 60)
        lu, lv = rng.uniform(-0.35, 0.35) * hx, rng.uniform(-0.3, 0.3) * hy
        logo = _sat(lw - np.abs(u - lu)) * _sat(lh - np.abs(v - lv)) * _sat((-d - flange_w - 12) / 3)
        logo_col = rng.uniform(40, 200, size=3).astype(np.float32)
        foil_rgb = foil[..., None] * foil_tint
        foil_rgb = foil_rgb * (1 - 0.8 * logo[..., None]) + 0.8 * logo[..., None] * logo_col
    else:
        foil_rgb = foil[..., None] * foil_tint
    # specular highlight on the foil
    hl_u, hl_v = rng.uniform(-0.5, 0.5) * hx, rng.uniform(-0.5, 0.5) * hy
    hl_s = rng.uniform(50, 120)
    hl = np.exp(-((u - hl_u) ** 2 + (v - hl_v) ** 2) / (2 * hl_s ** 2)) * rng.uniform(5, 22)
    foil_rgb = foil_rgb + hl[..., None]

    lip = _sat(d + lip_w + 0.5)                # 1 in the outer lip
    top = foil_rgb * (1 - lip[..., None]) + tray_col * lip[..., None]

    # ---------------- seal band ----------------
    band_dark = rng.uniform(0.62, 0.78)
    emb_amp = rng.uniform(8, 16)
    emb_k = 2 * np.pi / rng.uniform(5, 8)
    if kind == "misaligned":
        off_mag = rng.uniform(20, 32)
        off_dir = rng.uniform(-np.pi, np.pi)
        ou, ov = off_mag * float(np.cos(off_dir)), off_mag * float(np.sin(off_dir))
        db = _rrect_sdf(u - ou, v - ov, hx, hy, cr)
    else:
        ou = ov = 0.0
        db = d
    band_a = _sat(db - band_in + 0.5) * _sat(band_in + band_w - db + 0.5)
    band_a = band_a * _sat(-d - 0.5 + 0.5)      # only on the tray (never over the belt)
    if kind == "missing":
        band_a = band_a * 0.0
    r_band = np.maximum(rad, 1.0)
    if kind == "gap":
        ngap = 1 if rng.uniform() < 0.75 else 2
        for _ in range(ngap):
            th0 = rng.uniform(-np.pi, np.pi)
            L = rng.uniform(75, 140)           # arc length in pixels
            arc = np.abs(_wrap(phi - th0)) * r_band
            band_a = band_a * _sat(arc - L / 2 + 0.5)
    blobs = []
    if kind == "contamination":
        nb = 1 if rng.uniform() < 0.6 else int(rng.integers(2, 4))
        for _ in range(nb):
            th0 = rng.uniform(-np.pi, np.pi)
            # position on the band centerline: walk out from centre along th0
            dir_u, dir_v = float(np.cos(th0)), float(np.sin(th0))
            # find radius where sdf == band centre by bisection on the analytic sdf
            lo, hi = 0.0, float(max(hx, hy)) * 1.5
            target = band_in + band_w / 2
            for _ in range(40):
                mid = (lo + hi) / 2
                val = _rrect_sdf(np.float32(mid * dir_u), np.float32(mid * dir_v), hx, hy, cr)
                if val < target:
                    lo = mid
                else:
                    hi = mid
            bu, bv = lo * dir_u + rng.uniform(-6, 6), lo * dir_v + rng.uniform(-6, 6)
            r0 = rng.uniform(19, 32)
            harm = [[float(x) for x in row] for row in rng.normal(0, 0.12, size=(4, 2))]
            ph = np.arctan2(v - bv, u - bu)
            rr = np.sqrt((u - bu) ** 2 + (v - bv) ** 2)
            rb = r0 * (1 + sum(harm[k][0] * np.cos((k + 2) * ph) + harm[k][1] * np.sin((k + 2) * ph) for k in range(4)))
            ba = _sat(rb - rr + 0.5)
            col = [np.array([55, 35, 20]), np.array([20, 20, 20]), np.array([150, 40, 25]),
                   np.array([95, 80, 30])][int(rng.integers(4))].astype(np.float32) * rng.uniform(0.85, 1.15)
            blobs.append((ba, col, rr, rb))
    # band appearance: darker matte + embossed cross-hatch + edge lines
    emb = np.sin((u + v) * emb_k) * np.sin((u - v) * emb_k)
    edge = np.exp(-((db - band_in) ** 2) / 4.0) + np.exp(-((db - band_in - band_w) ** 2) / 4.0)
    band_rgb = top * band_dark + emb_amp * emb[..., None] - 18 * edge[..., None]
    top = top * (1 - band_a[..., None]) + band_rgb * band_a[..., None]

    if kind == "wrinkle":
        th0 = rng.uniform(-np.pi, np.pi)
        ncr = int(rng.integers(4, 8))
        spacing = rng.uniform(16, 26)
        amp = rng.uniform(60, 90)
        dir_u, dir_v = float(np.cos(th0)), float(np.sin(th0))
        lo, hi = 0.0, float(max(hx, hy)) * 1.5
        target = band_in + band_w / 2
        for _ in range(40):
            mid = (lo + hi) / 2
            val = _rrect_sdf(np.float32(mid * dir_u), np.float32(mid * dir_v), hx, hy, cr)
            if val < target:
                lo = mid
            else:
                hi = mid
        pu, pv = lo * dir_u, lo * dir_v
        tu, tv = -dir_v, dir_u                  # tangent (approx) along the band
        wave = np.zeros_like(d)
        for k in range(ncr):
            s0 = (k - (ncr - 1) / 2) * spacing + rng.uniform(-3, 3)
            tilt = rng.uniform(-0.5, 0.5)
            # crease line direction ~ radial (dir) tilted
            lu = dir_u * float(np.cos(tilt)) - dir_v * float(np.sin(tilt))
            lv = dir_u * float(np.sin(tilt)) + dir_v * float(np.cos(tilt))
            cu, cv = pu + tu * s0, pv + tv * s0
            s = (u - cu) * (-lv) + (v - cv) * lu     # across crease
            t = (u - cu) * lu + (v - cv) * lv       # along crease
            half_len = band_w / 2 + rng.uniform(12, 24)
            w = rng.uniform(4.0, 6.0)
            prof = np.exp(-((s - w) ** 2) / (2 * (w * 0.6) ** 2)) - np.exp(-((s + w) ** 2) / (2 * (w * 0.6) ** 2))
            wave = wave + prof * _sat((half_len - np.abs(t)) / 6)
        top = top + amp * wave[..., None] * inside[..., None]

    for ba, col, rr, rb in blobs:
        shade = 1 - 0.25 * _sat(rr / np.maximum(rb, 1))   # a little 3-D
        top = top * (1 - ba[..., None]) + (col * shade[..., None]) * ba[..., None]
        band_a = band_a * (1 - ba)

    img = img * (1 - inside[..., None]) + top * inside[..., None]
    mask = band_a >= 0.5

    # ---------------- lighting + camera ----------------
    gain = rng.uniform(0.82, 1.12)
    g_ang = rng.uniform(-np.pi, np.pi)
    grad = ((xx - W / 2) * float(np.cos(g_ang)) + (yy - H / 2) * float(np.sin(g_ang))) / (W / 2)
    light = gain * (1 + rng.uniform(0.04, 0.16) * grad)
    vig = 1 - rng.uniform(0.05, 0.18) * (((xx - W / 2) / (W / 2)) ** 2 + ((yy - H / 2) / (H / 2)) ** 2) / 2
    img = img * (light * vig)[..., None]
    img = np.clip(img, 0, 255).astype(np.uint8)
    pil = Image.fromarray(img, "RGB").filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.2)))
    img = np.asarray(pil, dtype=np.float32)
    img = img + rng.normal(0, rng.uniform(0.8, 1.6), size=img.shape).astype(np.float32)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return img, mask


def make_sample(seed, idx, defect_rate=0.5, quality=DEFAULT_QUALITY, kind=None, fmt="JPEG"):
    """Renders frame idx of seed. Returns dict(jpeg=bytes, mask=bool HxW, kind, label)."""
    rng = np.random.Generator(np.random.PCG64([int(seed), int(idx)]))
    if kind is None:
        kind = pick_kind(rng, defect_rate)
    img, mask = render(rng, kind)
    buf = io.BytesIO()
    if fmt == "PNG":
        Image.fromarray(img, "RGB").save(buf, format="PNG")
    else:
        Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=int(quality), optimize=True)
    return {"bytes": buf.getvalue(), "mask": mask, "kind": kind,
            "label": "ok" if kind == "ok" else "defect"}


def decode(data):
    """Encoded image bytes -> RGB uint8 HxWx3 (what the pipeline decodes)."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _job(a):
    seed, idx, defect_rate, quality, out, kind, fmt, masks, name_fmt = a
    s = make_sample(seed, idx, defect_rate, quality, kind, fmt)
    ext = "png" if fmt == "PNG" else "jpg"
    base = name_fmt.format(idx)
    with open(os.path.join(out, f"{base}.{ext}"), "wb") as f:
        f.write(s["bytes"])
    if masks:
        Image.fromarray((s["mask"] * 255).astype(np.uint8), "L").save(
            os.path.join(out, f"{base}_mask.png"), optimize=True)
    return idx, s["kind"], s["label"], len(s["bytes"])


def generate(seed, count, out, defect_rate=0.5, quality=DEFAULT_QUALITY, workers=None,
             start=0, kinds=None, fmt="JPEG", masks=True, name_fmt="{:06d}",
             labels_name="labels.jsonl"):
    """Writes count frames (indices start..start+count-1). kinds: optional list of forced kinds."""
    os.makedirs(out, exist_ok=True)
    jobs = [(seed, start + i, defect_rate, quality, out, None if kinds is None else kinds[i],
             fmt, masks, name_fmt) for i in range(count)]
    workers = workers or os.cpu_count() or 1
    if workers > 1:
        with Pool(workers) as p:
            res = p.map(_job, jobs, chunksize=4)
    else:
        res = [_job(j) for j in jobs]
    res.sort()
    with open(os.path.join(out, "gen_meta.json"), "w") as f:
        json.dump({"seed": seed, "count": count, "start": start, "defect_rate": defect_rate,
                   "quality": quality, "format": fmt}, f)
    total = 0
    with open(os.path.join(out, labels_name), "w") as f:
        for idx, kind, label, nbytes in res:
            f.write(json.dumps({"frame": idx, "label": label, "kind": kind}) + "\n")
            total += nbytes
    return res, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--defect-rate", type=float, default=0.5)
    ap.add_argument("--quality", type=int, default=DEFAULT_QUALITY)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--png", action="store_true", help="lossless PNG frames instead of JPEG")
    ap.add_argument("--no-masks", action="store_true")
    ap.add_argument("--kind", choices=["ok"] + KINDS, default=None, help="force one kind (previews)")
    a = ap.parse_args()
    kinds = None if a.kind is None else [a.kind] * a.count
    res, total = generate(a.seed, a.count, a.out, a.defect_rate, a.quality, a.workers, a.start,
                          kinds, "PNG" if a.png else "JPEG", not a.no_masks)
    counts = {}
    for _, k, _, _ in res:
        counts[k] = counts.get(k, 0) + 1
    print(f"wrote {len(res)} frames to {a.out} (seed {a.seed}), {total / 1e6:.1f} MB images, kinds {counts}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
