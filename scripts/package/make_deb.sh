#!/bin/sh
# Run by: `make deb` (amd64) and `make jetson` (arm64); docs/JETSON.md, "Install the package".
# Builds the Debian package dist/sealcheck_<version>_<arch>.deb with cargo-deb from
# [package.metadata.deb] in Cargo.toml:
#
#   scripts/package/make_deb.sh amd64    release build for this machine (x86_64)
#   scripts/package/make_deb.sh arm64    release build for aarch64 (the Jetson), cross-compiled
#
#   1. the release build (amd64: default features; arm64: tensorrt, which includes cuda)
#      unless NO_BUILD=1 (then the binary must be there);
#   2. scripts/ci/jetpack_abi_check.py on it: nothing newer than JetPack 6 goes into a package;
#   3. the unit and the config template rendered for /usr (scripts/install.sh does the same
#      for a PREFIX) into target/deb-stage/;
#   4. cargo deb --no-build --no-strip (the line tables stay: a panic's backtrace names lines).
#
# Environment: CARGO (default cargo), CARGO_DEB (default: cargo-deb on PATH or in
# ~/.cargo/bin, installed there from crates.io when in neither), PYTHON (default python3), JOBS (cargo -j, default: cargo's own).
# A missing tool or cross package is named with the command that installs it.
# The arm64 path on x86_64 (docs/JETSON.md, "make jetson"): Debian's Rust and cross
# compilers as scripts/ci/aarch64_check.sh uses them, an arm64 system root of Debian's
# packages (scripts/package/arm64_sysroot.sh), `--features tensorrt` (nvcc from PyPI, the
# TensorRT check's headers), and the Depends computed by dpkg-shlibdeps from that root.
set -eu
cd "$(dirname "$0")/../.."

arch=${1:-}
CARGO=${CARGO:-cargo}
PYTHON=${PYTHON:-python3}
NO_BUILD=${NO_BUILD:-0}

die() { echo "make_deb: $*" >&2; exit 1; }

case "$arch" in
amd64)
    target=x86_64-unknown-linux-gnu
    [ "$(uname -m)" = x86_64 ] || die "amd64 packages are built on x86_64 here (this is $(uname -m))"
    target_args=""
    binary=${CARGO_TARGET_DIR:-target}/release/sealcheck
    ;;
arm64)
    target=aarch64-unknown-linux-gnu
    target_args="--target $target"
    binary=${CARGO_TARGET_DIR:-target}/$target/release/sealcheck
    ;;
*) die "usage: $0 amd64|arm64" ;;
esac

if [ -z "${CARGO_DEB:-}" ]; then
    if command -v cargo-deb >/dev/null 2>&1; then
        CARGO_DEB=cargo-deb
    elif [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo-deb" ]; then
        CARGO_DEB=${CARGO_HOME:-$HOME/.cargo}/bin/cargo-deb
    else
        # A fresh machine has Rust only: the tool comes from crates.io (minutes to build).
        echo "make_deb: cargo-deb not found: cargo install cargo-deb --version 3.8.0 --locked"
        "${CARGO:-cargo}" install cargo-deb --version 3.8.0 --locked ||
            die "cargo-deb could not be installed (see above); install it yourself or set CARGO_DEB"
        CARGO_DEB=${CARGO_HOME:-$HOME/.cargo}/bin/cargo-deb
    fi
fi
command -v objdump >/dev/null 2>&1 || die "objdump not found: apt-get install binutils"
command -v dpkg-shlibdeps >/dev/null 2>&1 ||
    die "dpkg-shlibdeps not found (Depends: \$auto): apt-get install dpkg-dev"

if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
    # The cross toolchain as scripts/ci/aarch64_check.sh uses it (Debian's Rust, whose
    # aarch64 standard library is a package; rustup's needs `rustup target add`), and an
    # arm64 system root of Debian's GStreamer packages, unpacked beside the amd64 ones
    # (scripts/package/arm64_sysroot.sh says why not installed) for pkg-config and the link.
    CARGO=${CARGO_AARCH64:-/usr/bin/cargo}
    RUSTC=${RUSTC_AARCH64:-/usr/bin/rustc}
    missing=""
    [ -x "$CARGO" ] || missing="$missing cargo-web"
    [ -x "$RUSTC" ] || missing="$missing rustc-web"
    if [ -x "$RUSTC" ] && [ ! -d "$("$RUSTC" --print sysroot)/lib/rustlib/$target/lib" ]; then
        missing="$missing libstd-rust-web-dev:arm64"
    fi
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing="$missing gcc-aarch64-linux-gnu"
    command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || missing="$missing g++-aarch64-linux-gnu"
    command -v aarch64-linux-gnu-objdump >/dev/null 2>&1 || missing="$missing binutils-aarch64-linux-gnu"
    if [ -n "$missing" ]; then
        die "cross-building for arm64 needs:$missing
  install them with \`make aarch64-deps\` (root), or by hand:
  dpkg --add-architecture arm64 && apt-get update && apt-get install$missing"
    fi
    sysroot=$(pwd)/target/arm64-sysroot
    scripts/package/arm64_sysroot.sh "$sysroot"
    # Every feature: TensorRT (the Jetson's engine; it includes `cuda`, whose kernels nvcc
    # compiles for sm_87) against the TensorRT check's headers.
    CUDA_INSTALL_ONLY=1 PYTHON=$PYTHON scripts/ci/ci_cuda_build.sh >&2
    if [ -z "${CUDA_HOME:-}" ]; then
        CUDA_HOME=$(cd "$(ls -d .cuda-toolkit/venv/lib/python3*/site-packages/nvidia/cu13 | head -n 1)" && pwd)
    fi
    headers=$(PYTHON=$PYTHON scripts/ci/fetch_tensorrt_headers.sh)
    TENSORRT_INCLUDE_DIR=$(echo "$headers" | sed -n 's/^TENSORRT_INCLUDE_DIR=//p')
    export CUDA_HOME TENSORRT_INCLUDE_DIR RUSTC
    features_args="--features tensorrt"
    lib=$sysroot/usr/lib/aarch64-linux-gnu
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/jetson}
    binary=$CARGO_TARGET_DIR/$target/release/sealcheck
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    # The cross compiler's own libc; GStreamer, GLib and what they need from the root.
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-Wl,-rpath-link,$lib -C link-arg=-Wl,-rpath-link,$sysroot/lib/aarch64-linux-gnu"
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
    export PKG_CONFIG_ALLOW_CROSS=1
    export PKG_CONFIG_SYSROOT_DIR=$sysroot
    export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$sysroot/usr/share/pkgconfig"
fi

if [ "$NO_BUILD" != 1 ]; then
    # shellcheck disable=SC2086 # target_args is empty or two words
    "$CARGO" build --release --locked $target_args ${features_args:-} ${JOBS:+-j "$JOBS"}
fi
[ -x "$binary" ] || die "no binary at $binary (build it: $CARGO build --release --locked $target_args)"

# Nothing newer than JetPack 6 in a package, whichever machine it goes to.
"$PYTHON" scripts/ci/jetpack_abi_check.py "$binary"

stage=target/deb-stage
mkdir -p "$stage"
sed -e 's|/usr/local/bin/sealcheck|/usr/bin/sealcheck|g' \
    -e 's|/usr/local/share/sealcheck|/usr/share/sealcheck|g' \
    -e 's|/usr/local/share/doc/sealcheck|/usr/share/doc/sealcheck|g' \
    systemd/sealcheck.service >"$stage/sealcheck.service"
sed -e 's|/usr/local/share/sealcheck|/usr/share/sealcheck|g' \
    -e 's|/usr/local/share/doc/sealcheck|/usr/share/doc/sealcheck|g' \
    -e 's|/usr/local/bin/sealcheck|/usr/bin/sealcheck|g' \
    config/sealcheck.toml >"$stage/sealcheck.toml"
# (A comment may name /usr/local: the template's example place for libonnxruntime.)
if grep -nE '^[^#]*/usr/local' "$stage/sealcheck.service" "$stage/sealcheck.toml"; then
    die "a /usr/local path is left in the rendered unit or config (above): extend the sed rules"
fi

mkdir -p dist
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
out=dist/sealcheck_${version}_${arch}.deb
rm -f "$out"
# cargo finds the subcommand on PATH.
PATH="$(dirname "$(command -v "$CARGO_DEB")"):$PATH"
export PATH
# shellcheck disable=SC2086
"$CARGO" deb --no-build --no-strip $target_args --output "$out"
[ -f "$out" ] || die "cargo-deb made no $out"
if [ -n "${sysroot:-}" ]; then
    # cargo-deb's $auto asks this machine's dpkg-shlibdeps, which knows no arm64 GStreamer
    # (not installed: arm64_sysroot.sh says why). Ask it again with the arm64 root's own
    # dpkg database and libraries, as on an arm64 machine, and write that into the package.
    shlibs_dir=target/deb-stage/shlibdeps
    rm -rf "$shlibs_dir"
    mkdir -p "$shlibs_dir/debian"
    : >"$shlibs_dir/debian/control"
    bin_abs=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
    auto=$(cd "$shlibs_dir" && DEB_HOST_ARCH=arm64 DPKG_ADMINDIR=$sysroot/.dpkg \
        dpkg-shlibdeps --admindir="$sysroot/.dpkg" -xlibgcc -l"$lib" -l"$sysroot/lib/aarch64-linux-gnu" \
        -O "$bin_abs" | sed -n 's/^shlibs:Depends=//p') ||
        die "dpkg-shlibdeps found no arm64 dependencies for $binary (above)"
    [ -n "$auto" ] || die "dpkg-shlibdeps found no arm64 dependencies for $binary"
    # As cargo-deb: libgcc is always there (LSB).
    auto=$(echo "$auto" | tr ',' '\n' | sed 's/^ *//' | grep -v '^libgcc' | paste -sd, | sed 's/,/, /g')
    rest=$(sed -n 's/^depends = "\$auto, \(.*\)"$/\1/p' Cargo.toml)
    [ -n "$rest" ] || die "Cargo.toml's [package.metadata.deb] depends does not start with \$auto"
    repack=target/deb-stage/repack
    rm -rf "$repack"
    dpkg-deb -R "$out" "$repack"
    sed -i "s|^Depends: .*|Depends: $auto, $rest|" "$repack/DEBIAN/control"
    dpkg-deb --root-owner-group -b "$repack" "$out" >/dev/null
    rm -rf "$repack" "$shlibs_dir"
fi
echo "make_deb: $out ($(du -h "$out" | cut -f1))"
dpkg-deb --field "$out" Package Version Architecture Depends Recommends
