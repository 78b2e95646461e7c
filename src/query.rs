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
use crate::fingerprint::{fingerprint_reader, ChunkId, ContentHash};
use crate::store::{ContentChunks, ContentRecord, Store, StoreError};

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
    /// containments (chunks or words), then by bytes in common.
    pub hits: Vec<Hit>,
}

/// Degree lookups with a memo: a chunk is ignored when it is a template or in
/// more than `cutoff` contents.
struct Ignored<'a> {
    store: &'a Store,
    templates: analysis::Ignored,
    cutoff: u64,
    memo: HashMap<ChunkId, bool>,
}

impl Ignored<'_> {
    fn is_ignored(&mut self, chunk: &ChunkId) -> Result<bool, StoreError> {
        if self.templates.chunks.contains(chunk) {
            return Ok(true);
        }
        if let Some(&v) = self.memo.get(chunk) {
            return Ok(v);
        }
        let mut degree = 0;
        for item in self.store.postings(chunk) {
            item?;
            degree += 1;
            if degree > self.cutoff {
                break;
            }
        }
        let v = degree > self.cutoff;
        self.memo.insert(*chunk, v);
        Ok(v)
    }
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
    let fp = fingerprint_reader(reader, store.params(), &mut Vec::new()).map_err(QueryError::Read)?;
    let query = ContentRecord { size: fp.size, runs: fp.runs, sketch: fp.sketch };
    Ok(similar_to(store, fp.content, &query, own_path, params, all, limit)?)
}

/// Indexed contents similar to a content record (a file just read, or a
/// ghost's kept record), best first.
pub fn similar_to(
    store: &Store,
    content: ContentHash,
    query: &ContentRecord,
    own_path: Option<&[u8]>,
    params: &AnalysisParams,
    all: bool,
    limit: usize,
) -> Result<Similar, StoreError> {
    let contents = store.counts()?.contents;
    let mut ignored = Ignored {
        store,
        templates: analysis::templates(store)?,
        cutoff: params.max_degree.unwrap_or_else(|| auto_cutoff(contents)),
        memo: HashMap::new(),
    };

    // Common bytes with every content sharing a non-ignored chunk.
    let mut common: HashMap<ContentHash, u64> = HashMap::new();
    let mut payload = 0u64;
    for (chunk, len, count) in query.chunk_counts() {
        let mut postings = Vec::new();
        if !ignored.is_ignored(&chunk)? {
            for item in store.postings(&chunk) {
                postings.push(item?);
            }
            payload += u64::from(len) * u64::from(count);
        }
        for ((_, holder), p) in postings {
            *common.entry(holder).or_default() += u64::from(len) * u64::from(count.min(p.count));
        }
    }

    // Contents sharing a posted sketch sample; a sample posted by more
    // contents than the analysis's sample cap is a common phrase.
    let sketch = query.sketch.without(&ignored.templates.samples);
    let cap = ignored.cutoff.min(analysis::SAMPLE_DEGREE_CAP);
    for holders in store.sketch_postings_of(&sketch.samples, cap as usize)? {
        if holders.len() as u64 <= cap {
            for h in holders {
                common.entry(h).or_default();
            }
        }
    }

    let mut hits = Vec::new();
    for (holder, shared) in common {
        let Some(rec) = store.get::<ContentChunks>(&holder)? else { continue };
        let mut their_payload = 0u64;
        for (chunk, len, count) in rec.chunk_counts() {
            if !ignored.is_ignored(&chunk)? {
                their_payload += u64::from(len) * u64::from(count);
            }
        }
        let measures = Measures::with_words(
            shared,
            (&sketch, payload, query.size),
            (&rec.sketch.without(&ignored.templates.samples), their_payload, rec.size),
        );
        let identical = holder == content;
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
    if query.runs.is_empty() {
        let measures = Measures { resemblance: 1.0, a_in_b: 1.0, b_in_a: 1.0, ..Measures::new(0, 0, 0) };
        hits.push(Hit { content, size: 0, payload: 0, names: Vec::new(), measures, identical: true, kind: None });
    }
    let score = |h: &Hit| {
        let m = &h.measures;
        m.best_resemblance().max(m.containment()).max(m.words.containment())
    };
    hits.sort_by(|a, b| {
        b.identical
            .cmp(&a.identical)
            .then(score(b).total_cmp(&score(a)))
            .then(b.measures.common.cmp(&a.measures.common))
            .then(a.content.cmp(&b.content))
    });
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
            if let Some(own) = own_path {
                h.names.retain(|n| n.path != own);
            }
        }
        if !h.names.is_empty() {
            named.push(h);
        }
    }
    Ok(Similar { content, size: query.size, payload, chunks: query.chunk_count(), hits: named })
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("reading the query: {0}")]
    Read(std::io::Error),
}
