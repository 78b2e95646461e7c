//! Identical directories: directories whose files are, name for name, copies
//! of another directory's files (a folder copied whole, "Project – copy",
//! one release unpacked beside another). Found from an analysis's
//! identical sets and the index's `paths`, never from the disk.
//!
//! A directory's *signature* is a 128-bit XXH3 over its entries in path
//! order: each file as (name, content hash), each subdirectory as (name,
//! its signature), so two directories share a signature when the same
//! relative names hold the same contents beneath them (a Merkle tree, as
//! git's tree objects; not MD5, as it only groups what the content hashes
//! already tell apart). Only files with a copy somewhere can be in an
//! identical directory, so only the copies' names are hashed; a directory
//! is then kept only if the index holds no other file beneath it.
//! The index knows the files it indexes and nothing else: a directory's
//! ignored, excluded or unreadable files, and its empty subdirectories,
//! take no part.

use std::sync::Arc;

use crate::analysis::{IdenticalSet, Linked};
use crate::fingerprint::ContentHash;
use crate::scan::{is_under, is_under_any, split_last as split, HashMap, HashSet};
use crate::store::{FileId, Store, StoreError};

/// Directories with the same files under the same names, each directory
/// holding nothing else the index knows of.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DirSet {
    /// The directories' signature (see the module's documentation).
    pub signature: ContentHash,
    /// Files beneath each directory, at any depth.
    pub files: usize,
    /// Their bytes, in each directory.
    pub size: u64,
    /// What all directories but one take: their files' bytes, a file with
    /// several names (hard links) counted once.
    pub wasted: u64,
    /// The directories, sorted.
    pub dirs: Vec<Arc<[u8]>>,
    /// For each directory, when every file beneath it is a hard link of a
    /// file of another of them (`cp -al`): the first such other one (by
    /// its place in `dirs`). Removing it alone frees nothing.
    pub links_of: Vec<Option<usize>>,
    /// The highest file id beneath any of them: the newest file first
    /// indexed (`report --since`).
    pub newest: FileId,
}

/// What removing all but the first directory of every set would free, a
/// directory inside another removed one counted once: a set nested in a
/// larger one whose other directory is elsewhere (`r1/docs`, `r2/docs`,
/// `r3/docs` beside `r1`, `r2`) repeats the larger one's bytes for its
/// directories inside it, and summing the sets' `wasted` counted them
/// twice (62 kB against 42 kB of duplicate files in all). A set's waste is
/// shared evenly among its directories removed that are not hard links of
/// another (exact for copies).
pub fn total_wasted(sets: &[DirSet]) -> u64 {
    fn removed(d: &DirSet) -> impl Iterator<Item = &Arc<[u8]>> {
        d.dirs.iter().zip(&d.links_of).skip(1).filter(|(_, of)| of.is_none()).map(|(p, _)| p)
    }
    let all: HashSet<&[u8]> = sets.iter().flat_map(|d| removed(d).map(|p| &p[..])).collect();
    let inside_another =
        |p: &[u8]| p.iter().enumerate().filter(|&(i, &c)| c == b'/' && i > 0).any(|(i, _)| all.contains(&p[..i]));
    sets.iter()
        .map(|d| {
            let n = removed(d).count() as u64;
            let counted = removed(d).filter(|p| !inside_another(p)).count() as u64;
            match d.wasted.checked_div(n) {
                None => d.wasted,
                // (A rest of the division goes with the set counted whole.)
                Some(_) if counted == n => d.wasted,
                Some(each) => each * counted,
            }
        })
        .sum()
}

/// The identical directories of the index, found beside the writing of the/// The identical directories of the index, found beside the writing of the
/// rest of a report ([`beside`]) and waited for where their part comes
/// (last): their walk of every path takes ~45 ms on a 66k-file tree, which
/// a report brought up to date after one change (~80 ms) should not wait
/// for before it starts (a live report's latency, issue 4's bar, grew by
/// ~100 ms with the walk ahead of it).
pub struct LateDirs<'a>(Box<dyn Fn() -> std::io::Result<&'a [DirSet]> + 'a>);

impl<'a> LateDirs<'a> {
    /// The directories, waited for the first time (an error reading the
    /// index as an I/O error of the report being written).
    pub fn get(&self) -> std::io::Result<&'a [DirSet]> {
        (self.0)()
    }
}

/// Calls `use_them` with the identical directories of `a`'s index: those
/// the last report found, when the index has not changed since (unless
/// `fresh`), else as they are being found on another thread
/// ([`LateDirs`]): from the last report's directories, only those above a
/// path changed since done again, where the write-ahead log tells those
/// paths ([`update`]), else from a walk of every path. Kept then for the
/// next report.
pub fn beside<R>(
    store: &Store,
    a: &crate::analysis::Analysis,
    fresh: bool,
    use_them: impl FnOnce(&LateDirs) -> R,
) -> R {
    std::thread::scope(|s| {
        // The last report's read on that thread too: a report needs them
        // only at its end.
        let walk = std::sync::Mutex::new(Some(s.spawn(|| match (!fresh).then(|| load(store)).flatten() {
            Some(k) if k.sequence == store.sequence() => {
                tracing::debug!("{} sets of identical directories from the last report", k.sets.len());
                Ok::<Kept, String>(k)
            }
            kept => {
                let found = found(store, a, kept).map_err(|e| e.to_string())?;
                // Kept from this thread, beside the report's writing.
                if let Err(e) = save(store, &found) {
                    tracing::debug!("{}: identical directories not kept: {e}", crate::show_path(store.dir()));
                }
                Ok(found)
            }
        })));
        let found = std::sync::OnceLock::new();
        let dirs = LateDirs(Box::new(|| {
            let found = found.get_or_init(|| {
                let walk = walk.lock().unwrap_or_else(|p| p.into_inner()).take();
                walk.map_or(Ok(Kept::default()), |w| w.join().expect("finding directories does not panic"))
            });
            found.as_ref().map(|k| &k.sets[..]).map_err(|e| std::io::Error::other(e.clone()))
        }));
        use_them(&dirs)
    })
}

/// The identical directories found by the last report, with the index
/// they were found in and every directory's signature: a report of an
/// index that has not changed since reads them rather than walking every
/// path again (~45 ms of CPU on Django's 66.5k files on an Intel VM, ~130
/// on an AMD one, where a cached report took 0.21 s with it and 0.13
/// without: session 77), and one after a change redoes only the
/// directories above the paths changed. Kept apart from the analysis
/// cache, which a report brought up to date writes before its
/// directories are found.
pub(crate) fn kept_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("directories.cache")
}

/// Bump with any change to what [`identical`] finds, or to [`Kept`].
const KEPT_VERSION: u8 = 2;

/// What a kept file starts with: its version, the program that made it
/// (as the analysis cache's), and the index's creation time.
fn kept_header(store: &Store) -> (u8, [u8; 16], i64) {
    (KEPT_VERSION, crate::analysis::cache::maker(), store.format().created)
}

/// Identical directories as a report found them.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// The index's sequence number they were found at.
    sequence: u64,
    /// Its roots then.
    roots: Vec<Vec<u8>>,
    sets: Vec<DirSet>,
    /// Every directory above an indexed path, in [`dir_order`] (empty when
    /// the index holds hard links or linked names, whose sets are found
    /// from a walk every time). Each path written as the length it shares
    /// with the one before and the rest: 31.7k directories of Django's
    /// releases took 3.5 MB written whole, read and written again by every
    /// report after a change.
    #[serde(serialize_with = "front_coded::serialize", deserialize_with = "front_coded::deserialize")]
    dirs: Vec<Dir>,
}

/// [`Kept::dirs`] front-coded: each directory with its path as the bytes
/// it shares with the path before and the bytes after them.
mod front_coded {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Dir;

    #[derive(Serialize, Deserialize)]
    struct Coded<'a> {
        shared: u32,
        #[serde(borrow, with = "serde_bytes")]
        rest: std::borrow::Cow<'a, [u8]>,
        signature: [u8; 16],
        files: u64,
        bytes: u64,
        newest: u64,
        unique: bool,
    }

    pub fn serialize<S: Serializer>(dirs: &[Dir], s: S) -> Result<S::Ok, S::Error> {
        let mut before: &[u8] = &[];
        let coded: Vec<Coded> = dirs
            .iter()
            .map(|d| {
                let shared = before.iter().zip(&d.path).take_while(|(a, b)| a == b).count();
                before = &d.path;
                Coded {
                    shared: shared as u32,
                    rest: std::borrow::Cow::Borrowed(&d.path[shared..]),
                    signature: d.signature,
                    files: d.files,
                    bytes: d.bytes,
                    newest: d.newest,
                    unique: d.unique,
                }
            })
            .collect();
        coded.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Dir>, D::Error> {
        let coded: Vec<Coded> = Vec::deserialize(d)?;
        let mut dirs: Vec<Dir> = Vec::with_capacity(coded.len());
        for c in coded {
            let before = dirs.last().map_or(&[][..], |d| &d.path[..]);
            let shared = before
                .get(..c.shared as usize)
                .ok_or_else(|| serde::de::Error::custom("a shared length past the path before"))?;
            let mut path = Vec::with_capacity(shared.len() + c.rest.len());
            path.extend_from_slice(shared);
            path.extend_from_slice(&c.rest);
            dirs.push(Dir {
                path,
                signature: c.signature,
                files: c.files,
                bytes: c.bytes,
                newest: c.newest,
                unique: c.unique,
            });
        }
        Ok(dirs)
    }
}

fn load(store: &Store) -> Option<Kept> {
    let bytes = std::fs::read(kept_path(store.dir())).ok()?;
    let (body, sum) = bytes.split_last_chunk::<8>()?;
    let (header, rest): ((u8, [u8; 16], i64), _) = postcard::take_from_bytes(body).ok()?;
    if header != kept_header(store) || xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(*sum) {
        return None;
    }
    postcard::from_bytes(rest).ok()
}

fn save(store: &Store, kept: &Kept) -> std::io::Result<()> {
    let mut bytes = postcard::to_stdvec(&kept_header(store)).map_err(std::io::Error::other)?;
    bytes.extend(postcard::to_stdvec(kept).map_err(std::io::Error::other)?);
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes());
    crate::analysis::cache::replace(&kept_path(store.dir()), |tmp| std::fs::write(tmp, &bytes))
}

/// The identical directories of `a`'s index now, and what to keep of
/// them: brought up to date from `kept` where it can be, else walked.
fn found(store: &Store, a: &crate::analysis::Analysis, kept: Option<Kept>) -> Result<Kept, StoreError> {
    let started = std::time::Instant::now();
    let sequence = store.sequence();
    let roots = store.roots()?;
    let copies = Copies::new(&a.identical, &a.linked);
    let Some(copies) = copies else {
        return Ok(Kept { sequence, roots, ..Kept::default() });
    };
    // Hard links and names of one file alone need every path of the
    // walk for what a set's directories take (`identical`).
    let simple = a.linked.is_empty() && a.identical.iter().all(|s| s.copies() == s.names.len());
    let updated = match kept {
        Some(k) if simple && k.roots == roots && !k.dirs.is_empty() && k.sequence < sequence => {
            update(store, k.dirs, k.sequence, &copies)?
        }
        _ => None,
    };
    let (dirs, linked_seen) = match updated {
        Some(dirs) => {
            tracing::debug!("directories brought up to date after {:?}", started.elapsed());
            (dirs, Vec::new())
        }
        None => {
            let walked = walk(store, &copies)?;
            tracing::debug!("paths walked after {:?}", started.elapsed());
            walked
        }
    };
    let sets = identical(&dirs, &roots, &a.identical, &a.linked, &linked_seen);
    tracing::debug!("{} sets of identical directories found in {:?}", sets.len(), started.elapsed());
    let dirs = if simple { dirs } else { Vec::new() };
    Ok(Kept { sequence, roots, sets, dirs })
}

/// A directory above an indexed path: what its signature was made of
/// (kept as [`front_coded`] writes it).
#[derive(Debug)]
struct Dir {
    path: Vec<u8>,
    signature: [u8; 16],
    /// Files with a copy beneath it, at any depth, and their bytes.
    files: u64,
    bytes: u64,
    /// The highest id of those files.
    newest: u64,
    /// It holds a file no other file is a copy of.
    unique: bool,
}

/// What a name with a copy holds, for the walk.
struct Copied {
    content: [u8; 16],
    size: u64,
    /// The place in `linked` of a name of one file alone (u32::MAX: a
    /// name of an identical set).
    alone: u32,
}

/// Every name with a copy (or another name of its file: a directory of
/// hard links of another's files, some copied again since, still wastes
/// those): what it holds, by file id.
struct Copies {
    copied: Vec<Copied>,
    places: Places,
}

impl Copies {
    fn new(identical: &[IdenticalSet], linked: &[Linked]) -> Option<Copies> {
        let copied: Vec<Copied> = identical
            .iter()
            .map(|s| Copied { content: s.content.0, size: s.size, alone: u32::MAX })
            .chain(linked.iter().enumerate().map(|(k, l)| Copied {
                content: l.content.0,
                size: l.size,
                alone: k as u32,
            }))
            .collect();
        if copied.is_empty() {
            return None;
        }
        let names = identical.iter().enumerate().flat_map(|(k, s)| s.names.iter().map(move |n| (n.id.0, k as u32)));
        let names = names.chain(linked.iter().enumerate().flat_map(|(k, l)| {
            let at = (identical.len() + k) as u32;
            l.ids.iter().map(move |id| (id.0, at))
        }));
        let count =
            identical.iter().map(|s| s.names.len()).sum::<usize>() + linked.iter().map(|l| l.ids.len()).sum::<usize>();
        Some(Copies { places: Places::new(names, count), copied })
    }

    fn get(&self, id: u64) -> Option<&Copied> {
        self.places.get(id).map(|at| &self.copied[at as usize])
    }
}

/// Each name with a copy by file id: its [`Copied`]'s place. Looked up
/// once per path of the walk, in path order, which is no order of ids: a
/// table of places by id (4 bytes an id, in the CPU's cache) where ids
/// are dense, as a tree's first index leaves them, else a hash map (a
/// lookup in a map of 60k names was most of the walk's time, session 78).
enum Places {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl Places {
    fn new(names: impl Iterator<Item = (u64, u32)> + Clone, count: usize) -> Places {
        let max = names.clone().map(|(id, _)| id).max().unwrap_or(0);
        if max < 8 * count as u64 + 4096 {
            let mut table = vec![u32::MAX; max as usize + 1];
            names.for_each(|(id, at)| table[id as usize] = at);
            Places::Dense(table)
        } else {
            let mut map = HashMap::with_capacity_and_hasher(count, Default::default());
            map.extend(names);
            Places::Sparse(map)
        }
    }

    fn get(&self, id: u64) -> Option<u32> {
        match self {
            Places::Dense(t) => t.get(id as usize).copied().filter(|&at| at != u32::MAX),
            Places::Sparse(m) => m.get(&id).copied(),
        }
    }
}

/// A directory's entries as they come, in key order (the same relative
/// names come in the same order in any directory), hashed whole when it
/// is done: one XXH3 of a few hundred bytes took a fraction of three
/// streamed updates a file (the same digest).
#[derive(Default)]
struct Tally {
    entries: Vec<u8>,
    files: u64,
    bytes: u64,
    newest: u64,
    unique: bool,
}

impl Tally {
    /// A file: what it holds when it has a copy.
    fn file<'c>(&mut self, name: &[u8], id: u64, copies: &'c Copies) -> Option<&'c Copied> {
        let Some(c) = copies.get(id) else {
            self.unique = true;
            return None;
        };
        self.entries.extend_from_slice(name);
        self.entries.extend_from_slice(&[0, b'f']);
        self.entries.extend_from_slice(&c.content);
        self.files += 1;
        self.bytes += c.size;
        self.newest = self.newest.max(id);
        Some(c)
    }

    fn dir(&mut self, name: &[u8], d: &Dir) {
        self.entries.extend_from_slice(name);
        self.entries.extend_from_slice(&[0, b'd']);
        self.entries.extend_from_slice(&d.signature);
        self.files += d.files;
        self.bytes += d.bytes;
        self.newest = self.newest.max(d.newest);
        self.unique |= d.unique;
    }

    /// Whether no entry came (a file without a copy is hashed as none,
    /// but marks the directory).
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.unique
    }

    /// The directory at `path` these entries make; the tally is left
    /// empty, its buffer kept.
    fn finish(&mut self, path: &[u8]) -> Dir {
        let signature = xxhash_rust::xxh3::xxh3_128(&self.entries).to_be_bytes();
        let d = Dir {
            path: path.to_vec(),
            signature,
            files: self.files,
            bytes: self.bytes,
            newest: self.newest,
            unique: self.unique,
        };
        self.entries.clear();
        (self.files, self.bytes, self.newest, self.unique) = (0, 0, 0, false);
        d
    }
}

/// The path of a name of one file alone, and its place in `linked`.
type LinkedSeen = (Vec<u8>, u32);

/// Every directory above an indexed path, in [`dir_order`], and the paths
/// of names of one file alone with their place in `linked`.
///
/// One pass over `paths` in key order, a directory's paths one run of keys:
/// a stack of the directories the current path lies in, each closed (its
/// signature finished and handed to its parent) when a path leaves it.
fn walk(store: &Store, copies: &Copies) -> Result<(Vec<Dir>, Vec<LinkedSeen>), StoreError> {
    let mut linked_seen: Vec<LinkedSeen> = Vec::new();
    let mut all: Vec<Dir> = Vec::new();
    // Tallies of closed directories, to use again.
    let mut spare: Vec<Tally> = Vec::new();
    let mut dir: Vec<u8> = b"/".to_vec();
    // The open directories: their path's length (the path is `dir` up to
    // it) and their entries so far.
    let mut stack: Vec<(usize, Tally)> = vec![(1, Tally::default())];
    // Closes the innermost open directory.
    let close = |stack: &mut Vec<(usize, Tally)>, dir: &mut Vec<u8>, all: &mut Vec<Dir>, spare: &mut Vec<Tally>| {
        let (len, mut t) = stack.pop().expect("an open directory");
        let d = t.finish(&dir[..len]);
        spare.push(t);
        if let Some((parent_len, parent)) = stack.last_mut() {
            let (_, name) = split(&d.path).expect("a directory below /");
            parent.dir(name, &d);
            dir.truncate(*parent_len);
        }
        all.push(d);
    };
    store.for_each_path(|path, id| {
        let Some((parent, name)) = split(path) else { return };
        while !is_under(parent, &dir[..stack.last().expect("/ stays open").0]) {
            close(&mut stack, &mut dir, &mut all, &mut spare);
        }
        // Open the directories between the innermost one and the path's.
        let top = stack.last().expect("/ stays open").0;
        let from = if top == 1 { 1 } else { top + 1 };
        for at in (from..parent.len()).filter(|&i| parent[i] == b'/') {
            stack.push((at, spare.pop().unwrap_or_default()));
        }
        if parent.len() > top {
            stack.push((parent.len(), spare.pop().unwrap_or_default()));
        }
        dir.clear();
        dir.extend_from_slice(parent);
        let (_, t) = stack.last_mut().expect("the path's directory");
        if let Some(c) = t.file(name, id.0, copies) {
            if c.alone != u32::MAX {
                linked_seen.push((path.to_vec(), c.alone));
            }
        }
    })?;
    while stack.len() > 1 {
        close(&mut stack, &mut dir, &mut all, &mut spare);
    }
    // Closed children first: in order for the lookups below.
    all.sort_unstable_by(|x, y| dir_order(&x.path, &y.path));
    Ok((all, linked_seen))
}

/// The order of directories kept: by path with a `/` after it, so that a
/// directory's subdirectories follow it before any other (`a-1`, `a`,
/// `a/b`, `a0`; by path alone `a-1` would come between `a` and `a/b`,
/// `-` being below `/`).
fn dir_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let n = a.len().min(b.len());
    match a[..n].cmp(&b[..n]) {
        Equal if a.len() < b.len() => b'/'.cmp(&b[n]).then(Less),
        Equal if a.len() > b.len() => a[n].cmp(&b'/').then(Greater),
        o => o,
    }
}

/// Paths changed after `since` before a report looks at more of the
/// index than a walk would: past this many, the walk.
const MOST_CHANGED: usize = 4096;

/// `dirs` (a walk's, after sequence number `since`) brought up to date:
/// the directories above a path written or deleted since, or above a name
/// of a content that gained or lost one (its names may have become
/// copies, or stopped being), done again from their entries, deepest
/// first; the others are as they were. None when the write-ahead log
/// cannot tell what changed, when too much did, or when `dirs` lacks a
/// directory the index holds (the caller then walks).
fn update(store: &Store, dirs: Vec<Dir>, since: u64, copies: &Copies) -> Result<Option<Vec<Dir>>, StoreError> {
    let Some(written) = store.keys_written_since(since) else { return Ok(None) };
    if written.paths.len() + written.named.len() > MOST_CHANGED {
        return Ok(None);
    }
    let mut changed: Vec<Vec<u8>> = written.paths.into_iter().collect();
    for c in &written.named {
        for r in store.names(c) {
            let ((_, id), ()) = r?;
            if let Some(rec) = store.get::<crate::store::Files>(&id)? {
                changed.push(rec.path);
            }
        }
    }
    // The directories above them, deepest first (the root `/` is no
    // directory of the walk's).
    let mut dirty: HashSet<Vec<u8>> = HashSet::default();
    for p in &changed {
        let mut at = split(p).map(|(d, _)| d);
        while let Some(d) = at.filter(|d| d.len() > 1) {
            if !dirty.insert(d.to_vec()) {
                break;
            }
            at = split(d).map(|(p, _)| p);
        }
    }
    let depth = |p: &[u8]| p.iter().filter(|&&b| b == b'/').count();
    let mut dirty: Vec<Vec<u8>> = dirty.into_iter().collect();
    dirty.sort_unstable_by_key(|d| std::cmp::Reverse(depth(d)));
    // `dirs` stays in `dir_order`: a few directories looked up, replaced,
    // added or taken out by a binary search each, where a map of them all
    // (31.7k on Django's releases) took longer to make than the update.
    let mut dirs = dirs;
    let find = |dirs: &[Dir], p: &[u8]| dirs.binary_search_by(|d| dir_order(&d.path, p));
    let (mut t, mut sub, mut missing) = (Tally::default(), Vec::new(), false);
    for d in &dirty {
        store.for_each_entry_in(d, |name, id| match id {
            Some(id) => {
                t.file(name, id.0, copies);
            }
            None => {
                sub.clear();
                sub.extend_from_slice(d);
                sub.push(b'/');
                sub.extend_from_slice(name);
                match find(&dirs, &sub) {
                    Ok(at) => t.dir(name, &dirs[at]),
                    Err(_) => missing = true,
                }
            }
        })?;
        if missing {
            tracing::debug!("{}: a directory the kept ones lack", crate::show_path(crate::scan::bytes_path(&sub)));
            return Ok(None);
        }
        match (find(&dirs, d), !t.is_empty()) {
            (Ok(at), true) => dirs[at] = t.finish(d),
            (Err(at), true) => dirs.insert(at, t.finish(d)),
            (Ok(at), false) => {
                dirs.remove(at);
            }
            (Err(_), false) => {}
        }
    }
    tracing::debug!("{} paths changed, {} directories done again", changed.len(), dirty.len());
    Ok(Some(dirs))
}

/// The identical directories among `dirs` (every directory above an
/// indexed path, in [`dir_order`]), most bytes wasted first; a set that only
/// repeats its parents' (the same subdirectory of each of a set of
/// identical directories) is left out, as are sets of directories of one
/// file (the identical sets show them) or with nothing to save (empty
/// files, hard links of each other). A candidate holds two files or more,
/// all of them copies, and lies at or under a root: the index knows
/// nothing of what else a root's parent holds.
fn identical(
    dirs: &[Dir],
    roots: &[Vec<u8>],
    identical: &[IdenticalSet],
    linked: &[Linked],
    linked_seen: &[LinkedSeen],
) -> Vec<DirSet> {
    let candidates: Vec<usize> = (0..dirs.len())
        .filter(|&k| !dirs[k].unique && dirs[k].files >= 2 && is_under_any(&dirs[k].path, roots))
        .collect();
    // Directories that share a signature (runs of candidates sorted by
    // it)...
    let mut by_signature = candidates;
    by_signature.sort_unstable_by_key(|&k| dirs[k].signature);
    let runs: Vec<&[usize]> =
        by_signature.chunk_by(|&x, &y| dirs[x].signature == dirs[y].signature).filter(|m| m.len() >= 2).collect();
    // ... unless they have one name and lie in the directories of one set,
    // which says it all.
    let mut set_of: Vec<u32> = vec![u32::MAX; dirs.len()];
    for (i, members) in runs.iter().enumerate() {
        members.iter().for_each(|&k| set_of[k] = i as u32);
    }
    // Each directory's parent's place (u32::MAX: none of `dirs`), in one
    // pass: in `dir_order` a directory comes after its parent and before
    // anything outside it, and the directories above it are a stack.
    let mut parent_of: Vec<u32> = vec![u32::MAX; dirs.len()];
    let mut above: Vec<usize> = Vec::new();
    for (k, d) in dirs.iter().enumerate() {
        while above.last().is_some_and(|&a| !is_under(&d.path, &dirs[a].path)) {
            above.pop();
        }
        if let (Some(&a), Some((parent, _))) = (above.last(), split(&d.path)) {
            if dirs[a].path == parent {
                parent_of[k] = a as u32;
            }
        }
        above.push(k);
    }
    let parent_set = |k: usize| {
        let at = *parent_of.get(k).filter(|&&p| p != u32::MAX)?;
        Some(set_of[at as usize]).filter(|&s| s != u32::MAX)
    };
    let implied = |members: &[usize]| {
        let first_name = split(&dirs[members[0]].path).map(|(_, n)| n);
        let first_parent = parent_set(members[0]);
        first_parent.is_some()
            && members
                .iter()
                .all(|&k| split(&dirs[k].path).map(|(_, n)| n) == first_name && parent_set(k) == first_parent)
    };
    let sets: Vec<&[usize]> = runs.into_iter().filter(|m| !implied(m)).collect();

    // What each set's directories take beyond one of them: a file counted
    // once whatever its names (hard links), so that trees of hard links
    // (`cp -al`, rsnapshot) waste nothing.
    let mut taken: Vec<u64> = sets.iter().map(|m| m.iter().map(|&k| dirs[k].bytes).sum()).collect();
    // The directories of sets (by candidate) whose every file is also a
    // file of another directory of the set: another one holding the first.
    let mut links_of: HashMap<usize, usize> = HashMap::default();
    if !linked_seen.is_empty() || identical.iter().any(|s| s.copies() < s.names.len()) {
        let shown: HashMap<&[u8], (usize, usize)> = sets
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.iter().map(move |&k| (dirs[k].path.as_slice(), (i, k))))
            .collect();
        let mut seen: Vec<HashSet<(u64, u64)>> = vec![HashSet::default(); sets.len()];
        // Each file of a set's directories: the directories holding it.
        let mut holders: HashMap<(usize, (u64, u64)), Vec<usize>> = HashMap::default();
        // Each directory's files (None: a name of no known file).
        let mut files_of: HashMap<usize, Vec<Option<(u64, u64)>>> = HashMap::default();
        taken.fill(0);
        // A name of one file alone is that file wherever it is.
        let alone =
            linked_seen.iter().map(|(p, k)| (p.as_slice(), Some((u64::MAX, u64::from(*k))), linked[*k as usize].size));
        let names = identical.iter().flat_map(|s| &s.names).map(|n| (&*n.path, n.file, n.size));
        for (path, file, size) in names.chain(alone) {
            let mut at = split(path).map(|(d, _)| d);
            while let Some(d) = at {
                if let Some(&(i, k)) = shown.get(d) {
                    if file.is_none_or(|f| seen[i].insert(f)) {
                        taken[i] += size;
                    }
                    if let Some(f) = file {
                        let held = holders.entry((i, f)).or_default();
                        if !held.contains(&k) {
                            held.push(k);
                        }
                    }
                    files_of.entry(k).or_default().push(file);
                }
                at = split(d).map(|(p, _)| p).filter(|p| p.len() < d.len());
            }
        }
        for (i, members) in sets.iter().enumerate() {
            for &k in members.iter() {
                let other = |f: &Option<(u64, u64)>| {
                    f.and_then(|f| holders.get(&(i, f))).and_then(|h| h.iter().copied().find(|&o| o != k))
                };
                let files = files_of.get(&k).map_or(&[][..], Vec::as_slice);
                if !files.is_empty() && files.iter().all(|f| other(f).is_some()) {
                    links_of.insert(k, other(&files[0]).expect("held by another"));
                }
            }
        }
    }
    let mut out: Vec<DirSet> = sets
        .iter()
        .zip(taken)
        .map(|(members, taken)| {
            let one = &dirs[members[0]];
            let mut sorted: Vec<usize> = members.to_vec();
            sorted.sort_unstable_by(|&x, &y| dirs[x].path.cmp(&dirs[y].path));
            let place = |k: usize| sorted.iter().position(|&s| s == k).expect("a member");
            let links_of = sorted.iter().map(|k| links_of.get(k).map(|&o| place(o))).collect();
            DirSet {
                links_of,
                signature: ContentHash(one.signature),
                files: one.files as usize,
                size: one.bytes,
                wasted: taken.saturating_sub(one.bytes),
                newest: FileId(members.iter().map(|&k| dirs[k].newest).max().unwrap_or(0)),
                dirs: sorted.iter().map(|&k| Arc::from(dirs[k].path.as_slice())).collect(),
            }
        })
        .filter(|s| s.wasted > 0)
        .collect();
    out.sort_by(|x, y| y.wasted.cmp(&x.wasted).then_with(|| x.dirs[0].cmp(&y.dirs[0])));
    out
}

#[cfg(test)]
mod tests {
    use super::Places;

    /// Both tables of places answer alike: the dense one for ids as a
    /// first index leaves them, the map for ids spread far apart (an index
    /// whose files came and went for years).
    #[test]
    fn places_are_found_by_id_whether_ids_are_dense_or_sparse() {
        let check = |names: &[(u64, u32)], dense: bool| {
            let places = Places::new(names.iter().copied(), names.len());
            assert_eq!(matches!(places, Places::Dense(_)), dense);
            for &(id, at) in names {
                assert_eq!(places.get(id), Some(at));
            }
            let max = names.iter().map(|n| n.0).max().unwrap();
            for absent in [0, max + 1, max + 5000, u64::MAX] {
                assert_eq!(places.get(absent), None, "{absent}");
            }
        };
        check(&[(3, 0), (4, 0), (9, 1), (2000, 7)], true);
        check(&[(3, 0), (4, 0), (9, 1), (1 << 40, 7)], false);
    }

    /// A directory's subdirectories follow it, before anything else.
    #[test]
    fn directories_are_kept_with_their_subdirectories_after_them() {
        let mut dirs: Vec<&[u8]> = vec![b"/a0", b"/a/b", b"/a-1", b"/a", b"/a/b/c", b"/a/b-2", b"/a/b.c", b"/"];
        dirs.sort_by(|x, y| super::dir_order(x, y));
        let want: Vec<&[u8]> = vec![b"/", b"/a-1", b"/a", b"/a/b-2", b"/a/b.c", b"/a/b", b"/a/b/c", b"/a0"];
        assert_eq!(dirs, want);
        assert_eq!(super::dir_order(b"/a", b"/a"), std::cmp::Ordering::Equal);
    }
}
