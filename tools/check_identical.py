#!/usr/bin/env python3
"""Checks simd's identical-file sets against jdupes, group for group.

Usage: tools/check_identical.py --simd BIN --db IDX TREE

IDX must be an index of exactly TREE (e.g. `simd --db IDX index --no-ignore
TREE`, so that nothing is left out that jdupes sees). Runs
`jdupes -r -z -q -H TREE` (recurse, include zero-length files, count hard
links as duplicates like simd does) and `simd report --format json`, then
compares the two partitions of files into groups of identical content.
Symlinks are skipped by both. Exit status 0 when the groups are equal.
"""
import argparse, json, os, subprocess, sys

from score import simd_path  # {"path": s} | {"path_b64": b} -> bytes


def jdupes_groups(tree):
    out = subprocess.run(["jdupes", "-r", "-z", "-q", "-H", tree], capture_output=True, check=True).stdout
    groups, cur = [], []
    for line in out.split(b"\n"):
        if line:
            cur.append(os.path.realpath(line))
        elif cur:
            groups.append(frozenset(cur))
            cur = []
    if cur:
        groups.append(frozenset(cur))
    return set(groups)


def simd_groups(simd, db):
    r = json.loads(subprocess.run([simd, "--db", db, "--format", "json", "report"], capture_output=True, check=True).stdout)
    return {frozenset(simd_path(f) for f in s["files"]) for s in r["identical"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simd", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("tree")
    a = ap.parse_args()
    j = jdupes_groups(os.path.realpath(a.tree).encode() if isinstance(a.tree, str) else a.tree)
    s = simd_groups(a.simd, a.db)
    files = lambda gs: sum(len(g) for g in gs)
    print(f"jdupes: {len(j)} groups, {files(j)} files; simd: {len(s)} groups, {files(s)} files")
    only_j, only_s = j - s, s - j
    print(f"groups equal: {len(j & s)}; only jdupes: {len(only_j)}; only simd: {len(only_s)}")
    for g in list(only_j)[:5]:
        print("  only jdupes:", sorted(x.decode(errors='replace') for x in g)[:4])
    for g in list(only_s)[:5]:
        print("  only simd:  ", sorted(x.decode(errors='replace') for x in g)[:4])
    sys.exit(0 if not only_j and not only_s else 1)


if __name__ == "__main__":
    main()
