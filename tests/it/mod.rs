//! Shared helpers for the integration tests.

mod bad_input;
mod compat;
mod crash;
mod index;
mod lost;
mod report;
mod schema_docs;
mod tidy;
mod watch;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use simd::store::{Access, ChunkContents, Files, SketchContents, Store};

/// Every posting of an index (chunks, then sketch samples) with the
/// content it names by hash, sorted: content ids depend on the order in
/// which contents were first written, so two indexes of one tree agree on
/// hashes, not ids.
pub fn postings(store: &Store) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in store.scan::<ChunkContents>() {
        let ((chunk, id), posting) = item.unwrap();
        out.push(format!("{chunk} {} {posting:?}", store.content_hashes(&[id]).unwrap()[0]));
    }
    for item in store.scan::<SketchContents>() {
        let ((sample, id), ()) = item.unwrap();
        out.push(format!("sample {sample:08x} {}", store.content_hashes(&[id]).unwrap()[0]));
    }
    out.sort();
    out
}

/// A temp dir with a tree to index and an index location.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub db: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir(&root).unwrap();
        let db = tmp.path().join("index");
        Env { tmp, root, db }
    }

    /// The real `simd` binary, pointed at this index.
    pub fn simd(&self) -> Command {
        let mut c = Command::cargo_bin("simd").unwrap();
        c.arg("--db").arg(&self.db).env_remove("SIMD_DB").env_remove("SIMD_LOG");
        c
    }

    /// A command's `--format json` output, which must succeed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.simd().args(["--format", "json"]).args(args).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    pub fn write(&self, rel: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        p
    }

    /// Runs `simd --format json index ROOT` and returns the summary.
    pub fn index(&self) -> serde_json::Value {
        let out = self.simd().args(["--format", "json", "index"]).arg(&self.root).assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    /// Runs `simd check` and asserts the index is consistent.
    pub fn check(&self) {
        let out = self.simd().arg("check").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(": consistent"),
            "simd check: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn open(&self) -> Store {
        Store::open(&self.db, Access::Read, None).unwrap()
    }

    /// The names and sizes of what RocksDB keeps on disk, sorted: a
    /// writer's open would add a new options file, log and write-ahead
    /// log, and bump the manifest.
    pub fn db_listing(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = std::fs::read_dir(self.db.join("db"))
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
            .collect();
        v.sort();
        v
    }

    /// (path, content hash) of every file in the index, sorted.
    pub fn files(&self) -> Vec<(Vec<u8>, String)> {
        files_of(&self.open())
    }

    /// Asserts that the index holds the files and postings a fresh index of
    /// `roots` holds (made beside it, in `fresh`).
    pub fn assert_same_as_fresh(&self, roots: &[&Path]) {
        let fresh = self.tmp.path().join("fresh");
        let _ = std::fs::remove_dir_all(&fresh);
        self.simd().arg("--db").arg(&fresh).args(["--quiet", "index"]).args(roots).assert().success();
        let fresh_store = Store::open(&fresh, Access::Read, None).unwrap();
        assert_eq!(self.files(), files_of(&fresh_store));
        assert_eq!(postings(&self.open()), postings(&fresh_store));
    }
}

/// Two roots, `a` (one.txt) and `b` (two.txt), indexed, and beside them a
/// directory `other` (three.txt) that is none: what a root replaced by a
/// symlink is tested on ([`link_in_place_of`]).
pub fn two_roots_and_another(env: &Env) -> (PathBuf, PathBuf, PathBuf) {
    let (a, b) = (env.root.join("a"), env.root.join("b"));
    env.write("a/one.txt", text(1, 300));
    env.write("b/two.txt", text(2, 300));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("three.txt"), text(3, 300)).unwrap();
    (a, b, other)
}

/// Moves the directory `dir` aside and puts a symlink to `to` in its place.
pub fn link_in_place_of(dir: &Path, to: &Path) {
    std::fs::rename(dir, dir.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(to, dir).unwrap();
}

/// Whether the tests run as root (which reads any file, whatever its mode).
pub fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// Writes `bytes` into the file at `path` from offset `at`, then sets its
/// mtime back: its size, mtime and inode stay as they were (a write by a
/// tool that keeps the mtime, or as an MD5 collision would look), which
/// change detection by stat cannot see.
pub fn write_keeping_stat(path: impl AsRef<Path>, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::MetadataExt;
    let path = path.as_ref();
    let before = std::fs::metadata(path).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, bytes, at).unwrap();
    f.set_modified(before.modified().unwrap()).unwrap();
    let after = std::fs::metadata(path).unwrap();
    let stat = |m: &std::fs::Metadata| (m.len(), m.mtime(), m.mtime_nsec(), m.ino());
    assert_eq!(stat(&after), stat(&before), "{}: the write changed its stat", path.display());
}

/// Waits until just past the next whole second and returns it as `simd`
/// prints times (`YYYY-MM-DD HH:MM:SS UTC`, what `--since` takes): what
/// happened before the call is before it, what happens after is not.
pub fn next_second() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let next = now.as_secs() + 1;
    std::thread::sleep(std::time::Duration::from_secs(next) + std::time::Duration::from_millis(50) - now);
    simd::cli::utc(next as i64)
}

pub fn files_of(store: &Store) -> Vec<(Vec<u8>, String)> {
    let mut v: Vec<_> = store.scan::<Files>().map(|r| r.unwrap().1).map(|f| (f.path, f.content.to_string())).collect();
    v.sort();
    v
}

/// Deterministic pseudo-random bytes (xorshift), for content.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Four articles with unrelated bodies that share a long boilerplate under
/// `kb/`: one cluster by default, none once the boilerplate is a template.
pub fn boilerplate_articles(env: &Env) {
    let boiler = text(50, 1500);
    for i in 0..4u64 {
        env.write(&format!("kb/article{i}.txt"), [boiler.clone(), noise(200 + i, 3000)].concat());
    }
}

/// Text-like content built from a word list, deterministic.
pub fn text(seed: u64, words: usize) -> Vec<u8> {
    const W: [&str; 16] = [
        "index",
        "chunk",
        "file",
        "the",
        "repository",
        "similar",
        "document",
        "of",
        "and",
        "support",
        "version",
        "copy",
        "moved",
        "report",
        "cluster",
        "template",
    ];
    let n = noise(seed, words);
    let mut out = Vec::new();
    for (i, b) in n.iter().enumerate() {
        out.extend_from_slice(W[(*b as usize) % W.len()].as_bytes());
        out.push(if i % 13 == 12 { b'\n' } else { b' ' });
    }
    out
}

pub fn path_of(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}
