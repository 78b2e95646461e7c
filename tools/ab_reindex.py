#!/usr/bin/env python3
"""Issue 2's e − d bar for several simd binaries, interleaved: what one
changed file adds to a re-index that changes nothing.

Usage: tools/ab_reindex.py BIN1,BIN2,... IDX TREE FILE ROUNDS

Each round, for each binary in turn: `simd --db IDX index TREE --quiet`
with nothing changed (d), then a line appended to FILE and the same run
again (e). Prints each binary's median d and e and the median of each
round's own e − d (the drift between rounds cancels out of it). IDX must
be an index of TREE (of the same schema for every binary), FILE a file in
TREE: it grows by a line a run, so give a scratch copy and keep FILE's
bytes to put back (`cp FILE FILE.bak` first). The bar: e − d no more than
FILE's chunking (~6 ms for the generated corpus's largest file, a 1.9 MB
zip, on the AMD VM of sessions 52–56).
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    bins = sys.argv[1].split(",")
    db, tree, path, rounds = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    runs = {b: ([], []) for b in bins}

    def run(b):
        t = time.perf_counter()
        subprocess.run([b, "--db", db, "index", tree, "--quiet"], check=True)
        return time.perf_counter() - t

    for b in bins:
        run(b)  # a warm-up, and the index caught up with FILE
    for r in range(rounds):
        for b in bins:
            d = run(b)
            with open(path, "a") as f:
                f.write(f"ab_reindex round {r} {os.path.basename(b)}\n")
            e = run(b)
            runs[b][0].append(d)
            runs[b][1].append(e)
    for b in bins:
        d, e = runs[b]
        own = statistics.median(y - x for x, y in zip(d, e))
        print(f"{b}: d {statistics.median(d) * 1000:.1f} ms, e {statistics.median(e) * 1000:.1f} ms, "
              f"e - d {own * 1000:.1f} ms (median of each round's own)")


if __name__ == "__main__":
    main()
