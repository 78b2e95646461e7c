//! DESIGN.md's bad input list: each gets a clear message, loses nothing, and
//! leaves the index consistent.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use super::{is_root, noise, path_of, text, Env};
use simd::store::{Access, Store};

/// The real `simd` on `env`'s index, run as nobody: root reads anything,
/// so a permission bites only another user (each test opens what nobody
/// must reach).
fn simd_as_nobody(env: &Env) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    cmd.arg(assert_cmd::cargo::cargo_bin("simd")).arg("--db").arg(&env.db).env_remove("SIMD_DB").env_remove("SIMD_LOG");
    cmd
}

#[test]
fn unreadable_file_is_skipped_with_its_reason_and_kept_when_indexed_before() {
    let env = Env::new();
    env.write("ok.txt", text(1, 500));
    let secret = env.write("secret.txt", text(2, 500));
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.simd();
    if is_root() {
        // Root reads anything: run simd as nobody so the permission bites.
        for p in [env.tmp.path(), env.root.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        cmd = simd_as_nobody(&env);
    }
    let out = cmd.args(["--format", "json", "index"]).arg(&env.root).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(s["new"].as_u64(), Some(1), "{s}");
    assert_eq!(s["skipped"][0]["reason"].as_str(), Some("unreadable file"), "{s}");
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("secret.txt") && err.contains("ermission denied"), "{err}");
    // The user's file is untouched.
    assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0);
    env.check();
}

/// A root given to be indexed that cannot be listed fails the run, and is
/// not remembered: nothing of it could be indexed.
#[test]
fn an_unreadable_new_root_fails_and_is_not_remembered() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.simd();
    if is_root() {
        std::fs::set_permissions(env.tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        cmd = simd_as_nobody(&env);
    }
    let out = cmd.arg("index").arg(&env.root).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(err.contains("tree") && err.contains("ermission denied"), "{err}");
    assert!(!env.db.join("db").exists() || env.json(&["status"])["roots"].as_array().is_none_or(|r| r.is_empty()));
}

/// A root that is an empty directory on another device than the files
/// indexed under it (a mount point with its file system not mounted) is
/// not taken as emptied: alone, nothing is changed; beside another root,
/// it is missing, with a warning. The devices are made to differ by
/// rewriting the records' (a test cannot mount).
#[test]
fn a_root_whose_file_system_is_not_mounted_is_not_emptied() {
    use simd::store::Files;
    let env = Env::new();
    for i in 0..5u64 {
        env.write(&format!("d/f{i}.txt"), text(i, 300));
    }
    env.index();
    {
        let store = Store::open(&env.db, Access::Write, None).unwrap();
        let mut b = store.batch();
        for item in store.scan::<Files>() {
            let (id, mut rec) = item.unwrap();
            rec.dev += 1;
            b.put::<Files>(&id, &rec);
        }
        store.write(b).unwrap();
    }
    std::fs::remove_dir_all(env.root.join("d")).unwrap();
    let before = env.files();
    for args in [&["index"][..], &["index", env.root.to_str().unwrap()]] {
        let out = env.simd().args(args).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("a file system not mounted?") && err.contains("nothing was changed"), "{args:?}: {err}");
        assert_eq!(env.files(), before, "{args:?}");
    }
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("x.txt"), text(9, 300)).unwrap();
    env.simd().args(["-q", "index"]).arg(&other).assert().success();
    let out = env.simd().arg("index").assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("a file system not mounted? taken as missing"), "{err}");
    env.check();
}

#[test]
fn fifos_sockets_devices_and_symlinks_are_never_opened() {
    let env = Env::new();
    env.write("plain.txt", text(1, 400));
    let fifo = env.root.join("pipe");
    assert!(Std::new("mkfifo").arg(&fifo).status().unwrap().success());
    let _sock = std::os::unix::net::UnixListener::bind(env.root.join("sock")).unwrap();
    if is_root() {
        assert!(Std::new("mknod").arg(env.root.join("null")).args(["c", "1", "3"]).status().unwrap().success());
    }
    // Symlink loops, a link to a directory above, and a dangling link.
    std::os::unix::fs::symlink("loop_b", env.root.join("loop_a")).unwrap();
    std::os::unix::fs::symlink("loop_a", env.root.join("loop_b")).unwrap();
    std::fs::create_dir(env.root.join("sub")).unwrap();
    std::os::unix::fs::symlink("..", env.root.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/x", env.root.join("dangling")).unwrap();
    // A FIFO opened for reading would block forever: the timeout proves it is not.
    let out = env
        .simd()
        .args(["--format", "json", "index"])
        .arg(&env.root)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(s["new"].as_u64(), Some(1), "{s}");
    let reasons: Vec<(String, u64)> = s["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["reason"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap()))
        .collect();
    let specials = if is_root() { 3 } else { 2 };
    assert!(reasons.contains(&("symlink (not followed)".into(), 4)), "{reasons:?}");
    assert!(reasons.iter().any(|(r, n)| r.starts_with("not a regular file") && *n == specials), "{reasons:?}");
    env.check();
}

/// An ignore file that is not a regular file (a FIFO, a link to one) is
/// passed over as a missing one is. Opened, a FIFO blocked the walk for
/// ever (`ignore`'s `File::open`, patched in `vendor/ignore`): a daemon
/// restarted on such a tree never became ready (random changes, session 80).
#[test]
fn ignore_files_that_are_fifos_are_passed_over() {
    let env = Env::new();
    env.write(".simdignore", "*.log\n");
    for (i, p) in ["a.txt", "x.log", "docs/b.txt", "docs/sub/c.txt", "repo/d.txt"].iter().enumerate() {
        env.write(p, text(1 + i as u64, 300));
    }
    std::fs::create_dir_all(env.root.join("repo/.git/info")).unwrap();
    for fifo in ["docs/.gitignore", "repo/.git/info/exclude"] {
        assert!(Std::new("mkfifo").arg(env.root.join(fifo)).status().unwrap().success());
    }
    std::os::unix::fs::symlink("../.gitignore", env.root.join("docs/sub/.ignore")).unwrap();
    env.simd().args(["-q", "index"]).arg(&env.root).timeout(std::time::Duration::from_secs(60)).assert().success();
    let indexed: Vec<String> = env.files().into_iter().map(|(p, _)| String::from_utf8(p).unwrap()).collect();
    for want in ["/a.txt", "/docs/b.txt", "/docs/sub/c.txt", "/repo/d.txt"] {
        assert!(indexed.iter().any(|p| p.ends_with(want)), "{want}: {indexed:?}");
    }
    assert!(!indexed.iter().any(|p| p.ends_with(".log")), "the regular ignore file still counts: {indexed:?}");
    env.check();
}

/// The kernel's own file systems hold no documents, and their files'
/// sizes are not their contents (/proc's were indexed as empty files):
/// a root on one is refused before any index is made, and one mounted
/// inside a root (here a directory a mount table made for the test says
/// is a proc mount) is not entered, and is said as skipped.
#[test]
fn kernel_file_systems_are_not_indexed() {
    let env = Env::new();
    let out = env.simd().args(["index", "/proc/sys/fs"]).assert().failure();
    let said = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(said.contains("/proc/sys/fs: on a proc file system"), "{said}");
    assert!(!env.db.exists(), "no index is made for a refused root");

    env.write("a.txt", text(1, 400));
    env.write("proc/1/status", text(2, 400));
    let point = env.root.canonicalize().unwrap().join("proc");
    let mountinfo = env.tmp.path().join("mountinfo");
    let table = format!(
        "27 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 27 0:21 / {} rw - proc proc rw\n",
        point.to_str().unwrap().replace(' ', "\\040")
    );
    std::fs::write(&mountinfo, table).unwrap();
    let out = env
        .simd()
        .env("SIMD_TEST_MOUNTINFO", &mountinfo)
        .args(["--format", "json", "index"])
        .arg(&env.root)
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(s["new"].as_u64(), Some(1), "{s}");
    let skipped = &s["skipped"][0];
    assert!(skipped["reason"].as_str().unwrap().starts_with("a kernel file system"), "{s}");
    assert_eq!(skipped["examples"][0]["path"].as_str(), point.to_str(), "{s}");
    assert_eq!(env.files().len(), 1);
    env.check();
}

#[test]
fn non_utf8_and_odd_names_are_stored_losslessly() {
    let env = Env::new();
    let names: [&[u8]; 6] =
        [b"caf\xe9.txt", b"new\nline", b"-leading-dash", "中文 é 📄.md".as_bytes(), b"tab\there", &[b'x'; 200]];
    for (i, n) in names.iter().enumerate() {
        std::fs::write(env.root.join(std::ffi::OsStr::from_bytes(n)), text(i as u64, 300)).unwrap();
    }
    let s = env.index();
    assert_eq!(s["new"].as_u64(), Some(names.len() as u64));
    let root = path_of(&env.root.canonicalize().unwrap());
    let stored: Vec<Vec<u8>> = env.files().into_iter().map(|(p, _)| p[root.len() + 1..].to_vec()).collect();
    for n in names {
        assert!(stored.contains(&n.to_vec()), "{:?} not stored as is", String::from_utf8_lossy(n));
    }
    // Unchanged on a re-run: the stored bytes match the names exactly.
    assert_eq!(env.index()["unchanged"].as_u64(), Some(names.len() as u64));
    env.check();
}

/// Text and CSV output escape what a terminal cannot show, and never so
/// that two names read the same: a name with the byte 0xff and one with
/// the four characters `\xff` are told apart (a backslash shows doubled).
#[test]
fn names_an_escape_could_confuse_are_shown_apart() {
    let env = Env::new();
    let names: [&[u8]; 3] = [b"a\xff", b"a\\xff", "a\u{85}".as_bytes()];
    for n in names {
        std::fs::write(env.root.join(std::ffi::OsStr::from_bytes(n)), text(1, 300)).unwrap();
    }
    env.index();
    let root = env.root.canonicalize().unwrap().display().to_string();
    for format in ["text", "csv"] {
        let out = env.simd().args(["--format", format, "report"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8(out.stdout).unwrap();
        for shown in ["a\\xff", "a\\\\xff", "a\\xc2\\x85"] {
            let line = format!("{root}/{shown}");
            let n = said.lines().filter(|l| l.trim_start() == line || l.ends_with(&format!(",{line},"))).count();
            assert_eq!(n, 1, "{format}: {line} once in\n{said}");
        }
    }
}

/// Indexing reads files without changing their access time. Checked
/// where the file system updates it on a read (`relatime` does for a file
/// whose access time is older than its change): a file read plainly shows
/// that it does.
#[test]
fn indexing_leaves_access_times_alone() {
    let env = Env::new();
    env.write("indexed.txt", text(1, 300));
    let control = env.tmp.path().join("control.txt");
    std::fs::write(&control, text(2, 300)).unwrap();
    let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(946_684_800);
    let age = |p: &Path| {
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(long_ago)).unwrap();
    };
    let accessed = |p: &Path| std::fs::metadata(p).unwrap().accessed().unwrap();
    age(&env.root.join("indexed.txt"));
    age(&control);
    std::fs::read(&control).unwrap();
    let updates = accessed(&control) != long_ago;
    env.index();
    if updates {
        assert_eq!(accessed(&env.root.join("indexed.txt")), long_ago, "the index's read changed the access time");
    } else {
        eprintln!("this file system does not update access times on reads: nothing to check");
    }
}

#[test]
fn empty_files_and_a_two_gigabyte_sparse_file_index_in_bounded_memory() {
    let env = Env::new();
    env.write("empty1", b"");
    env.write("empty2", b"");
    let big = env.root.join("sparse.img");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(2 << 30).unwrap();
    drop(f);
    let s = env.index();
    assert_eq!(s["new"].as_u64(), Some(3));
    assert_eq!(s["bytes_read"].as_u64(), Some(2 << 30));
    let rss = s["peak_rss_bytes"].as_u64().expect("peak RSS on Linux");
    assert!(rss < 150 << 20, "peak RSS {} MB", rss >> 20);
    env.check();
    // The two empty files are one (empty) content.
    let st: serde_json::Value =
        serde_json::from_slice(&env.simd().args(["--format", "json", "status"]).output().unwrap().stdout).unwrap();
    assert_eq!((st["files"].as_u64(), st["contents"].as_u64()), (Some(3), Some(2)));
    // Asked what resembles it, it is read whole, as the index read it, and
    // said so (it once said "in 0 chunks (0 B payload)").
    let out = env.simd().arg("similar").arg(&big).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        said.contains("2.00 GiB read whole, with no chunk list (from 1.00 GiB on: matched by its words)"),
        "{said}"
    );
}

/// A file of `--whole-from`'s size or more keeps no chunk list (whose
/// memory grows with the file): its copies are still one identical set and
/// an edited version is still found, by its words; the summary says how
/// many files were read so, and the index stays consistent. Memory: a
/// 2 GiB random file took 255 MB with its chunk list, 62 MB read whole
/// (`docs/performance.md`).
#[test]
fn files_past_whole_from_are_matched_whole_without_a_chunk_list() {
    use simd::store::ContentChunks;
    let env = Env::new();
    let body = noise(7, 20 << 20);
    env.write("big.bin", &body);
    env.write("copy/big.bin", &body);
    let mut edited = body.clone();
    edited[10 << 20..(10 << 20) + 4096].fill(b'x');
    env.write("edited.bin", &edited);
    env.write("small.txt", text(1, 300));
    let out = env.simd().args(["--format", "json", "index", "--whole-from", "16MiB"]).arg(&env.root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((s["new"].as_u64(), s["whole_files"].as_u64()), (Some(4), Some(3)), "{s:#}");
    env.check();
    {
        let store = env.open();
        let records: Vec<_> = store.scan::<ContentChunks>().map(|r| r.unwrap().1).collect();
        let whole = records.iter().filter(|r| r.runs.is_empty() && r.size > 0).count();
        assert_eq!((records.len(), whole), (3, 2), "the two large contents keep no chunk list");
    }
    let r = env.json(&["report"]);
    let sets = r["identical"].as_array().unwrap();
    assert_eq!((sets.len(), sets[0]["copies"].as_u64()), (1, Some(2)), "{r:#}");
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "the edited version, by its words: {r:#}");
    let link = &clusters[0]["links"][0];
    assert_eq!(link["common"].as_u64(), Some(0), "no chunk list, no chunks in common: {link}");
    assert!(link["words"]["resemblance"].as_f64().unwrap() > 0.9, "{link}");
    // The text summary says what was done and why.
    env.write("later.bin", noise(8, 17 << 20));
    let out = env.simd().args(["index", "--whole-from", "16M"]).arg(&env.root).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("1 file at least --whole-from's size: read whole, with no chunk list"), "{text}");
    // Below 16 MiB the option is refused, naming the least.
    let out = env.simd().args(["index", "--whole-from", "1M"]).arg(&env.root).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("1M: at least 16777216 (16MiB)"), "{err}");
}

#[test]
fn a_second_writer_is_told_who_holds_the_index() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let held = Store::open(&env.db, Access::Write, None).unwrap();
    let out = env.simd().arg("index").arg(&env.root).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let pid = std::process::id();
    assert!(err.contains(&format!("index in use by pid {pid}, a `simd index`, `reread` or `forget` run")), "{err}");
    // Not taken for a daemon: no stop-and-start advice, and status agrees.
    assert!(!err.contains("simd watch"), "{err}");
    let out = env.simd().arg("status").assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(status.contains(&format!("not running; pid {pid} is writing the index")), "{status}");
    // Readers still work while it is held.
    env.simd().arg("status").assert().success();
    drop(held);
    env.simd().arg("index").arg(&env.root).assert().success();
}

/// Every file under `dir` with its bytes, sorted (the lock file's pid
/// aside: a failed writer may have held it).
fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
                out.push((p, Vec::new()));
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn foreign_corrupt_and_missing_indexes_get_clear_errors() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    let fail = |db: &Path, args: &[&str]| {
        let mut c = env.simd();
        c.arg("--db").arg(db).args(args);
        String::from_utf8_lossy(&c.assert().failure().get_output().stderr).into_owned()
    };
    // A directory with the user's own files in it: refused, untouched.
    let foreign = env.tmp.path().join("mine");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("thesis.tex"), "precious").unwrap();
    let err = fail(&foreign, &["index", env.root.to_str().unwrap()]);
    assert!(err.contains("not a simd index"), "{err}");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1);
    // A file given as the index: said so, by readers and writers, untouched.
    let file = foreign.join("thesis.tex");
    for args in [&["status"][..], &["index", env.root.to_str().unwrap()]] {
        let err = fail(&file, args);
        assert!(err.contains("thesis.tex: not a simd index (it is not a directory)"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");
    // The user's own `db` directory and `simd.lock` file (names an index
    // holds): refused, nothing written or added.
    for (name, other) in [("db", "simd.lock"), ("simd.lock", "db.creating")] {
        let mine = env.tmp.path().join(format!("mine-{name}"));
        std::fs::create_dir_all(mine.join(other)).unwrap();
        if name == "db" {
            std::fs::create_dir(mine.join("db")).unwrap();
            std::fs::write(mine.join("db/notes.txt"), "mine").unwrap();
            std::fs::remove_dir(mine.join(other)).unwrap();
            std::fs::write(mine.join(other), "my lock notes").unwrap();
        } else {
            std::fs::write(mine.join(name), "my lock notes").unwrap();
        }
        let before = listing(&mine);
        let err = fail(&mine, &["index", env.root.to_str().unwrap()]);
        assert!(err.contains("not a simd index"), "{name}: {err}");
        assert_eq!(listing(&mine), before, "{name}");
    }
    // An index whose db/CURRENT went: damaged, said so by readers and
    // writers, and left as it is.
    let damaged = env.tmp.path().join("damaged");
    env.simd().arg("--db").arg(&damaged).args(["-q", "index"]).arg(&env.root).assert().success();
    std::fs::remove_file(damaged.join("db/CURRENT")).unwrap();
    let before = listing(&damaged);
    for args in [&["status"][..], &["index", env.root.to_str().unwrap()]] {
        let err = fail(&damaged, args);
        assert!(
            err.contains("damaged index: db/CURRENT is missing") && err.contains("move the directory aside"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(listing(&damaged), before);
    // A RocksDB directory whose files are garbage.
    let corrupt = env.tmp.path().join("corrupt");
    std::fs::create_dir_all(corrupt.join("db")).unwrap();
    std::fs::write(corrupt.join("db/CURRENT"), "MANIFEST-000099\n").unwrap();
    let err = fail(&corrupt, &["status"]);
    assert!(err.contains(corrupt.to_str().unwrap()), "{err}");
    let err = fail(&corrupt, &["index", env.root.to_str().unwrap()]);
    assert!(err.contains(corrupt.to_str().unwrap()), "{err}");
    // A real index with a table file cut short (a disk fault, a file
    // touched by hand): every command says it cannot be read, and what to do.
    let cut = env.tmp.path().join("cut");
    env.simd().arg("--db").arg(&cut).args(["-q", "index"]).arg(&env.root).assert().success();
    let sst = std::fs::read_dir(cut.join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .expect("a table file");
    std::fs::OpenOptions::new().write(true).open(&sst).unwrap().set_len(100).unwrap();
    for args in [&["status"][..], &["report"], &["check"], &["index"]] {
        let err = fail(&cut, args);
        assert!(err.contains("the index cannot be read as it is"), "{args:?}: {err}");
        assert!(err.contains("run `simd index ROOT...` to build it again"), "{args:?}: {err}");
    }
    // `simd check` calls it broken, as it does an index whose invariants fail.
    let out = env.simd().arg("--db").arg(&cut).args(["--format", "json", "check"]).assert().code(3);
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["consistent"], false, "{r}");
    // No index yet: said, and commands that write do not make one.
    let none = env.tmp.path().join("none");
    for args in [&["status"][..], &["forget", "/x"], &["template", "unmark", "all"]] {
        let err = fail(&none, args);
        assert!(err.contains("no index here yet"), "{args:?}: {err}");
    }
    // Nor do `index` and `watch` given no roots, or roots that are not there.
    for args in [&["index"][..], &["watch"], &["index", "/nonexistent/root"], &["watch", "/nonexistent/root"]] {
        let err = fail(&none, args);
        assert!(err.contains("no roots") || err.contains("/nonexistent/root"), "{args:?}: {err}");
    }
    assert!(!none.exists(), "a command that failed made an index");
    // A missing root.
    let err = fail(&env.db, &["index", "/nonexistent/root"]);
    assert!(err.contains("/nonexistent/root"), "{err}");
}

#[test]
fn a_vanished_root_subtree_is_removed_but_an_unreadable_one_is_kept() {
    let env = Env::new();
    env.write("keep/a.txt", text(1, 300));
    env.write("gone/b.txt", text(2, 300));
    env.write("locked/c.txt", text(3, 300));
    env.index();
    std::fs::remove_dir_all(env.root.join("gone")).unwrap();
    let locked = env.root.join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.simd();
    if is_root() {
        for p in [env.tmp.path(), env.root.as_path(), env.db.as_path()] {
            Std::new("chmod").arg("-R").arg("a+rwX").arg(p).status().unwrap();
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        cmd = simd_as_nobody(&env);
    }
    let out = cmd.args(["--format", "json", "index"]).arg(&env.root).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((s["removed"].as_u64(), s["unchanged"].as_u64()), (Some(1), Some(1)), "{s}");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(names.iter().any(|n| n.ends_with("locked/c.txt")), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with("gone/b.txt")), "{names:?}");
}

/// A full disk, simulated with a file-size limit (`ulimit -f`, with SIGXFSZ
/// ignored so that a write past it fails with EFBIG as one past the free
/// space fails with ENOSPC): the run stops with the index's path and the
/// system's error, the index keeps what was committed before and stays
/// consistent, and a run with room reaches the state of a fresh index.
#[test]
fn a_write_error_like_a_full_disk_stops_the_run_and_loses_nothing() {
    let env = Env::new();
    for i in 0..100u64 {
        env.write(&format!("a/f{i}.txt"), text(i, 3000));
    }
    env.index();
    let before = env.files();
    for i in 100..400u64 {
        env.write(&format!("b/f{i}.txt"), text(i, 3000));
    }
    let bin = assert_cmd::cargo::cargo_bin("simd");
    let out = Std::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 64; exec \"$0\" --db \"$1\" index \"$2\"")
        .arg(&bin)
        .arg(&env.db)
        .arg(&env.root)
        .env_remove("SIMD_DB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run went through under a 64 KB file limit: {err}");
    assert!(
        err.contains(&*env.db.to_string_lossy()) && err.contains("File too large"),
        "the error names the index and the system's reason: {err}"
    );
    env.check();
    let after = env.files();
    assert!(before.iter().all(|f| after.contains(f)), "files indexed before the failed run are kept");
    env.index();
    env.check();
    env.assert_same_as_fresh(&[&env.root]);
}

/// A directory whose path is longer than the system takes (ENAMETOOLONG,
/// past PATH_MAX) cannot be listed: it is skipped with that reason, not
/// as an unreadable directory, and the rest of the tree is indexed.
#[test]
fn a_path_longer_than_the_system_takes_is_skipped_with_its_reason() {
    use rustix::fs::{mkdirat, openat, Mode, OFlags};
    let env = Env::new();
    env.write("short/a.txt", text(1, 300));
    // Twenty directories of 250 bytes, made one inside the other by
    // descriptor (a path that long cannot be given to mkdir): ~5,000
    // bytes, past Linux's 4,096.
    let name = "d".repeat(250);
    let dir_flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(&env.root, dir_flags, Mode::empty()).unwrap();
    for _ in 0..20 {
        mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        dir = openat(&dir, name.as_str(), dir_flags, Mode::empty()).unwrap();
    }
    let file = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
    let f = openat(&dir, "deep.txt", file, Mode::from_raw_mode(0o644)).unwrap();
    rustix::io::write(&f, &text(2, 300)).unwrap();

    let out = env.simd().args(["--format", "json", "index"]).arg(&env.root).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let reasons: Vec<&str> = s["skipped"].as_array().unwrap().iter().filter_map(|r| r["reason"].as_str()).collect();
    assert_eq!(reasons, ["path too long for the system (PATH_MAX)"], "{s}");
    assert_eq!(s["new"].as_u64(), Some(1), "{s}");
    env.check();
    // The text summary says it too.
    let out = env.simd().arg("index").arg(&env.root).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("path too long for the system"), "{text}");
}
