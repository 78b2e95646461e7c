#!/usr/bin/env python3
"""Score simd's accuracy against an exact shingle-based reference.

Measures how well `simd report` and `simd similar` find identical files and
near-duplicates on a tree, against a reference computed from the files
themselves with Broder's definitions.  Python 3.11, standard library only.
The script indexes nothing: index the tree first, by absolute path, e.g.

    simd --db IDX index DIR/tree                  (or several roots)

then run `score.py report ...` or `score.py similar ...` on it.  simd honours
.gitignore/.ignore/.simdignore unless indexed with --no-ignore, while the
reference takes every regular file of the tree (symlinks not followed, .git
and the index directory skipped); the script prints both file counts so a
mismatch shows.

The reference (independent of simd)
-----------------------------------
Each file's bytes are split on ASCII whitespace into words (binary files too,
on their raw bytes); its shingles are the runs of w=4 consecutive words
(--shingle), each hashed to 64 bits (Python's hash() of the tuple of words,
consistent within one run; two distinct shingles collide with probability
2^-64); a file is the SET of its shingles.  A file with 1..w-1 words has
its whole word sequence as its one shingle; a file with no words has no
shingles and is similar to nothing.

    resemblance  r(A,B)    = |S(A) & S(B)| / |S(A) | S(B)|
    containment  c(A in B) = |S(A) & S(B)| / |S(A)|

Two files are IDENTICAL iff their bytes are equal; two distinct contents are
SIMILAR iff r >= 0.5 or max(c(A in B), c(B in A)) >= 0.8 (--ref-similarity,
--ref-containment).  Byte-identical files are collapsed into one content
first.  Candidates come from an inverted index over shingles with prefix
filtering (each content probes the rarest |S| - ceil(0.5|S|) + 1 of its
shingles, which any qualifying partner at least as large must meet); every
candidate pair is then measured exactly by set intersection.  Shingles held
by more than --max-df distinct contents (default 1000) are skipped when
probing only -- they still count in the exact intersection; the number of
contents whose probe touched such a shingle (where a pair could be missed)
is printed.  The result is cached in a JSON file next to the tree
(TREE.simd-reference-<params>.json, or --cache FILE), keyed by a digest of
every file's (path, size, mtime); --no-cache ignores it.

What is scored
--------------
report:  identical pairs = unordered pairs of FILES with equal bytes (simd:
  its identical sets, plus the files of cluster members).  Similar pairs =
  unordered pairs of distinct CONTENTS (byte-identical files count once; a
  simd member is mapped to the reference content of its files).  Two simd
  pair sets are scored separately:
    links         the direct links of the clusters, member x member;
    same cluster  every pair of members of one cluster (the transitive
                  closure simd shows as a cluster; precision is expected to
                  be lower).
  Precision/recall/F1 overall, by the smaller content's size (< 3 KB,
  3-10 KB, >= 10 KB; KB = 1000 bytes) and, for recall, by the reference
  band of the pair (r >= 0.9, 0.7-0.9, 0.5-0.7, containment only).  False
  positives (links) are re-measured against the reference definitions to
  show how close they came.  With --truth DIR/truth.json (from
  tools/gen_corpus.py) it also prints recall on the generator's labelled
  pairs (identical_groups, derived by edit rate, contains) and how many
  template-sharing pairs were linked.
  --sweep runs `simd report` over a grid of --min-similarity x
  --min-containment x --min-bytes (--grid-sim, --grid-cont, --grid-bytes)
  and prints P/R/F1 per point, best link F1 first.

similar:  runs `simd similar FILE` for every file of the reference (or
  --sample N of them, seeded by --seed), with the file's own path indexed
  (simd leaves it out of its answer).  An answered file is correct when it
  is a reference neighbour of the query: byte-identical to it, or of a
  content similar to its content.  Prints micro-averaged precision, recall
  and F1 over (query, answered file) pairs -- all, and without identical
  neighbours --, top-1 accuracy (the first hit is a neighbour, among
  queries that have one) and the false-alarm rate (queries with no
  neighbour that got at least one hit).  simd is run with --limit 1000
  (--limit; 0 = simd's default of 20) so that recall is not cut by the
  number of answers.

Paths in simd's answers are absolute; they are mapped back by stripping the
canonical tree path plus "/".  Paths outside the tree (or outside --roots)
are left out of every count.

Commands
--------
  score.py reference --tree TREE [--roots SUB ...]
  score.py report    --tree TREE --db IDX [--truth DIR/truth.json] [--sweep]
  score.py similar   --tree TREE --db IDX [--sample N] [--seed S] [--jobs J]
Common: --json (one JSON object on stdout instead of tables), --simd PATH
(default: $SIMD, else target/release/simd next to tools/, else `simd` on
PATH), --min-bytes/--min-similarity/--min-containment/--max-degree (passed
to simd), --roots (restrict the reference to these subdirectories of TREE,
e.g. when the index holds only some of them).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

# The truth files' path convention (str, or {"path_b64": ...}) is gen_corpus.py's.
from gen_corpus import path_from_json as path_unjson, path_to_json as path_json

TOOLS = os.path.dirname(os.path.abspath(__file__))
CACHE_FORMAT = "simd-score-reference/1"
SIZE_STRATA = [("< 3 KB", 0, 3000), ("3-10 KB", 3000, 10000), (">= 10 KB", 10000, None)]
BANDS = ["r >= 0.9", "r 0.7-0.9", "r 0.5-0.7", "containment only"]
SIMD_DEFAULTS = {"min_bytes": 500, "min_similarity": 0.3, "min_containment": 0.6}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def die(msg: str, code: int = 2):
    print(f"score.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def simd_path(obj: dict) -> bytes:
    """Raw bytes of a path object of simd's JSON: {"path": s} | {"path_b64": b}."""
    if "path" in obj:
        return obj["path"].encode("utf-8")
    return base64.b64decode(obj["path_b64"])


def show(p: bytes) -> str:
    return p.decode("utf-8", "backslashreplace")


def prf(tp: int, pred: int, ref: int) -> tuple[float | None, float | None, float | None]:
    p = tp / pred if pred else None
    r = tp / ref if ref else None
    f = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else (0.0 if p is not None and r is not None else None)
    return p, r, f


def fmt(x, width=6) -> str:
    if x is None:
        return "-".rjust(width)
    if isinstance(x, float):
        return f"{x:.3f}".rjust(width)
    return str(x).rjust(width)


def c2(n: int) -> int:
    return n * (n - 1) // 2


# --------------------------------------------------------------------------
# Shingles


def shingle_hashes(data: bytes, w: int) -> set[int]:
    """The set of 64-bit hashes of the w-word shingles of data."""
    words = data.split()
    if len(words) >= w:
        return set(map(hash, zip(*(words[k:] for k in range(w)))))
    if words:
        return {hash(tuple(words))}
    return set()


def measures(inter: int, na: int, nb: int) -> tuple[float, float, float]:
    """(resemblance, c(a in b), c(b in a))."""
    union = na + nb - inter
    return (inter / union if union else 0.0, inter / na if na else 0.0, inter / nb if nb else 0.0)


# --------------------------------------------------------------------------
# The reference


class Reference:
    """Files of the tree, their contents and the similar content pairs."""

    def __init__(self):
        self.files: list[bytes] = []  # relative paths, sorted
        self.file_content: list[int] = []
        self.contents: list[tuple[int, int]] = []  # (size in bytes, shingles)
        self.pairs: dict[tuple[int, int], int] = {}  # (i < j) -> |S_i & S_j|
        self.stats: dict = {}
        self.params: dict = {}

    def finish(self):
        self.by_path = {p: i for i, p in enumerate(self.files)}
        self.content_files: list[list[int]] = [[] for _ in self.contents]
        for f, c in enumerate(self.file_content):
            self.content_files[c].append(f)
        self.partners: list[list[int]] = [[] for _ in self.contents]
        for i, j in self.pairs:
            self.partners[i].append(j)
            self.partners[j].append(i)

    def pair_measures(self, i: int, j: int):
        inter = self.pairs[(i, j) if i < j else (j, i)]
        return measures(inter, self.contents[i][1], self.contents[j][1])

    def band(self, i: int, j: int) -> str:
        r, _, _ = self.pair_measures(i, j)
        if r >= 0.9:
            return BANDS[0]
        if r >= 0.7:
            return BANDS[1]
        if r >= self.params["ref_similarity"]:
            return BANDS[2]
        return BANDS[3]

    def size_stratum(self, i: int, j: int) -> str:
        s = min(self.contents[i][0], self.contents[j][0])
        for name, lo, hi in SIZE_STRATA:
            if s >= lo and (hi is None or s < hi):
                return name
        raise AssertionError

    def identical_pairs(self) -> int:
        return sum(c2(len(fs)) for fs in self.content_files)

    def to_json(self, key: str) -> dict:
        return {
            "format": CACHE_FORMAT,
            "key": key,
            "params": self.params,
            "stats": self.stats,
            "files": [[path_json(p), c] for p, c in zip(self.files, self.file_content)],
            "contents": [list(c) for c in self.contents],
            "pairs": [[i, j, n] for (i, j), n in sorted(self.pairs.items())],
        }

    @classmethod
    def from_json(cls, d: dict) -> "Reference":
        ref = cls()
        ref.params = d["params"]
        ref.stats = d["stats"]
        ref.files = [path_unjson(p) for p, _ in d["files"]]
        ref.file_content = [c for _, c in d["files"]]
        ref.contents = [tuple(c) for c in d["contents"]]
        ref.pairs = {(i, j): n for i, j, n in d["pairs"]}
        ref.finish()
        return ref


def walk(tree: bytes, roots: list[bytes], skip: set[bytes]) -> list[tuple[bytes, int, int]]:
    """(relative path, size, mtime_ns) of every regular file under the roots
    (directories relative to tree; b"" = the whole tree), sorted by path."""
    out = []
    stack = [os.path.join(tree, r) if r else tree for r in roots]
    prefix = len(tree) + 1
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError as e:
            log(f"warning: {show(d)}: {e}")
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != b".git" and e.path not in skip:
                            stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        out.append((e.path[prefix:], st.st_size, st.st_mtime_ns))
                except OSError as err:
                    log(f"warning: {show(e.path)}: {err}")
    out.sort()
    return out


def tree_key(listing, params: dict) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps(params, sort_keys=True).encode())
    for rel, size, mtime in listing:
        h.update(rel + b"\0" + f"{size} {mtime}".encode() + b"\0")
    return h.hexdigest()


def compute_reference(tree: bytes, listing, params: dict, progress: bool) -> Reference:
    t0 = time.monotonic()
    w = params["shingle"]
    r_t, c_t, max_df = params["ref_similarity"], params["ref_containment"], params["max_df"]
    ref = Reference()
    ref.params = params
    sets: list[set[int]] = []
    df: Counter = Counter()
    by_digest: dict[bytes, int] = {}
    nbytes = 0
    for k, (rel, _, _) in enumerate(listing):
        try:
            with open(os.path.join(tree, rel), "rb") as f:
                data = f.read()
        except OSError as e:
            log(f"warning: {show(rel)}: {e} (left out)")
            continue
        nbytes += len(data)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        c = by_digest.get(digest)
        if c is None:
            c = by_digest[digest] = len(ref.contents)
            s = shingle_hashes(data, w)
            df.update(s)
            sets.append(s)
            ref.contents.append((len(data), len(s)))
        ref.files.append(rel)
        ref.file_content.append(c)
        if progress and (k + 1) % 5000 == 0:
            log(f"  reference: read {k + 1}/{len(listing)} files, {len(ref.contents)} contents")
    t_read = time.monotonic() - t0

    # Postings only for shingles held by 2..max_df contents: the others give
    # no candidate (held by one) or are skipped when probing (too common).
    shared = {h for h, n in df.items() if 2 <= n <= max_df}
    frequent = {h for h, n in df.items() if n > max_df}
    postings: dict[int, list[int]] = defaultdict(list)
    for c, s in enumerate(sets):
        for h in s & shared:
            postings[h].append(c)

    # Prefix filtering: a pair (A, B) with |B| <= |A| that qualifies has
    # |A & B| >= min(r_t, c_t) * |B| = alpha, and any |B| - alpha + 1
    # shingles of B include one of those.  B probes its rarest ones; the
    # shingles held by B alone come first and give no candidate.
    lo = min(r_t, c_t)
    candidates = incomplete = skipped_probes = 0
    n = len(sets)
    for b in range(n):
        sb = sets[b]
        nb = len(sb)
        if nb == 0:
            continue
        alpha = max(1, math.ceil(lo * nb - 1e-9))
        p = nb - alpha + 1
        sh = sb & shared
        fr = sb & frequent if frequent else ()
        unique = nb - len(sh) - len(fr)
        if unique >= p:
            continue
        probe = sorted(sh, key=df.__getitem__)[: p - unique]
        if len(probe) < p - unique and fr:
            incomplete += 1
            skipped_probes += min(len(fr), p - unique - len(probe))
        cands: set[int] = set()
        for h in probe:
            cands.update(postings[h])
        for a in cands:
            sa = sets[a]
            na = len(sa)
            if na < nb or (na == nb and a <= b):
                continue
            candidates += 1
            inter = len(sb & sa)
            union = na + nb - inter
            if inter >= r_t * union - 1e-9 or inter >= c_t * nb - 1e-9:
                ref.pairs[(a, b) if a < b else (b, a)] = inter
        if progress and (b + 1) % 10000 == 0:
            log(f"  reference: probed {b + 1}/{n} contents, {len(ref.pairs)} similar pairs")
    ref.stats = {
        "files": len(ref.files),
        "bytes": nbytes,
        "contents": len(ref.contents),
        "shingles": sum(c[1] for c in ref.contents),
        "distinct_shingles": len(df),
        "shared_shingles": len(shared),
        "frequent_shingles": len(frequent),
        "candidate_pairs": candidates,
        "similar_pairs": len(ref.pairs),
        "identical_pairs": 0,
        "contents_probing_frequent": incomplete,
        "skipped_probes": skipped_probes,
        "seconds_read": round(t_read, 2),
        "seconds": round(time.monotonic() - t0, 2),
    }
    ref.finish()
    ref.stats["identical_pairs"] = ref.identical_pairs()
    return ref


def canonical_tree(args) -> bytes:
    tree = os.fsencode(os.path.realpath(args.tree))
    if not os.path.isdir(tree):
        die(f"{args.tree}: not a directory")
    return tree


def resolve_roots(args, tree: bytes) -> list[bytes]:
    if not args.roots:
        return [b""]
    out = []
    for r in args.roots:
        p = os.fsencode(os.path.realpath(os.path.join(os.fsdecode(tree), r)))
        if p == tree:
            return [b""]
        if not p.startswith(tree + b"/") or not os.path.isdir(p):
            die(f"--roots {r}: not a directory under {show(tree)}")
        out.append(p[len(tree) + 1 :])
    return sorted(set(out))


def load_reference(args) -> tuple[Reference, bytes, dict]:
    """The reference for args.tree (from the cache when it is current)."""
    tree = canonical_tree(args)
    roots = resolve_roots(args, tree)
    params = {
        "version": 2,
        "shingle": args.shingle,
        "ref_similarity": args.ref_similarity,
        "ref_containment": args.ref_containment,
        "max_df": args.max_df,
        "roots": [path_json(r) for r in roots],
    }
    skip = set()
    if getattr(args, "db", None):
        skip.add(os.fsencode(os.path.realpath(args.db)))
    t0 = time.monotonic()
    listing = walk(tree, roots, skip)
    key = tree_key(listing, params)
    if args.cache:
        cache = os.fsencode(args.cache)
    else:
        ph = hashlib.blake2b(json.dumps(params, sort_keys=True).encode(), digest_size=4).hexdigest()
        cache = tree + f".simd-reference-{ph}.json".encode()
    info = {"cache": show(cache), "from_cache": False}
    if not args.no_cache and os.path.exists(cache):
        try:
            with open(cache, "rb") as f:
                d = json.load(f)
            if d.get("format") == CACHE_FORMAT and d.get("key") == key:
                ref = Reference.from_json(d)
                info["from_cache"] = True
                info["load_seconds"] = round(time.monotonic() - t0, 2)
                return ref, tree, info
            log(f"reference cache {show(cache)} is stale; recomputing")
        except (OSError, ValueError, KeyError) as e:
            log(f"warning: reference cache {show(cache)} unreadable ({e}); recomputing")
    if not args.quiet:
        log(f"computing the reference over {len(listing)} files of {show(tree)} ...")
    ref = compute_reference(tree, listing, params, not args.quiet)
    ref.stats["seconds_walk"] = round(time.monotonic() - t0 - ref.stats["seconds"], 2)
    if not args.no_cache:
        try:
            tmp = cache + b".tmp"
            with open(tmp, "w") as f:
                json.dump(ref.to_json(key), f, separators=(",", ":"))
            os.replace(tmp, cache)
        except OSError as e:
            log(f"warning: cannot write the reference cache {show(cache)}: {e}")
            info["cache"] = None
    return ref, tree, info


def reference_summary(ref: Reference, info: dict) -> str:
    s = ref.stats
    how = "loaded from the cache" if info["from_cache"] else "computed"
    return (
        f"reference: {s['files']} files, {s['contents']} distinct contents, "
        f"{s['identical_pairs']} identical file pairs, {s['similar_pairs']} similar content pairs "
        f"(w={ref.params['shingle']}, r >= {ref.params['ref_similarity']} or c >= {ref.params['ref_containment']}); "
        f"{how}; computing took {s['seconds']} s"
        + (f" (+{s['seconds_walk']} s walk)" if "seconds_walk" in s else "")
        + f"; {s['contents_probing_frequent']} contents probed shingles held by > {ref.params['max_df']} contents"
    )


# --------------------------------------------------------------------------
# Running simd


def simd_binary(args) -> str:
    if args.simd:
        return args.simd
    if os.environ.get("SIMD"):
        return os.environ["SIMD"]
    local = os.path.join(TOOLS, "..", "target", "release", "simd")
    return os.path.normpath(local) if os.path.exists(local) else "simd"


def threshold_flags(args, min_bytes=None, min_sim=None, min_cont=None) -> list[str]:
    out = []
    for flag, v in (
        ("--min-bytes", min_bytes if min_bytes is not None else args.min_bytes),
        ("--min-similarity", min_sim if min_sim is not None else args.min_similarity),
        ("--min-containment", min_cont if min_cont is not None else args.min_containment),
        ("--max-degree", args.max_degree),
    ):
        if v is not None:
            out += [flag, str(v)]
    return out


def run_simd(args, cmd: list) -> dict:
    argv = [simd_binary(args), "--db", args.db, "--format", "json", "-q"] + cmd
    p = subprocess.run(argv, capture_output=True)
    if p.returncode != 0:
        die(f"{' '.join(map(os.fsdecode, argv))} failed ({p.returncode}): {p.stderr.decode(errors='replace').strip()}")
    return json.loads(p.stdout)


class PathMap:
    """Absolute simd paths -> reference file indices."""

    def __init__(self, ref: Reference, tree: bytes):
        self.ref = ref
        self.prefix = tree + b"/"
        self.outside = 0  # not under the tree / roots
        self.unknown: set[bytes] = set()  # under the roots but not in the reference

    def __call__(self, obj: dict) -> int | None:
        p = simd_path(obj)
        if not p.startswith(self.prefix):
            self.outside += 1
            return None
        rel = p[len(self.prefix) :]
        i = self.ref.by_path.get(rel)
        if i is None:
            roots = [path_unjson(r) for r in self.ref.params["roots"]]
            if any(r == b"" or rel.startswith(r + b"/") for r in roots):
                self.unknown.add(rel)
            else:
                self.outside += 1
        return i


# --------------------------------------------------------------------------
# Scoring `simd report`


def report_pairs(ref: Reference, rep: dict, pm: PathMap):
    """simd's identical labels per file, link pairs and same-cluster pairs
    (both as sets of (i < j) reference content pairs)."""
    label: dict[int, str] = {}
    for s in rep["identical"]:
        for f in s["files"]:
            i = pm(f)
            if i is not None:
                label[i] = s["content"]
    links: set[tuple[int, int]] = set()
    cluster: set[tuple[int, int]] = set()
    mixed = 0
    for cl in rep["clusters"]:
        mcont: list[set[int]] = []
        for m in cl["members"]:
            cs = set()
            for f in m["files"]:
                i = pm(f)
                if i is not None:
                    cs.add(ref.file_content[i])
                    if len(m["files"]) > 1:
                        label[i] = m["content"]
            mixed += len(cs) > 1
            mcont.append(cs)
        for lk in cl["links"]:
            for x in mcont[lk["a"]]:
                for y in mcont[lk["b"]]:
                    if x != y:
                        links.add((x, y) if x < y else (y, x))
        allc = sorted(set().union(*mcont)) if mcont else []
        for k, x in enumerate(allc):
            for y in allc[k + 1 :]:
                cluster.add((x, y))
    return label, links, cluster, mixed


def score_identical(ref: Reference, label: dict[int, str]):
    cells = Counter((ref.file_content[i], lab) for i, lab in label.items())
    per_label = Counter(label.values())
    tp = sum(c2(n) for n in cells.values())
    pred = sum(c2(n) for n in per_label.values())
    refn = ref.identical_pairs()
    return {"ref": refn, "simd": pred, "tp": tp, **dict(zip(("precision", "recall", "f1"), prf(tp, pred, refn)))}


def score_set(pred: set, refset: set) -> dict:
    tp = len(pred & refset)
    return {"ref": len(refset), "simd": len(pred), "tp": tp, **dict(zip(("precision", "recall", "f1"), prf(tp, len(pred), len(refset))))}


def stratified(ref: Reference, pred: set, refset: set) -> dict:
    out = {}
    for name, _, _ in SIZE_STRATA:
        out[name] = {"ref": 0, "simd": 0, "tp": 0}
    for p in refset:
        out[ref.size_stratum(*p)]["ref"] += 1
    for p in pred:
        st = out[ref.size_stratum(*p)]
        st["simd"] += 1
        st["tp"] += p in refset
    for st in out.values():
        st.update(zip(("precision", "recall", "f1"), prf(st["tp"], st["simd"], st["ref"])))
    bands = {b: {"ref": 0, "tp": 0} for b in BANDS}
    for p in refset:
        bd = bands[ref.band(*p)]
        bd["ref"] += 1
        bd["tp"] += p in pred
    for bd in bands.values():
        bd["recall"] = bd["tp"] / bd["ref"] if bd["ref"] else None
    return {"size": out, "band": bands}


class LazyShingles:
    """Shingle sets of reference contents, read on demand (for re-measuring)."""

    def __init__(self, ref: Reference, tree: bytes):
        self.ref, self.tree = ref, tree
        self.memo: dict[int, set[int]] = {}

    def get(self, c: int) -> set[int]:
        s = self.memo.get(c)
        if s is None:
            rel = self.ref.files[self.ref.content_files[c][0]]
            with open(os.path.join(self.tree, rel), "rb") as f:
                s = shingle_hashes(f.read(), self.ref.params["shingle"])
            if len(self.memo) > 20000:
                self.memo.clear()
            self.memo[c] = s
        return s

    def measure(self, a: int, b: int):
        sa, sb = self.get(a), self.get(b)
        return measures(len(sa & sb), len(sa), len(sb))


def fp_analysis(ref: Reference, tree: bytes, fps: list, limit: int, seed: int):
    """Histogram of the reference's max(r, c) over (a sample of) the false positives."""
    if len(fps) > limit:
        fps = random.Random(seed).sample(fps, limit)
    lazy = LazyShingles(ref, tree)
    bins = [(0.9, "90-100%"), (0.8, "80-90%"), (0.6, "60-80%"), (0.4, "40-60%"), (0.0, "< 40%")]
    hist = Counter()
    worst = []
    for a, b in fps:
        try:
            r, cab, cba = lazy.measure(a, b)
        except OSError:
            continue
        # how far towards the nearer reference threshold the pair got
        close = max(r / ref.params["ref_similarity"], max(cab, cba) / ref.params["ref_containment"])
        for lo, name in bins:
            if close >= lo:
                hist[name] += 1
                break
        worst.append((close, a, b, r, cab, cba))
    worst.sort()
    return {
        "measured": sum(hist.values()),
        "closeness_hist": {name: hist[name] for _, name in bins},
        "farthest": [
            {"a": path_json(ref.files[ref.content_files[a][0]]), "b": path_json(ref.files[ref.content_files[b][0]]),
             "size_a": ref.contents[a][0], "size_b": ref.contents[b][0],
             "resemblance": round(r, 4), "a_in_b": round(cab, 4), "b_in_a": round(cba, 4)}
            for _, a, b, r, cab, cba in worst[:5]
        ],
    }


def fn_examples(ref: Reference, fns: list, k: int, seed: int):
    fns = sorted(fns)
    rnd = random.Random(seed)
    pick = rnd.sample(fns, min(k, len(fns)))
    out = []
    for a, b in pick:
        r, cab, cba = ref.pair_measures(a, b)
        out.append({"a": path_json(ref.files[ref.content_files[a][0]]), "b": path_json(ref.files[ref.content_files[b][0]]),
                    "size_a": ref.contents[a][0], "size_b": ref.contents[b][0],
                    "resemblance": round(r, 4), "a_in_b": round(cab, 4), "b_in_a": round(cba, 4)})
    return out


def truth_checks(ref: Reference, truth_path: str, label: dict[int, str], links: set, cluster: set):
    sys.path.insert(0, TOOLS)
    from gen_corpus import path_from_json  # noqa: E402

    with open(truth_path, "rb") as f:
        truth = json.load(f)
    missing = 0

    def fidx(v):
        nonlocal missing
        i = ref.by_path.get(path_from_json(v))
        if i is None:
            missing += 1
        return i

    out = {}
    # identical groups: file pairs
    tp = tot = refok = 0
    for g in truth["identical_groups"]:
        idx = [i for i in map(fidx, g) if i is not None]
        for k, x in enumerate(idx):
            for y in idx[k + 1 :]:
                tot += 1
                tp += label.get(x) is not None and label.get(x) == label.get(y)
                refok += ref.file_content[x] == ref.file_content[y]
    out["identical_groups"] = {"pairs": tot, "simd_recall": tp / tot if tot else None, "reference_agrees": refok / tot if tot else None}
    refset = set(ref.pairs)

    def pair_recall(entries, ka, kb, key):
        groups = defaultdict(lambda: {"pairs": 0, "links": 0, "cluster": 0, "reference": 0})
        for e in entries:
            a, b = fidx(e[ka]), fidx(e[kb])
            if a is None or b is None:
                continue
            ca, cb = ref.file_content[a], ref.file_content[b]
            if ca == cb:
                continue
            p = (ca, cb) if ca < cb else (cb, ca)
            for g in key(e) + ["all"]:
                st = groups[g]
                st["pairs"] += 1
                st["links"] += p in links
                st["cluster"] += p in cluster
                st["reference"] += p in refset
        res = {}
        for g in sorted(groups, key=lambda g: (isinstance(g, str), g == "all", g if isinstance(g, str) else f"{g:08.3f}")):
            st = groups[g]
            n = st["pairs"]
            res[str(g)] = {"pairs": n, "links_recall": st["links"] / n, "cluster_recall": st["cluster"] / n, "reference_similar": st["reference"] / n}
        return res

    out["derived_by_edit_rate"] = pair_recall(truth.get("derived", []), "a", "b",
                                              lambda e: [e["edit_rate"]] + ([e["style"]] if e.get("style") else []))
    out["contains"] = pair_recall(truth.get("contains", []), "inner", "outer", lambda e: [])
    # template-sharing pairs: otherwise unrelated files; linking them is a false alarm
    tp_pairs = set()
    for t in truth.get("templates", []):
        idx = sorted({ref.file_content[i] for i in map(fidx, t["files"]) if i is not None})
        for k, x in enumerate(idx):
            for y in idx[k + 1 :]:
                tp_pairs.add((x, y))
    n = len(tp_pairs)
    out["template_pairs"] = {
        "pairs": n,
        "linked": sum(p in links for p in tp_pairs) / n if n else None,
        "same_cluster": sum(p in cluster for p in tp_pairs) / n if n else None,
        "reference_similar": sum(p in refset for p in tp_pairs) / n if n else None,
    }
    out["truth_paths_not_in_reference"] = missing
    return out


def score_report_once(args, ref: Reference, tree: bytes, min_bytes=None, min_sim=None, min_cont=None, detail=True):
    pm = PathMap(ref, tree)
    rep = run_simd(args, ["report"] + threshold_flags(args, min_bytes, min_sim, min_cont))
    label, links, cluster, mixed = report_pairs(ref, rep, pm)
    refset = set(ref.pairs)
    res = {
        "params": rep["params"],
        "index": rep["index"],
        "clusters": len(rep["clusters"]),
        "identical_sets": len(rep["identical"]),
        "identical": score_identical(ref, label),
        "similar_links": score_set(links, refset),
        "similar_same_cluster": score_set(cluster, refset),
        "paths_outside": pm.outside,
        "paths_unknown": len(pm.unknown),
        "members_with_several_contents": mixed,
    }
    if detail:
        res["strata_links"] = stratified(ref, links, refset)
        res["strata_same_cluster"] = stratified(ref, cluster, refset)
        res["false_positives_links"] = fp_analysis(ref, tree, sorted(links - refset), args.fp_sample, args.seed)
        res["false_negatives_links_examples"] = fn_examples(ref, list(refset - links), args.examples, args.seed)
        if pm.unknown:
            res["unknown_examples"] = [path_json(p) for p in sorted(pm.unknown)[:5]]
    return res, (label, links, cluster)


def print_report(res: dict, ref: Reference, info: dict):
    print(reference_summary(ref, info))
    pr = res["params"]
    print(f"simd report: --min-bytes {pr['min_bytes']} --min-similarity {pr['min_similarity']} "
          f"--min-containment {pr['min_containment']} --max-degree {pr['max_degree']}; "
          f"index {res['index']['files']} files / {res['index']['contents']} contents; "
          f"{res['identical_sets']} identical sets, {res['clusters']} clusters")
    if res["index"]["files"] != ref.stats["files"]:
        print(f"  note: simd indexed {res['index']['files']} files, the reference has {ref.stats['files']} "
              f"(.gitignore? other roots in the index?)")
    if res["paths_unknown"]:
        print(f"  warning: {res['paths_unknown']} simd paths under the tree are not in the reference "
              f"(changed since indexing?), e.g. {res.get('unknown_examples', [])[:2]}")
    if res["paths_outside"]:
        print(f"  {res['paths_outside']} simd path mentions outside the tree/roots were left out")
    if res["members_with_several_contents"]:
        print(f"  warning: {res['members_with_several_contents']} simd members map to several reference contents")
    print()
    print(f"{'':38}{'ref':>8}{'simd':>8}{'TP':>8}{'P':>8}{'R':>8}{'F1':>8}")
    for name, key in (("identical (file pairs)", "identical"), ("similar, links (content pairs)", "similar_links"),
                      ("similar, same cluster (content pairs)", "similar_same_cluster")):
        s = res[key]
        print(f"{name:38}{s['ref']:>8}{s['simd']:>8}{s['tp']:>8}{fmt(s['precision'], 8)}{fmt(s['recall'], 8)}{fmt(s['f1'], 8)}")
    print()
    print("similar pairs by the smaller content's size   [links | same cluster]")
    print(f"  {'stratum':12}{'ref':>7}{'simd':>7}{'TP':>7}{'P':>7}{'R':>7}{'F1':>7}   |{'simd':>7}{'TP':>7}{'P':>7}{'R':>7}{'F1':>7}")
    for name, _, _ in SIZE_STRATA:
        a, b = res["strata_links"]["size"][name], res["strata_same_cluster"]["size"][name]
        print(f"  {name:12}{a['ref']:>7}{a['simd']:>7}{a['tp']:>7}{fmt(a['precision'], 7)}{fmt(a['recall'], 7)}{fmt(a['f1'], 7)}   |"
              f"{b['simd']:>7}{b['tp']:>7}{fmt(b['precision'], 7)}{fmt(b['recall'], 7)}{fmt(b['f1'], 7)}")
    print("similar pairs by reference band (recall)      [links | same cluster]")
    print(f"  {'band':18}{'ref':>7}{'TP':>7}{'R':>7}   |{'TP':>7}{'R':>7}")
    for name in BANDS:
        a, b = res["strata_links"]["band"][name], res["strata_same_cluster"]["band"][name]
        print(f"  {name:18}{a['ref']:>7}{a['tp']:>7}{fmt(a['recall'], 7)}   |{b['tp']:>7}{fmt(b['recall'], 7)}")
    fp = res["false_positives_links"]
    print(f"false-positive links re-measured ({fp['measured']}), by how near they came to the reference: "
          f"max(r/{ref.params['ref_similarity']}, c/{ref.params['ref_containment']})")
    print("  " + "  ".join(f"{k}: {v}" for k, v in fp["closeness_hist"].items()))
    for e in fp["farthest"][:3]:
        print(f"  farthest: r={e['resemblance']} c={e['a_in_b']}/{e['b_in_a']} sizes {e['size_a']}/{e['size_b']}: "
              f"{show(path_unjson(e['a']))}  ~  {show(path_unjson(e['b']))}")
    for e in res["false_negatives_links_examples"]:
        print(f"  missed: r={e['resemblance']} c={e['a_in_b']}/{e['b_in_a']} sizes {e['size_a']}/{e['size_b']}: "
              f"{show(path_unjson(e['a']))}  ~  {show(path_unjson(e['b']))}")
    t = res.get("truth")
    if t:
        print()
        print("generator's labelled pairs (truth.json)")
        ig = t["identical_groups"]
        print(f"  identical_groups: {ig['pairs']} file pairs, simd recall {fmt(ig['simd_recall'])}, reference agrees {fmt(ig['reference_agrees'])}")
        print(f"  {'derived edit rate':20}{'pairs':>7}{'links R':>9}{'clust R':>9}{'ref sim':>9}")
        rows = list(t["derived_by_edit_rate"].items())
        if "all" in t["contains"]:
            rows.append(("contains", t["contains"]["all"]))
        for g, st in rows:
            print(f"  {g:20}{st['pairs']:>7}{fmt(st['links_recall'], 9)}{fmt(st['cluster_recall'], 9)}{fmt(st['reference_similar'], 9)}")
        tp = t["template_pairs"]
        print(f"  template-sharing pairs: {tp['pairs']}, linked {fmt(tp['linked'])}, same cluster {fmt(tp['same_cluster'])}, "
              f"reference-similar {fmt(tp['reference_similar'])}")
        if t["truth_paths_not_in_reference"]:
            print(f"  warning: {t['truth_paths_not_in_reference']} truth paths are not in the tree")


def parse_grid(s: str, conv):
    return [conv(x) for x in s.split(",") if x.strip()]


def cmd_report(args):
    ref, tree, info = load_reference(args)
    if args.sweep:
        rows = []
        grid = [(s, c, b) for s in parse_grid(args.grid_sim, float) for c in parse_grid(args.grid_cont, float)
                for b in parse_grid(args.grid_bytes, int)]
        t0 = time.monotonic()
        for k, (s, c, b) in enumerate(grid):
            r, _ = score_report_once(args, ref, tree, b, s, c, detail=False)
            rows.append({"min_similarity": s, "min_containment": c, "min_bytes": b,
                         "links": r["similar_links"], "same_cluster": r["similar_same_cluster"], "identical": r["identical"]})
            if not args.quiet and (k + 1) % 10 == 0:
                log(f"  sweep: {k + 1}/{len(grid)}")
        rows.sort(key=lambda r: (-(r["links"]["f1"] or 0), -(r["same_cluster"]["f1"] or 0), r["min_bytes"]))
        secs = round(time.monotonic() - t0, 1)
        if args.json:
            json.dump({"reference": ref.stats, "reference_cache": info, "sweep": rows, "seconds": secs}, sys.stdout, indent=1)
            print()
            return
        print(reference_summary(ref, info))
        print(f"sweep: {len(grid)} runs of simd report in {secs} s; similar content pairs, best link F1 first "
              f"(identical F1 {fmt(rows[0]['identical']['f1']).strip()} throughout)" if rows else "sweep: empty grid")
        print(f"  {'rank':>4}{'min-sim':>9}{'min-cont':>9}{'min-bytes':>10}{'links P':>9}{'R':>7}{'F1':>7}{'clust P':>9}{'R':>7}{'F1':>7}")
        shown = args.top or len(rows)
        for k, r in enumerate(rows):
            d = (r["min_similarity"], r["min_containment"], r["min_bytes"]) == (
                SIMD_DEFAULTS["min_similarity"], SIMD_DEFAULTS["min_containment"], SIMD_DEFAULTS["min_bytes"])
            if k >= shown and not d:
                continue
            if k >= shown:
                print("  ...")
            L, C = r["links"], r["same_cluster"]
            print(f"  {k + 1:>4}{r['min_similarity']:>9}{r['min_containment']:>9}{r['min_bytes']:>10}"
                  f"{fmt(L['precision'], 9)}{fmt(L['recall'], 7)}{fmt(L['f1'], 7)}{fmt(C['precision'], 9)}{fmt(C['recall'], 7)}{fmt(C['f1'], 7)}"
                  + ("   <- simd defaults" if d else ""))
        return
    res, (label, links, cluster) = score_report_once(args, ref, tree)
    if args.truth:
        res["truth"] = truth_checks(ref, args.truth, label, links, cluster)
    if args.json:
        json.dump({"reference": ref.stats, "reference_params": ref.params, "reference_cache": info, **res}, sys.stdout, indent=1)
        print()
    else:
        print_report(res, ref, info)


# --------------------------------------------------------------------------
# Scoring `simd similar`


def cmd_similar(args):
    ref, tree, info = load_reference(args)
    n = len(ref.files)
    queries = list(range(n))
    if args.sample and args.sample < n:
        queries = sorted(random.Random(args.seed).sample(queries, args.sample))
    extra = threshold_flags(args)
    if args.limit:
        extra += ["--limit", str(args.limit)]

    def ask(f: int):
        path = tree + b"/" + ref.files[f]
        return f, run_simd(args, ["similar"] + extra + [path])

    def neighbours(f: int) -> tuple[set[int], set[int]]:
        c = ref.file_content[f]
        ident = {g for g in ref.content_files[c] if g != f}
        sim = {g for p in ref.partners[c] for g in ref.content_files[p]}
        return ident, sim

    pm = PathMap(ref, tree)
    tot = {"queries": 0, "pred": 0, "ref": 0, "tp": 0, "pred_nonident": 0, "ref_nonident": 0, "tp_nonident": 0,
           "with_neighbour": 0, "top1": 0, "without_neighbour": 0, "false_alarm": 0, "no_answer_with_neighbour": 0,
           "empty_queries": 0, "pred_nonempty": 0, "ref_nonempty": 0, "tp_nonempty": 0, "no_answer_empty": 0}
    by_size = {name: {"pred": 0, "ref": 0, "tp": 0} for name, _, _ in SIZE_STRATA}
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for k, (f, ans) in enumerate(ex.map(ask, queries)):
            ident, sim = neighbours(f)
            nb = ident | sim
            got: list[int] = []
            first = None
            for h in ans["hits"]:
                for fo in h["files"]:
                    g = pm(fo)
                    if g is None or g == f:
                        continue
                    if first is None:
                        first = g
                    got.append(g)
            got_set = set(got)
            tp = len(got_set & nb)
            tot["queries"] += 1
            tot["pred"] += len(got_set)
            tot["ref"] += len(nb)
            tot["tp"] += tp
            size = ref.contents[ref.file_content[f]][0]
            if size == 0:
                tot["empty_queries"] += 1
                tot["no_answer_empty"] += bool(nb) and first is None
            else:
                tot["pred_nonempty"] += len(got_set)
                tot["ref_nonempty"] += len(nb)
                tot["tp_nonempty"] += tp
            gs = got_set - ident
            tot["pred_nonident"] += len(gs)
            tot["ref_nonident"] += len(sim)
            tot["tp_nonident"] += len(gs & sim)
            for name, lo, hi in SIZE_STRATA:
                if size >= lo and (hi is None or size < hi):
                    st = by_size[name]
                    st["pred"] += len(gs)
                    st["ref"] += len(sim)
                    st["tp"] += len(gs & sim)
            if nb:
                tot["with_neighbour"] += 1
                tot["top1"] += first is not None and first in nb
                tot["no_answer_with_neighbour"] += first is None
            else:
                tot["without_neighbour"] += 1
                tot["false_alarm"] += bool(got_set)
            if not args.quiet and (k + 1) % 200 == 0:
                log(f"  similar: {k + 1}/{len(queries)} queries")
    secs = time.monotonic() - t0
    p, r, f1 = prf(tot["tp"], tot["pred"], tot["ref"])
    pe, re_, fe = prf(tot["tp_nonempty"], tot["pred_nonempty"], tot["ref_nonempty"])
    pn, rn, fn = prf(tot["tp_nonident"], tot["pred_nonident"], tot["ref_nonident"])
    for st in by_size.values():
        st.update(zip(("precision", "recall", "f1"), prf(st["tp"], st["pred"], st["ref"])))
    res = {
        "reference": ref.stats, "reference_cache": info,
        "queries": tot["queries"], "files": n, "seconds": round(secs, 1),
        "all": {"pred": tot["pred"], "ref": tot["ref"], "tp": tot["tp"], "precision": p, "recall": r, "f1": f1},
        "all_nonempty_queries": {"pred": tot["pred_nonempty"], "ref": tot["ref_nonempty"], "tp": tot["tp_nonempty"],
                                 "precision": pe, "recall": re_, "f1": fe, "empty_queries_left_out": tot["empty_queries"]},
        "non_identical": {"pred": tot["pred_nonident"], "ref": tot["ref_nonident"], "tp": tot["tp_nonident"],
                          "precision": pn, "recall": rn, "f1": fn},
        "non_identical_by_query_size": by_size,
        "top1": {"queries_with_neighbour": tot["with_neighbour"], "correct": tot["top1"],
                 "accuracy": tot["top1"] / tot["with_neighbour"] if tot["with_neighbour"] else None,
                 "no_answer": tot["no_answer_with_neighbour"], "no_answer_empty_files": tot["no_answer_empty"]},
        "false_alarm": {"queries_without_neighbour": tot["without_neighbour"], "with_hits": tot["false_alarm"],
                        "rate": tot["false_alarm"] / tot["without_neighbour"] if tot["without_neighbour"] else None},
        "paths_outside": pm.outside, "paths_unknown": len(pm.unknown),
        "simd_flags": extra,
    }
    if args.json:
        json.dump(res, sys.stdout, indent=1)
        print()
        return
    print(reference_summary(ref, info))
    print(f"simd similar {' '.join(extra)}: {tot['queries']} queries of {n} files "
          f"(seed {args.seed}) in {secs:.1f} s ({1000 * secs / max(1, tot['queries']):.0f} ms each)")
    if pm.unknown:
        print(f"  warning: {len(pm.unknown)} answered paths under the tree are not in the reference")
    print(f"{'(query, answered file) pairs':34}{'ref':>8}{'simd':>8}{'TP':>8}{'P':>8}{'R':>8}{'F1':>8}")
    for name, s in (("all neighbours", res["all"]),
                    (f"all, {tot['empty_queries']} empty queries left out", res["all_nonempty_queries"]),
                    ("without identical neighbours", res["non_identical"])):
        print(f"{name:34}{s['ref']:>8}{s['pred']:>8}{s['tp']:>8}{fmt(s['precision'], 8)}{fmt(s['recall'], 8)}{fmt(s['f1'], 8)}")
    for name, _, _ in SIZE_STRATA:
        s = by_size[name]
        print(f"{'  non-identical, query ' + name:34}{s['ref']:>8}{s['pred']:>8}{s['tp']:>8}{fmt(s['precision'], 8)}{fmt(s['recall'], 8)}{fmt(s['f1'], 8)}")
    t1 = res["top1"]
    print(f"top-1 accuracy: {fmt(t1['accuracy']).strip()} ({t1['correct']}/{t1['queries_with_neighbour']} queries with a "
          f"reference neighbour; {t1['no_answer']} of them got no answer, {t1['no_answer_empty_files']} of those empty files)")
    fa = res["false_alarm"]
    print(f"false-alarm rate: {fmt(fa['rate']).strip()} ({fa['with_hits']}/{fa['queries_without_neighbour']} queries "
          f"without a reference neighbour got >= 1 hit)")


def cmd_reference(args):
    ref, tree, info = load_reference(args)
    if args.json:
        json.dump({"reference": ref.stats, "params": ref.params, "cache": info}, sys.stdout, indent=1)
        print()
        return
    print(reference_summary(ref, info))
    print(json.dumps(ref.stats))
    if info.get("cache"):
        print(f"cache: {info['cache']}")


# --------------------------------------------------------------------------


def add_reference_args(p):
    """The options that define the reference (shared with baselines.py, so
    both score against the same one)."""
    p.add_argument("--roots", nargs="+", metavar="SUBDIR", help="restrict the reference to these subdirectories of TREE")
    p.add_argument("--shingle", type=int, default=4, help="words per shingle (default 4)")
    p.add_argument("--ref-similarity", type=float, default=0.5, help="reference resemblance threshold (0.5)")
    p.add_argument("--ref-containment", type=float, default=0.8, help="reference containment threshold (0.8)")
    p.add_argument("--max-df", type=int, default=1000, help="skip shingles in more contents than this when probing (1000)")
    p.add_argument("--cache", help="reference cache file (default TREE.simd-reference-<params>.json)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the reference cache")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="score.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, db=True):
        p.add_argument("--tree", required=True, help="the indexed tree (reference universe; paths relative to it)")
        if db:
            p.add_argument("--db", required=True, help="simd index directory (built by `simd --db IDX index TREE`)")
            p.add_argument("--simd", help="simd binary (default: $SIMD, ../target/release/simd, `simd`)")
            p.add_argument("--min-bytes", type=int, help="passed to simd")
            p.add_argument("--min-similarity", type=float, help="passed to simd")
            p.add_argument("--min-containment", type=float, help="passed to simd")
            p.add_argument("--max-degree", type=int, help="passed to simd")
        add_reference_args(p)
        p.add_argument("--seed", type=int, default=1, help="seed for sampling (default 1)")
        p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    p = sub.add_parser("reference", help="compute (or load) the exact reference and print its statistics",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p, db=False)
    p.set_defaults(func=cmd_reference)

    p = sub.add_parser("report", help="score `simd report` (identical and similar pairs)")
    common(p)
    p.add_argument("--truth", help="DIR/truth.json from gen_corpus.py: also recall on its labelled pairs")
    p.add_argument("--sweep", action="store_true", help="run report over the threshold grid, print F1 best first")
    p.add_argument("--grid-sim", default="0.2,0.25,0.3,0.35,0.4,0.5", help="sweep: --min-similarity values")
    p.add_argument("--grid-cont", default="0.5,0.6,0.7,0.8", help="sweep: --min-containment values")
    p.add_argument("--grid-bytes", default="0,200,500,1000", help="sweep: --min-bytes values")
    p.add_argument("--top", type=int, default=0, help="sweep: print only the best N rows (default all)")
    p.add_argument("--examples", type=int, default=3, help="missed pairs to show (default 3)")
    p.add_argument("--fp-sample", type=int, default=3000, help="false positives to re-measure at most (3000)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("similar", help="score `simd similar FILE` over (a sample of) the files")
    common(p)
    p.add_argument("--sample", type=int, default=0, help="query N files drawn with --seed (default 0: all)")
    p.add_argument("--limit", type=int, default=1000, help="passed to simd similar --limit (default 1000; 0: simd's default)")
    p.add_argument("--jobs", type=int, default=1, help="simd processes at once (default 1)")
    p.set_defaults(func=cmd_similar)

    args = ap.parse_args(argv)
    if args.shingle < 1:
        die("--shingle must be >= 1")
    args.func(args)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
