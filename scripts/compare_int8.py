#!/usr/bin/env python3
"""FP32 against INT8 on one image set, from two `sealcheck inspect --dump` runs.

  python3 scripts/compare_int8.py --labels DIR/labels.jsonl \
      --fp32 fp32.jsonl --fp32-dumps D32 --int8 int8.jsonl --int8-dumps D8 [--gt-masks DIR] [--json OUT]

Each .jsonl is what `sealcheck inspect --config C --dump D IMAGE...` printed (one line per
image, in label order); each dump folder holds the run's `mask.npy` per image. Reports, for
FP32 and INT8 alike: accuracy and defect recall against the labels (a defect must fail, a good
seal must pass), false reject rate on good seals, verdicts per reason; seal IoU against the
ground-truth masks when `--gt-masks` names the folder with `NNNNNN_mask.png` (resized to
640x640 bilinearly with half-pixel centres, thresholded at 0.5: the contract's `gt_mask_640`);
and INT8 against FP32: verdict flips, mask IoU (mean, worst), worst and p99 |p_defect diff|.
Standard library + numpy + Pillow (no PyTorch).
"""
import argparse
import json
import os

import numpy as np
from PIL import Image


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def resize_bilinear_half_pixel(a, out_h, out_w):
    """F.interpolate(mode='bilinear', align_corners=False, antialias=False) for a 2-D array."""
    in_h, in_w = a.shape

    def axis(n_out, n_in):
        x = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        x = np.clip(x, 0, None)
        i0 = np.minimum(np.floor(x).astype(np.int64), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, (x - i0).astype(np.float32)

    y0, y1, wy = axis(out_h, in_h)
    x0, x1, wx = axis(out_w, in_w)
    top = a[y0][:, x0] * (1 - wx) + a[y0][:, x1] * wx
    bottom = a[y1][:, x0] * (1 - wx) + a[y1][:, x1] * wx
    return top * (1 - wy)[:, None] + bottom * wy[:, None]


def iou(a, b):
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def scores(rows, labels):
    n = len(rows)
    right = sum((r["verdict"] == "fail") == (lab["label"] == "defect") for r, lab in zip(rows, labels))
    defects = [r for r, lab in zip(rows, labels) if lab["label"] == "defect"]
    goods = [r for r, lab in zip(rows, labels) if lab["label"] != "defect"]
    reasons = {}
    for r in rows:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    return {
        "frames": n,
        "accuracy": right / n,
        "defect_recall": sum(r["verdict"] == "fail" for r in defects) / max(1, len(defects)),
        "false_reject_rate": sum(r["verdict"] == "fail" for r in goods) / max(1, len(goods)),
        "reasons": reasons,
    }


def mask_of(dumps, row):
    stem = os.path.splitext(os.path.basename(row["image"]))[0]
    return np.load(os.path.join(dumps, stem, "mask.npy")) > 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--fp32", required=True)
    ap.add_argument("--fp32-dumps", required=True)
    ap.add_argument("--int8", required=True)
    ap.add_argument("--int8-dumps", required=True)
    ap.add_argument("--gt-masks", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    labels = read_jsonl(a.labels)
    runs = {"fp32": read_jsonl(a.fp32), "int8": read_jsonl(a.int8)}
    dumps = {"fp32": a.fp32_dumps, "int8": a.int8_dumps}
    for name, rows in runs.items():
        if len(rows) != len(labels):
            raise SystemExit(f"compare_int8: {name} has {len(rows)} results for {len(labels)} labels")
    report = {name: scores(rows, labels) for name, rows in runs.items()}

    ious = {"fp32": [], "int8": []}
    agreement, prob_diff, flips = [], [], 0
    for i, (r32, r8) in enumerate(zip(runs["fp32"], runs["int8"])):
        m32, m8 = mask_of(dumps["fp32"], r32), mask_of(dumps["int8"], r8)
        agreement.append(iou(m32, m8))
        flips += r32["verdict"] != r8["verdict"]
        if r32.get("defect_prob") is not None and r8.get("defect_prob") is not None:
            prob_diff.append(abs(r32["defect_prob"] - r8["defect_prob"]))
        if a.gt_masks:
            stem = os.path.splitext(os.path.basename(r32["image"]))[0]
            gt = np.asarray(Image.open(os.path.join(a.gt_masks, f"{stem}_mask.png")), np.float32) / 255.0
            gt640 = resize_bilinear_half_pixel(gt, *m32.shape) >= 0.5
            ious["fp32"].append((np.logical_and(m32, gt640).sum(), np.logical_or(m32, gt640).sum()))
            ious["int8"].append((np.logical_and(m8, gt640).sum(), np.logical_or(m8, gt640).sum()))
    for name in runs:
        if ious[name]:
            inter, union = np.array(ious[name], dtype=np.float64).sum(axis=0)
            report[name]["seal_iou_vs_ground_truth"] = float(inter / union)
    report["int8_vs_fp32"] = {
        "verdict_flips": int(flips),
        "mask_iou_mean": float(np.mean(agreement)),
        "mask_iou_worst": float(np.min(agreement)),
        "defect_prob_diff_worst": float(np.max(prob_diff)) if prob_diff else None,
        "defect_prob_diff_p99": float(np.percentile(prob_diff, 99)) if prob_diff else None,
    }
    print(json.dumps(report, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
