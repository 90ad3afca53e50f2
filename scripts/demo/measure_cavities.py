#!/usr/bin/env python3
# Run by: hand (issue 38's per-cavity accuracy figures, samples/demo_cavities/README.md).
"""Judges a multi-cavity clip in Python, as sealcheck does with a cavity layout, and measures
per-cavity accuracy for one or more crop margins.

For each frame (one machine cycle) and each cavity of the layout (config's [source.layout]:
rows, cols, first, pitch, size): the crop is the cavity's `size` plus `margin` pixels on every
side, clipped to the frame (cavity region top-left = centre - size // 2). The crops of one
frame go through the models' contract (models/README.md) as seals of their own, in one batch:

  crop -> bilinear, half-pixel, no-antialias resize to 640x640 -> /255, (x - mean) / std
       -> seg_batch.onnx -> mask = argmax == 1, seal_area = mask mean
  crop -> same resize to 224x512, normalized; + mask resized to 224x512 -> cls_batch.onnx
       -> p_defect = softmax[1]
  verdict as src/decision.rs: area < no_seal_below -> no_seal; outside [min, max] ->
  seal_area; p_defect >= defect_threshold -> defect; else ok.

The resize is a numpy re-implementation of scripts/demo/contract.py's F.interpolate
(the same one as export_batch_fp16.py --check; no torch needed). Thresholds come from the
config's [decision] table.

  python3 scripts/demo/measure_cavities.py --frames samples/demo_cavities --margins 0,10,20
  python3 scripts/demo/measure_cavities.py --frames samples/demo_cavities --margins 10 \\
      --write-results results/demo-cavities-py.jsonl
  python3 scripts/demo/score_cavities.py --results results/demo-cavities-py.jsonl \\
      --labels samples/demo_cavities/labels.jsonl

--write-results writes sealcheck's result lines (one per frame, in seq order, with
"cavities", "reject" and "reject_mask"); with several margins, put {margin} in the path.
The top-level defect_prob is the cycle's highest and seal_area its lowest (this script's
choice; score_cavities.py reads only the verdicts).

numpy + Pillow + onnxruntime.
"""
import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
from PIL import Image

# The contract's resize in numpy (bilinear, half-pixel, no antialias), written once.
from export_batch_fp16 import resize

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

RGB_MEAN = np.array((0.485, 0.456, 0.406), np.float32).reshape(3, 1, 1)
RGB_STD = np.array((0.229, 0.224, 0.225), np.float32).reshape(3, 1, 1)
SEG_HW = (640, 640)
CLS_HW = (224, 512)
MASK_MEAN, MASK_STD = 0.0, 1.0

DEFAULT_LAYOUT = {"rows": 2, "cols": 3, "first": [320, 180], "pitch": [640, 360], "size": [600, 340]}
# config/demo.toml's [decision]
DEFAULT_DECISION = {"defect_threshold": 0.5, "no_seal_below": 0.005, "min_seal_area": 0.02,
                    "max_seal_area": 0.25}


def cavity_regions(layout, frame_w, frame_h, margin):
    """[(cavity, x0, y0, x1, y1)]: each cavity's crop (size + margin, clipped to the frame)."""
    out = []
    w, h = layout["size"]
    for r in range(layout["rows"]):
        for c in range(layout["cols"]):
            n = r * layout["cols"] + c + 1
            if n in layout.get("disabled", []):
                continue
            cx = layout["first"][0] + c * layout["pitch"][0]
            cy = layout["first"][1] + r * layout["pitch"][1]
            x0, y0 = cx - w // 2 - margin, cy - h // 2 - margin
            x1, y1 = x0 + w + 2 * margin, y0 + h + 2 * margin
            out.append((n, max(x0, 0), max(y0, 0), min(x1, frame_w), min(y1, frame_h)))
    return out


def decide(p, area, d):
    if area < d["no_seal_below"]:
        return "fail", "no_seal"
    if area < d["min_seal_area"] or area > d["max_seal_area"]:
        return "fail", "seal_area"
    if p >= d["defect_threshold"]:
        return "fail", "defect"
    return "pass", "ok"


class Judge:
    def __init__(self, models, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        prov = ["CPUExecutionProvider"]
        self.seg = ort.InferenceSession(os.path.join(models, "seg_batch.onnx"), so, providers=prov)
        self.cls = ort.InferenceSession(os.path.join(models, "cls_batch.onnx"), so, providers=prov)
        self.seg_in = self.seg.get_inputs()[0].name
        self.cls_in = self.cls.get_inputs()[0].name

    def crops(self, crops):
        """crops: list of float32 3,h,w on 0..255 -> [(p_defect, seal_area)]."""
        seg = np.stack([(resize(c, SEG_HW) / 255.0 - RGB_MEAN) / RGB_STD for c in crops]).astype(np.float32)
        logits = self.seg.run(None, {self.seg_in: seg})[0]
        masks = (logits[:, 1] > logits[:, 0]).astype(np.float32)        # argmax, ties -> class 0
        cls = []
        for c, m in zip(crops, masks):
            rgb = (resize(c, CLS_HW) / 255.0 - RGB_MEAN) / RGB_STD
            mm = (resize(m[None], CLS_HW) - MASK_MEAN) / MASK_STD
            cls.append(np.concatenate([rgb, mm], axis=0))
        cl = self.cls.run(None, {self.cls_in: np.stack(cls).astype(np.float32)})[0].astype(np.float64)
        e = np.exp(cl - cl.max(axis=1, keepdims=True))
        p = e[:, 1] / e.sum(axis=1)
        return [(float(pi), float(m.mean())) for pi, m in zip(p, masks)]


def result_line(seq, cavs):
    failed = [c["cavity"] for c in cavs if c["verdict"] == "fail"]
    first_fail = next((c for c in cavs if c["verdict"] == "fail"), None)
    return {
        "seq": seq,
        "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "verdict": "fail" if failed else "pass",
        "reason": first_fail["reason"] if first_fail else "ok",
        "defect_prob": max(c["defect_prob"] for c in cavs),
        "seal_area": min(c["seal_area"] for c in cavs),
        "cavities": cavs,
        "reject": failed,
        "reject_mask": sum(1 << (n - 1) for n in failed),
    }


def summarize(rows, labels):
    """rows: {frame: {cavity: (verdict, reason, p, area)}} -> per-cavity and overall figures."""
    per = {}
    for fr, lab in labels.items():
        for c in lab["cavities"]:
            n = c["cavity"]
            got = rows.get(fr, {}).get(n)
            if got is None:
                continue
            s = per.setdefault(n, {"defect": 0, "caught": 0, "ok": 0, "passed": 0, "missed": [], "false": []})
            if c["label"] == "defect":
                s["defect"] += 1
                if got[0] == "fail":
                    s["caught"] += 1
                else:
                    s["missed"].append((fr, c["kind"], round(got[2], 4), round(got[3], 4)))
            else:
                s["ok"] += 1
                if got[0] == "pass":
                    s["passed"] += 1
                else:
                    s["false"].append((fr, got[1], round(got[2], 4), round(got[3], 4)))
    tot = {k: sum(s[k] for s in per.values()) for k in ("defect", "caught", "ok", "passed")}
    return per, tot


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", default="samples/demo_cavities")
    ap.add_argument("--labels", default=None, help="default: FRAMES/labels.jsonl")
    ap.add_argument("--models", default="models")
    ap.add_argument("--config", default="config/demo-cavities.toml",
                    help="[source.layout] and [decision] from here when it exists (margin from --margins)")
    ap.add_argument("--margins", default="10", help="comma-separated crop margins in pixels")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--write-results", default=None, help="sealcheck-style results file ({margin} for several)")
    ap.add_argument("--json", default=None, help="summary of every margin as JSON")
    a = ap.parse_args()

    layout, decision = dict(DEFAULT_LAYOUT), dict(DEFAULT_DECISION)
    if a.config and os.path.exists(a.config) and tomllib is not None:
        with open(a.config, "rb") as f:
            cfg = tomllib.load(f)
        layout.update({k: v for k, v in cfg.get("source", {}).get("layout", {}).items() if k != "margin"})
        decision.update({k: v for k, v in cfg.get("decision", {}).items() if k in DEFAULT_DECISION})
    margins = [int(m) for m in a.margins.split(",")]
    if a.write_results and len(margins) > 1 and "{margin}" not in a.write_results:
        ap.error("--write-results with several margins needs {margin} in the path")

    labels_path = a.labels or os.path.join(a.frames, "labels.jsonl")
    with open(labels_path) as f:
        labels = {r["frame"]: r for r in (json.loads(line) for line in f if line.strip())}
    frames = sorted(labels)[: a.limit] if a.limit else sorted(labels)
    labels = {fr: labels[fr] for fr in frames}
    judge = Judge(a.models, a.threads)
    rows = {m: {} for m in margins}
    lines = {m: [] for m in margins}
    t0 = time.time()
    for k, fr in enumerate(frames):
        img = np.asarray(Image.open(os.path.join(a.frames, f"frame_{fr:05d}.jpg")).convert("RGB"),
                         dtype=np.float32).transpose(2, 0, 1)
        for m in margins:
            regs = cavity_regions(layout, img.shape[2], img.shape[1], m)
            out = judge.crops([np.ascontiguousarray(img[:, y0:y1, x0:x1]) for _, x0, y0, x1, y1 in regs])
            cavs = []
            for (n, *_), (p, area) in zip(regs, out):
                v, why = decide(p, area, decision)
                rows[m].setdefault(fr, {})[n] = (v, why, p, area)
                cavs.append({"cavity": n, "verdict": v, "reason": why, "defect_prob": round(p, 6),
                             "seal_area": round(area, 6)})
            lines[m].append(result_line(fr, cavs))
        if (k + 1) % 25 == 0:
            print(f"[measure] {k + 1}/{len(frames)} frames, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)

    summary = {"frames": len(frames), "labels": labels_path, "layout": layout, "decision": decision,
               "margins": {}}
    for m in margins:
        per, tot = summarize(rows[m], labels)
        regs = cavity_regions(layout, img.shape[2], img.shape[1], m)
        print(f"\nmargin {m}: crops " + ", ".join(f"{n}:{x1 - x0}x{y1 - y0}" for n, x0, y0, x1, y1 in regs))
        print(f"  {'cavity':>6}  {'defects caught':>15}  {'good passed':>12}  {'false rejects':>13}")
        for n in sorted(per):
            s = per[n]
            print(f"  {n:>6}  {s['caught']:>6}/{s['defect']:<3} {s['caught'] / max(s['defect'], 1):6.1%}"
                  f"  {s['passed']:>5}/{s['ok']:<4}  {s['ok'] - s['passed']:>5} {(s['ok'] - s['passed']) / max(s['ok'], 1):6.2%}")
            for fr, kind, p, area in s["missed"]:
                print(f"          missed: frame {fr} {kind} p_defect {p} seal_area {area}")
            for fr, why, p, area in s["false"]:
                print(f"          false reject: frame {fr} {why} p_defect {p} seal_area {area}")
        rec = tot["caught"] / max(tot["defect"], 1)
        fr_rate = (tot["ok"] - tot["passed"]) / max(tot["ok"], 1)
        print(f"  all     recall {tot['caught']}/{tot['defect']} = {rec:.4f}, false rejects "
              f"{tot['ok'] - tot['passed']}/{tot['ok']} = {fr_rate:.4f}")
        areas = [v[3] for fr in rows[m] for v in rows[m][fr].values()]
        ok_areas = [rows[m][fr][c["cavity"]][3] for fr in frames for c in labels[fr]["cavities"]
                    if c["label"] == "ok" and c["cavity"] in rows[m][fr]]
        print(f"  seal area of good cavities {min(ok_areas):.4f}..{max(ok_areas):.4f} (all {min(areas):.4f}..{max(areas):.4f})")
        ok_p = [rows[m][fr][c["cavity"]][2] for fr in frames for c in labels[fr]["cavities"]
                if c["label"] == "ok" and c["cavity"] in rows[m][fr]]
        bad_p = [rows[m][fr][c["cavity"]][2] for fr in frames for c in labels[fr]["cavities"]
                 if c["label"] == "defect" and c["kind"] != "missing" and c["cavity"] in rows[m][fr]]
        print(f"  p_defect: good cavities max {max(ok_p):.4g} (99th percentile {np.percentile(ok_p, 99):.3g}); "
              f"defective (not missing) min {min(bad_p) if bad_p else float('nan'):.4g}")
        summary["margins"][m] = {
            "recall": rec, "false_reject_rate": fr_rate, "totals": tot,
            "good_seal_area": [min(ok_areas), max(ok_areas)],
            "good_p_defect_max": max(ok_p), "defective_p_defect_min": min(bad_p) if bad_p else None,
            "per_cavity": {n: {"defects": s["defect"], "caught": s["caught"], "good": s["ok"],
                               "passed": s["passed"], "missed": s["missed"], "false_rejects": s["false"]}
                           for n, s in sorted(per.items())}}
        if a.write_results:
            path = a.write_results.replace("{margin}", str(m))
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                for line in lines[m]:
                    f.write(json.dumps(line) + "\n")
            print(f"  results -> {path}")
    print(f"\n{len(frames)} frames, {time.time() - t0:.0f} s", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
