#!/bin/sh
# Run by: scripts/package/make_deb.sh arm64 (`make jetson`) and scripts/ci/arm64_run.sh;
# docs/JETSON.md, "Build the arm64 package on x86_64".
#
# Makes an arm64 system root of Debian 12's packages in target/arm64-sysroot (or $1):
# GStreamer's development files and plugins, GLib, the C and C++ runtime, and
# everything they depend on, unpacked with `dpkg -x` rather than installed. Why: in
# Debian 12, libgstreamer-plugins-base1.0-dev and libgstrtspserver-1.0-dev are not
# multi-arch, so installing their arm64 packages removes the amd64 ones that every x86_64
# build needs (docs/CI.md). Unpacked into a folder of its own, the arm64 files serve
# pkg-config and the linker of the cross-build (with --sysroot), and `qemu-aarch64-static`
# (QEMU_LD_PREFIX) runs the arm64 binary with them, plugins included.
#
# Needs: `dpkg --add-architecture arm64 && apt-get update` (`make aarch64-deps`) for the
# package lists, apt-get and dpkg-deb; no root (apt-get download, dpkg -x). The packages are
# those apt would install into an empty arm64 system for the list below, resolved by apt
# itself (apt-get -s against an empty dpkg status), so the root holds one consistent set.
# Done once: a stamp holding the package list marks a complete root.
set -eu
cd "$(dirname "$0")/../.."

root=${1:-target/arm64-sysroot}
# What the cross-build links (GStreamer core, video and app; GLib) and what the binary
# runs with under emulation (the plugins the demo's pipelines use: -base's videoconvert,
# appsink, decodebin; -good's jpegdec, pngdec, multifilesrc), with the C++ runtime of
# trt_bridge.
PACKAGES="libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-plugins-base
gstreamer1.0-plugins-good libglib2.0-dev libc6 libstdc++6"

die() { echo "arm64_sysroot: $*" >&2; exit 1; }

if ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
    die "apt knows no arm64 packages: run \`make aarch64-deps\` (root), or by hand:
  dpkg --add-architecture arm64 && apt-get update"
fi

stamp=$root/.sealcheck-sysroot
# shellcheck disable=SC2086
want="$(echo $PACKAGES) (with its dpkg database, 2)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

work=$root.download
rm -rf "$work" "$root"
mkdir -p "$work" "$root"
status=$work/empty-status
: >"$status"
# apt resolves the set as for an empty arm64 machine: "Inst NAME (VERSION ... [ARCH])".
# shellcheck disable=SC2086
apt-get -s -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
    -o Dir::State::status="$status" --no-install-recommends install $PACKAGES \
    >"$work/simulate.txt" 2>&1 || {
    cat "$work/simulate.txt" >&2
    die "apt could not resolve the arm64 packages (above)"
}
# (A line may end in " []" after the parenthesis: libc6's does.)
sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*\[\(arm64\|all\)\]).*$/\1:\3=\2/p' "$work/simulate.txt" \
    | sed 's/:all=/=/' >"$work/packages.txt"
count=$(wc -l <"$work/packages.txt")
[ "$count" -gt 0 ] || die "apt resolved no packages (see $work/simulate.txt)"
echo "arm64_sysroot: downloading $count arm64 packages into $work" >&2
(cd "$work" && xargs apt-get download -q <packages.txt >download.log 2>&1) || {
    tail -20 "$work/download.log" >&2
    die "apt-get download failed (above): is the Debian archive reachable?"
}
# Beside the files, a dpkg database of the root (target/arm64-sysroot/.dpkg) that names
# them with their root's prefix: dpkg-shlibdeps reads the arm64 packages' symbols files
# from it (make_deb.sh: the package's Depends), as it does on an arm64 machine.
admin=$root/.dpkg
mkdir -p "$admin/info" "$admin/updates"
: >"$admin/status"
printf 'amd64\narm64\n' >"$admin/arch"
for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$root"
    pkg=$(dpkg-deb --field "$deb" Package)
    arch=$(dpkg-deb --field "$deb" Architecture)
    # dpkg-query finds this database's files under the package's plain name.
    control=$work/control-$pkg
    dpkg-deb -e "$deb" "$control"
    for file in symbols shlibs; do
        if [ -f "$control/$file" ]; then cp "$control/$file" "$admin/info/$pkg.$file"; fi
    done
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' \
        | grep -v '^/*$' | sed "s|^|$(cd "$root" && pwd)|" >"$admin/info/$pkg.list"
    {
        dpkg-deb --field "$deb" Package Version Architecture Multi-Arch Source Maintainer
        echo "Description: $pkg ($arch), unpacked by arm64_sysroot.sh"
        echo "Status: install ok installed"
        echo
    } >>"$admin/status"
    rm -rf "$control"
done
# Absolute symbolic links point into the build machine's /: make them relative to the root,
# so that the linker and pkg-config find the arm64 files (libfoo.so -> /lib/... and the like).
find "$root" -type l | while read -r link; do
    target=$(readlink "$link")
    case $target in
    /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$target")" "$link" ;;
    esac
done
rm -rf "$work"
# The C library above all: without it the linker would fall back to static archives
# (libm.a), and the binary would need glibc's private symbols.
for lib in lib/aarch64-linux-gnu/libc.so.6 lib/aarch64-linux-gnu/libm.so.6 \
    usr/lib/aarch64-linux-gnu/libgstreamer-1.0.so.0; do
    [ -e "$root/$lib" ] || die "$root/$lib is missing after unpacking: a package was not downloaded"
done
echo "$want" >"$stamp"
echo "arm64_sysroot: $root ($(du -sh "$root" | cut -f1), $count packages)" >&2
