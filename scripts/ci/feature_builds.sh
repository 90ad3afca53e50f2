#!/bin/sh
# Run by: scripts/ci/make_test.sh (`make test`), last, once no test runs: it builds the
# binary again with other features where the integration tests find it
# (docs/CI.md says why):
#
#   - the TensorRT check (scripts/ci/ci_tensorrt_check.sh): every target whose code the
#     feature changes built with `tensorrt`, which includes `cuda` (kernels by nvcc from
#     PyPI, trt_bridge against TensorRT 10 headers), its unit tests, tests/tensorrt.rs
#     (SKIPPED here) and the readelf check. Our crate is compiled at opt-level 1 there
#     (the dependencies are those of the default build): that step proves the code
#     compiles and links, and its unit tests are logic, not speed;
#
# The aarch64 type-check (scripts/ci/aarch64_check.sh) is not here: make_test.sh starts
# it first, beside the default build, whose critical path (tract-core, about five
# minutes of one core) leaves the other core free for it.
#
# Exits non-zero when any of them failed, after all of them ran.
set -u
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-ci}
PYTHON=${PYTHON:-python3}

status=0
echo "--- nvcc (from PyPI when none is installed) and the TensorRT headers"
PROFILE=$PROFILE PYTHON=$PYTHON CUDA_INSTALL_ONLY=1 scripts/ci/ci_cuda_build.sh || status=1
scripts/ci/fetch_tensorrt_headers.sh >/dev/null || status=1

echo "--- the TensorRT check"
PROFILE=$PROFILE CARGO="$CARGO --config profile.$PROFILE.package.sealcheck.opt-level=1" \
    scripts/ci/ci_tensorrt_check.sh || status=1
exit $status
