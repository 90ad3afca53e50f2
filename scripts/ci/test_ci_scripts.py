#!/usr/bin/env python3
"""Tests of make test's own checks (scripts/ci/line_limit.py, import_cycles.py's
test-module finder) on small trees in a temporary folder.

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


if __name__ == "__main__":
    unittest.main()
