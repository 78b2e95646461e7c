//! `simd watch`: the daemon. It reconciles the index with a scan, then
//! follows file-system events (notify, debounced) into the same writer rules
//! as `simd index`. This is the only module that imports `notify`.
//!
//! **Invariants**: a change is never silently missed (a queue overflow or a
//! rescan notice triggers a full reconcile; hitting the inotify watch limit
//! is logged with the sysctl to raise and falls back to periodic rescans; a
//! file system mounted or unmounted inside a root, which raises no event,
//! has its mount point watched again and the files under it looked at again);
//! a rename whose content did not change is recorded as a move without
//! re-reading the file; SIGINT/SIGTERM/SIGHUP stop after committing and flushing.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, RecvTimeoutError, TryRecvError};
use notify::event::{EventKind, ModifyKind, RenameMode};
use notify::RecursiveMode;
use notify_debouncer_full::{new_debouncer_opt, DebounceEventResult, RecommendedCache};
use serde::{Deserialize, Serialize};

use crate::control;
use crate::ingest::{self, IndexOptions, IngestError, Summary, Writer};
use crate::scan::{is_under, path_bytes, Candidate, HashMap, HashSet, Stat};
use crate::store::{Access, FileId, FileRecord, Store, StoreError};

/// What `simd watch` is told.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub index: IndexOptions,
    /// How long a burst of events on one path is gathered before it is handled.
    pub debounce: Duration,
    /// Rescan period when part of the tree cannot be watched.
    pub rescan_every: Duration,
    /// Rescan period when every directory is watched: a safety net for
    /// changes that raise no inotify event (a write through a shared
    /// `mmap`, or through a hard link from outside the roots). `None`: never.
    pub full_rescan_every: Option<Duration>,
    /// How long the files of a root that went away or was replaced are
    /// kept before a rescan records them as removed ([`ROOT_GRACE`]).
    pub root_grace: Duration,
    /// Flush memtables after this long without events (keeps readers' opens cheap).
    pub flush_idle: Duration,
    /// Flush memtables at least this often while changes keep coming, so
    /// that they hold a bounded stretch of changes (and the daemon's RSS
    /// stays flat) rather than filling the whole write-buffer budget.
    pub flush_busy: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            index: IndexOptions::default(),
            debounce: Duration::from_millis(50),
            rescan_every: Duration::from_secs(300),
            full_rescan_every: Some(FULL_RESCAN_EVERY),
            root_grace: ROOT_GRACE,
            flush_idle: Duration::from_secs(1),
            flush_busy: Duration::from_secs(30),
        }
    }
}

/// A notify error as simd says errors: the paths first (as every path is
/// shown), then what went wrong. notify's own says `… about ["/a"]`,
/// with the paths in Rust's debug quoting.
fn notify_error(e: &notify::Error) -> String {
    let what = match &e.kind {
        notify::ErrorKind::Io(io) => io.to_string(),
        notify::ErrorKind::Generic(s) => s.clone(),
        notify::ErrorKind::MaxFilesWatch => "the inotify watch limit is reached".to_string(),
        notify::ErrorKind::PathNotFound => "no such path".to_string(),
        notify::ErrorKind::WatchNotFound => "not watched".to_string(),
        _ => return e.to_string(),
    };
    if e.paths.is_empty() {
        what
    } else {
        format!("{}: {what}", e.paths.iter().map(crate::show_path).collect::<Vec<_>>().join(", "))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start watching: {}", notify_error(.0))]
    Notify(#[from] notify::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// The index directory was deleted (or another put in its place) under
    /// the running daemon: what it writes goes nowhere a reader looks.
    #[error(
        "{}: the index directory was removed or replaced while the daemon ran{}\n  \
         the roots it remembered went with it: `simd watch {}` builds the index anew from a scan",
        crate::show_path(dir),
        cause.as_ref().map(|c| format!(" ({c})")).unwrap_or_default(),
        if roots.is_empty() { "ROOT...".to_string() } else { roots.join(" ") }
    )]
    IndexGone { dir: PathBuf, cause: Option<String>, roots: Vec<String> },
}

impl WatchError {
    /// The index's file system filled up ([`StoreError::is_no_space`]).
    pub fn is_no_space(&self) -> bool {
        match self {
            WatchError::Store(e) | WatchError::Ingest(IngestError::Store(e)) => e.is_no_space(),
            _ => false,
        }
    }
}

/// The daemon's state, for `simd status` (written to `daemon.json` in the
/// index directory after every batch).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DaemonState {
    pub pid: u32,
    pub started: i64,
    /// The reconcile scan is done and events are being followed.
    pub ready: bool,
    pub roots: Vec<String>,
    pub last_event: Option<i64>,
    /// Paths waiting in the current batch.
    pub pending: usize,
    /// Large files being read beside the batches.
    #[serde(default)]
    pub reading: usize,
    /// Batches handled, files changed, rescans done.
    pub batches: u64,
    pub changed_files: u64,
    pub rescans: u64,
    /// Part of the tree is not watched (inotify limit): periodic rescans.
    pub degraded: bool,
    /// When the last rescan (of any kind) ended, in ns since the epoch.
    #[serde(default)]
    pub last_rescan: Option<i64>,
    /// Roots that are gone (deleted, moved away, not mounted), looked for
    /// every second and watched again once back.
    #[serde(default)]
    pub missing_roots: Vec<String>,
    /// Roots that went away or were replaced lately, with when (ns since
    /// the epoch) their grace ends: what the index holds under one and
    /// does not find there is recorded as removed then (`--root-grace`).
    #[serde(default)]
    pub spared_roots: Vec<(String, i64)>,
    /// Roots on a network or FUSE file system, and such file systems
    /// mounted inside roots, with their type: changes made there by other
    /// machines raise no inotify event, so they are also rescanned every
    /// `--rescan-every` seconds.
    #[serde(default)]
    pub remote_roots: Vec<String>,
    /// Since when the daemon waits for room on the index's full file
    /// system ([`serve`]), if it does.
    #[serde(default)]
    pub disk_full_since: Option<i64>,
    /// Meanwhile: the bytes free there when last looked at, and those it
    /// waits for.
    #[serde(default)]
    pub room: Option<(u64, u64)>,
}

pub fn state_path(dir: &Path) -> PathBuf {
    dir.join("daemon.json")
}

/// `daemon.json` is written over in place, padded with spaces (which JSON
/// allows after the value) to the length it has, and made anew, longer,
/// only when the state no longer fits. A state written to a new file and
/// renamed over the old one after each batch cost the daemon's main thread
/// ~0.5 ms a write on ext4, whose inode allocator searches past the inodes
/// each rename freed (`perf record` of a burst of appends to 2,482 files:
/// 2.5 % of the daemon's CPU, between the batches). A reader may meet a
/// state half written: it reads again ([`DaemonState::saved`]).
const STATE_ROOM: usize = 512;

/// `json` (which ends in a newline) padded to `len` bytes, if shorter,
/// with spaces before its newline.
fn padded(json: &[u8], len: usize) -> Vec<u8> {
    let (body, end) = json.split_at(json.len().saturating_sub(1));
    let mut out = body.to_vec();
    out.resize(len.max(json.len()) - end.len(), b' ');
    out.extend_from_slice(end);
    out
}

impl DaemonState {
    fn save(&self, dir: &Path) {
        use std::os::unix::fs::FileExt;
        let path = state_path(dir);
        let mut bytes = match serde_json::to_vec_pretty(self) {
            Ok(b) => b,
            Err(e) => return tracing::debug!("{}: {e}", crate::show_path(&path)),
        };
        bytes.push(b'\n');
        let in_place = |bytes: &[u8], grow: bool| -> std::io::Result<bool> {
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            let len = f.metadata()?.len() as usize;
            if len < bytes.len() && !grow {
                return Ok(false);
            }
            f.write_all_at(&padded(bytes, len), 0)?;
            Ok(true)
        };
        match in_place(&bytes, false) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return tracing::debug!("{}: {e}", crate::show_path(&path)),
        }
        let room = bytes.len().next_multiple_of(STATE_ROOM) + STATE_ROOM;
        let tmp = path.with_extension("json.tmp");
        let Err(e) = std::fs::write(&tmp, padded(&bytes, room)).and_then(|()| std::fs::rename(&tmp, &path)) else {
            return;
        };
        let _ = std::fs::remove_file(&tmp);
        // A full file system has no room for a new file, and that is when
        // `simd status` most needs to say that the daemon waits: the state
        // is written over the old one in place, longer (it may find room
        // in the file's last block).
        if let Err(again) = in_place(&bytes, true) {
            tracing::debug!("{}: {e}; in place: {again}", crate::show_path(&path));
        }
    }

    /// The state last saved in the index at `dir`, whether or not its
    /// daemon still runs. A state met half written is read again.
    fn saved(dir: &Path) -> Option<DaemonState> {
        let path = state_path(dir);
        for _ in 0..10 {
            let bytes = std::fs::read(&path).ok()?;
            match serde_json::from_slice(&bytes) {
                Ok(state) => return Some(state),
                // Empty: made and not written yet, or never to be (a full
                // file system).
                Err(_) if bytes.is_empty() => return None,
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        None
    }

    /// The running daemon's state, if a daemon holds this index.
    /// Told by the kernel's lock table, not by the files a daemon leaves:
    /// a copy of an index taken while its daemon ran, a daemon killed
    /// (unreaped, or its pid reused since) hold no lock, and were taken for
    /// a live daemon that refused every connection.
    pub fn running(dir: &Path) -> Option<DaemonState> {
        let s = DaemonState::saved(dir)?;
        (crate::store::writer_pid(dir) == Some(s.pid)).then_some(s)
    }

    /// Whether the daemon's process is stopped (SIGSTOP, Ctrl-Z at its
    /// terminal, a debugger): it still holds the index and its socket, and
    /// does nothing, nor answers, until it is continued.
    pub fn stopped(&self) -> bool {
        process_stopped(self.pid)
    }
}

/// Whether process `pid` is stopped (state `T`, or `t` under a debugger).
/// `/proc/PID/stat` is "PID (COMMAND) STATE ...": the state follows the
/// last `)`, as a command's name may hold one.
pub fn process_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with(['T', 't'])))
        .unwrap_or(false)
}

/// Decides which paths the daemon follows, as the walk would.
struct Filter {
    skip_dirs: Vec<Vec<u8>>,
    /// The kernel's own file systems mounted inside the roots (proc,
    /// sysfs...), which the walk never enters either ([`crate::mounts`]).
    kernel_dirs: Vec<Vec<u8>>,
    excludes: Option<crate::scan::Excludes>,
    no_ignore: bool,
    roots: Vec<PathBuf>,
    /// `roots` as bytes, made once: finding a path's root allocates nothing.
    root_bytes: Vec<Vec<u8>>,
    /// With `--one-file-system`, each root's device (None for a root that
    /// could not be looked at: nothing under it is refused for its device).
    root_devices: Option<Vec<Option<u64>>>,
    /// The ignore files by directory, loaded on first use.
    ignores: crate::scan::IgnoreFiles,
}

impl Filter {
    fn new(roots: &[PathBuf], opts: &IndexOptions, index_dir: &Path) -> Result<Filter, IngestError> {
        let mut skip_dirs: Vec<Vec<u8>> = opts.walk.skip_dirs.iter().map(|d| path_bytes(d)).collect();
        if let Ok(own) = index_dir.canonicalize() {
            skip_dirs.push(path_bytes(&own));
        }
        let excludes = crate::scan::Excludes::new(roots, &opts.walk.excludes)?;
        let mut filter = Filter {
            skip_dirs,
            kernel_dirs: Vec::new(),
            excludes,
            no_ignore: opts.walk.no_ignore,
            roots: roots.to_vec(),
            root_bytes: roots.iter().map(|r| path_bytes(r)).collect(),
            root_devices: opts
                .walk
                .one_file_system
                .then(|| roots.iter().map(|r| std::fs::symlink_metadata(r).ok().map(|m| m.dev())).collect()),
            ignores: Default::default(),
        };
        filter.set_kernel_dirs(&crate::mounts::read_table());
        Ok(filter)
    }

    /// Takes the kernel file systems mounted inside the roots from the
    /// mount table's text `mountinfo` (again when it changed: one mounted
    /// while the daemon runs is not walked when its mount point is looked
    /// at).
    fn set_kernel_dirs(&mut self, mountinfo: &str) {
        self.kernel_dirs = (self.roots.iter())
            .flat_map(|r| crate::mounts::kernel_mounts_inside(mountinfo, r))
            .map(|(point, _)| path_bytes(&point))
            .collect();
    }

    /// Whether `path` (whose `lstat` is `meta`) is on its root's file
    /// system, or need not be (no `--one-file-system`). The walk checks
    /// directories only; events name files too, and notify's recursive
    /// watch does go into mount points, so a file is checked here as well.
    fn on_root_device(&self, path: &Path, meta: &std::fs::Metadata) -> bool {
        let Some(devices) = &self.root_devices else { return true };
        let pb = path_bytes(path);
        // The innermost root: one inside another is its own under `-x`
        // when it is on another file system (`ingest::canonical_roots`).
        let inner = (self.root_bytes.iter().enumerate()).filter(|(_, r)| is_under(&pb, r)).max_by_key(|(_, r)| r.len());
        let Some((r, _)) = inner else { return false };
        devices[r].is_none_or(|d| d == meta.dev())
    }

    fn follows(&mut self, path: &Path, is_dir: bool) -> bool {
        let pb = path_bytes(path);
        let Some(r) = self.root_bytes.iter().position(|r| is_under(&pb, r)) else { return false };
        if self.never_walked(path) {
            return false;
        }
        let root = &self.roots[r];
        if let Some(ex) = &self.excludes {
            // Check the path and every parent up to the root, as the walk prunes directories.
            let mut p = Some(path);
            while let Some(q) = p.filter(|q| q.starts_with(root) && *q != root) {
                // Parents are directories; the path itself is one when `is_dir`.
                if ex.excluded(q, is_dir || q != path) {
                    return false;
                }
                p = q.parent();
            }
        }
        if self.no_ignore {
            return true;
        }
        // As the walk leaves clutter out: a lock file taken and dropped is
        // no document lost.
        if !is_dir
            && path.file_name().is_some_and(|n| crate::scan::is_clutter(n.as_bytes()))
            && !self.ignores.keeps(path, root)
        {
            return false;
        }
        let Some(parent) = path.parent().filter(|d| d.starts_with(root)) else { return true };
        self.ignores.rules(parent, root).walks(path, is_dir)
    }

    /// Whether `path` lies where no walk goes whatever the ignore files
    /// say: the index's own directory, a kernel file system, or a `.git`
    /// directory.
    fn never_walked(&self, path: &Path) -> bool {
        let pb = path.as_os_str().as_bytes();
        self.skip_dirs.iter().chain(&self.kernel_dirs).any(|d| is_under(pb, d)) || in_git_dir(path)
    }

    /// Takes out of `batch` the paths no walk goes to. The index's own
    /// directory may lie in a root (the default index under `~/.local/share`
    /// when `~` is a root): the daemon's writes there, its state file
    /// among them, raise events, and a batch of nothing but those saved
    /// the state again and woke the daemon for ever (16 batches a second,
    /// ~2 % of a core, on an idle tree). A rename across the boundary is
    /// the one side's change.
    fn prune(&self, batch: &mut Batch) {
        batch.check.retain(|p| !self.never_walked(p));
        let renames = std::mem::take(&mut batch.renames);
        for (from, to) in renames {
            match (self.never_walked(&from), self.never_walked(&to)) {
                (false, false) => batch.renames.push((from, to)),
                (false, true) => {
                    batch.check.insert(from);
                }
                (true, false) => {
                    batch.check.insert(to);
                }
                (true, true) => {}
            }
        }
    }

    /// Reads the ignore files of the directories (up to their root) of
    /// `files`; returns how many directories are cached.
    fn load_dirs_of<'a>(&mut self, files: impl Iterator<Item = &'a [u8]>) -> usize {
        if !self.no_ignore {
            for f in files {
                let path = crate::scan::bytes_path(f);
                let Some(r) = self.root_bytes.iter().position(|r| is_under(f, r)) else { continue };
                let root = &self.roots[r];
                if let Some(d) = path.parent().filter(|d| d.starts_with(root)) {
                    self.ignores.rules(d, root);
                }
            }
        }
        self.ignores.len()
    }

    /// Forgets cached ignore files (one changed).
    fn reset(&mut self) {
        self.ignores.clear();
    }

    /// Forgets the rules of `path` and of every directory under it, when
    /// they are held: a directory there now is another one.
    fn forget_dir(&mut self, path: &Path) {
        self.ignores.forget_under(path);
    }
}

/// Paths whose file-system events keep coming closer together than the
/// debounce. The debouncer hands a path's events over only once they are
/// a debounce old with no newer one, so a file written to without a pause
/// (a busy log, a status file rewritten every few milliseconds) was never
/// handed over while it was written: 491 appends 20 ms apart to a 14 MB
/// log over 10 s, and the index still held its content from before them.
/// The raw events are tapped ([`TappedWatcher`]), and a path busy for
/// [`BUSY_MAX_WAIT`] is checked then, and again after twice as long each
/// time while it stays busy, up to [`BUSY_MAX_WAIT_CAP`] (but for a large
/// file: [`Busy::due_small`]). The wait grows because such a file
/// is often changing while it is read, and is then read three times for
/// nothing (a 14 MB log appended every 20 ms: ~75 ms of CPU a look).
#[derive(Clone, Default)]
struct Busy(Arc<Mutex<HashMap<PathBuf, BusySince>>>);

/// When a busy path's wait began and its last event came, and how long
/// the wait is.
#[derive(Clone, Copy)]
struct BusySince {
    first: Instant,
    last: Instant,
    wait: Duration,
}

impl BusySince {
    /// Still busy (an event within `quiet`) and busy for its wait: events
    /// that span it. (One write under a debounce longer than the wait is
    /// not busy: it was looked at after the wait and again once the
    /// debouncer handed it over.)
    fn due(&self, now: Instant, quiet: Duration) -> bool {
        now.duration_since(self.last) < quiet && self.last.duration_since(self.first) >= self.wait
    }
}

/// How long a path's events may keep coming before the daemon looks at it
/// without waiting for them to stop ([`Busy`]).
const BUSY_MAX_WAIT: Duration = Duration::from_secs(2);

/// The longest a busy path waits between two looks ([`Busy`]).
const BUSY_MAX_WAIT_CAP: Duration = Duration::from_secs(32);

impl Busy {
    /// Notes a raw event: a change of a file's bytes or metadata, or one
    /// made (a rename's and a removal's paths are the debouncer's to pair
    /// and hand over).
    fn note(&self, event: &notify::Event) {
        let content = match event.kind {
            EventKind::Create(_) => true,
            EventKind::Modify(ModifyKind::Name(_)) => false,
            EventKind::Modify(_) => true,
            _ => false,
        };
        if !content {
            return;
        }
        let now = Instant::now();
        let mut busy = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for p in &event.paths {
            busy.entry(p.clone()).or_insert(BusySince { first: now, last: now, wait: BUSY_MAX_WAIT }).last = now;
        }
    }

    /// Whether [`Busy::due`] has a path to give.
    fn any_due(&self, quiet: Duration) -> bool {
        let now = Instant::now();
        let busy = self.0.lock().unwrap_or_else(|p| p.into_inner());
        busy.values().any(|b| b.due(now, quiet))
    }

    /// [`Busy::due`]'s regular files under [`ingest::LARGE_READ`]. A larger
    /// one being copied in (10 GB at 100 MB/s) would be read three times
    /// over at each look, each time for nothing: it is read once its writes
    /// pause, as the debouncer hands it over.
    fn due_small(&self, quiet: Duration) -> BTreeSet<PathBuf> {
        let mut due = self.due(quiet);
        due.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() < ingest::LARGE_READ));
        due
    }

    /// The paths busy for their wait with an event within `quiet`, whose
    /// next wait, twice as long, starts. Paths with none within `quiet` are
    /// forgotten: the debouncer hands them over (or has).
    fn due(&self, quiet: Duration) -> BTreeSet<PathBuf> {
        let now = Instant::now();
        let mut busy = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if busy.is_empty() {
            return BTreeSet::new();
        }
        busy.retain(|_, b| now.duration_since(b.last) < quiet);
        let mut due = BTreeSet::new();
        for (p, b) in busy.iter_mut() {
            if b.due(now, quiet) {
                b.first = now;
                b.wait = (2 * b.wait).min(BUSY_MAX_WAIT_CAP);
                due.insert(p.clone());
            }
        }
        due
    }
}

/// Files closed after writing are looked at as soon as they are closed,
/// rather than once their events are a debounce old: a writer that closed
/// a file has finished with it, and the debounce only waited for that. (A
/// 10 % burst on the generated corpus: the first batch began ~55 ms after
/// the first write, with both cores idle since the writes had ended;
/// `docs/performance.md`.) The tap ([`Early::note`]) sends each close to
/// the daemon at once; the debouncer still hands the path's own events
/// over later, and those are dropped if no raw event for the path came
/// after it was taken ([`Early::sift`]), so it is read once. A path closed
/// again less than [`EARLY_AGAIN`] after its last close is left to the
/// debouncer (and [`Busy`]): a log opened, appended to and closed every
/// few milliseconds is not read at each close, nor every [`EARLY_AGAIN`].
#[derive(Clone)]
struct Early(Arc<Mutex<EarlyState>>);

struct EarlyState {
    /// How long after a path was taken the debouncer may still hold its
    /// creation ([`Early::note`]).
    fold: Duration,
    /// When each path was last taken at its close.
    taken: HashMap<PathBuf, Instant>,
    /// When each path was last closed, taken or not.
    closed: HashMap<PathBuf, Instant>,
    /// Closes not [`EARLY_DELAY`] old yet.
    pending: Vec<(PathBuf, Instant)>,
    /// Paths taken at their close and renamed since, whose new name (the
    /// rename's `To` and `Both` events) has not come yet ([`Early::note`]).
    renaming: Vec<(PathBuf, Instant)>,
    /// Each path's last raw event.
    last: HashMap<PathBuf, Instant>,
    /// Each path's last removal or rename (either side).
    moved: HashMap<PathBuf, Instant>,
    /// Old names of renames, and when: each goes to the daemon as
    /// removed unless the debouncer hands a rename from it over
    /// ([`Early::note`]).
    old_names: HashMap<PathBuf, Instant>,
    /// The same in the order of the renames, with those handed over since
    /// (no longer in `old_names` at that time): the due ones are at the
    /// front, where looking through the whole map at each message was ~5 %
    /// of the daemon's CPU while rsync renamed 6,789 files.
    old_order: std::collections::VecDeque<(PathBuf, Instant)>,
    /// How long an old name waits for that while the daemon is idle.
    hand_over: Duration,
    last_prune: Option<Instant>,
}

/// How long a file stays closed before it is taken ([`Early`]): a writer
/// that moves the file it closed into place (a temporary file renamed over
/// the document: rsync, editors, `sed -i`) does so at once, and the file
/// is then the debouncer's to hand over under its final name, where taken
/// at its close it was read, indexed and removed again under its
/// temporary one, leaving a lost-and-found record.
const EARLY_DELAY: Duration = Duration::from_millis(10);

/// A close this soon after the path's last one is left to the debouncer
/// ([`Early`]).
const EARLY_AGAIN: Duration = Duration::from_secs(1);

/// How long the old name of a rename of a path taken at its close waits
/// for the new one ([`Early::note`]). The kernel queues a rename's two
/// events one after the other, and notify reads them in one go but at the
/// end of its buffer; the old name alone after this is a removal (moved
/// out of the roots).
const RENAME_WAIT: Duration = Duration::from_millis(2);

/// How old an old name of a rename gets before it goes to the daemon as
/// removed while events never stop ([`Early::sift`]).
const OLD_NAMES_BUSY: Duration = Duration::from_secs(30);

/// Whether a raw event is a file's close after writing.
fn is_close_write(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)))
}

/// A removal of `paths`, as the daemon hears of it.
fn removal(paths: Vec<PathBuf>) -> notify::Event {
    let mut removal = notify::Event::new(EventKind::Remove(notify::event::RemoveKind::Any));
    removal.paths = paths;
    removal
}

/// Whether a raw event removes or renames its paths.
fn is_move(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)))
}

impl Early {
    /// For a debouncer of `debounce`, which hands an event over at its
    /// first tick (a quarter of the debounce) once it is a debounce old.
    fn new(debounce: Duration) -> Early {
        Early(Arc::new(Mutex::new(EarlyState {
            fold: 2 * debounce,
            taken: HashMap::default(),
            closed: HashMap::default(),
            pending: Vec::new(),
            renaming: Vec::new(),
            last: HashMap::default(),
            moved: HashMap::default(),
            old_names: HashMap::default(),
            old_order: std::collections::VecDeque::new(),
            hand_over: 4 * debounce + EARLY_AGAIN,
            last_prune: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EarlyState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a raw event, and says whether it goes on to the debouncer. A
    /// close does not: it goes to the daemon (`daemon`) at once. Nor, as
    /// well, does a removal or rename of a path taken at its close while
    /// the debouncer may still hold the path's creation go to the debouncer
    /// alone, because the debouncer folds it away (a file made and renamed
    /// within a debounce is handed over as a file made under its new name,
    /// and the read of the old name, begun at its close, went on to its
    /// end). A removal goes to the daemon as that path's removal. A rename
    /// within the roots goes to it as the rename, a move of what was read
    /// (an editor or a download that writes a temporary file, syncs it and
    /// renames it over the document: the sync took it past
    /// [`EARLY_DELAY`]), so the file is not read again under its new name
    /// and the temporary name leaves a move, not a deleted file, in the
    /// lost and found. Its old name waits [`RENAME_WAIT`] for the new one,
    /// then is a removal (moved out of the roots).
    fn note(&self, event: &notify::Event, daemon: &crossbeam_channel::Sender<DebounceEventResult>) -> bool {
        let now = Instant::now();
        let moved = is_move(&event.kind);
        let mut s = self.lock();
        for p in &event.paths {
            s.last.insert(p.clone(), now);
            if moved {
                s.moved.insert(p.clone(), now);
            }
        }
        let send = |event: notify::Event| {
            let _ = daemon.send(Ok(vec![notify_debouncer_full::DebouncedEvent::new(event, now)]));
        };
        // The debouncer keeps a rename under its new name. It folds a
        // chain of renames (a → b → c) into one from the first old name to
        // the last new one, and a removal of the new name, or of a
        // directory above it, replaces or drops the rename it holds there.
        // So `mv a b; rm b` within a debounce was handed over as b's
        // removal alone, and a's record stayed in the index for good; so
        // did b's in a → b → c when the daemon had read b meanwhile. Each
        // old name is noted here, and goes to the daemon as removed unless
        // a rename from it is handed over ([`Early::sift`]). The daemon
        // then finds it gone, or there again: where the rename came
        // through, that changes nothing.
        if matches!(event.kind, EventKind::Modify(ModifyKind::Name(RenameMode::Both))) {
            if let Some(from) = event.paths.first() {
                s.old_names.insert(from.clone(), now);
                s.old_order.push_back((from.clone(), now));
            }
        }
        match event.kind {
            // A rename's new name comes as `To`, then `Both` with both names.
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {}
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) if event.paths.len() == 2 => {
                if let Some(i) = s.renaming.iter().position(|(p, _)| *p == event.paths[0]) {
                    s.renaming.swap_remove(i);
                    // The new name, taken lately too, is renamed over: the
                    // move replaces what the index holds there.
                    s.taken.remove(&event.paths[1]);
                    send(event.clone());
                    return true;
                }
            }
            _ => {
                if !s.renaming.is_empty() {
                    send(removal(s.renaming.drain(..).map(|(p, _)| p).collect()));
                }
            }
        }
        if is_close_write(&event.kind) {
            send(event.clone());
            return false;
        }
        if moved && !s.taken.is_empty() {
            let fold = s.fold;
            let gone: Vec<PathBuf> = event
                .paths
                .iter()
                .filter(|p| s.taken.remove(*p).is_some_and(|t| now.duration_since(t) < fold))
                .cloned()
                .collect();
            if matches!(event.kind, EventKind::Modify(ModifyKind::Name(RenameMode::From))) {
                s.renaming.extend(gone.into_iter().map(|p| (p, now)));
            } else if !gone.is_empty() {
                send(removal(gone));
            }
        }
        true
    }

    /// The events of one message to handle. The closes the tap sent become
    /// writes of their paths, unless a path was closed less than
    /// [`EARLY_AGAIN`] before, or it or a directory above it was removed or
    /// renamed within `keep`: the debouncer may not have handed that over
    /// yet, and the daemon's rules expect a removal or rename before the
    /// writes that follow it (a file written where a directory was
    /// removed, read first, kept the directory's files in the index). The
    /// debouncer's events of a path taken since are dropped when the tap
    /// has seen no raw event for it since, but for renames and removals,
    /// which carry what was not read. (The debouncer keeps one event of a
    /// kind per path, and no modification after a creation: its events'
    /// own times cannot tell.)
    ///
    /// Old names of renames ([`Early::note`]) that no rename handed over
    /// came from go as removals once they are [`EarlyState::hand_over`]
    /// old while the daemon is `idle` (no batch for a while: the debouncer
    /// has handed over all it will), or [`OLD_NAMES_BUSY`] old.
    /// Sooner, a rename handed over after its old name's removal would be
    /// a file removed and a new one read, where it is a move. Nor do they
    /// go with each message: while rsync renamed 6,789 files, the daemon
    /// was between two messages most of the time, and the old names made
    /// ~1,500 batches of a few paths (~1 ms each) out of messages that
    /// left nothing to do.
    fn sift(
        &self,
        events: Vec<notify_debouncer_full::DebouncedEvent>,
        keep: Duration,
        idle: bool,
    ) -> Vec<notify_debouncer_full::DebouncedEvent> {
        let now = Instant::now();
        let mut s = self.lock();
        if s.last_prune.is_none_or(|t| now.duration_since(t) >= keep) {
            s.last_prune = Some(now);
            s.taken.retain(|_, t| now.duration_since(*t) < keep);
            s.closed.retain(|_, t| now.duration_since(*t) < keep);
            s.last.retain(|_, t| now.duration_since(*t) < keep);
            s.moved.retain(|_, t| now.duration_since(*t) < keep);
        }
        let mut out = Vec::with_capacity(events.len() + 1);
        // Old names of renames whose new name did not come: moved out.
        let (gone, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut s.renaming).into_iter().partition(|(_, at)| now.duration_since(*at) >= RENAME_WAIT);
        s.renaming = wait;
        if !gone.is_empty() {
            let gone = removal(gone.into_iter().map(|(p, _)| p).collect());
            out.push(notify_debouncer_full::DebouncedEvent::new(gone, now));
        }
        if !s.old_order.is_empty() {
            for e in &events {
                if matches!(e.kind, EventKind::Modify(ModifyKind::Name(RenameMode::Both))) {
                    if let Some(from) = e.paths.first() {
                        s.old_names.remove(from);
                    }
                }
            }
            let wait = if idle { s.hand_over } else { OLD_NAMES_BUSY.max(s.hand_over) };
            let mut due = Vec::new();
            while s.old_order.front().is_some_and(|(_, at)| now.duration_since(*at) >= wait) {
                let (p, at) = s.old_order.pop_front().expect("a front");
                if s.old_names.get(&p) == Some(&at) {
                    s.old_names.remove(&p);
                    due.push(p);
                }
            }
            if !due.is_empty() {
                out.push(notify_debouncer_full::DebouncedEvent::new(removal(due), now));
            }
        }
        for e in events {
            if is_close_write(&e.kind) {
                let at = e.time;
                s.pending.extend(e.event.paths.into_iter().map(|p| (p, at)));
                continue;
            }
            let content = matches!(e.kind, EventKind::Create(_))
                || matches!(e.kind, EventKind::Modify(k) if !matches!(k, ModifyKind::Name(_)));
            let read_since = |p: &PathBuf| s.taken.get(p).is_some_and(|t| s.last.get(p).is_none_or(|last| last <= t));
            if content && !e.need_rescan() && !e.paths.is_empty() && e.paths.iter().all(read_since) {
                continue;
            }
            // Written again since it was read at its close: the debouncer
            // hands a file made and written to within a debounce over as
            // its creation alone, which the daemon compared by its stat,
            // and a write that set the mtime back was missed for good
            // (session 71). Its bytes are read, whatever its stat.
            let mut e = e;
            if matches!(e.kind, EventKind::Create(_)) && e.paths.iter().any(|p| s.taken.contains_key(p)) {
                e.event.kind = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
            }
            out.push(e);
        }
        // The closes [`EARLY_DELAY`] old. A path the debouncer's events
        // above name is read for them, not again for its close.
        let named: HashSet<&PathBuf> = out.iter().flat_map(|e| &e.paths).collect();
        let (due, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut s.pending).into_iter().partition(|(_, at)| now.duration_since(*at) >= EARLY_DELAY);
        s.pending = wait;
        let mut taken = Vec::new();
        for (p, _) in due {
            let before = s.closed.insert(p.clone(), now);
            // A burst renames nothing: its ~2,000 closes need not look up
            // every directory above them in an empty map.
            if before.is_some_and(|t| now.duration_since(t) < EARLY_AGAIN)
                || (!s.moved.is_empty()
                    && p.ancestors().any(|a| s.moved.get(a).is_some_and(|t| now.duration_since(*t) < keep)))
                || named.contains(&p)
            {
                continue;
            }
            s.taken.insert(p.clone(), now);
            taken.push(p);
        }
        drop(named);
        if !taken.is_empty() {
            let mut written = notify::Event::new(EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any)));
            written.paths = taken;
            out.push(notify_debouncer_full::DebouncedEvent::new(written, now));
        }
        out
    }

    /// Whether an old name of a rename is due ([`Early::sift`]) when the
    /// daemon is idle.
    fn old_names_due(&self) -> bool {
        let now = Instant::now();
        let mut s = self.lock();
        // Those handed over since go first.
        while let Some((p, at)) = s.old_order.front() {
            if s.old_names.get(p) == Some(at) {
                return now.duration_since(*at) >= s.hand_over;
            }
            s.old_order.pop_front();
        }
        false
    }

    /// How long until the next close, or old name of a rename of a path
    /// taken at its close (`renaming`), waiting in [`Early::sift`] is due.
    /// (The other old names wait for the daemon to be idle:
    /// [`Early::old_names_due`].)
    fn next_due(&self) -> Option<Duration> {
        let now = Instant::now();
        let s = self.lock();
        let closes = s.pending.iter().map(|(_, at)| EARLY_DELAY.saturating_sub(now.duration_since(*at)));
        let renames = s.renaming.iter().map(|(_, at)| RENAME_WAIT.saturating_sub(now.duration_since(*at)));
        closes.chain(renames).min()
    }
}

thread_local! {
    /// What the next [`TappedWatcher`] made on this thread feeds.
    static TAP: std::cell::RefCell<Option<Tap>> = const { std::cell::RefCell::new(None) };
}

/// Where [`TappedWatcher`]'s raw events also go: busy paths, what
/// [`Early`] notes, and the daemon's channel for closes.
struct Tap {
    busy: Busy,
    early: Early,
    closes: crossbeam_channel::Sender<DebounceEventResult>,
    /// The index directory, when it lies in a root: its own writes are
    /// dropped at the tap. They reached the daemon as messages it then
    /// skipped, and the state saved after each batch counted them as
    /// pending, for good (an index inside a root said "1 pending" after
    /// any change, session 71).
    own: Option<PathBuf>,
}

/// notify's watcher with its raw events noted in a [`Busy`] set on their
/// way to the debouncer. The debouncer makes its watcher itself, through
/// [`notify::Watcher::new`], so the set is handed over through [`TAP`]
/// by [`tapped_debouncer`].
struct TappedWatcher(notify::RecommendedWatcher);

impl notify::Watcher for TappedWatcher {
    fn new<F: notify::EventHandler>(mut handler: F, config: notify::Config) -> notify::Result<Self> {
        let Some(Tap { busy, early, closes, own }) = TAP.with(|t| t.borrow_mut().take()) else {
            return Err(notify::Error::generic("a tapped watcher is made by tapped_debouncer"));
        };
        // Tests make notify's thread fail at an event for a file of this
        // name, to see the daemon stop rather than go on blind
        // (undocumented for users).
        let fail_at = std::env::var_os("SIMD_TEST_PANIC_AT_EVENT");
        let tap = move |e: notify::Result<notify::Event>| {
            if let Ok(event) = &e {
                if let Some(name) = &fail_at {
                    if event.paths.iter().any(|p| p.file_name() == Some(name.as_os_str())) {
                        panic!("an event for {}: the failure the test asked for", crate::show_path(&event.paths[0]));
                    }
                }
                let inside = |d: &PathBuf| event.paths.iter().all(|p| p.starts_with(d) && p != d);
                if !event.paths.is_empty() && own.as_ref().is_some_and(inside) {
                    return;
                }
                if !early.note(event, &closes) {
                    return;
                }
                busy.note(event);
            }
            handler.handle_event(e);
        };
        Ok(TappedWatcher(notify::RecommendedWatcher::new(tap, config)?))
    }

    fn watch(&mut self, path: &Path, recursive_mode: RecursiveMode) -> notify::Result<()> {
        self.0.watch(path, recursive_mode)
    }

    fn watch_with(&mut self, path: &Path, config: notify::WatchPathConfig) -> notify::Result<()> {
        self.0.watch_with(path, config)
    }

    fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
        self.0.unwatch(path)
    }

    fn update_paths(&mut self, ops: Vec<notify::PathOp>) -> Result<(), notify::UpdatePathsError> {
        self.0.update_paths(ops)
    }

    fn configure(&mut self, option: notify::Config) -> notify::Result<bool> {
        self.0.configure(option)
    }

    fn watched_paths(&self) -> notify::Result<Vec<(PathBuf, RecursiveMode)>> {
        self.0.watched_paths()
    }

    fn kind() -> notify::WatcherKind {
        notify::RecommendedWatcher::kind()
    }
}

type Debouncer = notify_debouncer_full::Debouncer<TappedWatcher, RecommendedCache>;

/// The daemon's debouncer, whose raw events also go to `busy` and
/// `early`, and files' closes after writing straight to `tx`.
fn tapped_debouncer(
    debounce: Duration,
    tx: crossbeam_channel::Sender<DebounceEventResult>,
    config: notify::Config,
    busy: Busy,
    early: Early,
    own: Option<PathBuf>,
) -> notify::Result<Debouncer> {
    TAP.with(|t| *t.borrow_mut() = Some(Tap { busy, early, closes: tx.clone(), own }));
    let made =
        new_debouncer_opt::<_, TappedWatcher, RecommendedCache>(debounce, None, tx, RecommendedCache::new(), config);
    TAP.with(|t| t.borrow_mut().take());
    made
}

/// What one debounced batch asks for.
#[derive(Default)]
struct Batch {
    /// Paths whose state must be compared with the index.
    check: BTreeSet<PathBuf>,
    /// Renames (from, to), in order.
    renames: Vec<(PathBuf, PathBuf)>,
    /// Paths of `check` with a remove event: one that is there again as
    /// something other than a directory may have been a directory, whose
    /// files' own remove events the debouncer dropped in favour of its own.
    removed: BTreeSet<PathBuf>,
    /// Paths of `check` named by one side of a rename (the other outside
    /// the roots, or a directory watched itself moved): with `removed` and
    /// `renames`, what says that a root itself went or was replaced.
    renamed: BTreeSet<PathBuf>,
    rescan: bool,
    /// Events were lost (the kernel's queue overflowed): notify's watches
    /// may lack directories made or moved in meanwhile.
    lost: bool,
    /// A second look at new directories: schedules no further look.
    settle: bool,
    /// The periodic rescan of a fully watched tree: what it finds changed
    /// raised no event, and is said.
    safety: bool,
    /// Paths of `check` whose bytes an event says were written: read even
    /// if their stat matches the index's record.
    written: BTreeSet<PathBuf>,
    /// Paths of `check` whose only events are metadata changes (`chmod`,
    /// `touch`, `rsync -a` and `tar` setting a directory's times once its
    /// files are in place). Such a directory is walked once things settle
    /// ([`apply`]), not at once.
    attrib_only: BTreeSet<PathBuf>,
}

fn classify(events: Vec<notify_debouncer_full::DebouncedEvent>) -> Batch {
    let mut b = Batch::default();
    let (mut check, mut removed, mut written) = (Vec::new(), Vec::new(), Vec::new());
    let (mut attrib, mut other) = (Vec::new(), HashSet::default());
    for ev in events {
        if ev.need_rescan() {
            if !b.rescan {
                tracing::warn!(
                    "file-system events were lost (the kernel's inotify queue overflowed); rescanning. \
                     Bursts this large are caught by rescans; to keep up with them event by event, raise \
                     the queue with `sysctl fs.inotify.max_queued_events=1048576` (and in /etc/sysctl.d)"
                );
            }
            b.rescan = true;
            b.lost = true;
        }
        let ev = ev.event;
        // An unmount comes as the removal of every directory watched on
        // that file system, though nothing was removed: what it uncovered
        // is looked at from the mount table's change (a mount inside a
        // root), or by the root checks (a root that was a mount point,
        // whose files then have its grace).
        if ev.info() == Some("unmount") {
            continue;
        }
        if !matches!(ev.kind, EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_))) {
            other.extend(ev.paths.iter().cloned());
        }
        match ev.kind {
            EventKind::Access(_) => {}
            EventKind::Modify(ModifyKind::Metadata(_)) => {
                attrib.extend(ev.paths.iter().cloned());
                check.extend(ev.paths);
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) if ev.paths.len() == 2 => {
                b.renames.push((ev.paths[0].clone(), ev.paths[1].clone()));
            }
            EventKind::Remove(_) => {
                removed.extend(ev.paths.iter().cloned());
                check.extend(ev.paths);
            }
            EventKind::Modify(ModifyKind::Data(_)) => {
                written.extend(ev.paths.iter().cloned());
                check.extend(ev.paths);
            }
            EventKind::Modify(ModifyKind::Name(_)) => {
                b.renamed.extend(ev.paths.iter().cloned());
                check.extend(ev.paths);
            }
            _ => check.extend(ev.paths),
        }
    }
    attrib.retain(|p| !other.contains(p));
    (b.check, b.removed, b.written, b.attrib_only) =
        (path_set(check), path_set(removed), path_set(written), path_set(attrib));
    b
}

/// The set of `paths`, made from them sorted by their bytes first. A set
/// of paths is ordered by their components, and comparing two paths that
/// way parses them (`std::path::compare_components`): inserting the ~2,000
/// paths of a burst one by one into two sets took ~7 ms on the daemon's
/// thread, between the burst's events and its reading. Sorted by bytes
/// (one `memcmp` a comparison), they are in component order but where a
/// name is another's start followed by a byte below `/` (`a.md` and
/// `a/x`), and the set's own sort, which finds runs already in order, has
/// little left to do.
fn path_set(mut paths: Vec<PathBuf>) -> BTreeSet<PathBuf> {
    paths.sort_unstable_by(|a, b| a.as_os_str().as_encoded_bytes().cmp(b.as_os_str().as_encoded_bytes()));
    paths.dedup();
    paths.into_iter().collect()
}

/// At most this many messages of events (a debouncer tick's, or one close
/// each) are taken into one batch.
const MESSAGES_PER_BATCH: usize = 4096;

/// Free space the daemon waits for on a full file system before it opens
/// the index again: what RocksDB itself asks for before it recovers from a
/// full disk on its own (its `SstFileManager`'s "required disk buffer"),
/// so that the rescan that follows does not fill it again at once.
pub const ROOM_TO_RESUME: u64 = 64 << 20;

/// The free space the daemon waits for on a file system of `size` bytes:
/// [`ROOM_TO_RESUME`], or an eighth of a file system too small for that
/// to ever be free (a 40 MB one waited for good).
pub fn room_to_resume(size: u64) -> u64 {
    ROOM_TO_RESUME.min(size / 8)
}

/// How often the daemon looks at the free space while it waits for it.
const SPACE_CHECK: Duration = Duration::from_secs(2);

/// Runs the daemon ([`watch`]) on the index at `db` until `stop` is set,
/// through full disks: when the index's file system fills up, the index
/// stays as last committed, the daemon closes it, says so, waits until
/// [`room_to_resume`] more is free, and starts again, its first scan catching
/// up with every change made meanwhile. (Left to a service manager, a full
/// disk was a restart every few seconds, each with a scan of the tree
/// that failed at its first write.)
pub fn serve(db: &Path, opts: &WatchOptions, stop: Arc<AtomicBool>) -> Result<(), WatchError> {
    // Held while paused for room: whether a daemon holds the index is told
    // by its lock, and no other writer should start meanwhile.
    let mut held = None;
    loop {
        // Opening writes too (a new write-ahead log, an options file).
        let run = match held.take() {
            Some(lock) => Store::open_writer(db, lock, None),
            None => Store::open(db, Access::Write, None),
        };
        let run = run.map_err(WatchError::from);
        // An error from an index deleted under the daemon (RocksDB's, when
        // it next makes a file there) says so.
        let run = run.and_then(|store| watch(&store, opts, stop.clone()).map_err(|e| gone(&store, opts, e)));
        match run {
            Err(e) if e.is_no_space() && !stop.load(Ordering::Relaxed) => {
                held = crate::store::lock_writer(db).ok();
                // The error's first line: its hint is for commands run by hand.
                if !wait_for_room(db, &stop, e.to_string().lines().next().unwrap_or_default()) {
                    let _ = std::fs::remove_file(state_path(db));
                    return Ok(());
                }
            }
            result => return result,
        }
    }
}

/// `e`, or [`WatchError::IndexGone`] with `e` as its cause when the index
/// directory is no longer the one `store` opened.
fn gone(store: &Store, opts: &WatchOptions, e: WatchError) -> WatchError {
    if matches!(e, WatchError::IndexGone { .. }) || store.in_place() {
        return e;
    }
    let roots = opts.index.roots.iter().map(crate::show_path).collect();
    WatchError::IndexGone { dir: store.dir().to_path_buf(), cause: Some(e.to_string()), roots }
}

/// Waits until the file system of the index at `dir` has
/// [`room_to_resume`] free beyond what was free when the index closed
/// (true), or `stop` is set (false), and says so as it starts (`error`:
/// what failed). Counted from what was free then, not from nothing: on a
/// small file system an eighth of it may be free as soon as the index
/// closes, and the daemon started again at once to fill it up again.
/// `simd status` says how far it is meanwhile.
fn wait_for_room(dir: &Path, stop: &AtomicBool, error: &str) -> bool {
    let (base, need) = match rustix::fs::statvfs(dir) {
        Ok(fs) => (fs.f_bavail.saturating_mul(fs.f_frsize), room_to_resume(fs.f_blocks.saturating_mul(fs.f_frsize))),
        Err(_) => (0, ROOM_TO_RESUME),
    };
    tracing::error!(
        "{error}\n  the index's file system is full: the daemon waits until {} more are free than now ({} free; \
         looked at every {} s), then starts again with a scan that catches up with every change made meanwhile",
        crate::cli::human_bytes(need),
        crate::cli::human_bytes(base),
        SPACE_CHECK.as_secs()
    );
    let mut state =
        DaemonState::saved(dir).unwrap_or_else(|| DaemonState { pid: std::process::id(), ..DaemonState::default() });
    state.ready = false;
    state.disk_full_since = Some(ingest::now_ns());
    state.room = Some((base, base.saturating_add(need)));
    state.save(dir);
    let mut last_look: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        if last_look.is_none_or(|t| t.elapsed() >= SPACE_CHECK) {
            last_look = Some(Instant::now());
            match rustix::fs::statvfs(dir) {
                Ok(fs) => {
                    let free = fs.f_bavail.saturating_mul(fs.f_frsize);
                    if free >= base.saturating_add(need) {
                        tracing::warn!(
                            "{}: {} free: opening the index again",
                            crate::show_path(dir),
                            crate::cli::human_bytes(free)
                        );
                        return true;
                    }
                    if state.room.is_some_and(|(was, _)| was != free) {
                        state.room = Some((free, base.saturating_add(need)));
                        state.save(dir);
                    }
                }
                Err(e) => tracing::debug!("{}: {e}", crate::show_path(dir)),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Runs the daemon until `stop` is set (SIGINT/SIGTERM/SIGHUP in the binary).
pub fn watch(store: &Store, opts: &WatchOptions, stop: Arc<AtomicBool>) -> Result<(), WatchError> {
    let dir = store.dir().to_path_buf();
    let mut state = DaemonState { pid: std::process::id(), started: ingest::now_ns(), ..DaemonState::default() };
    // The same process starting again after a pause for room ([`serve`]):
    // its start time and counters go on.
    if let Some(before) = DaemonState::saved(&dir).filter(|b| b.pid == state.pid) {
        state.started = before.started;
        state.batches = before.batches;
        state.changed_files = before.changed_files;
        state.rescans = before.rescans;
    }
    state.save(&dir);

    // Events from the start of the reconcile on are kept, so nothing that
    // changes during the scan is missed.
    let (tx, rx) = unbounded::<DebounceEventResult>();
    // Access events (open, close) are filtered out by the kernel: each
    // append would raise three events and the daemon's own read of the file
    // a fourth, and a 6.6k-file burst then overflows the default queue of
    // 16,384 events (docs/performance.md).
    // And symlinks are not followed, as the walk follows none: notify's
    // default put a watch on every directory behind a link (one to /usr
    // in a root of four files: 15,367 watches), and a link loop made under
    // the daemon was an error that cost a rescan of the whole tree.
    // Closes after writing are asked for too ([`Early`]): one event more
    // per file written, where open and close-after-reading were two.
    let config = notify::Config::default()
        .with_event_kinds(notify::EventKindMask::CORE | notify::EventKindMask::ACCESS_CLOSE)
        .with_follow_symlinks(false);
    let busy = Busy::default();
    let early = Early::new(opts.debounce);
    // How long `early` keeps what it noted of a path.
    let early_keep = 4 * opts.debounce + EARLY_AGAIN;
    let own = store.dir().canonicalize().ok();
    let mut debouncer = tapped_debouncer(opts.debounce, tx.clone(), config, busy.clone(), early.clone(), own.clone())?;
    // A path with no event for a debounce is the debouncer's to hand over
    // (at its next tick); one with a newer event it holds back.
    let quiet = opts.debounce;
    // Mounts and unmounts from here on are seen (the roots' watches are
    // compared with the table the scan below walked, or a later one).
    let mut mounts = Mounts::open();
    // The roots are watched before the scan, so that a file changed after
    // the scan read it raises an event (they were watched after it: 300
    // files appended to during a daemon's first scan of 26k files were
    // missed, session 51). A root the scan finds gone is watched again by
    // the root checks once it is back.
    let (present, missing) = ingest::daemon_start_roots(store, &opts.index)?;
    let mut watched = Vec::new();
    for r in present.iter().chain(&missing) {
        watched.push(WatchedRoot::watch(r, &mounts, &mut debouncer, opts, &mut state)?);
    }
    // Said from the start: `simd status` during the first scan (hours on
    // a large tree) took the roots it remembers for roots this daemon
    // does not watch ("NOT WATCHED by this daemon").
    state.roots = present.iter().chain(&missing).map(crate::show_path).collect();
    state.save(&dir);
    // A root missing at the start (a share not mounted yet at boot) has
    // the grace of one that went while the daemon ran.
    let mut start_opts = IndexOptions { tolerate_missing: true, ..opts.index.clone() };
    if opts.root_grace.is_zero() {
        for r in &missing {
            tracing::warn!(
                "{}: this root is missing (deleted, moved away or not mounted): its files are recorded as removed, \
                 and it is indexed again once it is back (`simd forget` it if it is gone for good)",
                crate::show_path(r)
            );
        }
    } else {
        for w in watched.iter_mut().filter(|w| missing.contains(&w.path)) {
            tracing::warn!(
                "{}: this root is missing (deleted, moved away or not mounted): its files stay in the index for {} s, \
                 and are recorded as removed then unless it is back (`simd rescan` records them now)",
                crate::show_path(&w.path),
                opts.root_grace.as_secs()
            );
            w.spared_until = Some(Instant::now() + opts.root_grace);
        }
        start_opts.spared = missing.clone();
    }
    // Commands that write (template marks, a forced rescan) come in here.
    // Listening from before the first scan, which can take hours on a
    // large tree: a request made meanwhile waits for it to end, where the
    // command failed "no such file" and had to be tried again by hand.
    let (_control, requests) = match control::Listener::start(&dir) {
        Ok((l, rx)) => (Some(l), rx),
        Err(e) => {
            tracing::warn!(
                "{}: no control socket ({e}): template marks and rescans need the daemon stopped",
                crate::show_path(control::socket_path(&dir))
            );
            (None, crossbeam_channel::never())
        }
    };
    // Large files that changed while the daemon was not running are read
    // beside the first batches, once the daemon is ready.
    let (summary, unread_at_start) = ingest::index_deferring(store, &start_opts, ingest::BACKGROUND_READ)?;
    if summary.interrupted {
        tracing::info!(
            "stopped during the first scan: the files read so far are indexed, and the next start goes on from there"
        );
        let _ = std::fs::remove_file(state_path(&dir));
        return Ok(());
    }
    // Rescans walk the same roots, and a root gone meanwhile does not stop
    // them (it is walked as an empty one).
    let mut rescan_opts = IndexOptions {
        roots: [summary.roots.clone(), summary.missing_roots.clone(), start_opts.spared].concat(),
        tolerate_missing: true,
        ..opts.index.clone()
    };
    state.roots = rescan_opts.roots.iter().map(crate::show_path).collect();
    // Roots given on the command line: the others the index remembers go
    // stale while this daemon runs, which `simd status` shows too.
    let unwatched: Vec<PathBuf> = ingest::remembered(store)?
        .into_iter()
        .filter(|r| !rescan_opts.roots.iter().any(|w| r.starts_with(w)))
        .collect();
    if !unwatched.is_empty() {
        tracing::warn!(
            "the index also remembers {}, which this daemon does not watch: not kept current while it runs (start \
             `simd watch` with no root to watch every remembered one, or `simd forget` them)",
            show(&unwatched)
        );
    }
    for r in &rescan_opts.roots {
        if !watched.iter().any(|w| &w.path == r) {
            watched.push(WatchedRoot::watch(r, &mounts, &mut debouncer, opts, &mut state)?);
        }
    }
    state.missing_roots = watched.iter().filter(|w| w.id.is_none()).map(|w| crate::show_path(&w.path)).collect();
    note_spared(&watched, &mut state);
    note_remote_roots(&rescan_opts.roots, &mounts.text, opts, &mut state);
    tracing::info!(
        "watching {} ({} new, {} changed, {} moved, {} removed at start{})",
        state.roots.join(", "),
        summary.new,
        summary.changed,
        summary.moved,
        summary.removed,
        match unread_at_start.len() {
            0 => String::new(),
            n => format!("; {} to read in the background", crate::cli::count(n, "large file")),
        }
    );
    // Who waits for the next rescan's answer, and the roots each had added.
    let mut rescan_replies: Vec<(crossbeam_channel::Sender<control::Response>, Vec<PathBuf>)> = Vec::new();
    let mut filter = Filter::new(&rescan_opts.roots, &opts.index, &dir)?;
    // Full groups are written by a thread of their own while the next
    // files are read and staged (ingest::Committer).
    std::thread::scope(|scope| {
        let committer = ingest::Committer::spawn(scope, store);
        let new_writer = || {
            Writer::keeping_paths(store)
                .map(|w| w.with_committer(committer.clone()).logging_reads().whole_from(opts.index.whole_from))
        };
        let mut writer = new_writer()?;
        // The ignore files of every directory holding an indexed file, read
        // now rather than at the first event in each (three stats a directory:
        // ~11 % of the daemon's CPU in a burst over a fresh daemon).
        let started = Instant::now();
        let dirs = filter.load_dirs_of(writer.known_paths());
        tracing::debug!("ignore files of {dirs} directories read in {:?}", started.elapsed());
        state.ready = true;
        state.save(&dir);

        let workers = if opts.index.workers == 0 { ingest::available_cores() } else { opts.index.workers };
        let mut dirty = false;
        // New directories are walked again once things settle: files written
        // into one before notify's watch on it existed raise no events.
        // Directories whose metadata changed are walked then too. While
        // events never stop, they wait no longer than `flush_busy` (since
        // `recheck_since`).
        let mut recheck: Vec<PathBuf> = Vec::new();
        let mut recheck_since: Option<Instant> = None;
        let mut last_activity = Instant::now();
        let mut batch_end = Instant::now();
        let mut last_rescan = Instant::now();
        let mut last_flush = Instant::now();
        let mut last_root_check = Instant::now();
        // Roots named by an event (deleted or renamed themselves): their
        // watch is renewed at the next check even if the inode number came back.
        let mut root_touched: Vec<PathBuf> = Vec::new();
        // Since when an ignore file's change awaits its rescan.
        let mut ignores_changed: Option<Instant> = None;
        let mut holds = Holds::default();
        // Large files are read beside the batches, and written once read.
        let mut background = ingest::Background::spawn(scope, store, workers, opts.index.whole_from);
        for d in unread_at_start {
            background.send(d);
        }
        // Paths to compare with the index again: a large file's read that
        // the file outdated, or a file asked for while it was being read.
        let mut look_again: BTreeSet<PathBuf> = BTreeSet::new();
        // Mount points where a file system was mounted or unmounted.
        let mut remounted: BTreeSet<PathBuf> = BTreeSet::new();
        let mut twins = Twins::default();
        twins.refresh(&mounts.text, &rescan_opts.roots);
        while !stop.load(Ordering::Relaxed) {
            let mut forced = false;
            // Events that never stop do not hold that rescan off for long.
            if ignores_changed.is_some_and(|t| t.elapsed() >= opts.flush_busy) {
                forced = true;
            }
            if !root_touched.is_empty() || last_root_check.elapsed() >= ROOT_CHECK {
                if !store.in_place() {
                    return Err(WatchError::IndexGone { dir: dir.clone(), cause: None, roots: state.roots.clone() });
                }
                let found = check_roots(&mut watched, &root_touched, &mut mounts, &mut debouncer, opts, &mut state)?;
                forced |= found.rescan;
                let ended = grace_ended(&mut watched);
                forced |= ended;
                if found.changed || ended {
                    note_spared(&watched, &mut state);
                    state.save(&dir);
                }
                if !found.remounted.is_empty() {
                    filter.set_kernel_dirs(&mounts.text);
                }
                remounted.extend(found.remounted);
                last_root_check = Instant::now();
                root_touched.clear();
            }
            while let Ok(incoming) = requests.try_recv() {
                match incoming.request {
                    control::Request::Rescan => {
                        forced = true;
                        rescan_replies.push((incoming.reply, Vec::new()));
                    }
                    // `simd reread`: the next rescan reads these files
                    // whatever their stat says.
                    control::Request::Reread { paths } => {
                        // A path under a remembered root this daemon was not
                        // started on would be read by no rescan of its own.
                        let roots: Vec<Vec<u8>> =
                            rescan_opts.roots.iter().map(|r| crate::scan::path_bytes(r)).collect();
                        if let Some(p) = paths.iter().find(|p| !crate::scan::is_under_any(p, &roots)) {
                            let _ = incoming.reply.send(Err(format!(
                                "{}: not under a root this daemon watches ({}): stop it (kill -TERM {}) and run \
                                 `simd reread` then, or start it with no roots to watch every root the index remembers",
                                crate::report_path(p),
                                show(&rescan_opts.roots),
                                std::process::id()
                            )));
                            continue;
                        }
                        forced = true;
                        // None named: every file of its roots.
                        rescan_opts.walk.reread_paths(if paths.is_empty() { roots } else { paths });
                        rescan_replies.push((incoming.reply, Vec::new()));
                    }
                    control::Request::Add { roots } => {
                        // `simd index ROOT...`: the roots are remembered and
                        // watched, and the rescan that follows indexes them
                        // before it answers.
                        writer.commit()?;
                        let added: Vec<PathBuf> = roots
                            .iter()
                            .map(|r| crate::scan::bytes_path(r))
                            .filter(|r| !rescan_opts.roots.contains(r))
                            .collect();
                        if let Err(e) = ingest::refuse_roots(&dir, &added, &opts.index.walk.excludes)
                            .and_then(|()| Ok(ingest::remember(store, &added)?))
                        {
                            let _ = incoming.reply.send(Err(e.to_string()));
                            continue;
                        }
                        for r in &added {
                            watched.push(WatchedRoot::watch(r, &mounts, &mut debouncer, opts, &mut state)?);
                            rescan_opts.roots.push(r.clone());
                        }
                        if !added.is_empty() {
                            tracing::info!("watching {} too, as asked", show(&added));
                            filter = Filter::new(&rescan_opts.roots, &opts.index, &dir)?;
                            state.roots = rescan_opts.roots.iter().map(crate::show_path).collect();
                            note_remote_roots(&rescan_opts.roots, &mounts.text, opts, &mut state);
                        }
                        forced = true;
                        rescan_replies.push((incoming.reply, added));
                    }
                    control::Request::Forget { roots } => {
                        writer.commit()?;
                        let gone: Vec<PathBuf> = roots.iter().map(|r| crate::scan::bytes_path(r)).collect();
                        let mut daemon = Roots {
                            watched: &mut watched,
                            opts: &mut rescan_opts,
                            filter: &mut filter,
                            debouncer: &mut debouncer,
                            state: &mut state,
                            mounts: &mounts,
                        };
                        let (answer, rescan) = forget(store, &gone, &mut daemon, opts, &dir)?;
                        forced |= rescan;
                        background.give_up_where(|p| !filter.follows(p, false), "its root forgotten");
                        // Saved before the reply goes: whoever asked reads
                        // the roots without the forgotten one.
                        state.save(&dir);
                        let _ = incoming.reply.send(answer);
                        writer = new_writer()?;
                        filter.load_dirs_of(writer.known_paths());
                    }
                    request => {
                        // The request reads the index: write what is pending first.
                        writer.commit()?;
                        let _ = incoming.reply.send(control::perform(store, request, workers));
                        // Marks bypass the writer; start it afresh from the index.
                        writer = new_writer()?;
                    }
                }
            }
            let (reads, again) = background.done();
            look_again.extend(again);
            if !reads.is_empty() {
                let before = writer.changed();
                writer.begin_pass();
                let mut summary = Summary::default();
                for read in reads {
                    // A root forgotten or an ignore file written since it
                    // was sent: no longer the daemon's to index.
                    if filter.follows(read.path(), false) {
                        look_again.extend(writer.apply_background(read, &mut summary)?);
                    }
                }
                let linked = writer.take_linked_reads();
                look_again.extend(writer.other_names(&linked)?.into_iter().filter(|p| filter.follows(p, false)));
                dirty |= settle_pass(&mut writer, &mut holds, &mut state, before)?;
                state.pending = rx.len() + holds.waiting.len();
                state.reading = background.in_flight();
                state.save(&dir);
            }
            let mut batch = if forced {
                remounted.clear();
                Batch { rescan: true, ..Batch::default() }
            } else if recheck_since.is_some_and(|t| t.elapsed() >= opts.flush_busy) {
                recheck_since = None;
                Batch { check: recheck.drain(..).collect(), settle: true, ..Batch::default() }
            } else if !remounted.is_empty() {
                // A mount point's directory is there as something else now:
                // it is examined as one removed and made again (what the
                // index holds under it that is not there goes, what is there
                // is walked). Ignore files read there before are stale.
                filter.reset();
                let points = std::mem::take(&mut remounted);
                Batch { check: points.clone(), removed: points, ..Batch::default() }
            } else {
                // Closes wait in `early` until they are due. While one
                // waits, nothing is taken before it is due, so the thread
                // sleeps until then instead of waking for each message
                // that comes meanwhile: a program writing files one after
                // another (rsync) sends a close every few hundred µs, and
                // a wake for each (a context switch and the channel's
                // spinning) was ~10 % of the daemon's CPU. What came
                // meanwhile (for at most [`EARLY_DELAY`]) is taken then.
                let next = match early.next_due() {
                    Some(due) if !due.is_zero() => {
                        std::thread::sleep(due.min(EARLY_DELAY));
                        rx.try_recv().map_err(|e| match e {
                            TryRecvError::Empty => RecvTimeoutError::Timeout,
                            TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                        })
                    }
                    due => {
                        rx.recv_timeout(due.map_or(Duration::from_millis(100), |d| d.min(Duration::from_millis(100))))
                    }
                };
                match next {
                    Ok(first) => {
                        // Whatever else came meanwhile goes in the same
                        // batch: closes come one message a file.
                        let (mut events, mut errors) = (Vec::new(), Vec::new());
                        for m in std::iter::once(first).chain(rx.try_iter().take(MESSAGES_PER_BATCH)) {
                            match m {
                                Ok(e) => events.extend(e),
                                Err(e) => errors.extend(e),
                            }
                        }
                        if errors.is_empty() {
                            classify(early.sift(events, early_keep, false))
                        } else {
                            for e in &errors {
                                tracing::warn!("file-system events: {}; rescanning", notify_error(e));
                            }
                            Batch { rescan: true, ..Batch::default() }
                        }
                    }
                    Err(RecvTimeoutError::Timeout) if early.next_due().is_some_and(|d| d.is_zero()) => {
                        classify(early.sift(Vec::new(), early_keep, false))
                    }
                    // Idle as for the flush: while closes wait their turn,
                    // the arm above times out every few milliseconds.
                    Err(RecvTimeoutError::Timeout)
                        if last_activity.elapsed() >= opts.flush_idle && early.old_names_due() =>
                    {
                        classify(early.sift(Vec::new(), early_keep, true))
                    }
                    Err(RecvTimeoutError::Timeout)
                        if !recheck.is_empty() && last_activity.elapsed() >= opts.flush_idle =>
                    {
                        recheck_since = None;
                        Batch { check: recheck.drain(..).collect(), settle: true, ..Batch::default() }
                    }
                    Err(RecvTimeoutError::Timeout) if holds.any_due() => {
                        Batch { check: holds.due(), ..Batch::default() }
                    }
                    // Filled with the busy files below.
                    Err(RecvTimeoutError::Timeout) if busy.any_due(quiet) => Batch::default(),
                    Err(RecvTimeoutError::Timeout) if !look_again.is_empty() => {
                        Batch { check: std::mem::take(&mut look_again), ..Batch::default() }
                    }
                    Err(RecvTimeoutError::Timeout)
                        if ignores_changed.is_some() && last_activity.elapsed() >= opts.flush_idle =>
                    {
                        tracing::info!("ignore files changed: rescanning for files they now leave out or let in");
                        Batch { rescan: true, ..Batch::default() }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if dirty && last_activity.elapsed() >= opts.flush_idle {
                            expire_and_flush(store, &mut writer, opts)?;
                            dirty = false;
                            last_flush = Instant::now();
                        }
                        // Part of the tree unwatched: its changes are found
                        // only by rescans. Else a rescan now and then is the
                        // safety net under what inotify cannot see, once
                        // events have paused (what it finds is then what no
                        // event brought, and is said).
                        let partial = state.degraded || !state.remote_roots.is_empty();
                        let every = if partial {
                            Some(opts.full_rescan_every.map_or(opts.rescan_every, |f| f.min(opts.rescan_every)))
                        } else {
                            opts.full_rescan_every.filter(|_| last_activity.elapsed() >= opts.flush_idle)
                        };
                        if every.is_some_and(|every| last_rescan.elapsed() >= every) {
                            Batch { rescan: true, safety: !partial, ..Batch::default() }
                        } else {
                            continue;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            if !batch.rescan {
                // Busy files are looked at among other changes too: a tree
                // with a change every few milliseconds times nothing out.
                let due = busy.due_small(quiet);
                batch.written.extend(due.iter().cloned());
                batch.check.extend(due);
            }
            if !batch.rescan {
                twins.refresh(&mounts.text, &rescan_opts.roots);
                twins.add_to(&mut batch);
            }
            // An ignore file written, edited or removed changes which files
            // are followed, and the files themselves raise no event: a
            // rescan once things settle (one for a burst of them) drops
            // those now left out (without ghosts) and reads those let in.
            // A repository's `.git/info/exclude` is one (the walk reads
            // it), though nothing else under `.git` is followed: its
            // change, or its `.git` or `info` directory made, moved or
            // removed, is taken here, before the prune drops it (the batch
            // may be left with nothing else).
            let named = || batch.check.iter().chain(batch.renames.iter().flat_map(|(a, b)| [a, b]));
            if named().any(|p| is_ignore_file(p) || holds_git_exclude(p)) {
                filter.reset();
                ignores_changed.get_or_insert_with(Instant::now);
                last_activity = Instant::now();
            }
            // A directory's rules are kept by its path: one moved, removed
            // or made where another was takes their rules with it.
            for p in named().chain(&batch.removed) {
                filter.forget_dir(p);
            }
            // A file written through a name no walk takes (under `.git`, in
            // a directory an ignore file leaves out) whose other names are
            // indexed: those changed too, and raise no event of their own.
            let unfollowed: Vec<(PathBuf, u64)> = (batch.written.iter())
                .filter(|p| !filter.follows(p, false))
                .filter_map(|p| {
                    let m = std::fs::symlink_metadata(p).ok().filter(|m| m.is_file() && m.nlink() > 1)?;
                    Some((p.clone(), m.ino()))
                })
                .collect();
            if !unfollowed.is_empty() {
                for other in writer.other_names(&unfollowed)? {
                    if filter.follows(&other, false) {
                        batch.written.insert(other.clone());
                        batch.check.insert(other);
                    }
                }
            }
            filter.prune(&mut batch);
            // A large file being read that is removed or renamed over: its
            // read would be thrown away, so it is given up now. One renamed
            // is read on under its new name.
            if background.in_flight() > 0 {
                for p in &batch.removed {
                    background.give_up(p, "removed");
                }
                for (from, to) in &batch.renames {
                    background.renamed(from, to);
                }
            }
            if !batch.rescan {
                // Held files whose time is up go along, even while events
                // never stop long enough for the idle arm above.
                batch.check.append(&mut holds.due());
                batch.check.append(&mut look_again);
                holds.hold_back(&mut batch.check);
                if batch.check.is_empty() && batch.renames.is_empty() {
                    state.pending = rx.len() + holds.waiting.len();
                    continue;
                }
            }
            // A root removed or renamed itself. Not one whose own metadata
            // changed (`rsync -a` into it sets its mtime, `chmod`, `touch`):
            // renewing its watch and rescanning it then was a warning that
            // it had been replaced, and a walk of the whole tree.
            let replaced =
                batch.removed.iter().chain(&batch.renamed).chain(batch.renames.iter().flat_map(|(a, b)| [a, b]));
            let touched: Vec<PathBuf> = replaced.filter(|p| watched.iter().any(|w| w.path == **p)).cloned().collect();
            if !opts.root_grace.is_zero() && !touched.is_empty() {
                // A root removed or renamed itself is the root checks' to
                // look at (right after this batch): checked here, a root
                // moved away had every file under it recorded as removed
                // at once, grace or not. Where one was renamed to is walked.
                let is_touched = |p: &PathBuf| touched.contains(p);
                for (from, to) in std::mem::take(&mut batch.renames) {
                    match (is_touched(&from), is_touched(&to)) {
                        (false, false) => batch.renames.push((from, to)),
                        (true, false) => {
                            batch.check.insert(to);
                        }
                        _ => {}
                    }
                }
                for set in [&mut batch.check, &mut batch.removed, &mut batch.renamed, &mut batch.written] {
                    set.retain(|p| !is_touched(p));
                }
                batch.attrib_only.retain(|p| !is_touched(p));
            }
            root_touched.extend(touched);
            let named: Vec<&PathBuf> =
                batch.check.iter().chain(batch.renames.iter().flat_map(|(a, b)| [a, b])).collect();
            last_activity = Instant::now();
            // A file-system event, not a rescan asked for: monitoring reads
            // it to learn whether events still come.
            if !named.is_empty() || !batch.removed.is_empty() || !batch.renamed.is_empty() {
                state.last_event = Some(ingest::now_ns());
            }
            state.pending = batch.check.len() + batch.renames.len();
            state.save(&dir);
            if batch.rescan {
                if batch.lost {
                    // notify adds the watch of a directory made or moved in
                    // when it reads that event: one lost with the queue's
                    // overflow left that directory unwatched for good (a
                    // file written there later was never indexed, session
                    // 51). A new watcher (a new inotify instance: the old
                    // one's watches go with it, not as a flood of events)
                    // watches every directory there is now, before the
                    // rescan looks at them.
                    tracing::info!("watching the roots anew");
                    debouncer =
                        tapped_debouncer(opts.debounce, tx.clone(), config, busy.clone(), early.clone(), own.clone())?;
                    mounts = Mounts::open();
                    // A root in its grace keeps it: unwatching a root that
                    // went away is what overflowed the queue (an IN_IGNORED
                    // event for each of its directories).
                    let before = std::mem::take(&mut watched);
                    for r in &rescan_opts.roots {
                        let mut w = WatchedRoot::watch(r, &mounts, &mut debouncer, opts, &mut state)?;
                        w.spared_until = before.iter().find(|b| b.path == *r).and_then(|b| b.spared_until);
                        watched.push(w);
                    }
                }
                // Everything pending is written first: the scan reads the index.
                writer.commit()?;
                tracing::info!("rescanning");
                // A root gone or replaced a short while ago keeps its
                // files, unless someone asked for this rescan: then what
                // is there now is what they want the index to hold.
                if !rescan_replies.is_empty() {
                    for w in watched.iter_mut() {
                        w.spared_until = None;
                    }
                    note_spared(&watched, &mut state);
                }
                rescan_opts.spared =
                    watched.iter().filter(|w| w.spared_until.is_some()).map(|w| w.path.clone()).collect();
                let rescanned = ingest::index_deferring(store, &rescan_opts, ingest::BACKGROUND_READ);
                // Asked for once: later rescans go by the stat again.
                rescan_opts.walk.reread.clear();
                rescan_opts.walk.reread_files.clear();
                let (s, unread) = rescanned?;
                ignores_changed = None;
                // The scan read whatever changed, held files too (or left
                // the large ones to the background readers).
                holds.waiting.clear();
                state.rescans += 1;
                state.last_rescan = Some(ingest::now_ns());
                state.changed_files += s.new + s.changed + s.moved + s.removed + s.left_out;
                if batch.safety {
                    say_unseen(&s, &unread);
                }
                // Saved before the replies go: whoever asked for the rescan
                // reads a state that counts it.
                state.pending = rx.len();
                state.save(&dir);
                let mut text = format!(
                    "rescanned: {} new, {} changed, {} moved, {} removed, {} left out, {} unchanged",
                    s.new, s.changed, s.moved, s.removed, s.left_out, s.unchanged
                );
                // What the scan could not look at (an unreadable directory's
                // files are kept as they were) is said to whoever asked,
                // not only in the daemon's log.
                for (reason, n) in &s.skipped {
                    text.push_str(&format!("\n  {n} skipped: {}", reason.describe()));
                    for p in s.skipped_examples_of(*reason) {
                        text.push_str(&format!("\n    {p}"));
                    }
                }
                let skipped = control::skipped_json(&s);
                if !unread.is_empty() {
                    text.push_str(&format!(
                        "\n  {} changed: being read in the background (`simd status` says when done)",
                        crate::cli::count(unread.len(), "large file")
                    ));
                }
                if s.reread > 0 {
                    text.push_str(&format!("\n  {}", crate::cli::reread_line(&s)));
                }
                if s.interrupted {
                    text.push_str("\n  stopped part way: the daemon is stopping (its next start scans again)");
                }
                let json = serde_json::json!({
                    "new": s.new, "changed": s.changed, "moved": s.moved, "removed": s.removed,
                    "left_out": s.left_out, "unchanged": s.unchanged, "skipped": skipped,
                    "reread": s.reread, "reread_differed": s.reread_differed,
                    "background": unread.len(), "interrupted": s.interrupted,
                });
                for (reply, added) in rescan_replies.drain(..) {
                    let (mut text, mut json) = (text.clone(), json.clone());
                    if !added.is_empty() {
                        text = format!("watching {} from now on; {text}", show(&added));
                        json["added"] = added.iter().map(|r| control::json_path(r)).collect();
                        if !opts.index.roots.is_empty() {
                            // Its next start watches only the roots it is given.
                            text.push_str(
                                "\n  this daemon was started with its roots named (`simd watch ROOT...`): name the \
                                 new ones there too (in the unit file), or start it with no roots to watch every \
                                 root the index remembers",
                            );
                        }
                    }
                    let _ = reply.send(Ok(control::Answer::new(text, json)));
                }
                last_rescan = Instant::now();
                filter.reset();
                // The scan ran its own writer: start afresh from the index.
                writer = new_writer()?;
                filter.load_dirs_of(writer.known_paths());
                for d in unread {
                    background.send(d);
                }
            } else {
                let before = writer.changed();
                let settle = batch.settle;
                writer.begin_pass();
                let (paths, renames, started) = (batch.check.len(), batch.renames.len(), Instant::now());
                let gap = started.duration_since(batch_end);
                let caught_up = || notify_caught_up(&debouncer);
                let (dirs, deferred) = apply(store, &mut writer, &mut filter, batch, workers, &caught_up)?;
                let applied = started.elapsed();
                if !settle && !dirs.is_empty() {
                    recheck_since.get_or_insert_with(Instant::now);
                    recheck.extend(dirs);
                }
                for d in deferred {
                    background.send(d);
                }
                dirty |= settle_pass(&mut writer, &mut holds, &mut state, before)?;
                if writer.versions_due() {
                    // Files changed in place again and again (a log written
                    // to without an idle second) have left enough earlier
                    // versions' chunk lists not to wait for the next flush.
                    // Routine for such a file: every few changes, so it is
                    // not logged as info.
                    let expired = writer.expire_history(opts.index.retention, ingest::now_ns())?;
                    tracing::debug!("{expired} lost-and-found records expired (earlier versions of changed files)");
                }
                tracing::debug!(
                    "batch: {paths} paths, {renames} renames, {} files written in {:?} ({:?} of it after the last \
                     file was written; {:?} since the batch before ended)",
                    writer.changed() - before,
                    started.elapsed(),
                    started.elapsed().saturating_sub(applied),
                    gap
                );
                batch_end = Instant::now();
            }
            if dirty && last_flush.elapsed() >= opts.flush_busy {
                // Changes kept coming without an idle second: what the
                // memtables hold goes to disk anyway.
                expire_and_flush(store, &mut writer, opts)?;
                dirty = false;
                last_flush = Instant::now();
            }
            state.batches += 1;
            state.pending = rx.len() + holds.waiting.len();
            state.reading = background.in_flight();
            state.save(&dir);
        }
        if background.in_flight() > 0 {
            tracing::info!(
                "{} large files being read were given up: the next start's scan reads them",
                background.in_flight()
            );
        }
        drop(background);
        if !holds.waiting.is_empty() {
            tracing::info!(
                "{} large files changing often were not read again yet: the next start's scan reads them",
                holds.waiting.len()
            );
        }
        tracing::info!("stopping: committing and flushing");
        writer.commit()?;
        store.flush()?;
        let _ = std::fs::remove_file(state_path(&dir));
        Ok(())
    })
}

/// Ends a pass of writes (a batch, or large files read in the
/// background): commits it, forgets what only the pass needed, holds the
/// large files it read, and counts its files; returns whether it wrote any.
fn settle_pass(
    writer: &mut Writer<'_>,
    holds: &mut Holds,
    state: &mut DaemonState,
    before: u64,
) -> Result<bool, StoreError> {
    writer.commit()?;
    writer.forget_touched();
    holds.note(writer.take_large_reads());
    state.changed_files += writer.changed() - before;
    Ok(writer.changed() > before)
}

/// What the daemon holds about its roots, for [`forget`].
struct Roots<'a, W: notify::Watcher, C: notify_debouncer_full::FileIdCache> {
    watched: &'a mut Vec<WatchedRoot>,
    /// The rescans' options, with the roots they walk.
    opts: &'a mut IndexOptions,
    filter: &'a mut Filter,
    debouncer: &'a mut notify_debouncer_full::Debouncer<W, C>,
    state: &'a mut DaemonState,
    mounts: &'a Mounts,
}

/// `simd forget` while the daemon runs: the index forgets the roots, and
/// the daemon stops watching those among its own. A remembered root that
/// lay inside a forgotten one is watched on its own from now on, after a
/// rescan (events in it may have been missed in between). Refused, with
/// nothing changed, when the daemon would be left with no root. Returns
/// the answer and whether a rescan is due.
fn forget<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    store: &Store,
    gone: &[PathBuf],
    daemon: &mut Roots<'_, W, C>,
    opts: &WatchOptions,
    dir: &Path,
) -> Result<(control::Response, bool), WatchError> {
    let kept: Vec<PathBuf> = ingest::remembered(store)?.into_iter().filter(|r| !gone.contains(r)).collect();
    let mut roots: Vec<PathBuf> = daemon.watched.iter().map(|w| w.path.clone()).filter(|p| !gone.contains(p)).collect();
    let mut added = Vec::new();
    for r in &kept {
        let freed = gone.iter().any(|g| r.starts_with(g) && daemon.watched.iter().any(|w| w.path == *g));
        if freed && !roots.iter().any(|n| r.starts_with(n)) {
            roots.push(r.clone());
            added.push(r.clone());
        }
    }
    if roots.is_empty() {
        let answer = Err(format!(
            "the running `simd watch` (pid {}) would have no root left to watch: stop it first (SIGTERM, or \
             `systemctl stop` for the service), then run `simd forget` again",
            std::process::id()
        ));
        return Ok((answer, false));
    }
    let f = match ingest::forget(store, gone) {
        Ok(f) => f,
        Err(e) => return Ok((Err(e.to_string()), false)),
    };
    let unwatched: Vec<PathBuf> =
        daemon.watched.iter().filter(|w| gone.contains(&w.path) && w.id.is_some()).map(|w| w.path.clone()).collect();
    for w in daemon.watched.iter().filter(|w| unwatched.contains(&w.path)) {
        w.unwatch(daemon.debouncer);
    }
    daemon.watched.retain(|w| !gone.contains(&w.path));
    // The watcher keeps one watch per directory, shared by the roots over
    // it: unwatching a root inside a kept one (or around it) took the kept
    // one's watches there too, and its changes went unseen. Such a kept
    // root is watched again, and rescanned for what came meanwhile.
    let overlap = |p: &Path| unwatched.iter().any(|g| g.starts_with(p) || p.starts_with(g));
    let mut rewatched = false;
    for w in daemon.watched.iter_mut().filter(|w| w.id.is_some() && overlap(&w.path)) {
        w.unwatch(daemon.debouncer);
        let spared_until = w.spared_until;
        *w = WatchedRoot::watch(&w.path.clone(), daemon.mounts, daemon.debouncer, opts, daemon.state)?;
        w.spared_until = w.spared_until.or(spared_until);
        rewatched = true;
    }
    for r in &added {
        daemon.watched.push(WatchedRoot::watch(r, daemon.mounts, daemon.debouncer, opts, daemon.state)?);
    }
    tracing::info!("forgot {}; watching {}", show(&f.roots), show(&roots));
    daemon.state.roots = roots.iter().map(crate::show_path).collect();
    daemon.state.missing_roots =
        daemon.watched.iter().filter(|w| w.id.is_none()).map(|w| crate::show_path(&w.path)).collect();
    note_spared(daemon.watched, daemon.state);
    *daemon.filter = Filter::new(&roots, &opts.index, dir)?;
    note_remote_roots(&roots, &daemon.mounts.text, opts, daemon.state);
    daemon.opts.roots = roots;
    Ok((Ok(control::forgotten(&f)), !added.is_empty() || rewatched))
}

fn show(paths: &[PathBuf]) -> String {
    paths.iter().map(crate::show_path).collect::<Vec<_>>().join(", ")
}

/// How often a fully watched tree is rescanned by default
/// (`--full-rescan-every`): the safety net under changes that raise no
/// inotify event. A rescan stats every file and reads only those changed:
/// ~0.3 s for Django's 66.5k files. Syncthing rescans hourly beside its
/// watcher too.
pub const FULL_RESCAN_EVERY: Duration = Duration::from_secs(3600);

/// How long the daemon keeps the files of a root that went away or was
/// replaced by default (`--root-grace`): a share unmounted for
/// maintenance, a server's reboot, or a tree moved out and back is not
/// recorded as removed and then read again whole when it returns (a
/// re-read of a large share takes hours; a stat walk of it, which a
/// return costs instead, minutes at most). The price: a root deleted for
/// good leaves its files in reports for that long.
pub const ROOT_GRACE: Duration = Duration::from_secs(300);

/// Says what the periodic rescan of a fully watched tree found changed:
/// no event brought it, so the administrator learns that something writes
/// in a way inotify cannot see (a shared `mmap`, a hard link from outside
/// the roots), or that events were lost.
fn say_unseen(s: &Summary, unread: &[ingest::Deferred]) {
    let found = s.new + s.changed + s.moved + s.removed + unread.len() as u64;
    if found == 0 {
        tracing::debug!("the periodic rescan found nothing changed");
        return;
    }
    let examples: Vec<PathBuf> =
        s.read_examples.iter().cloned().chain(unread.iter().map(|d| d.path().to_path_buf())).take(5).collect();
    tracing::warn!(
        "the periodic rescan found {} that no file-system event had brought ({} new, {} changed, {} moved, {} \
         removed{}), now indexed: inotify does not see writes through a shared mmap or through a hard link from \
         outside the roots{}",
        crate::cli::count(found, "change"),
        s.new,
        s.changed,
        s.moved,
        s.removed,
        if unread.is_empty() { String::new() } else { format!(", {} large being read", unread.len()) },
        if examples.is_empty() { String::new() } else { format!("; among them {}", show(&examples)) }
    );
}

/// How often the daemon looks at its roots themselves: a root deleted and
/// made again (a deploy's `rm -rf docs && cp -r new docs`) is a new
/// directory that no watch covers, and one gone must be looked for.
const ROOT_CHECK: Duration = Duration::from_secs(1);

/// A root of the daemon, and the directory (device, inode) its watch
/// covers; None while it is missing.
struct WatchedRoot {
    path: PathBuf,
    id: Option<(u64, u64)>,
    /// The mounts strictly inside it when it was last watched.
    mounts: Vec<Mount>,
    /// The mount whose mount point it is, if it was one when last looked at.
    mount: Option<u64>,
    /// Gone or replaced lately: until this time, rescans keep what the
    /// index holds under it and does not find there (`--root-grace`).
    spared_until: Option<Instant>,
}

impl WatchedRoot {
    /// The root at `path` as it is now, watched if it is there.
    fn watch<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
        path: &Path,
        mounts: &Mounts,
        debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
        opts: &WatchOptions,
        state: &mut DaemonState,
    ) -> Result<WatchedRoot, WatchError> {
        let root = WatchedRoot {
            path: path.to_path_buf(),
            id: root_id(path),
            mounts: mounts_inside(&mounts.text, path),
            mount: crate::mounts::mount_at(&mounts.text, path),
            spared_until: None,
        };
        if root.id.is_some() {
            watch_root(debouncer, path, opts, state)?;
        }
        Ok(root)
    }

    /// Drops its watch, and those of mount points inside it, which notify
    /// keeps apart (if the kernel has not dropped them already).
    fn unwatch<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
        &self,
        debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    ) {
        for (_, point) in &self.mounts {
            let _ = debouncer.unwatch(point);
        }
        let _ = debouncer.unwatch(&self.path);
    }
}

/// A mount in the mount table: its id and its mount point.
type Mount = (u64, PathBuf);

/// The mount table (`/proc/self/mountinfo`, or the file that
/// `SIMD_TEST_MOUNTINFO` names), watched for mounts and unmounts.
///
/// A file system mounted inside a root raises no inotify event: its files
/// appear and the covered directory's vanish at once, and the watch stays
/// on the covered directory, so nothing written on the new file system is
/// seen either; an unmount is the same the other way. The kernel marks
/// the table's file (POLLPRI) when it changes (`proc_pid_mountinfo(5)`),
/// so one `poll` a [`ROOT_CHECK`] tells whether anything was (un)mounted.
struct Mounts {
    /// The table's file, open for `poll`; None where it cannot be opened.
    file: Option<std::fs::File>,
    path: PathBuf,
    /// The table as last read.
    text: String,
}

impl Mounts {
    fn open() -> Mounts {
        let path = crate::mounts::table_path();
        // Opened before it is read: a change in between is then both read
        // and flagged, and the flag finds nothing new (better than missed).
        let file = std::fs::File::open(&path).ok();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        Mounts { file, path, text }
    }

    /// Whether the table changed since the last look; if so it is read again.
    fn changed(&mut self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let Some(file) = &self.file else { return false };
        let mut fds = [PollFd::new(file, PollFlags::PRI)];
        let flagged = poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).is_ok_and(|n| n > 0)
            && fds[0].revents().intersects(PollFlags::PRI | PollFlags::ERR);
        if flagged {
            match std::fs::read_to_string(&self.path) {
                Ok(text) => self.text = text,
                Err(e) => tracing::warn!("{}: {e}", crate::show_path(&self.path)),
            }
        }
        flagged
    }
}

/// The mounts whose mount point is strictly inside `root`, in the order
/// of the table (the order they were mounted in).
fn mounts_inside(mountinfo: &str, root: &Path) -> Vec<Mount> {
    crate::mounts::inside(mountinfo, root).map(|(id, point, _)| (id, point)).collect()
}

/// "mounted at /a, unmounted from /b": what changed between two lists of
/// mounts, for the log.
fn mount_changes(before: &[Mount], after: &[Mount]) -> String {
    let show = |verb: &str, ms: Vec<&Mount>| {
        (!ms.is_empty())
            .then(|| format!("{verb} {}", ms.iter().map(|(_, p)| crate::show_path(p)).collect::<Vec<_>>().join(", ")))
    };
    let mounted = show("mounted at", after.iter().filter(|m| !before.contains(m)).collect());
    let unmounted = show("unmounted from", before.iter().filter(|m| !after.contains(m)).collect());
    [mounted, unmounted].into_iter().flatten().collect::<Vec<_>>().join("; ")
}

/// The (device, inode) of the directory at `path`, if there is one.
fn root_id(path: &Path) -> Option<(u64, u64)> {
    // A root replaced by a symlink is gone: no symlink is followed, and
    // the scans leave such a root out ([`crate::ingest`]).
    std::fs::symlink_metadata(path).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
}

/// Watches a root and all below it; hitting the inotify watch limit
/// degrades to periodic rescans.
fn watch_root<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    root: &Path,
    opts: &WatchOptions,
    state: &mut DaemonState,
) -> Result<(), WatchError> {
    match debouncer.watch(root, RecursiveMode::Recursive) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => {
            tracing::error!(
                "{}: the inotify watch limit is reached: part of the tree is not watched and is rescanned every {} s; \
                 raise the limit with `sysctl fs.inotify.max_user_watches=1048576` (and in /etc/sysctl.d) and restart",
                crate::show_path(root),
                opts.rescan_every.as_secs()
            );
            state.degraded = true;
            Ok(())
        }
        // Gone between the look and the watch: the next check sees it.
        Err(e)
            if matches!(&e.kind, notify::ErrorKind::PathNotFound)
                || matches!(&e.kind, notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// What [`check_roots`] found to look at again.
#[derive(Default)]
struct RootsCheck {
    /// A root is back, replaced or gone (without a grace): a rescan of
    /// every root.
    rescan: bool,
    /// A root went, came back or was replaced: the daemon's state says
    /// which are missing.
    changed: bool,
    /// Mount points inside a root where a file system was mounted or
    /// unmounted: only the files under each are looked at again.
    remounted: BTreeSet<PathBuf>,
}

/// Looks at each root: one gone is said so (its files go with a rescan),
/// one back or replaced by a new directory is watched again and rescanned.
/// A mount point inside a root where a file system was mounted or
/// unmounted ([`Mounts`]) is watched again and returned, for the files
/// under it to be looked at again; not the whole root: an automounter or
/// a container host mounts and unmounts all day, and a rescan of a large
/// root each time would cost a walk of all of it. The watch of a root in
/// `renew` (named by an event) is renewed if it is there.
fn check_roots<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    roots: &mut [WatchedRoot],
    renew: &[PathBuf],
    mounts: &mut Mounts,
    debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    opts: &WatchOptions,
    state: &mut DaemonState,
) -> Result<RootsCheck, WatchError> {
    let remounted = mounts.changed();
    let mut found = RootsCheck::default();
    for root in roots.iter_mut() {
        let now = root_id(&root.path);
        // The mounts inside it now, if they changed.
        let new_mounts = remounted.then(|| mounts_inside(&mounts.text, &root.path)).filter(|m| *m != root.mounts);
        if now == root.id && !(now.is_some() && renew.contains(&root.path)) {
            if let Some(inside) = new_mounts {
                tracing::warn!(
                    "{}: a file system was {}: watching there again and looking again at the files under it",
                    crate::show_path(&root.path),
                    mount_changes(&root.mounts, &inside)
                );
                found.remounted.extend(watch_mount_points(debouncer, &root.mounts, &inside, opts, state)?);
                root.mounts = inside;
            }
            continue;
        }
        if root.id.is_some() {
            // The old directory's watch.
            root.unwatch(debouncer);
            // A share unmounted or a tree moved out may be back soon: its
            // files are not recorded as removed (and read again whole on
            // its return) before the grace, from its last going, is over.
            if !opts.root_grace.is_zero() {
                root.spared_until = Some(Instant::now() + opts.root_grace);
            }
        }
        let kept = match root.spared_until {
            Some(_) => {
                "; what the index holds there and the rescan does not find stays until the root's grace is \
                        over (`simd rescan` drops it now)"
            }
            None => "",
        };
        match now {
            Some(_) => {
                let mount = crate::mounts::mount_at(&mounts.text, &root.path);
                let what = match (root.mount, mount) {
                    (Some(_), None) => {
                        "the file system mounted on the root was unmounted: watching the directory \
                                        it covered and rescanning"
                    }
                    (None, Some(_)) => "a file system was mounted on the root: watching it and rescanning",
                    _ => "the root is back (or was replaced): watching it again and rescanning",
                };
                root.mount = mount;
                tracing::warn!("{}: {what}{kept}", crate::show_path(&root.path));
                watch_root(debouncer, &root.path, opts, state)?;
                found.rescan = true;
            }
            None => {
                tracing::warn!(
                    "{}: the root is gone (deleted, moved away or unmounted): {}; it is looked for every {} s and \
                     watched again once back",
                    crate::show_path(&root.path),
                    match root.spared_until {
                        Some(_) => format!(
                            "its files stay in the index for {} s, and are recorded as removed then unless it is \
                             back (`simd rescan` records them now)",
                            opts.root_grace.as_secs()
                        ),
                        None => "its files are recorded as removed".to_string(),
                    },
                    ROOT_CHECK.as_secs()
                );
                // Nothing to walk there while its files are kept.
                found.rescan |= root.spared_until.is_none();
            }
        }
        root.id = now;
        if let Some(inside) = new_mounts {
            root.mounts = inside;
        }
        found.changed = true;
    }
    if found.changed || remounted {
        state.missing_roots = roots.iter().filter(|r| r.id.is_none()).map(|r| crate::show_path(&r.path)).collect();
        // One back may be a mount now (a share mounted again), or hold one.
        let paths: Vec<PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
        note_remote_roots(&paths, &mounts.text, opts, state);
    }
    Ok(found)
}

/// Notes in the daemon's state which roots are in their grace, and until when.
fn note_spared(roots: &[WatchedRoot], state: &mut DaemonState) {
    let (now, wall) = (Instant::now(), ingest::now_ns());
    state.spared_roots = roots
        .iter()
        .filter_map(|r| {
            let left = r.spared_until?.saturating_duration_since(now);
            Some((crate::show_path(&r.path), wall.saturating_add(i64::try_from(left.as_nanos()).unwrap_or(i64::MAX))))
        })
        .collect();
}

/// Ends the grace of the roots whose grace is over, saying so: true when
/// one did, for a rescan to record what they no longer hold.
fn grace_ended(roots: &mut [WatchedRoot]) -> bool {
    let now = Instant::now();
    let mut ended = false;
    for root in roots.iter_mut().filter(|r| r.spared_until.is_some_and(|t| t <= now)) {
        tracing::warn!(
            "{}: the root's grace is over: rescanning, and recording as removed the files the index holds there \
             that are not there now{}",
            crate::show_path(&root.path),
            if root.id.is_none() { " (all of them: it is still gone)" } else { "" }
        );
        root.spared_until = None;
        ended = true;
    }
    ended
}

/// Watches again where file systems were mounted or unmounted inside a
/// root (`before` → `after`). An inotify watch is on a directory's inode:
/// a directory a mount covers keeps its watch, unseen, the mounted file
/// system's directories have none, and after an unmount the uncovered
/// directory has one only if it had one before the mount. So each mount
/// point that changed is unwatched and watched again (a new mount not
/// with `--one-file-system`, whose files are not followed). Only those
/// subtrees: watching the whole root again removes a watch per directory,
/// and on a large tree (Django's 31,746 directories) the kernel's queue
/// overflowed with their IN_IGNORED events, which cost a second rescan.
/// Returns the mount points that changed.
fn watch_mount_points<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    debouncer: &mut notify_debouncer_full::Debouncer<W, C>,
    before: &[Mount],
    after: &[Mount],
    opts: &WatchOptions,
    state: &mut DaemonState,
) -> Result<Vec<PathBuf>, WatchError> {
    let came: BTreeSet<&PathBuf> = after.iter().filter(|m| !before.contains(m)).map(|(_, p)| p).collect();
    let gone: BTreeSet<&PathBuf> = before.iter().filter(|m| !after.contains(m)).map(|(_, p)| p).collect();
    let points: Vec<PathBuf> = came.union(&gone).map(|p| (*p).clone()).collect();
    for point in &points {
        let _ = debouncer.unwatch(point);
        let followed = gone.contains(point) || !opts.index.walk.one_file_system;
        if followed && std::fs::metadata(point).is_ok_and(|m| m.is_dir()) {
            watch_root(debouncer, point, opts, state)?;
        }
    }
    Ok(points)
}

/// Directories inside the roots that are one directory under two names
/// (bind mounts; [`crate::mounts::twin_candidates`], confirmed by their
/// device and inode). inotify watches a directory once whatever its
/// names, and notify reports its events under the name it watched last,
/// so a change made under the other name would be missed there until
/// the next rescan. Each path a batch names is looked at under its other
/// names too (looking at a path compares it with the index, so a name
/// too many costs a `stat`, never a wrong record).
#[derive(Default)]
struct Twins {
    /// The mount table and the roots the pairs were found from.
    from: (String, Vec<PathBuf>),
    pairs: Vec<(PathBuf, PathBuf)>,
}

impl Twins {
    /// Finds the pairs again if the mount table or the roots changed,
    /// saying which are new.
    fn refresh(&mut self, mountinfo: &str, roots: &[PathBuf]) {
        if self.from.0 == mountinfo && self.from.1 == roots {
            return;
        }
        self.from = (mountinfo.to_string(), roots.to_vec());
        let pairs: Vec<(PathBuf, PathBuf)> = crate::mounts::twin_candidates(mountinfo, roots)
            .into_iter()
            .filter(|(a, b)| root_id(a).is_some() && root_id(a) == root_id(b))
            .collect();
        for (a, b) in pairs.iter().filter(|p| !self.pairs.contains(p)) {
            tracing::warn!(
                "{} and {} are one directory under two names (a bind mount): a change seen under either is looked \
                 at under both",
                crate::show_path(a),
                crate::show_path(b)
            );
        }
        self.pairs = pairs;
    }

    /// The other names of `path`, if it is in or under a directory of a pair.
    fn of<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
        self.pairs.iter().flat_map(move |(a, b)| {
            // (Joined with an empty rest, a path would gain a trailing `/`.)
            let other = |from: &Path, to: &Path| {
                let rest = path.strip_prefix(from).ok()?;
                Some(if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) })
            };
            [other(a, b), other(b, a)].into_iter().flatten()
        })
    }

    /// Adds to `batch` the other names of the paths it looks at, with what
    /// the batch says of each (written, removed, only its metadata changed);
    /// a rename's two ends are looked at under their other names.
    fn add_to(&self, batch: &mut Batch) {
        if self.pairs.is_empty() {
            return;
        }
        let more = |set: &BTreeSet<PathBuf>| -> Vec<PathBuf> { set.iter().flat_map(|p| self.of(p)).collect() };
        let (written, removed, attrib_only) = (more(&batch.written), more(&batch.removed), more(&batch.attrib_only));
        let mut check = more(&batch.check);
        check.extend(batch.renames.iter().flat_map(|(from, to)| self.of(from).chain(self.of(to))));
        batch.check.extend(check);
        batch.written.extend(written);
        batch.removed.extend(removed);
        batch.attrib_only.extend(attrib_only.into_iter().filter(|p| !batch.written.contains(p)));
    }
}

/// Applies history retention when it is due, then flushes the memtables
/// (the writer's group is committed: the daemon commits after every batch)
/// and merges the small table files the flushes left ([`Store::tidy`]).
fn expire_and_flush(store: &Store, writer: &mut Writer<'_>, opts: &WatchOptions) -> Result<(), StoreError> {
    if writer.expiry_due(opts.index.retention, ingest::EXPIRE_EVERY) {
        let expired = writer.expire_history(opts.index.retention, ingest::now_ns())?;
        if expired > 0 {
            tracing::info!("{expired} lost-and-found records expired");
        }
    }
    store.flush()?;
    store.tidy()?;
    Ok(())
}

/// Handles one batch: renames first (they may make checks unnecessary), then
/// every path whose state must be compared with the index. Returns the
/// directories among the paths checked and the renames' targets (new
/// directories are walked again once things settle).
fn apply(
    store: &Store,
    writer: &mut Writer<'_>,
    filter: &mut Filter,
    batch: Batch,
    workers: usize,
    caught_up: &dyn Fn(),
) -> Result<(Vec<PathBuf>, Vec<ingest::Deferred>), StoreError> {
    let (mut check, removed, written, attrib_only) = (batch.check, batch.removed, batch.written, batch.attrib_only);
    let (mut dirs, mut deferred) = (Vec::new(), Vec::new());
    // Before a directory moved in is looked at, and before any directory
    // is walked, notify must watch it (see [`notify_caught_up`]): once a
    // batch.
    let waited = std::cell::Cell::new(false);
    let before_walk = || {
        if !waited.replace(true) {
            caught_up();
        }
    };
    // The debouncer's renames are not the renames made: it folds a chain
    // into one and keeps each under its new name, so a swap through a
    // temporary name (a → t, b → a, t → b) comes as a → b, b → a. Applied
    // one after the other, the second moves the first one's record on, and
    // of two hard links swapped (whose inode matches either way) one name
    // was left without a record for good. A path both renamed from and to
    // in the batch is compared with the index again after them all.
    let froms: HashSet<&PathBuf> = batch.renames.iter().map(|(from, _)| from).collect();
    let again: Vec<PathBuf> = batch.renames.iter().map(|(_, to)| to).filter(|to| froms.contains(to)).cloned().collect();
    for (from, to) in batch.renames {
        rename(store, writer, filter, &from, &to, &before_walk, &mut check)?;
    }
    check.extend(again);
    if check.iter().any(|p| is_ignore_file(p)) {
        filter.reset();
    }
    // Each path's own candidate goes to the readers at once, while the
    // next paths are examined. One candidate per path: a file can be named
    // by its own event and by the walk of its new directory. Its index
    // record was looked up before the batch's writes, which stay correct
    // only if no other candidate writes the same path (the group may
    // commit in between). Files found by walking a new directory are read
    // only once every path is examined, as a later path of the batch may
    // be a subdirectory of it that is gone (and a file read before that is
    // found would be indexed after its removal was handled); a path's own
    // candidate has no such later path (its parents sort before it).
    //
    // A path the index holds as a file (most events: files changed in
    // place) goes to the readers without an `lstat`: the reader's `fstat`
    // of the open file tells whether it changed (the `lstat` was ~18 % of
    // the main thread in a burst). Those that are no longer readable
    // regular files come back, and are examined in a second round.
    let mut summary = Summary::default();
    let mut queued = HashSet::default();
    let mut paths: Vec<PathBuf> = check.into_iter().collect();
    let mut first_round = true;
    // Files found gone, removed once the batch's files are written.
    let mut gone = Vec::new();
    loop {
        let defer_from = Some(ingest::BACKGROUND_READ);
        let done = ingest::ingest_with(writer, workers, defer_from, &mut summary, |writer, feed| {
            let (mut cands, mut walked) = (Vec::new(), Vec::new());
            let mut walked_dirs = HashSet::default();
            for path in paths {
                if first_round {
                    match writer.lookup(&path)? {
                        Some(old) if filter.follows(&path, false) => {
                            if queued.insert(path.clone()) {
                                let fetch_old = writer.sole_name(&old.1.content);
                                let written = written.contains(&path);
                                let c = Candidate {
                                    path,
                                    old: Some(old),
                                    fetch_old,
                                    unverified: true,
                                    written,
                                    root: None,
                                };
                                feed.send(writer, c)?;
                            }
                            continue;
                        }
                        _ => {}
                    }
                }
                let (was_removed, was_written) = (removed.contains(&path), written.contains(&path));
                // A directory under one walked in this batch was walked with
                // it (paths come parents first): `rsync -a` or `touch`ing a
                // tree's directories names each, and walking each one's
                // subtree again stat'ed every file once per directory above
                // it.
                let walk = walked_dirs.is_empty() || !path.ancestors().skip(1).any(|a| walked_dirs.contains(a));
                // A directory whose only change is its metadata has had
                // its files' own events: it is walked once things settle
                // (it may have been unreadable until a `chmod`), not now.
                // `rsync -a` sets each directory's times once its files
                // are in place, and walking each one's subtree then was
                // ~30 % of the daemon's CPU while a release of Django
                // (6,757 files, 3,188 directories) was synced over another.
                let later = attrib_only.contains(&path);
                let walk = walk && !later;
                let found = examine(
                    store,
                    writer,
                    filter,
                    &path,
                    (was_removed, was_written, walk),
                    &before_walk,
                    &mut cands,
                    &mut gone,
                )?;
                if found {
                    if later {
                        dirs.push(path);
                    } else if walk {
                        if filter.follows(&path, true) {
                            walked_dirs.insert(path.clone());
                        }
                        dirs.push(path);
                        walked.append(&mut cands);
                    }
                }
                for c in cands.drain(..) {
                    if queued.insert(c.path.clone()) {
                        feed.send(writer, c)?;
                    }
                }
            }
            for mut c in walked {
                if queued.insert(c.path.clone()) {
                    // Looked up again: a later path's removal may have written it.
                    c.old = writer.lookup(&c.path)?;
                    feed.send(writer, c)?;
                }
            }
            Ok(())
        })?;
        let mut recheck = done.recheck;
        deferred.extend(done.deferred);
        // A file with several names (hard links) changed through one of
        // them: the others changed too, and raise no event of their own.
        let linked = writer.take_linked_reads();
        recheck.extend(writer.other_names(&linked)?.into_iter().filter(|p| filter.follows(p, false)));
        if recheck.is_empty() {
            break;
        }
        // In path order again (parents before their children), as examined
        // the first time round.
        paths = recheck;
        paths.sort();
        paths.dedup();
        for p in &paths {
            queued.remove(p);
        }
        first_round = false;
    }
    // A file moved into a directory made in the same moment raises no
    // rename event (notify watches the directory only once it has read
    // the events of its making): its old name is gone, and its new one was
    // found by walking the directory, and read. Paired by content, as a
    // scan pairs a move made while nothing ran, it is recorded as moved.
    writer.remove_gone(gone)?;
    Ok((dirs, deferred))
}

/// Large files that keep changing (a growing log, an image written with
/// pauses): each is read at most once per [`HOLD_RATE`] of its size, where
/// every debounced change would otherwise cost a whole read (a 300 MB file
/// appended to every 300 ms kept a core busy: 6.9 CPU-s in 8 s). Its
/// changes meanwhile wait, and it is read once its time is up: later,
/// never missed. Files under [`ingest::LARGE_READ`] are never held.
#[derive(Default)]
struct Holds {
    /// Until when each large file read lately is held.
    until: HashMap<PathBuf, Instant>,
    /// Held files with a change waiting.
    waiting: BTreeSet<PathBuf>,
}

/// A large file is held for its size over this many bytes a second after
/// each read: one that changes without end then costs the daemon about a
/// tenth of a core (300 MB: one read every ~9 s).
const HOLD_RATE: f64 = 32e6;

impl Holds {
    /// Holds the large files just read.
    fn note(&mut self, reads: Vec<(PathBuf, u64)>) {
        let now = Instant::now();
        for (path, size) in reads {
            self.until.insert(path, now + Duration::from_secs_f64(size as f64 / HOLD_RATE));
        }
    }

    /// Takes the held files out of `check`, to wait; a held file that is
    /// gone is not held (its removal waits for nothing).
    fn hold_back(&mut self, check: &mut BTreeSet<PathBuf>) {
        if self.until.is_empty() {
            return;
        }
        let now = Instant::now();
        let waiting = &self.waiting;
        self.until.retain(|p, t| *t > now || waiting.contains(p));
        for p in self.until.keys() {
            if check.contains(p) && std::fs::symlink_metadata(p).is_ok() {
                check.remove(p);
                self.waiting.insert(p.clone());
            }
        }
    }

    fn any_due(&self) -> bool {
        let now = Instant::now();
        self.waiting.iter().any(|p| self.until.get(p).is_none_or(|t| *t <= now))
    }

    /// The waiting files whose time is up, no longer held.
    fn due(&mut self) -> BTreeSet<PathBuf> {
        let now = Instant::now();
        let due: BTreeSet<PathBuf> =
            self.waiting.iter().filter(|p| self.until.get(*p).is_none_or(|t| *t <= now)).cloned().collect();
        for p in &due {
            self.waiting.remove(p);
            self.until.remove(p);
        }
        due
    }
}

/// Finds the daemon's roots on network or FUSE file systems, and such
/// file systems mounted inside its roots (unless `--one-file-system` leaves
/// them out), says so once for each, and keeps them in `state` (periodic
/// rescans follow them).
fn note_remote_roots(roots: &[PathBuf], mountinfo: &str, opts: &WatchOptions, state: &mut DaemonState) {
    let remote = remote_mounts(mountinfo, roots, opts.index.walk.one_file_system);
    for r in remote.iter().filter(|r| !state.remote_roots.contains(r)) {
        tracing::warn!(
            "{r}: a network or FUSE file system: changes made there by other machines raise no inotify event, so \
             it is also rescanned every {} s (--rescan-every)",
            opts.rescan_every.as_secs()
        );
    }
    state.remote_roots = remote;
}

/// "PATH (TYPE)" for each root on a network or FUSE file system
/// ([`remote_fs`]), and for each such file system mounted inside a root
/// unless `one_file_system` leaves it out.
fn remote_mounts(mountinfo: &str, roots: &[PathBuf], one_file_system: bool) -> Vec<String> {
    let mut remote = Vec::new();
    for r in roots {
        if let Some(t) = remote_fs(mountinfo, r) {
            remote.push(format!("{} ({t})", crate::show_path(r)));
        } else if !one_file_system {
            for (_, point) in mounts_inside(mountinfo, r) {
                let entry = remote_fs(mountinfo, &point).map(|t| format!("{} ({t})", crate::show_path(&point)));
                remote.extend(entry.filter(|e| !remote.contains(e)));
            }
        }
    }
    remote
}

/// The type of the file system holding `path`, from `mountinfo`'s text
/// (`proc(5)`), when it is one where inotify sees only this machine's
/// changes: a network file system, or a FUSE one (sshfs, rclone, gvfs
/// shares...). The mount with the longest mount point above `path` holds
/// it; of two at one point, the later (mounted on top).
fn remote_fs(mountinfo: &str, path: &Path) -> Option<String> {
    let fstype = crate::mounts::fs_type(mountinfo, path)?;
    const REMOTE: [&str; 18] = [
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "ceph",
        "glusterfs",
        "afs",
        "lustre",
        "davfs",
        "virtiofs",
        "gpfs",
        "beegfs",
        "ocfs2",
        "gfs2",
        "orangefs",
        "fuse",
    ];
    (REMOTE.contains(&fstype) || fstype.starts_with("fuse.")).then(|| fstype.to_string())
}

/// Whether `p` names an ignore file, which the walk and the daemon honour.
fn is_ignore_file(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n == ".gitignore" || n == ".ignore" || n == ".simdignore")
}

/// Whether `path` is a `.git` directory or lies in one, which the walk
/// never enters. A file named `.git` (a submodule's or a worktree's
/// pointer to its repository) is walked as any file is, and so followed:
/// only a path that ends in `.git` is looked at (one gone is not a
/// directory the walk leaves out).
fn in_git_dir(path: &Path) -> bool {
    let mut parts = path.components().rev();
    let last = parts.next().is_some_and(|c| c.as_os_str() == ".git");
    parts.any(|c| c.as_os_str() == ".git") || (last && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()))
}

/// Whether `p` is a repository's `.git/info/exclude`, or a directory
/// that holds one (`.git`, `.git/info`): moved or removed, it takes the
/// exclude file with it.
fn holds_git_exclude(p: &Path) -> bool {
    p.ends_with(".git/info/exclude") || p.ends_with(".git/info") || p.ends_with(".git")
}

/// A rename seen as one event: files whose content did not change move
/// without being read; anything else is checked.
fn rename(
    store: &Store,
    writer: &mut Writer<'_>,
    filter: &mut Filter,
    from: &Path,
    to: &Path,
    before_walk: &dyn Fn(),
    check: &mut BTreeSet<PathBuf>,
) -> Result<(), StoreError> {
    let Ok(meta) = std::fs::symlink_metadata(to) else {
        check.insert(from.to_path_buf());
        return Ok(());
    };
    // (old path, new path) pairs: the file itself, or every indexed file under a directory.
    let mut pairs = Vec::new();
    if meta.is_dir() {
        // Its files are looked at where they are now: once notify watches
        // them there ([`notify_caught_up`]).
        before_walk();
        // The prefix scan reads the index, not the open group: write what is
        // pending first (an earlier rename in this batch may have moved files
        // here).
        writer.commit()?;
        for item in store.paths_under(&path_bytes(from)) {
            let (old, _) = item?;
            let suffix = &old[path_bytes(from).len()..];
            let mut new = path_bytes(to);
            new.extend_from_slice(suffix);
            pairs.push((crate::scan::bytes_path(&old), crate::scan::bytes_path(&new)));
        }
        // Files in the new place that the index did not have under the old one.
        check.insert(to.to_path_buf());
    } else {
        pairs.push((from.to_path_buf(), to.to_path_buf()));
    }
    for (old, new) in pairs {
        let moved = match (writer.lookup(&old)?, std::fs::symlink_metadata(&new)) {
            (Some((id, rec)), Ok(m)) if m.is_file() && filter.follows(&new, false) => {
                let stat = Stat::of(&m);
                // Same size and inode (rename keeps the inode): the content did not change.
                if stat.size == rec.size && stat.inode == rec.inode && stat.mtime == rec.mtime {
                    writer.rename(id, &rec, &new, stat)?;
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if !moved {
            check.insert(old);
            check.insert(new);
        }
    }
    Ok(())
}

/// Compares one path with the index: queues it for reading when it is new or
/// changed, removes what is gone (a file, or everything under a directory),
/// and walks a directory (unless not `walk`: its files were just looked
/// at). Returns whether the path is a directory.
#[allow(clippy::too_many_arguments)]
fn examine(
    store: &Store,
    writer: &mut Writer<'_>,
    filter: &mut Filter,
    path: &Path,
    (was_removed, was_written, walk): (bool, bool, bool),
    before_walk: &dyn Fn(),
    cands: &mut Vec<Candidate>,
    gone: &mut Vec<(FileId, FileRecord)>,
) -> Result<bool, StoreError> {
    let meta = std::fs::symlink_metadata(path);
    let is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
    let is_file = meta.as_ref().is_ok_and(|m| m.is_file());
    // Under a directory that cannot be searched (a `chmod 000`): not gone,
    // but not to be looked at. What the index holds there stays, as a
    // scan keeps an unreadable directory's files, and it is said, since
    // nothing of it is indexed until it can be.
    if let Some(e) = meta.as_ref().err().filter(|e| e.kind() == std::io::ErrorKind::PermissionDenied) {
        tracing::warn!(
            "{}: {e}: not indexed, and what the index holds there is kept, until it can be looked at",
            crate::show_path(path)
        );
        return Ok(false);
    }
    if meta.is_err() {
        if let Some(found) = writer.lookup(path)? {
            // A file the index held, gone: nothing is indexed under a
            // file's path, so there is no directory to clear (and no
            // commit and prefix scan per deleted file). Removed once the
            // batch's new files are written: it may be one of them, moved
            // with no rename event ([`apply`]).
            gone.push(found);
            return Ok(false);
        }
        // Gone: whatever the index held under this path as a directory is
        // gone too (a directory moved out of the roots raises one event,
        // not one per file), likewise once the new files are written.
        gone.extend(held_under(store, writer, path, None)?);
    }
    // A path on another file system than its root's (`--one-file-system`)
    // is taken as not there: out of the index, and not walked.
    let elsewhere = meta.as_ref().is_ok_and(|m| !filter.on_root_device(path, m));
    // A directory walked below is stripped after the walk of what is not
    // there: not before it as well.
    let walks = is_dir && !elsewhere && walk && filter.follows(path, true);
    if meta.is_ok() && was_removed && (is_dir || writer.lookup(path)?.is_none()) && !walks {
        // Removed and there again: when it was a directory (`rm -rf d &&
        // cp -r new d`, or `echo > d`, within one debounce), the debouncer
        // dropped its files' remove events for its own, so the files the
        // index holds under it that are not there now go here. (Those
        // still there are compared below, as any file of a new directory;
        // none is, on another file system.) A file system mounted or
        // unmounted there comes the same way.
        remove_under(store, writer, path, (!elsewhere).then_some(&HashSet::default()))?;
    }
    let (is_dir, is_file) = (is_dir && !elsewhere, is_file && !elsewhere);
    let old = writer.lookup(path)?;
    if is_file && filter.follows(path, false) {
        let m = meta.expect("is_file implies metadata");
        let mut c = Candidate {
            path: path.to_path_buf(),
            old,
            fetch_old: false,
            unverified: false,
            written: was_written,
            root: None,
        };
        if !c.unchanged(&Stat::of(&m)) {
            c.fetch_old = c.old.as_ref().is_some_and(|(_, rec)| writer.sole_name(&rec.content));
            cands.push(c);
        }
        return Ok(false);
    }
    // Not a regular file any more (gone, a FIFO, a symlink, ignored): out of the index.
    if let Some((id, rec)) = old {
        writer.remove(id, &rec)?;
    }
    if walks {
        before_walk();
        // The regular files the walk finds: what the index holds under the
        // directory besides them is gone ([`remove_under`]).
        let mut seen = HashSet::default();
        let mut stack = vec![path.to_path_buf()];
        while let Some(d) = stack.pop() {
            let entries = match std::fs::read_dir(&d) {
                Ok(entries) => entries,
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(
                            "{}: {e}: its files are not indexed, and what the index holds under it is kept, until \
                             it can be listed (a change to it, or a rescan, looks again)",
                            crate::show_path(&d)
                        );
                    }
                    continue;
                }
            };
            for e in entries.flatten() {
                let p = e.path();
                match e.file_type() {
                    // (With `--one-file-system`, a directory on another
                    // file system is not entered.)
                    Ok(t)
                        if t.is_dir()
                            && filter.follows(&p, true)
                            && (filter.root_devices.is_none()
                                || e.metadata().is_ok_and(|m| filter.on_root_device(&p, &m))) =>
                    {
                        stack.push(p)
                    }
                    Ok(t) if t.is_dir() => {}
                    Ok(t) if t.is_file() => {
                        seen.insert(p.clone());
                        if let (true, Ok(m)) = (filter.follows(&p, false), e.metadata()) {
                            let stat = Stat::of(&m);
                            let old = writer.lookup(&p)?;
                            if !old.as_ref().is_some_and(|(_, rec)| stat.matches(rec)) {
                                let fetch_old = old.as_ref().is_some_and(|(_, rec)| writer.sole_name(&rec.content));
                                cands.push(Candidate {
                                    path: p,
                                    old,
                                    fetch_old,
                                    unverified: false,
                                    written: false,
                                    root: None,
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        remove_under(store, writer, path, Some(&seen))?;
    }
    Ok(is_dir)
}

/// Returns once notify has handled every inotify event it had read when
/// called, and with them the watches they add. notify reads the events
/// waiting in the inotify queue until it runs dry and only then adds the
/// watches of the directories they made or moved in, so while events keep
/// coming (a `cp -r`) a directory moved in can be handed over long before
/// it is watched, and changes in it meanwhile raise no event. A request
/// to notify's thread (here: the list of watched roots) is answered only
/// between two such reads, after those watches are added: a directory
/// walked after this call is watched, and what changes in it after the
/// walk raises events.
fn notify_caught_up<W: notify::Watcher, C: notify_debouncer_full::FileIdCache>(
    debouncer: &notify_debouncer_full::Debouncer<W, C>,
) {
    let _ = debouncer.watched_paths();
}

/// Removes the files the index holds under `dir`: all of them (`keep`
/// None: a directory that is gone, or on another file system now), or
/// those that are neither in `keep` (what a walk of it just found) nor
/// regular files there now (a directory removed and made again, or
/// replaced by a file; one walked because it came, made or moved in,
/// whatever events were lost). notify loses some: a directory moved out
/// and back while its events queue up (a `git checkout` beside a `cp -r`)
/// has its old watches removed as notify reads the move out, and the
/// events already queued on them (files deleted after the move back) are
/// dropped as "unknown descriptor" (session 51). A file that cannot be
/// told to be gone (under a directory that cannot be searched) is kept.
fn remove_under(
    store: &Store,
    writer: &mut Writer<'_>,
    dir: &Path,
    keep: Option<&HashSet<PathBuf>>,
) -> Result<(), StoreError> {
    for (id, rec) in held_under(store, writer, dir, keep)? {
        writer.remove(id, &rec)?;
    }
    Ok(())
}

/// The files [`remove_under`] removes: what the index holds under `dir`,
/// but those in `keep` or regular files there now (when `keep` is given).
fn held_under(
    store: &Store,
    writer: &mut Writer<'_>,
    dir: &Path,
    keep: Option<&HashSet<PathBuf>>,
) -> Result<Vec<(FileId, FileRecord)>, StoreError> {
    // The scan reads the index, not the open group: a rename earlier in
    // the batch may have moved files here.
    writer.commit()?;
    let under: Vec<Vec<u8>> =
        store.paths_under(&path_bytes(dir)).map(|r| r.map(|(p, _)| p)).collect::<Result<_, _>>()?;
    let mut held = Vec::new();
    for p in under {
        let p = crate::scan::bytes_path(&p);
        if let Some(seen) = keep {
            if seen.contains(&p) {
                continue;
            }
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_file() => continue,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) => {}
                Err(_) => continue,
            }
        }
        held.extend(writer.lookup(&p)?);
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk of a directory (one made, or moved in) leaves the index
    /// holding under it what is there: files deleted while no event could
    /// say so (notify drops the events queued on the watches it has just
    /// removed) go, while what is outside the directory is not looked at.
    /// A kernel file system mounted inside a root while the daemon runs
    /// (here a directory a mount table made for the test says is one) is
    /// not walked when its mount point is looked at, nor are its files
    /// followed; a directory beside it is.
    #[test]
    fn a_kernel_file_system_mounted_under_the_daemon_is_not_walked() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let idx = tmp.path().join("idx");
        let store = Store::open(&idx, Access::Write, None).unwrap();
        let opts = IndexOptions { roots: vec![root.clone()], ..Default::default() };
        ingest::index(&store, &opts).unwrap();
        for d in ["proc/1", "docs"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join("status"), "State: running ".repeat(20)).unwrap();
        }
        let mut filter = Filter::new(std::slice::from_ref(&root), &opts, &idx).unwrap();
        let table =
            format!("27 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 27 0:21 / {}/proc rw - proc proc rw\n", root.display());
        filter.set_kernel_dirs(&table);
        assert!(!filter.follows(&root.join("proc/1/status"), false));
        let mut writer = Writer::keeping_paths(&store).unwrap();
        let batch = Batch { check: [root.join("proc"), root.join("docs")].into(), ..Batch::default() };
        apply(&store, &mut writer, &mut filter, batch, 1, &|| {}).unwrap();
        writer.commit().unwrap();
        let held: Vec<String> = store
            .paths_under(&path_bytes(&root))
            .map(|r| String::from_utf8(r.unwrap().0[path_bytes(&root).len()..].to_vec()).unwrap())
            .collect();
        assert_eq!(held, ["/docs/status"]);
    }

    /// Before it walks, the batch waits for notify once.
    #[test]
    fn a_walked_directory_keeps_only_what_is_there_and_waits_for_notify_first() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        for i in 0..5 {
            std::fs::create_dir_all(root.join(format!("d/s{i}"))).unwrap();
            std::fs::write(root.join(format!("d/s{i}/f.txt")), format!("file {i} ").repeat(50)).unwrap();
        }
        std::fs::write(root.join("top.txt"), "top ".repeat(50)).unwrap();
        let root = root.canonicalize().unwrap();
        let idx = tmp.path().join("idx");
        let store = Store::open(&idx, Access::Write, None).unwrap();
        let opts = IndexOptions { roots: vec![root.clone()], ..Default::default() };
        ingest::index(&store, &opts).unwrap();
        std::fs::remove_file(root.join("d/s1/f.txt")).unwrap();
        std::fs::remove_dir_all(root.join("d/s3")).unwrap();
        std::fs::write(root.join("d/s4/f.txt"), "changed ".repeat(50)).unwrap();
        std::fs::remove_file(root.join("top.txt")).unwrap();
        let mut filter = Filter::new(std::slice::from_ref(&root), &opts, &idx).unwrap();
        let mut writer = Writer::keeping_paths(&store).unwrap();
        let waits = std::cell::Cell::new(0);
        let batch = Batch { check: [root.join("d")].into(), ..Batch::default() };
        apply(&store, &mut writer, &mut filter, batch, 1, &|| waits.set(waits.get() + 1)).unwrap();
        writer.commit().unwrap();
        let held: Vec<String> = store
            .paths_under(&path_bytes(&root))
            .map(|r| String::from_utf8(r.unwrap().0[path_bytes(&root).len()..].to_vec()).unwrap())
            .collect();
        assert_eq!(held, ["/d/s0/f.txt", "/d/s2/f.txt", "/d/s4/f.txt", "/top.txt"]);
        let (_, s4) = writer.lookup(&root.join("d/s4/f.txt")).unwrap().unwrap();
        assert_eq!(s4.size, 400, "the changed file is read again");
        assert_eq!(waits.get(), 1);
    }

    #[test]
    fn the_state_file_reads_back_what_was_last_saved_as_it_grows_and_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let read = || DaemonState::saved(dir.path()).unwrap();
        let mut state = DaemonState { pid: 7, ready: true, ..DaemonState::default() };
        state.save(dir.path());
        assert_eq!(read().pid, 7);
        let first_len = std::fs::metadata(state_path(dir.path())).unwrap().len();
        assert_eq!(first_len % STATE_ROOM as u64, 0, "made with room to grow");
        // Grown within its room: written in place, the same length.
        state.changed_files = 123_456_789;
        state.save(dir.path());
        assert_eq!(read().changed_files, 123_456_789);
        assert_eq!(std::fs::metadata(state_path(dir.path())).unwrap().len(), first_len);
        // Grown past it: made anew, longer.
        state.roots = (0..40).map(|i| format!("/srv/a-rather-long-root-name/number-{i}")).collect();
        state.save(dir.path());
        assert_eq!(read().roots.len(), 40);
        let long = std::fs::metadata(state_path(dir.path())).unwrap().len();
        assert!(long > first_len);
        // Shrunk: in place, the rest spaces, no trace of the longer state.
        state.roots = vec!["/srv/one".into()];
        state.missing_roots = vec!["/srv/gone".into()];
        state.save(dir.path());
        let back = read();
        assert_eq!((back.roots, back.missing_roots), (vec!["/srv/one".to_string()], vec!["/srv/gone".to_string()]));
        let text = std::fs::read_to_string(state_path(dir.path())).unwrap();
        assert_eq!(text.len() as u64, long);
        assert!(!text.contains("number-") && text.ends_with(" \n"), "{text:?}");
        assert!(!dir.path().join("daemon.json.tmp").exists());
        // Half written, for good: no state, after a few tries.
        std::fs::write(state_path(dir.path()), &text.as_bytes()[..text.trim_end().len() / 2]).unwrap();
        assert!(DaemonState::saved(dir.path()).is_none());
    }

    proptest::proptest! {
        /// A set of paths made from them sorted by bytes is the set made
        /// by inserting them one by one (paths ordered by components:
        /// `a/x` before `a.md`, and `a//b` the same path as `a/b`).
        #[test]
        fn a_path_set_is_the_set_of_its_paths(
            names in proptest::collection::vec(proptest::collection::vec(
                proptest::sample::select(vec!["a", "a.md", "a-b", "b", "", ".", "é", "a b"]), 1..5), 0..40)
        ) {
            let paths: Vec<PathBuf> = names.iter().map(|n| PathBuf::from(format!("/r/{}", n.join("/")))).collect();
            let mut inserted = BTreeSet::new();
            for p in &paths {
                inserted.insert(p.clone());
            }
            let made = path_set(paths);
            proptest::prop_assert!(made.iter().eq(inserted.iter()));
        }
    }

    /// A path whose events keep coming is due once it has been busy for its
    /// wait, which then doubles up to the cap; one with no event within
    /// `quiet` is forgotten (the debouncer hands it over); renames and
    /// removals are the debouncer's alone.
    #[test]
    fn a_busy_path_is_due_after_its_wait_which_doubles_and_a_quiet_one_is_forgotten() {
        use notify::event::{CreateKind, DataChange, RemoveKind};
        let busy = Busy::default();
        let note = |p: &str, kind| busy.note(&notify::Event::new(kind).add_path(PathBuf::from(p)));
        note("/r/log", EventKind::Modify(ModifyKind::Data(DataChange::Any)));
        note("/r/new", EventKind::Create(CreateKind::File));
        note("/r/gone", EventKind::Remove(RemoveKind::File));
        note("/r/renamed", EventKind::Modify(ModifyKind::Name(RenameMode::From)));
        let quiet = Duration::from_secs(1);
        assert!(!busy.any_due(quiet) && busy.due(quiet).is_empty(), "busy for less than the wait");
        let ago = |d: u64| Instant::now().checked_sub(Duration::from_secs(d)).unwrap();
        {
            let mut m = busy.0.lock().unwrap();
            assert_eq!(m.len(), 2, "a removal and a rename are not noted");
            // Busy for 3 s, the last event just now; and one quiet for 5 s.
            m.get_mut(Path::new("/r/log")).unwrap().first = ago(3);
            let new = m.get_mut(Path::new("/r/new")).unwrap();
            (new.first, new.last) = (ago(9), ago(5));
        }
        assert!(busy.any_due(quiet));
        assert_eq!(busy.due(quiet), BTreeSet::from([PathBuf::from("/r/log")]));
        assert!(!busy.any_due(quiet), "its next wait has begun");
        let wait = |busy: &Busy| busy.0.lock().unwrap()[Path::new("/r/log")].wait;
        assert_eq!(busy.0.lock().unwrap().len(), 1, "the quiet path is forgotten");
        assert_eq!(wait(&busy), 2 * BUSY_MAX_WAIT);
        for _ in 0..8 {
            busy.0.lock().unwrap().get_mut(Path::new("/r/log")).unwrap().first = ago(100);
            note("/r/log", EventKind::Modify(ModifyKind::Data(DataChange::Any)));
            assert_eq!(busy.due(quiet).len(), 1);
        }
        assert_eq!(wait(&busy), BUSY_MAX_WAIT_CAP);

        // One event, under a debounce longer than the wait: not busy.
        let busy = Busy::default();
        note_in(&busy, "/r/once");
        {
            let mut m = busy.0.lock().unwrap();
            let once = m.get_mut(Path::new("/r/once")).unwrap();
            (once.first, once.last) = (ago(3), ago(3));
        }
        assert!(busy.due(Duration::from_secs(10)).is_empty());
    }

    fn note_in(busy: &Busy, p: &str) {
        busy.note(
            &notify::Event::new(EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any))).add_path(p.into()),
        );
    }

    /// An unmount comes from notify as the removal of each directory
    /// watched on that file system: it removes nothing from the index (the
    /// mount table's change, or the root checks, look at what it
    /// uncovered), where a real removal beside it is kept.
    #[test]
    fn an_unmount_is_no_removal() {
        use notify::event::RemoveKind;
        use notify_debouncer_full::DebouncedEvent;
        let now = Instant::now();
        let unmount = |p: &str| {
            DebouncedEvent::new(
                notify::Event::new(EventKind::Remove(RemoveKind::Other)).add_path(PathBuf::from(p)).set_info("unmount"),
                now,
            )
        };
        let removed = DebouncedEvent::new(
            notify::Event::new(EventKind::Remove(RemoveKind::File)).add_path(PathBuf::from("/r/gone.txt")),
            now,
        );
        let b = classify(vec![unmount("/r"), unmount("/r/d"), removed]);
        assert_eq!(b.check, BTreeSet::from([PathBuf::from("/r/gone.txt")]));
        assert_eq!(b.removed, BTreeSet::from([PathBuf::from("/r/gone.txt")]));
        assert!(!b.rescan);
    }

    /// A file's close is handed to the daemon at once and read then; the
    /// debouncer's events for it later are dropped unless an event came
    /// after; a close soon after another, or under a directory removed or
    /// renamed lately, is left to the debouncer; a rename of a file taken
    /// at its close reaches the daemon as its removal.
    #[test]
    fn a_closed_file_is_taken_at_once_and_its_later_events_only_if_it_changed_since() {
        use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, RemoveKind};
        use notify_debouncer_full::DebouncedEvent;
        let early = Early::new(Duration::from_secs(10));
        let (tx, rx) = crossbeam_channel::unbounded::<DebounceEventResult>();
        let event = |p: &str, kind| notify::Event::new(kind).add_path(PathBuf::from(p));
        let close = |p: &str| event(p, EventKind::Access(AccessKind::Close(AccessMode::Write)));
        let data = |p: &str| event(p, EventKind::Modify(ModifyKind::Data(DataChange::Any)));
        let create = |p: &str| event(p, EventKind::Create(CreateKind::File));
        let keep = Duration::from_secs(2);
        // What the daemon makes of what the tap sent and of `msgs` from the
        // debouncer, then of the closes once they are due.
        let sifted = |msgs: Vec<notify::Event>| -> Vec<(EventKind, Vec<PathBuf>)> {
            let now = Instant::now();
            let mut events: Vec<DebouncedEvent> = rx.try_iter().flat_map(|m| m.unwrap()).collect();
            events.extend(msgs.into_iter().map(|e| DebouncedEvent::new(e, now)));
            let mut out = early.sift(events, keep, true);
            let waiting = {
                let mut s = early.lock();
                for (_, at) in &mut s.pending {
                    *at = at.checked_sub(EARLY_DELAY).unwrap();
                }
                for (_, at) in &mut s.renaming {
                    *at = at.checked_sub(RENAME_WAIT).unwrap();
                }
                !s.pending.is_empty() || !s.renaming.is_empty()
            };
            assert_eq!(early.next_due(), waiting.then_some(Duration::ZERO));
            out.extend(early.sift(Vec::new(), keep, true));
            assert_eq!(early.next_due(), None);
            out.into_iter().map(|e| (e.event.kind, e.event.paths)).collect()
        };
        let written = |p: &str| (EventKind::Modify(ModifyKind::Data(DataChange::Any)), vec![PathBuf::from(p)]);

        // Written and closed: the close goes to the daemon, not the debouncer.
        assert!(early.note(&create("/r/a"), &tx) && early.note(&data("/r/a"), &tx));
        assert!(!early.note(&close("/r/a"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/a")]);
        // The debouncer's events for it, a debounce later: nothing new.
        assert_eq!(sifted(vec![create("/r/a"), data("/r/a")]), vec![]);

        // Written again after it was taken: the debouncer's events stand,
        // and its close, so soon after the last, is left to them.
        assert!(early.note(&data("/r/a"), &tx));
        assert!(!early.note(&close("/r/a"), &tx));
        assert_eq!(sifted(vec![]), vec![], "a close soon after the last");
        assert_eq!(sifted(vec![data("/r/a")]), vec![written("/r/a")]);

        // Under a directory removed lately: left to the debouncer, which
        // hands the removal over first.
        assert!(early.note(&event("/r/d", EventKind::Remove(RemoveKind::Folder)), &tx));
        assert!(early.note(&create("/r/d/f"), &tx));
        assert!(!early.note(&close("/r/d/f"), &tx));
        assert_eq!(sifted(vec![]), vec![]);
        assert_eq!(sifted(vec![create("/r/d/f")]), vec![(EventKind::Create(CreateKind::File), vec!["/r/d/f".into()])]);

        // Taken, then renamed out of the roots (no new name comes): the
        // daemon hears of the old name's removal (the debouncer folds a
        // file made and renamed within a debounce into one made under the
        // new name, or into nothing).
        let name = |p: &str, mode| event(p, EventKind::Modify(ModifyKind::Name(mode)));
        assert!(!early.note(&close("/r/b"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/b")]);
        assert!(early.note(&name("/r/b", RenameMode::From), &tx));
        assert_eq!(sifted(vec![]), vec![(EventKind::Remove(RemoveKind::Any), vec!["/r/b".into()])]);
        // Likewise when another event comes before a new name: at once.
        assert!(!early.note(&close("/r/b2"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/b2")]);
        assert!(early.note(&name("/r/b2", RenameMode::From), &tx));
        assert!(early.note(&data("/r/other"), &tx));
        assert_eq!(rx.len(), 1, "the removal is sent before the next event");
        assert_eq!(sifted(vec![]), vec![(EventKind::Remove(RemoveKind::Any), vec!["/r/b2".into()])]);
        // Taken, then renamed within the roots (a temporary file synced and
        // renamed over a document): the daemon hears of the rename, a move.
        assert!(!early.note(&close("/r/.e.tmp"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/.e.tmp")]);
        assert!(early.note(&name("/r/.e.tmp", RenameMode::From), &tx));
        assert!(early.note(&name("/r/e", RenameMode::To), &tx));
        let both = name("/r/.e.tmp", RenameMode::Both).add_path("/r/e".into());
        assert!(early.note(&both, &tx));
        let renamed = (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), vec!["/r/.e.tmp".into(), "/r/e".into()]);
        assert_eq!(sifted(vec![]), vec![renamed]);
        // The debouncer's creation of the new name later is the daemon's
        // to compare with what it moved (unchanged: nothing read).
        assert_eq!(sifted(vec![create("/r/e")]), vec![(EventKind::Create(CreateKind::File), vec!["/r/e".into()])]);
        // Renamed once the debouncer has handed its creation over: the
        // rename, a move, is the debouncer's alone.
        assert!(!early.note(&close("/r/c"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/c")]);
        {
            let mut s = early.lock();
            let t = s.taken.get_mut(Path::new("/r/c")).unwrap();
            *t = t.checked_sub(Duration::from_secs(20)).unwrap();
        }
        assert!(early.note(&event("/r/c", EventKind::Modify(ModifyKind::Name(RenameMode::From))), &tx));
        assert_eq!(sifted(vec![]), vec![]);

        // Closed, then moved into place at once (rsync, editors, `sed -i`):
        // the debouncer's to hand over under the final name.
        assert!(!early.note(&close("/r/.tmp-c"), &tx));
        assert!(early.note(&event("/r/.tmp-c", EventKind::Modify(ModifyKind::Name(RenameMode::From))), &tx));
        assert_eq!(sifted(vec![]), vec![]);

        // A close long after the last one is taken again.
        {
            let mut s = early.lock();
            let t = s.closed.get_mut(Path::new("/r/a")).unwrap();
            *t = t.checked_sub(EARLY_AGAIN).unwrap();
        }
        assert!(!early.note(&close("/r/a"), &tx));
        assert_eq!(sifted(vec![]), vec![written("/r/a")]);
    }

    #[test]
    fn a_batch_looks_at_each_path_under_its_other_names_too() {
        let twins = Twins { from: Default::default(), pairs: vec![("/r/src".into(), "/r/view".into())] };
        let set = |v: &[&str]| v.iter().map(PathBuf::from).collect::<BTreeSet<_>>();
        let mut b = Batch {
            check: set(&["/r/src/a", "/r/src", "/r/other"]),
            written: set(&["/r/src/a"]),
            removed: set(&["/r/view/gone"]),
            renames: vec![("/r/view/x".into(), "/r/view/d/y".into())],
            ..Batch::default()
        };
        b.check.insert("/r/view/gone".into());
        twins.add_to(&mut b);
        let bytes = |s: &BTreeSet<PathBuf>| s.iter().map(|p| p.to_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(
            bytes(&b.check),
            [
                "/r/other",
                "/r/src",
                "/r/src/a",
                "/r/src/d/y",
                "/r/src/gone",
                "/r/src/x",
                "/r/view",
                "/r/view/a",
                "/r/view/gone"
            ]
        );
        // The directory's own other name has no trailing `/`.
        assert!(b.check.iter().any(|p| p.as_os_str() == "/r/view"));
        assert_eq!(bytes(&b.written), ["/r/src/a", "/r/view/a"]);
        assert_eq!(bytes(&b.removed), ["/r/src/gone", "/r/view/gone"]);
        // No pairs: nothing added.
        let mut c = Batch { check: set(&["/r/src/a"]), ..Batch::default() };
        Twins::default().add_to(&mut c);
        assert_eq!(bytes(&c.check), ["/r/src/a"]);
    }

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 27 0:45 / /srv/share rw,relatime - nfs4 fs:/export rw,vers=4.2
41 40 8:2 / /srv/share/local rw,relatime - ext4 /dev/sdb1 rw
42 27 0:46 / /home/a/my\\040drive rw - fuse.rclone remote: rw
43 27 0:47 / /mnt/usb rw - fuseblk /dev/sdc1 rw
44 27 0:48 / /mnt/stack rw - cifs //h/s rw
45 27 0:49 / /mnt/stack rw - ext4 /dev/sdd1 rw
";

    #[test]
    fn the_deepest_mount_above_a_root_decides_whether_it_is_remote() {
        let remote = |p: &str| remote_fs(MOUNTINFO, Path::new(p));
        assert_eq!(remote("/srv/share/docs").as_deref(), Some("nfs4"));
        assert_eq!(remote("/srv/share"), Some("nfs4".into()));
        // A local disk mounted inside the share, and a name that only
        // starts like the share.
        assert_eq!(remote("/srv/share/local/x"), None);
        assert_eq!(remote("/srv/shared"), None);
        assert_eq!(remote("/home/a/my drive/notes").as_deref(), Some("fuse.rclone"));
        // ntfs-3g and the like are local disks through FUSE.
        assert_eq!(remote("/mnt/usb/docs"), None);
        // Mounted over the share: the later mount holds the path.
        assert_eq!(remote("/mnt/stack/a"), None);
        assert_eq!(remote("/var/docs"), None);
        assert_eq!(remote_fs("", Path::new("/srv/share")), None);
    }

    #[test]
    fn the_mounts_inside_a_root_and_the_remote_ones_among_them_are_found() {
        let inside = |r: &str| mounts_inside(MOUNTINFO, Path::new(r));
        assert_eq!(inside("/srv"), [(40, PathBuf::from("/srv/share")), (41, PathBuf::from("/srv/share/local"))]);
        // Strictly inside: a root's own mount is not one.
        assert_eq!(inside("/srv/share"), [(41, PathBuf::from("/srv/share/local"))]);
        assert_eq!(inside("/mnt"), [(43, "/mnt/usb".into()), (44, "/mnt/stack".into()), (45, "/mnt/stack".into())]);
        assert_eq!(inside("/srv/shared"), []);
        let remote =
            |roots: &[&str], x: bool| remote_mounts(MOUNTINFO, &roots.iter().map(PathBuf::from).collect::<Vec<_>>(), x);
        // A root on a share is listed, not the local disk inside it.
        assert_eq!(remote(&["/srv/share"], false), ["/srv/share (nfs4)"]);
        // A share inside a root is listed, unless `-x` leaves it out; a
        // share mounted over by a local disk is not.
        assert_eq!(remote(&["/srv", "/home", "/mnt"], false), ["/srv/share (nfs4)", "/home/a/my drive (fuse.rclone)"]);
        assert_eq!(remote(&["/srv", "/home", "/mnt"], true), Vec::<String>::new());
    }

    #[test]
    fn mount_changes_are_described() {
        let m = |id: u64, p: &str| (id, PathBuf::from(p));
        assert_eq!(mount_changes(&[m(1, "/r/a")], &[m(1, "/r/a"), m(2, "/r/b")]), "mounted at /r/b");
        assert_eq!(mount_changes(&[m(1, "/r/a"), m(2, "/r/b")], &[m(2, "/r/b")]), "unmounted from /r/a");
        // Another file system at the same point: both said.
        assert_eq!(mount_changes(&[m(1, "/r/a")], &[m(3, "/r/a")]), "mounted at /r/a; unmounted from /r/a");
    }
}
