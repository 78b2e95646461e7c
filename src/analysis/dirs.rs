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
/// ([`LateDirs`]), kept then for the next report.
pub fn beside<R>(
    store: &Store,
    a: &crate::analysis::Analysis,
    fresh: bool,
    use_them: impl FnOnce(&LateDirs) -> R,
) -> R {
    if let Some(kept) = (!fresh).then(|| load(store)).flatten() {
        tracing::debug!("{} sets of identical directories from the last report", kept.len());
        return use_them(&LateDirs(Box::new(|| Ok(&kept[..]))));
    }
    std::thread::scope(|s| {
        let walk = std::sync::Mutex::new(Some(
            s.spawn(|| identical(store, &a.identical, &a.linked).map_err(|e| e.to_string())),
        ));
        let found = std::sync::OnceLock::new();
        let dirs = LateDirs(Box::new(|| {
            let found = found.get_or_init(|| {
                let walk = walk.lock().unwrap_or_else(|p| p.into_inner()).take();
                walk.map_or(Ok(Vec::new()), |w| w.join().expect("finding directories does not panic"))
            });
            found.as_deref().map_err(|e| std::io::Error::other(e.clone()))
        }));
        let r = use_them(&dirs);
        if let Some(Ok(sets)) = found.get() {
            if let Err(e) = save(store, sets) {
                tracing::debug!("{}: identical directories not kept: {e}", crate::show_path(store.dir()));
            }
        }
        r
    })
}

/// The identical directories found by the last report, with the index
/// they were found in: a report of an index that has not changed since
/// reads them rather than walking every path again (~45 ms of CPU on
/// Django's 66.5k files on an Intel VM, ~130 on an AMD one, where a
/// cached report took 0.21 s with it and 0.13 without: session 77). Kept
/// apart from the analysis cache, which a report brought up to date
/// writes before its directories are found.
pub(crate) fn kept_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("directories.cache")
}

/// Bump with any change to what [`identical`] finds, or to [`DirSet`].
const KEPT_VERSION: u8 = 1;

/// What a kept file starts with: its version, the program that made it
/// (as the analysis cache's), and the index's creation time and sequence
/// number when the directories were found.
fn kept_header(store: &Store) -> (u8, [u8; 16], i64, u64) {
    (KEPT_VERSION, crate::analysis::cache::maker(), store.format().created, store.sequence())
}

fn load(store: &Store) -> Option<Vec<DirSet>> {
    let bytes = std::fs::read(kept_path(store.dir())).ok()?;
    let (body, sum) = bytes.split_last_chunk::<8>()?;
    // The header first: after a change (a live report's case) it differs,
    // and the body is not summed for nothing.
    let (header, rest): ((u8, [u8; 16], i64, u64), _) = postcard::take_from_bytes(body).ok()?;
    if header != kept_header(store) || xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(*sum) {
        return None;
    }
    postcard::from_bytes(rest).ok()
}

fn save(store: &Store, sets: &[DirSet]) -> std::io::Result<()> {
    let mut bytes = postcard::to_stdvec(&kept_header(store)).map_err(std::io::Error::other)?;
    bytes.extend(postcard::to_stdvec(sets).map_err(std::io::Error::other)?);
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes());
    crate::analysis::cache::replace(&kept_path(store.dir()), |tmp| std::fs::write(tmp, &bytes))
}

/// A directory of the walk below, open while paths under it come.
struct Open {
    /// Its path's length (the path is the walk's `dir` up to it).
    len: usize,
    /// Its place in the order directories were opened in.
    serial: u32,
    /// Its entries as they come (paths in byte order: the same relative
    /// names come in the same order in any directory), hashed whole when
    /// it closes: one XXH3 of a few hundred bytes took a fraction of three
    /// streamed updates a file (the same digest).
    entries: Vec<u8>,
    files: usize,
    bytes: u64,
    newest: u64,
    /// It holds a file no other file is a copy of.
    unique: bool,
}

/// A directory of two files or more, all of them copies.
struct Candidate {
    path: Vec<u8>,
    signature: [u8; 16],
    files: usize,
    bytes: u64,
    newest: u64,
    /// Its directory's [`Open::serial`] (u32::MAX: it has none, or `/`).
    parent: u32,
}

/// What a name with a copy holds, for the walk.
struct Copied {
    content: [u8; 16],
    size: u64,
    /// The place in `linked` of a name of one file alone (u32::MAX: a
    /// name of an identical set).
    alone: u32,
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

/// The identical directories of the analysed index, most bytes wasted
/// first; a set that only repeats its parents' (the same subdirectory of
/// each of a set of identical directories) is left out, as are sets of
/// directories of one file (the identical sets show them) or with nothing
/// to save (empty files, hard links of each other).
///
/// One pass over `paths` in key order, a directory's paths one run of keys:
/// a stack of the directories the current path lies in, each closed (its
/// signature finished and handed to its parent) when a path leaves it.
fn identical(store: &Store, identical: &[IdenticalSet], linked: &[Linked]) -> Result<Vec<DirSet>, StoreError> {
    let roots = store.roots()?;
    let started = std::time::Instant::now();
    // Every name with a copy (or another name of its file: a directory
    // of hard links of another's files, some copied again since, still
    // wastes those): what it holds, and by file id where that is.
    let copied: Vec<Copied> = identical
        .iter()
        .map(|s| Copied { content: s.content.0, size: s.size, alone: u32::MAX })
        .chain(linked.iter().enumerate().map(|(k, l)| Copied { content: l.content.0, size: l.size, alone: k as u32 }))
        .collect();
    if copied.is_empty() {
        return Ok(Vec::new());
    }
    let names = identical.iter().enumerate().flat_map(|(k, s)| s.names.iter().map(move |n| (n.id.0, k as u32))).chain(
        linked.iter().enumerate().flat_map(|(k, l)| {
            let at = (identical.len() + k) as u32;
            l.ids.iter().map(move |id| (id.0, at))
        }),
    );
    let count =
        identical.iter().map(|s| s.names.len()).sum::<usize>() + linked.iter().map(|l| l.ids.len()).sum::<usize>();
    let places = Places::new(names, count);
    // The paths of those names of one file alone, and which.
    let mut linked_seen: Vec<(Vec<u8>, u32)> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    // Each directory's candidate, by serial (u32::MAX: it is none).
    let mut candidate_of: Vec<u32> = Vec::new();
    // Entry buffers of closed directories, to use again.
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let open = |len: usize, candidate_of: &mut Vec<u32>, spare: &mut Vec<Vec<u8>>| {
        candidate_of.push(u32::MAX);
        let serial = (candidate_of.len() - 1) as u32;
        let entries = spare.pop().unwrap_or_default();
        Open { len, serial, entries, files: 0, bytes: 0, newest: 0, unique: false }
    };
    let mut dir: Vec<u8> = b"/".to_vec();
    let mut stack = vec![open(1, &mut candidate_of, &mut spare)];
    // Closes the innermost open directory.
    let close = |stack: &mut Vec<Open>,
                 dir: &mut Vec<u8>,
                 candidates: &mut Vec<Candidate>,
                 candidate_of: &mut Vec<u32>,
                 spare: &mut Vec<Vec<u8>>| {
        let mut d = stack.pop().expect("an open directory");
        let signature = xxhash_rust::xxh3::xxh3_128(&d.entries).to_be_bytes();
        d.entries.clear();
        spare.push(d.entries);
        let path = &dir[..d.len];
        // Only directories at or under a root: the index knows nothing of
        // what else a root's parent holds.
        if !d.unique && d.files >= 2 && is_under_any(path, &roots) {
            candidate_of[d.serial as usize] = candidates.len() as u32;
            candidates.push(Candidate {
                path: path.to_vec(),
                signature,
                files: d.files,
                bytes: d.bytes,
                newest: d.newest,
                parent: stack.last().map_or(u32::MAX, |p| p.serial),
            });
        }
        if let Some(parent) = stack.last_mut() {
            let (_, name) = split(path).expect("a directory below /");
            parent.entries.extend_from_slice(name);
            parent.entries.extend_from_slice(&[0, b'd']);
            parent.entries.extend_from_slice(&signature);
            parent.files += d.files;
            parent.bytes += d.bytes;
            parent.newest = parent.newest.max(d.newest);
            parent.unique |= d.unique;
            dir.truncate(parent.len);
        }
    };
    store.for_each_path(|path, id| {
        let Some((parent, name)) = split(path) else { return };
        while !is_under(parent, &dir[..stack.last().expect("/ stays open").len]) {
            close(&mut stack, &mut dir, &mut candidates, &mut candidate_of, &mut spare);
        }
        // Open the directories between the innermost one and the path's.
        let top = stack.last().expect("/ stays open").len;
        let from = if top == 1 { 1 } else { top + 1 };
        for at in (from..parent.len()).filter(|&i| parent[i] == b'/') {
            stack.push(open(at, &mut candidate_of, &mut spare));
        }
        if parent.len() > top {
            stack.push(open(parent.len(), &mut candidate_of, &mut spare));
        }
        dir.clear();
        dir.extend_from_slice(parent);
        let d = stack.last_mut().expect("the path's directory");
        match places.get(id.0).map(|at| &copied[at as usize]) {
            Some(c) => {
                if c.alone != u32::MAX {
                    linked_seen.push((path.to_vec(), c.alone));
                }
                d.entries.extend_from_slice(name);
                d.entries.extend_from_slice(&[0, b'f']);
                d.entries.extend_from_slice(&c.content);
                d.files += 1;
                d.bytes += c.size;
                d.newest = d.newest.max(id.0);
            }
            None => d.unique = true,
        }
    })?;
    tracing::debug!("paths walked after {:?}", started.elapsed());
    while stack.len() > 1 {
        close(&mut stack, &mut dir, &mut candidates, &mut candidate_of, &mut spare);
    }

    // Directories that share a signature (runs of candidates sorted by
    // it)...
    let mut by_signature: Vec<usize> = (0..candidates.len()).collect();
    by_signature.sort_unstable_by_key(|&k| candidates[k].signature);
    let runs: Vec<&[usize]> = by_signature
        .chunk_by(|&x, &y| candidates[x].signature == candidates[y].signature)
        .filter(|m| m.len() >= 2)
        .collect();
    // ... unless they have one name and lie in the directories of one set,
    // which says it all.
    let mut set_of: Vec<u32> = vec![u32::MAX; candidates.len()];
    for (i, members) in runs.iter().enumerate() {
        members.iter().for_each(|&k| set_of[k] = i as u32);
    }
    let parent_set = |k: usize| {
        let c = candidate_of.get(candidates[k].parent as usize).copied().unwrap_or(u32::MAX);
        set_of.get(c as usize).copied().filter(|&s| s != u32::MAX)
    };
    let implied = |members: &[usize]| {
        let first_name = split(&candidates[members[0]].path).map(|(_, n)| n);
        let first_parent = parent_set(members[0]);
        first_parent.is_some()
            && members
                .iter()
                .all(|&k| split(&candidates[k].path).map(|(_, n)| n) == first_name && parent_set(k) == first_parent)
    };
    let sets: Vec<&[usize]> = runs.into_iter().filter(|m| !implied(m)).collect();

    // What each set's directories take beyond one of them: a file counted
    // once whatever its names (hard links), so that trees of hard links
    // (`cp -al`, rsnapshot) waste nothing.
    let candidates = &candidates;
    let mut taken: Vec<u64> = sets.iter().map(|m| m.iter().map(|&k| candidates[k].bytes).sum()).collect();
    // The directories of sets (by candidate) whose every file is also a
    // file of another directory of the set: another one holding the first.
    let mut links_of: HashMap<usize, usize> = HashMap::default();
    if !linked_seen.is_empty() || identical.iter().any(|s| s.copies() < s.names.len()) {
        let shown: HashMap<&[u8], (usize, usize)> = sets
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.iter().map(move |&k| (candidates[k].path.as_slice(), (i, k))))
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
            let one = &candidates[members[0]];
            let mut sorted: Vec<usize> = members.to_vec();
            sorted.sort_unstable_by(|&x, &y| candidates[x].path.cmp(&candidates[y].path));
            let place = |k: usize| sorted.iter().position(|&s| s == k).expect("a member");
            let links_of = sorted.iter().map(|k| links_of.get(k).map(|&o| place(o))).collect();
            let dirs = sorted.iter().map(|&k| Arc::from(candidates[k].path.as_slice())).collect();
            DirSet {
                links_of,
                signature: ContentHash(one.signature),
                files: one.files,
                size: one.bytes,
                wasted: taken.saturating_sub(one.bytes),
                newest: FileId(members.iter().map(|&k| candidates[k].newest).max().unwrap_or(0)),
                dirs,
            }
        })
        .filter(|s| s.wasted > 0)
        .collect();
    out.sort_by(|x, y| y.wasted.cmp(&x.wasted).then_with(|| x.dirs[0].cmp(&y.dirs[0])));
    tracing::debug!("{} sets of identical directories found in {:?}", out.len(), started.elapsed());
    Ok(out)
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
}
