#!/usr/bin/env python3
"""A tree of many small files, for what grows with the file count (a first
index's memory, the daemon's records, a report's links and names).

Usage: tools/gen_many.py OUT [--dirs 400] [--files 1000] [--seed 58]

DIRS directories of FILES files each, every file 80 words (3-9 random
letters, from a vocabulary of 20,000) and a newline, ~560 bytes: 40 % new
text, 30 % a copy of an earlier file and 30 % an earlier file with one
word changed (earlier: among the last 50,000 made, so copies and edits
spread over the whole tree). The defaults give 400,000 files, ~280k
distinct contents and, at simd's default thresholds, ~1.09M links in
~24k clusters (session 67; `docs/performance.md`). The same seed gives
the same tree.
"""
import argparse, os, random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dirs", type=int, default=400)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=58)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(20000)]
    made = []
    for d in range(a.dirs):
        dd = os.path.join(a.out, f"d{d:03}")
        os.makedirs(dd, exist_ok=True)
        for f in range(a.files):
            r = rng.random()
            if made and r < 0.3:
                text = rng.choice(made)
            elif made and r < 0.6:
                w = rng.choice(made).split(" ")
                w[rng.randrange(len(w))] = rng.choice(words)
                text = " ".join(w)
            else:
                text = " ".join(rng.choice(words) for _ in range(80))
            with open(os.path.join(dd, f"f{f:04}.txt"), "w") as h:
                h.write(text + "\n")
            if len(made) < 50000:
                made.append(text)
            elif rng.random() < 0.1:
                made[rng.randrange(len(made))] = text


if __name__ == "__main__":
    main()
