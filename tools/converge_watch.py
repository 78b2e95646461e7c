#!/usr/bin/env python3
"""Does the live index keep up with a scenario? Runs shell commands against a
watched tree, then checks that the daemon's live `simd report --format json`
equals that of a fresh `simd index` of the tree as it is then.

Usage: tools/converge_watch.py --simd BIN --tree TREE --scenario 'SHELL' [--runs N]
       [--setup 'SHELL'] [--wait 60] [--kill SECONDS] [--user NAME]

Each run: `--setup` in TREE (e.g. `git checkout -q -f a && git clean -qfdx`),
a fresh index of TREE in a scratch directory, `simd watch` started on it
(its log at SIMD_LOG, default simd=info, in WORK/daemon.log), the scenario
run in TREE with bash (it must wait for what it starts: the tree is indexed
afresh as soon as it returns), then the live report compared with the
fresh index's every second for up to `--wait` seconds, and `simd check` run
on the live index. With `--kill SECONDS`, the daemon is killed (SIGKILL)
at a random moment in the scenario's first SECONDS and started again at
once, as systemd's `Restart=on-failure` does: its reconcile scan must catch
up with what happened while it was down and what happens during the scan.
With `--user NAME` (run as root), every simd command runs as that user
(the scratch directory is given to it), so that the files a scenario makes
unreadable for a moment are unreadable to the daemon. The first run that does not converge, or whose index
`simd check` finds inconsistent, stops the script (exit 1) and keeps both reports (live.json, want.json) and the daemon's
log in WORK.

Session 51 found with it, in a git repository of two Django releases
(`--setup 'git checkout -q -f a && git clean -qfdx'`):
- `cp -r` of a release beside `git checkout`s and a directory moved out and
  back: files the checkout deleted stayed in the index (1 run in 2-4);
- files appended to during the daemon's first scan were never indexed.

TREE must be a scratch copy: the scenario changes it.
"""
import argparse, json, os, random, shutil, signal, subprocess, sys, tempfile, threading, time

# Keyword arguments of every subprocess that runs simd (`--user`).
AS = {}


def report(simd, db):
    p = subprocess.run([simd, "--db", db, "--format", "json", "report"], capture_output=True, **AS)
    if p.returncode != 0:
        print(f"simd report failed on {db}: {p.stderr.decode(errors='replace')[-2000:]}", flush=True)
        return None
    r = json.loads(p.stdout)
    r["index"]["sequence"] = None
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--simd", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--setup", default="")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--wait", type=float, default=60)
    ap.add_argument("--work", help="scratch directory (default: a new one under /tmp)")
    ap.add_argument("--kill", type=float, metavar="SECONDS",
                    help="SIGKILL the daemon at a random moment in the scenario's first SECONDS, and restart it")
    ap.add_argument("--user", help="run every simd command as this user (needs root)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="simd-converge-")
    os.makedirs(work, exist_ok=True)
    if a.user:
        import pwd
        pw = pwd.getpwnam(a.user)
        AS.update(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        os.chown(work, pw.pw_uid, pw.pw_gid)
    db, fresh, log = os.path.join(work, "db"), os.path.join(work, "fresh"), os.path.join(work, "daemon.log")
    env = dict(os.environ, SIMD_LOG=os.environ.get("SIMD_LOG", "simd=info"))
    for run in range(1, a.runs + 1):
        if a.setup:
            subprocess.run(["bash", "-c", a.setup], cwd=a.tree, check=True)
        shutil.rmtree(db, ignore_errors=True)
        subprocess.run([a.simd, "--db", db, "--quiet", "index", a.tree], check=True, **AS)
        open(log, "w").close()

        def start():
            with open(log, "a") as lf:
                return subprocess.Popen([a.simd, "--db", db, "watch", a.tree], stderr=lf,
                                        stdout=subprocess.DEVNULL, env=env, **AS)
        daemon = start()
        killer, killed = None, []
        if a.kill:
            def kill(at=random.uniform(0, a.kill)):
                nonlocal daemon
                time.sleep(at)
                daemon.send_signal(signal.SIGKILL)
                daemon.wait()
                with open(log, "a") as lf:
                    print(f"converge_watch: SIGKILL {at:.2f} s into the scenario; started again", file=lf)
                daemon = start()
                killed.append(at)
            killer = threading.Thread(target=kill)
        try:
            state = os.path.join(db, "daemon.json")
            until = time.time() + 60
            while not (os.path.exists(state) and json.load(open(state)).get("ready")):
                if time.time() > until:
                    sys.exit(f"run {run}: the daemon was not ready after 60 s (log: {log})")
                time.sleep(0.05)
            t = time.time()
            if killer:
                killer.start()
            subprocess.run(["bash", "-c", a.scenario], cwd=a.tree, check=True)
            ran = time.time() - t
            if killer:
                killer.join()
            shutil.rmtree(fresh, ignore_errors=True)
            subprocess.run([a.simd, "--db", fresh, "--quiet", "index", a.tree], check=True, **AS)
            want, got, tries = report(a.simd, fresh), None, 0
            while time.time() - t - ran < a.wait:
                tries += 1
                got = report(a.simd, db)
                if got == want:
                    break
                time.sleep(1)
            check = subprocess.run([a.simd, "--db", db, "check"], capture_output=True, text=True, **AS)
            said = (check.stdout + check.stderr).strip().splitlines()
            if check.returncode != 0:
                print(f"run {run}: `simd check` found the live index inconsistent: {' / '.join(said[-5:])}")
                sys.exit(1)
            if got != want:
                for name, r in (("live.json", got), ("want.json", want)):
                    with open(os.path.join(work, name), "w") as f:
                        json.dump(r, f, indent=1)
                print(f"run {run}: NOT converged {a.wait:.0f} s after the scenario ({ran:.1f} s); "
                      f"live {got and got['index']}, fresh {want and want['index']}; "
                      f"check: {said[-1] if said else ''}; reports and log in {work}")
                sys.exit(1)
            kills = f", killed at {killed[0]:.2f} s" if killed else ""
            print(f"run {run}: converged (scenario {ran:.1f} s{kills}, {tries} report(s)); "
                  f"check: {said[-1] if said else ''}", flush=True)
        finally:
            daemon.terminate()
            daemon.wait()
    shutil.rmtree(fresh, ignore_errors=True)


if __name__ == "__main__":
    main()
