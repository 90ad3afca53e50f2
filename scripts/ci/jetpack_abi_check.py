#!/usr/bin/env python3
"""Does a sealcheck binary need anything newer than JetPack 6 has? (issue 37, point 4)

Run by: `make test`, on the binary it built (scripts/ci/make_test.sh), or by hand on any
build (an x86_64 or an aarch64 binary, a release or a test build):

  python3 scripts/ci/jetpack_abi_check.py target/release/sealcheck
  python3 scripts/ci/jetpack_abi_check.py --no-cargo-tree path/to/sealcheck

JetPack 6 is Ubuntu 22.04: glibc 2.35, libstdc++ and libgcc_s of GCC 12, GStreamer 1.20,
GLib 2.72 (docs/JETSON.md, "What the binary may need"). Three checks, each failing
with the name of every offender:

  1. The symbol versions the binary imports (`objdump -T`): GLIBC_* <= 2.35,
     GLIBCXX_* <= 3.4.30, CXXABI_* <= 1.3.13, GCC_* <= 12.0.0. A version of any other
     library fails too ("no JetPack 6 limit known"): add its limit below once it is known.
  2. Every imported gst_* symbol existed in GStreamer 1.20: its "since" version comes
     from the GObject-introspection files of this machine's GStreamer development
     packages (/usr/share/gir-1.0/Gst*-1.0.gir, from libgstreamer1.0-dev and
     libgstreamer-plugins-base1.0-dev, which `make deps` installs): the `version`
     attribute of the function or of the class/record it belongs to. A gst_* symbol
     in none of those files fails, its version being unknown.
  3. `cargo tree -e features` (all features, all targets, dev-dependencies included):
     no gstreamer-rs crate has a `v1_22` or later feature on, no glib-rs crate
     (glib, gobject-sys, gio) a `v2_74` or later one; those features are what let
     Rust code call the newer C API at all. Skipped with --no-cargo-tree (a binary
     built from another tree).

Exit status: 0 all good, 1 an offender (each named on stderr), 2 a tool or file missing.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

# The newest version of each symbol-version namespace that Ubuntu 22.04 (JetPack 6) has.
# glibc 2.35; libstdc++6 12.3.0-1ubuntu1~22.04 (GCC 12: GLIBCXX_3.4.30, CXXABI_1.3.13);
# libgcc-s1 of GCC 12 (GCC_12.0.0).
LIMITS = {
    "GLIBC": (2, 35),
    "GLIBCXX": (3, 4, 30),
    "CXXABI": (1, 3, 13),
    "GCC": (12, 0, 0),
}
# Version names that carry no number to compare (GLIBC_PRIVATE must never be imported).
ALWAYS_BAD = {"GLIBC_PRIVATE"}
GSTREAMER_MAX = (1, 20)
# Ubuntu 22.04's GStreamer is 1.20.3: a symbol since 1.20.4 is past it.
GSTREAMER_SYMBOLS_MAX = (1, 20, 3)
GLIB_MAX = (2, 72)  # Ubuntu 22.04's GLib

GIR_NAMESPACE = "{http://www.gtk.org/introspection/core/1.0}namespace"
GIR_C = "{http://www.gtk.org/introspection/c/1.0}identifier"
GIR_GET_TYPE = "{http://www.gtk.org/introspection/glib/1.0}get-type"

EM_X86_64, EM_AARCH64 = 62, 183


def version_tuple(text):
    # "1.16." occurs in GStreamer's .gir files: empty parts are dropped.
    return tuple(int(p) for p in text.split(".") if p)


def show(version):
    return ".".join(str(p) for p in version)


def imported_symbols(objdump_text):
    """(symbol, version-or-None) for each undefined dynamic symbol of `objdump -T` output.

    A line looks like
      0000000000000000      DF *UND*  0000000000000000 (GLIBC_2.34) __libc_start_main
      0000000000000000  w   D  *UND*  0000000000000000              __gmon_start__
      0000000000000000      DF *UND*  0000000000000000  Base        g_free
    (binutils 2.40 prints the version in brackets when it is hidden, without them
    otherwise: both are read; "Base" means no version).
    """
    out = []
    for line in objdump_text.splitlines():
        if "*UND*" not in line:
            continue
        rest = line.split("*UND*", 1)[1].split()
        if len(rest) < 2:
            continue
        # rest: size, [version], name
        name = rest[-1]
        version = rest[1].strip("()") if len(rest) >= 3 else None
        # "Base": a library without symbol versions (GLib, GStreamer).
        out.append((name, None if version == "Base" else version))
    return out


def version_offenders(symbols, limits=LIMITS):
    """Messages for imported symbols whose version is past its limit or unknown."""
    bad = []
    for name, version in symbols:
        if not version:
            continue
        if version in ALWAYS_BAD:
            bad.append(f"{name}: {version} (a private interface: never stable)")
            continue
        m = re.fullmatch(r"([A-Z][A-Z_]*?)_(\d+(?:\.\d+)*)", version)
        if not m or m.group(1) not in limits:
            bad.append(f"{name}: {version} (no JetPack 6 limit known for this library:"
                       " add it to LIMITS in scripts/ci/jetpack_abi_check.py)")
            continue
        have, limit = version_tuple(m.group(2)), limits[m.group(1)]
        if have > limit:
            bad.append(f"{name}: {version} (JetPack 6 has {m.group(1)}_{show(limit)})")
    return bad


def gst_since(gir_files):
    """{gst_* symbol: since-version tuple} from GObject-introspection files."""
    since = {}

    def walk(element, inherited):
        version = element.get("version", inherited)
        for key in (GIR_C, GIR_GET_TYPE):
            symbol = element.get(key)
            if symbol and symbol.startswith("gst_"):
                since.setdefault(symbol, version_tuple(version))
        for child in element:
            walk(child, version)

    for path in gir_files:
        # <repository version="1.2"> is the .gir format's version and <include
        # version="2.0"> GLib's: only what is inside <namespace> counts.
        for namespace in ET.parse(path).getroot().iter(GIR_NAMESPACE):
            walk(namespace, "1.0")
    return since


def gst_offenders(symbols, since, maximum=GSTREAMER_SYMBOLS_MAX):
    bad = []
    for name, _ in symbols:
        if not name.startswith("gst_"):
            continue
        if name not in since:
            bad.append(f"{name}: in no GStreamer .gir file here, so its version is unknown")
        elif since[name] > maximum:
            bad.append(f"{name}: since GStreamer {show(since[name])}"
                       f" (JetPack 6 has {show(maximum)})")
    return bad


FEATURE_LINE = re.compile(r'^(?P<crate>[\w-]+) feature "v(?P<major>\d+)_(?P<minor>\d+)"')


def feature_offenders(tree_text):
    """gstreamer-rs/glib-rs version features past JetPack 6 in `cargo tree -e features
    --prefix none` output."""
    bad = set()
    for line in tree_text.splitlines():
        m = FEATURE_LINE.match(line.strip())
        if not m:
            continue
        crate = m.group("crate")
        version = (int(m.group("major")), int(m.group("minor")))
        if crate.startswith("gstreamer") and version > GSTREAMER_MAX:
            bad.add(f'{crate} feature "v{version[0]}_{version[1]}": GStreamer'
                    f" {show(version)} API (JetPack 6 has {show(GSTREAMER_MAX)})")
        elif crate.split("-")[0] in ("glib", "gobject", "gio") and version > GLIB_MAX:
            bad.add(f'{crate} feature "v{version[0]}_{version[1]}": GLib {show(version)}'
                    f" API (JetPack 6 has {show(GLIB_MAX)})")
    return sorted(bad)


def elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "little")


def pick_objdump(binary):
    if os.environ.get("OBJDUMP"):
        return os.environ["OBJDUMP"]
    # Debian's plain objdump reads its own architecture; an aarch64 binary on an
    # x86_64 machine wants the cross binutils (binutils-aarch64-linux-gnu).
    if elf_machine(binary) == EM_AARCH64 and os.uname().machine != "aarch64":
        return "aarch64-linux-gnu-objdump"
    return "objdump"


def missing(what, package):
    print(f"jetpack_abi_check: {what} not found: apt-get install {package}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--gir-dir", default="/usr/share/gir-1.0")
    ap.add_argument("--no-cargo-tree", action="store_true",
                    help="skip the gstreamer-rs/glib-rs feature check")
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    args = ap.parse_args()

    if not os.path.isfile(args.binary):
        print(f"jetpack_abi_check: no binary at {args.binary}", file=sys.stderr)
        return 2
    machine = elf_machine(args.binary)
    if machine not in (EM_X86_64, EM_AARCH64):
        print(f"jetpack_abi_check: {args.binary} is not an x86_64 or aarch64 ELF file",
              file=sys.stderr)
        return 2
    objdump = pick_objdump(args.binary)
    if not shutil.which(objdump):
        missing(objdump, "binutils-aarch64-linux-gnu" if "aarch64" in objdump else "binutils")
    gir_files = sorted(glob.glob(os.path.join(args.gir_dir, "Gst*-1.0.gir")))
    if not any(os.path.basename(p) == "Gst-1.0.gir" for p in gir_files):
        missing(f"{args.gir_dir}/Gst-1.0.gir",
                "libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev (make deps)")

    dump = subprocess.run([objdump, "-T", args.binary], capture_output=True, text=True)
    if dump.returncode != 0:
        print(f"jetpack_abi_check: {objdump} -T {args.binary} failed:\n{dump.stderr}",
              file=sys.stderr)
        return 2
    symbols = imported_symbols(dump.stdout)
    failures = []

    bad = version_offenders(symbols)
    failures += [f"symbol version: {m}" for m in bad]
    versions = {}
    for _, v in symbols:
        m = v and re.fullmatch(r"([A-Z][A-Z_]*?)_(\d+(?:\.\d+)*)", v)
        if m:
            key = m.group(1)
            if key not in versions or version_tuple(m.group(2)) > versions[key]:
                versions[key] = version_tuple(m.group(2))
    newest = ", ".join(f"{k}_{show(v)}" for k, v in sorted(versions.items()))
    print(f"jetpack_abi_check: {args.binary}: {len(symbols)} imported symbols;"
          f" newest versions: {newest or 'none'}")

    since = gst_since(gir_files)
    gst = [s for s in symbols if s[0].startswith("gst_")]
    failures += [f"GStreamer: {m}" for m in gst_offenders(symbols, since)]
    known = [since[n] for n, _ in gst if n in since]
    print(f"jetpack_abi_check: {len(gst)} gst_* symbols imported; newest since"
          f" {show(max(known)) if known else '-'} (limit {show(GSTREAMER_SYMBOLS_MAX)};"
          f" {len(since)} symbols in {len(gir_files)} .gir files)")

    if not args.no_cargo_tree:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        tree = subprocess.run([args.cargo, "tree", "-e", "features", "--prefix", "none",
                               "--all-features", "--target", "all", "--locked"],
                              cwd=root, capture_output=True, text=True, timeout=300)
        if tree.returncode != 0:
            print(f"jetpack_abi_check: cargo tree failed:\n{tree.stderr}", file=sys.stderr)
            return 2
        failures += [f"cargo feature: {m}" for m in feature_offenders(tree.stdout)]
        print("jetpack_abi_check: cargo tree -e features: no gstreamer-rs feature past"
              f" v1_{GSTREAMER_MAX[1]}, no glib-rs past v2_{GLIB_MAX[1]}"
              if not feature_offenders(tree.stdout) else
              "jetpack_abi_check: cargo tree -e features: see below")

    for message in failures:
        print(f"jetpack_abi_check: NEWER THAN JETPACK 6: {message}", file=sys.stderr)
    if failures:
        print(f"jetpack_abi_check: {len(failures)} offender(s): this binary would not start"
              " (or not work) on JetPack 6", file=sys.stderr)
        return 1
    print("jetpack_abi_check: OK: nothing newer than JetPack 6 (glibc 2.35, GCC 12's"
          " libstdc++/libgcc_s, GStreamer 1.20, GLib 2.72)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
