//! Lost-and-found (Broder et al. 1997, "Lost and found", on files): where
//! does the content last seen at a path live now?
//!
//! The answer comes from `history` (ghosts of deleted files with their
//! content hash and kept chunk list and sketch, and move records) and the
//! live index: a recorded move (chains followed: a → b → c gives c), live
//! files with the ghost's content hash, and live files ranked by how much of
//! the ghost they contain (in chunks or in words). Files that appeared when
//! the path went come before those that were there already ([`Rank`]), so a
//! file moved and then edited is found before an old copy. Nothing is
//! re-read from disk.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use crate::analysis::{self, AnalysisParams, Name};
use crate::fingerprint::ContentHash;
use crate::query;
use crate::scan::{closeness, path_bytes};
use crate::store::{ContentChunks, FileId, Files, HistoryRecord, Paths, Store, StoreError, TimeNs};

/// How a candidate relates to the lost path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A recorded rename (content unchanged when it happened).
    Moved,
    /// A live file with the same content.
    Identical,
    /// A live file holding much of the lost content.
    Similar,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Moved => "moved",
            Kind::Identical => "identical",
            Kind::Similar => "similar",
        }
    }
}

/// One place the lost content may be now.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub path: Vec<u8>,
    pub kind: Kind,
    /// 1.0 for moves and identical files; containment of the lost content
    /// in the candidate for similar ones.
    pub score: f64,
    pub resemblance: f64,
    /// Intermediate paths of a chain of moves.
    pub via: Vec<Vec<u8>>,
    /// A move whose destination holds other content now (edited or
    /// replaced there since): `score` and `resemblance` say how much of
    /// the moved content it still holds.
    pub changed: bool,
}

/// What is known of one lost path.
#[derive(Clone, Debug)]
pub struct LostFile {
    pub path: Vec<u8>,
    /// When the path was last seen: when the daemon saw it go or moved,
    /// or, when a scan found it gone, when a walk last found it there.
    pub last_seen: TimeNs,
    /// When a scan found it gone (then it went between `last_seen` and
    /// this); None when the daemon saw it go, and for records written
    /// before scans noted when they last saw a file.
    pub found_gone: Option<TimeNs>,
    pub content: Option<ContentHash>,
    pub size: Option<u64>,
    /// The recorded moves followed from the path, in order, when they led
    /// to no live file: the last place the content was seen under a name.
    pub moves: Vec<Vec<u8>>,
    /// Whether the last of `moves` was removed (a ghost says so); else it
    /// left the index without a trace (its root forgotten, or excluded).
    pub removed_there: bool,
    /// Best first; empty when the content survives nowhere.
    pub candidates: Vec<Candidate>,
    /// Candidates after the first `--limit`, left out (a content with
    /// many copies: they are said to be there), and how many of them are
    /// identical copies.
    pub more: usize,
    pub more_identical: usize,
}

/// The answer to `simd lost PATH`.
#[derive(Clone, Debug)]
pub enum Answer {
    /// PATH is a file in the index now.
    Live { path: Vec<u8>, content: ContentHash },
    /// PATH was a file.
    File(LostFile),
    /// PATH is or was a directory: an answer per file that was under it and
    /// is gone, where most of them went (destination directory, files), and
    /// how many files the index holds under it now.
    /// `since`: only files last seen then or later were asked for.
    Dir { path: Vec<u8>, files: Vec<LostFile>, destinations: Vec<(Vec<u8>, usize)>, live: usize, since: Option<TimeNs> },
    /// The index never saw anything at PATH (or its history expired).
    Unknown { path: Vec<u8> },
}

/// `p` made absolute and lexically normal (`.` and `..` folded), without
/// touching the file system.
pub fn lexical(p: &Path) -> std::io::Result<PathBuf> {
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Whether the index knows `path` (absolute): a file there, history of
/// one, or files under it. A path the index knows is asked about as it
/// is, even when a part of it is a symlink now (a directory replaced by a
/// link to another: its old files are what the user is after).
pub fn knows(store: &Store, path: &Path) -> Result<bool, StoreError> {
    let pb = path_bytes(path);
    Ok(store.get::<Paths>(&pb)?.is_some()
        || store.history_of(&pb).next().transpose()?.is_some()
        || store.history_under(&pb).next().transpose()?.is_some()
        || store.paths_under(&pb).next().transpose()?.is_some())
}

/// Makes `p` absolute and lexically normal without touching the file system
/// beyond the nearest existing ancestor (the path itself is usually gone).
pub fn absolute(p: &Path) -> std::io::Result<PathBuf> {
    let out = lexical(p)?;
    // Resolve symlinks in the part that still exists, as the index stores
    // canonical paths.
    let mut existing = out.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return Ok(out),
        }
    }
    let mut canon = existing.canonicalize().unwrap_or(existing);
    for name in rest.into_iter().rev() {
        canon.push(name);
    }
    Ok(canon)
}

/// The similar contents a lost file's candidates are drawn from, best first.
const SIMILAR_POOL: usize = 64;

/// The least share of a lost content a live file must hold to be answered
/// as where it may have gone. Below it the overlap is a shared line or a
/// few shingles of boilerplate, which `lost` listed as "0% of it there":
/// nothing a user can act on.
const MIN_SIMILAR_SHARE: f64 = 0.02;

/// A live file holding part of a lost content: (name, containment of the
/// lost content in it, resemblance).
type Holder = (Name, f64, f64);

/// One `lost` query's memo: a directory's files often share contents (empty
/// files, identical copies), and each content is looked up once.
struct Ctx<'s> {
    store: &'s Store,
    limit: usize,
    /// Asked about a directory: a file moved whole is answered by its move
    /// alone (its copies elsewhere would repeat for each of its files).
    dir: bool,
    names: HashMap<ContentHash, Vec<Name>>,
    similar: HashMap<ContentHash, Vec<Holder>>,
}

impl Ctx<'_> {
    fn names(&mut self, content: &ContentHash) -> Result<&Vec<Name>, StoreError> {
        if !self.names.contains_key(content) {
            let n = analysis::names_of(self.store, content)?;
            self.names.insert(*content, n);
        }
        Ok(&self.names[content])
    }

    /// Live files holding part of `content`, as (name, containment,
    /// resemblance); `answer_file` ranks them.
    fn similar(&mut self, content: &ContentHash) -> Result<&Vec<Holder>, StoreError> {
        if !self.similar.contains_key(content) {
            let mut out = Vec::new();
            if let Some(chunks) = self.store.get::<ContentChunks>(content)? {
                let params =
                    AnalysisParams { min_bytes: 1, min_similarity: 2.0, min_containment: 0.0, max_degree: None };
                // Enough for the ranking below to reorder (new files first).
                let order = query::Order::QueryInside;
                let sim = query::similar_to(self.store, *content, &chunks, None, &params, true, SIMILAR_POOL, order)?;
                for h in sim.hits.into_iter().filter(|h| !h.identical && h.measures.best_a_in_b() >= MIN_SIMILAR_SHARE)
                {
                    for n in h.names {
                        out.push((n, h.measures.best_a_in_b(), h.measures.best_resemblance()));
                    }
                }
            }
            self.similar.insert(*content, out);
        }
        Ok(&self.similar[content])
    }
}

/// Answers for `path` (absolute, as from [`absolute`]); for a directory,
/// only the files last seen at `since` or later when it is given.
pub fn lost(store: &Store, path: &Path, limit: usize, since: Option<TimeNs>) -> Result<Answer, StoreError> {
    let mut ctx = Ctx { store, limit, dir: false, names: HashMap::new(), similar: HashMap::new() };
    let pb = path_bytes(path);
    if let Some(id) = store.get::<Paths>(&pb)? {
        if let Some(rec) = store.get::<crate::store::Files>(&id)? {
            return Ok(Answer::Live { path: pb, content: rec.content });
        }
    }
    let own: Vec<_> = store.history_of(&pb).collect::<Result<_, _>>()?;
    if let Some(((_, time), rec)) = own.last() {
        return Ok(Answer::File(answer_file(&mut ctx, pb.clone(), *time, rec.clone())?));
    }
    // A directory: every path under it with history and no live file now.
    let mut latest: BTreeMap<Vec<u8>, (TimeNs, HistoryRecord)> = BTreeMap::new();
    for item in store.history_under(&pb) {
        let ((p, time), rec) = item?;
        latest.insert(p, (time, rec)); // keys are in time order within a path
    }
    // A directory that is still there answers for its files too: asked
    // about a live directory, "not in the index" would be wrong.
    let mut live = 0;
    for item in store.paths_under(&pb) {
        item?;
        live += 1;
    }
    if latest.is_empty() && live == 0 {
        return Ok(Answer::Unknown { path: pb });
    }
    ctx.dir = true;
    // `--since`: only what went from it in that time.
    latest.retain(|_, (time, _)| since.is_none_or(|s| *time >= s));
    let mut files = Vec::new();
    let mut dest: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (p, (time, rec)) in latest {
        if store.get::<Paths>(&p)?.is_some() {
            continue; // back in place
        }
        let f = answer_file(&mut ctx, p, time, rec)?;
        if let Some(best) = f.candidates.first() {
            // Where the directory went: the answer minus the file's path
            // inside the directory (a moved tree keeps its inside), else the
            // answer's own directory.
            let inside = &f.path[pb.len()..]; // starts with '/'
            let to = match best.path.strip_suffix(inside) {
                Some(d) if !d.is_empty() => d,
                _ => parent(&best.path),
            };
            *dest.entry(to.to_vec()).or_default() += 1;
        }
        files.push(f);
    }
    let mut destinations: Vec<(Vec<u8>, usize)> = dest.into_iter().collect();
    destinations.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(Answer::Dir { path: pb, files, destinations, live, since })
}

/// The content a file moved to `to` at `when` had, when an edit there since
/// left it with no name: the ghost of it written at `to` after the move.
fn moved_away(store: &Store, to: &[u8], when: TimeNs) -> Result<Option<ContentHash>, StoreError> {
    for item in store.history_of(to) {
        if let ((_, t), HistoryRecord::Ghost { content, .. }) = item? {
            if t > when {
                return Ok(Some(content));
            }
        }
    }
    Ok(None)
}

/// A content's size, from its record (kept while a name or a ghost refers
/// to it).
fn content_size(store: &Store, content: &ContentHash) -> Result<Option<u64>, StoreError> {
    Ok(store.get::<ContentChunks>(content)?.map(|r| r.size))
}

fn parent(p: &[u8]) -> &[u8] {
    crate::scan::split_last(p).map_or(p, |(dir, _)| dir)
}

/// The order of candidates, best first. Which file is where the lost one
/// went? One that appeared in the pass that found it gone (or later) rather
/// than one that was there before: an identical new file first, then a new
/// file holding at least half of it (moved, then edited), then identical
/// copies that were already there, then the rest. Within the first three
/// classes the path closest to the lost one ([`closeness`](crate::scan::closeness)) comes first (a
/// file moved and edited usually keeps its name), then the higher score;
/// among the rest the higher score first. Last, the newest.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    class: u8,
    /// (closeness, score) or (score, closeness), score in thousandths.
    key: std::cmp::Reverse<(u64, u64, u64)>,
    id: std::cmp::Reverse<FileId>,
}

impl Rank {
    fn new(kind: Kind, score: f64, n: &Name, since: FileId, last: &[u8]) -> Rank {
        let new = n.id >= since;
        let class = match kind {
            Kind::Moved => 0,
            Kind::Identical if new => 1,
            Kind::Similar if new && score >= 0.5 => 2,
            Kind::Identical => 3,
            Kind::Similar => 4,
        };
        let (suffix, prefix) = closeness(&n.path, last);
        let (suffix, prefix, score) = (suffix as u64, prefix as u64, (score * 1000.0) as u64);
        let key = if class < 4 { (suffix, prefix, score) } else { (score, suffix, prefix) };
        Rank { class, key: std::cmp::Reverse(key), id: std::cmp::Reverse(n.id) }
    }
}

/// The answer for one path whose latest history record is `rec`.
fn answer_file(
    ctx: &mut Ctx<'_>,
    path: Vec<u8>,
    last_seen: TimeNs,
    rec: HistoryRecord,
) -> Result<LostFile, StoreError> {
    let store = ctx.store;
    // A ghost a scan wrote says when a walk last found the file there; its
    // time is when the scan found it gone.
    let (last_seen, found_gone) = match rec {
        HistoryRecord::Ghost { seen: Some(seen), .. } if seen <= last_seen => (seen, Some(last_seen)),
        _ => (last_seen, None),
    };
    let mut candidates = Vec::new();
    let mut via = Vec::new();
    let mut seen: HashSet<Vec<u8>> = HashSet::from([path.clone()]);
    let (mut rec, mut when) = (rec, last_seen);
    let mut untraced = false;
    // What left `path`: the first move's content. A file edited at a stop
    // of the chain and moved on is not what left.
    let mut orig: Option<ContentHash> = None;
    // Follow moves: a → b → c. A move chain can end at a live file (the
    // answer, then its content's other places), at a ghost (continue by
    // content), or nowhere.
    let ghost = loop {
        match rec {
            HistoryRecord::Moved { to, content } => {
                orig = orig.or(content);
                let content = orig;
                if let Some(id) = store.get::<Paths>(&to)? {
                    let now = store.get::<Files>(&id)?.map(|r| r.content);
                    // What moved: the record says since session 72; for an
                    // older one, an edit at `to` since that left the moved
                    // content with no name left a ghost of it there.
                    let moved = match content {
                        Some(c) => Some(c),
                        None => moved_away(store, &to, when)?.or(now),
                    };
                    let changed = moved.is_some() && moved != now;
                    let (mut score, mut resemblance) = (1.0, 1.0);
                    if let (true, Some(m)) = (changed, moved) {
                        let held = ctx.similar(&m)?.iter().find(|h| *h.0.path == *to).map(|h| (h.1, h.2));
                        (score, resemblance) = held.unwrap_or((0.0, 0.0));
                    }
                    candidates.push(Candidate {
                        path: to,
                        kind: Kind::Moved,
                        score,
                        resemblance,
                        via: via.clone(),
                        changed,
                    });
                    // Its other copies follow; files holding part of it only
                    // when it is not whole at the destination. No file is
                    // taken as having appeared with the loss.
                    let copies = !ctx.dir || changed;
                    let size = match moved {
                        Some(c) => content_size(store, &c)?,
                        None => None,
                    };
                    break moved.map(|c| (c, size, FileId(u64::MAX), changed, copies));
                }
                if !seen.insert(to.clone()) {
                    break None; // a cycle of moves; nothing more to learn
                }
                // What became of `to` after the move; a record from before
                // it is of another file once there.
                let next = store.history_of(&to).last().transpose()?.filter(|((_, t), _)| *t >= when);
                via.push(to);
                match next {
                    Some(((_, t), r)) => (rec, when) = (r, t),
                    // Left the index without a trace (its root forgotten, or
                    // excluded since): the chain ends, and the moved content
                    // is looked for as a ghost's is. No file is taken as
                    // having appeared with the loss.
                    None => {
                        let size = match content {
                            Some(c) => content_size(store, &c)?,
                            None => None,
                        };
                        untraced = true;
                        break content.map(|c| (c, size, FileId(u64::MAX), true, true));
                    }
                }
            }
            HistoryRecord::Ghost { content, size, since, .. } => {
                let size = match orig.filter(|o| *o != content) {
                    Some(o) => content_size(store, &o)?,
                    None => Some(size),
                };
                break Some((orig.unwrap_or(content), size, since, true, true));
            }
        }
    };
    // (content, its size, the first file id of the pass that lost it,
    // whether to look for files holding part of it, and for its copies).
    let (content, size, since, search, copies) = match ghost {
        Some((c, s, since, search, copies)) => (Some(c), s, since, search, copies),
        None => (None, None, FileId(0), false, false),
    };
    if let Some(content) = content {
        let last = via.last().unwrap_or(&path).clone();
        // An empty file's content is every empty file: only one that
        // appeared with the loss says anything about where it went.
        let empty = size == Some(0);
        let same: Vec<Name> = ctx
            .names(&content)?
            .iter()
            .filter(|n| !candidates.iter().any(|c: &Candidate| *c.path == *n.path))
            .filter(|n| copies && (!empty || n.id >= since))
            .cloned()
            .collect();
        // Live files holding much of the content. The search costs a
        // postings scan per chunk and sample, so it is skipped when a copy
        // that appeared with the loss already answers.
        let similar = if !search || same.iter().any(|n| n.id >= since) {
            Vec::new()
        } else {
            let listed = |n: &Name| candidates.iter().any(|c: &Candidate| *c.path == *n.path);
            ctx.similar(&content)?.iter().filter(|h| !listed(&h.0)).cloned().collect()
        };
        let mut ranked: Vec<(Rank, Candidate)> = Vec::with_capacity(same.len() + similar.len());
        for n in same {
            let rank = Rank::new(Kind::Identical, 1.0, &n, since, &last);
            let c = Candidate {
                path: n.path.to_vec(),
                kind: Kind::Identical,
                score: 1.0,
                resemblance: 1.0,
                via: via.clone(),
                changed: false,
            };
            ranked.push((rank, c));
        }
        for (n, score, resemblance) in similar {
            let rank = Rank::new(Kind::Similar, score, &n, since, &last);
            ranked.push((
                rank,
                Candidate {
                    path: n.path.to_vec(),
                    kind: Kind::Similar,
                    score,
                    resemblance,
                    via: via.clone(),
                    changed: false,
                },
            ));
        }
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.path.cmp(&b.1.path)));
        candidates.extend(ranked.into_iter().map(|(_, c)| c));
        // A move whose destination kept less than half of the content is
        // a worse answer than a whole copy of it: it goes after them.
        if candidates.first().is_some_and(|c| c.changed && c.score < 0.5) {
            let copies = candidates[1..].iter().take_while(|c| c.kind == Kind::Identical).count();
            candidates[..=copies].rotate_left(1);
        }
    }
    // A chain that reached a live file is in that answer's `via` (told
    // before `--limit` cuts: a move put after copies may be cut away).
    let moves = if candidates.iter().any(|c| c.kind == Kind::Moved) { Vec::new() } else { via };
    let more = candidates.len().saturating_sub(ctx.limit);
    let more_identical = candidates.iter().skip(ctx.limit).filter(|c| c.kind == Kind::Identical).count();
    candidates.truncate(ctx.limit);
    let removed_there = !moves.is_empty() && content.is_some() && !untraced;
    Ok(LostFile { path, last_seen, found_gone, content, size, moves, removed_there, candidates, more, more_identical })
}
