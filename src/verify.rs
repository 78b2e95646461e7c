//! Byte-for-byte verification of identical sets (`simd report --verify`).
//!
//! A set is identical by its content hash, MD5 over its chunks' MD5s. Two
//! things can make a name of a set not a copy of the others when the
//! report is read: the file changed since the index last saw it (no daemon
//! runs, or its event is not handled yet), or two different contents share
//! an MD5 (collisions can be made on purpose). Before copies are deleted on
//! the strength of a report, `--verify` reads every name of each set shown
//! and compares the bytes, as jdupes does by default.
//!
//! Each name gets a [`Verdict`]: the same bytes as the set's reference,
//! changed since the index recorded it (its size, mtime or inode is not the
//! record's: the index is behind, and its bytes are not compared), gone (it
//! could not be opened or read), or other bytes despite a stat as indexed
//! (a write that kept the file's mtime, or an MD5 collision). The reference
//! is the set's first name found as indexed. Names that all agree with it
//! are copies of each other. Where one disagrees, the reference is hashed
//! again as the indexer hashes it, and must give the set's content; if
//! not, it is the odd one, and the names compared with it are compared
//! with the next. So a set whose first name is the odd one out is not
//! reported the other way round, and each byte is read once when no name
//! disagrees. The files are opened as the indexer opens them
//! (never following a symlink, never blocking on a FIFO, leaving the access
//! time alone), only read, and the index is only read.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::analysis::{IdenticalSet, Name};
use crate::fingerprint::{fingerprint_file, ContentHash, Lookup, WholeFrom};
use crate::ingest;
use crate::scan::Stat;
use crate::store::{FileId, Files, Store};

/// What reading a name of an identical set found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The same bytes as the set's reference, or the reference itself.
    Same,
    /// Its stat is not the one the index recorded, or it is no longer a
    /// regular file, or it changed while it was read: the index is behind.
    Changed,
    /// It is not there any more.
    Gone,
    /// It could not be opened or read: why.
    Unreadable(String),
    /// As indexed by its stat, yet other bytes than the set's content
    /// (the reference's, or for a would-be reference, other than those
    /// the index hashed).
    Differs,
}

impl Verdict {
    /// The verdict's name in JSON and CSV.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Changed => "changed",
            Verdict::Gone => "gone",
            Verdict::Unreadable(_) => "unreadable",
            Verdict::Differs => "differs",
        }
    }

    /// What a text or HTML report says after such a name (empty for one
    /// that is a copy).
    pub fn note(&self) -> String {
        match self {
            Verdict::Same => String::new(),
            Verdict::Changed => "  [changed since indexed: not compared]".to_string(),
            Verdict::Gone => "  [gone since indexed]".to_string(),
            Verdict::Unreadable(e) => format!("  [unreadable: {e}]"),
            Verdict::Differs => {
                "  [other bytes than the set's, with the size and mtime the index recorded]".to_string()
            }
        }
    }
}

/// An identical set's verdicts, one per name in the set's order.
#[derive(Clone, Debug, Default)]
pub struct SetCheck {
    pub verdicts: Vec<Verdict>,
    /// The names' file ids, in the same order: a cluster lists the same
    /// names for its member of this content, and finds their verdicts by
    /// them ([`SetCheck::verdict_of`]).
    ids: Vec<FileId>,
}

impl SetCheck {
    /// The verdict of the name with file id `id`, the `k`th of a list of
    /// the content's names (a cluster member's: in the set's order, as both
    /// come from the same names, else looked for).
    pub fn verdict_of(&self, k: usize, id: FileId) -> Option<&Verdict> {
        let k = match self.ids.get(k) {
            Some(&at) if at == id => k,
            _ => self.ids.iter().position(|&at| at == id)?,
        };
        self.verdicts.get(k)
    }

    /// Whether every name holds the set's bytes.
    pub fn all_same(&self) -> bool {
        self.verdicts.iter().all(|v| *v == Verdict::Same)
    }

    fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for v in &self.verdicts {
            match v {
                Verdict::Same => {}
                Verdict::Changed => t.changed += 1,
                Verdict::Gone => t.gone += 1,
                Verdict::Unreadable(_) => t.unreadable += 1,
                Verdict::Differs => t.differs += 1,
            }
        }
        t
    }
}

/// How many names got each verdict other than `Same`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub changed: usize,
    pub gone: usize,
    pub unreadable: usize,
    pub differs: usize,
}

impl Tally {
    /// Names that are not copies now.
    pub fn not_copies(&self) -> usize {
        self.changed + self.gone + self.unreadable + self.differs
    }
}

/// What `--verify` found for the sets a report shows.
#[derive(Clone, Debug, Default)]
pub struct Verification {
    sets: HashMap<ContentHash, SetCheck>,
    /// Bytes read, files read (each file once, whatever its hard links).
    pub bytes_read: u64,
    pub files_read: u64,
    pub elapsed: Duration,
}

impl Verification {
    /// The verdicts of `set`, when it was verified.
    pub fn of(&self, set: &IdenticalSet) -> Option<&SetCheck> {
        self.of_content(&set.content)
    }

    /// The verdicts of the names of `content`, when its set was verified
    /// (a cluster member with copies).
    pub fn of_content(&self, content: &ContentHash) -> Option<&SetCheck> {
        self.sets.get(content)
    }

    /// Sets verified.
    pub fn sets(&self) -> usize {
        self.sets.len()
    }

    /// How many names of the sets verified got each verdict.
    pub fn tally(&self) -> Tally {
        self.sets.values().map(SetCheck::tally).fold(Tally::default(), |a, t| Tally {
            changed: a.changed + t.changed,
            gone: a.gone + t.gone,
            unreadable: a.unreadable + t.unreadable,
            differs: a.differs + t.differs,
        })
    }
}

/// Bytes read from each file at a time.
const BLOCK: usize = 128 << 10;

/// Files held open beside a set's reference while they are compared with
/// it: a set of thousands of copies is compared a batch at a time, within
/// the usual limit of 1,024 open files.
const BATCH: usize = 64;

/// Verifies `sets` on `threads` threads, each set by one thread; `on_bytes`
/// hears of the bytes read as they are (a progress bar).
pub fn verify_sets(
    store: &Store,
    sets: &[&IdenticalSet],
    threads: usize,
    on_bytes: &(dyn Fn(u64) + Sync),
) -> Verification {
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let (bytes, files) = (AtomicU64::new(0), AtomicU64::new(0));
    let found = Mutex::new(HashMap::with_capacity(sets.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, sets.len().max(1)) {
            scope.spawn(|| {
                let mut reader = Reader::new(on_bytes);
                while let Some(set) = sets.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let check = reader.check(store, set);
                    found.lock().unwrap_or_else(|e| e.into_inner()).insert(set.content, check);
                }
                bytes.fetch_add(reader.bytes, Ordering::Relaxed);
                files.fetch_add(reader.files, Ordering::Relaxed);
            });
        }
    });
    Verification {
        sets: found.into_inner().unwrap_or_else(|e| e.into_inner()),
        bytes_read: bytes.into_inner(),
        files_read: files.into_inner(),
        elapsed: start.elapsed(),
    }
}

/// A name opened as the index recorded it.
struct Opened {
    /// The name's place in its set.
    k: usize,
    file: File,
    stat: Stat,
    /// Its ctime when opened: with `stat`, what tells whether it changed
    /// while read.
    ctime: (i64, i64),
}

impl Opened {
    /// The file the name is, by (device, inode): hard links share it.
    fn file_id(&self) -> (u64, u64) {
        (self.stat.dev, self.stat.inode)
    }
}

/// Claims `file` for the name `k`, the first of it met: true. A later
/// name of the same file (a hard link) is noted in `links` to take that
/// name's verdict: false.
fn claim(
    files: &mut HashMap<(u64, u64), usize>,
    links: &mut Vec<(usize, (u64, u64))>,
    k: usize,
    file: (u64, u64),
) -> bool {
    match files.entry(file) {
        Entry::Occupied(_) => {
            links.push((k, file));
            false
        }
        Entry::Vacant(e) => {
            e.insert(k);
            true
        }
    }
}

/// One thread's buffers and counts.
struct Reader<'a> {
    /// The fingerprinter's buffer, for the references.
    hashing: Vec<u8>,
    ours: Vec<u8>,
    theirs: Vec<u8>,
    bytes: u64,
    files: u64,
    on_bytes: &'a (dyn Fn(u64) + Sync),
}

impl<'a> Reader<'a> {
    fn new(on_bytes: &'a (dyn Fn(u64) + Sync)) -> Reader<'a> {
        Reader { hashing: Vec::new(), ours: vec![0; BLOCK], theirs: vec![0; BLOCK], bytes: 0, files: 0, on_bytes }
    }

    /// The verdict of each name of `set`, compared with the first of them
    /// that opens as indexed (and, when some name disagrees with it, hashes
    /// to the set's content).
    fn check(&mut self, store: &Store, set: &IdenticalSet) -> SetCheck {
        let names = &set.names;
        let mut verdicts: Vec<Option<Verdict>> = vec![None; names.len()];
        // The name each file is compared as, by (device, inode): its other
        // names (hard links) get that name's verdict, without a read.
        let mut files: HashMap<(u64, u64), usize> = HashMap::new();
        let mut links: Vec<(usize, (u64, u64))> = Vec::new();
        let mut undecided: VecDeque<usize> = (0..names.len()).collect();
        while let Some(k) = undecided.pop_front() {
            let reference = match open_as_indexed(store, &names[k], k) {
                Ok(o) => o,
                Err(v) => {
                    verdicts[k] = Some(v);
                    continue;
                }
            };
            if !claim(&mut files, &mut links, k, reference.file_id()) {
                continue;
            }
            // The others, a batch at a time. Names that all agree are
            // copies of each other; where one disagrees, the reference's
            // bytes must hash to the set's content, or it is the odd one.
            let mut compared: Vec<(usize, (u64, u64))> = Vec::new();
            let mut hashed = false;
            self.files += 1;
            let failed = loop {
                if undecided.is_empty() {
                    // Agreed with by no other name (each gone or changed):
                    // hashed, so that it is said to hold the set's bytes
                    // only if it does.
                    let alone = !compared.iter().any(|&(j, _)| verdicts[j] == Some(Verdict::Same));
                    if alone && !hashed {
                        if let Err(v) = self.holds(store, &reference, &set.content) {
                            break Some(v);
                        }
                    }
                    break None;
                }
                let mut batch = Vec::with_capacity(BATCH);
                while batch.len() < BATCH {
                    let Some(j) = undecided.pop_front() else { break };
                    match open_as_indexed(store, &names[j], j) {
                        Ok(o) => {
                            if claim(&mut files, &mut links, j, o.file_id()) {
                                batch.push(o);
                            }
                        }
                        Err(v) => verdicts[j] = Some(v),
                    }
                }
                if batch.is_empty() {
                    continue;
                }
                compared.extend(batch.iter().map(|o| (o.k, o.file_id())));
                if let Err(v) = self.compare(&reference, &mut batch, &mut verdicts) {
                    break Some(v);
                }
                let disagree = compared.iter().any(|&(j, _)| verdicts[j] == Some(Verdict::Differs));
                if disagree && !hashed {
                    if let Err(v) = self.holds(store, &reference, &set.content) {
                        break Some(v);
                    }
                    hashed = true;
                }
            };
            verdicts[k] = Some(failed.clone().unwrap_or(Verdict::Same));
            if failed.is_some() {
                // The reference changed or went while read, or is the odd
                // one: what was compared with it is compared with the next.
                for (j, file) in compared.into_iter().rev() {
                    if matches!(verdicts[j], None | Some(Verdict::Same) | Some(Verdict::Differs)) {
                        verdicts[j] = None;
                        files.remove(&file);
                        undecided.push_front(j);
                    }
                }
            }
        }
        for (j, file) in links {
            verdicts[j] = files.get(&file).and_then(|&f| verdicts[f].clone());
        }
        SetCheck {
            verdicts: verdicts.into_iter().map(|v| v.unwrap_or(Verdict::Changed)).collect(),
            ids: names.iter().map(|n| n.id).collect(),
        }
    }

    /// Whether `o`'s bytes hash to `content` as the indexer hashes them:
    /// Err with its verdict when they do not.
    fn holds(&mut self, store: &Store, o: &Opened, content: &ContentHash) -> Result<(), Verdict> {
        // No chunk list is kept (`WholeFrom(0)`), and a content that fits
        // in the buffer is not sketched (the index "holds" every content).
        let lookup = Lookup { known: &|_| true, prior: &|_| None };
        let mut file = &o.file;
        file.seek(SeekFrom::Start(0)).map_err(gone)?;
        let fp = fingerprint_file(file, o.stat.size, None, store.params(), WholeFrom(0), &mut self.hashing, lookup)
            .map_err(gone)?;
        self.count(fp.size);
        match fp.content == *content && fp.size == o.stat.size {
            true => Ok(()),
            false if still(o) => Err(Verdict::Differs),
            false => Err(Verdict::Changed),
        }
    }

    /// Reads `reference` and each of `batch` in step, deciding the batch's
    /// verdicts; Err with the reference's own verdict when it could not be
    /// read whole as indexed.
    fn compare(
        &mut self,
        reference: &Opened,
        batch: &mut Vec<Opened>,
        verdicts: &mut [Option<Verdict>],
    ) -> Result<(), Verdict> {
        let size = reference.stat.size;
        let mut live: Vec<&Opened> = batch.iter().collect();
        let mut at = 0u64;
        // One byte past the end too: a file grown while read is changed
        // (its stat, read again after, says so too, but for a write
        // within the clock tick of its last on a coarse clock).
        while at <= size {
            let len = usize::try_from((size - at).min(BLOCK as u64)).expect("a block fits in memory");
            let want = if len < BLOCK { len + 1 } else { len };
            let got = read_full_at(&reference.file, &mut self.ours[..want], at).map_err(gone)?;
            self.count(got as u64);
            if got != len {
                return Err(Verdict::Changed);
            }
            live.retain(|o| match read_full_at(&o.file, &mut self.theirs[..want], at) {
                Ok(n) => {
                    self.bytes += n as u64;
                    (self.on_bytes)(n as u64);
                    let verdict = if n != len {
                        Some(Verdict::Changed)
                    } else if self.theirs[..n] != self.ours[..n] {
                        Some(Verdict::Differs)
                    } else {
                        None
                    };
                    verdicts[o.k] = verdict.clone();
                    verdict.is_none()
                }
                Err(e) => {
                    verdicts[o.k] = Some(gone(e));
                    false
                }
            });
            if len < BLOCK {
                break;
            }
            at += len as u64;
        }
        // Each file read whole: the same unless it changed meanwhile.
        self.files += batch.len() as u64;
        if !still(reference) {
            return Err(Verdict::Changed);
        }
        for o in live {
            verdicts[o.k] = Some(if still(o) { Verdict::Same } else { Verdict::Changed });
        }
        batch.clear();
        Ok(())
    }

    fn count(&mut self, n: u64) {
        self.bytes += n;
        (self.on_bytes)(n);
    }
}

/// Whether an opened file is still the version it was when opened, by
/// the indexer's rule for a read (`ingest::settle`): the same stat and the
/// same ctime, which a write that set the mtime back still moves.
fn still(o: &Opened) -> bool {
    o.file.metadata().is_ok_and(|now| Stat::of(&now) == o.stat && ingest::ctime(&now) == o.ctime)
}

/// What a failed open or read says of a name.
fn gone(e: std::io::Error) -> Verdict {
    match e.kind() {
        std::io::ErrorKind::NotFound => Verdict::Gone,
        _ => Verdict::Unreadable(e.to_string()),
    }
}

/// Reads into `buf` from `at` until it is full or the file ends; the bytes
/// read.
fn read_full_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(m) => n += m,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Opens `name` and checks it is the regular file the index recorded
/// (size, mtime, inode), or says what it is instead.
fn open_as_indexed(store: &Store, name: &Name, k: usize) -> Result<Opened, Verdict> {
    let path = Path::new(OsStr::from_bytes(&name.path));
    let file = crate::ingest::open_regular(path, None).map_err(|e| match e.raw_os_error() {
        // ELOOP: a symlink now; ENXIO: a socket. Neither is the file indexed.
        Some(libc::ELOOP) | Some(libc::ENXIO) => Verdict::Changed,
        _ => gone(e),
    })?;
    let meta = file.metadata().map_err(gone)?;
    let stat = Stat::of(&meta);
    let record = store.get::<Files>(&name.id).map_err(|e| Verdict::Unreadable(e.to_string()))?;
    match record {
        Some(rec) if meta.is_file() && rec.path[..] == name.path[..] && stat.matches(&rec) => {
            Ok(Opened { k, file, stat, ctime: ingest::ctime(&meta) })
        }
        _ => Err(Verdict::Changed),
    }
}
