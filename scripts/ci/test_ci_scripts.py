#!/usr/bin/env python3
"""Tests of make test's own checks (scripts/ci/line_limit.py, import_cycles.py's
test-module finder) on small trees in a temporary folder, and of
jetpack_abi_check.py's readers on small inputs and on a binary compiled here.

Run by: `make test` (before the checks themselves), or by hand:
  python3 scripts/ci/test_ci_scripts.py
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import import_cycles  # noqa: E402
import jetpack_abi_check as abi  # noqa: E402
import line_limit  # noqa: E402


def tree(files):
    """A temporary src/ folder holding `files` (path -> text); returns its root."""
    root = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, root, True)
    for path, text in files.items():
        full = os.path.join(root, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return root


def run(script, root, *args):
    return subprocess.run([sys.executable, os.path.join(HERE, script), "--src",
                           os.path.join(root, "src"), *args],
                          capture_output=True, text=True)


CODE = "".join(f"fn f{i}() {{}}\n" for i in range(5))
TESTS = "#[cfg(test)]\nmod tests {\n    // a brace in a comment: }\n    #[test]\n    fn t() {}\n}\n"


class LineLimit(unittest.TestCase):
    def test_test_modules_do_not_count_and_comments_do(self):
        self.assertEqual(line_limit.non_test_lines(CODE + TESTS), 5)
        self.assertEqual(line_limit.non_test_lines("//! header {\n" + CODE), 6)

    def test_loom_and_other_test_only_modules_do_not_count(self):
        loom = '#[cfg(all(test, feature = "loom"))]\nmod loom_model {\n    fn x() {}\n}\n'
        self.assertEqual(line_limit.non_test_lines(CODE + loom), 5)
        not_test = "#[cfg(not(test))]\nmod real {\n    fn y() {}\n}\n"
        self.assertEqual(line_limit.non_test_lines(CODE + not_test), 9)

    def test_a_file_over_the_limit_fails_named_with_its_count(self):
        root = tree({"a/big.rs": CODE + TESTS, "small.rs": "fn x() {}\n"})
        over = run("line_limit.py", root, "--limit", "4")
        self.assertEqual(over.returncode, 1)
        self.assertIn("src/a/big.rs: 5 non-test lines (limit 4)", over.stdout)
        self.assertNotIn("small.rs", over.stdout)
        within = run("line_limit.py", root, "--limit", "5")
        self.assertEqual(within.returncode, 0, within.stdout)


class ImportCycles(unittest.TestCase):
    def test_test_only_predicates(self):
        for cfg in ["test", "all(test, feature = \"loom\")", "all(test, not(feature = \"loom\"))"]:
            self.assertTrue(import_cycles.test_only(cfg), cfg)
        for cfg in ["not(test)", "any(test, feature = \"x\")", "all(not(test), x)", "feature = \"loom\""]:
            self.assertFalse(import_cycles.test_only(cfg), cfg)

    def test_a_circle_fails_and_one_only_in_tests_does_not(self):
        circle = tree({"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::X;\n",
                       "b.rs": "use crate::a::Y;\n"})
        self.assertEqual(run("import_cycles.py", circle).returncode, 1)
        in_tests = tree({"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::X;\n",
                         "b.rs": "#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n"})
        self.assertEqual(run("import_cycles.py", in_tests).returncode, 0)


OBJDUMP_T = """
/bin/x:     file format elf64-x86-64

DYNAMIC SYMBOL TABLE:
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.34) __libc_start_main
0000000000000000  w   D  *UND*\t0000000000000000              __gmon_start__
0000000000000000      DF *UND*\t0000000000000000  Base        g_free
0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.36  arc4random
0000000000000000      DF *UND*\t0000000000000000 (GLIBCXX_3.4.32) _ZSt21ios_base_library_initv
0000000000000000      DF *UND*\t0000000000000000  CXXABI_1.3.13 __cxa_rethrow
0000000000000000      DF *UND*\t0000000000000000 (OPENSSL_3.0.0) EVP_MD_fetch
0000000000000000      DF *UND*\t0000000000000000  Base        gst_video_info_dma_drm_init
00000000004c2f30 g    DF .text\t0000000000000013  Base        defined_here
"""

GIR = """<?xml version="1.0"?>
<repository version="1.2" xmlns="http://www.gtk.org/introspection/core/1.0"
    xmlns:c="http://www.gtk.org/introspection/c/1.0"
    xmlns:glib="http://www.gtk.org/introspection/glib/1.0">
  <include name="GLib" version="2.0"/>
  <namespace name="Gst" version="1.0">
    <function name="init" c:identifier="gst_init"/>
    <function name="thing" c:identifier="gst_thing" version="1.16."/>
    <class name="New" glib:get-type="gst_new_get_type" version="1.22">
      <method name="go" c:identifier="gst_new_go"/>
      <method name="old" c:identifier="gst_new_old" version="1.22"/>
    </class>
    <function name="patch" c:identifier="gst_patch" version="1.20.4"/>
  </namespace>
</repository>
"""


class JetpackAbiCheck(unittest.TestCase):
    def test_objdump_lines_are_read_with_or_without_brackets(self):
        syms = dict(abi.imported_symbols(OBJDUMP_T))
        self.assertEqual(syms["__libc_start_main"], "GLIBC_2.34")
        self.assertEqual(syms["arc4random"], "GLIBC_2.36")
        self.assertIsNone(syms["__gmon_start__"])
        self.assertIsNone(syms["g_free"])
        self.assertNotIn("defined_here", syms)

    def test_versions_past_jetpack_6_and_unknown_libraries_are_named(self):
        bad = "\n".join(abi.version_offenders(abi.imported_symbols(OBJDUMP_T)))
        self.assertIn("arc4random: GLIBC_2.36 (JetPack 6 has GLIBC_2.35)", bad)
        self.assertIn("_ZSt21ios_base_library_initv: GLIBCXX_3.4.32", bad)
        self.assertIn("EVP_MD_fetch: OPENSSL_3.0.0 (no JetPack 6 limit known", bad)
        self.assertNotIn("__libc_start_main", bad)
        self.assertNotIn("__cxa_rethrow", bad)
        self.assertEqual(len(bad.splitlines()), 3)
        self.assertEqual(abi.version_offenders([("hypot", "GLIBC_2.35"),
                                                ("x", "GCC_12.0.0")]), [])
        self.assertEqual(len(abi.version_offenders([("y", "GLIBC_PRIVATE")])), 1)

    def test_gst_versions_come_from_the_gir_and_its_classes(self):
        root = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, root, True)
        path = os.path.join(root, "Gst-1.0.gir")
        with open(path, "w", encoding="utf-8") as f:
            f.write(GIR)
        since = abi.gst_since([path])
        self.assertEqual(since["gst_init"], (1, 0))  # not the format's 1.2
        self.assertEqual(since["gst_thing"], (1, 16))
        self.assertEqual(since["gst_new_get_type"], (1, 22))
        self.assertEqual(since["gst_new_go"], (1, 22))  # from its class
        syms = [(n, None) for n in ["gst_init", "gst_thing", "gst_new_go", "gst_patch",
                                    "gst_nowhere", "g_free"]]
        bad = "\n".join(abi.gst_offenders(syms, since))
        self.assertIn("gst_new_go: since GStreamer 1.22 (JetPack 6 has 1.20.3)", bad)
        self.assertIn("gst_patch: since GStreamer 1.20.4", bad)
        self.assertIn("gst_nowhere: in no GStreamer .gir file", bad)
        self.assertEqual(len(bad.splitlines()), 3)

    def test_feature_flags_past_1_20_and_2_72_are_named(self):
        tree_text = "\n".join([
            'gstreamer feature "v1_20"', 'gstreamer feature "v1_22"',
            'gstreamer-video-sys feature "v1_24" (*)', 'glib feature "v2_72"',
            'glib-sys feature "v2_74"', 'gio feature "v2_80"', 'other feature "v9_99"',
            'gstreamer feature "default"'])
        bad = abi.feature_offenders(tree_text)
        self.assertEqual(len(bad), 4, bad)
        self.assertTrue(any(b.startswith('gstreamer feature "v1_22"') for b in bad))
        self.assertTrue(any(b.startswith('gstreamer-video-sys feature "v1_24"') for b in bad))
        self.assertTrue(any(b.startswith('glib-sys feature "v2_74"') for b in bad))
        self.assertEqual(abi.feature_offenders('gstreamer feature "v1_20"'), [])

    @unittest.skipUnless(shutil.which("cc") and shutil.which("objdump")
                         and os.path.exists("/usr/share/gir-1.0/Gst-1.0.gir"),
                         "needs cc, objdump and libgstreamer1.0-dev")
    def test_a_binary_that_needs_glibc_2_36_fails_by_name(self):
        root = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, root, True)
        src, exe = os.path.join(root, "a.c"), os.path.join(root, "a")
        with open(src, "w", encoding="utf-8") as f:
            # arc4random is new in glibc 2.36 (Debian 12 has it, Ubuntu 22.04 not).
            f.write("#include <stdlib.h>\nint main(void) { return (int)(arc4random() & 1); }\n")
        if subprocess.run(["cc", "-o", exe, src], capture_output=True).returncode != 0:
            self.skipTest("this C library has no arc4random (older than glibc 2.36)")
        check = os.path.join(HERE, "jetpack_abi_check.py")
        out = subprocess.run([sys.executable, check, "--no-cargo-tree", exe],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("arc4random: GLIBC_2.36 (JetPack 6 has GLIBC_2.35)", out.stderr)
        with open(src, "w", encoding="utf-8") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run(["cc", "-o", exe, src], check=True)
        out = subprocess.run([sys.executable, check, "--no-cargo-tree", exe],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
