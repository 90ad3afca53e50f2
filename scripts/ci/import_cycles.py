#!/usr/bin/env python3
"""Import circles in src/: which file names which, and where the names go round.

Every path a file names (`use crate::a::b`, `use super::c`, `crate::a::f()` in
code, `super::super::x`) is resolved to the module file that defines it, the
longest module path that exists. Two graphs are checked:
  - files inside one folder (a file and the folder's mod.rs count as the folder's
    members; a name reaching into a subfolder counts as that subfolder), and
  - folders ("rooms") against each other (src/capture, src/infer, ...).
A strongly connected component of more than one node is a circle. Tests
(`#[cfg(test)] mod tests` blocks, and `#[cfg(all(test, ..))]` ones) are left
out: a test may use what it tests.

Usage: scripts/ci/import_cycles.py [--src src] [--known FILE]
  exit 0: no circle (or only the known ones); 1: a circle, listed.
--known names a file of circles still being broken up, one a line, as printed
("circle inside infer: infer/a <-> infer/b"): each must match exactly, so a
file joining a known circle, or a new circle, still fails. `make test` runs it
without one: the tree has no circle left (issue 22), and a new one fails CI.
"""
import argparse
import os
import re
import sys

PATH_RE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_files(src):
    """module path tuple -> file path, for every .rs file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if rel and rel[0] == "bin":
                continue
            mods[tuple(rel)] = path
    return mods


def blank_comments(text):
    """`text` with its comments turned into spaces: offsets and lines stay put."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"//[^\n]*", blank, text)
    return re.sub(r"/\*.*?\*/", blank, text, flags=re.S)


TEST_MOD_RE = re.compile(r"#\[cfg\((?P<cfg>[^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{")


def test_only(cfg):
    """Whether a `cfg(...)` predicate holds only in tests: `test`, or `all(..)`
    with `test` among its terms (`all(test, feature = "loom")`)."""
    cfg = cfg.strip()
    if cfg == "test":
        return True
    if not (cfg.startswith("all(") and cfg.endswith(")")):
        return False
    depth, term, terms = 0, "", []
    for ch in cfg[4:-1]:
        if ch == "," and depth == 0:
            terms.append(term.strip())
            term = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        term += ch
    terms.append(term.strip())
    return "test" in terms


def test_blocks(text):
    """(start, end) offsets of each test-only module of `text`
    (`#[cfg(test)] mod name { ... }`, or `#[cfg(all(test, ..))]`), comments
    blanked first, found by brace matching; `end` is just past the closing
    brace. `scripts/ci/line_limit.py` counts lines with it too."""
    code = blank_comments(text)
    spans, i = [], 0
    for m in TEST_MOD_RE.finditer(code):
        if m.start() < i or not test_only(m.group("cfg")):
            continue
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        spans.append((m.start(), j))
        i = j
    return spans


def strip_tests_and_comments(text):
    code = blank_comments(text)
    out, i = [], 0
    for start, end in test_blocks(text):
        out.append(code[i:start])
        i = end
    out.append(code[i:])
    return "".join(out)


def expand_groups(text):
    """`use crate::a::{b, c::d}` -> `crate::a::b crate::a::c::d` (one level deep)."""
    def repl(m):
        base, inner = m.group(1), m.group(2)
        parts = [p.strip() for p in re.split(r",(?![^{]*\})", inner) if p.strip()]
        names = []
        for p in parts:
            p = re.sub(r"\s+as\s+\w+$", "", p)
            if p == "self":
                names.append(base)
            elif "{" in p:
                head = p.split("::{")[0]
                names.append(f"{base}::{head}")
            else:
                names.append(f"{base}::{p}")
        return " ".join(names) + ";"
    return USE_GROUP_RE.sub(repl, text)


def resolve(path, here, mods):
    """The module (tuple) a path names, seen from module `here`."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        base = list(here)
        rest = parts
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
        base = tuple(base)
    best = None
    for n in range(len(rest), -1, -1):
        cand = base + tuple(rest[:n])
        if cand in mods:
            best = cand
            break
    return best


def edges(src):
    mods = module_files(src)
    out = {}
    for mod, path in mods.items():
        # A file that is not a folder's mod.rs is its own module; `super` from it
        # is its folder.
        text = expand_groups(strip_tests_and_comments(open(path, encoding="utf-8").read()))
        targets = set()
        for m in PATH_RE.finditer(text):
            target = resolve(m.group(1), mod, mods)
            if target is not None and target != mod:
                targets.add(target)
        out[mod] = targets
    return mods, out


def sccs(nodes, succ):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def name(mod):
    return "/".join(mod) if mod else "(crate root)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    parser.add_argument("--known", help="file of circles still allowed, one a line, as printed")
    args = parser.parse_args()
    known = set()
    if args.known:
        with open(args.known, encoding="utf-8") as f:
            known = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    mods, out = edges(os.path.normpath(args.src))
    circles = []
    # Inside each folder: members are the folder's direct files and subfolders.
    folders = {m[:-1] for m in mods if m} | {()}
    for folder in sorted(folders):
        def member(m):
            if len(m) <= len(folder) or m[: len(folder)] != folder:
                return None
            return m[: len(folder) + 1]
        succ = {}
        for src_mod, targets in out.items():
            a = member(src_mod)
            if a is None:
                continue
            for t in targets:
                b = member(t)
                if b is not None and b != a:
                    succ.setdefault(a, set()).add(b)
        nodes = set(succ) | {b for bs in succ.values() for b in bs}
        for comp in sccs(nodes, succ):
            circles.append((f"inside {name(folder) or 'src'}", comp, succ))
    new = 0
    for where, comp, succ in circles:
        inside = set(comp)
        line = f"circle {where}: " + " <-> ".join(name(c) for c in comp)
        is_known = line in known
        new += not is_known
        print(line + ("   (known, being broken up)" if is_known else ""))
        for a in comp:
            for b in sorted(succ.get(a, ())):
                if b in inside:
                    print(f"    {name(a)} -> {name(b)}")
    stale = known - {f"circle {w}: " + " <-> ".join(name(c) for c in comp) for w, comp, _ in circles}
    for line in sorted(stale):
        print(f"no longer a circle, remove it from {args.known}: {line}")
    if new:
        print(f"{new} new import circle(s): break each (shared names move down into a leaf module)")
        return 1
    print(f"no new import circles ({len(circles)} known)" if circles else "no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
