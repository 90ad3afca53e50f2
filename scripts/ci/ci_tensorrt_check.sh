#!/bin/sh
# Run by: `make test`; docs/JETSON.md and trt_bridge/README.md describe it.
# CI check of the TensorRT backend on a machine without TensorRT or a GPU
# (`make test` runs it):
#
#   1. fetch TensorRT 10 + CUDA headers (scripts/ci/fetch_tensorrt_headers.sh)
#   2. the targets whose code the feature changes, built with --features tensorrt
#      (`cargo test --no-run --lib --bins --test parity --test tensorrt ...`):
#      build.rs compiles trt_bridge/ (C++17) and the cxx bridge against those
#      headers, nvcc the kernels; steps 3 to 5 reuse these builds
#   3. the unit tests of src/infer/tensorrt/ (engine cache, settings, build
#      progress, calibration file handling, the dynamic-batch profile and its
#      cache key: none needs TensorRT)
#   4. tests/tensorrt.rs: prints "SKIPPED: <reason>" here, runs on a Jetson
#      (with the batch test on models/seg_batch.onnx and cls_batch.onnx)
#   5. the built code must not depend on libnvinfer (it is dlopen'ed at run time)
#
# The `tensorrt` feature implies `cuda`, whose kernels need nvcc: set NVCC or
# CUDA_HOME, or install it with scripts/ci/ci_cuda_build.sh (.cuda-toolkit/).
set -eu
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
# Cargo profile: release by default; `make test` passes PROFILE=ci (no debug info).
PROFILE=${PROFILE:-release}

headers=$(scripts/ci/fetch_tensorrt_headers.sh)
TENSORRT_INCLUDE_DIR=$(echo "$headers" | sed -n 's/^TENSORRT_INCLUDE_DIR=//p')
cuda_home=$(echo "$headers" | sed -n 's/^CUDA_HOME=//p')
export TENSORRT_INCLUDE_DIR
# Keep a CUDA_HOME the caller chose (a full toolkit with nvcc); else the headers' folder.
if [ -z "${CUDA_HOME:-}" ] || [ ! -f "${CUDA_HOME}/include/cuda_runtime_api.h" ]; then
    CUDA_HOME=$cuda_home
fi
export CUDA_HOME
echo "TensorRT headers: $TENSORRT_INCLUDE_DIR"
echo "CUDA headers:     $CUDA_HOME/include"

if [ -z "${NVCC:-}" ] && [ ! -x "$CUDA_HOME/bin/nvcc" ] && ! command -v nvcc >/dev/null 2>&1 \
    && ! ls .cuda-toolkit/venv/lib/python*/site-packages/nvidia/cu13/bin/nvcc >/dev/null 2>&1; then
    echo "error: the tensorrt feature implies cuda, whose kernels need nvcc, and none was found;" >&2
    echo "       run scripts/ci/ci_cuda_build.sh (installs it into .cuda-toolkit/) or set NVCC" >&2
    exit 1
fi

# A build, not `cargo check`: check mode cannot use the dependencies `make test` has
# already built, and checked all of them again (about 300 crates; docs/CI.md).
# The targets whose code differs with the feature: the library and its unit tests, the
# binary, tests/parity.rs (its `#[cfg(feature = "tensorrt")]` path), tests/tensorrt.rs,
# and the `cuda`-only targets (tests/gpu_parity.rs, benches/gpu_preprocess.rs). The
# other integration tests read the features only through `cfg!` (compiled either way)
# and were built by `make test`'s first step (docs/CI.md: the step took 137 s this way
# against 143 s with every target; the library and its unit tests are most of it).
echo "--- the feature's targets built with --features tensorrt (compiles trt_bridge against the headers)"
$CARGO test --profile "$PROFILE" --locked --features tensorrt --no-run \
    --lib --bins --test parity --test tensorrt --test gpu_parity --bench gpu_preprocess

echo "--- unit tests of the TensorRT backend (no TensorRT needed)"
$CARGO test --profile "$PROFILE" --locked --features tensorrt --lib infer::tensorrt

echo "--- tests/tensorrt.rs (skips without TensorRT and a GPU)"
$CARGO test --profile "$PROFILE" --locked --features tensorrt --test tensorrt -- --nocapture

echo "--- the test binary must load libnvinfer at run time, not link it"
no_run=$($CARGO test --profile "$PROFILE" --locked --features tensorrt --test tensorrt --no-run 2>&1) || {
    echo "$no_run" >&2
    exit 1
}
exe=$(echo "$no_run" | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
if [ -z "$exe" ] || [ ! -f "$exe" ]; then
    echo "$no_run" >&2
    echo "error: cargo named no tests/tensorrt.rs executable" >&2
    exit 1
fi
if readelf -d "$exe" | grep -E 'NEEDED.*(nvinfer|nvonnxparser|cudart)'; then
    echo "error: $exe links TensorRT or cudart; sealcheck would not start without them" >&2
    exit 1
fi
echo "ok: trt_bridge compiles against TensorRT $(sed -n 's/^#define TRT_MAJOR_ENTERPRISE //p; s/^#define NV_TENSORRT_MAJOR \([0-9]\)/\1/p' "$TENSORRT_INCLUDE_DIR/NvInferVersion.h" | head -1).x headers; no TensorRT library linked"
