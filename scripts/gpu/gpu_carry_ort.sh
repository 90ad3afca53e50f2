#!/bin/sh
# Run by hand, before every scripts/gpu/ run on a lent GPU (docs/PERFORMANCE-gpu-pipeline.md); the other scripts/gpu/ scripts source its `env`.
# Carries ONNX Runtime's CUDA build (onnxruntime-gpu 1.31.1: libonnxruntime,
# its CUDA provider and the Python binding), Debian's GStreamer runtime and
# the sealcheck binaries onto a lent GPU machine, whose working-tree transfer
# is limited to 64 MiB per call: xz pieces, one per call, collected in the
# machine's /tmp (it persists while the machine stays warm), then joined.
# The checkout's own files travel with every call too (31 MB since
# samples/demo_cavities): a piece must stay under about 35 MB, so pieces are
# 30 MiB (seven for the wheel), and .device/bin with gst.tar.xz go in a call
# of their own (docs/PERFORMANCE-gpu-pipeline.md, issue 38).
#
# Here (the build machine):
#   scripts/gpu/gpu_carry_ort.sh prepare [BINARY...]
#       # wheel -> .device/ort/ort.tar.xz.part-NN (+ MANIFEST), GStreamer ->
#       # .device/gst.tar.xz, each BINARY stripped -> .device/bin/NAME.xz
#   then `run` calls back to back, each carrying ONE piece plus .device/ort/MANIFEST:
#     carry [".device/ort/ort.tar.xz.part-00", ".device/ort/MANIFEST", ...]
# There (the GPU machine), each call starts with:
#   scripts/gpu/gpu_carry_ort.sh receive        # stash the carried pieces in /tmp; joins when all are
#                                           # there; unpacks carried GStreamer and binaries (/tmp/sealcheck-carry/bin)
#   eval "$(scripts/gpu/gpu_carry_ort.sh env)"  # ORT_DYLIB_PATH, LD_LIBRARY_PATH, GST_*, PYTHONPATH
#
# The wheel's platform tag is manylinux_2_28 (pip finds no 1.31.1 under
# manylinux_2_27). The GPU machine's Python environment already has cuDNN 9,
# cuBLAS, cuFFT, cuRAND and NVRTC for CUDA 13 (LD_LIBRARY_PATH points at them).
set -eu
cd "$(dirname "$0")/../.."
ORT_VERSION=1.31.1
PIECE=30M
STORE=/tmp/sealcheck-carry
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
GST_DEBS="libgstreamer1.0-0 libgstreamer-plugins-base1.0-0 gstreamer1.0-plugins-base
 gstreamer1.0-plugins-good liborc-0.4-0 libjpeg62-turbo libglib2.0-0 libdw1 libunwind8 libelf1
 libcap2 libffi8 libpcre2-8-0 libzstd1 liblzma5 libbz2-1.0 zlib1g libgudev-1.0-0
 libgstrtspserver-1.0-0"

prepare() {
    work=$(mktemp -d)
    mkdir -p .device/ort .device/bin
    rm -f .device/ort/ort.tar.xz.part-* .device/ort/MANIFEST
    pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 "onnxruntime-gpu==$ORT_VERSION" -d "$work/wheel"
    (cd "$work" && mkdir pkg && cd pkg && unzip -q ../wheel/*.whl \
        && rm -f onnxruntime/capi/libonnxruntime_providers_tensorrt.so)
    tar cf - -C "$work/pkg" . | xz -6 -T0 | split -b "$PIECE" -d - .device/ort/ort.tar.xz.part-
    (cd .device/ort && sha256sum ort.tar.xz.part-* >MANIFEST)
    echo "pieces: $(ls .device/ort/ort.tar.xz.part-* | wc -l) (carry one per call, with .device/ort/MANIFEST)"
    mkdir -p "$work/debs" "$work/gst"
    (cd "$work/debs" && apt-get download $GST_DEBS >/dev/null 2>&1)
    for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/gst"; done
    # Only the plugins sealcheck's pipelines use (the others' libraries are not carried).
    (cd "$work/gst/usr/lib/x86_64-linux-gnu/gstreamer-1.0" && ls | grep -v -E \
        '^libgst(coreelements|multifile|jpeg|typefindfunctions|playback|videoconvertscale|app|videotestsrc)\.so$' \
        | xargs rm -f)
    rm -rf "$work/gst/usr/share"
    tar cf - -C "$work/gst" usr lib 2>/dev/null | xz -6 -T0 >.device/gst.tar.xz
    for bin in "$@"; do
        cp "$bin" .device/bin/ && strip ".device/bin/$(basename "$bin")" \
            && xz -6 -T0 -f ".device/bin/$(basename "$bin")"
    done
    rm -rf "$work"
    du -sh .device/ort/* .device/gst.tar.xz .device/bin 2>/dev/null
}

receive() {
    mkdir -p "$STORE/parts"
    for part in .device/ort/ort.tar.xz.part-*; do
        [ -f "$part" ] && cp "$part" "$STORE/parts/"
    done
    [ -f .device/ort/MANIFEST ] && cp .device/ort/MANIFEST "$STORE/parts/"
    for bin in .device/bin/*.xz; do
        [ -f "$bin" ] || continue
        mkdir -p "$STORE/bin" && xz -dc "$bin" >"$STORE/bin/$(basename "$bin" .xz)"
        chmod +x "$STORE/bin/$(basename "$bin" .xz)"
    done
    if [ -f .device/gst.tar.xz ] && [ ! -d "$STORE/gst" ]; then
        mkdir -p "$STORE/gst" && xz -dc .device/gst.tar.xz | tar xf - -C "$STORE/gst"
    fi
    if [ -d "$STORE/ort/onnxruntime" ]; then
        echo "onnxruntime-gpu already joined in $STORE/ort"
        return 0
    fi
    [ -f "$STORE/parts/MANIFEST" ] || { echo "no MANIFEST carried yet"; return 0; }
    have=$(ls "$STORE"/parts/ort.tar.xz.part-* 2>/dev/null | wc -l)
    want=$(wc -l <"$STORE/parts/MANIFEST")
    echo "onnxruntime-gpu pieces here: $have of $want"
    if [ "$have" -eq "$want" ]; then
        (cd "$STORE/parts" && sha256sum -c --quiet MANIFEST)
        mkdir -p "$STORE/ort"
        cat "$STORE"/parts/ort.tar.xz.part-* | xz -dc | tar xf - -C "$STORE/ort"
        rm -f "$STORE"/parts/ort.tar.xz.part-*
        echo "joined: $(ls "$STORE/ort/onnxruntime/capi/"*.so* | tr '\n' ' ')"
    fi
}

env_lines() {
    gst=$STORE/gst/usr/lib/x86_64-linux-gnu
    nvlibs=$(ls -d "$NV"/*/lib 2>/dev/null | tr '\n' ':')
    echo "export ORT_DYLIB_PATH=$STORE/ort/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
    echo "export LD_LIBRARY_PATH=$STORE/ort/onnxruntime/capi:$NV/cu13/lib:${nvlibs}$gst:$STORE/gst/lib/x86_64-linux-gnu:\${LD_LIBRARY_PATH:-}"
    echo "export GST_PLUGIN_SYSTEM_PATH_1_0=$gst/gstreamer-1.0"
    echo "export GST_PLUGIN_SCANNER=$gst/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner"
    echo "export GST_REGISTRY=$STORE/gst-registry.bin"
    echo "export PYTHONPATH=$STORE/ort\${PYTHONPATH:+:\$PYTHONPATH}"
}

case "${1:-}" in
    prepare) shift; prepare "$@" ;;
    receive) receive ;;
    env) env_lines ;;
    *) echo "usage: $0 prepare [binaries...] | receive | env" >&2; exit 2 ;;
esac
