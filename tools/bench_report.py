#!/usr/bin/env python3
"""How `simd report` refreshes after changes: an analysis brought up to date
against a fresh one, side by side, on the same index states.

Usage: tools/bench_report.py --simd BIN --tree COPY [--db IDX] [--runs 3]
                             [--changes 1,10,100,1000] [--format json]

TREE must be a scratch copy: the script appends a line to files of it.
It indexes TREE (into IDX, default a temporary directory), makes a first
report (a fresh analysis, cached), then for each N in --changes and each
run: appends a line to N files of the tree (spread over it, a new content
each), runs `simd index`, and times `simd report` (which brings the cached
analysis up to date) and then `simd report --fresh` (a whole analysis) on
that same index state, output to /dev/null. It prints, per N, the medians
and their ratio, and the time of a repeated report with nothing changed.
Whole-process wall times (what a user waits for), warm page cache.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simd", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--db")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--changes", default="1,10,100,1000")
    ap.add_argument("--format", default="json", choices=["json", "text", "csv"])
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    tmp = None
    db = a.db
    if not db:
        tmp = tempfile.mkdtemp()
        db = os.path.join(tmp, "idx")
    simd = [a.simd, "--db", db]

    def run(*args):
        t = time.time()
        r = subprocess.run(simd + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            sys.exit(f"simd {' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
        return time.time() - t, r.stderr.decode(errors="replace")

    try:
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs
                       if not os.path.islink(os.path.join(r, f)) and os.path.isfile(os.path.join(r, f)))
        run("--quiet", "index", tree)
        first, _ = run("--format", a.format, "report")
        print(f"{len(files)} files; first report (fresh analysis): {first:.2f} s")
        cached = [run("--format", a.format, "report")[0] for _ in range(a.runs)]
        print(f"repeated report, nothing changed: median {statistics.median(cached):.3f} s")
        print(f"{'changed files':>14} {'brought up to date':>19} {'fresh':>8} {'ratio':>6}  relinked")
        k = 0
        for n in [int(x) for x in a.changes.split(",")]:
            up, fresh, relinked = [], [], ""
            for _ in range(a.runs):
                step = max(1, len(files) // n)
                for f in files[k % step::step][:n]:
                    with open(f, "ab") as h:
                        h.write(f"\n# bench_report {k}\n".encode())
                k += 1
                run("--quiet", "index", tree)
                t, err = run("-v", "--format", a.format, "report")
                up.append(t)
                relinked = next((l.split("links of ")[1].split(" ")[0] for l in err.splitlines()
                                 if "links of " in l), "fresh")
                fresh.append(run("--format", a.format, "report", "--fresh")[0])
            u, f = statistics.median(up), statistics.median(fresh)
            print(f"{n:>14} {u:>17.3f} s {f:>6.3f} s {u / f:>6.2f}  {relinked}")
    finally:
        if tmp:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
