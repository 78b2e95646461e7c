//! The ingest pipeline: walk ▸ bounded channel ▸ N chunk workers ▸ one
//! writer ▸ RocksDB, and the writer's rules for keeping the file-chunk graph
//! consistent.
//!
//! **Invariant**: one file's update (its record, its content's chunk list and
//! postings when the content gains its first name, the content-hash → names
//! entry, history) is one WriteBatch, so readers never see half a file and a
//! crash at any moment leaves the index consistent.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use crate::fingerprint::{
    fingerprint_file, fingerprint_many, ContentHash, Earlier, Fingerprint, Lookup, Prior, PriorRecord, WholeFrom,
};
use crate::scan::{
    self, is_under, is_under_any, path_bytes, Candidate, HashMap, HashSet, SkipReason, Stat, WalkOptions,
};
use crate::store::{
    Batch, ChunkContents, ContentById, ContentChunks, ContentId, ContentNames, ContentPostings, ContentRecord, Counts,
    Expiry, FileId, FileRecord, Files, History, HistoryRecord, Mark, Meta, MetaKey, MetaValue, NameProbe, Paths,
    Posting, PostingSpill, SketchContents, Store, StoreError, TimeNs, WriterLock, SCHEMA_VERSION,
};

/// How many times a file that changes while being read is read again.
const READ_ATTEMPTS: usize = 3;
/// Candidates and results in flight between stages: bounds memory.
const QUEUE: usize = 256;

/// What ingest can fail with (as opposed to per-file problems, which are
/// skips in the summary).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", crate::show_path(.path))]
    Root { path: PathBuf, source: std::io::Error },
    #[error("{}: not a directory", crate::show_path(.path))]
    RootNotDir { path: PathBuf },
    #[error("bad --exclude pattern: {0}")]
    Pattern(#[from] ignore::Error),
    #[error("no roots: give one or more directories to index")]
    NoRoots,
    #[error("{}: not a root of the index; {hint}", crate::show_path(.path))]
    NotARoot { path: PathBuf, hint: String },
    #[error(
        "{}: on a {fstype} file system, whose files the kernel makes as they are read (their sizes are not their \
         contents): not indexed",
        crate::show_path(path)
    )]
    KernelRoot { path: PathBuf, fstype: String },
}

/// Options of one `simd index` run.
#[derive(Clone, Debug, Default)]
pub struct IndexOptions {
    pub roots: Vec<PathBuf>,
    pub walk: WalkOptions,
    /// Chunk workers (0: one per core).
    pub workers: usize,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// How long and how much lost-and-found history is kept.
    pub retention: Retention,
    /// Whether a root given in `roots` may be missing, as a remembered
    /// root may (the daemon's rescans: a root deleted, moved away or
    /// unmounted while it runs must not stop it).
    pub tolerate_missing: bool,
    /// Roots whose files are kept when the run does not see them: one of
    /// these that is missing is not walked (nor taken as emptied), and
    /// what the index holds under one that is there but lacks a file
    /// stays. The daemon's grace for a root that went away or was
    /// replaced (`simd watch --root-grace`): a share unmounted for a
    /// while, or a tree moved out and back, is not recorded as removed
    /// and then read again whole.
    pub spared: Vec<PathBuf>,
    /// Set (by SIGINT, SIGTERM or SIGHUP) to stop a full run early: what was read
    /// is written and flushed, nothing is recorded as removed, and the
    /// next run goes on from there.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Contents this large keep no chunk list.
    pub whole_from: WholeFrom,
}

/// Lost-and-found retention: history records older than `max_age_days`, and
/// the oldest beyond `max_records`, expire at the end of a run that changed
/// something, as does each record of a path older than the path's newest
/// (nothing reads it); a kept chunk list goes with the last record
/// referring to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub max_age_days: u64,
    pub max_records: usize,
}

impl IndexOptions {
    /// Whether the run was asked to stop ([`IndexOptions::interrupt`]).
    fn stopping(&self) -> bool {
        self.interrupt.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_age_days: 90, max_records: 100_000 }
    }
}

/// What one run did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Stopped early ([`IndexOptions::interrupt`]): the files read are
    /// indexed, the rest (and removals) wait for the next run.
    pub interrupted: bool,
    /// The roots walked.
    pub roots: Vec<PathBuf>,
    /// Roots that do not exist (or are no longer directories): treated as
    /// empty, their files recorded as removed.
    pub missing_roots: Vec<PathBuf>,
    pub new: u64,
    pub changed: u64,
    pub unchanged: u64,
    pub removed: u64,
    /// Files gone whose content appeared at a new path in the same pass.
    pub moved: u64,
    /// Files still in place that an exclude or an ignore file now leaves
    /// out: out of the index, without ghosts.
    pub left_out: u64,
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Paths skipped (first few per reason) for the report.
    pub skipped_examples: Vec<(PathBuf, SkipReason)>,
    /// The first few paths read as new or changed, for a message (the
    /// daemon's periodic rescan says what it found that raised no event).
    pub read_examples: Vec<PathBuf>,
    pub bytes_read: u64,
    pub bytes_unchanged: u64,
    pub new_contents: u64,
    /// Files read whole ([`WholeFrom`]): no chunk list kept.
    pub whole: u64,
    /// Names of a file read under another name in this run, not read
    /// again ([`Linked`]).
    pub shared: u64,
    /// Files read although their size, mtime and inode were as recorded
    /// ([`WalkOptions::reread`]); those whose bytes were as indexed are
    /// counted unchanged too, the others changed.
    pub reread: u64,
    /// Of those, the files whose bytes were not the content the index
    /// held for them: now indexed as they are.
    pub reread_differed: u64,
    pub elapsed: Duration,
}

impl Summary {
    /// The paths kept as examples of files skipped for `reason`, as
    /// messages print paths.
    pub fn skipped_examples_of(&self, reason: SkipReason) -> Vec<String> {
        self.skipped_paths_of(reason).map(|p| crate::report_path(&path_bytes(p))).collect()
    }

    /// The same paths as they are.
    pub fn skipped_paths_of(&self, reason: SkipReason) -> impl Iterator<Item = &Path> {
        self.skipped_examples.iter().filter(move |(_, r)| *r == reason).map(|(p, _)| p.as_path())
    }

    pub fn throughput_mb_s(&self) -> f64 {
        self.bytes_read as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Result of reading one candidate.
enum Outcome {
    /// `unseen`: the reader asked the index for the content's record and it
    /// had none (a content streamed through is sketched without asking).
    ///
    /// `old_record`: what taking the postings of the file's former content
    /// out needs of its record, fetched when the candidate asked for it
    /// ([`Candidate::fetch_old`]), or read anyway as the prior of a grown
    /// file, and the content changed.
    ///
    /// `shared`: the fingerprint is another name's of the same file, read
    /// in this run ([`Linked`]): this name was not read.
    Read {
        cand: Candidate,
        stat: Stat,
        fp: Fingerprint,
        unseen: bool,
        old_record: Option<Box<Fetched>>,
        shared: bool,
        /// The file's mtime is so close to when its read began that a
        /// later write in the same tick of its file system's clock would
        /// leave its stat as recorded ([`racy`]): the record is written so
        /// that the next scan reads the file again.
        racy: bool,
    },
    Skip {
        cand: Candidate,
        reason: SkipReason,
        detail: String,
    },
    Vanished {
        cand: Candidate,
    },
    /// The open file's stat equals the candidate's record: not read.
    Unchanged {
        cand: Candidate,
    },
    /// Large enough to be read beside the batch ([`Background`]), not in
    /// it. Closed again: the [`Background`] reader that takes it opens it,
    /// so that a burst of large files waiting for their turn holds no file
    /// descriptors (a thousand videos copied in would otherwise have run
    /// the process out of them, under systemd's soft limit of 1,024).
    Deferred(Candidate),
}

/// Makes roots absolute and canonical, checking each is a directory; a
/// root inside another is walked as part of it, unless `one_file_system`
/// keeps that walk from reaching it (it is on another device).
pub fn canonical_roots(roots: &[PathBuf], one_file_system: bool) -> Result<Vec<PathBuf>, IngestError> {
    let mut out = Vec::new();
    let mut mounts = None;
    for r in roots {
        let c = r.canonicalize().map_err(|source| IngestError::Root { path: r.clone(), source })?;
        if !c.is_dir() {
            return Err(IngestError::RootNotDir { path: r.clone() });
        }
        // The kernel's own file systems hold no documents, and their
        // files' sizes say nothing of what a read gives (/proc's were
        // indexed as empty, sysfs's as changing while read).
        let mounts = mounts.get_or_insert_with(crate::mounts::read_table);
        if let Some(fstype) = crate::mounts::fs_type(mounts, &c).filter(|t| crate::mounts::is_kernel(t)) {
            return Err(IngestError::KernelRoot { path: c, fstype: fstype.to_string() });
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    // A root inside another would be walked twice: each file under it would
    // be looked up and written twice within one run. Under `-x` the outer
    // walk stops at another file system's mount point: a root there is
    // walked on its own, or it was never walked at all (its files counted
    // as left out, and taken out of the index).
    let all = out.clone();
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    out.retain(|r| !all.iter().any(|o| o != r && r.starts_with(o) && !(one_file_system && device(o) != device(r))));
    Ok(out)
}

/// Indexes `opts.roots` into `store`: reads only new or changed files, and
/// records files that are gone as deleted.
pub fn index(store: &Store, opts: &IndexOptions) -> Result<Summary, IngestError> {
    let (summary, unread) = index_with(store, opts, None)?;
    debug_assert!(unread.is_empty(), "nothing is deferred");
    Ok(summary)
}

/// [`index`], but the files the index holds that changed and are now
/// `defer_from` bytes or more are left unread, for a [`Background`]
/// reader: the daemon's scans, whose events wait meanwhile (a 10 GB file
/// changed on a network root would hold every local change back for as
/// long as it takes to read). What the index holds of them stands until
/// they are read; they are not gone.
pub fn index_deferring(
    store: &Store,
    opts: &IndexOptions,
    defer_from: u64,
) -> Result<(Summary, Vec<Deferred>), IngestError> {
    index_with(store, opts, Some(defer_from))
}

fn index_with(
    store: &Store,
    opts: &IndexOptions,
    defer_from: Option<u64>,
) -> Result<(Summary, Vec<Deferred>), IngestError> {
    let start = Instant::now();
    let RunRoots { roots, missing, spared, remembered, walk: walk_opts, warnings, started } = run_roots(store, opts)?;
    for w in warnings {
        tracing::warn!("{w}");
    }

    let mut writer = Writer::new(store)?.whole_from(opts.whole_from);
    writer.seen_at = Some(crate::store::walked(store.dir()));
    remember_beside(store, &roots, remembered)?;
    // With the ids of the records under the roots, walked or missing (a
    // missing root's files are gone), for the removal pass.
    let under: Vec<Vec<u8>> = roots.iter().chain(&missing).map(|r| path_bytes(r)).collect();
    let (known, under_roots) = scan::Known::load(store, writer.counts.files, &|p| is_under_any(p, &under))?;

    let progress = Progress::new(opts.progress);
    let workers = if opts.workers == 0 { available_cores() } else { opts.workers };
    let (cand_tx, cand_rx) = bounded::<Vec<Candidate>>(QUEUE / scan::WALK_BATCH);
    let (out_tx, out_rx) = bounded::<Outcome>(QUEUE);

    let mut summary = Summary { roots: roots.clone(), missing_roots: missing.clone(), ..Summary::default() };
    let mut unread: Vec<Deferred> = Vec::new();
    // An index that held no content when the writer started: everything
    // in it from now on is written by this writer, which says what.
    let held = Arc::new(if writer.fresh { Held::complete() } else { Held::default() });
    writer.publish_to(held.clone());
    let mut walked = std::thread::scope(|s| -> Result<scan::WalkOutcome, IngestError> {
        let rules =
            ReaderRules { stop: opts.interrupt.as_deref(), defer_from, defer_new: false, whole_from: opts.whole_from };
        spawn_readers(s, store, &held, workers, cand_rx, out_tx, rules);
        let walker = s.spawn(|| {
            let r = scan::walk(store, &roots, &walk_opts, scan::Records::Ready(&known), &cand_tx);
            drop(cand_tx);
            tracing::debug!("walk done after {:?}", start.elapsed());
            r
        });
        // This thread is the writer. It groups files into one write while
        // results keep coming, and commits whenever it would otherwise wait
        // (a group of fewer than `SMALL_GROUP` files first waits a little
        // for more).
        let mut failed = None;
        loop {
            use crossbeam_channel::{RecvTimeoutError, TryRecvError};
            if opts.stopping() {
                summary.interrupted = true;
                break;
            }
            let outcome = match out_rx.try_recv() {
                Ok(o) => o,
                Err(TryRecvError::Empty) => {
                    let more = if writer.group.files < SMALL_GROUP {
                        out_rx.recv_timeout(SMALL_GROUP_WAIT)
                    } else {
                        Err(RecvTimeoutError::Timeout)
                    };
                    match more {
                        Ok(o) => o,
                        Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {
                            if failed.is_none() {
                                failed = writer.commit().err();
                            }
                            // Woken now and then to see whether to stop (a walk
                            // of unchanged files sends nothing for a while).
                            match out_rx.recv_timeout(Duration::from_millis(100)) {
                                Ok(o) => o,
                                Err(RecvTimeoutError::Timeout) => continue,
                                Err(RecvTimeoutError::Disconnected) => break,
                            }
                        }
                    }
                }
                Err(TryRecvError::Disconnected) => break,
            };
            if failed.is_some() {
                continue; // drain so the workers finish
            }
            if let Outcome::Deferred(cand) = outcome {
                unread.push(Deferred(cand));
                continue;
            }
            if let Err(e) = writer.apply(outcome, &mut summary, &progress) {
                failed = Some(e);
            }
        }
        if failed.is_none() {
            failed = writer.commit().err();
        }
        // Stopping early: the readers end once nobody takes what they read,
        // and the walk once nobody takes its candidates.
        drop(out_rx);
        tracing::debug!("reading and writing done after {:?}", start.elapsed());
        let walked = walker.join().expect("walker thread panicked")?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        Ok(walked)
    })?;
    // The readers are gone; the removal pass below may delete records.
    writer.publish = None;
    if let Some(e) = std::mem::take(&mut walked.store_errors).into_iter().next() {
        return Err(e.into());
    }
    if summary.interrupted {
        // What was written (all committed above) is flushed: a first index
        // writes without a WAL.
        store.flush()?;
        end_stopped(&mut summary, &walked, start);
        progress.finish();
        return Ok((summary, unread));
    }

    // A missing root holds nothing now: its files are gone. A spared
    // root's stay, as an unreadable directory's do.
    walked.unreadable_dirs.extend(spared);
    let whole = walked_whole(&roots, &walked.unreadable_dirs);
    let walked_or_missing = [roots, missing].concat();
    let unread_ids = unread.iter().filter_map(|d| d.0.old.as_ref().map(|(id, _)| *id)).collect();
    // Records written in this pass have newer ids than those loaded, and
    // nothing else wrote under the writer's lock: the records loaded are
    // every record the pass can find gone.
    let ended = RunEnd { unread: unread_ids, unseen: under_roots.map_or(Unseen::Scan, Unseen::Ids) };
    end_run(&mut writer, &mut summary, walked, ended, &walked_or_missing, opts.retention, start)?;
    crate::store::record_walk(store.dir(), &whole, started);
    progress.finish();
    store.settle_compactions(opts.interrupt.as_deref());
    Ok((summary, unread))
}

/// The roots a run's walk saw whole: every file the index holds under one
/// was found there, or recorded as gone. Not one holding a directory it
/// could not list (or spared): files kept unseen there may be gone.
fn walked_whole(roots: &[PathBuf], unseen_dirs: &[PathBuf]) -> Vec<Vec<u8>> {
    let unseen: Vec<Vec<u8>> = unseen_dirs.iter().map(|d| path_bytes(d)).collect();
    roots
        .iter()
        .map(|r| path_bytes(r))
        .filter(|r| {
            !unseen.iter().any(|d| d.strip_prefix(&r[..]).is_some_and(|rest| rest.is_empty() || rest[0] == b'/'))
        })
        .collect()
}

/// A file a daemon's batch removed, whose ghost the next batch turns into
/// a move record if a file of that batch holds its content
/// ([`Writer::remove_gone`]).
struct RecentGhost {
    id: FileId,
    rec: FileRecord,
    /// Its ghost's time (its key in `history`).
    stamp: TimeNs,
}

/// How long a removed file's ghost may still become a move record: about
/// two debounces and a batch.
const RECENT_GHOST_NS: TimeNs = 3_000_000_000;

/// What [`end_run`] is told beside the walk's outcome.
struct RunEnd {
    /// Files left unread for later: seen, not gone.
    unread: Vec<FileId>,
    /// Where the removal pass looks for the files the run did not see.
    unseen: Unseen,
}

/// Where [`Writer::remove_unseen`] looks for the files a run did not see.
enum Unseen {
    /// Among every record of `files`.
    Scan,
    /// Among these records (their ids, in id order): those under the
    /// roots, when the run loaded them all before it began and wrote
    /// none it did not see ([`prewalk`], [`index`]). Each one the run did
    /// not see is read by its id.
    Ids(Vec<FileId>),
}

/// The end of an index run, once every new or changed file is written
/// (or left unread for later): the files the walk did not see are
/// recorded as moved or gone, history expires, and the memtables are
/// flushed.
fn end_run(
    writer: &mut Writer<'_>,
    summary: &mut Summary,
    walked: scan::WalkOutcome,
    RunEnd { unread, unseen }: RunEnd,
    roots: &[PathBuf],
    retention: Retention,
    start: Instant,
) -> Result<(), IngestError> {
    // Added to what the readers found unchanged (a file that changed back
    // between the walk's stat and the open).
    summary.unchanged += walked.unchanged.len() as u64;
    summary.bytes_unchanged += walked.unchanged_bytes;
    for (path, reason) in walked.skipped {
        record_skip(summary, path, reason);
    }
    writer.record_devices(walked.devices)?;
    let mut seen = walked.unchanged;
    seen.append(&mut writer.touched);
    seen.extend(unread);
    seen.sort_unstable();
    let root_bytes: Vec<Vec<u8>> = roots.iter().map(|r| path_bytes(r)).collect();
    let kept_dirs: Vec<Vec<u8>> = walked.unreadable_dirs.iter().map(|d| path_bytes(d)).collect();
    (summary.removed, summary.moved, summary.left_out) =
        writer.remove_unseen(&seen, &root_bytes, &kept_dirs, unseen)?;
    // A moved file was read as a new path first: it is not a new file.
    summary.new = summary.new.saturating_sub(summary.moved);
    tracing::debug!("removal pass done after {:?}", start.elapsed());
    writer.finish(retention)?;
    tracing::debug!("synced after {:?}", start.elapsed());
    summary.elapsed = start.elapsed();
    Ok(())
}

/// The end of a run stopped early, with what it read written: not every
/// file was seen, so none is recorded as removed (nor moved); the next run
/// does that.
fn end_stopped(summary: &mut Summary, walked: &scan::WalkOutcome, start: Instant) {
    summary.interrupted = true;
    summary.unchanged += walked.unchanged.len() as u64;
    summary.bytes_unchanged += walked.unchanged_bytes;
    summary.elapsed = start.elapsed();
}

/// What a run walks.
struct RunRoots {
    /// The roots given, else those remembered; canonical.
    roots: Vec<PathBuf>,
    /// Roots that no longer exist (or are no longer directories), when
    /// that is tolerated: remembered ones, or given with
    /// [`IndexOptions::tolerate_missing`].
    missing: Vec<PathBuf>,
    /// Roots under which nothing is recorded as removed
    /// ([`IndexOptions::spared`]): walked if they are there (they are in
    /// `roots` then), left alone if not.
    spared: Vec<PathBuf>,
    /// The roots the index remembers.
    remembered: Vec<Vec<u8>>,
    /// The walk's options, which keep out the index directory itself.
    walk: WalkOptions,
    /// What the run that writes says about its roots (a missing one): left
    /// to it, so that a read-only walk first ([`prewalk`]), which hands
    /// such a run over, does not say it twice.
    warnings: Vec<String>,
    /// When the run began, before its walk: every file the walk finds was
    /// there then or later ([`crate::store::record_walk`]).
    started: TimeNs,
}

/// The roots a run with `opts` walks (canonical), and the remembered ones
/// that are missing, as the run will find them: what `simd watch` watches
/// before its first scan.
pub fn run_roots_of(store: &Store, opts: &IndexOptions) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
    let r = run_roots(store, opts)?;
    Ok((r.roots, r.missing))
}

/// The daemon's roots at its start, as [`run_roots_of`]: a root the index
/// remembers may be missing (a share not mounted yet at boot, even every
/// root: the daemon waits for them), but one new to the index must be
/// there, so that a mistyped root is said at once.
pub fn daemon_start_roots(store: &Store, opts: &IndexOptions) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
    let remembered = remembered_roots(store)?;
    for r in &opts.roots {
        let named = root_named(r).map_err(|source| IngestError::Root { path: r.clone(), source })?;
        if !remembered.contains(&scan::path_bytes(&named)) {
            canonical_roots(std::slice::from_ref(r), false)?;
        }
    }
    run_roots_of(store, &IndexOptions { tolerate_missing: true, ..opts.clone() })
}

fn run_roots(store: &Store, opts: &IndexOptions) -> Result<RunRoots, IngestError> {
    let started = now_ns();
    let remembered = remembered_roots(store)?;
    let roots = if opts.roots.is_empty() {
        remembered.iter().map(|r| scan::bytes_path(r)).collect()
    } else {
        opts.roots.clone()
    };
    if roots.is_empty() {
        return Err(IngestError::NoRoots);
    }
    // A remembered root that is gone (deleted, moved away, unmounted) is
    // walked as an empty one, with a warning: one missing root must not
    // stop the others from being indexed, nor a daemon's rescans. When
    // every one is gone, nothing is done (a disk not mounted should not
    // empty the index). A root given on the command line must exist.
    let tolerate = opts.roots.is_empty() || opts.tolerate_missing;
    let (mut present, mut missing, mut spared) = (Vec::new(), Vec::new(), Vec::new());
    let mut warnings = Vec::new();
    // Roots taken as missing because nothing is mounted there, and why.
    let mut bare_roots: Vec<(PathBuf, String)> = Vec::new();
    for r in roots {
        let result = canonical_roots(std::slice::from_ref(&r), false);
        // A remembered root is kept as its real path: one that leads
        // elsewhere now (itself, or a directory above it, replaced by a
        // symlink) is not followed, as no symlink is. Followed, the
        // daemon's rescans took the link's target for a new root and
        // kept the old one's files for good (session 71). It is missing.
        let elsewhere = match &result {
            Ok(c) if tolerate && c.first() != Some(&r) && remembered.contains(&scan::path_bytes(&r)) => c.first(),
            _ => None,
        };
        if let Some(to) = elsewhere {
            let (r_shown, to) = (crate::show_path(&r), crate::show_path(to));
            let said = format!(
                "{r_shown}: this root now leads to {to} through a symlink, which simd does not follow; its files are \
                 recorded as removed (`simd index {to}` indexes where it leads, `simd forget {r_shown}` forgets this \
                 root)"
            );
            // The daemon says so once, when the root goes.
            if opts.tolerate_missing {
                tracing::debug!("{said}");
            } else {
                warnings.push(said);
            }
            if opts.spared.contains(&r) {
                spared.push(r);
            } else {
                missing.push(r);
            }
            continue;
        }
        if opts.spared.contains(&r) {
            match result {
                Ok(_) => present.push(r.clone()),
                Err(IngestError::RootNotDir { .. }) if tolerate => {}
                Err(IngestError::Root { source, .. }) if tolerate && source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            spared.push(std::path::absolute(&r).unwrap_or(r));
            continue;
        }
        // A root that is an empty directory on another file system than
        // the files indexed under it: a mount point with nothing mounted
        // (a share or disk not mounted now). Walked, it would record every
        // file of the share as removed, to read them all again once it is
        // back, and say nothing.
        let bare = match &result {
            Ok(c) => bare_mount_point(store, &c[0])?,
            Err(_) => None,
        };
        if let Some((now, was)) = bare {
            let why = format!(
                "an empty directory on another file system (device {now}) than the files indexed under it (device \
                 {was}): a file system not mounted?"
            );
            if !tolerate {
                let source = std::io::Error::other(format!(
                    "{why} nothing was changed (mount it, or `simd forget` the root if its files are gone for good)"
                ));
                return Err(IngestError::Root { path: r, source });
            }
            let said = format!("{}: {why}", crate::show_path(&r));
            if opts.tolerate_missing {
                tracing::debug!("{said}");
            } else {
                warnings.push(format!(
                    "{said} taken as missing: its files are recorded as removed, and it is indexed again once it \
                     is back (`simd forget` it if it is gone for good)"
                ));
            }
            let r = std::path::absolute(&r).unwrap_or(r);
            bare_roots.push((r.clone(), why));
            missing.push(r);
            continue;
        }
        // A root given to be indexed that cannot be listed: nothing of it
        // could be indexed, and it is not remembered. (A remembered one
        // that became unreadable keeps its files, as any unreadable
        // directory's are.)
        if let (Ok(c), false) = (&result, remembered.contains(&scan::path_bytes(&r))) {
            if let Err(source) = std::fs::read_dir(&c[0]) {
                return Err(IngestError::Root { path: r, source });
            }
        }
        match result {
            Ok(_) => present.push(r),
            Err(e @ IngestError::RootNotDir { .. }) if tolerate => {
                warnings.push(format!("{e}: this root is no longer a directory; its files are recorded as removed"));
                missing.push(std::path::absolute(&r).unwrap_or(r));
            }
            Err(IngestError::Root { path, source }) if tolerate && source.kind() == std::io::ErrorKind::NotFound => {
                let e = IngestError::Root { path, source };
                // The daemon says so once, when the root goes.
                if opts.tolerate_missing {
                    tracing::debug!("{e}: a root is missing; walked as an empty one");
                } else {
                    warnings.push(format!(
                        "{e}: this root is missing (deleted, moved away or not mounted); its files are recorded \
                         as removed, and it is indexed again once it is back (`simd forget` it if it is gone for good)"
                    ));
                }
                missing.push(std::path::absolute(&r).unwrap_or(r));
            }
            Err(e) => return Err(e),
        }
    }
    if present.is_empty() && !opts.tolerate_missing && !missing.is_empty() {
        let path = missing.swap_remove(0);
        let why = bare_roots.iter().find(|(r, _)| *r == path).map_or(String::new(), |(_, why)| format!("{why} "));
        let source = std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{why}every root of the index is missing or not mounted; nothing was changed"),
        );
        return Err(IngestError::Root { path, source });
    }
    // Under `-x`, a remembered root inside a root named for this run, on
    // a file system of its own, is walked too: the named root's walk stops
    // at its mount point, and what lies there would be counted as left
    // out (and taken out of the index) where without `-x` it is walked.
    if opts.walk.one_file_system && !opts.roots.is_empty() {
        let named: Vec<PathBuf> = present.iter().filter_map(|r| r.canonicalize().ok()).collect();
        for r in remembered.iter().map(|r| scan::bytes_path(r)) {
            if !named.contains(&r) && named.iter().any(|n| r.starts_with(n)) && r.is_dir() {
                present.push(r);
            }
        }
    }
    let roots = canonical_roots(&present, opts.walk.one_file_system)?;
    refuse_roots(store.dir(), &roots, &opts.walk.excludes)?;
    for p in scan::Excludes::outside(&opts.walk.excludes, &roots) {
        warnings.push(format!(
            "--exclude {p}: an absolute path outside every root, which matches nothing (for a path inside each \
             root at any depth, drop the leading /)"
        ));
    }
    let mut walk_opts = opts.walk.clone();
    if let Ok(own) = store.dir().canonicalize() {
        walk_opts.skip_dirs.push(own);
    }
    // Nor is one mounted inside a root entered (`simd index /` meets /proc
    // and /sys); `-x` leaves out every other file system anyway.
    if !walk_opts.one_file_system {
        let mounts = crate::mounts::read_table();
        for r in &roots {
            let inside = crate::mounts::kernel_mounts_inside(&mounts, r);
            walk_opts.kernel_dirs.extend(inside.into_iter().map(|(point, _)| point));
        }
    }
    Ok(RunRoots { roots, missing, spared, remembered, walk: walk_opts, warnings, started })
}

/// Refuses a root (canonical) that is the index directory at `dir` or
/// inside it: the index's own files would be indexed (the walk skips the
/// index directory only below a root), and stale at once under the
/// daemon, which ignores its own writes. And one that an absolute
/// exclude leaves out whole: its every file would leave the index, a
/// mistake rather than a wish (`simd forget` does that).
pub fn refuse_roots(dir: &Path, roots: &[PathBuf], excludes: &[String]) -> Result<(), IngestError> {
    if let Some(r) = dir.canonicalize().ok().and_then(|own| roots.iter().find(|r| r.starts_with(&own)).cloned()) {
        let source = std::io::Error::other("the index directory (or inside it): simd does not index its own index");
        return Err(IngestError::Root { path: r, source });
    }
    if let Some(path) = scan::Excludes::new(roots, excludes)?.and_then(|ex| ex.whole_root(roots)) {
        let source = std::io::Error::other(
            "an --exclude pattern leaves out this whole root; nothing was changed (to stop indexing it, `simd \
             forget` it)",
        );
        return Err(IngestError::Root { path, source });
    }
    Ok(())
}

/// Whether `root` (canonical) is a mount point with nothing mounted: an
/// empty directory whose device is not the one the index recorded for the
/// files under it. Returns (its device, theirs). A share mounted again
/// under a new device number is not empty, and a root emptied by hand is
/// on the device its files were.
fn bare_mount_point(store: &Store, root: &Path) -> Result<Option<(u64, u64)>, IngestError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(root) else { return Ok(None) };
    if std::fs::read_dir(root).map_or(true, |mut d| d.next().is_some()) {
        return Ok(None);
    }
    let Some(first) = store.paths_under(&scan::path_bytes(root)).next().transpose()? else { return Ok(None) };
    let Some(rec) = store.get::<Files>(&first.1)? else { return Ok(None) };
    Ok((rec.dev != 0 && rec.dev != meta.dev()).then_some((meta.dev(), rec.dev)))
}

/// At most this many changed files are collected by [`prewalk`]; past it,
/// the walk stops and [`index`] walks again with a writer (the reading then
/// dwarfs a second walk).
const PREWALK_MAX: usize = 4096;

/// What a walk with a read-only open found (see [`prewalk`]).
pub enum Prewalk {
    /// Nothing to write: the run's summary.
    Unchanged(Summary),
    /// A few files to read or records to drop: [`index_prewalked`] applies
    /// them with a writer, without walking again.
    Changed(Prewalked),
    /// Not known from a read-only walk (an empty index, one past
    /// [`scan::Known::LOAD_MAX`] files, a root not remembered yet, many
    /// changed files): run [`index`].
    Unknown,
}

/// A walk's findings, for [`index_prewalked`].
pub struct Prewalked {
    start: Instant,
    /// When the run began ([`RunRoots::started`]).
    started: TimeNs,
    roots: Vec<PathBuf>,
    walked: scan::WalkOutcome,
    candidates: Vec<Candidate>,
    /// The records the removal pass looks among ([`Unseen::Ids`]): it
    /// then need not read all of `files` again, which was ~30 ms of a run
    /// that changed one file of the Django tree (66.5k records).
    unseen: Unseen,
}

/// Walks `opts.roots` against the index without a writer: `store` is a
/// read-only open, and the caller holds the writer's lock, which it hands
/// to the writer it opens next (nothing can change the index in between,
/// so what the walk found stays true). A writer's open and close of RocksDB
/// is ~10 ms (a new options file, log and WAL), most of a no-change run on
/// a small tree; a run that changes nothing now opens no writer at all.
///
/// `found_one`, when given, is sent to (once) as soon as the walk finds a
/// file to read, so that the writer can open while the walk goes on
/// ([`index_locked`]).
pub fn prewalk(
    store: &Store,
    opts: &IndexOptions,
    found_one: Option<crossbeam_channel::Sender<()>>,
) -> Result<Prewalk, IngestError> {
    let start = Instant::now();
    let RunRoots { roots, missing, spared, remembered, walk: walk_opts, started, warnings } = run_roots(store, opts)?;
    let root_bytes: Vec<Vec<u8>> = roots.iter().map(|r| path_bytes(r)).collect();
    // A missing root's files are removed by a writer's run, which keeps a
    // spared root's.
    if !missing.is_empty() || !spared.is_empty() || root_bytes.iter().any(|r| !remembered.contains(r)) {
        return Ok(Prewalk::Unknown);
    }
    // Only an index whose records' stats fit in memory is walked here (an
    // empty one, or a larger one, goes the usual way); they load on
    // another thread while the walk starts (`scan::Records::Loading`).
    let files = store.counts()?.files;
    if files == 0 || files > scan::Known::STATS_MAX {
        return Ok(Prewalk::Unknown);
    }
    let cell = std::sync::OnceLock::new();
    // Candidates are collected up to the bound; past it the receiving end
    // is dropped, and the walk stops.
    let (tx, rx) = bounded::<Vec<Candidate>>(QUEUE / scan::WALK_BATCH);
    let (walked, candidates, loaded) = std::thread::scope(|s| {
        // The ids of the records under the roots come with them: whether
        // the walk found them all tells whether the run writes anything,
        // and the removal pass looks among them.
        let loader = s.spawn(|| {
            let under = |p: &[u8]| is_under_any(p, &root_bytes);
            let (known, under_roots) = scan::Known::load_stats(store, files, &under)?;
            tracing::debug!("prewalk: records loaded after {:?}", start.elapsed());
            let _ = cell.set(known);
            Ok::<_, StoreError>(under_roots)
        });
        let collect = s.spawn(move || {
            let mut found = Vec::new();
            let mut found_one = found_one;
            for batch in rx {
                if found.len() + batch.len() > PREWALK_MAX {
                    return None;
                }
                if !batch.is_empty() {
                    if let Some(tx) = found_one.take() {
                        let _ = tx.try_send(());
                    }
                }
                found.extend(batch);
            }
            Some(found)
        });
        let walked = scan::walk(store, &roots, &walk_opts, scan::Records::Loading(&cell), &tx);
        drop(tx);
        let loaded = loader.join().expect("loading records does not panic");
        (walked, collect.join().expect("collecting candidates does not panic"), loaded)
    });
    let under_roots = loaded?;
    let mut walked = walked?;
    tracing::debug!(
        "prewalk: walk done after {:?} ({} files met before the records)",
        start.elapsed(),
        walked.pending.len()
    );
    let known = cell.into_inner().expect("set once loaded");
    // Stats come with the ids of the records under the roots (lookups,
    // past `STATS_MAX`, were turned away above).
    let (scan::Known::Stats(_), Some(under_roots)) = (&known, under_roots) else {
        return Ok(Prewalk::Unknown);
    };
    let Some(mut candidates) = candidates else { return Ok(Prewalk::Unknown) };
    if let Some(e) = std::mem::take(&mut walked.store_errors).into_iter().next() {
        return Err(e.into());
    }
    candidates.extend(scan::resolve_pending(store, &known, &walk_opts, &mut walked)?);
    tracing::debug!("prewalk: pending resolved after {:?}", start.elapsed());
    if candidates.len() > PREWALK_MAX {
        return Ok(Prewalk::Unknown);
    }
    // Nothing to write when no file is new or changed, no directory went
    // unlisted, and every record under the roots was seen unchanged (a
    // recorded file now a symlink or a FIFO is skipped by the walk: for
    // the index, it is gone).
    if candidates.is_empty()
        && walked.unreadable_dirs.is_empty()
        && under_roots.len() == walked.unchanged.len()
        && walked.devices.is_empty()
    {
        let mut summary = Summary {
            roots,
            unchanged: walked.unchanged.len() as u64,
            bytes_unchanged: walked.unchanged_bytes,
            ..Summary::default()
        };
        for (path, reason) in walked.skipped {
            record_skip(&mut summary, path, reason);
        }
        crate::store::record_walk(store.dir(), &root_bytes, started);
        summary.elapsed = start.elapsed();
        // No run that walks again follows to say them.
        warnings.iter().for_each(|w| tracing::warn!("{w}"));
        return Ok(Prewalk::Unchanged(summary));
    }
    // The removal pass looks among the records under the roots for those
    // the run did not see: none when the walk found every one (a binary
    // search of the files seen for each record took the pass ~7 ms on the
    // Django tree, ~2 ms without).
    let found = walked.unchanged.len() + candidates.iter().filter(|c| c.old.is_some()).count();
    let unseen = Unseen::Ids(if under_roots.len() == found { Vec::new() } else { under_roots });
    warnings.iter().for_each(|w| tracing::warn!("{w}"));
    Ok(Prewalk::Changed(Prewalked { start, started, roots, walked, candidates, unseen }))
}

/// Applies what [`prewalk`] found on `reader` (the read-only open it
/// walked with) with the writer `open_writer` opens under the lock the walk
/// was made under: reads the new and changed files, and records the files
/// gone, as [`index`] would.
///
/// The files are read while the writer opens: its open is ~10 ms of
/// RocksDB's (a new options file written and read back, a new manifest
/// and WAL), with both cores idle once the walk is done, and reading one
/// changed file took ~3–5 ms after it. The readers look prior records up
/// in `reader`, which is the index as the writer opens it (nothing writes
/// under the lock in between): a content's record is written once and
/// removed only by retention at a run's end, and contents this run writes
/// are known to the writer ([`Writer::upsert`]'s `gained`), so what the
/// readers find is what they would find in the writer's store. An index
/// of an older schema is upgraded by the writer's open, so there the
/// files are read once it has opened.
pub fn index_prewalked(
    reader: &Store,
    open_writer: impl FnOnce() -> Result<Store, StoreError>,
    opts: &IndexOptions,
    pre: Prewalked,
) -> Result<Summary, IngestError> {
    if reader.format().schema_version != SCHEMA_VERSION {
        let store = open_writer()?;
        let Prewalked { start, started, roots, walked, candidates, unseen } = pre;
        tracing::debug!("writer opened after {:?}", start.elapsed());
        let mut writer = Writer::new(&store)?.whole_from(opts.whole_from);
        let mut summary = Summary { roots: roots.clone(), ..Summary::default() };
        let workers = if opts.workers == 0 { available_cores() } else { opts.workers };
        ingest_candidates(&mut writer, candidates, workers, &mut summary, &|| opts.stopping())?;
        return end_prewalked(writer, opts, summary, PrewalkEnd { start, started, roots, walked, unseen });
    }
    let Prewalked { start, started, roots, walked, candidates, unseen } = pre;
    let workers = if opts.workers == 0 { available_cores() } else { opts.workers };
    let workers = workers.clamp(1, candidates.len().max(1));
    // Every candidate is queued at once: the walk holds them all already.
    let (cand_tx, cand_rx) = crossbeam_channel::unbounded::<Vec<Candidate>>();
    for cand in candidates.into_iter().take_while(|_| !opts.stopping()) {
        let _ = cand_tx.send(vec![cand]);
    }
    drop(cand_tx);
    let (out_tx, out_rx) = bounded::<Outcome>(QUEUE);
    let held = Held::default();
    std::thread::scope(|s| {
        let rules = ReaderRules { stop: None, defer_from: None, defer_new: true, whole_from: opts.whole_from };
        spawn_readers(s, reader, &held, workers, cand_rx, out_tx, rules);
        // An error here drops `out_rx`: the readers stop at their next file.
        let store = open_writer()?;
        tracing::debug!("writer opened after {:?}", start.elapsed());
        let mut writer = Writer::new(&store)?.whole_from(opts.whole_from);
        let mut summary = Summary { roots: roots.clone(), ..Summary::default() };
        let mut f = Feed {
            tx: None,
            rx: out_rx,
            summary: &mut summary,
            progress: Progress::new(false),
            recheck: Vec::new(),
            deferred: Vec::new(),
        };
        drain(&mut writer, &mut f, Ok(()))?;
        debug_assert!(f.recheck.is_empty() && f.deferred.is_empty(), "the walk stats every candidate");
        end_prewalked(writer, opts, summary, PrewalkEnd { start, started, roots, walked, unseen })
    })
}

/// A run on an index that exists, under the writer's lock (`lock`):
/// walked first with the read-only open `reader` ([`prewalk`]), and
/// written by a writer opened under the lock only when the walk found
/// something to write; `open_writer` opens one for a run [`prewalk`]
/// cannot tell about (its reader dropped first).
///
/// The writer opens as soon as the walk finds a file to read, beside the
/// rest of the walk: its open is ~17 ms of RocksDB's (a new options file
/// written, synced and read back, a new manifest and WAL) that a run
/// changing one file of the Django tree (66.5k files) waited for after
/// its walk, where reading the file took ~1–5 ms. A file the walk meets
/// before the index's records are loaded is known to be changed once its
/// walker thread meets another file after they are (or after the walk,
/// `scan::resolve_pending`): the writer opens then.
pub fn index_locked(
    reader: Store,
    lock: WriterLock,
    opts: &IndexOptions,
    open_writer: impl FnOnce(WriterLock) -> Result<Store, StoreError>,
) -> Result<Summary, IngestError> {
    // An index of an older schema is upgraded by the writer's open, which
    // `index_prewalked` waits for before it reads.
    let early = reader.format().schema_version == SCHEMA_VERSION;
    let (go_tx, go_rx) = bounded::<()>(1);
    // What is left once the walk is done: nothing, or a writer's run.
    enum Then {
        Done(Summary),
        Writer(Store),
        Lock(WriterLock),
    }
    let then = std::thread::scope(|s| -> Result<Then, IngestError> {
        let reader = &reader;
        // The writer, once asked for; the lock back when it never was.
        let opener = s.spawn(move || match go_rx.recv() {
            Ok(()) => Ok(Store::open_writer_beside(reader, lock)),
            Err(_) => Err(lock),
        });
        let walked = prewalk(reader, opts, early.then_some(go_tx));
        let opened = opener.join().expect("opening the writer does not panic");
        Ok(match walked? {
            Prewalk::Unchanged(summary) => Then::Done(summary),
            Prewalk::Changed(found) => {
                let writer = || match opened {
                    Ok(writer) => writer,
                    Err(lock) => Store::open_writer_beside(reader, lock),
                };
                Then::Done(index_prewalked(reader, writer, opts, found)?)
            }
            Prewalk::Unknown => match opened {
                Ok(writer) => Then::Writer(writer?),
                Err(lock) => Then::Lock(lock),
            },
        })
    })?;
    // Past what a walk collects, or not known from it: a writer's run
    // walks again. The reader is closed first: it would keep every table
    // file the run's compactions delete (and its memory) until the end,
    // and a writer's open may upgrade the index, which replaces its
    // directory.
    drop(reader);
    match then {
        Then::Done(summary) => Ok(summary),
        Then::Writer(writer) => index(&writer, opts),
        Then::Lock(lock) => index(&open_writer(lock)?, opts),
    }
}

/// What [`index_prewalked`] keeps of a [`Prewalked`] for the run's end.
struct PrewalkEnd {
    start: Instant,
    started: TimeNs,
    roots: Vec<PathBuf>,
    walked: scan::WalkOutcome,
    unseen: Unseen,
}

/// Commits what [`index_prewalked`] read and ends its run: the removal
/// pass, retention, the flush and RocksDB's compactions.
fn end_prewalked(
    mut writer: Writer<'_>,
    opts: &IndexOptions,
    mut summary: Summary,
    end: PrewalkEnd,
) -> Result<Summary, IngestError> {
    let PrewalkEnd { start, started, roots, walked, unseen } = end;
    writer.seen_at = Some(crate::store::walked(writer.store.dir()));
    writer.commit()?;
    tracing::debug!("candidates written after {:?}", start.elapsed());
    if opts.stopping() {
        end_stopped(&mut summary, &walked, start);
        return Ok(summary);
    }
    let ended = RunEnd { unread: Vec::new(), unseen };
    let whole = walked_whole(&roots, &walked.unreadable_dirs);
    end_run(&mut writer, &mut summary, walked, ended, &roots, opts.retention, start)?;
    crate::store::record_walk(writer.store.dir(), &whole, started);
    writer.store.settle_compactions(opts.interrupt.as_deref());
    Ok(summary)
}

/// Reads `cands` on `workers` threads and applies each result to `writer`
/// (`index` on a few changed files it found while holding the lock; a full
/// `index` streams from its walk instead). Commits nothing: the caller
/// decides when. No more candidates are handed out once `stopping`.
fn ingest_candidates(
    writer: &mut Writer<'_>,
    cands: Vec<Candidate>,
    workers: usize,
    summary: &mut Summary,
    stopping: &dyn Fn() -> bool,
) -> Result<(), StoreError> {
    let workers = workers.clamp(1, cands.len().max(1));
    let done = ingest_with(writer, workers, None, summary, |writer, feed| {
        cands.into_iter().take_while(|_| !stopping()).try_for_each(|c| feed.send(writer, c))
    })?;
    debug_assert!(done.recheck.is_empty(), "the walk stats every candidate");
    Ok(())
}

/// Candidates handed to the readers one at a time ([`ingest_with`]).
pub struct Feed<'a> {
    tx: Option<crossbeam_channel::Sender<Vec<Candidate>>>,
    rx: crossbeam_channel::Receiver<Outcome>,
    summary: &'a mut Summary,
    progress: Progress,
    /// Unverified candidates that were not readable regular files.
    recheck: Vec<PathBuf>,
    /// Files left for a [`Background`] reader.
    deferred: Vec<Deferred>,
}

impl Feed<'_> {
    /// Queues `cand` for the readers, then writes what they have read so
    /// far (without waiting for more).
    pub fn send(&mut self, writer: &mut Writer<'_>, cand: Candidate) -> Result<(), StoreError> {
        if let Some(tx) = &self.tx {
            // The readers hang up only when they stop early; their outcomes
            // are drained below either way.
            let _ = tx.send(vec![cand]);
        }
        while let Ok(outcome) = self.rx.try_recv() {
            self.take(writer, outcome)?;
        }
        Ok(())
    }

    fn take(&mut self, writer: &mut Writer<'_>, outcome: Outcome) -> Result<(), StoreError> {
        match outcome {
            // Gone, not a regular file, or not readable: the sender looks
            // at it again as it would have without the shortcut. (One that
            // kept changing while read was all of these, and was read as
            // often as it may be already.)
            Outcome::Skip { cand, reason, .. } if cand.unverified && reason != SkipReason::KeptChanging => {
                self.recheck.push(cand.path);
                Ok(())
            }
            Outcome::Vanished { cand } if cand.unverified => {
                self.recheck.push(cand.path);
                Ok(())
            }
            Outcome::Deferred(cand) => {
                self.deferred.push(Deferred(cand));
                Ok(())
            }
            outcome => writer.apply(outcome, self.summary, &self.progress),
        }
    }
}

/// Reads the candidates `feed` hands over ([`Feed::send`]) on `workers`
/// threads while it goes on finding more, and writes them: a daemon batch
/// starts reading as soon as it has its first changed file, where it
/// first looked at every path (~15 % of a batch on one thread). Files of
/// `defer_from` bytes or more are not read but handed back
/// ([`Ingested::deferred`]), for a [`Background`] reader.
pub fn ingest_with<'s, T>(
    writer: &mut Writer<'s>,
    workers: usize,
    defer_from: Option<u64>,
    summary: &mut Summary,
    feed: impl FnOnce(&mut Writer<'s>, &mut Feed<'_>) -> Result<T, StoreError>,
) -> Result<Ingested<T>, StoreError> {
    let store = writer.store;
    // Unbounded: the caller sends without waiting on the readers, whose
    // outcomes it writes between sends (a bounded queue could fill while it
    // is not draining them). What it sends is one batch it already holds.
    let (cand_tx, cand_rx) = crossbeam_channel::unbounded::<Vec<Candidate>>();
    let (out_tx, out_rx) = bounded::<Outcome>(QUEUE);
    let held = Held::default();
    std::thread::scope(|s| {
        let rules = ReaderRules { stop: None, defer_from, defer_new: true, whole_from: writer.whole_from };
        spawn_readers(s, store, &held, workers.max(1), cand_rx, out_tx, rules);
        let mut f = Feed {
            tx: Some(cand_tx),
            rx: out_rx,
            summary,
            progress: Progress::new(false),
            recheck: Vec::new(),
            deferred: Vec::new(),
        };
        let result = feed(writer, &mut f);
        // The readers end once they have read everything queued.
        f.tx = None;
        let result = drain(writer, &mut f, result);
        result.map(|value| Ingested { value, recheck: f.recheck, deferred: f.deferred })
    })
}

/// Writes what the readers send to `f` until they have all ended. Once
/// `result` is an error, what they send is dropped; it is returned.
fn drain<T>(writer: &mut Writer<'_>, f: &mut Feed<'_>, mut result: Result<T, StoreError>) -> Result<T, StoreError> {
    loop {
        let outcome = match f.rx.try_recv() {
            Ok(o) => o,
            Err(crossbeam_channel::TryRecvError::Disconnected) => break,
            Err(crossbeam_channel::TryRecvError::Empty) => {
                if result.is_ok() {
                    if let Err(e) = writer.hand_over_while_idle() {
                        result = Err(e);
                    }
                }
                match f.rx.recv() {
                    Ok(o) => o,
                    Err(_) => break,
                }
            }
        };
        if result.is_ok() {
            if let Err(e) = f.take(writer, outcome) {
                result = Err(e);
            }
        }
    }
    result
}

/// What [`ingest_with`] leaves to its caller.
pub struct Ingested<T> {
    /// What the feeding closure returned.
    pub value: T,
    /// Paths of unverified candidates that turned out not to be readable
    /// regular files ([`Candidate::unverified`]).
    pub recheck: Vec<PathBuf>,
    /// Files left unread for a [`Background`] reader.
    pub deferred: Vec<Deferred>,
}

/// A file found large, left for a [`Background`] reader.
pub struct Deferred(Candidate);

impl Deferred {
    pub fn path(&self) -> &Path {
        &self.0.path
    }
}

/// Files of this size or more are read beside the daemon's batches, not
/// in them: reading one takes ~25 ms a 16 MiB on a core, and a batch
/// waits for its slowest file, so a 1.5 GB file arriving held back the
/// small changes made after it for ~4 s.
pub const BACKGROUND_READ: u64 = LARGE_READ;

/// Reader threads for large files beside the daemon's batches, so that
/// the small changes made while one is read go on being indexed. What
/// they read is written by the daemon's writer once done
/// ([`Writer::apply_background`]), if the file is still the one read. A
/// file asked for while it is being read is looked at again once that
/// read is done. Dropping it gives up the reads in progress at their
/// next 1 MB.
pub struct Background {
    tx: Option<crossbeam_channel::Sender<(Candidate, Arc<AtomicBool>)>>,
    rx: crossbeam_channel::Receiver<Outcome>,
    /// Sent and not yet back, each with the flag that gives its read up.
    in_flight: HashMap<PathBuf, Arc<AtomicBool>>,
    /// Asked for again while in flight.
    again: HashSet<PathBuf>,
    /// Reads sent under a name since renamed: the name sent → the name now.
    renamed: HashMap<PathBuf, PathBuf>,
    /// Reads that came back after their file's name had gone, kept for
    /// [`ORPHAN_KEEP`] in case the name it went to is asked for
    /// ([`Background::send`]): a rename the daemon hears of after the read
    /// is done.
    orphans: Vec<(Instant, Outcome)>,
    /// Orphans taken for the name they went to, handed back by the next
    /// [`Background::done`].
    adopted: Vec<Outcome>,
}

/// How long a read whose file's name had gone when it came back is kept
/// for the name the file was renamed to: the debouncer hands a rename over
/// two debounces after it at most.
const ORPHAN_KEEP: Duration = Duration::from_secs(5);

/// At most this many such reads are kept (each holds a chunk list).
const ORPHANS_KEPT: usize = 8;

/// A large file's read, done by a [`Background`] reader.
pub struct BackgroundRead(Outcome);

impl BackgroundRead {
    pub fn path(&self) -> &Path {
        &self.0.cand().path
    }
}

impl Outcome {
    fn cand(&self) -> &Candidate {
        match self {
            Outcome::Read { cand, .. }
            | Outcome::Skip { cand, .. }
            | Outcome::Vanished { cand }
            | Outcome::Unchanged { cand } => cand,
            Outcome::Deferred(cand) => cand,
        }
    }

    fn cand_mut(&mut self) -> &mut Candidate {
        match self {
            Outcome::Read { cand, .. }
            | Outcome::Skip { cand, .. }
            | Outcome::Vanished { cand }
            | Outcome::Unchanged { cand } => cand,
            Outcome::Deferred(cand) => cand,
        }
    }

    fn into_cand(self) -> Candidate {
        match self {
            Outcome::Read { cand, .. }
            | Outcome::Skip { cand, .. }
            | Outcome::Vanished { cand }
            | Outcome::Unchanged { cand } => cand,
            Outcome::Deferred(cand) => cand,
        }
    }
}

impl Background {
    /// Starts `threads` readers: as many as a batch has, so that a burst
    /// of large files (a directory of videos copied in) is read as fast as
    /// the batches read it before.
    pub fn spawn<'scope, 'env>(
        s: &'scope std::thread::Scope<'scope, 'env>,
        store: &'env Store,
        threads: usize,
        whole_from: WholeFrom,
    ) -> Background {
        let (tx, jobs) = crossbeam_channel::unbounded::<(Candidate, Arc<AtomicBool>)>();
        let (done, rx) = crossbeam_channel::unbounded::<Outcome>();
        let params = *store.params();
        for _ in 0..threads.max(1) {
            let (jobs, done) = (jobs.clone(), done.clone());
            s.spawn(move || {
                let mut buf = Vec::new();
                // No memo of known contents: large files are few.
                let known = |c: &ContentHash| store.contains::<ContentChunks>(c).ok();
                let asks = Asks { known: &known, prior: &|c| prior_record(store, c) };
                while let Ok((cand, given_up)) = jobs.recv() {
                    let mut outcome = match open_candidate(cand) {
                        Opening::Ready(opened) => {
                            let on_change = OnChange::Background;
                            read_opened(opened, &params, whole_from, &mut buf, asks, Some(&given_up), on_change)
                        }
                        Opening::Said(outcome) => outcome,
                    };
                    // Given up (the file was removed or renamed, or the
                    // daemon stops): what was read says nothing.
                    if given_up.load(Ordering::Relaxed) {
                        outcome = Outcome::Vanished { cand: outcome.into_cand() };
                    }
                    if done.send(outcome).is_err() {
                        break;
                    }
                }
            });
        }
        Background {
            tx: Some(tx),
            rx,
            in_flight: HashMap::default(),
            again: HashSet::default(),
            renamed: HashMap::default(),
            orphans: Vec::new(),
            adopted: Vec::new(),
        }
    }

    /// Queues a file to read, unless it is being read already: then it is
    /// looked at again once that read is back ([`Background::done`]).
    pub fn send(&mut self, d: Deferred) {
        let path = d.path().to_path_buf();
        if self.in_flight.contains_key(&path) {
            self.again.insert(path);
            return;
        }
        let d = match self.adopt(d) {
            Ok(()) => return,
            Err(d) => d,
        };
        let given_up = Arc::new(AtomicBool::new(false));
        if let Some(tx) = &self.tx {
            if tx.send((d.0, given_up.clone())).is_ok() {
                self.in_flight.insert(path, given_up);
            }
        }
    }

    /// Takes the read of a file whose name had gone when its read came
    /// back, if `d` now names that file unchanged (same device, inode,
    /// size and mtime: a rename keeps them): the daemon heard of the
    /// rename only after the read was done (through the debouncer, in the
    /// read's last moments), and the file is not read again under its new
    /// name. (Session 40 left this: a 100 MB download renamed 300 ms after
    /// its close was read twice in two runs of three.)
    fn adopt(&mut self, d: Deferred) -> Result<(), Deferred> {
        self.orphans.retain(|(when, _)| when.elapsed() < ORPHAN_KEEP);
        if self.orphans.is_empty() {
            return Err(d);
        }
        let Ok(m) = std::fs::symlink_metadata(d.path()) else { return Err(d) };
        let now = Stat::of(&m);
        let same = |o: &Outcome| match o {
            Outcome::Read { stat, .. } => {
                (stat.dev, stat.inode, stat.size, stat.mtime) == (now.dev, now.inode, now.size, now.mtime)
            }
            _ => false,
        };
        let Some(i) = self.orphans.iter().position(|(_, o)| same(o)) else { return Err(d) };
        let mut read = self.orphans.swap_remove(i).1;
        tracing::debug!(
            "{}: the read of {}, renamed to it, is taken: not read again",
            crate::show_path(d.path()),
            crate::show_path(&read.cand().path)
        );
        *read.cand_mut() = d.0;
        self.adopted.push(read);
        Ok(())
    }

    /// Gives up the reads of `path` and of files under it, `why` (removed
    /// or renamed, say: a read of the file under its old name would be
    /// thrown away). Each comes back as vanished, and is looked at again.
    pub fn give_up(&mut self, path: &Path, why: &str) {
        let pb = path_bytes(path);
        self.give_up_where(|p| is_under(&path_bytes(p), &pb), why);
    }

    /// `from` was renamed to `to`: a read of what was under `to` is given
    /// up, and the reads of `from` and of files under it go on under `to`.
    /// A rename keeps a file's bytes, and a read its open descriptor. (A
    /// large download, written under a temporary name, synced and renamed
    /// as it was being read, was read twice; [`Writer::apply_background`]
    /// checks that the file under the new name is still the one read.) A
    /// read of the new name asked for meanwhile waits for it
    /// ([`Background::send`]). The same rename heard again (the daemon
    /// hears a file's at once when the file was taken at its close, under
    /// the name its read was sent with, and again from the debouncer)
    /// changes nothing.
    pub fn renamed(&mut self, from: &Path, to: &Path) {
        if self.renamed.get(from).is_some_and(|now| now == to) {
            return;
        }
        self.give_up(to, "renamed over");
        let (from, to) = (path_bytes(from), path_bytes(to));
        let moved: Vec<PathBuf> = self.in_flight.keys().filter(|p| is_under(&path_bytes(p), &from)).cloned().collect();
        for old in moved {
            let mut new = to.clone();
            new.extend_from_slice(&path_bytes(&old)[from.len()..]);
            let new = scan::bytes_path(&new);
            let flag = self.in_flight.remove(&old).expect("in flight");
            if self.again.remove(&old) {
                self.again.insert(new.clone());
            }
            // Keyed by the name the read was sent under (renamed before, it
            // is not `old`): its outcome comes back with that name.
            let sent = self.renamed.iter().find(|(_, now)| **now == old).map(|(sent, _)| sent.clone());
            self.renamed.insert(sent.unwrap_or(old), new.clone());
            self.in_flight.insert(new, flag);
        }
    }

    /// Gives up the reads of the files `which` picks, `why`.
    pub fn give_up_where(&mut self, mut which: impl FnMut(&Path) -> bool, why: &str) {
        for (p, flag) in &self.in_flight {
            if which(p) && !flag.swap(true, Ordering::Relaxed) {
                tracing::info!("{}: {why} while being read: read given up", crate::show_path(p));
            }
        }
    }

    /// Files queued or being read.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The reads done since the last call, and the paths to look at again
    /// (asked for while they were being read).
    pub fn done(&mut self) -> (Vec<BackgroundRead>, Vec<PathBuf>) {
        let (mut reads, mut again) = (Vec::new(), Vec::new());
        while let Ok(outcome) = self.rx.try_recv() {
            let mut read = BackgroundRead(outcome);
            if let Some(now) = self.renamed.remove(read.path()) {
                read.0.cand_mut().path = now;
            }
            self.in_flight.remove(read.path());
            if self.again.remove(read.path()) {
                again.push(read.path().to_path_buf());
            }
            // Read whole, and its name gone since: renamed, most likely,
            // before the daemon heard of it. Kept for the new name; the
            // old one is looked at again as a vanished file's.
            let gone = |p: &Path| std::fs::symlink_metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
            if matches!(read.0, Outcome::Read { .. }) && gone(read.path()) {
                let cand = Candidate::new(read.path().to_path_buf(), None);
                if self.orphans.len() == ORPHANS_KEPT {
                    self.orphans.remove(0);
                }
                self.orphans.push((Instant::now(), read.0));
                reads.push(BackgroundRead(Outcome::Vanished { cand }));
                continue;
            }
            reads.push(read);
        }
        reads.extend(self.adopted.drain(..).map(BackgroundRead));
        (reads, again)
    }
}

impl Drop for Background {
    /// Gives up every read queued or in progress (at its next 1 MB).
    fn drop(&mut self) {
        for flag in self.in_flight.values() {
            flag.store(true, Ordering::Relaxed);
        }
        self.tx = None;
    }
}

/// When [`spawn_readers`]' threads stop reading, and what they leave unread.
struct ReaderRules<'a> {
    /// Set: stop, giving up a large file being read.
    stop: Option<&'a AtomicBool>,
    /// Files of this many bytes or more are sent back unread
    /// ([`Outcome::Deferred`])...
    defer_from: Option<u64>,
    /// ...new paths too, not only paths the index holds. A scan reads a
    /// new path itself: it may be a file moved, which the scan pairs with
    /// its old name by content (events say so instead).
    defer_new: bool,
    whole_from: WholeFrom,
}

/// Starts `workers` threads that read candidates from `rx` and send what
/// they found to `tx`; they end when `rx` is closed and drained (or `tx`'s
/// receiver is gone). Takes the channel ends so that they close with the
/// threads.
fn spawn_readers<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    store: &'env Store,
    held: &'env Held,
    workers: usize,
    rx: crossbeam_channel::Receiver<Vec<Candidate>>,
    tx: crossbeam_channel::Sender<Outcome>,
    rules: ReaderRules<'env>,
) {
    let ReaderRules { stop, defer_from, defer_new, whole_from } = rules;
    let params = *store.params();
    let stopped = move || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let linked = Arc::new(Linked::default());
    for _ in 0..workers {
        let (rx, tx, linked) = (rx.clone(), tx.clone(), linked.clone());
        s.spawn(move || {
            let (mut buf, small_data) = SpareBuffers::take();
            let known = |c: &ContentHash| {
                if let Some(answer) = held.knows(c) {
                    return Some(answer);
                }
                let has = store.contains::<ContentChunks>(c).ok()?;
                if has {
                    held.add([*c]);
                }
                Some(has)
            };
            // The prior records the reads fetched, for `send`: a grown
            // file's prior content is the one whose postings its change
            // takes out, read once for both. Emptied before each file or
            // batch is read, so that none is from an earlier batch.
            let fetched = std::cell::RefCell::new(Vec::<(ContentHash, Fetched)>::new());
            let prior = |c: &ContentHash| {
                let (postings, prior, stored) = store.prior_record_stored(c).ok()??;
                fetched.borrow_mut().push((*c, Fetched { postings, stored: Some(stored) }));
                Some(prior)
            };
            let asks = Asks { known: &known, prior: &prior };
            let send = |mut outcome: Outcome| {
                if let Outcome::Read {
                    cand: Candidate { old: Some((_, old)), fetch_old, .. }, fp, old_record, ..
                } = &mut outcome
                {
                    if old.content != fp.content {
                        // Records are written once per content and only
                        // expire between runs and batches, so the one
                        // read now is the one the writer would read. A
                        // failed read leaves the lookup to the writer. A
                        // record read as a grown file's prior goes along
                        // whether or not it was asked for: the writer
                        // takes it if it needs it.
                        let had = {
                            let mut f = fetched.borrow_mut();
                            f.iter().position(|(c, _)| *c == old.content).map(|k| f.swap_remove(k).1)
                        };
                        let fetch = || {
                            let (postings, stored) =
                                fetch_old.then(|| store.get_postings_stored(&old.content).ok().flatten())??;
                            Some(Fetched { postings, stored: Some(stored) })
                        };
                        *old_record = had.or_else(fetch).map(Box::new);
                    }
                }
                let keep = match &outcome {
                    Outcome::Read { stat, fp, shared: false, .. } if Linked::shares(stat) && linked.has_room(fp) => {
                        Some((*stat, fp.clone()))
                    }
                    _ => None,
                };
                let sent = tx.send(outcome).is_ok();
                if let Some((stat, fp)) = keep {
                    linked.keep(stat, fp);
                }
                sent
            };
            // Small files read whole and waiting to be fingerprinted
            // together, their bytes one after another in `data`.
            let mut small = SmallFiles::new(workers, small_data);
            let mut queue = Queued { rx, batch: Vec::new().into_iter() };
            while let Some(cand) = queue.next() {
                fetched.borrow_mut().clear();
                let opened = match open_candidate(cand) {
                    Opening::Ready(o) => o,
                    Opening::Said(outcome) => {
                        if send(outcome) {
                            continue;
                        }
                        break;
                    }
                };
                // A name with a write event is read whatever its stat says
                // (`Candidate::written`), so it takes no other name's read.
                let stat = Stat::of(&opened.before);
                if let Some(fp) = (Linked::shares(&stat) && !opened.cand.written).then(|| linked.get(&stat)).flatten() {
                    // Not `unseen`: the writer looks the content up, and
                    // finds the first name's.
                    let cand = opened.cand;
                    let racy = racy(&opened.before, opened.read_from);
                    if send(Outcome::Read { cand, stat, fp, unseen: false, old_record: None, shared: true, racy }) {
                        continue;
                    }
                    break;
                }
                if defer_from.is_some_and(|n| opened.before.len() >= n) && (defer_new || opened.cand.old.is_some()) {
                    if send(Outcome::Deferred(opened.cand)) {
                        continue;
                    }
                    break;
                }
                if opened.before.len() > SMALL_FILE {
                    // A stopped run leaves a large file half read, and what
                    // was read goes nowhere (the writer takes no more).
                    // The daemon's batches hand a file that turns out to be
                    // written as it is read to the background readers, once
                    // it is large enough to be read there.
                    let on_change = match defer_from {
                        Some(n) if defer_new || opened.cand.old.is_some() => OnChange::DeferFrom(n),
                        _ => OnChange::Reread,
                    };
                    let outcome = read_opened(opened, &params, whole_from, &mut buf, asks, stop, on_change);
                    if stopped() || !send(outcome) {
                        break;
                    }
                    continue;
                }
                if let Some(cand) = small.read(opened) {
                    if !send(read_candidate(cand, &params, whole_from, &mut buf, asks)) {
                        break;
                    }
                }
                // A batch waits for more files only while more are queued.
                if (small.full() || !queue.more())
                    && !small.fingerprint(&params, whole_from, &mut buf, asks).into_iter().all(send)
                {
                    break;
                }
            }
            fetched.borrow_mut().clear();
            small.fingerprint(&params, whole_from, &mut buf, asks).into_iter().all(send);
            SpareBuffers::give_back(buf, small.data, workers);
        });
    }
}

/// The readers' buffers, kept from one set of readers to the next: the
/// daemon starts readers for each batch, and each new reader's buffer
/// ([`crate::fingerprint::READ_BUF`], and its small files' room) was
/// fresh memory, zeroed page by page (a burst of appends to 2,482 files
/// in five batches: ~1.5 % of the daemon's CPU in the zeroing and its
/// page faults). At most one pair a reader is kept.
struct SpareBuffers;

static SPARE_BUFFERS: std::sync::Mutex<Vec<(Vec<u8>, Vec<u8>)>> = std::sync::Mutex::new(Vec::new());

impl SpareBuffers {
    fn take() -> (Vec<u8>, Vec<u8>) {
        SPARE_BUFFERS.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default()
    }

    fn give_back(buf: Vec<u8>, small: Vec<u8>, readers: usize) {
        let mut spare = SPARE_BUFFERS.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < readers {
            spare.push((buf, small));
        }
    }
}

/// A reader's candidates: the batch it took last, then the channel's.
struct Queued {
    rx: crossbeam_channel::Receiver<Vec<Candidate>>,
    batch: std::vec::IntoIter<Candidate>,
}

impl Queued {
    /// The next candidate, waiting for one; None once the channel is
    /// closed and drained.
    fn next(&mut self) -> Option<Candidate> {
        loop {
            if let Some(c) = self.batch.next() {
                return Some(c);
            }
            self.batch = self.rx.recv().ok()?.into_iter();
        }
    }

    /// Whether another candidate is there without waiting.
    fn more(&self) -> bool {
        self.batch.len() > 0 || !self.rx.is_empty()
    }
}

/// Files of at most this many bytes are read whole and fingerprinted
/// several at a time ([`fingerprint_many`]): a document tree's files have
/// ~3 chunks each, whose MD5s alone fill few of the hasher's 16 lanes (MD5
/// cost the Django tree's first index 1.6 times as much a byte as the
/// generated corpus's larger files).
const SMALL_FILE: u64 = 64 << 10;

/// A batch of small files is fingerprinted once it holds this many bytes
/// (~45 chunks) or files, or when no other file is queued.
const BATCH_BYTES: usize = 64 << 10;
const BATCH_FILES: usize = 32;

/// Files the batches of all readers together may hold open (each until
/// its second `fstat`): with many cores, 32 a reader would approach the
/// usual limit of 1,024 descriptors, beside RocksDB's 256.
const BATCH_FILES_OPEN: usize = 256;

/// Small files read whole, waiting to be fingerprinted together.
struct SmallFiles {
    files: Vec<(Opened, std::ops::Range<usize>)>,
    /// The batch's bytes are `data[..used]`; past that, room kept from
    /// earlier batches, so that reads need not zero it first.
    data: Vec<u8>,
    used: usize,
    /// At most this many files a batch.
    max_files: usize,
}

impl SmallFiles {
    /// The batch of one of `readers` readers, in `data` (room a reader
    /// before it left: its bytes are written over before they are read).
    fn new(readers: usize, data: Vec<u8>) -> SmallFiles {
        let max_files = (BATCH_FILES_OPEN / readers.max(1)).clamp(1, BATCH_FILES);
        SmallFiles { files: Vec::new(), data, used: 0, max_files }
    }

    fn full(&self) -> bool {
        self.files.len() >= self.max_files || self.used >= BATCH_BYTES
    }

    /// Reads an opened file's bytes in, or hands back the candidate to read
    /// on its own (a read error is met again there, and said).
    fn read(&mut self, o: Opened) -> Option<Candidate> {
        use std::io::Read;
        let at = self.used;
        let end = at + o.before.len() as usize;
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        if (&o.file).read_exact(&mut self.data[at..end]).is_err() {
            // Shorter than its stat said (it shrank), or a read failed:
            // the one-at-a-time read finds out which.
            return Some(o.cand);
        }
        self.used = end;
        self.files.push((o, at..end));
        None
    }

    /// Fingerprints the files read in and says what came of each: a file
    /// that changed while it was read is read again on its own.
    fn fingerprint(
        &mut self,
        params: &crate::chunker::ChunkParams,
        whole_from: WholeFrom,
        buf: &mut Vec<u8>,
        asks: Asks,
    ) -> Vec<Outcome> {
        if self.files.is_empty() {
            return Vec::new();
        }
        let answers = std::cell::RefCell::new(Vec::with_capacity(self.files.len()));
        let ask = |c: &ContentHash| {
            let a = (asks.known)(c);
            answers.borrow_mut().push(a);
            a.unwrap_or(false)
        };
        let contents: Vec<&[u8]> = self.files.iter().map(|(_, r)| &self.data[r.clone()]).collect();
        let priors: Vec<Option<Prior>> = self.files.iter().map(|(o, _)| o.cand.prior()).collect();
        let fps = fingerprint_many(&contents, &priors, params, Lookup { known: &ask, prior: asks.prior });
        let outcomes = self
            .files
            .drain(..)
            .zip(fps.into_iter().zip(answers.into_inner()))
            .map(|((o, _), (fp, answer))| match settle(o, fp, answer, false) {
                Ok(outcome) => outcome,
                Err(cand) => {
                    tracing::debug!("{}: changed while being read, reading again", crate::show_path(&cand.path));
                    read_candidate(cand, params, whole_from, buf, asks)
                }
            })
            .collect();
        self.used = 0;
        outcomes
    }
}

/// Contents whose record the index was seen to hold, shared by the readers
/// of one scan or daemon batch: a content with many copies is looked up
/// once, not once per copy (the lookup was ~8 % of a first index's CPU).
/// Records are never removed while readers run (retention runs after a
/// scan, and between the daemon's batches), so an entry stays true for as
/// long as the set lives.
///
/// A scan of an index that held no content starts it `complete`: its
/// writer adds every content as it names it ([`Writer::publish_to`]), so a
/// content outside the set is not in the index and the readers ask the
/// index nothing (the lookups, most of them of contents never seen, were
/// ~4 % of a first index's CPU). There the set is also the writer's memo
/// of contents named ([`Gained::Readers`]). A content named in the open
/// group is in the set before its write lands: a reader that then leaves
/// its sketch out sends it to the writer, which holds the record. The set
/// stops being complete when it is cleared for its size.
struct Held(std::sync::Mutex<HeldSet>);

struct HeldSet {
    contents: HashSet<ContentHash>,
    complete: bool,
    /// Cleared when it reaches this many entries.
    max: usize,
}

impl Default for Held {
    fn default() -> Held {
        Held(std::sync::Mutex::new(HeldSet { contents: HashSet::default(), complete: false, max: HELD_MAX }))
    }
}

impl Held {
    /// A complete set, which a fresh index's writer also keeps as its memo
    /// of contents named: bounded as that memo is, until it is cleared.
    fn complete() -> Held {
        Held(std::sync::Mutex::new(HeldSet { contents: HashSet::default(), complete: true, max: MEMO_MAX }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeldSet> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the index holds `content`'s record: `None` when the set
    /// cannot tell and the index must be asked.
    fn knows(&self, content: &ContentHash) -> Option<bool> {
        let set = self.lock();
        if set.contents.contains(content) {
            Some(true)
        } else {
            set.complete.then_some(false)
        }
    }

    /// Adds `contents`, and says whether the set is still complete (a set
    /// cleared for its size no longer is).
    fn add(&self, contents: impl IntoIterator<Item = ContentHash>) -> bool {
        let mut set = self.lock();
        for c in contents {
            if set.contents.len() >= set.max && !set.contents.contains(&c) {
                set.contents.clear();
                set.complete = false;
                set.max = HELD_MAX;
            }
            set.contents.insert(c);
        }
        set.complete
    }

    fn contains(&self, content: &ContentHash) -> bool {
        self.lock().contents.contains(content)
    }
}

/// The writer's memo of the contents it named ([`Writer::gained`]).
enum Gained {
    Own(HashSet<ContentHash>),
    /// The readers' complete [`Held`] set of a fresh index, where the
    /// contents named are the contents whose records the writer wrote: one
    /// set for both, where two were ~9 MB each at 238k contents (with as
    /// much again of the allocator's pages freed as each grew), a first
    /// index's peak memory growing with the number of files. While the set
    /// is complete nothing but the writer adds to it (the readers need not
    /// ask the index), so the writer sees the clear that ends it.
    Readers(Arc<Held>),
}

impl Gained {
    fn contains(&self, content: &ContentHash) -> bool {
        match self {
            Gained::Own(set) => set.contains(content),
            Gained::Readers(held) => held.contains(content),
        }
    }
}

/// Fingerprints of files with several names (hard links) read in this run,
/// by (device, inode), with the stat they were read at: another name of a
/// file unchanged since takes its fingerprint instead of a read. A tree of
/// snapshots made with hard links (rsnapshot, `cp -al`) holds each file
/// under as many names as it has snapshots; read once each, not once a
/// name. A fingerprint is kept only once its own outcome is sent, so the
/// writer always has the first name's before another's (the channel keeps
/// their order), and at most [`LINKED_RUNS`] chunk runs are kept.
#[derive(Default)]
struct Linked {
    map: std::sync::Mutex<HashMap<(u64, u64), (Stat, Fingerprint)>>,
    runs: std::sync::atomic::AtomicUsize,
}

/// Bounds [`Linked`]: ~24 MB of chunk runs.
const LINKED_RUNS: usize = 1 << 20;

impl Linked {
    /// Whether a file with this stat has other names to share its read
    /// with: more than one link, and an inode number that names it (some
    /// network and FUSE file systems report 0 for every file).
    fn shares(stat: &Stat) -> bool {
        stat.links > 1 && stat.inode != 0
    }

    /// The fingerprint of another name of this file, if it was read at this stat.
    fn get(&self, stat: &Stat) -> Option<Fingerprint> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let (at, fp) = map.get(&(stat.dev, stat.inode))?;
        (at.size == stat.size && at.mtime == stat.mtime).then(|| fp.clone())
    }

    /// Whether `fp` would be kept (spares cloning one that would not).
    fn has_room(&self, fp: &Fingerprint) -> bool {
        self.runs.load(Ordering::Relaxed) + fp.runs.len() <= LINKED_RUNS
    }

    fn keep(&self, stat: Stat, fp: Fingerprint) {
        let runs = fp.runs.len();
        if self.runs.fetch_add(runs, Ordering::Relaxed) + runs > LINKED_RUNS {
            self.runs.fetch_sub(runs, Ordering::Relaxed);
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, old)) = map.insert((stat.dev, stat.inode), (stat, fp)) {
            self.runs.fetch_sub(old.runs.len(), Ordering::Relaxed);
        }
    }
}

/// Bounds [`Held`] (16 bytes an entry).
const HELD_MAX: usize = 1 << 18;

fn record_skip(summary: &mut Summary, path: PathBuf, reason: SkipReason) {
    let n = summary.skipped.entry(reason).or_default();
    *n += 1;
    if *n <= 5 {
        summary.skipped_examples.push((path, reason));
    }
}

pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Adds `roots` (canonical) to those the index remembers, as a run given
/// them does (the daemon, asked to add roots, before it rescans).
pub fn remember(store: &Store, roots: &[PathBuf]) -> Result<(), StoreError> {
    remember_beside(store, roots, remembered_roots(store)?)
}

/// Writes `known` (the remembered roots) with `roots` added, if any is new.
fn remember_beside(store: &Store, roots: &[PathBuf], mut known: Vec<Vec<u8>>) -> Result<(), StoreError> {
    let before = known.len();
    for r in roots {
        let b = path_bytes(r);
        if !known.contains(&b) {
            known.push(b);
        }
    }
    if known.len() != before {
        let mut batch = store.batch();
        batch.put::<Meta>(&MetaKey::Roots, &MetaValue::Roots(known));
        store.write(batch)?;
    }
    Ok(())
}

/// The roots the index remembers.
pub fn remembered(store: &Store) -> Result<Vec<PathBuf>, StoreError> {
    Ok(remembered_roots(store)?.iter().map(|r| scan::bytes_path(r)).collect())
}

fn remembered_roots(store: &Store) -> Result<Vec<Vec<u8>>, StoreError> {
    store.roots()
}

/// The path of a root as the user names it: its canonical path when it
/// exists (given relative, or through a symlink), else, for a root gone for
/// good, its absolute path with `.` and `..` folded.
pub fn root_named(path: &Path) -> std::io::Result<PathBuf> {
    match path.canonicalize() {
        Ok(c) => Ok(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut out = PathBuf::new();
            for c in std::path::absolute(path)?.components() {
                match c {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    c => out.push(c),
                }
            }
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// What [`forget`] did.
#[derive(Clone, Debug, Default)]
pub struct Forgotten {
    /// The roots no longer remembered.
    pub roots: Vec<PathBuf>,
    /// Files dropped from the index.
    pub files: u64,
    /// Forgotten roots that lie inside a root the index keeps, with that
    /// root: their files are still indexed, as part of it.
    pub covered: Vec<(PathBuf, PathBuf)>,
    /// The roots the index remembers now.
    pub remaining: Vec<PathBuf>,
}

/// Stops indexing `roots`, each a root the index remembers (named as
/// [`root_named`] resolves it): the files under them are dropped from the
/// index, unless another root still holds them, and the roots are no
/// longer remembered, so that later runs and the daemon leave them alone.
/// The files themselves are not touched.
///
/// Nothing goes to lost-and-found: the files were not lost, and a large
/// root's records would push out the real deletions kept there. A content
/// left without a name keeps its chunk list only while a ghost refers to it.
/// The files go in groups of one write each and the roots last, so a run
/// cut short leaves a consistent index still remembering the roots, and
/// running it again finishes it.
pub fn forget(store: &Store, roots: &[PathBuf]) -> Result<Forgotten, IngestError> {
    let remembered = remembered_roots(store)?;
    let mut forgotten: Vec<Vec<u8>> = Vec::new();
    for r in roots {
        // A root named by its own path is that root, even when the path
        // leads elsewhere now (moved, and a symlink left in its place, to
        // another root): resolved, it named the other one.
        let b = match path_bytes(r) {
            own if remembered.contains(&own) => own,
            _ => path_bytes(&root_named(r).map_err(|source| IngestError::Root { path: r.clone(), source })?),
        };
        if !remembered.contains(&b) {
            return Err(not_a_root(r, &b, &remembered));
        }
        if !forgotten.contains(&b) {
            forgotten.push(b);
        }
    }
    let remaining: Vec<Vec<u8>> = remembered.into_iter().filter(|r| !forgotten.contains(r)).collect();
    let covered = forgotten
        .iter()
        .filter_map(|f| remaining.iter().find(|r| is_under(f, r)).map(|r| (scan::bytes_path(f), scan::bytes_path(r))))
        .collect();

    let ghosts = ghost_contents(store)?;
    let mut writer = Writer::new(store)?;
    let mut files = 0;
    // The scan reads a snapshot: the groups written meanwhile do not disturb it.
    for item in store.scan::<Files>() {
        let (id, rec) = item?;
        if is_under_any(&rec.path, &forgotten) && !is_under_any(&rec.path, &remaining) {
            writer.forget_file(id, &rec, &ghosts)?;
            files += 1;
        }
    }
    writer.commit()?;
    let mut batch = store.batch();
    batch.put::<Meta>(&MetaKey::Roots, &MetaValue::Roots(remaining.clone()));
    store.write(batch)?;
    store.flush()?;
    store.tidy()?;
    Ok(Forgotten {
        roots: forgotten.iter().map(|f| scan::bytes_path(f)).collect(),
        files,
        covered,
        remaining: remaining.iter().map(|r| scan::bytes_path(r)).collect(),
    })
}

/// The contents that history's ghosts and moves refer to (their chunk
/// lists stay).
fn ghost_contents(store: &Store) -> Result<HashSet<ContentHash>, StoreError> {
    let mut ghosts = HashSet::default();
    for item in store.scan::<History>() {
        ghosts.extend(item?.1.kept_content());
    }
    Ok(ghosts)
}

/// The error for a path that is not a remembered root, saying what is.
fn not_a_root(given: &Path, named: &[u8], remembered: &[Vec<u8>]) -> IngestError {
    let show = |r: &[u8]| crate::report_path(r);
    let hint = match remembered.iter().find(|r| is_under(named, r)) {
        Some(r) => format!(
            "it lies inside the root {0}; to leave it out of the index, list it in a .simdignore file \
             (gitignore syntax) in {0}, or pass --exclude to `simd index` and `simd watch`",
            show(r)
        ),
        None if remembered.is_empty() => "the index remembers no roots".to_string(),
        None => format!("the roots are {}", remembered.iter().map(|r| show(r)).collect::<Vec<_>>().join(", ")),
    };
    IngestError::NotARoot { path: given.to_path_buf(), hint }
}

/// Whether an open asking to leave the access time alone was refused in
/// this process: only a file's owner (or a process with CAP_FOWNER) may
/// ask, and a process refused once stops asking rather than open twice.
static NOATIME_REFUSED: AtomicBool = AtomicBool::new(false);

/// Opens a file for reading without following symlinks or blocking on
/// FIFOs, and without changing its access time (`O_NOATIME`, as tar,
/// `rsync --open-noatime` and borg do): on a `relatime` mount the first
/// read of a file not read since it changed writes its inode, so a first
/// index would touch every file of the tree.
pub(crate) fn open_regular(path: &Path, root: Option<&scan::RootDir>) -> std::io::Result<File> {
    use rustix::fs::OFlags;
    let open = |flags| {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | flags;
        scan::RootDir::open(root, path, flags)
    };
    if NOATIME_REFUSED.load(Ordering::Relaxed) {
        return open(OFlags::empty());
    }
    match open(OFlags::NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            NOATIME_REFUSED.store(true, Ordering::Relaxed);
            open(OFlags::empty())
        }
        r => r,
    }
}

/// What a reader asks the index about a content: whether it holds it
/// (None when the lookup failed), and a held content's chunk list and
/// sketch ([`Lookup`]).
#[derive(Clone, Copy)]
struct Asks<'a> {
    known: &'a dyn Fn(&ContentHash) -> Option<bool>,
    prior: &'a dyn Fn(&ContentHash) -> Option<PriorRecord>,
}

/// A prior content's record for a read ([`Lookup::prior`]): None when it
/// is not to be had, and the file is sketched from its bytes.
fn prior_record(store: &Store, content: &ContentHash) -> Option<PriorRecord> {
    store.prior_record(content).ok()?.map(|(_, prior)| prior)
}

#[cfg(test)]
impl Asks<'static> {
    /// An index that holds no content.
    const NONE: Asks<'static> = Asks { known: &|_| Some(false), prior: &|_| None };
}

/// A candidate opened and stat'ed, not yet read.
struct Opened {
    cand: Candidate,
    file: File,
    before: std::fs::Metadata,
    /// When the file was stat'ed, before its read ([`racy`]).
    read_from: i64,
}

/// A candidate opened, or what to say of it instead.
enum Opening {
    Ready(Opened),
    Said(Outcome),
}

/// Opens a candidate and stats it, or says why it is not to be read
/// (vanished, skipped, or unchanged since the index's record of it).
fn open_candidate(cand: Candidate) -> Opening {
    let skip = |cand, reason, detail: String| Opening::Said(Outcome::Skip { cand, reason, detail });
    let file = match open_regular(&cand.path, cand.root.as_deref()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Opening::Said(Outcome::Vanished { cand }),
        // ELOOP: it became a symlink since the walk.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return skip(cand, SkipReason::Symlink, e.to_string()),
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            return skip(cand, SkipReason::PathTooLong, e.to_string())
        }
        Err(e) => return skip(cand, SkipReason::Unreadable, e.to_string()),
    };
    let read_from = now_ns();
    let before = match file.metadata() {
        Ok(m) if m.is_file() => m,
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            let what = if t.is_fifo() {
                "a FIFO now"
            } else if t.is_socket() {
                "a socket now"
            } else if t.is_dir() {
                "a directory now"
            } else {
                "a device now"
            };
            return skip(cand, SkipReason::Special, what.into());
        }
        Err(e) => return skip(cand, SkipReason::Unreadable, e.to_string()),
    };
    if cand.unchanged(&Stat::of(&before)) {
        return Opening::Said(Outcome::Unchanged { cand });
    }
    Opening::Ready(Opened { cand, file, before, read_from })
}

/// What reading an opened file came to, once it is stat'ed again; the
/// candidate back when the file changed while it was read. `answer` is
/// the index's answer about the content (None: not asked, or the lookup
/// failed).
fn settle(o: Opened, fp: Fingerprint, answer: Option<bool>, background: bool) -> Result<Outcome, Candidate> {
    let after = match o.file.metadata() {
        Ok(m) => m,
        Err(e) => return Ok(Outcome::Skip { cand: o.cand, reason: SkipReason::Unreadable, detail: e.to_string() }),
    };
    let stat = Stat::of(&o.before);
    let same = stat == Stat::of(&after)
        && fp.size == stat.size
        && (ctime(&o.before) == ctime(&after) || background && renamed_away(&o.cand.path, &after));
    if !same {
        return Err(o.cand);
    }
    let racy = racy(&o.before, o.read_from);
    Ok(Outcome::Read { cand: o.cand, stat, fp, unseen: answer == Some(false), old_record: None, shared: false, racy })
}

/// Reads a candidate once: chunks, fingerprints, and re-stats to make sure
/// the bytes read are one version of the file (else reads again).
fn read_candidate(
    cand: Candidate,
    params: &crate::chunker::ChunkParams,
    whole_from: WholeFrom,
    buf: &mut Vec<u8>,
    asks: Asks,
) -> Outcome {
    match open_candidate(cand) {
        Opening::Ready(o) => read_opened(o, params, whole_from, buf, asks, None, OnChange::Reread),
        Opening::Said(outcome) => outcome,
    }
}

/// A file's reads, which fail once `stop` is set: a stopped run does not
/// finish reading a large file first (1 MB a read, so it stops within one).
/// Every [`CHANGE_CHECK`] bytes they also look at the file's [`Stat`]
/// (size, mtime, inode, links), and fail with `changed` set once it moved
/// from `before`: a
/// large file being written is not read to its end before the read is
/// found stale.
struct Stoppable<'a> {
    file: &'a File,
    stop: Option<&'a AtomicBool>,
    before: &'a std::fs::Metadata,
    /// Bytes read since the last look.
    unchecked: u64,
    changed: bool,
}

/// How many bytes of a file are read between two looks at its size and
/// mtime ([`Stoppable`]): an `fstat` per 8 MiB costs nothing beside them.
const CHANGE_CHECK: u64 = 8 << 20;

impl<'a> Stoppable<'a> {
    fn new(file: &'a File, stop: Option<&'a AtomicBool>, before: &'a std::fs::Metadata) -> Self {
        Stoppable { file, stop, before, unchecked: 0, changed: false }
    }
}

impl std::io::Read for Stoppable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(std::io::Error::other("the run was stopped"));
        }
        if self.unchecked >= CHANGE_CHECK {
            self.unchecked = 0;
            // As `settle` compares once the read is done (less the ctime,
            // which a rename also sets).
            if Stat::of(&self.file.metadata()?) != Stat::of(self.before) {
                self.changed = true;
                return Err(std::io::Error::other("changed while being read"));
            }
        }
        let mut file = self.file;
        let n = file.read(buf)?;
        self.unchecked += n as u64;
        Ok(n)
    }
}

/// How long a background read waits at most for a file that changed while
/// it was read to stop changing ([`wait_until_quiet`]) before reading it
/// again.
const QUIET_WAIT: Duration = Duration::from_secs(2);

/// The interval at which that file is looked at: a file whose size and
/// mtime stayed the same over it is taken for written.
const QUIET: Duration = Duration::from_millis(50);

/// Waits until the file at `path` keeps its size and mtime over [`QUIET`],
/// at most [`QUIET_WAIT`], or until `stop`. A large file written in one
/// long write (a download's single `write` of 100 MB, a copy under load)
/// is seen by the daemon before the write ends: read again at once, it
/// was read in part three times over (157-258 MB read for 96 MiB, with
/// both cores busy), then held for seconds. Its write's end raises an
/// event of its own, which the read, if still running, meets as a file
/// asked for again and looks at once it is back.
fn wait_until_quiet(path: &Path, stop: Option<&AtomicBool>) {
    let look = || std::fs::symlink_metadata(path).ok().map(|m| Stat::of(&m));
    let until = Instant::now() + QUIET_WAIT;
    let mut last = look();
    while Instant::now() < until && !stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        std::thread::sleep(QUIET);
        let now = look();
        if now == last {
            return;
        }
        last = now;
    }
}

/// What a reader does with a file that changed while it read it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnChange {
    /// Reads it again at once, up to [`READ_ATTEMPTS`] reads (`simd
    /// index`, the daemon's scans).
    Reread,
    /// The daemon's batches: hands it to the background readers
    /// ([`Outcome::Deferred`]) if it is now this large (a file being
    /// written in one long write, seen before the write ended), else reads
    /// it again at once.
    DeferFrom(u64),
    /// The daemon's background readers: a file renamed as it was read is
    /// not read again for its ctime ([`renamed_away`]), and one that
    /// changed is read again once it stopped changing
    /// ([`wait_until_quiet`]).
    Background,
}

/// [`read_candidate`] for a candidate already opened; `on_change` says
/// what a change met while reading leads to.
fn read_opened(
    mut o: Opened,
    params: &crate::chunker::ChunkParams,
    whole_from: WholeFrom,
    buf: &mut Vec<u8>,
    asks: Asks,
    stop: Option<&AtomicBool>,
    on_change: OnChange,
) -> Outcome {
    let background = on_change == OnChange::Background;
    let mut attempts = 1;
    loop {
        // The index's answer for this attempt's content (None: not asked,
        // or the lookup failed and the content is sketched to be safe).
        let answer = std::cell::Cell::new(None);
        let ask = |c: &ContentHash| {
            let a = (asks.known)(c);
            answer.set(a);
            a.unwrap_or(false)
        };
        let mut reader = Stoppable::new(&o.file, stop, &o.before);
        let lookup = Lookup { known: &ask, prior: asks.prior };
        // As `Stoppable` reads: a stopped run stops reading again too.
        let read_at = |out: &mut [u8], at: u64| {
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Err(std::io::Error::other("the run was stopped"));
            }
            std::os::unix::fs::FileExt::read_at(&o.file, out, at)
        };
        let earlier = o.cand.prior().map(|prior| Earlier { prior, read_at: &read_at });
        let read = fingerprint_file(&mut reader, o.before.len(), earlier, params, whole_from, buf, lookup);
        let changed = reader.changed;
        let cand = match read {
            Ok(fp) => match settle(o, fp, answer.get(), background) {
                Ok(outcome) => return outcome,
                Err(cand) => cand,
            },
            Err(_) if changed => o.cand,
            Err(e) => return Outcome::Skip { cand: o.cand, reason: SkipReason::Unreadable, detail: e.to_string() },
        };
        if attempts == READ_ATTEMPTS {
            let detail = format!("changed during {READ_ATTEMPTS} reads");
            return Outcome::Skip { cand, reason: SkipReason::KeptChanging, detail };
        }
        if let OnChange::DeferFrom(n) = on_change {
            if std::fs::metadata(&cand.path).is_ok_and(|m| m.len() >= n) {
                tracing::debug!("{}: changed while being read, read beside the batches", crate::show_path(&cand.path));
                return Outcome::Deferred(cand);
            }
        }
        tracing::debug!("{}: changed while being read, reading again", crate::show_path(&cand.path));
        attempts += 1;
        if background {
            wait_until_quiet(&cand.path, stop);
        }
        o = match open_candidate(cand) {
            Opening::Ready(o) => o,
            Opening::Said(outcome) => return outcome,
        };
    }
}

/// Whether `path` no longer names the file read (`after`, whose name
/// count did not change): it was renamed, which sets a file's ctime and
/// leaves its bytes. Only the daemon's background reads take such a read
/// ([`Background::renamed`] follows the rename); a write meanwhile raises
/// an event of its own, which has the file read again.
fn renamed_away(path: &Path, after: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).map_or(true, |m| m.ino() != after.ino() || m.dev() != after.dev())
}

pub(crate) fn ctime(m: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (m.ctime(), m.ctime_nsec())
}

/// The tick of the coarsest file-system clock simd meets: FAT keeps
/// modification times to 2 s; ext4 with 128-byte inodes, HFS+ and servers
/// of network file systems that keep whole seconds, to 1 s.
const COARSE_TICK_NS: i64 = 2_000_000_000;

/// Whether a file read from `read_from` on (ns since the epoch) was read
/// "racily clean", as git calls it: its mtime falls on a whole second (its
/// file system keeps no finer time, or a tool set it so) and is within a
/// tick of the read, so that a write after the read, in the same tick, of
/// the same size, would leave size, mtime and inode as recorded and be
/// missed by every later scan. Such a record is written with an mtime
/// that matches no stat ([`recorded_mtime`]): the next scan reads the file
/// again, once, and records it as it is then. File systems that keep
/// nanoseconds stamp changes from a clock of ~1–10 ms ticks (Linux before
/// 6.13), or finer once a stat has looked (multigrain timestamps, 6.13 on):
/// a same-size write within those few milliseconds of the read is not
/// caught this way (the daemon's events catch it).
fn racy(before: &std::fs::Metadata, read_from: i64) -> bool {
    use std::os::unix::fs::MetadataExt;
    racy_at(before.mtime(), before.mtime_nsec(), read_from)
}

fn racy_at(mtime_s: i64, mtime_nsec: i64, read_from: i64) -> bool {
    mtime_nsec == 0 && mtime_s.saturating_mul(1_000_000_000) > read_from.saturating_sub(COARSE_TICK_NS)
}

/// The mtime a file's record keeps: its own, or for a racily clean read
/// ([`racy`]) one a nanosecond off, which no stat on a file system of
/// whole seconds ever gives (schema/files.md).
pub(crate) fn recorded_mtime(stat: &Stat, racy: bool) -> i64 {
    if racy {
        stat.mtime ^ 1
    } else {
        stat.mtime
    }
}

pub use crate::store::now_ns;

/// A content's record as a reader fetched it for the writer
/// ([`Outcome::Read`]'s `old_record`): what taking its postings out needs,
/// and the value as stored, which [`Writer::pass_on`] writes again under a
/// new id rather than reading it a second time (that read was ~1.6 % of
/// the daemon's CPU in a burst of appends). The bytes are as old as the
/// postings, and trusted as far as they are ([`Writer::take_prefetched`]).
#[derive(Clone, Debug)]
struct Fetched {
    postings: ContentPostings,
    stored: Option<Vec<u8>>,
}

/// Files written in one atomic write at most: bounds the batch's memory and
/// how much a crash can undo (the next scan redoes it).
const GROUP_FILES: usize = 512;
const GROUP_OPS: usize = 100_000;

/// [`GROUP_FILES`], unless the environment sets `SIMD_TEST_GROUP_FILES`: the
/// crash tests make groups small, so that a killed first index has many
/// states to be left in between none and all of its files (undocumented for
/// users, as `SIMD_TEST_MEMTABLE_KB` is).
fn group_files() -> usize {
    crate::test_setting("SIMD_TEST_GROUP_FILES").filter(|&n| n > 0).map_or(GROUP_FILES, |n| n as usize)
}

/// A run's writer that finds no file waiting commits its group only once
/// the group holds this many files, or once no file came for
/// [`SMALL_GROUP_WAIT`]: every write costs a RocksDB write and the group's
/// meta records whatever its size, and writing at every pause wrote a
/// first index of the Django tree in ~4,600 groups of ~14 files (now ~650 of
/// ~100; its CPU −1.2 % in one set of runs, unchanged in another:
/// `docs/performance.md`).
const SMALL_GROUP: usize = 64;
const SMALL_GROUP_WAIT: Duration = Duration::from_millis(10);

/// The single writer: turns file events into WriteBatches.
///
/// Several files' updates go into one group, written atomically with one
/// WAL append; each file's changes are whole inside it. While a group is
/// open, lookups go through its overlay so that a file sees the pending
/// changes of the files before it.
pub struct Writer<'s> {
    store: &'s Store,
    /// The first file id of the current pass: ghosts record it (see
    /// [`HistoryRecord::Ghost`]).
    pass_start: u64,
    /// For a scan's run: when each root was last walked whole before it
    /// ([`crate::store::walked`]), which a file it finds gone was last seen
    /// no earlier than. None for the daemon's events, which see files go.
    seen_at: Option<Vec<(Vec<u8>, TimeNs)>>,
    /// The daemon's batches: the first file id of the batch before this
    /// one, and the files the batch before removed ([`Writer::remove_gone`]).
    prev_pass_start: u64,
    recent_ghosts: Vec<RecentGhost>,
    next_id: u64,
    next_content: u64,
    counts: Counts,
    group: Group<'s>,
    /// Ids of files seen this run that had their id before this pass
    /// ([`Writer::touch`]).
    touched: Vec<FileId>,
    changes: u64,
    /// Contents that gained a name since this writer started, and those that
    /// lost one: a content in the first set and not the second certainly has
    /// a name, which spares a prefix seek per file for identical copies.
    gained: Gained,
    dropped: HashSet<ContentHash>,
    /// The index held no content when this writer started, and `gained`
    /// has held every content that gained a name since (a content's record
    /// is only ever written as it gains its first name): a content outside
    /// `gained` then has neither a name nor a record, and a first index
    /// looks up neither (~14k lookups on the Django tree).
    fresh: bool,
    /// `gained` holds every content this writer named since its last
    /// [`Writer::forget_touched`] (or since it started): false once the memo
    /// was cleared for its size.
    memo_whole: bool,
    /// Names as committed: made on first use after each commit (a probe
    /// sees the index as it was when made).
    probe: std::cell::RefCell<Option<NameProbe<'s>>>,
    /// Told of every content record this writer wrote, once written
    /// ([`Held`]).
    publish: Option<Arc<Held>>,
    /// What the readers of [`ingest_with`] keep no chunk list of.
    whole_from: WholeFrom,
    /// The daemon's copy of every file record by path, as the index holds
    /// them with the open group written ([`Writer::keeping_paths`]): its
    /// lookups are then hash probes, where two RocksDB point lookups a path
    /// were ~45 % of a batch of changed files. None for a scan, which walks
    /// with its own [`scan::Known`].
    paths: Option<scan::Known>,
    /// With `paths` loaded: how many names each content has, as the index
    /// holds them with the open group written. A changed file's old content
    /// is then known to keep or lose its last name without a seek into
    /// `content_names` (the name probe was ~23 % of the daemon's main thread
    /// in a burst of rewritten files). ~40 bytes a content.
    names: Option<HashMap<ContentHash, u32>>,
    /// The record of the content a file being written had before, as its
    /// reader fetched it ([`Candidate::fetch_old`]), with that content's
    /// hash: [`Writer::drop_name`] takes it instead of a lookup.
    prefetched: Option<(Box<Fetched>, ContentHash)>,
    /// The daemon's writer hands full groups to this thread and goes on
    /// with the next files while RocksDB inserts the group's keys (the
    /// write was ~25 % of the daemon's main thread in a burst).
    committer: Option<Committer<'s>>,
    /// The group the committer is writing: at most one.
    inflight: Option<InFlight>,
    /// Files a group holds before it is written ([`GROUP_FILES`]; tests
    /// make it small).
    group_files: usize,
    /// Large files read, with their sizes, when the caller asked for them
    /// ([`Writer::logging_reads`]): the daemon holds back a large
    /// file that keeps changing.
    large_reads: Option<Vec<(PathBuf, u64)>>,
    /// Files read that have other names (hard links), with their inode
    /// numbers, logged with `large_reads`: the daemon looks at the other
    /// names, whose content changed with no event of their own.
    linked_reads: Option<Vec<(PathBuf, u64)>>,
    /// History records written ([`Writer::stamp`]), and that count and the
    /// wall-clock time when [`Writer::expire_history`] last ran: see
    /// [`Writer::expiry_due`]. Both start from `meta`'s [`Expiry`] record,
    /// so that each `simd index` run need not read all of `history` to
    /// apply retention.
    history_written: std::cell::Cell<u64>,
    last_expiry: Option<(u64, TimeNs, Retention)>,
    /// Chunk-list entries (runs) kept reachable by version ghosts (a file
    /// changed in place leaves its previous content's), counted as
    /// `history_written` is, and that count when [`Writer::expire_history`]
    /// last ran: see [`Writer::versions_due`].
    version_runs: u64,
    version_runs_expired: u64,
    /// The [`Expiry`] record as the index holds it (written with a group
    /// when it changed).
    expiry_stored: Option<Expiry>,
    /// When file ids were handed out ([`Mark`]): one is added, with the
    /// group that hands out an id, when the last is `mark_every` old
    /// ([`Mark::EVERY`], shorter in tests).
    marks: Vec<Mark>,
    mark_every: TimeNs,
    /// When this writer opened: every id below the one it hands out first
    /// was handed out before then, which dates an index's files from
    /// before it kept marks ([`Writer::mark_new_id`]).
    opened: TimeNs,
    /// [`VERSION_RUNS_DUE`], smaller in tests.
    version_runs_due: u64,
    /// A bulk load's postings, written as table files and ingested at its
    /// end ([`store::PostingSpill`]).
    spill: Option<PostingSpill>,
    /// The content whose postings the file being written passed to its
    /// new content ([`Writer::pass_on`]), with the length of its chunk
    /// list: [`Writer::drop_name`] leaves them, and need not read its
    /// record.
    passed_on: Option<(ContentHash, usize)>,
    /// The first content id this writer handed out: a content with an id
    /// from here on may have had its id pass on and taken a new one here.
    first_content: u64,
    /// Contents that got a name back after their id may have passed on in
    /// this writer ([`Writer::first_content`]): a record of one that a
    /// reader read may carry the id it had before (read before that group
    /// was written), so it is looked up instead. None once it held
    /// [`MEMO_MAX`]: then every such record is looked up.
    named_again: Option<HashSet<ContentHash>>,
}

/// Files from this size on are reported by [`Writer::take_large_reads`].
pub const LARGE_READ: u64 = 16 << 20;

/// How long a writer (the daemon, or `simd index` runs one after another)
/// goes at most without applying history retention
/// ([`Writer::expiry_due`]).
pub const EXPIRE_EVERY: Duration = Duration::from_secs(600);

/// The chunk-list entries version ghosts may keep between two passes of
/// [`Writer::expire_history`] ([`Writer::versions_due`]): ~2.4 MB of chunk
/// lists, ~128 MB of a file's earlier versions at the default chunk size.
/// Only a path's newest record is ever read, so every earlier version's
/// list is waste: a 27 MB log appended to every half second under the
/// daemon grew its index by ~0.5 MB a version, 300 MB in the 10 minutes
/// between passes. A pass reads all of history (~45 ms at the default cap
/// of 100,000 records), which reading 128 MB of versions dwarfs.
pub const VERSION_RUNS_DUE: u64 = 1 << 17;

impl Drop for Writer<'_> {
    /// A group still in flight is waited for, so that its result is not
    /// left for the next writer given the same committer.
    fn drop(&mut self) {
        if let Err(e) = self.settle() {
            tracing::error!("{e}");
        }
    }
}

/// A thread that writes groups for a [`Writer`] ([`Writer::with_committer`]).
#[derive(Clone)]
pub struct Committer<'s> {
    groups: crossbeam_channel::Sender<Batch<'s>>,
    done: crossbeam_channel::Receiver<Result<(), StoreError>>,
}

impl<'s> Committer<'s> {
    /// Starts the thread in `scope`; it ends once every clone is dropped.
    pub fn spawn<'scope>(scope: &'scope std::thread::Scope<'scope, 's>, store: &'s Store) -> Committer<'s> {
        let (groups, rx) = bounded::<Batch<'s>>(1);
        let (done_tx, done) = bounded(1);
        scope.spawn(move || {
            for batch in rx {
                if done_tx.send(store.write(batch)).is_err() {
                    break;
                }
            }
        });
        Committer { groups, done }
    }
}

/// What a group handed to the committer changes, until it is written:
/// lookups of its content records go through it, and the totals follow
/// once the write succeeded.
struct InFlight {
    records: HashMap<ContentHash, Arc<ContentRecord>>,
    /// The group's [`Group::renumbered`], until it is written.
    renumbered: HashMap<ContentHash, ContentId>,
    counts: Counts,
    next_id: u64,
    next_content: u64,
    files: usize,
}

/// At most this many (file gone, new file) pairs of one content are
/// compared when a scan pairs moves (about 40 bytes each).
const MAX_MOVE_PAIRS: usize = 1 << 20;

/// Bounds the `gained`/`dropped` memo of a long-lived writer.
const MEMO_MAX: usize = 1 << 20;

/// The uncommitted group and what it changes, for lookups.
struct Group<'s> {
    batch: Batch<'s>,
    files: usize,
    counts: Counts,
    next_id: u64,
    next_content: u64,
    names_added: HashMap<ContentHash, Vec<FileId>>,
    names_removed: HashSet<(ContentHash, FileId)>,
    records: HashMap<ContentHash, Arc<ContentRecord>>,
    /// Contents whose id passed on to another in this group, with the new
    /// id each took ([`Writer::pass_on`]): the index holds the old one
    /// until the group is written.
    renumbered: HashMap<ContentHash, ContentId>,
    paths: HashMap<Vec<u8>, Option<(FileId, FileRecord)>>,
}

impl<'s> Group<'s> {
    fn new(store: &'s Store, counts: Counts, next_id: u64, next_content: u64) -> Self {
        Group {
            batch: store.batch(),
            files: 0,
            counts,
            next_id,
            next_content,
            names_added: HashMap::default(),
            names_removed: HashSet::default(),
            records: HashMap::default(),
            renumbered: HashMap::default(),
            paths: HashMap::default(),
        }
    }

    fn add_name(&mut self, content: ContentHash, id: FileId) {
        self.batch.put::<ContentNames>(&(content, id), &());
        self.names_removed.remove(&(content, id));
        self.names_added.entry(content).or_default().push(id);
    }

    fn remove_name(&mut self, content: ContentHash, id: FileId) {
        self.batch.delete::<ContentNames>(&(content, id));
        if let Some(v) = self.names_added.get_mut(&content) {
            v.retain(|&x| x != id);
        }
        self.names_removed.insert((content, id));
    }
}

impl<'s> Writer<'s> {
    pub fn new(store: &'s Store) -> Result<Self, StoreError> {
        let next_id = store.next_file_id()?;
        let next_content = match store.get::<Meta>(&MetaKey::NextContentId)? {
            Some(MetaValue::NextContentId(n)) => n,
            _ => 1,
        };
        let counts = store.counts()?;
        let expiry_stored = match store.get::<Meta>(&MetaKey::Expiry)? {
            Some(MetaValue::Expiry(e)) => Some(e),
            _ => None,
        };
        let fresh = match store.scan::<ContentChunks>().next() {
            None => true,
            Some(r) => r.map(|_| false)?,
        };
        Ok(Writer {
            store,
            pass_start: next_id,
            seen_at: None,
            prev_pass_start: next_id,
            recent_ghosts: Vec::new(),
            next_id,
            next_content,
            counts,
            group: Group::new(store, counts, next_id, next_content),
            touched: Vec::new(),
            changes: 0,
            gained: Gained::Own(HashSet::default()),
            dropped: HashSet::default(),
            fresh,
            memo_whole: true,
            publish: None,
            probe: Default::default(),
            paths: None,
            names: None,
            prefetched: None,
            committer: None,
            inflight: None,
            group_files: group_files(),
            large_reads: None,
            linked_reads: None,
            whole_from: WholeFrom::default(),
            history_written: std::cell::Cell::new(expiry_stored.map_or(0, |e| e.records)),
            last_expiry: expiry_stored.map(|e| {
                let kept = Retention { max_age_days: e.kept_days, max_records: e.kept_records as usize };
                (0, e.at, kept)
            }),
            version_runs: expiry_stored.map_or(0, |e| e.version_runs),
            version_runs_expired: 0,
            expiry_stored,
            marks: store.marks()?,
            mark_every: crate::test_setting("SIMD_TEST_MARK_EVERY_MS")
                .map_or(Mark::EVERY, |ms| ms as TimeNs * 1_000_000),
            opened: crate::store::now_ns(),
            version_runs_due: VERSION_RUNS_DUE,
            spill: store.posting_spill()?,
            passed_on: None,
            first_content: next_content,
            named_again: Some(HashSet::default()),
        })
    }

    /// Files read for this writer from now on keep no chunk list from this
    /// size on ([`WholeFrom`]).
    pub fn whole_from(mut self, whole_from: WholeFrom) -> Self {
        self.whole_from = whole_from;
        self
    }

    /// Keeps lists of the files this writer writes after reading them that
    /// the daemon looks at again: those of [`LARGE_READ`] bytes or more
    /// ([`Writer::take_large_reads`]) and those with other names
    /// ([`Writer::take_linked_reads`]).
    pub fn logging_reads(mut self) -> Self {
        self.large_reads = Some(Vec::new());
        self.linked_reads = Some(Vec::new());
        self
    }

    /// The large files read since the last call, with their sizes.
    pub fn take_large_reads(&mut self) -> Vec<(PathBuf, u64)> {
        self.large_reads.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The files with other names (hard links) read since the last call,
    /// with their inode numbers.
    pub fn take_linked_reads(&mut self) -> Vec<(PathBuf, u64)> {
        self.linked_reads.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The indexed paths, other than the files' own, whose file had one of
    /// the inodes of `files` (paths read, with their inodes) when last
    /// read: maybe other names of those files (or files of another file
    /// system with the same number, which a look finds unchanged). One
    /// pass over every record, for a batch's files with several names;
    /// from the index, with what is pending written first, when the
    /// records are not kept in memory.
    pub fn other_names(&mut self, files: &[(PathBuf, u64)]) -> Result<Vec<PathBuf>, StoreError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let inodes: HashSet<u64> = files.iter().map(|(_, i)| *i).collect();
        let own: HashSet<Vec<u8>> = files.iter().map(|(p, _)| path_bytes(p)).collect();
        let wanted = |path: &[u8], inode: u64| inodes.contains(&inode) && !own.contains(path);
        if let Some(scan::Known::Loaded(map)) = &self.paths {
            let found = map.iter().filter(|(p, (_, rec))| wanted(p, rec.inode));
            return Ok(found.map(|(p, _)| scan::bytes_path(p)).collect());
        }
        self.commit()?;
        let mut found = Vec::new();
        for item in self.store.scan::<Files>() {
            let (_, rec) = item?;
            if wanted(&rec.path, rec.inode) {
                found.push(scan::bytes_path(&rec.path));
            }
        }
        Ok(found)
    }

    /// A writer that keeps every file record in memory ([`Writer::lookup`]
    /// probes it), for the daemon: ~160 bytes a file by path up to
    /// [`scan::Known::LOAD_MAX`] files, ~100 by path hash up to
    /// [`scan::Known::HASHED_MAX`]; past that it looks paths up in the
    /// index.
    pub fn keeping_paths(store: &'s Store) -> Result<Self, StoreError> {
        let mut w = Writer::new(store)?;
        let known = scan::Known::load_for_writer(store, w.counts.files)?;
        w.names = {
            let contents: Option<Box<dyn Iterator<Item = &ContentHash>>> = match &known {
                scan::Known::Loaded(map) => Some(Box::new(map.values().map(|(_, rec)| &rec.content))),
                scan::Known::Hashed(hashed) => Some(Box::new(hashed.contents())),
                _ => None,
            };
            contents.map(|contents| {
                let mut names: HashMap<ContentHash, u32> = HashMap::default();
                for c in contents {
                    *names.entry(*c).or_default() += 1;
                }
                names
            })
        };
        w.paths = Some(known);
        Ok(w)
    }

    /// Hands full groups to `committer` instead of writing them in line,
    /// while the writer keeps every file record and name count in memory
    /// (its lookups then never read the index, which would not hold a
    /// group being written yet). [`Writer::commit`] still returns once
    /// everything is written.
    pub fn with_committer(mut self, committer: Committer<'s>) -> Self {
        if self.names.is_some() {
            self.committer = Some(committer);
        }
        self
    }

    /// Every path the writer keeps a record of ([`Writer::keeping_paths`];
    /// none when it looks paths up in the index).
    pub fn known_paths(&self) -> impl Iterator<Item = &[u8]> {
        let map = match &self.paths {
            Some(scan::Known::Loaded(map)) => Some(map),
            _ => None,
        };
        map.into_iter().flat_map(|m| m.keys().map(|k| k.as_slice()))
    }

    /// Records what the index will hold for `path` once the group is written.
    fn set_path(&mut self, path: Vec<u8>, rec: Option<(FileId, FileRecord)>) -> Result<(), StoreError> {
        if let Some(known) = &mut self.paths {
            known.set(&path, rec.as_ref().map(|(id, r)| (*id, r)));
            if !matches!(known, scan::Known::Loaded(_) | scan::Known::Hashed(_)) {
                // Past its bound the path map is dropped for lookups: so
                // are the counts, for the name probe. Both read the index
                // from now on, so the group in flight is waited for and
                // the next ones are written in line.
                self.names = None;
                self.committer = None;
                self.settle()?;
            }
        }
        self.group.paths.insert(path, rec);
        Ok(())
    }

    /// Starts a new pass (a daemon batch): files created from now on count
    /// as appeared after the files this pass finds gone. A scan's removal
    /// pass takes the ids from the pass start on as seen
    /// ([`Writer::touch`]): a scan runs as one pass, on a writer of its own.
    pub fn begin_pass(&mut self) {
        self.prev_pass_start = self.pass_start;
        self.pass_start = self.group.next_id;
    }

    /// Notes that the file `id` was seen in this pass. A file given its id
    /// in this pass was written in it, so it is seen without a note: a
    /// first index notes nothing (8 bytes a file, 3.2 MB of 400k).
    fn touch(&mut self, id: FileId) {
        if id.0 < self.pass_start {
            self.touched.push(id);
        }
    }

    fn apply(&mut self, outcome: Outcome, summary: &mut Summary, progress: &Progress) -> Result<(), StoreError> {
        match outcome {
            Outcome::Read { cand, stat, fp, unseen, old_record, shared, racy } => {
                if shared {
                    summary.shared += 1;
                } else {
                    summary.bytes_read += fp.size;
                    summary.whole += u64::from(fp.runs.is_empty() && fp.size > 0);
                }
                if let Some(log) = self.large_reads.as_mut().filter(|_| fp.size >= LARGE_READ) {
                    log.push((cand.path.clone(), fp.size));
                }
                if let Some(log) = self.linked_reads.as_mut().filter(|_| stat.links > 1) {
                    log.push((cand.path.clone(), stat.inode));
                }
                progress.file(fp.size);
                // Read although its stat was as recorded (`simd reread`, or
                // an event that said it was written): counted by whether
                // its bytes were those indexed.
                let as_recorded = cand.old.as_ref().filter(|(_, rec)| stat.matches(rec)).map(|(_, rec)| rec.content);
                // Read again because its record was written racily clean
                // (`racy`): the same content is no change.
                let racily_recorded = cand
                    .old
                    .as_ref()
                    .filter(|(_, rec)| Stat { mtime: recorded_mtime(&stat, true), ..stat }.matches(rec))
                    .map(|(_, rec)| rec.content);
                let is_new = self.current(&path_bytes(&cand.path), cand.old.clone()).is_none();
                self.prefetched = old_record.zip(cand.old.as_ref().map(|(_, r)| r.content));
                let upserted_content = fp.content;
                let kept = Stat { mtime: recorded_mtime(&stat, racy), ..stat };
                let upserted = self.upsert(&cand.path, kept, fp, cand.old, unseen);
                self.prefetched = None;
                let (id, new_content) = upserted?;
                self.touch(id);
                summary.reread += u64::from(as_recorded.is_some());
                if as_recorded == Some(upserted_content) || racily_recorded == Some(upserted_content) {
                    summary.unchanged += 1;
                    summary.new_contents += u64::from(new_content);
                    return Ok(());
                }
                if as_recorded.is_some() {
                    summary.reread_differed += 1;
                    summary.changed += 1;
                } else if is_new {
                    summary.new += 1;
                } else {
                    summary.changed += 1;
                }
                if summary.read_examples.len() < 5 {
                    summary.read_examples.push(cand.path.clone());
                }
                summary.new_contents += u64::from(new_content);
            }
            Outcome::Skip { cand, reason, detail } => {
                // A large file that kept changing while the daemon read it
                // is read again later, once its hold is over; a smaller one
                // at its next event.
                let large = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok().filter(|&n| n >= LARGE_READ);
                match self.large_reads.as_mut().filter(|_| reason == SkipReason::KeptChanging) {
                    Some(log) if let Some(size) = large(&cand.path) => {
                        tracing::debug!("{}: kept changing while being read: held", crate::show_path(&cand.path));
                        log.push((cand.path.clone(), size));
                    }
                    // The daemon: the writes it met raise events of their
                    // own, which bring the file back (a file written to
                    // without a pause is looked at again and again).
                    Some(_) => tracing::debug!(
                        "{}: kept changing while being read: read again after its next writes",
                        crate::show_path(&cand.path)
                    ),
                    None => {
                        tracing::warn!("{}: skipped: {} ({detail})", crate::show_path(&cand.path), reason.describe())
                    }
                }
                // Whatever the index held for it stays: the file is still there.
                if let Some((id, _)) = cand.old {
                    self.touch(id);
                }
                record_skip(summary, cand.path, reason);
            }
            Outcome::Vanished { cand } => {
                // Not touched: if the index held it, the removal pass (or,
                // in the daemon, the delete event) records it.
                record_skip(summary, cand.path, SkipReason::Vanished);
            }
            Outcome::Unchanged { cand } => {
                if let Some((id, rec)) = cand.old {
                    self.touch(id);
                    summary.unchanged += 1;
                    summary.bytes_unchanged += rec.size;
                }
            }
            // Kept by the feed for a background reader; written once read.
            Outcome::Deferred(_) => debug_assert!(false, "a deferred file reached the writer unread"),
        }
        Ok(())
    }

    /// Writes a large file read in the background ([`Background`]) if the
    /// file is still the version read; returns the path when it is to be
    /// looked at again instead (it changed or went since, or its read must
    /// be redone). The index's record of the path is looked up now: the
    /// batches went on while it was read.
    pub fn apply_background(
        &mut self,
        read: BackgroundRead,
        summary: &mut Summary,
    ) -> Result<Option<PathBuf>, StoreError> {
        let progress = Progress::new(false);
        match read.0 {
            Outcome::Read { mut cand, stat, fp, racy, .. } => {
                let now = std::fs::symlink_metadata(&cand.path);
                if !now.is_ok_and(|m| m.is_file() && Stat::of(&m) == stat) {
                    // Changed since it was read: held as if written (a file
                    // that never stops changing is read once per hold, not
                    // without end), then looked at again.
                    if let Some(log) = self.large_reads.as_mut().filter(|_| fp.size >= LARGE_READ) {
                        log.push((cand.path.clone(), fp.size));
                    }
                    return Ok(Some(cand.path));
                }
                // A content the index held when it was read was not
                // sketched; its record may have expired since.
                if fp.sketch.is_none() && self.record(&fp.content)?.is_none() {
                    return Ok(Some(cand.path));
                }
                cand.old = self.lookup(&cand.path)?;
                let outcome = Outcome::Read { cand, stat, fp, unseen: false, old_record: None, shared: false, racy };
                self.apply(outcome, summary, &progress)?;
            }
            // Unreadable after it opened: looked at again as a new event
            // would be (it may be gone, or another kind of file now).
            Outcome::Skip { cand, reason, .. } if cand.unverified && reason != SkipReason::KeptChanging => {
                return Ok(Some(cand.path));
            }
            Outcome::Vanished { cand } => return Ok(Some(cand.path)),
            Outcome::Deferred(cand) => return Ok(Some(cand.path)),
            outcome => self.apply(outcome, summary, &progress)?,
        }
        Ok(None)
    }

    /// The index's record for `path`, counting the open group's changes.
    pub fn lookup(&self, path: &Path) -> Result<Option<(FileId, FileRecord)>, StoreError> {
        let pb = path_bytes(path);
        match (self.group.paths.get(&pb), &self.paths) {
            (Some(pending), _) => Ok(pending.clone()),
            (None, Some(known)) => known.get(self.store, path),
            (None, None) => scan::lookup(self.store, path),
        }
    }

    /// Records a rename whose content did not change: the file keeps its id
    /// and content (no re-chunking), and `history` gets a move record at the
    /// old path. A file the rename replaced at `to` is removed first.
    pub fn rename(&mut self, id: FileId, rec: &FileRecord, to: &Path, stat: Stat) -> Result<(), StoreError> {
        let to_bytes = path_bytes(to);
        if let Some((other, other_rec)) = self.lookup(to)? {
            if other != id {
                self.remove(other, &other_rec)?;
            }
        }
        let new = FileRecord {
            path: to_bytes.clone(),
            size: stat.size,
            mtime: stat.mtime,
            inode: stat.inode,
            content: rec.content,
            dev: stat.dev,
        };
        self.group.batch.delete::<Paths>(&rec.path);
        self.group.batch.put::<Paths>(&to_bytes, &id);
        self.group.batch.put::<Files>(&id, &new);
        let moved = HistoryRecord::Moved { to: to_bytes.clone(), content: Some(rec.content) };
        self.group.batch.put::<History>(&(rec.path.clone(), self.stamp()), &moved);
        self.set_path(rec.path.clone(), None)?;
        self.set_path(to_bytes, Some((id, new)))?;
        self.end_file()
    }

    /// Writes the records of unchanged files that held no device (written
    /// by schema 8 or older) with the device the walk found: nothing is
    /// read, and names of one file (hard links) are then told from copies.
    pub fn record_devices(&mut self, devices: Vec<(FileId, FileRecord)>) -> Result<(), StoreError> {
        for (id, rec) in devices {
            self.group.batch.put::<Files>(&id, &rec);
            self.set_path(rec.path.clone(), Some((id, rec)))?;
            self.end_file()?;
        }
        Ok(())
    }

    /// Tells `held` of every content record written from now on. A
    /// complete set given to a fresh writer that has named nothing yet
    /// becomes its memo of contents named too ([`Gained::Readers`]).
    fn publish_to(&mut self, held: Arc<Held>) {
        let unnamed = matches!(&self.gained, Gained::Own(set) if set.is_empty());
        if self.fresh && unnamed && held.lock().complete {
            self.gained = Gained::Readers(held.clone());
        }
        self.publish = Some(held);
    }

    /// Forgets what only one scan needs (the ids of files written, for its
    /// removal pass, and the gained/dropped memo): a long-lived writer calls
    /// this between batches so that its memory stays flat.
    pub fn forget_touched(&mut self) {
        self.touched.clear();
        self.gained = Gained::Own(HashSet::default());
        self.dropped.clear();
        self.fresh = false;
        // The next batch's reads come after this: nothing named before
        // them can be missing from an empty memo.
        self.memo_whole = true;
    }

    /// Whether `content` has exactly one name, as far as the daemon's name
    /// counts tell (false without them): a change of that file will
    /// drop the content's last name.
    pub fn sole_name(&self, content: &ContentHash) -> bool {
        self.names.as_ref().is_some_and(|n| n.get(content) == Some(&1))
    }

    /// Whether anything was written since the writer started.
    pub fn changed(&self) -> u64 {
        self.changes
    }

    /// The record of `path` as the index will hold it once the group is
    /// written: the group's own change if it has one, else `stored`.
    fn current(&self, path: &[u8], stored: Option<(FileId, FileRecord)>) -> Option<(FileId, FileRecord)> {
        match self.group.paths.get(path) {
            Some(pending) => pending.clone(),
            None => stored,
        }
    }

    /// Notes when `id` is handed out (`report --since`), in the batch that
    /// hands it out: a [`Mark`] when the last one's window is over. The
    /// first mark of an index that held files before it kept marks is
    /// dated from this writer's open, so that a report asked since then
    /// tells them from the files that came after.
    fn mark_new_id(&mut self, id: FileId) {
        let now = crate::store::now_ns();
        let added = if self.marks.is_empty() && id.0 > 1 {
            let within = now.saturating_sub(self.opened).saturating_add(self.mark_every);
            self.marks.push(Mark { at: self.opened.min(now), next_file_id: id.0, within });
            true
        } else {
            Mark::add(&mut self.marks, now, id.0, self.mark_every)
        };
        if added {
            self.group.batch.put::<Meta>(&MetaKey::Marks, &MetaValue::Marks(self.marks.clone()));
        }
    }

    /// Records `path` as holding the fingerprinted content. `old` is what the
    /// index held for it when it was looked up; `unseen`, that a reader
    /// found no record of the content (during this pass). Returns its file
    /// id and whether the content's chunk list was new to the index.
    pub fn upsert(
        &mut self,
        path: &Path,
        stat: Stat,
        mut fp: Fingerprint,
        old: Option<(FileId, FileRecord)>,
        unseen: bool,
    ) -> Result<(FileId, bool), StoreError> {
        let pb = path_bytes(path);
        let old = self.current(&pb, old);
        let id = match &old {
            Some((id, _)) => *id,
            None => {
                let id = FileId(self.group.next_id);
                self.mark_new_id(id);
                self.group.next_id += 1;
                self.group.batch.put::<Paths>(&pb, &id);
                self.group.counts.files += 1;
                id
            }
        };
        let rec = FileRecord {
            path: pb.clone(),
            size: stat.size,
            mtime: stat.mtime,
            inode: stat.inode,
            content: fp.content,
            dev: stat.dev,
        };
        self.group.batch.put::<Files>(&id, &rec);
        let mut new_chunks = false;
        let same_content = old.as_ref().is_some_and(|(_, r)| r.content == fp.content);
        if !same_content {
            // A content a reader found no record of had no name either (a
            // name needs a record), unless this writer gave it one since:
            // all such are in `gained` while `memo_whole` holds. This
            // spares a name probe and a record lookup per new content, ~15 %
            // of a daemon batch of rewritten files.
            let new_to_index = unseen && self.memo_whole && !self.gained.contains(&fp.content);
            if new_to_index || !self.has_names(&fp.content, None)? {
                self.group.counts.contents += 1;
                let mut passing = None;
                let record = match if new_to_index { None } else { self.record(&fp.content)? } {
                    Some(r) => {
                        // A content getting a name back: its id may have
                        // passed on here, and a reader may hold its record
                        // as it was before ([`Writer::take_prefetched`]).
                        if r.id.0 >= self.first_content {
                            match &mut self.named_again {
                                Some(set) if set.len() < MEMO_MAX => {
                                    set.insert(fp.content);
                                }
                                _ => self.named_again = None,
                            }
                        }
                        r
                    }
                    None => {
                        new_chunks = true;
                        // Readers leave the sketch out only for a content whose
                        // record the index held, and records are never removed
                        // while they run.
                        let Some(sketch) = fp.sketch.take() else {
                            return Err(self.store.corrupt::<ContentChunks>(
                                &fp.content,
                                "the record was gone when the file's content came to be written",
                            ));
                        };
                        if self.group.next_content > ContentId::MAX {
                            return Err(StoreError::ContentIdsExhausted { dir: self.store.dir().to_path_buf() });
                        }
                        passing = match &old {
                            Some((file, old_rec)) if self.spill.is_none() => self.pass_on(*file, old_rec)?,
                            _ => None,
                        };
                        let id = match &passing {
                            Some(old) => old.id,
                            None => {
                                self.group.next_content += 1;
                                ContentId(self.group.next_content - 1)
                            }
                        };
                        // Moved, not copied: a large file's chunk list is
                        // most of what writing it holds in memory.
                        let runs = std::mem::take(&mut fp.runs);
                        let r = Arc::new(ContentRecord { id, size: fp.size, runs, sketch });
                        self.group.batch.put::<ContentChunks>(&fp.content, &r);
                        self.group.batch.put::<ContentById>(&id, &fp.content);
                        self.group.records.insert(fp.content, r.clone());
                        r
                    }
                };
                match (&mut self.spill, &passing) {
                    (Some(spill), _) => self.store.spill_posting(spill, &record)?,
                    (None, Some(old)) => put_posting_changes(&mut self.group.batch, old, &record),
                    (None, None) => put_postings(&mut self.group.batch, &record),
                }
            }
            self.add_name(fp.content, id);
            self.note_gained(fp.content);
            if let Some((_, old_rec)) = &old {
                self.drop_name(id, old_rec, true)?;
            }
            self.passed_on = None;
        }
        self.set_path(pb, Some((id, rec)))?;
        self.end_file()?;
        Ok((id, new_chunks))
    }

    /// Removes the file at `id` from the index, leaving a ghost in history.
    pub fn remove(&mut self, id: FileId, rec: &FileRecord) -> Result<(), StoreError> {
        self.remove_at(id, rec).map(|_| ())
    }

    /// [`Writer::remove`], returning the time its ghost is recorded at.
    fn remove_at(&mut self, id: FileId, rec: &FileRecord) -> Result<TimeNs, StoreError> {
        self.group.batch.delete::<Files>(&id);
        self.group.batch.delete::<Paths>(&rec.path);
        self.group.counts.files -= 1;
        self.drop_name(id, rec, false)?;
        // The ghost for lost-and-found, even when copies of the content live on.
        let seen = self.seen_at.as_deref().and_then(|w| crate::store::walked_at(w, &rec.path));
        let ghost = HistoryRecord::Ghost { content: rec.content, size: rec.size, since: FileId(self.pass_start), seen };
        let stamp = self.stamp();
        self.group.batch.put::<History>(&(rec.path.clone(), stamp), &ghost);
        self.set_path(rec.path.clone(), None)?;
        self.end_file()?;
        Ok(stamp)
    }

    /// Drops the file at `id` from the index without a trace in history (its
    /// root is forgotten, or it is excluded now: the file was not lost, it is
    /// no longer followed).
    /// A content left without a name loses its chunk list too, unless a
    /// ghost in `ghosts` still refers to it. Only at the end of a pass: a
    /// file of that content written after it by the same writer would find
    /// the index's record, whose deletion is still in the open group.
    fn forget_file(&mut self, id: FileId, rec: &FileRecord, ghosts: &HashSet<ContentHash>) -> Result<(), StoreError> {
        self.group.batch.delete::<Files>(&id);
        self.group.batch.delete::<Paths>(&rec.path);
        self.group.counts.files -= 1;
        if let Some(content_id) = self.drop_name(id, rec, false)? {
            if !ghosts.contains(&rec.content) {
                self.group.batch.delete::<ContentById>(&content_id);
                self.group.batch.delete::<ContentChunks>(&rec.content);
                self.group.records.remove(&rec.content);
            }
        }
        self.set_path(rec.path.clone(), None)?;
        self.end_file()
    }

    /// A history time for the group's next record: distinct within the group,
    /// so two records of one path never share a key. Called once per
    /// record written, which it counts.
    fn stamp(&self) -> TimeNs {
        self.history_written.set(self.history_written.get() + 1);
        now_ns() + self.group.files as TimeNs
    }

    /// Whether [`Writer::expire_history`] is worth running now: it never
    /// ran, or `every` has passed since, or the records written since
    /// reach 1 % of `retention`'s cap, or [`Writer::versions_due`], or it
    /// applied another retention (the options changed). It
    /// reads all of `history` (~45 ms of CPU at the default cap of 100,000
    /// records, for every idle moment of the daemon, and for every `simd
    /// index` run that changed a file, where handling a changed file and
    /// flushing took ~25 ms), so a writer lets the cap be exceeded by 1 %
    /// and an old record outlive its age by up to `every`. The interval is
    /// measured on the wall clock, since the last pass may have been
    /// another process's: a clock set back makes a pass due.
    pub fn expiry_due(&self, retention: Retention, every: Duration) -> bool {
        let Some((written, when, kept)) = self.last_expiry else { return true };
        let threshold = (retention.max_records as u64 / 100).max(1);
        let elapsed = now_ns().checked_sub(when).filter(|&e| e >= 0).map(|e| Duration::from_nanos(e as u64));
        kept != retention
            || elapsed.is_none_or(|e| e >= every)
            || self.history_written.get() - written >= threshold
            || self.versions_due()
    }

    /// The [`Expiry`] record as this writer sees it (none before any pass).
    fn expiry(&self) -> Option<Expiry> {
        self.last_expiry.map(|(written, at, kept)| Expiry {
            at,
            records: self.history_written.get() - written,
            version_runs: self.version_runs - self.version_runs_expired,
            kept_days: kept.max_age_days,
            kept_records: kept.max_records as u64,
        })
    }

    /// Whether the chunk lists kept for earlier versions of files changed
    /// in place since [`Writer::expire_history`] last ran reach
    /// [`VERSION_RUNS_DUE`] entries: the pass that drops all but each
    /// path's newest is worth running after any batch then, not only at the
    /// next flush.
    pub fn versions_due(&self) -> bool {
        self.version_runs - self.version_runs_expired >= self.version_runs_due
    }

    /// Closes one file's changes; commits the group when it is full.
    fn end_file(&mut self) -> Result<(), StoreError> {
        self.group.files += 1;
        if self.group.files >= self.group_files || self.group.batch.len() >= GROUP_OPS {
            self.write_group(false)?;
        }
        Ok(())
    }

    /// Writes the open group, with the updated totals, in one atomic
    /// write, and returns once it (and any group before it) is written.
    pub fn commit(&mut self) -> Result<(), StoreError> {
        self.write_group(true)
    }

    /// Hands the open group to the committer if it holds [`SMALL_GROUP`]
    /// files or more and the group before it is written; for a writer
    /// about to wait for its readers. The group a daemon's batch ends with
    /// is then what the readers finished last, not up to [`GROUP_FILES`]
    /// files, and the batch waits for less when it commits: in a 10 %
    /// burst over the generated corpus the last group's write took 5-7 ms
    /// after the readers were done.
    pub fn hand_over_while_idle(&mut self) -> Result<(), StoreError> {
        let Some(committer) = &self.committer else { return Ok(()) };
        if self.group.files < SMALL_GROUP {
            return Ok(());
        }
        if self.inflight.is_some() {
            match committer.done.try_recv() {
                Ok(written) => {
                    let inflight = self.inflight.take().expect("a group in flight");
                    self.landed(inflight, written)?;
                }
                Err(crossbeam_channel::TryRecvError::Empty) => return Ok(()),
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    return Err(StoreError::WriterGone { dir: self.store.dir().to_path_buf() })
                }
            }
        }
        self.write_group(false)
    }

    /// Writes the open group; with a committer and not `wait`, hands it
    /// over and returns at once (after the group before it is written).
    fn write_group(&mut self, wait: bool) -> Result<(), StoreError> {
        // One group in flight at most, and groups land in order.
        self.settle()?;
        if self.group.files == 0 {
            return Ok(());
        }
        let (counts, next_id, next_content) = (self.group.counts, self.group.next_id, self.group.next_content);
        let mut group = std::mem::replace(&mut self.group, Group::new(self.store, counts, next_id, next_content));
        let now = now_ns();
        group.batch.put::<Meta>(&MetaKey::LastUpdate, &MetaValue::LastUpdate(now));
        if group.counts != self.counts {
            group.batch.put::<Meta>(&MetaKey::Counts, &MetaValue::Counts(group.counts));
        }
        if group.next_id != self.next_id {
            group.batch.put::<Meta>(&MetaKey::NextFileId, &MetaValue::NextFileId(group.next_id));
        }
        if group.next_content != self.next_content {
            group.batch.put::<Meta>(&MetaKey::NextContentId, &MetaValue::NextContentId(group.next_content));
        }
        // With the records it counts: a kill loses both or neither.
        let expiry = self.expiry();
        if expiry != self.expiry_stored {
            if let Some(e) = expiry {
                group.batch.put::<Meta>(&MetaKey::Expiry, &MetaValue::Expiry(e));
            }
            self.expiry_stored = expiry;
        }
        let inflight = InFlight {
            records: group.records,
            renumbered: group.renumbered,
            counts,
            next_id,
            next_content,
            files: group.files,
        };
        match &self.committer {
            Some(c) => {
                if c.groups.send(group.batch).is_err() {
                    return Err(StoreError::WriterGone { dir: self.store.dir().to_path_buf() });
                }
                self.inflight = Some(inflight);
                if wait {
                    self.settle()?;
                }
            }
            None => {
                let written = self.store.write(group.batch);
                self.landed(inflight, written)?;
            }
        }
        Ok(())
    }

    /// Waits for the group in flight, if any, to be written.
    fn settle(&mut self) -> Result<(), StoreError> {
        let Some(inflight) = self.inflight.take() else { return Ok(()) };
        let written = match &self.committer {
            Some(c) => {
                c.done.recv().unwrap_or_else(|_| Err(StoreError::WriterGone { dir: self.store.dir().to_path_buf() }))
            }
            None => unreachable!("a group is in flight only with a committer"),
        };
        self.landed(inflight, written)
    }

    /// A group's write came back: on success the in-memory totals follow.
    fn landed(&mut self, group: InFlight, written: Result<(), StoreError>) -> Result<(), StoreError> {
        written?;
        match (&self.publish, &self.gained) {
            // Added as they were named.
            (Some(_), Gained::Readers(_)) | (None, _) => {}
            (Some(held), Gained::Own(_)) => {
                held.add(group.records.into_keys());
            }
        }
        *self.probe.get_mut() = None;
        self.counts = group.counts;
        self.next_id = group.next_id;
        self.next_content = group.next_content;
        self.changes += group.files as u64;
        Ok(())
    }

    /// When the change of file `file` from `old`'s content takes that
    /// content's last name: passes its content id on to the file's new
    /// content, which is about to be written, and returns its postings
    /// (with that id), of which only those the new content's differ from
    /// are then written ([`put_posting_changes`]). The old content's
    /// record, kept for `simd lost`, is written again under a new id, so
    /// that every kept chunk list still has an id of its own.
    ///
    /// An appended file's content keeps all but its last chunks and
    /// mostly every posted sample: without this its ~50 postings went out
    /// and came back under a new id, ~100 memtable entries a file, the
    /// largest part left of a burst of appends under the daemon; a 300 MB
    /// log appended to rewrote ~600,000.
    ///
    /// None (the content ids stay as they are) when the old content keeps a
    /// name, or its record is of an older value version or is not to be
    /// had.
    fn pass_on(&mut self, file: FileId, old: &FileRecord) -> Result<Option<ContentPostings>, StoreError> {
        let last = match &self.names {
            Some(names) => names.get(&old.content) == Some(&1),
            None => !self.has_names(&old.content, Some(file))?,
        };
        if !last {
            return Ok(None);
        }
        let (postings, stored) = match self.take_prefetched(&old.content) {
            Some(Fetched { postings, stored }) => (postings, stored),
            None => match self.postings(&old.content)? {
                Some(postings) => (postings, None),
                None => return Ok(None),
            },
        };
        let new_id = ContentId(self.group.next_content);
        // The record as the group or the one in flight holds it, else as
        // the index stores it, given the new id.
        let held = self.held_record(&old.content).flatten().cloned();
        match held {
            Some(r) => {
                let r = Arc::new(ContentRecord { id: new_id, ..(*r).clone() });
                self.group.batch.put::<ContentChunks>(&old.content, &r);
                self.group.records.insert(old.content, r);
            }
            None => {
                // As the reader read it with the postings, else from the index.
                let stored = match stored {
                    Some(bytes) => Some(bytes),
                    None => self.store.get_stored::<ContentChunks>(&old.content)?,
                };
                let Some(bytes) = stored.and_then(|b| ContentChunks::renumbered(&b, new_id)) else {
                    // Back for `drop_name`, which takes them out.
                    self.prefetched = Some((Box::new(Fetched { postings, stored: None }), old.content));
                    return Ok(None);
                };
                self.group.batch.put_stored::<ContentChunks>(&old.content, &bytes);
            }
        }
        self.group.next_content += 1;
        self.group.batch.put::<ContentById>(&new_id, &old.content);
        self.group.renumbered.insert(old.content, new_id);
        self.passed_on = Some((old.content, postings.runs.len()));
        Ok(Some(postings))
    }

    /// Takes `id`'s name off its old content. When it was the content's last
    /// name, its postings go (it no longer takes part in analysis) and, with
    /// `version_ghost` (an in-place change; a removal writes its own ghost), a
    /// ghost keeps its chunk list reachable for lost-and-found.
    ///
    /// Returns the content's id when this was its last name.
    fn drop_name(
        &mut self,
        id: FileId,
        rec: &FileRecord,
        version_ghost: bool,
    ) -> Result<Option<ContentId>, StoreError> {
        self.remove_name(rec.content, id);
        self.dropped.insert(rec.content);
        let mut last = None;
        // Postings that passed to the file's new content stay: this was
        // the content's last name ([`Writer::pass_on`] looked).
        let passed = self.passed_on.take().filter(|(c, _)| *c == rec.content).map(|(_, runs)| runs);
        if passed.is_some() || !self.has_names(&rec.content, Some(id))? {
            self.group.counts.contents -= 1;
            let record = match passed {
                Some(_) => None,
                None => match self.take_prefetched(&rec.content) {
                    Some(r) => Some(r.postings),
                    None => self.postings(&rec.content)?,
                },
            };
            match (&record, &mut self.spill) {
                (Some(record), Some(spill)) => spill.remove(record.clone()),
                (Some(record), None) => {
                    for (chunk, _, _) in record.chunk_counts() {
                        self.group.batch.delete::<ChunkContents>(&(chunk, record.id));
                    }
                    for &sample in &record.posted {
                        self.group.batch.delete::<SketchContents>(&(sample, record.id));
                    }
                }
                (None, _) => {}
            }
            if version_ghost {
                self.version_runs += passed.or(record.as_ref().map(|r| r.runs.len())).unwrap_or(0) as u64;
                let ghost = HistoryRecord::Ghost {
                    content: rec.content,
                    size: rec.size,
                    since: FileId(self.pass_start),
                    seen: None,
                };
                self.group.batch.put::<History>(&(rec.path.clone(), self.stamp()), &ghost);
            }
            last = record.map(|r| r.id);
        }
        Ok(last)
    }

    /// What taking `content`'s postings out needs of its record, from the
    /// group or the index (as [`Writer::record`]).
    fn postings(&self, content: &ContentHash) -> Result<Option<ContentPostings>, StoreError> {
        let mut p = match self.held_record(content) {
            Some(r) => r.map(|r| ContentPostings::of(r)),
            None => self.store.get_postings(content)?,
        };
        if let (Some(p), Some(id)) = (&mut p, self.renumbered(content)) {
            p.id = id;
        }
        Ok(p)
    }

    /// A content's chunk list, from the group or the index.
    fn record(&self, content: &ContentHash) -> Result<Option<Arc<ContentRecord>>, StoreError> {
        let r = match self.held_record(content) {
            Some(r) => r.cloned(),
            None => self.store.get::<ContentChunks>(content)?.map(Arc::new),
        };
        Ok(r.map(|r| match self.renumbered(content) {
            Some(id) if id != r.id => Arc::new(ContentRecord { id, ..(*r).clone() }),
            _ => r,
        }))
    }

    /// The id a content took in the open group or the one in flight when
    /// its own passed on ([`Writer::pass_on`]), which the index does not
    /// hold yet.
    fn renumbered(&self, content: &ContentHash) -> Option<ContentId> {
        let inflight = self.inflight.as_ref().and_then(|f| f.renumbered.get(content));
        self.group.renumbered.get(content).or(inflight).copied()
    }

    /// The record of `content` a reader fetched for the file being written
    /// ([`Writer::prefetched`]), if it is of that content and its id cannot
    /// be one that passed on since it was read.
    fn take_prefetched(&mut self, content: &ContentHash) -> Option<Fetched> {
        let (r, c) = self.prefetched.take()?;
        // A content whose id passed on has no name: to be some file's old
        // content again it got one back, and is in `named_again`.
        let stale = self.named_again.as_ref().is_none_or(|s| s.contains(content));
        (c == *content && !stale).then_some(*r)
    }

    /// A content's record as this writer knows it without the index: the
    /// group's (or the one in flight), or none at all when the index is
    /// fresh and the writer never gave it one; None when the index must
    /// be asked.
    fn held_record(&self, content: &ContentHash) -> Option<Option<&Arc<ContentRecord>>> {
        let inflight = self.inflight.as_ref().and_then(|f| f.records.get(content));
        match self.group.records.get(content).or(inflight) {
            Some(r) => Some(Some(r)),
            None if self.fresh && !self.gained.contains(content) => Some(None),
            None => None,
        }
    }

    /// Remembers that `content` gained a name ([`Writer::gained`]). A memo
    /// at its bound starts again, empty and no longer whole.
    fn note_gained(&mut self, content: ContentHash) {
        let kept = match &mut self.gained {
            Gained::Own(set) => {
                let room = set.len() < MEMO_MAX;
                if !room {
                    set.clear();
                }
                set.insert(content);
                room
            }
            // Cleared, the readers' set holds contents that a reader found
            // in the index too, named or not: the writer keeps its own again.
            Gained::Readers(held) => {
                let kept = held.add([content]);
                if !kept {
                    self.gained = Gained::Own(HashSet::from_iter([content]));
                }
                kept
            }
        };
        if !kept {
            self.dropped.clear();
            self.fresh = false;
            self.memo_whole = false;
        }
    }

    /// Gives `content` the name `id` (in the open group and the counts).
    fn add_name(&mut self, content: ContentHash, id: FileId) {
        self.group.add_name(content, id);
        if let Some(names) = &mut self.names {
            *names.entry(content).or_default() += 1;
        }
    }

    /// Takes the name `id` (which it has) off `content`.
    fn remove_name(&mut self, content: ContentHash, id: FileId) {
        self.group.remove_name(content, id);
        if let Some(names) = &mut self.names {
            if let std::collections::hash_map::Entry::Occupied(mut e) = names.entry(content) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
    }

    /// Whether `content` has a name other than `except`, counting the group's
    /// pending changes. (`except`'s own name is one [`Writer::drop_name`]
    /// has already taken off, so the counts no longer hold it.)
    fn has_names(&self, content: &ContentHash, except: Option<FileId>) -> Result<bool, StoreError> {
        if let Some(names) = &self.names {
            return Ok(names.contains_key(content));
        }
        if except.is_none() && self.gained.contains(content) && !self.dropped.contains(content) {
            return Ok(true);
        }
        if self.fresh && !self.gained.contains(content) {
            return Ok(false);
        }
        if self.group.names_added.get(content).is_some_and(|v| v.iter().any(|&id| Some(id) != except)) {
            return Ok(true);
        }
        let mut probe = self.probe.borrow_mut();
        let probe = probe.get_or_insert_with(|| self.store.name_probe());
        probe.any_name(content, |id| Some(id) != except && !self.group.names_removed.contains(&(*content, id)))
    }

    /// Removes every file under `roots` whose id is not in `seen` (sorted),
    /// except under `kept` directories (which could not be listed). A file
    /// gone whose content appeared in this pass under a new path was moved
    /// while nothing watched: it is recorded as a move ([`Writer::adopt`]).
    /// One still in its place was left out by an exclude or an ignore file,
    /// and leaves without a ghost. The files looked among are `known`
    /// when given (every record by path, read before the pass, which has
    /// written none it did not see), else every record in `files`.
    /// Returns (removed, moved, left out).
    fn remove_unseen(
        &mut self,
        seen: &[FileId],
        roots: &[Vec<u8>],
        kept: &[Vec<u8>],
        unseen: Unseen,
    ) -> Result<(u64, u64, u64), StoreError> {
        // Files given an id in this pass were written in it, so seen
        // ([`Writer::touch`]).
        let is_gone = |id: &FileId, rec: &FileRecord| {
            id.0 < self.pass_start
                && seen.binary_search(id).is_err()
                && is_under_any(&rec.path, roots)
                && !is_under_any(&rec.path, kept)
        };
        let mut gone = Vec::new();
        match unseen {
            // In id order, as the scan below finds them.
            Unseen::Ids(ids) => {
                // Both in id order: the ids not seen come out of one merge,
                // where a binary search of `seen` for each took ~4 ms of a
                // daemon's start on the Django tree (66.5k records).
                let mut seen_ids = seen.iter().peekable();
                let not_seen = ids.into_iter().filter(|id| id.0 < self.pass_start).filter(|id| {
                    while seen_ids.next_if(|s| *s < id).is_some() {}
                    seen_ids.peek() != Some(&id)
                });
                for id in not_seen {
                    // Read from the store the walk loaded them from (under
                    // the same lock): as the walk knew it, or as this
                    // pass wrote it, or gone.
                    match self.store.get::<Files>(&id)? {
                        Some(rec) if is_gone(&id, &rec) => gone.push((id, rec)),
                        _ => {}
                    }
                }
            }
            // Files given an id in this pass were written in it, so seen:
            // only older ids can be gone (a first index scans nothing).
            Unseen::Scan => {
                for item in self.store.scan_before::<Files>(&FileId(self.pass_start)) {
                    let (id, rec) = item?;
                    if is_gone(&id, &rec) {
                        gone.push((id, rec));
                    }
                }
            }
        }
        // The files of this pass are in the index from here on.
        self.commit()?;
        let moved = self.adopt_moves(&gone, self.pass_start)?;
        let moves = moved.iter().filter(|&&m| m).count();
        // A file still there was left out (an exclude or an ignore file now
        // covers it): it was not lost, so it leaves no ghost.
        let mut left_out = Vec::new();
        for ((id, rec), _) in gone.iter().zip(&moved).filter(|(_, &m)| !m) {
            let there = std::fs::symlink_metadata(scan::bytes_path(&rec.path)).is_ok_and(|m| m.is_file());
            if there {
                left_out.push((*id, rec));
            } else {
                self.remove(*id, rec)?;
            }
        }
        let left = left_out.len() as u64;
        if !left_out.is_empty() {
            // The ghosts just written count among those a chunk list is kept for.
            self.commit()?;
            let ghosts = ghost_contents(self.store)?;
            for (id, rec) in left_out {
                self.forget_file(id, rec, &ghosts)?;
            }
        }
        self.commit()?;
        Ok(((gone.len() - moves) as u64 - left, moves as u64, left))
    }

    /// Removes the files a daemon's batch found gone (`gone`: their ids and
    /// records as they were found), but those holding the content of a
    /// file this batch or the one before wrote, which moved there
    /// ([`Writer::pair_moves`]), and those there again (written, or to be,
    /// under their own event). A ghost the batch before wrote whose content
    /// a file of this batch holds becomes a move record: a move into a
    /// directory just made may come as its old name's removal first, and
    /// its new name a batch later.
    pub fn remove_gone(&mut self, gone: Vec<(FileId, FileRecord)>) -> Result<(), StoreError> {
        let now = now_ns();
        let mut recent = std::mem::take(&mut self.recent_ghosts);
        recent.retain(|g| now - g.stamp < RECENT_GHOST_NS);
        if gone.is_empty() && recent.is_empty() {
            return Ok(());
        }
        // The batch's files are in the index from here on.
        self.commit()?;
        // A file can be found gone twice: under its directory, gone, and
        // by its own event.
        let mut gone = gone;
        gone.sort_by_key(|(id, _)| *id);
        gone.dedup_by_key(|(id, _)| *id);
        let mut still = Vec::with_capacity(gone.len());
        for (id, rec) in gone {
            let path = scan::bytes_path(&rec.path);
            // As the index holds it now, if it is still gone.
            if std::fs::symlink_metadata(&path).is_err() {
                if let Some((held_id, held)) = self.lookup(&path)? {
                    if held_id == id {
                        still.push((held_id, held));
                    }
                }
            }
        }
        let moved = self.adopt_moves(&still, self.prev_pass_start)?;
        for ((id, rec), _) in still.iter().zip(&moved).filter(|(_, &m)| !m) {
            let stamp = self.remove_at(*id, rec)?;
            self.recent_ghosts.push(RecentGhost { id: *id, rec: rec.clone(), stamp });
        }
        if !recent.is_empty() {
            self.commit()?;
            let as_gone: Vec<(FileId, FileRecord)> = recent.iter().map(|g| (g.id, g.rec.clone())).collect();
            for (g, _, new_rec) in self.pair_moves(&as_gone, self.pass_start)? {
                let ghost = &recent[g];
                // Not where the content appeared again itself.
                if new_rec.path == ghost.rec.path {
                    continue;
                }
                self.group.batch.delete::<History>(&(ghost.rec.path.clone(), ghost.stamp));
                let moved = HistoryRecord::Moved { to: new_rec.path.clone(), content: Some(new_rec.content) };
                let stamp = self.stamp();
                self.group.batch.put::<History>(&(ghost.rec.path.clone(), stamp), &moved);
                self.end_file()?;
            }
        }
        Ok(())
    }

    /// Records as moved each file of `gone` that [`Writer::pair_moves`]
    /// pairs with a file given its id at `from` or later; returns which
    /// were.
    fn adopt_moves(&mut self, gone: &[(FileId, FileRecord)], from: u64) -> Result<Vec<bool>, StoreError> {
        let mut moved = vec![false; gone.len()];
        for (g, new_id, new_rec) in self.pair_moves(gone, from)? {
            moved[g] = true;
            let (old_id, old_rec) = &gone[g];
            self.adopt(*old_id, old_rec, new_id, &new_rec)?;
        }
        Ok(moved)
    }

    /// Pairs files gone with files that appeared in this pass holding the
    /// same content, one to one, closest paths first (the name kept, then
    /// the inside of a moved directory, then where in the tree): a
    /// directory renamed while nothing ran is the same files moved, and
    /// each copy of a content goes back to the path it came from. Returns
    /// (index in `gone`, the new file's id and record).
    fn pair_moves(
        &self,
        gone: &[(FileId, FileRecord)],
        from: u64,
    ) -> Result<Vec<(usize, FileId, FileRecord)>, StoreError> {
        let mut by_content: HashMap<ContentHash, Vec<usize>> = HashMap::default();
        for (g, (_, rec)) in gone.iter().enumerate() {
            by_content.entry(rec.content).or_default().push(g);
        }
        // A file gone is no new place of anything, though it may be new
        // itself (the daemon: made in the batch before, removed in this
        // one, it paired with itself, and the index lost a name).
        let gone_ids: HashSet<FileId> = gone.iter().map(|(id, _)| *id).collect();
        let mut moves = Vec::new();
        for (content, olds) in by_content {
            let mut news = Vec::new();
            for item in self.store.names(&content) {
                let ((_, id), ()) = item?;
                if id.0 >= from && !gone_ids.contains(&id) {
                    if let Some(rec) = self.store.get::<Files>(&id)? {
                        // Nor one removed since, whose removal is still on its way.
                        if std::fs::symlink_metadata(scan::bytes_path(&rec.path)).is_ok() {
                            news.push((id, rec));
                        }
                    }
                }
            }
            if news.is_empty() {
                continue;
            }
            let depth = |p: &[u8]| p.iter().filter(|&&c| c == b'/').count();
            let name = |p: &[u8]| p.rsplit(|&c| c == b'/').next().map(<[u8]>::to_vec).unwrap_or_default();
            // Every old path against every new one, unless that is too many
            // (thousands of copies of one content, empty files say, moved at
            // once): then only paths that keep their file name are compared.
            let all = olds.len().saturating_mul(news.len()) <= MAX_MOVE_PAIRS;
            let mut by_name: HashMap<Vec<u8>, Vec<usize>> = HashMap::default();
            if !all {
                for (n, (_, rec)) in news.iter().enumerate() {
                    by_name.entry(name(&rec.path)).or_default().push(n);
                }
            }
            // ((shared trailing, shared leading, depth skew), index in `gone`, index in `news`)
            let mut pairs = Vec::new();
            for &g in &olds {
                let old = &gone[g].1.path;
                let targets: Vec<usize> =
                    if all { (0..news.len()).collect() } else { by_name.get(&name(old)).cloned().unwrap_or_default() };
                for n in targets {
                    let new = &news[n].1.path;
                    let (suffix, prefix) = scan::closeness(old, new);
                    let skew = depth(old).abs_diff(depth(new));
                    pairs.push(((suffix, prefix, std::cmp::Reverse(skew)), g, n));
                    if pairs.len() >= MAX_MOVE_PAIRS {
                        break;
                    }
                }
            }
            // Best first; ties by path, so the pairing does not depend on
            // the order the walk found the files in.
            pairs.sort_by(|a, b| {
                b.0.cmp(&a.0)
                    .then_with(|| gone[a.1].1.path.cmp(&gone[b.1].1.path))
                    .then_with(|| news[a.2].1.path.cmp(&news[b.2].1.path))
            });
            let (mut old_done, mut new_done) = (HashSet::default(), HashSet::default());
            for (_, g, n) in pairs {
                if !old_done.contains(&g) && !new_done.contains(&n) {
                    old_done.insert(g);
                    new_done.insert(n);
                    moves.push((g, news[n].0, news[n].1.clone()));
                }
            }
        }
        moves.sort_by_key(|m| m.0);
        Ok(moves)
    }

    /// Records that the file `old_id` was moved to the new file `new_id`
    /// (same content, found in this pass): the moved file takes over the
    /// old id, as a rename seen live keeps it, so it counts as a file that
    /// was already there, and `history` gets a move record at the old path.
    fn adopt(&mut self, old_id: FileId, old: &FileRecord, new_id: FileId, new: &FileRecord) -> Result<(), StoreError> {
        debug_assert_eq!(old.content, new.content);
        let stamp = self.stamp();
        let b = &mut self.group.batch;
        b.delete::<Files>(&new_id);
        b.put::<Files>(&old_id, new);
        b.delete::<Paths>(&old.path);
        b.put::<Paths>(&new.path, &old_id);
        b.put::<History>(
            &(old.path.clone(), stamp),
            &HistoryRecord::Moved { to: new.path.clone(), content: Some(new.content) },
        );
        // The content keeps its name under the old id.
        self.remove_name(new.content, new_id);
        self.group.counts.files -= 1;
        self.set_path(old.path.clone(), None)?;
        self.set_path(new.path.clone(), Some((old_id, new.clone())))?;
        self.end_file()
    }

    /// Commits what is pending; after a run with changes, expires history
    /// when that is due ([`Writer::expiry_due`]) and flushes the memtables
    /// (see [`Store::flush`]), unless it wrote little
    /// ([`Store::flush_unless_small`]).
    pub fn finish(&mut self, retention: Retention) -> Result<(), StoreError> {
        self.commit()?;
        self.settle()?;
        if let Some(spill) = &mut self.spill {
            // The last run is written while everything else is flushed:
            // that flush was the end of a bulk load, a single thread's work.
            spill.spill()?;
            self.store.flush()?;
            self.store.ingest_postings(spill)?;
        }
        // A bulk load has written its roots at least, and without a WAL.
        if self.changes > 0 || self.store.is_bulk() {
            if self.expiry_due(retention, EXPIRE_EVERY) {
                let expired = self.expire_history(retention, now_ns())?;
                if expired > 0 {
                    tracing::info!("{expired} lost-and-found records expired");
                }
            }
            if self.store.flush_unless_small()? {
                self.store.tidy()?;
            }
        }
        Ok(())
    }

    /// Applies `retention` to `history` in one batch, and drops every
    /// record of a path but its newest; returns how many records expired.
    pub fn expire_history(&mut self, retention: Retention, now: TimeNs) -> Result<u64, StoreError> {
        // It writes beside the groups: the one in flight lands first.
        self.settle()?;
        self.last_expiry = Some((self.history_written.get(), now, retention));
        self.version_runs_expired = self.version_runs;
        let mut batch = self.store.batch();
        let expiry = self.expiry();
        if let Some(e) = expiry {
            batch.put::<Meta>(&MetaKey::Expiry, &MetaValue::Expiry(e));
        }
        self.expiry_stored = expiry;
        let started = Instant::now();
        let mut records = Vec::new();
        for item in self.store.scan::<History>() {
            let ((path, time), rec) = item?;
            records.push(((path, time), rec.kept_content()));
        }
        let cutoff = now.saturating_sub((retention.max_age_days as TimeNs).saturating_mul(86_400 * 1_000_000_000));
        // Only a path's newest record is ever read: `simd lost` answers
        // from it, and follows a move through the newest record of where it
        // led. So a record with a newer one of its path (the previous
        // versions of a file changed in place, each keeping its chunk list)
        // goes, whatever its age: a file appended to every minute left a
        // ghost a minute, up to the cap, with a 4 MB file's chunk list (~40
        // KB) each, and pushed every deleted file's ghost out of the cap.
        // Records are in key order: a path's, oldest first, side by side.
        let superseded = |i: usize| records.get(i + 1).is_some_and(|next| next.0 .0 == records[i].0 .0);
        let mut expire: Vec<bool> = (0..records.len()).map(|i| superseded(i) || records[i].0 .1 < cutoff).collect();
        let mut by_age: Vec<usize> = (0..records.len()).filter(|&i| !expire[i]).collect();
        by_age.sort_by_key(|&i| std::cmp::Reverse(records[i].0 .1));
        for &i in by_age.iter().skip(retention.max_records) {
            expire[i] = true;
        }
        let expired = expire.iter().filter(|&&e| e).count() as u64;
        tracing::debug!("history: {} records read, {expired} to expire, after {:?}", records.len(), started.elapsed());
        if expired == 0 {
            self.store.write(batch)?;
            return Ok(0);
        }
        let kept: HashSet<ContentHash> =
            records.iter().zip(&expire).filter(|(_, &e)| !e).filter_map(|(r, _)| r.1).collect();
        let mut dropped: HashSet<ContentHash> = HashSet::default();
        for (r, _) in records.iter().zip(&expire).filter(|(_, &e)| e) {
            batch.delete::<History>(&r.0);
            if let Some(c) = r.1 {
                if !kept.contains(&c) && dropped.insert(c) && !self.has_names(&c, None)? {
                    if let Some(rec) = self.store.get_postings(&c)? {
                        batch.delete::<ContentById>(&rec.id);
                    }
                    batch.delete::<ContentChunks>(&c);
                }
            }
        }
        self.store.write(batch)?;
        Ok(expired)
    }
}

fn put_postings(b: &mut Batch<'_>, record: &ContentRecord) {
    for (chunk, len, count) in record.chunk_counts() {
        b.put::<ChunkContents>(&(chunk, record.id), &Posting { count, len });
    }
    for &sample in record.sketch.posted() {
        b.put::<SketchContents>(&(sample, record.id), &());
    }
}

/// The postings of `record`, whose content id was `old`'s: only where they
/// differ from `old`'s ([`Writer::pass_on`]).
fn put_posting_changes(b: &mut Batch<'_>, old: &ContentPostings, record: &ContentRecord) {
    let id = record.id;
    let (before, now) = (old.chunk_counts(), record.chunk_counts());
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < now.len() {
        match (before.get(i), now.get(j)) {
            (Some(a), Some(n)) if a.0 == n.0 => {
                if a != n {
                    b.put::<ChunkContents>(&(n.0, id), &Posting { count: n.2, len: n.1 });
                }
                (i, j) = (i + 1, j + 1);
            }
            (Some(a), n) if n.is_none_or(|n| a.0 < n.0) => {
                b.delete::<ChunkContents>(&(a.0, id));
                i += 1;
            }
            (_, Some(n)) => {
                b.put::<ChunkContents>(&(n.0, id), &Posting { count: n.2, len: n.1 });
                j += 1;
            }
            (_, None) => unreachable!("the loop runs while one side is left"),
        }
    }
    let mut was: Vec<u32> = old.posted.clone();
    was.sort_unstable();
    let mut is: Vec<u32> = record.sketch.posted().to_vec();
    is.sort_unstable();
    for s in was.iter().filter(|s| is.binary_search(s).is_err()) {
        b.delete::<SketchContents>(&(*s, id));
    }
    for s in is.iter().filter(|s| was.binary_search(s).is_err()) {
        b.put::<SketchContents>(&(*s, id), &());
    }
}

/// A progress bar on stderr, or nothing.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    bytes: std::cell::Cell<u64>,
}

impl Progress {
    fn new(show: bool) -> Progress {
        let bar = show.then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {pos} files read, {msg} [{elapsed}]")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar, bytes: std::cell::Cell::new(0) }
    }

    fn file(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            self.bytes.set(self.bytes.get() + bytes);
            bar.set_message(indicatif::HumanBytes(self.bytes.get()).to_string());
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunker::ChunkParams;
    use crate::fingerprint::fingerprint_bytes;
    use std::io::{Seek, SeekFrom, Write};
    use std::sync::atomic::{AtomicBool, Ordering};

    fn candidate(path: &Path) -> Candidate {
        Candidate::new(path.to_path_buf(), None)
    }

    #[test]
    fn a_read_within_a_tick_of_a_whole_second_change_is_racy() {
        let s = 1_000_000_000;
        let t = 1_700_000_000;
        // Read 1.5 s after a change stamped at a whole second: a later
        // write could still fall in that second (or FAT's two).
        assert!(racy_at(t, 0, t * s + 3 * s / 2));
        // A stamp ahead of the reader's clock (a server's), or the read
        // in the same instant.
        assert!(racy_at(t, 0, t * s - s) && racy_at(t, 0, t * s));
        // Two ticks later, or a stamp with nanoseconds: not.
        assert!(!racy_at(t, 0, t * s + 2 * s) && !racy_at(t, 0, t * s + 5 * s));
        assert!(!racy_at(t, 1, t * s + 1));
        // Before 1970, and at the ends of the clock.
        assert!(!racy_at(-5, 0, t * s) && racy_at(i64::MAX / s, 0, i64::MIN));
        let stat = Stat { size: 1, mtime: t * s, inode: 2, links: 1, dev: 3 };
        assert_eq!(recorded_mtime(&stat, false), t * s);
        assert_ne!(recorded_mtime(&stat, true) % s, 0, "a racy record's mtime falls on no whole second");
    }

    /// 400 words of text, a different text for each `n`.
    fn text(n: u32) -> Vec<u8> {
        (0..400).map(|i| format!("w{} ", (i * 7 + n) % 97)).collect::<String>().into_bytes()
    }

    /// The content hash of [`text`]`(n)`.
    fn hash(n: u32) -> ContentHash {
        fingerprint_bytes(&text(n), &ChunkParams::default()).content
    }

    /// A writable index in a temp dir, which goes with it.
    fn temp_store() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("idx"), crate::store::Access::Write, None).unwrap();
        (tmp, store)
    }

    /// What a reader hands the writer for `data` at `path`.
    fn upsert_bytes(w: &mut Writer<'_>, path: &str, data: &[u8], unseen: bool) -> FileId {
        let fp = fingerprint_bytes(data, &ChunkParams::default());
        let stat = Stat { size: data.len() as u64, mtime: 1, inode: 1, links: 1, dev: 1 };
        let old = w.lookup(Path::new(path)).unwrap();
        w.upsert(Path::new(path), stat, fp, old, unseen).unwrap().0
    }

    /// A file grown at its end is sketched from its earlier content's
    /// sketch, small files read in batches as larger ones read alone: told
    /// by a sample put in the earlier sketches that the words do not give.
    /// The sketch is otherwise the one its bytes give.
    #[test]
    fn a_file_grown_at_its_end_is_sketched_from_its_earlier_content() {
        let (tmp, store) = temp_store();
        let root = tmp.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let text = |n: u32, seed: u32| -> Vec<u8> {
            (0..n)
                .flat_map(|i| format!("w{} ", (i * 31 + seed).wrapping_mul(2_654_435_761) % 7919).into_bytes())
                .collect()
        };
        // Read in a batch of small files, alone and whole, and streamed.
        let files = [
            (root.join("small.txt"), text(3000, 1)),
            (root.join("large.txt"), text(60_000, 2)),
            (root.join("streamed.txt"), text(250_000, 3)),
        ];
        assert!(files[0].1.len() as u64 <= SMALL_FILE && files[1].1.len() as u64 > SMALL_FILE);
        assert!(files[2].1.len() > crate::fingerprint::READ_BUF);
        for (path, data) in &files {
            std::fs::write(path, data).unwrap();
        }
        let opts = IndexOptions { roots: vec![root.clone()], ..Default::default() };
        index(&store, &opts).unwrap();
        let mut batch = store.batch();
        for (_, data) in &files {
            let content = fingerprint_bytes(data, store.params()).content;
            let mut rec = store.get::<ContentChunks>(&content).unwrap().unwrap();
            assert!(!rec.sketch.samples.contains(&1));
            rec.sketch = crate::sketch::with_sample(&rec.sketch, 1);
            batch.put::<ContentChunks>(&content, &rec);
        }
        store.write(batch).unwrap();
        for (k, (path, data)) in files.iter().enumerate() {
            let grown = [&data[..], &text(200, 3 + k as u32)].concat();
            std::fs::write(path, &grown).unwrap();
        }
        let summary = index(&store, &opts).unwrap();
        assert_eq!(summary.changed, 3);
        for (path, _) in &files {
            let grown = std::fs::read(path).unwrap();
            let fp = fingerprint_bytes(&grown, store.params());
            let sketch = store.get::<ContentChunks>(&fp.content).unwrap().unwrap().sketch;
            let marked = crate::sketch::with_sample(&fp.sketch.unwrap(), 1);
            assert_eq!(sketch, marked, "{}: sketched from its earlier content", path.display());
        }
        // Edited at its start: sketched from its bytes.
        for (path, _) in &files {
            let edited = [b"new ", &std::fs::read(path).unwrap()[..], b"w1 w2\n"].concat();
            std::fs::write(path, &edited).unwrap();
        }
        index(&store, &opts).unwrap();
        for (path, _) in &files {
            let fp = fingerprint_bytes(&std::fs::read(path).unwrap(), store.params());
            assert_eq!(Some(store.get::<ContentChunks>(&fp.content).unwrap().unwrap().sketch), fp.sketch);
        }
    }

    /// A first index keeps its postings out of the memtables and ingests
    /// them at its end (`store::PostingSpill`): a content that loses its
    /// last name after its postings were written out must lose them, and
    /// one that gains a name again must have them.
    #[test]
    fn a_bulk_load_ends_with_the_postings_of_the_contents_named_then() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_build(&tmp.path().join("idx"), None).unwrap();
        assert!(store.is_bulk());
        let (a, b, c, d) = (text(1), text(2), text(3), text(4));
        let mut w = Writer::new(&store).unwrap();
        let step = |w: &mut Writer<'_>, path: &str, data: &[u8], unseen: bool| {
            upsert_bytes(w, path, data, unseen);
            w.commit().unwrap();
            // Each step's postings written out as a run of their own.
            w.spill.as_mut().expect("a bulk load's spill").spill().unwrap();
        };
        step(&mut w, "/r/a", &a, true);
        step(&mut w, "/r/b", &b, true);
        step(&mut w, "/r/a", &c, true); // a's content loses its only name
        step(&mut w, "/r/c", &a, false); // and gains one again
        step(&mut w, "/r/b", &d, true); // b's content loses its only name
        w.finish(Retention::default()).unwrap();
        drop(w);
        assert!(!store.postings_pending().unwrap());
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        let posted: HashSet<ContentId> = store.scan::<ChunkContents>().map(|i| i.unwrap().0 .1).collect();
        let id = |data: &[u8]| store.get_postings(&fingerprint_bytes(data, &ChunkParams::default()).content).unwrap();
        assert!(posted.contains(&id(&a).unwrap().id));
        assert!(posted.contains(&id(&c).unwrap().id));
        assert!(posted.contains(&id(&d).unwrap().id));
        assert!(!posted.contains(&id(&b).unwrap().id), "a content with no name kept its postings");
        assert_eq!(posted.len(), 3);
        assert!(!tmp.path().join("idx/postings.tmp").exists());
    }

    #[test]
    fn a_content_new_to_the_readers_is_recorded_once_however_many_files_bring_it() {
        let (_tmp, store) = temp_store();
        // An index that holds something (no first-index shortcut).
        let mut w = Writer::keeping_paths(&store).unwrap();
        upsert_bytes(&mut w, "/r/a", &text(0), true);
        w.commit().unwrap();
        w.forget_touched();
        // One batch: two files bring the same new content, both read while
        // the index had no record of it (group committed in between).
        let mut w = Writer::keeping_paths(&store).unwrap();
        upsert_bytes(&mut w, "/r/b", &text(1), true);
        w.commit().unwrap();
        upsert_bytes(&mut w, "/r/c", &text(1), true);
        w.commit().unwrap();
        w.forget_touched();
        // The next batch: a's file changes to that content too, which a
        // reader now finds recorded; then b's changes back to a's old one.
        upsert_bytes(&mut w, "/r/a", &text(1), false);
        upsert_bytes(&mut w, "/r/b", &text(0), false);
        w.commit().unwrap();
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        assert_eq!((report.files, report.contents), (3, 2));
        assert_eq!(store.counts().unwrap().contents, 2);
        // The writer's path map answers as the index does.
        for p in ["/r/a", "/r/b", "/r/c", "/r/none"] {
            let kept = w.lookup(Path::new(p)).unwrap().map(|(id, r)| (id, r.content));
            let stored = scan::lookup(&store, Path::new(p)).unwrap().map(|(id, r)| (id, r.content));
            assert_eq!(kept, stored, "{p}");
        }
        let mut known: Vec<&[u8]> = w.known_paths().collect();
        known.sort();
        assert_eq!(known, vec![&b"/r/a"[..], b"/r/b", b"/r/c"]);
    }

    /// History retention is due at first, then once 1 % of the cap has
    /// been written (or the interval passed), and it still applies the cap.
    #[test]
    fn history_retention_is_due_after_one_percent_of_the_cap_is_written() {
        let (_tmp, store) = temp_store();
        let mut w = Writer::new(&store).unwrap();
        for n in 0..6 {
            upsert_bytes(&mut w, &format!("/r/{n}"), &text(n), true);
        }
        w.commit().unwrap();
        let retention = Retention { max_age_days: 90, max_records: 300 }; // 1 %: 3 records
        let hour = Duration::from_secs(3600);
        assert!(w.expiry_due(retention, hour), "never ran");
        assert_eq!(w.expire_history(retention, now_ns()).unwrap(), 0);
        assert!(!w.expiry_due(retention, hour));
        let remove = |w: &mut Writer<'_>, n: u32| {
            let (id, rec) = w.lookup(Path::new(&format!("/r/{n}"))).unwrap().unwrap();
            w.remove(id, &rec).unwrap();
        };
        remove(&mut w, 0);
        remove(&mut w, 1);
        assert!(!w.expiry_due(retention, hour), "2 records of 3");
        assert!(w.expiry_due(retention, Duration::ZERO), "the interval passed");
        remove(&mut w, 2);
        assert!(w.expiry_due(retention, hour), "3 records");
        w.commit().unwrap();
        let tight = Retention { max_age_days: 90, max_records: 1 };
        assert_eq!(w.expire_history(tight, now_ns()).unwrap(), 2);
        assert_eq!(store.scan::<History>().count(), 1);
        assert!(!w.expiry_due(tight, hour));
    }

    /// Where retention stands outlives the writer: the next writer (the
    /// next `simd index` run) counts on from the records the last one
    /// wrote, runs a pass only when one is due, and runs one at once when
    /// asked for another retention or when the clock went back.
    #[test]
    fn the_next_writer_knows_when_retention_last_ran() {
        let (_tmp, store) = temp_store();
        let retention = Retention { max_age_days: 90, max_records: 300 }; // 1 %: 3 records
        let hour = Duration::from_secs(3600);
        let remove = |w: &mut Writer<'_>, n: u32| {
            let (id, rec) = w.lookup(Path::new(&format!("/r/{n}"))).unwrap().unwrap();
            w.remove(id, &rec).unwrap();
        };
        {
            let mut w = Writer::new(&store).unwrap();
            for n in 0..6 {
                upsert_bytes(&mut w, &format!("/r/{n}"), &text(n), true);
            }
            w.commit().unwrap();
            assert!(w.expiry_due(retention, hour), "never ran");
            w.finish(retention).unwrap();
            remove(&mut w, 0);
            w.commit().unwrap();
        }
        let stored = |store: &Store| match store.get::<Meta>(&MetaKey::Expiry).unwrap() {
            Some(MetaValue::Expiry(e)) => e,
            other => panic!("{other:?}"),
        };
        let e = stored(&store);
        assert_eq!((e.records, e.kept_days, e.kept_records), (1, 90, 300));
        {
            let mut w = Writer::new(&store).unwrap();
            assert!(!w.expiry_due(retention, hour), "1 record of 3 since the last pass");
            assert!(w.expiry_due(Retention { max_age_days: 0, ..retention }, hour), "another retention");
            remove(&mut w, 1);
            w.finish(retention).unwrap();
            assert_eq!(store.scan::<History>().count(), 2, "no pass: both records kept");
            assert_eq!(stored(&store).records, 2);
        }
        {
            let mut w = Writer::new(&store).unwrap();
            remove(&mut w, 2);
            assert!(w.expiry_due(retention, hour), "3 records of 3");
            w.finish(Retention { max_records: 1, ..retention }).unwrap();
            assert_eq!(store.scan::<History>().count(), 1, "the pass ran");
            let e = stored(&store);
            assert_eq!((e.records, e.kept_records), (0, 1));
        }
        // The clock set back since that pass: a pass is due.
        let mut e = stored(&store);
        e.at = now_ns() + 3_600_000_000_000;
        let mut b = store.batch();
        b.put::<Meta>(&MetaKey::Expiry, &MetaValue::Expiry(e));
        store.write(b).unwrap();
        let w = Writer::new(&store).unwrap();
        assert!(w.expiry_due(Retention { max_records: 1, ..retention }, hour));
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
    }

    /// The chunk lists version ghosts keep are counted, and make a pass due
    /// once they reach the threshold, however few records were written; a
    /// removal's ghost keeps a list too, but no later change of its path
    /// supersedes it, so it does not count.
    #[test]
    fn a_pass_is_due_once_earlier_versions_keep_enough_chunk_lists() {
        let (_tmp, store) = temp_store();
        let mut w = Writer::new(&store).unwrap();
        upsert_bytes(&mut w, "/r/log", &text(0), true);
        upsert_bytes(&mut w, "/r/other", &text(10), true);
        w.commit().unwrap();
        let runs = |n: u32| fingerprint_bytes(&text(n), &ChunkParams::default()).runs.len() as u64;
        // Versions 0 and 1's lists together reach it, either alone does not.
        w.version_runs_due = runs(0) + runs(1);
        let retention = Retention { max_age_days: 90, max_records: 100_000 };
        let hour = Duration::from_secs(3600);
        assert_eq!(w.expire_history(retention, now_ns()).unwrap(), 0);
        assert!(!w.versions_due() && !w.expiry_due(retention, hour));
        let (id, rec) = w.lookup(Path::new("/r/other")).unwrap().unwrap();
        w.remove(id, &rec).unwrap();
        w.commit().unwrap();
        assert!(!w.versions_due(), "a removal is no version");
        upsert_bytes(&mut w, "/r/log", &text(1), false);
        w.commit().unwrap();
        assert!(!w.versions_due(), "one version's list");
        upsert_bytes(&mut w, "/r/log", &text(2), false);
        w.commit().unwrap();
        assert!(w.versions_due() && w.expiry_due(retention, hour), "two versions' lists");
        // Version 0's ghost is superseded by version 1's.
        assert_eq!(w.expire_history(retention, now_ns()).unwrap(), 1);
        assert!(!store.contains::<ContentChunks>(&hash(0)).unwrap());
        assert!(!w.versions_due() && !w.expiry_due(retention, hour));
    }

    /// Each in-place change that leaves a content nameless writes a ghost
    /// of it under the path; only the path's newest record is ever read,
    /// so retention drops the older ones with their chunk lists, and keeps
    /// a chunk list another path's newest ghost still refers to.
    #[test]
    fn a_paths_older_records_expire_with_their_chunk_lists() {
        let (_tmp, store) = temp_store();
        let mut w = Writer::new(&store).unwrap();
        // /r/log changes in place five times: versions 0..4, then 4 stays.
        for n in 0..5 {
            upsert_bytes(&mut w, "/r/log", &text(n), n == 0);
            w.commit().unwrap();
        }
        // Version 1 is also /r/gone's content, removed since.
        upsert_bytes(&mut w, "/r/gone", &text(1), true);
        w.commit().unwrap();
        let (id, rec) = w.lookup(Path::new("/r/gone")).unwrap().unwrap();
        w.remove(id, &rec).unwrap();
        w.commit().unwrap();
        let paths = |store: &Store| -> Vec<Vec<u8>> { store.scan::<History>().map(|r| r.unwrap().0 .0).collect() };
        assert_eq!(paths(&store), [vec![b"/r/gone".to_vec()], vec![b"/r/log".to_vec(); 4]].concat());
        for n in 0..4 {
            assert!(store.contains::<ContentChunks>(&hash(n)).unwrap(), "version {n} kept for its ghost");
        }
        let roomy = Retention { max_age_days: 90, max_records: 100 };
        assert_eq!(w.expire_history(roomy, now_ns()).unwrap(), 3);
        assert_eq!(paths(&store), [b"/r/gone".to_vec(), b"/r/log".to_vec()]);
        // The newest ghost of /r/log is version 3's; /r/gone's is version 1's.
        let newest: Vec<ContentHash> = store
            .scan::<History>()
            .filter_map(|r| match r.unwrap().1 {
                HistoryRecord::Ghost { content, .. } => Some(content),
                HistoryRecord::Moved { .. } => None,
            })
            .collect();
        assert_eq!(newest, [hash(1), hash(3)]);
        for (n, kept) in [(0, false), (1, true), (2, false), (3, true), (4, true)] {
            assert_eq!(store.contains::<ContentChunks>(&hash(n)).unwrap(), kept, "version {n}");
        }
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        // Nothing more to drop.
        assert_eq!(w.expire_history(roomy, now_ns()).unwrap(), 0);
    }

    /// A fresh index's readers ask the writer's published set, not the
    /// index: it must say every content the index holds at each commit,
    /// and nothing else but the contents named in the open group (whose
    /// records the writer holds). It is the writer's memo of contents named
    /// too, until cleared for its size: the writer then keeps its own.
    #[test]
    fn a_fresh_indexs_held_set_answers_what_the_index_holds() {
        let (_tmp, store) = temp_store();
        let mut w = Writer::new(&store).unwrap();
        assert!(w.fresh);
        let held = Arc::new(Held::complete());
        w.publish_to(held.clone());
        assert!(matches!(w.gained, Gained::Readers(_)), "one set for both");
        let agrees = |n: u32| held.knows(&hash(n)) == Some(store.contains::<ContentChunks>(&hash(n)).unwrap());
        assert!(agrees(0));
        upsert_bytes(&mut w, "/r/a", &text(0), true);
        // Named in the open group: known before the index holds it.
        assert_eq!(held.knows(&hash(0)), Some(true));
        assert!(!store.contains::<ContentChunks>(&hash(0)).unwrap());
        assert!(w.record(&hash(0)).unwrap().is_some(), "the writer holds what a reader was told of");
        w.commit().unwrap();
        assert!(agrees(0));
        upsert_bytes(&mut w, "/r/b", &text(1), true);
        upsert_bytes(&mut w, "/r/c", &text(0), true);
        w.commit().unwrap();
        for n in 0..4 {
            assert!(agrees(n), "{n}");
        }
        // Cleared for its size when the writer names one more, it can no
        // longer say what is absent, and the writer's memo is its own again,
        // no longer whole.
        let room = MEMO_MAX - held.lock().contents.len();
        assert!(held.add((0..room as u128).map(|i| ContentHash((i + (1 << 64)).to_be_bytes()))));
        upsert_bytes(&mut w, "/r/d", &text(2), true);
        assert!(matches!(&w.gained, Gained::Own(set) if set.len() == 1));
        assert!(!w.fresh && !w.memo_whole);
        assert_eq!(held.knows(&hash(1)), None);
        // What the writer does after is still what the index says.
        upsert_bytes(&mut w, "/r/e", &text(1), true);
        upsert_bytes(&mut w, "/r/f", &text(3), true);
        w.commit().unwrap();
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        assert_eq!(store.counts().unwrap().contents, 4);
    }

    /// The daemon's writer decides "last name gone" from its in-memory name
    /// counts: over a run of copies, changes and removals, committed at
    /// uneven points, they stay what `content_names` holds, and the index
    /// stays consistent (a wrong count leaves postings behind or drops live
    /// ones, which the checker sees).
    #[test]
    fn the_daemon_writers_name_counts_follow_the_index() {
        name_counts_follow_the_index(false);
    }

    /// Groups of three files handed to a committer thread: a content
    /// written in the group in flight loses its last name in the next one
    /// (its postings must go, from the record not yet in the index), and
    /// the index stays consistent after every commit.
    #[test]
    fn a_committer_thread_writes_what_the_writer_would_in_line() {
        name_counts_follow_the_index(true);
    }

    /// A file's content grown by a line, the old content's only name: the
    /// new content takes its content id (and its postings, but for those
    /// that differ), and the old one's record, kept for `simd lost`, a new
    /// id. The change undone in the same group, and a reader's record of
    /// the old content read before that group was written handed over
    /// with the next change: that record's id is the one that passed on,
    /// and is not used.
    #[test]
    fn a_files_new_content_takes_its_old_contents_id_when_that_loses_its_last_name() {
        let (_tmp, store) = temp_store();
        let id_of = |c: &ContentHash| store.get::<ContentChunks>(c).unwrap().unwrap().id;
        let consistent = |s: &Store| {
            let report = crate::check::check(s).unwrap();
            assert!(report.is_consistent(), "{:?}", report.problems);
        };
        let mut w = Writer::keeping_paths(&store).unwrap();
        let old = text(1);
        let grown = [&old[..], b"one more line\n"].concat();
        let (o, n) = (hash(1), fingerprint_bytes(&grown, &ChunkParams::default()).content);
        upsert_bytes(&mut w, "/r/a", &old, false);
        upsert_bytes(&mut w, "/r/copy", &text(2), false);
        w.commit().unwrap();
        let x = id_of(&o);
        let postings_before = store.scan::<ChunkContents>().count();
        upsert_bytes(&mut w, "/r/a", &grown, false);
        w.commit().unwrap();
        consistent(&store);
        assert_eq!(id_of(&n), x, "the new content took the old one's id");
        let y = id_of(&o);
        assert!(y.0 > x.0 && store.get::<ContentById>(&y).unwrap() == Some(o));
        assert_eq!(store.get::<ContentById>(&x).unwrap(), Some(n));
        assert_eq!(store.scan::<ChunkContents>().count(), postings_before, "as many chunks as before");

        // Grown again, and undone, in one group; a reader reads the old
        // content's record meanwhile (the index still has its old id).
        upsert_bytes(&mut w, "/r/a", &[&grown[..], b"and one more\n"].concat(), false);
        upsert_bytes(&mut w, "/r/a", &grown, false);
        let (read_early, stale_bytes) = store.get_postings_stored(&n).unwrap().unwrap();
        w.commit().unwrap();
        consistent(&store);
        assert_ne!(id_of(&n), read_early.id, "the id it had passed on");
        // The next change, with that record handed over as a reader would.
        let next = [&grown[..], b"a third line\n"].concat();
        let fp = fingerprint_bytes(&next, &ChunkParams::default());
        let stat = Stat { size: next.len() as u64, mtime: 1, inode: 1, links: 1, dev: 1 };
        let current = w.lookup(Path::new("/r/a")).unwrap();
        w.prefetched = Some((Box::new(Fetched { postings: read_early, stored: Some(stale_bytes) }), n));
        w.upsert(Path::new("/r/a"), stat, fp, current, false).unwrap();
        w.commit().unwrap();
        consistent(&store);
        // In one group: a new content, undone, then another new one: the
        // content that got its name back loses it again, with the id it
        // took in this group, which the index does not hold yet.
        upsert_bytes(&mut w, "/r/a", &[&next[..], b"four\n"].concat(), false);
        upsert_bytes(&mut w, "/r/a", &next, false);
        upsert_bytes(&mut w, "/r/a", &[&next[..], b"five\n"].concat(), false);
        w.commit().unwrap();
        consistent(&store);

        // A content that keeps a name keeps its id: the new one gets its own.
        upsert_bytes(&mut w, "/r/b", &text(2), false);
        w.commit().unwrap();
        let two = id_of(&hash(2));
        upsert_bytes(&mut w, "/r/b", &text(3), false);
        w.commit().unwrap();
        consistent(&store);
        assert_eq!(id_of(&hash(2)), two);
        assert!(id_of(&hash(3)).0 > two.0);
    }

    /// Files changed at random (grown by a line, set back to an earlier
    /// content, made a copy of another, removed), with the records a
    /// reader would hand over read from the index up to a few groups
    /// before, by a daemon's writer and a scan's, with a committer thread
    /// and without: after every commit the index is consistent.
    #[test]
    fn contents_passing_their_ids_on_keep_the_index_consistent() {
        for (daemon, with_committer) in [(true, false), (true, true), (false, false), (false, true)] {
            let (_tmp, store) = temp_store();
            std::thread::scope(|scope| {
                let mut w = if daemon { Writer::keeping_paths(&store) } else { Writer::new(&store) }.unwrap();
                if with_committer {
                    w = w.with_committer(Committer::spawn(scope, &store));
                    w.group_files = 3;
                }
                let mut x: u64 = 0x2545_f491_4f6c_dd1d;
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut versions: HashMap<String, Vec<Vec<u8>>> = HashMap::default();
                let mut read: HashMap<ContentHash, Fetched> = HashMap::default();
                for step in 0..300 {
                    let path = format!("/r/{}", next() % 3);
                    let current = w.lookup(Path::new(&path)).unwrap();
                    let data = match next() % 8 {
                        0 => {
                            if let Some((id, rec)) = current {
                                w.remove(id, &rec).unwrap();
                            }
                            continue;
                        }
                        1 => versions.values().flatten().nth(next() as usize % versions.len().max(1)).cloned(),
                        2 => versions.get(&path).and_then(|v| v.first().cloned()),
                        _ => versions.get(&path).and_then(|v| v.last().cloned()),
                    };
                    let data = data.unwrap_or_else(|| text(next() as u32 % 50));
                    let data =
                        if next() % 4 < 3 { [&data[..], format!("line {step}\n").as_bytes()].concat() } else { data };
                    versions.entry(path.clone()).or_default().push(data.clone());
                    // What a reader would hand over: the old content's
                    // record as the index held it when last looked at.
                    if let Some((_, rec)) = &current {
                        if let Some(p) = read.get(&rec.content) {
                            w.prefetched = Some((Box::new(p.clone()), rec.content));
                        }
                    }
                    let fp = fingerprint_bytes(&data, &ChunkParams::default());
                    let stat = Stat { size: data.len() as u64, mtime: step, inode: 1, links: 1, dev: 1 };
                    w.upsert(Path::new(&path), stat, fp, current, false).unwrap();
                    w.prefetched = None;
                    if next() % 3 == 0 {
                        for (_, rec) in store.scan::<Files>().map(Result::unwrap) {
                            if let Some((postings, stored)) = store.get_postings_stored(&rec.content).unwrap() {
                                read.insert(rec.content, Fetched { postings, stored: Some(stored) });
                            }
                        }
                    }
                    if next() % 8 == 0 || step == 299 {
                        w.commit().unwrap();
                        w.forget_touched();
                        let report = crate::check::check(&store).unwrap();
                        assert!(report.is_consistent(), "daemon {daemon}, step {step}: {:?}", report.problems);
                    }
                }
            });
        }
    }

    /// A content whose record is in the group the committer holds, not yet
    /// in the index, loses its only name: its postings go all the same.
    #[test]
    fn a_record_in_flight_is_found_when_its_content_loses_its_last_name() {
        let (_tmp, store) = temp_store();
        std::thread::scope(|scope| {
            // A committer that writes a group only when told to.
            let (groups, rx) = bounded::<Batch<'_>>(1);
            let (done_tx, done) = bounded(1);
            let (go, wait) = crossbeam_channel::unbounded::<()>();
            let store = &store;
            scope.spawn(move || {
                for batch in rx {
                    wait.recv().unwrap();
                    done_tx.send(store.write(batch)).unwrap();
                }
            });
            let mut w = Writer::keeping_paths(store).unwrap().with_committer(Committer { groups, done });
            w.group_files = 1;
            let text = (0..400).map(|i| format!("word{} ", i % 97)).collect::<String>();
            upsert_bytes(&mut w, "/r/a", text.as_bytes(), true);
            let (id, rec) = w.lookup(Path::new("/r/a")).unwrap().unwrap();
            assert!(w.inflight.is_some() && !store.contains::<ContentChunks>(&rec.content).unwrap());
            w.group_files = 2;
            w.remove(id, &rec).unwrap();
            go.send(()).unwrap();
            go.send(()).unwrap();
            w.commit().unwrap();
            let report = crate::check::check(store).unwrap();
            assert!(report.is_consistent(), "{:?}", report.problems);
            assert_eq!(store.scan::<ChunkContents>().count(), 0, "postings left behind");
        });
    }

    /// A writer about to wait for its readers hands its group over once
    /// it holds [`SMALL_GROUP`] files and the group before it has landed
    /// ([`Writer::hand_over_while_idle`]); what lands is what a commit of
    /// it all at once would have written.
    #[test]
    fn a_group_handed_over_while_the_writer_waits_lands_as_a_commit_would() {
        let (_tmp, store) = temp_store();
        let (_tmp2, alone) = temp_store();
        let text = |n: usize| format!("file {n}: {}", "words of a document ".repeat(n % 7 + 1)).into_bytes();
        std::thread::scope(|scope| {
            let mut w = Writer::keeping_paths(&store).unwrap().with_committer(Committer::spawn(scope, &store));
            let mut handed = 0;
            for n in 0..300 {
                upsert_bytes(&mut w, &format!("/r/{n}"), &text(n), false);
                let before = w.group.files;
                w.hand_over_while_idle().unwrap();
                if before >= SMALL_GROUP {
                    // Handed over, or kept while the group before is in flight.
                    assert!(w.group.files == 0 || w.inflight.is_some(), "file {n}");
                }
                handed += usize::from(w.group.files == 0 && before > 0);
            }
            // Fewer files than that are kept for more.
            w.commit().unwrap();
            upsert_bytes(&mut w, "/r/last", &text(1), false);
            w.hand_over_while_idle().unwrap();
            assert_eq!(w.group.files, 1);
            w.commit().unwrap();
            assert!(handed >= 1, "no group was handed over");
            assert!(handed <= 300 / SMALL_GROUP, "{handed} groups for 300 files");
        });
        let mut w = Writer::keeping_paths(&alone).unwrap();
        for n in 0..300 {
            upsert_bytes(&mut w, &format!("/r/{n}"), &text(n), false);
        }
        upsert_bytes(&mut w, "/r/last", &text(1), false);
        w.commit().unwrap();
        let report = crate::check::check(&store).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        let names = |s: &Store| s.scan::<ContentNames>().count();
        assert_eq!(names(&store), names(&alone));
        assert_eq!(Writer::keeping_paths(&store).unwrap().counts, Writer::keeping_paths(&alone).unwrap().counts);
    }

    fn name_counts_follow_the_index(with_committer: bool) {
        let (_tmp, store) = temp_store();
        std::thread::scope(|scope| {
            let text = |n: u64| (0..300).map(|i| format!("v{} ", (i * 13 + n) % 89)).collect::<String>().into_bytes();
            let mut w = Writer::keeping_paths(&store).unwrap();
            if with_committer {
                w = w.with_committer(Committer::spawn(scope, &store));
                w.group_files = 3;
            }
            let mut handed = 0;
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for step in 0..400 {
                let path = format!("/r/{}", next() % 12);
                if next() % 5 == 0 {
                    if let Some((id, rec)) = w.lookup(Path::new(&path)).unwrap() {
                        w.remove(id, &rec).unwrap();
                    }
                } else {
                    // Four contents over twelve paths: many copies of each.
                    upsert_bytes(&mut w, &path, &text(next() % 4), false);
                }
                handed += usize::from(w.inflight.is_some());
                if next() % 7 == 0 || step == 399 {
                    w.commit().unwrap();
                    w.forget_touched();
                    let mut stored: HashMap<ContentHash, u32> = HashMap::default();
                    for item in store.scan::<ContentNames>() {
                        *stored.entry(item.unwrap().0 .0).or_default() += 1;
                    }
                    assert_eq!(w.names.as_ref().unwrap(), &stored, "step {step}");
                    let report = crate::check::check(&store).unwrap();
                    assert!(report.is_consistent(), "step {step}: {:?}", report.problems);
                }
            }
            // A writer started afresh counts the same names from the records.
            assert_eq!(Writer::keeping_paths(&store).unwrap().names, w.names);
            assert_eq!(handed > 0, with_committer, "groups handed to the committer");
        });
    }

    /// A large file renamed twice while its background read is in flight
    /// (or its outcome waits to be taken) comes back under its last name,
    /// asked for again under that name once: nothing stays in flight.
    #[test]
    fn a_background_read_follows_its_file_through_renames() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_build(&tmp.path().join("idx"), None).unwrap();
        let (a, b, c) = (tmp.path().join("a.img"), tmp.path().join("b.img"), tmp.path().join("c.img"));
        std::fs::File::create(&a).unwrap().set_len(32 << 20).unwrap();
        std::thread::scope(|s| {
            let mut bg = Background::spawn(s, &store, 1, WholeFrom::default());
            bg.send(Deferred(candidate(&a)));
            std::fs::rename(&a, &b).unwrap();
            bg.renamed(&a, &b);
            std::fs::rename(&b, &c).unwrap();
            bg.renamed(&b, &c);
            bg.renamed(&a, &b); // the first rename heard again
            bg.send(Deferred(candidate(&c))); // asked for while in flight
            assert_eq!(bg.in_flight(), 1);
            let until = Instant::now() + Duration::from_secs(30);
            let (reads, again) = loop {
                let (reads, again) = bg.done();
                if !reads.is_empty() {
                    break (reads, again);
                }
                assert!(Instant::now() < until, "the read never came back");
                std::thread::sleep(Duration::from_millis(5));
            };
            assert_eq!(reads.iter().map(|r| r.path().to_path_buf()).collect::<Vec<_>>(), vec![c.clone()]);
            // (Read, or vanished when the reader opened it after the
            // renames: either way the daemon takes it under its last name.)
            assert_eq!(again, vec![c.clone()]);
            assert_eq!(bg.in_flight(), 0);
        });
    }

    /// A read done before the daemon hears that its file was renamed comes
    /// back with its name gone; asked for under the new name, the file is
    /// not read again, unless it changed since.
    #[test]
    fn a_read_whose_file_was_renamed_before_it_came_back_serves_the_new_name() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_build(&tmp.path().join("idx"), None).unwrap();
        let names = ["a.part", "a.iso", "b.part", "b.iso"].map(|n| tmp.path().join(n));
        let [a_part, a_iso, b_part, b_iso] = &names;
        std::fs::write(a_part, text(1)).unwrap();
        std::fs::write(b_part, text(2)).unwrap();
        std::thread::scope(|s| {
            let mut bg = Background::spawn(s, &store, 1, WholeFrom::default());
            let until = Instant::now() + Duration::from_secs(30);
            let back = |bg: &mut Background| loop {
                let (reads, _) = bg.done();
                if !reads.is_empty() {
                    return reads.into_iter().map(|r| r.0).collect::<Vec<_>>();
                }
                assert!(Instant::now() < until, "no read came back");
                std::thread::sleep(Duration::from_millis(5));
            };
            for (part, iso) in [(a_part, a_iso), (b_part, b_iso)] {
                bg.send(Deferred(candidate(part)));
                while bg.rx.is_empty() {
                    assert!(Instant::now() < until, "the read never ended");
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::fs::rename(part, iso).unwrap();
                let reads = back(&mut bg);
                let vanished = matches!(&reads[..], [Outcome::Vanished { cand }] if cand.path == *part);
                assert!(vanished, "{} came back as another outcome", part.display());
            }
            // b.iso written to since its read: read again.
            std::fs::OpenOptions::new().append(true).open(b_iso).unwrap().write_all(b"more").unwrap();
            bg.send(Deferred(candidate(b_iso)));
            assert_eq!(bg.in_flight(), 1);
            bg.send(Deferred(candidate(a_iso)));
            assert_eq!(bg.in_flight(), 1, "a.iso is not read again");
            let mut reads = back(&mut bg);
            if reads.len() == 1 {
                reads.extend(back(&mut bg));
            }
            let mut got: Vec<(PathBuf, u64)> = reads
                .into_iter()
                .map(|o| match o {
                    Outcome::Read { cand, fp, .. } => (cand.path, fp.size),
                    other => panic!("{} not read", other.cand().path.display()),
                })
                .collect();
            got.sort();
            let len = |n: u32| text(n).len() as u64;
            assert_eq!(got, vec![(a_iso.clone(), len(1)), (b_iso.clone(), len(2) + 4)]);
        });
    }

    /// A stopped run's reader gives up a large file at its next read
    /// rather than reading it to the end; unstopped, the same file reads.
    #[test]
    fn a_stopped_run_gives_up_a_file_being_read() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("big.img");
        std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
        let read = |stop: bool| {
            let flag = AtomicBool::new(stop);
            let Opening::Ready(o) = open_candidate(candidate(&p)) else { panic!("not opened") };
            read_opened(
                o,
                &ChunkParams::default(),
                WholeFrom::default(),
                &mut Vec::new(),
                Asks::NONE,
                Some(&flag),
                OnChange::Reread,
            )
        };
        assert!(matches!(read(false), Outcome::Read { .. }));
        let Outcome::Skip { reason, detail, .. } = read(true) else { panic!("read to the end") };
        assert!(matches!(reason, SkipReason::Unreadable) && detail.contains("stopped"), "{detail}");
    }

    #[test]
    fn a_file_gone_before_it_is_read_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("gone.txt");
        let out =
            read_candidate(candidate(&p), &ChunkParams::default(), WholeFrom::default(), &mut Vec::new(), Asks::NONE);
        assert!(matches!(out, Outcome::Vanished { .. }));
    }

    /// A read looks at the file's size and mtime every [`CHANGE_CHECK`]
    /// bytes and stops at the first look after a write: a file being
    /// written is not read to its end before the read is known stale.
    #[test]
    fn a_read_stops_at_its_next_look_after_the_file_changed() {
        use std::io::{Read, Write};
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("big.img");
        std::fs::write(&p, vec![7u8; 3 * CHANGE_CHECK as usize]).unwrap();
        let file = File::open(&p).unwrap();
        let before = file.metadata().unwrap();
        let mut r = Stoppable::new(&file, None, &before);
        let mut buf = vec![0u8; 1 << 20];
        let mut read = 0;
        while read < CHANGE_CHECK {
            read += r.read(&mut buf).unwrap() as u64;
        }
        // Unchanged at the look: reading goes on.
        read += r.read(&mut buf).unwrap() as u64;
        assert!(!r.changed);
        std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"more").unwrap();
        while read < 2 * CHANGE_CHECK {
            read += r.read(&mut buf).unwrap() as u64;
        }
        let e = r.read(&mut buf).unwrap_err();
        assert!(r.changed && e.to_string().contains("changed"), "{e}");
        assert!(read < 3 * CHANGE_CHECK, "stopped before the end");
    }

    /// A file that changed between its open and its read: `simd index`
    /// reads it again at once, the daemon's batches hand it to the
    /// background readers once it is large enough to be read there, and
    /// those read it again once it is quiet.
    #[test]
    fn a_file_changed_as_it_is_read_is_read_again_or_handed_on() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("download.iso");
        let read = |on_change: OnChange| {
            std::fs::write(&p, text(1)).unwrap();
            let Opening::Ready(o) = open_candidate(candidate(&p)) else { panic!("not opened") };
            std::fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(&text(2)).unwrap();
            let params = ChunkParams::default();
            read_opened(o, &params, WholeFrom::default(), &mut Vec::new(), Asks::NONE, None, on_change)
        };
        let size = (text(1).len() + text(2).len()) as u64;
        for on_change in [OnChange::Reread, OnChange::DeferFrom(size + 1), OnChange::Background] {
            let Outcome::Read { fp, .. } = read(on_change) else { panic!("not read") };
            assert_eq!(fp.size, size, "read again, whole");
        }
        assert!(matches!(read(OnChange::DeferFrom(size)), Outcome::Deferred(_)));
    }

    #[test]
    fn a_file_replaced_by_a_fifo_or_symlink_is_not_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("was-a-file");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let read = |p: &Path| {
            read_candidate(candidate(p), &ChunkParams::default(), WholeFrom::default(), &mut Vec::new(), Asks::NONE)
        };
        assert!(matches!(read(&fifo), Outcome::Skip { reason: SkipReason::Special, .. }));
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(matches!(read(&link), Outcome::Skip { reason: SkipReason::Symlink, .. }));
    }

    /// A file rewritten in place, over and over, while it is read: the result
    /// is one whole version of it or a skip, never a mix of two versions.
    #[test]
    fn a_file_changing_while_read_is_never_indexed_half_old() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("busy.bin");
        let params = ChunkParams::default();
        let size = 48 << 20;
        let versions: Vec<Vec<u8>> = (0..2u8).map(|v| vec![v.wrapping_mul(77).wrapping_add(1); size]).collect();
        let fps: Vec<_> = versions.iter().map(|v| fingerprint_bytes(v, &params)).collect();
        std::fs::write(&p, &versions[0]).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    // Rewrite in place, in pieces, so a reader can see a mix.
                    f.seek(SeekFrom::Start(0)).unwrap();
                    for piece in versions[i % 2].chunks(1 << 20) {
                        f.write_all(piece).unwrap();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            let mut buf = Vec::new();
            for _ in 0..5 {
                match read_candidate(candidate(&p), &params, WholeFrom::default(), &mut buf, Asks::NONE) {
                    Outcome::Read { fp, .. } => assert!(fps.contains(&fp), "indexed a mix of two versions"),
                    Outcome::Skip { reason, .. } => assert_eq!(reason, SkipReason::KeptChanging),
                    Outcome::Vanished { .. } => panic!("the file never vanished"),
                    Outcome::Unchanged { .. } => panic!("the candidate had no record to match"),
                    Outcome::Deferred(_) => panic!("read_candidate defers nothing"),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    /// Small files read in a batch: each comes out as it would alone; one
    /// that changed after its bytes were read in is read again on its own
    /// and comes out as its new version; one that shrank before it was
    /// read in is read on its own at once.
    #[test]
    fn small_files_read_together_come_out_one_version_each() {
        let tmp = tempfile::tempdir().unwrap();
        let params = ChunkParams::default();
        let text = |k: usize, n: usize| (0..n).map(|i| format!("word{} ", (i * 7 + k) % 97)).collect::<String>();
        let paths: Vec<PathBuf> = (0..4).map(|k| tmp.path().join(format!("f{k}.txt"))).collect();
        for (k, p) in paths.iter().enumerate() {
            std::fs::write(p, text(k, 300 * (k + 1))).unwrap();
        }
        let mut small = SmallFiles::new(1, Vec::new());
        let open = |p: &Path| match open_candidate(candidate(p)) {
            Opening::Ready(o) => o,
            Opening::Said(_) => panic!("{}: not opened", p.display()),
        };
        for p in &paths[..3] {
            assert!(small.read(open(p)).is_none(), "{}: not read in", p.display());
        }
        // Changed after it was read in: its size and mtime differ at the second stat.
        std::fs::write(&paths[1], text(9, 500)).unwrap();
        // Shrunk between the stat and the read in.
        let opened = open(&paths[3]);
        std::fs::write(&paths[3], "short").unwrap();
        let Some(again) = small.read(opened) else { panic!("a short read must be handed back") };
        assert_eq!(again.path, paths[3]);
        let outcomes = small.fingerprint(&params, WholeFrom::default(), &mut Vec::new(), Asks::NONE);
        assert_eq!(outcomes.len(), 3);
        for (out, p) in outcomes.iter().zip(&paths) {
            let Outcome::Read { cand, fp, unseen, .. } = out else { panic!("{}: not read", p.display()) };
            assert_eq!(&cand.path, p);
            assert_eq!(fp, &fingerprint_bytes(&std::fs::read(p).unwrap(), &params), "{}", p.display());
            assert!(unseen);
        }
        assert!(small.files.is_empty() && small.used == 0);
        // All readers' batches together hold at most 256 files open.
        let open = |readers| SmallFiles::new(readers, Vec::new()).max_files * readers;
        assert_eq!((open(2), open(8), open(64)), (64, 256, 256));
        assert_eq!(SmallFiles::new(1000, Vec::new()).max_files, 1, "a reader batches one file at least");
    }
}
