//! The cross-CF invariant checker behind `simd check` and the crash tests.
//!
//! The invariants, each checked in both directions:
//! - every `files` record has the `paths` entry pointing back at it, a
//!   `content_names` entry for its content, and that content's chunk list;
//! - every `paths` entry names a `files` record with that path;
//! - every `content_names` entry names a `files` record holding that content;
//! - a content with a name has exactly the postings its chunk list implies
//!   (one per distinct chunk, with its occurrence count), and a content
//!   without a name has none;
//! - a chunk list is kept only for a content with a name or one a history
//!   ghost refers to, and every ghost's content has its chunk list;
//! - every kept chunk list has its own content id, which `content_by_id`
//!   maps back to it, and `content_by_id` holds nothing else;
//! - `meta` holds the format, and the next file and content ids are above
//!   every id in use.
//!
//! Memory is O(files + postings of live contents): this is an audit, run on
//! demand, not a hot path.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::fingerprint::{ChunkKey, ContentHash};
use crate::store::{
    ChunkContents, ContentById, ContentChunks, ContentId, ContentNames, FileId, Files, History, HistoryRecord, Meta,
    MetaKey, MetaValue, Paths, Posting, SketchContents, Store, StoreError,
};

/// What the checker found.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub files: u64,
    pub contents: u64,
    pub postings: u64,
    pub ghosts: u64,
    /// A first index is running and writes its postings at its end
    /// (`store::PostingSpill`): they were not checked.
    pub postings_pending: bool,
    /// Every violation, one sentence each.
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks every cross-CF invariant of the index.
pub fn check(store: &Store) -> Result<CheckReport, StoreError> {
    let mut problems = Vec::new();
    let mut problem = |s: String| problems.push(s);
    let (mut ghost_count, mut postings) = (0, 0);
    let path = |b: &[u8]| crate::report_path(b);

    // files ↔ paths ↔ content_names
    let mut files: HashMap<FileId, (Vec<u8>, ContentHash)> = HashMap::new();
    let mut max_id = 0;
    for item in store.scan::<Files>() {
        let (id, rec) = item?;
        max_id = max_id.max(id.0);
        match store.get::<Paths>(&rec.path)? {
            Some(p) if p == id => {}
            Some(p) => problem(format!("{}: files {id} says this path, paths says {p}", path(&rec.path))),
            None => problem(format!("{}: files {id} has no paths entry", path(&rec.path))),
        }
        if !store.contains::<ContentNames>(&(rec.content, id))? {
            problem(format!(
                "{}: files {id} holds content {} but content_names lacks it",
                path(&rec.path),
                rec.content
            ));
        }
        if !store.contains::<ContentChunks>(&rec.content)? {
            problem(format!("{}: content {} has no chunk list", path(&rec.path), rec.content));
        }
        files.insert(id, (rec.path, rec.content));
    }
    let files_count = files.len() as u64;
    for item in store.scan::<Paths>() {
        let (p, id) = item?;
        match files.get(&id) {
            Some((fp, _)) if *fp == p => {}
            Some((fp, _)) => problem(format!("{}: paths points at {id}, which is {}", path(&p), path(fp))),
            None => problem(format!("{}: paths points at {id}, which has no files record", path(&p))),
        }
    }
    let mut live: BTreeSet<ContentHash> = BTreeSet::new();
    for item in store.scan::<ContentNames>() {
        let ((content, id), ()) = item?;
        match files.get(&id) {
            Some((_, c)) if *c == content => {}
            Some((p, c)) => {
                problem(format!("content_names says {id} holds {content}, files says {} holds {c}", path(p)))
            }
            None => problem(format!("content_names names {id} for {content}, which has no files record")),
        }
        live.insert(content);
    }
    drop(files);

    // history ghosts
    let mut ghosts: HashSet<ContentHash> = HashSet::new();
    for item in store.scan::<History>() {
        let ((p, _), rec) = item?;
        ghost_count += 1;
        if let HistoryRecord::Ghost { content, .. } = rec {
            if !store.contains::<ContentChunks>(&content)? {
                problem(format!("{}: ghost of content {content} whose chunk list is gone", path(&p)));
            }
            ghosts.insert(content);
        }
    }

    // content_chunks ↔ content_by_id ↔ chunk_contents
    let mut expected: HashMap<(ChunkKey, ContentId), Posting> = HashMap::new();
    let mut expected_samples: HashSet<(u32, ContentId)> = HashSet::new();
    // Each kept content's id, and whether its id is live.
    let mut by_id: HashMap<ContentId, (ContentHash, bool)> = HashMap::new();
    let mut contents = 0;
    let mut max_content = 0;
    for item in store.scan::<ContentChunks>() {
        let (content, rec) = item?;
        contents += 1;
        max_content = max_content.max(rec.id.0);
        if rec.id.0 == 0 {
            problem(format!("content {content}: stored without a content id"));
        }
        if let Some((other, _)) = by_id.insert(rec.id, (content, live.contains(&content))) {
            problem(format!("content {content}: its id {} is also content {other}'s", rec.id));
        }
        let total: u64 = rec.runs.iter().map(|r| r.bytes()).sum();
        // A content read whole keeps no chunk list (`WholeFrom`).
        let whole = rec.runs.is_empty() && rec.size >= crate::fingerprint::WholeFrom::MIN;
        if total != rec.size && !whole {
            problem(format!("content {content}: chunks add up to {total} bytes, record says {}", rec.size));
        }
        if live.contains(&content) {
            for (chunk, len, count) in rec.chunk_counts() {
                expected.insert((chunk, rec.id), Posting { count, len });
            }
            expected_samples.extend(rec.sketch.posted().iter().map(|&s| (s, rec.id)));
        } else if !ghosts.contains(&content) {
            problem(format!("content {content}: chunk list kept with no name and no ghost"));
        }
    }
    let mut mapped = 0;
    for item in store.scan::<ContentById>() {
        let (id, hash) = item?;
        mapped += 1;
        match by_id.get(&id) {
            Some((c, _)) if *c == hash => {}
            Some((c, _)) => problem(format!("content_by_id says {id} is {hash}, content {c} holds that id")),
            None => problem(format!("content_by_id maps {id} to {hash}, which has no chunk list with that id")),
        }
    }
    if mapped != by_id.len() {
        problem(format!("content_by_id holds {mapped} ids for {} kept chunk lists", by_id.len()));
    }
    // A posting names a content by id: the content it means, for messages.
    let named = |id: &ContentId| match by_id.get(id) {
        Some((hash, _)) => format!("content {hash} ({id})"),
        None => format!("content id {id}"),
    };
    // A first index still running has written none yet (a killed one had
    // them rebuilt as the index was opened).
    let postings_pending = store.postings_pending()?;
    if !postings_pending {
        for item in store.scan::<ChunkContents>() {
            let ((chunk, content), posting) = item?;
            postings += 1;
            match expected.remove(&(chunk, content)) {
                Some(p) if p == posting => {}
                Some(p) => {
                    problem(format!("posting {chunk} in {}: {posting:?}, chunk list says {p:?}", named(&content)))
                }
                None if by_id.get(&content).is_some_and(|c| c.1) => {
                    problem(format!("posting {chunk} in {}: not in the content's chunk list", named(&content)))
                }
                None if by_id.contains_key(&content) => {
                    problem(format!("posting {chunk} in {}: the content has no name", named(&content)))
                }
                None => problem(format!("posting {chunk} in {}: no chunk list has this id", named(&content))),
            }
        }
        for (chunk, content) in expected.keys() {
            problem(format!("{}: posting for chunk {chunk} missing", named(content)));
        }

        // content_chunks' sketches ↔ sketch_contents
        for item in store.scan::<SketchContents>() {
            let ((sample, content), ()) = item?;
            postings += 1;
            if !expected_samples.remove(&(sample, content)) {
                problem(format!(
                    "sketch posting {sample:08x} in {}: not a posted sample of a live content",
                    named(&content)
                ));
            }
        }
        for (sample, content) in &expected_samples {
            problem(format!("{}: sketch posting for sample {sample:08x} missing", named(content)));
        }
    }

    // meta
    match store.get::<Meta>(&MetaKey::Counts)? {
        Some(MetaValue::Counts(c)) if c.files == files_count && c.contents == live.len() as u64 => {}
        None if files_count == 0 => {}
        other => problem(format!(
            "meta counts are {other:?}, the index holds {files_count} files and {} live contents",
            live.len()
        )),
    }
    match store.get::<Meta>(&MetaKey::NextFileId)? {
        Some(MetaValue::NextFileId(n)) if n > max_id => {}
        other => problem(format!("meta next_file_id is {other:?}, but file id {max_id} is in use")),
    }
    match store.get::<Meta>(&MetaKey::NextContentId)? {
        Some(MetaValue::NextContentId(n)) if n > max_content => {}
        None if max_content == 0 => {}
        other => problem(format!("meta next_content_id is {other:?}, but content id {max_content} is in use")),
    }

    Ok(CheckReport { files: files_count, contents, postings, ghosts: ghost_count, postings_pending, problems })
}
