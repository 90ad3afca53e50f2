#!/usr/bin/env python3
# Run by: `make demo-cavities`; scripts/demo/test_score_cavities.py tests it.
"""Scores a multi-cavity sealcheck results file against the clip's per-cavity ground truth.

Results: one JSON line per frame (machine cycle), in seq order, as sealcheck writes them with a
cavity layout: {"seq": 0, "verdict": ..., "cavities": [{"cavity": 1, "verdict": "pass",
"reason": "ok", ...}, ...], "reject": [2, 5], "reject_mask": 18, ...}.
Labels: one line per frame: {"frame": i, "cavities": [{"cavity": 1, "label": "ok"|"defect",
"kind": ...}, ...]} (scripts/demo/gen_cavities.py).

A cavity counts as right when its verdict is `fail` for a defective seal and `pass` for a good
one. Prints
  (a) per cavity: defective cavities caught / total, good cavities passed / total, false rejects;
  (b) overall defect recall and false-reject rate;
  (c) the heat map of the layout: each cavity's fail rate over the last N cycles (--last, 50)
      and over the whole run, as a ROWS x COLS grid (--grid, 2x3), and the worst cavity
      (highest fail rate over the last N cycles; ties: over the run, then the lower number).
Exits 1 when a labelled frame has no result, a result has no labelled frame, the seq numbers
are not 0..n-1 in order, a result's cavities are not the labels' cavities, or a result
contradicts itself (overall verdict, reject, reject_mask against the cavities' verdicts).
Standard library only, so it runs wherever `make demo-cavities` does.
"""
import argparse
import collections
import json
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(num, den):
    return f"{num / den:6.1%}" if den else "     -"


def check_result(r, problems):
    """The result's own consistency: overall verdict, reject and reject_mask vs its cavities."""
    seq = r.get("seq")
    cavs = r.get("cavities")
    if not isinstance(cavs, list):
        problems.append(f"seq {seq}: no \"cavities\" list")
        return False
    failed = [c.get("cavity") for c in cavs if c.get("verdict") == "fail"]
    want_verdict = "fail" if failed else "pass"
    if r.get("verdict") != want_verdict:
        problems.append(f"seq {seq}: verdict {r.get('verdict')!r} but the cavities say {want_verdict!r}")
    if r.get("reject") != failed:
        problems.append(f"seq {seq}: reject {r.get('reject')!r}, failed cavities {failed}")
    mask = sum(1 << (n - 1) for n in failed if isinstance(n, int) and n >= 1)
    if r.get("reject_mask") != mask:
        problems.append(f"seq {seq}: reject_mask {r.get('reject_mask')!r}, failed cavities give {mask}")
    return True


def score(results, labels_rows, last=50, grid=(2, 3), out=None):
    """Prints the report; returns the list of problems (empty = exit 0)."""
    def say(s=""):
        print(s, file=out or sys.stdout)

    problems = []
    labels = {row["frame"]: row for row in labels_rows}
    seqs = [r.get("seq") for r in results]
    if seqs != list(range(len(seqs))):
        problems.append("result seq numbers are not 0..n-1 in order")
    by_seq = {}
    for r in results:
        by_seq.setdefault(r.get("seq"), r)
    missing = sorted(f for f in labels if f not in by_seq)
    if missing:
        problems.append(f"{len(missing)} labelled frame(s) without a result: "
                        + ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else ""))
    extra = sorted((s for s in by_seq if s not in labels), key=str)
    if extra:
        problems.append(f"{len(extra)} result(s) without a labelled frame: "
                        + ", ".join(map(str, extra[:10])) + (" ..." if len(extra) > 10 else ""))

    numbers = sorted({c["cavity"] for row in labels_rows for c in row["cavities"]})
    per = {n: collections.Counter() for n in numbers}
    kinds = collections.defaultdict(collections.Counter)
    fails = {n: [] for n in numbers}          # per cavity, in frame order: True = failed
    for fr in sorted(labels):
        r = by_seq.get(fr)
        if r is None:
            continue
        if not check_result(r, problems):
            continue
        got = {c.get("cavity"): c for c in r["cavities"]}
        want = [c["cavity"] for c in labels[fr]["cavities"]]
        if [c.get("cavity") for c in r["cavities"]] != want:
            problems.append(f"frame {fr}: result cavities {[c.get('cavity') for c in r['cavities']]}, "
                            f"labels' cavities {want}")
            continue
        for lab in labels[fr]["cavities"]:
            n = lab["cavity"]
            c = got[n]
            said_fail = c.get("verdict") == "fail"
            fails[n].append(said_fail)
            truth = lab["label"]
            per[n][(truth, "fail" if said_fail else "pass")] += 1
            kinds[lab["kind"]][c.get("reason")] += 1

    # (a) per cavity
    say("per cavity (defective cavities caught, good cavities passed, false rejects):")
    say(f"  {'cavity':>6}  {'caught':<16}  {'good passed':<18}  false rejects")
    tot = collections.Counter()
    for n in numbers:
        c = per[n]
        d, caught = c[("defect", "fail")] + c[("defect", "pass")], c[("defect", "fail")]
        g, passed = c[("ok", "fail")] + c[("ok", "pass")], c[("ok", "pass")]
        tot.update({"d": d, "caught": caught, "g": g, "passed": passed})
        say(f"  {n:>6}  {caught:>4}/{d:<4} {pct(caught, d)}  {passed:>5}/{g:<5} {pct(passed, g)}"
            f"  {g - passed:>5} {pct(g - passed, g)}")

    # (b) overall
    fr_n = tot["g"] - tot["passed"]
    say(f"defect recall: {tot['caught']}/{tot['d']} = "
        + (f"{tot['caught'] / tot['d']:.4f}" if tot["d"] else "-"))
    say(f"false rejects: {fr_n}/{tot['g']} = " + (f"{fr_n / tot['g']:.4f}" if tot["g"] else "-"))
    right = tot["caught"] + tot["passed"]
    n_all = tot["d"] + tot["g"]
    say(f"accuracy against labels: {right}/{n_all} = " + (f"{right / n_all:.4f}" if n_all else "-"))
    say("reasons per true kind:")
    for kind in sorted(kinds):
        say(f"  {kind:<13} " + ", ".join(f"{k} {v}" for k, v in sorted(kinds[kind].items(), key=str)))

    # (c) heat map
    cycles = max((len(v) for v in fails.values()), default=0)
    rows, cols = grid
    say()
    say(f"heat map: fail rate per cavity over the last {min(last, cycles)} cycles "
        f"(over the whole run of {cycles} in brackets)")
    rate = {}
    for n in numbers:
        recent = fails[n][-last:] if last > 0 else []
        rate[n] = (sum(recent) / len(recent) if recent else 0.0, sum(recent), len(recent),
                   sum(fails[n]) / len(fails[n]) if fails[n] else 0.0, sum(fails[n]), len(fails[n]))
    cell_w = 17
    if rows * cols >= (max(numbers) if numbers else 0):
        say(("        " + "".join(f"{'col ' + str(c + 1):<{cell_w}}" for c in range(cols))).rstrip())
        for r_ in range(rows):
            cells = []
            for c_ in range(cols):
                n = r_ * cols + c_ + 1
                if n in rate:
                    cells.append(f"{n}: {rate[n][0]:4.0%} ({rate[n][3]:3.0%})")
                else:
                    cells.append(f"{n}:   -")
            say((f"  row {r_ + 1} " + "".join(f"{s:<{cell_w}}" for s in cells)).rstrip())
    else:
        say(f"  ({len(numbers)} cavities do not fit a {rows}x{cols} grid; listed)")
        for n in numbers:
            say(f"  {n}: {rate[n][0]:4.0%} ({rate[n][3]:3.0%})")
    if numbers and cycles:
        worst = sorted(numbers, key=lambda n: (-rate[n][0], -rate[n][3], n))[0]
        w = rate[worst]
        others = [rate[n][0] for n in numbers if n != worst]
        rest = f"; the others {sum(others) / len(others):.0%} on average" if others else ""
        say(f"worst cavity: {worst}, fail rate {w[0]:.0%} over the last {w[2]} cycles ({w[1]}/{w[2]}), "
            f"{w[3]:.0%} over the run ({w[4]}/{w[5]}){rest}")

    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--last", type=int, default=50, help="heat map window in cycles (default 50)")
    ap.add_argument("--grid", default="2x3", help="ROWSxCOLS of the layout for the heat map (default 2x3)")
    a = ap.parse_args(argv)
    try:
        rows, cols = (int(x) for x in a.grid.lower().split("x"))
    except ValueError:
        ap.error(f"--grid {a.grid!r}: expected ROWSxCOLS, e.g. 2x3")
    problems = score(read_jsonl(a.results), read_jsonl(a.labels), a.last, (rows, cols))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
