//! The index on disk: RocksDB with one column family per map. This is the
//! only module that imports `rocksdb`; everything else sees typed keys and
//! values (see [`schema`]) and never raw key bytes.
//!
//! An index directory holds `db/` (RocksDB) and `simd.lock`, a file locked by
//! the one process allowed to write, holding its pid so that a second writer
//! can be told who holds the index; and `walked`, when each root was last
//! walked whole ([`record_walk`]).

pub mod schema;
mod upgrade;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Options, ReadOptions, WriteBatch,
    WriteOptions, DB,
};

use crate::chunker::ChunkParams;
use crate::fingerprint::{ChunkKey, ContentHash, PriorRecord};
pub use schema::*;

/// What went wrong with the index.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{}: index in use by pid {pid}; if that is `simd watch`, it keeps the index current already (`simd rescan` asks it to rescan now, `simd index ROOT` without options has it add a root, and `simd template` reaches it too): to run this command, stop it (kill -TERM {pid}), then start it again",
        crate::show_path(.dir)
    )]
    InUse { dir: PathBuf, pid: String },
    #[error("{}: not a simd index ({reason}); give --db an empty or new directory", crate::show_path(.dir))]
    NotAnIndex { dir: PathBuf, reason: String },
    #[error("{}: no index here yet (run `simd index ROOT` first)", crate::show_path(.dir))]
    Missing { dir: PathBuf },
    #[error(
        "{}: damaged index: db/CURRENT is missing, so its database cannot be opened; it is a cache of your files: \
         move the directory aside and run `simd index ROOT...` to build it again",
        crate::show_path(.dir)
    )]
    Damaged { dir: PathBuf },
    #[error("{}: index schema version {found}, this simd reads version {expected}; rebuild it with `simd index` into a new --db", crate::show_path(.dir))]
    SchemaMismatch { dir: PathBuf, found: u32, expected: u32 },
    #[error("{}: index schema version {found}, this simd reads version {expected} and upgrades it in place when it writes: run `simd index` (or start `simd watch`) once, then ask again (older simd versions cannot open the index after that)", crate::show_path(.dir))]
    NeedsUpgrade { dir: PathBuf, found: u32, expected: u32 },
    #[error(
        "{}: the index has handed out all {} content ids; rebuild it with `simd index` into a new --db",
        crate::show_path(.dir),
        ContentId::MAX
    )]
    ContentIdsExhausted { dir: PathBuf },
    #[error("{}: index was made with chunk parameters {found}, asked for {requested}; use the index's own (omit --avg-chunk) or another --db", crate::show_path(.dir))]
    ParamsMismatch { dir: PathBuf, found: ChunkParams, requested: ChunkParams },
    #[error("{}: corrupt index: {cf} key {key}: {reason}", crate::show_path(.dir))]
    Corrupt { dir: PathBuf, cf: &'static str, key: String, reason: String },
    #[error("{}: {source}{hint}", crate::show_path(.dir), hint = rocks_hint(.source))]
    Rocks { dir: PathBuf, source: rocksdb::Error },
    #[error("{}: {source}", crate::show_path(.path))]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: the thread writing to the index stopped before it wrote what it was given", crate::show_path(.dir))]
    WriterGone { dir: PathBuf },
}

impl StoreError {
    /// The index's own bytes are damaged (as opposed to the machine or
    /// the caller failing): `simd check` reports it as a broken index.
    pub fn is_corruption(&self) -> bool {
        match self {
            StoreError::Corrupt { .. } => true,
            StoreError::Rocks { source, .. } => source.kind() == rocksdb::ErrorKind::Corruption,
            _ => false,
        }
    }

    /// The index's file system is full: nothing is wrong with the index,
    /// and the same write succeeds once there is room.
    pub fn is_no_space(&self) -> bool {
        match self {
            StoreError::Rocks { source, .. } => is_no_space(source),
            StoreError::Io { source, .. } => {
                source.raw_os_error() == Some(libc::ENOSPC) || source.kind() == std::io::ErrorKind::StorageFull
            }
            _ => false,
        }
    }
}

/// RocksDB says ENOSPC only in its message (its status's `kNoSpace`
/// subcode is not exposed): "IO error: No space left on device: While
/// appending to file: ...", from the C library's `strerror`, which a Rust
/// program leaves in the C locale.
fn is_no_space(e: &rocksdb::Error) -> bool {
    e.kind() == rocksdb::ErrorKind::IOError && e.to_string().contains("No space left on device")
}

/// What to do about a RocksDB error, where there is something to do: a
/// corrupt index (a disk fault, a file removed by hand) cannot be repaired
/// in place, but it is a cache of the files and can be built again.
fn rocks_hint(e: &rocksdb::Error) -> &'static str {
    if is_no_space(e) {
        return "\n  the index's file system is full: make room there (or move the index elsewhere and give --db) \
                and run the command again; the index is as last committed, and the next run goes on from there";
    }
    match e.kind() {
        rocksdb::ErrorKind::Corruption => {
            "\n  the index cannot be read as it is. It is a cache of your files: move it aside \
             (or delete it) and run `simd index ROOT...` to build it again (what only it held, \
             the lost-and-found history and template marks, is not rebuilt)"
        }
        _ => "",
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How the index is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The one writer: takes the lock, creates the index if needed.
    Write,
    /// A reader: no lock, a point-in-time view; works while a writer runs.
    Read,
}

/// An open index.
pub struct Store {
    db: DB,
    dir: PathBuf,
    format: Format,
    // Held for the life of a writer: the OS lock is what keeps a second
    // writer out, and it goes away with the process, even on SIGKILL.
    _lock: Option<File>,
    bulk: bool,
    /// The index directory and the database directory in it as opened
    /// ([`Store::in_place`]).
    place: Option<Place>,
    /// Set once the directory is found gone: RocksDB's complaints about
    /// its missing files go to debug ([`rocksdb_logger`]).
    hushed: Arc<AtomicBool>,
    /// The bytes of the last batch written, which the next one reserves:
    /// a daemon's group grew its batch from nothing to a few MB, copying
    /// it at each doubling (~2 % of the daemon's CPU in a burst of changed
    /// files, with the page faults of each larger buffer).
    batch_bytes: AtomicUsize,
    /// A writer for one run ([`Store::open_writer`]), which lets RocksDB's
    /// compactions finish before it closes ([`Store::settle_compactions`]).
    settles: bool,
}

/// At most this much is reserved for a batch ([`Store::batch`]).
const BATCH_RESERVE_MAX: usize = 16 << 20;

/// The (device, inode) of an index directory and of its database directory.
type Place = [(u64, u64); 2];

/// The [`Place`] of the index directory `dir`.
fn place_of(dir: &Path) -> Option<Place> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| fs::metadata(p).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()));
    Some([id(dir)?, id(&dir.join(DB_DIR))?])
}

/// A table file of at most this many bytes is small ([`Store::tidy`]):
/// the flush after a run or a daemon batch that changed a few files
/// writes a few KB per table, where RocksDB's own files reach 64 MB.
const SMALL_TABLE: usize = 1 << 20;
/// How many small table files the last level of a column family may hold
/// before [`Store::tidy`] merges them.
const SMALL_TABLES_KEPT: usize = 4;

/// The manifest's size from which a writer starts it again (see `open`).
const MAX_MANIFEST: usize = 256 << 10;

/// The most WAL files, and bytes in them, that a run leaves unflushed
/// ([`Store::flush_unless_small`]): every reader's open replays them. Six
/// runs' WAL of ~42 KB each (a line appended to a 1.9 MB zip) cost `simd
/// lost` and `simd status` no time we could measure (`tools/ab.py 30`:
/// 10 against 12 ms, 129 against 131 ms).
const WAL_KEPT_FILES: usize = 8;
const WAL_KEPT_BYTES: u64 = 256 << 10;

/// The write-ahead log files in an index ([`Store::wal_files`]): how many,
/// their bytes, and whether every one was listed and measured.
struct WalFiles {
    files: usize,
    bytes: u64,
    measured: bool,
}

const LOCK_FILE: &str = "simd.lock";
const DB_DIR: &str = "db";
/// Where a new database is built before it is renamed to `DB_DIR`.
const CREATING_DIR: &str = "db.creating";

/// Memory bounds: RocksDB's defaults (64 MB memtables per CF, 8 CFs) would
/// grow with the number of CFs; these keep the whole index near 50 MB.
const BLOCK_CACHE: usize = 16 << 20;
const WRITE_BUFFER_TOTAL: usize = 32 << 20;
const WRITE_BUFFER_PER_CF: usize = 8 << 20;

/// [`WRITE_BUFFER_PER_CF`], unless the environment sets `SIMD_TEST_MEMTABLE_KB`:
/// the crash tests make memtables tiny so that a run of a few thousand files
/// flushes many times, and a kill lands between flushes (undocumented for
/// users; RocksDB raises anything under 64 KB to 64 KB).
fn write_buffer_per_cf() -> usize {
    crate::test_setting("SIMD_TEST_MEMTABLE_KB").map_or(WRITE_BUFFER_PER_CF, |kb| (kb as usize) << 10)
}

/// When each root was last walked whole (a run that found every file it
/// holds there, or recorded those it did not): `root-hex time-ns` lines in
/// a small file beside the database, replaced whole. Not in RocksDB: a run
/// that changes nothing opens no writer, and it is those runs (a nightly
/// `simd index`) that say a file was still there. A file a later run finds
/// gone was last seen no earlier than this; `simd lost` says so.
const WALKED_FILE: &str = "walked";

/// The roots' last whole walks ([`WALKED_FILE`]); none when never recorded.
pub fn walked(dir: &Path) -> Vec<(Vec<u8>, TimeNs)> {
    let Ok(text) = fs::read_to_string(dir.join(WALKED_FILE)) else { return Vec::new() };
    text.lines()
        .filter_map(|l| {
            let (root, t) = l.split_once(' ')?;
            let root = (0..root.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(root.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            Some((root, t.parse().ok()?))
        })
        .collect()
}

/// When the root holding `path` was last walked whole, from [`walked`].
pub fn walked_at(walked: &[(Vec<u8>, TimeNs)], path: &[u8]) -> Option<TimeNs> {
    walked
        .iter()
        .filter(|(root, _)| path.strip_prefix(&root[..]).is_some_and(|rest| rest.first() == Some(&b'/')))
        .max_by_key(|(root, _)| root.len())
        .map(|&(_, t)| t)
}

/// Records that `roots` were walked whole by a run that started at `at`.
/// Best effort: what it costs when it fails is a looser "last seen".
pub fn record_walk(dir: &Path, roots: &[Vec<u8>], at: TimeNs) {
    let mut all = walked(dir);
    all.retain(|(r, _)| !roots.contains(r));
    all.extend(roots.iter().map(|r| (r.clone(), at)));
    all.sort();
    let text: String = all.iter().map(|(r, t)| format!("{} {t}\n", hex(r))).collect();
    let tmp = dir.join(format!("{WALKED_FILE}.{}", std::process::id()));
    if let Err(e) = fs::write(&tmp, text).and_then(|()| fs::rename(&tmp, dir.join(WALKED_FILE))) {
        let _ = fs::remove_file(&tmp);
        tracing::debug!("{}: {e}", crate::show_path(dir.join(WALKED_FILE)));
    }
}

/// Whether `db_dir` holds a RocksDB manifest: a database, whether or not
/// its CURRENT file is there.
fn has_manifest(db_dir: &Path) -> bool {
    fs::read_dir(db_dir)
        .is_ok_and(|entries| entries.flatten().any(|e| e.file_name().as_encoded_bytes().starts_with(b"MANIFEST-")))
}

/// Whether `dir` holds an index (a reader's open would find one).
pub fn index_exists(dir: &Path) -> bool {
    dir.join(DB_DIR).join("CURRENT").exists()
}

impl Store {
    /// Opens the index at `dir`. A writer creates it when `dir` is missing or
    /// empty, with `params` (default: ~1 KB chunks); an existing index must
    /// have the same parameters when `params` is given.
    pub fn open(dir: &Path, access: Access, params: Option<ChunkParams>) -> Result<Store> {
        Store::open_with(dir, access, params, None, false, false)
    }

    /// Opens the index at `dir` for a `simd index` run: as a writer, and an
    /// index this open creates is loaded in bulk ([`Store::is_bulk`]).
    pub fn open_build(dir: &Path, params: Option<ChunkParams>) -> Result<Store> {
        Store::open_with(dir, Access::Write, params, None, true, false)
    }

    /// Opens the index at `dir` for writing under a lock already taken
    /// with [`lock_writer`] (by a caller that read the index first and must
    /// know nobody wrote to it in between).
    pub fn open_writer(dir: &Path, lock: WriterLock, params: Option<ChunkParams>) -> Result<Store> {
        Store::open_with(dir, Access::Write, params, Some(lock), false, false)
    }

    /// [`Store::open_writer`] for the index `reader` has open, under a lock
    /// taken before `reader` opened. A reader of this schema version opened
    /// every column family this version has, and nothing could drop one
    /// since: the writer skips looking them up first (reading the
    /// manifest once more, ~1 ms of a run that changed one file).
    pub fn open_writer_beside(reader: &Store, lock: WriterLock) -> Result<Store> {
        let cfs_known = reader.format.schema_version == SCHEMA_VERSION;
        Store::open_with(&reader.dir, Access::Write, Some(reader.format.params), Some(lock), false, cfs_known)
    }

    fn open_with(
        dir: &Path,
        access: Access,
        params: Option<ChunkParams>,
        held: Option<WriterLock>,
        build: bool,
        cfs_known: bool,
    ) -> Result<Store> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        // A file where the index should be is said so, to readers too (they
        // would say "no index here yet", and the writer then fails on it).
        if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
            return Err(StoreError::NotAnIndex { dir: dir.to_path_buf(), reason: "it is not a directory".into() });
        }
        let db_dir = dir.join(DB_DIR);
        let exists = db_dir.join("CURRENT").exists();
        let bulk = build && !exists;
        if !exists {
            // A database that lost its CURRENT file (RocksDB's pointer to
            // its manifest) is an index damaged, not one not made yet.
            if has_manifest(&db_dir) {
                return Err(StoreError::Damaged { dir: dir.to_path_buf() });
            }
            if access == Access::Read {
                return Err(StoreError::Missing { dir: dir.to_path_buf() });
            }
            // Never create an index inside a directory that holds something
            // else: what an interrupted creation leaves (a lock file holding
            // a pid, `db.creating`) is all it may hold. A `db` without a
            // database, or a `simd.lock` of other text, is the user's.
            if let Ok(entries) = fs::read_dir(dir) {
                let foreign = entries.flatten().any(|e| {
                    let n = e.file_name();
                    let pid_file = || {
                        e.file_type().is_ok_and(|t| t.is_file())
                            && fs::read(e.path()).is_ok_and(|b| b.len() <= 20 && b.iter().all(u8::is_ascii_digit))
                    };
                    !(n == CREATING_DIR || (n == LOCK_FILE && pid_file()))
                });
                if foreign {
                    return Err(StoreError::NotAnIndex {
                        dir: dir.to_path_buf(),
                        reason: "the directory is not empty and holds no index".into(),
                    });
                }
            }
            // Readable by its owner only: the index names every file of
            // the roots, its chunk hashes confirm a guessed content, and
            // other users may be kept out of some of those directories.
            // (A directory the user made is left as it is.)
            std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700)
                .create(dir)
                .map_err(io(dir))?;
        }
        let settles = held.is_some();
        let lock = match (access, held) {
            (Access::Write, Some(held)) => Some(held.file),
            (Access::Write, None) => Some(take_lock(dir)?),
            (Access::Read, _) => None,
        };
        if !exists {
            // Under the lock: build the database beside its final place and
            // rename it in only once it holds simd's format record, so a
            // crash during creation never leaves a database without one.
            create(dir, params.unwrap_or_default(), bulk)?;
        }

        // An index of another schema version may lack some of this
        // version's column families, and RocksDB refuses to open it with
        // them: read its format record first, so the user hears which
        // versions differ rather than a RocksDB error. A writer upgrading
        // an older index creates them, so it checks before opening; a
        // reader only when its open fails (listing the column families
        // reads the manifest once more, a fifth of a no-change re-index
        // of a small tree).
        let check_cfs = || -> Result<()> {
            if let Ok(existing) = DB::list_cf(&Options::default(), &db_dir) {
                if ALL_CFS.iter().any(|n| !existing.iter().any(|e| e == n)) {
                    match older_format(dir, &db_dir, &existing) {
                        Ok(v) if access == Access::Write && UPGRADABLE_VERSIONS.contains(&v) => {}
                        Ok(found) => {
                            return Err(StoreError::NeedsUpgrade {
                                dir: dir.to_path_buf(),
                                found,
                                expected: SCHEMA_VERSION,
                            })
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(())
        };
        if exists && access == Access::Write && !cfs_known {
            check_cfs()?;
        }

        let cache = block_cache();
        let place = place_of(dir);
        let hushed = Arc::new(AtomicBool::new(false));
        // A run that changed little ends with its WAL synced, not flushed
        // ([`Store::flush_unless_small`]): the next writer keeps what it
        // recovers from the WAL in its memtables rather than flushing it
        // as it opens, which would cost that run what the last one saved.
        // (The crate has no setter for it: set from RocksDB's options
        // string, on default options, before any other.)
        let mut opts = Options::default()
            .get_options_from_string("avoid_flush_during_recovery=true")
            .map_err(|source| StoreError::Rocks { dir: dir.to_path_buf(), source })?;
        opts.create_if_missing(false);
        opts.create_missing_column_families(access == Access::Write);
        opts.set_db_write_buffer_size(WRITE_BUFFER_TOTAL);
        // Two flush threads, one compaction thread: a run ends by flushing
        // every column family, and the postings' two memtables are most of
        // that work; side by side they take half the time (`flush`).
        // (RocksDB still honours these; the crate marks them deprecated in
        // favour of `max_background_jobs`, which gives a quarter of the jobs
        // to flushes: two flush threads would come with six compactions.)
        #[allow(deprecated)]
        {
            opts.set_max_background_flushes(2);
            opts.set_max_background_compactions(1);
        }
        let opening = OpenLog::default();
        opts.set_info_logger(rocksdb_logger(Some((dir.to_path_buf(), place)), hushed.clone(), opening.clone()));
        // A bulk load writes no WAL, so the column families must reach disk
        // together: a flush, whether asked for or made because a memtable is
        // full, writes all of them at one sequence number.
        opts.set_atomic_flush(bulk);
        opts.set_max_total_wal_size(64 << 20);
        // A writer keeps the write-ahead log its flushes retire, in
        // `db/archive/`: a report reads there which file records changed
        // since its cached analysis, and names only those again
        // ([`Store::keys_written_since`]). Without it, a flush after a
        // few idle seconds left a report nothing to read, and it read
        // every file record again (66.5k records: ~65 ms of CPU).
        // RocksDB deletes what is over two minutes old, and the oldest
        // past 16 MB, when the writer flushes or opens, at most every
        // minute (half the two). A burst of appends to 79 MB of the
        // generated corpus writes ~6–10 MB of log; kept ten minutes (at
        // most 64 MB, the first setting), a few of them left 72 MB in
        // the archive, more than the index. A report that comes later
        // reads every file record, as it did before.
        if access == Access::Write {
            opts.set_wal_ttl_seconds(120);
            opts.set_wal_size_limit_mb(16);
        }
        // Every flush and compaction appends to the manifest (~1–1.5 KB a
        // flush), which RocksDB starts again (from the index's current
        // shape) only past 1 GB by default, and every reader reads it whole
        // as it opens: a daemon that flushed after each of ~1,000 edits
        // grew it to 1.5 MB, and `simd lost` took 30 ms there against 7 on
        // a fresh one. From this size on it is started again, once it is
        // also six times what starting again would write (RocksDB's
        // `max_manifest_space_amp_pct`, so a large index's does not start
        // again at every flush).
        opts.set_max_manifest_file_size(MAX_MANIFEST);
        opts.set_max_open_files(256);
        // Opening loads every table file's index; RocksDB does it on 16
        // threads per column family by default, which for a query process
        // (most of which live ~20 ms) is a hundred thread spawns for a
        // dozen small files. Stats need no update on open either.
        opts.set_max_file_opening_threads(1);
        opts.set_skip_stats_update_on_db_open(true);
        // RocksDB dumps its statistics to the info log as every open
        // starts (then every ten minutes), on its timer thread: ~0.5 ms of
        // CPU an open formatting text that the logger drops (it passes on
        // warnings only). Nothing reads RocksDB's statistics here.
        opts.set_stats_dump_period_sec(0);
        opts.set_stats_persist_period_sec(0);
        // One writer thread: the concurrent memtable path (CAS inserts) and
        // spinning for a write group only cost CPU here.
        opts.set_allow_concurrent_memtable_write(false);
        opts.set_enable_write_thread_adaptive_yield(false);
        if access == Access::Read {
            // A reader opens every table file as it opens the database and
            // keeps it open: the writer's compactions then delete files it
            // reads without taking them from under it (an unlinked file
            // stays readable through an open descriptor).
            opts.set_max_open_files(-1);
        }
        let base = Options::default();
        let cfs = || {
            ALL_CFS.iter().map(|&name| ColumnFamilyDescriptor::new(name, cf_options(&base, name, &cache, access, bulk)))
        };
        let rocks = |source| StoreError::Rocks { dir: dir.to_path_buf(), source };
        let db = match access {
            Access::Write => DB::open_cf_descriptors(&opts, &db_dir, cfs()).map_err(rocks)?,
            Access::Read => {
                open_reader(&db_dir, &opening, || DB::open_cf_descriptors_read_only(&opts, &db_dir, cfs(), false))
                    .map_err(|e| {
                        if e.as_ref().contains("Column family not found") || e.as_ref().contains("Invalid argument") {
                            match check_cfs() {
                                Err(older) => older,
                                Ok(()) => StoreError::NotAnIndex { dir: dir.to_path_buf(), reason: e.into_string() },
                            }
                        } else {
                            rocks(e)
                        }
                    })?
            }
        };

        let mut store = Store {
            db,
            dir: dir.to_path_buf(),
            format: Format { schema_version: SCHEMA_VERSION, params: params.unwrap_or_default(), created: 0 },
            _lock: lock,
            bulk,
            place,
            hushed,
            batch_bytes: AtomicUsize::new(0),
            settles,
        };
        match store.get::<Meta>(&MetaKey::Format)? {
            Some(MetaValue::Format(mut found)) => {
                if !reads_version(found.schema_version) {
                    return Err(StoreError::SchemaMismatch {
                        dir: dir.to_path_buf(),
                        found: found.schema_version,
                        expected: SCHEMA_VERSION,
                    });
                }
                if let Some(requested) = params.filter(|p| *p != found.params) {
                    return Err(StoreError::ParamsMismatch { dir: dir.to_path_buf(), found: found.params, requested });
                }
                if found.schema_version != SCHEMA_VERSION
                    && !(access == Access::Read && READ_AS_IS.contains(&found.schema_version))
                {
                    if access == Access::Read {
                        return Err(StoreError::NeedsUpgrade {
                            dir: dir.to_path_buf(),
                            found: found.schema_version,
                            expected: SCHEMA_VERSION,
                        });
                    }
                    let from = found.schema_version;
                    // Versions 5 and 6 differ in their postings' keys, and in
                    // how sketches are written (their records stay readable);
                    // 7 only in its template marks' keys (and its chunk
                    // lists, which stay readable).
                    let mut done = if from < 5 {
                        let upgraded = store.upgrade_to_content_ids()?;
                        format!("{} contents numbered, {} postings rewritten", upgraded.contents, upgraded.postings)
                    } else if from < 7 {
                        let rekeyed = store.upgrade_to_chunk_keys()?;
                        format!("{rekeyed} postings re-keyed; contents stored from now on keep larger sketches")
                    } else if from < 8 {
                        "contents stored from now on keep shorter chunk lists".to_string()
                    } else {
                        "file records gain their device as scans find them, which tells hard links from copies"
                            .to_string()
                    };
                    let marks = store.upgrade_template_keys()?;
                    if marks > 0 {
                        done.push_str(&format!("; {marks} template marks re-keyed"));
                    }
                    found.schema_version = SCHEMA_VERSION;
                    let mut b = store.batch();
                    b.put::<Meta>(&MetaKey::Format, &MetaValue::Format(found));
                    store.write(b)?;
                    store.sync()?;
                    // Said once, where a user sees it: an older simd can no
                    // longer open the index after this.
                    tracing::warn!(
                        "{}: index upgraded from schema version {from} to {SCHEMA_VERSION} ({done}); older simd \
                         versions cannot open it any more",
                        crate::show_path(dir),
                    );
                }
                store.format = found;
            }
            Some(other) => {
                return Err(store.corrupt::<Meta>(&MetaKey::Format, format!("holds {other:?}")));
            }
            None => {
                return Err(StoreError::NotAnIndex {
                    dir: dir.to_path_buf(),
                    reason: "RocksDB database without simd's format record".into(),
                })
            }
        }
        if !bulk && store.postings_pending()? {
            match access {
                Access::Write => {
                    let posted = store.rebuild_postings()?;
                    tracing::warn!(
                        "{}: the index's first run was stopped before it wrote its postings: rebuilt them for \
                         {posted} contents",
                        crate::show_path(dir)
                    );
                }
                // Killed: a writer's open repairs it, and the lock is free
                // for one (a bulk load still running holds it: its reader
                // sees it as it was at its last flush, postings still to come).
                Access::Read => {
                    if let Ok(lock) = lock_writer(dir) {
                        drop(store);
                        drop(Store::open_with(dir, Access::Write, params, Some(lock), false, false)?);
                        return Store::open_with(dir, Access::Read, params, None, false, false);
                    }
                }
            }
        }
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the index directory and the database directory in it are
    /// still the ones this store opened. Deleted (or replaced) under a
    /// long-lived writer such as the daemon, they take its writes with them:
    /// RocksDB goes on appending to its unlinked log until it next makes a
    /// file, and fails only then.
    pub fn in_place(&self) -> bool {
        let here = self.place.is_some() && place_of(&self.dir) == self.place;
        if !here {
            // The caller says so: RocksDB's errors as it fails to update
            // or close the files that went with it go to debug.
            self.hushed.store(true, Ordering::Relaxed);
        }
        here
    }

    pub fn format(&self) -> &Format {
        &self.format
    }

    pub fn params(&self) -> &ChunkParams {
        &self.format.params
    }

    /// Whether this writer loads a new index in bulk: it was opened by
    /// [`Store::open_build`] and created the index. Its writes skip the WAL
    /// (~3 % of a first index), and its flushes are atomic across column
    /// families, so a crash leaves the index as of its last flush, complete
    /// and consistent, and the next run reads the rest again. The column
    /// families it writes but never reads during the run ([`BULK_VECTOR_CFS`])
    /// take a vector memtable, which appends and sorts once at the flush
    /// (a skiplist's insert was ~3 % more); a point lookup in one would copy
    /// and sort the whole memtable, so a bulk writer must not make any
    /// (the first index's writer makes none: `ingest::Writer::fresh`).
    pub fn is_bulk(&self) -> bool {
        self.bulk
    }

    fn cf(&self, name: &'static str) -> &rocksdb::ColumnFamily {
        // Every CF in ALL_CFS is opened (or created) in `open`.
        self.db.cf_handle(name).expect("column family opened in Store::open")
    }

    fn rocks(&self, source: rocksdb::Error) -> StoreError {
        StoreError::Rocks { dir: self.dir.clone(), source }
    }

    pub(crate) fn corrupt<T: Table>(&self, key: &T::Key, reason: impl ToString) -> StoreError {
        StoreError::Corrupt {
            dir: self.dir.clone(),
            cf: T::NAME,
            key: hex(&T::encode_key(key)),
            reason: reason.to_string(),
        }
    }

    fn corrupt_raw<T: Table>(&self, key: &[u8], reason: impl ToString) -> StoreError {
        StoreError::Corrupt { dir: self.dir.clone(), cf: T::NAME, key: hex(key), reason: reason.to_string() }
    }

    /// Reads one value.
    pub fn get<T: Table>(&self, key: &T::Key) -> Result<Option<T::Value>> {
        self.get_as::<T, _>(key, T::decode_value)
    }

    /// Reads a content's record as far as taking its postings out needs
    /// ([`ContentPostings`]).
    pub fn get_postings(&self, content: &ContentHash) -> Result<Option<ContentPostings>> {
        self.get_as::<ContentChunks, _>(content, ContentChunks::decode_postings)
    }

    /// Every content's record as far as its postings, in key order
    /// ([`Store::get_postings`] of each, in one pass).
    pub fn scan_postings(&self) -> TableIter<'_, ContentChunks, ContentPostings> {
        let TableIter { store, inner, _t, .. } = self.scan::<ContentChunks>();
        TableIter { store, inner, decode: ContentChunks::decode_postings, _t }
    }

    /// A content's record as far as its sketch's head
    /// ([`ContentChunks::decode_sketch_head`]).
    pub fn get_sketch_head(&self, content: &ContentHash) -> Result<Option<SketchHead>> {
        self.get_as::<ContentChunks, _>(content, ContentChunks::decode_sketch_head)
    }

    /// The records of contents `from..before` (the first, to the last,
    /// where None) as far as their sketches' heads, in key order, not
    /// kept in the block cache ([`Store::scan_range`]).
    pub fn scan_sketch_heads(
        &self,
        from: Option<&ContentHash>,
        before: Option<&ContentHash>,
    ) -> TableIter<'_, ContentChunks, SketchHead> {
        let TableIter { store, inner, _t, .. } = self.scan_range::<ContentChunks>(from, before);
        TableIter { store, inner, decode: ContentChunks::decode_sketch_head, _t }
    }

    /// [`Store::get_postings`], and the value as stored.
    pub fn get_postings_stored(&self, content: &ContentHash) -> Result<Option<(ContentPostings, Vec<u8>)>> {
        self.get_as::<ContentChunks, _>(content, |bytes| Ok((ContentChunks::decode_postings(bytes)?, bytes.to_vec())))
    }

    /// A content's record as a grown file's prior, if it is of the current
    /// version ([`ContentChunks::decode_prior`]).
    pub fn prior_record(&self, content: &ContentHash) -> Result<Option<(ContentPostings, PriorRecord)>> {
        Ok(self.get_as::<ContentChunks, _>(content, ContentChunks::decode_prior)?.flatten())
    }

    /// [`Store::prior_record`], and the value as stored.
    pub fn prior_record_stored(
        &self,
        content: &ContentHash,
    ) -> Result<Option<(ContentPostings, PriorRecord, Vec<u8>)>> {
        let decode = |bytes: &[u8]| Ok(ContentChunks::decode_prior(bytes)?.map(|(p, r)| (p, r, bytes.to_vec())));
        Ok(self.get_as::<ContentChunks, _>(content, decode)?.flatten())
    }

    /// Reads one value of `T`'s column family with `decode`.
    fn get_as<T: Table, V>(
        &self,
        key: &T::Key,
        decode: impl FnOnce(&[u8]) -> std::result::Result<V, DecodeError>,
    ) -> Result<Option<V>> {
        match self.db.get_pinned_cf(self.cf(T::NAME), T::encode_key(key)).map_err(|e| self.rocks(e))? {
            None => Ok(None),
            Some(v) => decode(&v).map(Some).map_err(|e| self.corrupt::<T>(key, e)),
        }
    }

    /// One value of `T`'s column family as stored (version byte and all).
    pub fn get_stored<T: Table>(&self, key: &T::Key) -> Result<Option<Vec<u8>>> {
        self.get_as::<T, _>(key, |bytes| Ok(bytes.to_vec()))
    }

    /// Whether a key is present.
    pub fn contains<T: Table>(&self, key: &T::Key) -> Result<bool> {
        Ok(self.db.get_pinned_cf(self.cf(T::NAME), T::encode_key(key)).map_err(|e| self.rocks(e))?.is_some())
    }

    /// Iterates a whole CF in key order.
    pub fn scan<T: Table>(&self) -> TableIter<'_, T> {
        self.scan_prefix_raw::<T>(Vec::new())
    }

    /// Calls `each` with every file record's id and stats, in id order,
    /// each path read in place ([`Files::decode_stat`]; a record of an
    /// older version is decoded whole). Not kept in the block cache, as
    /// a whole scan.
    pub fn for_each_file_stat(&self, mut each: impl FnMut(FileId, FileStat<'_>)) -> Result<()> {
        // The whole scan's iterator, read here without its decoder.
        let TableIter { mut inner, .. } = self.scan::<Files>();
        while let (Some(k), Some(v)) = (inner.key(), inner.value()) {
            let id = Files::decode_key(k).map_err(|e| self.corrupt_raw::<Files>(k, e))?;
            match Files::decode_stat(v) {
                Some(stat) => each(id, stat),
                None => each(id, FileStat::of(&Files::decode_value(v).map_err(|e| self.corrupt_raw::<Files>(k, e))?)),
            }
            inner.next();
        }
        inner.status().map_err(|e| self.rocks(e))
    }

    /// Calls `each` with every path and its file id, in path order, each
    /// path borrowed from the iterator (a whole scan of a large tree's
    /// `paths` copied each key only to look at it).
    pub fn for_each_path(&self, mut each: impl FnMut(&[u8], FileId)) -> Result<()> {
        let TableIter { mut inner, .. } = self.scan::<Paths>();
        while let (Some(k), Some(v)) = (inner.key(), inner.value()) {
            each(k, Paths::decode_value(v).map_err(|e| self.corrupt_raw::<Paths>(k, e))?);
            inner.next();
        }
        inner.status().map_err(|e| self.rocks(e))
    }

    /// The entries of the directory `dir` (`/` for the root) as `paths`
    /// holds them, in key order: each file directly in it (its name and
    /// id), and each subdirectory holding any (its name and None, once,
    /// where its first path comes; the iterator then seeks past the rest
    /// of it).
    pub fn for_each_entry_in(&self, dir: &[u8], mut each: impl FnMut(&[u8], Option<FileId>)) -> Result<()> {
        let mut prefix = dir.to_vec();
        if prefix.last() != Some(&b'/') {
            prefix.push(b'/');
        }
        let upper = prefix_upper_bound(&prefix);
        let TableIter { mut inner, .. } = self.scan_raw::<Paths>(prefix.clone(), upper, true);
        let mut past = Vec::new();
        while let (Some(k), Some(v)) = (inner.key(), inner.value()) {
            let rest = &k[prefix.len()..];
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    each(rest, Some(Paths::decode_value(v).map_err(|e| self.corrupt_raw::<Paths>(k, e))?));
                    inner.next();
                }
                Some(i) => {
                    each(&rest[..i], None);
                    // Past every path under it: `/` + 1.
                    past.clear();
                    past.extend_from_slice(&k[..prefix.len() + i]);
                    past.push(b'/' + 1);
                    inner.seek(&past);
                }
            }
        }
        inner.status().map_err(|e| self.rocks(e))
    }

    /// Iterates a CF in key order up to `end` (excluded).
    pub fn scan_before<T: Table>(&self, end: &T::Key) -> TableIter<'_, T> {
        self.scan_raw::<T>(Vec::new(), Some(T::encode_key(end)), false)
    }

    /// Iterates a CF in key order from `from` (the first key, where None)
    /// up to `before` (excluded; the last key, where None), not keeping
    /// what it reads in the block cache: the parts of a whole scan.
    pub fn scan_range<T: Table>(&self, from: Option<&T::Key>, before: Option<&T::Key>) -> TableIter<'_, T> {
        self.scan_raw::<T>(from.map(T::encode_key).unwrap_or_default(), before.map(T::encode_key), false)
    }

    fn scan_prefix_raw<T: Table>(&self, prefix: Vec<u8>) -> TableIter<'_, T> {
        let upper = prefix_upper_bound(&prefix);
        // A whole scan (the empty prefix) should not evict the working set
        // from the block cache; the short prefix scans of a query revisit
        // blocks and keep them.
        let cache = !prefix.is_empty();
        self.scan_raw::<T>(prefix, upper, cache)
    }

    /// Iterates a CF from `start` up to `upper` (excluded, if any), keeping
    /// the blocks it reads in the block cache if `cache`.
    fn scan_raw<T: Table>(&self, start: Vec<u8>, upper: Option<Vec<u8>>, cache: bool) -> TableIter<'_, T> {
        let mut ro = ReadOptions::default();
        // The postings have a prefix extractor: without this, a scan past
        // one prefix could skip keys.
        ro.set_total_order_seek(true);
        ro.fill_cache(cache);
        if let Some(upper) = upper {
            ro.set_iterate_upper_bound(upper);
        }
        let mut inner = self.db.raw_iterator_cf_opt(self.cf(T::NAME), ro);
        inner.seek(&start);
        TableIter { store: self, inner, decode: T::decode_value, _t: std::marker::PhantomData }
    }

    /// The contents that posted each of `samples` (ascending), at most
    /// `cap + 1` each (more means over the cap): a query looks up hundreds
    /// of samples ([`Store::entries_under`]).
    pub fn sketch_postings_of(&self, samples: &[u32], cap: usize) -> Result<Vec<Vec<ContentId>>> {
        debug_assert!(samples.windows(2).all(|w| w[0] < w[1]));
        let found = self.entries_under::<SketchContents, _>(samples.iter().map(|s| s.to_be_bytes()), cap as u64)?;
        Ok(found.into_iter().map(|v| v.into_iter().map(|((_, content), ())| content).collect()).collect())
    }

    /// The postings of each of `chunks` (ascending, distinct), at most
    /// `cap + 1` each (more means over the cap): a query that measures a
    /// thousand candidates needs the degrees of tens of thousands of chunks
    /// ([`Store::entries_under`]).
    pub fn postings_of(&self, chunks: &[ChunkKey], cap: u64) -> Result<Vec<Vec<(ContentId, Posting)>>> {
        debug_assert!(chunks.windows(2).all(|w| w[0] < w[1]));
        let found = self.entries_under::<ChunkContents, _>(chunks.iter().map(|c| c.0.to_be_bytes()), cap)?;
        Ok(found.into_iter().map(|v| v.into_iter().map(|((_, content), p)| (content, p)).collect()).collect())
    }

    /// Whether each of `chunks` (ascending, distinct) is held by more than
    /// `cap` contents: [`Store::postings_of`]'s lengths, counted without
    /// keeping the postings (a query learns the degrees of every chunk of
    /// its candidates: 1.2 million for a 123 MB file of /usr/lib, whose
    /// postings took ~100 MB).
    pub fn chunks_over(&self, chunks: &[ChunkKey], cap: u64) -> Result<Vec<bool>> {
        debug_assert!(chunks.windows(2).all(|w| w[0] < w[1]));
        let prefixes = chunks.iter().map(|c| c.0.to_be_bytes());
        let held = self.under_each::<ChunkContents, _, u64>(prefixes, cap, |n, _, _| {
            *n += 1;
            Ok(())
        })?;
        Ok(held.into_iter().map(|n| n > cap).collect())
    }

    /// The content hash of each of `ids`, in their order: the postings name
    /// contents by id. An id with no hash is an inconsistency (postings go
    /// before their content's id does), reported as such.
    pub fn content_hashes(&self, ids: &[ContentId]) -> Result<Vec<ContentHash>> {
        let cf = self.cf(ContentById::NAME);
        let keys: Vec<Vec<u8>> = ids.iter().map(ContentById::encode_key).collect();
        let found = self.db.batched_multi_get_cf(cf, &keys, false);
        ids.iter()
            .zip(found)
            .map(|(id, got)| match got.map_err(|e| self.rocks(e))? {
                Some(v) => ContentById::decode_value(&v).map_err(|e| self.corrupt::<ContentById>(id, e)),
                None => Err(self.corrupt::<ContentById>(id, "a posting names this content id, which has no hash")),
            })
            .collect()
    }

    /// The entries of `T` under each of `prefixes` (ascending), at most
    /// `cap + 1` each, through one iterator that seeks forward: an iterator
    /// per prefix would cost more than the lookups themselves. The seeks
    /// are in prefix mode: a prefix the CF's filter rules out reads no
    /// block, and each must be as long as the CF's prefix.
    fn entries_under<T: Table, P: AsRef<[u8]>>(
        &self,
        prefixes: impl Iterator<Item = P>,
        cap: u64,
    ) -> Result<Vec<Vec<Entry<T>>>> {
        self.under_each::<T, P, Vec<Entry<T>>>(prefixes, cap, |found, k, v| {
            match (T::decode_key(k), T::decode_value(v)) {
                (Ok(key), Ok(value)) => found.push((key, value)),
                (Err(e), _) | (_, Err(e)) => return Err(self.corrupt_raw::<T>(k, e)),
            }
            Ok(())
        })
    }

    /// What `add` gathers of the raw entries of `T` under each of
    /// `prefixes`, as [`Store::entries_under`] finds them.
    fn under_each<T: Table, P: AsRef<[u8]>, A: Default>(
        &self,
        prefixes: impl Iterator<Item = P>,
        cap: u64,
        mut add: impl FnMut(&mut A, &[u8], &[u8]) -> Result<()>,
    ) -> Result<Vec<A>> {
        // A seek stops where its prefix ends, live keys or not: without
        // this it went on over every deletion not yet compacted away up to
        // the next live key, and `lost DIR` of a directory of 1,000 files
        // deleted took 42 s (2,000: 153 s).
        let mut ro = ReadOptions::default();
        ro.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(T::NAME), ro);
        let mut out = Vec::new();
        for prefix in prefixes {
            let prefix = prefix.as_ref();
            debug_assert!(posting_prefix(T::NAME).is_none_or(|len| len == prefix.len()));
            it.seek(prefix);
            let (mut gathered, mut n) = (A::default(), 0u64);
            while n <= cap {
                let Some((k, v)) = it.item().filter(|(k, _)| k.starts_with(prefix)) else { break };
                add(&mut gathered, k, v)?;
                n += 1;
                it.next();
            }
            it.status().map_err(|e| self.rocks(e))?;
            out.push(gathered);
        }
        Ok(out)
    }

    /// The files holding one content.
    pub fn names(&self, content: &ContentHash) -> TableIter<'_, ContentNames> {
        self.scan_prefix_raw::<ContentNames>(content.0.to_vec())
    }

    /// A reusable lookup of contents' names: one iterator that seeks from
    /// content to content. A writer asks "has this content another name?"
    /// for every file that changes, and creating an iterator per question
    /// cost ~10 % of the daemon's CPU under churn. The probe sees the index
    /// as it was when the probe was made.
    pub fn name_probe(&self) -> NameProbe<'_> {
        NameProbe { store: self, inner: self.db.raw_iterator_cf(self.cf(ContentNames::NAME)) }
    }

    /// History records of exactly one path, oldest first.
    pub fn history_of(&self, path: &[u8]) -> TableIter<'_, History> {
        let mut p = path.to_vec();
        p.push(0);
        self.scan_prefix_raw::<History>(p)
    }

    /// History records of every path under a directory, by path then time.
    pub fn history_under(&self, dir: &[u8]) -> TableIter<'_, History> {
        let mut p = dir.to_vec();
        if !p.ends_with(b"/") {
            p.push(b'/');
        }
        self.scan_prefix_raw::<History>(p)
    }

    /// Paths at or under a directory, as stored in `paths`.
    pub fn paths_under(&self, dir: &[u8]) -> TableIter<'_, Paths> {
        let mut p = dir.to_vec();
        if !p.ends_with(b"/") {
            p.push(b'/');
        }
        self.scan_prefix_raw::<Paths>(p)
    }

    pub fn batch(&self) -> Batch<'_> {
        let reserve = self.batch_bytes.load(Ordering::Relaxed).min(BATCH_RESERVE_MAX);
        let inner = WriteBatch::with_capacity_bytes(reserve);
        Batch { store: self, inner, ops: 0, key: Vec::new(), value: Vec::new() }
    }

    /// Writes a batch atomically. Not synced: the WAL is in the OS's hands
    /// when this returns, so a killed process loses nothing; [`Store::sync`]
    /// makes it survive power loss too.
    pub fn write(&self, batch: Batch<'_>) -> Result<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        wo.disable_wal(self.bulk);
        self.batch_bytes.store(batch.inner.size_in_bytes(), Ordering::Relaxed);
        self.db.write_opt(batch.inner, &wo).map_err(|e| self.rocks(e))
    }

    /// Syncs the WAL to disk.
    pub fn sync(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(|e| self.rocks(e))
    }

    /// The writer's totals (files, live contents), zero for a new index.
    pub fn counts(&self) -> Result<Counts> {
        Ok(match self.get::<Meta>(&MetaKey::Counts)? {
            Some(MetaValue::Counts(c)) => c,
            _ => Counts::default(),
        })
    }

    /// The roots the index remembers (`simd index ROOT` given them), as
    /// their canonical paths' bytes.
    pub fn roots(&self) -> Result<Vec<Vec<u8>>> {
        Ok(match self.get::<Meta>(&MetaKey::Roots)? {
            Some(MetaValue::Roots(r)) => r,
            _ => Vec::new(),
        })
    }

    /// The next file id to hand out (1 in an index that has none yet).
    pub fn next_file_id(&self) -> Result<u64> {
        Ok(match self.get::<Meta>(&MetaKey::NextFileId)? {
            Some(MetaValue::NextFileId(n)) => n,
            _ => 1,
        })
    }

    /// The marks that date file ids ([`Mark`]; none in an index made
    /// before they were kept).
    pub fn marks(&self) -> Result<Vec<Mark>> {
        Ok(match self.get::<Meta>(&MetaKey::Marks)? {
            Some(MetaValue::Marks(m)) => m,
            _ => Vec::new(),
        })
    }

    /// Writes every memtable to SST files and drops the WAL they came from.
    /// Readers open an index by replaying its WAL into memory, so a writer
    /// flushes when it finishes a run (unless the run wrote little:
    /// [`Store::flush_unless_small`]): a reader then opens in milliseconds
    /// with little memory instead of replaying everything written.
    ///
    /// RocksDB flushes the column families of one call one after another
    /// when asked to wait, so they are first all scheduled, the largest
    /// (the postings) first, for the two flush threads to share, and only
    /// then waited for: the end of a first index of the Django tree went
    /// from ~0.2 to ~0.12 s (`docs/performance.md`).
    pub fn flush(&self) -> Result<()> {
        let mut names = ALL_CFS.to_vec();
        names.sort_by_key(|n| !POSTINGS_CFS.contains(n));
        let cfs: Vec<&rocksdb::ColumnFamily> = names.iter().map(|n| self.cf(n)).collect();
        let mut fo = rocksdb::FlushOptions::default();
        if self.bulk {
            // One atomic flush of every column family.
            fo.set_wait(true);
            return self.db.flush_cfs_opt(&cfs, &fo).map_err(|e| self.rocks(e));
        }
        fo.set_wait(false);
        self.db.flush_cfs_opt(&cfs, &fo).map_err(|e| self.rocks(e))?;
        fo.set_wait(true);
        self.db.flush_cfs_opt(&cfs, &fo).map_err(|e| self.rocks(e))
    }

    /// Ends a run's writes as [`Store::flush`] does, unless the WAL files
    /// not yet flushed (this run's and those earlier runs left) are few and
    /// small: then only syncs the WAL, and leaves the memtables for a later
    /// run to flush. Returns whether it flushed.
    ///
    /// A flush of a run that changed one file costs ~8 ms (a table file
    /// for each column family it wrote, each synced, and the manifest):
    /// most of what such a run adds to one that changed nothing
    /// (`docs/performance.md`, session 49). What it leaves in the WAL,
    /// every reader's open replays, so the bound is small: at most
    /// [`WAL_KEPT_FILES`] files (each writer's open starts one) of
    /// [`WAL_KEPT_BYTES`] in all. (Session 39 kept every run's WAL, with no
    /// bound, and readers slowed as they piled up.)
    pub fn flush_unless_small(&self) -> Result<bool> {
        // A bulk load writes no WAL: it has only its flush.
        if !self.bulk {
            self.sync()?;
            if self.wal_is_small() {
                return Ok(false);
            }
        }
        self.flush()?;
        Ok(true)
    }

    /// Whether the WAL files are within [`WAL_KEPT_FILES`] and
    /// [`WAL_KEPT_BYTES`]; not when they cannot be listed or measured.
    /// Files a flush made obsolete count too until RocksDB deletes them,
    /// which may be at the next writer's open: a run then flushes once more
    /// than it had to.
    fn wal_is_small(&self) -> bool {
        let wal = self.wal_files();
        wal.measured && wal.files <= WAL_KEPT_FILES && wal.bytes <= WAL_KEPT_BYTES
    }

    /// The write-ahead log files on disk, a flushed one not deleted yet
    /// included.
    fn wal_files(&self) -> WalFiles {
        let mut wal = WalFiles { files: 0, bytes: 0, measured: true };
        let Ok(entries) = fs::read_dir(self.dir.join(DB_DIR)) else {
            return WalFiles { measured: false, ..wal };
        };
        for e in entries {
            let Ok(e) = e else {
                wal.measured = false;
                continue;
            };
            if e.file_name().as_encoded_bytes().ends_with(b".log") {
                wal.files += 1;
                match e.metadata() {
                    Ok(m) => wal.bytes += m.len(),
                    Err(_) => wal.measured = false,
                }
            }
        }
        wal
    }

    /// Waits, in a writer opened for one `simd index` run
    /// ([`Store::open_writer`]), until RocksDB has no flush or compaction
    /// left to do; until `stop` is set, if it is. A writer's open starts
    /// the compactions the index's shape asks for, and its close cuts a
    /// running one short and throws its output away: `simd index` after a
    /// line appended to a tenth of the generated corpus, fifteen times,
    /// each run a compaction started and dropped, left 32 → 108 table files
    /// (every command opens them all) until RocksDB stalled a run's writes
    /// to compact them (1.1 s against ~0.4). Letting them finish kept 20–28
    /// at about the same time a run (`docs/performance.md`, session 46). The
    /// first index does not wait (its compactions are the next run's) nor
    /// does the daemon, whose compactions run beside it.
    pub fn settle_compactions(&self, stop: Option<&AtomicBool>) {
        if !self.settles {
            return;
        }
        let started = std::time::Instant::now();
        let mut opts = rocksdb::WaitForCompactOptions::default();
        // Microseconds: a stop is looked at between waits.
        opts.set_timeout(200_000);
        loop {
            match self.db.wait_for_compact(&opts) {
                Ok(()) => break,
                Err(e) if e.kind() == rocksdb::ErrorKind::TimedOut => {
                    if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                        break;
                    }
                }
                // The run's own writes are flushed: a compaction that
                // failed (a full disk) loses nothing, and the next writer
                // tries it again.
                Err(e) => {
                    tracing::warn!("{}: RocksDB's compactions stopped: {e}", crate::show_path(&self.dir));
                    break;
                }
            }
        }
        tracing::debug!("compactions settled after {:?}", started.elapsed());
    }

    /// A bulk load's postings spill (None unless [`Store::is_bulk`]).
    pub fn posting_spill(&self) -> Result<Option<PostingSpill>> {
        if !self.bulk {
            return Ok(None);
        }
        let dir = self.dir.join(SPILL_DIR);
        Ok(Some(PostingSpill::new(dir)?))
    }

    /// Adds a content's postings to a bulk load's `spill`; once it holds
    /// a run's worth, a thread writes them out, and once [`INGEST_RUNS`]
    /// runs are written they are ingested (RocksDB then merges them in the
    /// background, as it did the flushes of postings written through
    /// memtables, so a large tree's load does not end with hundreds of
    /// level-0 files).
    pub fn spill_posting(&self, spill: &mut PostingSpill, record: &ContentRecord) -> Result<()> {
        spill.add(record);
        if spill.chunks.len() * 24 + spill.samples.len() * 16 >= spill.limit {
            spill.spill()?;
            if spill.files.len() >= 2 * INGEST_RUNS {
                self.ingest_runs(spill)?;
            }
        }
        Ok(())
    }

    /// Ingests the table files of `spill`'s runs written so far. The
    /// postings' memtables are empty in a bulk load: nothing waits for a
    /// flush. A kill after this leaves `postings_pending` in place, and the
    /// rebuild at the next open starts by deleting every posting.
    fn ingest_runs(&self, spill: &mut PostingSpill) -> Result<()> {
        let mut io = rocksdb::IngestExternalFileOptions::default();
        io.set_move_files(true);
        for name in POSTINGS_CFS {
            let files: Vec<&PathBuf> = spill.files.iter().filter(|(n, _)| *n == name).map(|(_, p)| p).collect();
            if !files.is_empty() {
                self.db.ingest_external_file_cf_opts(self.cf(name), &io, files).map_err(|e| self.rocks(e))?;
            }
        }
        spill.files.clear();
        Ok(())
    }

    /// Moves the rest of a bulk load's postings into their column
    /// families: what `spill` still holds is written and every run not yet
    /// ingested is, the postings of contents dropped since they were added
    /// are deleted, and `postings_pending` is taken out of `meta` (all
    /// reach disk with the run's last flush).
    pub fn ingest_postings(&self, spill: &mut PostingSpill) -> Result<()> {
        spill.spill()?;
        spill.wait()?;
        self.ingest_runs(spill)?;
        let mut b = self.batch();
        for record in std::mem::take(&mut spill.dropped).into_values() {
            for (chunk, _, _) in record.chunk_counts() {
                b.delete::<ChunkContents>(&(chunk, record.id));
            }
            for &sample in &record.posted {
                b.delete::<SketchContents>(&(sample, record.id));
            }
        }
        b.delete::<Meta>(&MetaKey::PostingsPending);
        self.write(b)?;
        let _ = fs::remove_dir(&spill.dir);
        Ok(())
    }

    /// Whether a bulk load's postings are still to come: it is running,
    /// or it was killed and no writer has opened the index since.
    pub fn postings_pending(&self) -> Result<bool> {
        Ok(self.get::<Meta>(&MetaKey::PostingsPending)?.is_some())
    }

    /// Writes the postings of every content that has a name, from its chunk
    /// list, in place of whatever the postings hold: the repair of a bulk
    /// load killed before its end ([`PostingSpill`]). Returns how many
    /// contents it posted.
    fn rebuild_postings(&self) -> Result<u64> {
        // Past every key of both (13 and 9 bytes).
        let (first, last): (&[u8], &[u8]) = (&[], &[0xff; 16]);
        for name in POSTINGS_CFS {
            self.db.delete_range_cf(self.cf(name), first, last).map_err(|e| self.rocks(e))?;
        }
        let dir = self.dir.join(SPILL_DIR);
        // What the killed load left there is in no table.
        let _ = fs::remove_dir_all(&dir);
        let mut spill = PostingSpill::new(dir)?;
        let mut posted = 0;
        // Names are keyed by content hash first, as records are: one pass
        // over both in key order tells which records are named, in no
        // memory (a set of the named contents would grow with the index).
        let mut names = self.scan::<ContentNames>().peekable();
        for item in self.scan::<ContentChunks>() {
            let (hash, record) = item?;
            let mut named = false;
            while let Some(name) = names.peek() {
                match name {
                    Ok(((h, _), ())) if *h < hash => {
                        names.next();
                    }
                    Ok(((h, _), ())) => {
                        named = *h == hash;
                        break;
                    }
                    Err(_) => return Err(names.next().expect("peeked").expect_err("peeked an error")),
                }
            }
            if named {
                self.spill_posting(&mut spill, &record)?;
                posted += 1;
            }
        }
        self.ingest_postings(&mut spill)?;
        self.flush()?;
        Ok(posted)
    }

    /// The sequence number of the last write: changes whenever the index does.
    pub fn sequence(&self) -> u64 {
        self.db.latest_sequence_number()
    }

    /// What was written or deleted, in any CF, after sequence number
    /// `since`, read from the write-ahead log ([`Written`]); None when the
    /// log cannot tell all of it: a part of it is gone (flushed and not
    /// archived), a write skipped it (a bulk load, an ingested table), or a
    /// batch holds what its iteration does not show (a range deletion).
    pub fn keys_written_since(&self, since: u64) -> Option<Written> {
        struct Keys {
            keys: Written,
            ops: usize,
        }
        impl Keys {
            fn note(&mut self, key: &[u8]) {
                self.ops += 1;
                if let Ok(k) = <[u8; 8]>::try_from(key) {
                    self.keys.keys.insert(u64::from_be_bytes(k));
                } else if key.len() == CONTENT_NAME_KEY {
                    let hash: [u8; 16] = key[..16].try_into().expect("16 bytes");
                    self.keys.named.insert(ContentHash(hash));
                }
                if key.first() == Some(&b'/') {
                    self.keys.paths.insert(key.to_vec());
                }
            }
        }
        impl rocksdb::WriteBatchIteratorCf for Keys {
            fn put_cf(&mut self, _cf: u32, key: &[u8], _value: &[u8]) {
                self.note(key);
            }
            fn delete_cf(&mut self, _cf: u32, key: &[u8]) {
                self.note(key);
            }
            fn merge_cf(&mut self, _cf: u32, key: &[u8], _value: &[u8]) {
                self.note(key);
            }
        }
        let latest = self.sequence();
        if since >= latest {
            return Some(Default::default());
        }
        let mut keys = Keys { keys: Written::default(), ops: 0 };
        // The batches must follow one another from `since + 1` to the
        // latest: a gap is a part of the log gone or never written.
        let mut next = since + 1;
        // From the batch that wrote `since` itself (already in the
        // analysis; a superset does no harm): asked for the first number
        // of the batch after it, RocksDB 11.8's iterator showed nothing
        // when that was the last batch.
        for item in self.db.get_updates_since(since).ok()? {
            let (seq, batch) = item.ok()?;
            if seq > next {
                return None;
            }
            keys.ops = 0;
            batch.iterate_cf(&mut keys);
            if keys.ops != batch.len() {
                return None;
            }
            next = next.max(seq + batch.len() as u64);
            if next > latest {
                break;
            }
        }
        (next > latest).then_some(keys.keys)
    }

    /// Bytes the database takes on disk, but for the write-ahead log kept
    /// for reports.
    pub fn disk_size(&self) -> u64 {
        dir_size(&self.dir.join(DB_DIR)).saturating_sub(self.wal_archive_size())
    }

    /// Bytes of the write-ahead log kept after its flush, for reports
    /// ([`Store::keys_written_since`]), not part of [`Store::disk_size`]:
    /// writers delete what is over two minutes old or past 16 MB (when
    /// they flush or open, at most every minute).
    pub fn wal_archive_size(&self) -> u64 {
        dir_size(&self.dir.join(DB_DIR).join("archive"))
    }

    /// Bytes the write-ahead log files take on disk (part of
    /// [`Store::disk_size`]), a flushed one not deleted yet included.
    pub fn wal_size(&self) -> u64 {
        self.wal_files().bytes
    }

    /// Bytes and number of the table files each column family takes on
    /// disk, largest first (what is still only in the write-ahead log is
    /// not counted).
    pub fn table_sizes(&self) -> Result<Vec<(&'static str, u64, usize)>> {
        let mut sizes: Vec<(&'static str, u64, usize)> = ALL_CFS.iter().map(|&name| (name, 0, 0)).collect();
        for f in self.db.live_files().map_err(|e| self.rocks(e))? {
            if let Some(t) = sizes.iter_mut().find(|t| t.0 == f.column_family_name) {
                t.1 += f.size as u64;
                t.2 += 1;
            }
        }
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        Ok(sizes)
    }

    /// Merges the small table files that runs leave side by side in a
    /// column family; returns how many it merged.
    ///
    /// Every run ends with a flush, which writes a small table file for
    /// each column family it changed. Where the new keys come after all
    /// the others (file ids in `files`, content ids in `content_by_id`, new
    /// names in `paths` and `history`), that file overlaps no other, and
    /// RocksDB moves it down to the last level as it is, where nothing
    /// ever merges it: 200 runs that each added one file left 626 table
    /// files for a 300-file index. Every command opens every table file,
    /// so each one made every command slower (on that index `simd status`
    /// took 74 ms and `simd lost` 62, against 14 and 11 once merged;
    /// `docs/performance.md`).
    ///
    /// So, in the last level of each column family that holds more than
    /// [`SMALL_TABLES_KEPT`] files of at most [`SMALL_TABLE`] bytes, each
    /// stretch of small files that are neighbours in key order is compacted
    /// into one. Large files are not rewritten, and the levels above are
    /// RocksDB's own to merge (their files overlap those below).
    pub fn tidy(&self) -> Result<usize> {
        let files = self.db.live_files().map_err(|e| self.rocks(e))?;
        let mut merged = 0;
        'tables: for name in ALL_CFS {
            let Some(last) = files.iter().filter(|f| f.column_family_name == name).map(|f| f.level).max() else {
                continue;
            };
            let mut level: Vec<&rocksdb::LiveFile> =
                files.iter().filter(|f| f.column_family_name == name && f.level == last).collect();
            let small = |f: &rocksdb::LiveFile| f.size <= SMALL_TABLE;
            if last == 0 || level.iter().filter(|f| small(f)).count() <= SMALL_TABLES_KEPT {
                continue;
            }
            // Files of one level below the first hold disjoint key ranges.
            level.sort_by(|a, b| a.start_key.cmp(&b.start_key));
            for stretch in level.chunk_by(|a, b| small(a) && small(b)) {
                if stretch.len() < 2 {
                    continue;
                }
                let (Some(first), Some(end)) =
                    (stretch[0].start_key.as_ref(), stretch[stretch.len() - 1].end_key.as_ref())
                else {
                    continue;
                };
                if !self.settled(name) {
                    tracing::debug!("RocksDB is compacting: small table files are merged after a later run");
                    break 'tables;
                }
                let mut opts = rocksdb::CompactOptions::default();
                // Flushes and RocksDB's own compactions go on meanwhile.
                opts.set_exclusive_manual_compaction(false);
                // The last level is compacted only when told to; "optimized"
                // spares rewriting again what this compaction wrote there.
                opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::ForceOptimized);
                self.db.compact_range_cf_opt(self.cf(name), Some(first), Some(end), &opts);
                merged += stretch.len();
            }
        }
        if merged > 0 {
            tracing::debug!("{merged} small table files merged");
        }
        Ok(merged)
    }

    /// Whether RocksDB neither compacts anything nor has a compaction of
    /// `name` waiting, after waiting up to 100 ms for that. A manual
    /// compaction waits for the single compaction thread, and after a large
    /// run that may be busy for seconds: [`Store::tidy`] does not hold up
    /// the run's end, or the daemon's next batch, for it. (Moving a flushed
    /// file down a level, what is most often pending, takes a millisecond.)
    fn settled(&self, name: &'static str) -> bool {
        let int = |v: std::result::Result<Option<u64>, rocksdb::Error>| v.ok().flatten().unwrap_or(0);
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        loop {
            let busy = int(self.db.property_int_value("rocksdb.num-running-compactions")) > 0
                || int(self.db.property_int_value_cf(self.cf(name), "rocksdb.compaction-pending")) > 0;
            if !busy {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// Creates an empty index database in `dir/db`: built in `dir/db.creating`
/// (whatever an interrupted creation left there is discarded), given its
/// format record, closed, synced and renamed into place.
/// The schema version of a database that lacks some of this version's
/// column families, when this simd upgrades it; else the error: a schema
/// mismatch when it holds simd's format record (an older or newer index),
/// else not an index.
fn older_format(dir: &Path, db_dir: &Path, existing: &[String]) -> Result<u32> {
    let missing: Vec<&str> = ALL_CFS.iter().copied().filter(|n| !existing.iter().any(|e| e == n)).collect();
    let not_index = || StoreError::NotAnIndex {
        dir: dir.to_path_buf(),
        reason: format!("column families missing: {}", missing.join(", ")),
    };
    if !existing.iter().any(|e| e == Meta::NAME) {
        return Err(not_index());
    }
    let cfs = existing.iter().map(|n| ColumnFamilyDescriptor::new(n, Options::default()));
    let mut opts = Options::default();
    opts.set_info_logger(rocksdb_logger(None, Arc::default(), OpenLog::default()));
    let Ok(db) = DB::open_cf_descriptors_read_only(&opts, db_dir, cfs, false) else {
        return Err(not_index());
    };
    let format = db
        .cf_handle(Meta::NAME)
        .and_then(|cf| db.get_cf(cf, Meta::encode_key(&MetaKey::Format)).ok().flatten())
        .and_then(|bytes| Meta::decode_value(&bytes).ok());
    match format {
        Some(MetaValue::Format(f)) if UPGRADABLE_VERSIONS.contains(&f.schema_version) => Ok(f.schema_version),
        Some(MetaValue::Format(f)) if f.schema_version != SCHEMA_VERSION => Err(StoreError::SchemaMismatch {
            dir: dir.to_path_buf(),
            found: f.schema_version,
            expected: SCHEMA_VERSION,
        }),
        _ => Err(not_index()),
    }
}

/// RocksDB's own log, sent to `tracing` (target `rocksdb`): its warnings
/// and errors only. It used to be a LOG file in the index, where every open
/// wrote a ~125 KB dump of the options of the 11 column families (3 % of
/// the index of a 70 MB tree).
///
/// Once the index directory `place` names (its path, and its and its
/// database directory's device and inode as opened) is gone, looked at
/// when a warning or an error comes, or once `hushed` is set ([`Store::in_place`]
/// found it gone), everything goes to debug: RocksDB's errors about the
/// files that went with it come before the caller's message that says
/// what happened (five lines of them when the daemon closed such an
/// index), and say nothing more.
fn rocksdb_logger(
    place: Option<(PathBuf, Option<Place>)>,
    hushed: Arc<AtomicBool>,
    opening: OpenLog,
) -> rocksdb::InfoLogger {
    let gone = move || {
        hushed.load(Ordering::Relaxed)
            || place.as_ref().is_some_and(|(dir, at)| {
                let gone = at.is_some() && place_of(dir) != *at;
                hushed.store(gone, Ordering::Relaxed);
                gone
            })
    };
    rocksdb::InfoLogger::new_callback_logger(rocksdb::LogLevel::Warn, move |level, msg| match level {
        // The header (the options dump every open writes, ~1,000 lines)
        // and anything below warnings: before the place is looked at, which
        // costs two `statx` a message (~2 ms of every open when it was
        // looked at for each).
        rocksdb::LogLevel::Header | rocksdb::LogLevel::Debug | rocksdb::LogLevel::Info => {}
        _ if gone() => tracing::debug!(target: "rocksdb", "rocksdb: {}", msg.trim_end()),
        // A write stall while flushes catch up (a bulk load on two cores
        // meets one now and then) slows a run and loses nothing: news for
        // whoever tunes the store, not a warning on a user's terminal.
        // Ingesting a bulk load's postings ([`PostingSpill`]) opens table
        // files made outside the database, which RocksDB says at warn level.
        rocksdb::LogLevel::Warn
            if msg.contains("Stopping writes")
                || msg.contains("Stalling writes")
                || msg.contains("Tail prefetch size")
                || msg.contains("opened without unique ID") =>
        {
            tracing::debug!(target: "rocksdb", "rocksdb: {}", msg.trim_end())
        }
        rocksdb::LogLevel::Warn => opening.log(false, msg.trim_end()),
        rocksdb::LogLevel::Error | rocksdb::LogLevel::Fatal => opening.log(true, msg.trim_end()),
    })
}

/// RocksDB's warnings and errors while a reader opens, held until
/// [`open_reader`] knows whether that open stands: one it tries again
/// because the writer moved on meanwhile failed on a file the writer
/// deleted, and RocksDB said so at error level ("IOError during
/// point-in-time reading log … This likely mean loss of synced WAL"),
/// which a `simd check` beside the daemon printed above its "consistent"
/// (seen in session 51). Those go to debug; the messages of the open that
/// stands, or fails for good, keep their levels.
#[derive(Clone, Default)]
struct OpenLog(Arc<std::sync::Mutex<Held>>);

/// What RocksDB said while held, each message with whether it was an
/// error; `None` when nothing is held.
type Held = Option<Vec<(bool, String)>>;

impl OpenLog {
    /// Holds what RocksDB says from now on, forgetting what was held.
    fn hold(&self) {
        *self.held() = Some(Vec::new());
    }

    /// Says a warning (or an `error`), or holds it while an open is tried.
    fn log(&self, error: bool, msg: &str) {
        if let Some(held) = self.held().as_mut() {
            held.push((error, msg.to_string()));
        } else if error {
            tracing::error!(target: "rocksdb", "rocksdb: {msg}");
        } else {
            tracing::warn!(target: "rocksdb", "rocksdb: {msg}");
        }
    }

    /// The open is tried again: what it said goes to debug.
    fn retried(&self) {
        for (_, msg) in self.held().take().into_iter().flatten() {
            tracing::debug!(target: "rocksdb", "rocksdb, in a reader's open tried again: {msg}");
        }
    }

    /// The open stands (or failed for good): what it said is said, and
    /// what RocksDB says later is not held.
    fn release(&self) {
        let held = self.held().take();
        for (error, msg) in held.into_iter().flatten() {
            self.log(error, &msg);
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A logger that panicked holding it left a list worth keeping.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The block cache of an open: [`BLOCK_CACHE`] in one shard. RocksDB
/// splits a cache of this size into 32 shards of 512 KB, and a block
/// larger than its shard is read again from the file at every use: a
/// table file's prefix filter is one block, ~750 KB for a 40 MB table of
/// postings, so every seek of `simd similar` on a large index read and
/// checksummed it again (a 23 MB file queried against /usr/lib's index:
/// 19 s). Few threads read at once, so one shard's lock costs nothing
/// measurable.
fn block_cache() -> Cache {
    let mut opts = rocksdb::LruCacheOptions::default();
    opts.set_capacity(BLOCK_CACHE);
    opts.set_num_shard_bits(0);
    Cache::new_lru_cache_opts(&opts)
}

/// A column family's options: its table format, filters, memtable and
/// compression (what an SST file written for it outside RocksDB must
/// match too, but for its compression, which RocksDB reads per block:
/// [`Store::ingest_postings`], [`spill_options`]).
///
/// Built on a copy of `base` (RocksDB's defaults): a new `Options` makes a
/// default table factory, which makes a 32 MB block cache (mapped, then
/// unmapped when ours replaces it), ~40 µs each, eleven times an open; a
/// copy shares the one `base` made.
fn cf_options(base: &Options, name: &str, cache: &Cache, access: Access, bulk: bool) -> Options {
    let mut cf = base.clone();
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    // Whole-key Bloom filters serve point lookups only, so the CFs
    // read by prefix scans have none. The postings are looked up by
    // their prefix (a chunk key, a sample) a thousand at a time by a
    // query, most of them absent: a filter on the prefix spares
    // reading and decompressing a block for those (`simd similar`
    // with no similar file, ten Django releases: 26.7 → 17.0 ms;
    // one release 14.3 → 11.6 ms). 6 bits a prefix (~5 % false
    // positives) cost as little as the index's size allows.
    // Whole-CF scans ask for total order ([`Store::scan`]).
    if let Some(len) = posting_prefix(name) {
        cf.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(len));
        table.set_bloom_filter(6.0, false);
        table.set_whole_key_filtering(false);
    } else if !PREFIX_SCANNED_CFS.contains(&name) {
        table.set_bloom_filter(10.0, false);
    }
    if name == ContentChunks::NAME {
        // And one in its memtable: the readers' lookups of records it
        // lacks (a new content's, asked for; a prior's long flushed)
        // searched the skiplist of a daemon's memtable, thousands of keys
        // deep in a burst, before the table files' filters answered. 2 %
        // of the memtable's size (~160 KB, ~100 bits a key in a burst's
        // memtable): 5 % in every point-lookup column family cost a first
        // index ~7 MB of peak memory, the filters being allocated whole
        // with each memtable.
        cf.set_memtable_whole_key_filtering(true);
        cf.set_memtable_prefix_bloom_ratio(0.02);
    }
    table.set_cache_index_and_filter_blocks(true);
    cf.set_block_based_table_factory(&table);
    // The postings are written in hash order and never read by the
    // writer while they are in its memtable: a vector memtable
    // appends them and sorts once at flush, where a skiplist pays a
    // search per insert (~12 % of a first index's CPU). Readers
    // replay the WAL into the default skiplist, which serves their
    // prefix scans.
    if access == Access::Write && POSTINGS_CFS.contains(&name) || bulk && BULK_VECTOR_CFS.contains(&name) {
        cf.set_memtable_factory(rocksdb::MemtableFactory::Vector);
    }
    cf.set_write_buffer_size(write_buffer_per_cf());
    // Three: a memtable being flushed when a run ends does not hold
    // up the switch of the next one (RocksDB waits for it rather than
    // stall writes); the 32 MB total still bounds them all.
    cf.set_max_write_buffer_number(3);
    // zstd: 6.4 % of the file bytes on the Django tree against 7.1 %
    // with LZ4, for ~3 % of a first index's time (`docs/performance.md`;
    // dictionaries saved more but cost 9-14 %). Chunk lists are MD5s
    // and gap-coded sketches, which zstd does not shrink (10.15 MiB
    // either way on Django): trying cost ~2 % of a first index.
    if name == ContentChunks::NAME {
        cf.set_compression_type(DBCompressionType::None);
    } else if REPORT_SCANNED_CFS.contains(&name) {
        // Every report reads these whole, 4 KiB block by block, and zstd
        // builds its tables again for each block: LZ4 took 12-37 ms of
        // CPU off a report brought up to date on Django (66.5k files), and
        // ~45 off `simd status`, for 0.7 MiB more on disk (5.2 → 5.4 % of
        // the file bytes; the generated corpus 5.0 % either way)
        // (`docs/performance.md`). `paths` too, which every report's
        // identical directories walk whole: on a fresh index of Django's
        // releases, that walk's scan 19-27 → 13 ms, for 0.2 MiB more on
        // disk (5.4 → 5.5 %; session 78). RocksDB's default level: see
        // [`spill_options`] for what level 1 does to LZ4.
        cf.set_compression_type(DBCompressionType::Lz4);
    } else {
        cf.set_compression_type(DBCompressionType::Zstd);
        // Level 1, not zstd's default 3: the tables are small keys
        // (hashes, ids, paths) that level 3's longer search barely
        // shrinks more. Side by side: the scale-10 corpus's first
        // index −6 % for 4.9 → 5.0 % of its bytes; Django −1 %, 5.3 %
        // either way (session 22, `docs/performance.md`).
        cf.set_compression_options(-14, 1, 0, 0);
    }
    cf.set_level_compaction_dynamic_level_bytes(true);
    cf
}

fn create(dir: &Path, params: ChunkParams, bulk: bool) -> Result<()> {
    let tmp = dir.join(CREATING_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Io { path, source }
    };
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    let rocks = |source| StoreError::Rocks { dir: dir.to_path_buf(), source };
    {
        let mut opts = Options::default();
        opts.set_info_logger(rocksdb_logger(None, Arc::default(), OpenLog::default()));
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs = ALL_CFS.iter().map(|&name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, &tmp, cfs).map_err(rocks)?;
        let format = Format { schema_version: SCHEMA_VERSION, params, created: now_ns() };
        let meta = db.cf_handle(Meta::NAME).expect("meta created above");
        let mut b = WriteBatch::default();
        b.put_cf(meta, Meta::encode_key(&MetaKey::Format), Meta::encode_value(&MetaValue::Format(format)));
        b.put_cf(meta, Meta::encode_key(&MetaKey::NextFileId), Meta::encode_value(&MetaValue::NextFileId(1)));
        if bulk {
            // On disk before the load writes anything: it ingests postings
            // as it goes, and its other tables reach disk only when a
            // flush writes them ([`PostingSpill`]).
            b.put_cf(
                meta,
                Meta::encode_key(&MetaKey::PostingsPending),
                Meta::encode_value(&MetaValue::PostingsPending),
            );
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        db.write_opt(b, &wo).map_err(rocks)?;
        db.flush().map_err(rocks)?;
    }
    File::open(&tmp).and_then(|d| d.sync_all()).map_err(io(&tmp))?;
    fs::rename(&tmp, dir.join(DB_DIR)).map_err(io(dir))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    Ok(())
}

/// Opens a read-only view with `open`, again if the writer changed the
/// database while it was opened. A read-only open reads the manifest (the
/// table files and the first write-ahead log to replay), then the files it
/// names; a flush or compaction the writer installs in between deletes some
/// of them. The open then fails on a missing file, or (a log deleted before
/// the directory was listed) could replay later writes over tables that
/// lack earlier ones. Opening again once the manifest stood still for the
/// whole open gives one point in time. Measured against a daemon flushing
/// every second or so: 12 of 511 `simd check` runs failed on a missing
/// file before this (docs/performance.md).
fn open_reader(
    db_dir: &Path,
    log: &OpenLog,
    open: impl Fn() -> std::result::Result<DB, rocksdb::Error>,
) -> std::result::Result<DB, rocksdb::Error> {
    // The manifest in use and its length: a flush or compaction appends to
    // it (or starts a new one) before it deletes any file.
    let stamp = || -> Option<(String, u64)> {
        let current = fs::read_to_string(db_dir.join("CURRENT")).ok()?;
        let name = current.trim().to_string();
        let len = fs::metadata(db_dir.join(&name)).ok()?.len();
        Some((name, len))
    };
    const ATTEMPTS: u32 = 20;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = stamp();
        log.hold();
        let opened = open();
        let raced = before.is_none() || stamp() != before;
        match opened {
            Ok(db) if !raced => {
                log.release();
                return Ok(db);
            }
            Err(e) if !raced && !e.as_ref().contains("No such file or directory") => {
                log.release();
                return Err(e);
            }
            result if attempt >= ATTEMPTS => {
                log.release();
                return result;
            }
            _ => {
                log.retried();
                std::thread::sleep(std::time::Duration::from_millis(u64::from(attempt) * 5))
            }
        }
    }
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// What the write-ahead log holds since a sequence number
/// ([`Store::keys_written_since`]): keys of two lengths, each a superset of
/// what a reader asks for (the other CFs' keys of the same length come
/// with them).
#[derive(Debug, Default)]
pub struct Written {
    /// Every 8-byte key, as u64 (big-endian): a file record's key is its
    /// id, so the file records written or deleted are among these.
    pub keys: std::collections::HashSet<u64>,
    /// The first 16 bytes of every key as long as a `content_names` key
    /// (content hash ‖ file id): every content that gained or lost a name
    /// is among these.
    pub named: std::collections::HashSet<ContentHash>,
    /// Every key that starts with `/`: each path written or deleted in
    /// `paths` is among these (a name that came, went or was renamed).
    pub paths: std::collections::HashSet<Vec<u8>>,
}

/// The length of a `content_names` key.
const CONTENT_NAME_KEY: usize = 24;

/// The smallest key greater than every key starting with `prefix`.
fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut upper = prefix.to_vec();
    while let Some(last) = upper.pop() {
        if last != 0xff {
            upper.push(last + 1);
            return Some(upper);
        }
    }
    None
}

/// The writer's lock of an index, held without opening the index for
/// writing (see [`lock_writer`]); released when dropped, or handed to the
/// writer ([`Store::open_writer`]).
pub struct WriterLock {
    file: File,
}

/// Takes the writer's lock of the index at `dir` (which must exist), as a
/// writer's open would, failing the same way when another process holds
/// it: a caller that reads first can then be sure nothing changes the
/// index until it writes (a second lock taken in the same process would
/// conflict: hand this one over).
pub fn lock_writer(dir: &Path) -> Result<WriterLock> {
    Ok(WriterLock { file: take_lock(dir)? })
}

/// The process that holds the writer's lock of the index at `dir` (a
/// `simd index`, `reread` or `forget` run, or a daemon), if one does: read
/// from the kernel's table of file locks, `/proc/locks`. Taking the lock
/// to see would make a writer starting at that instant fail with "in use".
pub fn writer_pid(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(dir.join(LOCK_FILE)).ok()?;
    // The kernel's encoding of a device number (glibc's gnu_dev_major and
    // gnu_dev_minor), as /proc/locks prints it: `fe:00:10117130`.
    let dev = m.dev();
    let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff));
    let want = format!("{major:02x}:{minor:02x}:{}", m.ino());
    // "1: FLOCK  ADVISORY  WRITE 32242 fe:00:10117130 0 EOF"; a waiter's
    // line has "->" after its number.
    fs::read_to_string("/proc/locks").ok()?.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let held = f.get(1) == Some(&"FLOCK") && f.get(3) == Some(&"WRITE") && f.get(5) == Some(&want.as_str());
        held.then(|| f.get(4)?.parse().ok()).flatten()
    })
}

fn take_lock(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let io = |source| StoreError::Io { path: path.clone(), source };
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(StoreError::InUse {
                dir: dir.to_path_buf(),
                pid: if pid.is_empty() { "unknown".into() } else { pid.to_string() },
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "{}", std::process::id()).map_err(io)?;
    Ok(file)
}

/// Lowercase hex of bytes, for messages.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A typed iterator over one CF (or a prefix of it), in key order.
pub struct TableIter<'a, T: Table, V = <T as Table>::Value> {
    store: &'a Store,
    inner: rocksdb::DBRawIterator<'a>,
    /// The value's decoder: the table's own, or one that reads part of it
    /// ([`Store::scan_postings`]).
    decode: fn(&[u8]) -> std::result::Result<V, DecodeError>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Table, V> Iterator for TableIter<'_, T, V> {
    type Item = Result<(T::Key, V)>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.inner.valid() {
            return self.inner.status().err().map(|e| Err(self.store.rocks(e)));
        }
        let (k, v) = (self.inner.key()?, self.inner.value()?);
        let item = match (T::decode_key(k), (self.decode)(v)) {
            (Ok(k), Ok(v)) => Ok((k, v)),
            (Err(e), _) | (_, Err(e)) => Err(self.store.corrupt_raw::<T>(k, e)),
        };
        self.inner.next();
        Some(item)
    }
}

/// See [`Store::name_probe`].
pub struct NameProbe<'a> {
    store: &'a Store,
    inner: rocksdb::DBRawIterator<'a>,
}

impl NameProbe<'_> {
    /// Whether `content` has a name (file id) for which `wanted` holds.
    pub fn any_name(&mut self, content: &ContentHash, mut wanted: impl FnMut(FileId) -> bool) -> Result<bool> {
        self.inner.seek(content.0);
        while let Some(k) = self.inner.key().filter(|k| k.starts_with(&content.0)) {
            let (_, id) = ContentNames::decode_key(k).map_err(|e| self.store.corrupt_raw::<ContentNames>(k, e))?;
            if wanted(id) {
                return Ok(true);
            }
            self.inner.next();
        }
        self.inner.status().map_err(|e| self.store.rocks(e))?;
        Ok(false)
    }
}

/// One decoded (key, value) of a table.
type Entry<T> = (<T as Table>::Key, <T as Table>::Value);

/// The postings column families: written in hash order, read by scans.
const POSTINGS_CFS: [&str; 2] = [ChunkContents::NAME, SketchContents::NAME];

/// The length of a postings CF's prefix (its chunk key, its sample), by
/// which it is looked up and filtered.
fn posting_prefix(name: &str) -> Option<usize> {
    match name {
        n if n == ChunkContents::NAME => Some(8),
        n if n == SketchContents::NAME => Some(4),
        _ => None,
    }
}

/// Column families a bulk load ([`Store::is_bulk`]) writes in no key order
/// and does not read until its end: `content_chunks` stays a skiplist,
/// since readers may ask it whether a content is known, and `meta` and
/// `history` are small. `files` and `content_by_id` are keyed by ids
/// given in increasing order, which a skiplist appends at its end cheaper
/// than a vector's sort at the flush (a first index −1 to −2 % CPU,
/// session 22).
const BULK_VECTOR_CFS: [&str; 2] = [Paths::NAME, ContentNames::NAME];

/// Where a bulk load's postings wait, as table files, until the run ends.
const SPILL_DIR: &str = "postings.tmp";

/// Bytes of postings a bulk load holds in memory before a thread writes
/// them out as table files (24 bytes a chunk posting, 16 a sample's).
/// Small runs leave little for the end of the load to write: the
/// generated corpus's first index, side by side, 1.585 × md5sum with all
/// its postings written at the end (~19 MB), 1.501 × with 8 MB runs,
/// 1.471 × with 4 MB; each run is a table file of level 0 once ingested
/// (queries on 3 or 5 of them took the same time).
const SPILL_BYTES: usize = 4 << 20;

/// Runs written before they are ingested, during the load.
const INGEST_RUNS: usize = 8;

/// A run's table file, with the column family it is for.
type RunFile = (&'static str, PathBuf);

/// The postings of a bulk load ([`Store::is_bulk`]), kept out of the
/// memtables. They come in no key order: a vector memtable sorted them at
/// each flush, and those flushes and the last one, which a run waits for,
/// were about a quarter of a first index of mostly distinct files. Here
/// they are sorted as plain numbers, and a thread writes each run as a
/// table file while the run goes on; its end ingests them
/// ([`Store::ingest_postings`]).
///
/// Until then the index records `postings_pending` in `meta`: a bulk load
/// killed before its end leaves contents without their postings, and
/// whoever opens the index next rebuilds them from the chunk lists
/// ([`Store::rebuild_postings`]).
pub struct PostingSpill {
    dir: PathBuf,
    /// (chunk key, content id, count, length).
    chunks: Vec<(u64, u64, u32, u32)>,
    /// (sample, content id).
    samples: Vec<(u32, u64)>,
    /// Contents added, then dropped (their last name went in the same
    /// run): their postings are deleted once the runs are in.
    dropped: HashMap<u64, ContentPostings>,
    /// Table files written, with their column family.
    files: Vec<RunFile>,
    /// Runs started.
    runs: usize,
    /// The run being written.
    writing: Option<std::thread::JoinHandle<Result<Vec<RunFile>>>>,
    /// Bytes held before a run is written: [`SPILL_BYTES`], unless the
    /// environment sets `SIMD_TEST_SPILL_KB` (the crash tests make runs
    /// small, so that kills land while some are on disk).
    limit: usize,
}

impl PostingSpill {
    /// A spill writing its runs into `dir`, made if missing.
    fn new(dir: PathBuf) -> Result<PostingSpill> {
        fs::create_dir_all(&dir).map_err(|source| StoreError::Io { path: dir.clone(), source })?;
        Ok(PostingSpill {
            dir,
            chunks: Vec::new(),
            samples: Vec::new(),
            dropped: HashMap::default(),
            files: Vec::new(),
            runs: 0,
            writing: None,
            limit: crate::test_setting("SIMD_TEST_SPILL_KB").map_or(SPILL_BYTES, |kb| (kb as usize) << 10),
        })
    }

    fn add(&mut self, record: &ContentRecord) {
        let id = record.id.0;
        self.dropped.remove(&id);
        for (chunk, len, count) in record.chunk_counts() {
            self.chunks.push((chunk.0, id, count, len));
        }
        for &s in record.sketch.posted() {
            self.samples.push((s, id));
        }
    }

    /// Takes out the postings of a content added before.
    pub fn remove(&mut self, record: ContentPostings) {
        self.dropped.insert(record.id.0, record);
    }

    /// Starts writing what it holds; the run before is waited for, so at
    /// most two are in memory.
    pub fn spill(&mut self) -> Result<()> {
        self.wait()?;
        if self.chunks.is_empty() && self.samples.is_empty() {
            return Ok(());
        }
        let (chunks, samples) = (std::mem::take(&mut self.chunks), std::mem::take(&mut self.samples));
        let (dir, run) = (self.dir.clone(), self.runs);
        self.runs += 1;
        self.writing = Some(std::thread::spawn(move || write_run(&dir, run, chunks, samples)));
        Ok(())
    }

    /// Waits for the run being written.
    fn wait(&mut self) -> Result<()> {
        if let Some(w) = self.writing.take() {
            let files = w.join().unwrap_or_else(|_| {
                Err(StoreError::Io {
                    path: self.dir.clone(),
                    source: std::io::Error::other("the postings' writer panicked"),
                })
            })?;
            self.files.extend(files);
        }
        Ok(())
    }
}

/// The options a postings run is written with: its column family's, but
/// LZ4 where the column family has zstd. A first index writes every
/// posting once in a run, on the critical path, and zstd's block tables
/// were ~2.6 % of the generated corpus's first index (`perf`); RocksDB
/// recompresses the runs with zstd when it compacts them, so the index
/// is larger only until then (4.72 → 4.99 % of the file bytes straight
/// after the scale-10 corpus's first index, 4.63 % once a daemon had
/// compacted it; `docs/performance.md`).
fn spill_options(name: &str, cache: &Cache) -> Options {
    let mut opts = cf_options(&Options::default(), name, cache, Access::Write, true);
    opts.set_compression_type(DBCompressionType::Lz4);
    // At RocksDB's default level (32767): the column family's level 1,
    // meant for zstd, makes RocksDB's LZ4 its slower "mid" mode (lz4hc.c's
    // LZ4MID_compress: 50M instructions where plain LZ4 took 29M, callgrind,
    // scale-1 corpus).
    opts.set_compression_options(-14, 32767, 0, 0);
    opts
}

/// Writes one run of postings, sorted, as a table file per column family
/// in `dir` (the index's [`SPILL_DIR`]).
fn write_run(
    dir: &Path,
    run: usize,
    mut chunks: Vec<(u64, u64, u32, u32)>,
    mut samples: Vec<(u32, u64)>,
) -> Result<Vec<RunFile>> {
    let rocks = |source| StoreError::Rocks { dir: dir.to_path_buf(), source };
    let cache = Cache::new_lru_cache(1 << 20);
    let mut files = Vec::new();
    let (mut key, mut value) = (Vec::new(), Vec::new());
    // A content's postings are added once per name it gains from having
    // none: twice when it lost its last name and gained one again.
    chunks.sort_unstable_by_key(|&(c, id, _, _)| (c, id));
    chunks.dedup_by_key(|&mut (c, id, _, _)| (c, id));
    samples.sort_unstable();
    samples.dedup();
    if !chunks.is_empty() {
        let opts = spill_options(ChunkContents::NAME, &cache);
        let path = dir.join(format!("{run}-chunks.sst"));
        let mut w = rocksdb::SstFileWriter::create(&opts);
        w.open(&path).map_err(rocks)?;
        for &(c, id, count, len) in &chunks {
            key.clear();
            value.clear();
            ChunkContents::write_key(&(ChunkKey(c), ContentId(id)), &mut key);
            ChunkContents::write_value(&Posting { count, len }, &mut value);
            w.put(&key, &value).map_err(rocks)?;
        }
        w.finish().map_err(rocks)?;
        files.push((ChunkContents::NAME, path));
    }
    if !samples.is_empty() {
        let opts = spill_options(SketchContents::NAME, &cache);
        let path = dir.join(format!("{run}-samples.sst"));
        let mut w = rocksdb::SstFileWriter::create(&opts);
        w.open(&path).map_err(rocks)?;
        value.clear();
        SketchContents::write_value(&(), &mut value);
        for &(sample, id) in &samples {
            key.clear();
            SketchContents::write_key(&(sample, ContentId(id)), &mut key);
            w.put(&key, &value).map_err(rocks)?;
        }
        w.finish().map_err(rocks)?;
        files.push((SketchContents::NAME, path));
    }
    Ok(files)
}

/// The tables a report scans whole (names, live contents, content ids).
const REPORT_SCANNED_CFS: [&str; 4] = [Files::NAME, ContentNames::NAME, ContentById::NAME, Paths::NAME];

/// Column families read only by prefix scans (no Bloom filter).
const PREFIX_SCANNED_CFS: [&str; 4] = [ChunkContents::NAME, SketchContents::NAME, ContentNames::NAME, History::NAME];

/// Typed writes collected for one atomic [`Store::write`].
pub struct Batch<'a> {
    store: &'a Store,
    inner: WriteBatch,
    ops: usize,
    // Encoding buffers reused across puts: a batch can hold 100k keys.
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Batch<'_> {
    pub fn put<T: Table>(&mut self, key: &T::Key, value: &T::Value) {
        self.key.clear();
        self.value.clear();
        T::write_key(key, &mut self.key);
        T::write_value(value, &mut self.value);
        self.inner.put_cf(self.store.cf(T::NAME), &self.key, &self.value);
        self.ops += 1;
    }

    /// Puts a value already encoded as `T` stores it (from
    /// [`Store::get_stored`], changed by `T`'s own codec).
    pub fn put_stored<T: Table>(&mut self, key: &T::Key, value: &[u8]) {
        self.key.clear();
        T::write_key(key, &mut self.key);
        self.inner.put_cf(self.store.cf(T::NAME), &self.key, value);
        self.ops += 1;
    }

    pub fn delete<T: Table>(&mut self, key: &T::Key) {
        self.key.clear();
        T::write_key(key, &mut self.key);
        self.inner.delete_cf(self.store.cf(T::NAME), &self.key);
        self.ops += 1;
    }

    /// Number of puts and deletes so far.
    pub fn len(&self) -> usize {
        self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bounds() {
        assert_eq!(prefix_upper_bound(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_upper_bound(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_upper_bound(&[0xff, 0xff]), None);
        assert_eq!(prefix_upper_bound(b""), None);
    }

    #[test]
    fn create_reopen_and_refuse_other_params() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        {
            let s = Store::open(&dir, Access::Write, None).unwrap();
            assert_eq!(s.params(), &ChunkParams::default());
        }
        let s = Store::open(&dir, Access::Write, Some(ChunkParams::default())).unwrap();
        drop(s);
        let other = ChunkParams::for_average(100).unwrap();
        let err = Store::open(&dir, Access::Write, Some(other)).err().unwrap();
        assert!(matches!(err, StoreError::ParamsMismatch { .. }), "{err}");
        assert!(err.to_string().contains("Tmin 460") && err.to_string().contains("Tmin 46 "), "{err}");
    }

    /// What is written but not flushed is in the write-ahead log, which
    /// `wal_size` counts, part of `disk_size`; once flushed, RocksDB
    /// deletes that log (from its flush thread, just after the flush is
    /// done: so it is waited for).
    #[test]
    fn the_write_ahead_log_is_counted_until_a_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(&tmp.path().join("idx"), Access::Write, None).unwrap();
        let flushed_below = |bytes: u64| {
            s.flush().unwrap();
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while s.wal_size() >= bytes {
                assert!(std::time::Instant::now() < until, "{} bytes of log after a flush", s.wal_size());
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        flushed_below(1);
        let mut b = s.batch();
        for n in 0..1000u64 {
            b.put::<History>(
                &(format!("/r/{n}").into_bytes(), 1),
                &HistoryRecord::Moved { to: vec![b'x'; 100], content: None },
            );
        }
        s.write(b).unwrap();
        let wal = s.wal_size();
        assert!(wal > 100_000 && wal < s.disk_size(), "{wal}");
        flushed_below(1);
    }

    /// The file records written since a sequence number are among the keys
    /// the write-ahead log gives, its flushed part (kept in `archive/`)
    /// too, to a reader as to the writer; a store whose writes skipped the
    /// log (a bulk load) says it cannot tell.
    #[test]
    fn the_write_ahead_log_tells_which_keys_were_written_since() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let s = Store::open(&dir, Access::Write, None).unwrap();
        let put = |ids: &[u64]| {
            let mut b = s.batch();
            for &id in ids {
                let rec = FileRecord {
                    path: format!("/r/{id}").into_bytes(),
                    size: id,
                    mtime: 1,
                    inode: id,
                    content: ContentHash([id as u8; 16]),
                    dev: 1,
                };
                b.put::<Files>(&FileId(id), &rec);
                b.put::<ContentNames>(&(rec.content, FileId(id)), &());
            }
            s.write(b).unwrap();
        };
        put(&[1]);
        let since = s.sequence();
        put(&[7, 9]);
        s.flush().unwrap();
        put(&[11]);
        let mut b = s.batch();
        b.delete::<ContentNames>(&(ContentHash([12; 16]), FileId(12)));
        s.write(b).unwrap();
        let now = s.sequence();
        for store in [&s, &Store::open(&dir, Access::Read, None).unwrap()] {
            let w = store.keys_written_since(since).unwrap();
            assert!([7, 9, 11].iter().all(|k| w.keys.contains(k)), "{w:?}");
            let named = |ids: &[u8]| ids.iter().all(|&i| w.named.contains(&ContentHash([i; 16])));
            assert!(named(&[7, 9, 11, 12]), "{w:?}");
            let last = store.keys_written_since(now - 1).unwrap();
            assert!(last.named.contains(&ContentHash([12; 16])), "{last:?}");
            let now = store.keys_written_since(now).unwrap();
            assert!(now.keys.is_empty() && now.named.is_empty());
        }
        // RocksDB moves the flushed log from its flush thread, just after
        // the flush: waited for.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while s.wal_archive_size() == 0 {
            assert!(std::time::Instant::now() < until, "no flushed log kept");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }

        let built = Store::open_build(&tmp.path().join("built"), None).unwrap();
        assert!(built.is_bulk());
        let before = built.sequence();
        let mut b = built.batch();
        b.put::<History>(&(b"/r/x".to_vec(), 1), &HistoryRecord::Moved { to: b"/r/y".to_vec(), content: None });
        built.write(b).unwrap();
        assert!(built.keys_written_since(before).is_none(), "a write without the log is a gap");
    }

    /// A reader's open that the writer's flush overtook is tried again,
    /// and what RocksDB said during it (an error about a file the writer
    /// deleted, standing in here for RocksDB's callback) goes to debug;
    /// what the open that stands says keeps its level.
    #[test]
    fn a_reader_open_tried_again_keeps_its_complaints_at_debug() {
        #[derive(Clone, Default)]
        struct Out(Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Out {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let writer = Store::open(&dir, Access::Write, None).unwrap();
        let db_dir = dir.join(DB_DIR);
        let out = Out::default();
        let sink = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let log = OpenLog::default();
        let calls = std::cell::Cell::new(0);
        let opened = tracing::subscriber::with_default(subscriber, || {
            open_reader(&db_dir, &log, || {
                calls.set(calls.get() + 1);
                let first = calls.get() == 1;
                log.log(first, if first { "a log file the writer deleted" } else { "a warning that stands" });
                let cfs = ALL_CFS.iter().map(|&n| ColumnFamilyDescriptor::new(n, Options::default()));
                let db = DB::open_cf_descriptors_read_only(&Options::default(), &db_dir, cfs, false);
                if first {
                    // The writer flushes meanwhile: its manifest moves on.
                    let mut b = writer.batch();
                    b.put::<History>(
                        &(b"/r/x".to_vec(), 1),
                        &HistoryRecord::Moved { to: b"/r/y".to_vec(), content: None },
                    );
                    writer.write(b).unwrap();
                    writer.flush().unwrap();
                }
                db
            })
        });
        assert!(opened.is_ok());
        assert_eq!(calls.get(), 2, "the overtaken open is tried again");
        let out = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let line =
            |what: &str| out.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}: {out}")).to_string();
        assert!(line("a log file the writer deleted").contains("DEBUG"), "{out}");
        assert!(line("a warning that stands").contains("WARN"), "{out}");
        assert!(!out.contains("ERROR"), "{out}");
        // Once the open stands, nothing more is held.
        tracing::subscriber::with_default(tracing_subscriber::fmt().with_writer(std::io::sink).finish(), || {
            log.log(true, "later")
        });
        assert!(log.held().is_none());
    }

    #[test]
    fn a_store_knows_when_its_directory_is_removed_or_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let s = Store::open(&dir, Access::Write, None).unwrap();
        assert!(s.in_place());
        // Its database directory replaced by another.
        fs::rename(dir.join(DB_DIR), tmp.path().join("old-db")).unwrap();
        fs::create_dir(dir.join(DB_DIR)).unwrap();
        assert!(!s.in_place());
        fs::remove_dir(dir.join(DB_DIR)).unwrap();
        fs::rename(tmp.path().join("old-db"), dir.join(DB_DIR)).unwrap();
        assert!(s.in_place(), "moved back");
        // The whole index directory removed.
        fs::remove_dir_all(&dir).unwrap();
        assert!(!s.in_place());
    }

    #[test]
    fn an_interrupted_creation_is_discarded_not_taken_for_an_index() {
        let tmp = tempfile::tempdir().unwrap();
        // What a crash during creation leaves: the lock and a half-built database.
        fs::write(tmp.path().join(LOCK_FILE), "12345").unwrap();
        let partial = tmp.path().join(CREATING_DIR);
        fs::create_dir(&partial).unwrap();
        fs::write(partial.join("CURRENT"), "MANIFEST-000001\n").unwrap();
        fs::write(partial.join("000004.log"), b"torn").unwrap();
        // Readers see no index yet; the next writer creates it cleanly.
        assert!(matches!(Store::open(tmp.path(), Access::Read, None), Err(StoreError::Missing { .. })));
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        assert_eq!(s.format().schema_version, SCHEMA_VERSION);
        assert!(!partial.exists());
        drop(s);
        Store::open(tmp.path(), Access::Read, None).unwrap();
    }

    #[test]
    fn second_writer_is_told_the_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let _first = Store::open(tmp.path(), Access::Write, None).unwrap();
        let err = Store::open(tmp.path(), Access::Write, None).err().unwrap();
        assert!(err.to_string().contains(&format!("in use by pid {}", std::process::id())), "{err}");
        // Readers are not locked out.
        Store::open(tmp.path(), Access::Read, None).unwrap();
    }

    #[test]
    fn foreign_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("notes.txt"), "mine").unwrap();
        let err = Store::open(tmp.path(), Access::Write, None).err().unwrap();
        assert!(matches!(err, StoreError::NotAnIndex { .. }), "{err}");
        assert_eq!(fs::read(tmp.path().join("notes.txt")).unwrap(), b"mine");
        let err = Store::open(&tmp.path().join("nothing"), Access::Read, None).err().unwrap();
        assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    }

    #[test]
    fn runs_that_add_keys_after_all_others_leave_one_table_file_not_one_each() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        let tables = |s: &Store| s.table_sizes().unwrap().into_iter().find(|t| t.0 == ContentById::NAME).unwrap();
        let hash = |i: u64| ContentHash([i as u8; 16]);
        // What a run that adds one new content does to `content_by_id`.
        let run = |i: u64| {
            let mut b = s.batch();
            b.put::<ContentById>(&ContentId(i), &hash(i));
            s.write(b).unwrap();
            s.flush().unwrap();
        };
        // `tidy` leaves the files alone while RocksDB compacts (it waits
        // 100 ms for it), which it may still do under a loaded test run
        // (CI once found 7 files left): the test waits for RocksDB first.
        let idle = |s: &Store| s.db.wait_for_compact(&rocksdb::WaitForCompactOptions::default()).unwrap();
        for i in 0..12 {
            run(i);
        }
        // RocksDB keeps each flush's file as it is (the hazard `tidy` is
        // for): the latest ones in level 0 until four are there, then in
        // the last level, each on its own.
        idle(&s);
        assert!(tables(&s).2 >= 10, "{:?}", tables(&s));
        let bytes = tables(&s).1;
        assert!(s.tidy().unwrap() >= 6);
        // One file, and those still in level 0 (three at most).
        assert!(tables(&s).2 <= 4, "{:?}", tables(&s));
        assert!(tables(&s).1 < bytes, "{} then {:?}", bytes, tables(&s));
        // Nothing more to merge until more than four small files are back.
        idle(&s);
        assert_eq!(s.tidy().unwrap(), 0);
        for i in 12..40 {
            run(i);
            idle(&s);
            s.tidy().unwrap();
            assert!(tables(&s).2 <= 8, "{:?}", tables(&s));
        }
        for i in 0..40 {
            assert_eq!(s.get::<ContentById>(&ContentId(i)).unwrap(), Some(hash(i)));
        }
        assert_eq!(s.scan::<ContentById>().count(), 40);
    }

    #[test]
    fn a_writer_that_flushes_often_starts_its_manifest_again() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        let db = tmp.path().join(DB_DIR);
        let manifest = || {
            let name = fs::read_to_string(db.join("CURRENT")).unwrap().trim().to_string();
            let len = fs::metadata(db.join(&name)).map_or(0, |m| m.len());
            (name, len)
        };
        let first = manifest().0;
        let mut largest = 0;
        // What a daemon does after each quiet moment: a few writes, a
        // flush, a merge of small files now and then.
        for i in 0..20_000 {
            let mut b = s.batch();
            b.put::<ContentById>(&ContentId(i), &ContentHash([i as u8; 16]));
            s.write(b).unwrap();
            s.flush().unwrap();
            s.tidy().unwrap();
            let (name, len) = manifest();
            if name != first {
                // Started again, from the index's shape (a few table files).
                assert!(len < largest, "{len} bytes after {largest}");
                assert!(largest <= (MAX_MANIFEST + (16 << 10)) as u64, "{largest} bytes before starting again");
                assert_eq!(s.scan::<ContentById>().count() as u64, i + 1);
                return;
            }
            largest = largest.max(len);
        }
        panic!("after 20,000 flushes the manifest was never started again ({largest} bytes)");
    }

    #[test]
    fn prefix_scans_stay_inside_their_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        let (a, b) = (ChunkKey(0x0101_0101_0101_0101), ChunkKey(0x0202_0202_0202_0202));
        let mut batch = s.batch();
        for (i, chunk) in [a, a, b].iter().enumerate() {
            batch.put::<ChunkContents>(&(*chunk, ContentId(i as u64 + 1)), &Posting { count: i as u32 + 1, len: 9 });
        }
        s.write(batch).unwrap();
        let none = ChunkKey(u64::MAX);
        let got = s.postings_of(&[a, b, none], 10).unwrap();
        let counts: Vec<Vec<_>> = got.iter().map(|h| h.iter().map(|(c, p)| (*c, p.count)).collect()).collect();
        assert_eq!(counts, vec![vec![(ContentId(1), 1), (ContentId(2), 2)], vec![(ContentId(3), 3)], vec![]]);
        // At most cap + 1 each: enough to tell a chunk over the cap.
        assert_eq!(s.postings_of(&[a, b], 0).unwrap().iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1]);
        // The same degrees, counted.
        assert_eq!(s.chunks_over(&[a, b, none], 0).unwrap(), vec![true, true, false]);
        assert_eq!(s.chunks_over(&[a, b, none], 1).unwrap(), vec![true, false, false]);
        assert_eq!(s.chunks_over(&[a, b, none], 2).unwrap(), vec![false, false, false]);
    }

    #[test]
    fn range_scans_split_a_table_without_gaps_or_overlaps() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        let chunks = [0u64, 1, 0x7fff_ffff_ffff_ffff, 1 << 63, (1 << 63) + 1, u64::MAX];
        let mut batch = s.batch();
        for (i, &c) in chunks.iter().enumerate() {
            for content in 1..=2 {
                batch.put::<ChunkContents>(&(ChunkKey(c), ContentId(content)), &Posting { count: i as u32, len: 9 });
            }
        }
        s.write(batch).unwrap();
        let keys = |from: Option<u64>, before: Option<u64>| -> Vec<(u64, u64)> {
            let key = |c: Option<u64>| c.map(|c| (ChunkKey(c), ContentId(0)));
            s.scan_range::<ChunkContents>(key(from).as_ref(), key(before).as_ref())
                .map(|item| item.map(|((c, id), _)| (c.0, id.0)).unwrap())
                .collect()
        };
        let whole = keys(None, None);
        assert_eq!(whole.len(), 12);
        for mid in [0, 1, 1 << 63, u64::MAX] {
            let (low, high) = (keys(None, Some(mid)), keys(Some(mid), None));
            assert!(low.iter().all(|&(c, _)| c < mid) && high.iter().all(|&(c, _)| c >= mid), "split at {mid:#x}");
            assert_eq!([low, high].concat(), whole, "split at {mid:#x}");
        }
        assert_eq!(
            keys(Some(1), Some(1 << 63)),
            vec![(1, 1), (1, 2), (0x7fff_ffff_ffff_ffff, 1), (0x7fff_ffff_ffff_ffff, 2)]
        );
    }
}
