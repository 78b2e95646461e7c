//! The analysis cache: the last analysis, kept beside the index with what
//! it started from, so that the next report redoes only what changed.
//!
//! - Nothing changed (RocksDB's sequence number, the thresholds and the
//!   simd binary are those it was made with): the cached analysis is the
//!   answer.
//! - Contents came or went: the analysis is brought up to date. Links
//!   depend only on the two contents' features and on which chunks and
//!   posted samples are too common to count, so only the links of the new
//!   contents, and of the contents holding a chunk or sample whose "too
//!   common" status flipped, are found again (from the postings, as
//!   `similar` does); every other link is kept, and clusters and names are
//!   rebuilt from the links. The names are the cached ones but for the
//!   contents whose file ids changed or one of whose file records was
//!   written since, as the write-ahead log tells (when it still holds
//!   every write since: else every file record is read). The live
//!   contents and the ids of their names are the cached ones too, read
//!   again only for the contents that gained or lost a name since (the
//!   log's `content_names` keys), and checked against the index's counts.
//!   The result equals a fresh analysis, report for report (a test holds
//!   it to that).
//! - Otherwise (other templates, another cutoff, more than a thirty-second
//!   of the contents to redo, a content record missing): a fresh analysis.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{
    analyse, assemble, auto_cutoff, features, link, live_contents, sample_cap, samples_needed, templates,
    templates_digest, Analysis, AnalysisParams, Basis, ContentLink, Features, FileTable, Frame, Ignored, MemberInfo,
    Namer, Names, Patch, Pending, Places, Totals,
};
use crate::fingerprint::{ChunkKey, ContentHash};
use crate::store::{ContentId, FileId, Store, StoreError};

// 2: names carry their file id. 3: links carry word measures.
// 4: word measures say how many samples they rest on. 5: word links need
// trusted estimates. 6: the basis of an update is kept with the analysis.
// 7: a header (sequence, thresholds) and the basis's length come first.
// 8: over-common chunks by their 8-byte keys. 9: names say which file they
// are (hard links of one file are one copy). 10: the basis's contents
// as one byte string, its links by place. 11: the header names the
// database (its creation time), and the basis holds each content's size.
// 12: the basis holds each content's names (ids) and content id.
// 13: a trailer holds a checksum of the basis and of the analysis.
// 14: the analysis held its identical directories; 15: no longer (they
// are found beside each report, session 71). 16: it lists the contents
// whose names are all one file, for identical directories.
// (Bump it whenever what an analysis finds changes: a cache made by an
// older binary would otherwise be served.)
const VERSION: u8 = 16;

/// Where an analysis came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// The cache, unchanged: nothing changed in the index.
    Cached,
    /// The cached analysis brought up to date: the links of `relinked`
    /// contents were found again, and the names of `renamed` read again
    /// from their records (None: every file record was read).
    Updated { relinked: usize, renamed: Option<usize> },
    /// A fresh analysis of the whole index.
    Computed,
}

/// The cache file: the version byte, the maker, the sequence number,
/// thresholds and database the analysis was made at, the basis's length
/// (u64 LE), then the basis and the analysis, each postcard-encoded, and
/// last the XXH3 checksums of the two (u64 LE each). A repeated report
/// decodes only the analysis, an update the basis (and the analysis too,
/// for its names).
struct Cached {
    sequence: u64,
    /// The database's creation time ([`crate::store::Format::created`]):
    /// an index built again in the same directory starts its sequence
    /// numbers again.
    created: i64,
    /// The cache file, kept open: a report that caches its analysis
    /// meanwhile renames its file over this one's name, and this one
    /// stays readable.
    file: std::fs::File,
    /// Where the basis and the analysis lie in `file`, with the checksum
    /// of each.
    basis: (std::ops::Range<u64>, u64),
    analysis: (std::ops::Range<u64>, u64),
}

impl Cached {
    fn analysis(&self) -> Option<Analysis> {
        self.decode(self.analysis.clone())
    }

    fn basis(&self) -> Option<Basis> {
        self.decode(self.basis.clone())
    }

    /// Reads the bytes of `range` alone and decodes them, if they are
    /// those written (`sum`). The whole file was read, and held while the
    /// analysis was decoded from it: a repeated report of a 400k-file tree
    /// read 162 MB, of which its analysis is 85 (`docs/performance.md`,
    /// session 67). A byte changed on the disk decoded to another
    /// analysis as often as not, served as the index's (session 68).
    fn decode<T: serde::de::DeserializeOwned>(&self, (range, sum): (std::ops::Range<u64>, u64)) -> Option<T> {
        use std::os::unix::fs::FileExt;
        let mut bytes = vec![0; usize::try_from(range.end.checked_sub(range.start)?).ok()?];
        self.file.read_exact_at(&mut bytes, range.start).ok()?;
        if xxhash_rust::xxh3::xxh3_64(&bytes) != sum {
            tracing::debug!("analysis cache: bytes {range:?} are not those written; not used");
            return None;
        }
        postcard::from_bytes(&bytes).ok()
    }
}

/// The most a cache file's header can take (its version, maker, sequence
/// number, thresholds, database and the basis's length: ~60 bytes).
const HEADER_MAX: u64 = 4096;

fn path(dir: &Path) -> PathBuf {
    dir.join("analysis.cache")
}

/// Bytes the cache takes on disk, the identical directories kept beside
/// it included (0 when there is none).
pub fn size(store: &Store) -> u64 {
    let kept = super::dirs::kept_path(store.dir());
    [path(store.dir()), kept].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum()
}

/// The program that made a cache: its size and modification time. A
/// rebuilt or upgraded simd, whose link rules may differ, never serves
/// an analysis another one made (a bumped [`VERSION`] is easy to forget).
pub(crate) fn maker() -> [u8; 16] {
    let Ok(m) = std::env::current_exe().and_then(std::fs::metadata) else { return [0; 16] };
    let mtime = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&m.len().to_be_bytes());
    id[8..].copy_from_slice(&mtime.map_or(0, |d| d.as_nanos() as u64).to_be_bytes());
    id
}

fn load(store: &Store, params: &AnalysisParams) -> Option<Cached> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path(store.dir())).ok()?;
    let size = file.metadata().ok()?.len();
    let mut head = vec![0; usize::try_from(size.min(HEADER_MAX)).ok()?];
    file.read_exact_at(&mut head, 0).ok()?;
    let (&v, rest) = head.split_first()?;
    if v != VERSION || rest.len() < 16 || rest[..16] != maker() {
        return None;
    }
    let ((sequence, made_with, created), rest): ((u64, AnalysisParams, i64), _) =
        postcard::take_from_bytes(&rest[16..]).ok()?;
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let start = (head.len() - rest.len() + 8) as u64;
    let end = size.checked_sub(TRAILER)?;
    let basis = start..start.checked_add(len).filter(|&e| e <= end)?;
    let analysis = basis.end..end;
    let mut trailer = [0u8; TRAILER as usize];
    file.read_exact_at(&mut trailer, end).ok()?;
    let sum = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().expect("8 bytes"));
    let (basis, analysis) = ((basis, sum(0)), (analysis, sum(8)));
    (made_with == *params).then_some(Cached { sequence, created, file, basis, analysis })
}

/// The checksums after the analysis.
const TRAILER: u64 = 16;

/// A writer that hashes what goes through it: the cache's checksums, made
/// as it is written.
struct Summing<W> {
    inner: W,
    sum: xxhash_rust::xxh3::Xxh3,
}

impl<W: std::io::Write> Summing<W> {
    fn new(inner: W) -> Self {
        Summing { inner, sum: xxhash_rust::xxh3::Xxh3::new() }
    }

    /// The writer back, and the checksum of what went through.
    fn finish(self) -> (W, u64) {
        (self.inner, self.sum.digest())
    }
}

impl<W: std::io::Write> std::io::Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sum.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `target` anew through `write`, which makes a file of the path
/// it is given beside it: renamed over `target` once whole, and removed
/// when anything fails, so that a cache half written (a full disk) is
/// never left behind, nor renamed in.
pub(crate) fn replace(target: &Path, write: impl FnOnce(&Path) -> std::io::Result<()>) -> std::io::Result<()> {
    let tmp = target.with_extension(format!("tmp.{}", std::process::id()));
    match write(&tmp).and_then(|()| std::fs::rename(&tmp, target)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn save(store: &Store, analysis: &Analysis, basis: &Basis) -> std::io::Result<()> {
    use std::io::Write;
    // Streamed to the file: the encoded cache is ~13 MB on a 66k-file tree,
    // and a report renders its output at the same time.
    replace(&path(store.dir()), |tmp| {
        // In 1 MiB writes: 8 KiB ones were ~1,600 system calls for a
        // 66k-file tree's cache, on the path of a report waited for.
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(tmp)?);
        out.write_all(&[VERSION])?;
        out.write_all(&maker())?;
        let header = (basis.sequence, basis.params, store.format().created);
        let mut out = postcard::to_io(&header, out).map_err(std::io::Error::other)?;
        // The basis's length first, so that a load can find the analysis
        // after it: counted by a first pass that writes nothing, where
        // encoding it into a buffer first held it twice over (~44 MB at
        // the peak of a fresh report of 341k contents, `heaptrack`).
        let len = postcard::experimental::serialized_size(basis).map_err(std::io::Error::other)?;
        out.write_all(&(len as u64).to_le_bytes())?;
        let (out, basis_sum) = summed(out, basis)?;
        let (mut out, analysis_sum) = summed(out, analysis)?;
        out.write_all(&basis_sum.to_le_bytes())?;
        out.write_all(&analysis_sum.to_le_bytes())?;
        out.flush()
    })
}

/// Writes `value` to `out`, and returns `out` with the checksum of the
/// bytes written. Summed in 64 KiB pieces: postcard writes a field at a
/// time, and an XXH3 update per field (a few bytes) took most of the
/// cache's writing, which a report brought up to date waits for before
/// it exits (session 78).
fn summed<W: std::io::Write>(out: W, value: &impl serde::Serialize) -> std::io::Result<(W, u64)> {
    let buffered = std::io::BufWriter::with_capacity(64 << 10, Summing::new(out));
    let buffered = postcard::to_io(value, buffered).map_err(std::io::Error::other)?;
    Ok(buffered.into_inner().map_err(std::io::IntoInnerError::into_error)?.finish())
}

/// Hands `use_it` the analysis of the index as it is now: from the cache
/// when nothing changed since it was made, brought up to date when little
/// did, else computed (`fresh` always computes it). A new analysis is
/// cached on another thread while `use_it` runs (it writes ~13 MB on a
/// 66k-file tree, and a report is waited for).
pub fn with_analysis<R>(
    store: &Store,
    params: &AnalysisParams,
    threads: usize,
    fresh: bool,
    use_it: impl FnOnce(&Analysis, Provenance) -> R,
) -> Result<R, StoreError> {
    let started = std::time::Instant::now();
    let prev = if fresh { None } else { load(store, params) };
    tracing::debug!("cache read after {:?}", started.elapsed());
    // The cache as it is, or brought up to date; else a fresh analysis.
    let prev = match prev {
        Some(c) if c.sequence == store.sequence() => match c.analysis() {
            Some(a) => {
                // The cache file is closed before the report is made.
                drop(c);
                let r = use_it(&a, Provenance::Cached);
                free_aside(a);
                return Ok(r);
            }
            None => None,
        },
        other => other,
    };
    // The file records written since the cache was made, from the
    // write-ahead log: the cached names are kept but for those.
    let changed = prev
        .as_ref()
        .filter(|c| c.created == store.format().created)
        .and_then(|c| store.keys_written_since(c.sequence));
    let (analysis, basis, provenance) = std::thread::scope(|s| -> Result<_, StoreError> {
        // The names come from the cached analysis, decoded on the other
        // core while the links are brought up to date (both take ~40 ms
        // on a 66.5k-file tree), else from a scan of every file record,
        // there from the start.
        let table = || {
            Pending::new(s.spawn(|| {
                let t = FileTable::load(store);
                tracing::debug!("file table loaded after {:?}", started.elapsed());
                t
            }))
        };
        let prev = prev.as_ref();
        let (changed, named) = match changed {
            Some(w) => (Some(w.keys), Some(w.named)),
            None => (None, None),
        };
        let mut names = match (prev, changed) {
            (Some(c), Some(changed)) => {
                tracing::debug!("{} keys written since the cache", changed.len());
                Source::Patch(Pending::new(s.spawn(move || c.analysis().map(|a| Patch::new(store, a, changed)))))
            }
            _ => Source::Table(table()),
        };
        if let Some(b) = prev.and_then(Cached::basis) {
            if let Some(updated) = update(store, params, threads, b, named.as_ref(), &mut names)? {
                return Ok(updated);
            }
        }
        let mut files = match names {
            Source::Table(files) => files,
            Source::Patch(_) => table(),
        };
        let (a, b) = analyse(store, params, threads, &mut files)?;
        Ok((a, b, Provenance::Computed))
    })?;
    // Nor while the new analysis is written and used.
    drop(prev);
    tracing::debug!("analysis after {:?}", started.elapsed());
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            // The cache is an optimisation: an index directory we cannot
            // write (a read-only mount, another user's index) still gets
            // its report.
            if let Err(e) = save(store, &analysis, &basis) {
                tracing::debug!("{}: analysis not cached: {e}", crate::show_path(store.dir()));
            }
            tracing::debug!("cache written after {:?}", started.elapsed());
        });
        let r = use_it(&analysis, provenance);
        tracing::debug!("used after {:?}", started.elapsed());
        r
    });
    free_aside((analysis, basis));
    Ok(r)
}

/// Frees `value` on a thread of its own. Freeing a large tree's analysis
/// (a name per file, a link per pair) came after a report's output and
/// before its exit; a command that exits next need not wait for it (a
/// cached report of a 66k-file tree 83 → 74 ms; one brought up to date
/// ~7 ms faster in most of five paired runs: `docs/performance.md`).
/// Where no thread can be made, the closure, and the value with it, is
/// freed here.
pub(crate) fn free_aside<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new().spawn(move || drop(value));
}

/// Contents in `now` and not in `before`, and the reverse (both sorted).
fn diff(before: &[ContentHash], now: &[ContentHash]) -> (Vec<ContentHash>, Vec<ContentHash>) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < now.len() {
        match (before.get(i), now.get(j)) {
            (Some(b), Some(n)) if b == n => {
                i += 1;
                j += 1;
            }
            (Some(b), Some(n)) if b < n => {
                removed.push(*b);
                i += 1;
            }
            (Some(b), None) => {
                removed.push(*b);
                i += 1;
            }
            (_, Some(n)) => {
                added.push(*n);
                j += 1;
            }
            (None, None) => unreachable!("the loop runs while one side is left"),
        }
    }
    (added, removed)
}

/// Where an update takes its names from: the cached analysis's, patched,
/// or the file table (each made on another thread).
enum Source<'scope, 's> {
    Patch(Pending<'scope, Option<Patch<'s>>>),
    Table(Pending<'scope, Result<FileTable, StoreError>>),
}

impl<'s> Source<'_, 's> {
    /// Waits for the names (taken once). A cache whose analysis does not
    /// decode has every record read here.
    fn namer(&mut self, store: &'s Store) -> Result<Namer<'s>, StoreError> {
        match self {
            Source::Patch(p) => match p.take() {
                Some(patch) => Ok(Namer::Patched(patch)),
                None => Ok(Namer::Table(FileTable::load(store)?)),
            },
            Source::Table(files) => Ok(Namer::Table(files.take()?)),
        }
    }
}

/// Brings `prev` up to date with the index, or None when a fresh analysis
/// is needed (see the module's comment), with how many contents had
/// their links found again and their names read again.
fn update<'s>(
    store: &'s Store,
    params: &AnalysisParams,
    threads: usize,
    prev: Basis,
    named: Option<&HashSet<ContentHash>>,
    names: &mut Source<'_, 's>,
) -> Result<Option<(Analysis, Basis, Provenance)>, StoreError> {
    let Some((frame, mut links, info, basis, relinked)) = relink(store, params, threads, prev, named)? else {
        return Ok(None);
    };
    let Relinked { sequence, cutoff, totals, contents, names: held, sizes } = frame;
    let frame = Frame { sequence, params, cutoff, totals, contents: &contents, ids: &held.ids, sizes: &sizes };
    let (analysis, renamed) = assemble(store, frame, names.namer(store)?, &mut links, &info)?;
    let basis = Basis::new(&analysis, contents, sizes, held, links, &info, basis.0, basis.1);
    Ok(Some((analysis, basis, Provenance::Updated { relinked, renamed })))
}

/// The index's state as [`relink`] found it.
struct Relinked {
    sequence: u64,
    cutoff: u64,
    totals: Totals,
    contents: Vec<ContentHash>,
    names: Names,
    sizes: Vec<u64>,
}

/// What [`relink`] returns: the state, every link and the linked
/// contents' sizes and payloads, the chunks over the cutoff and the
/// templates' digest, and how many contents were relinked.
type Found = (Relinked, Vec<ContentLink>, MemberInfo, (Vec<ChunkKey>, [u8; 16]), usize);

/// The links of the index now, from those of `prev`: see the module's
/// comment. None when a fresh analysis is needed.
fn relink(
    store: &Store,
    params: &AnalysisParams,
    threads: usize,
    mut prev: Basis,
    named: Option<&HashSet<ContentHash>>,
) -> Result<Option<Found>, StoreError> {
    let started = std::time::Instant::now();
    let sequence = store.sequence();
    // The live contents and their names: those of the cache, brought up
    // to date for the contents whose names changed (from the write-ahead
    // log), else read whole (a scan of `content_names` and one of
    // `content_by_id`, ~36 ms of a report after one edit of the Django
    // tree, 66.5k files).
    let known = std::mem::take(&mut prev.names);
    let (contents, names, places) = match named.map(|n| names_since(store, &prev.contents, known, n)).transpose()? {
        Some(Some((contents, names))) => {
            let places = Places::from_ids(&names.content_ids);
            (contents, names, places)
        }
        _ => {
            let (contents, ids) = live_contents(store)?;
            let places = Places::new(store, &contents)?;
            let content_ids = places.ids(contents.len());
            (contents, Names { ids, content_ids }, places)
        }
    };
    tracing::debug!("live contents after {:?}", started.elapsed());
    let cutoff = params.max_degree.unwrap_or_else(|| auto_cutoff(contents.len() as u64));
    let templates = templates(store)?;
    let digest = templates_digest(&templates);
    if cutoff != prev.cutoff || digest != prev.templates {
        tracing::debug!("analysis update: the cutoff or the templates changed");
        return Ok(None);
    }
    if prev.sizes.len() != prev.contents.len() {
        return Ok(None); // a cache from elsewhere
    }
    let (added, removed) = diff(&prev.contents, &contents);
    // Relinking one content costs 12-20× its share of a fresh analysis (it
    // looks up its postings and measures its candidates alone, where the
    // full analysis loads each content once and uses both cores): on
    // Django (14k contents, fresh 0.7-1.0 s) 275 relinked took 0.37 s, 420
    // took 0.8 s and 1,393 took 1.5 s (`tools/bench_report.py`). Past a
    // thirty-second of the contents, a fresh analysis is the cheaper way;
    // small indexes are always brought up to date.
    let most = most_to_redo(contents.len());
    if added.len() + removed.len() > most {
        tracing::debug!("analysis update: {} contents came and {} went, over {most}", added.len(), removed.len());
        return Ok(None);
    }

    // How the degree (contents) and bytes of each chunk, and the degree of
    // each posted sample, changed with the contents that came and went.
    let mut chunk_delta: HashMap<ChunkKey, (i64, i64)> = HashMap::new();
    let mut sample_delta: HashMap<u32, i64> = HashMap::new();
    let mut added_sizes: HashMap<ContentHash, u64> = HashMap::new();
    for (set, sign) in [(&added, 1i64), (&removed, -1i64)] {
        for c in set {
            // A content that went keeps its record while history refers to
            // it; once retention dropped it, its chunks are unknown here.
            // (Its chunks and posted samples: not its whole sketch.)
            let Some(rec) = store.get_postings(c)? else { return Ok(None) };
            if sign > 0 {
                added_sizes.insert(*c, rec.size);
            }
            for (id, len, count) in rec.chunk_counts() {
                let d = chunk_delta.entry(id).or_default();
                d.0 += sign;
                d.1 += sign * i64::from(len) * i64::from(count);
            }
            for &s in &rec.posted {
                *sample_delta.entry(s).or_default() += sign;
            }
        }
    }

    // Chunks whose "over the cutoff" status flipped, and samples whose
    // "over the sample cap" status did: every holder's links change.
    let mut totals = prev.totals;
    let mut over_common: HashSet<ChunkKey> = prev.over_common.iter().copied().collect();
    let mut dirty: BTreeSet<u32> = BTreeSet::new();
    let index_of = |c: &ContentId| places.of(*c);
    let place = |c: &ContentHash| contents.binary_search(c).ok().map(|i| i as u32);
    let mut chunks: Vec<ChunkKey> = chunk_delta.keys().copied().collect();
    chunks.sort_unstable();
    // A chunk held by more than `enough` contents is over the cutoff before
    // and after the change: its holders are not needed, only its bytes'
    // change. (A common chunk's postings, read whole, were ~5 % of a
    // report's CPU after one edit of the Django tree.)
    let most_moved = chunk_delta.values().map(|&(dd, _)| dd.unsigned_abs()).max().unwrap_or(0);
    let enough = cutoff.saturating_add(most_moved);
    for (chunk, holders) in chunks.iter().zip(store.postings_of(&chunks, enough)?) {
        let (dd, db) = chunk_delta[chunk];
        if holders.len() as u64 > enough {
            if templates.chunks.contains(chunk) {
                totals.template_bytes = totals.template_bytes.saturating_add_signed(db);
            } else {
                totals.common_bytes = totals.common_bytes.saturating_add_signed(db);
            }
            continue;
        }
        let deg = holders.len() as i64;
        let bytes: i64 = holders.iter().map(|(_, p)| i64::from(p.len) * i64::from(p.count)).sum();
        let (deg_before, bytes_before) = (deg - dd, bytes - db);
        if deg_before < 0 || bytes_before < 0 {
            return Ok(None); // postings disagree with the records: `simd check` says more
        }
        let count = |v: bool| u64::from(v);
        if templates.chunks.contains(chunk) {
            totals.template_chunks = (totals.template_chunks + count(deg > 0)).saturating_sub(count(deg_before > 0));
            totals.template_bytes = (totals.template_bytes + bytes as u64).saturating_sub(bytes_before as u64);
            continue;
        }
        let (now, before) = (deg as u64 > cutoff, deg_before as u64 > cutoff);
        if before {
            totals.common_chunks = totals.common_chunks.saturating_sub(1);
            totals.common_bytes = totals.common_bytes.saturating_sub(bytes_before as u64);
        }
        if now {
            totals.common_chunks += 1;
            totals.common_bytes += bytes as u64;
        }
        if now != before {
            dirty.extend(holders.iter().filter_map(|(c, _)| index_of(c)));
            if now {
                over_common.insert(*chunk);
            } else {
                over_common.remove(chunk);
            }
        }
    }
    let cap = sample_cap(cutoff);
    let mut samples: Vec<u32> = sample_delta.keys().copied().filter(|s| !templates.samples.contains(s)).collect();
    samples.sort_unstable();
    for (sample, holders) in samples.iter().zip(store.sketch_postings_of(&samples, usize::MAX)?) {
        let deg = holders.len() as i64;
        let before = deg - sample_delta[sample];
        if (deg as u64 > cap) != (before.max(0) as u64 > cap) {
            dirty.extend(holders.iter().filter_map(index_of));
        }
    }
    let mut relink = dirty;
    relink.extend(added.iter().filter_map(place));
    if relink.len() > most {
        tracing::debug!(
            "analysis update: {} contents to relink ({} came, {} went), over {most}",
            relink.len(),
            added.len(),
            removed.len()
        );
        return Ok(None);
    }

    // The links of every content to relink, against every live content.
    let ignored = Ignored {
        chunks: templates.chunks.iter().chain(&over_common).copied().collect(),
        samples: templates.samples.clone(),
    };
    let load = |i: u32, feats: &mut HashMap<u32, (Features, u64)>| -> Result<(), StoreError> {
        if let std::collections::hash_map::Entry::Vacant(e) = feats.entry(i) {
            let f = features(store, &contents[i as usize], &ignored)?;
            let payload = f.payload();
            e.insert((f, payload));
        }
        Ok(())
    };
    // Each worker relinks its share, with its own memo of features.
    let relink_some = |mine: Vec<u32>| -> Result<(Vec<ContentLink>, MemberInfo), StoreError> {
        let mut feats: HashMap<u32, (Features, u64)> = HashMap::new();
        let mut links: Vec<ContentLink> = Vec::new();
        for d in mine {
            load(d, &mut feats)?;
            let (posted, chunk_ids): (Vec<u32>, Vec<ChunkKey>) = {
                let f = &feats[&d].0;
                (f.posted().to_vec(), f.chunks.iter().map(|c| c.0).collect())
            };
            let mut shared: HashMap<u32, usize> = HashMap::new();
            for holders in store.sketch_postings_of(&posted, cap as usize)? {
                if holders.len() as u64 > cap {
                    continue;
                }
                for j in holders.iter().filter_map(index_of).filter(|&j| j != d) {
                    *shared.entry(j).or_default() += 1;
                }
            }
            let mut candidates: BTreeSet<u32> = BTreeSet::new();
            for holders in store.postings_of(&chunk_ids, cutoff)? {
                candidates.extend(holders.iter().filter_map(|(c, _)| index_of(c)).filter(|&j| j != d));
            }
            for (&j, &n) in &shared {
                load(j, &mut feats)?;
                if n >= samples_needed(&feats[&d].0, &feats[&j].0) {
                    candidates.insert(j);
                }
            }
            for &j in &candidates {
                // A pair of two contents to relink is measured once, from the first.
                if j < d && relink.contains(&j) {
                    continue;
                }
                load(j, &mut feats)?;
                let (a, b) = (d.min(j), d.max(j));
                let ((fa, pa), (fb, pb)) = (&feats[&a], &feats[&b]);
                if let Some((m, kind)) = link(fa, fb, *pa, *pb, params) {
                    links.push((a, b, m, kind));
                }
            }
        }
        let info = links.iter().flat_map(|l| [l.0, l.1]).map(|i| (i, (feats[&i].0.size, feats[&i].1))).collect();
        Ok((links, info))
    };
    let all: Vec<u32> = relink.iter().copied().collect();
    // A few contents are not worth a thread; past that, both cores (the
    // file table loads beside them, and is done first).
    let workers = if all.len() < 32 { 1 } else { threads.max(1) };
    let parts: Vec<Result<(Vec<ContentLink>, MemberInfo), StoreError>> = if workers == 1 {
        vec![relink_some(all)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|k| {
                    let mine: Vec<u32> = all.iter().copied().skip(k).step_by(workers).collect();
                    let relink_some = &relink_some;
                    s.spawn(move || relink_some(mine))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("relink workers do not panic")).collect()
        })
    };
    let (mut links, mut info): (Vec<ContentLink>, MemberInfo) = (Vec::new(), MemberInfo::default());
    for part in parts {
        let (l, i) = part?;
        links.extend(l);
        info.extend(i);
    }

    // Every other link is as it was. The places of the previous contents
    // among those of now, from one merge of the two sorted lists.
    let mut now = contents.iter().enumerate().peekable();
    let now_at: Vec<Option<u32>> = prev
        .contents
        .iter()
        .map(|c| {
            while now.next_if(|(_, n)| *n < c).is_some() {}
            now.next_if(|(_, n)| *n == c).map(|(i, _)| i as u32)
        })
        .collect();
    let linked: HashMap<u32, (u64, u64)> = prev.linked.iter().map(|&(i, size, payload)| (i, (size, payload))).collect();
    for &(a, b, measures, kind) in &prev.links {
        let (Some(&a_was), Some(&b_was)) = (now_at.get(a as usize), now_at.get(b as usize)) else {
            return Ok(None); // a place past the contents: a cache from elsewhere
        };
        let (Some(ia), Some(ib)) = (a_was, b_was) else { continue };
        if relink.contains(&ia) || relink.contains(&ib) {
            continue;
        }
        links.push((ia, ib, measures, kind));
        for (i, was) in [(ia, a), (ib, b)] {
            info.insert(i, linked.get(&was).copied().unwrap_or_default());
        }
    }
    tracing::debug!(
        "analysis update: {} contents came, {} went, {} relinked after {:?}",
        added.len(),
        removed.len(),
        relink.len(),
        started.elapsed()
    );
    // Each content's size: kept, or from the record of one that came.
    let mut sizes = vec![0; contents.len()];
    for (was, now) in now_at.iter().enumerate() {
        if let Some(now) = now {
            sizes[*now as usize] = prev.sizes[was];
        }
    }
    for (c, size) in added_sizes {
        if let Some(i) = place(&c) {
            sizes[i as usize] = size;
        }
    }
    let mut over_common: Vec<ChunkKey> = over_common.into_iter().collect();
    over_common.sort_unstable();
    let relinked = relink.len();
    let state = Relinked { sequence, cutoff, totals, contents, names, sizes };
    Ok(Some((state, links, info, (over_common, digest), relinked)))
}

/// How many contents an update redoes at most, of `n` live ones (see
/// [`relink`]): past it, a fresh analysis is the cheaper way.
fn most_to_redo(n: usize) -> usize {
    (n / 32).max(64)
}

/// The live contents and their names now, from those of the cached
/// analysis (`contents`, `known`) and the contents that gained or lost a
/// name since (`named`, a superset, from the write-ahead log): each of
/// those has its names read again, by prefix. None when the cache holds
/// no names, when more changed than an update takes, or when the result
/// disagrees with the index's counts of files and named contents (which
/// every writer's batch keeps): the caller then reads them all.
fn names_since(
    store: &Store,
    contents: &[ContentHash],
    known: Names,
    named: &HashSet<ContentHash>,
) -> Result<Option<(Vec<ContentHash>, Names)>, StoreError> {
    let n = contents.len();
    if known.ids.len() != n || known.content_ids.len() != n || named.len() > most_to_redo(n) {
        return Ok(None);
    }
    let mut touched: Vec<ContentHash> = named.iter().copied().collect();
    touched.sort_unstable();
    let (mut now, mut names) = (Vec::with_capacity(n + touched.len()), Names::default());
    names.ids.reserve(n + touched.len());
    names.content_ids.reserve(n + touched.len());
    let mut keep = |c: ContentHash, ids: Vec<FileId>, id: ContentId| {
        now.push(c);
        names.ids.push(ids);
        names.content_ids.push(id);
    };
    let mut was = contents.iter().zip(known.ids.into_iter().zip(known.content_ids)).peekable();
    for c in touched {
        while let Some((&k, (ids, id))) = was.next_if(|(k, _)| **k < c) {
            keep(k, ids, id);
        }
        was.next_if(|(k, _)| **k == c);
        let ids: Vec<FileId> = store.names(&c).map(|r| r.map(|((_, id), ())| id)).collect::<Result<_, _>>()?;
        if ids.is_empty() {
            continue; // gone, or a key of another table
        }
        // Its id from its record, even when it was live before: it may
        // have lost every name meanwhile, its record dropped by retention,
        // and come back with a new one.
        let id = match store.get_postings(&c)? {
            Some(rec) => rec.id,
            None => return Ok(None), // names with no record: `simd check` says more
        };
        keep(c, ids, id);
    }
    for (&k, (ids, id)) in was {
        keep(k, ids, id);
    }
    let counts = store.counts()?;
    let files: u64 = names.ids.iter().map(|ids| ids.len() as u64).sum();
    if now.len() as u64 != counts.contents || files != counts.files {
        tracing::debug!(
            "analysis update: {} contents and {files} names from the cache and the log, the index counts {} and {}",
            now.len(),
            counts.contents,
            counts.files
        );
        return Ok(None);
    }
    Ok(Some((now, names)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_finds_what_came_and_went() {
        let h = |b: u8| ContentHash([b; 16]);
        let (added, removed) = diff(&[h(1), h(3), h(5), h(9)], &[h(2), h(3), h(9), h(10)]);
        assert_eq!(added, vec![h(2), h(10)]);
        assert_eq!(removed, vec![h(1), h(5)]);
        assert_eq!(diff(&[], &[h(1)]), (vec![h(1)], vec![]));
        assert_eq!(diff(&[h(1)], &[]), (vec![], vec![h(1)]));
    }
}
