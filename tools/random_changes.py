#!/usr/bin/env python3
"""Random changes to the tree in the current directory, made quickly, as
users and programs make them under a running daemon: files written,
appended to, overwritten, saved through a temporary file, renamed (over
another file too, and swapped), moved out of the tree and back, removed,
truncated, touched, hard-linked, copied, made unreadable for a moment
(and changed meanwhile: files, and directories with files in them),
replaced by a FIFO, written in several writes; directories made, moved
(over an empty one too), moved out and back, copied and removed; symlinks
(to files, directories, /usr and nowhere); large files (1-3 MB). With
CHAOS_IGNORES=1, also ignore files written, edited and removed at any
depth (`.gitignore`, `.ignore`, `.simdignore`, the tree's
`.git/info/exclude`; `!` lines and directory patterns among their lines),
so that the daemon's rules are held to the walk's under change (off by
default, so that a seed makes the same changes as before). With
CHAOS_NAMES=1, one new name in four is odder (not UTF-8, a newline, glob
and ignore-file characters, 255 bytes long).

Usage (as a scenario of tools/converge_watch.py, in a scratch tree):
    tools/random_changes.py [SEED] [CHANGES]
    tools/random_changes.py --start-tree DIR   (writes session 55's starting tree)

SEED (default: random, printed on stderr) makes a run repeatable on the
same starting tree, CHANGES is how many (default 300). With CHAOS_LOG=FILE,
every file-system call is written there with its time, to follow a path
through a run that did not converge. Directories moved out go to
../chaos-outside beside the tree. Never point it at real data.
"""
import os, random, shutil, sys, time, stat

if len(sys.argv) == 3 and sys.argv[1] == "--start-tree":
    START_TREE = sys.argv[2]
else:
    START_TREE = None
seed = int(sys.argv[1]) if len(sys.argv) > 1 and not START_TREE else random.randrange(1 << 30)
ops_n = int(sys.argv[2]) if len(sys.argv) > 2 and not START_TREE else 300
R = random.Random(seed)
root = os.getcwd()
outside = os.path.join(os.path.dirname(root), "chaos-outside")
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()

def text(n):
    return (" ".join(R.choice(WORDS) for _ in range(n)) + "\n").encode()

def files():
    out = []
    for d, dirs, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(p)
    return out

def dirs():
    out = [root]
    for d, ds, _ in os.walk(root):
        out += [os.path.join(d, x) for x in ds if not os.path.islink(os.path.join(d, x))]
    return out

# With CHAOS_NAMES=1, one new name in four is odder: bytes that are not
# UTF-8, a newline, a backslash, characters that ignore files and globs
# give a meaning to, and names of 255 bytes (off by default, so that a seed
# makes the same changes as before).
NAMES = os.environ.get("CHAOS_NAMES") == "1"
ODD = [" \udcff\udcfe.txt", "new\nline.txt", "back\\slash.txt", "[ab]*?.txt", "#hash.txt", "!bang.txt",
       " trailing ", "\t\x01ctl.txt", "x" * 240 + ".txt"]

def newname(d, ext=".txt"):
    if NAMES and R.random() < 0.25:
        return os.path.join(d, f"n{R.randrange(10**6)}{R.choice(ODD)}")
    return os.path.join(d, f"n{R.randrange(10**6)}{R.choice([ext, ext, ' odd name', '.tmp', '-é'])}")

# Lines of the ignore files CHAOS_IGNORES writes: names and directories
# the changes above make, and `!` lines letting some back in.
IGNORE_LINES = ["*.tmp", "!*.tmp", "s1/", "!s1/", "f1*.txt", "!f12*.txt", "dup*", "!dup1*", "n*",
                "*odd name", "moved*/", "!*.txt", "*.txt", "/d2", "d3/s0/", "!s0/f2*"]
IGNORE_KINDS = [".gitignore", ".ignore", ".simdignore", ".git/info/exclude"]
IGNORES = os.environ.get("CHAOS_IGNORES") == "1"


def op():
    fs, ds = files(), dirs()
    k = R.randrange(31 if IGNORES else 29)
    f = R.choice(fs) if fs else None
    d = R.choice(ds)
    if k == 0 or f is None:
        open(newname(d), "wb").write(text(R.randrange(50, 3000)))
    elif k == 1:
        open(f, "ab").write(text(R.randrange(5, 200)))
    elif k == 2:
        open(f, "wb").write(text(R.randrange(50, 3000)))
    elif k == 3:  # editor's atomic save
        tmp = f + ".swp"
        data = open(f, "rb").read()
        at = R.randrange(len(data) + 1)
        open(tmp, "wb").write(data[:at] + text(20) + data[at:])
        os.rename(tmp, f)
    elif k == 4:
        os.rename(f, newname(R.choice(ds)))
    elif k == 5 and d != root:
        to = os.path.join(R.choice(ds), f"moved{R.randrange(10**6)}")
        if not to.startswith(d + "/"):
            os.rename(d, to)
    elif k == 6 and d != root:
        to = os.path.join(outside, f"out{R.randrange(10**6)}")
        os.rename(d, to)
    elif k == 7:
        outs = os.listdir(outside)
        if outs:
            os.rename(os.path.join(outside, R.choice(outs)), os.path.join(d, f"back{R.randrange(10**6)}"))
    elif k == 8:
        os.remove(f)
    elif k == 9 and d != root:
        shutil.rmtree(d)
    elif k == 10:
        nd = os.path.join(d, f"d{R.randrange(10**6)}", f"e{R.randrange(100)}")
        os.makedirs(nd)
        for _ in range(R.randrange(1, 30)):
            open(newname(nd), "wb").write(text(R.randrange(50, 2000)))
    elif k == 11:
        try:
            os.link(f, newname(R.choice(ds)))
        except OSError:
            pass
    elif k == 12:
        os.symlink(R.choice([f, d, "/usr", "loop"]), newname(d, ".lnk"))
    elif k == 13:
        os.chmod(f, 0)
        time.sleep(R.random() * 0.05)
        os.chmod(f, 0o644)
    elif k == 14:
        os.remove(f)
        os.mkfifo(f)
    elif k == 15:
        os.utime(f)
    elif k == 16 and d != root:
        to = os.path.join(R.choice(ds), f"copy{R.randrange(10**6)}")
        if not to.startswith(d + "/"):
            shutil.copytree(d, to, symlinks=True)
    elif k == 17:
        p = newname(d)
        open(p, "wb").write(text(100))
        os.remove(p)
    elif k == 18:
        open(f, "r+b").truncate(R.randrange(os.path.getsize(f) + 1))
    elif k == 19:
        shutil.copy(f, newname(R.choice(ds)))
    elif k == 20:  # a file written in several writes
        with open(newname(d), "wb") as h:
            for _ in range(R.randrange(2, 6)):
                h.write(text(300)); h.flush(); time.sleep(0.01)
    elif k == 22 and len(fs) > 1:  # renamed over another file
        os.rename(f, R.choice(fs))
    elif k == 23:  # a large file, written in pieces, sometimes changed again at once
        p = newname(d, ".bin")
        with open(p, "wb") as h:
            for _ in range(R.randrange(1, 4)):
                h.write(R.randbytes(1 << 20) if R.random() < 0.5 else text(150000))
        if R.random() < 0.5:
            open(p, "ab").write(text(100))
    elif k == 24:  # a file moved out, or one moved out back in
        outs = [x for x in os.listdir(outside) if os.path.isfile(os.path.join(outside, x))]
        if outs and R.random() < 0.5:
            os.rename(os.path.join(outside, R.choice(outs)), newname(d))
        else:
            os.rename(f, os.path.join(outside, f"file{R.randrange(10**6)}"))
    elif k == 25 and len(fs) > 1:  # two files swapped through a temporary name
        g = R.choice(fs)
        if g != f:
            tmp = f + ".swap"
            os.rename(f, tmp); os.rename(g, f); os.rename(tmp, g)
    elif k == 26 and d != root:  # a directory renamed over an empty one
        e = os.path.join(R.choice(ds), f"empty{R.randrange(10**6)}")
        if not e.startswith(d + "/"):
            os.mkdir(e)
            os.rename(d, e)
    elif k == 27:  # a file changed while it is unreadable (to all but root)
        os.chmod(f, 0)
        try:
            open(f, "ab").write(text(R.randrange(5, 100)))
            time.sleep(R.random() * 0.3)
        finally:
            os.chmod(f, 0o644)
    elif k == 28 and d != root:  # a directory unreadable for a while, its files changed meanwhile
        os.chmod(d, 0)
        try:
            inside = [x for x in fs if x.startswith(d + "/")]
            for g in R.sample(inside, min(len(inside), R.randrange(1, 4))):
                open(g, "ab").write(text(R.randrange(5, 100)))
            if R.random() < 0.5:
                open(newname(d), "wb").write(text(200))
            time.sleep(R.random() * 0.3)
        finally:
            os.chmod(d, 0o755)
    elif k == 29:  # an ignore file written or edited (the exclude file is the tree's own)
        kind = R.choice(IGNORE_KINDS)
        p = os.path.join(root if kind.startswith(".git/") else d, kind)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "a" if R.random() < 0.5 else "w").write("".join(R.choice(IGNORE_LINES) + "\n" for _ in range(R.randrange(1, 4))))
    elif k == 30:  # an ignore file removed
        ps = [os.path.join(dd, n) for dd in ds for n in IGNORE_KINDS if os.path.isfile(os.path.join(dd, n))]
        if ps:
            os.remove(R.choice(ps))
    elif k == 21:  # fifo or symlink back to a file
        ps = [os.path.join(dd, x) for dd in ds for x in os.listdir(dd)
              if stat.S_ISFIFO(os.lstat(os.path.join(dd, x)).st_mode) or os.path.islink(os.path.join(dd, x))]
        if ps:
            p = R.choice(ps); os.remove(p); open(p, "wb").write(text(200))

def start_tree(out):
    """The starting tree used in session 55: 320 text files in 21
    directories, 20 of them copies of one."""
    r = random.Random(5)
    words = "the quick brown fox jumps over lazy dog lorem ipsum dolor sit amet".split()
    for i in range(300):
        d = os.path.join(out, f"d{i % 7}", f"s{i % 3}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "w") as h:
            h.write(" ".join(r.choice(words) for _ in range(r.randrange(100, 800))))
    first = open(os.path.join(out, "d0", "s0", "f0.txt")).read()
    for i in range(20):
        with open(os.path.join(out, f"d{i % 7}", f"dup{i}.txt"), "w") as h:
            h.write(first)


if START_TREE:
    start_tree(START_TREE)
    sys.exit(0)
print(f"random changes: seed {seed}", file=sys.stderr, flush=True)
os.makedirs(outside, exist_ok=True)

# Every file-system call, with its time, when CHAOS_LOG names a file.
LOG = open(os.environ["CHAOS_LOG"], "w") if os.environ.get("CHAOS_LOG") else None


def logged(name, f):
    def g(*a, **k):
        if LOG:
            print(f"{time.time():.6f} {name} {a}", file=LOG, flush=True)
        return f(*a, **k)
    return g


os.rename = logged("rename", os.rename)
os.remove = logged("remove", os.remove)
shutil.rmtree = logged("rmtree", shutil.rmtree)
os.mkfifo = logged("mkfifo", os.mkfifo)
os.chmod = logged("chmod", os.chmod)
os.link = logged("link", os.link)
os.symlink = logged("symlink", os.symlink)
shutil.copytree = logged("copytree", shutil.copytree)
shutil.copy = logged("copy", shutil.copy)
os.makedirs = logged("makedirs", os.makedirs)
open = logged("open", open)
for i in range(ops_n):
    try:
        op()
    except OSError:
        # A path another change took away meanwhile (the walk is not
        # redone after each change): that change is simply not made.
        pass
    if R.random() < 0.3:
        time.sleep(R.random() * 0.03)
