#!/bin/sh
# Run by: `make deb-test` (after `make deb`), by hand, as root, with the network (apt fetches
# the package's dependencies from deb.debian.org). Not part of `make test`: it needs root,
# the network and some minutes. docs/JETSON.md, "Install the package", says what it proves.
#
#   scripts/ci/deb_test.sh dist/sealcheck_0.1.0_amd64.deb
#
# Installs the package into a fresh Debian 12 root (debootstrap --variant=minbase bookworm,
# made once and cached, then copied for each run) with `apt-get install ./sealcheck_*.deb`
# inside a chroot, and checks, each step timed:
#   1. the files, the conffiles, the service user (group video), the config's owner and mode,
#      the unit's paths (/usr/bin/sealcheck);
#   2. `sealcheck check-config`, as the service user, on the shipped demo config and on the
#      installed template /etc/sealcheck/sealcheck.toml (its /dev/video0 need not exist: a
#      camera that is not there yet is waited for at run time);
#   3. the demo: the shipped clip through the shipped models as the service user (tract:
#      no ONNX Runtime in the package), one result line per frame, the verdicts against
#      the clip's expected.jsonl;
#   4. the config edited, the package reinstalled over it (apt-get install --reinstall):
#      the edit stays; removed (the config stays, edited); installed again: the edit stays;
#      upgraded to a copy with a higher version and a changed template (apt-get -o
#      Dpkg::Options::=--force-confold): the edit stays, the new template lands beside it;
#   5. purged: the config and the sysctl file are gone, /var/lib/sealcheck and the user stay.
# The sysctl file is not applied inside a chroot (it would set the host's kernel): the
# postinst says so and the test checks that it did.
#
# Environment:
#   DEB_TEST_BASE   the cached debootstrap root (default /var/cache/sealcheck-deb-test/bookworm-ARCH;
#                   made when missing, about 2 to 3 minutes)
#   DEB_TEST_ROOT   the root of this run (default target/deb-test/root-ARCH; replaced each run)
#   DEB_TEST_MIRROR default http://deb.debian.org/debian
#   DEB_TEST_RECOMMENDS=1  install the Recommends too (Aravis, plugins-bad, libav: slower)
#   KEEP=1          leave this run's root behind for a look
#   DEB_TEST_FRAMES=N  the demo on the clip's first N frames (`make jetson-check`: under
#                   emulation tract takes seconds a frame); DEB_TEST_DEMO_LIMIT its time
#                   limit in s (default 900)
# An arm64 package runs the same way under qemu-user-static (binfmt), much slower.
set -eu
cd "$(dirname "$0")/../.."

deb=${1:-}
[ -n "$deb" ] && [ -f "$deb" ] || {
    echo "deb_test: usage: $0 dist/sealcheck_<version>_<arch>.deb (make deb builds it)" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || { echo "deb_test: needs root (debootstrap, chroot, mount): sudo $0 $deb" >&2; exit 2; }
for tool in debootstrap chroot dpkg-deb timeout; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "deb_test: $tool not found: apt-get install debootstrap" >&2
        exit 2
    }
done

arch=$(dpkg-deb --field "$deb" Architecture)
host_arch=$(dpkg --print-architecture)
if [ "$arch" != "$host_arch" ] && ! [ -e "/proc/sys/fs/binfmt_misc/qemu-aarch64" ] \
    && command -v update-binfmts >/dev/null 2>&1; then
    # A container often starts with binfmt_misc unmounted: mount it and register qemu
    # (binfmt-support's entry has the F flag, so the chroot needs no copy of qemu).
    [ -e /proc/sys/fs/binfmt_misc/register ] ||
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
fi
if [ "$arch" != "$host_arch" ] && ! [ -e "/proc/sys/fs/binfmt_misc/qemu-aarch64" ]; then
    echo "deb_test: a $arch package on $host_arch needs qemu-user-static with binfmt:" \
        "apt-get install qemu-user-static binfmt-support" >&2
    exit 2
fi
mirror=${DEB_TEST_MIRROR:-http://deb.debian.org/debian}
base=${DEB_TEST_BASE:-/var/cache/sealcheck-deb-test/bookworm-$arch}
root=${DEB_TEST_ROOT:-$PWD/target/deb-test/root-$arch}
recommends=--no-install-recommends
[ "${DEB_TEST_RECOMMENDS:-0}" = 1 ] && recommends=--install-recommends

t0=$(date +%s)
step_start=$t0
step() {
    now=$(date +%s)
    echo "=== deb_test +$((now - t0))s (previous step $((now - step_start))s): $*"
    step_start=$now
}
fail() { echo "deb_test: FAILED: $*" >&2; exit 1; }
# Every command in the root is bounded in time.
in_root() { timeout "${LIMIT:-600}" chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

mounted=""
cleanup() {
    for m in $mounted; do umount -l "$m" 2>/dev/null || true; done
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$root"; else echo "deb_test: kept $root"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ ! -x "$base/usr/bin/apt-get" ]; then
    step "debootstrap --variant=minbase --arch=$arch bookworm $base"
    rm -rf "$base"
    mkdir -p "$(dirname "$base")"
    timeout 1800 debootstrap --variant=minbase --arch="$arch" bookworm "$base" "$mirror" ||
        { rm -rf "$base"; fail "debootstrap (network? mirror $mirror)"; }
fi

step "fresh root: $root (copy of $base)"
rm -rf "$root"
mkdir -p "$(dirname "$root")"
cp -a "$base" "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service starts inside the chroot (Debian's convention for chroots).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc" && mounted="$root/proc $mounted"
mount -t sysfs -o ro sysfs "$root/sys" && mounted="$root/sys $mounted"
pkg=$(basename "$deb")
cp "$deb" "$root/tmp/$pkg"

step "apt-get update"
in_root apt-get update -qq || fail "apt-get update (network? mirror $mirror)"

step "apt-get install $recommends ./$pkg"
(cd "$root/tmp" && LIMIT=1200 in_root sh -c "cd /tmp && apt-get install -y -q $recommends ./$pkg") \
    >"$root/tmp/install.log" 2>&1 || { tail -40 "$root/tmp/install.log"; fail "apt-get install ./$pkg"; }
grep -E '^sealcheck: |^Setting up sealcheck' "$root/tmp/install.log" || true
echo "installed packages in the root: $(in_root dpkg-query -W -f '.\n' | wc -l)"

step "1. files, conffiles, user, unit"
in_root dpkg-query -W -f '${Status} ${Version}\n' sealcheck | grep -q 'install ok installed' ||
    fail "sealcheck is not installed"
for f in /usr/bin/sealcheck /lib/systemd/system/sealcheck.service /etc/sealcheck/sealcheck.toml \
    /etc/sysctl.d/60-sealcheck-gige.conf /usr/lib/sysusers.d/sealcheck.conf \
    /usr/share/sealcheck/demo.toml /usr/share/sealcheck/models/seg.onnx \
    /usr/share/sealcheck/models/cls.onnx /usr/share/sealcheck/samples/demo_clip/frame_00000.jpg \
    /usr/share/doc/sealcheck/OPERATIONS.md /usr/share/doc/sealcheck/copyright; do
    [ -e "$root$f" ] || fail "$f is missing after install"
done
conffiles=$(in_root dpkg-query -W -f '${Conffiles}\n' sealcheck)
echo "conffiles:$conffiles" | tr '\n' ' '; echo
echo "$conffiles" | grep -q ' /etc/sealcheck/sealcheck.toml ' || fail "sealcheck.toml is not a conffile"
echo "$conffiles" | grep -q ' /etc/sysctl.d/60-sealcheck-gige.conf ' || fail "the sysctl file is not a conffile"
in_root id sealcheck
in_root id -nG sealcheck | grep -qw video || fail "user sealcheck is not in group video"
mode=$(in_root stat -c '%a %U:%G' /etc/sealcheck/sealcheck.toml)
[ "$mode" = "640 root:sealcheck" ] || fail "/etc/sealcheck/sealcheck.toml is $mode, not 640 root:sealcheck"
grep -q '^ExecStart=/usr/bin/sealcheck run --config /etc/sealcheck/sealcheck.toml$' \
    "$root/lib/systemd/system/sealcheck.service" || fail "the unit's ExecStart is not /usr/bin/sealcheck"
if grep -nE '^[^#]*/usr/local' "$root/lib/systemd/system/sealcheck.service" "$root/etc/sealcheck/sealcheck.toml"; then
    fail "a /usr/local path in the installed unit or config (above)"
fi
grep -q 'in a chroot: /etc/sysctl.d/60-sealcheck-gige.conf not applied' "$root/tmp/install.log" ||
    fail "postinst did not say that it left the sysctl file unapplied in the chroot"
in_root sealcheck --version

step "2. check-config"
in_root runuser -u sealcheck -- sealcheck check-config /usr/share/sealcheck/demo.toml ||
    fail "check-config on the shipped demo config"
# The template names /dev/video0; a camera that is not there yet is waited for at run time
# (docs/OPERATIONS.md), so check-config passes without it too.
in_root runuser -u sealcheck -- sealcheck check-config /etc/sealcheck/sealcheck.toml ||
    fail "check-config on the installed template /etc/sealcheck/sealcheck.toml"

frames=$(ls "$root/usr/share/sealcheck/samples/demo_clip/" | grep -c '^frame_.*\.jpg$')
demo=/usr/share/sealcheck/demo.toml
if [ -n "${DEB_TEST_FRAMES:-}" ] && [ "$DEB_TEST_FRAMES" -lt "$frames" ]; then
    # Under emulation tract takes seconds a frame: the demo config on the clip's first
    # DEB_TEST_FRAMES frames (make jetson-check; docs/JETSON.md says how many).
    frames=$DEB_TEST_FRAMES
    mkdir -p "$root/tmp/clip"
    i=0
    while [ "$i" -lt "$frames" ]; do
        f=$(printf 'frame_%05d.jpg' "$i")
        cp "$root/usr/share/sealcheck/samples/demo_clip/$f" "$root/tmp/clip/$f"
        i=$((i + 1))
    done
    sed 's|^location = .*|location = "/tmp/clip/frame_%05d.jpg"|' "$root$demo" >"$root/tmp/demo-prefix.toml"
    chmod -R a+rX "$root/tmp/clip" "$root/tmp/demo-prefix.toml"
    demo=/tmp/demo-prefix.toml
fi
step "3. the demo: sealcheck run --config $demo (as sealcheck, $frames frames)"
LIMIT=${DEB_TEST_DEMO_LIMIT:-900} in_root runuser -u sealcheck -- sealcheck run --config "$demo" \
    >"$root/tmp/demo.log" 2>&1 || { tail -30 "$root/tmp/demo.log"; fail "the demo run"; }
grep -v 'level=debug' "$root/tmp/demo.log" | tail -8
lines=$(wc -l <"$root/var/lib/sealcheck/demo.jsonl")
[ "$lines" = "$frames" ] || fail "the demo wrote $lines result lines for $frames frames"
# Verdicts against the clip's expected ones (defect = fail, ok = pass), frame by frame.
expected="$root/usr/share/sealcheck/samples/demo_clip/expected.jsonl"
sed -n 's/.*"verdict": *"\([a-z]*\)".*/\1/p' "$expected" | sed 's/^defect$/fail/; s/^ok$/pass/' | head -n "$frames" >"$root/tmp/want"
sed -n 's/.*"seq": *\([0-9]*\),.*"verdict": *"\([a-z]*\)".*/\1 \2/p' "$root/var/lib/sealcheck/demo.jsonl" |
    sort -n | cut -d' ' -f2 >"$root/tmp/got"
same=$(paste -d' ' "$root/tmp/want" "$root/tmp/got" | awk '$1 == $2' | wc -l)
echo "demo: $lines result lines for $frames frames; $same of $frames verdicts as expected.jsonl"
[ "$same" -ge $((frames * 95 / 100)) ] || fail "only $same of $frames demo verdicts match expected.jsonl"

step "4. edit the config; reinstall over it; remove; install again"
echo '# edited by deb_test: this line must survive' >>"$root/etc/sealcheck/sealcheck.toml"
LIMIT=900 in_root sh -c "cd /tmp && apt-get install -y -q --reinstall $recommends ./$pkg" >"$root/tmp/reinstall.log" 2>&1 ||
    { tail -30 "$root/tmp/reinstall.log"; fail "apt-get install --reinstall"; }
grep -q 'edited by deb_test' "$root/etc/sealcheck/sealcheck.toml" || fail "reinstalling over the edited config lost the edit"
echo "reinstalled over the edited config: edit kept"
LIMIT=900 in_root apt-get remove -y -q sealcheck >"$root/tmp/remove.log" 2>&1 ||
    { tail -30 "$root/tmp/remove.log"; fail "apt-get remove"; }
[ ! -e "$root/usr/bin/sealcheck" ] || fail "/usr/bin/sealcheck is still there after remove"
grep -q 'edited by deb_test' "$root/etc/sealcheck/sealcheck.toml" || fail "remove lost the edited config"
in_root dpkg-query -W -f '${Status}\n' sealcheck | grep -q 'config-files' || fail "not in state config-files after remove"
echo "removed: binary gone, edited config kept (state config-files)"
LIMIT=900 in_root sh -c "cd /tmp && apt-get install -y -q $recommends ./$pkg" >"$root/tmp/install2.log" 2>&1 ||
    { tail -30 "$root/tmp/install2.log"; fail "apt-get install after remove"; }
grep -q 'edited by deb_test' "$root/etc/sealcheck/sealcheck.toml" || fail "installing again lost the edit"
[ -x "$root/usr/bin/sealcheck" ] || fail "/usr/bin/sealcheck missing after installing again"
mode=$(in_root stat -c '%a %U:%G' /etc/sealcheck/sealcheck.toml)
[ "$mode" = "640 root:sealcheck" ] || fail "after installing again the config is $mode"
echo "installed again: edit kept, config $mode"

step "4b. upgrade to a package whose template changed, over the edited config (--force-confold)"
# The same package with a higher version and one line added to the template: dpkg must
# keep the operator's file and put the new template beside it as .dpkg-dist.
version=$(dpkg-deb --field "$deb" Version)
up=$root/tmp/up
rm -rf "$up"
mkdir -p "$up"
dpkg-deb -R "$deb" "$up/pkg" || fail "dpkg-deb -R $deb"
sed -i "s/^Version: .*/Version: $version+debtest1/" "$up/pkg/DEBIAN/control"
echo '# a changed template (deb_test)' >>"$up/pkg/etc/sealcheck/sealcheck.toml"
dpkg-deb --root-owner-group -Zgzip -z1 -b "$up/pkg" "$up/up.deb" >/dev/null || fail "dpkg-deb -b (the upgrade package)"
LIMIT=900 in_root sh -c "cd /tmp/up && apt-get install -y -q $recommends -o Dpkg::Options::=--force-confold ./up.deb" \
    >"$root/tmp/upgrade.log" 2>&1 || { tail -30 "$root/tmp/upgrade.log"; fail "the upgrade"; }
in_root dpkg-query -W -f '${Version}\n' sealcheck | grep -qx "$version+debtest1" || fail "not upgraded"
grep -q 'edited by deb_test' "$root/etc/sealcheck/sealcheck.toml" || fail "the upgrade lost the edit"
grep -q 'a changed template' "$root/etc/sealcheck/sealcheck.toml.dpkg-dist" ||
    fail "the upgrade's new template is not beside the config as sealcheck.toml.dpkg-dist"
echo "upgraded to $version+debtest1: edit kept, new template in sealcheck.toml.dpkg-dist"

step "5. purge"
LIMIT=900 in_root apt-get purge -y -q sealcheck >"$root/tmp/purge.log" 2>&1 ||
    { tail -30 "$root/tmp/purge.log"; fail "apt-get purge"; }
grep '^sealcheck: purged' "$root/tmp/purge.log" || true
[ ! -e "$root/etc/sealcheck" ] || fail "/etc/sealcheck is still there after purge: $(ls -A "$root/etc/sealcheck")"
[ ! -e "$root/etc/sysctl.d/60-sealcheck-gige.conf" ] || fail "the sysctl file survived purge"
[ -d "$root/var/lib/sealcheck" ] || fail "purge removed /var/lib/sealcheck (the results are kept on purpose)"
in_root id sealcheck >/dev/null || fail "purge removed the user (kept on purpose)"
if in_root dpkg-query -W -f '${Status}\n' sealcheck 2>/dev/null | grep -q 'config-files\|installed'; then
    fail "dpkg still knows sealcheck after purge"
fi
echo "purged: /etc/sealcheck and the sysctl file gone; /var/lib/sealcheck and the user kept"

step "PASSED: $pkg ($arch) in a fresh Debian 12 root"
