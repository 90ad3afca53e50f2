#!/bin/sh
# Run by: `make test`, after its quick checks; docs/CI.md says why it runs this way
# and what each step costs.
#
#   0. In the background at nice 19, from the start: nvcc (from PyPI when none is
#      installed), then the aarch64 type-check (scripts/ci/aarch64_check.sh, its own
#      target folder and toolchain). It gets what the default build leaves idle: in a
#      clean-clone run (docs/CI.md, run 2) that was little, and it finished only after
#      step 3's tests, while step 4 waited for it.
#   1. The default build (`--features fault-injection`): the library's and the binary's
#      unit tests, the integration tests (one crate, tests/integration.rs) and the test
#      binaries of their own (steady_state_alloc, tensorrt, parity), built on both cores;
#      then the doc tests.
#   2. In the background at nice 19: the loom model check (our library's unit tests
#      with `loom`: nothing the tests run).
#   3. Meanwhile, the default build's tests that do not measure time, with
#      cargo-nextest: every test in a process of its own, two at a time, the tests that
#      start a pipeline one at a time (.config/nextest.toml); tests/parity.rs (its own
#      harness) from its binary.
#   4. Once the background is done: the tests whose checks are about time (MQTT
#      deadlines, a part's frame within its interval, triggers 5 ms apart in order, the
#      watchdog, the shadow's share of frames), each alone on the machine, as every test
#      binary ran before.
#   5. The TensorRT check (scripts/ci/feature_builds.sh: every target the feature
#      changes, which includes `cuda`). Last, because it builds the binary again, with
#      other features, where the integration tests find it (target/<profile>/sealcheck):
#      beside the tests it replaced their binary (a clean-clone run failed 6 tests so).
#
# Without cargo-nextest every step runs one after another with `cargo test`: slower,
# the same checks. Exits non-zero when any step failed, after all of them ran.
set -u
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
PROFILE=${PROFILE:-ci}
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
    "$CARGO" test --profile "$PROFILE" --locked --no-fail-fast --features "$FEATURES" $TARGETS --test parity || status=1
    "$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --doc || status=1
    "$CARGO" test --profile "$PROFILE" --locked --features loom --lib ring::loom_model || status=1
    scripts/ci/aarch64_check.sh || status=1
    scripts/ci/feature_builds.sh || status=1
    exit $status
fi

step "0. in the background at nice 19: nvcc, then the aarch64 type-check"
mkdir -p target
nice -n 19 sh -c 'CUDA_INSTALL_ONLY=1 scripts/ci/ci_cuda_build.sh && scripts/ci/aarch64_check.sh' \
    >target/ci-aarch64.log 2>&1 &
aarch64=$!

step "1. the default build (--features $FEATURES)"
mkdir -p "$REUSE"
# shellcheck disable=SC2086
"$CARGO" nextest list --cargo-profile "$PROFILE" --locked --features "$FEATURES" $TARGETS \
    --list-type binaries-only --message-format json >"$REUSE/binaries.json" || exit 1
"$CARGO" metadata --format-version 1 --locked >"$REUSE/cargo.json" || exit 1
parity=$("$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --test parity --no-run 2>&1 \
    | sed -n 's/.*Executable tests\/parity.rs (\(.*\))$/\1/p')
[ -x "$parity" ] || { echo "make_test: cargo named no tests/parity.rs executable" >&2; exit 1; }
"$CARGO" test --profile "$PROFILE" --locked --features "$FEATURES" --doc || status=1

step "2. in the background at nice 19: the loom model check"
# The loom build is the library's unit tests alone: it writes nothing the tests run.
# The TensorRT check builds the binary again (with other features) where the
# integration tests find it (target/<profile>/sealcheck), so it runs last, once no
# test runs.
nice -n 19 "$CARGO" test --profile "$PROFILE" --locked --features loom --lib ring::loom_model \
    >target/ci-loom.log 2>&1 &
loom=$!

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
wait "$loom" || status=1
echo "--- loom: ring::loom_model"
cat target/ci-loom.log
wait "$aarch64" || status=1
echo "--- the aarch64 type-check"
cat target/ci-aarch64.log
step "4. the tests about time, each alone"
run -E "$TIMED" || status=1

step "5. the TensorRT check (scripts/ci/feature_builds.sh)"
scripts/ci/feature_builds.sh || status=1
step "done (status $status)"
exit $status
