//! Walking roots: ignore-aware traversal, file-type triage and stat-based
//! change detection. Nothing here reads a file's bytes or writes the index.
//!
//! A file is a candidate for reading only when its (size, mtime ns, inode)
//! differs from the index's record; unchanged files cost one `lstat` and a
//! hash lookup in the records read beforehand ([`Known`]), and a path the
//! index has no record of costs no `lstat` here (the reader stats the open
//! file). Symlinks are never followed and
//! FIFOs, sockets and devices are never opened.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use ignore::{
    overrides::{Override, OverrideBuilder},
    WalkBuilder, WalkState,
};

use crate::fingerprint::Prior;
use crate::store::{FileId, FileRecord, Files, Paths, Store, StoreError};

/// Hash maps and sets of paths and content hashes, hashed with foldhash,
/// seeded per process: SipHash, std's default, of every path a first
/// index writes was ~0.7 % of its CPU (the writer looks each up two or three
/// times), and a seed keeps crafted names from colliding.
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// What the walk is told.
#[derive(Clone, Debug, Default)]
pub struct WalkOptions {
    /// Glob patterns (gitignore syntax) of paths to leave out.
    pub excludes: Vec<String>,
    /// Do not read `.gitignore`, `.ignore` or `.simdignore` files.
    pub no_ignore: bool,
    /// Walker threads (0: one per core).
    pub threads: usize,
    /// Directories never entered (the index itself).
    pub skip_dirs: Vec<PathBuf>,
    /// Mount points of the kernel's own file systems (proc, sysfs...)
    /// inside the roots: not entered, and said as skipped.
    pub kernel_dirs: Vec<PathBuf>,
    /// Stay on each root's file system: a directory on another (a mount
    /// point: a network share, a USB disk, `/proc` under `/`) is not
    /// entered, as `find -xdev` or `du -x`.
    pub one_file_system: bool,
    /// Paths (absolute, as bytes) whose files are read again even where
    /// their size, mtime and inode are as the index recorded (`simd
    /// reread`): a write that kept the size and set the mtime back, which
    /// `report --verify` finds, is otherwise never seen.
    pub reread: Vec<Vec<u8>>,
    /// The files (device, inode) with several names under `reread`: their
    /// other names, wherever the walk meets them, are read again too. A
    /// name read alone took the file's new content, and the others kept
    /// the old one: two "copies" of what is one file.
    pub reread_files: HashSet<(u64, u64)>,
}

impl WalkOptions {
    /// Whether the file at `path` is to be read whatever its stat ([`WalkOptions::reread`]).
    pub fn rereads(&self, path: &Path) -> bool {
        !self.reread.is_empty() && is_under_any(path.as_os_str().as_bytes(), &self.reread)
    }

    /// Whether the file at `path`, of this stat, is to be read whatever its
    /// stat: under [`WalkOptions::reread`], or another name of a file
    /// there ([`WalkOptions::reread_files`]).
    pub fn rereads_file(&self, path: &Path, stat: &Stat) -> bool {
        self.rereads(path) || (stat.links > 1 && self.reread_files.contains(&(stat.dev, stat.inode)))
    }

    /// Adds `paths` (absolute, as bytes) to [`WalkOptions::reread`], and
    /// the files with several names under them to its `reread_files`.
    pub fn reread_paths(&mut self, paths: Vec<Vec<u8>>) {
        for p in &paths {
            let walk = ignore::WalkBuilder::new(bytes_path(p)).standard_filters(false).follow_links(false).build();
            for entry in walk.flatten() {
                if let Ok(m) = entry.metadata() {
                    if m.is_file() && m.nlink() > 1 {
                        self.reread_files.insert((m.dev(), m.ino()));
                    }
                }
            }
        }
        self.reread.extend(paths);
    }
}

/// Every file's record, by path: the path itself moved into the key, so
/// each record's own `path` is empty.
pub type RecordsByPath = HashMap<Vec<u8>, (FileId, FileRecord)>;

/// The index's file records as the walk looks them up.
pub enum Known {
    /// The index holds no file: every file is new (a first index).
    Nothing,
    /// Every record, by path (the path itself moved into the key), read in
    /// one sequential scan of `files` before the walk, where each file
    /// cost two point lookups (`paths`, then `files`): a re-index of the
    /// Django tree with nothing changed went from 396 to 319 ms (user CPU
    /// 377 → 185 ms), of the generated corpus at scale 10 from 115 to 81 ms.
    Loaded(RecordsByPath),
    /// What a walk compares, for an index of more than [`Known::LOAD_MAX`]
    /// files: ~50 bytes a file where a record by path took ~200. A no-change
    /// re-index of 400k small files took 3.6–4.0 s with two point lookups
    /// per file, against 1.5 s for `find`.
    Stats(StatsByPath),
    /// Every record by a 128-bit hash of its path, for the daemon's writer
    /// past [`Known::LOAD_MAX`] files (~100 bytes a file): with two point
    /// lookups per file, a burst of 10k changed files of a 400k-file tree
    /// took its main thread 2.5 × what it took on a 200k-file tree.
    Hashed(RecordsByHash),
    /// Two point lookups per file, for an index of more than
    /// [`Known::STATS_MAX`] files (a walk's) or [`Known::HASHED_MAX`] (a
    /// writer's), so that memory stays bounded.
    Lookups,
}

/// Every file's record by a 128-bit hash of its path, seeded per process
/// ([`Known::Hashed`]): two paths of one hash are as unlikely as two
/// contents of one MD5, which the index already takes for the same.
pub struct RecordsByHash {
    map: HashMap<u128, (FileId, BriefRecord)>,
    seeds: [foldhash::quality::RandomState; 2],
}

/// A file's record without its path.
#[derive(Clone, Copy)]
struct BriefRecord {
    size: u64,
    mtime: crate::store::TimeNs,
    inode: u64,
    content: crate::fingerprint::ContentHash,
    dev: u64,
}

impl RecordsByHash {
    fn with_capacity(n: usize) -> RecordsByHash {
        RecordsByHash { map: HashMap::with_capacity_and_hasher(n, Default::default()), seeds: Default::default() }
    }

    fn key(&self, path: &[u8]) -> u128 {
        let [a, b] = &self.seeds;
        let (a, b) = (std::hash::BuildHasher::hash_one(a, path), std::hash::BuildHasher::hash_one(b, path));
        (u128::from(a) << 64) | u128::from(b)
    }

    fn insert(&mut self, path: &[u8], id: FileId, r: &FileRecord) {
        let brief = BriefRecord { size: r.size, mtime: r.mtime, inode: r.inode, content: r.content, dev: r.dev };
        self.map.insert(self.key(path), (id, brief));
    }

    fn get(&self, path: &[u8]) -> Option<(FileId, FileRecord)> {
        let (id, b) = self.map.get(&self.key(path))?;
        let rec = FileRecord {
            path: path.to_vec(),
            size: b.size,
            mtime: b.mtime,
            inode: b.inode,
            content: b.content,
            dev: b.dev,
        };
        Some((*id, rec))
    }

    /// The content of every record.
    pub fn contents(&self) -> impl Iterator<Item = &crate::fingerprint::ContentHash> {
        self.map.values().map(|(_, b)| &b.content)
    }
}

impl Known {
    /// Above this many files, a walk keeps only the stats it compares
    /// ([`Known::Stats`]; records by path are ~200 bytes a file on a tree
    /// of short paths, so 50 MB at this bound).
    pub const LOAD_MAX: u64 = 1 << 18;

    /// Above this many files, records are looked up one by one (~50 bytes a
    /// file as [`Known::Stats`]: 100 MB at most).
    pub const STATS_MAX: u64 = 1 << 21;

    /// Above this many files, the daemon's writer looks records up one by
    /// one (~100 bytes a file as [`Known::Hashed`]: 100 MB at most).
    pub const HASHED_MAX: u64 = 1 << 20;

    /// [`Known::LOAD_MAX`], unless the environment sets `SIMD_TEST_LOAD_MAX`:
    /// the tests make it small, to keep stats or hashed records on a small
    /// tree.
    fn load_max() -> u64 {
        // Read once: the daemon's writer asks at every file it writes.
        static LOAD_MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *LOAD_MAX.get_or_init(|| crate::test_setting("SIMD_TEST_LOAD_MAX").unwrap_or(Known::LOAD_MAX))
    }

    /// What a writer's walk needs for an index holding `files` files, and
    /// the ids of the records whose paths pass `under`, in id order (None
    /// past [`Known::STATS_MAX`], where records are looked up one by one),
    /// read in the same scan: the removal pass looks among them for those
    /// the run did not see (`ingest::Unseen::Ids`), rather than reading all
    /// of `files` again (~31 ms of a daemon's start on the Django tree).
    pub fn load(
        store: &Store,
        files: u64,
        under: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Known, Option<Vec<FileId>>), StoreError> {
        if files == 0 || files > Self::load_max() {
            return Known::load_stats(store, files, under);
        }
        let (known, ids) = Known::load_records(store, files, under)?;
        Ok((known, Some(ids)))
    }

    /// [`Known::Stats`] of every record (or [`Known::Lookups`] past
    /// [`Known::STATS_MAX`], [`Known::Nothing`] for an empty index), and
    /// the ids of the records whose paths pass `under`, in id order (None
    /// for lookups): what a walk that writes nothing needs
    /// ([`crate::ingest::prewalk`]). Stats take less to load than records
    /// by path: no path is copied, no map built (8.9 against 13.4 ms for
    /// the generated corpus's 24.8k records, 31 against 52 ms for the
    /// Django tree's 66.5k, a scratch test's medians).
    pub fn load_stats(
        store: &Store,
        files: u64,
        under: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Known, Option<Vec<FileId>>), StoreError> {
        if files == 0 {
            return Ok((Known::Nothing, Some(Vec::new())));
        }
        if files > Self::STATS_MAX {
            return Ok((Known::Lookups, None));
        }
        let (stats, ids) = StatsByPath::load(store, files, under)?;
        Ok((Known::Stats(stats), Some(ids)))
    }

    /// [`Known::Stats`] of every record, whatever their number.
    pub fn stats(store: &Store, files: u64) -> Result<Known, StoreError> {
        Ok(Known::Stats(StatsByPath::load(store, files, &|_| false)?.0))
    }

    /// Every record by path, and the ids of those whose paths pass
    /// `under`, in id order.
    fn load_records(
        store: &Store,
        files: u64,
        under: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(Known, Vec<FileId>), StoreError> {
        let mut map = HashMap::with_capacity_and_hasher(files as usize, Default::default());
        let mut ids = Vec::new();
        for item in store.scan::<Files>() {
            let (id, mut rec) = item?;
            if under(&rec.path) {
                ids.push(id);
            }
            let path = std::mem::take(&mut rec.path);
            map.insert(path, (id, rec));
        }
        Ok((Known::Loaded(map), ids))
    }

    /// Every record, for a writer that keeps them up to date with
    /// [`Known::set`] (the daemon's): as [`Known::load`], but an empty
    /// index gives an empty map rather than [`Known::Nothing`].
    pub fn load_for_writer(store: &Store, files: u64) -> Result<Known, StoreError> {
        if files > Self::HASHED_MAX {
            return Ok(Known::Lookups);
        }
        if files > Self::load_max() {
            let mut hashed = RecordsByHash::with_capacity(files as usize);
            for item in store.scan::<Files>() {
                let (id, rec) = item?;
                hashed.insert(&rec.path, id, &rec);
            }
            return Ok(Known::Hashed(hashed));
        }
        // An empty index gives an empty map, where a walk's is Nothing.
        Ok(Known::load_records(store, files, &|_| false)?.0)
    }

    /// Records `path`'s new record (None: gone). A map that grows past
    /// [`Known::LOAD_MAX`] keeps its records by the hash of their paths,
    /// and past [`Known::HASHED_MAX`] it is dropped for point lookups, so
    /// that memory stays bounded. [`Known::Nothing`] stays so: it is for a
    /// walk, which never sets.
    pub fn set(&mut self, path: &[u8], rec: Option<(FileId, &FileRecord)>) {
        if let Known::Hashed(hashed) = self {
            match rec {
                Some((id, r)) => hashed.insert(path, id, r),
                None => {
                    let key = hashed.key(path);
                    hashed.map.remove(&key);
                }
            }
            if hashed.map.len() as u64 > Self::HASHED_MAX {
                *self = Known::Lookups;
            }
            return;
        }
        let Known::Loaded(map) = self else { return };
        match rec {
            Some((id, r)) => {
                // The path is the key: the record keeps none.
                let rec = FileRecord {
                    path: Vec::new(),
                    size: r.size,
                    mtime: r.mtime,
                    inode: r.inode,
                    content: r.content,
                    dev: r.dev,
                };
                map.insert(path.to_vec(), (id, rec));
                if map.len() as u64 > Self::load_max() {
                    let mut hashed = RecordsByHash::with_capacity(map.len());
                    for (path, (id, rec)) in map.drain() {
                        hashed.insert(&path, id, &rec);
                    }
                    *self = Known::Hashed(hashed);
                }
            }
            None => {
                map.remove(path);
            }
        }
    }

    /// The record of `path`, if the index had one when this was made.
    pub fn get(&self, store: &Store, path: &Path) -> Result<Option<(FileId, FileRecord)>, StoreError> {
        self.find(store, path)?.map(|f| f.owned(store, path)).transpose()
    }

    /// [`Known::get`], borrowed from the map when loaded: a walk compares
    /// every file's stat with its record and needs its own copy only of a
    /// changed one (the copy of the path and the record for each file was
    /// ~8 % of a re-index of the generated corpus that changed nothing).
    pub fn find(&self, store: &Store, path: &Path) -> Result<Option<Found<'_>>, StoreError> {
        Ok(match self {
            Known::Nothing => None,
            Known::Loaded(map) => {
                map.get(path.as_os_str().as_bytes()).map(|(id, rec)| Found { id: *id, rec: Rec::Borrowed(rec) })
            }
            Known::Hashed(hashed) => {
                hashed.get(path.as_os_str().as_bytes()).map(|(id, rec)| Found { id, rec: Rec::Owned(rec) })
            }
            Known::Stats(stats) => match stats.find(path.as_os_str().as_bytes()) {
                Brief::Known(b) => Some(Found { id: b.id, rec: Rec::Brief(*b) }),
                Brief::Unknown => None,
                Brief::Shared => lookup(store, path)?.map(|(id, rec)| Found { id, rec: Rec::Owned(rec) }),
            },
            Known::Lookups => lookup(store, path)?.map(|(id, rec)| Found { id, rec: Rec::Owned(rec) }),
        })
    }
}

/// What a walk compares of every file's record, by a hash of its path
/// ([`Known::Stats`]): sorted by that hash, with an index of where each
/// run of hashes with the same top bits starts, so that a lookup reads
/// one or two cache lines. The hashes are seeded per run. Two paths of
/// one hash are looked up in the index instead.
pub struct StatsByPath {
    briefs: Vec<StatBrief>,
    /// Where the briefs whose hashes start with each `bits` bits begin.
    starts: Vec<u32>,
    bits: u32,
    /// Hashes two or more paths share.
    shared: Vec<u64>,
    hasher: foldhash::quality::RandomState,
}

/// A file's record without its path and content (48 bytes).
#[derive(Clone, Copy, Debug)]
struct StatBrief {
    hash: u64,
    id: FileId,
    size: u64,
    mtime: crate::store::TimeNs,
    inode: u64,
    dev: u64,
}

/// What [`StatsByPath::find`] tells of a path.
enum Brief<'a> {
    Known(&'a StatBrief),
    Unknown,
    /// Its hash is another path's too: look it up.
    Shared,
}

impl StatsByPath {
    /// Reads every record of `store` (which holds about `files`), and
    /// the ids of those whose paths pass `under`, in id order.
    fn load(
        store: &Store,
        files: u64,
        under: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(StatsByPath, Vec<FileId>), StoreError> {
        let hasher = foldhash::quality::RandomState::default();
        let mut briefs = Vec::with_capacity(files as usize);
        let mut ids = Vec::new();
        store.for_each_file_stat(|id, r| {
            if under(r.path) {
                ids.push(id);
            }
            let hash = std::hash::BuildHasher::hash_one(&hasher, r.path);
            briefs.push(StatBrief { hash, id, size: r.size, mtime: r.mtime, inode: r.inode, dev: r.dev });
        })?;
        Ok((StatsByPath::from_briefs(briefs, hasher), ids))
    }

    fn from_briefs(mut briefs: Vec<StatBrief>, hasher: foldhash::quality::RandomState) -> StatsByPath {
        briefs.sort_unstable_by_key(|b| b.hash);
        let mut shared = Vec::new();
        for w in briefs.windows(2) {
            if w[0].hash == w[1].hash && shared.last() != Some(&w[0].hash) {
                shared.push(w[0].hash);
            }
        }
        if !shared.is_empty() {
            briefs.retain(|b| shared.binary_search(&b.hash).is_err());
        }
        briefs.shrink_to_fit();
        // About four briefs a run: the index costs one byte a file.
        let bits = (briefs.len() / 4).max(1).ilog2().clamp(1, 31);
        let mut starts = Vec::with_capacity((1 << bits) + 1);
        let mut at = 0;
        for top in 0..=(1u64 << bits) {
            while at < briefs.len() && briefs[at].hash >> (64 - bits) < top {
                at += 1;
            }
            starts.push(at as u32);
        }
        StatsByPath { briefs, starts, bits, shared, hasher }
    }

    fn find(&self, path: &[u8]) -> Brief<'_> {
        self.find_hash(std::hash::BuildHasher::hash_one(&self.hasher, path))
    }

    fn find_hash(&self, hash: u64) -> Brief<'_> {
        let top = (hash >> (64 - self.bits)) as usize;
        let run = &self.briefs[self.starts[top] as usize..self.starts[top + 1] as usize];
        match run.iter().find(|b| b.hash == hash) {
            Some(b) => Brief::Known(b),
            None if self.shared.binary_search(&hash).is_ok() => Brief::Shared,
            None => Brief::Unknown,
        }
    }
}

/// A file's record as [`Known::find`] found it.
pub struct Found<'k> {
    pub id: FileId,
    rec: Rec<'k>,
}

enum Rec<'k> {
    /// From the map: its path is empty (the path is the key).
    Borrowed(&'k FileRecord),
    Owned(FileRecord),
    /// What [`Known::Stats`] keeps: the rest is read on demand.
    Brief(StatBrief),
}

impl Found<'_> {
    /// The record's size, mtime, inode and device.
    fn stat(&self) -> (u64, crate::store::TimeNs, u64, u64) {
        match &self.rec {
            Rec::Borrowed(r) => (r.size, r.mtime, r.inode, r.dev),
            Rec::Owned(r) => (r.size, r.mtime, r.inode, r.dev),
            Rec::Brief(b) => (b.size, b.mtime, b.inode, b.dev),
        }
    }

    /// Whether a file with this stat needs no read: its record says the same.
    pub fn matches(&self, stat: &Stat) -> bool {
        let (size, mtime, inode, _) = self.stat();
        (stat.size, stat.mtime, stat.inode) == (size, mtime, inode)
    }

    pub fn size(&self) -> u64 {
        self.stat().0
    }

    /// Whether the record holds the file's device ([`FileRecord::dev`]).
    pub fn has_dev(&self) -> bool {
        self.stat().3 != 0
    }

    /// The record, as stored, for the file at `path` (read from `store`
    /// when only its stats were kept).
    pub fn owned(self, store: &Store, path: &Path) -> Result<(FileId, FileRecord), StoreError> {
        let rec = match self.rec {
            Rec::Borrowed(rec) => FileRecord { path: path_bytes(path), ..rec.clone() },
            Rec::Owned(rec) => rec,
            Rec::Brief(_) => match store.get::<Files>(&self.id)? {
                Some(rec) => rec,
                None => return Err(store.corrupt::<Files>(&self.id, "the record was gone during the walk")),
            },
        };
        Ok((self.id, rec))
    }
}

/// Where a walk finds the index's records: ready, or being loaded by
/// another thread while the walk runs. A file met before they are ready
/// is stat'ed and left in [`WalkOutcome::pending`], to be compared once
/// they are ([`resolve_pending`]): loading the records of the generated
/// corpus at scale 10 (24,816 files) took 12–14 ms of a 55 ms no-change
/// walk, which it no longer waits for.
#[derive(Clone, Copy)]
pub enum Records<'a> {
    Ready(&'a Known),
    Loading(&'a std::sync::OnceLock<Known>),
}

impl Records<'_> {
    fn get(&self) -> Option<&Known> {
        match self {
            Records::Ready(k) => Some(k),
            Records::Loading(cell) => cell.get(),
        }
    }
}

/// Compares the files a walk left pending with `known`: each is unchanged
/// (added to `out`) or a candidate (returned).
pub fn resolve_pending(
    store: &Store,
    known: &Known,
    opts: &WalkOptions,
    out: &mut WalkOutcome,
) -> Result<Vec<Candidate>, StoreError> {
    let mut candidates = Vec::new();
    sort_pending(store, known, opts, out, |c| {
        candidates.push(c);
        true
    })?;
    Ok(candidates)
}

/// Takes the files `out` left pending and compares them with `known`:
/// each is unchanged (added to `out`) or a candidate, handed to `take`
/// until it returns false; then false.
fn sort_pending(
    store: &Store,
    known: &Known,
    opts: &WalkOptions,
    out: &mut WalkOutcome,
    mut take: impl FnMut(Candidate) -> bool,
) -> Result<bool, StoreError> {
    for (path, stat) in std::mem::take(&mut out.pending) {
        let reread = opts.rereads_file(&path, &stat);
        match known.find(store, &path)? {
            Some(found) if !reread && found.matches(&stat) => out.add_unchanged(store, found, &path, &stat)?,
            old => {
                let old = old.map(|f| f.owned(store, &path)).transpose()?;
                if !take(Candidate { written: reread, ..Candidate::new(path, old) }) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// The stat fields that decide whether a file changed, and its number of
/// names (hard links).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime: i64,
    pub inode: u64,
    /// Names the file has: a write through one name changes the others,
    /// which raise no event of their own.
    pub links: u64,
    /// The device: recorded, never compared (see [`FileRecord::dev`]).
    pub dev: u64,
}

impl Stat {
    pub fn of(meta: &Metadata) -> Stat {
        Stat {
            size: meta.len(),
            mtime: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            inode: meta.ino(),
            links: meta.nlink(),
            dev: meta.dev(),
        }
    }

    /// The same from `fstatat`'s raw record.
    #[allow(clippy::unnecessary_cast)] // its fields' types vary by target
    fn of_raw(st: &rustix::fs::Stat) -> Stat {
        Stat {
            size: st.st_size as u64,
            mtime: st.st_mtime as i64 * 1_000_000_000 + st.st_mtime_nsec as i64,
            inode: st.st_ino as u64,
            links: st.st_nlink as u64,
            dev: st.st_dev as u64,
        }
    }

    pub fn matches(&self, rec: &FileRecord) -> bool {
        self.size == rec.size && self.mtime == rec.mtime && self.inode == rec.inode
    }
}

/// A file the walk wants read: new, or changed since its record. (The
/// reader takes its stat from the open file, before and after reading.)
#[derive(Debug)]
pub struct Candidate {
    pub path: PathBuf,
    pub old: Option<(FileId, FileRecord)>,
    /// The writer expects this file's change to take the old content's
    /// last name: the reader then fetches that content's record (whose
    /// chunk list says which postings go) beside its read, off the
    /// writer's thread. A hint: when it is wrong the writer looks the
    /// record up itself, or does not need it.
    pub fetch_old: bool,
    /// Sent without a stat (the daemon, for a path the index holds as a
    /// file): the reader's `fstat` of the open file tells whether it
    /// changed, and when it is no longer a readable regular file the
    /// path goes back to the sender ([`crate::ingest::Feed`]) rather than
    /// being written.
    pub unverified: bool,
    /// An event said the file's bytes were written: it is read even when
    /// its stat still matches the record (an edit that kept the size and
    /// had its mtime set back, or two writes within one tick of the
    /// file system's clock).
    pub written: bool,
    /// The walked root the path lies under, opened: the reader opens the
    /// file relative to it ([`RootDir::open`]).
    pub root: Option<Arc<RootDir>>,
}

impl Candidate {
    pub fn new(path: PathBuf, old: Option<(FileId, FileRecord)>) -> Candidate {
        Candidate { path, old, fetch_old: false, unverified: false, written: false, root: None }
    }

    /// The content the index holds for the file, which it may have grown
    /// from ([`Prior`]).
    pub fn prior(&self) -> Option<Prior> {
        self.old.as_ref().map(|(_, r)| Prior { content: r.content, size: r.size })
    }

    /// Whether a file with this stat needs no read: its record says the same.
    pub fn unchanged(&self, stat: &Stat) -> bool {
        !self.written && self.old.as_ref().is_some_and(|(_, rec)| stat.matches(rec))
    }
}

/// Why a path was left out of the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    Symlink,
    Special,
    Unreadable,
    UnreadableDir,
    /// A path longer than the system takes (ENAMETOOLONG: past PATH_MAX,
    /// 4,096 bytes on Linux): its directory cannot be listed, nor the file
    /// opened.
    PathTooLong,
    Vanished,
    KeptChanging,
    /// A kernel file system (proc, sysfs...) mounted inside a root: its
    /// files' sizes are not their contents ([`crate::mounts`]).
    KernelFs,
    /// A file that programs keep beside documents only while they work on
    /// them, or a folder's system file ([`is_clutter`]).
    Clutter,
}

impl SkipReason {
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::Symlink => "symlink (not followed)",
            SkipReason::Special => "not a regular file (fifo, socket or device; never opened)",
            SkipReason::Unreadable => "unreadable file",
            SkipReason::UnreadableDir => "unreadable directory",
            SkipReason::PathTooLong => "path too long for the system (PATH_MAX)",
            SkipReason::Vanished => "vanished before it could be read",
            SkipReason::KeptChanging => "kept changing while being read",
            SkipReason::KernelFs => {
                "a kernel file system (proc, sysfs...: its files' sizes are not their contents); not entered"
            }
            SkipReason::Clutter => {
                "clutter: an editor's lock, swap or auto-save file, a partial download or a folder's system file \
                 (.DS_Store, Thumbs.db...; a `!` line in a .simdignore keeps those it names, --no-ignore all)"
            }
        }
    }
}

/// Whether a file named `name` is clutter: one that a program keeps beside
/// a document only while it works on it (an editor's lock, swap or
/// auto-save file, a partial download, a network file system's file kept
/// for a process that still has it open after its removal), or a folder's
/// own system file. None is a document: followed, every lock file an
/// office suite takes and drops is a file lost (`simd lost DIR --since
/// 1d` listed `~$plan.docx` and `.~lock.plan.odt#` beside the documents
/// that went), a Word save (the document renamed to `~WRL0002.tmp`, a
/// temporary file renamed over it) goes through temporary names that
/// would be recorded as moves, and every folder's `desktop.ini` is a copy
/// in a report's identical sets.
/// Editors' backups (`name~`, `name.bak`) are documents' earlier versions,
/// and stay: `simd lost` finds a deleted file's content in them. What is
/// left out is about what Nextcloud's and Dropbox's clients leave out;
/// `--no-ignore` indexes them.
pub fn is_clutter(name: &[u8]) -> bool {
    let ends =
        |suffix: &[u8]| name.len() > suffix.len() && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix);
    let hex = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_hexdigit);
    match name {
        // Microsoft Office: the owner file of an open document
        // (`~$plan.docx`) and its temporary files (`~WRL0001.tmp`).
        [b'~', b'$', ..] => true,
        [b'~', ..] if ends(b".tmp") => true,
        // LibreOffice's lock (`.~lock.plan.odt#`), and the temporary file
        // it saves into before renaming it over the document
        // (`lu1234abcd.tmp`); GLib's, for GNOME's programs
        // (`.goutputstream-AB12CD`).
        [b'.', b'~', b'l', b'o', b'c', b'k', b'.', .., b'#'] => true,
        [b'l', b'u', rest @ ..] if rest.len() > 4 && ends(b".tmp") => true,
        _ if name.starts_with(b".goutputstream-") => true,
        // Emacs: an auto-save file (`#plan.txt#`) and a lock (`.#plan.txt`,
        // a file where symlinks cannot be made).
        [b'#', .., b'#'] | [b'.', b'#', ..] => true,
        // Vim's swap files: `.plan.txt.swp`, then `.swo`, `.swn`...
        [b'.', .., b'.', b's', b'w', c] if (b'a'..=b'p').contains(c) => true,
        // A file removed while open on NFS (`.nfs` and 24 hex digits) or
        // FUSE (`.fuse_hidden` and hex), kept until it is closed.
        _ if name.len() == 28 && name.starts_with(b".nfs") && hex(&name[4..]) => true,
        _ if name.starts_with(b".fuse_hidden") && hex(&name[12..]) => true,
        // macOS's AppleDouble files (`._plan.docx`: the resource fork and
        // attributes of `plan.docx`, on a volume that cannot hold them).
        [b'.', b'_', ..] => true,
        _ => {
            [&b".kate-swp"[..], b".crdownload", b".part", b".partial", b".filepart"].iter().any(|s| ends(s))
                || [&b".DS_Store"[..], b"Thumbs.db", b"ehthumbs.db", b"desktop.ini", b".directory", b"Icon\r"]
                    .iter()
                    .any(|n| name.eq_ignore_ascii_case(n))
        }
    }
}

/// Everything the walk found that needs no reading.
#[derive(Debug, Default)]
pub struct WalkOutcome {
    /// Files whose record still matches: not read.
    pub unchanged: Vec<FileId>,
    pub unchanged_bytes: u64,
    /// Paths skipped, with why.
    pub skipped: Vec<(PathBuf, SkipReason)>,
    /// Directories that could not be listed: what the index holds under them
    /// is kept, not taken for deleted.
    pub unreadable_dirs: Vec<PathBuf>,
    /// Errors reading the index itself (fatal).
    pub store_errors: Vec<StoreError>,
    /// Files met before the records were ready, with their stat
    /// ([`Records::Loading`]).
    pub pending: Vec<(PathBuf, Stat)>,
    /// Unchanged files whose record holds no device yet (written by schema
    /// 8 or older), their records with the device added: the writer
    /// writes them in passing.
    pub devices: Vec<(FileId, FileRecord)>,
}

impl WalkOutcome {
    /// Counts a file whose record still matches its stat.
    fn add_unchanged(&mut self, store: &Store, found: Found<'_>, path: &Path, stat: &Stat) -> Result<(), StoreError> {
        self.unchanged.push(found.id);
        self.unchanged_bytes += found.size();
        if !found.has_dev() {
            let (id, rec) = found.owned(store, path)?;
            self.devices.push((id, FileRecord { dev: stat.dev, ..rec }));
        }
        Ok(())
    }
}

/// How close two stored paths are: first how many trailing components they
/// share (the name, then the inside of a moved directory), then how many
/// leading ones (where in the tree: a directory renamed in place keeps its
/// parents). Used to tell where a file went.
pub fn closeness(a: &[u8], b: &[u8]) -> (usize, usize) {
    let suffix = a.rsplit(|&c| c == b'/').zip(b.rsplit(|&c| c == b'/')).take_while(|(x, y)| x == y).count();
    let prefix = a.split(|&c| c == b'/').zip(b.split(|&c| c == b'/')).take_while(|(x, y)| x == y).count();
    (suffix, prefix)
}

/// Path bytes as stored.
pub fn path_bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

pub fn bytes_path(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

/// A root directory held open for one walk, so that its files are opened
/// relative to it: the kernel then looks up only the path's components
/// below the root, where a full path made it walk the root's own from `/`
/// for every file (a first index of the Django tree under
/// `/root/corpora/django`, side by side: −1.2 %).
pub struct RootDir {
    path: Vec<u8>,
    dir: File,
}

impl std::fmt::Debug for RootDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RootDir({})", crate::show_path(bytes_path(&self.path)))
    }
}

impl RootDir {
    /// The root, opened; None when it cannot be (its files are then
    /// opened by their full paths, and any error is met there). Opened as
    /// a directory only: whatever replaced it since it was checked, the
    /// open never blocks (a FIFO would, opened as a file).
    fn new(root: &Path) -> Option<Arc<RootDir>> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = File::from(rustix::fs::open(root, flags, Mode::empty()).ok()?);
        Some(Arc::new(RootDir { path: path_bytes(root), dir }))
    }

    /// The root of `roots` that `path` lies under, if any.
    fn find<'a>(roots: &'a [Arc<RootDir>], path: &Path) -> Option<&'a Arc<RootDir>> {
        roots.iter().find(|r| r.below(path).is_some())
    }

    /// `path` relative to the root, when it lies strictly under it.
    fn below<'p>(&self, path: &'p Path) -> Option<&'p OsStr> {
        let p = path.as_os_str().as_bytes();
        let root = self.path.strip_suffix(b"/").unwrap_or(&self.path);
        let rest = p.strip_prefix(root)?.strip_prefix(b"/")?;
        (!rest.is_empty()).then(|| OsStr::from_bytes(rest))
    }

    /// Opens `path` with `flags` (and `O_CLOEXEC`), relative to `root`
    /// when it lies under it, else by its full path.
    pub fn open(root: Option<&RootDir>, path: &Path, flags: rustix::fs::OFlags) -> std::io::Result<File> {
        let flags = flags | rustix::fs::OFlags::CLOEXEC;
        let fd = match root.and_then(|r| Some((r, r.below(path)?))) {
            Some((r, rest)) => rustix::fs::openat(&r.dir, rest, flags, rustix::fs::Mode::empty()),
            None => rustix::fs::open(path, flags, rustix::fs::Mode::empty()),
        };
        Ok(File::from(fd?))
    }
}

/// Candidates a walker thread sends at a time ([`walk`]): one at a time,
/// the walk (far ahead of the readers) met a full queue for every file it
/// found, and it and the readers woke each other ~66,000 times in a first
/// index of the Django tree.
pub const WALK_BATCH: usize = 32;

/// An `--exclude` pattern as the walk and the daemon match it, or why it
/// is refused. Gitignore syntax, matched against paths inside each root
/// (never against the directories above it: `tmp/**` meant for
/// `ROOT/tmp/` left out every file of a root under `/tmp`): a pattern that
/// starts with `/` is an absolute path (`/srv/kb/tmp`); one with a `/`
/// elsewhere matches at any depth (`build/tmp` as `**/build/tmp`, where
/// gitignore would anchor it at the root); one without matches a name
/// anywhere (`*.bak`). A blank pattern, which a glob would read as
/// "everything" (an unset `--exclude "$VAR"` left every file out and
/// emptied the index), is refused.
pub fn exclude_glob(pattern: &str) -> Result<String, String> {
    if pattern.trim().is_empty() {
        return Err("an empty pattern; give a glob such as '*.tmp' or 'build/'".to_string());
    }
    if pattern.starts_with("./") || pattern.starts_with("../") {
        return Err(format!(
            "{pattern}: a path from where simd runs matches nothing; give a pattern inside the roots ('{}' at any \
             depth) or an absolute path",
            pattern.trim_start_matches("./")
        ));
    }
    let glob = match pattern.trim_end_matches('/').contains('/') && !pattern.starts_with('/') {
        true if !pattern.starts_with("**/") => format!("**/{pattern}"),
        _ => pattern.to_string(),
    };
    // Checked here, as the walk will build it, so that a bad one is
    // refused before anything is written.
    ignore::overrides::OverrideBuilder::new("/").add(&format!("!{glob}")).and_then(|b| b.build()).map_err(
        |e| match e {
            ignore::Error::Glob { err, .. } => err,
            e => e.to_string(),
        },
    )?;
    Ok(glob)
}

/// What `--exclude` leaves out ([`exclude_glob`]): the absolute patterns
/// matched against whole paths, the others against the path inside the
/// innermost root that holds it.
pub struct Excludes {
    absolute: Option<Override>,
    /// Per root, longest first: the relative patterns rooted there.
    relative: Vec<(PathBuf, Override)>,
}

impl Excludes {
    /// None when there is no pattern.
    pub fn new(roots: &[PathBuf], patterns: &[String]) -> Result<Option<Excludes>, ignore::Error> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let mut globs = Vec::new();
        for pattern in patterns {
            let glob = exclude_glob(pattern).map_err(|err| ignore::Error::Glob { glob: Some(pattern.clone()), err })?;
            globs.push(glob);
        }
        let build = |root: &Path, absolute: bool| -> Result<Option<Override>, ignore::Error> {
            let mut b = OverrideBuilder::new(root);
            let mut any = false;
            for glob in globs.iter().filter(|g| g.starts_with('/') == absolute) {
                b.add(&format!("!{glob}"))?;
                any = true;
            }
            if any {
                b.build().map(Some)
            } else {
                Ok(None)
            }
        };
        let absolute = build(Path::new("/"), true)?;
        let mut relative = Vec::new();
        for root in roots {
            if let Some(o) = build(root, false)? {
                relative.push((root.clone(), o));
            }
        }
        relative.sort_by_key(|(r, _)| std::cmp::Reverse(r.as_os_str().len()));
        Ok(Some(Excludes { absolute, relative }))
    }

    /// Whether `path` (under a root; a directory when `is_dir`) is left out.
    /// Its parents are not looked at: the walk does not enter an excluded
    /// directory.
    pub fn excluded(&self, path: &Path, is_dir: bool) -> bool {
        if self.absolute.as_ref().is_some_and(|a| a.matched(path, is_dir).is_ignore()) {
            return true;
        }
        match self.relative.iter().find(|(r, _)| path.starts_with(r)) {
            Some((r, o)) => path != r && o.matched(path, is_dir).is_ignore(),
            None => false,
        }
    }

    /// The absolute patterns that can match nothing under `roots`: their
    /// fixed leading directories are neither inside a root nor above one
    /// (`/build` meant as gitignore's "at the top of the root").
    pub fn outside(patterns: &[String], roots: &[PathBuf]) -> Vec<String> {
        let fixed = |p: &str| -> PathBuf {
            let end = p.find(['*', '?', '[', '{', '\\']).map_or(p.len(), |i| p[..i].rfind('/').unwrap_or(0));
            PathBuf::from(&p[..end.max(1)])
        };
        patterns
            .iter()
            .filter(|p| p.starts_with('/'))
            .filter(|p| {
                let f = fixed(p.trim_end_matches('/'));
                !roots.iter().any(|r| r.starts_with(&f) || f.starts_with(r))
            })
            .cloned()
            .collect()
    }

    /// The first root an absolute pattern leaves out whole (the root or a
    /// directory above it matched): its every file would leave the index.
    pub fn whole_root(&self, roots: &[PathBuf]) -> Option<PathBuf> {
        let a = self.absolute.as_ref()?;
        roots.iter().find(|r| r.ancestors().any(|p| p != Path::new("/") && a.matched(p, true).is_ignore())).cloned()
    }
}

/// The kinds of ignore file the walk reads, in the order of precedence
/// `ignore` gives them when two kinds match a path: `.simdignore` (its
/// custom name), `.ignore`, `.gitignore`, then a repository's
/// `.git/info/exclude`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Simd = 0,
    Ignore = 1,
    Git = 2,
    Exclude = 3,
}

/// The ignore rules of a directory: its own ignore files' matchers and
/// its parents' up to its root (parents first), and whether the walk
/// enters it at all.
#[derive(Clone)]
pub(crate) struct DirRules {
    layers: Arc<[(Kind, Arc<ignore::gitignore::Gitignore>)]>,
    /// The walk never enters this directory: it, or a directory above it
    /// (below the root), is ignored, so nothing under it is walked whatever
    /// a `!` line further down says.
    pruned: bool,
}

impl DirRules {
    /// How the walk matches `path` (an entry of this directory): for each
    /// kind of ignore file, the nearest directory's file that has a line
    /// for it decides (its last such line), and of the kinds that do, the
    /// first in [`Kind`]'s order (as `ignore`'s `Ignore::matched_ignore`,
    /// which the walk runs, with `require_git(false)`).
    pub(crate) fn matched(&self, path: &Path, is_dir: bool) -> ignore::Match<()> {
        let mut found = [ignore::Match::None, ignore::Match::None, ignore::Match::None, ignore::Match::None];
        for (kind, m) in self.layers.iter().rev() {
            let slot = &mut found[*kind as usize];
            if slot.is_none() {
                *slot = m.matched(path, is_dir).map(|_| ());
            }
        }
        let [simd, ignore, git, exclude] = found;
        simd.or(ignore).or(git).or(exclude)
    }

    /// Whether the walk yields `path`, an entry of this directory.
    pub(crate) fn walks(&self, path: &Path, is_dir: bool) -> bool {
        !self.pruned && !self.matched(path, is_dir).is_ignore()
    }
}

/// Ignore files by directory, read on first use: the daemon checks every
/// path an event names with them, as the walk (whose own matching is
/// `ignore`'s) would, and the walk the clutter a `!` line may keep
/// ([`IgnoreFiles::keeps`]).
#[derive(Default)]
pub(crate) struct IgnoreFiles {
    /// A directory without ignore files shares its parent's list: a
    /// path's check is one lookup of its parent, where a lookup per parent
    /// was ~8 % of the daemon's main thread in a burst.
    by_dir: HashMap<PathBuf, DirRules>,
}

impl IgnoreFiles {
    /// The rules that apply in `d` (under `root`).
    pub(crate) fn rules(&mut self, d: &Path, root: &Path) -> DirRules {
        if let Some(m) = self.by_dir.get(d) {
            return m.clone();
        }
        let parent = d.parent().filter(|p| d != root && p.starts_with(root));
        let (inherited, pruned) = match parent {
            Some(p) => {
                let up = self.rules(p, root);
                let pruned = !up.walks(d, true);
                (up.layers, pruned)
            }
            None => (Arc::from([]), false),
        };
        let own: Vec<_> = own_ignore_files(d)
            .into_iter()
            .map(|(kind, f)| {
                // Rooted at `d`, as `ignore` roots them (an exclude file's
                // patterns are the repository's, not `.git/info`'s).
                let mut b = ignore::gitignore::GitignoreBuilder::new(d);
                b.add(&f);
                let m = b.build().unwrap_or_else(|_| ignore::gitignore::Gitignore::empty());
                (kind, Arc::new(m))
            })
            .collect();
        let layers = if own.is_empty() { inherited } else { inherited.iter().cloned().chain(own).collect() };
        let rules = DirRules { layers, pruned };
        self.by_dir.insert(d.to_path_buf(), rules.clone());
        rules
    }

    /// Whether a `!` line of the ignore files over `path` (a file under
    /// `root`) keeps it: clutter ([`is_clutter`]) is left out unless one
    /// does (`!*.part` in a `.simdignore`), by the walk's own precedence
    /// ([`DirRules::matched`]).
    pub(crate) fn keeps(&mut self, path: &Path, root: &Path) -> bool {
        let Some(parent) = path.parent().filter(|d| d.starts_with(root)) else { return false };
        self.rules(parent, root).matched(path, false).is_whitelist()
    }

    /// How many directories' lists are held.
    pub(crate) fn len(&self) -> usize {
        self.by_dir.len()
    }

    /// Forgets them all (an ignore file changed).
    pub(crate) fn clear(&mut self) {
        self.by_dir.clear();
    }

    /// Forgets the rules of directory `d` and of those under it, if `d`'s
    /// are held (a directory's are held only with its parents'): a look
    /// up for any other path, a file's, costs one probe.
    pub(crate) fn forget_under(&mut self, d: &Path) {
        if self.by_dir.remove(d).is_some() {
            self.by_dir.retain(|k, _| !k.starts_with(d));
        }
    }
}

/// The ignore files directory `d` holds, by kind. They are looked up
/// from `d` opened once: a `stat` of each by its whole path walked that
/// path each time, and the daemon looks at every indexed directory when
/// it starts (31.7k of them in Django's releases: 0.25–0.30 s with three
/// such `stat`s a directory, 0.51 s with a fourth for `.git`, 0.28–0.34 s
/// so, the four of them).
fn own_ignore_files(d: &Path) -> Vec<(Kind, PathBuf)> {
    use rustix::fs::{open, statat, AtFlags, FileType, Mode, OFlags};
    let Ok(dir) = open(d, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) else {
        return Vec::new();
    };
    // Symbolic links followed, as `ignore` follows them.
    let kind_of = |name: &str| statat(&dir, name, AtFlags::empty()).ok().map(|s| FileType::from_raw_mode(s.st_mode));
    let mut own: Vec<_> = [(Kind::Git, ".gitignore"), (Kind::Ignore, ".ignore"), (Kind::Simd, ".simdignore")]
        .into_iter()
        .filter(|(_, name)| kind_of(name) == Some(FileType::RegularFile))
        .map(|(kind, name)| (kind, d.join(name)))
        .collect();
    let exclude = match kind_of(".git") {
        Some(FileType::Directory) => {
            (kind_of(".git/info/exclude") == Some(FileType::RegularFile)).then(|| d.join(".git/info/exclude"))
        }
        Some(FileType::RegularFile) => worktree_exclude(&d.join(".git")).filter(|f| f.is_file()),
        _ => None,
    };
    own.extend(exclude.map(|f| (Kind::Exclude, f)));
    own
}

/// The `info/exclude` of the repository a `.git` file names (a worktree's
/// or a submodule's), found as `ignore` finds it
/// (`resolve_git_commondir`): its `gitdir: ` line names the repository,
/// whose `commondir` names the shared one.
fn worktree_exclude(dot_git: &Path) -> Option<PathBuf> {
    // As the walk's `ignore` reads them (`vendor/ignore/PATCHES.md`): a
    // regular file's first line, opened non-blocking (a FIFO there blocked
    // the walk for ever).
    let first_line = |p: &Path| -> Option<String> {
        use std::io::BufRead;
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        options.read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = options.open(p).ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
        let mut line = String::new();
        std::io::BufReader::new(file).read_line(&mut line).ok()?;
        let line = line.strip_suffix('\n').map_or(&line[..], |l| l.strip_suffix('\r').unwrap_or(l));
        Some(line.to_string())
    };
    let real = PathBuf::from(first_line(dot_git)?.strip_prefix("gitdir: ")?);
    let common = first_line(&real.join("commondir"))?;
    Some(if common.starts_with('.') { real.join(common) } else { PathBuf::from(common) }.join("info/exclude"))
}

/// A walk of `root` that reads the ignore files as simd reads them, which
/// the daemon's checks ([`DirRules`]) follow: hidden files walked, no ignore
/// files above the root nor git's global one, `.simdignore` beside
/// `.gitignore`, `.ignore` and `.git/info/exclude` (none with `no_ignore`),
/// symbolic links not followed.
fn ignoring_walker(root: &Path, no_ignore: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .parents(false)
        .git_global(false)
        .git_exclude(!no_ignore)
        .git_ignore(!no_ignore)
        .ignore(!no_ignore)
        .require_git(false)
        .follow_links(false);
    if !no_ignore {
        builder.add_custom_ignore_filename(".simdignore");
    }
    builder
}

/// Walks `roots` in parallel; sends new or changed files to `tx`, in
/// batches of up to [`WALK_BATCH`], and returns what needed no reading.
pub fn walk(
    store: &Store,
    roots: &[PathBuf],
    opts: &WalkOptions,
    records: Records<'_>,
    tx: &Sender<Vec<Candidate>>,
) -> Result<WalkOutcome, ignore::Error> {
    let Some((first, rest)) = roots.split_first() else {
        return Ok(WalkOutcome::default());
    };
    let mut builder = ignoring_walker(first, opts.no_ignore);
    for r in rest {
        builder.add(r);
    }
    let skip_dirs: Vec<PathBuf> = opts.skip_dirs.iter().chain(&opts.kernel_dirs).cloned().collect();
    let excludes = Excludes::new(roots, &opts.excludes)?;
    builder.same_file_system(opts.one_file_system).threads(opts.threads).filter_entry(move |e| {
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        !(is_dir && (e.file_name() == ".git" || skip_dirs.iter().any(|d| d == e.path())))
            && !excludes.as_ref().is_some_and(|x| x.excluded(e.path(), is_dir))
    });

    let root_dirs: Vec<Arc<RootDir>> = roots.iter().filter_map(|r| RootDir::new(r)).collect();
    let root_dirs = &root_dirs;
    let mut outcome = WalkOutcome::default();
    outcome.skipped.extend(opts.kernel_dirs.iter().map(|d| (d.clone(), SkipReason::KernelFs)));
    let shared = Mutex::new(outcome);
    builder.build_parallel().run(|| {
        let shared = &shared;
        let mut local = Local {
            out: WalkOutcome::default(),
            shared,
            batch: Vec::new(),
            tx: tx.clone(),
            dir: None,
            sent: false,
            ignores: IgnoreFiles::default(),
        };
        Box::new(move |entry| {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => {
                    let path = error_path(&err);
                    // `ignore`'s message names the path, lossily and with
                    // its control characters as they are: said as every
                    // path is, with the system's error.
                    match (&path, err.io_error()) {
                        (Some(p), Some(io)) => tracing::warn!("{}: {io}", crate::show_path(p)),
                        (Some(p), None) => tracing::warn!("{}: {err}", crate::show_path(p)),
                        _ => tracing::warn!("{err}"),
                    }
                    if let Some(p) = path {
                        // Kept, as an unreadable directory's files are: it is
                        // the path that fails, not the files.
                        let too_long = err.io_error().and_then(|e| e.raw_os_error()) == Some(libc::ENAMETOOLONG);
                        local.out.unreadable_dirs.push(p.clone());
                        let reason = if too_long { SkipReason::PathTooLong } else { SkipReason::UnreadableDir };
                        local.out.skipped.push((p, reason));
                    }
                    return WalkState::Continue;
                }
            };
            let Some(ft) = entry.file_type() else { return WalkState::Continue };
            if ft.is_dir() {
                // A line of the directory's ignore files that is not a
                // glob (`[abc`) is left out and the rest still applies;
                // `ignore` hands the error over with the directory,
                // where it would be lost without a word.
                if let Some(err) = entry.error() {
                    warn_ignore_file(err);
                }
                return WalkState::Continue;
            }
            if ft.is_symlink() {
                local.out.skipped.push((entry.into_path(), SkipReason::Symlink));
                return WalkState::Continue;
            }
            if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() || !ft.is_file() {
                local.out.skipped.push((entry.into_path(), SkipReason::Special));
                return WalkState::Continue;
            }
            if !opts.no_ignore && is_clutter(entry.file_name().as_bytes()) {
                let root = roots.iter().filter(|r| entry.path().starts_with(r)).max_by_key(|r| r.as_os_str().len());
                if !root.is_some_and(|r| local.ignores.keeps(entry.path(), r)) {
                    local.out.skipped.push((entry.into_path(), SkipReason::Clutter));
                    return WalkState::Continue;
                }
            }
            let Some(known) = records.get() else {
                // Gone between readdir and lstat: not seen.
                if let Ok(stat) = local.lstat(root_dirs, entry.path()) {
                    local.out.pending.push((entry.into_path(), stat));
                }
                return WalkState::Continue;
            };
            if !local.out.pending.is_empty() && !local.resolve_pending(store, known, opts, root_dirs) {
                return WalkState::Quit;
            }
            let path = entry.path();
            // A path the index has no record of is read whatever its stat
            // says (the reader stats the open file): only a recorded file
            // needs an lstat here, to tell whether it changed.
            let found = known.find(store, path);
            match found {
                Ok(Some(found)) => {
                    match local.lstat(root_dirs, path).map(|stat| (opts.rereads_file(path, &stat), stat)) {
                        Ok((false, stat)) if found.matches(&stat) => {
                            if let Err(e) = local.out.add_unchanged(store, found, path, &stat) {
                                local.out.store_errors.push(e);
                                return WalkState::Quit;
                            }
                        }
                        Ok((reread, _)) => {
                            let root = RootDir::find(root_dirs, path).cloned();
                            let old = match found.owned(store, path) {
                                Ok(old) => old,
                                Err(e) => {
                                    local.out.store_errors.push(e);
                                    return WalkState::Quit;
                                }
                            };
                            let cand =
                                Candidate { root, written: reread, ..Candidate::new(entry.into_path(), Some(old)) };
                            if !local.send(cand) {
                                return WalkState::Quit;
                            }
                        }
                        // Gone between readdir and lstat: not seen, so the
                        // removal pass records it.
                        Err(_) => {}
                    }
                }
                Ok(None) => {
                    let root = RootDir::find(root_dirs, path).cloned();
                    if !local.send(Candidate { root, ..Candidate::new(entry.into_path(), None) }) {
                        return WalkState::Quit;
                    }
                }
                Err(e) => {
                    local.out.store_errors.push(e);
                    return WalkState::Quit;
                }
            }
            WalkState::Continue
        })
    });
    Ok(shared.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Says what is wrong with an ignore file, one line per error, each with
/// its path as every path is said (`ignore` names it lossily).
fn warn_ignore_file(err: &ignore::Error) {
    match err {
        ignore::Error::Partial(errs) => errs.iter().for_each(warn_ignore_file),
        ignore::Error::WithPath { path, err } => match err.io_error() {
            Some(io) => tracing::warn!("{}: {io}; its ignore rules are not applied", crate::show_path(path)),
            None => {
                tracing::warn!("{}: {err}; that line is left out, the rest of the file applies", crate::show_path(path))
            }
        },
        _ => tracing::warn!("{err}; an ignore file's line is left out, the rest of the file applies"),
    }
}

/// A walker thread's findings, merged into the shared outcome when the
/// thread's visitor is dropped (no lock per file), and its candidates not
/// sent yet.
struct Local<'a> {
    out: WalkOutcome,
    shared: &'a Mutex<WalkOutcome>,
    batch: Vec<Candidate>,
    tx: Sender<Vec<Candidate>>,
    /// The directory whose files this thread stats (its path's bytes),
    /// held open (None: it could not be opened), [`Local::lstat`].
    dir: Option<(Vec<u8>, Option<File>)>,
    /// Whether this thread has sent a batch yet.
    sent: bool,
    /// The ignore files over the clutter this thread met.
    ignores: IgnoreFiles,
}

impl Local<'_> {
    /// The stat of `path`, not following a symlink, taken relative to its
    /// directory, which the thread holds open while it meets that
    /// directory's files (the walk hands over a directory's entries
    /// together): by its full path, the kernel looked up every component
    /// of it for each file, `__d_lookup_rcu` a third of a re-index that
    /// changed nothing on the generated corpus. Falls back to the full
    /// path when the directory cannot be opened.
    fn lstat(&mut self, roots: &[Arc<RootDir>], path: &Path) -> std::io::Result<Stat> {
        use rustix::fs::{AtFlags, OFlags};
        // Split by bytes: the walk's paths are absolute and never end in a
        // slash, and `Path::parent` and `file_name` parse components (~2 %
        // of a re-index that changed nothing).
        let bytes = path.as_os_str().as_bytes();
        let split = bytes.iter().rposition(|&b| b == b'/').filter(|&i| i > 0 && i + 1 < bytes.len());
        if let Some(i) = split {
            let (parent, name) = (&bytes[..i], OsStr::from_bytes(&bytes[i + 1..]));
            if self.dir.as_ref().is_none_or(|(p, _)| p.as_slice() != parent) {
                // O_PATH: nothing is read through it, and opening it needs
                // no read permission on the directory (the walk listed it).
                let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW;
                let dir = Path::new(OsStr::from_bytes(parent));
                let fd = RootDir::open(RootDir::find(roots, dir).map(|r| &**r), dir, flags).ok();
                self.dir = Some((parent.to_vec(), fd));
            }
            if let Some((_, Some(dir))) = &self.dir {
                return Ok(Stat::of_raw(&rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?));
            }
        }
        std::fs::symlink_metadata(path).map(|m| Stat::of(&m))
    }

    /// Compares the files this thread met before the records were loaded
    /// ([`resolve_pending`]) as soon as it meets one after: on the
    /// generated corpus most files are met before (the records take ~60 ms
    /// of an ~85 ms walk), and comparing them all once the walk had ended
    /// took ~10 ms more on one thread, and sent a changed file only then.
    /// False when the walk is to stop.
    fn resolve_pending(&mut self, store: &Store, known: &Known, opts: &WalkOptions, roots: &[Arc<RootDir>]) -> bool {
        let mut out = std::mem::take(&mut self.out);
        let sorted = sort_pending(store, known, opts, &mut out, |c| {
            let root = RootDir::find(roots, &c.path).cloned();
            self.send(Candidate { root, ..c })
        });
        self.out = out;
        sorted.unwrap_or_else(|e| {
            self.out.store_errors.push(e);
            false
        })
    }

    /// Queues `cand`, sending the batch once full; false once nobody takes
    /// candidates any more. A thread's first candidate goes at once: a
    /// run that finds one changed file opens its writer as soon as the
    /// walk meets it (`ingest::index_locked`), not when the walk ends.
    fn send(&mut self, cand: Candidate) -> bool {
        self.batch.push(cand);
        if self.sent && self.batch.len() < WALK_BATCH {
            return true;
        }
        self.sent = true;
        self.tx.send(std::mem::replace(&mut self.batch, Vec::with_capacity(WALK_BATCH))).is_ok()
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            // Nobody takes it when the run stops early: nothing to do then.
            let _ = self.tx.send(std::mem::take(&mut self.batch));
        }
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let out = std::mem::take(&mut self.out);
        s.unchanged.extend(out.unchanged);
        s.unchanged_bytes += out.unchanged_bytes;
        s.skipped.extend(out.skipped);
        s.unreadable_dirs.extend(out.unreadable_dirs);
        s.store_errors.extend(out.store_errors);
        s.pending.extend(out.pending);
        s.devices.extend(out.devices);
    }
}

/// The index's record for a path, if any.
pub fn lookup(store: &Store, path: &Path) -> Result<Option<(FileId, FileRecord)>, StoreError> {
    let Some(id) = store.get::<Paths>(&path_bytes(path))? else { return Ok(None) };
    Ok(store.get::<Files>(&id)?.map(|rec| (id, rec)))
}

fn error_path(err: &ignore::Error) -> Option<PathBuf> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => error_path(err),
        ignore::Error::Partial(errs) => errs.iter().find_map(error_path),
        _ => None,
    }
}

/// Splits a path at its last `/`: (directory, name); a root-level file's
/// directory is `/` itself. None for a path without a `/`.
pub fn split_last(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = path.iter().rposition(|&b| b == b'/')?;
    Some((if at == 0 { &path[..1] } else { &path[..at] }, &path[at + 1..]))
}

/// Whether `path` is `dir` or lies under it (by path components).
pub fn is_under(path: &[u8], dir: &[u8]) -> bool {
    let dir = dir.strip_suffix(b"/").unwrap_or(dir);
    path.starts_with(dir) && (path.len() == dir.len() || path[dir.len()] == b'/' || dir.is_empty())
}

/// Whether `path` is one of `dirs` or lies under one ([`is_under`]).
pub fn is_under_any(path: &[u8], dirs: &[Vec<u8>]) -> bool {
    dirs.iter().any(|d| is_under(path, d))
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_split_at_their_last_slash() {
        use super::split_last;
        assert_eq!(split_last(b"/a/b/c"), Some((&b"/a/b"[..], &b"c"[..])));
        assert_eq!(split_last(b"/c"), Some((&b"/"[..], &b"c"[..])));
        assert_eq!(split_last(b"c"), None);
    }

    #[test]
    fn closeness_counts_shared_components_from_both_ends() {
        assert_eq!(super::closeness(b"/a/x/tests/s/__init__.py", b"/b/tests/s/__init__.py").0, 3);
        assert_eq!(super::closeness(b"/a/report.txt", b"/b/report.txt"), (1, 1));
        assert_eq!(super::closeness(b"/a/report.txt", b"/a/other.txt"), (0, 2));
    }

    use super::*;

    /// A worktree's `.git` file names its repository, whose `commondir`
    /// names where `info/exclude` lies: read as the walk reads them, a
    /// regular file's first line, and a FIFO in either place is passed over
    /// rather than blocking the daemon for ever in its open.
    #[test]
    fn a_worktrees_exclude_file_is_found_and_fifos_are_passed_over() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("repo/.git/worktrees/w");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("commondir"), "../..\r\n").unwrap();
        let dot_git = tmp.path().join("w/.git");
        std::fs::create_dir_all(dot_git.parent().unwrap()).unwrap();
        std::fs::write(&dot_git, format!("gitdir: {}\nmore\n", real.display())).unwrap();
        assert_eq!(worktree_exclude(&dot_git), Some(real.join("../..").join("info/exclude")));
        let fifo = |p: &Path| {
            std::fs::remove_file(p).unwrap();
            assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
        };
        fifo(&real.join("commondir"));
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dot_git.clone();
        std::thread::spawn(move || tx.send(worktree_exclude(&d)).unwrap());
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(30)), Ok(None), "a FIFO commondir");
        fifo(&dot_git);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(worktree_exclude(&dot_git)).unwrap());
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(30)), Ok(None), "a FIFO .git");
    }

    /// The daemon's checks ([`DirRules`]) follow exactly the files the walk
    /// yields, on trees of random ignore files of every kind at every
    /// depth, `!` lines, directory patterns and nested repositories among
    /// them: `ignore`'s walk is the reference.
    #[test]
    fn the_daemons_ignore_rules_follow_what_the_walk_yields() {
        const LINES: &[&str] = &[
            "*.log",
            "!keep.log",
            "*.tmp",
            "!*.tmp",
            "build/",
            "!build/",
            "b/",
            "!b/",
            "/x.txt",
            "x.txt",
            "c",
            "!c",
            "f",
            "!f",
            "e/*.txt",
            "!e/x.txt",
            "**/build/z.tmp",
            "*",
            "!*/",
            "!*.txt",
            "a/b",
            "/build",
            "!/build/",
        ];
        const DIRS: &[&str] = &["", "a", "a/b", "a/b/c", "a/build", "d", "d/e", "build", "build/b"];
        const FILES: &[&str] = &["x.txt", "y.log", "keep.log", "z.tmp", "f"];
        const KINDS: &[&str] = &[".gitignore", ".ignore", ".simdignore", ".git/info/exclude"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut differed = Vec::new();
        for case in 0..60 {
            let t = tempfile::tempdir().unwrap();
            let root = t.path().canonicalize().unwrap();
            for d in DIRS {
                std::fs::create_dir_all(root.join(d)).unwrap();
                for f in FILES {
                    std::fs::write(root.join(d).join(f), "text").unwrap();
                }
            }
            for _ in 0..1 + next(6) {
                let (d, kind) = (DIRS[next(DIRS.len())], KINDS[next(KINDS.len())]);
                let file = root.join(d).join(kind);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                let body: String = (0..1 + next(4)).map(|_| format!("{}\n", LINES[next(LINES.len())])).collect();
                std::fs::write(&file, body).unwrap();
            }
            // The files a walk yields, sorted: with the ignore files read,
            // or every file there is.
            let files = |no_ignore| -> Vec<PathBuf> {
                let mut files: Vec<PathBuf> = ignoring_walker(&root, no_ignore)
                    .filter_entry(|e| e.file_name() != ".git")
                    .build()
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                    .map(|e| e.into_path())
                    .collect();
                files.sort();
                files
            };
            let walked = files(false);
            let mut rules = IgnoreFiles::default();
            let followed: Vec<PathBuf> =
                files(true).into_iter().filter(|p| rules.rules(p.parent().unwrap(), &root).walks(p, false)).collect();
            if walked != followed {
                let only = |a: &[PathBuf], b: &[PathBuf]| -> Vec<String> {
                    a.iter()
                        .filter(|p| !b.contains(p))
                        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
                        .collect()
                };
                differed.push(format!(
                    "case {case}: walked only {:?}, followed only {:?}",
                    only(&walked, &followed),
                    only(&followed, &walked)
                ));
            }
        }
        assert!(differed.is_empty(), "{differed:#?}");
    }

    #[test]
    fn clutter_is_told_by_its_name_and_documents_are_not_taken_for_it() {
        for name in [
            "~$plan.docx",
            "~$",
            "~WRL0001.tmp",
            "~DF3A1C.TMP",
            ".~lock.plan.odt#",
            "#plan.txt#",
            ".#plan.txt",
            ".plan.txt.swp",
            ".plan.txt.swo",
            "..bashrc.swp",
            ".nfs000000000123abcd00000001",
            ".fuse_hidden0000000a00000001",
            "._plan.docx",
            ".DS_Store",
            "Thumbs.db",
            "thumbs.db",
            "Desktop.ini",
            ".directory",
            "Icon\r",
            "big.iso.crdownload",
            "film.mkv.part",
            "setup.exe.partial",
            "db.sql.filepart",
            "plan.txt.kate-swp",
            "lu2948ax1c.tmp",
            ".goutputstream-7QX2K1",
        ] {
            assert!(is_clutter(name.as_bytes()), "{name:?} is clutter");
        }
        for name in [
            "plan.docx",
            "plan.txt~",
            "plan.bak",
            "notes.swp",
            ".swp",
            ".plan.swf.txt",
            "~notes.txt",
            "#tag",
            "a#b#",
            ".nfsrc",
            ".nfs0000000001",
            ".fuse_hidden",
            ".bashrc",
            "desktop.ini.txt",
            "my Thumbs.db",
            ".part",
            "chapter.part1",
            "report.partial.md",
            ".~lock.plan.odt",
            "lock.#",
            "Icon",
            "lu.tmp",
            "lunch.txt",
            "goutputstream-7QX2K1",
        ] {
            assert!(!is_clutter(name.as_bytes()), "{name:?} is no clutter");
        }
        // Names not in UTF-8 are looked at as bytes.
        assert!(is_clutter(b"~$caf\xe9.doc") && !is_clutter(b"caf\xe9.swp"));
    }

    #[test]
    fn a_root_dir_opens_only_what_lies_strictly_under_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("r");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), b"inside").unwrap();
        std::fs::create_dir_all(t.path().join("rx")).unwrap();
        std::fs::write(t.path().join("rx/g"), b"beside").unwrap();
        let dir = RootDir::new(&root).unwrap();
        assert_eq!(dir.below(&root.join("sub/f")), Some(OsStr::new("sub/f")));
        // Not the root itself, nor a sibling sharing its name's prefix.
        assert_eq!(dir.below(&root), None);
        assert_eq!(dir.below(&t.path().join("rx/g")), None);
        let flags = rustix::fs::OFlags::RDONLY;
        let read = |p: &Path| std::io::read_to_string(RootDir::open(Some(&dir), p, flags).unwrap()).unwrap();
        assert_eq!(read(&root.join("sub/f")), "inside");
        // A path outside is opened by its full path.
        assert_eq!(read(&t.path().join("rx/g")), "beside");
        // The file is found through the directory opened, whatever its
        // name is now.
        std::fs::rename(&root, t.path().join("moved")).unwrap();
        assert_eq!(read(&root.join("sub/f")), "inside");
        // Only a directory is held open.
        assert!(RootDir::new(&t.path().join("rx/g")).is_none());
        let slash = RootDir::new(Path::new("/")).unwrap();
        assert_eq!(slash.below(Path::new("/etc/hosts")), Some(OsStr::new("etc/hosts")));
    }

    /// A walk that meets files before the records are loaded leaves them
    /// pending with their stat, and comparing them afterwards sorts them as
    /// the walk would have: unchanged, changed (with the old record), new.
    #[test]
    fn files_met_before_the_records_are_compared_once_they_are_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir_all(root.join("d")).unwrap();
        for name in ["same.txt", "changed.txt", "d/new.txt"] {
            std::fs::write(root.join(name), name).unwrap();
        }
        let store = Store::open_build(&tmp.path().join("index"), None).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let loading = std::sync::OnceLock::new();
        let mut out =
            walk(&store, std::slice::from_ref(&root), &WalkOptions::default(), Records::Loading(&loading), &tx)
                .unwrap();
        drop(tx);
        assert_eq!(rx.iter().count(), 0, "nothing is decided before the records are there");
        assert_eq!(out.pending.len(), 3);

        let rec = |name: &str, bump: u64| {
            let meta = std::fs::symlink_metadata(root.join(name)).unwrap();
            let st = Stat::of(&meta);
            FileRecord {
                path: Vec::new(),
                size: st.size + bump,
                mtime: st.mtime,
                inode: st.inode,
                content: crate::fingerprint::ContentHash([0; 16]),
                dev: st.dev,
            }
        };
        let mut map = HashMap::default();
        map.insert(path_bytes(&root.join("same.txt")), (FileId(1), rec("same.txt", 0)));
        map.insert(path_bytes(&root.join("changed.txt")), (FileId(2), rec("changed.txt", 1)));
        let known = Known::Loaded(map);
        let pending = out.pending.clone();
        let candidates = resolve_pending(&store, &known, &WalkOptions::default(), &mut out).unwrap();
        assert!(out.pending.is_empty());
        assert_eq!(out.unchanged, [FileId(1)]);
        assert_eq!(out.unchanged_bytes, "same.txt".len() as u64);
        let sorted = |candidates: Vec<Candidate>| {
            let mut found: Vec<(PathBuf, Option<FileId>)> =
                candidates.into_iter().map(|c| (c.path, c.old.map(|(id, _)| id))).collect();
            found.sort();
            found
        };
        let want = [(root.join("changed.txt"), Some(FileId(2))), (root.join("d/new.txt"), None)];
        assert_eq!(sorted(candidates), want);

        // A walker thread that meets a file once the records are there
        // compares those it met before in the same way, and sends the
        // candidates at once (its first batch is not held back).
        let shared = Mutex::new(WalkOutcome::default());
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut local = Local {
            out: WalkOutcome::default(),
            shared: &shared,
            batch: Vec::new(),
            tx,
            dir: None,
            sent: false,
            ignores: Default::default(),
        };
        local.out.pending = pending;
        assert!(local.resolve_pending(&store, &known, &WalkOptions::default(), &[]));
        assert!(local.out.pending.is_empty());
        let mut sent = rx.try_recv().expect("the first candidate is sent at once");
        assert_eq!(sent.len(), 1);
        assert!(rx.try_recv().is_err(), "the next ones wait for a full batch");
        drop(local);
        sent.extend(rx.try_iter().flatten());
        assert_eq!(sorted(sent), want);
        let shared = shared.into_inner().unwrap();
        assert_eq!((shared.unchanged, shared.unchanged_bytes), (vec![FileId(1)], "same.txt".len() as u64));
    }

    #[test]
    fn a_kept_map_follows_sets_by_path_then_by_path_hash_then_gives_way_to_lookups() {
        let rec = |n: u64| FileRecord {
            path: b"/ignored".to_vec(),
            size: n,
            mtime: 0,
            inode: n,
            content: crate::fingerprint::ContentHash([0; 16]),
            dev: 1,
        };
        let mut k = Known::Loaded(HashMap::default());
        k.set(b"/r/a", Some((FileId(1), &rec(1))));
        k.set(b"/r/b", Some((FileId(2), &rec(2))));
        k.set(b"/r/a", None);
        let Known::Loaded(map) = &k else { panic!("still a map") };
        assert_eq!(map.len(), 1);
        assert_eq!(map[&b"/r/b".to_vec()].1.size, 2);
        // A walk's "nothing known" is never turned into a map.
        let mut nothing = Known::Nothing;
        nothing.set(b"/r/a", Some((FileId(1), &rec(1))));
        assert!(matches!(nothing, Known::Nothing));
        for n in 0..=Known::LOAD_MAX {
            k.set(format!("/r/{n}").as_bytes(), Some((FileId(n), &rec(n))));
        }
        // Past its bound the map keeps its records by path hash, and answers
        // as before.
        let Known::Hashed(hashed) = &k else { panic!("hashed past the bound") };
        assert_eq!(hashed.map.len() as u64, Known::LOAD_MAX + 2);
        for n in [0, 7, Known::LOAD_MAX] {
            let path = format!("/r/{n}");
            let (id, got) = hashed.get(path.as_bytes()).unwrap();
            assert_eq!((id, got), (FileId(n), FileRecord { path: path.into_bytes(), ..rec(n) }));
        }
        assert_eq!(hashed.get(b"/r/b").map(|(id, r)| (id, r.size)), Some((FileId(2), 2)));
        k.set(b"/r/b", None);
        k.set(b"/r/7", Some((FileId(70), &rec(70))));
        let Known::Hashed(hashed) = &k else { panic!("still hashed") };
        assert!(hashed.get(b"/r/b").is_none());
        assert_eq!(hashed.get(b"/r/7").map(|(id, r)| (id, r.size)), Some((FileId(70), 70)));
        assert!(hashed.get(b"/r/a").is_none());
        for n in Known::LOAD_MAX..=Known::HASHED_MAX {
            k.set(format!("/s/{n}").as_bytes(), Some((FileId(n), &rec(n))));
        }
        assert!(matches!(k, Known::Lookups));
    }

    /// Stats sorted by path hash answer for every hash they hold, whatever
    /// its top bits, and say which hashes two paths share.
    #[test]
    fn stats_by_path_find_every_hash_and_tell_shared_ones() {
        let brief = |hash: u64, id: u64| StatBrief { hash, id: FileId(id), size: id, mtime: 0, inode: id, dev: 1 };
        // A spread of hashes (odd multiples of a large odd constant), with
        // the smallest and largest, and one hash given to two paths.
        let mut hashes: Vec<u64> = (0..5_000u64).map(|i| (2 * i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        hashes.extend([0, u64::MAX, 1 << 63]);
        let shared = hashes[17];
        let mut briefs: Vec<StatBrief> = hashes.iter().enumerate().map(|(i, &h)| brief(h, i as u64)).collect();
        briefs.push(brief(shared, 99_999));
        let stats = StatsByPath::from_briefs(briefs, foldhash::quality::RandomState::default());
        for (i, &h) in hashes.iter().enumerate() {
            match stats.find_hash(h) {
                Brief::Known(b) => assert_eq!((b.hash, b.id), (h, FileId(i as u64)), "{h:#x}"),
                Brief::Shared => assert_eq!(h, shared),
                Brief::Unknown => panic!("{h:#x} not found"),
            }
        }
        assert!(matches!(stats.find_hash(shared), Brief::Shared));
        for absent in [2, u64::MAX - 1, (1 << 63) + 1] {
            assert!(matches!(stats.find_hash(absent), Brief::Unknown), "{absent:#x}");
        }
        // A handful of briefs, and none.
        let few = StatsByPath::from_briefs(vec![brief(5, 1), brief(u64::MAX, 2)], Default::default());
        assert!(matches!(few.find_hash(5), Brief::Known(_)) && matches!(few.find_hash(6), Brief::Unknown));
        assert!(matches!(few.find_hash(u64::MAX), Brief::Known(_)));
        let none = StatsByPath::from_briefs(Vec::new(), Default::default());
        assert!(matches!(none.find_hash(5), Brief::Unknown));
    }

    #[test]
    fn under() {
        assert!(is_under(b"/a/b/c", b"/a/b"));
        assert!(is_under(b"/a/b/c", b"/a/b/"));
        assert!(is_under(b"/a/b", b"/a/b"));
        assert!(!is_under(b"/a/bc", b"/a/b"));
        assert!(is_under(b"/x", b"/"));
    }
}
