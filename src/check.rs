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
//! - `meta` holds the format, and the next file id is above every id in use.
//!
//! Memory is O(files + postings of live contents): this is an audit, run on
//! demand, not a hot path.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::fingerprint::{ChunkId, ContentHash};
use crate::store::{
    ChunkContents, ContentChunks, ContentNames, FileId, Files, History, HistoryRecord, Meta, MetaKey, MetaValue, Paths,
    Posting, SketchContents, Store, StoreError,
};

/// What the checker found.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub files: u64,
    pub contents: u64,
    pub postings: u64,
    pub ghosts: u64,
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

    // content_chunks ↔ chunk_contents
    let mut expected: HashMap<(ChunkId, ContentHash), Posting> = HashMap::new();
    let mut expected_samples: HashSet<(u32, ContentHash)> = HashSet::new();
    let mut contents = 0;
    for item in store.scan::<ContentChunks>() {
        let (content, rec) = item?;
        contents += 1;
        let total: u64 = rec.runs.iter().map(|r| u64::from(r.len) * u64::from(r.count)).sum();
        if total != rec.size {
            problem(format!("content {content}: chunks add up to {total} bytes, record says {}", rec.size));
        }
        if live.contains(&content) {
            for (chunk, len, count) in rec.chunk_counts() {
                expected.insert((chunk, content), Posting { count, len });
            }
            expected_samples.extend(rec.sketch.posted().iter().map(|&s| (s, content)));
        } else if !ghosts.contains(&content) {
            problem(format!("content {content}: chunk list kept with no name and no ghost"));
        }
    }
    for item in store.scan::<ChunkContents>() {
        let ((chunk, content), posting) = item?;
        postings += 1;
        match expected.remove(&(chunk, content)) {
            Some(p) if p == posting => {}
            Some(p) => problem(format!("posting {chunk} in {content}: {posting:?}, chunk list says {p:?}")),
            None if live.contains(&content) => {
                problem(format!("posting {chunk} in {content}: not in the content's chunk list"))
            }
            None => problem(format!("posting {chunk} in {content}: the content has no name")),
        }
    }
    for (chunk, content) in expected.keys() {
        problem(format!("content {content}: posting for chunk {chunk} missing"));
    }

    // content_chunks' sketches ↔ sketch_contents
    for item in store.scan::<SketchContents>() {
        let ((sample, content), ()) = item?;
        postings += 1;
        if !expected_samples.remove(&(sample, content)) {
            problem(format!("sketch posting {sample:08x} in {content}: not a posted sample of a live content"));
        }
    }
    for (sample, content) in &expected_samples {
        problem(format!("content {content}: sketch posting for sample {sample:08x} missing"));
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

    Ok(CheckReport { files: files_count, contents, postings, ghosts: ghost_count, problems })
}
