//! `simd watch` with the real daemon process and the real notify watcher on
//! a temp dir: after every kind of change, the live index converges to what
//! a fresh `simd index` of the same tree holds.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::{boilerplate_articles, files_of, next_second, noise, text, write_keeping_stat, Env};
use simd::store::{Access, History, HistoryRecord, Store};

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(env: &Env) -> Daemon {
    start_with(env, 50)
}

/// Daemons start under a read lock; a test that lowers one of inotify's
/// limits for a moment holds it for writing, so that no other daemon
/// starts (and creates its inotify instance or its watches) meanwhile.
static LIMITS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A sysctl under /proc/sys/fs/inotify set for as long as this lives.
struct Lowered {
    path: String,
    old: String,
}

impl Lowered {
    fn set(name: &str, value: &str) -> Lowered {
        let path = format!("/proc/sys/fs/inotify/{name}");
        let old = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, value).unwrap();
        Lowered { path, old }
    }
}

impl Drop for Lowered {
    fn drop(&mut self) {
        std::fs::write(&self.path, self.old.trim()).unwrap();
    }
}

/// Waits until the daemon of `env` says it is ready.
fn wait_ready(env: &Env, log: Option<&std::path::Path>) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if simd::watch::DaemonState::running(&env.db).is_some_and(|s| s.ready) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = log.map(|l| std::fs::read_to_string(l).unwrap_or_default()).unwrap_or_default();
    panic!("the daemon did not become ready\n{log}");
}

/// [`start`], its log (at the default level) in the returned file.
fn start_logged(env: &Env) -> (Daemon, std::path::PathBuf) {
    let log = env.tmp.path().join("daemon.log");
    let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
    (spawn(env, &["--debounce-ms", "50", env.root.to_str().unwrap()], Some(&log), false), log)
}

fn start_with(env: &Env, debounce_ms: u64) -> Daemon {
    let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
    spawn(env, &["--debounce-ms", &debounce_ms.to_string(), env.root.to_str().unwrap()], None, false)
}

/// Asserts that the live index's last history record of `rel` (under the
/// tree) is a move to a path ending in `to`; returns the old path.
fn assert_moved(env: &Env, rel: &str, to: &str) -> std::path::PathBuf {
    let old = env.root.canonicalize().unwrap().join(rel);
    let s = Store::open(&env.db, Access::Read, None).unwrap();
    let hist: Vec<_> = s.history_of(old.to_str().unwrap().as_bytes()).map(|r| r.unwrap().1).collect();
    assert!(
        matches!(hist.last(), Some(HistoryRecord::Moved { to: t, content: Some(_) }) if t.ends_with(to.as_bytes())),
        "{hist:?}"
    );
    old
}

/// A tree of one file and a daemon of `debounce_ms` on it, its live index
/// caught up (the daemon is declared last, so it stops before the tree goes).
fn one_file_watched(debounce_ms: u64) -> (Env, Daemon) {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let daemon = start_with(&env, debounce_ms);
    converges(&env, "start");
    (env, daemon)
}

/// Starts `simd watch ARGS` (roots among them) on `env` and waits until it is ready, its
/// log in `log` (else inherited). With `as_nobody` it runs as nobody (uid
/// 65534), for whom the tree and the index's parent are opened up: root
/// reads any file whatever its mode, and inotify's per-user watch count
/// starts at 0 for nobody. The caller holds [`LIMITS`].
fn spawn(env: &Env, args: &[&str], log: Option<&std::path::Path>, as_nobody: bool) -> Daemon {
    use std::os::unix::fs::PermissionsExt;
    let bin = assert_cmd::cargo::cargo_bin("simd");
    let cmd = if as_nobody {
        for p in [env.tmp.path(), env.root.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    start_command(env, cmd, args, log)
}

/// Runs `CMD --db DB watch ARGS` for `env` (CMD is simd, or a command that
/// runs it) and waits until the daemon is ready, its log in `log` (else
/// inherited).
fn start_command(env: &Env, mut cmd: Command, args: &[&str], log: Option<&std::path::Path>) -> Daemon {
    cmd.arg("--db").arg(&env.db).arg("watch").args(args);
    if let Some(log) = log {
        cmd.env_remove("SIMD_LOG").stderr(std::fs::File::create(log).unwrap());
    }
    let d = Daemon(cmd.spawn().unwrap());
    wait_ready(env, log);
    d
}

/// How many files the running daemon of `env` has handled so far.
fn changed_files(env: &Env) -> u64 {
    simd::watch::DaemonState::running(&env.db).unwrap().changed_files
}

/// (path, content) of every file, and every posting, of an index.
type IndexState = (Vec<(Vec<u8>, String)>, Vec<String>);

/// The state of an index, for comparison.
fn state(db: &std::path::Path) -> Option<IndexState> {
    let s = Store::open(db, Access::Read, None).ok()?;
    Some((files_of(&s), super::postings(&s)))
}

/// Waits until the live index equals a fresh index of the same tree.
fn converges(env: &Env, what: &str) {
    converges_to(env, &[&env.root], what)
}

/// The state of a fresh index of `roots`.
fn state_of_fresh(env: &Env, roots: &[&std::path::Path]) -> IndexState {
    let fresh = env.tmp.path().join("fresh");
    let _ = std::fs::remove_dir_all(&fresh);
    // A walk that blocks fails the test rather than hanging it.
    let walk = env
        .simd()
        .arg("--db")
        .arg(&fresh)
        .args(["--quiet", "index"])
        .args(roots)
        .timeout(Duration::from_secs(120))
        .assert();
    walk.success();
    state(&fresh).unwrap()
}

/// Waits until the live index equals a fresh index of `roots`.
fn converges_to(env: &Env, roots: &[&std::path::Path], what: &str) {
    let want = state_of_fresh(env, roots);
    let fresh = env.tmp.path().join("fresh");
    // Generous: CI machines can be slow; a converged index returns at once.
    let until = Instant::now() + Duration::from_secs(60);
    let mut got = None;
    while Instant::now() < until {
        got = state(&env.db);
        if got.as_ref() == Some(&want) {
            // And what an administrator reads: the live report (a reader
            // beside the daemon) equals the fresh index's, but for the
            // index's sequence number.
            let report = |db: &std::path::Path| {
                let out = env.simd().arg("--db").arg(db).args(["--format", "json", "report"]).assert().success();
                let mut r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
                r["index"]["sequence"] = serde_json::Value::Null;
                r
            };
            let (live, fresh) = (report(&env.db), report(&fresh));
            assert_eq!(live, fresh, "after {what}: the live report differs from a fresh index's");
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Show only the differences: trees here hold thousands of files.
    let (live_files, live_postings) = got.unwrap_or_default();
    let only = |a: &[(Vec<u8>, String)], b: &[(Vec<u8>, String)]| -> Vec<String> {
        a.iter()
            .filter(|x| !b.contains(x))
            .take(10)
            .map(|(p, c)| format!("{} {c}", String::from_utf8_lossy(p)))
            .collect()
    };
    panic!(
        "after {what}: the live index did not converge: {} live files, {} fresh; {} vs {} postings\nonly live: {:?}\nonly fresh: {:?}",
        live_files.len(),
        want.0.len(),
        live_postings.len(),
        want.1.len(),
        only(&live_files, &want.0),
        only(&want.0, &live_files)
    );
}

#[test]
fn a_file_saved_in_several_writes_is_read_once() {
    use std::io::Write;
    // A debounce far longer than the writes take, so that a slow machine
    // cannot split them.
    let (env, _daemon) = one_file_watched(1000);
    let changed = || changed_files(&env);
    let before = changed();
    let mut f = std::fs::File::create(env.root.join("saved.txt")).unwrap();
    for i in 0..5 {
        f.write_all(&text(10 + i, 200)).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(f);
    converges(&env, "a file saved in five writes");
    // Had any write been handled alone, a later one would follow within the
    // debounce: wait it out before counting.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(changed() - before, 1, "five writes, one read");
}

/// A file closed after writing is read at its close, not once its events
/// are a debounce old (here 3 s), and once only: the debouncer's events
/// for it are dropped when nothing happened to it since. A second save
/// soon after the first is left to the debouncer, and read then.
#[test]
fn a_file_is_read_when_its_writer_closes_it_and_once() {
    use std::io::Write;
    let (env, _daemon) = one_file_watched(3000);
    let changed = || changed_files(&env);
    let has = |name: &str, body: &[u8]| {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        let want = simd::fingerprint::fingerprint_bytes(body, s.params()).content.to_string();
        files_of(&s).iter().any(|(p, c)| p.ends_with(name.as_bytes()) && *c == want)
    };
    let before = changed();
    let written = Instant::now();
    let body = text(10, 400);
    let mut f = std::fs::File::create(env.root.join("saved.txt")).unwrap();
    f.write_all(&body).unwrap();
    drop(f);
    while !has("/saved.txt", &body) {
        assert!(written.elapsed() < Duration::from_millis(2500), "not read before the 3 s debounce");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The debouncer's events come 3 s after the writes: nothing to read.
    std::thread::sleep(Duration::from_millis(4000));
    assert_eq!(changed() - before, 1, "read at its close, and only then");
    converges(&env, "a file read at its close");

    // Saved twice, 50 ms apart: the first save is read at its close, the
    // second after the debounce, and the index ends with the second.
    let before = changed();
    for (i, seed) in [11, 12].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::write(env.root.join("twice.txt"), text(seed, 400)).unwrap();
    }
    converges(&env, "a file saved twice");
    assert!(has("/twice.txt", &text(12, 400)));
    std::thread::sleep(Duration::from_millis(500));
    assert!(changed() - before <= 2, "{} reads", changed() - before);

    // Written to a temporary file and moved over the document at once
    // (rsync, editors, `sed -i`): read under its final name only, and the
    // temporary name leaves no lost-and-found record.
    let tmp = env.root.join(".saved.txt.tmp-1");
    std::fs::write(&tmp, text(13, 400)).unwrap();
    std::fs::rename(&tmp, env.root.join("saved.txt")).unwrap();
    converges(&env, "a temporary file moved into place");
    let out = env.simd().args(["--format", "json", "lost"]).arg(&tmp).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["state"], "unknown", "{r:#}");
}

/// A document saved the way editors and downloaders save (a temporary
/// file written, synced, and renamed over the document some tens of
/// milliseconds after its close, when the daemon has already read it): the
/// rename is a move of what was read, so the document is not read again and
/// the temporary name leaves a move in the lost and found, not a deleted
/// file. (A debounce of 1 s keeps the rename well within the time the
/// debouncer may still hold the temporary file's creation. The name is
/// rsync's kind: a swap file's or a partial download's is clutter, never
/// read, `scan::is_clutter`.)
#[test]
fn a_temporary_file_renamed_over_a_document_after_it_was_read_is_a_move() {
    let (env, _daemon) = one_file_watched(1000);
    let tmp = env.root.join(".a.txt.4Fz9Qp");
    let body = text(14, 400);
    let want = {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        simd::fingerprint::fingerprint_bytes(&body, s.params()).content.to_string()
    };
    let before = changed_files(&env);
    std::fs::write(&tmp, &body).unwrap();
    let written = Instant::now();
    loop {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        if files_of(&s).iter().any(|(p, c)| p.ends_with(b"/.a.txt.4Fz9Qp") && *c == want) {
            break;
        }
        assert!(written.elapsed() < Duration::from_millis(900), "the temporary file was not read at its close");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::rename(&tmp, env.root.join("a.txt")).unwrap();
    converges(&env, "a temporary file renamed over a document");
    assert_moved(&env, ".a.txt.4Fz9Qp", "/a.txt");
    let out = env.simd().args(["--format", "json", "lost"]).arg(&tmp).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["files"][0]["candidates"][0]["kind"], "moved", "{r:#}");
    // The debouncer's events come a second after the writes; wait them out.
    std::thread::sleep(Duration::from_millis(2000));
    // The temporary file new, moved over the document, the document's old
    // content removed; the debouncer's events then change nothing.
    assert_eq!(changed_files(&env) - before, 3);
    converges(&env, "after the debouncer's events");
}

/// A large download: written under a temporary name, closed, and renamed
/// while the daemon reads it (in the background, as any file of 16 MiB or
/// more). The read goes on under the new name; the file is read once, not
/// again under its new name. (What the daemon read is `rchar` in
/// /proc/PID/io.)
#[test]
fn a_large_file_renamed_while_it_is_read_is_read_once() {
    let (env, daemon) = one_file_watched(50);
    let read_bytes = || {
        let io = std::fs::read_to_string(format!("/proc/{}/io", daemon.0.id())).unwrap();
        io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().trim().parse::<u64>().unwrap()
    };
    let body = noise(5, 96 << 20);
    let (part, done) = (env.root.join(".dl.iso.Hq2Wm7"), env.root.join("dl.iso"));
    let before = read_bytes();
    std::fs::write(&part, &body).unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while simd::watch::DaemonState::running(&env.db).unwrap().reading == 0 {
        assert!(Instant::now() < until, "the daemon never began to read the file");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::fs::rename(&part, &done).unwrap();
    converges(&env, "a large file renamed while it was read");
    std::thread::sleep(Duration::from_millis(500));
    converges(&env, "and after the debouncer's events");
    let read = read_bytes() - before;
    assert!(read < body.len() as u64 * 3 / 2, "{read} bytes read for a file of {}", body.len());
}

/// An edit that keeps a file's size and sets its mtime back (`touch -r`, a
/// tool restoring timestamps, or two writes within one tick of the file
/// system's clock) leaves the stat the index compares as it was: the write
/// event says the bytes changed, and the daemon reads them.
#[test]
fn a_write_that_leaves_the_stat_as_it_was_is_read() {
    let env = Env::new();
    let a = env.write("a.txt", text(1, 300));
    env.write("b.txt", text(1, 300));
    let _daemon = start(&env);
    converges(&env, "start");
    write_keeping_stat(&a, 100, b"XXXX");
    converges(&env, "an edit with its mtime set back");
    // Files made and so edited within the debounce, after the daemon took
    // them at their first close: the debouncer hands their events over as
    // their creation alone.
    for (k, wait) in [15, 25, 40].into_iter().enumerate() {
        let p = env.write(&format!("new{k}.txt"), text(2, 300));
        std::thread::sleep(Duration::from_millis(wait));
        write_keeping_stat(&p, 100, b"YYYY");
    }
    converges(&env, "new files edited with their mtimes set back within the debounce");
}

/// Such a write made while no daemon ran is not seen by its start's
/// reconciling scan (which goes by the stat); `simd reread` reaches the
/// running daemon and has it read the file.
#[test]
fn reread_reaches_the_running_daemon() {
    let env = Env::new();
    let a = env.write("a.txt", text(1, 300));
    env.write("b/b.txt", text(1, 300));
    env.write("b/c.txt", text(2, 300));
    env.index();
    // A root the index remembers and this daemon (started on the tree
    // alone) does not watch.
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("d.txt"), text(3, 300)).unwrap();
    env.simd().args(["-q", "index"]).arg(&other).assert().success();
    write_keeping_stat(&a, 100, b"XXXX");
    let _daemon = start(&env);
    let roots = [env.root.as_path(), other.as_path()];
    let fresh = state_of_fresh(&env, &roots);
    assert_ne!(state(&env.db).unwrap(), fresh, "the start's scan read a file whose stat was as recorded");
    let said = env.json(&["reread", a.to_str().unwrap()]);
    assert_eq!((said["reread"].as_u64(), said["reread_differed"].as_u64()), (Some(1), Some(1)), "{said:#}");
    assert_eq!((said["changed"].as_u64(), said["unchanged"].as_u64()), (Some(1), Some(2)), "{said:#}");
    converges_to(&env, &roots, "reread");
    // Asked for once: the next rescan goes by the stat again.
    let said = env.json(&["rescan"]);
    assert_eq!(said["reread"].as_u64(), Some(0), "{said:#}");
    // None named: every file this daemon watches.
    let said = env.json(&["reread"]);
    assert_eq!((said["reread"].as_u64(), said["reread_differed"].as_u64()), (Some(3), Some(0)), "{said:#}");
    // A file under the root it does not watch: no rescan of its reads it.
    let out = env.simd().arg("reread").arg(other.join("d.txt")).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("not under a root this daemon watches"), "{err}");
    let out = env.simd().arg("reread").arg(env.tmp.path()).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("not under a root of the index"), "{out:?}");
    // Options that shape the run are the daemon's own: given, the writer's
    // "in use" error says what to do.
    let out = env.simd().args(["reread", "--exclude", "*.txt"]).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("index in use by pid"), "{out:?}");
}

/// An index made before simd dated its files (no `marks` in `meta`): the
/// daemon's writer dates them from its open, so a report asked for what
/// came since a time after the daemon started tells the new copies from
/// the files the index held, with no warning.
#[test]
fn since_tells_new_files_from_those_of_an_index_made_before_marks() {
    use simd::store::{Meta, MetaKey};
    let env = Env::new();
    for rel in ["old/1", "old/2"] {
        env.write(rel, text(1, 300));
    }
    env.index();
    let store = Store::open(&env.db, Access::Write, None).unwrap();
    let mut b = store.batch();
    b.delete::<Meta>(&MetaKey::Marks);
    store.write(b).unwrap();
    drop(store);
    let _daemon = start(&env);
    converges(&env, "start");
    // Then what comes after it.
    let since = next_second();
    for rel in ["new/1", "new/2"] {
        env.write(rel, text(2, 300));
    }
    converges(&env, "new copies");
    let out = env.simd().args(["--format", "json", "report", "--since", &since]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("dates the files it holds only"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let sets = r["identical"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{r:#}");
    assert!(sets[0]["files"][0]["path"].as_str().unwrap().contains("/new/"), "{r:#}");
}

/// The daemon reads a file of `--whole-from`'s size or more (here on its
/// background readers, as any file of 16 MiB or more) without keeping its
/// chunk list, as `simd index` does.
#[test]
fn the_daemon_reads_files_past_whole_from_without_a_chunk_list() {
    use simd::store::ContentChunks;
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let _daemon = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--whole-from", "16MiB", env.root.to_str().unwrap()], None, false)
    };
    let body = noise(3, 17 << 20);
    env.write("big.bin", &body);
    env.write("sub/big-copy.bin", &body);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        let (files, records) = (files_of(&s), s.scan::<ContentChunks>().map(|r| r.unwrap().1).collect::<Vec<_>>());
        let big: Vec<_> = files.iter().filter(|(p, _)| p.ends_with(b".bin")).map(|(_, c)| c.clone()).collect();
        if big.len() == 2 {
            assert_eq!(big[0], big[1], "two copies, one content");
            let whole: Vec<_> = records.iter().filter(|r| r.size == body.len() as u64).collect();
            assert_eq!(whole.len(), 1);
            assert!(whole[0].runs.is_empty(), "no chunk list for a file past --whole-from");
            break;
        }
        assert!(Instant::now() < until, "the large files never reached the live index: {files:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = env.simd().args(["check"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("consistent"));
    // Past its first scan, a daemon's index is answered from without a word
    // about scanning (`crash::sigterm_stops_the_daemons_first_scan_...`
    // sees the warning during one).
    let out = env.simd().arg("report").assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("first scan"), "{err}");
}

/// An index kept inside the tree it watches (the default index under
/// `~/.local/share` when `~` is a root): the daemon's own writes there are
/// no files to follow and do not wake it, and a file moved into or out of
/// the index's directory is the tree side's removal or arrival.
#[test]
fn an_index_inside_its_root_neither_indexes_nor_wakes_itself() {
    let mut env = Env::new();
    env.db = env.root.join(".local/share/simd");
    env.write("a.txt", text(1, 300));
    let _daemon = start(&env);
    let live = || -> Vec<String> {
        let files = state(&env.db).map(|s| s.0).unwrap_or_default();
        files.iter().map(|(p, _)| String::from_utf8_lossy(p).rsplit('/').next().unwrap().to_owned()).collect()
    };
    let holds = |want: &[&str], what: &str| {
        let until = Instant::now() + Duration::from_secs(60);
        while live() != want {
            assert!(Instant::now() < until, "after {what}: the live index holds {:?}, not {want:?}", live());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    holds(&["a.txt"], "start");
    env.write("b.txt", text(2, 300));
    holds(&["a.txt", "b.txt"], "a new file");
    std::fs::rename(env.root.join("a.txt"), env.db.join("a.txt")).unwrap();
    holds(&["b.txt"], "a file moved into the index's directory");
    std::fs::rename(env.db.join("a.txt"), env.root.join("c.txt")).unwrap();
    holds(&["b.txt", "c.txt"], "a file moved out of it");
    // The idle flush (after a quiet second) writes into the index too.
    std::thread::sleep(Duration::from_millis(2000));
    let batches = || simd::watch::DaemonState::running(&env.db).unwrap().batches;
    let before = batches();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(batches(), before, "with nothing changing in the tree, the daemon handles no batch");
    // Nor are its own writes counted as pending (the state it saved after
    // a batch counted the message its own save had raised).
    let pending = simd::watch::DaemonState::running(&env.db).unwrap().pending;
    assert_eq!(pending, 0, "nothing is pending in a quiet tree");
}

/// Ignore files at several depths, and one written while the daemon runs:
/// the daemon follows what the walk of a fresh `simd index` takes, and
/// nothing more.
#[test]
fn the_daemon_honours_ignore_files_at_every_depth() {
    let env = Env::new();
    env.write(".gitignore", "build/\n*.log\n");
    env.write("docs/.ignore", "secret.txt\n");
    env.write("docs/deep/er/.simdignore", "draft-*\n!draft-keep.txt\n");
    env.write("docs/deep/er/a.txt", text(1, 200));
    let daemon = start(&env);
    converges(&env, "start");
    for (i, p) in [
        "build/out.txt",
        "docs/build/out.txt",
        "run.log",
        "docs/deep/run.log",
        "docs/secret.txt",
        "docs/deep/secret.txt",
        "other/secret.txt",
        "docs/deep/er/draft-1.txt",
        "docs/deep/er/draft-keep.txt",
        "docs/deep/er/b.txt",
        "docs/deep/draft-2.txt",
    ]
    .iter()
    .enumerate()
    {
        env.write(p, text(10 + i as u64, 150));
    }
    converges(&env, "files under ignore files");
    let live = state(&env.db).unwrap().0;
    let paths: Vec<String> = live.iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    for kept in ["other/secret.txt", "docs/deep/er/draft-keep.txt", "docs/deep/er/b.txt", "docs/deep/draft-2.txt"] {
        assert!(paths.iter().any(|p| p.ends_with(kept)), "{kept} is followed: {paths:?}");
    }
    for ignored in ["out.txt", "run.log", "docs/secret.txt", "deep/secret.txt", "draft-1.txt"] {
        assert!(!paths.iter().any(|p| p.ends_with(ignored)), "{ignored} is ignored: {paths:?}");
    }
    // An ignore file written while the daemon runs applies to what follows.
    env.write("other/.ignore", "late.txt\n");
    env.write("other/late.txt", text(40, 150));
    env.write("other/on-time.txt", text(41, 150));
    converges(&env, "an ignore file written live");
    // One that leaves out files already indexed, which raise no event of
    // their own: they leave the index (not for lost-and-found), and come
    // back when it goes.
    env.write("docs/deep/er/.simdignore", "draft-*\n!draft-keep.txt\nb.txt\n");
    env.write("other/.ignore", "late.txt\non-time.txt\n");
    converges(&env, "ignore files that now leave out indexed files");
    let history = |env: &Env| {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        s.scan::<History>().map(|r| String::from_utf8_lossy(&r.unwrap().0 .0).into_owned()).collect::<Vec<_>>()
    };
    // (The ignore files' own former versions are there: they were edited.)
    let h = history(&env);
    assert!(!h.iter().any(|p| p.ends_with("/b.txt") || p.ends_with("/on-time.txt")), "left out, not lost: {h:?}");
    // Clutter (`scan::is_clutter`): the locks of a document opened and
    // closed again are not followed, so none is a file lost.
    env.write("docs/plan.odt", text(52, 150));
    env.write("docs/~$plan.docx", text(50, 20));
    env.write("docs/.~lock.plan.odt#", text(51, 20));
    converges(&env, "a document opened: its locks");
    let live = state(&env.db).unwrap().0;
    let paths: Vec<String> = live.iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(paths.iter().any(|p| p.ends_with("/docs/plan.odt")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("~$") || p.contains(".~lock")), "{paths:?}");
    // Saved as GNOME's programs save: a temporary file renamed over it.
    env.write("docs/.goutputstream-7QX2K1", text(53, 150));
    std::fs::rename(env.root.join("docs/.goutputstream-7QX2K1"), env.root.join("docs/plan.odt")).unwrap();
    std::fs::remove_file(env.root.join("docs/~$plan.docx")).unwrap();
    std::fs::remove_file(env.root.join("docs/.~lock.plan.odt#")).unwrap();
    converges(&env, "the document saved and closed");
    // And as Word saves: the document renamed away to a temporary name, a
    // temporary file renamed over it, the old one removed.
    env.write("docs/report.docx", text(54, 150));
    converges(&env, "a second document");
    let docs = env.root.join("docs");
    std::fs::rename(docs.join("report.docx"), docs.join("~WRL0002.tmp")).unwrap();
    std::fs::write(docs.join("~WRD0000.tmp"), text(55, 150)).unwrap();
    std::fs::rename(docs.join("~WRD0000.tmp"), docs.join("report.docx")).unwrap();
    std::fs::remove_file(docs.join("~WRL0002.tmp")).unwrap();
    converges(&env, "a document saved as Word saves");
    let h = history(&env);
    assert!(
        !h.iter().any(|p| {
            p.ends_with("/~$plan.docx")
                || p.ends_with("/.~lock.plan.odt#")
                || p.contains("goutput")
                || p.contains("~WR")
        }),
        "{h:?}"
    );
    // A `!` line keeps the clutter it names, as the walk does.
    env.write("downloads/.simdignore", "!*.part\n");
    env.write("downloads/film.part", text(56, 150));
    env.write("docs/film.part", text(57, 150));
    converges(&env, "clutter kept by a `!` line");
    let live = state(&env.db).unwrap().0;
    let paths: Vec<String> = live.iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(paths.iter().any(|p| p.ends_with("/downloads/film.part")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.ends_with("/docs/film.part")), "{paths:?}");
    std::fs::remove_file(env.root.join("other/.ignore")).unwrap();
    converges(&env, "an ignore file removed");
    stop_with_sigterm(daemon);
}

/// The daemon weighs ignore files as the walk does (`ignore`'s rules): of
/// the kinds of file, the nearest that has a line for a path decides, and
/// a `.simdignore` outranks an `.ignore`, which outranks a `.gitignore`,
/// which outranks the repository's `.git/info/exclude`. The daemon left a
/// path out when any file's line ignored it, so a deeper `!` line of
/// another kind was overruled, and it never read `.git/info/exclude`: the
/// live index held files a fresh one did not, and lacked files it held.
/// Nor did it follow a file named `.git`, which the walk indexes; and a
/// directory's rules, kept by path, stayed with the path when another
/// directory was moved there.
#[test]
fn the_daemon_weighs_ignore_files_as_the_walk_does() {
    let env = Env::new();
    env.write(".gitignore", "*.log\nbuild/\nvendor/\n");
    // An `.ignore` lets in what the `.gitignore` above it leaves out; a
    // `.simdignore` lets a directory in, and then its files are walked.
    env.write("docs/.ignore", "!keep.log\n");
    env.write(".simdignore", "!build/\n");
    // A directory left out is not walked, whatever a file inside says.
    env.write("vendor/.ignore", "!*.txt\n");
    env.write(".git/info/exclude", "*.tmp\n");
    env.write("a.txt", text(1, 200));
    // A submodule's `.git` is a file naming its repository: walked, as any file.
    env.write("sub/.git", "gitdir: ../.git/modules/sub\n");
    let daemon = start(&env);
    converges(&env, "start");
    env.write("sub/.git", "gitdir: ../.git/modules/sub-moved\n");
    converges(&env, "a submodule's .git file edited");
    for (i, p) in
        ["docs/keep.log", "docs/other.log", "build/out.txt", "vendor/lib.txt", "scratch.tmp", "docs/b.tmp", "notes.bak"]
            .iter()
            .enumerate()
    {
        env.write(p, text(10 + i as u64, 150));
    }
    converges(&env, "files under ignore files of each kind");
    let paths = || -> Vec<String> {
        let live = state(&env.db).unwrap().0;
        live.iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect()
    };
    let live = paths();
    for kept in ["/docs/keep.log", "/build/out.txt", "/notes.bak"] {
        assert!(live.iter().any(|p| p.ends_with(kept)), "{kept} is followed: {live:?}");
    }
    for ignored in ["other.log", "lib.txt", ".tmp"] {
        assert!(!live.iter().any(|p| p.ends_with(ignored)), "{ignored} is ignored: {live:?}");
    }
    // The exclude file edited while the daemon runs: a file already
    // indexed that it now leaves out goes, one it lets in comes.
    env.write(".git/info/exclude", "*.bak\n");
    converges(&env, "the repository's exclude file edited");
    let live = paths();
    assert!(!live.iter().any(|p| p.ends_with("/notes.bak")), "{live:?}");
    assert!(live.iter().any(|p| p.ends_with("/scratch.tmp")), "{live:?}");
    // A file written through a hard link where no walk goes (`.git`, a
    // directory left out): its indexed name changed too.
    use std::io::Write;
    for (walked, link) in [("a.txt", ".git/a-link"), ("build/out.txt", "vendor/out-link")] {
        std::fs::hard_link(env.root.join(walked), env.root.join(link)).unwrap();
        std::fs::OpenOptions::new().append(true).open(env.root.join(link)).unwrap().write_all(b"more\n").unwrap();
    }
    converges(&env, "files written through hard links no walk takes");
    // The repository's `.git` moved away takes its exclude file along.
    std::fs::rename(env.root.join(".git"), env.root.join("old-git")).unwrap();
    converges(&env, "the repository's .git moved away");
    assert!(paths().iter().any(|p| p.ends_with("/notes.bak")), "{:?}", paths());
    // A directory's rules go with it: one moved in from outside the roots
    // to where another was is weighed by its own ignore files, not by the
    // rules the daemon held for the first.
    env.write("x/a.md", text(30, 150));
    converges(&env, "a directory");
    env.write("x/d.md", text(31, 150));
    converges(&env, "an event there (the daemon holds its rules)");
    let outside = env.tmp.path().join("y");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join(".ignore"), "*.md\n").unwrap();
    std::fs::write(outside.join("b.md"), text(32, 150)).unwrap();
    std::fs::write(outside.join("keep.txt"), text(33, 150)).unwrap();
    std::fs::rename(env.root.join("x"), env.root.join("x-old")).unwrap();
    std::fs::rename(&outside, env.root.join("x")).unwrap();
    converges(&env, "a directory moved in where another was");
    let live = paths();
    assert!(
        !live.iter().any(|p| p.ends_with("/x/b.md")) && live.iter().any(|p| p.ends_with("/x/keep.txt")),
        "{live:?}"
    );
    // An ignore file made a FIFO is passed over, by the daemon's rules and
    // by its rescan's walk, as a missing one is: opened, it blocked the walk
    // for ever (`ignore`'s `File::open`, patched in `vendor/ignore`).
    assert!(Command::new("mkfifo").arg(env.root.join("x/.gitignore")).status().unwrap().success());
    env.write("x/e.md", text(34, 150));
    converges(&env, "an ignore file made a FIFO");
    assert!(!paths().iter().any(|p| p.ends_with("/x/e.md")), "x/.ignore still counts: {:?}", paths());
    stop_with_sigterm(daemon);
}

/// A file renamed and then removed within a debounce, or moved into a
/// directory removed within it: the debouncer keeps the rename under its
/// new name and the removal replaces it there, so it handed over only the
/// new name's removal, and the old name's record stayed in the index for
/// good. And a chain of renames, folded by the debouncer into one from the
/// first old name to the last new one, left the record of a name between
/// them that the daemon had read meanwhile. (Both found by random changes
/// under the daemon, session 55.)
/// A root inside another one, forgotten under the daemon: the watcher
/// keeps one watch per directory, and unwatching the inner root took the
/// outer one's watches there, so that nothing written under it was seen
/// again (session 73's audit). Forgetting the outer root did the same
/// to the inner one.
#[test]
fn forgetting_a_root_inside_another_leaves_the_other_watched() {
    let env = Env::new();
    env.write("sub/deep/a.txt", text(41, 300));
    env.write("top.txt", text(42, 300));
    let daemon = start(&env);
    let sub = env.root.canonicalize().unwrap().join("sub");
    env.simd().arg("index").arg(&sub).assert().success();
    env.simd().arg("forget").arg(&sub).assert().success();
    env.write("sub/new.txt", text(43, 300));
    env.write("sub/deep/new2.txt", text(44, 300));
    converges(&env, "files written under a forgotten inner root");

    // The other way round: the outer root goes, the inner one stays.
    env.simd().arg("index").arg(&sub).assert().success();
    env.simd().arg("forget").arg(env.root.canonicalize().unwrap()).assert().success();
    env.write("sub/deep/new3.txt", text(45, 300));
    converges_to(&env, &[&sub], "files written under an inner root whose outer one was forgotten");
    stop_with_sigterm(daemon);
}

/// A daemon started on some of the roots the index remembers says that
/// the others are not kept current: at its start, in `simd status`, and
/// when `simd index` is handed to it. They went stale without a word.
#[test]
fn remembered_roots_a_daemon_does_not_watch_are_said() {
    let env = Env::new();
    env.write("a/x.txt", text(51, 300));
    env.write("b/y.txt", text(52, 300));
    let (a, b) = (env.root.canonicalize().unwrap().join("a"), env.root.canonicalize().unwrap().join("b"));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    let log = env.tmp.path().join("daemon.log");
    let daemon = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &[a.to_str().unwrap()], Some(&log), false)
    };
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("the index also remembers {}, which this daemon does not watch", b.display())));
    let out = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        status.contains(&format!(
            "NOT WATCHED by this daemon (started with other roots), so not kept current: {}",
            b.display()
        )),
        "{status}"
    );
    let out = env.simd().args(["-q", "index"]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&format!("does not watch {}: not rescanned", b.display())), "{err}");
    // A control request is no file-system event.
    let state = simd::watch::DaemonState::running(&env.db).unwrap();
    assert_eq!(state.last_event, None, "{state:?}");
    // The index directory as a root is refused, and the daemon goes on
    // (it stopped, with the root remembered).
    let out = env.simd().arg("index").arg(&env.db).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("simd does not index its own index"), "{err}");
    assert!(simd::watch::DaemonState::running(&env.db).is_some());
    assert_eq!(env.json(&["status"])["roots"].as_array().map(Vec::len), Some(2));
    // A copy of the index taken meanwhile (its daemon.json too) has no
    // daemon: it was taken for one, and every writing command failed.
    let copy = env.tmp.path().join("copy");
    assert!(Command::new("cp").arg("-a").arg(&env.db).arg(&copy).status().unwrap().success());
    let out = env.simd().arg("--db").arg(&copy).arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(status.contains("daemon       not running"), "{status}");
    env.simd().arg("--db").arg(&copy).args(["-q", "index"]).assert().success();
    stop_with_sigterm(daemon);
}

/// A file the daemon indexed in one batch and found gone in the next
/// (`cp doc doc.bak` … `rm doc.bak`): it paired with itself as a move of
/// its content, kept its record and lost its name (session 73's audit).
#[test]
fn a_copy_removed_in_the_batch_after_it_came_leaves_a_ghost() {
    let env = Env::new();
    let body = text(31, 300);
    env.write("doc.txt", &body);
    let daemon = start(&env);
    for round in 0..3 {
        let bak = env.write("doc.txt.bak", &body);
        converges(&env, "a copy made");
        std::fs::remove_file(&bak).unwrap();
        converges(&env, "the copy removed");
        env.check();
        let files = env.json(&["status"])["files"].as_u64();
        assert_eq!(files, Some(1), "round {round}");
        let r = env.json(&["lost", bak.to_str().unwrap()]);
        assert_eq!(r["state"], "lost", "round {round}: {r:#}");
    }
    stop_with_sigterm(daemon);
}

#[test]
fn a_file_renamed_then_removed_within_a_debounce_leaves_the_index() {
    let env = Env::new();
    for name in ["a.txt", "c.txt", "f.txt", "m.txt", "keep.txt"] {
        env.write(name, text(name.len() as u64 * 7 + u64::from(name.as_bytes()[0]), 300));
    }
    env.write("dir/x.txt", text(9, 300));
    env.index();
    // A long debounce, so that each sequence is within one.
    let daemon = start_with(&env, 400);
    let r = &env.root;
    std::fs::rename(r.join("a.txt"), r.join("b.txt")).unwrap();
    std::fs::remove_file(r.join("b.txt")).unwrap();
    std::fs::create_dir(r.join("new")).unwrap();
    std::fs::rename(r.join("c.txt"), r.join("new/d.txt")).unwrap();
    std::fs::remove_dir_all(r.join("new")).unwrap();
    std::fs::rename(r.join("f.txt"), r.join("g.txt")).unwrap();
    std::fs::rename(r.join("g.txt"), r.join("h.txt")).unwrap();
    std::fs::remove_file(r.join("h.txt")).unwrap();
    std::fs::rename(r.join("dir"), r.join("dir2")).unwrap();
    std::fs::remove_dir_all(r.join("dir2")).unwrap();
    converges(&env, "renames removed within a debounce");
    // A new file, read at its close; a file renamed over it (the daemon
    // reads it again under that name), then on.
    env.write("t.txt", text(11, 300));
    std::thread::sleep(Duration::from_millis(100));
    std::fs::rename(r.join("m.txt"), r.join("t.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::rename(r.join("t.txt"), r.join("u.txt")).unwrap();
    converges(&env, "a chain of renames through a name read meanwhile");
    stop_with_sigterm(daemon);
}

/// Two names swapped through a temporary one within a debounce (a → t,
/// b → a, t → b), which the debouncer hands over as a → b and b → a: of
/// two hard links of one file, one name was left without a record for
/// good (random changes under the daemon, session 55); two files keep
/// their records under their new names.
#[test]
fn names_swapped_within_a_debounce_keep_their_records() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    std::fs::hard_link(env.root.join("a.txt"), env.root.join("b.txt")).unwrap();
    env.write("c.txt", text(2, 300));
    env.write("d.txt", text(3, 300));
    env.index();
    let daemon = start_with(&env, 400);
    let r = &env.root;
    for (x, y) in [("a.txt", "b.txt"), ("c.txt", "d.txt")] {
        std::fs::rename(r.join(x), r.join("t")).unwrap();
        std::fs::rename(r.join(y), r.join(x)).unwrap();
        std::fs::rename(r.join("t"), r.join(y)).unwrap();
    }
    converges(&env, "names swapped");
    stop_with_sigterm(daemon);
}

#[test]
fn the_live_index_follows_every_kind_of_change() {
    follow_every_kind_of_change(&[]);
}

/// The same with the daemon's records kept by a hash of their paths, and
/// its scans' walks keeping only the stats they compare, as past 262k
/// files (`scan::Known::Hashed`, `scan::Known::Stats`; the test makes the
/// bound 1).
#[test]
fn the_live_index_follows_every_kind_of_change_with_records_by_path_hash() {
    follow_every_kind_of_change(&[("SIMD_TEST_LOAD_MAX", "1")]);
}

/// Each kind of change under a daemon started with the environment `vars`,
/// then one more change after a restart.
fn follow_every_kind_of_change(vars: &[(&str, &str)]) {
    let env = Env::new();
    for i in 0..20u64 {
        env.write(&format!("docs/d{i}.txt"), text(i, 800));
    }
    let start = |env: &Env| {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("simd"));
        cmd.envs(vars.iter().copied());
        start_command(env, cmd, &["--debounce-ms", "50", env.root.to_str().unwrap()], None)
    };
    let daemon = start(&env);
    converges(&env, "start");

    // A file with three names (hard links), one in another directory,
    // written through one of them: the others change with it and raise no
    // event of their own.
    let linked = env.root.join("docs/d6.txt");
    std::fs::hard_link(&linked, env.root.join("d6-link.txt")).unwrap();
    std::fs::hard_link(&linked, env.root.join("docs/d6-link.txt")).unwrap();
    converges(&env, "two hard links made");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(env.root.join("d6-link.txt")).unwrap();
        f.write_all(&text(105, 300)).unwrap();
    }
    converges(&env, "a file written through one of its three names");

    env.write("docs/new.txt", text(100, 900));
    converges(&env, "create");
    // Read at its close, then renamed once the debouncer has handed its
    // creation over (two debounces: within them, the debouncer may fold
    // the rename into a creation under the new name, and the daemon
    // removes the old name, a ghost): a move all the same.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::rename(env.root.join("docs/new.txt"), env.root.join("docs/new-renamed.txt")).unwrap();
    converges(&env, "a new file renamed");
    assert_moved(&env, "docs/new.txt", "new-renamed.txt");

    let p = env.root.join("docs/d1.txt");
    let mut body = std::fs::read(&p).unwrap();
    body.extend_from_slice(&text(101, 200));
    std::fs::write(&p, &body).unwrap();
    converges(&env, "append");

    std::fs::write(env.root.join("docs/d2.txt"), noise(102, 5000)).unwrap();
    converges(&env, "overwrite");

    std::fs::rename(env.root.join("docs/d3.txt"), env.root.join("docs/d3-renamed.txt")).unwrap();
    converges(&env, "rename");
    // The rename is a move record, not a delete and a re-read.
    let old = assert_moved(&env, "docs/d3.txt", "d3-renamed.txt");
    // And `simd lost` answers it from the live index while the daemon runs.
    let out = env.simd().args(["--format", "json", "lost"]).arg(&old).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let best = &r["files"][0]["candidates"][0];
    assert_eq!(best["kind"], "moved", "{r:#}");
    assert!(best["path"].as_str().unwrap().ends_with("/docs/d3-renamed.txt"), "{r:#}");

    // The destination exists (and is watched) before the move: a directory
    // created an instant before is not watched yet, and its half of the
    // rename would be seen as new files (which converge too, read again).
    std::fs::create_dir_all(env.root.join("archive")).unwrap();
    env.write("archive/readme.txt", text(104, 50));
    converges(&env, "a new directory");
    std::fs::rename(env.root.join("docs"), env.root.join("archive/docs-2024")).unwrap();
    converges(&env, "directory move");
    let s = Store::open(&env.db, Access::Read, None).unwrap();
    let moves = s.scan::<History>().filter(|r| matches!(r.as_ref().unwrap().1, HistoryRecord::Moved { .. })).count();
    assert!(moves >= 21, "a moved directory moves its files: {moves} move records");
    drop(s);

    // Files moved into directories made an instant before, each its own
    // (a script sorting files into new folders): notify sees no rename,
    // the new directories are walked and their files read, and the
    // batch pairs them by content with the names gone: moves still.
    for i in 7..11 {
        let dir = env.root.join(format!("sorted/n{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::rename(env.root.join(format!("archive/docs-2024/d{i}.txt")), dir.join(format!("d{i}.txt"))).unwrap();
    }
    converges(&env, "files moved into directories just made");
    for i in 7..11 {
        assert_moved(&env, &format!("archive/docs-2024/d{i}.txt"), &format!("sorted/n{i}/d{i}.txt"));
    }

    // Renamed twice within one debounce window: both renames in one batch.
    std::fs::rename(env.root.join("archive/docs-2024"), env.root.join("archive/tmp-name")).unwrap();
    std::fs::rename(env.root.join("archive/tmp-name"), env.root.join("archive/docs-2024")).unwrap();
    converges(&env, "a directory renamed twice at once");
    env.check();

    std::fs::remove_file(env.root.join("archive/docs-2024/d4.txt")).unwrap();
    converges(&env, "delete");

    let q = env.write("quick.txt", text(103, 100));
    std::fs::remove_file(&q).unwrap();
    converges(&env, "create and delete quickly");

    for i in 0..2000u64 {
        env.write(&format!("burst/b{}/f{i}.txt", i % 20), text(1000 + i, 60));
    }
    converges(&env, "a burst of 2000 files");

    let fifo = env.root.join("archive/docs-2024/d5.txt");
    std::fs::remove_file(&fifo).unwrap();
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    converges(&env, "a file replaced by a FIFO");

    // Directories replaced at once by a file and by a symlink of the same
    // name: the debouncer folds their files' own remove events into theirs.
    for (i, dir) in ["gone-dir", "gone-dir-2"].into_iter().enumerate() {
        for k in 0..3u64 {
            env.write(&format!("{dir}/f{k}.txt"), text(2000 + 10 * i as u64 + k, 300));
        }
    }
    converges(&env, "two directories of files");
    std::fs::remove_dir_all(env.root.join("gone-dir")).unwrap();
    env.write("gone-dir", text(2100, 200));
    std::fs::remove_dir_all(env.root.join("gone-dir-2")).unwrap();
    std::os::unix::fs::symlink("quick.txt", env.root.join("gone-dir-2")).unwrap();
    converges(&env, "directories replaced by a file and a symlink");
    // ... and by a new directory of the same name (`rm -rf d && cp -r new
    // d`), holding one file of the same name and one new.
    for k in 0..3u64 {
        env.write(&format!("made-again/f{k}.txt"), text(2200 + k, 300));
    }
    converges(&env, "a directory of files");
    std::fs::remove_dir_all(env.root.join("made-again")).unwrap();
    env.write("made-again/f1.txt", text(2210, 300));
    env.write("made-again/new.txt", text(2211, 300));
    converges(&env, "a directory removed and made again");

    // SIGTERM: a clean stop, exit 0.
    stop_with_sigterm(daemon);
    env.check();
    // Started again on the index it left: its records loaded, one change.
    let daemon = start(&env);
    std::fs::rename(env.root.join("made-again/new.txt"), env.root.join("made-again/renamed.txt")).unwrap();
    env.write("quick.txt", text(2300, 200));
    converges(&env, "a rename and a write after a restart");
    assert_moved(&env, "made-again/new.txt", "renamed.txt");
    stop_with_sigterm(daemon);
}

#[test]
fn kill_9_and_restart_catches_up_and_readers_work_meanwhile() {
    let env = Env::new();
    for i in 0..50u64 {
        env.write(&format!("f{i}.txt"), text(i, 500));
    }
    let mut daemon = start(&env);
    // Readers work while the daemon holds the index; a writer is told who
    // holds it (`simd index` with options of its own: without, the daemon
    // takes the request, `simd_index_of_a_new_root_is_handed_to_the_daemon`).
    env.simd().arg("status").assert().success();
    env.simd().arg("report").assert().success();
    let out = env.simd().args(["index", "--exclude", "*.tmp"]).arg(&env.root).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&format!("in use by pid {}", daemon.0.id())) && err.contains("kill -TERM"), "{err}");
    let status = env.simd().arg("status").assert().success();
    assert!(String::from_utf8_lossy(&status.get_output().stdout).contains("watching"));

    daemon.0.kill().unwrap(); // SIGKILL
    daemon.0.wait().unwrap();
    // Changes while nothing runs.
    for i in 0..10u64 {
        std::fs::remove_file(env.root.join(format!("f{i}.txt"))).unwrap();
    }
    env.write("while-down.txt", text(500, 500));
    let _daemon = start(&env);
    converges(&env, "kill -9 and restart");
    env.check();
}

/// An unreadable file: a new one is left out with its path and reason in
/// the daemon's log; an indexed one rewritten while unreadable keeps its
/// last readable version; readable again, it is read. (As root, which reads
/// anything, the daemon runs as nobody so that the permission bites.)
#[test]
fn the_daemon_skips_an_unreadable_file_and_keeps_what_it_had_indexed() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("a.txt", text(1, 600));
    env.write("b.txt", text(2, 600));
    env.write("locked/c.txt", text(5, 600));
    let log_path = env.tmp.path().join("daemon.log");
    let daemon = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &[env.root.to_str().unwrap()], Some(&log_path), super::is_root())
    };
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let wait_for = |what: &str, ok: &dyn Fn() -> bool| {
        let until = Instant::now() + Duration::from_secs(30);
        while !ok() {
            assert!(Instant::now() < until, "{what}; the daemon's log:\n{}", log());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let indexed = || {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        files_of(&s).into_iter().map(|(p, c)| (String::from_utf8(p).unwrap(), c)).collect::<Vec<_>>()
    };
    let content_of = |name: &str| indexed().into_iter().find(|(p, _)| p.ends_with(name)).map(|(_, c)| c);
    let a_before = content_of("/a.txt").expect("a.txt indexed");

    // A new file, unreadable from the start.
    let secret = env.root.join("secret.txt");
    std::fs::write(&secret, text(3, 600)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    wait_for("the unreadable new file is not named in the log", &|| {
        log().lines().any(|l| l.contains("secret.txt") && l.contains("ermission denied"))
    });
    assert!(content_of("/secret.txt").is_none(), "{:?}", indexed());

    // An indexed file made unreadable, then rewritten: the index keeps the
    // version it could read, and says why it did not read the new one.
    let a = env.root.join("a.txt");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::write(&a, text(4, 900)).unwrap();
    wait_for("the unreadable rewritten file is not named in the log", &|| {
        log().lines().any(|l| l.contains("a.txt") && l.contains("ermission denied"))
    });
    assert_eq!(content_of("/a.txt").as_deref(), Some(a_before.as_str()));
    env.check();

    // A directory made unreadable: a rescan keeps the files indexed under
    // it and tells whoever asked which directory it could not look into;
    // the log names it once.
    // (Indexed by the daemon's first scan: a directory made while it runs
    // is walked again once things settle, which would find the file made
    // below whatever its `chmod` does.)
    assert!(content_of("/locked/c.txt").is_some(), "{:?}", indexed());
    let locked = env.root.join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = env.simd().args(["--format", "json", "rescan"]).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let dirs = r["skipped"].as_array().unwrap().iter().find(|s| s["reason"] == "unreadable directory");
    let dirs = dirs.unwrap_or_else(|| panic!("the rescan does not name the unreadable directory: {r:#}"));
    assert_eq!(dirs["count"], 1, "{r:#}");
    assert!(dirs["examples"][0]["path"].as_str().unwrap().ends_with("/locked"), "{r:#}");
    assert!(content_of("/locked/c.txt").is_some(), "{:?}", indexed());
    let line = log().lines().find(|l| l.contains("/locked") && l.contains("ermission denied")).map(str::to_owned);
    let line = line.unwrap_or_else(|| panic!("the unreadable directory is not named in the log:\n{}", log()));
    assert_eq!(line.matches("/locked").count(), 1, "{line}");
    assert!(!line.contains('\x1b'), "a log that is not a terminal has no colours: {line:?}");
    if super::is_root() {
        // A file made in it meanwhile (by root; the daemon runs as
        // nobody) is found once the directory is readable again: the
        // `chmod` is its only event then, and the directory is walked
        // once things settle.
        let batches = || simd::watch::DaemonState::running(&env.db).unwrap().batches;
        let before = batches();
        env.write("locked/d.txt", text(6, 600));
        wait_for("no batch for locked/d.txt", &|| batches() > before);
        // Past the debounce: its events are all handled (and it could
        // not be looked at).
        std::thread::sleep(Duration::from_millis(500));
        assert!(content_of("/locked/d.txt").is_none(), "{:?}", indexed());
        // Not silently: the log says it could not look at it.
        wait_for("the file it could not look at is not named in the log", &|| {
            log().lines().any(|l| l.contains("locked/d.txt") && l.contains("not indexed"))
        });
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Readable again: both are read, as a fresh index reads them.
    for p in [&a, &secret] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    converges(&env, "the files made readable again");
    assert_ne!(content_of("/a.txt").as_deref(), Some(a_before.as_str()));
    stop_with_sigterm(daemon);
    // The user's files are as the test left them.
    assert_eq!(std::fs::read(&a).unwrap(), text(4, 900));
}

/// Never a silent miss: a daemon whose inotify queue overflows says so and
/// rescans; one that hits the watch limit says so, with the sysctl to
/// raise, and rescans what it cannot watch periodically. Both converge.
/// (Lowering the limits takes root: elsewhere this test has nothing to
/// run.)
#[test]
fn an_overflowing_event_queue_and_the_watch_limit_fall_back_to_rescans() {
    if !super::is_root() {
        eprintln!("not root: inotify's limits cannot be lowered here");
        return;
    }
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    // A tree of five directories and a daemon started (rescanning every
    // second when degraded) while one inotify sysctl is lowered, alone.
    let start_lowered = |sysctl: &str, value: &str, as_nobody: bool| {
        let env = Env::new();
        for i in 0..5u64 {
            env.write(&format!("d{i}/f.txt"), text(i, 300));
        }
        let log = env.tmp.path().join("daemon.log");
        let daemon = {
            let _alone = LIMITS.write().unwrap_or_else(|p| p.into_inner());
            let _lowered = Lowered::set(sysctl, value);
            spawn(&env, &["--rescan-every", "1", env.root.to_str().unwrap()], Some(&log), as_nobody)
        };
        (env, log, daemon)
    };

    // A queue of 16 events (the kernel reads the limit when the daemon's
    // inotify instance is made): a burst of 400 new files overflows it.
    let (env, log, daemon) = start_lowered("max_queued_events", "16", false);
    // The daemon is stopped (SIGSTOP) while the burst is written, so that
    // nothing drains the queue: files into directories watched from the
    // start, and new directories.
    let signal = |sig: &str| {
        assert!(Command::new("kill").arg(sig).arg(daemon.0.id().to_string()).status().unwrap().success());
    };
    signal("-STOP");
    for i in 0..400u64 {
        env.write(&format!("d{}/burst{i}.txt", i % 5), text(100 + i, 50));
    }
    for i in 0..20u64 {
        env.write(&format!("new{i}/sub/f.txt"), text(600 + i, 50));
    }
    signal("-CONT");
    converges(&env, "an overflowing event queue");
    assert!(read(&log).contains("events were lost"), "{}", read(&log));
    assert!(simd::watch::DaemonState::running(&env.db).unwrap().rescans >= 1);
    // The directories the burst made (their creations were lost with the
    // rest: notify never watched them) are watched after the rescan: a
    // file written into the last one later is indexed.
    env.write("new19/sub/later.txt", text(700, 50));
    converges(&env, "a file written into a directory made while events were lost");
    stop_with_sigterm(daemon);

    // A watch limit of 2 for the daemon's user (nobody, whose count starts
    // at 0): most of the tree's 6 directories go unwatched.
    let (env, log, daemon) = start_lowered("max_user_watches", "2", true);
    let said = read(&log);
    assert!(said.contains("inotify watch limit is reached") && said.contains("fs.inotify.max_user_watches"), "{said}");
    let status = env.simd().arg("status").assert().success();
    assert!(String::from_utf8_lossy(&status.get_output().stdout).contains("DEGRADED"));
    // Changes in every directory, watched or not: the periodic rescans
    // (every second here) catch what no event reports.
    for i in 0..5u64 {
        env.write(&format!("d{i}/new.txt"), text(200 + i, 300));
    }
    converges(&env, "changes in directories the watch limit left unwatched");
    stop_with_sigterm(daemon);
}

#[test]
fn template_marks_and_rescans_reach_the_running_daemon() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    boilerplate_articles(&env);
    env.index();
    let d = start(&env);
    let socket = env.db.join("control.sock");
    assert_eq!(std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777, 0o600);
    let report = |env: &Env| env.json(&["report"]);
    let r = report(&env);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 1, "{r:#}");
    let id = r["clusters"][0]["id"].as_str().unwrap().to_string();
    // The daemon holds the index; the mark goes through its socket.
    let said = env.json(&["template", "mark", &id]);
    assert_eq!(said["cluster"].as_str(), Some(id.as_str()), "{said:#}");
    assert!(said["chunks"].as_u64() > Some(0) && said["bytes"].as_u64() > Some(0), "{said:#}");
    assert_eq!(report(&env)["clusters"].as_array().unwrap().len(), 0);
    let out = env.simd().args(["template", "mark", "ffffffffffff"]).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("no cluster ffffffffffff"));
    env.simd().args(["template", "unmark", &id]).assert().success();
    assert_eq!(report(&env)["clusters"].as_array().unwrap().len(), 1);

    let out = env.simd().arg("rescan").assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("rescanned: 0 new"), "{out:?}");
    assert_eq!(simd::watch::DaemonState::running(&env.db).unwrap().rescans, 1);
    let said = env.json(&["rescan"]);
    let held = env.json(&["status"])["files"].as_u64();
    assert_eq!((said["new"].as_u64(), said["unchanged"].as_u64()), (Some(0), held), "{said:#}");

    // Without a daemon, rescan says what to do instead, and the socket is gone.
    stop_with_sigterm(d);
    assert!(!socket.exists());
    let out = env.simd().arg("rescan").assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("`simd index` rescans"));
}

/// A socket address holds 107 bytes of path: an index deeper than that
/// still gets its control socket, reached through the directory's
/// descriptor, and the commands that go through it work.
#[test]
fn the_control_socket_of_a_deep_index_is_reached() {
    let mut env = Env::new();
    env.db = env.tmp.path().join("d".repeat(70)).join("e".repeat(70)).join("index");
    assert!(env.db.join("control.sock").as_os_str().len() > 107);
    env.write("a.txt", text(1, 400));
    env.index();
    let d = start(&env);
    assert!(env.db.join("control.sock").exists(), "the daemon made no socket");
    let said = env.json(&["rescan"]);
    assert_eq!((said["new"].as_u64(), said["unchanged"].as_u64()), (Some(0), Some(1)), "{said:#}");
    let out = env.simd().arg("reread").assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("1 file"), "{out:?}");
    stop_with_sigterm(d);
    assert!(!env.db.join("control.sock").exists());
}

/// A tree of two files (one in a directory), indexed, and a daemon on it
/// with its log; the root as the daemon shows it. The daemon comes last,
/// so that it stops before the tree goes.
fn two_files_watched_logged() -> (Env, std::path::PathBuf, String, Daemon) {
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    env.write("d/b.txt", text(2, 400));
    env.index();
    let (d, log) = start_logged(&env);
    let root = env.root.display().to_string();
    (env, log, root, d)
}

/// Waits until the running daemon of `env` says that `want` are its
/// missing roots.
fn wait_missing_roots(env: &Env, want: &[&str], what: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while simd::watch::DaemonState::running(&env.db).is_some_and(|s| s.missing_roots != want) {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A root deleted under the daemon is said so, and a rescan meanwhile
/// walks it as an empty one instead of stopping the daemon. Made again
/// (a deploy's `rm -rf docs && cp -r new docs`), it is a new directory
/// that no watch covers: the daemon looks for it every second, watches it
/// and rescans, and follows what is written into it from then on.
#[test]
fn a_root_deleted_and_made_again_is_watched_again() {
    let (env, log, root, d) = two_files_watched_logged();
    std::fs::remove_dir_all(&env.root).unwrap();
    wait_missing_roots(&env, &[&root], "the daemon did not see its root go");
    let out = env.simd().arg("rescan").assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("rescanned"), "{out:?}");
    assert_eq!(state(&env.db).unwrap().0, vec![], "the files of a root gone are removed");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("{root}: the root is gone")), "{said}");

    std::fs::create_dir(&env.root).unwrap();
    env.write("a.txt", text(1, 400));
    converges(&env, "the root made again");
    env.write("later/c.txt", text(3, 400));
    converges(&env, "a file written into the new root");
    assert!(simd::watch::DaemonState::running(&env.db).unwrap().missing_roots.is_empty());
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("{root}: the root is back")), "{said}");
    stop_with_sigterm(d);
}

/// A root moved away and back (a share unmounted for maintenance, a tree
/// moved out for a moment) within its grace keeps its files in the index
/// meanwhile, and on its return is not read again: its files are
/// unchanged. A root that stays away past its grace has its files
/// recorded as removed then, and one missing when the daemon starts has
/// the same grace.
#[test]
fn a_root_away_within_its_grace_keeps_its_files_and_is_not_read_again() {
    let (env, log, root, d) = two_files_watched_logged();
    let away = env.tmp.path().join("away");
    let held = state(&env.db).unwrap();
    let running = || simd::watch::DaemonState::running(&env.db).unwrap();
    let changed = running().changed_files;
    std::fs::rename(&env.root, &away).unwrap();
    wait_missing_roots(&env, &[&root], "the daemon did not see its root go");
    // Past a root check or two, each of which sees it still gone.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(state(&env.db).unwrap(), held, "the files of a root in its grace stay");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("{root}: the root is gone")), "{said}");
    assert!(said.contains("its files stay in the index for 300 s"), "{said}");
    let status = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&status.get_output().stdout).to_string();
    assert!(status.contains("keeps until then (recorded as removed then unless back"), "{status}");
    assert!(status.contains(&format!("{root} (until ")), "{status}");

    let rescans = running().rescans;
    std::fs::rename(&away, &env.root).unwrap();
    wait_missing_roots(&env, &[], "the daemon did not see its root come back");
    converges(&env, "the root back");
    let until = Instant::now() + Duration::from_secs(60);
    while running().rescans == rescans {
        assert!(Instant::now() < until, "no rescan after the root came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(running().changed_files, changed, "nothing read again, removed or moved");
    let s = Store::open(&env.db, Access::Read, None).unwrap();
    let a = env.root.canonicalize().unwrap().join("a.txt");
    assert_eq!(s.history_of(a.to_str().unwrap().as_bytes()).count(), 0, "no ghost of a.txt");
    drop(s);
    stop_with_sigterm(d);

    // Past a grace of 2 s, the files of a root still away are removed;
    // missing when the daemon starts (beside a root that is there), it
    // has that grace too.
    std::fs::rename(&env.root, &away).unwrap();
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("c.txt"), text(3, 400)).unwrap();
    env.simd().args(["--quiet", "index"]).arg(&other).assert().success();
    let files_under_root = || {
        let prefix = format!("{root}/");
        state(&env.db).unwrap().0.into_iter().filter(|(p, _)| p.starts_with(prefix.as_bytes())).collect::<Vec<_>>()
    };
    assert_eq!(files_under_root(), held.0);
    let log2 = env.tmp.path().join("daemon2.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "50", "--root-grace", "2"], Some(&log2), false)
    };
    assert_eq!(files_under_root(), held.0, "a root missing at the start keeps its files for its grace");
    let until = Instant::now() + Duration::from_secs(60);
    while !files_under_root().is_empty() {
        assert!(Instant::now() < until, "the files of a root gone past its grace were not removed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let said = std::fs::read_to_string(&log2).unwrap();
    assert!(said.contains("its files stay in the index for 2 s"), "{said}");
    assert!(said.contains(&format!("{root}: the root's grace is over")), "{said}");
    assert_eq!(state(&env.db).unwrap().0.len(), 1, "the other root's file stays");
    stop_with_sigterm(d);
}

/// A root replaced by a symlink under the daemon is gone (no symlink is
/// followed): its files leave the index past its grace, and neither the
/// root checks nor a rescan take the link's target for a new root.
#[test]
fn a_root_replaced_by_a_symlink_is_gone_for_the_daemon() {
    let env = Env::new();
    let (a, b, other) = super::two_roots_and_another(&env);
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "50", "--root-grace", "0"], None, false)
    };
    super::link_in_place_of(&b, &other);
    let names = || -> Vec<String> {
        state(&env.db).unwrap().0.iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect()
    };
    let want = [a.join("one.txt").to_str().unwrap().to_owned()];
    let until = Instant::now() + Duration::from_secs(60);
    while names() != want {
        assert!(Instant::now() < until, "the live index holds {:?}", names());
        std::thread::sleep(Duration::from_millis(50));
    }
    env.json(&["rescan"]);
    assert_eq!(names(), want);
    let roots = env.json(&["status"])["roots"].clone();
    assert_eq!(roots, serde_json::json!([{ "path": a.to_str().unwrap() }, { "path": b.to_str().unwrap() }]), "{roots}");
    stop_with_sigterm(d);
}

/// A daemon started while every root of its index is missing (a share not
/// mounted yet at boot, named in the unit file) starts and waits for them,
/// their files kept for the grace; it refused to start, and its service
/// manager started it again every few seconds until the share was there.
/// Back, the root is followed. A root new to the index must be there: a
/// mistyped one is refused at once.
#[test]
fn a_daemon_started_with_every_root_missing_waits_for_them() {
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    env.index();
    let held = state(&env.db).unwrap();
    let root = env.root.display().to_string();
    let away = env.tmp.path().join("away");
    std::fs::rename(&env.root, &away).unwrap();
    let typo = env.tmp.path().join("tre");
    let out = env.simd().arg("watch").arg(&typo).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&format!("{}: No such file or directory", typo.display())), "{err}");

    let (d, log) = start_logged(&env);
    wait_missing_roots(&env, &[&root], "the daemon did not say that its root is missing");
    assert_eq!(state(&env.db).unwrap(), held, "the files of a root in its grace stay");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("{root}: this root is missing")), "{said}");
    assert!(said.contains("its files stay in the index for 300 s"), "{said}");

    std::fs::rename(&away, &env.root).unwrap();
    env.write("b.txt", text(2, 400));
    wait_missing_roots(&env, &[], "the daemon did not see its root come back");
    converges(&env, "the root back");
    stop_with_sigterm(d);
}

/// A root moved away under a daemon whose event queue overflows as the
/// root's watches go (an IN_IGNORED event for each of its directories:
/// 31k for Django's releases, at the default queue of 16k) keeps its
/// grace through the rescan that the overflow brings, in which the daemon
/// watches its roots anew: that rescan recorded all 66.5k files as removed.
#[test]
fn a_root_away_keeps_its_grace_through_an_overflowing_queue() {
    if !super::is_root() {
        eprintln!("not root: inotify's limits cannot be lowered here");
        return;
    }
    let env = Env::new();
    for i in 0..60u64 {
        env.write(&format!("d{i}/f.txt"), text(i, 300));
    }
    env.index();
    let log = env.tmp.path().join("daemon.log");
    let d = {
        let _alone = LIMITS.write().unwrap_or_else(|p| p.into_inner());
        let _lowered = Lowered::set("max_queued_events", "16");
        spawn(&env, &["--debounce-ms", "50", env.root.to_str().unwrap()], Some(&log), false)
    };
    let running = || simd::watch::DaemonState::running(&env.db).unwrap();
    let held = state(&env.db).unwrap();
    let away = env.tmp.path().join("away");
    std::fs::rename(&env.root, &away).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log).unwrap().contains("events were lost") || running().rescans == 0 {
        assert!(Instant::now() < until, "no overflow: {}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(state(&env.db).unwrap(), held, "the files of a root in its grace stay through the rescan");
    std::fs::rename(&away, &env.root).unwrap();
    converges(&env, "the root back");
    assert_eq!(running().changed_files, 0, "nothing read again or removed");
    stop_with_sigterm(d);
}

/// A root that is a mount point, unmounted for a while and mounted again
/// (a share's maintenance), keeps its files meanwhile and is not read
/// again on its return: neither the unmount's events (a removal of each
/// directory watched there) nor the root checks, which find the bare mount
/// point in its place, record them as removed within its grace. A bind
/// mount, in a mount namespace of its own (`unshare`, as below).
#[test]
fn a_root_unmounted_and_mounted_again_within_its_grace_is_not_read_again() {
    let env = Env::new();
    let stage = env.tmp.path().join("stage");
    let data = stage.join("data");
    std::fs::create_dir_all(data.join("d")).unwrap();
    std::fs::write(data.join("a.txt"), text(1, 400)).unwrap();
    std::fs::write(data.join("d/b.txt"), text(2, 400)).unwrap();
    let log = env.tmp.path().join("daemon.log");
    let script = r#"
        set -e
        mount --bind "$STAGE/data" "$ROOT"
        "$SIMD" --db "$DB" --quiet index "$ROOT"
        "$SIMD" --db "$DB" watch --debounce-ms 50 "$ROOT" 2> "$LOG" &
        pid=$!
        while [ ! -e "$STAGE/go1" ]; do sleep 0.02; done
        umount "$ROOT"
        touch "$STAGE/done1"
        while [ ! -e "$STAGE/go2" ]; do sleep 0.02; done
        mount --bind "$STAGE/data" "$ROOT"
        touch "$STAGE/done2"
        while [ ! -e "$STAGE/stop" ]; do sleep 0.02; done
        kill -TERM $pid
        wait $pid
    "#;
    let mut child = Daemon(in_mount_namespace(&env, script, &stage, &log).spawn().unwrap());
    wait_ready(&env, Some(&log));
    let running = || simd::watch::DaemonState::running(&env.db).unwrap();
    let held = state(&env.db).unwrap();
    assert_eq!(held.0.len(), 2);
    let changed = running().changed_files;
    for (step, what) in [(1, "unmounted"), (2, "mounted again")] {
        let rescans = running().rescans;
        std::fs::write(stage.join(format!("go{step}")), b"").unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while !stage.join(format!("done{step}")).exists() || running().rescans == rescans {
            assert!(Instant::now() < until, "no rescan once the root was {what}: {:?}", std::fs::read_to_string(&log));
            std::thread::sleep(Duration::from_millis(20));
        }
        // Events and root checks after the rescan too.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(state(&env.db).unwrap(), held, "the root {what}");
    }
    assert_eq!(running().changed_files, changed, "nothing read again or removed");
    let said = std::fs::read_to_string(&log).unwrap();
    let root = env.root.to_str().unwrap();
    for change in [
        "the file system mounted on the root was unmounted: watching the directory it covered and rescanning",
        "a file system was mounted on the root: watching it and rescanning",
    ] {
        assert!(said.contains(&format!("{root}: {change}")), "{said}");
    }
    std::fs::write(stage.join("stop"), b"").unwrap();
    assert!(child.0.wait().unwrap().success());
}

/// A root whose own metadata changes (`rsync -a SRC/ ROOT/` sets its
/// mtime, as do `touch` and `chmod`) is the same directory: it is not
/// taken as replaced (watched anew and rescanned, with a warning), and
/// what is written into it later is followed as before.
#[test]
fn a_root_whose_own_metadata_changes_is_not_rescanned() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    env.index();
    let (d, log) = start_logged(&env);
    let running = || simd::watch::DaemonState::running(&env.db).unwrap();
    let (rescans, batches) = (running().rescans, running().batches);
    let f = std::fs::File::open(&env.root).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600)).unwrap();
    std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o750)).unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while running().batches == batches {
        assert!(Instant::now() < until, "the daemon saw no event for its root");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the once-a-second look at the roots.
    std::thread::sleep(Duration::from_millis(1500));
    env.write("b.txt", text(2, 400));
    converges(&env, "a file written after the root's metadata changed");
    assert_eq!(running().rescans, rescans, "no rescan");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!said.contains("the root is back"), "{said}");
    stop_with_sigterm(d);
}

/// Every directory of a tree named in one batch (`rsync -a` sets each
/// one's mtime at its end): each is walked within the walk of the first
/// one above it, not again, and what changed under them meanwhile (a file
/// written deep down, a subdirectory removed, one made) is all found.
#[test]
fn directories_named_together_are_walked_once_and_miss_nothing() {
    let env = Env::new();
    for d in ["a", "a/b", "a/b/c", "a/b/c/d", "e", "e/f"] {
        env.write(&format!("{d}/x.txt"), text(d.len() as u64 * 7, 300));
    }
    env.index();
    let _daemon = start(&env);
    env.write("a/b/c/d/new.txt", text(40, 300));
    std::fs::remove_dir_all(env.root.join("e/f")).unwrap();
    env.write("a/b/g/h/made.txt", text(41, 300));
    let past = std::time::SystemTime::now() - Duration::from_secs(7200);
    for d in ["a/b/c/d", "a/b/c", "a/b/g/h", "a/b/g", "a/b", "a", "e", "."] {
        std::fs::File::open(env.root.join(d)).unwrap().set_modified(past).unwrap();
    }
    converges(&env, "a tree's directories touched while files changed under them");
}

/// The index directory deleted under the daemon (an index reset by hand):
/// the daemon says so within seconds and exits 1, so that a service
/// manager starts it again, and the next daemon builds the index anew from
/// a scan. It neither goes on writing into the deleted files nor makes the
/// directory again.
#[test]
fn an_index_deleted_under_the_daemon_stops_it_with_what_to_do() {
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    let (mut d, log) = start_logged(&env);
    std::fs::remove_dir_all(&env.db).unwrap();
    // A change for it to write meanwhile.
    env.write("b.txt", text(2, 400));
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = d.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "the daemon went on without its index");
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    let db = env.db.display();
    assert!(
        said.contains(&format!("{db}: the index directory was removed or replaced while the daemon ran")),
        "{said}"
    );
    let root = env.root.to_str().unwrap();
    assert!(said.contains(&format!("`simd watch {root}` builds the index anew")), "{said}");
    // RocksDB's errors as it closes files that went with the directory
    // (a missing manifest) would only bury that message.
    assert!(!said.contains("rocksdb:"), "{said}");
    assert!(!env.db.exists(), "the daemon made the index directory again");

    let mut d = start(&env);
    converges(&env, "a new daemon on a new index");
    // Its terminal closed (SIGHUP): a clean stop too.
    assert!(Command::new("kill").arg("-HUP").arg(d.0.id().to_string()).status().unwrap().success());
    let status = d.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!env.db.join("daemon.json").exists(), "a stopped daemon leaves no state file");
}

/// A thread of the daemon that fails (notify's, made to panic here by an
/// event for a file of a name the test chose) would leave the rest running
/// blind to every later change: the daemon stops at once instead, and not
/// with success, so that its service manager starts it again. The new
/// start catches up with what changed meanwhile.
#[test]
fn a_failed_thread_stops_the_daemon_so_that_a_restart_catches_up() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    let log = env.tmp.path().join("daemon.log");
    // Through a shell that allows no core file: abort() would leave one in
    // the working directory where the limit allows it.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "ulimit -c 0 && exec \"$0\" \"$@\""]).arg(assert_cmd::cargo::cargo_bin("simd"));
    cmd.env("SIMD_TEST_PANIC_AT_EVENT", "fails.txt");
    let mut d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        start_command(&env, cmd, &["--debounce-ms", "50", env.root.to_str().unwrap()], Some(&log))
    };
    env.write("fails.txt", text(2, 400));
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = d.0.try_wait().unwrap() {
            break s;
        }
        let said = std::fs::read_to_string(&log).unwrap();
        assert!(Instant::now() < until, "the daemon went on without notify's thread\n{said}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}\n{said}");
    assert!(said.contains("fails.txt: the failure the test asked for"), "{said}");
    assert!(said.contains("a thread of the daemon failed (above): stopping now"), "{said}");

    env.write("b.txt", text(3, 400));
    let _d = start(&env);
    converges(&env, "a start after a failed thread");
}

#[test]
fn the_daemon_merges_the_small_table_files_its_flushes_leave() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.index();
    let starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("simd"));
    cmd.env("SIMD_TEST_FLUSH_IDLE_MS", "100");
    let _d = start_command(&env, cmd, &["--debounce-ms", "20", env.root.to_str().unwrap()], None);
    drop(starting);
    // A file at a time, each flushed after it (a quiet spell of 100 ms):
    // every flush adds a small table file to `files`, `content_by_id` and
    // `paths`, which RocksDB alone never merged.
    for i in 0..12 {
        let p = env.write(&format!("n{i:02}.txt"), text(i + 2, 300));
        let until = Instant::now() + Duration::from_secs(30);
        let live = || {
            let out = env.simd().args(["--format", "json", "lost"]).arg(&p).output().unwrap();
            serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok_and(|v| v["state"] == "live")
        };
        while !live() {
            assert!(Instant::now() < until, "{}: not indexed after 30 s", p.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let tables = super::index::table_files(&env);
    assert!(tables.iter().all(|(_, n)| *n <= 7), "{tables:?}");
    converges(&env, "twelve files added one at a time, each flushed");
}

/// Waits until the daemon of `env` reads `n` large files in the background.
fn reading(env: &Env, n: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    while simd::watch::DaemonState::running(&env.db).is_none_or(|s| s.reading < n) {
        assert!(Instant::now() < until, "the daemon never read {n} large files in the background");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops the daemon as a service manager would (SIGTERM) and checks that it
/// exits cleanly (status 0).
fn stop_with_sigterm(mut d: Daemon) {
    assert!(Command::new("kill").arg("-TERM").arg(d.0.id().to_string()).status().unwrap().success());
    let status = d.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// A daemon stopped (SIGSTOP, Ctrl-Z at its terminal) still holds the
/// index and its socket, and answers nothing: `simd status` says so, and a
/// request says at once what it waits for (a script's wait would otherwise
/// not end, unexplained), then has its answer once the daemon is
/// continued.
#[test]
fn a_stopped_daemon_is_said_to_be_stopped_and_answers_once_continued() {
    use std::io::BufRead;
    let env = Env::new();
    env.write("a.txt", text(1, 200));
    let daemon = start(&env);
    converges(&env, "start");
    let pid = daemon.0.id().to_string();
    let signal = |sig: &str| assert!(Command::new("kill").arg(sig).arg(&pid).status().unwrap().success());
    signal("-STOP");
    let s = env.json(&["status"]);
    assert_eq!(s["daemon_stopped"], true, "{s:#}");
    let out = env.simd().arg("status").output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("STOPPED (SIGSTOP") && shown.contains(&format!("kill -CONT {pid}")), "{shown}");
    let mut rescan = Command::new(assert_cmd::cargo::cargo_bin("simd"))
        .arg("--db")
        .arg(&env.db)
        .args(["--format", "json", "rescan"])
        .env_remove("SIMD_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr read on a thread, so that a note that never comes fails
    // the test rather than hanging it.
    let (tx, rx) = crossbeam_channel::unbounded();
    let err = rescan.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let note = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line.contains("is stopped") => break line,
            Ok(_) => {}
            Err(e) => panic!("no note of the stopped daemon: {e}"),
        }
    };
    assert!(note.contains(&format!("the daemon (pid {pid}) is stopped")) && note.contains("kill -CONT"), "{note}");
    assert!(rescan.try_wait().unwrap().is_none(), "the request waits for the daemon");
    signal("-CONT");
    let out = rescan.wait_with_output().unwrap();
    reader.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["unchanged"].as_u64(), Some(1), "the rescan done once continued: {answer:#}");
    assert_eq!(env.json(&["status"])["daemon_stopped"], false);
    stop_with_sigterm(daemon);
}

/// `simd forget` while the daemon runs goes through its socket: the
/// daemon stops following the root, and a remembered root that lay inside
/// it is followed on its own. Forgetting the daemon's last root is refused.
#[test]
fn a_root_forgotten_under_the_daemon_is_no_longer_followed() {
    let env = Env::new();
    let (a, b, sub) = (env.root.join("a"), env.root.join("b"), env.root.join("a/sub"));
    env.write("a/one.txt", text(1, 400));
    env.write("a/two.txt", text(2, 400));
    env.write("a/sub/kept.txt", text(3, 400));
    env.write("b/three.txt", text(4, 400));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    env.simd().args(["--quiet", "index"]).arg(&sub).assert().success();
    let log_path = env.tmp.path().join("daemon.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["-v", "--debounce-ms", "50"], Some(&log_path), false)
    };
    // Large files being read when the root is forgotten: the read of the
    // one in it is given up, not that of the one in the root inside it.
    for (name, len) in [("a/big.bin", 2u64 << 30), ("a/sub/big.bin", 1 << 30)] {
        std::fs::File::create(env.root.join(name)).unwrap().set_len(len).unwrap();
    }
    reading(&env, 2);
    let out = env.simd().arg("forget").arg(&a).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains(&format!("forgot {}: 2 files dropped", a.display())), "{said}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    let forgotten = |p: &std::path::Path| format!("{}: its root forgotten while being read", p.display());
    assert!(log.contains(&forgotten(&a.join("big.bin"))), "{log}");
    assert!(!log.contains(&forgotten(&sub.join("big.bin"))), "{log}");
    let roots = simd::watch::DaemonState::running(&env.db).unwrap().roots;
    assert_eq!(roots, [b.display().to_string(), sub.display().to_string()]);
    converges_to(&env, &[&b, &sub], "forgetting a root");
    env.write("a/new.txt", text(5, 400));
    env.write("a/sub/new.txt", text(6, 400));
    env.write("b/new.txt", text(7, 400));
    converges_to(&env, &[&b, &sub], "writes in, beside and inside the forgotten root");

    let out = env.simd().arg("forget").arg(&b).arg(&sub).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("would have no root left to watch: stop it first"), "{err}");
    converges_to(&env, &[&b, &sub], "a refused forget");
    stop_with_sigterm(d);
    env.check();
}

/// `simd index ROOT` while the daemon runs: rather than "index in use",
/// the daemon remembers the root, watches it and rescans, and answers once
/// the root is indexed; a file written there later arrives by events.
/// `simd index` alone asks for a rescan. With an option that shapes the
/// run (`-x`), the daemon's own options would not be the ones asked for:
/// refused, with what to do.
#[test]
fn simd_index_of_a_new_root_is_handed_to_the_daemon() {
    let env = Env::new();
    let (a, b) = (env.root.join("a"), env.root.join("b"));
    env.write("a/one.txt", text(1, 400));
    env.write("b/two.txt", text(2, 400));
    env.simd().args(["--quiet", "index"]).arg(&a).assert().success();
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "50"], None, false)
    };
    let out = env.simd().args(["--format", "json", "index"]).arg(&b).assert().success();
    let answer: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((answer["added"][0]["path"].as_str(), answer["new"].as_u64()), (b.to_str(), Some(1)), "{answer}");
    // Answered after the rescan: the root's file is in the index already.
    assert_eq!(state(&env.db).unwrap(), state_of_fresh(&env, &[&a, &b]), "right after the answer");
    let roots = simd::watch::DaemonState::running(&env.db).unwrap().roots;
    assert_eq!(roots, [a.display().to_string(), b.display().to_string()]);
    env.write("b/three.txt", text(3, 400));
    converges_to(&env, &[&a, &b], "a file written in the added root");
    // `simd index` alone: a rescan of both roots.
    let out = env.simd().arg("index").assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).starts_with("rescanned: 0 new"), "{out:?}");
    let out = env.simd().args(["index", "-x"]).arg(&b).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("index in use by pid"), "{err}");
    stop_with_sigterm(d);
    // Remembered, for the next start and for `simd index` without a daemon.
    let s = Store::open(&env.db, Access::Read, None).unwrap();
    assert_eq!(simd::ingest::remembered(&s).unwrap(), [a.clone(), b.clone()]);
    drop(s);
    // A daemon started with its roots named watches only those at its
    // next start: the answer says so.
    let c = env.root.join("c");
    env.write("c/four.txt", text(4, 400));
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "50", a.to_str().unwrap()], None, false)
    };
    let out = env.simd().arg("index").arg(&c).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains("started with its roots named (`simd watch ROOT...`)"), "{said}");
    stop_with_sigterm(d);
    env.check();
}

/// A large file appended to again and again (a growing log, an image
/// written with pauses) is held between reads instead of being read whole
/// at every change, and its last version is indexed once it settles.
#[test]
fn a_large_file_that_keeps_changing_is_held_between_reads() {
    let env = Env::new();
    let big = env.write("big.bin", noise(1, 20 << 20));
    env.write("small.txt", text(1, 300));
    env.index();
    let d = start(&env);
    let changed = changed_files;
    let before = changed(&env);
    let appends = 24;
    for i in 0..appends {
        let mut f = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
        std::io::Write::write_all(&mut f, format!("line {i}\n").as_bytes()).unwrap();
        drop(f);
        // Longer than the debounce: each append is a batch of its own.
        std::thread::sleep(Duration::from_millis(150));
    }
    converges(&env, "appends to a large file");
    // 20 MiB is held ~0.66 s after each read: about one read in four appends.
    let reads = changed(&env) - before;
    assert!(reads <= appends / 2, "the large file was written {reads} times for {appends} appends");
    stop_with_sigterm(d);
}

/// A large file is read beside the daemon's batches: the small changes
/// made while it is read are indexed meanwhile (a 1.5 GB file held them
/// back ~4 s when batches read it), and what it read is written only if
/// the file is still the one read.
#[test]
fn a_large_file_being_read_does_not_hold_back_small_changes() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let log_path = env.tmp.path().join("daemon.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["-v", env.root.to_str().unwrap()], Some(&log_path), false)
    };
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    converges(&env, "start");
    let has = |name: &str| {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        files_of(&s).iter().any(|(p, _)| p.ends_with(name.as_bytes()))
    };
    // Zeros, sparse: seconds of reading (TTTD finds no cut in them) for no
    // disk space.
    let sparse = |name: &str, len: u64| {
        let f = std::fs::File::create(env.root.join(name)).unwrap();
        f.set_len(len).unwrap();
    };
    sparse("big.bin", 2 << 30);
    reading(&env, 1);
    env.write("small.txt", text(2, 300));
    let until = Instant::now() + Duration::from_secs(60);
    while !has("/small.txt") {
        assert!(Instant::now() < until, "the small file was never indexed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!has("/big.bin"), "the small file waited for the large file's read");

    // Renamed while it is read: the read goes on under its new name (the
    // file is not read again; `a_large_file_renamed_while_it_is_read_is_read_once`
    // counts the bytes).
    std::fs::rename(env.root.join("big.bin"), env.root.join("big-renamed.bin")).unwrap();
    converges(&env, "a large file renamed while being read");
    assert!(!log().contains("bin: renamed over while being read"), "{}", log());
    assert!(!log().contains("big.bin: removed while being read"), "{}", log());
    let given_up =
        |name: &str| log().lines().any(|l| l.contains(&format!("/{name}: removed while being read: read given up")));

    // Removed while it is read: given up, not read to its end.
    sparse("gone.bin", 2 << 30);
    reading(&env, 1);
    std::fs::remove_file(env.root.join("gone.bin")).unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !given_up("gone.bin") {
        assert!(Instant::now() < until, "the read of a removed file was not given up:\n{}", log());
        std::thread::sleep(Duration::from_millis(20));
    }
    converges(&env, "a large file removed while being read");

    // Stopped while one is read: the read is given up, the daemon exits 0,
    // and the next start reads the file.
    sparse("big-2.bin", 1 << 30);
    reading(&env, 1);
    let out = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(status.contains(", 1 large file being read,"), "{status}");
    stop_with_sigterm(d);
    let d = start(&env);
    converges(&env, "a restart after a stop during a large read");
    stop_with_sigterm(d);
}

/// A large file that changed without an event (here grown through a hard
/// link outside the root; on a network root, by another machine) is found
/// by a rescan and read beside the batches: the rescan answers at once,
/// and the small changes made meanwhile are indexed while it is read.
#[test]
fn a_large_file_a_rescan_finds_changed_is_read_beside_the_batches() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("big.bin"), b"small for now").unwrap();
    std::fs::hard_link(outside.join("big.bin"), env.root.join("big.bin")).unwrap();
    env.index();
    let d = start(&env);
    let content_of = |name: &str| {
        let s = Store::open(&env.db, Access::Read, None).unwrap();
        files_of(&s).into_iter().find(|(p, _)| p.ends_with(name.as_bytes())).map(|(_, c)| c)
    };
    let before = content_of("/big.bin").expect("indexed");
    // Zeros, sparse: seconds of reading for no disk space.
    std::fs::OpenOptions::new().write(true).open(outside.join("big.bin")).unwrap().set_len(2 << 30).unwrap();
    let said = env.json(&["rescan"]);
    assert_eq!((said["changed"].as_u64(), said["background"].as_u64()), (Some(0), Some(1)), "{said:#}");
    let out = env.simd().arg("rescan").assert().success();
    let text_said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text_said.contains("1 large file changed: being read in the background"), "{text_said}");
    env.write("small.txt", text(2, 300));
    let until = Instant::now() + Duration::from_secs(60);
    while content_of("/small.txt").is_none() {
        assert!(Instant::now() < until, "the small file was never indexed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(content_of("/big.bin"), Some(before), "the small file waited for the large file's read");
    converges(&env, "a large file a rescan found changed");
    stop_with_sigterm(d);
}

/// A burst of large files (a directory of videos copied in) waits for the
/// background readers without holding a file descriptor each: under a
/// limit of 64 descriptors, 100 new files of 16 MiB are all indexed (each
/// held one while it waited before, and 60 of them were skipped as
/// unreadable).
#[test]
fn a_burst_of_large_files_does_not_run_the_daemon_out_of_descriptors() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.index();
    let log = env.tmp.path().join("daemon.log");
    // Soft and hard: the daemon cannot raise it.
    let d = spawn_under_ulimit(&env, "-n 64", &log);
    for i in 0..100u64 {
        // Zeros but for a first line of their own: 100 contents.
        let mut f = std::fs::File::create(env.root.join(format!("video-{i}.bin"))).unwrap();
        std::io::Write::write_all(&mut f, format!("video {i}\n").as_bytes()).unwrap();
        f.set_len(16 << 20).unwrap();
    }
    converges(&env, "a burst of large files");
    let s = Store::open(&env.db, Access::Read, None).unwrap();
    assert_eq!(files_of(&s).len(), 101);
    drop(s);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!said.contains("Too many open files"), "{said}");
    stop_with_sigterm(d);
}

/// Starts the daemon of `env` under `ulimit ARGS` (a shell's), its log in `log`.
fn spawn_under_ulimit(env: &Env, args: &str, log: &std::path::Path) -> Daemon {
    let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("ulimit {args} && exec \"$0\" \"$@\"")]).arg(assert_cmd::cargo::cargo_bin("simd"));
    start_command(env, cmd, &[env.root.to_str().unwrap()], Some(log))
}

/// simd raises its soft limit on open files to the hard one: a reader
/// opens every table file of the index, more than the 1,024 a process
/// starts with for an index of a few TB.
#[test]
fn the_soft_limit_on_open_files_is_raised_to_the_hard_one() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let log = env.tmp.path().join("daemon.log");
    let d = spawn_under_ulimit(&env, "-S -n 64", &log);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.0.id())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    // "Max open files <soft> <hard> files"
    let (soft, hard) = (fields[3], fields[4]);
    assert_ne!(soft, "64", "{line}");
    if hard != "unlimited" {
        assert_eq!(soft, hard, "{line}");
    }
    stop_with_sigterm(d);
}

/// A root on a network file system (here one that `mountinfo` says is
/// NFS): other machines' changes raise no inotify event there, so the
/// daemon says so and rescans it every `--rescan-every` seconds.
#[test]
fn a_root_on_a_network_file_system_is_rescanned_periodically() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.index();
    let mountinfo = env.tmp.path().join("mountinfo");
    let point = env.root.to_str().unwrap().replace(' ', "\\040");
    std::fs::write(
        &mountinfo,
        format!("27 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 27 0:45 / {point} rw - nfs4 server:/export rw\n"),
    )
    .unwrap();
    let log = env.tmp.path().join("daemon.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("simd"));
        cmd.env("SIMD_TEST_MOUNTINFO", &mountinfo);
        start_command(&env, cmd, &["--rescan-every", "1", env.root.to_str().unwrap()], Some(&log))
    };
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains(&format!("{} (nfs4): a network or FUSE file system", env.root.display())), "{said}");
    let until = Instant::now() + Duration::from_secs(60);
    while simd::watch::DaemonState::running(&env.db).unwrap().rescans < 2 {
        assert!(Instant::now() < until, "no periodic rescans of a root on NFS");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(status.contains("network or FUSE file systems, also rescanned periodically"), "{status}");
    stop_with_sigterm(d);
}

/// A write through a hard link from outside the roots raises no event in
/// the watched tree (inotify tells a file's change to the directory of the
/// name it was written through): the periodic rescan of a fully watched
/// tree finds it, indexes it, and says that no event brought it.
#[test]
fn the_periodic_rescan_finds_a_change_that_raised_no_event() {
    use std::io::Write;
    let env = Env::new();
    let inside = env.write("a.txt", text(1, 300));
    let outside = env.tmp.path().join("outside.txt");
    std::fs::hard_link(&inside, &outside).unwrap();
    env.index();
    let log = env.tmp.path().join("daemon.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--full-rescan-every", "5", env.root.to_str().unwrap()], Some(&log), false)
    };
    let before = state(&env.db).unwrap();
    std::fs::OpenOptions::new().append(true).open(&outside).unwrap().write_all(&text(2, 40)).unwrap();
    // Well past the debounce, and (on any but a stalled machine) before
    // the first periodic rescan: no event brought the change.
    std::thread::sleep(Duration::from_secs(1));
    if simd::watch::DaemonState::running(&env.db).unwrap().rescans == 0 {
        assert_eq!(state(&env.db).unwrap(), before, "an event brought the change: this test would show nothing");
    }
    converges(&env, "a write through a hard link from outside the roots");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("the periodic rescan found 1 change that no file-system event had brought (0 new, 1 changed"),
        "{said}"
    );
    assert!(said.contains(&format!("among them {}", inside.canonicalize().unwrap().display())), "{said}");
    let out = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(status.contains(" (last "), "the time of the last rescan: {status}");
    stop_with_sigterm(d);
}

/// `sh -c SCRIPT` as root of a user and mount namespace of its own
/// (`unshare -rm`), where it may mount file systems without privileges,
/// with `$SIMD` (the binary), `$DB`, `$ROOT`, `$STAGE` and `$LOG` (for the
/// daemon's log) set.
fn in_mount_namespace(env: &Env, script: &str, stage: &std::path::Path, log: &std::path::Path) -> Command {
    let probe = Command::new("unshare").args(["-rm", "true"]).status();
    assert!(probe.is_ok_and(|s| s.success()), "this test needs `unshare -rm` (user and mount namespaces)");
    let mut cmd = Command::new("unshare");
    cmd.args(["-rm", "sh", "-c", script])
        .env("SIMD", assert_cmd::cargo::cargo_bin("simd"))
        .env("DB", &env.db)
        .env("ROOT", &env.root)
        .env("STAGE", stage)
        .env("LOG", log)
        .env_remove("SIMD_LOG")
        .env_remove("SIMD_DB");
    cmd
}

/// `--one-file-system` (`-x`): a file system mounted inside a root (here a
/// tmpfs, mounted in a mount namespace of its own by `unshare`, so that
/// the test needs no privileges beyond user namespaces) is left out by
/// `simd index -x`, which forgets what a run without it indexed there, and
/// by `simd watch -x`, whose recursive inotify watch does see the files
/// written there.
#[test]
fn one_file_system_leaves_out_a_file_system_mounted_inside_a_root() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.write("mnt/hidden.txt", text(2, 300)); // on the root's file system, under the mount
    let stage = env.tmp.path().join("stage");
    std::fs::create_dir(&stage).unwrap();
    std::fs::write(stage.join("other.txt"), text(3, 300)).unwrap();
    std::fs::write(stage.join("b.txt"), text(4, 300)).unwrap();
    let log = env.tmp.path().join("daemon.log");
    let script = r#"
        set -e
        mount -t tmpfs none "$ROOT/mnt"
        cp "$STAGE/other.txt" "$ROOT/mnt/other.txt"
        "$SIMD" --db "$DB" --format json index "$ROOT" > "$STAGE/without.json"
        "$SIMD" --db "$DB" --format json index -x "$ROOT" > "$STAGE/with.json"
        "$SIMD" --db "$DB" watch -x --debounce-ms 50 "$ROOT" 2> "$LOG" &
        pid=$!
        while [ ! -e "$STAGE/go" ]; do sleep 0.02; done
        mkdir "$ROOT/mnt/new"
        cp "$STAGE/other.txt" "$ROOT/mnt/new/x.txt"
        cp "$STAGE/b.txt" "$ROOT/mnt/b.txt"
        cp "$STAGE/b.txt" "$ROOT/b.txt"
        while [ ! -e "$STAGE/stop" ]; do sleep 0.02; done
        kill -TERM $pid
        wait $pid
    "#;
    let mut child = Daemon(in_mount_namespace(&env, script, &stage, &log).spawn().unwrap());
    wait_ready(&env, Some(&log));
    let names = |v: &serde_json::Value| v.to_string();
    let without: serde_json::Value =
        serde_json::from_slice(&std::fs::read(stage.join("without.json")).unwrap()).unwrap();
    let with: serde_json::Value = serde_json::from_slice(&std::fs::read(stage.join("with.json")).unwrap()).unwrap();
    assert_eq!(
        (without["new"].as_u64(), with["removed"].as_u64()),
        (Some(2), Some(0)),
        "{} / {}",
        names(&without),
        names(&with)
    );
    let paths = || -> Vec<String> { env.files().into_iter().map(|(p, _)| String::from_utf8(p).unwrap()).collect() };
    let root = env.root.to_str().unwrap();
    assert_eq!(paths(), [format!("{root}/a.txt")], "`index -x` forgot the file on the tmpfs");

    std::fs::write(stage.join("go"), b"").unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !paths().contains(&format!("{root}/b.txt")) {
        assert!(Instant::now() < until, "b.txt was never indexed: {:?}", std::fs::read_to_string(&log));
        std::thread::sleep(Duration::from_millis(20));
    }
    // The files on the tmpfs were written first; give their events time
    // to be handled (many debounce periods) before looking for them.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(paths(), [format!("{root}/a.txt"), format!("{root}/b.txt")], "the daemon indexed files on the tmpfs");
    std::fs::write(stage.join("stop"), b"").unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{:?}", std::fs::read_to_string(&log));
    env.check();
}

/// A file system mounted inside a root while the daemon runs (a tmpfs, in
/// a mount namespace of its own, as above) raises no inotify event: its
/// files appear and the covered ones vanish at once, and the watch stays
/// on the covered directory. The daemon sees the mount table change,
/// watches the mount point again and looks again at the files under it
/// (not the whole root: no rescan); after the unmount the same the other
/// way. Each time, and after files written since on the new file system
/// and then in the uncovered directory (which only a new watch sees), the
/// live index equals a fresh index of the tree as the namespace sees it.
#[test]
fn mounts_and_unmounts_inside_a_root_are_followed() {
    follow_mounts(
        "",
        [
            ("a tmpfs mounted over mnt/, with a file", &["a.txt", "mnt/b.txt"]),
            ("a file written on the tmpfs after", &["a.txt", "mnt/b.txt", "mnt/c.txt"]),
            ("the tmpfs unmounted", &["a.txt", "mnt/covered.txt"]),
            ("a file written in the uncovered directory", &["a.txt", "mnt/covered.txt", "mnt/d.txt"]),
        ],
    );
}

/// The same under `--one-file-system`: the tmpfs's files stay out, the
/// covered file leaves the index while the tmpfs covers it (as `simd
/// index -x` sees the tree), even though the tmpfs holds a file of the
/// same name, and comes back after the unmount.
#[test]
fn mounts_and_unmounts_inside_a_root_are_followed_with_one_file_system() {
    follow_mounts(
        "-x",
        [
            ("a tmpfs mounted over mnt/, with a file", &["a.txt"]),
            ("a file written on the tmpfs after", &["a.txt"]),
            ("the tmpfs unmounted", &["a.txt", "mnt/covered.txt"]),
            ("a file written in the uncovered directory", &["a.txt", "mnt/covered.txt", "mnt/d.txt"]),
        ],
    );
}

/// Runs the daemon (with `flag`, and every fresh index too) through four
/// steps of a tmpfs mounted over `mnt/` and unmounted; after each, the
/// live index must equal a fresh index of the tree, and hold `names`.
/// With `-x`, the tmpfs also gets a file named as the one it covers.
fn follow_mounts(flag: &str, steps: [(&str, &[&str]); 4]) {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.write("mnt/covered.txt", text(2, 300));
    env.index();
    let same_name = if flag == "-x" { r#" && cp "$STAGE/c.txt" "$ROOT/mnt/covered.txt""# } else { "" };
    let mount = format!(r#"mount -t tmpfs none "$ROOT/mnt" && cp "$STAGE/b.txt" "$ROOT/mnt/b.txt"{same_name}"#);
    let changes = [
        mount.as_str(),
        r#"cp "$STAGE/c.txt" "$ROOT/mnt/c.txt""#,
        r#"umount "$ROOT/mnt""#,
        r#"cp "$STAGE/d.txt" "$ROOT/mnt/d.txt""#,
    ];
    let steps: Vec<(&str, &str, &[&str])> =
        steps.iter().zip(changes).map(|((what, names), change)| (*what, change, *names)).collect();
    let root = env.root.to_str().unwrap().to_string();
    let (said, daemon) = converge_in_namespace(&env, flag, "true", &steps, |step| {
        if step == 1 {
            // The covered file vanished as a deletion would: `simd lost` has it.
            let out = env.simd().args(["lost", &format!("{root}/mnt/covered.txt")]).assert().success();
            assert!(String::from_utf8_lossy(&out.get_output().stdout).contains(": last seen"), "{out:?}");
        }
    });
    for change in ["mounted at", "unmounted from"] {
        let line = format!("{root}: a file system was {change} {root}/mnt: watching there again and looking again");
        assert!(said.contains(&line), "{said}");
    }
    // Only the files under the mount point were looked at again.
    assert_eq!(daemon["rescans"], 0, "{daemon}\n{said}");
    assert!(!said.contains("rescanning"), "{said}");
    env.check();
}

/// Runs `simd watch $FLAG --debounce-ms 50` on the root in a mount
/// namespace of its own (as root of a user namespace, [`in_mount_namespace`])
/// after the shell command `setup`, through `steps` (what, a shell
/// command, the files the tree then holds): after each, the live index
/// must equal a fresh index of the tree as the namespace sees it, and
/// `after(step)` runs (steps count from 1). The files `b.txt` to `f.txt`
/// of `$STAGE` hold texts of their own to copy. Returns the daemon's log
/// and its state (`daemon.json`) before it stopped.
fn converge_in_namespace(
    env: &Env,
    flag: &str,
    setup: &str,
    steps: &[(&str, &str, &[&str])],
    after: impl Fn(usize),
) -> (String, serde_json::Value) {
    let stage = env.tmp.path().join("stage");
    std::fs::create_dir(&stage).unwrap();
    for (n, name) in ["b.txt", "c.txt", "d.txt", "e.txt", "f.txt"].iter().enumerate() {
        std::fs::write(stage.join(name), text(3 + n as u64, 300)).unwrap();
    }
    let log = env.tmp.path().join("daemon.log");
    // Step N waits for goN, runs $STEPN, indexes the tree afresh into
    // freshN (as the namespace sees it), then says doneN. The daemon's
    // state (its rescans) is copied before it stops.
    let script = r#"
        set -e
        eval "$SETUP"
        "$SIMD" --db "$DB" watch $FLAG --debounce-ms 50 "$ROOT" 2> "$LOG" &
        pid=$!
        n=1
        while [ $n -le $STEPS ]; do
            while [ ! -e "$STAGE/go$n" ]; do sleep 0.02; done
            eval "$(printf 'eval "$STEP%s"' $n)"
            "$SIMD" --db "$STAGE/fresh$n" --quiet index $FLAG "$ROOT"
            touch "$STAGE/done$n"
            n=$((n + 1))
        done
        while [ ! -e "$STAGE/stop" ]; do sleep 0.02; done
        cp "$DB/daemon.json" "$STAGE/daemon.json"
        kill -TERM $pid
        wait $pid
    "#;
    let mut cmd = in_mount_namespace(env, script, &stage, &log);
    cmd.env("FLAG", flag).env("SETUP", setup).env("STEPS", steps.len().to_string());
    for (n, (_, change, _)) in steps.iter().enumerate() {
        cmd.env(format!("STEP{}", n + 1), change);
    }
    let mut child = Daemon(cmd.spawn().unwrap());
    wait_ready(env, Some(&log));
    let root = env.root.to_str().unwrap();
    for (n, (what, _, names)) in steps.iter().enumerate() {
        let step = n + 1;
        std::fs::write(stage.join(format!("go{step}")), b"").unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while !stage.join(format!("done{step}")).exists() {
            assert!(Instant::now() < until, "step {step} never ran: {:?}", std::fs::read_to_string(&log));
            std::thread::sleep(Duration::from_millis(20));
        }
        let want = state(&stage.join(format!("fresh{step}"))).unwrap();
        let paths: Vec<String> = want.0.iter().map(|(p, _)| String::from_utf8(p.clone()).unwrap()).collect();
        assert_eq!(paths, names.iter().map(|n| format!("{root}/{n}")).collect::<Vec<_>>(), "the tree after {what}");
        let until = Instant::now() + Duration::from_secs(60);
        while state(&env.db).as_ref() != Some(&want) {
            assert!(
                Instant::now() < until,
                "after {what}: the live index never matched a fresh one: {:?} against {:?}\n{}",
                state(&env.db).map(|s| s
                    .0
                    .iter()
                    .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
                    .collect::<Vec<_>>()),
                paths,
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        after(step);
    }
    std::fs::write(stage.join("stop"), b"").unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{:?}", std::fs::read_to_string(&log));
    let said = std::fs::read_to_string(&log).unwrap();
    let daemon: serde_json::Value = serde_json::from_slice(&std::fs::read(stage.join("daemon.json")).unwrap()).unwrap();
    (said, daemon)
}

/// A directory of a root bound to a second place in it (`mount --bind
/// src view`, in a mount namespace of its own) is one directory under two
/// names: inotify watches it once, and notify reports its events under
/// one name only (the one it watched last, which depends on the order of
/// the walk). Files written, changed and removed under either name are
/// followed under both: after each step the live index equals a fresh
/// index. Once the bind mount is gone, `src` is still watched.
#[test]
fn a_directory_bound_to_a_second_place_in_a_root_is_followed_under_both_names() {
    let env = Env::new();
    env.write("src/a.txt", text(1, 300));
    env.write("view/.keep", text(2, 300));
    let both = |names: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = names.iter().flat_map(|n| [format!("src/{n}"), format!("view/{n}")]).collect();
        all.sort();
        all
    };
    let (after_1, after_2, after_4) =
        (both(&["a.txt", "b.txt"]), both(&["a.txt", "b.txt", "c.txt"]), both(&["a.txt", "c.txt"]));
    let (after_1, after_2, after_4): (Vec<&str>, Vec<&str>, Vec<&str>) = (
        after_1.iter().map(String::as_str).collect(),
        after_2.iter().map(String::as_str).collect(),
        after_4.iter().map(String::as_str).collect(),
    );
    let steps: [(&str, &str, &[&str]); 6] = [
        ("a file written under the first name", r#"cp "$STAGE/b.txt" "$ROOT/src/b.txt""#, &after_1),
        ("a file written under the second name", r#"cp "$STAGE/c.txt" "$ROOT/view/c.txt""#, &after_2),
        ("a file changed under the second name", r#"cp "$STAGE/d.txt" "$ROOT/view/a.txt""#, &after_2),
        ("a file removed under the first name", r#"rm "$ROOT/src/b.txt""#, &after_4),
        ("the bind mount gone", r#"umount "$ROOT/view""#, &["src/a.txt", "src/c.txt", "view/.keep"]),
        (
            "a file written in the directory that was bound",
            r#"cp "$STAGE/e.txt" "$ROOT/src/e.txt""#,
            &["src/a.txt", "src/c.txt", "src/e.txt", "view/.keep"],
        ),
    ];
    let (said, _) = converge_in_namespace(&env, "", r#"mount --bind "$ROOT/src" "$ROOT/view""#, &steps, |_| {});
    let root = env.root.to_str().unwrap();
    assert!(said.contains(&format!("{root}/src and {root}/view are one directory under two names")), "{said}");
    env.check();
}

/// The index's file system fills up under the daemon (a 1 MiB tmpfs,
/// mounted in a mount namespace of its own as above, under a burst of
/// 27 MB of new text): the daemon does not exit, says it waits for room
/// (in its log and in `simd status`), and once the tmpfs is made larger it
/// opens the index again and catches up: the index then equals a fresh
/// index of the tree and is consistent.
#[test]
fn a_full_disk_pauses_the_daemon_until_there_is_room() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let stage = env.tmp.path().join("stage");
    let burst = stage.join("burst");
    std::fs::create_dir_all(&burst).unwrap();
    let files = 1000;
    for n in 0..files {
        std::fs::write(burst.join(format!("f{n}.txt")), text(100 + n, 3000)).unwrap();
    }
    let small = env.tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let log = env.tmp.path().join("daemon.log");
    // Each wait gives up after 60 s (the daemon is stopped, the script fails).
    let script = r#"
        set -e
        wait_for() {
            n=0
            while ! eval "$1"; do
                n=$((n + 1))
                if [ $n -gt 1200 ]; then echo "timed out: $1" >&2; kill -TERM $pid; exit 1; fi
                sleep 0.05
            done
        }
        mount -t tmpfs -o size=1m none "$SMALL"
        "$SIMD" --db "$SMALL/idx" --quiet index "$ROOT"
        "$SIMD" --db "$SMALL/idx" watch --debounce-ms 50 "$ROOT" > /dev/null 2> "$LOG" &
        pid=$!
        wait_for 'grep -q "\"ready\": true" "$SMALL/idx/daemon.json" 2>/dev/null'
        cp "$STAGE"/burst/* "$ROOT/"
        wait_for 'grep -q "\"disk_full_since\": [0-9]" "$SMALL/idx/daemon.json"'
        "$SIMD" --db "$SMALL/idx" status > "$STAGE/paused.txt"
        cp "$SMALL/idx/daemon.json" "$STAGE/paused.json"
        kill -0 $pid
        mount -o remount,size=200m "$SMALL"
        wait_for '"$SIMD" --db "$SMALL/idx" --format json status | grep -q "\"files\":$FILES,"'
        wait_for 'grep -q "\"ready\": true" "$SMALL/idx/daemon.json"'
        cp "$SMALL/idx/daemon.json" "$STAGE/resumed.json"
        kill -TERM $pid
        wait $pid
        cp -a "$SMALL/idx" "$STAGE/idx"
    "#;
    // The script's own output (which wait timed out, what a command said
    // on failing) goes into the message with the daemon's log; the daemon
    // holds none of its pipes, so a daemon left running cannot hold up
    // the read.
    let out = in_mount_namespace(&env, script, &stage, &log)
        .env("SMALL", &small)
        .env("FILES", (files + 1).to_string())
        .output()
        .unwrap();
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "script: {}{}\ndaemon: {said}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("No space left on device"), "{said}");
    // An eighth of the 1 MiB file system: 64 MiB could never be free there.
    assert!(
        said.contains("the index's file system is full: the daemon waits until 128.00 KiB more are free"),
        "{said}"
    );
    assert!(said.contains("opening the index again"), "{said}");
    let paused = std::fs::read_to_string(stage.join("paused.txt")).unwrap();
    assert!(paused.contains("PAUSED: the index's file system is full"), "{paused}");
    assert!(paused.contains(" free beside the index (") && paused.contains(" free now)"), "{paused}");
    // The same daemon went on: its start time and counters too.
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(stage.join(name)).unwrap()).unwrap()
    };
    let (before, after) = (json("paused.json"), json("resumed.json"));
    assert_eq!((&before["pid"], &before["started"]), (&after["pid"], &after["started"]), "{before}\n{after}");
    assert!(after["batches"].as_u64() >= before["batches"].as_u64(), "{before}\n{after}");
    let fresh = env.tmp.path().join("fresh");
    env.simd().arg("--db").arg(&fresh).args(["--quiet", "index"]).arg(&env.root).assert().success();
    let copy = stage.join("idx");
    assert_eq!(state(&copy).unwrap(), state(&fresh).unwrap(), "the index after the pause");
    env.simd().arg("--db").arg(&copy).arg("check").assert().success();
}

/// The daemon applies history retention as `simd index` does (when
/// records written since it last did reach 1 % of the cap; here the cap is
/// 2, so every record counts): deleting four files leaves two ghosts.
#[test]
fn the_daemon_keeps_history_within_its_cap() {
    let env = Env::new();
    for n in 0..5 {
        env.write(&format!("f{n}.txt"), text(n, 300));
    }
    let _daemon = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "50", "--keep-history", "2", env.root.to_str().unwrap()], None, false)
    };
    converges(&env, "start");
    for n in 0..4 {
        std::fs::remove_file(env.root.join(format!("f{n}.txt"))).unwrap();
    }
    converges(&env, "four deletions");
    let ghosts = || Store::open(&env.db, Access::Read, None).unwrap().scan::<History>().count();
    let until = Instant::now() + Duration::from_secs(30);
    while ghosts() > 2 {
        assert!(Instant::now() < until, "history still holds {} records", ghosts());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ghosts(), 2);
}

/// A file changed in place again and again, with no idle second for the
/// daemon to flush (and apply retention) in, keeps few earlier versions:
/// once their chunk lists add up to [`simd::ingest::VERSION_RUNS_DUE`]
/// entries, the daemon drops all but the newest after its batch. It used
/// to keep one per change until its next pass, up to 10 minutes later (a
/// 27 MB log appended to every half second grew the index by ~0.5 MB a
/// change meanwhile).
#[test]
fn a_file_changed_again_and_again_keeps_few_earlier_versions() {
    use std::io::Write;
    let env = Env::new();
    // Under the size from which the daemon holds a changing file back.
    let data = noise(7, 12 << 20);
    let runs = simd::fingerprint::fingerprint_bytes(&data, &simd::chunker::ChunkParams::default()).runs.len() as u64;
    let due_after = simd::ingest::VERSION_RUNS_DUE.div_ceil(runs);
    let log = env.write("app.log", &data);
    let _daemon = start(&env);
    let changed = || changed_files(&env);
    let records = || Store::open(&env.db, Access::Read, None).unwrap().scan::<History>().count() as u64;
    let mut most = 0;
    for i in 0..2 * due_after + 2 {
        let before = changed();
        writeln!(std::fs::OpenOptions::new().append(true).open(&log).unwrap(), "line {i}").unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while changed() == before {
            assert!(Instant::now() < until, "change {i} not handled");
            std::thread::sleep(Duration::from_millis(10));
        }
        most = most.max(records());
    }
    // Each change leaves a ghost of the content before it, and every
    // `due_after`-th makes a pass due that leaves only the newest: so at
    // most `due_after` at once, where all 2 × `due_after` + 2 stayed.
    assert!(most <= due_after, "{most} records of one file's versions at once ({due_after} make a pass due)");
    converges(&env, "after the changes");
}

/// A file written to without a pause (writes closer together than the
/// debounce: a busy log) is indexed while it is written, not only once
/// its writes stop: the debouncer alone hands a path over only after a
/// debounce with no newer event, and the daemon looks at such a path
/// itself after 2 s. A large file written to the same way (a copy in
/// progress) is not: each look would read it three times for nothing.
#[test]
fn a_file_written_to_without_a_pause_is_indexed_while_it_is_written() {
    use std::io::Write;
    let env = Env::new();
    let log = env.write("busy.log", text(1, 2000));
    let large = env.write("large.bin", noise(3, simd::ingest::LARGE_READ as usize));
    // A debounce far longer than the gaps between the writes, even on a
    // loaded machine.
    let _daemon = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        spawn(&env, &["--debounce-ms", "500", env.root.to_str().unwrap()], None, false)
    };
    let large_record = || {
        let files = files_of(&Store::open(&env.db, Access::Read, None).unwrap());
        files.into_iter().find(|(p, _)| p.ends_with(b"large.bin")).unwrap().1
    };
    let large_before = large_record();
    let changed = || changed_files(&env);
    let before = changed();
    let append = |path: &std::path::Path| std::fs::OpenOptions::new().append(true).open(path).unwrap();
    let (mut f, mut g) = (append(&log), append(&large));
    let until = Instant::now() + Duration::from_secs(30);
    let mut writes = 0;
    // The writes go on for a second after the small file was read: a read
    // of the large one begun beside it would have landed by then.
    let mut read: Option<Instant> = None;
    while read.is_none_or(|t| t.elapsed() < Duration::from_secs(1)) {
        assert!(Instant::now() < until, "not indexed after {writes} writes 20 ms apart");
        writeln!(f, "line {writes}").unwrap();
        // Every 200 ms: still within the debounce, and a read of it would
        // mostly fit between two writes, and count.
        if writes % 10 == 0 {
            writeln!(g, "line {writes}").unwrap();
        }
        writes += 1;
        std::thread::sleep(Duration::from_millis(20));
        if read.is_none() && changed() > before {
            read = Some(Instant::now());
        }
    }
    assert_eq!(changed(), before + 1, "the small file alone");
    assert_eq!(large_record(), large_before, "the large file is not read while it is written");
    drop((f, g));
    converges(&env, "the writes stopped");
}

/// The inotify watches a process holds.
fn inotify_watches(pid: u32) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")))
        .map(|fd| {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()));
            info.unwrap_or_default().lines().filter(|l| l.starts_with("inotify")).count()
        })
        .sum()
}

/// The watches do not follow symlinks either, as the walk does not: a
/// link to a tree outside the root costs no watch in it, and a link loop
/// made under the daemon is no error (each was a rescan of the whole tree).
#[test]
fn symlinked_directories_are_not_watched_through() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let outside = env.tmp.path().join("outside");
    for n in 0..50 {
        std::fs::create_dir_all(outside.join(format!("d{n}/e"))).unwrap();
    }
    std::os::unix::fs::symlink(&outside, env.root.join("link")).unwrap();
    let daemon = start(&env);
    let watches = inotify_watches(daemon.0.id());
    assert!(watches <= 2, "{watches} watches for a root of one directory");
    std::fs::create_dir(env.root.join("loop")).unwrap();
    std::os::unix::fs::symlink("..", env.root.join("loop/up")).unwrap();
    env.write("loop/b.txt", text(2, 300));
    converges(&env, "a link loop made");
    assert_eq!(simd::watch::DaemonState::running(&env.db).unwrap().rescans, 0);
}

/// The daemon watches its roots before its first scan, so that a file
/// changed after that scan read it raises an event. (It watched them once
/// the scan was done: 300 files appended to during a daemon's first scan
/// of 26k files were never indexed, session 51.) The test watches the tree
/// itself and appends to the first file it sees the scan close after
/// reading it, while the scan goes on.
#[test]
fn a_file_changed_after_the_daemons_first_scan_read_it_is_indexed() {
    use notify::Watcher;
    use std::io::Write;
    let env = Env::new();
    for i in 0..3000u64 {
        env.write(&format!("d{}/f{i}.txt", i % 30), text(i, 40));
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut own = notify::RecommendedWatcher::new(
        move |e: notify::Result<notify::Event>| {
            if let Ok(e) = e {
                use notify::event::{AccessKind, AccessMode};
                if matches!(e.kind, notify::EventKind::Access(AccessKind::Close(AccessMode::Read))) {
                    let _ = tx.send(e.paths);
                }
            }
        },
        notify::Config::default(),
    )
    .unwrap();
    own.watch(&env.root, notify::RecursiveMode::Recursive).unwrap();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("simd"));
    cmd.arg("--db").arg(&env.db).args(["watch", "--debounce-ms", "50"]).arg(&env.root);
    // Held until the daemon's scan reads (its watches come before that),
    // as the other starts hold it until the daemon is ready.
    let starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
    let _daemon = Daemon(cmd.spawn().unwrap());
    let read = loop {
        let paths = rx.recv_timeout(Duration::from_secs(30)).expect("the daemon's scan reads the files");
        if let Some(p) = paths.into_iter().find(|p| p.extension().is_some_and(|x| x == "txt")) {
            break p;
        }
    };
    drop(starting);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&read)
        .unwrap()
        .write_all(b"\nwritten after the scan read it\n")
        .unwrap();
    let running = simd::watch::DaemonState::running(&env.db);
    let during_scan = !running.as_ref().is_some_and(|s| s.ready);
    // The daemon's roots are said from its start: `status` during the
    // first scan said the roots it remembers were "NOT WATCHED".
    let roots_said = running.map(|s| s.roots).unwrap_or_default();
    // A rescan asked for during the first scan waits for it and is done
    // (there was no socket until the scan ended: "no such file").
    let rescan = env.simd().args(["--format", "json", "rescan"]).output();
    drop(own);
    wait_ready(&env, None);
    assert!(during_scan, "the first scan was over before the file changed: nothing was tested");
    assert_eq!(roots_said, [env.root.canonicalize().unwrap().to_str().unwrap()]);
    let rescan = rescan.unwrap();
    assert!(rescan.status.success(), "{}", String::from_utf8_lossy(&rescan.stderr));
    converges(&env, "a file changed after the daemon's first scan read it");
}

/// `simd watch --format json` logs one JSON object a line (for a log
/// shipper): every line parses, with its level and message.
#[test]
fn the_daemon_logs_json_lines_when_asked_to() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let log = env.tmp.path().join("daemon.log");
    let d = {
        let _starting = LIMITS.read().unwrap_or_else(|p| p.into_inner());
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("simd"));
        cmd.args(["--format", "json", "-v"]);
        start_command(&env, cmd, &["--debounce-ms", "50", env.root.to_str().unwrap()], Some(&log))
    };
    stop_with_sigterm(d);
    let said = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\n{said}")))
        .collect();
    assert!(lines.iter().all(|l| l["level"].is_string() && l["timestamp"].is_string()), "{said}");
    let root = env.root.canonicalize().unwrap();
    let watching = format!("watching {}", root.display());
    assert!(lines.iter().any(|l| l["message"].as_str().is_some_and(|m| m.starts_with(&watching))), "{said}");
}
