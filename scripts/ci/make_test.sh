#!/bin/sh
# Run by: `make test`, after its quick checks; docs/CI.md says why it runs this way
# and what each step costs.
#
#   0. In the background at nice 19, from the start: nvcc (from PyPI when none is
#      installed), then the aarch64 type-check (scripts/ci/aarch64_check.sh, its own
#      target folder and toolchain). It gets what the default build leaves idle.
#   1. The default build (`--features fault-injection`): the library's and the binary's
#      unit tests, the integration tests (one crate, tests/integration.rs) and the test
#      binaries of their own (steady_state_alloc, tensorrt, parity), built on both cores;
#      then the doc tests. The binary is copied aside: the tests start the copy
#      (SEALCHECK_BIN), because step 2 builds the binary again in its place; the copy
#      is checked for anything newer than JetPack 6 has (jetpack_abi_check.py).
#   2. In the background at nice 19: the loom model check (our library's unit tests
#      with `loom`), then the TensorRT check (scripts/ci/feature_builds.sh: every target
#      the feature changes, which includes `cuda`). Our crate at opt-level 0 in both:
#      they prove that it compiles and what its unit tests say, not its speed.
#   3. Meanwhile, the default build's tests that do not measure time, with
#      cargo-nextest: every test in a process of its own, two at a time, the tests that
#      start a pipeline one at a time (.config/nextest.toml); tests/parity.rs (its own
#      harness) from its binary.
#   4. Once the background is done: the tests whose checks are about time (MQTT
#      deadlines, a part's frame within its interval, triggers 5 ms apart in order, the
#      watchdog, the shadow's share of frames), each alone on the machine, as every test
#      binary ran before.
#
# Without cargo-nextest every step runs one after another with `cargo test`: slower,
# the same checks. Exits non-zero when any step failed, after all of them ran.
set -u
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-ci-test}
FEATURES=fault-injection
TARGETS="--lib --bins --test integration --test steady_state_alloc --test tensorrt"
# The checks about time: see .config/nextest.toml.
TIMED='binary(integration) & test(/^(mqtt|parts|plc|service|shadow)::/)'
REUSE=target/nextest-reuse
export PROFILE

step() { echo "=== make_test $(date +%T): $*"; }
status=0

if ! "$CARGO" nextest --version >/dev/null 2>&1; then
    echo "make_test: cargo-nextest not found (cargo install cargo-nextest --locked): running every step with cargo test, one after another" >&2
    # shellcheck disable=SC2086 # TARGETS is split on purpose
    "$CARGO" test --profile "$PROFILE" --locked --no-fail-fast --features "$FEATURES" $TARGETS --test parity --examples || status=1
    "${PYTHON:-python3}" scripts/ci/jetpack_abi_check.py "target/$PROFILE/sealcheck" || status=1
    "$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --doc || status=1
    "$CARGO" test --profile "$PROFILE" --locked --config "profile.$PROFILE.package.sealcheck.opt-level=0" \
        --features loom --lib ring::loom_model || status=1
    scripts/ci/aarch64_check.sh || status=1
    scripts/ci/feature_builds.sh || status=1
    exit $status
fi

step "0. in the background at nice 19: nvcc, then the aarch64 type-check"
mkdir -p target
# target/nvcc.done tells step 2 that nvcc is installed (or failed to be).
rm -f target/nvcc.done
nice -n 19 sh -c 'CUDA_INSTALL_ONLY=1 scripts/ci/ci_cuda_build.sh; ok=$?; touch target/nvcc.done
    [ $ok = 0 ] && scripts/ci/aarch64_check.sh' >target/ci-aarch64.log 2>&1 &
aarch64=$!

step "1. the default build (--features $FEATURES)"
mkdir -p "$REUSE"
# shellcheck disable=SC2086
"$CARGO" nextest list --cargo-profile "$PROFILE" --locked --features "$FEATURES" $TARGETS \
    --list-type binaries-only --message-format json >"$REUSE/binaries.json" || exit 1
"$CARGO" metadata --format-version 1 --locked >"$REUSE/cargo.json" || exit 1
# The examples (`make demo-plc`'s PLC) are built here too, so that they keep compiling.
parity=$("$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --test parity --examples --no-run 2>&1 \
    | sed -n 's/.*Executable tests\/parity.rs (\(.*\))$/\1/p')
[ -x "$parity" ] || { echo "make_test: cargo named no tests/parity.rs executable" >&2; exit 1; }
"$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --doc || status=1

# The tests start this copy: step 2 links the binary again, with other features, at
# target/<profile>/sealcheck (a clean-clone run once failed 6 tests so).
cp "target/$PROFILE/sealcheck" "$REUSE/sealcheck" || exit 1
# Nothing in it newer than JetPack 6 has (glibc 2.35, GStreamer 1.20, ...): docs/JETSON.md.
"${PYTHON:-python3}" scripts/ci/jetpack_abi_check.py "$REUSE/sealcheck" || status=1
SEALCHECK_BIN=$PWD/$REUSE/sealcheck
export SEALCHECK_BIN

step "2. in the background at nice 19: the loom model check, then the TensorRT check"
# Both build our crate at opt-level 0 (logic, not speed; the dependencies are step 1's).
# The TensorRT check needs nvcc from step 0: it waits for it (bounded: 15 minutes).
nice -n 19 sh -c '
    "$0" test --profile "$1" --locked --config "profile.$1.package.sealcheck.opt-level=0" \
        --features loom --lib ring::loom_model >target/ci-loom.log 2>&1; loom=$?
    i=0; while [ ! -e target/nvcc.done ] && [ $i -lt 900 ]; do sleep 1; i=$((i + 1)); done
    scripts/ci/feature_builds.sh >target/ci-tensorrt.log 2>&1; trt=$?
    echo "loom exit $loom, TensorRT check exit $trt" >>target/ci-tensorrt.log
    [ $loom = 0 ] && [ $trt = 0 ]' "$CARGO" "$PROFILE" &
background=$!

# The built test binaries, run without cargo (which the background holds).
run() {
    "$CARGO" nextest run --binaries-metadata "$REUSE/binaries.json" \
        --cargo-metadata "$REUSE/cargo.json" "$@"
}
step "3. the tests that do not measure time, beside the background"
run -E "not ($TIMED)" || status=1
step "3. tests/parity.rs"
"$parity" || status=1

step "4. waiting for the background"
wait "$background" || status=1
echo "--- loom: ring::loom_model"
cat target/ci-loom.log
echo "--- the TensorRT check (scripts/ci/feature_builds.sh)"
cat target/ci-tensorrt.log
wait "$aarch64" || status=1
echo "--- nvcc, the aarch64 type-check"
cat target/ci-aarch64.log
step "4. the tests about time, each alone"
run -E "$TIMED" || status=1
step "done (status $status)"
exit $status
