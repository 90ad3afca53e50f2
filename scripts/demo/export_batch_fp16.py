#!/usr/bin/env python3
# Run by: scripts/demo/make_demo_assets.sh (`make demo-assets`) and tests/demo_assets_batch.rs; models/README.md.
"""Dynamic-batch and FP16 versions of the sealcheck demo models (issue 21), made from the FP32 files.

  python3 scripts/demo/export_batch_fp16.py [--models models] [--out DIR] [--check [--frames N]]

From `seg.onnx` and `cls.onnx` in --models, writes (into --out, default --models):

  seg_batch.onnx, cls_batch.onnx        FP32, first dim of input and output = dim_param "batch"
  seg_fp16.onnx, cls_fp16.onnx          FP16 weights and compute, batch 1 (from seg.onnx / cls.onnx)
  seg_batch_fp16.onnx, cls_batch_fp16.onnx   FP16, dynamic batch (from the *_batch.onnx files)

Rule: the FP16 file of `X.onnx` is `X_fp16.onnx` beside it. Inputs and outputs of the FP16 files
stay float32 (a Cast to float16 after each graph input, a Cast to float32 before each graph
output; "keep_io_types"), so callers feed and read float32 unchanged. Resize's `scales` stay
float32 (the operator only takes float32 there). Opset 17, IR version and names unchanged,
weights inside the file.

The conversion needs only `onnx` and `numpy` and is deterministic: the same FP32 files give the
same bytes (tests/demo_assets_batch.rs re-runs it and compares). Only the operators the demo
models use are accepted (each one has float16 kernels on ONNX Runtime's CUDA EP, and --check ran
every node there); anything else stops the script instead of producing a model nobody checked.

--check (needs onnxruntime) runs, on ONNX Runtime (CPU; also CUDA when the CUDA EP is
available, every node required on it):
  * batch files: random batch-4 inputs (seed 21); each row against a batch-1 run of the FP32
    model on that row (max abs diff of logits); the same for the FP16 batch files against the
    FP16 static files;
  * FP16 files: operator types; logits against FP32 on frames of samples/demo_clip
    preprocessed as in models/README.md (numpy re-implementation of the bilinear, half-pixel,
    no-antialias resize): max / mean abs diff, seg mask agreement (argmax), cls argmax
    agreement, and the end-to-end FP16 pipeline's verdicts against FP32's; file sizes.
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STEMS = ("seg", "cls")
BATCH = "batch"
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16

# Operators this converter accepts, and for each the input positions that must stay float32.
# Every one has float16 kernels on ONNX Runtime's CUDA EP. ORT's CPU EP lacks
# float16 kernels for some of them (Conv, Resize, ...) and runs those nodes in float32 behind
# casts it inserts itself, so the files also load on CPU.
FP16_OPS = {
    "Conv": (),
    "Relu": (),
    "Add": (),
    "Resize": (1, 2),  # roi, scales: float32 (scales is tensor(float) in every opset)
    "MaxPool": (),
    "GlobalAveragePool": (),
    "Concat": (),
    "Flatten": (),
    "Gemm": (),
}
# Operators that do not depend on the batch size as long as they keep axis 0 (checked below).
BATCH_SAFE_OPS = {"Conv", "Relu", "Add", "MaxPool", "AveragePool", "GlobalAveragePool",
                  "GlobalMaxPool", "Gemm", "Sigmoid", "Softmax", "Resize", "Concat", "Flatten",
                  "Reshape", "BatchNormalization", "Mul", "Sub", "Div", "Clip"}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def initializers(graph):
    return {t.name: t for t in graph.initializer}


def tag(model, source_path, what):
    """Provenance in metadata_props (deterministic: source file name and hash only)."""
    props = [("sealcheck.derived_from", os.path.basename(source_path)),
             ("sealcheck.derived_from_sha256", sha256(source_path)),
             ("sealcheck.conversion", what),
             ("sealcheck.made_by", "scripts/export_batch_fp16.py")]
    for k, v in props:
        for p in model.metadata_props:
            if p.key == k:
                p.value = v
                break
        else:
            model.metadata_props.add(key=k, value=v)


# ---------------------------------------------------------------------------------------------
# dynamic batch

def make_batch(model, name):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = initializers(g)
    for node in g.node:
        if node.op_type not in BATCH_SAFE_OPS:
            sys.exit(f"export_batch_fp16: {name}: {node.op_type} ({node.name}) is not known to be "
                     f"batch-safe; check it and add it to BATCH_SAFE_OPS")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Reshape":
            shape = inits.get(node.input[1])
            if shape is None:
                sys.exit(f"export_batch_fp16: {name}: Reshape {node.name} has a computed shape")
            s = numpy_helper.to_array(shape).copy()
            if s[0] not in (0, -1):
                # keep the batch dim: 0 copies input dim 0 (allowzero must be 0)
                if attrs.get("allowzero", 0):
                    sys.exit(f"export_batch_fp16: {name}: Reshape {node.name} has allowzero=1")
                s[0] = 0
                shape.CopyFrom(numpy_helper.from_array(s.astype(np.int64), shape.name))
        elif node.op_type == "Flatten" and attrs.get("axis", 1) != 1:
            sys.exit(f"export_batch_fp16: {name}: Flatten {node.name} axis {attrs.get('axis')} "
                     f"mixes the batch into the features")
        elif node.op_type in ("Concat", "Softmax") and attrs.get("axis", -1) == 0:
            sys.exit(f"export_batch_fp16: {name}: {node.op_type} {node.name} works along the batch axis")
        elif node.op_type == "Resize":
            if len(node.input) > 3 and node.input[3]:
                sys.exit(f"export_batch_fp16: {name}: Resize {node.name} has fixed sizes")
            scales = numpy_helper.to_array(inits[node.input[2]])
            if scales[0] != 1:
                sys.exit(f"export_batch_fp16: {name}: Resize {node.name} scales the batch axis")
    for v in list(g.input) + list(g.output):
        d0 = v.type.tensor_type.shape.dim[0]
        if d0.dim_value != 1:
            sys.exit(f"export_batch_fp16: {name}: {v.name} does not start with batch 1")
        d0.Clear()
        d0.dim_param = BATCH
    # intermediate shapes (none in the demo files) would still say 1: drop them
    del g.value_info[:]
    return m


# ---------------------------------------------------------------------------------------------
# FP16

def to_fp16(model, name):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = initializers(g)
    keep32 = set()   # initializers read at a float32-only position
    use16 = set()    # initializers read at a float16 position
    for node in g.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in FP16_OPS:
            sys.exit(f"export_batch_fp16: {name}: {node.op_type} ({node.name}) is not in FP16_OPS "
                     f"(check it runs in float16 on ONNX Runtime CUDA and TensorRT, then add it)")
        for i, x in enumerate(node.input):
            if x in inits and inits[x].data_type == F32:
                (keep32 if i in FP16_OPS[node.op_type] else use16).add(x)
    both = keep32 & use16
    if both:
        sys.exit(f"export_batch_fp16: {name}: initializers needed in both precisions: {sorted(both)}")
    new_inits = []
    for t in g.initializer:
        if t.name in use16:
            a = numpy_helper.to_array(t)
            if np.abs(a).max() >= 65504:
                sys.exit(f"export_batch_fp16: {name}: {t.name} overflows float16")
            t = numpy_helper.from_array(a.astype(np.float16), t.name)
        new_inits.append(t)
    del g.initializer[:]
    g.initializer.extend(new_inits)
    for v in g.value_info:
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = F16

    taken = {x for n in g.node for x in list(n.input) + list(n.output)} | set(inits)

    def fresh(base):
        n, i = base, 0
        while n in taken:
            i += 1
            n = f"{base}_{i}"
        taken.add(n)
        return n

    head, tail = [], []
    rename_in = {}
    for v in g.input:
        if v.name in inits or v.type.tensor_type.elem_type != F32:
            continue
        x16 = fresh(f"{v.name}_fp16")
        rename_in[v.name] = x16
        head.append(helper.make_node("Cast", [v.name], [x16], name=fresh(f"Cast_{v.name}_to_fp16"), to=F16))
    rename_out = {}
    for v in g.output:
        if v.type.tensor_type.elem_type != F32:
            continue
        y16 = fresh(f"{v.name}_fp16")
        rename_out[v.name] = y16
        tail.append(helper.make_node("Cast", [y16], [v.name], name=fresh(f"Cast_{v.name}_to_fp32"), to=F32))
    body = []
    for node in g.node:
        n = onnx.NodeProto()
        n.CopyFrom(node)
        for i, x in enumerate(n.input):
            if x in rename_in:
                n.input[i] = rename_in[x]
            elif x in rename_out:  # a graph output also read inside the graph
                n.input[i] = rename_out[x]
        for i, y in enumerate(n.output):
            if y in rename_out:
                n.output[i] = rename_out[y]
        body.append(n)
    del g.node[:]
    g.node.extend(head + body + tail)
    return m


def fp16_name(path):
    root, ext = os.path.splitext(path)
    return f"{root}_fp16{ext}"


def save(model, path):
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


def export(models_dir, out_dir):
    written = []
    for stem in STEMS:
        src = os.path.join(models_dir, f"{stem}.onnx")
        base = onnx.load(src)
        batch_path = os.path.join(out_dir, f"{stem}_batch.onnx")
        batch = make_batch(base, stem)
        tag(batch, src, "dynamic batch (dim_param batch), float32")
        save(batch, batch_path)
        written.append(batch_path)
        for path, model in ((src, base), (batch_path, batch)):
            dst = os.path.join(out_dir, os.path.basename(fp16_name(path)))
            m16 = to_fp16(model, stem)
            tag(m16, path, "float16 weights and compute, float32 inputs/outputs (Cast at the edges)")
            save(m16, dst)
            written.append(dst)
    for p in written:
        print(f"export_batch_fp16: {p} {os.path.getsize(p)} bytes sha256 {sha256(p)}", file=sys.stderr)
    return written


# ---------------------------------------------------------------------------------------------
# --check

RGB_MEAN = np.array((0.485, 0.456, 0.406), np.float32).reshape(3, 1, 1)
RGB_STD = np.array((0.229, 0.224, 0.225), np.float32).reshape(3, 1, 1)


def _axis_weights(n_in, n_out):
    """F.interpolate(mode='bilinear', align_corners=False) along one axis: indices and weights."""
    scale = n_in / n_out
    src = np.maximum((np.arange(n_out, dtype=np.float64) + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = (src - i0).astype(np.float32)
    return i0, i1, 1.0 - w1, w1


def resize(x, hw):
    """x: C,H,W float32 -> C,h,w, bilinear, half-pixel centres, no antialias."""
    y0, y1, wy0, wy1 = _axis_weights(x.shape[1], hw[0])
    x0, x1, wx0, wx1 = _axis_weights(x.shape[2], hw[1])
    rows = x[:, y0, :] * wy0[None, :, None] + x[:, y1, :] * wy1[None, :, None]
    return rows[:, :, x0] * wx0[None, None, :] + rows[:, :, x1] * wx1[None, None, :]


def frame_inputs(path):
    from PIL import Image
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32).transpose(2, 0, 1)
    seg = (resize(rgb, (640, 640)) / 255.0 - RGB_MEAN) / RGB_STD
    cls_rgb = (resize(rgb, (224, 512)) / 255.0 - RGB_MEAN) / RGB_STD
    return seg[None].astype(np.float32), cls_rgb.astype(np.float32)


def cls_input(cls_rgb, seg_logits):
    mask = (seg_logits[0].argmax(axis=0) == 1).astype(np.float32)[None]
    return np.concatenate([cls_rgb, resize(mask, (224, 512))], axis=0)[None].astype(np.float32)


def check(out_dir, models_dir, clip, n_frames):
    import json

    import onnxruntime as ort
    print(f"check: onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}, "
          f"providers {ort.get_available_providers()}")
    eps = ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in ort.get_available_providers():
        eps.append("CUDAExecutionProvider")
    failed = []

    def session(path, ep="CPUExecutionProvider"):
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if ep == "CUDAExecutionProvider":
            # every node must run on the CUDA EP (no silent fallback to the CPU); no TF32, as
            # sealcheck's default ([inference.onnxruntime] cuda_tf32 = false)
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            return ort.InferenceSession(path, so, providers=[(ep, {"use_tf32": "0"})])
        return ort.InferenceSession(path, so, providers=[ep])

    def run(sess, x):
        return sess.run(None, {sess.get_inputs()[0].name: x})[0]

    def p(name):
        return os.path.join(out_dir, name)

    def fp32(stem):
        return os.path.join(models_dir, f"{stem}.onnx")

    print("\nsizes and hashes:")
    for stem in STEMS:
        for f in (fp32(stem), p(f"{stem}_batch.onnx"), p(f"{stem}_fp16.onnx"), p(f"{stem}_batch_fp16.onnx")):
            m = onnx.load(f)
            n16 = sum(t.data_type == F16 for t in m.graph.initializer)
            io = " ".join(f"{v.name}:{TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()}"
                          f"[{','.join(str(d.dim_param or d.dim_value) for d in v.type.tensor_type.shape.dim)}]"
                          for v in list(m.graph.input) + list(m.graph.output))
            print(f"  {os.path.basename(f):20s} {os.path.getsize(f):7d} bytes  sha256 {sha256(f)}  "
                  f"fp16 initializers {n16:2d}/{len(m.graph.initializer):2d}  {io}")
    for stem in STEMS:
        ops = sorted({n.op_type for n in onnx.load(p(f"{stem}_fp16.onnx")).graph.node})
        print(f"  {stem}_fp16 / {stem}_batch_fp16 operator types: {' '.join(ops)}")

    # 1. batch files: batch 4 against 4 batch-1 runs of the static file, on each EP
    shapes = {"seg": (3, 640, 640), "cls": (4, 224, 512)}
    for ep in eps:
        print(f"\n[{ep}] batch files, random batch-4 input (seed 21), each row vs a batch-1 run:")
        rng = np.random.default_rng(21)
        for stem in STEMS:
            x = rng.standard_normal((4,) + shapes[stem], dtype=np.float32)
            for batch, single, tol in ((p(f"{stem}_batch.onnx"), fp32(stem), 1e-4),
                                       (p(f"{stem}_batch_fp16.onnx"), p(f"{stem}_fp16.onnx"), 2e-2)):
                yb = run(session(batch, ep), x)
                ref = session(single, ep)
                y1 = np.concatenate([run(ref, x[i:i + 1]) for i in range(4)])
                d = float(np.abs(yb - y1).max())
                print(f"  {os.path.basename(batch):20s} vs {os.path.basename(single):14s} max abs diff {d:.3g} "
                      f"(output {list(yb.shape)})")
                if not d <= tol or yb.shape[0] != 4:
                    failed.append(f"{ep} {os.path.basename(batch)}: {d}")

    # 2. FP16 (and, on CUDA, FP32) on each EP against the FP32 files on the CPU, on clip frames
    frames = sorted(f for f in os.listdir(clip) if f.startswith("frame_"))
    if n_frames:
        frames = frames[::max(1, len(frames) // n_frames)][:n_frames]
    expected = {}
    exp_path = os.path.join(clip, "expected.jsonl")
    if os.path.exists(exp_path):
        with open(exp_path) as f:
            for line in f:
                r = json.loads(line)
                expected[f"frame_{r['frame']:05d}"] = np.array(r["logits"], np.float32)
    ref_s, ref_c = session(fp32("seg")), session(fp32("cls"))
    cands = {}  # (ep, precision) -> sessions (seg, cls, seg_batch, cls_batch)
    for ep in eps:
        for prec in (("fp32", "fp16") if ep != "CPUExecutionProvider" else ("fp16",)):
            sfx = "" if prec == "fp32" else "_fp16"
            names = [f"seg{sfx}.onnx", f"cls{sfx}.onnx", f"seg_batch{sfx}.onnx", f"cls_batch{sfx}.onnx"]
            cands[(ep, prec)] = [session(fp32(n[:3]) if n in ("seg.onnx", "cls.onnx") else p(n), ep) for n in names]
    stats = {k: {"seg_max": 0.0, "seg_mean": [], "agree": [], "area": 0.0, "cls_max": [], "cls_arg": 0,
                 "e2e": 0, "bseg": 0.0, "bcls": 0.0} for k in cands}
    exp_d, seg_ref_max, buf = [], 0.0, []
    for fi, f in enumerate(frames):
        xs, crgb = frame_inputs(os.path.join(clip, f))
        y32 = run(ref_s, xs)
        seg_ref_max = max(seg_ref_max, float(np.abs(y32).max()))
        m32 = y32[0].argmax(0)
        xc = cls_input(crgb, y32)
        l32 = run(ref_c, xc)
        stem = os.path.splitext(f)[0]
        if stem in expected:
            exp_d.append(float(np.abs(l32[0] - expected[stem]).max()))
        buf.append((xs, xc, y32, l32))
        for k, (s, c, sb, cb) in cands.items():
            st = stats[k]
            y = run(s, xs)
            d = np.abs(y - y32)
            st["seg_max"] = max(st["seg_max"], float(d.max()))
            st["seg_mean"].append(float(d.mean()))
            m = y[0].argmax(0)
            st["agree"].append(float((m == m32).mean()))
            st["area"] = max(st["area"], abs(float((m == 1).mean()) - float((m32 == 1).mean())))
            lc = run(c, xc)
            st["cls_max"].append(float(np.abs(lc - l32).max()))
            st["cls_arg"] += int(lc.argmax() == l32.argmax())
            st["e2e"] += int(run(c, cls_input(crgb, y)).argmax() == l32.argmax())
            if len(buf) == 4:
                yb = run(sb, np.concatenate([b[0] for b in buf]))
                st["bseg"] = max(st["bseg"], float(np.abs(yb - np.concatenate([b[2] for b in buf])).max()))
                lb = run(cb, np.concatenate([b[1] for b in buf]))
                st["bcls"] = max(st["bcls"], float(np.abs(lb - np.concatenate([b[3] for b in buf])).max()))
        if len(buf) == 4:
            buf = []
    n = len(frames)
    print(f"\nclip frames: {n} of {clip}, preprocessed in numpy as in models/README.md; reference = "
          f"FP32 files on the CPU EP (seg |logit| up to {seg_ref_max:.1f})")
    if exp_d:
        print(f"  preprocessing sanity: reference cls logits vs expected.jsonl (torch contract): "
              f"max abs diff {max(exp_d):.3g} over {len(exp_d)} frames")
    for (ep, prec), st in stats.items():
        worst = min(st["agree"])
        print(f"[{ep}] {prec}:")
        print(f"  seg: logits max abs diff {st['seg_max']:.4g}, mean abs diff {np.mean(st['seg_mean']):.3g}; "
              f"mask agreement mean {np.mean(st['agree']):.7f}, worst frame {worst:.7f} "
              f"({int(round((1 - worst) * 640 * 640))} of 409600 pixels); seal area max diff {st['area']:.2g}")
        print(f"  cls (same input, reference mask): logits max abs diff {max(st['cls_max']):.4g}, "
              f"mean of per-frame max {np.mean(st['cls_max']):.3g}; argmax agreement {st['cls_arg']}/{n}")
        print(f"  whole pipeline (its own seg mask -> its cls): verdict agreement {st['e2e']}/{n}")
        print(f"  batch files on the frames in batches of 4: max abs diff seg {st['bseg']:.4g}, cls {st['bcls']:.4g}")
        if worst < 0.999 or st["cls_arg"] != n or st["e2e"] != n:
            failed.append(f"{ep} {prec}: agreement below the bar")
    if failed:
        sys.exit("check FAILED: " + "; ".join(failed))
    print("\ncheck: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="models", help="folder with seg.onnx and cls.onnx (FP32)")
    ap.add_argument("--out", default=None, help="where the new files go (default: --models)")
    ap.add_argument("--check", action="store_true", help="also compare the files on onnxruntime")
    ap.add_argument("--no-export", action="store_true", help="with --check: check the files already there")
    ap.add_argument("--clip", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                   "samples", "demo_clip"))
    ap.add_argument("--frames", type=int, default=0, help="clip frames for the FP16 comparison (0: all)")
    a = ap.parse_args()
    out = a.out or a.models
    os.makedirs(out, exist_ok=True)
    if not a.no_export:
        export(a.models, out)
    if a.check:
        check(out, a.models, a.clip, a.frames)


if __name__ == "__main__":
    main()
