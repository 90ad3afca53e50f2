#!/bin/sh
# Run by: scripts/ci/make_test.sh (`make test`), in the background beside the tests. It
# builds the binary again with other features at target/<profile>/sealcheck, so the
# tests that run meanwhile must start a copy of the default build's binary
# (make_test.sh sets SEALCHECK_BIN; docs/CI.md says why):
#
#   - the TensorRT check (scripts/ci/ci_tensorrt_check.sh): every target whose code the
#     feature changes built with `tensorrt`, which includes `cuda` (kernels by nvcc from
#     PyPI, trt_bridge against TensorRT 10 headers), its unit tests, tests/tensorrt.rs
#     (SKIPPED here) and the readelf check. Our crate is compiled at opt-level 0 there
#     (the dependencies are those of the default build): that step proves the code
#     compiles and links, and its unit tests are logic, not speed (opt-level 1 costs
#     about what 3 does: docs/CI.md);
#
# The aarch64 type-check (scripts/ci/aarch64_check.sh) is not here: make_test.sh starts
# it first, beside the default build.
#
# Exits non-zero when any of them failed, after all of them ran.
set -u
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-ci-test}
PYTHON=${PYTHON:-python3}

status=0
echo "--- nvcc (from PyPI when none is installed) and the TensorRT headers"
PROFILE=$PROFILE PYTHON=$PYTHON CUDA_INSTALL_ONLY=1 scripts/ci/ci_cuda_build.sh || status=1
scripts/ci/fetch_tensorrt_headers.sh >/dev/null || status=1

echo "--- the TensorRT check"
PROFILE=$PROFILE CARGO="$CARGO --config profile.$PROFILE.package.sealcheck.opt-level=0" \
    scripts/ci/ci_tensorrt_check.sh || status=1
exit $status
