#!/usr/bin/env python3
"""How many contents share each posted sketch sample by chance, as the
number of small distinct contents grows: a model, not a measurement of an
index.

Each content is taken as a set of SHINGLES distinct shingles whose samples
are uniform 32-bit values; it posts its 16 smallest (`sketch::POSTED`),
rounded to 17 significant bits (`sketch::SAMPLE_BITS` after the leading
one). For each count of contents it prints the mean number of contents
holding a posted value, the median a posting sees (the co-holders a
content meets), and the share of postings whose value is held by more
than the sample cap of 100 contents (`analysis::SAMPLE_DEGREE_CAP`): those
make no candidates, so text similar only in words is no longer found
among them.

Usage: tools/posted_collisions.py [--shingles 80] [N ...]
(default N: 341000 1000000 2000000 4000000). Needs numpy
(`pip install numpy`); 4M contents take a minute or two and a few GB.

Session 61, against the 400k-file tree of ~534-byte files (341k distinct
contents, ~80 shingles each): the model's median of 24 co-holders a
posting matches the ~20 the report's partition met there.
"""
import argparse

import numpy as np


def model(n, shingles, rng):
    parts = []
    for k in range(0, n, 100_000):
        m = min(100_000, n - k)
        x = rng.integers(0, 2**32, size=(m, shingles), dtype=np.uint64)
        x.sort(axis=1)
        parts.append(x[:, :16].ravel())
    p = np.concatenate(parts)
    bits = np.floor(np.log2(np.maximum(p, 1).astype(np.float64))).astype(np.int64) + 1
    drop = np.maximum(bits - 17, 0).astype(np.uint64)
    rounded = (p >> drop) << drop
    _, counts = np.unique(rounded, return_counts=True)
    seen = np.repeat(counts, counts)
    return counts.mean(), np.median(seen), (seen > 100).mean()


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--shingles", type=int, default=80)
    a.add_argument("n", type=int, nargs="*", default=[341_000, 1_000_000, 2_000_000, 4_000_000])
    args = a.parse_args()
    rng = np.random.default_rng(1)
    for n in args.n:
        mean, median, over = model(n, args.shingles, rng)
        print(f"{n} contents: {mean:.1f} contents a posted value, a posting sees a median of {median:.0f}, "
              f"{100 * over:.1f} % of postings over the cap of 100", flush=True)


if __name__ == "__main__":
    main()
