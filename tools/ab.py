#!/usr/bin/env python3
"""Interleaved timing of several commands, for side-by-side ratios on a
noisy machine: each round runs every command once, in order, so that drift
(this VM's page cache is reclaimed within a minute of idleness, and other
load comes and goes) falls on all of them alike. Prints each command's
median wall-clock time, its minimum, and its ratio to the first command's
median, then the median CPU time (user + system, of the command and
everything it ran) and its ratio: on a busy VM the CPU a run costs
drifts less than its wall-clock time.

Usage: tools/ab.py ROUNDS CMD1 CMD2 ...

Environment: PREP, a shell command run untimed before every command
(default: none), e.g. PREP='rm -rf /tmp/idx' for a fresh index each time.
A first round is run and thrown away (a warm-up).

Example (issue 2's and 3's speed bars on the Django tree, warm cache):

  T=/root/corpora/django; PREP='rm -rf /tmp/idx' tools/ab.py 15 \\
    "find $T -type f -print0 | xargs -0 -P2 -n1000 md5sum >/dev/null" \\
    "simd --db /tmp/idx index -q $T" \\
    "simd --db /tmp/idx index -q $T && simd --db /tmp/idx report --format json >/dev/null"
"""
import os
import resource
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit(__doc__)
    rounds, cmds = int(sys.argv[1]), sys.argv[2:]
    prep = os.environ.get("PREP", "")
    times = {c: [] for c in cmds}
    cpu = {c: [] for c in cmds}
    for r in range(rounds + 1):
        for c in cmds:
            if prep:
                subprocess.run(prep, shell=True, check=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(c, shell=True, check=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r > 0:
                times[c].append(wall)
                cpu[c].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    base = statistics.median(times[cmds[0]])
    base_cpu = statistics.median(cpu[cmds[0]])
    for c in cmds:
        m, mc = statistics.median(times[c]), statistics.median(cpu[c])
        print(f"{m:.3f} s  min {min(times[c]):.3f}  x{m / base:.3f}  cpu {mc:.2f} s x{mc / base_cpu:.3f}  {c}")


if __name__ == "__main__":
    main()
