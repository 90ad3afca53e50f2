#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`); models/README.md.
"""Train the sealcheck demo models on synthetic frames and export them to ONNX.

  python3 scripts/demo/train.py --data DIR --out models [--seg-steps N --cls-steps N]

DIR is written by scripts/demo/gen_seals.py (NNNNNN.jpg, NNNNNN_mask.png, labels.jsonl).
Preprocessing comes only from scripts/demo/contract.py. Steps:
  1. seg net (640x640 -> 2x640x640 logits) on ground-truth masks
  2. seal masks predicted by the trained seg net for every training frame
  3. classifier (4x224x512 -> 2 logits) on frame + PREDICTED mask
  4. ONNX export (opset 17, ir_version 8, static shapes), op/IO checks,
     onnxruntime vs PyTorch relative error (< 1e-4)
"""
import argparse
import json
import math
import os
import random
import sys
import time
from multiprocessing import Pool

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract as C  # noqa: E402

ALLOWED_OPS = {"Conv", "Relu", "BatchNormalization", "MaxPool", "Add", "Concat", "Resize",
               "ConvTranspose", "GlobalAveragePool", "Flatten", "Reshape", "Gemm", "MatMul"}


# ----------------------------------------------------------------------------- models
def cbr(cin, cout, stride=1, k=3):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def up(x, factor):
    # scale_factor (not size) so the export is a Resize with constant scales (no Shape/Slice)
    return F.interpolate(x, scale_factor=float(factor), mode="bilinear", align_corners=False)


class SegNet(nn.Module):
    """Tiny U-Net-ish: strides 2/4/8/16, additive skips, logits at 1/2 res, bilinear x2 to 640."""

    def __init__(self):
        super().__init__()
        self.s2 = cbr(3, 8, 2)                                   # 320
        self.s4 = cbr(8, 16, 2)                                  # 160
        self.s8 = nn.Sequential(cbr(16, 24, 2), cbr(24, 24))     # 80
        self.s16 = nn.Sequential(cbr(24, 48, 2), cbr(48, 48))    # 40
        self.p16 = cbr(48, 24, k=1)
        self.f8 = cbr(24, 24)
        self.p8 = cbr(24, 16, k=1)
        self.f4 = cbr(16, 16)
        self.p4 = cbr(16, 8, k=1)
        self.f2 = cbr(8, 8)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        a = self.s2(x)
        b = self.s4(a)
        c = self.s8(b)
        d = self.s16(c)
        c = self.f8(c + up(self.p16(d), 2))
        b = self.f4(b + up(self.p8(c), 2))
        a = self.f2(a + up(self.p4(b), 2))
        return up(self.head(a), 2)


class ClsNet(nn.Module):
    """Small CNN on RGB+mask 224x512; global avg + global max (MaxPool over the 14x32 map) -> Gemm."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(
            cbr(4, 12, 2),                    # 112x256
            cbr(12, 24, 2),                   # 56x128
            cbr(24, 48, 2), cbr(48, 48),      # 28x64
            cbr(48, 64, 2), cbr(64, 64),      # 14x32
        )
        self.gmax = nn.MaxPool2d((14, 32))
        self.gavg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 2)

    def forward(self, x):
        f = self.f(x)
        g = torch.cat([self.gavg(f), self.gmax(f)], dim=1)
        return self.fc(torch.flatten(g, 1))


def count_macs(model, shape):
    macs = [0]

    def hook(m, i, o):
        if isinstance(m, nn.Conv2d):
            macs[0] += o.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.Linear):
            macs[0] += m.in_features * m.out_features
    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()(torch.zeros(shape))
    for h in hs:
        h.remove()
    return macs[0]


# ----------------------------------------------------------------------------- data
def _load(a):
    d, frame = a
    img = np.asarray(Image.open(os.path.join(d, f"{frame:06d}.jpg")).convert("RGB"))
    m = np.asarray(Image.open(os.path.join(d, f"{frame:06d}_mask.png"))) > 127
    return img, m


def load_dir(d, workers):
    labels = [json.loads(line) for line in open(os.path.join(d, "labels.jsonl"))]
    with Pool(workers) as p:
        items = p.map(_load, [(d, r["frame"]) for r in labels], chunksize=8)
    frames = np.stack([i[0] for i in items])
    masks = np.stack([i[1] for i in items])
    return frames, masks, labels


# ----------------------------------------------------------------------------- training
def lr_at(step, frac, base, warm=100):
    """Linear warm-up, then cosine over frac = progress in [0, 1] (steps or time, whichever is further)."""
    if step < warm:
        return base * (step + 1) / warm
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def batch_aug(x255, *masks, gen=None):
    """Random h/v flips (same for image and masks) and a global gain on 0..255 values."""
    n = x255.shape[0]
    dev = x255.device
    hf = torch.rand(n, generator=gen, device="cpu").to(dev) < 0.5
    vf = torch.rand(n, generator=gen, device="cpu").to(dev) < 0.5
    gain = (0.85 + 0.3 * torch.rand(n, generator=gen, device="cpu")).to(dev).view(n, 1, 1, 1)
    x = torch.where(hf.view(n, 1, 1, 1), x255.flip(3), x255)
    x = torch.where(vf.view(n, 1, 1, 1), x.flip(2), x)
    x = (x * gain).clamp(0, 255)
    out = []
    for m in masks:
        mm = torch.where(hf.view(n, 1, 1), m.flip(2), m)
        mm = torch.where(vf.view(n, 1, 1), mm.flip(1), mm)
        out.append(mm)
    return (x, *out)


def seg_loss(logits, gt):
    ce = F.cross_entropy(logits, gt.long())
    p = torch.softmax(logits.float(), 1)[:, 1]
    g = gt.float()
    inter = (p * g).sum((1, 2))
    den = p.sum((1, 2)) + g.sum((1, 2))
    dice = 1 - (2 * inter + 1) / (den + 1)
    return ce + 0.5 * dice.mean()


@torch.no_grad()
def predict_masks(seg, frames_u8, idx, dev, bs=32):
    seg.eval()
    out = torch.empty((len(idx), 640, 640), dtype=torch.uint8, device=dev)
    for i in range(0, len(idx), bs):
        j = idx[i:i + bs]
        x = C.frames_to_tensor(frames_u8[j], dev)
        out[i:i + len(j)] = C.mask_from_logits(seg(C.seg_input(x))).to(torch.uint8)
    return out


def iou(pred, gt):
    pred, gt = pred.bool(), gt.bool()
    return (pred & gt).sum().item() / max(1, (pred | gt).sum().item())


# ----------------------------------------------------------------------------- export
def export(model, shape, in_name, path):
    model = model.cpu().float().eval()
    dummy = torch.randn(*shape)
    kw = dict(input_names=[in_name], output_names=["logits"], opset_version=17, do_constant_folding=True)
    try:
        torch.onnx.export(model, (dummy,), path, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(model, (dummy,), path, **kw)
    import onnx
    m = onnx.load(path)
    for n in m.graph.node:
        if n.op_type == "Resize":
            for a in n.attribute:
                if a.name == "coordinate_transformation_mode" and a.s == b"pytorch_half_pixel":
                    a.s = b"half_pixel"     # identical for output sizes > 1; plain half_pixel for tract
    # Constant nodes -> initializers (plain graph: only the ops in ALLOWED_OPS)
    keep = []
    for n in m.graph.node:
        if n.op_type == "Constant":
            t = onnx.helper.get_attribute_value(n.attribute[0])
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    m.ir_version = 8
    del m.opset_import[:]
    m.opset_import.append(onnx.helper.make_opsetid("", 17))
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    ops = sorted({n.op_type for n in m.graph.node})
    bad = [o for o in ops if o not in ALLOWED_OPS]
    ins = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input]
    outs = [(o.name, [d.dim_value for d in o.type.tensor_type.shape.dim]) for o in m.graph.output]
    size = os.path.getsize(path)
    print(f"[export] {path}: {size / 1e6:.3f} MB ir_version={m.ir_version} opset={[(o.domain, o.version) for o in m.opset_import]}"
          f" ops={ops} inputs={ins} outputs={outs}", flush=True)
    assert not bad, f"disallowed ops {bad}"
    assert size <= 3_000_000, "model > 3 MB"
    return model


def check_ort(model, path, inputs, in_name):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for x in inputs:
        with torch.no_grad():
            ref = model(x).numpy()
        got = sess.run(None, {in_name: x.numpy()})[0]
        rel = float(np.abs(got - ref).max() / max(1e-12, np.abs(ref).max()))
        worst = max(worst, rel)
    print(f"[check] {os.path.basename(path)}: onnxruntime {ort.__version__} vs torch {torch.__version__}: "
          f"max relative error {worst:.3e} over {len(inputs)} inputs ({'OK' if worst < 1e-4 else 'FAIL'})", flush=True)
    assert worst < 1e-4
    return worst


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="models")
    ap.add_argument("--seed", type=int, default=1234, help="torch/python seed for init + batches")
    ap.add_argument("--seg-steps", type=int, default=2500)
    ap.add_argument("--cls-steps", type=int, default=2500)
    ap.add_argument("--seg-bs", type=int, default=16)
    ap.add_argument("--cls-bs", type=int, default=64)
    ap.add_argument("--val", type=int, default=300, help="frames held out of training for a quick val print")
    ap.add_argument("--max-seconds", type=float, default=330, help="safety cap on total training time")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--defect-weight", type=float, default=2.0)
    a = ap.parse_args()

    t0 = time.time()
    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    print(f"[train] torch {torch.__version__} device {dev} "
          f"({torch.cuda.get_device_name(0) if dev.type == 'cuda' else 'cpu'}), torch seed {a.seed}", flush=True)
    meta_path = os.path.join(a.data, "gen_meta.json")
    if os.path.exists(meta_path):
        print(f"[train] data: {open(meta_path).read().strip()}", flush=True)

    frames_np, masks_np, labels = load_dir(a.data, a.workers)
    n = len(labels)
    print(f"[train] loaded {n} frames {frames_np.shape} in {time.time() - t0:.1f}s", flush=True)
    frames = torch.from_numpy(frames_np).to(dev)
    del frames_np
    gt = torch.cat([C.gt_mask_640(torch.from_numpy(masks_np[i:i + 64]).to(dev)) for i in range(0, n, 64)])
    del masks_np
    y = torch.tensor([0 if r["label"] == "ok" else 1 for r in labels], device=dev)
    kinds = [r["kind"] for r in labels]
    perm = torch.randperm(n, generator=gen)
    nval = min(a.val, n // 5)
    val_idx, tr_idx = perm[:nval].tolist(), perm[nval:].tolist()
    print(f"[train] {len(tr_idx)} train / {nval} val frames; defect fraction {y.float().mean().item():.3f}", flush=True)

    seg = SegNet()
    cls = ClsNet()
    seg_macs = count_macs(seg, (1, 3, 640, 640))
    cls_macs = count_macs(cls, (1, 4, 224, 512))
    print(f"[train] SegNet params {sum(p.numel() for p in seg.parameters())} MACs {seg_macs / 1e6:.1f}M "
          f"(~{2 * seg_macs / 1e9:.3f} GFLOP); ClsNet params {sum(p.numel() for p in cls.parameters())} "
          f"MACs {cls_macs / 1e6:.1f}M (~{2 * cls_macs / 1e9:.3f} GFLOP)", flush=True)
    seg = seg.to(dev).to(memory_format=torch.channels_last)
    cls = cls.to(dev).to(memory_format=torch.channels_last)
    amp = dict(device_type="cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda")
    budget = a.max_seconds

    # ---- 1. segmentation
    opt = torch.optim.AdamW(seg.parameters(), lr=3e-3, weight_decay=1e-4)
    seg.train()
    ts = time.time()
    tr_t = torch.tensor(tr_idx)
    step = 0
    for step in range(a.seg_steps):
        frac = max(step / a.seg_steps, (time.time() - ts) / (budget * 0.6))
        if frac >= 1:
            print(f"[seg] time cap hit at step {step}", flush=True)
            break
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step, frac, 3e-3)
        j = tr_t[torch.randint(len(tr_idx), (a.seg_bs,), generator=gen)].to(dev)
        x, m = batch_aug(C.frames_to_tensor(frames[j]), gt[j], gen=gen)
        xi = C.seg_input(x).contiguous(memory_format=torch.channels_last)
        with torch.autocast(**amp):
            logits = seg(xi)
        loss = seg_loss(logits.float(), m)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 250 == 0 or step == a.seg_steps - 1:
            print(f"[seg] step {step} loss {loss.item():.4f} {time.time() - ts:.0f}s", flush=True)
    seg_done = step + 1
    seg.eval()
    pm = predict_masks(seg, frames, list(range(n)), dev)
    v = torch.tensor(val_idx, device=dev)
    print(f"[seg] {seg_done} steps in {time.time() - ts:.0f}s; IoU train {iou(pm[tr_t.to(dev)], gt[tr_t.to(dev)]):.4f} "
          f"val {iou(pm[v], gt[v]):.4f}", flush=True)

    # ---- 2./3. classifier on predicted masks
    opt = torch.optim.AdamW(cls.parameters(), lr=2e-3, weight_decay=1e-4)
    cw = torch.tensor([1.0, a.defect_weight], device=dev)
    cls.train()
    tc = time.time()
    for step in range(a.cls_steps):
        frac = max(step / a.cls_steps, (time.time() - tc) / max(1.0, budget - (tc - ts)))
        if frac >= 1:
            print(f"[cls] time cap hit at step {step}", flush=True)
            break
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step, frac, 2e-3)
        j = tr_t[torch.randint(len(tr_idx), (a.cls_bs,), generator=gen)].to(dev)
        x, m = batch_aug(C.frames_to_tensor(frames[j]), pm[j].float(), gen=gen)
        xi = C.cls_input(x, m).contiguous(memory_format=torch.channels_last)
        with torch.autocast(**amp):
            logits = cls(xi)
        loss = F.cross_entropy(logits.float(), y[j], weight=cw)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 250 == 0 or step == a.cls_steps - 1:
            print(f"[cls] step {step} loss {loss.item():.4f} {time.time() - tc:.0f}s", flush=True)
    cls_done = step + 1
    cls.eval()
    with torch.no_grad():
        probs = []
        for i in range(0, nval, 64):
            j = v[i:i + 64]
            probs.append(C.p_defect(cls(C.cls_input(C.frames_to_tensor(frames[j]), pm[j].float()))))
        p = torch.cat(probs) if probs else torch.zeros(0, device=dev)
    pred = (p >= C.THRESHOLD).long()
    yv = y[v]
    acc = (pred == yv).float().mean().item() if nval else float("nan")
    rec = ((pred == 1) & (yv == 1)).sum().item() / max(1, (yv == 1).sum().item())
    print(f"[cls] {cls_done} steps in {time.time() - tc:.0f}s; val acc {acc:.4f} recall(defect) {rec:.4f}", flush=True)
    per = {}
    for k_i, vi in enumerate(val_idx):
        per.setdefault(kinds[vi], [0, 0])[int(pred[k_i])] += 1
    print(f"[cls] val per kind [pred ok, pred defect]: {json.dumps(per, sort_keys=True)}", flush=True)

    # ---- 4. export + check
    os.makedirs(a.out, exist_ok=True)
    seg_path, cls_path = os.path.join(a.out, "seg.onnx"), os.path.join(a.out, "cls.onnx")
    seg_cpu = export(seg, (1, 3, 640, 640), "images", seg_path)
    cls_cpu = export(cls, (1, 4, 224, 512), "input", cls_path)
    chk = [int(i) for i in val_idx[:3]] or [0]
    seg_in, cls_in = [], []
    with torch.no_grad():
        for i in chk:
            x = C.frames_to_tensor(frames[i:i + 1].cpu())
            si = C.seg_input(x)
            seg_in.append(si)
            cls_in.append(C.cls_input(x, C.mask_from_logits(seg_cpu(si))))
    seg_in.append(torch.randn(1, 3, 640, 640, generator=gen))
    cls_in.append(torch.randn(1, 4, 224, 512, generator=gen))
    e1 = check_ort(seg_cpu, seg_path, seg_in, "images")
    e2 = check_ort(cls_cpu, cls_path, cls_in, "input")
    summary = dict(torch=torch.__version__, device=str(dev), torch_seed=a.seed, seg_steps=seg_done, cls_steps=cls_done,
                   seg_macs=seg_macs, cls_macs=cls_macs, val_frames=nval, val_acc=acc, val_recall=rec,
                   rel_err_seg=e1, rel_err_cls=e2, train_seconds=round(time.time() - t0, 1))
    print("[train] summary " + json.dumps(summary), flush=True)
    with open(os.path.join(a.out, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
