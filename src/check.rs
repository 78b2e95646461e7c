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

use crate::analysis::{Slot, Slots};
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
///
/// Each column family is read once, in key order, and compared with what
/// the others imply by walking two sorted lists side by side ([`merge`]):
/// keys are big-endian, so key order is the order of the decoded keys. A
/// point lookup per file and per posting (four per file) took 28 s on an
/// index of 400k files; a lookup is left only where something is missing,
/// to say what is there instead.
pub fn check(store: &Store) -> Result<CheckReport, StoreError> {
    let mut problems = Vec::new();
    let mut problem = |s: String| problems.push(s);
    let (mut ghost_count, mut postings) = (0, 0);
    let path = |b: &[u8]| crate::report_path(b);

    // files ↔ paths ↔ content_names
    let mut files: Vec<FileSeen> = Vec::new();
    for item in store.scan::<Files>() {
        let (id, rec) = item?;
        files.push(FileSeen { id, path: rec.path, content: rec.content, pathed: false, named: false });
    }
    let max_id = files.last().map_or(0, |f| f.id.0);
    let files_count = files.len() as u64;
    // File ids are a counter: dense, so most lookups index a table.
    let slots = Slots::new(files.iter().enumerate().map(|(k, f)| (f.id.0, k as u32)));
    let file = |id: FileId| match slots.get(id.0) {
        Slot::At(k) => Some(k as usize),
        Slot::None => None,
        Slot::Search => files.binary_search_by_key(&id, |f| f.id).ok(),
    };
    let mut pathed = Vec::new();
    for item in store.scan::<Paths>() {
        let (p, id) = item?;
        match file(id) {
            Some(k) if files[k].path == p => pathed.push(k),
            Some(k) => problem(format!("{}: paths points at {id}, which is {}", path(&p), path(&files[k].path))),
            None => problem(format!("{}: paths points at {id}, which has no files record", path(&p))),
        }
    }
    // Contents with a name, in key order (`content_names` is keyed by
    // content first).
    let mut live: Vec<ContentHash> = Vec::new();
    let mut named = Vec::new();
    for item in store.scan::<ContentNames>() {
        let ((content, id), ()) = item?;
        match file(id) {
            Some(k) if files[k].content == content => named.push(k),
            Some(k) => problem(format!(
                "content_names says {id} holds {content}, files says {} holds {}",
                path(&files[k].path),
                files[k].content
            )),
            None => problem(format!("content_names names {id} for {content}, which has no files record")),
        }
        if live.last() != Some(&content) {
            live.push(content);
        }
    }
    for k in pathed {
        files[k].pathed = true;
    }
    for k in named {
        files[k].named = true;
    }
    for f in &files {
        let id = f.id;
        if !f.pathed {
            match store.get::<Paths>(&f.path)? {
                Some(p) => problem(format!("{}: files {id} says this path, paths says {p}", path(&f.path))),
                None => problem(format!("{}: files {id} has no paths entry", path(&f.path))),
            }
        }
        if !f.named {
            problem(format!("{}: files {id} holds content {} but content_names lacks it", path(&f.path), f.content));
        }
    }

    // history ghosts
    let mut ghosts: Vec<(Vec<u8>, ContentHash)> = Vec::new();
    // The contents records keep chunk lists for: ghosts' and moves'.
    let mut ghosted: Vec<ContentHash> = Vec::new();
    for item in store.scan::<History>() {
        let ((p, _), rec) = item?;
        ghost_count += 1;
        ghosted.extend(rec.kept_content());
        if let HistoryRecord::Ghost { content, .. } = rec {
            ghosts.push((p, content));
        }
    }
    ghosted.sort_unstable();
    ghosted.dedup();

    // content_chunks ↔ content_by_id ↔ chunk_contents
    let mut expected: Vec<((ChunkKey, ContentId), Posting)> = Vec::new();
    let mut expected_samples: Vec<((u32, ContentId), ())> = Vec::new();
    // Each kept content, in key order, and its id.
    let mut kept: Vec<ContentHash> = Vec::new();
    let mut by_id: Vec<(ContentId, ContentHash, bool)> = Vec::new();
    let mut max_content = 0;
    // Both in key order.
    let mut is_live = Walk::new(&live);
    for item in store.scan::<ContentChunks>() {
        let (content, rec) = item?;
        kept.push(content);
        max_content = max_content.max(rec.id.0);
        if rec.id.0 == 0 {
            problem(format!("content {content}: stored without a content id"));
        }
        let live = is_live.holds(&content);
        by_id.push((rec.id, content, live));
        let total: u64 = rec.runs.iter().map(|r| r.bytes()).sum();
        // A content read whole keeps no chunk list (`WholeFrom`).
        let whole = rec.runs.is_empty() && rec.size >= crate::fingerprint::WholeFrom::MIN;
        if total != rec.size && !whole {
            problem(format!("content {content}: chunks add up to {total} bytes, record says {}", rec.size));
        }
        if live {
            for (chunk, len, count) in rec.chunk_counts() {
                expected.push(((chunk, rec.id), Posting { count, len }));
            }
            expected_samples.extend(rec.sketch.posted().iter().map(|&s| ((s, rec.id), ())));
        } else if ghosted.binary_search(&content).is_err() {
            problem(format!("content {content}: chunk list kept with no name, no ghost and no move"));
        }
    }
    let contents = kept.len() as u64;
    let has_chunks = |c: &ContentHash| kept.binary_search(c).is_ok();
    // The files' contents sorted, less those kept.
    let mut lacking: Vec<ContentHash> = files.iter().map(|f| f.content).collect();
    lacking.sort_unstable();
    lacking.dedup();
    let mut is_kept = Walk::new(&kept);
    lacking.retain(|c| !is_kept.holds(c));
    if !lacking.is_empty() {
        for f in files.iter().filter(|f| lacking.binary_search(&f.content).is_ok()) {
            problem(format!("{}: content {} has no chunk list", path(&f.path), f.content));
        }
    }
    drop(files);
    for (p, content) in &ghosts {
        if !has_chunks(content) {
            problem(format!("{}: ghost of content {content} whose chunk list is gone", path(p)));
        }
    }
    drop(ghosts);
    // Stable: of two contents with one id, the first in key order keeps it.
    by_id.sort_by_key(|c| c.0);
    by_id.dedup_by(|later, first| {
        let shared = later.0 == first.0;
        if shared {
            problem(format!("content {}: its id {} is also content {}'s", later.1, later.0, first.1));
        }
        shared
    });
    let content_of = |id: &ContentId| by_id.binary_search_by_key(id, |c| c.0).ok().map(|k| &by_id[k]);
    let mut mapped = 0;
    for item in store.scan::<ContentById>() {
        let (id, hash) = item?;
        mapped += 1;
        match content_of(&id) {
            Some((_, c, _)) if *c == hash => {}
            Some((_, c, _)) => problem(format!("content_by_id says {id} is {hash}, content {c} holds that id")),
            None => problem(format!("content_by_id maps {id} to {hash}, which has no chunk list with that id")),
        }
    }
    if mapped != by_id.len() {
        problem(format!("content_by_id holds {mapped} ids for {} kept chunk lists", by_id.len()));
    }
    // A posting names a content by id: the content it means, for messages.
    let named = |id: &ContentId| match content_of(id) {
        Some((_, hash, _)) => format!("content {hash} ({id})"),
        None => format!("content id {id}"),
    };
    // A first index still running has written none yet (a killed one had
    // them rebuilt as the index was opened).
    let postings_pending = store.postings_pending()?;
    if !postings_pending {
        merge(expected, store.scan::<ChunkContents>(), |met| {
            match met {
                Met::Both((chunk, content), p, posting) if p != posting => {
                    problem(format!("posting {chunk} in {}: {posting:?}, chunk list says {p:?}", named(&content)))
                }
                Met::Both(..) => {}
                Met::Found((chunk, content), _) => match content_of(&content) {
                    Some((_, _, true)) => {
                        problem(format!("posting {chunk} in {}: not in the content's chunk list", named(&content)))
                    }
                    Some(_) => problem(format!("posting {chunk} in {}: the content has no name", named(&content))),
                    None => problem(format!("posting {chunk} in {}: no chunk list has this id", named(&content))),
                },
                Met::Expected((chunk, content), _) => {
                    problem(format!("{}: posting for chunk {chunk} missing", named(&content)))
                }
            }
            if !matches!(met, Met::Expected(..)) {
                postings += 1;
            }
        })?;

        // content_chunks' sketches ↔ sketch_contents
        merge(expected_samples, store.scan::<SketchContents>(), |met| match met {
            Met::Both(..) => postings += 1,
            Met::Found((sample, content), ()) => {
                postings += 1;
                problem(format!(
                    "sketch posting {sample:08x} in {}: not a posted sample of a live content",
                    named(&content)
                ));
            }
            Met::Expected((sample, content), ()) => {
                problem(format!("{}: sketch posting for sample {sample:08x} missing", named(&content)))
            }
        })?;
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
    let next_file_id = match store.get::<Meta>(&MetaKey::NextFileId)? {
        Some(MetaValue::NextFileId(n)) if n > max_id => n,
        other => {
            problem(format!("meta next_file_id is {other:?}, but file id {max_id} is in use"));
            max_id + 1
        }
    };
    // The marks that date file ids (`report --since`): in order of time
    // and of id, each id one handed out by then.
    match store.get::<Meta>(&MetaKey::Marks)? {
        Some(MetaValue::Marks(marks)) => {
            let ordered = marks.windows(2).all(|w| w[0].at < w[1].at && w[0].next_file_id < w[1].next_file_id);
            let handed_out = marks.iter().all(|m| m.next_file_id < next_file_id && m.within >= 0);
            if !ordered || !handed_out {
                problem(format!(
                    "meta marks are out of order or name ids not handed out (next file id {next_file_id}): {marks:?}"
                ));
            }
        }
        None => {}
        other => problem(format!("meta marks hold {other:?}")),
    }
    match store.get::<Meta>(&MetaKey::NextContentId)? {
        Some(MetaValue::NextContentId(n)) if n > max_content => {}
        None if max_content == 0 => {}
        other => problem(format!("meta next_content_id is {other:?}, but content id {max_content} is in use")),
    }

    Ok(CheckReport { files: files_count, contents, postings, ghosts: ghost_count, postings_pending, problems })
}

/// A `files` record as the checker holds it, and whether `paths` and
/// `content_names` point back at it.
struct FileSeen {
    id: FileId,
    path: Vec<u8>,
    content: ContentHash,
    pathed: bool,
    named: bool,
}

/// Whether each of values asked in increasing order is in a sorted list,
/// by walking it once (a binary search each was a cache miss each).
struct Walk<'a, T> {
    list: &'a [T],
    at: usize,
}

impl<'a, T: Ord> Walk<'a, T> {
    fn new(list: &'a [T]) -> Self {
        Walk { list, at: 0 }
    }

    /// Whether the list holds `x`, which is no smaller than the value asked before.
    fn holds(&mut self, x: &T) -> bool {
        self.at += self.list[self.at..].partition_point(|y| y < x);
        self.list.get(self.at) == Some(x)
    }
}

/// A key of two sorted lists walked side by side ([`merge`]).
enum Met<K, A, B> {
    /// In both: what was expected, and what was found.
    Both(K, A, B),
    /// Found only.
    Found(K, B),
    /// Expected only.
    Expected(K, A),
}

/// Walks `expected` (sorted here; of a key expected twice, one is kept:
/// only two contents of one id expect one posting twice, and that is
/// reported apart) beside `found`, a scan in key order, and tells `on` about each key
/// of either.
fn merge<K: Ord + Copy, A, B>(
    mut expected: Vec<(K, A)>,
    found: impl Iterator<Item = Result<(K, B), StoreError>>,
    mut on: impl FnMut(Met<K, A, B>),
) -> Result<(), StoreError> {
    expected.sort_unstable_by_key(|e| e.0);
    expected.dedup_by_key(|e| e.0);
    let mut expected = expected.into_iter().peekable();
    for item in found {
        let (key, value) = item?;
        while let Some((k, a)) = expected.next_if(|e| e.0 < key) {
            on(Met::Expected(k, a));
        }
        match expected.next_if(|e| e.0 == key) {
            Some((_, a)) => on(Met::Both(key, a, value)),
            None => on(Met::Found(key, value)),
        }
    }
    expected.for_each(|(k, a)| on(Met::Expected(k, a)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Walk;

    #[test]
    fn a_walk_tells_members_of_a_sorted_list_asked_in_order() {
        let list = [2, 3, 5, 7, 11, 13];
        let mut walk = Walk::new(&list);
        let found: Vec<u32> = (0..16).filter(|x| walk.holds(x)).collect();
        assert_eq!(found, list);
        // Asked again, and past the end.
        let mut walk = Walk::new(&list);
        assert!(walk.holds(&7) && walk.holds(&7) && !walk.holds(&8) && walk.holds(&13) && !walk.holds(&99));
    }
}
