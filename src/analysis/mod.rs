//! Analysis of the live index (Forman §2.3–2.5): partition the distinct
//! contents by shared chunks, find links inside each part, cluster the links,
//! and expand contents back to file names.
//!
//! It reads only the index, never a file. It depends on "a content is a
//! multiset of weighted feature ids" ([`Features`]), not on how the features
//! were cut: a content has two, its TTTD chunks and a sample of its word
//! shingles ([`crate::sketch`]). Two contents are in one part when they share
//! a non-ignored chunk or enough posted sketch samples to be compared
//! ([`samples_needed`]), and a pair is a link when
//! either measure passes the thresholds (chunks see long shared runs and a
//! small file inside a large one; shingles see text with scattered edits,
//! which leave no 1 KB chunk intact).
//!
//! Memory is O(contents) for the partition plus O(one component) for links:
//! postings are streamed in key order (RocksDB is the disk-based sort), and a
//! component's chunk lists are loaded only while its links are computed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::fingerprint::{ChunkKey, ContentHash};
use crate::sketch::{Estimate, Sketch};
use crate::store::{
    ChunkContents, ContentById, ContentChunks, ContentId, ContentNames, ContentRecord, FileId, FileRecord, Files,
    SketchHead, Store, StoreError, TableIter, TemplateSamples, Templates,
};

/// Thresholds of an analysis.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalysisParams {
    /// A link needs at least this many bytes in common (counted in chunks, or
    /// estimated from the word sketch as containment × size),
    pub min_bytes: u64,
    /// ... and resemblance at least this (in chunks or in word shingles),
    pub min_similarity: f64,
    /// ... or the smaller file this much inside the larger (a `contains` link).
    pub min_containment: f64,
    /// Chunks in more distinct contents than this are ignored (None: automatic,
    /// see [`auto_cutoff`]).
    pub max_degree: Option<u64>,
}

impl Default for AnalysisParams {
    /// Defaults chosen from measured precision and recall: `docs/accuracy.md`.
    fn default() -> Self {
        AnalysisParams { min_bytes: 100, min_similarity: 0.5, min_containment: 0.8, max_degree: None }
    }
}

/// The common-chunk cutoff for `contents` distinct contents: Forman's "half
/// the files", capped at Broder's 1000 documents, and never below 100 so that
/// a small repository's versions of one document are never ignored.
pub fn auto_cutoff(contents: u64) -> u64 {
    (contents / 2).clamp(100, 1000)
}

/// A content as the analysis sees it: its size, its non-ignored chunks,
/// sorted by key, each with its length and occurrence count, its sketch, and
/// how many of the sketch's samples it posted in `sketch_contents` (template
/// samples left out of both).
#[derive(Clone, Debug, Default)]
pub struct Features {
    pub size: u64,
    pub chunks: Vec<(ChunkKey, u32, u32)>,
    pub sketch: Sketch,
    /// The posted samples are the smallest of the sketch, so a prefix of
    /// it: kept as a length, where a list of its own took ~90 bytes a
    /// content (a report of 345k small contents held them all at once).
    pub posted_len: u8,
}

impl Features {
    /// The samples posted in `sketch_contents` (template samples left out).
    pub fn posted(&self) -> &[u32] {
        &self.sketch.samples[..usize::from(self.posted_len)]
    }

    /// Bytes in non-ignored chunks.
    pub fn payload(&self) -> u64 {
        self.chunks.iter().map(|&(_, len, n)| u64::from(len) * u64::from(n)).sum()
    }

    /// common(A,B) = Σ over shared chunks of min(count in A, count in B) × length,
    /// by merging the two sorted lists (Forman: ~2.5× faster than a hash table).
    pub fn common(&self, other: &Features) -> u64 {
        let (a, b) = (&self.chunks, &other.chunks);
        let (mut i, mut j, mut sum) = (0, 0, 0u64);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    sum += u64::from(a[i].1) * u64::from(a[i].2.min(b[j].2));
                    i += 1;
                    j += 1;
                }
            }
        }
        sum
    }

    /// [`Features::common`], or None once it is known to stay under every
    /// value `enough` accepts (which must hold for any value above one it
    /// holds for: the chunk thresholds). `payload_a` and `payload_b` are
    /// the two sides' [`Features::payload`].
    ///
    /// A candidate pair is mostly far from the thresholds, and a large
    /// binary's chunk list (tens of thousands of chunks) is merged with
    /// every content that shares a chunk with it: on /usr/lib, merging was
    /// a fifth of a fresh report. So the shorter list is walked, and the
    /// longer searched ahead by galloping when it is much longer (a few
    /// steps a chunk, where the merge walked all of it); and every few
    /// chunks of the shorter, the common bytes found plus the payload
    /// still ahead in it (a bound on the rest) are tested against
    /// `enough`.
    pub fn common_if(
        &self,
        other: &Features,
        payload_a: u64,
        payload_b: u64,
        enough: impl Fn(u64) -> bool,
    ) -> Option<u64> {
        let swapped = other.chunks.len() < self.chunks.len();
        let (short, long, mut ahead) =
            if swapped { (&other.chunks, &self.chunks, payload_b) } else { (&self.chunks, &other.chunks, payload_a) };
        let gallop = long.len() >= GALLOP_FROM * short.len();
        let (mut j, mut sum) = (0, 0u64);
        for (i, &(key, len, n)) in short.iter().enumerate() {
            if i % COMMON_CHECK_EVERY == 0 && !enough(sum + ahead) {
                return None;
            }
            ahead = ahead.saturating_sub(u64::from(len) * u64::from(n));
            j += if gallop { gallop_to(&long[j..], key) } else { long[j..].iter().take_while(|c| c.0 < key).count() };
            let Some(&(k, long_len, long_n)) = long.get(j) else { break };
            if k == key {
                // The length of `self`'s chunk, as `common` counts it.
                sum += u64::from(if swapped { long_len } else { len }) * u64::from(n.min(long_n));
                j += 1;
            }
        }
        Some(sum)
    }
}

/// [`Features::common_if`] searches the longer list by galloping when it
/// is this many times the shorter.
const GALLOP_FROM: usize = 16;

/// [`Features::common_if`] tests its bound at every this many chunks of the
/// shorter list.
const COMMON_CHECK_EVERY: usize = 16;

/// How many of `list`'s first entries have keys below `key`: 1, 2, 4, …
/// entries ahead until one is not, then a binary search in the last step.
fn gallop_to(list: &[(ChunkKey, u32, u32)], key: ChunkKey) -> usize {
    let mut step = 1;
    while step <= list.len() && list[step - 1].0 < key {
        step *= 2;
    }
    let from = step / 2;
    from + list[from..step.min(list.len())].partition_point(|c| c.0 < key)
}

/// The similarity measures of a pair: in chunks (common bytes over
/// payloads, DESIGN.md's definitions) and in word shingles (estimated).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    pub common: u64,
    pub resemblance: f64,
    /// c(A in B) = common / payload A.
    pub a_in_b: f64,
    /// c(B in A) = common / payload B.
    pub b_in_a: f64,
    /// Word-shingle resemblance and containments, from the sketches.
    pub words: Estimate,
    /// Bytes in common estimated from the words: c(A in B) × size of A.
    pub words_common: u64,
}

impl Measures {
    /// Chunk measures alone (the word estimate left at zero).
    pub fn new(common: u64, payload_a: u64, payload_b: u64) -> Measures {
        let ratio = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        Measures {
            common,
            resemblance: ratio(common, (payload_a + payload_b).saturating_sub(common)),
            a_in_b: ratio(common, payload_a),
            b_in_a: ratio(common, payload_b),
            words: Estimate::default(),
            words_common: 0,
        }
    }

    /// Both measures of a pair, given its chunk common bytes and its
    /// (sketch, payload, size) sides: for tests (`query::similar_to`
    /// takes each candidate's word estimate once, for several payloads).
    #[cfg(test)]
    fn with_words(common: u64, a: (&Sketch, u64, u64), b: (&Sketch, u64, u64)) -> Measures {
        Measures::new(common, a.1, b.1).and_words(Some(a.0.estimate(b.0)), a.2, b.2)
    }

    pub(crate) fn and_words(self, words: Option<Estimate>, size_a: u64, size_b: u64) -> Measures {
        match words {
            Some(words) => {
                let words_common = (words.a_in_b * size_a as f64).max(words.b_in_a * size_b as f64) as u64;
                Measures { words, words_common, ..self }
            }
            None => self,
        }
    }

    /// How much the smaller side is inside the larger, in chunks.
    pub fn containment(&self) -> f64 {
        self.a_in_b.max(self.b_in_a)
    }

    /// The larger of the two resemblances.
    pub fn best_resemblance(&self) -> f64 {
        self.resemblance.max(self.words.resemblance)
    }

    /// The larger of the two containments of A in B.
    pub fn best_a_in_b(&self) -> f64 {
        self.a_in_b.max(self.words.a_in_b)
    }

    /// Whether the chunk measures alone make a link under `p`: a test that
    /// holds for any common bytes above some that pass it.
    fn chunks_link(&self, p: &AnalysisParams) -> bool {
        self.common >= p.min_bytes.max(1)
            && (self.resemblance >= p.min_similarity || self.containment() >= p.min_containment)
    }

    /// The link kind under `p`, or None when the pair is not a link: the
    /// chunk measures or the word measures pass.
    pub fn kind(&self, p: &AnalysisParams) -> Option<LinkKind> {
        let min = p.min_bytes.max(1);
        let chunks = self.common >= min;
        // Word estimates decide only when they rest on enough samples (or
        // are exact); one shared sample is a resemblance, a containment
        // needs two.
        // Even an exact one: a sample is a shingle's hash rounded to 17
        // bits, so a one-shingle content (a small binary file is one
        // "word") matches one of a 1,000-shingle text's samples by chance
        // ~0.5 % of the time, and on one shared sample would be "wholly
        // inside" it (Django: 4 of 396 `similar` queries answered such a
        // file first, and 22 wrong answers in all).
        let w = &self.words;
        let words = self.words_common >= min && w.shared >= 1;
        if (chunks && self.resemblance >= p.min_similarity)
            || (words && w.resemblance_trusted() && w.resemblance >= p.min_similarity)
        {
            Some(LinkKind::Similar)
        } else if (chunks && self.containment() >= p.min_containment)
            || (words && w.shared >= 2 && w.trusted_containment() >= p.min_containment)
        {
            Some(LinkKind::Contains)
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkKind {
    Similar,
    /// The smaller file is mostly inside the larger one.
    Contains,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Similar => "similar",
            LinkKind::Contains => "contains",
        }
    }
}

/// A file name of a content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Name {
    /// Shared with the file table it came from: a large tree's report
    /// names ~100k files, and copying each path was half its naming time.
    #[serde(with = "arc_bytes")]
    pub path: Arc<[u8]>,
    pub size: u64,
    /// Ids grow as files are first indexed: a higher id is a newer name.
    pub id: FileId,
    /// Which file the name is: names with the same (device, inode) are
    /// hard links of one file, not copies. None when the record holds no
    /// device (written by schema 8 or older, until the next scan).
    pub file: Option<(u64, u64)>,
}

impl Name {
    fn new(id: FileId, rec: &FileRecord, path: Arc<[u8]>) -> Name {
        Name { path, size: rec.size, id, file: (rec.dev != 0).then_some((rec.dev, rec.inode)) }
    }
}

/// A shared path as one byte string (postcard writes a `Vec<u8>` byte by
/// byte otherwise, in the same wire format).
mod arc_bytes {
    use std::sync::Arc;

    pub fn serialize<S: serde::Serializer>(path: &Arc<[u8]>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(path)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<[u8]>, D::Error> {
        let b: &[u8] = serde_bytes::deserialize(d)?;
        Ok(Arc::from(b))
    }
}

/// Identical files: one content, several files (a file with several
/// names, hard links, is one copy).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdenticalSet {
    pub content: ContentHash,
    pub size: u64,
    pub names: Vec<Name>,
    /// (k, j): name k is a hard link of the earlier name j, the first
    /// name of its file; by k. Usually empty.
    hard_links: Vec<(u32, u32)>,
}

impl IdenticalSet {
    pub fn new(content: ContentHash, size: u64, names: Vec<Name>) -> IdenticalSet {
        let hard_links = hard_links(&names);
        IdenticalSet { content, size, names, hard_links }
    }

    /// Distinct files among the names.
    pub fn copies(&self) -> usize {
        self.names.len() - self.hard_links.len()
    }

    /// Bytes that all copies but one take.
    pub fn wasted(&self) -> u64 {
        self.size * (self.copies() as u64).saturating_sub(1)
    }

    /// The first name of the file name `k` is a hard link of, if it is one.
    pub fn link_of(&self, k: usize) -> Option<usize> {
        let at = self.hard_links.binary_search_by_key(&(k as u32), |l| l.0).ok()?;
        Some(self.hard_links[at].1 as usize)
    }
}

/// For each of `names`, the first name of its file when it is a hard link
/// of an earlier one.
pub fn links_among(names: &[Name]) -> Vec<Option<usize>> {
    let mut of = vec![None; names.len()];
    for (k, j) in hard_links(names) {
        of[k as usize] = Some(j as usize);
    }
    of
}

/// (k, j) for each name k that is a hard link of the earlier name j, the
/// first name of its file; by k.
fn hard_links(names: &[Name]) -> Vec<(u32, u32)> {
    // Names of known files by (file, place): equal files side by side,
    // the first name of each first.
    let mut files: Vec<((u64, u64), u32)> =
        names.iter().enumerate().filter_map(|(k, n)| Some((n.file?, k as u32))).collect();
    files.sort_unstable();
    let mut links: Vec<(u32, u32)> =
        files.chunk_by(|a, b| a.0 == b.0).flat_map(|same| same[1..].iter().map(|&(_, k)| (k, same[0].1))).collect();
    links.sort_unstable();
    links
}

/// One distinct content in a cluster, with every name it has.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Member {
    pub content: ContentHash,
    pub size: u64,
    pub payload: u64,
    pub names: Vec<Name>,
}

impl Member {
    /// For each name, the first name of its file when it is a hard link
    /// of an earlier one (as [`IdenticalSet::link_of`]).
    pub fn links_of(&self) -> Vec<Option<usize>> {
        links_among(&self.names)
    }

    /// Distinct files among the names: a file with several names (hard
    /// links) is one.
    pub fn files(&self) -> usize {
        let n = self.names.len();
        if n < 2 {
            return n;
        }
        // A member's few copies are compared pairwise, with nothing
        // allocated; many are sorted.
        if n <= 16 {
            let linked = (1..n).filter(|&k| {
                let f = self.names[k].file;
                f.is_some() && self.names[..k].iter().any(|b| b.file == f)
            });
            return n - linked.count();
        }
        n - hard_links(&self.names).len()
    }
}

/// A link between two members of a cluster (indices into `members`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Link {
    pub a: usize,
    pub b: usize,
    pub measures: Measures,
    pub kind: LinkKind,
}

/// A connected component of links.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cluster {
    /// Stable while the cluster's set of contents does not change.
    pub id: u64,
    pub members: Vec<Member>,
    pub links: Vec<Link>,
}

impl Cluster {
    /// Files in the cluster, a file with several names counted once.
    pub fn files(&self) -> usize {
        self.members.iter().map(Member::files).sum()
    }

    /// Their bytes, a file with several names counted once.
    pub fn bytes(&self) -> u64 {
        self.members.iter().map(|m| m.size * m.files() as u64).sum()
    }

    /// Formats the id as users type it.
    pub fn id_str(&self) -> String {
        cluster_id_str(self.id)
    }
}

pub fn cluster_id_str(id: u64) -> String {
    format!("{id:012x}")[..12].to_string()
}

/// What an analysis found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Analysis {
    /// The index's sequence number the analysis was made at.
    pub sequence: u64,
    pub params: AnalysisParams,
    pub files: u64,
    pub contents: u64,
    pub bytes: u64,
    pub cutoff: u64,
    /// Chunks ignored (over the cutoff, or templates) and their bytes.
    pub ignored: Totals,
    pub identical: Vec<IdenticalSet>,
    pub clusters: Vec<Cluster>,
    /// Contents whose names are all one file (hard links): no identical
    /// set, but a directory of such names can still be a copy of another
    /// ([`dirs`]).
    pub linked: Vec<Linked>,
}

/// A content whose several names are all one file (hard links).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Linked {
    pub content: ContentHash,
    pub size: u64,
    pub ids: Vec<FileId>,
}

impl Analysis {
    pub fn wasted(&self) -> u64 {
        self.identical.iter().map(IdenticalSet::wasted).sum()
    }
}

/// Union-find over dense indices, by size with path halving.
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    pub fn new(n: usize) -> Self {
        UnionFind { parent: (0..n as u32).collect(), size: vec![1; n] }
    }

    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = p;
        }
        x
    }

    pub fn union(&mut self, a: u32, b: u32) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        if self.size[a as usize] < self.size[b as usize] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b as usize] = a;
        self.size[a as usize] += self.size[b as usize];
    }

    /// The groups with more than one member, each sorted, in order of their
    /// smallest member.
    pub fn groups(&mut self) -> Vec<Vec<u32>> {
        let n = self.parent.len();
        let mut by_root: HashMap<u32, Vec<u32>> = HashMap::new();
        for x in 0..n as u32 {
            let r = self.find(x);
            if self.size[r as usize] > 1 {
                by_root.entry(r).or_default().push(x);
            }
        }
        let mut groups: Vec<Vec<u32>> = by_root.into_values().collect();
        groups.sort_unstable_by_key(|g| g[0]);
        groups
    }
}

/// The live contents (those with a name), sorted, with the ids of their
/// names, from one scan of `content_names`.
fn live_contents(store: &Store) -> Result<(Vec<ContentHash>, Vec<Vec<FileId>>), StoreError> {
    let (mut contents, mut ids): (Vec<ContentHash>, Vec<Vec<FileId>>) = (Vec::new(), Vec::new());
    for item in store.scan::<ContentNames>() {
        let ((content, id), ()) = item?;
        if contents.last() == Some(&content) {
            ids.last_mut().expect("pushed with contents").push(id);
        } else {
            contents.push(content);
            ids.push(vec![id]);
        }
    }
    Ok((contents, ids))
}

/// Where each content id of the postings sits among the live contents
/// (sorted by hash), from one scan of `content_by_id` (in id order): the
/// postings name contents by id, the analysis by their place.
pub(crate) struct Places {
    /// (id, place), sorted by id.
    by_id: Vec<(ContentId, u32)>,
    /// The place of each id, looked up for postings a partition scans
    /// (1.2 million on /usr/share): a binary search each was a tenth of a
    /// fresh report there.
    slots: Slots,
}

impl Places {
    /// From the id of each live content, by place.
    pub(crate) fn from_ids(ids: &[ContentId]) -> Places {
        let mut by_id: Vec<(ContentId, u32)> = ids.iter().enumerate().map(|(i, &id)| (id, i as u32)).collect();
        by_id.sort_unstable();
        Places::sorted(by_id)
    }

    fn sorted(by_id: Vec<(ContentId, u32)>) -> Places {
        let slots = Slots::new(by_id.iter().map(|&(id, place)| (id.0, place)));
        Places { by_id, slots }
    }

    /// The id of each of the `n` live contents, by place.
    pub(crate) fn ids(&self, n: usize) -> Vec<ContentId> {
        let mut ids = vec![ContentId(0); n];
        for &(id, i) in &self.by_id {
            ids[i as usize] = id;
        }
        ids
    }

    pub(crate) fn new(store: &Store, contents: &[ContentHash]) -> Result<Places, StoreError> {
        let mut by_id = Vec::with_capacity(contents.len());
        for item in store.scan::<ContentById>() {
            let (id, hash) = item?;
            // Contents kept only for history have an id and no place.
            if let Ok(i) = contents.binary_search(&hash) {
                by_id.push((id, i as u32));
            }
        }
        Ok(Places::sorted(by_id))
    }

    /// The place of a live content.
    pub(crate) fn of(&self, id: ContentId) -> Option<u32> {
        match self.slots.get(id.0) {
            Slot::At(place) => Some(place),
            Slot::Search => self.by_id.binary_search_by_key(&id, |&(c, _)| c).ok().map(|k| self.by_id[k].1),
            Slot::None => None,
        }
    }
}

/// A value for each of a sorted list of ids (file or content ids: each a
/// counter, so dense but for the holes of those gone), in a table indexed
/// by `id − first` when the ids are dense enough (the table is then at
/// most about four times the list); else the caller searches the list.
pub(crate) struct Slots {
    first: u64,
    at: Vec<u32>,
}

/// What [`Slots::get`] knows of an id.
pub(crate) enum Slot {
    At(u32),
    None,
    /// No table: search the list.
    Search,
}

impl Slots {
    /// From (id, value) pairs in increasing order of id; no value is
    /// `u32::MAX`.
    pub(crate) fn new(ids: impl ExactSizeIterator<Item = (u64, u32)> + Clone) -> Slots {
        let n = ids.len();
        let (Some((first, _)), Some((last, _))) = (ids.clone().next(), ids.clone().last()) else {
            return Slots { first: 0, at: Vec::new() };
        };
        let span = (last - first).saturating_add(1);
        let mut at = Vec::new();
        if span <= 4 * n as u64 + 1024 {
            at = vec![u32::MAX; span as usize];
            for (id, value) in ids {
                at[(id - first) as usize] = value;
            }
        }
        Slots { first, at }
    }

    pub(crate) fn get(&self, id: u64) -> Slot {
        if self.at.is_empty() {
            return Slot::Search;
        }
        let slot = id.checked_sub(self.first).and_then(|k| self.at.get(usize::try_from(k).ok()?));
        match slot {
            Some(&v) if v != u32::MAX => Slot::At(v),
            _ => Slot::None,
        }
    }
}

/// Every file's path and size by id, from one scan of `files`: a report
/// names most files, and one sequential pass is far cheaper than a point
/// lookup per name.
/// Sorted by id (the scan's key order); `at[id - first]` is the place of
/// each id when the ids are dense (file ids are a counter, so they are,
/// but for the holes deleted files leave), else a lookup is a binary search.
pub(crate) struct FileTable {
    /// By id: each file's name.
    files: Vec<Name>,
    slots: Slots,
}

impl FileTable {
    pub(crate) fn load(store: &Store) -> Result<FileTable, StoreError> {
        let mut files = Vec::new();
        for item in store.scan::<Files>() {
            let (id, mut rec) = item?;
            let path = Arc::from(std::mem::take(&mut rec.path));
            files.push(Name::new(id, &rec, path));
        }
        Ok(FileTable::new(files))
    }

    /// From names sorted by id.
    fn new(files: Vec<Name>) -> FileTable {
        let slots = Slots::new(files.iter().enumerate().map(|(k, f)| (f.id.0, k as u32)));
        FileTable { files, slots }
    }

    /// The size of each content whose names have these ids (that of a
    /// name found; 0 for none).
    fn sizes(&self, ids: &[Vec<FileId>]) -> Vec<u64> {
        ids.iter().map(|ids| ids.iter().find_map(|&id| self.get(id)).map_or(0, |n| n.size)).collect()
    }

    fn get(&self, id: FileId) -> Option<&Name> {
        let k = match self.slots.get(id.0) {
            Slot::At(k) => k as usize,
            Slot::Search => self.files.binary_search_by_key(&id, |n| n.id).ok()?,
            Slot::None => return None,
        };
        self.files.get(k)
    }

    /// The names of these ids, sorted by path.
    fn names(&self, ids: &[FileId]) -> Vec<Name> {
        let mut names: Vec<Name> = ids.iter().filter_map(|&id| self.get(id).cloned()).collect();
        names.sort_by(|a, b| a.path.cmp(&b.path));
        names
    }
}

/// Where an analysis takes its names from.
pub(crate) enum Namer<'s> {
    /// Every file record, read whole.
    Table(FileTable),
    /// The names of the analysis brought up to date, where they are still
    /// right, and the records of the others.
    Patched(Patch<'s>),
}

/// The names an earlier analysis gave its identical sets and cluster
/// members, by content, and the ids of the file records written since
/// (or a superset of them).
pub(crate) struct Patch<'s> {
    pub store: &'s Store,
    /// By content hash, whose first 8 bytes are hash enough.
    pub names: HashMap<ContentHash, Vec<Name>, IdHash>,
    pub changed: HashSet<u64>,
    /// Contents named from their records.
    pub read: AtomicUsize,
}

impl Patch<'_> {
    /// Takes the names out of `earlier`, for the file ids in `changed`.
    pub(crate) fn new(store: &Store, earlier: Analysis, changed: HashSet<u64>) -> Patch<'_> {
        let mut names = HashMap::with_capacity_and_hasher(earlier.identical.len(), IdHash::default());
        for set in earlier.identical {
            names.insert(set.content, set.names);
        }
        for m in earlier.clusters.into_iter().flat_map(|c| c.members) {
            names.entry(m.content).or_insert(m.names);
        }
        Patch { store, names, changed, read: AtomicUsize::new(0) }
    }
}

impl Namer<'_> {
    /// The names of the file ids of `content`, sorted by path.
    fn names(&self, content: &ContentHash, ids: &[FileId]) -> Result<Vec<Name>, StoreError> {
        let p = match self {
            Namer::Table(t) => return Ok(t.names(ids)),
            Namer::Patched(p) => p,
        };
        // Kept when the content has the same names as then, none of
        // whose records was written since.
        if let Some(earlier) = p.names.get(content) {
            if earlier.len() == ids.len() && ids.iter().all(|id| !p.changed.contains(&id.0)) {
                let mut was: Vec<FileId> = earlier.iter().map(|n| n.id).collect();
                was.sort_unstable();
                let mut now = ids.to_vec();
                now.sort_unstable();
                if was == now {
                    return Ok(earlier.clone());
                }
            }
        }
        p.read.fetch_add(1, Ordering::Relaxed);
        names_by_id(p.store, ids.iter().copied())
    }
}

/// Features that take no part in analysis: template chunks and samples,
/// and (once partitioned) over-common chunks.
#[derive(Clone, Debug, Default)]
pub struct Ignored {
    /// By their keys, as the postings name them. (Looked up for every
    /// chunk of every content an analysis or query loads: hashes already,
    /// they need no hashing.)
    pub chunks: HashSet<ChunkKey, IdHash>,
    pub samples: HashSet<u32, IdHash>,
}

/// The template chunks and sketch samples.
pub fn templates(store: &Store) -> Result<Ignored, StoreError> {
    Ok(Ignored {
        chunks: store.scan::<Templates>().map(|r| r.map(|(id, _)| id)).collect::<Result<_, _>>()?,
        samples: store.scan::<TemplateSamples>().map(|r| r.map(|(s, _)| s)).collect::<Result<_, _>>()?,
    })
}

/// The partition of the live contents by shared non-ignored chunks.
struct Partition {
    /// The id of each live content, by place.
    content_ids: Vec<ContentId>,
    components: Vec<Vec<u32>>,
    ignored: Ignored,
    /// Chunks over the cutoff (in `ignored.chunks` with the templates).
    over_common: Vec<ChunkKey>,
    /// Posted samples held by more than the sample cap: they make no
    /// candidates.
    common_samples: HashSet<u32>,
    totals: Totals,
}

/// What an analysis ignored, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Chunks over the cutoff, and the bytes they account for.
    pub common_chunks: u64,
    pub common_bytes: u64,
    /// Chunks marked as templates, and their bytes.
    pub template_chunks: u64,
    pub template_bytes: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.common_chunks += other.common_chunks;
        self.common_bytes += other.common_bytes;
        self.template_chunks += other.template_chunks;
        self.template_bytes += other.template_bytes;
    }
}

/// Joins the contents (places) that share a non-ignored chunk, by a scan
/// of the chunk postings in key order (all contents of one chunk are
/// adjacent), and the pairs that share enough posted sketch samples to be
/// candidates, from the records.
fn partition(
    store: &Store,
    contents: &[ContentHash],
    templates: &Ignored,
    cutoff: u64,
    threads: usize,
) -> Result<Partition, StoreError> {
    let started = std::time::Instant::now();
    // Each live content's id, posted samples and brief, from its record
    // (read as far as its sketch's head): the ids place the postings, and
    // the posted samples are those the sample postings hold. (Reading
    // `content_by_id` and the 5.4 million sample postings of 341k small
    // contents took ~1.7 s of ~3.5.)
    let Heads { ids, briefs, posted } = heads(store, contents, templates, threads)?;
    let places = Places::sorted({
        let mut by_id: Vec<(ContentId, u32)> =
            ids.iter().enumerate().filter_map(|(i, id)| Some(((*id)?, i as u32))).collect();
        by_id.sort_unstable();
        by_id
    });
    drop(ids);
    let read = started.elapsed();
    let mut uf = UnionFind::new(contents.len());
    let mut p = Partition {
        content_ids: places.ids(contents.len()),
        components: Vec::new(),
        ignored: Ignored { chunks: HashSet::default(), samples: templates.samples.clone() },
        over_common: Vec::new(),
        common_samples: HashSet::new(),
        totals: Totals::default(),
    };
    // The chunk postings are scanned in ranges side by side, four ranges
    // of chunk keys a thread (chunk keys are hashes: the ranges hold
    // alike), taken by the threads in turn. A scan of 4 million chunk
    // postings (/usr/lib) took ~1.5 s on one thread.
    let parts = 4 * threads.clamp(1, 64) as u64;
    let bound = |k: u64| (k < parts).then(|| ChunkKey(((u128::from(k) << 64) / u128::from(parts)) as u64));
    let next = AtomicUsize::new(0);
    let mut scans: Vec<(usize, Result<ChunkGroups, StoreError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.clamp(1, 64))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let j = next.fetch_add(1, Ordering::Relaxed);
                        if j >= parts as usize {
                            break;
                        }
                        let (from, before) = (bound(j as u64), bound(j as u64 + 1));
                        done.push((j, chunk_groups(store, &places, templates, cutoff, from, before)));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("the posting scans do not panic")).collect()
    });
    // In key order, so that the over-common chunks are.
    scans.sort_unstable_by_key(|(j, _)| *j);
    for (_, scan) in scans {
        let scan = scan?;
        for (a, b) in scan.pairs {
            uf.union(a, b);
        }
        p.ignored.chunks.extend(scan.ignored);
        p.over_common.extend(scan.over_common);
        p.totals.add(&scan.totals);
    }
    let chunks = started.elapsed();
    // Two contents sharing a posted sample are joined only when they are
    // candidates ([`LinkCtx::candidates`]): they share as many posted
    // samples as [`samples_needed`] asks. Posted samples are rounded
    // ([`crate::sketch::SAMPLE_BITS`]), so each of 341k small contents
    // shared one with ~20 others by chance, and joining every holder made
    // them all one component, whose features were then all held at once.
    let (groups, common_samples) = sample_groups(posted, sample_cap(cutoff));
    for (a, b) in join_candidates(&groups, &briefs, threads) {
        uf.union(a, b);
    }
    tracing::debug!(
        "partition: records read in {read:?}, chunk postings in {:?}, {} posted samples in {} groups joined in {:?}",
        chunks - read,
        groups.members.len(),
        groups.ends.len(),
        started.elapsed() - chunks
    );
    p.common_samples = common_samples;
    p.components = uf.groups();
    Ok(p)
}

/// What the partition reads of the live contents' records ([`heads`]).
#[derive(Default)]
struct Heads {
    /// Each content's id, by place (None when it has no record, an
    /// inconsistency `simd check` reports).
    ids: Vec<Option<ContentId>>,
    /// Each content's [`Brief`], by place.
    briefs: Vec<Brief>,
    /// Each posted sample that is no template's, with the place of the
    /// content that posted it: `sample << 32 | place`. (In one array: a
    /// list per content was an allocation each, ~100 bytes a content.)
    posted: Vec<u64>,
}

/// The [`Heads`] of every live content, read by the threads side by side.
fn heads(store: &Store, contents: &[ContentHash], templates: &Ignored, threads: usize) -> Result<Heads, StoreError> {
    let all: Vec<u32> = (0..contents.len() as u32).collect();
    let per = all.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<Heads> = std::thread::scope(|s| {
        let handles: Vec<_> =
            all.chunks(per).map(|part| s.spawn(move || heads_in_order(store, contents, part, templates))).collect();
        handles.into_iter().map(|h| h.join().expect("record readers do not panic")).collect::<Result<_, _>>()
    })?;
    let mut heads = Heads::default();
    for part in parts {
        heads.ids.extend(part.ids);
        heads.briefs.extend(part.briefs);
        heads.posted.extend(part.posted);
    }
    Ok(heads)
}

/// The [`Heads`] of `members` (indices into the sorted `contents`,
/// increasing). Without template samples only the sketch's head is
/// decoded; with them, the whole sketch (its count is that of the samples
/// left).
fn heads_in_order(
    store: &Store,
    contents: &[ContentHash],
    members: &[u32],
    templates: &Ignored,
) -> Result<Heads, StoreError> {
    // At most POSTED a content: sized once, where growing it copied it.
    let mut posted = Vec::with_capacity(members.len() * crate::sketch::POSTED);
    let mut post = |place: u32, samples: &[u32]| {
        posted.extend(samples.iter().map(|&s| (u64::from(s) << 32) | u64::from(place)));
    };
    let read = if templates.samples.is_empty() {
        let head = |place: u32, h: SketchHead| {
            post(place, &h.posted);
            (Some(h.id), Brief { posted: h.posted.len() as u8, level: h.level, samples: h.samples })
        };
        read_in_order(
            contents,
            members,
            |c| store.get_sketch_head(c),
            |from| store.scan_sketch_heads(Some(from), None),
            head,
        )?
    } else {
        let head = |place: u32, rec: ContentRecord| {
            let id = Some(rec.id);
            let (sketch, n) = without_samples(rec.sketch, &templates.samples);
            post(place, &sketch.samples[..usize::from(n)]);
            (id, Brief::of_sketch(&sketch, n))
        };
        read_in_order(
            contents,
            members,
            |c| store.get::<ContentChunks>(c),
            |from| store.scan_range::<ContentChunks>(Some(from), None),
            head,
        )?
    };
    let (ids, briefs) = read.into_iter().unzip();
    Ok(Heads { ids, briefs, posted })
}

/// What `map` makes of the record of each of `members` (indices into the
/// sorted `contents`, increasing), read by `get` or `scan`. When they are
/// at least half of the contents between the first and the last, the
/// records are read by one scan in key order, those of other contents
/// passed over (a point read each was ~1.8 s of a fresh report of 341k
/// contents in one component); else by a point read each. A member with
/// no record (an inconsistency `simd check` reports) gets the default.
fn read_in_order<'s, V, W: Default>(
    contents: &[ContentHash],
    members: &[u32],
    get: impl Fn(&ContentHash) -> Result<Option<V>, StoreError>,
    scan: impl FnOnce(&ContentHash) -> TableIter<'s, ContentChunks, V>,
    mut map: impl FnMut(u32, V) -> W,
) -> Result<Vec<W>, StoreError> {
    let (Some(&first), Some(&last)) = (members.first(), members.last()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(members.len());
    let span = (last - first) as usize + 1;
    if members.len() < SCAN_FEATURES_FROM || 2 * members.len() < span {
        for &m in members {
            out.push(get(&contents[m as usize])?.map(|v| map(m, v)).unwrap_or_default());
        }
        return Ok(out);
    }
    let mut wanted = members.iter().map(|&m| (m, &contents[m as usize])).peekable();
    for item in scan(&contents[first as usize]) {
        let (hash, value) = item?;
        while wanted.next_if(|&(_, w)| *w < hash).is_some() {
            out.push(W::default());
        }
        if let Some((m, _)) = wanted.next_if(|&(_, w)| *w == hash) {
            out.push(map(m, value));
        }
        if wanted.peek().is_none() {
            break;
        }
    }
    out.extend(wanted.map(|_| W::default()));
    Ok(out)
}

/// The holders (places) of each posted sample held by two or more
/// contents and no more than `cap`, and the samples held by more than
/// `cap`: the sample postings, gathered from the contents' heads
/// ([`Heads::posted`]).
fn sample_groups(mut held: Vec<u64>, cap: u64) -> (Groups, HashSet<u32>) {
    held.sort_unstable();
    let (mut groups, mut common) = (Groups::default(), HashSet::new());
    let mut k = 0;
    while k < held.len() {
        let sample = (held[k] >> 32) as u32;
        let n = held[k..].iter().take_while(|&&x| (x >> 32) as u32 == sample).count();
        if n as u64 > cap {
            common.insert(sample);
        } else if n > 1 {
            // Sorted by sample, then by place.
            groups.push(held[k..k + n].iter().map(|&x| x as u32));
        }
        k += n;
    }
    (groups, common)
}

/// Groups of places, each the holders of one key, in one array: the
/// members of group k are `members[ends[k - 1]..ends[k]]`, in increasing
/// order.
#[derive(Debug, Default)]
struct Groups {
    members: Vec<u32>,
    ends: Vec<u32>,
}

impl Groups {
    /// Adds a group of members in increasing order.
    fn push(&mut self, group: impl IntoIterator<Item = u32>) {
        let start = self.members.len();
        self.members.extend(group);
        debug_assert!(self.members[start..].windows(2).all(|w| w[0] < w[1]));
        self.ends.push(u32::try_from(self.members.len()).expect("fewer than 2^32 postings in groups"));
    }

    /// Where group k lies in `members` (and in any array beside it).
    fn range(&self, k: usize) -> std::ops::Range<usize> {
        let start = if k == 0 { 0 } else { self.ends[k - 1] as usize };
        start..self.ends[k] as usize
    }

    fn get(&self, k: usize) -> &[u32] {
        &self.members[self.range(k)]
    }

    /// The groups of each place among `n`, as groups of group indices.
    fn by_member(&self, n: usize) -> Groups {
        let mut starts = vec![0u32; n + 1];
        for &m in &self.members {
            starts[m as usize + 1] += 1;
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut members = vec![0u32; self.members.len()];
        let mut at = starts.clone();
        for k in 0..self.ends.len() {
            for &m in self.get(k) {
                members[at[m as usize] as usize] = k as u32;
                at[m as usize] += 1;
            }
        }
        starts.remove(0);
        Groups { members, ends: starts }
    }
}

/// How many times each place was met, in an open-addressed table sized for
/// one place's co-holders (a few hundred at most, held by samples under
/// the cap: the part of the table in use stays in the first level of
/// cache).
#[derive(Default)]
struct Tally {
    keys: Vec<u32>,
    counts: Vec<u8>,
    /// The slots filled since the last reset.
    used: Vec<u32>,
    /// Slots in use: the first `1 << bits` of the table.
    bits: u32,
}

impl Tally {
    /// Empties the table and sizes it for up to `n` distinct places.
    fn reset(&mut self, n: usize) {
        for &slot in &self.used {
            self.keys[slot as usize] = u32::MAX;
        }
        self.used.clear();
        let size = (2 * n).next_power_of_two().max(16);
        if size > self.keys.len() {
            self.keys = vec![u32::MAX; size];
            self.counts = vec![0; size];
        }
        self.bits = size.trailing_zeros();
    }

    /// Counts one more meeting with `place`; returns its count so far
    /// (saturating).
    fn count(&mut self, place: u32) -> u8 {
        let mask = (1usize << self.bits) - 1;
        let mut slot = (place.wrapping_mul(0x9e37_79b1) >> (32 - self.bits)) as usize;
        loop {
            match self.keys[slot] {
                k if k == place => {
                    self.counts[slot] = self.counts[slot].saturating_add(1);
                    return self.counts[slot];
                }
                u32::MAX => {
                    self.keys[slot] = place;
                    self.counts[slot] = 1;
                    self.used.push(slot as u32);
                    return 1;
                }
                _ => slot = (slot + 1) & mask,
            }
        }
    }
}

/// The pairs of places (a < b) that share at least as many of `groups`
/// as their briefs need ([`Brief::needed`]): the candidates by posted
/// samples that [`LinkCtx::candidates`] finds, counted by the threads side
/// by side.
///
/// Each group's members are stored with their briefs, and a place's
/// co-holders are counted from its groups in a small table of its own: a
/// group is read whole where it lies, and nothing is looked up by place.
/// (A count per place, looked up for each co-holder as the link pass does,
/// was two cache misses a visit: ~2 s for the 38 million visits of 341k
/// small contents; sorting each place's co-holders, ~1 s.)
fn join_candidates(groups: &Groups, briefs: &[Brief], threads: usize) -> Vec<(u32, u32)> {
    let of = groups.by_member(briefs.len());
    let held: Vec<(u32, Brief)> = groups.members.iter().map(|&m| (m, briefs[m as usize])).collect();
    let workers = threads.max(1);
    let runs_of = |a: usize| of.get(a).iter().map(|&g| &held[groups.range(g as usize)]);
    let find = |k: usize| {
        let mut pairs = Vec::new();
        let mut tally = Tally::default();
        for a in (k..briefs.len()).step_by(workers) {
            let me = briefs[a];
            let runs = runs_of(a);
            tally.reset(runs.clone().map(<[_]>::len).sum());
            for run in runs {
                for &(b, brief) in run.iter().filter(|&&(b, _)| b > a as u32) {
                    if tally.count(b) == me.needed(brief) {
                        pairs.push((a as u32, b));
                    }
                }
            }
        }
        pairs
    };
    if workers == 1 {
        return find(0);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers).map(|k| s.spawn(move || find(k))).collect();
        handles.into_iter().flat_map(|h| h.join().expect("candidate workers do not panic")).collect()
    })
}

/// What [`chunk_groups`] found in a range of the chunk postings.
#[derive(Default)]
struct ChunkGroups {
    /// Pairs of places to join (consecutive holders of each chunk).
    pairs: Vec<(u32, u32)>,
    /// Template chunks and chunks over the cutoff.
    ignored: Vec<ChunkKey>,
    /// The chunks over the cutoff, in key order.
    over_common: Vec<ChunkKey>,
    totals: Totals,
}

/// The groups of contents holding each chunk of keys `from..before` (from
/// the first, to the last, where None): pairs to join for the chunks that
/// count, and those ignored.
fn chunk_groups(
    store: &Store,
    places: &Places,
    templates: &Ignored,
    cutoff: u64,
    from: Option<ChunkKey>,
    before: Option<ChunkKey>,
) -> Result<ChunkGroups, StoreError> {
    let mut found = ChunkGroups::default();
    let mut current: Option<ChunkKey> = None;
    // The current chunk's postings: the holder and the bytes it holds.
    let mut held: Vec<(ContentId, u64)> = Vec::new();
    let mut group: Vec<u32> = Vec::new();
    let mut flush = |chunk: ChunkKey, held: &mut Vec<(ContentId, u64)>| {
        // Most chunks have one holder (/usr/lib: 3.5 million of 4.1
        // million postings): such a chunk joins nothing and is under any
        // cutoff but 0, so its holder is not looked up. Postings name
        // contents by id in chunk order, so each lookup is a random read
        // of a table of the contents (most of this scan's time).
        let template = templates.chunks.contains(&chunk);
        if held.len() > 1 || cutoff == 0 || template {
            let mut bytes = 0u64;
            for &(id, b) in held.iter() {
                // Postings only exist for live contents; a miss would be an
                // inconsistency that `simd check` reports, so it is skipped.
                if let Some(i) = places.of(id) {
                    group.push(i);
                    bytes += b;
                }
            }
            if template {
                found.totals.template_chunks += 1;
                found.totals.template_bytes += bytes;
                found.ignored.push(chunk);
            } else if group.len() as u64 > cutoff {
                found.totals.common_chunks += 1;
                found.totals.common_bytes += bytes;
                found.ignored.push(chunk);
                found.over_common.push(chunk);
            } else {
                found.pairs.extend(group.windows(2).map(|w| (w[0], w[1])));
            }
            group.clear();
        }
        held.clear();
    };
    let key = |c: Option<ChunkKey>| c.map(|c| (c, ContentId(0)));
    for item in store.scan_range::<ChunkContents>(key(from).as_ref(), key(before).as_ref()) {
        let ((chunk, content), posting) = item?;
        if current != Some(chunk) {
            if let Some(c) = current {
                flush(c, &mut held);
            }
            current = Some(chunk);
        }
        held.push((content, u64::from(posting.len) * u64::from(posting.count)));
    }
    if let Some(c) = current {
        flush(c, &mut held);
    }
    Ok(found)
}

/// Loads a content's features: its chunk list and sketch without ignored
/// chunks and samples.
pub fn features(store: &Store, content: &ContentHash, ignored: &Ignored) -> Result<Features, StoreError> {
    Ok(features_of(store.get::<ContentChunks>(content)?.unwrap_or_default(), ignored))
}

/// [`features`] of a record read.
fn features_of(rec: ContentRecord, ignored: &Ignored) -> Features {
    let chunks = rec.chunk_counts().into_iter().filter(|(id, _, _)| !ignored.chunks.contains(id)).collect();
    let (sketch, posted_len) = without_samples(rec.sketch, &ignored.samples);
    Features { size: rec.size, chunks, sketch, posted_len }
}

/// [`features`] of each of `members` (indices into the sorted `contents`,
/// increasing), read by one scan or a point read each
/// ([`read_in_order`]).
fn features_in_order(
    store: &Store,
    contents: &[ContentHash],
    members: &[u32],
    ignored: &Ignored,
) -> Result<Vec<Features>, StoreError> {
    read_in_order(
        contents,
        members,
        |c| store.get::<ContentChunks>(c),
        |from| store.scan_range::<ContentChunks>(Some(from), None),
        |_, rec| features_of(rec, ignored),
    )
}

/// Members from which [`read_in_order`] may scan rather than look up.
const SCAN_FEATURES_FROM: usize = 256;

/// `sketch` without the `ignored` samples, and how many of the samples
/// left it posted. The posted samples are the bottom of the whole sketch,
/// so those left of them are the samples left up to the last one posted:
/// the candidates found here are then those the postings would find.
fn without_samples<S: std::hash::BuildHasher>(sketch: Sketch, ignored: &HashSet<u32, S>) -> (Sketch, u8) {
    let last_posted = sketch.posted().last().copied();
    let sketch = sketch.into_without(ignored);
    let posted_len = last_posted.map_or(0, |last| sketch.samples.partition_point(|&s| s <= last));
    (sketch, u8::try_from(posted_len).expect("at most POSTED samples are posted"))
}

/// Posted sketch samples two contents must share to be compared on their
/// sketches.
const MIN_SHARED_SAMPLES: usize = 2;

/// A posted sample held by more contents than this finds no candidates
/// (and joins no part). A pair at the thresholds shares about 10 of its 16
/// posted samples, most of them its own text; samples held by hundreds of
/// contents are common phrases (the English msgids of a hundred translation
/// catalogs) that would make every pair of their holders a candidate. On
/// Django: 683k candidate pairs → a fraction, report 1.9 s → 1.1–1.4 s,
/// F1 0.964 → 0.963.
const SAMPLE_DEGREE_CAP: u64 = 100;

/// The most contents a posted sample may be held by and still find
/// candidates: the sample cap, or the chunk cutoff when that is lower.
pub(crate) fn sample_cap(cutoff: u64) -> u64 {
    cutoff.min(SAMPLE_DEGREE_CAP)
}

/// A content with this many times the (estimated) shingles of another
/// needs only one posted sample in common with it to be compared.
///
/// Two contents share about 16·c·|A|/|B| of their 16 posted samples when A
/// (the smaller) is a fraction c inside B: 1.9 when a 3 KB page is 90 %
/// inside a 25 KB one, so asking two missed half of such pairs (measured on
/// the generator's corpus at scale 1: recall 0.75 on "containment only"
/// pairs, docs/accuracy.md).
const CONTAINS_RATIO: u64 = 4;

/// How many posted samples two contents must share to be compared on
/// their sketches: two, or one when a side posted only one or when one is
/// [`CONTAINS_RATIO`] times the other (it may contain it).
pub(crate) fn samples_needed(a: &Features, b: &Features) -> usize {
    usize::from(Brief::of(a).needed(Brief::of(b)))
}

/// What deciding whether a content is a candidate reads of it: how many
/// samples it posted, and its sketch's size and level (its estimated
/// shingles). Eight bytes, where its [`Features`] is ~80 bytes and a
/// pointer away: the link pass reads this for every co-holder of every
/// posted sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Brief {
    posted: u8,
    level: u8,
    samples: u32,
}

impl Brief {
    fn of(f: &Features) -> Brief {
        Brief::of_sketch(&f.sketch, f.posted_len)
    }

    /// The brief of a content whose sketch is `sketch` and that posted
    /// `posted` of its samples.
    fn of_sketch(sketch: &Sketch, posted: u8) -> Brief {
        let samples = u32::try_from(sketch.samples.len()).expect("a sketch holds at most a few thousand samples");
        Brief { posted, level: sketch.level, samples }
    }

    /// The content's number of distinct shingles, estimated from its sketch.
    fn shingles(self) -> u64 {
        u64::from(self.samples) << self.level
    }

    /// [`samples_needed`] for this content and `other`.
    fn needed(self, other: Brief) -> u8 {
        let need = (MIN_SHARED_SAMPLES as u8).min(self.posted).min(other.posted);
        let (sa, sb) = (self.shingles(), other.shingles());
        if sa.max(sb) >= CONTAINS_RATIO * sa.min(sb).max(1) {
            need.min(1)
        } else {
            need
        }
    }
}

/// Measures a candidate pair (a before b in content order) and says
/// whether it is a link, and of which kind.
pub(crate) fn link(
    a: &Features,
    b: &Features,
    payload_a: u64,
    payload_b: u64,
    params: &AnalysisParams,
) -> Option<(Measures, LinkKind)> {
    // The word comparison stops once the thresholds are out of reach
    // (None): most candidates are far from them.
    let words = a.sketch.estimate_if(&b.sketch, params.min_similarity, params.min_containment);
    // A link reports its common bytes exactly; a pair the words do not
    // link is measured in chunks only as far as they could still link it.
    let by_words = Measures::new(0, payload_a, payload_b).and_words(words, a.size, b.size).kind(params).is_some();
    let common = if by_words {
        a.common(b)
    } else {
        a.common_if(b, payload_a, payload_b, |c| Measures::new(c, payload_a, payload_b).chunks_link(params))?
    };
    let chunks = Measures::new(common, payload_a, payload_b);
    let m = chunks.and_words(words, a.size, b.size);
    let kind = m.kind(params)?;
    // A link made by its chunks reports its word measures too, even where
    // they stopped short of the thresholds.
    let m = match words {
        Some(_) => m,
        None => chunks.and_words(Some(a.sketch.estimate(&b.sketch)), a.size, b.size),
    };
    Some((m, kind))
}

/// A hasher for keys that are hashes already (chunk keys, sketch samples):
/// their bits are as good as SipHash's output, at no cost.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for (k, &b) in bytes.iter().take(8).enumerate() {
            self.0 ^= u64::from(b) << (8 * k);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_u32(&mut self, n: u32) {
        // Samples are small numbers at high levels, rounded to their top
        // bits (their low bits are zeros): spread them. A product's low
        // bits depend only on the factor's low bits, and the table indexes
        // its buckets by the hash's low bits, so the high half is folded
        // down onto them.
        let h = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
}

pub type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// A link between two live contents (indices into the sorted live
/// contents, a < b).
pub(crate) type ContentLink = (u32, u32, Measures, LinkKind);

/// A linked content's size and payload, by content index.
pub(crate) type MemberInfo = HashMap<u32, (u64, u64), IdHash>;

/// A link inside a component: (member, member, measures, kind).
type RawLink = (usize, usize, Measures, LinkKind);

/// Components with at least this many contents are split over threads.
const PARALLEL_COMPONENT: usize = 2000;

/// Which members of a component hold each key (a chunk, a posted sample)
/// that two or more of them hold: one array of members in runs by key, and
/// each key's run. A key held by one member finds no candidate and is left
/// out. (A map to a `Vec` per key cost an allocation and ~40 bytes for
/// each of a component's chunks, most of which no other member holds.)
struct Holders<K> {
    runs: HashMap<K, (u32, u32), IdHash>,
    members: Vec<u32>,
}

impl<K: Copy + Ord + std::hash::Hash> Holders<K> {
    /// From (key, member) pairs, members in increasing order per key.
    fn new(mut pairs: Vec<(K, u32)>) -> Self {
        pairs.sort_unstable();
        let (mut runs, mut members) = (HashMap::default(), Vec::new());
        let mut k = 0;
        while k < pairs.len() {
            let key = pairs[k].0;
            let end = k + pairs[k..].partition_point(|p| p.0 == key);
            if end - k >= 2 {
                let start = members.len() as u32;
                members.extend(pairs[k..end].iter().map(|p| p.1));
                runs.insert(key, (start, members.len() as u32));
            }
            k = end;
        }
        Holders { runs, members }
    }

    /// The members holding `key`, in increasing order (none when only one does).
    fn of(&self, key: &K) -> &[u32] {
        self.runs.get(key).map_or(&[], |&(s, e)| &self.members[s as usize..e as usize])
    }
}

/// What finding a component's links needs.
struct LinkCtx<'a> {
    feats: &'a [Features],
    /// Each member's [`Brief`], by member.
    briefs: Vec<Brief>,
    payloads: &'a [u64],
    holders: Holders<ChunkKey>,
    sample_holders: Holders<u32>,
    params: &'a AnalysisParams,
}

impl<'a> LinkCtx<'a> {
    fn new(
        feats: &'a [Features],
        payloads: &'a [u64],
        common_samples: &HashSet<u32>,
        params: &'a AnalysisParams,
    ) -> LinkCtx<'a> {
        // Inverted indexes of the component: chunk (and posted sample) → local
        // members holding it. Every holder of a non-ignored chunk or of a
        // sample under the cap is in this component (the partition joined them).
        let holders = Holders::new(
            feats.iter().enumerate().flat_map(|(i, f)| f.chunks.iter().map(move |c| (c.0, i as u32))).collect(),
        );
        let sample_holders = Holders::new(
            feats
                .iter()
                .enumerate()
                .flat_map(|(i, f)| {
                    f.posted().iter().filter(|s| !common_samples.contains(s)).map(move |&s| (s, i as u32))
                })
                .collect(),
        );
        let briefs = feats.iter().map(Brief::of).collect();
        LinkCtx { feats, briefs, payloads, holders, sample_holders, params }
    }

    /// Each member's brief beside what the current content has seen of it
    /// ([`LinkCtx::candidates`]'s state, one per thread).
    fn seen(&self) -> Vec<Seen> {
        self.briefs.iter().map(|&brief| Seen { stamp: u32::MAX, shared: 0, brief }).collect()
    }

    /// The members after `i` to measure against it, in `out`: those that
    /// share a chunk with it, or enough posted samples ([`samples_needed`];
    /// samples over the sample cap left out).
    ///
    /// The co-holders of a posted sample are far apart in memory (a sample
    /// of a large component is held by ~20 of its members by chance), so
    /// each visit reads one line, `seen[j]`: on 341k small contents in one
    /// component the visits were most of a fresh report's link pass when
    /// the stamp, the count and the features were three lines apart.
    fn candidates(&self, i: usize, seen: &mut [Seen], out: &mut Vec<usize>) {
        out.clear();
        let me = self.briefs[i];
        let stamp = u32::try_from(i).expect("a component has fewer than 2^32 members");
        // Posted samples: two in common (one when a side posts only one)
        // make a candidate. A pair at the thresholds shares about 10 of its
        // 16; one common shingle (a licence line) would make every holder a
        // candidate and cost a sketch comparison each.
        for s in self.feats[i].posted() {
            let run = self.sample_holders.of(s);
            for &j in &run[run.partition_point(|&j| j <= stamp)..] {
                let slot = &mut seen[j as usize];
                if slot.stamp != stamp {
                    slot.stamp = stamp;
                    slot.shared = 0;
                }
                slot.shared += 1;
                if slot.shared == me.needed(slot.brief) {
                    out.push(j as usize);
                }
            }
        }
        // Any shared chunk makes a candidate too.
        for c in &self.feats[i].chunks {
            let run = self.holders.of(&c.0);
            for &j in &run[run.partition_point(|&j| j <= stamp)..] {
                let slot = &mut seen[j as usize];
                if slot.stamp != stamp || slot.shared < me.needed(slot.brief) {
                    slot.stamp = stamp;
                    slot.shared = u8::MAX;
                    out.push(j as usize);
                }
            }
        }
    }

    /// The links from each of `members` to the members after it.
    fn links(&self, members: Vec<usize>) -> Vec<RawLink> {
        let (feats, payloads) = (self.feats, self.payloads);
        let mut links = Vec::new();
        let mut seen = self.seen();
        let mut candidates: Vec<usize> = Vec::new();
        for i in members {
            self.candidates(i, &mut seen, &mut candidates);
            for &j in &candidates {
                if let Some((m, kind)) = link(&feats[i], &feats[j], payloads[i], payloads[j], self.params) {
                    links.push((i, j, m, kind));
                }
            }
        }
        links
    }
}

/// A member as the link pass of one content sees it: the last content
/// that met it, how many posted samples they share ([`u8::MAX`] once it is
/// a candidate by a chunk), and its [`Brief`].
#[derive(Clone, Copy)]
struct Seen {
    stamp: u32,
    shared: u8,
    brief: Brief,
}

/// The links inside one component, between contents (indices into
/// `contents`), and the size and payload of each content linked.
#[allow(clippy::too_many_arguments)]
fn analyse_component(
    store: &Store,
    contents: &[ContentHash],
    component: &[u32],
    ignored: &Ignored,
    common_samples: &HashSet<u32>,
    params: &AnalysisParams,
    threads: usize,
) -> Result<(Vec<ContentLink>, MemberInfo), StoreError> {
    let loading = std::time::Instant::now();
    let load = |part: &[u32]| features_in_order(store, contents, part, ignored);
    // Loading (a read and a decode per content) is a sixth of a large
    // component's time: both cores share it too.
    let feats: Vec<Features> = if component.len() >= PARALLEL_COMPONENT && threads > 1 {
        let per = component.len().div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = component.chunks(per).map(|part| s.spawn(move || load(part))).collect();
            let mut all = Vec::with_capacity(component.len());
            for h in handles {
                all.extend(h.join().expect("loading workers do not panic")?);
            }
            Ok::<_, StoreError>(all)
        })?
    } else {
        load(component)?
    };
    if component.len() >= PARALLEL_COMPONENT {
        tracing::debug!("component of {}: features loaded in {:?}", component.len(), loading.elapsed());
    }
    let payloads: Vec<u64> = feats.iter().map(Features::payload).collect();
    let n = component.len();
    let ctx = LinkCtx::new(&feats, &payloads, common_samples, params);
    // A large component (one can hold most of a repository) shares its
    // contents out over the threads too: the links of each content are
    // independent.
    let workers = if n >= PARALLEL_COMPONENT { threads.max(1) } else { 1 };
    let links: Vec<RawLink> = if workers == 1 {
        ctx.links((0..n).collect())
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|k| {
                    let ctx = &ctx;
                    s.spawn(move || ctx.links((k..n).step_by(workers).collect()))
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("link workers do not panic")).collect()
        })
    };
    // Components are sorted, so local order is content order: a < b holds.
    let mut info = MemberInfo::default();
    let links = links
        .into_iter()
        .map(|(i, j, m, kind)| {
            info.insert(component[i], (feats[i].size, payloads[i]));
            info.insert(component[j], (feats[j].size, payloads[j]));
            (component[i], component[j], m, kind)
        })
        .collect();
    Ok((links, info))
}

/// A cluster's id: from its set of contents, so it is stable while that set is.
fn cluster_id(members: &[Member]) -> u64 {
    let mut hashes: Vec<&ContentHash> = members.iter().map(|m| &m.content).collect();
    hashes.sort();
    let mut h = Md5::new();
    for c in hashes {
        h.update(c.0);
    }
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("md5 is 16 bytes")) >> 16
}

/// Every name of a content.
pub fn names_of(store: &Store, content: &ContentHash) -> Result<Vec<Name>, StoreError> {
    let mut ids: Vec<FileId> = Vec::new();
    for item in store.names(content) {
        ids.push(item?.0 .1);
    }
    names_by_id(store, ids)
}

/// The names of these file ids, from their records, sorted by path.
fn names_by_id(store: &Store, ids: impl IntoIterator<Item = FileId>) -> Result<Vec<Name>, StoreError> {
    let mut names = Vec::new();
    for id in ids {
        if let Some(mut rec) = store.get::<Files>(&id)? {
            let path = Arc::from(std::mem::take(&mut rec.path));
            names.push(Name::new(id, &rec, path));
        }
    }
    names.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(names)
}

/// What an analysis was made from and found, by content, kept with it so
/// that the next one can redo only what changed ([`cache`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Basis {
    pub sequence: u64,
    pub params: AnalysisParams,
    pub cutoff: u64,
    pub totals: Totals,
    /// The live contents, sorted (as one byte string, where postcard
    /// writes an array byte by byte; with the links by place, the
    /// Django cache 11.69 → 10.98 MB).
    #[serde(with = "hash_list")]
    pub contents: Vec<ContentHash>,
    /// The size of each content in `contents`.
    pub sizes: Vec<u64>,
    /// The ids of each content's names, and its content id: an update
    /// brings them up to date from the contents whose names changed,
    /// rather than scanning `content_names` and `content_by_id` again.
    pub names: Names,
    /// Chunks over the cutoff, sorted.
    pub over_common: Vec<ChunkKey>,
    /// Digest of the template chunks and samples.
    pub templates: [u8; 16],
    /// Every link, between places in `contents` (a before b).
    pub links: Vec<ContentLink>,
    /// The size and payload of every linked content, by place in `contents`.
    pub linked: Vec<(u32, u64, u64)>,
}

impl Basis {
    /// The basis of `a`, whose links (`links`, by place in `contents`) and
    /// their contents' sizes and payloads (`info`) it was assembled from.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a: &Analysis,
        contents: Vec<ContentHash>,
        sizes: Vec<u64>,
        names: Names,
        links: Vec<ContentLink>,
        info: &MemberInfo,
        over_common: Vec<ChunkKey>,
        templates: [u8; 16],
    ) -> Basis {
        let mut ends: Vec<u32> = links.iter().flat_map(|l| [l.0, l.1]).collect();
        ends.sort_unstable();
        ends.dedup();
        let linked = ends
            .into_iter()
            .map(|i| {
                let (size, payload) = info.get(&i).copied().unwrap_or_default();
                (i, size, payload)
            })
            .collect();
        Basis {
            sequence: a.sequence,
            params: a.params,
            cutoff: a.cutoff,
            totals: a.ignored,
            contents,
            sizes,
            names,
            over_common,
            templates,
            links,
            linked,
        }
    }
}

/// The ids of the names of each live content, and its content id, by
/// place ([`Basis::names`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Names {
    pub ids: Vec<Vec<FileId>>,
    pub content_ids: Vec<ContentId>,
}

/// Content hashes as one byte string of 16 bytes each.
mod hash_list {
    use crate::fingerprint::ContentHash;

    pub fn serialize<S: serde::Serializer>(hashes: &[ContentHash], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = hashes.iter().flat_map(|h| h.0).collect();
        s.serialize_bytes(&bytes)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ContentHash>, D::Error> {
        let bytes: &[u8] = serde_bytes::deserialize(d)?;
        if !bytes.len().is_multiple_of(16) {
            return Err(serde::de::Error::custom("content hashes: a length not a multiple of 16"));
        }
        Ok(bytes.chunks_exact(16).map(|c| ContentHash(c.try_into().expect("chunks of 16"))).collect())
    }
}

/// A digest of the template features: an analysis made under other
/// templates cannot be brought up to date, only redone.
pub(crate) fn templates_digest(t: &Ignored) -> [u8; 16] {
    let mut chunks: Vec<&ChunkKey> = t.chunks.iter().collect();
    chunks.sort();
    let mut samples: Vec<u32> = t.samples.iter().copied().collect();
    samples.sort_unstable();
    let mut h = Md5::new();
    for c in chunks {
        h.update(c.0.to_be_bytes());
    }
    h.update([0xff]);
    for s in samples {
        h.update(s.to_be_bytes());
    }
    h.finalize().into()
}

/// Everything an analysis is made of but its links.
pub(crate) struct Frame<'a> {
    pub sequence: u64,
    pub params: &'a AnalysisParams,
    pub cutoff: u64,
    pub totals: Totals,
    pub contents: &'a [ContentHash],
    pub ids: &'a [Vec<FileId>],
    /// Each content's size.
    pub sizes: &'a [u64],
}

/// Clusters (union-find over the links), names and identical sets: the
/// analysis, whichever way its links were found. Members are in content
/// order and links in (a, b) order, so a fresh analysis and one brought up
/// to date print the same report. `links` are sorted in place, and stay
/// the caller's (for the [`Basis`]). Also returns how many contents were
/// named from their records by a [`Namer::Patched`] (None: every one).
pub(crate) fn assemble(
    store: &Store,
    frame: Frame,
    files: Namer,
    links: &mut [ContentLink],
    info: &MemberInfo,
) -> Result<(Analysis, Option<usize>), StoreError> {
    let Frame { sequence, params, cutoff, totals, contents, ids, sizes } = frame;
    links.sort_by_key(|l| (l.0, l.1));
    let mut uf = UnionFind::new(contents.len());
    for &(a, b, _, _) in links.iter() {
        uf.union(a, b);
    }
    let t = std::time::Instant::now();
    // Naming touches every name of the tree once or twice, each a
    // random read of the file table: the identical sets are named on
    // another core beside the clusters.
    let (clusters, identical) = std::thread::scope(|s| {
        let identical = s.spawn(|| identical_sets(&files, contents, ids));
        let clusters = name_clusters(&files, contents, ids, links, info, uf.groups());
        (clusters, identical.join().expect("naming identical sets does not panic"))
    });
    let (clusters, (identical, linked)) = (clusters?, identical?);
    tracing::debug!("clusters and identical sets named after {:?}", t.elapsed());
    let counts = store.counts()?;
    // Every file's size: each content's, once a name.
    let bytes = sizes.iter().zip(ids).map(|(size, ids)| size * ids.len() as u64).sum();
    // ~100k shared paths on a large tree: their last owner need not be
    // waited for.
    let renamed = match files {
        Namer::Table(t) => {
            cache::free_aside(t);
            None
        }
        Namer::Patched(p) => {
            cache::free_aside((p.names, p.changed));
            Some(p.read.into_inner())
        }
    };
    tracing::debug!("names read from file records: {}", renamed.map_or("all".to_string(), |n| n.to_string()));
    let analysis = Analysis {
        sequence,
        params: *params,
        files: counts.files,
        contents: contents.len() as u64,
        bytes,
        cutoff,
        ignored: totals,
        identical,
        clusters,
        linked,
    };
    Ok((analysis, renamed))
}

/// The clusters of `groups` (contents joined by links), named, with
/// their links, largest first.
fn name_clusters(
    files: &Namer,
    contents: &[ContentHash],
    ids: &[Vec<FileId>],
    links: &[ContentLink],
    info: &MemberInfo,
    groups: Vec<Vec<u32>>,
) -> Result<Vec<Cluster>, StoreError> {
    // Each link goes to its cluster in one pass: (cluster, place in it) of
    // every content. (Filtering all links once per cluster was quadratic:
    // Django's large component has thousands of clusters.)
    let mut place = vec![(usize::MAX, usize::MAX); contents.len()];
    for (g, group) in groups.iter().enumerate() {
        for (k, &i) in group.iter().enumerate() {
            place[i as usize] = (g, k);
        }
    }
    let mut clusters: Vec<Cluster> = groups
        .iter()
        .map(|group| {
            let members: Vec<Member> = group
                .iter()
                .map(|&ci| {
                    let (size, payload) = info.get(&ci).copied().unwrap_or_default();
                    let (content, ids) = (contents[ci as usize], &ids[ci as usize]);
                    Ok(Member { content, size, payload, names: files.names(&content, ids)? })
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Cluster { id: cluster_id(&members), members, links: Vec::new() })
        })
        .collect::<Result<_, StoreError>>()?;
    // Each cluster's list sized first: grown by doubling, 28k of them
    // held ~16 MB spare at the end of a report (`heaptrack`).
    let mut counts = vec![0usize; clusters.len()];
    for &(a, _, _, _) in links {
        counts[place[a as usize].0] += 1;
    }
    for (c, n) in clusters.iter_mut().zip(counts) {
        c.links.reserve_exact(n);
    }
    for &(a, b, measures, kind) in links {
        let ((g, la), (_, lb)) = (place[a as usize], place[b as usize]);
        clusters[g].links.push(Link { a: la, b: lb, measures, kind });
    }
    // Most files first, then most bytes: each counted once a cluster (a
    // file with several names is one, which takes a look at the names).
    clusters.sort_by_cached_key(|c| (std::cmp::Reverse(c.files()), std::cmp::Reverse(c.bytes()), c.id));
    Ok(clusters)
}

/// The identical sets: a content with several names is a set when they
/// are more than one file (the names of one file, hard links, take its
/// bytes once, as fclones and jdupes count them). Most wasted first.
fn identical_sets(
    files: &Namer,
    contents: &[ContentHash],
    ids: &[Vec<FileId>],
) -> Result<(Vec<IdenticalSet>, Vec<Linked>), StoreError> {
    let (mut identical, mut linked) = (Vec::new(), Vec::new());
    for (i, names) in ids.iter().enumerate() {
        if names.len() > 1 {
            let names = files.names(&contents[i], names)?;
            let size = names.first().map_or(0, |n| n.size);
            let set = IdenticalSet::new(contents[i], size, names);
            if set.copies() > 1 {
                identical.push(set);
            } else {
                linked.push(Linked { content: set.content, size, ids: set.names.iter().map(|n| n.id).collect() });
            }
        }
    }
    identical.sort_by(|a, b| b.wasted().cmp(&a.wasted()).then_with(|| a.content.cmp(&b.content)));
    Ok((identical, linked))
}

/// A value made on another thread, taken (waited for) once.
pub(crate) struct Pending<'scope, T>(Option<std::thread::ScopedJoinHandle<'scope, T>>);

impl<'scope, T> Pending<'scope, T> {
    pub(crate) fn new(handle: std::thread::ScopedJoinHandle<'scope, T>) -> Self {
        Pending(Some(handle))
    }

    /// Waits for the value. Taken once: a second take is a bug.
    pub(crate) fn take(&mut self) -> T {
        self.0.take().expect("a pending value is taken once").join().expect("its thread does not panic")
    }
}

/// Runs the whole analysis on the index as it is now; also returns its
/// basis, for [`cache`] to bring it up to date later.
///
/// `files` is the file table, read on another thread meanwhile (a whole
/// scan of `files`, waited for only when the clusters are named).
pub(crate) fn analyse(
    store: &Store,
    params: &AnalysisParams,
    threads: usize,
    files: &mut Pending<'_, Result<FileTable, StoreError>>,
) -> Result<(Analysis, Basis), StoreError> {
    let started = std::time::Instant::now();
    let sequence = store.sequence();
    let (contents, ids) = live_contents(store)?;
    let cutoff = params.max_degree.unwrap_or_else(|| auto_cutoff(contents.len() as u64));
    let templates = templates(store)?;
    let part = partition(store, &contents, &templates, cutoff, threads)?;
    tracing::debug!(
        "partition: {} contents, {} components (largest {}) after {:?}",
        contents.len(),
        part.components.len(),
        part.components.iter().map(Vec::len).max().unwrap_or(0),
        started.elapsed()
    );

    // Components are independent: share them out over the threads, largest first.
    let mut order: Vec<usize> = (0..part.components.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(part.components[i].len()));
    let next = AtomicUsize::new(0);
    let results: Mutex<(Vec<ContentLink>, MemberInfo)> = Mutex::new(Default::default());
    let error: Mutex<Option<StoreError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&ci) = order.get(k) else { break };
                let component = &part.components[ci];
                match analyse_component(
                    store,
                    &contents,
                    component,
                    &part.ignored,
                    &part.common_samples,
                    params,
                    threads,
                ) {
                    Ok((mut links, info)) => {
                        let mut all = results.lock().expect("no panics holding the lock");
                        all.0.append(&mut links);
                        all.1.extend(info);
                    }
                    Err(e) => {
                        *error.lock().expect("no panics holding the lock") = Some(e);
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().expect("threads joined") {
        return Err(e);
    }
    let (mut links, info) = results.into_inner().expect("threads joined");
    // Grown by doubling as the components' links came, and kept in the
    // basis to the end of the report: ~20 MB spare on 231k links.
    links.shrink_to_fit();
    tracing::debug!("{} links after {:?}", links.len(), started.elapsed());
    let files = files.take()?;
    let sizes = files.sizes(&ids);
    let frame = Frame { sequence, params, cutoff, totals: part.totals, contents: &contents, ids: &ids, sizes: &sizes };
    let (analysis, _) = assemble(store, frame, Namer::Table(files), &mut links, &info)?;
    let mut over_common = part.over_common;
    over_common.sort_unstable();
    let names = Names { ids, content_ids: part.content_ids };
    let basis = Basis::new(&analysis, contents, sizes, names, links, &info, over_common, templates_digest(&templates));
    Ok((analysis, basis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(chunks: &[(u8, u32, u32)]) -> Features {
        let mut c: Vec<_> = chunks.iter().map(|&(id, len, n)| (ChunkKey(u64::from(id)), len, n)).collect();
        c.sort();
        Features { chunks: c, ..Default::default() }
    }

    #[test]
    fn common_bytes_take_the_smaller_count() {
        let a = f(&[(1, 100, 2), (2, 50, 1), (3, 10, 1)]);
        let b = f(&[(1, 100, 1), (3, 10, 4), (4, 70, 1)]);
        assert_eq!(a.common(&b), 100 + 10);
        assert_eq!(b.common(&a), 110);
        assert_eq!(a.payload(), 260);
        let m = Measures::new(110, 260, 150);
        assert!((m.resemblance - 110.0 / 300.0).abs() < 1e-12);
        assert!((m.a_in_b - 110.0 / 260.0).abs() < 1e-12);
        assert!((m.b_in_a - 110.0 / 150.0).abs() < 1e-12);
    }

    /// The posted samples kept as a length are those posted, template
    /// samples left out, whichever of them are ignored.
    #[test]
    fn posted_samples_without_ignored_ones_are_a_prefix_of_the_sketch_left() {
        let sketch = crate::sketch::Sketch { level: 0, samples: (1..=40u32).map(|i| i * 3).collect() };
        let ignore_sets: [&[u32]; 5] = [&[], &[3, 6, 9], &[48], &[3, 51, 120], &[60, 63, 66, 69]];
        for ignored in ignore_sets {
            let set: HashSet<u32> = ignored.iter().copied().collect();
            let want: Vec<u32> = sketch.posted().iter().copied().filter(|s| !set.contains(s)).collect();
            let (left, n) = without_samples(sketch.clone(), &set);
            let f = Features { sketch: left, posted_len: n, ..Default::default() };
            assert_eq!(f.posted(), &want[..], "ignoring {ignored:?}");
            assert!(f.sketch.samples.iter().all(|s| !set.contains(s)));
        }
        let small = crate::sketch::Sketch { level: 0, samples: vec![5, 9] };
        let (left, n) = without_samples(small, &HashSet::<u32>::from([9]));
        assert_eq!((left.samples, n), (vec![5], 1));
        let (_, n) = without_samples(crate::sketch::Sketch::default(), &HashSet::<u32>::new());
        assert_eq!(n, 0);
    }

    #[test]
    fn a_much_larger_content_needs_one_shared_posted_sample() {
        let with = |samples: usize, level: u8| Features {
            size: 0,
            chunks: Vec::new(),
            sketch: crate::sketch::Sketch { level, samples: (1..=samples as u32).collect() },
            posted_len: samples.min(16) as u8,
        };
        let page = with(300, 0);
        assert_eq!(samples_needed(&page, &with(400, 0)), 2, "alike in size");
        assert_eq!(samples_needed(&page, &with(300, 2)), 1, "four times the shingles");
        assert_eq!(samples_needed(&with(300, 2), &page), 1, "either way round");
        assert_eq!(samples_needed(&page, &with(1, 0)), 1, "a side posted one sample");
        assert_eq!(samples_needed(&with(0, 0), &with(0, 0)), 0, "no words at all");
    }

    #[test]
    fn link_kinds_follow_the_thresholds() {
        let p = AnalysisParams { min_bytes: 100, min_similarity: 0.5, min_containment: 0.8, max_degree: None };
        assert_eq!(Measures::new(900, 1000, 1000).kind(&p), Some(LinkKind::Similar));
        assert_eq!(Measures::new(900, 900, 10_000).kind(&p), Some(LinkKind::Contains));
        assert_eq!(Measures::new(90, 90, 90).kind(&p), None, "under min bytes");
        assert_eq!(Measures::new(300, 1000, 1000).kind(&p), None);
        assert_eq!(Measures::new(0, 0, 0).kind(&AnalysisParams { min_bytes: 0, ..p }), None);
        // Exact word sketches: a one-shingle content whose one sample is
        // among a large text's is no containment; two of two are.
        let tiny = crate::sketch::Sketch { level: 0, samples: vec![0x8000_0000] };
        let text = crate::sketch::Sketch { level: 0, samples: (0..600u32).map(|i| 0x8000_0000 + (i << 16)).collect() };
        let m = Measures::with_words(0, (&tiny, 120, 120), (&text, 9_000, 9_000));
        assert!(m.words.exact && m.words.a_in_b == 1.0 && m.words.shared == 1, "{m:?}");
        assert_eq!(m.kind(&p), None);
        let two = crate::sketch::Sketch { level: 0, samples: vec![0x8000_0000, 0x8001_0000] };
        assert_eq!(Measures::with_words(0, (&two, 120, 120), (&text, 9_000, 9_000)).kind(&p), Some(LinkKind::Contains));
    }

    #[test]
    fn hard_links_of_a_set_point_at_the_first_name_of_their_file() {
        let name =
            |k: u64, file: Option<(u64, u64)>| Name { path: Arc::from(&b"/p"[..]), size: 10, id: FileId(k), file };
        let (a, b) = (Some((1, 7)), Some((2, 7)));
        let files = [a, b, a, None, a, b, None];
        let set = IdenticalSet::new(
            ContentHash([0; 16]),
            10,
            files.iter().enumerate().map(|(k, &f)| name(k as u64, f)).collect(),
        );
        let links: Vec<Option<usize>> = (0..files.len()).map(|k| set.link_of(k)).collect();
        assert_eq!(links, [None, None, Some(0), None, Some(0), Some(1), None]);
        assert_eq!((set.copies(), set.wasted()), (4, 30), "two files with names, and two of unknown file");
        // A cluster member counts its files as the set does, and marks the
        // same links; past 16 names, by sorting them.
        for n in [files.len(), 40] {
            let names: Vec<Name> = (0..n).map(|k| name(k as u64, files[k % files.len()])).collect();
            let set = IdenticalSet::new(ContentHash([0; 16]), 10, names.clone());
            let m = Member { content: ContentHash([0; 16]), size: 10, payload: 10, names };
            assert_eq!(m.files(), set.copies(), "{n} names");
            assert_eq!(m.links_of(), (0..n).map(|k| set.link_of(k)).collect::<Vec<_>>(), "{n} names");
        }
    }

    #[test]
    fn places_find_content_ids_dense_or_sparse() {
        for ids in [&[9u64, 4, 7, 3][..], &[90_000, 1, 50_000][..]] {
            let ids: Vec<ContentId> = ids.iter().map(|&i| ContentId(i)).collect();
            let places = Places::from_ids(&ids);
            assert_eq!(places.slots.at.is_empty(), ids.len() == 3, "a slot table only when the ids are dense");
            for (place, &id) in ids.iter().enumerate() {
                assert_eq!(places.of(id), Some(place as u32));
            }
            for gone in [0, 5, 8, 10, 49_999, u64::MAX] {
                assert_eq!(places.of(ContentId(gone)), None, "{gone} is no live content");
            }
            assert_eq!(places.ids(ids.len()), ids);
        }
    }

    #[test]
    fn file_table_finds_names_dense_or_sparse() {
        let files = |ids: &[u64]| -> Vec<Name> {
            ids.iter()
                .map(|&i| Name { path: format!("/f{i:05}").into_bytes().into(), size: i, id: FileId(i), file: None })
                .collect()
        };
        for ids in [&[3u64, 4, 7, 9][..], &[1, 50_000, 90_000][..]] {
            let t = FileTable::new(files(ids));
            assert_eq!(t.slots.at.is_empty(), ids.len() == 3, "a slot table only when the ids are dense");
            let want: Vec<FileId> = ids.iter().rev().map(|&i| FileId(i)).collect();
            let names = t.names(&[&want[..], &[FileId(5), FileId(0), FileId(u64::MAX)]].concat());
            assert_eq!(names.iter().map(|n| n.id.0).collect::<Vec<_>>(), ids, "sorted by path, unknown ids left out");
            assert!(names.iter().all(|n| n.size == n.id.0));
        }
    }

    #[test]
    fn union_find_groups() {
        let mut uf = UnionFind::new(6);
        uf.union(0, 3);
        uf.union(4, 3);
        uf.union(1, 5);
        assert_eq!(uf.groups(), vec![vec![0, 3, 4], vec![1, 5]]);
    }

    /// A chunk list of distinct keys from a map of key → count. A key names
    /// a chunk, so its length is the same in every list.
    fn listed(chunks: std::collections::BTreeMap<u64, u32>) -> Features {
        let len = |k: u64| (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 53) as u32 + 1;
        Features { chunks: chunks.into_iter().map(|(k, n)| (ChunkKey(k), len(k), n)).collect(), ..Default::default() }
    }

    /// `bar` sets the common bytes asked for, as a fraction of those the
    /// pair has: the bound is tested close to where it decides. Both ways
    /// round.
    fn common_if_agrees(
        a: std::collections::BTreeMap<u64, u32>,
        b: std::collections::BTreeMap<u64, u32>,
        bar: f64,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        let (a, b) = (listed(a), listed(b));
        for (a, b) in [(&a, &b), (&b, &a)] {
            let (pa, pb) = (a.payload(), b.payload());
            let want = a.common(b);
            let at_least = (want as f64 * bar) as u64;
            proptest::prop_assert_eq!(a.common_if(b, pa, pb, |_| true), Some(want));
            // None only where the common bytes are under the bar; else exact.
            match a.common_if(b, pa, pb, |c| c >= at_least) {
                Some(got) => proptest::prop_assert_eq!(got, want),
                None => proptest::prop_assert!(want < at_least, "{want} bytes in common, at least {at_least} wanted"),
            }
        }
        Ok(())
    }

    #[test]
    fn common_if_stops_only_where_the_bar_is_out_of_reach() {
        let long = listed((0..3000).map(|k| (k, 1 + (k % 3) as u32)).collect());
        for keys in [0..20u64, 1000..1100, 2990..3000] {
            let inside = listed(keys.clone().map(|k| (k, 1)).collect());
            let (pi, pl) = (inside.payload(), long.payload());
            // Wholly inside: its whole payload in common, whatever is asked.
            assert_eq!(inside.common_if(&long, pi, pl, |c| c >= pi), Some(pi));
            assert_eq!(long.common_if(&inside, pl, pi, |c| c >= pi), Some(pi));
            // More than its payload asked for: known out of reach at once.
            assert_eq!(inside.common_if(&long, pi, pl, |c| c > pi), None);
            let outside = listed(keys.map(|k| (k + 10_000, 1)).collect());
            assert_eq!(outside.common_if(&long, pi, pl, |c| c > 0), Some(0), "a bound is not a promise to stop");
        }
    }

    proptest::proptest! {
        #[test]
        fn common_if_is_common_or_none_below_the_bar_however_lopsided(
            a in proptest::collection::btree_map(0u64..300, 1u32..4, 0..40),
            b in proptest::collection::btree_map(0u64..4000, 1u32..4, 0..2500),
            bar in 0.0f64..2.0,
        ) {
            common_if_agrees(a, b, bar)?;
        }

        #[test]
        fn common_if_is_common_or_none_below_the_bar_alike(
            a in proptest::collection::btree_map(0u64..600, 1u32..4, 0..300),
            b in proptest::collection::btree_map(0u64..600, 1u32..4, 0..400),
            bar in 0.0f64..2.0,
        ) {
            common_if_agrees(a, b, bar)?;
        }

        /// The link pass's candidates of each member are the members after
        /// it that share a chunk with it, or at least [`samples_needed`] of
        /// its posted samples under the cap: checked against every pair, on
        /// members whose posted samples and chunks are drawn from a few
        /// values so that they share many.
        #[test]
        fn candidates_are_the_pairs_sharing_a_chunk_or_enough_posted_samples(
            members in proptest::collection::vec(
                (
                    proptest::collection::btree_set(1u32..40, 0..24),
                    0u8..4,
                    proptest::collection::btree_set(0u64..30, 0..3),
                ),
                1..60,
            ),
            common in proptest::collection::hash_set(1u32..40, 0..4),
        ) {
            let feats: Vec<Features> = members
                .iter()
                .map(|(samples, level, chunks)| {
                    let sketch = Sketch { level: *level, samples: samples.iter().copied().collect() };
                    let posted_len = sketch.posted().len() as u8;
                    let chunks = chunks.iter().map(|&k| (ChunkKey(k), 100, 1)).collect();
                    Features { size: 1000, chunks, sketch, posted_len }
                })
                .collect();
            let payloads: Vec<u64> = feats.iter().map(Features::payload).collect();
            let params = AnalysisParams::default();
            let common: HashSet<u32> = common.into_iter().collect();
            let ctx = LinkCtx::new(&feats, &payloads, &common, &params);
            let mut seen = ctx.seen();
            let mut found = Vec::new();
            for i in 0..feats.len() {
                ctx.candidates(i, &mut seen, &mut found);
                let want: Vec<usize> = (i + 1..feats.len())
                    .filter(|&j| {
                        let (a, b) = (&feats[i], &feats[j]);
                        let shared = a.posted().iter().filter(|s| !common.contains(s) && b.posted().contains(s)).count();
                        let chunk = a.chunks.iter().any(|c| b.chunks.iter().any(|d| d.0 == c.0));
                        chunk || (shared > 0 && shared >= samples_needed(a, b))
                    })
                    .collect();
                found.sort_unstable();
                proptest::prop_assert_eq!(&found, &want, "member {}", i);
            }
        }

        /// The partition joins exactly the pairs that share enough posted
        /// samples to be candidates ([`samples_needed`]), from groups of
        /// holders as the posting scans make them (samples over the cap
        /// left out, groups of one dropped), on one thread or several.
        #[test]
        fn the_partition_joins_the_pairs_sharing_enough_posted_samples(
            members in proptest::collection::vec(
                (proptest::collection::btree_set(1u32..40, 0..24), 0u8..4),
                1..60,
            ),
            common in proptest::collection::hash_set(1u32..40, 0..4),
            threads in 1usize..4,
        ) {
            let feats: Vec<Features> = members
                .iter()
                .map(|(samples, level)| {
                    let sketch = Sketch { level: *level, samples: samples.iter().copied().collect() };
                    let posted_len = sketch.posted().len() as u8;
                    Features { size: 1000, chunks: Vec::new(), sketch, posted_len }
                })
                .collect();
            let mut groups = Groups::default();
            for sample in 1u32..40 {
                let holders: Vec<u32> =
                    (0..feats.len() as u32).filter(|&i| feats[i as usize].posted().contains(&sample)).collect();
                if holders.len() > 1 && !common.contains(&sample) {
                    groups.push(holders);
                }
            }
            let briefs: Vec<Brief> = feats.iter().map(Brief::of).collect();
            let mut found = join_candidates(&groups, &briefs, threads);
            found.sort_unstable();
            let mut want = Vec::new();
            for i in 0..feats.len() {
                for j in i + 1..feats.len() {
                    let (a, b) = (&feats[i], &feats[j]);
                    let shared = a.posted().iter().filter(|s| !common.contains(s) && b.posted().contains(s)).count();
                    if shared > 0 && shared >= samples_needed(a, b) {
                        want.push((i as u32, j as u32));
                    }
                }
            }
            proptest::prop_assert_eq!(found, want);
        }
    }

    /// Features read by a scan in key order are those of a point read
    /// each: for members passed over among others, a member without a
    /// record, and a first and a last member at the ends of the table.
    #[test]
    fn features_read_in_order_are_those_read_one_by_one() {
        use crate::fingerprint::ChunkRun;
        use crate::store::Access;

        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("idx"), Access::Write, None).unwrap();
        let mut contents: Vec<ContentHash> =
            (0..2000u32).map(|k| ContentHash(*Md5::digest(k.to_le_bytes()).as_ref())).collect();
        contents.sort_unstable();
        let mut b = store.batch();
        for (k, c) in contents.iter().enumerate() {
            // Every seventh content has no record.
            if k % 7 == 3 {
                continue;
            }
            let runs = vec![ChunkRun { key: ChunkKey(k as u64 % 50), len: 100 + k as u32, count: 1 + k as u32 % 3 }];
            let samples = (0..(k as u32 % 40)).map(|s| (s * 7919 + k as u32) << 8).collect::<HashSet<u32>>();
            let mut samples: Vec<u32> = samples.into_iter().collect();
            samples.sort_unstable();
            let rec = ContentRecord {
                id: ContentId(k as u64 + 1),
                size: 100 + k as u64,
                runs,
                sketch: Sketch { level: 0, samples },
            };
            b.put::<ContentChunks>(c, &rec);
        }
        store.write(b).unwrap();
        let ignored = Ignored {
            chunks: [ChunkKey(4)].into_iter().collect(),
            samples: [7919 << 8, (2 * 7919 + 5) << 8].into_iter().collect(),
        };
        let dense: Vec<u32> = (0..2000).filter(|k| k % 5 != 1).collect();
        // Scanned: most of their span; every other one.
        let halves: Vec<u32> = (1..2000).step_by(2).collect();
        // Read one by one: a third of their span; too few.
        let thirds: Vec<u32> = (0..2000).step_by(3).collect();
        let few: Vec<u32> = (0..2000).step_by(9).collect();
        for members in [&dense, &halves, &thirds, &few] {
            let read = features_in_order(&store, &contents, members, &ignored).unwrap();
            assert_eq!(read.len(), members.len());
            for (f, &m) in read.iter().zip(members.iter()) {
                let want = features(&store, &contents[m as usize], &ignored).unwrap();
                assert_eq!(
                    (f.size, &f.chunks, &f.sketch, f.posted_len),
                    (want.size, &want.chunks, &want.sketch, want.posted_len),
                    "member {m}"
                );
            }
            // Their heads, read from the sketches' heads (no template
            // samples) or from the whole records (with some), hold the
            // posted samples and briefs of their features.
            let no_samples = Ignored { chunks: ignored.chunks.clone(), samples: HashSet::default() };
            for ignored in [&ignored, &no_samples] {
                let heads = heads_in_order(&store, &contents, members, ignored).unwrap();
                assert_eq!((heads.ids.len(), heads.briefs.len()), (members.len(), members.len()));
                let mut posted = Vec::new();
                for (k, &m) in members.iter().enumerate() {
                    let f = features(&store, &contents[m as usize], ignored).unwrap();
                    let id = store.get::<ContentChunks>(&contents[m as usize]).unwrap().map(|r| r.id);
                    let what = format!("member {m}, {} template samples", ignored.samples.len());
                    assert_eq!((heads.ids[k], heads.briefs[k]), (id, Brief::of(&f)), "{what}");
                    posted.extend(f.posted().iter().map(|&s| (u64::from(s) << 32) | u64::from(m)));
                }
                assert_eq!(heads.posted, posted);
            }
        }
    }

    #[test]
    fn rounded_samples_spread_over_a_tables_buckets() {
        use std::hash::BuildHasher;
        // Posted samples are rounded to their top 17 bits: a sample of 27
        // bits ends in 10 zero bits. A table of 4,096 buckets places a key
        // by its hash's low 12 bits and tells keys apart by its top 7, so
        // both must vary with the sample's high bits.
        let samples: Vec<u32> = (0..4096u32).map(|k| (0x1_0000 | ((k * 7919) % 0x1_0000)) << 10).collect();
        let hashes: Vec<u64> = samples.iter().map(|s| IdHash::default().hash_one(s)).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        // Uniform hashes fill ~2,590 of 4,096 buckets; the bare product
        // filled 4 (its low 10 bits were the sample's: zeros).
        assert!(buckets.len() > 2_000, "{} buckets of 4096", buckets.len());
        assert!(tags.len() > 100, "{} tags of 128", tags.len());
    }

    /// The sample postings gathered from the heads: the holders of each
    /// sample held by two or more and at most the cap, in place order, and
    /// the samples held by more than the cap (every one for a cap of 0).
    #[test]
    fn samples_are_grouped_by_their_holders() {
        let posted: &[&[u32]] = &[&[5, 9, 40], &[9, 40], &[], &[1, 9, 40], &[40, 77]];
        // Placed as the readers' parts come, not sorted.
        let heads: Vec<u64> = posted
            .iter()
            .enumerate()
            .rev()
            .flat_map(|(place, samples)| samples.iter().map(move |&s| (u64::from(s) << 32) | place as u64))
            .collect();
        let groups_of = |g: &Groups| (0..g.ends.len()).map(|k| g.get(k).to_vec()).collect::<Vec<_>>();
        let (g, common) = sample_groups(heads.clone(), 3);
        assert_eq!(groups_of(&g), [vec![0, 1, 3]], "9 held by three; 40 by four, over the cap");
        assert_eq!(common, HashSet::from([40]));
        let (g, common) = sample_groups(heads.clone(), 100);
        assert_eq!(groups_of(&g), [vec![0, 1, 3], vec![0, 1, 3, 4]]);
        assert!(common.is_empty());
        let (g, common) = sample_groups(heads, 0);
        assert!(g.ends.is_empty());
        assert_eq!(common, HashSet::from([1, 5, 9, 40, 77]));
    }

    #[test]
    fn cutoff_follows_forman_and_broder() {
        assert_eq!(auto_cutoff(10), 100);
        assert_eq!(auto_cutoff(600), 300);
        assert_eq!(auto_cutoff(1_000_000), 1000);
    }
}

pub mod cache;
pub mod dirs;

/// Template marks: a cluster's shared chunks recorded in the `templates` CF,
/// so that later analyses ignore them without re-reading any file.
pub mod marks {
    use std::collections::HashMap;

    use super::{cluster_id_str, features, Analysis};
    use crate::fingerprint::ChunkKey;
    use crate::store::{Marker, Store, StoreError, Table, TemplateMark, TemplateSamples, Templates};

    #[derive(Debug, thiserror::Error)]
    pub enum MarkError {
        #[error(transparent)]
        Store(#[from] StoreError),
        #[error("no cluster {0} in the current report (run `simd report` to see the ids)")]
        NoCluster(String),
        #[error(
            "cluster {0} is marked already ({1} template chunks): its shared chunks are ignored, so it is no \
             cluster any more; `simd template unmark {0}` undoes the mark"
        )]
        Marked(String, u64),
        #[error("no template marks from cluster {0} (`simd template list` shows the marks)")]
        NoMarks(String),
        #[error("cluster id {0} is ambiguous: it starts {1} clusters; give more digits")]
        Ambiguous(String, usize),
        #[error("no cluster id given (run `simd report` to see the ids)")]
        Empty,
    }

    /// What `mark` recorded.
    pub struct Marked {
        pub cluster: String,
        pub chunks: u64,
        pub bytes: u64,
        pub samples: u64,
        /// Of `chunks`, those other clusters had marked already.
        pub shared: u64,
        /// The cluster's distinct contents.
        pub members: usize,
        /// When nothing was marked: the chunks held by the most of the
        /// cluster's contents, so that the user can ask for those.
        pub widest: Option<Widest>,
    }

    /// The chunks held by the most contents of a cluster.
    pub struct Widest {
        /// How many contents hold them.
        pub held_by: usize,
        pub chunks: u64,
        pub bytes: u64,
        /// The largest `--min-share` that marks them (two decimals).
        pub min_share: f64,
    }

    /// The chunks and sketch samples of a cluster held by at least
    /// `min_share` of its distinct contents, marked as template features in
    /// one batch.
    ///
    /// A sample is counted among the contents whose sketches keep samples
    /// of its level: a large content keeps only the rarer samples of its
    /// shingles, so a boilerplate's shingles of a lower level are in every
    /// small page's sketch and in no large one's. Counted among all the
    /// contents, a cluster of small pages joined by a license header and
    /// holding one large file had 3 of the header's ~200 samples marked,
    /// and its pages stayed linked by the other ~197.
    pub fn mark(store: &Store, analysis: &Analysis, id: &str, min_share: f64) -> Result<Marked, MarkError> {
        let id = id.trim().to_ascii_lowercase();
        if id.is_empty() {
            return Err(MarkError::Empty);
        }
        let found: Vec<_> = analysis.clusters.iter().filter(|c| c.id_str().starts_with(&id)).collect();
        let cluster = match found.as_slice() {
            [c] => *c,
            // A marked cluster is gone from the report: its links were its
            // shared chunks. Said so, rather than "no cluster".
            [] => {
                let marked = list(store)?.into_iter().filter(|l| l.cluster.starts_with(&id)).collect::<Vec<_>>();
                return Err(match marked.as_slice() {
                    [l] => MarkError::Marked(l.cluster.clone(), l.chunks),
                    [] => MarkError::NoCluster(id),
                    many => MarkError::Ambiguous(id, many.len()),
                });
            }
            many => return Err(MarkError::Ambiguous(id, many.len())),
        };
        let mut held: HashMap<ChunkKey, (u32, usize)> = HashMap::new();
        let mut held_samples: HashMap<u32, usize> = HashMap::new();
        // How many of the contents keep samples of each level: those
        // whose sketch level is at most that.
        let mut keeping = [0usize; 33];
        let none = Default::default();
        for m in &cluster.members {
            let f = features(store, &m.content, &none)?;
            for (chunk, len, _) in f.chunks {
                held.entry(chunk).or_insert((len, 0)).1 += 1;
            }
            for k in &mut keeping[usize::from(f.sketch.level).min(32)..] {
                *k += 1;
            }
            for s in f.sketch.samples {
                *held_samples.entry(s).or_default() += 1;
            }
        }
        let members = cluster.members.len();
        let needed = |of: usize| ((of as f64) * min_share).ceil().max(2.0) as usize;
        let need = needed(members);
        let now = crate::ingest::now_ns();
        let mut batch = store.batch();
        let (mut chunks, mut bytes) = (0, 0);
        // A cluster joined through a chain of links may share no chunk
        // among all its members (the default asks for all): say what the
        // widest shared chunks are, rather than only "0 marked".
        let top = held.values().map(|&(_, n)| n).max().unwrap_or(0);
        let widest = (top >= 2 && top < need).then(|| {
            let (chunks, bytes) =
                held.values().filter(|&&(_, n)| n == top).fold((0, 0), |(c, b), &(len, _)| (c + 1, b + u64::from(len)));
            let min_share = (top as f64 / members as f64 * 100.0).floor() / 100.0;
            Widest { held_by: top, chunks, bytes, min_share }
        });
        let mut shared = 0;
        for (chunk, (len, n)) in held {
            if n >= need {
                shared += u64::from(add_marker::<Templates>(store, &mut batch, &chunk, cluster.id, now, len)?);
                chunks += 1;
                bytes += u64::from(len);
            }
        }
        let mut samples = 0;
        for (s, n) in held_samples {
            if n >= needed(keeping[usize::from(crate::sketch::level_of(s))]) {
                add_marker::<TemplateSamples>(store, &mut batch, &s, cluster.id, now, 0)?;
                samples += 1;
            }
        }
        store.write(batch)?;
        store.sync()?;
        let widest = widest.filter(|_| chunks == 0 && samples == 0);
        Ok(Marked { cluster: cluster.id_str(), chunks, bytes, samples, shared, members, widest })
    }

    /// Adds `cluster` to the markers of a chunk or sample (a new mark when
    /// it had none). Returns whether another cluster had marked it.
    fn add_marker<T: Table<Value = TemplateMark>>(
        store: &Store,
        batch: &mut crate::store::Batch,
        key: &T::Key,
        cluster: u64,
        now: i64,
        len: u32,
    ) -> Result<bool, StoreError> {
        let (mark, shared) = match store.get::<T>(key)? {
            None => (TemplateMark::new(cluster, now, len), false),
            Some(m) if m.by(cluster) => return Ok(m.by.len() > 1),
            Some(mut m) => {
                m.by.push(Marker { marked: now, cluster });
                (m, true)
            }
        };
        batch.put::<T>(key, &mark);
        Ok(shared)
    }

    /// What `unmark` did.
    pub struct Unmarked {
        /// Chunks and samples no longer template.
        pub chunks: u64,
        pub samples: u64,
        /// Chunks and samples the cluster had marked that other clusters
        /// marked too, and so stay template.
        pub kept_chunks: u64,
        pub kept_samples: u64,
    }

    /// Removes the marks made from a cluster (a unique id prefix), or all
    /// marks for `all`. A chunk or sample another cluster marked too stays
    /// template, marked by that one.
    pub fn unmark(store: &Store, id: &str) -> Result<Unmarked, MarkError> {
        let id = id.trim().to_ascii_lowercase();
        if id.is_empty() {
            return Err(MarkError::Empty);
        }
        let all = id == "all";
        let of = |cluster: u64| all || cluster_id_str(cluster).starts_with(&id);
        let mut clusters: Vec<u64> = Vec::new();
        let mut batch = store.batch();
        let (chunks, kept_chunks) = unmark_in::<Templates>(store, &mut batch, &of, &mut clusters)?;
        let (samples, kept_samples) = unmark_in::<TemplateSamples>(store, &mut batch, &of, &mut clusters)?;
        let done = Unmarked { chunks, samples, kept_chunks, kept_samples };
        if !all {
            match clusters.len() {
                0 => return Err(MarkError::NoMarks(id)),
                1 => {}
                n => return Err(MarkError::Ambiguous(id, n)),
            }
        }
        store.write(batch)?;
        store.sync()?;
        Ok(done)
    }

    /// Takes the clusters `of` picks off the marks of one CF, noting them
    /// in `clusters`. Returns how many marks went, and how many stay
    /// because other clusters marked them too.
    fn unmark_in<T: Table<Value = TemplateMark>>(
        store: &Store,
        batch: &mut crate::store::Batch,
        of: &dyn Fn(u64) -> bool,
        clusters: &mut Vec<u64>,
    ) -> Result<(u64, u64), StoreError> {
        let (mut gone, mut kept) = (0, 0);
        for item in store.scan::<T>() {
            let (key, mut mark) = item?;
            let before = mark.by.len();
            mark.by.retain(|m| {
                if of(m.cluster) && !clusters.contains(&m.cluster) {
                    clusters.push(m.cluster);
                }
                !of(m.cluster)
            });
            if mark.by.len() == before {
                continue;
            }
            if mark.by.is_empty() {
                batch.delete::<T>(&key);
                gone += 1;
            } else {
                batch.put::<T>(&key, &mark);
                kept += 1;
            }
        }
        Ok((gone, kept))
    }

    /// Template chunks and word samples grouped by the cluster they were
    /// marked from.
    pub struct Listed {
        pub cluster: String,
        pub chunks: u64,
        pub bytes: u64,
        pub samples: u64,
    }

    pub fn list(store: &Store) -> Result<Vec<Listed>, StoreError> {
        type By = std::collections::BTreeMap<u64, Listed>;
        fn of(by: &mut By, cluster: u64) -> &mut Listed {
            by.entry(cluster).or_insert_with(|| Listed {
                cluster: cluster_id_str(cluster),
                chunks: 0,
                bytes: 0,
                samples: 0,
            })
        }
        let mut by = By::new();
        // A chunk two clusters marked is listed under each.
        for item in store.scan::<Templates>() {
            let (_, mark) = item?;
            for m in &mark.by {
                let e = of(&mut by, m.cluster);
                e.chunks += 1;
                e.bytes += u64::from(mark.len);
            }
        }
        for item in store.scan::<TemplateSamples>() {
            let (_, mark) = item?;
            for m in &mark.by {
                of(&mut by, m.cluster).samples += 1;
            }
        }
        Ok(by.into_values().collect())
    }
}
