#!/bin/sh
# Run by: scripts/ci/ci_tensorrt_check.sh (`make test`); trt_bridge/README.md.
# Fetches TensorRT 10 and CUDA runtime headers for compiling trt_bridge on a
# machine without TensorRT (CI), and prints two lines:
#
#   TENSORRT_INCLUDE_DIR=<folder with NvInfer.h, NvOnnxParser.h>
#   CUDA_HOME=<folder whose include/ has cuda_runtime_api.h>
#
# so that `eval "$(scripts/ci/fetch_tensorrt_headers.sh)"` sets both.
#
# - TensorRT headers: from the source of the crates.io package trtx-sys 0.4.0
#   (TensorRT-Headers/TRT-Enterprise-10.16/), fetched with cargo into cargo's
#   registry cache. Headers only: there is no libnvinfer in it.
# - CUDA headers: the PyPI packages nvidia-cuda-runtime 13.0.96 and
#   nvidia-cuda-crt 13.0.88 (cuda_runtime_api.h includes crt/host_defines.h),
#   installed with pip into target/tensorrt-ci/cuda-runtime (ignored by git).
#   Reused from .cuda-toolkit/ when scripts/ci/ci_cuda_build.sh installed it.
#
# Nothing is copied into the repository: vendor headers are never committed.
# Progress goes to stderr; only the two lines go to stdout.
set -eu
cd "$(dirname "$0")/../.."

TRTX_VERSION=0.4.0
CUDA_RUNTIME_VERSION=13.0.96
CUDA_CRT_VERSION=13.0.88
PYTHON=${PYTHON:-python3}
WORK=target/tensorrt-ci

# --- TensorRT headers from trtx-sys --------------------------------------
find_trtx() {
    for registry in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
        dir="${registry}trtx-sys-${TRTX_VERSION}/TensorRT-Headers/TRT-Enterprise-10.16"
        if [ -f "$dir/NvInfer.h" ] && [ -f "$dir/NvOnnxParser.h" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if ! trt_dir=$(find_trtx); then
    echo "fetching trtx-sys ${TRTX_VERSION} (TensorRT 10 headers) with cargo" >&2
    project="$WORK/fetch-trtx"
    mkdir -p "$project/src"
    cat >"$project/Cargo.toml" <<EOF
[package]
name = "fetch-trtx"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
trtx-sys = "=${TRTX_VERSION}"

[workspace]
EOF
    echo 'fn main() {}' >"$project/src/main.rs"
    # `cargo fetch` downloads and unpacks the sources; nothing is built.
    cargo fetch --quiet --manifest-path "$project/Cargo.toml" >&2
    trt_dir=$(find_trtx) || {
        echo "error: cargo fetched trtx-sys ${TRTX_VERSION} but its TensorRT-Headers/TRT-Enterprise-10.16 is missing" >&2
        exit 1
    }
fi

# --- CUDA runtime headers from PyPI --------------------------------------
has_cuda_headers() {
    [ -f "$1/include/cuda_runtime_api.h" ] && [ -f "$1/include/crt/host_defines.h" ]
}

cuda_home=""
for candidate in .cuda-toolkit/venv/lib/python*/site-packages/nvidia/cu13 "$WORK/cuda-runtime/nvidia/cu13"; do
    if has_cuda_headers "$candidate"; then
        cuda_home=$candidate
        break
    fi
done
if [ -z "$cuda_home" ]; then
    echo "installing nvidia-cuda-runtime==${CUDA_RUNTIME_VERSION} nvidia-cuda-crt==${CUDA_CRT_VERSION} (headers) into $WORK/cuda-runtime" >&2
    rm -rf "$WORK/cuda-runtime"
    mkdir -p "$WORK"
    # One pip call: pip --target does not merge a second package into an
    # existing nvidia/ folder.
    "$PYTHON" -m pip install --quiet --no-deps --disable-pip-version-check \
        --target "$WORK/cuda-runtime" \
        "nvidia-cuda-runtime==${CUDA_RUNTIME_VERSION}" "nvidia-cuda-crt==${CUDA_CRT_VERSION}" >&2
    cuda_home="$WORK/cuda-runtime/nvidia/cu13"
    has_cuda_headers "$cuda_home" || {
        echo "error: pip installed the CUDA packages but $cuda_home/include lacks cuda_runtime_api.h or crt/host_defines.h" >&2
        exit 1
    }
fi

echo "TENSORRT_INCLUDE_DIR=$(cd "$trt_dir" && pwd)"
echo "CUDA_HOME=$(cd "$cuda_home" && pwd)"
