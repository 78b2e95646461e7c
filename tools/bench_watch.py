#!/usr/bin/env python3
"""Latency of `simd watch`: time from a file write until the live index
answers for it (issue 4's bar: median < 250 ms on a 50k+ file tree,
debounce included).

Usage: tools/bench_watch.py --simd BIN --db IDX --tree TREE [--edits 50]
       tools/bench_watch.py --simd BIN --db IDX --tree TREE --churn 0.10

With --soak SECONDS, instead: for that long, appends a line to 20 files
every second (round robin over the tree; --soak-files N and --soak-every S
change both) and prints the daemon's RSS and CPU time every 30 s (bar: RSS
flat), with what a long-lived index accumulates: its table files, its
manifest, and how long a `simd lost` started then takes. With one file every
1.2 s the daemon flushes after each (it flushes after a quiet second).

With --churn F, instead: 3 s after the daemon is ready, appends a line to a
fraction F of the tree's files (every 1/F-th file in sorted order), then waits until the daemon has handled
that many changed files (daemon.json's changed_files), and prints the
throughput (bytes of the rewritten files per second, from the first write to
the last file handled) beside `simd index`'s first-run throughput (median of
3 runs, warm page cache) on the whole tree and on a copy of just the files
the burst rewrites, measured just before (bar: churn >= 80 % of it), and
once the daemon has stopped and the tree is put back, the whole tree's
first index again: the last line sets the bursts against the mean of the
two (this VM's speed drifts within a run's minutes). It
also prints the daemon's CPU time over the burst (from /proc) against the
first index's CPU time for as many bytes: on a shared VM the CPU a burst
costs drifts less than its wall-clock time. Each run appends a line naming
the run, so the burst is new content (a line written before would be
content the index still holds a record of, and not sketched again).
Each burst's CPU is also split by the daemon's threads (their names, from
/proc: the main thread, notify's; the readers, made per batch, are gone by
then and only in the total). With --bursts N, N such bursts go to one daemon, the files put back (under
the daemon) between them, and a last line gives the range and median of
their throughput and the median of their CPU; the line before it, what all
of it cost the daemon, with RocksDB's flushes ("rocksdb:high") and
compactions ("rocksdb:low") apart: they mostly run after a burst is
handled, outside its own figures, and under steady churn share the cores
with the next one. The first burst goes to a
daemon just started (its block cache cold: every prior record it reads
is a disk read); the later ones to one that has read those records before.
With --churn-edit insert, the line goes in the middle of each file
instead (its second half written again after it): a file grown at its end is
sketched from its earlier sketch (session 42), one edited before its end
from its bytes, so the two measure both kinds of change. With --churn-edit
prepend, the line goes at the start of each file (the file written again
after it), as a changelog gets its new entry: sketched from the earlier
sketch too (session 46).

The daemon's log is discarded unless DAEMON_LOG names a file for it (with
SIMD_LOG=simd=debug, one line per batch with its time).

TREE must be a scratch copy (the script writes files into TREE/.simd-bench-*
and appends lines to files of the tree; never point it at real data). When
it ends it truncates the files it appended to back to their sizes (or
writes back the bytes of those it inserted into) and
removes its scratch directory, so that the tree can be measured again; the
index then lags the tree until its next run. IDX is an index of TREE (made by `simd index`
first, so the daemon's reconcile scan is quick). The script starts
`simd watch`, waits until it is ready, then 50 times writes a new file with
unique content and polls `simd lost --format json FILE` (a read-only query,
~15 ms) until it answers that the file is live in the index; it prints the
median, p90 and max latency, then stops the daemon with SIGTERM.

--probe report | similar: each edit is instead a modified version of a file
of the tree (a copy of a 5-50 KB file with a line appended, so that it links
to the original). The script polls `simd lost` as above until the file is
live, then runs one live `simd report --format json` (or `simd similar
--format json ORIGINAL`) and checks that the new path is among the cluster
members (among the answers). It prints two latencies from the write: until
the index holds the file (a report or query started from then on shows it:
what the user waits for), and until that report or query has finished
(the end-to-end time, which adds the whole report: ~0.25 s on a 66k-file
tree).
"""
import argparse, json, os, resource, signal, statistics, subprocess, sys, time


def own_cgroup(pid):
    """A new cgroup holding process `pid` (cgroup v2's, else v1's cpuacct
    hierarchy), whose CPU time `cgroup_cpu` reads; None where none can be made."""
    for root, stat in (("/sys/fs/cgroup", "cpu.stat"), ("/sys/fs/cgroup/unified", "cpu.stat"),
                       ("/sys/fs/cgroup/cpuacct", "cpuacct.usage")):
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        path = os.path.join(root, f"simd-bench-{os.getpid()}")
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
            if os.path.exists(os.path.join(path, stat)):
                return path
        except OSError:
            pass
        try:
            os.rmdir(path)
        except OSError:
            pass
    return None


def cgroup_cpu(path):
    """CPU seconds used by the processes of cgroup `path` (and those gone from it)."""
    usage = os.path.join(path, "cpuacct.usage")
    if os.path.exists(usage):
        return int(open(usage).read()) / 1e9
    for line in open(os.path.join(path, "cpu.stat")):
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    raise OSError(f"{path}: no CPU usage")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simd", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--churn", type=float)
    ap.add_argument("--churn-edit", choices=["append", "insert", "prepend"], default="append",
                    help="where the burst's line goes in each file (default: at its end)")
    ap.add_argument("--bursts", type=int, default=1, help="with --churn: bursts into one daemon, the files put back between them")
    ap.add_argument("--soak", type=int)
    ap.add_argument("--soak-files", type=int, default=20)
    ap.add_argument("--soak-every", type=float, default=1.0)
    ap.add_argument("--probe", choices=["lost", "report", "similar"], default="lost")
    ap.add_argument("--debounce-ms", type=int, help="passed to simd watch (default: simd's own)")
    a = ap.parse_args()
    tree = os.path.realpath(a.tree)
    if a.churn:
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs
                       if os.path.isfile(os.path.join(r, f)) and not os.path.islink(os.path.join(r, f)))
        step = max(1, round(1 / a.churn))
        churn = files[::step]
        nbytes = sum(os.path.getsize(f) for f in churn)
        # Baselines (medians of 3, warm page cache, as tools/bench_index.sh
        # measures): a first index of the whole tree, and of a copy of just
        # the files the burst rewrites (the same work as the burst: every
        # file a new content).
        import shutil, tempfile
        for f in files:
            with open(f, "rb") as h:
                while h.read(1 << 20):
                    pass

        def first_index(root):
            # Wall-clock and CPU time (user + system) medians.
            times, cpus = [], []
            for _ in range(3):
                base = tempfile.mkdtemp()
                try:
                    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t = time.time()
                    subprocess.run([a.simd, "--db", os.path.join(base, "idx"), "--quiet", "index", root], check=True)
                    times.append(time.time() - t)
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
                finally:
                    shutil.rmtree(base)
            return statistics.median(times), statistics.median(cpus)

        first, first_cpu = first_index(tree)
        total = sum(os.path.getsize(f) for f in files)
        print(f"simd index, first run: {total/1e6:.0f} MB in {first:.2f} s = {total/1e6/first:.0f} MB/s "
              f"({1e9 * first_cpu / total:.2f} CPU-ms a MB)")
        copy = tempfile.mkdtemp()
        try:
            for k, f in enumerate(churn):
                d = os.path.join(copy, str(k % 100))
                os.makedirs(d, exist_ok=True)
                shutil.copyfile(f, os.path.join(d, f"{k}-{os.path.basename(f)}"))
            same, same_cpu = first_index(copy)
        finally:
            shutil.rmtree(copy)
        print(f"simd index, first run of just the burst's {len(churn)} files: {nbytes/1e6:.0f} MB in {same:.2f} s "
              f"= {nbytes/1e6/same:.0f} MB/s ({1e9 * same_cpu / nbytes:.2f} CPU-ms a MB)")
    # What the script changes in TREE, put back when it ends (after the
    # daemon has stopped), so that the tree can be measured again: the
    # size of every file it appends to, and its scratch directory.
    appended = {}
    # The bytes of the files the burst inserted a line into.
    inserted = {}
    work = os.path.join(tree, f".simd-bench-{os.getpid()}")
    # Every line the script writes names this run, so that what it writes
    # is new content each time: a later run writing the same bytes again
    # would find their contents still recorded (the index keeps a lost
    # content's record for `simd lost`), and the daemon takes a known
    # content's sketch from its record instead of shingling it, work a
    # real change costs.
    run = f"{os.getpid()} {time.time_ns()}"

    # Each burst's throughput (bytes a second), set against the first
    # index measured again once the daemon has stopped and the tree is
    # put back.
    rates = []

    def restore():
        for f, size in appended.items():
            os.truncate(f, size)
        for f, data in inserted.items():
            with open(f, "wb") as h:
                h.write(data)

    def append(f, line):
        appended.setdefault(f, os.path.getsize(f))
        with open(f, "ab") as h:
            h.write(line)

    debounce = ["--debounce-ms", str(a.debounce_ms)] if a.debounce_ms is not None else []
    # The daemon's log goes to DAEMON_LOG when set (e.g. with SIMD_LOG=simd=debug).
    log = open(os.environ["DAEMON_LOG"], "wb") if os.environ.get("DAEMON_LOG") else subprocess.DEVNULL
    d = subprocess.Popen([a.simd, "--db", a.db, "watch", *debounce, tree], stderr=log)
    cgroup = None
    try:
        state = os.path.join(a.db, "daemon.json")
        t0 = time.time()
        while True:
            try:
                if json.load(open(state)).get("ready"):
                    break
            except (OSError, ValueError):
                pass
            if d.poll() is not None:
                sys.exit(f"the daemon exited with status {d.returncode} before it was ready")
            if time.time() - t0 > 600:
                sys.exit("daemon not ready after 600 s")
            time.sleep(0.05)
        print(f"daemon ready after {time.time() - t0:.1f} s", file=sys.stderr)

        # The daemon's CPU time so far (user + system, all its threads): on
        # a shared VM it drifts less than wall-clock time. From a cgroup of
        # its own where this user may make one (nanoseconds; the daemon's
        # threads, made later, are in it too), else from /proc, in clock
        # ticks of 10 ms: a burst's ~0.25 s moved by 4 % a tick.
        cgroup = own_cgroup(d.pid)

        def daemon_stat():
            # /proc/PID/stat's fields after the command's name (from its state on).
            return open(f"/proc/{d.pid}/stat").read().rsplit(")", 1)[1].split()

        def daemon_cpu():
            if cgroup:
                return cgroup_cpu(cgroup)
            fields = daemon_stat()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def daemon_threads():
            # CPU nanoseconds of each of the daemon's threads, summed by
            # thread name (schedstat's first field: time on a CPU), so that
            # a burst's CPU can be split between the ingest pipeline and
            # RocksDB's flushes ("rocksdb:high") and compactions ("rocksdb:low").
            out = {}
            base = f"/proc/{d.pid}/task"
            for tid in os.listdir(base):
                try:
                    name = open(f"{base}/{tid}/comm").read().strip()
                    ns = int(open(f"{base}/{tid}/schedstat").read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                out[name] = out.get(name, 0) + ns
            return out

        def daemon_faults():
            # Minor page faults, all its threads: fresh memory touched.
            return int(daemon_stat()[7])

        if a.soak:
            files = sorted(os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs
                           if os.path.isfile(os.path.join(r, f)) and not os.path.islink(os.path.join(r, f)))
            def sample():
                rss = next(l.split()[1] for l in open(f"/proc/{d.pid}/status") if l.startswith("VmRSS"))
                return int(rss) // 1024, daemon_cpu()

            def shape():
                # The index's table files and manifest, and a reader's open.
                dbdir = os.path.join(a.db, "db")
                names = os.listdir(dbdir)
                tables = sum(n.endswith(".sst") for n in names)
                manifest = sum(os.path.getsize(os.path.join(dbdir, n)) for n in names if n.startswith("MANIFEST"))
                t = time.time()
                subprocess.run([a.simd, "--db", a.db, "lost", files[0]], capture_output=True)
                return tables, manifest // 1024, 1000 * (time.time() - t)
            t0, k, last = time.time(), 0, 0
            while time.time() - t0 < a.soak:
                # Sampled before the round's appends: the daemon has had
                # the pause since the last ones.
                if time.time() - last >= 30:
                    rss, cpu = sample()
                    tables, manifest, lost = shape()
                    print(f"t={time.time()-t0:5.0f} s  files touched {k:6d}  RSS {rss} MB  CPU {cpu:.1f} s  "
                          f"table files {tables}  manifest {manifest} KiB  lost {lost:.0f} ms", flush=True)
                    last = time.time()
                for _ in range(a.soak_files):
                    append(files[k % len(files)], f"\n# soak {run}\n".encode())
                    k += 1
                time.sleep(a.soak_every)
            return
        def one_burst(burst):
            # The daemon's start-up work settles first: its scan's flush
            # and the compactions after it (after an earlier run of this
            # script, which puts the tree back behind the index's back, a
            # scan that reads the burst's files again) ran on beside the
            # burst (`perf record` of a burst: compactions among its
            # samples).
            time.sleep(3)
            before = handled()
            # The burst's files are read, as the baselines read them
            # warm: this VM's page cache is reclaimed within a minute of
            # idleness (fincore: 2,684 of Django's 66,577 files still
            # cached a minute after a run), and an append to a file whose
            # last page left the cache reads it from disk first; such a
            # cold burst took 0.2-0.7 s to write, where a warm one takes
            # ~0.09 s, and the daemon's reads of it were as cold.
            for f in churn:
                with open(f, "rb") as h:
                    while h.read(1 << 20):
                        pass
            # The daemon's CPU time over the burst, read again once it has
            # handled every file: comparable with the first index's CPU a MB.
            cpu0, faults0, threads0 = daemon_cpu(), daemon_faults(), daemon_threads()
            line = f"\n# churn {run} {burst}\n".encode()
            t = time.time()
            if a.churn_edit == "append":
                for f in churn:
                    with open(f, "ab") as h:
                        h.write(line)
            else:
                # In place from the middle on, as an editor saving over its
                # file may: truncating each file first and writing it whole
                # took ~0.65 s for the 2,482 files of the generated corpus's
                # burst, which the daemon then absorbed as fast as it came.
                for f in churn:
                    data = inserted[f]
                    at = len(data) // 2 if a.churn_edit == "insert" else 0
                    with open(f, "r+b") as h:
                        h.seek(at)
                        h.write(line + data[at:])
            wrote = time.time() - t
            wait_handled(before, t, "churn")
            took = time.time() - t
            burst_cpu, burst_faults = daemon_cpu() - cpu0, daemon_faults() - faults0
            threads = daemon_threads()
            split = sorted(((n, (ns - threads0.get(n, 0)) / 1e9) for n, ns in threads.items()), key=lambda x: -x[1])
            print(f"churn: {len(churn)} files, {nbytes/1e6:.0f} MB absorbed in {took:.2f} s = {nbytes/1e6/took:.0f} MB/s "
                  f"({100 * (nbytes/took) / (total/first):.0f} % of the first-run throughput; "
                  f"{100 * same / took:.0f} % of that of just the burst's files)")
            # The burst cannot be absorbed before it is written: how long
            # the writes took, and how far behind them the daemon ended.
            print(f"writing the burst took {wrote:.2f} s; the daemon had handled every file "
                  f"{1000 * (took - wrote):.0f} ms after the last write (the debounce included)")
            print(f"the daemon's CPU over the burst: {burst_cpu:.3f} s = {1e9 * burst_cpu / nbytes:.2f} CPU-ms a MB "
                  f"({burst_cpu / (first_cpu * nbytes / total):.2f} x the first index's, "
                  f"{burst_cpu / same_cpu:.2f} x that of just the burst's files, every one new content there "
                  f"too, where the whole tree's copies of a content are not sketched again; "
                  + ("measured in its own cgroup)" if cgroup else
                     f"counted in clock ticks of {1000 / os.sysconf('SC_CLK_TCK'):.0f} ms)"))
            print(f"the daemon's minor page faults over the burst: {burst_faults}")
            print("the daemon's CPU by thread over the burst: "
                  + ", ".join(f"{n} {cpu:.3f} s" for n, cpu in split if cpu >= 0.001))
            rates.append(nbytes / took)
            return 100 * (nbytes / took) / (total / first), burst_cpu

        if a.churn:
            # The sizes (or bytes) to put back, noted once (each burst
            # edits the files as they were before the first) and before
            # any clock starts: a stat per file inside the burst made the
            # writes ~40 % slower (0.12-0.17 s against ~0.08 s), time the
            # daemon could not absorb anything it had not been given yet.
            for f in churn:
                if a.churn_edit == "append":
                    appended.setdefault(f, os.path.getsize(f))
                else:
                    with open(f, "rb") as h:
                        inserted.setdefault(f, h.read())

            def handled():
                return json.load(open(state))["changed_files"]

            def wait_handled(before, t, what):
                while handled() - before < len(churn):
                    if time.time() - t > 600:
                        sys.exit(f"{what} not absorbed after 600 s")
                    time.sleep(0.005)

            shares, cpus = [], []
            all_cpu0, all_threads0 = daemon_cpu(), daemon_threads()
            for burst in range(a.bursts):
                if burst > 0:
                    # The files put back as they were, under the daemon
                    # (contents it holds records of: no sketch to make),
                    # before the next burst edits them again.
                    before, t = handled(), time.time()
                    restore()
                    wait_handled(before, t, "putting the files back")
                    time.sleep(1)
                share, cpu = one_burst(burst)
                shares.append(share)
                cpus.append(cpu)
            # What the bursts (and the putting back between them) cost in
            # all, RocksDB's flushes and compactions included, which mostly
            # run after a burst is handled: under steady churn they share
            # the cores with the next one. The daemon flushes after a quiet
            # second; its compactions follow.
            time.sleep(5)
            all_cpu, threads = daemon_cpu() - all_cpu0, daemon_threads()
            rocks = {n: (ns - all_threads0.get(n, 0)) / 1e9 for n, ns in threads.items() if n.startswith("rocksdb:")}
            print(f"the daemon's CPU over all {a.bursts} bursts, the files put back between them and 5 s after: "
                  f"{all_cpu:.3f} s, of which RocksDB's flushes {rocks.get('rocksdb:high', 0):.3f} s and "
                  f"compactions {rocks.get('rocksdb:low', 0):.3f} s")
            if a.bursts > 1:
                print(f"{a.bursts} bursts: {min(shares):.0f}-{max(shares):.0f} %, median "
                      f"{statistics.median(shares):.0f} % of the first-run throughput (bar 80 %), "
                      f"{sum(x >= 80 for x in shares)} at 80 % or more; the daemon's CPU median "
                      f"{statistics.median(cpus):.3f} s (the first burst, into a daemon just started, "
                      f"{shares[0]:.0f} % and {cpus[0]:.3f} s)")
            try:
                q = open("/proc/sys/fs/inotify/max_queued_events").read().strip()
                print(f"fs.inotify.max_queued_events = {q} (a burst beyond it overflows into a rescan; "
                      "see docs/operations.md)")
            except OSError:
                pass
            return
        os.makedirs(work)
        time.sleep(1)
        lat, ends = [], []
        originals = []
        if a.probe != "lost":
            for r, _, fs in os.walk(tree):
                if r.startswith(work):
                    continue
                for f in sorted(fs):
                    q = os.path.join(r, f)
                    if f.endswith(".py") and os.path.isfile(q) and 5000 <= os.path.getsize(q) <= 50000:
                        originals.append(q)
            originals = sorted(originals)[:: max(1, len(originals) // a.edits)][: a.edits]

        def live(p):
            # `simd lost PATH` answers "live" once the file is in the index.
            r = subprocess.run([a.simd, "--db", a.db, "--format", "json", "lost", p], capture_output=True)
            return r.returncode == 0 and json.loads(r.stdout).get("state") == "live"

        def shows(p, i):
            if a.probe == "similar":
                r = subprocess.run([a.simd, "--db", a.db, "--format", "json", "similar", originals[i]],
                                   capture_output=True)
                return r.returncode == 0 and p.encode() in r.stdout
            # The edit is in no identical set, so its path in the report is
            # a cluster member's (a byte search: parsing 10 MB of JSON in
            # Python would cost more than the report).
            r = subprocess.run([a.simd, "--db", a.db, "--format", "json", "report"], capture_output=True)
            return r.returncode == 0 and json.dumps(p).encode() in r.stdout

        if a.probe == "report":
            # Warm the analysis cache: the bar is about keeping up, not the
            # first analysis of the tree.
            subprocess.run([a.simd, "--db", a.db, "--format", "json", "report"], capture_output=True, check=True)
        for i in range(a.edits):
            p = os.path.join(work, f"edit{i}.txt")
            if a.probe == "lost":
                body = os.urandom(8000).hex().encode()
            else:
                body = open(originals[i], "rb").read() + f"\n# edit {i} {run}\n".encode()
            start = time.time()
            with open(p, "wb") as f:
                f.write(body)
            while not live(p):
                if time.time() - start > 30:
                    sys.exit(f"{p}: not indexed after 30 s")
            lat.append(time.time() - start)
            if a.probe != "lost":
                if not shows(p, i):
                    sys.exit(f"{p}: live in the index but not in the {a.probe} started after")
                ends.append(time.time() - start)
            time.sleep(0.2)

        def stats(v):
            v = sorted(v)
            return (f"median {statistics.median(v)*1000:.0f} ms, p90 {v[int(len(v)*0.9)-1]*1000:.0f} ms, "
                    f"max {v[-1]*1000:.0f} ms")
        print(f"write -> the index holds it ({a.probe} started then shows it), {len(lat)} edits: {stats(lat)}")
        if ends:
            print(f"write -> that {a.probe} has finished: {stats(ends)}")
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
        print(f"daemon exit code {d.returncode}", file=sys.stderr)
        if cgroup:
            try:
                os.rmdir(cgroup)
            except OSError:
                pass
        # The tree as it was (the index is not: its next run catches up).
        restore()
        if os.path.isdir(work):
            import shutil
            shutil.rmtree(work)
        if appended or inserted:
            print(f"restored {len(appended) + len(inserted)} edited files of {tree}", file=sys.stderr)
        # Not on the way out of an error or an interrupt.
        if a.churn and len(rates) == a.bursts and sys.exc_info()[0] is None:
            # This VM's speed drifts within the minutes a run takes, and a
            # baseline measured before the bursts alone moves a run's
            # median with it (session 67: 50-93 % from run to run, the
            # same binary). The whole tree's first index again, the daemon
            # stopped and the tree as it was:
            again, _ = first_index(tree)
            mean = (total / first + total / again) / 2
            against = sorted(100 * r / mean for r in rates)
            print(f"simd index, first run again after the bursts: {total/1e6/again:.0f} MB/s "
                  f"(before them {total/1e6/first:.0f} MB/s); the bursts against the mean of the two: "
                  f"{against[0]:.0f}-{against[-1]:.0f} %, median {statistics.median(against):.0f} %")


if __name__ == "__main__":
    main()
