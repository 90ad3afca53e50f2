#!/bin/sh
# Run by: `make jetson-check` (issue 37, item 3); docs/JETSON.md, "What was verified".
#
# The arm64 binary (`make jetson`'s) against the x86_64 binary on the same work: the demo
# clip through `sealcheck run` with tract and with ONNX Runtime's CPU library of each
# architecture, `check-config`, and `evaluate` (tract the reference, ONNX Runtime the
# candidate). The arm64 binary runs under qemu-aarch64-static with the arm64 system root
# of scripts/package/arm64_sysroot.sh (its GStreamer, plugins and C libraries). It passes
# when, for each engine, every frame has one result line from both and the two agree on
# verdict and reason for every frame, the result lines have the same keys, check-config
# exits alike, and evaluate's JSON has the same keys and counts. Under emulation the
# speed means nothing: the figures printed are the emulator's.
#
#   scripts/ci/arm64_run.sh [ARM64_BINARY [X86_64_BINARY]]
#
# Defaults: target/jetson/aarch64-unknown-linux-gnu/release/sealcheck and
# target/release/sealcheck. FRAMES (default 300) limits the clip of `run`, EVAL_FRAMES
# (default 60: evaluate runs both engines on each frame, slow under emulation) that of
# `evaluate`; KEEP=1 keeps the work folder (target/arm64-run).
set -eu
cd "$(dirname "$0")/../.."

arm=${1:-target/jetson/aarch64-unknown-linux-gnu/release/sealcheck}
x86=${2:-target/release/sealcheck}
FRAMES=${FRAMES:-300}
EVAL_FRAMES=${EVAL_FRAMES:-60}
PYTHON=${PYTHON:-python3}
QEMU=${QEMU:-qemu-aarch64-static}

die() { echo "arm64_run: $*" >&2; exit 1; }
[ -x "$arm" ] || die "no arm64 binary at $arm: build it with \`make jetson\`"
[ -x "$x86" ] || die "no x86_64 binary at $x86: build it with \`make build\`"
command -v "$QEMU" >/dev/null 2>&1 || die "$QEMU not found: apt-get install qemu-user-static"
file -L "$arm" | grep -q 'ARM aarch64' || die "$arm is not an aarch64 binary"

sysroot=$(pwd)/target/arm64-sysroot
scripts/package/arm64_sysroot.sh "$sysroot"
ORT_ARCH=aarch64 ORT_DEST=$(pwd)/target/arm64-ort PYTHON=$PYTHON scripts/fetch_onnxruntime.sh >&2
ORT_DEST=$(pwd)/.ort/lib PYTHON=$PYTHON scripts/fetch_onnxruntime.sh >&2
ort_arm=$(pwd)/target/arm64-ort/libonnxruntime.so.1.31.1
ort_x86=$(pwd)/.ort/lib/libonnxruntime.so.1.31.1

work=$(pwd)/target/arm64-run
rm -rf "$work"
# The clip's first $2 frames (linked) with their labels, in folder $1; prints how many.
clip_prefix() {
    mkdir -p "$1"
    n=0
    while [ "$n" -lt "$2" ]; do
        f=$(printf 'frame_%05d.jpg' "$n")
        [ -f "samples/demo_clip/$f" ] || break
        ln -s "$(pwd)/samples/demo_clip/$f" "$1/$f"
        n=$((n + 1))
    done
    head -n "$n" samples/demo_clip/labels.jsonl >"$1/labels.jsonl"
    echo "$n"
}
frames=$(clip_prefix "$work/clip" "$FRAMES")
eval_frames=$(clip_prefix "$work/eval-clip" "$EVAL_FRAMES")

# Debian 12's qemu (7.2) passes this machine's /proc/cpuinfo through, an x86_64 one, and
# ONNX Runtime's CPU detection (cpuinfo) dereferences NULL on it: the emulated binary gets
# the root's /proc/cpuinfo instead (qemu looks up absolute paths in the root first), that of
# an Orin's six Cortex-A78AE cores.
mkdir -p "$sysroot/proc"
cpu=0
while [ "$cpu" -lt 6 ]; do
    printf 'processor\t: %d\nBogoMIPS\t: 62.50\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp uscat ilrcpc flagm paca pacg\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd42\nCPU revision\t: 1\n\n' "$cpu"
    cpu=$((cpu + 1))
done >"$sysroot/proc/cpuinfo"

# The arm64 binary under the emulator: its loader, libraries and GStreamer plugins from the
# root (qemu looks up absolute paths there first); the plugin registry of its own, scanned
# in process (the scanner would be another arm64 program).
run_arm() {
    QEMU_LD_PREFIX=$sysroot GST_REGISTRY_FORK=no GST_REGISTRY=$work/registry-arm64.bin \
        GST_PLUGIN_SYSTEM_PATH=/usr/lib/aarch64-linux-gnu/gstreamer-1.0 \
        ORT_DYLIB_PATH=$ort_arm "$QEMU" "$arm" "$@"
}
run_x86() { ORT_DYLIB_PATH=$ort_x86 "$x86" "$@"; }

config() { # engine arch -> config file
    sed -e "s|^location = .*|location = \"$work/clip/frame_%05d.jpg\"|" \
        -e "s|^backend = .*|backend = \"$1\"|" \
        -e "s|^results = .*|results = \"$work/$1-$2.jsonl\"|" \
        -e "s|\.\./models/|$(pwd)/models/|" \
        config/demo.toml >"$work/$1-$2.toml"
    echo "$work/$1-$2.toml"
}

# The x86_64 runs one after another; the arm64 ones (slow under emulation) side by side.
status=0
run_one() { # engine arch
    cfg=$(config "$1" "$2")
    start=$(date +%s)
    if [ "$2" = arm64 ]; then run_arm run --config "$cfg"; else run_x86 run --config "$cfg"; fi \
        >"$work/$1-$2.log" 2>&1 || {
        tail -20 "$work/$1-$2.log"
        echo "arm64_run: sealcheck run ($1, $2) failed" >&2
        return 1
    }
    echo "--- sealcheck run, $1, $2: $(grep -c . "$work/$1-$2.jsonl") result lines for $frames frames in $(($(date +%s) - start)) s"
}
for engine in tract onnxruntime; do
    run_one "$engine" x86_64 || die "sealcheck run ($engine, x86_64) failed"
done
pids=""
for engine in tract onnxruntime; do
    run_one "$engine" arm64 &
    pids="$pids $!"
done
for pid in $pids; do
    wait "$pid" || die "an arm64 run failed (above)"
done
for engine in tract onnxruntime; do
    "$PYTHON" - "$work/$engine-x86_64.jsonl" "$work/$engine-arm64.jsonl" "$frames" "$engine" <<'EOF' || status=1
import json, sys
x86, arm, frames, engine = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def load(path):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return {l["seq"]: l for l in lines}, [sorted(l.keys()) for l in lines]
a, ka = load(x86)
b, kb = load(arm)
problems = []
if len(a) != frames or len(b) != frames:
    problems.append(f"result lines: x86_64 {len(a)}, arm64 {len(b)}, frames {frames}")
if set(map(tuple, ka)) != set(map(tuple, kb)):
    problems.append(f"keys differ: x86_64 {sorted(set(map(tuple, ka)))} arm64 {sorted(set(map(tuple, kb)))}")
same = [s for s in a if s in b and (a[s]["verdict"], a[s].get("reason")) == (b[s]["verdict"], b[s].get("reason"))]
worst = {}
for key in ("defect_prob", "seal_area"):
    d = [abs(a[s][key] - b[s][key]) for s in a if s in b and isinstance(a[s].get(key), (int, float)) and isinstance(b[s].get(key), (int, float))]
    worst[key] = max(d) if d else None
for s in sorted(a):
    if s in b and s not in same:
        problems.append(f"frame {s}: x86_64 {a[s]['verdict']}/{a[s].get('reason')} arm64 {b[s]['verdict']}/{b[s].get('reason')}")
print(f"{engine}: verdict and reason equal on {len(same)} of {frames} frames; worst |difference| defect_prob {worst['defect_prob']}, seal_area {worst['seal_area']}")
for p in problems[:20]:
    print("  MISMATCH:", p)
sys.exit(1 if problems else 0)
EOF
done

echo "--- check-config (the demo config, tract)"
cfg=$work/tract-x86_64.toml
run_x86 check-config "$cfg" >"$work/check-x86_64.txt" 2>&1; cx=$?
run_arm check-config "$cfg" >"$work/check-arm64.txt" 2>&1; ca=$?
echo "check-config exit: x86_64 $cx, arm64 $ca"
if [ "$cx" != 0 ] || [ "$ca" != "$cx" ]; then
    cat "$work/check-arm64.txt"
    echo "  MISMATCH: check-config exits $cx (x86_64) and $ca (arm64)"
    status=1
fi

echo "--- evaluate (tract the reference, onnxruntime:cpu the candidate, $eval_frames frames)"
run_x86 evaluate --config "$cfg" --images "$work/eval-clip" --candidate onnxruntime:cpu \
    --report "$work/eval-x86_64" >"$work/eval-x86_64.log" 2>&1 || { tail -20 "$work/eval-x86_64.log"; die "evaluate (x86_64)"; }
run_arm evaluate --config "$cfg" --images "$work/eval-clip" --candidate onnxruntime:cpu \
    --report "$work/eval-arm64" >"$work/eval-arm64.log" 2>&1 || { tail -20 "$work/eval-arm64.log"; die "evaluate (arm64)"; }
"$PYTHON" - "$work/eval-x86_64/evaluation.json" "$work/eval-arm64/evaluation.json" <<'EOF' || status=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__
problems = []
if shape(a) != shape(b):
    problems.append("evaluation.json differs in its keys or types")
if a.get("frames") != b.get("frames"):
    problems.append(f"frames: x86_64 {a.get('frames')}, arm64 {b.get('frames')}")
def verdicts(doc):
    engines = [doc.get("reference", {})] + doc.get("candidates", [])
    return [[(f.get("verdict"), f.get("reason")) for f in c.get("per_frame", [])] for c in engines]
if verdicts(a) != verdicts(b):
    problems.append("the per-frame verdicts (reference or candidate) differ")
print(f"evaluate: {a.get('frames')} frames; evaluation.json keys and types equal: {shape(a) == shape(b)}; per-frame verdicts equal: {verdicts(a) == verdicts(b)}")
for p in problems:
    print("  MISMATCH:", p)
sys.exit(1 if problems else 0)
EOF

[ "${KEEP:-0}" = 1 ] || find "$work" -name '*.png' -delete
if [ "$status" = 0 ]; then
    echo "ok: the arm64 binary (under $QEMU) gives the x86_64 binary's results on $frames frames (tract and ONNX Runtime), check-config and evaluate ($eval_frames frames)"
fi
exit $status
