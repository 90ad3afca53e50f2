#!/bin/sh
# Run by: `make test` (its main step); docs/CI.md says why the tests run this way.
# Builds and runs every test of one feature set:
#
#   1. the unit tests (library and binary), the integration tests (one crate,
#      tests/integration.rs), tests/steady_state_alloc.rs and tests/tensorrt.rs, with
#      cargo-nextest: every test in a process of its own, two at a time, the tests that
#      start a pipeline one at a time (.config/nextest.toml);
#   2. tests/parity.rs (its own harness, which nextest cannot list) and the doc tests,
#      with cargo test.
#
# Without cargo-nextest, step 1 runs with `cargo test` instead (one process per test
# binary; tests/common::serial keeps the pipelines one at a time): slower, the same
# tests. Arguments go to both cargo calls: `--profile ci --features fault-injection`.
set -eu
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
TARGETS="--lib --bins --test integration --test steady_state_alloc --test tensorrt"

status=0
if "$CARGO" nextest --version >/dev/null 2>&1; then
    # nextest's own --profile names its settings (.config/nextest.toml); cargo's
    # profile is --cargo-profile there.
    for a in "$@"; do
        shift
        if [ "$a" = --profile ]; then set -- "$@" --cargo-profile; else set -- "$@" "$a"; fi
    done
    # shellcheck disable=SC2086 # TARGETS is split on purpose
    "$CARGO" nextest run --locked "$@" $TARGETS || status=$?
    for a in "$@"; do
        shift
        if [ "$a" = --cargo-profile ]; then set -- "$@" --profile; else set -- "$@" "$a"; fi
    done
else
    echo "run_tests: cargo-nextest not found (cargo install cargo-nextest --locked): running with cargo test" >&2
    # shellcheck disable=SC2086
    "$CARGO" test --locked --no-fail-fast "$@" $TARGETS || status=$?
fi
"$CARGO" test --locked --no-fail-fast "$@" --test parity || status=$?
"$CARGO" test --locked --no-fail-fast "$@" --doc || status=$?
exit $status
