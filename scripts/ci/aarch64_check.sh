#!/bin/sh
# Run by: `make test` (issue 36/37); docs/CI.md and docs/JETSON.md describe it.
# Type-checks the whole crate (the library and the binary) for the Jetson's architecture
# (aarch64-unknown-linux-gnu) with each hardware feature set: `tensorrt` (which includes
# `cuda`), and `cuda` alone (the x86_64 ONNX Runtime CUDA build; `make test` builds its
# code on x86_64 only as part of `tensorrt`, so this is where the `cuda`-only
# combination, the GPU code with the TensorRT stub, is checked: docs/CI.md).
# On aarch64 `c_char` is unsigned and `c_long` is still 64-bit: FFI casts that hold on
# x86_64 can fail here, and nothing else in `make test` would see them.
#
# The toolchain is Debian's (rustup cannot add targets on our machines): Rust 1.96 with
# the aarch64 standard library and the aarch64 C and C++ cross compilers (build scripts
# compile ring's C and trt_bridge/ for the target). `make aarch64-deps` installs them;
# a missing one is named here with the package to install.
#
# pkg-config answers the -sys crates' build scripts from this machine's own (x86_64)
# GStreamer .pc files (PKG_CONFIG_ALLOW_CROSS): a type-check links nothing, and only
# the versions matter, which Debian's arm64 packages share. GStreamer's arm64
# development packages are not installed here: Debian 12's
# libgstreamer-plugins-base1.0-dev and libgstrtspserver-1.0-dev are not multi-arch,
# and installing the arm64 ones removes the x86_64 ones every other step needs.
#
# The kernels are fatbins for sm_87 (the Orin) and newer, made by the same nvcc as the
# x86_64 build; the TensorRT bridge compiles against the headers of the TensorRT check.
# Its own target folder (target/aarch64): another rustc, nothing shared with the x86_64
# builds.
set -eu
cd "$(dirname "$0")/../.."

TARGET=aarch64-unknown-linux-gnu
RUSTC_AARCH64=${RUSTC_AARCH64:-/usr/bin/rustc}
CARGO_AARCH64=${CARGO_AARCH64:-/usr/bin/cargo}

missing=""
need() { # command-or-file  package
    case $1 in
        /*) [ -e "$1" ] || missing="$missing $2" ;;
        *) command -v "$1" >/dev/null 2>&1 || missing="$missing $2" ;;
    esac
}
need "$RUSTC_AARCH64" rustc-web
need "$CARGO_AARCH64" cargo-web
need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
need aarch64-linux-gnu-g++ g++-aarch64-linux-gnu
if [ -x "$RUSTC_AARCH64" ] && [ ! -d "$("$RUSTC_AARCH64" --print sysroot)/lib/rustlib/$TARGET/lib" ]; then
    missing="$missing libstd-rust-web-dev:arm64"
fi
if [ -n "$missing" ]; then
    echo "aarch64_check: missing:$missing" >&2
    echo "  install them with \`make aarch64-deps\` (root), or by hand:" >&2
    echo "  dpkg --add-architecture arm64 && apt-get update && apt-get install$missing" >&2
    exit 1
fi

headers=$(scripts/ci/fetch_tensorrt_headers.sh)
TENSORRT_INCLUDE_DIR=$(echo "$headers" | sed -n 's/^TENSORRT_INCLUDE_DIR=//p')
CUDA_HOME=$(echo "$headers" | sed -n 's/^CUDA_HOME=//p')
export TENSORRT_INCLUDE_DIR CUDA_HOME

echo "aarch64_check: $("$RUSTC_AARCH64" --version), target $TARGET"
for features in tensorrt cuda; do
    echo "--- --features $features"
    # rustup's rustc comes first on PATH: Debian's cargo must be told to use Debian's rustc.
    RUSTC=$RUSTC_AARCH64 \
    RUSTDOC=$(dirname "$RUSTC_AARCH64")/rustdoc \
    CARGO_TARGET_DIR=target/aarch64 \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++ \
    PKG_CONFIG_ALLOW_CROSS=1 \
        "$CARGO_AARCH64" check --locked --target "$TARGET" --features "$features" --lib --bins
done
echo "ok: the crate type-checks for $TARGET with --features tensorrt (cuda included) and with --features cuda"
