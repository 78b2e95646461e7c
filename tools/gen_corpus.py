#!/usr/bin/env python3
"""Seeded test-corpus generator with ground truth for simd.

Generates a tree of files with known relations (identical copies, edited
versions and chains of them, documents embedded in larger documents, shared
boilerplate templates, binaries, empty files, odd file names), and a JSON
ground truth, for testing and scoring a tool that finds identical files,
near-duplicate files, files contained in other files, and where moved or
deleted files went.  Python 3.11, standard library only.  Everything is drawn
from random.Random(seed-derived) streams: the same seed and arguments give a
byte-identical tree and truth file (file mtimes differ, nothing else).

Commands
--------
  gen_corpus.py generate --out DIR --seed N [--families K] [--scale F]
      Creates DIR/tree/ (the corpus) and DIR/truth.json.  Refuses (exit 2)
      if DIR/tree exists and is not empty.  Default K = round(300 * F);
      scale 1 gives ~2,500 files / ~75 MB in ~10 s; --scale 0.1 gives
      ~230-270 files / 7-12 MB.

  gen_corpus.py mutate --out DIR --seed N
      Applies a second round of changes to DIR/tree in place (file moves,
      renames, two directory moves -- one with part of its files edited --,
      moves with edits, copy-then-delete-original, deletions with no
      surviving copy, move chains a->b->c, in-place edits) and writes
      DIR/truth-mutate.json.  Needs DIR/truth.json from `generate`; refuses
      (exit 2) if DIR/truth-mutate.json already exists (mutate runs once).

Paths in the truth files
------------------------
Every path is relative to DIR/tree, components joined with "/".  A path that
is valid UTF-8 is written as a JSON string.  A path that is not valid UTF-8
is written as the object {"path_b64": "<base64 of the raw bytes>"} instead.
This holds everywhere a path appears (identical_groups, derived, contains,
templates, old/new of changes, ...).  In file records ("files" lists) the
record carries either the key "path" (string) or the key "path_b64" (base64
string).  Decoders: path_from_json(value) and file_record_path(record) in
this module return the raw bytes.

DIR/truth.json
--------------
{
 "format": "simd-corpus-truth/1", "seed": N,
 "params": {"families", "scale", "vocab_size", "unrelated",
            "template_users_per_template", "binaries", "compilations"},
 "totals": {"files", "bytes", "dirs"},
 "files": [ {"path" | "path_b64", "size", "md5" (hex, whole file),
             "family": int or null,
             "kind": "source"|"copy"|"edited"|"outer"|"template_user"|
                     "unrelated"|"binary"|"empty",
             optional: "copy_of": path (identical to it by construction),
                       "parent": path, "edit_rate", "edit_actual" (edited),
                       "templates": [ids] (template_user),
                       "odd_name": true } ... ]      sorted by raw path bytes
 "identical_groups": [[path, ...], ...]  groups of >= 2 files with identical
        bytes, computed from the md5 of the written bytes (so accidental
        identities, e.g. all empty files, are included)
 "derived": [ {"a": path, "b": path, "edit_rate": r, "edit_actual": x,
               "style": "clustered"|"scattered"} ]  a edited into b;
        r is the nominal rate from {0.01,0.03,0.05,0.1,0.2,0.35,0.5} (words
        touched by insert/delete/substitute of words or whole sentences, per
        original word); x is the measured fraction.  Chain links (an edited
        version of an edited version) appear as their own a->b entries.
 "contains": [ {"inner": path, "outer": path, "offset": o, "length": n} ]
        inner's bytes appear verbatim in outer at byte offset o.
 "templates": [ {"template": id, "position": "header"|"footer", "size",
                 "md5", "files": [paths]} ]  the template's bytes are
        prepended/appended verbatim to each listed file; those files are
        otherwise unrelated to one another.
 "shared_sections": [ {"a", "b", "offset_a", "offset_b", "length"} ]
        a pair of binaries sharing one large common section.
}
Copies of a file are not repeated in derived/contains: expand a path through
identical_groups when scoring.

DIR/truth-mutate.json
---------------------
{
 "format": "simd-corpus-mutate/1", "seed": mutate seed, "base_seed": N,
 "changes": [ {"old": path, "kind": "moved"|"moved_edited"|
               "copied_then_deleted"|"deleted",
               "new": path or null, "edit_rate": float or null,
               "edit_actual": measured fraction or null,
               "md5_old", "md5_new" (null when deleted),
               optional "via": [intermediate paths of a chain]} ]
        one entry for every path of truth.json that no longer exists; a
        chain a->b->c is recorded once as a->c (b in "via").  edit_rate of a
        file edited twice is 1 - (1-r1)(1-r2).
 "dir_moves": [ {"old": dir, "new": dir, "files": n, "edited": m} ],
 "edited_in_place": [ {"path", "edit_rate", "edit_actual", "md5_old",
                       "md5_new"} ]  files edited but not moved,
 "files": [ {"path"|"path_b64", "size", "md5"} ]  the tree after mutation,
 "identical_groups": [[path, ...], ...]  recomputed after mutation
}
"""

import argparse
import base64
import hashlib
import itertools
import json
import math
import os
import random
import re
import sys
import time
import unicodedata

FORMAT = "simd-corpus-truth/1"
MUTATE_FORMAT = "simd-corpus-mutate/1"
RATES = (0.01, 0.03, 0.05, 0.1, 0.2, 0.35, 0.5)
VOCAB_SIZE = 4000
TEXT_KINDS = ("source", "copy", "edited", "outer", "template_user", "unrelated")


# --------------------------------------------------------------------------
# Path <-> JSON convention


def path_to_json(p: bytes):
    """A path as a JSON value: str if valid UTF-8, else {"path_b64": ...}."""
    try:
        return p.decode("utf-8")
    except UnicodeDecodeError:
        return {"path_b64": base64.b64encode(p).decode("ascii")}


def path_from_json(v) -> bytes:
    """Inverse of path_to_json."""
    if isinstance(v, str):
        return v.encode("utf-8")
    return base64.b64decode(v["path_b64"])


def file_record_fields(p: bytes) -> dict:
    """The path part of a file record: {"path": s} or {"path_b64": b64}."""
    v = path_to_json(p)
    return {"path": v} if isinstance(v, str) else v


def file_record_path(rec: dict) -> bytes:
    """Raw path bytes of a file record."""
    if "path" in rec:
        return rec["path"].encode("utf-8")
    return base64.b64decode(rec["path_b64"])


def die(msg: str, code: int = 2):
    print(f"gen_corpus.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


# --------------------------------------------------------------------------
# Vocabulary and text

ONSETS = ("", "", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p",
          "r", "s", "t", "v", "w", "z", "br", "cr", "dr", "fl", "gr", "pl",
          "pr", "sk", "sl", "sp", "st", "str", "tr", "ch", "sh", "th", "qu")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ie",
          "oo", "ou", "y")
CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "rk", "ng",
         "x", "ck", "ll")

HEADINGS = ("Summary", "Symptoms", "Cause", "Resolution", "Workaround",
            "More information", "Applies to", "Steps to reproduce",
            "Prerequisites", "Known issues", "Troubleshooting", "Background",
            "Configuration", "Related articles", "Notes", "Verification",
            "Impact", "Environment", "Procedure", "Rollback")
AUDIENCES = ("Internal", "Public", "Partner", "Support engineers",
             "Administrators", "Field service")


class Vocab:
    """A few thousand pseudo-words in a seeded random Zipf rank order."""

    def __init__(self, seed, size=VOCAB_SIZE):
        rng = random.Random(f"simd-vocab-{seed}")
        words = {}  # dict as an ordered set
        while len(words) < size:
            n = rng.choices((1, 2, 3, 4), weights=(3, 6, 4, 1))[0]
            w = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                        for _ in range(n))
            if 2 <= len(w) <= 14:
                words[w] = None
        # rank order: short words tend to be the frequent ones, as in prose
        keyed = [(len(w) + rng.random() * 5, w) for w in words]
        keyed.sort()
        self.words = [w for _, w in keyed]
        self.cum = list(itertools.accumulate(1.0 / (r + 3.0) for r in range(size)))


class TextGen:
    """Knowledge-base-like text from a Vocab, driven by one Random."""

    def __init__(self, rng: random.Random, vocab: Vocab):
        self.rng = rng
        self.vocab = vocab
        self.buf = []

    def words(self, n):
        if len(self.buf) < n:
            self.buf.extend(self.rng.choices(self.vocab.words, cum_weights=self.vocab.cum,
                                             k=max(8192, n)))
        out = self.buf[-n:]
        del self.buf[-n:]
        return out

    def token(self):
        r = self.rng
        k = r.randrange(8)
        if k == 0:
            return f"v{r.randint(1, 12)}.{r.randint(0, 20)}"
        if k == 1:
            return f"0x{r.getrandbits(16):04X}"
        if k == 2:
            return f"KB{r.randint(100000, 999999)}"
        if k == 3:
            a, b = self.words(2)
            return f"/etc/{a}/{b}.conf"
        if k == 4:
            return f"port {r.randint(1024, 65535)}"
        if k == 5:
            return f"{r.randint(2, 900)}MB"
        if k == 6:
            return f"error {r.randint(100, 9999)}"
        return f"{r.randint(1, 28)}/{r.randint(1, 12)}/{r.randint(2009, 2024)}"

    def sentence(self):
        r = self.rng
        n = r.randint(4, 20)
        ws = self.words(n)
        if r.random() < 0.12:
            ws[r.randrange(1, n)] = self.token()
        ws[0] = ws[0].capitalize()
        if n > 7 and r.random() < 0.35:
            k = r.randint(2, n - 3)
            ws[k] += ","
        x = r.random()
        end = "." if x < 0.9 else ("?" if x < 0.96 else "!")
        return " ".join(ws) + end

    def paragraph(self):
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 7)))

    def title(self):
        return " ".join(w.capitalize() for w in self.words(self.rng.randint(3, 8)))

    def header(self):
        r = self.rng
        a, b = self.words(2)
        return (f"Title: {self.title()}\n"
                f"Article: KB{r.randint(100000, 999999)}\n"
                f"Product: {a.capitalize()} {b.capitalize()} {r.randint(1, 14)}.{r.randint(0, 9)}\n"
                f"Updated: {r.randint(2009, 2024)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}\n"
                f"Audience: {r.choice(AUDIENCES)}\n\n")

    def section(self):
        r = self.rng
        h = r.choice(HEADINGS) if r.random() < 0.7 else self.title()
        k = r.random()
        if k < 0.55:
            body = "\n\n".join(self.paragraph() for _ in range(r.randint(1, 3)))
        elif k < 0.7:
            body = "\n".join("- " + self.sentence() for _ in range(r.randint(2, 6)))
        elif k < 0.85:
            body = "\n".join(f"{i}. " + self.sentence() for i in range(1, r.randint(3, 9)))
        else:
            lines = []
            for _ in range(r.randint(2, 8)):
                a, b = self.words(2)
                if r.random() < 0.5:
                    lines.append(f"    {a}_{b} = {r.randint(0, 99999)}")
                else:
                    lines.append(f"    [{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
                                 f"{r.randint(0, 59):02d}] {a.upper()}: {self.sentence()}")
            body = "\n".join(lines)
        return f"## {h}\n\n{body}\n\n"

    def document(self, target):
        parts = [self.header()]
        size = len(parts[0])
        if target < 600:
            p = self.paragraph() + "\n"
            parts.append(p)
            size += len(p)
        while size < target:
            s = self.section()
            parts.append(s)
            size += len(s)
        text = "".join(parts)
        if len(text) > target * 1.1 + 40:
            cut = text.rfind(" ", 0, target)
            if cut > 60:
                text = text[:cut] + ".\n"
        return text


def log_uniform(rng, lo, hi):
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def text_size(rng, small_frac=0.25):
    """Log-uniform 200 B..300 KB, plus a deliberate stratum under 3 KB."""
    if rng.random() < small_frac:
        return log_uniform(rng, 200, 3000)
    return log_uniform(rng, 200, 300_000)


# --------------------------------------------------------------------------
# Edits

_WS = re.compile(r"(\s+)")
_TRAIL = ".,?!:;"


def edit_text(text, rate, rng, gen, style=None):
    """Insert/delete/substitute words and sentences at about `rate` of the
    words.  Returns (new_text, actual_rate, style)."""
    parts = _WS.split(text)
    nw = (len(parts) + 1) // 2  # words at even indices of parts
    # words only: not numbers, markup or "Label:" header fields
    editable = [i for i in range(nw)
                if parts[2 * i][:1].isalpha() and not parts[2 * i].endswith(":")]
    ne = len(editable)
    if style is None:
        style = "clustered" if rng.random() < 0.6 else "scattered"
    if ne == 0:
        return text + gen.sentence() + "\n", 1.0, style
    budget = max(1, round(rate * ne))
    act_word = {}  # word index -> replacement ('' = delete)
    act_ins = {}   # word index -> list of strings inserted after it
    touched = bytearray(nw)
    centers = []
    spread = 1
    if style == "clustered":
        centers = [rng.randrange(ne) for _ in range(max(1, budget // rng.randint(4, 16)))]
        spread = rng.randint(10, 150)
    done = subst = dele = ins = 0
    attempts = 0
    while done < budget and attempts < budget * 4 + 50:
        attempts += 1
        if centers and rng.random() < 0.85:
            k = int(rng.gauss(rng.choice(centers), spread))
            k = min(max(k, 0), ne - 1)
        else:
            k = rng.randrange(ne)
        # nearest untouched editable word at or after k
        for _ in range(64):
            if not touched[editable[k]]:
                break
            k = (k + 1) % ne
        i = editable[k]
        if touched[i]:
            continue
        op = rng.random()
        w = parts[2 * i]
        core = w.rstrip(_TRAIL)
        punct = w[len(core):]
        if op < 0.35 or (op < 0.55 and punct):
            new = gen.words(1)[0]
            if new == core.lower():
                new = gen.words(1)[0] + "s"
            if core[:1].isupper():
                new = new.capitalize()
            act_word[i] = new + punct
            touched[i] = 1
            done += 1
            subst += 1
        elif op < 0.55:
            act_word[i] = ""
            touched[i] = 1
            done += 1
            dele += 1
        elif op < 0.75:
            m = min(rng.randint(1, 3), budget - done)
            act_ins.setdefault(i, []).extend(gen.words(max(1, m)))
            touched[i] = 1
            done += max(1, m)
            ins += max(1, m)
        elif budget - done < 6:
            continue  # a whole sentence would overshoot the budget
        else:
            # sentence operations: locate the sentence around word i
            e = i
            while e < nw - 1 and e - i < 60 and not parts[2 * e].endswith((".", "?", "!")):
                e += 1
            s = i
            while s > 0 and i - s < 60 and not parts[2 * (s - 1)].endswith((".", "?", "!")):
                s -= 1
            if not parts[2 * e].endswith((".", "?", "!")):
                continue
            if op < 0.85:
                if touched[e] and e in act_word:
                    continue
                sent = gen.sentence()
                act_ins.setdefault(e, []).append(sent)
                touched[e] = 1
                n = sent.count(" ") + 1
                done += n
                ins += n
            else:
                if any(touched[s:e + 1]) or e - s > 40:
                    continue
                for j in range(s, e + 1):
                    act_word[j] = ""
                    touched[j] = 1
                done += e - s + 1
                dele += e - s + 1
                if op >= 0.925:  # replace the sentence
                    sent = gen.sentence()
                    act_ins.setdefault(e, []).append(sent)
                    n = sent.count(" ") + 1
                    done += n
                    ins += n
    out = []
    prev = 0
    np_ = len(parts)
    for i in sorted(act_word.keys() | act_ins.keys()):
        out.append("".join(parts[prev:2 * i]))
        w = act_word.get(i, parts[2 * i])
        seq = ([w] if w else []) + act_ins.get(i, [])
        sep = parts[2 * i + 1] if 2 * i + 1 < np_ else ""
        if seq:
            out.append(" ".join(seq))
            out.append(sep)
        elif "\n" in sep:
            out.append(sep)
        prev = 2 * i + 2
    out.append("".join(parts[prev:]))
    new_text = "".join(out)
    if new_text == text:
        new_text = text + gen.sentence() + "\n"
    return new_text, round((subst + dele + ins) / ne, 4), style


# --------------------------------------------------------------------------
# Generation plan

EXTS = (b".txt", b".txt", b".txt", b".txt", b".md", b".md", b".md", b".rst", b".text", b".kb")
BIN_EXTS = (b".bin", b".dat", b".jpg", b".png", b".zip", b".pdf", b".gz")
TOP_DIRS = (b"kb", b"support", b"archive", b"shared", b"projects", b"mirror",
            b"teams", b"docs", b"exports", b"users")


class Entry:
    __slots__ = ("content", "kind", "family", "rule", "avoid", "parent", "copy_of",
                 "edit_rate", "edit_actual", "edit_style", "templates", "odd",
                 "dir", "name", "path", "ext")

    def __init__(self, content, kind, family=None, rule=("new",), avoid=(),
                 parent=None, copy_of=None, ext=None):
        self.content = content
        self.kind = kind
        self.family = family
        self.rule = rule
        self.avoid = list(avoid)
        self.parent = parent
        self.copy_of = copy_of
        self.edit_rate = None
        self.edit_actual = None
        self.edit_style = None
        self.templates = []
        self.odd = False
        self.dir = None
        self.name = None
        self.path = None
        self.ext = ext


def slug(rng, gen, ext_choices=EXTS):
    r = rng.random()
    ws = gen.words(rng.randint(1, 4))
    if r < 0.45:
        base = "-".join(ws)
    elif r < 0.7:
        base = "_".join(ws)
    elif r < 0.85:
        base = " ".join(w.capitalize() for w in ws)
    else:
        base = f"KB{rng.randint(100000, 999999)}-" + "-".join(ws)
    return base.encode("ascii"), rng.choice(ext_choices)


def split_ext(name: bytes):
    i = name.rfind(b".")
    if i <= 0:
        return name, b""
    return name[:i], name[i:]


COPY_VARIANTS = (b"Copy of {}", b"{} (1)", b"{}-backup", b"{}_old", b"{} - copy", b"{}.orig")
EDIT_VARIANTS = (b"{}-v2", b"{}_rev{n}", b"{} (edited)", b"{}-final", b"{}-draft",
                 b"{}_updated", b"{} v{n}")


class Planner:
    def __init__(self, seed, families, scale):
        self.rng = random.Random(seed)
        self.vocab = Vocab(seed)
        self.gen = TextGen(self.rng, self.vocab)
        self.scale = scale
        self.families = families
        self.entries = []
        self.contains = []       # (inner, outer, offset, length)
        self.templates = []      # dicts with entries
        self.shared = []         # (a, b, off_a, off_b, length)
        self.params = {
            "families": families,
            "scale": scale,
            "vocab_size": VOCAB_SIZE,
            "unrelated": max(5, round(600 * scale)),
            "template_users_per_template": max(4, round(60 * scale)),
            "binaries": max(6, round(30 * scale)),
            "compilations": max(1, round(10 * scale)),
        }

    def add(self, e):
        self.entries.append(e)
        return e

    def doc(self, size):
        return self.gen.document(size).encode("ascii")

    def edited(self, parent, family):
        rate = self.rng.choice(RATES)
        text, actual, style = edit_text(parent.content.decode("ascii"), rate, self.rng, self.gen)
        e = Entry(text.encode("ascii"), "edited", family, rule=("edit", parent), parent=parent)
        e.edit_rate, e.edit_actual, e.edit_style = rate, actual, style
        return self.add(e)

    def plan(self):
        rng = self.rng
        small_sources = []
        for f in range(self.families):
            if f == 2:
                size = log_uniform(rng, 300, 8000)
            else:
                size = text_size(rng)
            src = self.add(Entry(self.doc(size), "source", f))
            if len(src.content) <= 20000:
                small_sources.append(src)
            # identical copies
            if f == 0 or rng.random() < 0.65:
                group = [src]
                for _ in range(rng.randint(1, 4)):
                    rule = ("same", src) if rng.random() < 0.6 else ("copyvar", src)
                    group.append(self.add(Entry(src.content, "copy", f, rule, avoid=group,
                                                copy_of=src)))
            # edited versions, chains, copies of edited versions
            if f == 1 or rng.random() < 0.65:
                for j in range(rng.randint(1, 4)):
                    e = self.edited(src, f)
                    if (f == 1 and j == 0) or rng.random() < 0.35:
                        e2 = self.edited(e, f)
                        if (f == 1 and j == 0) or rng.random() < 0.3:
                            self.edited(e2, f)
                    if rng.random() < 0.2:
                        self.add(Entry(e.content, "copy", f, ("same", e), avoid=[e], copy_of=e))
            # containment: the source inside a larger new document
            if (f == 2 or rng.random() < 0.15) and len(src.content) <= 40000:
                self.outer([src], f)

        # compilations: several small documents of different families in one
        for _ in range(self.params["compilations"]):
            if len(small_sources) < 2:
                break
            k = min(len(small_sources), rng.randint(2, 3))
            self.outer(rng.sample(small_sources, k), None)

        for _ in range(self.params["unrelated"]):
            self.add(Entry(self.doc(text_size(rng, 0.35)), "unrelated"))

        self.plan_templates()
        self.plan_binaries()
        for _ in range(4):
            self.add(Entry(b"", "empty", rule=("empty",)))

    def outer(self, inners, family):
        rng = self.rng
        pieces = []
        size = 0
        offs = []
        first = self.doc(log_uniform(rng, 400, 20000)) + b"\n\n"
        pieces.append(first)
        size += len(first)
        for inner in inners:
            offs.append((inner, size))
            pieces.append(inner.content)
            size += len(inner.content)
            tail = b"\n\n" + self.gen.document(log_uniform(rng, 400, 20000)).encode("ascii")
            pieces.append(tail)
            size += len(tail)
        o = self.add(Entry(b"".join(pieces), "outer", family))
        for inner, off in offs:
            self.contains.append((inner, o, off, len(inner.content)))
        return o

    def template_text(self, kind, target):
        gen = self.gen
        if kind == 0:
            head = "=== CONFIDENTIAL - INTERNAL USE ONLY ===\n\n"
            end = "\n=== END OF NOTICE ===\n\n"
        elif kind == 1:
            head = "\n\n--\nDisclaimer\n\n"
            end = "\n--\n"
        else:
            head = "\n\n----------------------------------------\nLicense and support terms\n\n"
            end = "\n----------------------------------------\n"
        body = []
        n = len(head) + len(end)
        while n < target:
            p = gen.paragraph() + "\n\n"
            body.append(p)
            n += len(p)
        text = head + "".join(body)
        text = text[:target - len(end)].rstrip() + end
        return text.encode("ascii")

    def plan_templates(self):
        rng = self.rng
        specs = [(0, "header", 1500), (1, "footer", 1500), (2, "footer", 3000)]
        tpls = []
        for tid, pos, size in specs:
            tpls.append({"template": tid, "position": pos, "bytes": self.template_text(tid, size),
                         "files": []})
        for t in tpls:
            for _ in range(self.params["template_users_per_template"]):
                body = self.doc(log_uniform(rng, 200, 40000))
                used = [t]
                if t["template"] == 0 and rng.random() < 0.2:
                    used.append(tpls[1])
                content = body
                for u in used:
                    content = u["bytes"] + content if u["position"] == "header" else content + u["bytes"]
                e = self.add(Entry(content, "template_user"))
                e.templates = [u["template"] for u in used]
                for u in used:
                    u["files"].append(e)
        self.templates = tpls

    def plan_binaries(self):
        rng = self.rng
        n = self.params["binaries"]
        for i in range(n):
            size = log_uniform(rng, 256, 2_000_000 if self.scale >= 0.5 else 400_000)
            b = self.add(Entry(rng.randbytes(size), "binary", rule=("bin",)))
            if i < 2 or rng.random() < 0.15:
                group = [b]
                for _ in range(rng.randint(1, 2)):
                    rule = ("same", b) if rng.random() < 0.5 else ("copyvar", b)
                    group.append(self.add(Entry(b.content, "binary", None, rule, avoid=group,
                                                copy_of=b)))
        shared_len = int(300_000 * max(0.2, min(1.0, self.scale)))
        s = rng.randbytes(shared_len)
        a_pre, a_post = rng.randbytes(rng.randint(1000, 100_000)), rng.randbytes(rng.randint(1000, 100_000))
        b_pre, b_post = rng.randbytes(rng.randint(1000, 100_000)), rng.randbytes(rng.randint(1000, 100_000))
        a = self.add(Entry(a_pre + s + a_post, "binary", rule=("bin",)))
        b = self.add(Entry(b_pre + s + b_post, "binary", rule=("bin",)))
        self.shared.append((a, b, len(a_pre), len(b_pre), shared_len))

    # ---- directories and names

    def build_dirs(self):
        rng = self.rng
        n = len(self.entries)
        hi = min(200, max(25, n // 4))
        caps = []
        while sum(caps) < n:
            caps.append(log_uniform(rng, 20, hi + 1))
        excess = sum(caps) - n
        caps[-1] -= excess
        if caps[-1] < 20:
            rest = caps.pop()
            i = 0
            while rest > 0:
                if caps[i % len(caps)] < 200:
                    caps[i % len(caps)] += 1
                    rest -= 1
                i += 1
        nd = len(caps)
        parents = []
        names = []
        depth = []
        tops = list(TOP_DIRS)
        rng.shuffle(tops)
        ntop = max(2, min(4, nd // 6))
        children = {}
        for d in range(nd):
            if d < ntop:
                p = -1
                name = tops[d]
            else:
                cands = [x for x in range(d) if depth[x] < 5]
                if rng.random() < 0.4:
                    cands = cands[-2:]  # favour recent dirs: deeper trees
                p = rng.choice(cands)
                while True:
                    ws = self.gen.words(rng.randint(1, 2))
                    name = "-".join(ws).encode("ascii")
                    if rng.random() < 0.15:
                        name += f"-{rng.randint(2009, 2024)}".encode("ascii")
                    if name not in children.setdefault(p, {}) and name not in TOP_DIRS:
                        break
            children.setdefault(p, {})[name] = d
            parents.append(p)
            names.append(name)
            depth.append(0 if p < 0 else depth[p] + 1)
        # two odd directory names (one not valid UTF-8), on non-top dirs
        odd_dirs = ["Shared Docs \u2013 \u00e9t\u00e9 \u4e2d\u6587".encode("utf-8"), b"legacy-\xe9t\xe9"]
        for k, od in enumerate(odd_dirs):
            d = nd - 1 - k
            if d >= ntop:
                del children[parents[d]][names[d]]
                names[d] = od
                children[parents[d]][od] = d
        paths = []
        for d in range(nd):
            p = parents[d]
            paths.append(names[d] if p < 0 else paths[p] + b"/" + names[d])
        self.dir_paths = paths
        self.dir_caps = caps
        # sub-directory names of each dir, to avoid file/dir name clashes
        self.used = [set() for _ in range(nd)]
        for d in range(nd):
            if parents[d] >= 0:
                self.used[parents[d]].add(names[d])

    def unique_name(self, d, base, ext):
        name = base + ext
        k = 2
        while name in self.used[d]:
            name = base + b"-" + str(k).encode() + ext
            k += 1
        self.used[d].add(name)
        return name

    def assign(self):
        rng = self.rng
        pool = [d for d, c in enumerate(self.dir_caps) for _ in range(c)]
        for e in self.entries:
            avoid = {a.dir for a in e.avoid if a.dir is not None}
            j = rng.randrange(len(pool))
            for _ in range(40):
                if pool[j] not in avoid:
                    break
                j = rng.randrange(len(pool))
            pool[j], pool[-1] = pool[-1], pool[j]
            d = pool.pop()
            e.dir = d
            rule = e.rule
            if rule[0] == "same":
                base, ext = split_ext(rule[1].name)
            elif rule[0] == "copyvar":
                b0, ext = split_ext(rule[1].name)
                base = rng.choice(COPY_VARIANTS).replace(b"{}", b0)
            elif rule[0] == "edit":
                b0, ext = split_ext(rule[1].name)
                if rng.random() < 0.25:
                    base = b0
                else:
                    base = rng.choice(EDIT_VARIANTS).replace(b"{}", b0).replace(
                        b"{n}", str(rng.randint(2, 9)).encode())
            elif rule[0] == "bin":
                base, ext = slug(rng, self.gen, BIN_EXTS)
            elif rule[0] == "empty":
                base, ext = rng.choice((b"placeholder", b"todo", b"EMPTY", b"new-document",
                                        b"notes")), rng.choice((b".txt", b".md", b""))
            else:
                base, ext = slug(rng, self.gen)
            e.name = self.unique_name(d, base, ext)

    def odd_names(self):
        rng = self.rng
        words = self.gen.words(60)
        long = b"very-long-name-" + "-".join(words).encode("ascii")
        long = long[:196] + b".txt"
        odd = [
            b"meeting notes 2023 final.txt",
            b"  leading and trailing spaces  .txt",
            b"-leading-dash.txt",
            b"--help",
            "r\u00e9sum\u00e9 caf\u00e9.txt".encode("utf-8"),
            "\u4e2d\u6587\u6587\u6863 \u8bf4\u660e.txt".encode("utf-8"),
            "emoji \U0001F389 party \U0001F680.md".encode("utf-8"),
            b"line one\nline two.txt",
            b"tab\tseparated.txt",
            long,
            b"back\\slash:colon*star?.txt",
            b"quote'and\"double.txt",
            b"latin1-caf\xe9.txt",
            b"bad-\xff\xfe-bytes.txt",
            b"\x80\x81-lone-continuation.txt",
            b"overlong-\xc0\xaf.md",
        ]
        copies = [e for e in self.entries if e.copy_of is not None]
        others = [e for e in self.entries if e.kind != "empty" and e.copy_of is None]
        taken = set()
        for i, name in enumerate(odd):
            pool = copies if (i % 2 == 0 and copies) else others
            for _ in range(100):
                e = rng.choice(pool)
                if id(e) not in taken:
                    break
            taken.add(id(e))
            self.used[e.dir].discard(e.name)
            e.name = self.unique_name(e.dir, name, b"")
            e.odd = True
        # NFC and NFD spellings of the same name, in one directory
        texts = [e for e in self.entries if e.kind in TEXT_KINDS and id(e) not in taken]
        e1 = rng.choice(texts)
        e2 = next((x for x in texts if x.dir == e1.dir and x is not e1), None)
        if e2 is not None:
            for e, form in ((e1, "NFC"), (e2, "NFD")):
                self.used[e.dir].discard(e.name)
                e.name = self.unique_name(e.dir, unicodedata.normalize(form, "caf\u00e9").encode("utf-8"),
                                          b".txt")
                e.odd = True

    def finish(self):
        for e in self.entries:
            e.path = self.dir_paths[e.dir] + b"/" + e.name


def md5hex(b):
    return hashlib.md5(b).hexdigest()


def identical_groups(pairs):
    """pairs: (path bytes, md5) sorted by path; groups of >= 2, as JSON."""
    by = {}
    for p, m in pairs:
        by.setdefault(m, []).append(p)
    groups = [sorted(g) for g in by.values() if len(g) >= 2]
    groups.sort()
    return [[path_to_json(p) for p in g] for g in groups]


def dir_nonempty(path):
    try:
        with os.scandir(path) as it:
            return any(True for _ in it)
    except FileNotFoundError:
        return False


def cmd_generate(args):
    t0 = time.monotonic()
    if args.scale <= 0:
        die("--scale must be > 0")
    out = os.fsencode(args.out)
    tree = os.path.join(out, b"tree")
    if os.path.exists(tree) and not os.path.isdir(tree):
        die(f"{os.fsdecode(tree)} exists and is not a directory")
    if dir_nonempty(tree):
        die(f"{os.fsdecode(tree)} already exists and is not empty; "
            "choose another --out or remove it")
    families = args.families if args.families is not None else max(3, round(300 * args.scale))
    if families < 3:
        die("--families must be >= 3")
    pl = Planner(args.seed, families, args.scale)
    pl.plan()
    pl.build_dirs()
    pl.assign()
    pl.odd_names()
    pl.finish()

    os.makedirs(tree, exist_ok=True)
    for d in pl.dir_paths:
        os.makedirs(os.path.join(tree, d), exist_ok=True)
    total = 0
    md5_of = {}
    for e in pl.entries:
        with open(os.path.join(tree, e.path), "xb") as f:
            f.write(e.content)
        total += len(e.content)
        key = id(e.content)
        if key not in md5_of:
            md5_of[key] = md5hex(e.content)

    def P(e):
        return path_to_json(e.path)

    entries = sorted(pl.entries, key=lambda e: e.path)
    files = []
    for e in entries:
        rec = file_record_fields(e.path)
        rec.update(size=len(e.content), md5=md5_of[id(e.content)], family=e.family, kind=e.kind)
        if e.copy_of is not None:
            rec["copy_of"] = P(e.copy_of)
        if e.parent is not None:
            rec["parent"] = P(e.parent)
            rec["edit_rate"] = e.edit_rate
            rec["edit_actual"] = e.edit_actual
        if e.templates:
            rec["templates"] = e.templates
        if e.odd:
            rec["odd_name"] = True
        files.append(rec)
    derived = [{"a": P(e.parent), "b": P(e), "edit_rate": e.edit_rate,
                "edit_actual": e.edit_actual, "style": e.edit_style}
               for e in entries if e.parent is not None]
    contains = [{"inner": P(i), "outer": P(o), "offset": off, "length": n}
                for i, o, off, n in sorted(pl.contains, key=lambda t: (t[1].path, t[2]))]
    templates = [{"template": t["template"], "position": t["position"], "size": len(t["bytes"]),
                  "md5": md5hex(t["bytes"]),
                  "files": [P(e) for e in sorted(t["files"], key=lambda e: e.path)]}
                 for t in pl.templates]
    shared = [{"a": P(a), "b": P(b), "offset_a": oa, "offset_b": ob, "length": n}
              for a, b, oa, ob, n in pl.shared]
    truth = {
        "format": FORMAT,
        "seed": args.seed,
        "params": pl.params,
        "totals": {"files": len(entries), "bytes": total, "dirs": len(pl.dir_paths)},
        "files": files,
        "identical_groups": identical_groups([(e.path, md5_of[id(e.content)]) for e in entries]),
        "derived": derived,
        "contains": contains,
        "templates": templates,
        "shared_sections": shared,
    }
    write_json(os.path.join(out, b"truth.json"), truth)
    stale = os.path.join(out, b"truth-mutate.json")
    if os.path.exists(stale):
        os.unlink(stale)
        print("removed stale truth-mutate.json", file=sys.stderr)
    dt = time.monotonic() - t0
    print(f"generated {len(entries)} files, {total} bytes ({total / 1e6:.1f} MB) in "
          f"{len(pl.dir_paths)} dirs, {len(truth['identical_groups'])} identical groups, "
          f"{len(derived)} derived, {len(contains)} contains; {dt:.1f} s")


def write_json(path, obj):
    tmp = path + b".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------
# Mutation


class Mutator:
    def __init__(self, out, seed):
        self.out = out
        self.tree = os.path.join(out, b"tree")
        with open(os.path.join(out, b"truth.json"), encoding="utf-8") as f:
            self.truth = json.load(f)
        self.seed = seed
        self.rng = random.Random(f"mutate-{seed}")
        self.gen = TextGen(self.rng, Vocab(self.truth["seed"]))
        self.cur = {}  # path -> {"md5", "size", "kind", "origin"}
        for rec in self.truth["files"]:
            p = file_record_path(rec)
            if not os.path.lexists(os.path.join(self.tree, p)):
                die(f"tree does not match truth.json: {p!r} is missing")
            self.cur[p] = {"md5": rec["md5"], "size": rec["size"], "kind": rec["kind"],
                           "origin": None}
        self.ever = set(self.cur)    # membership only
        self.records = {}            # old path -> record
        self.in_place = {}           # path -> record
        self.dir_moves = []

    # ---- helpers

    def fs(self, p):
        return os.path.join(self.tree, p)

    def dirs(self):
        ds = {}
        for p in self.cur:
            d = p.rpartition(b"/")[0]
            while d:
                ds[d] = ds.get(d, 0) + 1
                d = d.rpartition(b"/")[0]
        return ds  # dir -> number of files below it

    def fresh_path(self, d, base, ext):
        name = base + ext
        k = 2
        while True:
            p = (d + b"/" + name) if d else name
            if p not in self.ever and not os.path.lexists(self.fs(p)):
                return p
            name = base + b"-" + str(k).encode() + ext
            k += 1

    def relocate(self, src, dst):
        """Record that the file now at src is at dst (fs already done)."""
        info = self.cur.pop(src)
        self.cur[dst] = info
        self.ever.add(dst)
        if info["origin"] is None:
            info["origin"] = src
            self.records[src] = {"new": dst, "edits": [], "actual": [], "copied": False,
                                 "via": [], "md5_old": info["md5"]}
        else:
            r = self.records[info["origin"]]
            r["via"].append(src)
            r["new"] = dst

    def edit_file(self, p, rate):
        info = self.cur[p]
        with open(self.fs(p), "rb") as f:
            text = f.read().decode("ascii")
        new, actual, _ = edit_text(text, rate, self.rng, self.gen)
        data = new.encode("ascii")
        with open(self.fs(p), "wb") as f:
            f.write(data)
        old_md5 = info["md5"]
        info["md5"] = md5hex(data)
        info["size"] = len(data)
        if info["origin"] is not None:
            r = self.records[info["origin"]]
            r["edits"].append(rate)
            r["actual"].append(actual)
        else:
            ip = self.in_place.setdefault(p, {"edits": [], "actual": [], "md5_old": old_md5})
            ip["edits"].append(rate)
            ip["actual"].append(actual)

    def move(self, src, dst, rate=None, copy=False):
        os.makedirs(self.fs(dst.rpartition(b"/")[0]), exist_ok=True)
        if copy:
            with open(self.fs(src), "rb") as f:
                data = f.read()
            with open(self.fs(dst), "xb") as f:
                f.write(data)
            os.unlink(self.fs(src))
        else:
            if os.path.lexists(self.fs(dst)):
                die(f"internal: {dst!r} exists", 1)
            os.rename(self.fs(src), self.fs(dst))
        self.relocate(src, dst)
        if copy:
            self.records[self.cur[dst]["origin"]]["copied"] = True
        if rate is not None:
            self.edit_file(dst, rate)

    def move_dir(self, src, dst):
        os.makedirs(self.fs(dst.rpartition(b"/")[0]) if b"/" in dst else self.tree, exist_ok=True)
        os.rename(self.fs(src), self.fs(dst))
        moved = sorted(p for p in self.cur if p.startswith(src + b"/"))
        for p in moved:
            self.relocate(p, dst + p[len(src):])
        self.dir_moves.append({"old": src, "new": dst, "files": len(moved), "edited": 0})
        return [dst + p[len(src):] for p in moved]

    def delete(self, p):
        os.unlink(self.fs(p))
        info = self.cur.pop(p)
        self.records[p] = {"new": None, "edits": [], "actual": [], "copied": False, "via": [],
                           "md5_old": info["md5"]}

    # ---- the run

    def run(self):
        rng = self.rng
        n = len(self.cur)

        def k(frac, mn):
            return max(mn, round(n * frac))

        ds = self.dirs()
        dlist = sorted(ds)
        lo = 5 if n < 1000 else 15
        cap = max(60, min(400, n // 5))  # files below a moved directory
        cands = [d for d in dlist if lo <= ds[d] <= cap and b"/" in d] or \
                [d for d in dlist if lo <= ds[d] <= cap] or \
                sorted(dlist, key=lambda d: (ds[d], d))[:3]
        d1 = rng.choice(cands)

        def related(a, b):
            return a == b or a.startswith(b + b"/") or b.startswith(a + b"/")

        c2 = [d for d in dlist if not related(d, d1) and ds[d] <= cap] or \
            sorted((d for d in dlist if not related(d, d1)), key=lambda d: (ds[d], d))[:1]
        d2 = rng.choice(c2) if c2 else None
        reserved = [d for d in (d1, d2) if d is not None]

        def under_reserved(p):
            return any(p.startswith(d + b"/") for d in reserved)

        pool = [p for p in sorted(self.cur)
                if not under_reserved(p) and self.cur[p]["kind"] != "empty"]
        rng.shuffle(pool)
        file_dirs = sorted({p.rpartition(b"/")[0] for p in self.cur if not under_reserved(p)})

        def take(pred=lambda p: True):
            for i in range(len(pool) - 1, -1, -1):
                if pred(pool[i]):
                    return pool.pop(i)
            return None

        def is_text(p):
            return self.cur[p]["kind"] in TEXT_KINDS

        new_dir_box = []

        def other_dir(p):
            if rng.random() < 0.25:
                if not new_dir_box:
                    w = "-".join(self.gen.words(2)).encode("ascii")
                    new_dir_box.append(self.fresh_path(b"", b"reorganized-" + w, b""))
                sub = "-".join(self.gen.words(1)).encode("ascii")
                return new_dir_box[0] + b"/" + sub
            here = p.rpartition(b"/")[0]
            choices = [d for d in file_dirs if d != here]
            return rng.choice(choices) if choices else (here + b"/moved")

        def rename_base(p):
            base, ext = split_ext(p.rpartition(b"/")[2])
            r = rng.random()
            if r < 0.3:
                return base + b"-old", ext
            if r < 0.5:
                return base + b" (renamed)", ext
            if r < 0.65:
                return b"archived_" + base, ext
            return "-".join(self.gen.words(rng.randint(1, 3))).encode("ascii"), ext

        def do_move(p, rename=False, rate=None, copy=False, dest_dir=None):
            d = dest_dir if dest_dir is not None else (p.rpartition(b"/")[0] if rename and rng.random() < 0.7 else other_dir(p))
            if rename or rate is not None and rng.random() < 0.5:
                base, ext = rename_base(p)
            else:
                base, ext = split_ext(p.rpartition(b"/")[2])
            dst = self.fresh_path(d, base, ext)
            self.move(p, dst, rate=rate, copy=copy)
            return dst

        moved = [do_move(p) for p in [take() for _ in range(k(0.02, 3))] if p]
        renamed = [do_move(p, rename=True) for p in [take() for _ in range(k(0.015, 3))] if p]
        for _ in range(k(0.015, 3)):
            p = take(is_text)
            if p:
                do_move(p, rate=rng.choice(RATES))
        for _ in range(k(0.01, 2)):
            p = take()
            if p:
                do_move(p, copy=True)

        # chains within this run: a->b then b->c (recorded a->c)
        do_move(moved[0])                                   # plain second move
        if len(moved) > 1 and is_text(moved[1]):
            do_move(moved[1], rate=rng.choice(RATES))       # second step edited
        elif len(moved) > 1:
            do_move(moved[1], rename=True)
        if renamed:
            do_move(renamed[0], dest_dir=d1)                # then moved with d1 below

        # directory moves: d2 renamed in place; d1 moved elsewhere with edits
        if d2 is not None:
            parent, _, name = d2.rpartition(b"/")
            new = self.fresh_path(parent, name + b"-" + self.gen.words(1)[0].encode("ascii"), b"")
            self.move_dir(d2, new)
        parent = d1.rpartition(b"/")[0]
        targets = [d for d in file_dirs if not related(d, d1) and
                   not (d2 is not None and related(d, d2)) and d != parent]
        if targets and rng.random() < 0.6:
            newparent = rng.choice(targets)
        else:
            newparent = self.fresh_path(b"", b"moved-" + self.gen.words(1)[0].encode("ascii"), b"")
        base = d1.rpartition(b"/")[2]
        if rng.random() < 0.5:
            base = base + b"-" + self.gen.words(1)[0].encode("ascii")
        inside = self.move_dir(d1, self.fresh_path(newparent, base, b""))
        texts = [p for p in inside if is_text(p)]
        ne = max(1, round(len(texts) * rng.uniform(0.3, 0.5))) if texts else 0
        for p in rng.sample(texts, ne):
            self.edit_file(p, rng.choice(RATES))
        self.dir_moves[-1]["edited"] = ne

        # in-place edits of files that stay where they are
        for _ in range(k(0.02, 3)):
            p = take(is_text)
            if p:
                self.edit_file(p, rng.choice(RATES))

        # deletions with no surviving identical copy
        counts = {}
        for info in self.cur.values():
            counts[info["md5"]] = counts.get(info["md5"], 0) + 1
        for _ in range(k(0.01, 2)):
            p = take(lambda q: q in self.cur and counts[self.cur[q]["md5"]] == 1
                     and self.cur[q]["origin"] is None and q not in self.in_place)
            if p:
                self.delete(p)

        self.verify()
        self.write()

    def verify(self):
        seen = 0
        for root, dirs, files in os.walk(self.tree):
            for f in files:
                rel = os.path.relpath(os.path.join(root, f), self.tree)
                if rel not in self.cur:
                    die(f"internal: unexpected file {rel!r}", 1)
                seen += 1
        if seen != len(self.cur):
            die(f"internal: {seen} files on disk, {len(self.cur)} expected", 1)

    def write(self):
        P = path_to_json
        changes = []
        for old in sorted(self.records):
            r = self.records[old]
            new = r["new"]
            if new is None:
                kind = "deleted"
            elif r["edits"]:
                kind = "moved_edited"
            elif r["copied"]:
                kind = "copied_then_deleted"
            else:
                kind = "moved"
            rate = None
            if r["edits"]:
                keep = 1.0
                for x in r["edits"]:
                    keep *= 1 - x
                rate = round(1 - keep, 4)
            rec = {"old": P(old), "kind": kind, "new": P(new) if new is not None else None,
                   "edit_rate": rate,
                   "edit_actual": round(sum(r["actual"]), 4) if r["actual"] else None,
                   "md5_old": r["md5_old"],
                   "md5_new": self.cur[new]["md5"] if new is not None else None}
            if r["via"]:
                rec["via"] = [P(v) for v in r["via"]]
            changes.append(rec)
        inplace = []
        for p in sorted(self.in_place):
            r = self.in_place[p]
            keep = 1.0
            for x in r["edits"]:
                keep *= 1 - x
            inplace.append({"path": P(p), "edit_rate": round(1 - keep, 4),
                            "edit_actual": round(sum(r["actual"]), 4),
                            "md5_old": r["md5_old"], "md5_new": self.cur[p]["md5"]})
        files = []
        for p in sorted(self.cur):
            rec = file_record_fields(p)
            rec.update(size=self.cur[p]["size"], md5=self.cur[p]["md5"])
            files.append(rec)
        out = {
            "format": MUTATE_FORMAT,
            "seed": self.seed,
            "base_seed": self.truth["seed"],
            "changes": changes,
            "dir_moves": [{"old": P(d["old"]), "new": P(d["new"]), "files": d["files"],
                           "edited": d["edited"]} for d in self.dir_moves],
            "edited_in_place": inplace,
            "files": files,
            "identical_groups": identical_groups([(p, self.cur[p]["md5"]) for p in sorted(self.cur)]),
        }
        write_json(os.path.join(self.out, b"truth-mutate.json"), out)
        kinds = {}
        for c in changes:
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        print(f"mutated: {len(changes)} old paths gone ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), "
              f"{sum(1 for c in changes if 'via' in c)} chains, {len(self.dir_moves)} dir moves, "
              f"{len(inplace)} edited in place; {len(files)} files now")


def cmd_mutate(args):
    t0 = time.monotonic()
    out = os.fsencode(args.out)
    if not os.path.isfile(os.path.join(out, b"truth.json")):
        die(f"{args.out}/truth.json not found; run `generate` first")
    if not os.path.isdir(os.path.join(out, b"tree")):
        die(f"{args.out}/tree not found; run `generate` first")
    if os.path.exists(os.path.join(out, b"truth-mutate.json")):
        die(f"{args.out}/truth-mutate.json exists: this tree was already mutated "
            "(regenerate into a fresh --out to mutate again)")
    Mutator(out, args.seed).run()
    print(f"mutate took {time.monotonic() - t0:.1f} s")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="gen_corpus.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{generate,mutate}")
    g = sub.add_parser("generate", help="create DIR/tree and DIR/truth.json")
    g.add_argument("--out", required=True, metavar="DIR", help="output directory")
    g.add_argument("--seed", required=True, type=int, metavar="N", help="random seed")
    g.add_argument("--families", type=int, metavar="K",
                   help="number of source documents (default round(300 * scale))")
    g.add_argument("--scale", type=float, default=1.0, metavar="F",
                   help="size factor for all counts (default 1; 0.1 for quick tests)")
    m = sub.add_parser("mutate", help="change DIR/tree in place, write DIR/truth-mutate.json")
    m.add_argument("--out", required=True, metavar="DIR", help="directory made by generate")
    m.add_argument("--seed", required=True, type=int, metavar="N", help="random seed")
    args = ap.parse_args(argv)
    if args.cmd == "generate":
        cmd_generate(args)
    else:
        cmd_mutate(args)


if __name__ == "__main__":
    main()
