#!/usr/bin/env python3
"""A tree synced over another while `simd watch` follows it: what a release
rsynced into a watched repository costs the daemon.

Usage: tools/bench_sync.py --simd BIN --db IDX --tree COPY --from SRC --onto DST [--rounds 3]

SRC and DST are directories of COPY (e.g. django-5.0 and django-4.2 of ten
Django releases: 6,757 files, most of them with other times than DST's,
so `rsync -a` writes each one to a temporary file and renames it over).
Each round puts DST back as it was (a copy kept outside the tree), brings
IDX up to date with `simd index`, times `rsync -a --delete SRC/ DST/`
alone, puts DST back again, starts `simd watch`, waits until it is ready
and 3 s more, then runs the same rsync and waits until the daemon has
handled everything (daemon.json: nothing pending and no file counted for
1.5 s). It prints, for each round: how long rsync took alone and beside
the daemon, how long after rsync ended the daemon counted its last file,
how many files it counted, and its CPU time from rsync's start until 1.5 s
after that last file (which includes walking the directories rsync set the
times of, done once things settle). With --check, the last round then
compares the live `simd report --format json` with a fresh index's.

COPY must be a scratch copy: DST is rewritten (and put back at the end).
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simd", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--onto", dest="dst", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    src, dst = os.path.join(tree, a.src), os.path.join(tree, a.dst)
    state = os.path.join(a.db, "daemon.json")
    sync = ["rsync", "-a", "--delete", src + "/", dst + "/"]
    keep = tempfile.mkdtemp()
    kept = os.path.join(keep, "dst")
    subprocess.run(["cp", "-a", dst, kept], check=True)

    def put_back():
        subprocess.run(["rsync", "-a", "--delete", kept + "/", dst + "/"], check=True)

    def read_state():
        for _ in range(50):
            try:
                return json.load(open(state))
            except (OSError, ValueError):
                time.sleep(0.002)
        sys.exit("no daemon state")

    files = sum(len(fs) for _, _, fs in os.walk(src))
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(src) for f in fs)
    print(f"rsync -a --delete {a.src}/ {a.dst}/: {files} files, {size / 1e6:.1f} MB")
    try:
        for k in range(a.rounds):
            put_back()
            subprocess.run([a.simd, "--db", a.db, "--quiet", "index", tree], check=True)
            t = time.time()
            subprocess.run(sync, check=True)
            alone = time.time() - t
            put_back()
            subprocess.run([a.simd, "--db", a.db, "--quiet", "index", tree], check=True)
            log = open(os.environ["DAEMON_LOG"], "a") if os.environ.get("DAEMON_LOG") else subprocess.DEVNULL
            d = subprocess.Popen([a.simd, "--db", a.db, "watch"], stderr=log)
            try:
                while not (os.path.exists(state) and read_state().get("ready")):
                    time.sleep(0.05)
                time.sleep(3)

                def cpu():
                    f = open(f"/proc/{d.pid}/stat").read().rsplit(")", 1)[1].split()
                    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

                before = read_state()["changed_files"]
                c0, t0 = cpu(), time.time()
                r = subprocess.Popen(sync)
                last_n, last_t, ended = before, t0, None
                while True:
                    s, now = read_state(), time.time()
                    if ended is None and r.poll() is not None:
                        ended = now
                    if s["changed_files"] != last_n:
                        last_n, last_t = s["changed_files"], now
                    if ended and s["pending"] == 0 and now - max(last_t, ended) > 1.5:
                        break
                    time.sleep(0.003)
                used = cpu() - c0
                print(f"round {k + 1}: rsync {alone:.2f} s alone, {ended - t0:.2f} s beside the daemon; the daemon's "
                      f"last file {1000 * (last_t - ended):.0f} ms after rsync ended; {last_n - before} files counted; "
                      f"daemon CPU {used:.2f} s", flush=True)
            finally:
                d.send_signal(signal.SIGTERM)
                if d.wait() != 0:
                    sys.exit(f"the daemon exited with {d.returncode}")
        if a.check:
            fresh = tempfile.mkdtemp()
            try:
                subprocess.run([a.simd, "--db", fresh, "--quiet", "index", tree], check=True)

                def report(db):
                    out = subprocess.run([a.simd, "--db", db, "--format", "json", "report"], check=True,
                                         capture_output=True).stdout
                    r = json.loads(out)
                    r["index"]["sequence"] = None
                    return r

                same = report(a.db) == report(fresh)
                print("the live report equals a fresh index's" if same else "THE LIVE REPORT DIFFERS from a fresh index's")
                if not same:
                    sys.exit(1)
            finally:
                shutil.rmtree(fresh)
    finally:
        put_back()
        shutil.rmtree(keep)
    print(f"{a.dst} put back; the index lags it until its next run")


if __name__ == "__main__":
    main()
