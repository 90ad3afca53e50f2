#!/usr/bin/env bash
# Run by: `make onnxruntime` (and so `make demo`, `make test`); tests/infer.rs names it.
# Fetch the ONNX Runtime shared library that sealcheck loads at run time
# (crate `ort`, feature `load-dynamic`) into the repository's .ort/lib/.
#
# Where it comes from: the pinned `onnxruntime==1.31.1` wheel on PyPI, fetched
# with pip (no Python install needed afterwards: we only keep the .so inside).
# The PyPI wheels are CPU-only; for the CUDA execution provider install a GPU
# build of ONNX Runtime and point `onnxruntime_library` in [inference] (or
# ORT_DYLIB_PATH) at its libonnxruntime.so.
#
# Idempotent: does nothing when the library is already there.
#
# Environment:
#   ORT_VERSION   version to fetch (default 1.31.1; sealcheck needs >= 1.31)
#   ORT_DEST      destination folder (default <repo>/.ort/lib)
#   PYTHON        python interpreter that has pip (default python3)
set -euo pipefail

ORT_VERSION="${ORT_VERSION:-1.31.1}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ORT_DEST:-$REPO_ROOT/.ort/lib}"
PYTHON="${PYTHON:-python3}"
LIB_NAME="libonnxruntime.so.${ORT_VERSION}"

fail() {
    echo "fetch_onnxruntime: error: $*" >&2
    exit 1
}

if [[ -f "$DEST/$LIB_NAME" ]]; then
    echo "fetch_onnxruntime: $DEST/$LIB_NAME already present; nothing to do"
    exit 0
fi

# Wheel platform tags on PyPI for onnxruntime 1.31 (manylinux_2_27 / _2_28).
case "${ORT_ARCH:-$(uname -m)}" in
    x86_64) ARCH=x86_64 ;;
    aarch64 | arm64) ARCH=aarch64 ;;
    *) fail "no onnxruntime wheel on PyPI for machine type '$(uname -m)'; build ONNX Runtime from source and set ORT_DYLIB_PATH" ;;
esac

command -v "$PYTHON" >/dev/null 2>&1 \
    || fail "'$PYTHON' not found; install python3 with pip, or download onnxruntime-${ORT_VERSION} for linux-${ARCH} from https://github.com/microsoft/onnxruntime/releases and copy lib/${LIB_NAME} to $DEST/"
"$PYTHON" -m pip --version >/dev/null 2>&1 \
    || fail "'$PYTHON -m pip' is not available; install pip (apt-get install python3-pip) or copy ${LIB_NAME} to $DEST/ by hand"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "fetch_onnxruntime: downloading onnxruntime==${ORT_VERSION} wheel for linux ${ARCH} from PyPI"
# --python-version only picks a wheel; the shared library inside does not depend on Python.
if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 \
    --platform "manylinux_2_27_${ARCH}" --platform "manylinux_2_28_${ARCH}" \
    --dest "$WORK" "onnxruntime==${ORT_VERSION}"; then
    fail "pip could not download onnxruntime==${ORT_VERSION} for ${ARCH} (network or proxy? see pip's message above)"
fi

shopt -s nullglob
wheels=("$WORK"/onnxruntime-"${ORT_VERSION}"-*.whl)
[[ ${#wheels[@]} -eq 1 ]] || fail "expected one onnxruntime-${ORT_VERSION} wheel in $WORK, found ${#wheels[@]}"

MEMBER="onnxruntime/capi/${LIB_NAME}"
"$PYTHON" - "${wheels[0]}" "$MEMBER" "$WORK/extracted" <<'EOF' || fail "could not extract $MEMBER from ${wheels[0]##*/}"
import sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    z.extract(member, out)
EOF

mkdir -p "$DEST"
# Copy under a temporary name then rename, so an interrupted run never leaves a partial library.
cp "$WORK/extracted/$MEMBER" "$DEST/.${LIB_NAME}.part"
mv "$DEST/.${LIB_NAME}.part" "$DEST/$LIB_NAME"
echo "fetch_onnxruntime: installed $DEST/$LIB_NAME"
