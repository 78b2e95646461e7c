//! Crash safety: a child `simd index` is killed with SIGKILL at random
//! moments; every time the index must open, pass every cross-CF invariant,
//! and a final run must reach the state of an uninterrupted one.

use std::time::{Duration, Instant};

use super::{files_of, noise, postings, text, Env};
use simd::store::{Access, Store};

/// Runs of postings of a first index in the tests that make memtables
/// small: the 1,500 files' ~13k postings make ~20 runs.
const SPILL_KB: &str = "16";

/// Files a group holds in those tests (`SIMD_TEST_GROUP_FILES`): a killed
/// first index of 1,500 files can hold any multiple of 100 of them, where
/// groups of 512 gave two such states, and a busy machine's kills sometimes
/// missed both (CI failed once with 1 partial state in 24 kills).
const GROUP_FILES: &str = "100";

/// A child `simd index` of the test tree into `db`, to be killed; with
/// `memtable_kb`, its memtables that small (`SIMD_TEST_MEMTABLE_KB`).
fn index_child(env: &Env, db: &std::path::Path, memtable_kb: Option<&str>) -> std::process::Child {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("simd"));
    if let Some(kb) = memtable_kb {
        // Runs of postings small too (`SIMD_TEST_SPILL_KB`): a first index
        // writes them out and ingests some as it goes, and kills land
        // between those steps too.
        c.env("SIMD_TEST_MEMTABLE_KB", kb)
            .env("SIMD_TEST_SPILL_KB", SPILL_KB)
            .env("SIMD_TEST_GROUP_FILES", GROUP_FILES);
    }
    c.arg("--db").arg(db).args(["--quiet", "index"]).arg(&env.root).spawn().unwrap()
}

/// Where the next kill lands, in ms after the child's start: drawn between
/// the latest kill that came too early and the earliest that came too late,
/// so that a machine slowed by other tests still lands most kills mid-run.
struct KillWindow {
    early: u64,
    late: u64,
    /// How long an uninterrupted run took.
    full: u64,
    seed: u64,
}

impl KillWindow {
    fn new(full: u64, late: u64) -> KillWindow {
        KillWindow { early: 0, late, full, seed: 0x9e37_79b9_7f4a_7c15 }
    }

    fn draw(&mut self) -> u64 {
        // A kill that came too early may have come after `late` (a run
        // slower than the one that set it): the window then moves on, as
        // wide as a whole run, where `late - early` wrapped round to a sleep
        // of centuries (and a window of 2 ms stayed stuck there).
        if self.late < self.early + 2 {
            self.late = self.early + self.full.max(2);
        }
        self.early + next(&mut self.seed) % (self.late - self.early)
    }

    fn too_early(&mut self, at: u64) {
        self.early = self.early.max(at);
    }

    fn too_late(&mut self, at: u64) {
        self.late = self.late.min(at);
    }
}

/// The next number of a xorshift sequence: kill times that vary but
/// repeat from run to run.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn body(i: u64, version: u64) -> Vec<u8> {
    // Shared content across files, identical copies, and per-version changes.
    if i.is_multiple_of(5) {
        text(i / 5 + 1000 * version, 3000)
    } else {
        [text(i % 97, 800), noise(i + 7919 * version, 6000)].concat()
    }
}

#[test]
fn sigkill_at_random_moments_leaves_a_consistent_index_that_catches_up() {
    let env = Env::new();
    const FILES: u64 = 2500;
    let path = |i: u64| format!("d{}/e{}/f{i}.txt", i % 17, i % 3);
    for i in 0..FILES {
        env.write(&path(i), body(i, 0));
    }
    // The reference: uninterrupted runs. Its first run also tells how long a
    // full index takes here, so kills can be aimed inside a run.
    let reference = env.tmp.path().join("reference");
    let start = Instant::now();
    env.simd().arg("--db").arg(&reference).arg("index").arg(&env.root).assert().success();
    let full = start.elapsed().as_millis() as u64;

    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut killed_mid_run = 0;
    let mut created = false;
    for round in 1..=8u64 {
        // Every round changes a third of the files, deletes and creates some,
        // so each run has inserts, updates and deletions to be killed in.
        if round > 1 {
            for i in (0..FILES).filter(|i| (i + round) % 3 == 0) {
                env.write(&path(i), body(i, round));
            }
            for k in 0..5 {
                let _ = std::fs::remove_file(env.root.join(path(round * 13 + k)));
                env.write(&format!("new/r{round}/n{k}.txt"), body(round * 100 + k, round));
            }
            // Moves, which the removal pass records as such.
            std::fs::create_dir_all(env.root.join(format!("moved/r{round}"))).unwrap();
            for k in 0..5 {
                let from = env.root.join(path(round * 29 + 400 + k));
                let _ = std::fs::rename(&from, env.root.join(format!("moved/r{round}/m{k}.txt")));
            }
        }
        let delay = Duration::from_millis(2 + next(&mut seed) % (full / 2).max(10));
        let mut child = index_child(&env, &env.db, None);
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            killed_mid_run += 1;
        }
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        // Killed before the index was first created, there is none yet;
        // once there is one, it must always be consistent.
        if env.db.join("db/CURRENT").exists() {
            env.check();
            created = true;
        } else {
            assert!(!created, "the index disappeared after a kill");
        }
    }
    assert!(created);
    assert!(killed_mid_run >= 4, "only {killed_mid_run} of 8 kills landed mid-run (a full run takes {full} ms)");

    // Bring the reference to the same tree, then finish the killed index.
    env.simd().arg("--db").arg(&reference).arg("index").arg(&env.root).assert().success();
    env.simd().arg("index").arg(&env.root).assert().success();
    env.check();
    let (a, b) =
        (Store::open(&env.db, Access::Read, None).unwrap(), Store::open(&reference, Access::Read, None).unwrap());
    assert_eq!(files_of(&a), files_of(&b));
    assert_eq!(postings(&a), postings(&b));
}

/// Kills during the creation of a new index (the first milliseconds of the
/// first run): whatever is left, the next run creates or opens it and ends
/// consistent — an interrupted creation never leaves an index that cannot be
/// opened.
#[test]
fn a_kill_while_the_index_is_created_never_bricks_it() {
    let env = Env::new();
    for i in 0..50u64 {
        env.write(&format!("f{i}.txt"), text(i, 500));
    }
    // Every 250 µs through the first 10 ms: process start, RocksDB creation,
    // the format record, the first files.
    for (k, micros) in (0..40u64).map(|i| i * 250).enumerate() {
        let db = env.tmp.path().join(format!("db{k}"));
        let mut child = index_child(&env, &db, None);
        std::thread::sleep(Duration::from_micros(micros));
        child.kill().ok();
        child.wait().unwrap();
        let out = env.simd().arg("--db").arg(&db).args(["--format", "json", "index"]).arg(&env.root).output().unwrap();
        assert!(out.status.success(), "after a kill at {micros} µs: {}", String::from_utf8_lossy(&out.stderr));
        let check = env.simd().arg("--db").arg(&db).arg("check").output().unwrap();
        assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    }
}

/// A first index is a bulk load (no WAL; atomic flushes across column
/// families; `Store::is_bulk`). With memtables made tiny, a run flushes
/// many times, and each kill lands between flushes: the index must hold
/// exactly what one of them wrote, every invariant holding, and a later run
/// must reach the uninterrupted state.
#[test]
fn a_first_index_killed_between_its_flushes_keeps_what_it_flushed_consistent() {
    let env = Env::new();
    const FILES: u64 = 1500;
    for i in 0..FILES {
        env.write(&format!("d{}/f{i}.txt", i % 13), body(i, 0));
    }
    let reference = env.tmp.path().join("reference");
    let start = Instant::now();
    env.simd()
        .env("SIMD_TEST_MEMTABLE_KB", "64")
        .env("SIMD_TEST_SPILL_KB", SPILL_KB)
        .env("SIMD_TEST_GROUP_FILES", GROUP_FILES)
        .arg("--db")
        .arg(&reference)
        .arg("index")
        .arg(&env.root)
        .assert()
        .success();
    let full = start.elapsed().as_millis() as u64;
    // Uninterrupted, with its postings ingested in parts as it went.
    env.simd().arg("--db").arg(&reference).arg("check").assert().success();
    assert!(!reference.join("postings.tmp").exists());

    let mut window = KillWindow::new(full, full * 2);
    let (mut partial, mut kills) = (0, 0);
    while kills < 8 || partial < 3 && kills < 24 {
        let db = env.tmp.path().join(format!("bulk{kills}"));
        kills += 1;
        let delay_ms = window.draw();
        let delay = Duration::from_millis(delay_ms);
        let mut child = index_child(&env, &db, Some("64"));
        std::thread::sleep(delay);
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        if !db.join("db/CURRENT").exists() {
            window.too_early(delay_ms);
            continue;
        }
        let check = env.simd().arg("--db").arg(&db).arg("check").output().unwrap();
        assert!(check.status.success(), "after a kill at {delay:?}: {}", String::from_utf8_lossy(&check.stdout));
        let held = files_of(&Store::open(&db, Access::Read, None).unwrap()).len() as u64;
        match held {
            0 => window.too_early(delay_ms),
            FILES => window.too_late(delay_ms),
            _ => {
                partial += 1;
                // Killed before its end, the run had not ingested its
                // postings: the check's open rebuilt them.
                let said = String::from_utf8_lossy(&check.stderr);
                assert!(said.contains("rebuilt them for"), "after a kill at {delay:?}: {said}");
            }
        }
        // The next run is no bulk load (the index exists) and completes it.
        env.simd().arg("--db").arg(&db).args(["--quiet", "index"]).arg(&env.root).assert().success();
        let (a, b) =
            (Store::open(&db, Access::Read, None).unwrap(), Store::open(&reference, Access::Read, None).unwrap());
        assert_eq!(files_of(&a), files_of(&b));
        assert_eq!(postings(&a), postings(&b));
    }
    // The point of the test: kills that left some flushes and not others.
    assert!(partial >= 3, "only {partial} of {kills} kills left a partly flushed index (a full run takes {full} ms)");
}

/// A first index killed before it wrote its postings, then `simd index`
/// straight away (no other command opening the index first, which would
/// repair it): the run rebuilds the postings whether or not files
/// changed, and ends where a fresh index of the tree does. (The run takes
/// the writer's lock before its read-only open, which then cannot repair
/// the index itself: the writer's open does.) The killed state is made by
/// hand, as the kill tests above reach it by chance: the mark a bulk load
/// leaves in `meta`, and no postings.
#[test]
fn a_first_index_killed_before_its_postings_is_repaired_by_the_next_run() {
    use simd::store::{ChunkContents, Meta, MetaKey, MetaValue, SketchContents};
    let env = Env::new();
    for i in 0..40u64 {
        env.write(&format!("d{}/f{i}.txt", i % 3), text(i, 300 + 20 * i as usize));
    }
    env.index();
    let mark_killed = || {
        let store = Store::open(&env.db, Access::Write, None).unwrap();
        let mut b = store.batch();
        for item in store.scan::<ChunkContents>() {
            b.delete::<ChunkContents>(&item.unwrap().0);
        }
        for item in store.scan::<SketchContents>() {
            b.delete::<SketchContents>(&item.unwrap().0);
        }
        b.put::<Meta>(&MetaKey::PostingsPending, &MetaValue::PostingsPending);
        store.write(b).unwrap();
        store.flush().unwrap();
    };
    for change in [false, true] {
        mark_killed();
        if change {
            env.write("d1/f4.txt", text(99, 700));
        }
        let out = env.simd().args(["--format", "json", "index"]).arg(&env.root).assert().success();
        let said = String::from_utf8_lossy(&out.get_output().stderr);
        assert!(said.contains("rebuilt them for 40 contents"), "with a change: {change}: {said}");
        let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(s["changed"].as_u64(), Some(u64::from(change)), "{s}");
        env.check();
        env.assert_same_as_fresh(&[&env.root]);
    }
}

/// `simd forget` killed at random moments: the index stays consistent,
/// the root is forgotten only once all its files are gone (the roots are
/// written last), and running it again ends where an uninterrupted one
/// does.
#[test]
fn a_forget_killed_part_way_leaves_a_consistent_index_and_runs_again() {
    let env = Env::new();
    const FILES: u64 = 3000;
    for i in 0..FILES {
        env.write(&format!("a/d{}/f{i}.txt", i % 13), body(i, 0));
    }
    for i in 0..300u64 {
        // Some contents also live under `b`, and stay.
        env.write(&format!("b/f{i}.txt"), body(i * 7, 0));
    }
    let (a, b) = (env.root.join("a"), env.root.join("b"));
    let base = env.tmp.path().join("base");
    env.simd().arg("--db").arg(&base).args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    let copy = |to: &std::path::Path| {
        let _ = std::fs::remove_dir_all(to);
        assert!(std::process::Command::new("cp").arg("-a").arg(&base).arg(to).status().unwrap().success());
    };
    let forget = |db: &std::path::Path| {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("simd"));
        c.env("SIMD_TEST_MEMTABLE_KB", "64").arg("--db").arg(db).arg("forget").arg(&a);
        c.stdout(std::process::Stdio::null()).spawn().unwrap()
    };
    let reference = env.tmp.path().join("reference");
    copy(&reference);
    let start = Instant::now();
    assert!(forget(&reference).wait().unwrap().success());
    let full = start.elapsed().as_millis() as u64;
    let under_a = |db: &std::path::Path| {
        let s = Store::open(db, Access::Read, None).unwrap();
        let prefix = super::path_of(&a);
        files_of(&s).iter().filter(|(p, _)| p.starts_with(&prefix)).count() as u64
    };
    let remembers_a = |db: &std::path::Path| {
        let out = env.simd().arg("--db").arg(db).args(["--format", "json", "status"]).output().unwrap();
        let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        st["roots"].as_array().unwrap().iter().any(|r| r["path"].as_str() == a.to_str())
    };

    let mut window = KillWindow::new(full, full.max(4));
    let mut partial = 0;
    for k in 0..30 {
        if partial >= 3 {
            break;
        }
        let db = env.tmp.path().join(format!("killed{k}"));
        copy(&db);
        let delay_ms = window.draw();
        let mut child = forget(&db);
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        let check = env.simd().arg("--db").arg(&db).arg("check").output().unwrap();
        assert!(check.status.success(), "after a kill at {delay_ms} ms: {}", String::from_utf8_lossy(&check.stdout));
        let (held, remembered) = (under_a(&db), remembers_a(&db));
        assert!(remembered || held == 0, "the root was forgotten with {held} of its files left");
        match held {
            FILES => window.too_early(delay_ms),
            0 if !remembered => window.too_late(delay_ms),
            _ => partial += 1,
        }
        if remembered {
            assert!(forget(&db).wait().unwrap().success());
        }
        env.simd().arg("--db").arg(&db).arg("check").assert().success();
        let (x, y) =
            (Store::open(&db, Access::Read, None).unwrap(), Store::open(&reference, Access::Read, None).unwrap());
        assert_eq!(files_of(&x), files_of(&y));
        assert_eq!(postings(&x), postings(&y));
    }
    assert!(partial >= 2, "only {partial} kills left a forget part done (an uninterrupted one takes {full} ms)");
}

/// SIGTERM (or Ctrl-C) during a first index: the run stops with what it
/// read written and flushed (a first index writes without a WAL, so a
/// kill would keep only what its memtables had flushed), exits 143 (128 +
/// the signal, as a shell reports a process it stopped), and
/// the next run reads only the rest. The large sparse file keeps the run
/// going long enough to be stopped in.
#[test]
fn sigterm_stops_a_first_index_with_what_it_read_kept() {
    let env = Env::new();
    small_files_and_a_sparse_gigabyte(&env);
    let child = index_child(&env, &env.db, None);
    once_reading(&env);
    stopped_by_sigterm(child);
    env.check();
    let held = env.files().len() as u64;
    assert!(held < SMALL + 1, "the sparse file was still being read: {held} files");
    let s = env.index();
    assert_eq!((s["unchanged"].as_u64(), s["new"].as_u64()), (Some(held), Some(SMALL + 1 - held)), "{s}");
    assert_eq!(s["interrupted"], false);
    env.check();

    // Stopped again in an ordinary run, whose few changed files are read
    // after a read-only walk: as before, and nothing recorded as removed.
    let big = std::fs::OpenOptions::new().write(true).open(env.root.join("disk.img")).unwrap();
    big.set_len((1 << 30) + 4096).unwrap();
    drop(big);
    env.write("d0/f0.txt", text(9999, 400));
    let child = index_child(&env, &env.db, None);
    std::thread::sleep(Duration::from_millis(300));
    // By SIGHUP this time (its terminal closed), which stops it alike.
    assert_eq!(signal(child, "HUP").code(), Some(129), "an index stopped by SIGHUP exits 129");
    env.check();
    let s = env.index();
    assert_eq!((s["removed"].as_u64(), s["new"].as_u64()), (Some(0), Some(0)), "{s}");
    assert_eq!(env.files().len() as u64, SMALL + 1);
}

/// `simd watch` on a new index stops its first scan at SIGTERM as `simd
/// index` does (a first index of a large tree takes minutes), keeping what
/// it read, and exits 0; its next start goes on from there.
#[test]
fn sigterm_stops_the_daemons_first_scan_with_what_it_read_kept() {
    let env = Env::new();
    small_files_and_a_sparse_gigabyte(&env);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("simd"))
        .arg("--db")
        .arg(&env.db)
        .args(["--quiet", "watch"])
        .arg(&env.root)
        .spawn()
        .unwrap();
    once_reading(&env);
    // A report meanwhile answers from the files indexed so far, and says so.
    let out = env.simd().arg("report").assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("is still on its first scan of its roots: this answer covers only"), "{err}");
    assert!(sigterm(child).success(), "a stopped daemon exits 0");
    env.check();
    let held = env.files().len() as u64;
    assert!(held < SMALL + 1, "the daemon finished its first scan before stopping: {held} files");
    assert!(!env.db.join("daemon.json").exists(), "a stopped daemon leaves no state file");
    let s = env.index();
    assert_eq!((s["unchanged"].as_u64(), s["new"].as_u64()), (Some(held), Some(SMALL + 1 - held)), "{s}");
}

/// Small files in [`SMALL`] and a 1 GiB sparse file: a first scan reads
/// it long enough to be stopped in.
const SMALL: u64 = 300;

fn small_files_and_a_sparse_gigabyte(env: &Env) {
    for i in 0..SMALL {
        env.write(&format!("d{}/f{i}.txt", i % 7), text(i, 400));
    }
    let big = std::fs::File::create(env.root.join("disk.img")).unwrap();
    big.set_len(1 << 30).unwrap();
}

/// Waits until a child's new index exists, and a little more: the child
/// is then reading.
fn once_reading(env: &Env) {
    let until = Instant::now() + Duration::from_secs(30);
    while !env.db.join("db/CURRENT").exists() {
        assert!(Instant::now() < until, "the index never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// Sends SIGTERM to a child and waits for it.
fn sigterm(child: std::process::Child) -> std::process::ExitStatus {
    signal(child, "TERM")
}

/// Sends the signal named `sig` (as `kill` names it) to a child and waits for it.
fn signal(mut child: std::process::Child, sig: &str) -> std::process::ExitStatus {
    assert!(std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success());
    child.wait().unwrap()
}

/// Sends SIGTERM to a child `simd index`, which must stop as stopped (143).
fn stopped_by_sigterm(child: std::process::Child) {
    assert_eq!(sigterm(child).code(), Some(143), "an index stopped by SIGTERM exits 143");
}
