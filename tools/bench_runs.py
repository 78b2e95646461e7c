#!/usr/bin/env python3
"""What many small runs do to an index: N runs of `simd index TREE`, each
after adding one new file, then the time of a few read commands on the
index they leave, for each simd binary given, side by side.

Usage: tools/bench_runs.py --simd BIN [--simd BIN2 ...] --db IDX --tree TREE [--runs 300]

IDX is an index of TREE (made by `simd index` first). Each binary works on
a copy of IDX of its own and sees the same runs (the same new files, made
again for each); TREE gets a scratch directory, TREE/.simd-bench-runs-PID,
removed at the end. Prints, per binary: the median time of a run, the table
files the index holds after the runs, and the median of 15 timed runs of
`simd status`, `simd lost` (a file the runs added), `simd similar` (the
first of those files) and `simd report --format json` (cached: a second
report with nothing changed) on that index (a first run of each thrown
away). The read commands of every binary are run by the first binary given,
so only the index differs.

Session 34: each run's flush left a table file per column family it
changed, never merged where the new keys sort after all others
(`Store::tidy`, `docs/ARCHITECTURE.md`).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simd", action="append", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    scratch = os.path.join(tree, f".simd-bench-runs-{os.getpid()}")
    work = tempfile.mkdtemp()
    reader = a.simd[0]
    try:
        for k, simd in enumerate(a.simd):
            db = os.path.join(work, f"idx{k}")
            shutil.copytree(a.db, db, symlinks=True)
            shutil.rmtree(scratch, ignore_errors=True)
            os.makedirs(scratch)
            took = []
            for i in range(a.runs):
                # Seeded by the run's number: every binary sees the same files.
                with open(os.path.join(scratch, f"r{i:05d}.txt"), "w") as f:
                    f.write(f"run {i}: " + " ".join(f"w{(i * 7919 + j * 104729) % 100003}" for j in range(120)) + "\n")
                t = time.perf_counter()
                subprocess.run([simd, "--db", db, "--quiet", "index", tree], check=True)
                took.append(time.perf_counter() - t)
            st = json.loads(subprocess.run([reader, "--db", db, "--format", "json", "status"],
                                           check=True, capture_output=True).stdout)
            tables = sum(t.get("files", 0) for t in st["tables"])
            if not tables:
                tables = sum(1 for n in os.listdir(os.path.join(db, "db")) if n.endswith(".sst"))
            first = os.path.join(scratch, "r00000.txt")
            reads = {
                "status": ["status"],
                "lost": ["lost", os.path.join(scratch, f"r{a.runs // 2:05d}.txt")],
                "similar": ["similar", first],
                "report (cached)": ["--format", "json", "report"],
            }
            line = f"{simd}: {a.runs} runs, median {1000 * statistics.median(took):.1f} ms a run, {tables} table files"
            for name, args in reads.items():
                times = []
                for r in range(16):
                    t = time.perf_counter()
                    subprocess.run([reader, "--db", db, *args], check=True, stdout=subprocess.DEVNULL)
                    if r:
                        times.append(time.perf_counter() - t)
                line += f"; {name} {1000 * statistics.median(times):.1f} ms"
            print(line, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
