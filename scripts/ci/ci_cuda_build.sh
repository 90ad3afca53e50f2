#!/bin/sh
# Run by: `make test` (with CUDA_BUILD_ONLY=1); by hand before a GPU run (docs/PERFORMANCE-gpu-preprocess.md).
# Proves the CUDA kernels and the `cuda` feature compile on a machine with no
# GPU and no CUDA install: installs nvcc from PyPI into .cuda-toolkit/ when no
# nvcc is given, then builds the crate, its tests and its benchmarks with
# `--features cuda`. The GPU tests are then runnable where a GPU is (they
# print "SKIPPED: no CUDA device" elsewhere).
#
#   scripts/ci/ci_cuda_build.sh            # build + test --no-run + bench --no-run
#   NVCC=/usr/local/cuda/bin/nvcc scripts/ci/ci_cuda_build.sh   # use a given nvcc
#   CUDA_HOME=/usr/local/cuda scripts/ci/ci_cuda_build.sh       # or a given toolkit
#   CUDA_BUILD_ONLY=1 scripts/ci/ci_cuda_build.sh   # the crate and its binary only
#   CUDA_INSTALL_ONLY=1 scripts/ci/ci_cuda_build.sh # make test: nvcc only (see below)
#
# With CUDA_INSTALL_ONLY (`make test`, scripts/ci/feature_builds.sh) it only makes sure
# nvcc is there: `make test` builds `cuda` code with the `tensorrt` feature (which
# includes it) and type-checks the `cuda`-only feature set for aarch64 (docs/CI.md).
#
# With CUDA_BUILD_ONLY the crate is built as the binary's unit test needs it
# (`cargo test --no-run --bins`: the library with `cuda`, main.rs compiled and linked
# against it), not by `cargo build`: a test build takes the dev-dependencies' features too,
# as `make test`'s other builds do, so no dependency is built a second time with other
# features (`cargo build` rebuilt rustix and, through it, tar and five tract crates:
# docs/CI.md). Every other target is built with `tensorrt` (which includes `cuda`) by the
# TensorRT check right after.
#
# The PyPI toolkit is pinned: 13.0 matches the lent GPUs' driver, and nvvm is
# pinned too (unpinned it pulls a newer cicc whose PTX the 13.0 ptxas rejects).
set -eu
cd "$(dirname "$0")/../.."

CARGO=${CARGO:-cargo}
# Cargo profile: release by default; `make test` passes PROFILE=ci (no debug info).
PROFILE=${PROFILE:-release}
PYTHON=${PYTHON:-python3}
TOOLKIT_DIR=.cuda-toolkit
PACKAGES="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 \
nvidia-cuda-cccl==13.0.85 nvidia-nvvm==13.0.88"

have_nvcc() {
    if [ -n "${NVCC:-}" ] && [ -x "$NVCC" ]; then return 0; fi
    if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then return 0; fi
    command -v nvcc >/dev/null 2>&1
}

if ! have_nvcc; then
    home=$(ls -d "$TOOLKIT_DIR"/venv/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -n 1 || true)
    if [ -z "$home" ] || [ ! -x "$home/bin/nvcc" ]; then
        echo "ci_cuda_build: installing nvcc 13.0 from PyPI into $TOOLKIT_DIR/venv"
        "$PYTHON" -m venv "$TOOLKIT_DIR/venv"
        # shellcheck disable=SC2086 # the package list is split on purpose
        "$TOOLKIT_DIR/venv/bin/python" -m pip install -q --disable-pip-version-check $PACKAGES
        home=$(ls -d "$TOOLKIT_DIR"/venv/lib/python3*/site-packages/nvidia/cu13 | head -n 1)
    fi
    CUDA_HOME=$(cd "$home" && pwd)
    export CUDA_HOME
fi
if [ -n "${NVCC:-}" ]; then used=$NVCC
elif [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then used=$CUDA_HOME/bin/nvcc
else used=$(command -v nvcc); fi
echo "ci_cuda_build: using $used ($("$used" --version | tail -n 1))"

if [ -n "${CUDA_INSTALL_ONLY:-}" ]; then
    exit 0
elif [ -n "${CUDA_BUILD_ONLY:-}" ]; then
    "$CARGO" test --profile "$PROFILE" --locked --features cuda --no-run --bins
else
    "$CARGO" build --profile "$PROFILE" --locked --features cuda
    "$CARGO" test --profile "$PROFILE" --locked --features cuda --no-run
    "$CARGO" bench --locked --features cuda --no-run
fi
echo "ci_cuda_build: the cuda feature builds (kernels for sm_87, sm_90 and compute_90 PTX embedded)"
