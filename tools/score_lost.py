#!/usr/bin/env python3
"""Score `simd lost` (lost-and-found): accuracy and query time.

Runs the release binary as a subprocess, one query at a time, and times each
query from process start to exit (nothing is subtracted: process start-up
and opening the index are part of the figure).  Python 3.11, standard
library only.  Every mode builds its own scratch directory (--work), which
must not exist or be empty (so nothing outside it is ever modified), and
indexes it there with `simd --db WORK/idx index ...`.

Modes
-----
  score_lost.py corpus --work D --seed S [--scale F]
      Generated corpus with a known truth.  Runs
          tools/gen_corpus.py generate --out D --seed S --scale F
          simd --db D/idx index D/tree
          tools/gen_corpus.py mutate --out D --seed S
          simd --db D/idx index D/tree
      then asks `simd lost <old path>` for every entry of the `changes` list
      of D/truth-mutate.json.  If D/truth-mutate.json and D/idx exist
      already, the set-up is skipped and only the scoring runs.
        * entries with a `new` path (moved, moved_edited, copied_then_deleted):
          top-1 = the first candidate is `new`; top-3 = `new` is among the
          first three.  Broken down by kind, by the lost file's size
          (< 3 KB, 3-10 KB, >= 10 KB) and, for moved_edited, by nominal edit
          rate (<= 0.05, 0.1-0.2, >= 0.35), and by whether a live file
          other than `new` still holds the old bytes (then an "identical"
          answer cannot tell the moved file from the other copies).  "content" variants count a candidate as right when
          its bytes equal those of `new` now, or the old bytes (md5_old) --
          an identical copy elsewhere holds the same content.  Broken down by kind.
        * `deleted` entries (no identical copy survives): the right answer
          is no candidate of kind identical/moved, ideally no candidate at
          all.  Reported: how often the answer is empty, how often it offers
          identical/moved (wrong), how often it offers something with
          score >= 0.5 (and how many of those are files of the same family
          in truth.json, i.e. real edited relatives, or files that carry
          the same boilerplate template).
        * every `dir_moves` entry: `simd lost <old dir>` is timed, and
          scored on whether destinations[0] is the new directory, plus
          top-1 of the files inside the directory answer.

  score_lost.py move --src TREE --dir NAME --work W [--sample 50]
      Speed on a large index.  Copies TREE to W/tree (cp -a; TREE itself is
      never touched), indexes W/tree, renames W/tree/NAME to
      W/tree/renamed-NAME, indexes again, then times `simd lost` on
      --sample old file paths from NAME (seeded sample), on the old
      directory NAME itself, and on the old path of the subdirectory of
      NAME whose file count is nearest --subdir-files (default 1000), and
      of every --subdir REL given; each directory query runs --dir-repeat
      times (default 3).
      Top-1 is reported two ways: "moved path" (the first candidate is the
      renamed file) and "same content" (the first candidate has the same
      bytes; identical copies in other directories are right content-wise).

  score_lost.py versions --a DIR_A --b DIR_B --work X
      Real tree changes between two releases.  Copies DIR_A to
      X/tree/<name> (name = --name, default the basename of DIR_A with a
      trailing "-<version>" removed, so paths line up), indexes X/tree,
      replaces X/tree/<name> with a copy of DIR_B, indexes again, then asks
      `simd lost` for every file path of A that is not in B.  The reference
      does not depend on simd: a file is the SET of its lines (split on
      "\\n", trailing whitespace removed, blank lines dropped); the reference
      new home of an A file is the B file with the highest line-set Jaccard
      |A & B| / |A | B|, if that is >= --min-jaccard (0.5), else the file
      has no reasonable new home.  Ties at the maximum are all accepted.
      Candidates are found exactly with an inverted index over B's lines and
      prefix filtering (any B file with J >= t shares one of the rarest
      |A| - ceil(t|A|) + 1 lines of A).  Empty files (no lines) and binary
      files (a NUL byte in the first 8 KiB: lines mean nothing there) are
      listed apart.  Both indexes run with --no-ignore, as the reference
      takes every file (sdists ship files their .gitignore names).  A
      second reference, independent of the first: git's own rename
      detection (`git diff -M50% -l0` between a commit of A and one of B:
      exact renames, then same-name files, then the most similar), which
      is what a developer reading the history sees as "moved".  Scored:
      top-1 (first candidate is a reference home) on the files with a
      home, and for the others what simd answers; top-1 and top-3 on the
      files git sees renamed (first candidate is git's new path).

Common options: --simd BIN (default: $SIMD_BIN, else target/release/simd of
this repository -- copy it elsewhere first if it may be rebuilt while you
measure), --limit N (passed to `simd lost`, default 5), --json (one JSON
object on stdout instead of the text report), --clean (delete --work at the
end).

Paths: simd answers with absolute canonical paths; the script canonicalises
--work with realpath and maps answers back by stripping the tree prefix.
Non-UTF-8 paths are passed to simd as raw bytes and read back from
"path_b64".
"""

import argparse
import base64
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# --------------------------------------------------------------------------
# Helpers


def die(msg, code=2):
    print(f"score_lost.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fsb(p) -> bytes:
    return os.fsencode(p)


def show(p: bytes) -> str:
    return p.decode("utf-8", "backslashreplace")


def json_path(obj) -> bytes | None:
    """The path of a simd JSON object ("path" or "path_b64") as bytes."""
    if "path" in obj:
        return obj["path"].encode("utf-8")
    if "path_b64" in obj:
        return base64.b64decode(obj["path_b64"])
    return None


def rel(p: bytes | None, root: bytes) -> bytes | None:
    """p relative to root (no leading slash), or None if outside."""
    if p is None:
        return None
    if p == root:
        return b""
    if p.startswith(root + b"/"):
        return p[len(root) + 1:]
    return None


def md5_file(p: bytes) -> str | None:
    try:
        with open(p, "rb") as f:
            return hashlib.md5(f.read()).hexdigest()
    except OSError:
        return None


def stats_ms(ts):
    """median, p95, max (ms) of a list of seconds."""
    if not ts:
        return {"n": 0, "median_ms": None, "p95_ms": None, "max_ms": None}
    s = sorted(ts)
    p95 = s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)]
    return {"n": len(s), "median_ms": round(1000 * statistics.median(s), 1),
            "p95_ms": round(1000 * p95, 1), "max_ms": round(1000 * s[-1], 1)}


def fmt_stats(st):
    if not st["n"]:
        return "n=0"
    return (f"n={st['n']}  median {st['median_ms']:.1f} ms  p95 {st['p95_ms']:.1f} ms  "
            f"max {st['max_ms']:.1f} ms")


def pct(a, b):
    return f"{a}/{b} ({100.0 * a / b:.1f} %)" if b else f"{a}/0"


def ratio(a, b):
    return round(a / b, 4) if b else None


class Simd:
    def __init__(self, binary, db, limit):
        self.bin = fsb(binary)
        self.db = fsb(db)
        self.limit = limit
        self.commands = []

    def index(self, root, extra=()):
        cmd = [self.bin, b"--db", self.db, b"-q", b"index", *map(fsb, extra), fsb(root)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        self.commands.append(" ".join(show(c) for c in cmd))
        if r.returncode != 0:
            die(f"index failed ({r.returncode}): {r.stderr.decode(errors='replace')}", 1)
        return dt

    def lost(self, path: bytes):
        """(answer JSON, seconds)."""
        cmd = [self.bin, b"--db", self.db, b"--format", b"json", b"lost",
               b"--limit", str(self.limit).encode(), path]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            die(f"lost {show(path)!r} failed ({r.returncode}): "
                f"{r.stderr.decode(errors='replace')}", 1)
        try:
            return json.loads(r.stdout), dt
        except json.JSONDecodeError as e:
            die(f"lost {show(path)!r}: bad JSON ({e}): {r.stdout[:200]!r}", 1)


def default_simd():
    return os.environ.get("SIMD_BIN") or os.path.join(REPO, "target", "release", "simd")


def prepare_work(work):
    """Creates --work (must not exist or be empty); returns its realpath."""
    if os.path.exists(work) and os.listdir(work):
        die(f"--work {work} exists and is not empty")
    os.makedirs(work, exist_ok=True)
    return os.path.realpath(work)


def run(cmd):
    """Runs a set-up command; its output goes to stderr (stdout is the report)."""
    r = subprocess.run(cmd, stdout=sys.stderr)
    if r.returncode != 0:
        die(f"command failed ({r.returncode}): {' '.join(map(str, cmd))}", 1)


def first_candidates(ans):
    """Candidates of a single-file answer (state lost), else []."""
    files = ans.get("files") or []
    return files[0].get("candidates", []) if files else []


def dir_file_scores(ans, expected, root):
    """Top-1 of the files in a directory answer against expected {old_rel: new_rel}."""
    got = {}
    for f in ans.get("files", []):
        old = rel(json_path(f), root)
        c = f.get("candidates") or []
        got[old] = rel(json_path(c[0]), root) if c else None
    right = sum(1 for o, n in expected.items() if got.get(o) == n)
    return right, len(expected), len(ans.get("files", []))


# --------------------------------------------------------------------------
# corpus

SIZE_ORDER = {"< 3 KB": 0, "3-10 KB": 1, ">= 10 KB": 2}
RATE_ORDER = {"<= 0.05": 0, "0.1-0.2": 1, ">= 0.35": 2}


def rate_band(r):
    """Band of a nominal edit rate."""
    return "<= 0.05" if r <= 0.051 else ("0.1-0.2" if r < 0.3 else ">= 0.35")


def size_band(n):
    """Size band of the lost file (KB = 1000 bytes)."""
    return "< 3 KB" if n < 3000 else ("3-10 KB" if n < 10000 else ">= 10 KB")


def cmd_corpus(a):
    sys.path.insert(0, HERE)
    from gen_corpus import file_record_path, path_from_json  # noqa: E402

    gen = [sys.executable, os.path.join(HERE, "gen_corpus.py")]
    work = a.work
    setup_cmds = []
    if os.path.exists(os.path.join(work, "truth-mutate.json")) and os.path.isdir(
            os.path.join(work, "idx")):
        work = os.path.realpath(work)
        simd = Simd(a.simd, os.path.join(work, "idx"), a.limit)
        tree = os.path.join(work, "tree")
        log(f"reusing {work} (set-up skipped)")
        t_index = None
    else:
        work = prepare_work(work)
        simd = Simd(a.simd, os.path.join(work, "idx"), a.limit)
        tree = os.path.join(work, "tree")
        c = gen + ["generate", "--out", work, "--seed", str(a.seed), "--scale", str(a.scale)]
        log("$ " + " ".join(c))
        setup_cmds.append(" ".join(c[1:]))
        run(c)
        log("indexing (1/2)")
        t1 = simd.index(tree)
        setup_cmds.append(simd.commands[-1])
        c = gen + ["mutate", "--out", work, "--seed", str(a.seed)]
        log("$ " + " ".join(c))
        setup_cmds.append(" ".join(c[1:]))
        run(c)
        log("indexing (2/2)")
        t2 = simd.index(tree)
        setup_cmds.append(simd.commands[-1])
        t_index = [round(t1, 2), round(t2, 2)]
    root = fsb(os.path.realpath(tree))
    with open(os.path.join(work, "truth.json"), encoding="utf-8") as f:
        truth = json.load(f)
    with open(os.path.join(work, "truth-mutate.json"), encoding="utf-8") as f:
        mut = json.load(f)
    family = {file_record_path(r): r.get("family") for r in truth["files"]}
    size_old = {file_record_path(r): r["size"] for r in truth["files"]}
    templates = {file_record_path(r): set(r.get("templates") or ()) for r in truth["files"]}
    md5_now = {file_record_path(r): r["md5"] for r in mut["files"]}
    md5_count = {}
    for m in md5_now.values():
        md5_count[m] = md5_count.get(m, 0) + 1
    # live path -> path before mutation (for the family of a candidate)
    origin = {}
    for ch in mut["changes"]:
        if ch.get("new") is not None:
            origin[path_from_json(ch["new"])] = path_from_json(ch["old"])

    groups = {}  # (category, label, band order) -> counts
    times = []
    states = {}
    deleted = {"n": 0, "empty": 0, "identical_or_moved": 0, "score_ge_05": 0,
               "score_ge_05_same_family": 0, "score_ge_05_shared_template": 0, "top_scores": []}
    misses = []
    changes = mut["changes"]
    log(f"querying {len(changes)} changed paths")
    for i, ch in enumerate(changes):
        old = path_from_json(ch["old"])
        ans, dt = simd.lost(root + b"/" + old)
        times.append(dt)
        states[ans.get("state")] = states.get(ans.get("state"), 0) + 1
        cands = first_candidates(ans)
        crel = [rel(json_path(c), root) for c in cands]
        kind = ch["kind"]
        if ch.get("new") is None:
            d = deleted
            d["n"] += 1
            if not cands:
                d["empty"] += 1
            if any(c["kind"] in ("identical", "moved") for c in cands):
                d["identical_or_moved"] += 1
                misses.append({"kind": kind, "old": show(old), "top": show(crel[0] or b"?"),
                               "top_kind": cands[0]["kind"]})
            strong = [(c, p) for c, p in zip(cands, crel) if c["score"] >= 0.5]
            if strong:
                d["score_ge_05"] += 1
                fam = family.get(old)
                if fam is not None and any(
                        p is not None and family.get(origin.get(p, p)) == fam for _, p in strong):
                    d["score_ge_05_same_family"] += 1
                tpl = templates.get(old, set())
                if tpl and any(p is not None and tpl & templates.get(origin.get(p, p), set())
                               for _, p in strong):
                    d["score_ge_05_shared_template"] += 1
            if cands:
                d["top_scores"].append(round(cands[0]["score"], 3))
            continue
        new = path_from_json(ch["new"])
        band = size_band(size_old.get(old, 0))
        keys = [(0, kind, 0), (1, "all with a new path", 0), (2, "size " + band, SIZE_ORDER[band]),
                (3, f"{kind}, {band}", SIZE_ORDER[band])]
        if ch.get("md5_old"):
            copies = md5_count.get(ch["md5_old"], 0) - (md5_now.get(new) == ch["md5_old"])
            keys.append((5, f"{kind}, " + ("old content also elsewhere" if copies > 0
                                           else "old content nowhere else"), int(copies > 0)))
        if ch.get("edit_rate") is not None:
            rb = rate_band(ch["edit_rate"])
            keys.append((4, f"{kind}, edit {rb}", RATE_ORDER[rb]))
        # right content-wise: the candidate holds the new bytes, or the old
        # bytes intact (an identical copy of the lost content)
        want = {m for m in (md5_now.get(new), ch.get("md5_old")) if m}
        same = [p is not None and (p == new or md5_now.get(p) in want) for p in crel]
        for order in keys:
            k = groups.setdefault(order, {"n": 0, "top1": 0, "top3": 0, "top1_content": 0,
                                          "top3_content": 0, "empty": 0, "top1_kinds": {}})
            k["n"] += 1
            k["top1"] += bool(crel) and crel[0] == new
            k["top3"] += new in crel[:3]
            k["top1_content"] += bool(same) and same[0]
            k["top3_content"] += any(same[:3])
            if not cands:
                k["empty"] += 1
            else:
                tk = cands[0]["kind"]
                k["top1_kinds"][tk] = k["top1_kinds"].get(tk, 0) + 1
        if not (crel and crel[0] == new):
            misses.append({"kind": kind, "old": show(old), "new": show(new),
                           "top": show(crel[0]) if crel and crel[0] else None,
                           "top_kind": cands[0]["kind"] if cands else None,
                           "top_score": round(cands[0]["score"], 3) if cands else None,
                           "new_rank": (crel.index(new) + 1) if new in crel else None,
                           "edit_rate": ch.get("edit_rate")})
        if (i + 1) % 50 == 0:
            log(f"  {i + 1}/{len(changes)}")

    # directory moves
    dirs = []
    for dm in mut.get("dir_moves", []):
        old_d, new_d = path_from_json(dm["old"]), path_from_json(dm["new"])
        ans, dt = simd.lost(root + b"/" + old_d)
        dest = ans.get("destinations") or []
        d0 = rel(json_path(dest[0]), root) if dest else None
        expected = {}
        for ch in changes:
            o = path_from_json(ch["old"])
            if o.startswith(old_d + b"/") and ch.get("new") is not None:
                expected[o] = path_from_json(ch["new"])
        right, n_exp, n_ans = dir_file_scores(ans, expected, root)
        dirs.append({"old": show(old_d), "new": show(new_d), "files": dm["files"],
                     "edited": dm["edited"], "state": ans.get("state"),
                     "ms": round(1000 * dt, 1), "destinations0": show(d0) if d0 is not None else None,
                     "destinations0_files": dest[0]["files"] if dest else None,
                     "dest0_is_new": d0 == new_d,
                     "dest0_under_new": d0 is not None and (d0 == new_d or d0.startswith(new_d + b"/")),
                     "files_in_answer": n_ans, "file_top1": right, "file_expected": n_exp})

    ordered = sorted(groups.items(), key=lambda kv: (
        kv[0][0], kv[0][1].split(",")[0] if kv[0][0] >= 3 else "", kv[0][2], kv[0][1]))
    table = [dict(label=o[1], **v) for o, v in ordered]
    out = {
        "mode": "corpus", "work": work, "seed": a.seed, "scale": a.scale,
        "simd": a.simd, "limit": a.limit, "setup_commands": setup_cmds,
        "index_seconds": t_index, "changes": len(changes), "states": states,
        "groups": table,
        "deleted": {k: v for k, v in deleted.items() if k != "top_scores"},
        "deleted_top_scores": sorted(deleted["top_scores"], reverse=True),
        "query_time": stats_ms(times), "dir_moves": dirs, "misses": misses,
    }
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"corpus {work}: seed {a.seed}, scale {a.scale}, {len(changes)} changed paths, "
              f"states {states}")
        if t_index:
            print(f"index runs: {t_index[0]} s, {t_index[1]} s")
        print(f"query time (file queries): {fmt_stats(out['query_time'])}")
        print(f"\n{'kind':<46}{'n':>5}{'top-1':>16}{'top-3':>16}{'top-1 content':>18}"
              f"{'top-3 content':>18}{'empty':>7}  top-1 kinds")
        for k in table:
            name = k["label"]
            def p_(x):
                return f"{x} ({100.0 * x / k['n']:.1f}%)" if k["n"] else "-"
            print(f"{name:<46}{k['n']:>5}{p_(k['top1']):>16}{p_(k['top3']):>16}"
                  f"{p_(k['top1_content']):>18}{p_(k['top3_content']):>18}{k['empty']:>7}"
                  f"  {k.get('top1_kinds', '')}")
        d = deleted
        print(f"\ndeleted (no surviving copy): {d['n']}")
        print(f"  no candidate at all:            {pct(d['empty'], d['n'])}")
        print(f"  offers identical/moved (wrong): {pct(d['identical_or_moved'], d['n'])}")
        print(f"  offers score >= 0.5:            {pct(d['score_ge_05'], d['n'])}"
              f"  (of which {d['score_ge_05_same_family']} to a file of the same family, "
              f"{d['score_ge_05_shared_template']} to a file sharing a template with it)")
        print(f"  top candidate scores:           {out['deleted_top_scores']}")
        for dm in dirs:
            print(f"\ndirectory move {dm['old']!r} -> {dm['new']!r} ({dm['files']} files, "
                  f"{dm['edited']} edited): state {dm['state']}, {dm['ms']} ms")
            print(f"  destinations[0] = {dm['destinations0']!r} ({dm['destinations0_files']} files): "
                  f"is new dir {dm['dest0_is_new']}, under new dir {dm['dest0_under_new']}")
            print(f"  files in the answer {dm['files_in_answer']}, top-1 right "
                  f"{pct(dm['file_top1'], dm['file_expected'])}")
        if misses:
            print(f"\nmisses ({len(misses)}; top-1 not the truth's new path, or deleted with "
                  f"identical/moved offered):")
            for m in misses[:a.examples]:
                print("  " + json.dumps(m, ensure_ascii=False))
    if a.clean:
        shutil.rmtree(work)


# --------------------------------------------------------------------------
# move


def files_under(d: bytes):
    out = []
    for dp, dn, fn in os.walk(d):
        for n in fn:
            p = os.path.join(dp, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(p)
    return sorted(out)


def cmd_move(a):
    src = fsb(os.path.realpath(a.src))
    if not os.path.isdir(os.path.join(src, fsb(a.dir))):
        die(f"{a.src}/{a.dir} is not a directory")
    work = fsb(prepare_work(a.work))
    tree = work + b"/tree"
    simd = Simd(a.simd, work + b"/idx", a.limit)
    log(f"copying {show(src)} to {show(tree)}")
    t0 = time.perf_counter()
    run([b"cp", b"-a", src, tree])
    t_copy = time.perf_counter() - t0
    log("indexing (1/2)")
    t1 = simd.index(tree)
    name = fsb(a.dir)
    old_d = tree + b"/" + name
    new_d = tree + b"/renamed-" + name
    os.rename(old_d, new_d)
    log("indexing (2/2)")
    t2 = simd.index(tree)

    moved = [fsb(p) for p in files_under(new_d)]
    rels = [rel(p, new_d) for p in moved]
    rng = random.Random(a.seed)
    sample = sorted(rng.sample(rels, min(a.sample, len(rels))))
    times, top1_path, top1_content, top_kinds, empty = [], 0, 0, {}, 0
    detail = []
    for r in sample:
        ans, dt = simd.lost(old_d + b"/" + r)
        times.append(dt)
        c = first_candidates(ans)
        want = new_d + b"/" + r
        top = json_path(c[0]) if c else None
        if not c:
            empty += 1
        else:
            top_kinds[c[0]["kind"]] = top_kinds.get(c[0]["kind"], 0) + 1
        ok_p = top == want
        ok_c = top is not None and (ok_p or md5_file(top) == md5_file(want))
        top1_path += ok_p
        top1_content += ok_c
        detail.append({"old": show(r), "ms": round(1000 * dt, 1), "top": show(top) if top else None,
                       "top_kind": c[0]["kind"] if c else None, "moved_path": ok_p,
                       "same_content": ok_c})

    # subdirectory with a file count nearest --subdir-files
    counts = {}
    for p in moved:
        d = os.path.dirname(p)
        while d != new_d and d.startswith(new_d + b"/"):
            counts[d] = counts.get(d, 0) + 1
            d = os.path.dirname(d)
    sub = min(counts, key=lambda d: (abs(counts[d] - a.subdir_files), d)) if counts else None

    def dir_query(old, new, nfiles):
        runs = []
        for _ in range(a.dir_repeat):
            ans, dt = simd.lost(old)
            runs.append(round(1000 * dt, 1))
        dest = ans.get("destinations") or []
        d0 = json_path(dest[0]) if dest else None
        expected = {rel(p, new): rel(p, new) for p in moved if p.startswith(new + b"/")}
        # expected maps old-relative to new-relative (same relative path)
        got_right = 0
        for f in ans.get("files", []):
            o = rel(json_path(f), old)
            cs = f.get("candidates") or []
            if cs and o is not None and json_path(cs[0]) == new + b"/" + o:
                got_right += 1
        empties = sum(1 for p in moved if p.startswith(new + b"/") and os.path.getsize(p) == 0)
        return {"old": show(old), "new": show(new), "files": nfiles, "empty_files": empties,
                "ms_runs": runs,
                "state": ans.get("state"), "files_in_answer": len(ans.get("files", [])),
                "file_top1_moved_path": got_right, "file_expected": len(expected),
                "destinations0": show(d0) if d0 else None,
                "destinations0_files": dest[0]["files"] if dest else None,
                "dest0_under_new": d0 is not None and (d0 == new or d0.startswith(new + b"/"))}

    log("directory queries")
    dq = [dir_query(old_d, new_d, len(moved))]
    subs = [sub] if sub is not None else []
    for extra in a.subdir or ():
        d = new_d + b"/" + fsb(extra).strip(b"/")
        if d not in counts:
            die(f"--subdir {extra}: no files under it")
        if d not in subs:
            subs.append(d)
    for d in subs:
        dq.append(dir_query(old_d + b"/" + rel(d, new_d), d, counts[d]))
    with os.scandir(tree) as it:
        n_index = sum(len(files_under(e.path)) if e.is_dir() else 1 for e in it)
    out = {"mode": "move", "src": show(src), "work": show(work), "dir": a.dir,
           "files_in_tree": n_index, "files_moved": len(moved), "copy_seconds": round(t_copy, 1),
           "index_seconds": [round(t1, 1), round(t2, 1)], "commands": simd.commands,
           "file_queries": {"time": stats_ms(times), "n": len(sample), "top1_moved_path": top1_path,
                            "top1_same_content": top1_content, "empty": empty,
                            "top1_kinds": top_kinds},
           "dir_queries": dq, "detail": detail}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        fq = out["file_queries"]
        print(f"tree {show(tree)}: {n_index} files; moved {a.dir} -> renamed-{a.dir} "
              f"({len(moved)} files)")
        print(f"copy {out['copy_seconds']} s; index runs {out['index_seconds'][0]} s, "
              f"{out['index_seconds'][1]} s")
        print(f"file queries: {fmt_stats(fq['time'])}")
        print(f"  top-1 is the moved path:   {pct(fq['top1_moved_path'], fq['n'])}")
        print(f"  top-1 has the same content: {pct(fq['top1_same_content'], fq['n'])}")
        print(f"  top-1 kinds {top_kinds}, empty {empty}")
        for d in dq:
            print(f"directory {d['old']} ({d['files']} files, {d['empty_files']} empty): "
                  f"{d['ms_runs']} ms, state {d['state']}, "
                  f"{d['files_in_answer']} files in the answer")
            print(f"  file top-1 is the moved path: {pct(d['file_top1_moved_path'], d['file_expected'])}; "
                  f"destinations[0] = {d['destinations0']} ({d['destinations0_files']} files), "
                  f"under new dir: {d['dest0_under_new']}")
        bad = [x for x in detail if not x["moved_path"]]
        for x in bad[:a.examples]:
            print("  not the moved path: " + json.dumps(x))
    if a.clean:
        shutil.rmtree(work)


# --------------------------------------------------------------------------
# versions


def is_binary(p: bytes) -> bool:
    """A NUL byte in the first 8 KiB, as git and grep decide: lines mean
    nothing there (two PNG files share "lines" of IHDR bytes)."""
    with open(p, "rb") as f:
        return b"\0" in f.read(8192)


def line_set(p: bytes):
    with open(p, "rb") as f:
        data = f.read()
    s = set()
    for ln in data.split(b"\n"):
        ln = ln.rstrip()
        if ln:
            s.add(ln)
    return s


def jaccard(x, y):
    if not x and not y:
        return 1.0
    i = len(x & y)
    return i / (len(x) + len(y) - i)


def strip_version(name: str) -> str:
    head, sep, tail = name.rpartition("-")
    if sep and tail[:1].isdigit():
        return head
    return name


def git_renames(A: bytes, B: bytes, name: bytes, scratch: bytes):
    """{old path: new path} for the files of A that git's rename detection
    (`git diff -M`, similarity >= 50 %, no rename limit) sees moved in B:
    exact renames first, then files keeping their name, then the most
    similar -- what a developer reading the history is shown. Paths are
    relative to the release top."""
    repo = scratch + b"/git"
    os.makedirs(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="s", GIT_AUTHOR_EMAIL="s@s", GIT_COMMITTER_NAME="s",
               GIT_COMMITTER_EMAIL="s@s", GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_SYSTEM="/dev/null")
    def git(*args, out=False):
        r = subprocess.run([b"git", b"-C", repo, *args], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if r.returncode != 0:
            die(f"git {args!r} failed: {r.stderr.decode(errors='replace')}", 1)
        return r.stdout
    git(b"init", b"-q")
    for i, src in enumerate((A, B)):
        if i:
            shutil.rmtree(repo + b"/" + name)
        run([b"cp", b"-a", src, repo + b"/" + name])
        # Every file, ignored or not, as the reference takes every file.
        git(b"add", b"-A", b"-f", name)
        git(b"commit", b"-q", b"--allow-empty", b"-m", str(i).encode())
    diff = git(b"diff", b"-z", b"--name-status", b"-M50%", b"-l0", b"HEAD~1", b"HEAD")
    parts = diff.split(b"\0")
    renames, i = {}, 0
    prefix = name + b"/"
    while i < len(parts) and parts[i]:
        status = parts[i]
        if status.startswith(b"R"):
            old, new = parts[i + 1], parts[i + 2]
            renames[old[len(prefix):]] = new[len(prefix):]
            i += 3
        elif status.startswith(b"C"):
            i += 3
        else:
            i += 2
    shutil.rmtree(repo)
    return renames


def cmd_versions(a):
    A = fsb(os.path.realpath(a.a))
    B = fsb(os.path.realpath(a.b))
    for d in (A, B):
        if not os.path.isdir(d):
            die(f"{show(d)} is not a directory")
    name = fsb(a.name or strip_version(os.path.basename(os.fsdecode(A))))
    work = fsb(prepare_work(a.work))
    tree = work + b"/tree"
    top = tree + b"/" + name
    os.makedirs(tree)
    simd = Simd(a.simd, work + b"/idx", a.limit)
    run([b"cp", b"-a", A, top])
    # Every file, as the reference takes every file: sdists ship files
    # their own .gitignore names (egg-info, generated _version.py).
    log("indexing A")
    t1 = simd.index(tree, ["--no-ignore"])
    shutil.rmtree(top)
    run([b"cp", b"-a", B, top])
    log("indexing B")
    t2 = simd.index(tree, ["--no-ignore"])

    a_files = {rel(fsb(p), A) for p in files_under(A)}
    b_files = {rel(fsb(p), B) for p in files_under(B)}
    gone = sorted(a_files - b_files)
    log(f"{len(gone)} paths of A not in B; building the references")
    moved_git = git_renames(A, B, name, work)

    # reference: line sets of B with an inverted index
    b_list = sorted(p for p in b_files if not is_binary(B + b"/" + p))
    b_sets = [line_set(B + b"/" + p) for p in b_list]
    post = {}
    for i, s in enumerate(b_sets):
        for ln in s:
            post.setdefault(ln, []).append(i)
    ref = {}
    for g in gone:
        if is_binary(A + b"/" + g):
            ref[g] = {"empty": False, "binary": True, "homes": [], "best": None}
            continue
        sa = line_set(A + b"/" + g)
        if not sa:
            ref[g] = {"empty": True, "homes": [], "best": None}
            continue
        order = sorted(sa, key=lambda ln: (len(post.get(ln, ())), ln))
        k = len(sa) - math.ceil(a.min_jaccard * len(sa)) + 1
        cand = set()
        for ln in order[:k]:
            cand.update(post.get(ln, ()))
        scored = [(jaccard(sa, b_sets[i]), b_list[i]) for i in cand]
        best = max((j for j, _ in scored), default=0.0)
        homes = sorted(p for j, p in scored if best >= a.min_jaccard and j >= best - 1e-12)
        ref[g] = {"empty": False, "homes": homes, "best": best, "lines": sa}

    rows, times = [], []
    for g in gone:
        ans, dt = simd.lost(top + b"/" + g)
        times.append(dt)
        c = first_candidates(ans)
        crel = [rel(json_path(x), top) for x in c]
        r = ref[g]
        row = {"old": show(g), "state": ans.get("state"), "ms": round(1000 * dt, 1),
               "empty_file": r["empty"], "binary": r.get("binary", False), "ref_homes": [show(h) for h in r["homes"]],
               "ref_best_j": round(r["best"], 4) if r["homes"] else None,
               "top": show(crel[0]) if crel and crel[0] is not None else None,
               "top_kind": c[0]["kind"] if c else None,
               "top_score": round(c[0]["score"], 4) if c else None,
               "n_candidates": len(c)}
        if c and crel[0] is not None and "lines" in r:
            row["top_j"] = round(jaccard(r["lines"], line_set(B + b"/" + crel[0])), 4)
        # An empty file's "move" is a guess by git as by anyone (every empty
        # file is identical): listed apart, as in the line-set reference.
        g_home = None if r["empty"] else moved_git.get(g)
        row["git_home"] = show(g_home) if g_home else None
        row["git_top1"] = bool(g_home) and bool(crel) and crel[0] == g_home
        row["git_top3"] = bool(g_home) and g_home in crel[:3]
        row["top1"] = bool(r["homes"]) and bool(crel) and crel[0] in r["homes"]
        row["top3"] = bool(r["homes"]) and any(p in r["homes"] for p in crel[:3])
        rows.append(row)

    with_home = [x for x in rows if x["ref_homes"]]
    no_home = [x for x in rows if not x["ref_homes"] and not x["empty_file"] and not x["binary"]]
    empties = [x for x in rows if x["empty_file"]]
    binaries = [x for x in rows if x["binary"]]
    out = {"mode": "versions", "a": show(A), "b": show(B), "work": show(work),
           "files_a": len(a_files), "files_b": len(b_files), "gone": len(gone),
           "index_seconds": [round(t1, 1), round(t2, 1)], "commands": simd.commands,
           "min_jaccard": a.min_jaccard, "query_time": stats_ms(times),
           "with_home": len(with_home), "top1": sum(x["top1"] for x in with_home),
           "top3": sum(x["top3"] for x in with_home),
           "top1_rate": ratio(sum(x["top1"] for x in with_home), len(with_home)),
           "no_home": len(no_home), "no_home_empty_answer": sum(1 for x in no_home if not x["n_candidates"]),
           "empty_files": len(empties), "binary_files": len(binaries),
           "git_renamed": sum(1 for x in rows if x["git_home"]),
           "git_top1": sum(x["git_top1"] for x in rows), "git_top3": sum(x["git_top3"] for x in rows),
           "rows": rows}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{show(A)} -> {show(B)}: {len(a_files)} -> {len(b_files)} files, "
              f"{len(gone)} paths of A gone in B")
        print(f"index runs {out['index_seconds'][0]} s, {out['index_seconds'][1]} s; "
              f"query time {fmt_stats(out['query_time'])}")
        print(f"with a reference home (line-set Jaccard >= {a.min_jaccard}): {len(with_home)}; "
              f"top-1 {pct(out['top1'], len(with_home))}, top-3 {pct(out['top3'], len(with_home))}")
        print(f"no reasonable new home: {len(no_home)} (simd answers nothing for "
              f"{out['no_home_empty_answer']}); empty files: {len(empties)}; "
              f"binary files (no line set): {len(binaries)}")
        print(f"renamed by git's rename detection (-M50%): {out['git_renamed']}; "
              f"top-1 {pct(out['git_top1'], out['git_renamed'])}, "
              f"top-3 {pct(out['git_top3'], out['git_renamed'])}")
        for x in rows:
            if x["git_home"] and not x["git_top1"]:
                print(f"  git XX {x['old']} -> {x['git_home']}  simd: {x['top_kind']} {x['top']} "
                      f"score={x['top_score']}")
        print("  (ok: top-1 is a reference home; XX: it is not; --: no reference home)")
        for x in rows:
            mark = ("ok " if x["top1"] else "XX ") if x["ref_homes"] else (
                "(empty) " if x["empty_file"] else "-- ")
            homes = x["ref_homes"][:2] + (["..."] if len(x["ref_homes"]) > 2 else [])
            print(f"  {mark}{x['old']}  ref {homes} J={x['ref_best_j']}  simd: "
                  f"{x['top_kind']} {x['top']} score={x['top_score']} J={x.get('top_j')}  "
                  f"{x['ms']} ms")
    if a.clean:
        shutil.rmtree(work)


# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)

    def common(p):
        p.add_argument("--work", required=True, metavar="DIR",
                       help="scratch directory (created; must not exist or be empty)")
        p.add_argument("--simd", default=default_simd(), metavar="BIN",
                       help="simd binary (default: $SIMD_BIN or target/release/simd)")
        p.add_argument("--limit", type=int, default=5, metavar="N",
                       help="candidates per file asked of simd lost (default 5)")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--clean", action="store_true", help="delete --work at the end")
        p.add_argument("--examples", type=int, default=20, metavar="N",
                       help="misses to list (default 20)")

    c = sub.add_parser("corpus", help="generated corpus with truth (gen_corpus.py)",
                       description="Generated corpus; see the module docstring.")
    common(c)
    c.add_argument("--seed", type=int, required=True, metavar="S")
    c.add_argument("--scale", type=float, default=1.0, metavar="F")
    c.set_defaults(func=cmd_corpus)

    m = sub.add_parser("move", help="speed on a large index: rename one directory",
                       description="Large index; see the module docstring.")
    common(m)
    m.add_argument("--src", required=True, metavar="TREE", help="tree to copy (not modified)")
    m.add_argument("--dir", required=True, metavar="NAME", help="top-level directory of TREE to rename")
    m.add_argument("--sample", type=int, default=50, metavar="N", help="file queries (default 50)")
    m.add_argument("--seed", type=int, default=1, metavar="S", help="sample seed (default 1)")
    m.add_argument("--subdir-files", type=int, default=1000, metavar="N",
                   help="also query the subdirectory with the file count nearest N (default 1000)")
    m.add_argument("--subdir", action="append", metavar="REL",
                   help="also query this subdirectory of NAME (repeatable)")
    m.add_argument("--dir-repeat", type=int, default=3, metavar="N",
                   help="runs of each directory query (default 3)")
    m.set_defaults(func=cmd_move)

    v = sub.add_parser("versions", help="real changes between two releases, line-set Jaccard reference",
                       description="Two releases; see the module docstring.")
    common(v)
    v.add_argument("--a", required=True, metavar="DIR_A", help="older release")
    v.add_argument("--b", required=True, metavar="DIR_B", help="newer release")
    v.add_argument("--name", metavar="NAME",
                   help="top directory name in the scratch tree (default: basename of A without -VERSION)")
    v.add_argument("--min-jaccard", type=float, default=0.5, metavar="T",
                   help="least line-set Jaccard of a reference home (default 0.5)")
    v.set_defaults(func=cmd_versions)

    a = ap.parse_args(argv)
    if not os.path.isfile(a.simd):
        die(f"no simd binary at {a.simd}")
    a.func(a)


if __name__ == "__main__":
    main()
