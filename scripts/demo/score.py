#!/usr/bin/env python3
# Run by: `make demo`.
"""Scores a sealcheck results file against the clip's ground truth.

A frame counts as right when the verdict is `fail` for a defective seal and
`pass` for a good one. Frames without a result (or results without a frame)
are reported: the pipeline promises exactly one line per delivered frame.
Standard library only, so it runs wherever `make demo` does.
"""
import argparse
import collections
import json
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", required=True)
    ap.add_argument("--labels", required=True)
    args = ap.parse_args()

    results = read_jsonl(args.results)
    labels = {row["frame"]: row for row in read_jsonl(args.labels)}
    seqs = [r["seq"] for r in results]
    problems = []
    if seqs != list(range(len(seqs))):
        problems.append("result seq numbers are not 0..n-1 in order")
    if len(results) != len(labels):
        problems.append(f"{len(results)} results for {len(labels)} labelled frames")

    confusion = collections.Counter()
    per_kind = collections.defaultdict(collections.Counter)
    right = 0
    for r in results:
        label = labels.get(r["seq"])
        if label is None:
            continue
        truth_fail = label["label"] == "defect"
        said_fail = r["verdict"] == "fail"
        right += truth_fail == said_fail
        confusion[(label["label"], r["verdict"])] += 1
        per_kind[label["kind"]][r["reason"]] += 1

    n = sum(confusion.values())
    defects = confusion[("defect", "fail")] + confusion[("defect", "pass")]
    goods = confusion[("ok", "fail")] + confusion[("ok", "pass")]
    print(f"accuracy against labels: {right}/{n} = {right / max(n, 1):.4f}")
    print(f"defect recall: {confusion[('defect', 'fail')]}/{defects} = {confusion[('defect', 'fail')] / max(defects, 1):.4f}")
    print(f"good seals passed: {confusion[('ok', 'pass')]}/{goods} = {confusion[('ok', 'pass')] / max(goods, 1):.4f}")
    print("reasons per true kind:")
    for kind in sorted(per_kind):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(per_kind[kind].items()))
        print(f"  {kind:<13} {reasons}")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
