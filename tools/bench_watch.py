#!/usr/bin/env python3
"""Latency of `simd watch`: time from a file write until the live index
answers for it (issue 4's bar: median < 250 ms on a 50k+ file tree,
debounce included).

Usage: tools/bench_watch.py --simd BIN --db IDX --tree TREE [--edits 50]

TREE must be a scratch copy (the script writes files into TREE/.simd-bench-*;
never point it at real data). IDX is an index of TREE (made by `simd index`
first, so the daemon's reconcile scan is quick). The script starts
`simd watch`, waits until it is ready, then 50 times writes a new file with
unique content and polls `simd lost --format json FILE` (a read-only query,
~15 ms) until it answers that the file is live in the index; it prints the
median, p90 and max latency, then stops the daemon with SIGTERM.
"""
import argparse, json, os, signal, statistics, subprocess, sys, time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simd", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--edits", type=int, default=50)
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    d = subprocess.Popen([a.simd, "--db", a.db, "watch", tree], stderr=subprocess.DEVNULL)
    try:
        state = os.path.join(a.db, "daemon.json")
        t0 = time.time()
        while True:
            try:
                if json.load(open(state)).get("ready"):
                    break
            except (OSError, ValueError):
                pass
            if time.time() - t0 > 600:
                sys.exit("daemon not ready after 600 s")
            time.sleep(0.05)
        print(f"daemon ready after {time.time() - t0:.1f} s", file=sys.stderr)
        work = os.path.join(tree, f".simd-bench-{os.getpid()}")
        os.makedirs(work)
        time.sleep(1)
        lat = []
        for i in range(a.edits):
            p = os.path.join(work, f"edit{i}.txt")
            body = os.urandom(8000).hex().encode()
            start = time.time()
            with open(p, "wb") as f:
                f.write(body)
            while True:
                # `simd lost PATH` answers "live" once the file is in the index.
                r = subprocess.run([a.simd, "--db", a.db, "--format", "json", "lost", p], capture_output=True)
                if r.returncode == 0 and json.loads(r.stdout).get("state") == "live":
                    break
                if time.time() - start > 30:
                    sys.exit(f"{p}: not indexed after 30 s")
            lat.append(time.time() - start)
            time.sleep(0.2)
        lat.sort()
        print(f"edits {len(lat)}: median {statistics.median(lat)*1000:.0f} ms, "
              f"p90 {lat[int(len(lat)*0.9)-1]*1000:.0f} ms, max {lat[-1]*1000:.0f} ms")
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
        print(f"daemon exit code {d.returncode}", file=sys.stderr)


if __name__ == "__main__":
    main()
