#!/usr/bin/env python3
"""Line limit for src/: no Rust file over LIMIT (700) non-test lines.

`make test` runs it (issue 32: a file over the limit mixes jobs; split it by
job). A non-test line is any line of the file outside its `#[cfg(test)] mod`
blocks (attribute to closing brace), comments and blank lines included; the
blocks are found as `scripts/ci/import_cycles.py` finds them.

Usage: scripts/ci/line_limit.py [--src src] [--limit 700]
  exit 0: every file within the limit; 1: the files over it, each with its count.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_cycles import test_blocks  # noqa: E402

LIMIT = 700


def non_test_lines(text):
    """Lines of `text` not inside a `#[cfg(test)] mod` block."""
    lines = text.splitlines()
    in_test = set()
    for start, end in test_blocks(text):
        first = text.count("\n", 0, start)
        last = text.count("\n", 0, max(start, end - 1))
        in_test.update(range(first, last + 1))
    return len(lines) - len(in_test & set(range(len(lines))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args()
    src = os.path.normpath(args.src)
    over = []
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                count = non_test_lines(f.read())
            if count > args.limit:
                over.append((count, os.path.relpath(path, os.path.dirname(src) or ".")))
    for count, path in sorted(over, reverse=True):
        print(f"{path}: {count} non-test lines (limit {args.limit}): split it by job")
    if over:
        print(f"{len(over)} file(s) over {args.limit} non-test lines")
        return 1
    print(f"every file in {src} within {args.limit} non-test lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
