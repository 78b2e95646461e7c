//! Queries against the live index: `similar` (Broder's on-the-fly
//! resemblance: a file, indexed or not, against everything indexed).
//!
//! A query chunks and sketches its input with the index's own parameters,
//! looks up the postings of each of its chunks and sketch samples, and
//! measures only the contents that share something with it: work grows with
//! the query and its candidates, not with the repository.

use std::collections::HashMap;
use std::io::Read;

use crate::analysis::{self, auto_cutoff, AnalysisParams, LinkKind, Measures, Name};
use crate::fingerprint::{fingerprint_reader, ChunkKey, ContentHash};
use crate::sketch::Sketch;
use crate::store::{ContentChunks, ContentId, ContentRecord, Files, Paths, Posting, Store, StoreError};

/// One indexed content that resembles the query.
#[derive(Clone, Debug)]
pub struct Hit {
    pub content: ContentHash,
    pub size: u64,
    pub payload: u64,
    /// Names of the content (the query's own path left out).
    pub names: Vec<Name>,
    /// a = the query, b = this hit.
    pub measures: Measures,
    pub identical: bool,
    /// The link kind under the thresholds, if it is one.
    pub kind: Option<LinkKind>,
}

/// The answer to `simd similar`.
#[derive(Clone, Debug)]
pub struct Similar {
    pub content: ContentHash,
    pub size: u64,
    pub payload: u64,
    pub chunks: u64,
    /// Best first: identical, then by the largest of the resemblances and
    /// containments (chunks or words), then by bytes in common. At most
    /// the `limit` asked for.
    pub hits: Vec<Hit>,
    /// How many contents are identical or similar, and (asked for all)
    /// how many more share something with the query, before the limit.
    pub similar: usize,
    pub sharing: usize,
    /// The content the index holds at the query's own path, when it is
    /// an indexed file: not listed, and an older version of the file when
    /// it is not the query's content.
    pub own: Option<ContentHash>,
}

/// Which chunks are ignored: templates, and chunks in more than `cutoff`
/// contents. Degrees are looked up in batches, in key order, through one
/// iterator ([`Store::postings_of`]), and remembered.
struct Ignored<'a> {
    store: &'a Store,
    templates: analysis::Ignored,
    cutoff: u64,
    memo: HashMap<ChunkKey, bool, analysis::IdHash>,
}

impl Ignored<'_> {
    /// Looks up the degrees of every chunk of `chunks` not known yet.
    fn learn(&mut self, chunks: impl IntoIterator<Item = ChunkKey>) -> Result<(), StoreError> {
        let mut todo: Vec<ChunkKey> = chunks.into_iter().filter(|c| !self.is_known(c)).collect();
        todo.sort_unstable();
        todo.dedup();
        let over = self.store.chunks_over(&todo, self.cutoff)?;
        self.memo.extend(todo.into_iter().zip(over));
        Ok(())
    }

    /// Remembers whether a chunk is over the cutoff, from its postings.
    fn remember(&mut self, chunk: ChunkKey, holders: &[(ContentId, Posting)]) {
        self.memo.insert(chunk, holders.len() as u64 > self.cutoff);
    }

    /// Whether a chunk is ignored; its degree must have been learnt.
    fn is_ignored(&self, chunk: &ChunkKey) -> bool {
        self.templates.chunks.contains(chunk) || self.memo.get(chunk).copied().unwrap_or(false)
    }

    /// A content's bytes in chunks that are not ignored.
    fn payload(&self, rec: &ContentRecord) -> u64 {
        rec.runs.iter().filter(|r| !self.is_ignored(&r.key)).map(|r| r.bytes()).sum()
    }

    /// Whether a chunk's degree is known (or it is a template chunk).
    fn is_known(&self, chunk: &ChunkKey) -> bool {
        self.templates.chunks.contains(chunk) || self.memo.contains_key(chunk)
    }

    /// A content's bytes in chunks known not to be ignored: the least its
    /// payload can be.
    fn known_payload(&self, rec: &ContentRecord) -> u64 {
        rec.runs
            .iter()
            .filter(|r| self.memo.get(&r.key) == Some(&false) && !self.templates.chunks.contains(&r.key))
            .map(|r| r.bytes())
            .sum()
    }
}

/// The largest payload a content sharing `common` payload bytes with a
/// query of `payload` may have and still be linked to it by chunks (by
/// resemblance, or by its containment in the query), rounded up; its
/// containment of the query does not depend on it. Sizes the batches of
/// degrees `similar_to` learns; the link test itself decides.
fn link_payload_bound(common: u64, payload: u64, p: &AnalysisParams) -> u64 {
    let c = common as f64;
    let by_resemblance = if p.min_similarity > 0.0 { c / p.min_similarity + c - payload as f64 } else { f64::MAX };
    let by_containment = if p.min_containment > 0.0 { c / p.min_containment } else { f64::MAX };
    by_resemblance.max(by_containment).max(0.0).min(u64::MAX as f64).ceil() as u64
}

/// How `similar` orders and cuts its candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// By the best of every measure (what resembles the query).
    Best,
    /// By how much of the query each candidate holds (where did the query's
    /// content go): only the best `limit` by that measure, which needs no
    /// candidate's payload, are measured in full. A page sharing a site
    /// template shares something with a thousand others, and each payload
    /// costs a degree lookup per chunk.
    QueryInside,
}

/// Files in the index similar to the bytes of `reader`. `own_path` (the
/// query's path when it is itself indexed) is left out of the answer.
/// `all` keeps every content sharing payload, not only links; at most
/// `limit` contents are answered, best first.
pub fn similar(
    store: &Store,
    reader: impl Read,
    own_path: Option<&[u8]>,
    params: &AnalysisParams,
    all: bool,
    limit: usize,
) -> Result<Similar, QueryError> {
    // A query as large as the index's whole files is read as they were.
    let whole_from = crate::fingerprint::WholeFrom::default();
    let fp = fingerprint_reader(reader, store.params(), whole_from, &mut Vec::new()).map_err(QueryError::Read)?;
    // Nothing is known to `fingerprint_reader`: it always sketches.
    let query =
        ContentRecord { id: ContentId::default(), size: fp.size, runs: fp.runs, sketch: fp.sketch.unwrap_or_default() };
    Ok(similar_to(store, fp.content, &query, own_path, params, all, limit, Order::Best)?)
}

/// Indexed contents similar to a content record (a file just read, or a
/// ghost's kept record), best first.
#[allow(clippy::too_many_arguments)]
pub fn similar_to(
    store: &Store,
    content: ContentHash,
    query: &ContentRecord,
    own_path: Option<&[u8]>,
    params: &AnalysisParams,
    all: bool,
    limit: usize,
    order: Order,
) -> Result<Similar, StoreError> {
    let contents = store.counts()?.contents;
    let mut ignored = Ignored {
        store,
        templates: analysis::templates(store)?,
        cutoff: params.max_degree.unwrap_or_else(|| auto_cutoff(contents)),
        memo: HashMap::default(),
    };

    // Common bytes with every content sharing a non-ignored chunk; the
    // query's postings also tell its chunks' degrees.
    let query_chunks = query.chunk_counts(); // by chunk key, distinct
    let ids: Vec<ChunkKey> = query_chunks.iter().map(|c| c.0).collect();
    let postings = store.postings_of(&ids, ignored.cutoff)?;
    let mut common: HashMap<ContentId, u64> = HashMap::new();
    let mut payload = 0u64;
    for (&(chunk, len, count), holders) in query_chunks.iter().zip(&postings) {
        ignored.remember(chunk, holders);
        if ignored.is_ignored(&chunk) {
            continue;
        }
        payload += u64::from(len) * u64::from(count);
        for (holder, p) in holders {
            *common.entry(*holder).or_default() += u64::from(len) * u64::from(count.min(p.count));
        }
    }

    // Contents sharing a posted sketch sample; a sample posted by more
    // contents than the analysis's sample cap is a common phrase. Every
    // sample of the query is looked up, so that a small content inside it
    // is found; a content sharing only one, outside the query's own
    // bottom samples, is left out: the analysis would never compare the
    // two (it needs two posted samples in common, or one posted by both
    // sides), and such single matches are mostly rounded samples meeting
    // by chance (on ten Django releases, ~240 of a query's ~250 sample
    // holders, each a record to read and measure).
    let sketch = query.sketch.without(&ignored.templates.samples);
    let cap = analysis::sample_cap(ignored.cutoff);
    let own_posted = sketch.posted().len();
    let mut by_samples: HashMap<ContentId, (u32, bool)> = HashMap::new();
    for (i, holders) in store.sketch_postings_of(&sketch.samples, cap as usize)?.into_iter().enumerate() {
        if holders.len() as u64 <= cap {
            for h in holders {
                let e = by_samples.entry(h).or_default();
                e.0 += 1;
                e.1 |= i < own_posted;
            }
        }
    }
    for (h, (shared, posted_by_both)) in by_samples {
        if shared >= 2 || posted_by_both {
            common.entry(h).or_default();
        }
    }

    let mut candidates = Vec::with_capacity(common.len());
    let (ids, shared): (Vec<ContentId>, Vec<u64>) = common.into_iter().unzip();
    for (holder, shared) in store.content_hashes(&ids)?.into_iter().zip(shared) {
        if let Some(mut rec) = store.get::<ContentChunks>(&holder)? {
            // The record's own sketch is not used again: moved, not copied.
            let their_sketch = std::mem::take(&mut rec.sketch).into_without(&ignored.templates.samples);
            candidates.push((holder, shared, rec, their_sketch));
        }
    }
    if order == Order::QueryInside && candidates.len() > limit {
        // How much of the query each holds, in chunks or in words: neither
        // needs the candidate's payload.
        let inside = |shared: u64, their: &Sketch| {
            let chunks = if payload == 0 { 0.0 } else { shared as f64 / payload as f64 };
            chunks.max(sketch.estimate(their).a_in_b)
        };
        let mut scored: Vec<_> = candidates.into_iter().map(|c| (inside(c.1, &c.3), c)).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1 .0.cmp(&b.1 .0)));
        scored.truncate(limit);
        candidates = scored.into_iter().map(|(_, c)| c).collect();
    }
    tracing::debug!(
        "similar: {} chunks of the query, {} candidates holding {} chunks",
        query_chunks.len(),
        candidates.len(),
        candidates.iter().map(|c| c.2.runs.len()).sum::<usize>()
    );
    // A candidate's payload (its bytes in chunks not ignored) takes a
    // degree lookup per chunk, and a query as large as a JDK's 123 MB
    // `modules` file has candidates holding 1.4M chunks, none of them a
    // link. Only an answer needs its exact payload: one that is not
    // asked for (`all`) and may not be a link has its chunks' degrees
    // learnt until the payload they show is too large for a link.
    let words: Vec<_> = candidates.iter().map(|c| sketch.estimate(&c.3)).collect();
    let at = |i: usize, their_payload: u64| {
        let (_, shared, rec, _) = &candidates[i];
        Measures::new(*shared, payload, their_payload).and_words(Some(words[i]), query.size, rec.size)
    };
    let mut open = Vec::new();
    let mut todo = Vec::new();
    for (i, (holder, _, rec, _)) in candidates.iter().enumerate() {
        // Chunk measures only fall as the payload grows, to at most all
        // of the candidate's bytes in chunks.
        let most = rec.runs.iter().map(|r| r.bytes()).sum();
        if all || *holder == content || at(i, most).kind(params).is_some() {
            todo.extend(rec.runs.iter().map(|r| r.key));
        } else {
            open.push(i);
        }
    }
    ignored.learn(todo)?;
    let mut dropped = vec![false; candidates.len()];
    while !open.is_empty() {
        let mut todo = Vec::new();
        open.retain(|&i| {
            let rec = &candidates[i].2;
            let least = ignored.known_payload(rec);
            if at(i, least).kind(params).is_none() {
                dropped[i] = true;
                return false;
            }
            // Enough of the chunks not known yet to pass the payload a
            // link allows, if they are not ignored (most chunks are not).
            let mut want = link_payload_bound(candidates[i].1, payload, params).saturating_sub(least);
            let before = todo.len();
            for r in rec.runs.iter().filter(|r| !ignored.is_known(&r.key)) {
                todo.push(r.key);
                want = want.saturating_sub(r.bytes());
                if want == 0 {
                    break;
                }
            }
            // Every degree known: its payload is exact, and it may link.
            todo.len() > before
        });
        ignored.learn(todo)?;
    }
    tracing::debug!(
        "similar: {} chunk degrees known, {} candidates shown too large to link",
        ignored.memo.len(),
        dropped.iter().filter(|&&d| d).count()
    );

    let mut hits = Vec::new();
    for (i, (holder, _, rec, _)) in candidates.iter().enumerate() {
        if dropped[i] {
            continue;
        }
        let their_payload = ignored.payload(rec);
        let (holder, identical) = (*holder, *holder == content);
        // The same content read whole (no chunk list to measure): all of it.
        let measures = match identical && rec.runs.is_empty() {
            true => same_content(),
            false => at(i, their_payload),
        };
        let kind = measures.kind(params);
        if !(identical || all || kind.is_some()) {
            continue;
        }
        // Names are looked up once the best are known (below).
        let names = Vec::new();
        hits.push(Hit { content: holder, size: rec.size, payload: their_payload, names, measures, identical, kind });
    }
    // A content with no chunks (an empty file) shares no postings: its
    // identical copies are found by content hash alone.
    // So is one read whole (at least --whole-from), which keeps none. Only
    // when the index holds it: a query of an empty file counted "1
    // similar" where the index had no empty file.
    if query.runs.is_empty()
        && !hits.iter().any(|h| h.content == content)
        && !analysis::names_of(store, &content)?.is_empty()
    {
        let measures = same_content();
        let size = query.size;
        hits.push(Hit { content, size, payload: 0, names: Vec::new(), measures, identical: true, kind: None });
    }
    // Word measures rank a hit only when they rest on enough samples, as
    // they decide a link: a small file's few samples against a large one
    // can all match by chance, and would put it above a close version.
    let score = |h: &Hit| {
        let m = &h.measures;
        let w = &m.words;
        let words = if w.resemblance_trusted() { w.resemblance } else { 0.0 };
        m.resemblance.max(words).max(m.containment()).max(w.trusted_containment())
    };
    hits.sort_by(|a, b| {
        b.identical
            .cmp(&a.identical)
            .then(score(b).total_cmp(&score(a)))
            .then(b.measures.common.cmp(&a.measures.common))
            .then(a.content.cmp(&b.content))
    });
    // What the index holds at the query's own path is left out: its
    // content, when that is the only name it has.
    // So are its other names (hard links): the same file, not a copy.
    let own_rec = match own_path {
        Some(p) => match store.get::<Paths>(&p.to_vec())? {
            Some(id) => store.get::<Files>(&id)?,
            None => None,
        },
        None => None,
    };
    let own = own_rec.as_ref().map(|r| r.content);
    let own_file = own_rec.as_ref().filter(|r| r.dev != 0).map(|r| (r.dev, r.inode));
    let is_own = |n: &Name| Some(&*n.path) == own_path || (own_file.is_some() && n.file == own_file);
    let mut own_only = false;
    if let Some(h) = own.and_then(|o| hits.iter().find(|h| h.content == o)) {
        own_only = analysis::names_of(store, &h.content)?.iter().all(is_own);
    }
    let passes = |h: &Hit| h.identical || h.kind.is_some();
    let counted = |h: &&Hit| !(own_only && Some(h.content) == own);
    let similar = hits.iter().filter(counted).filter(|h| passes(h)).count();
    let sharing = hits.iter().filter(counted).filter(|h| !passes(h)).count();
    // The names of the best `limit` only: a page sharing a site template
    // can share something with a thousand contents, and every name is a
    // point lookup.
    let mut named = Vec::with_capacity(limit.min(hits.len()));
    for mut h in hits {
        if named.len() >= limit {
            break;
        }
        if h.names.is_empty() {
            h.names = analysis::names_of(store, &h.content)?;
            h.names.retain(|n| !is_own(n));
        }
        if !h.names.is_empty() {
            named.push(h);
        }
    }
    Ok(Similar { content, size: query.size, payload, chunks: query.chunk_count(), hits: named, similar, sharing, own })
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("reading the query: {0}")]
    Read(std::io::Error),
}

/// The measures of a content against itself where there is no chunk list
/// to measure them on (an empty file, or one read whole): all of it, in
/// chunks and in words alike (an empty file's words showed 0 %).
fn same_content() -> Measures {
    let words =
        crate::sketch::Estimate { resemblance: 1.0, a_in_b: 1.0, b_in_a: 1.0, exact: true, ..Default::default() };
    Measures { resemblance: 1.0, a_in_b: 1.0, b_in_a: 1.0, words, ..Measures::new(0, 0, 0) }
}
