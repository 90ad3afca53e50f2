#!/usr/bin/env python3
# Run by: hand: `python3 -m unittest scripts/demo/test_score_cavities.py` (or from scripts/demo:
# `python3 -m unittest test_score_cavities`).
"""Tests of score_cavities.py on hand-made results and labels (standard library only)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import score_cavities  # noqa: E402

# 4 cycles of a 2x3 machine. Truth: cavity 5 defective in cycles 1, 2, 3; cavity 2 in cycle 0.
KINDS = {(0, 2): "gap", (1, 5): "wrinkle", (2, 5): "missing", (3, 5): "contamination"}
# What the "pipeline" said: every defect caught except cavity 5 in cycle 2 (missed), and
# cavity 1 of cycle 3 falsely rejected.
FAILS = {0: [2], 1: [5], 2: [], 3: [1, 5]}


def labels():
    return [{"frame": f, "cavities": [
        {"cavity": c, "label": "defect" if (f, c) in KINDS else "ok", "kind": KINDS.get((f, c), "ok")}
        for c in range(1, 7)]} for f in range(4)]


def result(seq, failed, cavities=range(1, 7)):
    cavs = [{"cavity": c, "verdict": "fail" if c in failed else "pass",
             "reason": "defect" if c in failed else "ok", "defect_prob": 0.9 if c in failed else 0.01,
             "seal_area": 0.08} for c in cavities]
    fl = [c for c in cavities if c in failed]
    return {"seq": seq, "ts": "2026-11-28T08:00:00.000Z", "verdict": "fail" if fl else "pass",
            "reason": "defect" if fl else "ok", "defect_prob": 0.9 if fl else 0.01, "seal_area": 0.08,
            "cavities": cavs, "reject": fl, "reject_mask": sum(1 << (c - 1) for c in fl)}


def results():
    return [result(f, FAILS[f]) for f in range(4)]


class ScoreCavities(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, rows):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        return path

    def run_main(self, res, labs, *extra):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = score_cavities.main(["--results", self.write("r.jsonl", res),
                                      "--labels", self.write("l.jsonl", labs), *extra])
        return rc, out.getvalue(), err.getvalue()

    def test_report(self):
        rc, out, err = self.run_main(results(), labels())
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        lines = out.splitlines()
        # (a) per cavity: caught/total, passed/total, false rejects
        row1 = next(line for line in lines if line.split()[:1] == ["1"])
        self.assertEqual(row1.split(), ["1", "0/0", "-", "3/4", "75.0%", "1", "25.0%"])
        row2 = next(line for line in lines if line.split()[:1] == ["2"])
        self.assertEqual(row2.split(), ["2", "1/1", "100.0%", "3/3", "100.0%", "0", "0.0%"])
        row5 = next(line for line in lines if line.split()[:1] == ["5"])
        self.assertEqual(row5.split(), ["5", "2/3", "66.7%", "1/1", "100.0%", "0", "0.0%"])
        # (b) overall
        self.assertIn("defect recall: 3/4 = 0.7500", lines)
        self.assertIn("false rejects: 1/20 = 0.0500", lines)
        self.assertIn("accuracy against labels: 22/24 = 0.9167", lines)
        self.assertIn("  missing       ok 1", lines)
        # (c) heat map over the whole run (4 cycles < 50): cavity 5 failed 2 of 4
        self.assertIn("heat map: fail rate per cavity over the last 4 cycles (over the whole run of 4 in brackets)", lines)
        grid = [line for line in lines if line.startswith("  row ")]
        self.assertEqual(len(grid), 2)
        self.assertIn("1:  25% (25%)", grid[0])
        self.assertIn("2:  25% (25%)", grid[0])
        self.assertIn("3:   0% ( 0%)", grid[0])
        self.assertIn("5:  50% (50%)", grid[1])
        self.assertIn("worst cavity: 5, fail rate 50% over the last 4 cycles (2/4), 50% over the run (2/4); "
                      "the others 10% on average", lines)

    def test_last_window(self):
        rc, out, _ = self.run_main(results(), labels(), "--last", "2")
        self.assertEqual(rc, 0)
        # last 2 cycles: cavity 1 failed 1/2, cavity 5 1/2 -> tie broken by the whole run (5: 50 %, 1: 25 %)
        self.assertIn("worst cavity: 5, fail rate 50% over the last 2 cycles (1/2), 50% over the run (2/4); "
                      "the others 10% on average", out.splitlines())
        self.assertIn("1:  50% (25%)", out)

    def test_missing_frame_exits_1(self):
        res = results()
        del res[3]
        rc, out, err = self.run_main(res, labels())
        self.assertEqual(rc, 1)
        self.assertIn("PROBLEM: 1 labelled frame(s) without a result: 3", err)
        self.assertIn("defect recall: 2/3 = 0.6667", out)   # still scores what it has

    def test_missing_frame_in_the_middle_exits_1(self):
        res = results()
        del res[1]
        rc, _, err = self.run_main(res, labels())
        self.assertEqual(rc, 1)
        self.assertIn("PROBLEM: result seq numbers are not 0..n-1 in order", err)
        self.assertIn("without a result: 1", err)

    def test_cavities_not_the_labels_exit_1(self):
        res = results()
        res[2] = result(2, [], cavities=[1, 2, 3, 4, 6])     # cavity 5 left out (disabled)
        rc, _, err = self.run_main(res, labels())
        self.assertEqual(rc, 1)
        self.assertIn("PROBLEM: frame 2: result cavities [1, 2, 3, 4, 6], labels' cavities [1, 2, 3, 4, 5, 6]", err)

    def test_inconsistent_reject_mask_exits_1(self):
        res = results()
        res[3]["reject_mask"] = 16                          # only cavity 5's bit; cavity 1 also failed
        rc, _, err = self.run_main(res, labels())
        self.assertEqual(rc, 1)
        self.assertIn("PROBLEM: seq 3: reject_mask 16, failed cavities give 17", err)

    def test_overall_verdict_must_follow_cavities(self):
        res = results()
        res[1]["verdict"] = "pass"
        rc, _, err = self.run_main(res, labels())
        self.assertEqual(rc, 1)
        self.assertIn("PROBLEM: seq 1: verdict 'pass' but the cavities say 'fail'", err)

    def test_cli_exit_codes(self):
        script = os.path.join(HERE, "score_cavities.py")
        lab = self.write("l.jsonl", labels())
        ok = subprocess.run([sys.executable, script, "--results", self.write("r.jsonl", results()),
                             "--labels", lab], capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("worst cavity: 5", ok.stdout)
        bad = subprocess.run([sys.executable, script, "--results", self.write("r2.jsonl", results()[:2]),
                              "--labels", lab], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("without a result: 2, 3", bad.stderr)


if __name__ == "__main__":
    unittest.main()
