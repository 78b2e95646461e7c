//! Fingerprints: the MD5 of every chunk, from one streaming read, and the
//! content hash derived from them.
//!
//! The content hash is MD5 over the file's sequence of (chunk id, length),
//! as Forman et al. do: it identifies a file by content alone while every
//! byte is hashed exactly once (a file grown from its prior content hashes
//! about a chunk of it again, to tell). A file the index held before is cut
//! at its prior content's cuts where those are certainly TTTD's, and by
//! TTTD elsewhere ([`chunk_all`]). Memory is one fixed read buffer plus the
//! chunk list, which is run-length encoded so that long runs of one chunk
//! (sparse or zero-filled files) cost one entry.

use std::io::{self, Read};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::chunker::{cut_kind, find_cut, ChunkParams, CutKind};
use crate::sketch::{is_space, sketch_grown, sketch_prepended, Shingler, Sketch, GROWN_LOOK_BACK};

/// MD5 of a chunk's bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkId(pub [u8; 16]);

impl ChunkId {
    /// The chunk's key in the postings: the first 8 bytes of its MD5.
    pub fn key(&self) -> ChunkKey {
        ChunkKey(u64::from_be_bytes(self.0[..8].try_into().expect("8 of 16 bytes")))
    }
}

/// The first 64 bits of a [`ChunkId`], big-endian: what names a chunk
/// everywhere in the index, in the postings (`chunk_contents`) and in the
/// chunk lists, where the other 8 bytes would cost ~30 % of the postings
/// and ~40 % of the chunk lists (schema version 8). The whole id is hashed
/// into the content hash before it is cut, so identity still rests on all
/// 128 bits. Two chunks of one index sharing a key (probability n²/2^65
/// for n distinct chunks, ~3 × 10^-10 for a million, ~3 × 10^-4 for a
/// hundred million) would look like one chunk to the analysis: a link
/// would count ~1 KB of common bytes that are not, and no identical set
/// would change.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ChunkKey(pub u64);

impl std::fmt::Display for ChunkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// MD5 over a file's sequence of (chunk id, chunk length): identifies content.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ContentHash(pub [u8; 16]);

/// Lower-case hex of 16 bytes, without the formatting machinery per byte
/// (a report prints ~100k content hashes).
pub fn hex16(bytes: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

macro_rules! hex_debug {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(std::str::from_utf8(&hex16(&self.0)).expect("hex digits are ASCII"))
            }
        }
    };
}
hex_debug!(ChunkId);
hex_debug!(ContentHash);

/// `count` consecutive occurrences of one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRun {
    pub key: ChunkKey,
    pub len: u32,
    pub count: u32,
}

impl ChunkRun {
    /// The bytes of the run: its chunk's length, `count` times.
    pub fn bytes(&self) -> u64 {
        u64::from(self.len) * u64::from(self.count)
    }
}

/// Contents of at least this many bytes are indexed whole: their content
/// hash (so identical copies are found) and their word sketch (so similar
/// files are, by their words), but no chunk list, which would take memory
/// in proportion to the file (~140 bytes a chunk while it is written, one
/// WriteBatch per file: a 10 GiB file would hold ~1.4 GB). The content
/// hash is the same either way: every chunk is still cut and hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WholeFrom(pub u64);

impl WholeFrom {
    /// The least that may be asked for: smaller contents are read whole
    /// into one buffer, and a 16 MiB content's chunk list takes ~2 MB.
    pub const MIN: u64 = 16 << 20;

    /// Whether a content of `size` bytes keeps no chunk list.
    pub fn applies(self, size: u64) -> bool {
        size >= self.0
    }
}

impl Default for WholeFrom {
    /// 1 GiB: at most ~150 MB of memory for one file's chunk list and
    /// batch, against a first index's ~85 MB for a whole document tree.
    fn default() -> Self {
        WholeFrom(1 << 30)
    }
}

/// What one read of a file yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub content: ContentHash,
    pub size: u64,
    /// The file's chunks in order, consecutive repeats merged; empty for a
    /// content indexed whole ([`WholeFrom`]).
    pub runs: Vec<ChunkRun>,
    /// A sample of its word shingles; None when it was not made because the
    /// index already held the content's record, which has it (`known`).
    pub sketch: Option<Sketch>,
}

impl Fingerprint {
    /// Number of chunks, repeats counted.
    pub fn chunk_count(&self) -> u64 {
        self.runs.iter().map(|r| u64::from(r.count)).sum()
    }
}

/// What the index asks of a read: whether it holds a content, and a held
/// content's chunk list and sketch.
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    /// Whether the index holds a content's record (which has its sketch).
    pub known: &'a dyn Fn(&ContentHash) -> bool,
    /// The chunk list and sketch of a content the index holds, if its
    /// sketch was made as this simd makes one.
    pub prior: &'a dyn Fn(&ContentHash) -> Option<PriorRecord>,
}

impl Lookup<'static> {
    /// No index: every content is sketched from its bytes.
    pub const NONE: Lookup<'static> = Lookup { known: &|_| false, prior: &|_| None };
}

/// The content the index last held for a file: a file grown at its end
/// (a log appended to) begins with it, and is then sketched from that
/// content's sketch and its new bytes ([`sketch_grown`]) instead of word by
/// word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prior {
    pub content: ContentHash,
    pub size: u64,
}

/// A file's [`Prior`] content, and the file read at an offset: a
/// streamed read of a file that may have grown from that content makes no
/// sketch until it knows whether it did ([`Growing`]), and reads again
/// what it passed when it did not.
#[derive(Clone, Copy)]
pub struct Earlier<'a> {
    pub prior: Prior,
    pub read_at: &'a dyn Fn(&mut [u8], u64) -> io::Result<usize>,
}

/// What the index holds of a [`Prior`] content: its chunk list, and its
/// sketch as stored, decoded only once the file is known to begin with
/// the content (decoding every prior's sketch cost a burst of edits made
/// before files' ends ~5 % of the daemon's CPU, for nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PriorRecord {
    pub runs: Vec<ChunkRun>,
    pub sketch: Vec<u8>,
}

/// The sketch of `whole`, a content held whole that may begin with
/// `prior` (whose record is `rec`), from the prior's sketch when it does;
/// None when it does not, or cannot be sketched so ([`sketch_grown`]).
///
/// Whether it does is told by the prior's chunk list: TTTD cuts a chunk by
/// its own bytes, so up to the first chunk of `runs` that differs (the
/// prior's last, or one cut at Tmax past the prior's end) the lists are
/// alike, and what is left of the prior's is hashed from `whole` (about a
/// chunk), where hashing the prior's whole length again would cost what
/// sketching saves. Chunks are compared by their 64-bit keys: two unlike
/// chunks with one key would cost no more than an estimate off by their
/// shingles.
fn grown_sketch(prior: Prior, rec: &PriorRecord, runs: &[ChunkRun], whole: &[u8]) -> Option<Sketch> {
    let size = usize::try_from(prior.size).ok().filter(|&n| n > 0 && n < whole.len())?;
    // What `sketch_grown` looks at first.
    Shingler::grown_from(&whole[size.saturating_sub(GROWN_LOOK_BACK)..size], whole.get(size).copied())?;
    let alike = chunks_of(&rec.runs).zip(chunks_of(runs)).take_while(|(a, b)| a == b).count();
    let at: usize = chunks_of(&rec.runs).take(alike).map(|(_, len)| len as usize).sum();
    if !rest_of_prior(chunks_of(&rec.runs).skip(alike), whole.get(at..size)?) {
        return None;
    }
    sketch_grown(&rec.sketch, whole, size)
}

/// The sketch of `whole`, a content held whole that may end with
/// `prior` (whose record is `rec`) after new bytes (a changelog given an
/// entry at its top), from the prior's sketch when it does
/// ([`sketch_prepended`]); None when it does not, or cannot be sketched so.
///
/// Whether it does is told by the chunk lists from their ends: TTTD cuts
/// the prior's bytes in the file as it cut them alone from the first cut
/// that falls where one of the prior's did (a cut depends on the bytes
/// since the last), so the lists end alike, and the prior's chunks before
/// those (about a chunk) are hashed from the file; more than
/// [`GROWN_LOOK_BACK`] of them, and the file is taken as edited.
fn prepended_sketch(prior: Prior, rec: &PriorRecord, runs: &[ChunkRun], whole: &[u8]) -> Option<Sketch> {
    let size = usize::try_from(prior.size).ok().filter(|&n| n > 0 && n < whole.len())?;
    let at = whole.len() - size;
    // What `sketch_prepended` looks at first.
    Shingler::prepended_to(&whole[at..], whole[at - 1])?;
    let (alike, alike_len) = chunks_from_end(runs)
        .zip(chunks_from_end(&rec.runs))
        .take_while(|(a, b)| a == b)
        .fold((0usize, 0usize), |(n, len), (_, (_, l))| (n + 1, len + l as usize));
    let head = size.checked_sub(alike_len)?;
    if head > GROWN_LOOK_BACK {
        return None;
    }
    let count: usize = rec.runs.iter().map(|r| r.count as usize).sum();
    if !rest_of_prior(chunks_of(&rec.runs).take(count - alike), &whole[at..at + head]) {
        return None;
    }
    sketch_prepended(&rec.sketch, whole, size)
}

/// A chunk list's chunks in order, repeats counted: (key, length).
fn chunks_of(runs: &[ChunkRun]) -> impl Iterator<Item = (ChunkKey, u32)> + '_ {
    runs.iter().flat_map(|r| std::iter::repeat_n((r.key, r.len), r.count as usize))
}

/// A chunk list's chunks from its last: (key, length).
fn chunks_from_end(runs: &[ChunkRun]) -> impl Iterator<Item = (ChunkKey, u32)> + '_ {
    runs.iter().rev().flat_map(|r| std::iter::repeat_n((r.key, r.len), r.count as usize))
}

/// Whether `bytes` are the prior content's last chunks, `rest`: each hashed
/// to its key, and all of them to the last byte.
fn rest_of_prior(rest: impl Iterator<Item = (ChunkKey, u32)>, bytes: &[u8]) -> bool {
    let mut at = 0;
    for (key, len) in rest {
        match bytes.get(at..at + len as usize) {
            Some(chunk) if ChunkId(Md5::digest(chunk).into()).key() == key => at += len as usize,
            _ => return false,
        }
    }
    at == bytes.len()
}

/// A place in a chunk list: the run of the next chunk, and how many of
/// that run's chunks are passed.
#[derive(Clone, Copy, Default)]
struct RunPos {
    run: usize,
    used: u32,
}

impl RunPos {
    /// The next chunk: (key, length).
    fn chunk(self, runs: &[ChunkRun]) -> Option<(ChunkKey, u32)> {
        runs.get(self.run).map(|r| (r.key, r.len))
    }

    /// Passes the next chunk.
    fn step(&mut self, runs: &[ChunkRun]) {
        self.used += 1;
        if self.used >= runs[self.run].count {
            *self = RunPos { run: self.run + 1, used: 0 };
        }
    }

    /// The chunks of `runs` from here on, at most `limit` of them.
    fn cuts(self, runs: &[ChunkRun], limit: usize) -> PriorCuts<'_> {
        PriorCuts { runs: &runs[self.run.min(runs.len())..], used: self.used, limit }
    }
}

/// A prior content's chunks from one of them on, at most `limit` of them:
/// where to cut a file that may keep them ([`take_prior_cuts`]).
#[derive(Clone, Copy)]
struct PriorCuts<'r> {
    /// The runs from the one that holds the first chunk, of which `used`
    /// are passed.
    runs: &'r [ChunkRun],
    used: u32,
    limit: usize,
}

impl<'r> PriorCuts<'r> {
    /// A whole prior's: all its chunks but the last, which its end cut.
    fn whole(runs: &'r [ChunkRun]) -> PriorCuts<'r> {
        let count: usize = runs.iter().map(|r| r.count as usize).sum();
        RunPos::default().cuts(runs, count.saturating_sub(1))
    }

    /// The chunks in order: (key, length).
    fn chunks(self) -> impl Iterator<Item = (ChunkKey, u32)> + 'r {
        let (first, rest) = self.runs.split_first().map_or((None, &[][..]), |(f, r)| (Some(f), r));
        let first = first.map(|r| std::iter::repeat_n((r.key, r.len), r.count.saturating_sub(self.used) as usize));
        first.into_iter().flatten().chain(chunks_of(rest)).take(self.limit)
    }
}

/// The chunks of `contents`, one after another, with their MD5s, and
/// where each content's chunks end: all of each content when `eof`, else
/// (a read buffer's worth of a longer file) up to its last certain cut.
///
/// A content with a `hint` (its prior content's chunks, from the index) is
/// cut first at the prior's cuts, from its start and as far as each may be
/// TTTD's ([`take_prior_cuts`]), and by TTTD after them; once hashed,
/// [`settle`] keeps those cuts that are certainly TTTD's and cuts again
/// from the last such. A file appended to, or edited, keeps the cuts of
/// its unchanged start, found without running TTTD over it: TTTD was ~10 %
/// of the daemon's CPU over a burst of appends, where every chunk is still
/// hashed, as it must be to tell the bytes unchanged.
///
/// And when `eof`, the prior's cuts are taken again after an edit, once
/// TTTD cuts where the prior's bytes after the edit begin a chunk (the
/// place of one of its cuts, shifted by what the file's size changed by):
/// TTTD cuts from a cut by the bytes alone, so from there on it cuts as
/// it cut the prior, as far as the bytes are the prior's. A line inserted
/// in the middle of a file, or given at its start, is then cut by TTTD
/// over about a chunk, where it was over the rest of the file (13 % of the
/// daemon's CPU in a burst of files given a line at their start).
fn chunk_all<'d>(
    contents: &[&'d [u8]],
    hints: &[Option<PriorCuts>],
    params: &ChunkParams,
    eof: bool,
) -> (Vec<&'d [u8]>, Vec<[u8; 16]>, Vec<usize>) {
    // Room for every chunk TTTD can cut (each but a content's last is at
    // least Tmin), so that neither list grows as it is filled.
    let most = contents.iter().map(|d| d.len() / params.min as usize + 1).sum();
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(most);
    let mut ends = Vec::with_capacity(contents.len());
    // Each chunk's prior chunk's key and what decides its cut, when it
    // was cut at a prior's cut, for `settle`.
    let mut marks: Vec<Option<(ChunkKey, CutKind)>> = Vec::with_capacity(most);
    for (&data, hint) in contents.iter().zip(hints) {
        let n = hint.map_or(0, |h| take_prior_cuts(data, 0, h.chunks(), params, &mut chunks, &mut marks));
        let mut at: usize = chunks[chunks.len() - n..].iter().map(|c| c.len()).sum();
        // The prior's chunks, its last included, from where the last taken
        // one ended (in the prior's bytes), to find where TTTD meets one.
        let mut again = hint.filter(|_| eof).map(|h| Resync::new(h, data.len(), n));
        while let Some(cut) = find_cut(&data[at..], params, eof) {
            chunks.push(&data[at..at + cut]);
            marks.push(None);
            at += cut;
            if let Some(r) = &mut again {
                if let Some(rest) = r.meets(at) {
                    let n = take_prior_cuts(data, at, rest.chunks(), params, &mut chunks, &mut marks);
                    r.passed(n);
                    at += chunks[chunks.len() - n..].iter().map(|c| c.len()).sum::<usize>();
                }
            }
        }
        ends.push(chunks.len());
    }
    let mut ids = vec![[0u8; 16]; chunks.len()];
    md5_each(&chunks, &mut ids);
    if marks.iter().all(Option::is_none) {
        return (chunks, ids, ends);
    }
    let (mut out, mut out_ids, mut out_ends) = (Vec::with_capacity(chunks.len()), Vec::new(), Vec::new());
    let mut unhashed = Vec::new();
    let mut start = 0;
    for (&data, &end) in contents.iter().zip(&ends) {
        let (first, first_ids, these) = (&chunks[start..end], &ids[start..end], &marks[start..end]);
        if these.iter().any(Option::is_some) {
            let first = First { chunks: first, ids: first_ids, marks: these };
            let into = Settled { chunks: &mut out, ids: &mut out_ids, unhashed: &mut unhashed };
            settle(data, first, params, eof, into);
        } else {
            out.extend_from_slice(first);
            out_ids.extend_from_slice(first_ids);
        }
        out_ends.push(out.len());
        start = end;
    }
    if !unhashed.is_empty() {
        let pieces: Vec<&[u8]> = unhashed.iter().map(|&k| out[k]).collect();
        let mut hashed = vec![[0u8; 16]; pieces.len()];
        md5_each(&pieces, &mut hashed);
        for (&k, id) in unhashed.iter().zip(hashed) {
            out_ids[k] = id;
        }
    }
    (out, out_ids, out_ends)
}

/// Where, after an edit, a content's TTTD cuts meet its prior's again
/// ([`chunk_all`]): the prior's chunks from the hint's first on (its last
/// included), the next one not passed, how many are left, and where the
/// one before it ends in the content, the prior's bytes after the edit
/// shifted by what the size changed by.
struct Resync<'r> {
    runs: &'r [ChunkRun],
    pos: RunPos,
    left: usize,
    end: i64,
}

impl<'r> Resync<'r> {
    /// For a content of `len` bytes cut at `hint`'s cuts, `taken` of them.
    fn new(hint: PriorCuts<'r>, len: usize, taken: usize) -> Resync<'r> {
        let (mut left, mut prior_len) = (0usize, 0i64);
        for (k, r) in hint.runs.iter().enumerate() {
            let count = if k == 0 { r.count.saturating_sub(hint.used) } else { r.count };
            left += count as usize;
            prior_len += i64::from(r.len) * i64::from(count);
        }
        let pos = RunPos { run: 0, used: hint.used };
        let mut r = Resync { runs: hint.runs, pos, left, end: len as i64 - prior_len };
        r.passed(taken);
        r
    }

    /// The prior's chunks to take from `at`, a cut TTTD made, when one of
    /// the prior's cuts lies there: those after it but the last, which the
    /// prior's end cut.
    fn meets(&mut self, at: usize) -> Option<PriorCuts<'r>> {
        let at = at as i64;
        while self.left > 0 && self.end < at {
            self.passed(1);
        }
        (self.end == at && self.left > 1).then(|| self.pos.cuts(self.runs, self.left - 1))
    }

    /// Passes the next `n` chunks.
    fn passed(&mut self, n: usize) {
        for _ in 0..n.min(self.left) {
            self.end += i64::from(self.runs[self.pos.run].len);
            self.pos.step(self.runs);
            self.left -= 1;
        }
    }
}

/// Cuts `data` from `at` at its prior content's cuts (`prior`: its chunks
/// from one that starts there, as far as they may be cut), as long as
/// each is where TTTD may cut such bytes ([`cut_kind`]): an edit that
/// moved the bytes after it puts the prior's next cut where, but for one
/// chance in a few hundred, none may be. Returns how many were taken, and
/// pushes each one's prior key and [`CutKind`] to `marks`.
fn take_prior_cuts<'d>(
    data: &'d [u8],
    mut at: usize,
    prior: impl Iterator<Item = (ChunkKey, u32)>,
    params: &ChunkParams,
    out: &mut Vec<&'d [u8]>,
    marks: &mut Vec<Option<(ChunkKey, CutKind)>>,
) -> usize {
    let mut taken = 0;
    for (key, len) in prior {
        let Some(chunk) = data.get(at..at + len as usize) else { break };
        let Some(kind) = cut_kind(chunk, params) else { break };
        out.push(chunk);
        marks.push(Some((key, kind)));
        at += len as usize;
        taken += 1;
    }
    taken
}

/// A content's first pass ([`chunk_all`]): its chunks, their MD5s, and
/// for each one cut at a prior's cut, that prior chunk's key and the
/// [`CutKind`] of its cut.
struct First<'a, 'd> {
    chunks: &'a [&'d [u8]],
    ids: &'a [[u8; 16]],
    marks: &'a [Option<(ChunkKey, CutKind)>],
}

/// Where [`settle`] puts a content's chunks: after those of the contents
/// before it, with the places of those it cut anew, whose MD5s are zero
/// until they are hashed.
struct Settled<'a, 'd> {
    chunks: &'a mut Vec<&'d [u8]>,
    ids: &'a mut Vec<[u8; 16]>,
    unhashed: &'a mut Vec<usize>,
}

/// A content's chunks from a first pass some of whose chunks were cut at
/// its prior's cuts: those cuts that are certainly TTTD's, and TTTD's own
/// elsewhere, up to the end of `data` when `eof`, else to the last cut
/// TTTD can make in it.
///
/// A taken chunk is certainly TTTD's cut, made from a cut, when its key is
/// the prior's chunk's (so are its bytes, but for a 2^-64 chance, which is
/// the index's own: it names chunks by their keys) and what decides that
/// cut is alike too: the chunk alone for a main-divisor hit or Tmax, the
/// bytes up to Tmax past its start for a backup point ([`CutKind`]), which
/// must all lie in taken chunks of matching keys. A chunk the first pass
/// cut by TTTD is TTTD's cut from its start. So from the content's start,
/// each chunk of the first pass met at a cut is kept if it is either, and
/// elsewhere TTTD cuts from the last cut made (a chunk of the first pass
/// it cuts again, same start and length, keeps its MD5).
fn settle<'d>(
    data: &'d [u8],
    First { chunks: first, ids, marks }: First<'_, 'd>,
    params: &ChunkParams,
    eof: bool,
    out: Settled<'_, 'd>,
) {
    let starts: Vec<usize> = first
        .iter()
        .scan(0, |at, c| {
            *at += c.len();
            Some(*at - c.len())
        })
        .collect();
    let alike: Vec<bool> =
        marks.iter().zip(ids).map(|(m, id)| m.is_some_and(|(key, _)| ChunkId(*id).key() == key)).collect();
    // How far the taken chunks of matching keys reach from each on.
    let mut alike_to = vec![0usize; first.len()];
    for k in (0..first.len()).rev() {
        alike_to[k] = match (alike[k], alike.get(k + 1)) {
            (false, _) => 0,
            (true, Some(true)) => alike_to[k + 1],
            (true, _) => starts[k] + first[k].len(),
        };
    }
    let keep = |k: usize| match marks[k] {
        None => true,
        Some((_, CutKind::Own)) => alike[k],
        Some((_, CutKind::Backup)) => alike[k] && starts[k] + params.max as usize <= alike_to[k],
    };
    let (mut at, mut j) = (0, 0);
    while at < data.len() {
        while j < first.len() && starts[j] < at {
            j += 1;
        }
        let met = j < first.len() && starts[j] == at;
        if met && keep(j) {
            out.chunks.push(first[j]);
            out.ids.push(ids[j]);
            at += first[j].len();
            continue;
        }
        let Some(cut) = find_cut(&data[at..], params, eof) else { return };
        out.chunks.push(&data[at..at + cut]);
        if met && first[j].len() == cut {
            out.ids.push(ids[j]);
        } else {
            out.unhashed.push(out.chunks.len() - 1);
            out.ids.push([0; 16]);
        }
        at += cut;
    }
}

/// Where a streamed read stands against its prior content's cuts: the
/// prior's next chunk not passed, and where it starts in the file.
struct Cursor<'r> {
    runs: &'r [ChunkRun],
    pos: RunPos,
    /// The prior's chunks not passed.
    left: usize,
    at: u64,
    /// Where the prior's bytes lie in the file, from where they start: at
    /// 0 before an edit, shifted by what the size changed by after it.
    shift: i64,
}

impl<'r> Cursor<'r> {
    fn new(runs: &'r [ChunkRun], shift: i64) -> Cursor<'r> {
        Cursor { runs, pos: RunPos::default(), left: runs.iter().map(|r| r.count as usize).sum(), at: 0, shift }
    }

    /// The prior's cuts from `offset` on (but for its last chunk, which its
    /// end cut), when one of its chunks starts there: the read's cuts so
    /// far end where the prior's do.
    fn at(&mut self, offset: u64) -> Option<PriorCuts<'r>> {
        let offset = u64::try_from(offset as i64 - self.shift).ok()?;
        while self.left > 0 && self.at < offset {
            self.at += u64::from(self.runs[self.pos.run].len);
            self.pos.step(self.runs);
            self.left -= 1;
        }
        (self.left > 1 && self.at == offset).then(|| self.pos.cuts(self.runs, self.left - 1))
    }
}

/// Where a streamed read of a file that may have grown from its prior
/// content stands ([`grown_sketch`] for a file held whole): its chunks
/// checked against the prior's as they come, the prior's last bytes kept
/// (at most [`GROWN_LOOK_BACK`]), and no sketch made until the read passes
/// the prior's end and tells whether the file begins with it.
struct Growing<'r> {
    size: u64,
    /// Tmax: a chunk that starts this far before the prior's end is one
    /// of the prior's if the file begins with it.
    max: u64,
    runs: &'r [ChunkRun],
    /// The prior's next chunk.
    pos: RunPos,
    /// The end of the prior's chunks met alike so far.
    alike_to: u64,
    differs: bool,
    tail_from: u64,
    tail: Vec<u8>,
    /// The prior's sketch as stored ([`PriorRecord`]).
    sketch: &'r [u8],
}

/// What a [`Growing`] read learnt from a batch of chunks.
enum Verdict {
    Undecided,
    /// The file begins with the prior: its sketch goes on from the
    /// prior's, fed up to the batch's end.
    Grown(Shingler),
    /// It does not: the bytes so far are to be sketched.
    Not,
}

impl<'r> Growing<'r> {
    /// A read of `total` bytes from `earlier`, whose prior's record is
    /// `rec` ([`prior_of`]: current, with a chunk list), if that may be a
    /// grown file worth reading so: a prior that is smaller, and whose last
    /// bytes in the file end as a sketch can go on from
    /// ([`Shingler::grown_from`]: read first, so that a file that cannot
    /// grow so is not read to the prior's end for nothing, and then again).
    fn start(earlier: Earlier, total: u64, params: &ChunkParams, rec: &'r PriorRecord) -> Option<Growing<'r>> {
        let prior = earlier.prior;
        if prior.size == 0 || prior.size >= total {
            return None;
        }
        let tail_from = prior.size.saturating_sub(GROWN_LOOK_BACK as u64);
        // And the byte after them, which the file has (it is larger).
        let mut end = vec![0u8; (prior.size - tail_from) as usize + 1];
        let mut got = 0;
        while got < end.len() {
            match (earlier.read_at)(&mut end[got..], tail_from + got as u64) {
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        let next = end.pop();
        Shingler::grown_from(&end, next)?;
        Some(Growing {
            size: prior.size,
            max: u64::from(params.max),
            runs: &rec.runs,
            pos: RunPos::default(),
            alike_to: 0,
            differs: false,
            tail_from,
            tail: Vec::with_capacity(end.len()),
            sketch: &rec.sketch,
        })
    }

    /// Takes a batch of `chunks` (key and length), cut from `bytes`, which
    /// start at `offset` in the file.
    fn take(&mut self, offset: u64, bytes: &[u8], chunks: impl Iterator<Item = (ChunkKey, u32)>) -> Verdict {
        let mut at = offset;
        for (key, len) in chunks {
            if !self.differs {
                if self.pos.chunk(self.runs) == Some((key, len)) {
                    self.pos.step(self.runs);
                    self.alike_to = at + u64::from(len);
                } else {
                    self.differs = true;
                    if at + self.max <= self.size {
                        return Verdict::Not;
                    }
                }
            }
            at += u64::from(len);
        }
        let end = offset + bytes.len() as u64;
        let (lo, hi) = (self.tail_from.max(offset), self.size.min(end));
        if lo < hi {
            self.tail.extend_from_slice(&bytes[(lo - offset) as usize..(hi - offset) as usize]);
        }
        // The prior's last word is known to end with it once the byte
        // after it is read, if it does not end with whitespace.
        let next = self.size.checked_sub(offset).and_then(|k| bytes.get(k as usize)).copied();
        if end < self.size || (next.is_none() && !self.tail.last().is_some_and(|&b| is_space(b))) {
            return Verdict::Undecided;
        }
        // The prior's chunks after those met alike, from its kept bytes.
        if self.alike_to < self.tail_from {
            return Verdict::Not;
        }
        let rest = self.pos.cuts(self.runs, usize::MAX).chunks();
        match self.tail.get((self.alike_to - self.tail_from) as usize..) {
            Some(bytes) if rest_of_prior(rest, bytes) => {}
            _ => return Verdict::Not,
        }
        match Shingler::grown(self.sketch, &self.tail, next) {
            Some(mut s) => {
                s.feed(&bytes[(self.size - offset) as usize..]);
                Verdict::Grown(s)
            }
            None => Verdict::Not,
        }
    }
}

/// Builds a [`Fingerprint`] chunk by chunk.
struct Builder {
    /// None when the caller hashes the content's (chunk id, length)
    /// sequence itself ([`fingerprint_many`]).
    content: Option<Md5>,
    size: u64,
    runs: Vec<ChunkRun>,
    /// None while the sketch is deferred to the end (the whole content is in
    /// the buffer), and until a streamed content's first buffer is cut.
    shingles: Option<Shingler>,
    /// Once the content reaches this size its chunk list is dropped and no
    /// more is kept.
    whole_from: WholeFrom,
    /// A content held whole that may begin with the file's prior content,
    /// and that content's record.
    prior: Option<(Prior, PriorRecord)>,
}

impl Builder {
    /// A builder with no shingler: the caller gives it one once it knows
    /// the content streams. A shingler takes its thread's spare buffers
    /// (`sketch::Shingler::new`), and one made for every file that then
    /// fitted in the buffer held them while that file's sketch was made
    /// with new ones, grown from nothing (with the chunk lists grown from
    /// nothing too: 154k `realloc` calls in a first index of the generated
    /// corpus, 34k now).
    fn new(whole_from: WholeFrom) -> Self {
        Builder { content: Some(Md5::new()), size: 0, runs: Vec::new(), shingles: None, whole_from, prior: None }
    }

    /// Adds the chunks in order, with their MD5s.
    fn push_hashed(&mut self, chunks: &[&[u8]], ids: &[[u8; 16]]) {
        // (None kept past `whole_from`: no room made for them either.)
        if !self.whole_from.applies(self.size) {
            self.runs.reserve(chunks.len());
        }
        for (chunk, id) in chunks.iter().zip(ids) {
            self.push(chunk, ChunkId(*id));
        }
    }

    /// (The chunk's bytes are not shingled here: a streamed file's
    /// shingler is fed all of a buffer's chunks in one piece, where fed a
    /// chunk at a time its vector loops ran ~1 KB at a time.)
    fn push(&mut self, chunk: &[u8], id: ChunkId) {
        let len = chunk.len() as u32;
        if let Some(c) = &mut self.content {
            c.update(id.0);
            c.update(len.to_be_bytes());
        }
        self.size += chunk.len() as u64;
        if self.whole_from.applies(self.size) {
            if !self.runs.is_empty() {
                self.runs = Vec::new();
            }
            return;
        }
        let key = id.key();
        match self.runs.last_mut() {
            Some(last) if last.key == key && last.len == len && last.count < u32::MAX => last.count += 1,
            _ => self.runs.push(ChunkRun { key, len, count: 1 }),
        }
    }

    /// The fingerprint of a streamed content (sketched as it was read).
    fn finish(mut self, lookup: Lookup) -> Fingerprint {
        let content = ContentHash(self.content.take().expect("a builder that hashes its content").finalize().into());
        self.finish_as(content, &[], lookup)
    }

    /// [`Builder::finish`] for a builder made without its content hash,
    /// given it.
    fn finish_as(self, content: ContentHash, whole: &[u8], lookup: Lookup) -> Fingerprint {
        let sketch = match self.shingles {
            Some(s) => Some(s.finish()),
            None if (lookup.known)(&content) => None,
            None => Some(
                self.prior
                    .as_ref()
                    .and_then(|(p, rec)| {
                        grown_sketch(*p, rec, &self.runs, whole)
                            .or_else(|| prepended_sketch(*p, rec, &self.runs, whole))
                    })
                    .unwrap_or_else(|| crate::sketch::sketch_bytes(whole)),
            ),
        };
        Fingerprint { content, size: self.size, runs: self.runs, sketch }
    }
}

/// The batch MD5 engine, its CPU features detected once.
fn hasher() -> md5_many::Md5Many {
    static HASHER: std::sync::OnceLock<md5_many::Md5Many> = std::sync::OnceLock::new();
    *HASHER.get_or_init(md5_many::Md5Many::new)
}

/// The MD5 of each of `inputs` into `outputs`, hashed side by side in
/// order of their MD5 block counts.
///
/// md5-many hashes 16 inputs at a time (8 with AVX2), taking them in the
/// order given, and a group runs as many blocks as its longest input: TTTD's
/// chunks (460–2,800 bytes at the default size) hashed in the order they
/// were cut left most lanes idle for most of each group. Grouped by length,
/// lanes finish together: 2.5 → 6.3 GB/s on chunks of uniformly random
/// length in 460–2,800 bytes on session 64's AVX-512 VM, where chunks all of
/// 1 KiB ran at 6.0 GB/s (`docs/performance.md`). md5-many reorders only
/// within 32 inputs, so fewer than that go to it as they are.
fn md5_each(inputs: &[&[u8]], outputs: &mut [[u8; 16]]) {
    debug_assert_eq!(inputs.len(), outputs.len());
    if inputs.len() <= 32 {
        hasher().hash_many(inputs, outputs);
        return;
    }
    // MD5 pads a message with at least 9 bytes to whole 64-byte blocks.
    // A counting sort by block count (past 255 blocks, ~16 KB, inputs share
    // the last bucket), inputs of one count kept in their order for
    // locality: sorted by `sort_unstable`, the order cost ~0.7 % of a
    // first index.
    const BUCKETS: usize = 256;
    let bucket = |input: &[u8]| ((input.len() + 8) / 64).min(BUCKETS - 1);
    let mut next = [0usize; BUCKETS + 1];
    for &input in inputs {
        next[bucket(input) + 1] += 1;
    }
    for b in 1..=BUCKETS {
        next[b] += next[b - 1];
    }
    let mut order = vec![0usize; inputs.len()];
    for (k, &input) in inputs.iter().enumerate() {
        let at = &mut next[bucket(input)];
        order[*at] = k;
        *at += 1;
    }
    let sorted: Vec<&[u8]> = order.iter().map(|&k| inputs[k]).collect();
    let mut hashed = vec![[0u8; 16]; inputs.len()];
    hasher().hash_many(&sorted, &mut hashed);
    for (&k, id) in order.iter().zip(hashed) {
        outputs[k] = id;
    }
}

/// The read buffer size: large enough that the undecided tail (< Tmax) that
/// is moved to the front after each refill is a small fraction of it.
pub const READ_BUF: usize = 1 << 20;

/// Fingerprints an in-memory input.
pub fn fingerprint_bytes(data: &[u8], params: &ChunkParams) -> Fingerprint {
    fingerprint_many(&[data], &[None], params, Lookup::NONE).pop().expect("one fingerprint for one content")
}

/// A file's prior content and its record, when the index has one of the
/// current version that keeps a chunk list: where to cut the file
/// ([`chunk_all`]), and, when it grew from that content, the sketch to go
/// on from ([`grown_sketch`]). Asked for before the file is cut: the
/// record is the one the file's change takes the postings of too, which
/// the reader hands to the writer ([`crate::ingest`]), so that it is read
/// once for both.
fn prior_of(prior: Option<Prior>, lookup: Lookup) -> Option<(Prior, PriorRecord)> {
    let prior = prior.filter(|p| p.size > 0)?;
    let rec = (lookup.prior)(&prior.content).filter(|r| !r.runs.is_empty())?;
    Some((prior, rec))
}

/// Fingerprints several whole contents held in memory, their chunks' MD5s
/// computed side by side: a small file has too few chunks to fill the
/// hasher's lanes alone (a document tree's files have ~3 chunks each, and
/// 16 lanes of AVX-512). Each result equals [`fingerprint_file`]'s for that
/// content and its prior (`priors`, one per content); the index is asked
/// about each content in order, as there, and for each prior's record
/// first ([`prior_of`]).
pub fn fingerprint_many(
    contents: &[&[u8]],
    priors: &[Option<Prior>],
    params: &ChunkParams,
    lookup: Lookup,
) -> Vec<Fingerprint> {
    assert_eq!(contents.len(), priors.len(), "a prior, or none, for each content");
    let records: Vec<Option<(Prior, PriorRecord)>> = priors.iter().map(|&p| prior_of(p, lookup)).collect();
    let hints: Vec<Option<PriorCuts>> =
        records.iter().map(|r| r.as_ref().map(|(_, r)| PriorCuts::whole(&r.runs))).collect();
    let (chunks, ids, ends) = chunk_all(contents, &hints, params, true);
    // One walk over each content's chunks builds its fingerprint and the
    // message its content hash is the MD5 of, its (chunk id, length)
    // sequence: those are hashed side by side too, where one at a time
    // they were ~1 % of a first index of the Django tree.
    let mut message = Vec::with_capacity(chunks.len() * 20);
    let mut start = 0;
    let (builders, spans): (Vec<Builder>, Vec<std::ops::Range<usize>>) = ends
        .iter()
        .zip(records)
        .map(|(&end, prior)| {
            // The sketch is deferred to the end, as for any whole content.
            let runs = Vec::with_capacity(end - start);
            let mut b = Builder { content: None, runs, prior, ..Builder::new(WholeFrom(u64::MAX)) };
            let from = message.len();
            for (chunk, id) in chunks[start..end].iter().zip(&ids[start..end]) {
                b.push(chunk, ChunkId(*id));
                message.extend_from_slice(id);
                message.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
            }
            start = end;
            (b, from..message.len())
        })
        .unzip();
    let messages: Vec<&[u8]> = spans.into_iter().map(|r| &message[r]).collect();
    let mut hashes = vec![[0u8; 16]; contents.len()];
    md5_each(&messages, &mut hashes);
    builders
        .into_iter()
        .zip(contents)
        .zip(hashes)
        .map(|((b, &data), hash)| b.finish_as(ContentHash(hash), data, lookup))
        .collect()
}

/// Fingerprints a stream with one fixed [`READ_BUF`] buffer, reading it
/// exactly once. `buf` is reused between calls.
pub fn fingerprint_reader<R: Read>(
    reader: R,
    params: &ChunkParams,
    whole_from: WholeFrom,
    buf: &mut Vec<u8>,
) -> io::Result<Fingerprint> {
    fingerprint_reader_sized(reader.take(u64::MAX), None, params, whole_from, buf, READ_BUF, Lookup::NONE)
}

/// [`fingerprint_reader`] for a file whose size was just stat'ed: reads at
/// most `size` bytes, sparing the final zero-length read. A file that grew
/// meanwhile is caught by the caller's second stat, as any change is.
///
/// `lookup` says whether the index already holds a content's record: a
/// sketch is a function of the content, so for a file that fits in the
/// buffer (the sketch is then made after the content hash is known) an
/// identical copy of a content the index has costs a lookup instead of
/// shingling, and its fingerprint carries no sketch (the record has it).
/// Larger files are sketched as they stream. A file that begins with its
/// `earlier` prior content is sketched from that content's sketch and its
/// new bytes; a large one is not sketched until the read passes the
/// prior's end, and what it passed is read again (`read_at`) when the file
/// turns out not to begin with the prior.
pub fn fingerprint_file(
    file: impl Read,
    size: u64,
    earlier: Option<Earlier>,
    params: &ChunkParams,
    whole_from: WholeFrom,
    buf: &mut Vec<u8>,
    lookup: Lookup,
) -> io::Result<Fingerprint> {
    fingerprint_reader_sized(file.take(size), earlier, params, whole_from, buf, READ_BUF, lookup)
}

/// [`fingerprint_reader`] with a given buffer size (at least two maximal
/// chunks, so that every refill makes progress).
fn fingerprint_reader_sized<R: Read>(
    mut reader: io::Take<R>,
    earlier: Option<Earlier>,
    params: &ChunkParams,
    whole_from: WholeFrom,
    buf: &mut Vec<u8>,
    size: usize,
    lookup: Lookup,
) -> io::Result<Fingerprint> {
    let cap = size.max(2 * params.max as usize);
    // Zeroed once per buffer, not per file: reads overwrite what they use.
    if buf.len() != cap {
        buf.resize(cap, 0);
    }
    let mut b = Builder::new(whole_from);
    let mut filled = 0usize;
    let mut eof = false;
    let total = reader.limit();
    // The prior's record, asked for once the file is known not to fit in
    // the buffer (one that does is cut as `fingerprint_many` cuts it).
    let record = std::cell::OnceCell::new();
    let mut growing: Option<Growing> = None;
    let mut cursor: Option<(Cursor, Option<Cursor>)> = None;
    // Where `buf[0]` is in the file.
    let mut offset = 0u64;
    loop {
        while !eof && filled < buf.len() {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => eof = true,
                Ok(n) => {
                    filled += n;
                    // A `Take` at its limit is at the end: no need to ask again.
                    eof = reader.limit() == 0;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // The whole content in the buffer at once: fingerprinted as a batch
        // of small files is (cut as its prior's record says, and sketched
        // at the end if the index does not already have its sketch).
        if eof && b.size == 0 {
            let priors = [earlier.map(|e| e.prior)];
            let mut fp = fingerprint_many(&[&buf[..filled]], &priors, params, lookup).pop().expect("one content");
            if whole_from.applies(fp.size) {
                fp.runs = Vec::new();
            }
            return Ok(fp);
        }
        if b.size == 0 && offset == 0 {
            let record: &Option<(Prior, PriorRecord)> =
                record.get_or_init(|| prior_of(earlier.map(|e| e.prior), lookup));
            if let (Some(e), Some((_, rec))) = (earlier, record) {
                growing = Growing::start(e, total, params, rec);
                // The cuts of the prior's start, and (past an edit that
                // changed the size) of the prior's end, where TTTD's cuts
                // meet them again ([`chunk_all`]): a buffer that starts at
                // one of either is cut at them.
                let shift = total as i64 - e.prior.size as i64;
                cursor = Some((Cursor::new(&rec.runs, 0), (shift != 0).then(|| Cursor::new(&rec.runs, shift))));
            }
            if growing.is_none() {
                b.shingles = Some(Shingler::new());
            }
        }
        let hint = cursor.as_mut().and_then(|(c, shifted)| c.at(offset).or_else(|| shifted.as_mut()?.at(offset)));
        let (chunks, ids, _) = chunk_all(&[&buf[..filled]], &[hint], params, eof);
        let start: usize = chunks.iter().map(|c| c.len()).sum();
        if let Some(s) = &mut b.shingles {
            s.feed(&buf[..start]);
        }
        b.push_hashed(&chunks, &ids);
        if let Some(g) = &mut growing {
            let keys = ids.iter().zip(&chunks).map(|(id, c)| (ChunkId(*id).key(), c.len() as u32));
            // A file that ended early (it shrank as it was read, which the
            // caller's stat finds) never passed the prior's end.
            let verdict = match g.take(offset, &buf[..start], keys) {
                Verdict::Undecided if eof => Verdict::Not,
                v => v,
            };
            match verdict {
                Verdict::Undecided => {}
                Verdict::Grown(s) => {
                    b.shingles = Some(s);
                    growing = None;
                }
                Verdict::Not => {
                    let mut s = Shingler::new();
                    let read_at = earlier.expect("growing from an earlier content").read_at;
                    read_again(read_at, offset, &mut |piece| s.feed(piece))?;
                    s.feed(&buf[..start]);
                    b.shingles = Some(s);
                    growing = None;
                }
            }
        }
        if eof {
            return Ok(b.finish(lookup));
        }
        offset += start as u64;
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
}

/// Reads the first `len` bytes of a file again, `read_at` a piece at a
/// time, each to `feed`; fewer if the file is now shorter, which the
/// caller's second stat finds (a file changed as it was read is read
/// again, not said to be unreadable).
fn read_again(
    read_at: &dyn Fn(&mut [u8], u64) -> io::Result<usize>,
    len: u64,
    feed: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    let mut piece = vec![0u8; (64 << 10).min(len as usize)];
    let mut at = 0u64;
    while at < len {
        let want = piece.len().min((len - at) as usize);
        match read_at(&mut piece[..want], at) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                feed(&piece[..n]);
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::{bytes_of_sketch, with_sample};
    use proptest::prelude::*;

    /// A reader that hands out at most `step` bytes per call.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn empty_input_has_the_md5_of_nothing() {
        let f = fingerprint_bytes(b"", &ChunkParams::default());
        assert_eq!(f.size, 0);
        assert!(f.runs.is_empty());
        assert_eq!(f.content.to_string(), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn zero_filled_input_collapses_to_one_run() {
        let p = ChunkParams::default();
        let data = vec![0u8; 1 << 20];
        let f = fingerprint_bytes(&data, &p);
        assert!(f.runs.len() <= 2, "{} runs", f.runs.len());
        assert_eq!(f.size, data.len() as u64);
        let total: u64 = f.runs.iter().map(ChunkRun::bytes).sum();
        assert_eq!(total, data.len() as u64);
    }

    #[test]
    fn content_hash_depends_on_content_only() {
        let p = ChunkParams::default();
        let a: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut b = a.clone();
        assert_eq!(fingerprint_bytes(&a, &p).content, fingerprint_bytes(&b, &p).content);
        b[25_000] ^= 1;
        assert_ne!(fingerprint_bytes(&a, &p).content, fingerprint_bytes(&b, &p).content);
    }

    #[test]
    fn a_known_content_takes_its_sketch_from_the_index() {
        let data: Vec<u8> = (0..20_000u32).map(|i| if i % 7 == 0 { b' ' } else { b'a' + (i % 23) as u8 }).collect();
        let p = ChunkParams::default();
        let fresh = fingerprint_bytes(&data, &p);
        assert!(fresh.sketch.as_ref().is_some_and(|s| !s.samples.is_empty()));
        let asked = std::cell::Cell::new(None);
        let known = |c: &ContentHash| {
            asked.set(Some(*c));
            true
        };
        let read = |step: usize, known: &dyn Fn(&ContentHash) -> bool| {
            let r = (&data[..]).take(u64::MAX);
            let lookup = Lookup { known, prior: &|_| None };
            fingerprint_reader_sized(r, None, &p, WholeFrom::default(), &mut Vec::new(), step, lookup).unwrap()
        };
        // Fits in the buffer: the index is asked by content hash, and has it.
        let fp = read(READ_BUF, &known);
        assert_eq!((fp.content, &fp.runs, &fp.sketch), (fresh.content, &fresh.runs, &None));
        assert_eq!(asked.get(), Some(fresh.content));
        // A content the index lacks is sketched.
        assert_eq!(read(READ_BUF, &|_| false), fresh);
        // Streamed through a smaller buffer: sketched as it is read, no lookup.
        asked.set(None);
        let fp = read(8192, &known);
        assert_eq!(fp, fresh);
        assert_eq!(asked.get(), None);
    }

    /// A streamed file whose prior ends inside what looks like a word, at
    /// one of the file's cuts that ends a read's batch: whether the word
    /// ends there is told by the next batch's first byte, and the sketch
    /// goes on from the prior's (told by a sample put in it).
    #[test]
    fn a_prior_that_ends_a_batch_inside_a_word_is_grown_from_once_the_next_byte_is_read() {
        let p = ChunkParams::default();
        let text: Vec<u8> = (0..8000u32)
            .flat_map(|i| format!("w{} ", (i * 31 + 3).wrapping_mul(2_654_435_761) % 7919).into_bytes())
            .collect();
        // A cut its own bytes decided (a main-divisor hit, not a backup
        // point that later bytes decide), after a byte of a word.
        let fp = fingerprint_bytes(&text, &p);
        let mut at = 0;
        let end = fp
            .runs
            .iter()
            .flat_map(|r| std::iter::repeat_n(r.len as usize, r.count as usize))
            .find_map(|len| {
                at += len;
                let own = cut_kind(&text[at - len..at], &p) == Some(CutKind::Own) && len < p.max as usize;
                (at > 25_000 && own && !is_space(text[at - 1])).then_some(at)
            })
            .expect("such a cut");
        let before = &text[..end];
        // Grown by more than a read's buffer holds past its end.
        let grown = [before, b"\n", &text[..5000]].concat();
        let fresh = fingerprint_bytes(&grown, &p);
        let prior_fp = fingerprint_bytes(before, &p);
        let sketch = prior_fp.sketch.unwrap();
        assert!(sketch.level > 0 && !fresh.sketch.as_ref().unwrap().samples.contains(&1));
        let record = PriorRecord { runs: prior_fp.runs, sketch: bytes_of_sketch(&with_sample(&sketch, 1)) };
        let prior_of = |c: &ContentHash| (*c == prior_fp.content).then(|| record.clone());
        let lookup = Lookup { known: &|_| false, prior: &prior_of };
        let earlier = Earlier {
            prior: Prior { content: prior_fp.content, size: end as u64 },
            read_at: &|out: &mut [u8], at: u64| (&grown[at as usize..]).read(out),
        };
        // The first buffer ends short of the cut after the prior's end
        // (Tmin past it), so its batch ends at the prior's end.
        let step = end + 50;
        let r = (&grown[..]).take(grown.len() as u64);
        let fp = fingerprint_reader_sized(r, Some(earlier), &p, WholeFrom::default(), &mut Vec::new(), step, lookup)
            .unwrap();
        assert_eq!(fp.sketch, fresh.sketch.map(|s| with_sample(&s, 1)));
        assert_eq!((fp.content, fp.runs), (fresh.content, fresh.runs));
    }

    /// A file that begins with its prior content is sketched from that
    /// content's sketch, told here by a sample put in it that the file's
    /// words do not give; any other file, or one streamed, from its bytes.
    #[test]
    fn a_file_grown_at_its_end_is_sketched_from_its_prior_sketch() {
        let p = ChunkParams::default();
        let text = |n: u32, seed: u32| -> Vec<u8> {
            (0..n)
                .flat_map(|i| format!("w{} ", (i * 31 + seed).wrapping_mul(2_654_435_761) % 7919).into_bytes())
                .collect()
        };
        let before = [text(6000, 1), b"\n".to_vec()].concat();
        let grown = [&before[..], &text(300, 2), b"\n"].concat();
        let fresh = fingerprint_bytes(&grown, &p).sketch.unwrap();
        // Sample 1 (level 31) is kept at any level, and no shingle gave it.
        assert!(!fresh.samples.contains(&1));
        let marked = |data: &[u8]| {
            let fp = fingerprint_bytes(data, &p);
            let sketch = fp.sketch.unwrap();
            assert!(sketch.level > 0, "a prior sketch that is a sample");
            (fp.content, PriorRecord { runs: fp.runs, sketch: bytes_of_sketch(&with_sample(&sketch, 1)) })
        };
        // The record of `before`, and one of the same size whose chunks
        // are another content's.
        let records = [marked(&before), marked(&grown[1..=before.len()])];
        let asked = std::cell::Cell::new(0);
        let prior_of = |c: &ContentHash| {
            asked.set(asked.get() + 1);
            records.iter().find(|(content, _)| content == c).map(|(_, r)| r.clone())
        };
        let lookup = Lookup { known: &|_| false, prior: &prior_of };
        let prior = Prior { content: records[0].0, size: before.len() as u64 };
        let many = |data: &[u8], prior: Prior| fingerprint_many(&[data], &[Some(prior)], &p, lookup).pop().unwrap();
        // Bytes read again at an offset.
        let again = std::cell::Cell::new(0);
        let read_with = |data: &[u8], step: usize, prior: Prior| {
            let read_at = |out: &mut [u8], at: u64| {
                let n = (&data[at as usize..]).read(out)?;
                again.set(again.get() + n);
                Ok(n)
            };
            let earlier = Earlier { prior, read_at: &read_at };
            let r = data.take(data.len() as u64);
            fingerprint_reader_sized(r, Some(earlier), &p, WholeFrom::default(), &mut Vec::new(), step, lookup).unwrap()
        };
        let read = |data: &[u8], step: usize| read_with(data, step, prior);
        for fp in [many(&grown, prior), read(&grown, READ_BUF)] {
            assert_eq!(fp.sketch.unwrap(), with_sample(&fresh, 1), "sketched from the prior's sketch");
        }
        // Its start edited: not the prior content, sketched from its bytes.
        let mut edited = grown.clone();
        edited[10] = b'x';
        assert_eq!(many(&edited, prior), fingerprint_bytes(&edited, &p));
        // The record of another content: its chunks are not the file's.
        assert_eq!(many(&grown, Prior { content: records[1].0, ..prior }).sketch.unwrap(), fresh);
        assert_eq!(asked.get(), 4);
        // Streamed through a smaller buffer: not sketched until the read
        // passes the prior's end, then from the prior's sketch.
        assert_eq!(read(&grown, 8192).sketch.unwrap(), with_sample(&fresh, 1));
        assert_eq!(asked.get(), 5);
        // Streamed, its start edited: what was passed is read again.
        assert_eq!(read(&edited, 8192), fingerprint_bytes(&edited, &p));
        assert_eq!(asked.get(), 6);
        // Edited past the first buffer, and cut short before it is read
        // again: a fingerprint all the same (the caller's stat finds the
        // change and reads the file again), not an error.
        let mut late = grown.clone();
        late[20_000] = b'x';
        let calls = std::cell::Cell::new(0);
        let read_at = |out: &mut [u8], at: u64| {
            // The prior's end is read first, in one call; then the file is
            // gone short.
            calls.set(calls.get() + 1);
            if calls.get() > 1 {
                return Ok(0);
            }
            (&late[at as usize..]).read(out)
        };
        let earlier = Earlier { prior, read_at: &read_at };
        let r = (&late[..]).take(late.len() as u64);
        assert!(
            fingerprint_reader_sized(r, Some(earlier), &p, WholeFrom::default(), &mut Vec::new(), 8192, lookup).is_ok()
        );
        // The prior not ending between words (inside the last number, as
        // the file goes on): sketched from the bytes, but cut at the
        // prior's cuts all the same (a lookup each); streamed, no more read
        // again than the prior's end, to find that out.
        let cut = Prior { size: before.len() as u64 - 3, ..prior };
        assert!(!is_space(grown[before.len() - 4]) && !is_space(grown[before.len() - 3]));
        assert_eq!(many(&grown, cut).sketch.unwrap(), fresh);
        assert_eq!(asked.get(), 8);
        again.set(0);
        assert_eq!(read_with(&grown, 8192, cut).sketch.unwrap(), fresh);
        assert!(again.get() <= crate::sketch::GROWN_LOOK_BACK);
        assert_eq!(asked.get(), 9);
        // The prior's record not to be had (an older record): from its bytes.
        let lookup = Lookup { known: &|_| false, prior: &|_| None };
        let fp = fingerprint_many(&[&grown[..]], &[Some(prior)], &p, lookup).pop().unwrap();
        assert_eq!(fp.sketch.unwrap(), fresh);
        // A record whose chunk list stops short of its size (inconsistent):
        // its chunks all match, but do not reach the prior's end.
        let mut short = records[0].1.clone();
        short.runs.pop();
        let lookup = Lookup { known: &|_| false, prior: &|_| Some(short.clone()) };
        let fp = fingerprint_many(&[&grown[..]], &[Some(prior)], &p, lookup).pop().unwrap();
        assert_eq!(fp.sketch.unwrap(), fresh);
    }

    #[test]
    fn a_content_indexed_whole_keeps_its_hash_and_sketch_and_no_chunk_list() {
        let p = ChunkParams::default();
        let data: Vec<u8> =
            (0..300_000u32).flat_map(|i| format!("w{} ", i.wrapping_mul(2_654_435_761) % 9973).into_bytes()).collect();
        let read = |whole_from: u64, step: usize| {
            let r = (&data[..]).take(u64::MAX);
            fingerprint_reader_sized(r, None, &p, WholeFrom(whole_from), &mut Vec::new(), step, Lookup::NONE).unwrap()
        };
        let chunked = read(u64::MAX, READ_BUF);
        assert!(chunked.runs.len() > 100);
        for (whole_from, step) in [(data.len() as u64, READ_BUF), (data.len() as u64 / 3, 8192), (1, 8192)] {
            let whole = read(whole_from, step);
            assert!(whole.runs.is_empty(), "whole from {whole_from}: no chunk list");
            assert_eq!((whole.content, whole.size, &whole.sketch), (chunked.content, chunked.size, &chunked.sketch));
        }
        // One byte short of the limit: chunked.
        assert_eq!(read(data.len() as u64 + 1, 8192), chunked);
    }

    /// Bytes over an alphabet of `n` symbols (all 256 for 256): few make
    /// cuts at Tmax and at backup points common.
    fn squeeze(v: &[u8], n: u16) -> Vec<u8> {
        v.iter().map(|&b| (u16::from(b) % n) as u8).collect()
    }

    /// A content made from `base` by `edit` at `at` with `piece` (appended,
    /// inserted, deleted as long, changed in place, cut short there, or
    /// none), and the chunk list of `base` as a prior of it; for edit 6,
    /// chunk lengths and keys of no content at all.
    fn edited(
        base: &[u8],
        edit: u8,
        at: prop::sample::Index,
        piece: &[u8],
        p: &ChunkParams,
    ) -> (Vec<u8>, Vec<ChunkRun>) {
        let k = if base.is_empty() { 0 } else { at.index(base.len()) };
        let data = match edit {
            0 => [base, piece].concat(),
            1 => [&base[..k], piece, &base[k..]].concat(),
            2 => [&base[..k], &base[(k + piece.len()).min(base.len())..]].concat(),
            3 => {
                let mut d = base.to_vec();
                for (b, q) in d[k..].iter_mut().zip(piece) {
                    *b ^= q | 1;
                }
                d
            }
            4 => base[..k].to_vec(),
            _ => base.to_vec(),
        };
        let runs = match edit {
            6 => piece
                .iter()
                .map(|&b| ChunkRun {
                    key: ChunkKey(u64::from(b)),
                    len: 40 + u32::from(b) * 11,
                    count: 1 + u32::from(b % 3),
                })
                .collect(),
            _ => fingerprint_bytes(base, p).runs,
        };
        (data, runs)
    }

    /// Words of the letters after `c` (`len` of them), each followed by
    /// a space, or the last without it (`trim`): a prior content whose
    /// last word a tail that begins with whitespace leaves whole.
    fn words_text(words: &[(usize, u8)], trim: bool) -> Vec<u8> {
        let mut out: Vec<u8> =
            words.iter().flat_map(|&(len, c)| (0..len).map(move |i| b'a' + (c + i as u8) % 26).chain([b' '])).collect();
        if trim {
            out.pop();
        }
        out
    }

    /// Chunk sizes that put a prior's end anywhere in a chunk, or in its
    /// first one; and cuts at backup points or Tmax, seldom at the main
    /// divisor (a cut decided at Tmax past the prior's end is no cut of it).
    fn prior_params() -> impl Strategy<Value = ChunkParams> {
        prop_oneof![
            Just(ChunkParams::for_average(128).unwrap()),
            Just(ChunkParams::default()),
            Just(ChunkParams { min: 40, max: 300, main_div: 1 << 20, backup_div: 60 }),
        ]
    }

    proptest! {
        /// The batch engine (md5-many, an alpha crate), as `md5_each` feeds
        /// it (in order of length past 32 inputs, each digest put back in its
        /// input's place), against RustCrypto's md-5, on batches of any size
        /// and chunks of any length, the padding boundaries (55, 56, 64
        /// bytes) and inputs past the last bucket of the order (16,320
        /// bytes) included.
        #[test]
        fn batch_md5_equals_md5(
            lens in proptest::collection::vec(
                prop_oneof![8 => 0usize..130, 8 => 440usize..3000, 1 => 16_000usize..20_000],
                0..120,
            ),
            seed in any::<u8>(),
        ) {
            let data: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| (0..n).map(|j| (j as u8).wrapping_mul(31).wrapping_add(seed ^ i as u8)).collect())
                .collect();
            let chunks: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut ids = vec![[0u8; 16]; chunks.len()];
            md5_each(&chunks, &mut ids);
            for (chunk, id) in chunks.iter().zip(&ids) {
                prop_assert_eq!(&Md5::digest(chunk)[..], &id[..]);
            }
        }

        #[test]
        fn reader_equals_bytes(
            data in proptest::collection::vec(any::<u8>(), 0..30_000),
            step in 1usize..5000,
            size in 0usize..4000,
        ) {
            let p = ChunkParams::for_average(128).unwrap();
            let mut buf = Vec::new();
            let r = Trickle { data: &data, step }.take(u64::MAX);
            let streamed = fingerprint_reader_sized(r, None, &p, WholeFrom::default(), &mut buf, size, Lookup::NONE).unwrap();
            prop_assert_eq!(streamed, fingerprint_bytes(&data, &p));
        }

        /// A file grown at its end, fingerprinted with its prior content:
        /// the same fingerprint, and the prior's record asked for once; at
        /// chunk sizes that put the prior's end anywhere in a
        /// chunk, or in the first one, and with cuts decided at Tmax.
        #[test]
        fn a_grown_file_fingerprints_as_from_its_bytes(
            words in proptest::collection::vec((1usize..12, 0u8..26), 0..3000),
            tail in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\n'), 97u8..123], 1..3000),
            trim: bool,
            p in prior_params(),
        ) {
            let before = words_text(&words, trim);
            let grown = [&before[..], &tail].concat();
            let prior = fingerprint_bytes(&before, &p);
            let asked = std::cell::Cell::new(0);
            let prior_of = |c: &ContentHash| {
                asked.set(asked.get() + 1);
                assert_eq!(*c, prior.content);
                Some(PriorRecord { runs: prior.runs.clone(), sketch: bytes_of_sketch(prior.sketch.as_ref().unwrap()) })
            };
            let lookup = Lookup { known: &|_| false, prior: &prior_of };
            let as_prior = Prior { content: prior.content, size: before.len() as u64 };
            let fp = fingerprint_many(&[&grown[..]], &[Some(as_prior)], &p, lookup).pop().unwrap();
            prop_assert_eq!(fp, fingerprint_bytes(&grown, &p));
            // Asked once for a prior with bytes: its cuts are taken first.
            prop_assert_eq!(asked.get(), usize::from(!before.is_empty()));
        }

        /// A file given new bytes at its start, fingerprinted with its prior
        /// content held whole: the same fingerprint as from its bytes, but
        /// for a marker sample in the prior's sketch, which it has (as the
        /// sketch of its shingles and the marker would) exactly when it was
        /// sketched from that sketch: when the new bytes end at a word
        /// break and the prior has a whole shingle.
        #[test]
        fn a_file_given_a_new_start_fingerprints_as_from_its_bytes(
            words in proptest::collection::vec((1usize..12, 0u8..26), 0..3000),
            head in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\n'), 97u8..123], 1..3000),
            trim: bool,
            p in prior_params(),
        ) {
            let before = words_text(&words, trim);
            let data = [&head[..], &before[..]].concat();
            let prior = fingerprint_bytes(&before, &p);
            let marked = with_sample(prior.sketch.as_ref().unwrap(), 1);
            let record = PriorRecord { runs: prior.runs.clone(), sketch: bytes_of_sketch(&marked) };
            let prior_of = |c: &ContentHash| (*c == prior.content).then(|| record.clone());
            let lookup = Lookup { known: &|_| false, prior: &prior_of };
            let as_prior = Prior { content: prior.content, size: before.len() as u64 };
            let fp = fingerprint_many(&[&data[..]], &[Some(as_prior)], &p, lookup).pop().unwrap();
            let mut fresh = fingerprint_bytes(&data, &p);
            let word_break = [head.last(), before.first()].into_iter().flatten().any(|&b| is_space(b));
            // (Or the file also begins with the prior, and grew from it.)
            let grown = data.starts_with(&before)
                && [before.last(), data.get(before.len())].into_iter().flatten().any(|&b| is_space(b));
            if words.len() >= crate::sketch::WORDS && (word_break || grown) {
                fresh.sketch = fresh.sketch.map(|s| with_sample(&s, 1));
            }
            prop_assert_eq!(fp, fresh);
        }

        /// A grown file streamed through a small buffer, with its prior,
        /// or with the prior of a file whose start was since edited: the
        /// same fingerprint as from its bytes, but for a marker sample in
        /// the prior's sketch, which it has (as the sketch of its shingles
        /// and the marker would) exactly when it was sketched from that
        /// sketch.
        #[test]
        fn a_grown_file_streamed_fingerprints_as_from_its_bytes(
            words in proptest::collection::vec((1usize..12, 0u8..26), 0..3000),
            tail in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\n'), 97u8..123], 1..3000),
            step in 600usize..8000,
            edit in proptest::option::of(any::<prop::sample::Index>()),
            trim: bool,
        ) {
            let p = ChunkParams::for_average(128).unwrap();
            let before = words_text(&words, trim);
            let mut grown = [&before[..], &tail].concat();
            if let Some(k) = edit.filter(|_| !before.is_empty()) {
                grown[k.index(before.len())] ^= 0x40;
            }
            let prior = fingerprint_bytes(&before, &p);
            let marked = with_sample(prior.sketch.as_ref().unwrap(), 1);
            let record = PriorRecord { runs: prior.runs.clone(), sketch: bytes_of_sketch(&marked) };
            let prior_of = |c: &ContentHash| (*c == prior.content).then(|| record.clone());
            let lookup = Lookup { known: &|_| false, prior: &prior_of };
            let data = &grown[..];
            let earlier = Earlier {
                prior: Prior { content: prior.content, size: before.len() as u64 },
                read_at: &|out: &mut [u8], at: u64| (&data[at as usize..]).read(out),
            };
            let r = data.take(data.len() as u64);
            let fp = fingerprint_reader_sized(r, Some(earlier), &p, WholeFrom::default(), &mut Vec::new(), step, lookup).unwrap();
            let mut fresh = fingerprint_bytes(&grown, &p);
            let word_break = [before.last(), tail.first()].into_iter().flatten().any(|&b| is_space(b));
            if grown.starts_with(&before) && words.len() >= crate::sketch::WORDS && word_break {
                fresh.sketch = fresh.sketch.map(|s| with_sample(&s, 1));
            }
            prop_assert_eq!(fp, fresh);
        }

        /// Contents cut at their priors' cuts where those may be TTTD's,
        /// and by TTTD elsewhere: the same chunks and MD5s as TTTD's over
        /// the bytes alone, whatever the prior was (the content before an
        /// append, an insertion, a deletion, a change in place or a cut at
        /// its end; or chunk lengths and keys of no content at all), with
        /// cuts at Tmax and backup points common, and several contents
        /// with and without priors in one batch.
        #[test]
        fn cuts_taken_from_a_prior_are_those_of_the_bytes(
            files in proptest::collection::vec(
                (
                    proptest::collection::vec(any::<u8>(), 0..8000),
                    0u8..7,
                    any::<prop::sample::Index>(),
                    proptest::collection::vec(any::<u8>(), 1..400),
                ),
                1..4,
            ),
            alphabet in prop_oneof![Just(256u16), Just(2u16), Just(5u16)],
            p in prop_oneof![
                Just(ChunkParams::for_average(100).unwrap()),
                Just(ChunkParams::default()),
                Just(ChunkParams { min: 40, max: 300, main_div: 1 << 20, backup_div: 60 }),
            ],
        ) {
            let mut contents = Vec::new();
            let mut priors = Vec::new();
            for (base, edit, at, piece) in &files {
                let (data, runs) = edited(&squeeze(base, alphabet), *edit, *at, &squeeze(piece, alphabet), &p);
                contents.push(data);
                priors.push(runs);
            }
            let slices: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
            // Every other content without its prior.
            let hints: Vec<Option<PriorCuts>> =
                priors.iter().enumerate().map(|(i, r)| (i % 2 == 0).then(|| PriorCuts::whole(r))).collect();
            let spans = |(chunks, ids, ends): (Vec<&[u8]>, Vec<[u8; 16]>, Vec<usize>)| {
                let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
                (lens, ids, ends)
            };
            let plain = spans(chunk_all(&slices, &vec![None; slices.len()], &p, true));
            prop_assert_eq!(spans(chunk_all(&slices, &hints, &p, true)), plain.clone());
            let all: Vec<Option<PriorCuts>> = priors.iter().map(|r| Some(PriorCuts::whole(r))).collect();
            prop_assert_eq!(spans(chunk_all(&slices, &all, &p, true)), plain);
        }

        /// A file larger than the read buffer, with its prior's record (its
        /// chunks and sketch; the prior edited as above): the fingerprint
        /// of its bytes, each buffer cut at the prior's cuts where a chunk
        /// of the prior starts at the buffer's start.
        #[test]
        fn a_file_streamed_with_its_prior_fingerprints_as_from_its_bytes(
            base in proptest::collection::vec(any::<u8>(), 0..30_000),
            edit in 0u8..7,
            at in any::<prop::sample::Index>(),
            piece in proptest::collection::vec(any::<u8>(), 1..400),
            alphabet in prop_oneof![Just(256u16), Just(3u16), Just(27u16)],
            step in 600usize..5000,
            p in prop_oneof![
                Just(ChunkParams::for_average(100).unwrap()),
                Just(ChunkParams { min: 40, max: 300, main_div: 1 << 20, backup_div: 60 }),
            ],
        ) {
            // Over 27 letters the last is a space: words for a sketch.
            let base: Vec<u8> = squeeze(&base, alphabet).into_iter().map(|b| if b == 26 { b' ' } else { b'a' + b }).collect();
            let (data, runs) = edited(&base, edit, at, &squeeze(&piece, alphabet), &p);
            let prior = fingerprint_bytes(&base, &p);
            let record = PriorRecord { runs, sketch: bytes_of_sketch(prior.sketch.as_ref().unwrap()) };
            let asked = std::cell::Cell::new(0);
            let prior_of = |c: &ContentHash| {
                asked.set(asked.get() + 1);
                (*c == prior.content).then(|| record.clone())
            };
            let lookup = Lookup { known: &|_| false, prior: &prior_of };
            let earlier = Earlier {
                prior: Prior { content: prior.content, size: base.len() as u64 },
                read_at: &|out: &mut [u8], at: u64| (&data[at as usize..]).read(out),
            };
            let r = (&data[..]).take(data.len() as u64);
            let fp = fingerprint_reader_sized(r, Some(earlier), &p, WholeFrom::default(), &mut Vec::new(), step, lookup).unwrap();
            prop_assert_eq!(fp, fingerprint_bytes(&data, &p));
            prop_assert!(asked.get() <= 1);
        }

        /// Several contents fingerprinted together, each as it would be
        /// alone; the index is asked about each in order, and a known one
        /// gets no sketch.
        #[test]
        fn many_equals_one_by_one(
            contents in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(b' '), 97u8..123, any::<u8>()], 0..6000), 0..12),
            known_mask in any::<u16>(),
        ) {
            let p = ChunkParams::for_average(256).unwrap();
            let slices: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
            let asked = std::cell::RefCell::new(Vec::new());
            let known = |c: &ContentHash| {
                let mut a = asked.borrow_mut();
                a.push(*c);
                known_mask >> (a.len() - 1) & 1 == 1
            };
            let many = fingerprint_many(&slices, &vec![None; slices.len()], &p, Lookup { known: &known, prior: &|_| None });
            prop_assert_eq!(many.len(), contents.len());
            for (k, (fp, data)) in many.iter().zip(&contents).enumerate() {
                let mut alone = fingerprint_bytes(data, &p);
                if known_mask >> k & 1 == 1 {
                    alone.sketch = None;
                }
                prop_assert_eq!(fp, &alone);
                prop_assert_eq!(asked.borrow()[k], alone.content);
            }
        }
    }
}

#[cfg(test)]
mod golden {
    use super::*;

    /// A fixed 64 KiB input: 32 KiB of xorshift noise, then 32 KiB of text.
    fn fixture() -> Vec<u8> {
        let mut x = 0x0123_4567_89ab_cdef_u64;
        let mut v: Vec<u8> = (0..32 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as u8
            })
            .collect();
        let words = ["chunk ", "the ", "file ", "similar ", "repository\n", "of ", "index ", "and "];
        let mut i = 0usize;
        while v.len() < 64 * 1024 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(words[(x % 8) as usize].as_bytes());
            i += 1;
        }
        v.truncate(64 * 1024);
        assert!(i > 0);
        v
    }

    /// Chunk boundaries and MD5s are part of the index format: an index made
    /// by another build must mean the same thing. If this fails, the chunker
    /// changed, and `SCHEMA_VERSION` must change with it.
    #[test]
    fn golden_offsets_and_md5s() {
        let data = fixture();
        let fp = fingerprint_bytes(&data, &ChunkParams::default());
        let mut off = 0usize;
        let mut got = Vec::new();
        for r in &fp.runs {
            for _ in 0..r.count {
                // A run keeps the chunk's key; the whole MD5 went into the
                // content hash, checked below.
                let id = ChunkId(Md5::digest(&data[off..off + r.len as usize]).into());
                assert_eq!(r.key, id.key(), "the chunk at {off}");
                got.push(format!("{off} {} {id}", r.len));
                off += r.len as usize;
            }
        }
        let got = got.join("\n");
        assert_eq!(got, GOLDEN.trim(), "chunks changed:\n{got}");
        assert_eq!(fp.content.to_string(), GOLDEN_CONTENT);
    }

    // Checked independently: Python's hashlib over the same spans of the same
    // fixture gives these MD5s, and MD5 over (id ‖ len u32 BE) the content hash.
    const GOLDEN_CONTENT: &str = "c24dc1e856472f5c102e2cbf41eba411";
    const GOLDEN: &str = "
0 615 d8e9f6aeb4354cebd58e2c8563311b77
615 1337 47112d5aad4eefcebb451ab12e3f0573
1952 1314 5182f9ee51f09f8b00637276afdcff63
3266 466 c2260826538569c174e14b73350ff5ef
3732 630 63ad9dd2da02745b67673097dec6185b
4362 887 8d872babc9f2bbf07b4ad91fc3632701
5249 859 5696de08c6d52ea699fae4691937e80d
6108 882 08b5dc92fab186846a1906989b96d4c4
6990 703 9796fd2a174399493aebfc7294383992
7693 910 5c871ba94fc26bd2e985639ad88f56a2
8603 2167 44e75e3b48777633f20c4a9ec6198371
10770 990 e68c7ea988e70bf2b730230bda3e3dc6
11760 2107 8085b0151290beffde5f0ec0ebff1cf3
13867 974 7d2b9622cb4669df611a032e1203f70c
14841 878 15811347a505420cf1471348545aaf38
15719 1009 e2df26e8ae4eae0de3189f75184793e9
16728 1428 676796408f22c1c16a9e5718f78a0f85
18156 1173 734cf8def76989a7107c831a4bb407d7
19329 469 f5198ef4c413d8a9e4b0535417fb01be
19798 677 c45bf1a95b001f9f556407011e73e6d3
20475 2094 b97e88b3d432456d921f9709778a8cc7
22569 823 439c8bf5d3396d760cb56097cc045e1c
23392 1385 482296ddb8890fde6cd8347783e7189b
24777 1957 b91ff975fc7ba9b966d886c450a584e3
26734 1089 09a88b9446018e06aba27fca03e2503f
27823 2035 b1817b056c9ee5e1bbc031051e82766f
29858 915 9fc8eb1557fb4778009de77cd3292066
30773 546 e0a467ce8f2d8cd1a6f474686a131f48
31319 629 6a257586d28cb1ebf5fec8a70005d5c5
31948 473 6c2f3b58fab3ab1df12dd51ba12217c8
32421 1355 092f5394bc7a23e69d1da2d38ff7ef42
33776 788 3056d16303c992eb14bc5fbe2752ca68
34564 502 e0c1ed196f0b375b4cf3e3cf560c6213
35066 555 ff661102b7d03d9aa0a290b9993c27e8
35621 1029 c6edbfbae6676ebcf33b9074d8229376
36650 502 f0805edeff33d957fd610e6ac00d7420
37152 480 ec347620f557694e29448915cf10a0df
37632 629 acf44f265b21ba0f77433000650a11c0
38261 1078 c8b6c8097bf0f23d6a29a9b24357f367
39339 501 f8734f8102bd1f2d60a5121fb7d49de0
39840 618 9a2bea899cef7382716f86bf3a7f4d3c
40458 593 48cf899807074424867fbffdcab492a3
41051 931 107854aeb8e2609e1ce65f399f4de933
41982 507 09cb9affbfa318d11beab93ab728d8a3
42489 1833 ebaf501148a28bfcfd525777bbd56aa9
44322 542 b8410b55920944b97cbccc14ad3da5aa
44864 862 18bd046b25df51b346bb00fc90fc87de
45726 613 a9cab233ae953779181aba3af985e0e5
46339 628 387af6ca85792ef59c19c12d0f315f0c
46967 1355 b5924708a5f11ea703b79b07cfec543b
48322 1001 ef31cb2c69d7d796ca51e79df50170a3
49323 952 0e84d2406d1a531c37057a45593c61d9
50275 1283 4db20b3d97a19f4adc979fc28ff218a2
51558 1489 272424e5af849f4c0b24dbb1259af6c1
53047 981 ebfff0bfd4dd60f5c1d470c9ef733fbf
54028 481 c3f74963873717117fa3b829a2454d12
54509 540 30bd82cf1cf0f891c6096947a0a436a3
55049 1447 10e6cd6a87c42482d6e38ef54c2dbc12
56496 568 6ffcb27e3cca859c3b06c7aba9efcdeb
57064 1098 b0d65dce5b3f7931f2dc828aa16a83e4
58162 1016 bf3d718ccb94e523526b483ff93a7353
59178 831 af0cb3bbfc1ff494b8c8809b54705521
60009 1175 8a7e2d622792d3a3add783009bd83d9e
61184 2127 1d56e80608eb4a186464b3a65a27065b
63311 638 20a19d21cd555ecd64535fc833852c20
63949 479 11af92a906c5f5aa967de7fdf0adfb45
64428 645 b51e79de87965b88ff28b9a4598aeb48
65073 463 f69786d12bf6485accc40923f1b83f77
";
}
