#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`); models/README.md.
"""Evaluate the exported sealcheck demo models with onnxruntime on held-out synthetic frames.

  python3 scripts/demo/evaluate.py --seed 2002 --count 1000 [--models models] [--threshold 0.5]
  python3 scripts/demo/evaluate.py --frames samples/demo_clip [--per-frame OUT.jsonl]

With --frames DIR the frames come from DIR (labels.jsonl + frame_NNNNN.jpg or NNNNNN.jpg);
no ground-truth masks there, so no IoU. --per-frame writes one JSON line per frame
(frame, kind, p_defect, verdict, seal_area = fraction of the 640x640 mask that is seal):
the reference output for checking another implementation of the pipeline.

Frames are generated in memory by scripts/demo/gen_seals.py (same JPEG encoding as training and the
clip), decoded, preprocessed with scripts/demo/contract.py, run through models/seg.onnx and
models/cls.onnx with onnxruntime (CPU). Reports:
  * seal-class IoU at 640x640, aggregated over the set (sum of intersections / sum of unions)
    against the ground-truth mask resized with the contract's bilinear op and thresholded at 0.5
  * classifier accuracy, recall on defective seals, precision, false-reject rate on good seals
    at the threshold (softmax(logits)[1] >= threshold -> defect)
  * confusion matrix per defect kind
Bars: IoU >= 0.90, accuracy >= 0.97, recall >= 0.98. Exit code 0 if all hold, 1 otherwise.
"""
import argparse
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_seals as G  # noqa: E402

BARS = {"iou": 0.90, "accuracy": 0.97, "recall": 0.98}


def _gen(a):
    seed, idx, rate, quality = a
    s = G.make_sample(seed, idx, rate, quality)
    return idx, s["bytes"], np.packbits(s["mask"]), s["kind"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=2002)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--defect-rate", type=float, default=0.5)
    ap.add_argument("--quality", type=int, default=G.DEFAULT_QUALITY)
    ap.add_argument("--models", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
    ap.add_argument("--threshold", type=float, default=None, help="default: contract.THRESHOLD")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0 = default)")
    ap.add_argument("--json", default=None, help="write the numbers here")
    ap.add_argument("--frames", default=None, help="evaluate the frames in this directory instead")
    ap.add_argument("--per-frame", default=None, help="write per-frame results (jsonl) here")
    a = ap.parse_args()

    import torch
    import onnxruntime as ort
    import contract as C
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    thr = C.THRESHOLD if a.threshold is None else a.threshold

    so = ort.SessionOptions()
    if a.threads:
        so.intra_op_num_threads = a.threads
    seg = ort.InferenceSession(os.path.join(a.models, "seg.onnx"), so, providers=["CPUExecutionProvider"])
    cls = ort.InferenceSession(os.path.join(a.models, "cls.onnx"), so, providers=["CPUExecutionProvider"])
    print(f"[eval] onnxruntime {ort.__version__}, torch {torch.__version__}, models {os.path.abspath(a.models)}; "
          f"held-out seed {a.seed}, count {a.count}, defect rate {a.defect_rate}, JPEG q{a.quality}, "
          f"threshold {thr}", flush=True)

    t0 = time.time()
    inter = union = 0
    per_img_iou = []
    rows = []
    if a.frames:
        labels = [json.loads(line) for line in open(os.path.join(a.frames, "labels.jsonl"))]

        def source():
            for r in labels:
                f = r["frame"]
                path = os.path.join(a.frames, f"frame_{f:05d}.jpg")
                if not os.path.exists(path):
                    path = os.path.join(a.frames, f"{f:06d}.jpg")
                with open(path, "rb") as fh:
                    yield f, fh.read(), None, r["kind"]
        total = len(labels)
        pool = None
        it = source()
    else:
        jobs = [(a.seed, i, a.defect_rate, a.quality) for i in range(a.count)]
        total = a.count
        pool = Pool(a.workers)
        it = pool.imap(_gen, jobs, chunksize=4)
    for k, (idx, data, packed, kind) in enumerate(it):
        frame = G.decode(data)
        x = C.frames_to_tensor(frame)
        with torch.no_grad():
            si = C.seg_input(x)
            logits = seg.run(None, {"images": si.numpy()})[0]
            mask = C.mask_from_logits(torch.from_numpy(logits))
            i_ = u_ = gt_px = None
            if packed is not None:
                gt_hw = np.unpackbits(packed)[: G.H * G.W].reshape(G.H, G.W).astype(bool)
                gt = C.gt_mask_640(gt_hw)
                i_ = int((mask.bool() & gt).sum())
                u_ = int((mask.bool() | gt).sum())
                gt_px = int(gt.sum())
                inter += i_
                union += u_
                if u_:
                    per_img_iou.append(i_ / u_)
            ci = C.cls_input(x, mask)
            cl = cls.run(None, {"input": ci.numpy()})[0]
            p = float(C.p_defect(torch.from_numpy(cl))[0])
        rows.append({"frame": idx, "kind": kind, "p_defect": p, "pred": "defect" if p >= thr else "ok",
                     "iou": (i_ / u_) if u_ else None, "mask_px": int(mask.sum()), "gt_px": gt_px,
                     "logits": [float(v) for v in cl[0]]})
        if (k + 1) % 100 == 0:
            print(f"[eval] {k + 1}/{total} {time.time() - t0:.0f}s", flush=True)
    if pool is not None:
        pool.close()

    n = len(rows)
    y = np.array([r["kind"] != "ok" for r in rows])
    pr = np.array([r["pred"] == "defect" for r in rows])
    tp, tn = int((y & pr).sum()), int((~y & ~pr).sum())
    fp, fn = int((~y & pr).sum()), int((y & ~pr).sum())
    res = {
        "seed": None if a.frames else a.seed, "frames": a.frames, "count": n, "threshold": thr,
        "iou": inter / max(1, union) if not a.frames else None,
        "iou_mean_per_image": float(np.mean(per_img_iou)) if per_img_iou else None,
        "accuracy": (tp + tn) / n,
        "recall": tp / max(1, tp + fn),
        "precision": tp / max(1, tp + fp),
        "false_reject_rate": fp / max(1, fp + tn),
        "confusion": {"tp": tp, "tn": tn, "fp": fp, "fn": fn},
        "per_kind": {},
        "seconds": round(time.time() - t0, 1),
    }
    for kind in ["ok"] + G.KINDS:
        rk = [r for r in rows if r["kind"] == kind]
        res["per_kind"][kind] = {"n": len(rk), "pred_ok": sum(r["pred"] == "ok" for r in rk),
                                 "pred_defect": sum(r["pred"] == "defect" for r in rk)}
    # missing-seal frames: the predicted mask should be (nearly) empty
    miss = [r for r in rows if r["kind"] == "missing"]
    res["missing_mean_pred_px"] = float(np.mean([r["mask_px"] for r in miss])) if miss else None
    for kind in G.KINDS + ["ok"]:
        ious = [r["iou"] for r in rows if r["kind"] == kind and r["iou"] is not None]
        res["per_kind"][kind]["iou_mean"] = float(np.mean(ious)) if ious else None
    res["pass"] = {k: res[k] >= v for k, v in BARS.items() if res[k] is not None}
    areas = {}
    for r in rows:
        areas.setdefault(r["kind"], []).append(r["mask_px"] / (640 * 640))
    res["seal_area_range"] = {k: [round(min(v), 5), round(max(v), 5)] for k, v in areas.items()}
    if a.per_frame:
        with open(a.per_frame, "w") as f:
            for r in rows:
                f.write(json.dumps({"frame": r["frame"], "kind": r["kind"], "p_defect": round(r["p_defect"], 6),
                                    "logits": [round(v, 5) for v in r["logits"]],
                                    "verdict": r["pred"], "seal_area": round(r["mask_px"] / (640 * 640), 6)}) + "\n")
    wrong = [(r["frame"], r["kind"], round(r["p_defect"], 3)) for r in rows if (r["kind"] != "ok") != (r["pred"] == "defect")]

    src = f"frames {a.frames}" if a.frames else f"held-out seed {a.seed}"
    print(f"\n== sealcheck demo models, {src}, {n} frames, threshold {thr} ==")
    if res["iou"] is not None:
        print(f"seal IoU (aggregate, 640x640): {res['iou']:.4f}   (mean per image {res['iou_mean_per_image']:.4f})"
              f"   bar >= {BARS['iou']}: {'PASS' if res['pass']['iou'] else 'FAIL'}")
    print(f"accuracy: {res['accuracy']:.4f}   bar >= {BARS['accuracy']}: {'PASS' if res['pass']['accuracy'] else 'FAIL'}")
    print(f"recall (defective): {res['recall']:.4f}   bar >= {BARS['recall']}: {'PASS' if res['pass']['recall'] else 'FAIL'}")
    print(f"precision (defective): {res['precision']:.4f}   false-reject rate on good seals: {res['false_reject_rate']:.4f}")
    print(f"confusion: TP {tp}  FN {fn}  FP {fp}  TN {tn}")
    print(f"{'kind':<14}{'n':>6}{'pred ok':>9}{'pred defect':>13}{'mean IoU':>10}")
    for kind, v in res["per_kind"].items():
        mi = "-" if v["iou_mean"] is None else f"{v['iou_mean']:.3f}"
        print(f"{kind:<14}{v['n']:>6}{v['pred_ok']:>9}{v['pred_defect']:>13}{mi:>10}")
    print(f"missing-seal frames: mean predicted seal pixels {res['missing_mean_pred_px']}")
    print("seal area (fraction of 640x640 mask) min..max per kind: "
          + ", ".join(f"{k} {v[0]:.4f}..{v[1]:.4f}" for k, v in res["seal_area_range"].items()))
    print(f"misclassified (frame, kind, p_defect): {wrong[:40]}{' ...' if len(wrong) > 40 else ''}")
    print(f"time {res['seconds']}s")
    ok = all(res["pass"].values())
    print("ALL BARS PASS" if ok else "SOME BARS FAIL")
    if a.json:
        res["misclassified"] = wrong
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
