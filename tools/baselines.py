#!/usr/bin/env python3
"""Score established near-duplicate tools against score.py's exact reference.

Answers "does simd beat the usual baselines on this tree?" with the very same
reference and the very same scoring functions that tools/score.py uses for
simd: the reference is loaded (or computed and cached) through
score.load_reference, predicted pairs are scored with score.score_set and
score.stratified.  Nothing is indexed and simd is not run.

Needs datasketch, fuzzbite (ssdeep, a Rust port of libfuzzy's algorithm) and
py-tlsh, e.g. in a venv:

    python3 -m venv /root/.cache/baselines-venv
    /root/.cache/baselines-venv/bin/pip install datasketch fuzzbite py-tlsh
    /root/.cache/baselines-venv/bin/python tools/baselines.py --tree TREE [--roots SUB ...] --method all

The universe
------------
Exactly the reference's: every regular file score.py's walk lists (symlinks
not followed, .git skipped, no .gitignore), byte-identical files collapsed
into one content.  Each method sees one copy of every distinct content (the
first file of the content) and predicts unordered pairs of distinct
contents; a pair is right when it is in the reference (two contents are
SIMILAR iff resemblance >= 0.5 or max containment >= 0.8 over sets of 4-word
shingle hashes; see score.py).  Contents without words (no shingles) are
similar to nothing in the reference and are given to no set-based method.

Methods (--method, repeatable; "all" = every one)
--------------------------------------------------
minhash-lsh
    datasketch MinHash (num_perm=128, scheme affine64) over the very shingle
    sets of the reference (score.shingle_hashes of the same bytes, 64-bit
    hashes fed as they are), MinHashLSH(threshold=0.5); every LSH candidate
    pair is predicted when its MinHash Jaccard estimate is >= 0.5.
minhash-lsh+ensemble
    the above, united with datasketch MinHashLSHEnsemble(threshold=0.8,
    num_perm=128, num_part=16) indexed with (content, MinHash, |S|) and
    queried with every content: a returned partner B of query A is predicted
    when the estimated containment of A in B, J*(|A|+|B|)/((1+J)|A|) from
    the MinHash Jaccard estimate J, is >= 0.8.  The "ensemble only" row is
    the containment half alone.
ssdeep
    fuzzbite.hash / fuzzbite.compare (ssdeep/spamsum context-triggered
    piecewise hashes, bytes as they are; hashes agree with ppdeep's), all
    pairs of contents whose sizes are within --max-ratio (default 4) of each
    other; score >= 50 (and >= 30) is "similar".
tlsh
    py-tlsh (tlsh.hash, Tlsh.diff: the standard distance with the length
    term), same pairs within --max-ratio; distance <= 100 (and <= 50) is
    "similar".  Contents TLSH cannot hash (under 50 bytes or too little
    variety: "TNULL") predict nothing.

Output: per method and threshold, predicted pairs, TP, precision / recall /
F1 overall, by the smaller content's size (< 3 KB, 3-10 KB, >= 10 KB) and
recall by reference band (r >= 0.9, 0.7-0.9, 0.5-0.7, containment only),
plus wall time (hashing + candidate search + verification; the reference
load is not counted).  --json prints one JSON object instead; --markdown
prints table rows for docs/baselines-raw.md.

The shingle hashes are Python's hash(), salted per process; the script
re-executes itself with PYTHONHASHSEED=--seed (default 1) so that MinHash
results repeat; other seeds show the run-to-run spread of the estimates.

Reference options (--shingle, --ref-similarity, --ref-containment, --max-df,
--cache, --no-cache) are score.py's, with its defaults, so the same cached
reference is used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import score  # noqa: E402  (the reference and the scoring, unchanged)

METHODS = ["minhash-lsh", "minhash-lsh+ensemble", "ssdeep", "tlsh"]
MASK64 = (1 << 64) - 1


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Contents:
    """One representative file per reference content, read on demand."""

    def __init__(self, ref: score.Reference, tree: bytes):
        self.ref, self.tree = ref, tree

    def __len__(self):
        return len(self.ref.contents)

    def data(self, c: int) -> bytes:
        rel = self.ref.files[self.ref.content_files[c][0]]
        with open(os.path.join(self.tree, rel), "rb") as f:
            d = f.read()
        if len(d) != self.ref.contents[c][0]:
            raise SystemExit(f"baselines.py: {score.show(rel)} changed since the reference was computed")
        return d


def pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


# --------------------------------------------------------------------------
# MinHash LSH (+ LSH Ensemble)


def minhashes(cs: Contents, w: int, num_perm: int, quiet: bool):
    from datasketch import MinHash

    ident = lambda x: x  # noqa: E731  (the shingle hashes are already 64-bit hashes)
    out: dict[int, tuple[object, int]] = {}
    proto = MinHash(num_perm=num_perm, scheme="affine64", hashfunc=ident)
    for c in range(len(cs)):
        s = score.shingle_hashes(cs.data(c), w)
        if len(s) != cs.ref.contents[c][1]:
            raise SystemExit(f"baselines.py: content {c}: {len(s)} shingles, the reference says {cs.ref.contents[c][1]}")
        if not s:
            continue
        m = proto.copy()
        vals = [h & MASK64 for h in s]
        for k in range(0, len(vals), 20000):  # bounded temporaries (20k x num_perm)
            m.update_batch(vals[k : k + 20000])
        out[c] = (m, len(s))
        if not quiet and (c + 1) % 2000 == 0:
            log(f"  minhash: {c + 1}/{len(cs)} contents")
    return out


def run_minhash(cs: Contents, args, ensemble: bool, cache: dict):
    from datasketch import MinHashLSH, MinHashLSHEnsemble

    t0 = time.monotonic()
    if "mh" not in cache:
        cache["mh"] = minhashes(cs, args.shingle, args.num_perm, args.quiet)
        cache["mh_seconds"] = time.monotonic() - t0
    mh = cache["mh"]
    t1 = time.monotonic()
    lsh = MinHashLSH(threshold=args.lsh_threshold, num_perm=args.num_perm)
    for c, (m, _) in mh.items():
        lsh.insert(c, m)
    jac_pairs: set = set()
    cand = 0
    for c, (m, _) in mh.items():
        for d in lsh.query(m):
            if d <= c:
                continue
            cand += 1
            if m.jaccard(mh[d][0]) >= args.lsh_threshold:
                jac_pairs.add((c, d))
    secs_lsh = cache["mh_seconds"] + time.monotonic() - t1
    info = {"lsh_bands_rows": [lsh.b, lsh.r], "lsh_candidates": cand}
    if not ensemble:
        return {"minhash-lsh": jac_pairs}, secs_lsh, info
    t2 = time.monotonic()
    ens = MinHashLSHEnsemble(threshold=args.containment_threshold, num_perm=args.num_perm, num_part=args.num_part)
    ens.index([(c, m, n) for c, (m, n) in mh.items()])
    cont_pairs: set = set()
    ecand: set = set()
    for a, (m, na) in mh.items():
        for b in ens.query(m, na):
            if b == a:
                continue
            ecand.add(pair(a, b))
            mb, nb = mh[b]
            j = m.jaccard(mb)
            if j * (na + nb) / ((1 + j) * na) >= args.containment_threshold:
                cont_pairs.add(pair(a, b))
    # How much the estimate check loses: reference pairs among the raw
    # ensemble candidates (before the containment estimate), all and
    # "containment only" ones.
    refset = set(cs.ref.pairs)
    conly = {p for p in refset if cs.ref.band(*p) == score.BANDS[3]}
    info["ensemble_candidates"] = len(ecand)
    info["ensemble_candidates_in_reference"] = len(ecand & refset)
    info["containment_only_pairs_among_ensemble_candidates"] = f"{len(ecand & conly)} of {len(conly)}"
    info["containment_only_pairs_predicted"] = len(cont_pairs & conly)
    secs = secs_lsh + time.monotonic() - t2
    return {"minhash-lsh+ensemble": jac_pairs | cont_pairs, "  (ensemble only)": cont_pairs}, secs, info


# --------------------------------------------------------------------------
# ssdeep and TLSH over pairs within a size ratio


def ratio_pairs(sizes: list[tuple[int, int]], max_ratio: float):
    """(i, j) over contents sorted by size, j > i, size_j <= max_ratio * size_i."""
    n = len(sizes)
    hi = 0
    for i in range(n):
        lim = sizes[i][0] * max_ratio if max_ratio else float("inf")
        if hi < i + 1:
            hi = i + 1
        while hi < n and sizes[hi][0] <= lim:
            hi += 1
        yield i, hi


def run_ssdeep(cs: Contents, args):
    import fuzzbite

    t0 = time.monotonic()
    hs = []
    for c in range(len(cs)):
        d = cs.data(c)
        hs.append((len(d), c, fuzzbite.hash(d)))
        if not args.quiet and (c + 1) % 2000 == 0:
            log(f"  ssdeep: hashed {c + 1}/{len(cs)}")
    hs.sort()
    t_hash = time.monotonic() - t0
    lo = min(args.ssdeep)
    found: list[tuple[int, int, int]] = []
    compared = 0
    cmp = fuzzbite.compare
    for i, hi in ratio_pairs(hs, args.max_ratio):
        hi_hash, ci = hs[i][2], hs[i][1]
        compared += hi - i - 1
        for j in range(i + 1, hi):
            s = cmp(hi_hash, hs[j][2])
            if s >= lo:
                found.append((ci, hs[j][1], s))
    secs = time.monotonic() - t0
    preds = {f"ssdeep >= {t}": {pair(a, b) for a, b, s in found if s >= t} for t in sorted(args.ssdeep, reverse=True)}
    return preds, secs, {"compared_pairs": compared, "hash_seconds": round(t_hash, 1)}


def run_tlsh(cs: Contents, args):
    import tlsh

    t0 = time.monotonic()
    hs = []
    null = 0
    for c in range(len(cs)):
        d = cs.data(c)
        h = tlsh.hash(d)
        if not h or h == "TNULL":
            null += 1
            continue
        o = tlsh.Tlsh()
        o.fromTlshStr(h)
        hs.append((len(d), c, o))
        if not args.quiet and (c + 1) % 2000 == 0:
            log(f"  tlsh: hashed {c + 1}/{len(cs)}")
    hs.sort(key=lambda x: (x[0], x[1]))
    t_hash = time.monotonic() - t0
    hi_t = max(args.tlsh)
    found = []
    compared = 0
    for i, hi in ratio_pairs(hs, args.max_ratio):
        oi, ci = hs[i][2], hs[i][1]
        compared += hi - i - 1
        for j in range(i + 1, hi):
            dist = oi.diff(hs[j][2])
            if dist <= hi_t:
                found.append((ci, hs[j][1], dist))
    secs = time.monotonic() - t0
    preds = {f"tlsh <= {t}": {pair(a, b) for a, b, d in found if d <= t} for t in sorted(args.tlsh, reverse=True)}
    return preds, secs, {"compared_pairs": compared, "unhashable_contents": null, "hash_seconds": round(t_hash, 1)}


# --------------------------------------------------------------------------


def row(ref, name, pred, refset, secs, info):
    s = score.score_set(pred, refset)
    st = score.stratified(ref, pred, refset)
    return {"method": name, **s, "strata": st, "seconds": round(secs, 1), "info": info}


def print_rows(rows, ref, info, markdown: bool):
    if markdown:
        print("| method | pairs | TP | P | R | F1 | < 3 KB P / R / F1 | 3-10 KB P / R / F1 | >= 10 KB P / R / F1 "
              "| R r>=0.9 / 0.7-0.9 / 0.5-0.7 | R containment only | time (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        f = lambda x: score.fmt(x, 0).strip()  # noqa: E731
        for r in rows:
            sz, bd = r["strata"]["size"], r["strata"]["band"]
            cells = [r["method"].strip(), r["simd"], r["tp"], f(r["precision"]), f(r["recall"]), f"**{f(r['f1'])}**"]
            cells += [" / ".join(f(sz[n][k]) for k in ("precision", "recall", "f1")) for n, _, _ in score.SIZE_STRATA]
            cells += [" / ".join(f(bd[b]["recall"]) for b in score.BANDS[:3]), f(bd[score.BANDS[3]]["recall"]), r["seconds"]]
            print("| " + " | ".join(str(c) for c in cells) + " |")
        return
    print(score.reference_summary(ref, info))
    print(f"{'method':26}{'pairs':>8}{'TP':>8}{'P':>7}{'R':>7}{'F1':>7}   F1 <3K  3-10K  >=10K   R cont-only  time s")
    for r in rows:
        sz, bd = r["strata"]["size"], r["strata"]["band"]
        print(f"{r['method']:26}{r['simd']:>8}{r['tp']:>8}{score.fmt(r['precision'], 7)}{score.fmt(r['recall'], 7)}"
              f"{score.fmt(r['f1'], 7)}  " + "".join(score.fmt(sz[n]["f1"], 7) for n, _, _ in score.SIZE_STRATA)
              + f"{score.fmt(bd[score.BANDS[3]]['recall'], 12)}{r['seconds']:>9}")
    print(f"reference by stratum: " + ", ".join(f"{n}: {rows[0]['strata']['size'][n]['ref']}" for n, _, _ in score.SIZE_STRATA)
          + "; bands: " + ", ".join(f"{b}: {rows[0]['strata']['band'][b]['ref']}" for b in score.BANDS))
    for r in rows:
        if r["info"]:
            print(f"  {r['method'].strip()}: {json.dumps(r['info'])}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="baselines.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="the tree (reference universe; as for score.py)")
    ap.add_argument("--method", action="append", choices=METHODS + ["all"], help="method to run (repeatable; default all)")
    ap.add_argument("--num-perm", type=int, default=128, help="MinHash permutations (128)")
    ap.add_argument("--lsh-threshold", type=float, default=0.5, help="MinHashLSH threshold and Jaccard cut (0.5)")
    ap.add_argument("--containment-threshold", type=float, default=0.8, help="LSH Ensemble threshold and containment cut (0.8)")
    ap.add_argument("--num-part", type=int, default=16, help="LSH Ensemble partitions (16)")
    ap.add_argument("--max-ratio", type=float, default=4.0, help="ssdeep/TLSH: compare only contents within this size ratio (4; 0 = all pairs)")
    ap.add_argument("--ssdeep", default="50,30", help="ssdeep score thresholds, >= (50,30)")
    ap.add_argument("--tlsh", default="100,50", help="TLSH distance thresholds, <= (100,50)")
    score.add_reference_args(ap)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("--seed", type=int, default=1, help="PYTHONHASHSEED for the shingle hashes, so MinHash runs repeat (1)")
    ap.add_argument("--render", metavar="JSON", help="print the table of an earlier --json output (runs nothing)")
    args = ap.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            d = json.load(f)
        ref = score.Reference()
        ref.params, ref.stats = d["reference_params"], d["reference"]
        print_rows(d["rows"], ref, d["reference_cache"], args.markdown)
        return
    if not args.tree:
        ap.error("--tree is required")
    # The shingle hashes are Python's hash() of word tuples, salted per
    # process: pin the salt so that MinHash results repeat (the reference
    # itself does not depend on it).
    if os.environ.get("PYTHONHASHSEED") != str(args.seed):
        os.environ["PYTHONHASHSEED"] = str(args.seed)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + (sys.argv[1:] if argv is None else list(argv)))
    methods = args.method or ["all"]
    methods = METHODS if "all" in methods else [m for m in METHODS if m in methods]
    args.ssdeep = [int(x) for x in args.ssdeep.split(",") if x.strip()]
    args.tlsh = [int(x) for x in args.tlsh.split(",") if x.strip()]

    sargs = SimpleNamespace(tree=args.tree, roots=args.roots, shingle=args.shingle, ref_similarity=args.ref_similarity,
                            ref_containment=args.ref_containment, max_df=args.max_df, cache=args.cache,
                            no_cache=args.no_cache, quiet=args.quiet, db=None)
    ref, tree, info = score.load_reference(sargs)
    if not args.quiet:
        log(score.reference_summary(ref, info))
    cs = Contents(ref, tree)
    refset = set(ref.pairs)
    rows = []
    mh_cache: dict = {}
    for m in methods:
        if not args.quiet:
            log(f"running {m} ...")
        if m == "minhash-lsh":
            preds, secs, minfo = run_minhash(cs, args, False, mh_cache)
        elif m == "minhash-lsh+ensemble":
            preds, secs, minfo = run_minhash(cs, args, True, mh_cache)
            if "minhash-lsh" in methods:
                minfo["note"] = "time includes the MinHash/LSH part (MinHashes computed once, counted in both rows)"
        elif m == "ssdeep":
            preds, secs, minfo = run_ssdeep(cs, args)
        else:
            preds, secs, minfo = run_tlsh(cs, args)
        for k, (name, pred) in enumerate(preds.items()):
            rows.append(row(ref, name, pred, refset, secs, minfo if k == 0 else {}))
        if not args.quiet:
            r = rows[-len(preds)]
            log(f"  {m}: {round(secs, 1)} s, F1 {score.fmt(r['f1']).strip()}")
    if args.json:
        json.dump({"reference": ref.stats, "reference_params": ref.params, "reference_cache": info,
                   "max_ratio": args.max_ratio, "seed": args.seed, "rows": rows}, sys.stdout, indent=1)
        print()
    else:
        print_rows(rows, ref, info, args.markdown)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
