//! The column families: one type per CF naming it, its key codec and its
//! value codec. Keys are encoded by hand (fixed-width big-endian integers, so
//! byte order is numeric order); values are a version byte followed by
//! postcard. `schema/` documents the same bytes, and a test keeps them in step.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::chunker::ChunkParams;
use crate::fingerprint::{ChunkId, ChunkKey, ChunkRun, ContentHash, PriorRecord};
use crate::sketch::{GapCoded, Sketch};

/// The on-disk schema version of the whole index. Bump it (and log the change
/// in `schema/README.md`) whenever any CF's bytes change meaning, or an
/// older simd could no longer read the files (5: content ids in postings;
/// 6: sketches of up to 1,024 samples, Rice-coded; 7: postings keyed by
/// a chunk's 8-byte [`ChunkKey`], sketches of up to 1,536 samples; 8: chunk
/// lists and template marks name chunks by their [`ChunkKey`] too; 9:
/// file records hold their device).
pub const SCHEMA_VERSION: u32 = 9;

/// Older versions a writer of this simd upgrades in place (readers ask for
/// that first): versions 3 and 4 name contents by their hash in the
/// postings, where version 5 names them by their [`ContentId`]; 3 differs
/// from 4 only in how table blocks are compressed (its LZ4 blocks stay
/// readable, and compaction rewrites them as zstd). Version 5 differs from
/// 6 only in its sketches (at most 512 samples, gaps as varints), which this
/// simd still reads, and 6 from 7 in its postings' keys (the whole chunk
/// id) and its sketches' size (at most 1,024 samples, read as they are):
/// the upgrade of 5 and 6 re-keys the postings. Version 7 differs from 8
/// in its chunk lists (whole ids, read as they are) and its template marks
/// (keyed by the whole id): every upgrade re-keys the template marks.
/// Version 8 differs from 9 only in its file records (no device, read as
/// unknown), so its upgrade rewrites nothing.
pub const UPGRADABLE_VERSIONS: [u32; 6] = [3, 4, 5, 6, 7, 8];

/// Older versions a reader reads as they are, without the upgrade a
/// writer makes (their records all decode): a report from a new binary
/// then works beside an old daemon still running.
pub const READ_AS_IS: [u32; 1] = [8];

/// Whether this simd opens an index of schema `version`: the current one
/// as it is, an upgradable one to upgrade it.
pub fn reads_version(version: u32) -> bool {
    version == SCHEMA_VERSION || UPGRADABLE_VERSIONS.contains(&version)
}

/// Why bytes read from a CF could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("key is {found} bytes, expected {expected}")]
    KeyLength { found: usize, expected: &'static str },
    #[error("empty value")]
    Empty,
    #[error("value version {found}, this build reads {expected}")]
    Version { found: u8, expected: u8 },
    #[error("value does not decode: {0}")]
    Postcard(#[from] postcard::Error),
}

/// A column family: its name, key type and value type, and their codecs.
pub trait Table {
    const NAME: &'static str;
    /// The version byte written before every value of this CF.
    const VALUE_VERSION: u8;
    type Key;
    type Value: Serialize + DeserializeOwned;

    fn encode_key(key: &Self::Key) -> Vec<u8>;
    fn decode_key(bytes: &[u8]) -> Result<Self::Key, DecodeError>;

    /// Appends the encoded key to `out` (hot tables override this to avoid
    /// the allocation of [`Table::encode_key`]).
    fn write_key(key: &Self::Key, out: &mut Vec<u8>) {
        out.extend_from_slice(&Self::encode_key(key));
    }

    fn encode_value(value: &Self::Value) -> Vec<u8> {
        let mut out = Vec::new();
        Self::write_value(value, &mut out);
        out
    }

    /// Appends the version byte and the encoded value to `out`.
    fn write_value(value: &Self::Value, out: &mut Vec<u8>) {
        out.push(Self::VALUE_VERSION);
        // Serialising plain data into a Vec cannot fail.
        postcard::to_io(value, &mut *out).expect("postcard encodes into a Vec");
    }

    fn decode_value(bytes: &[u8]) -> Result<Self::Value, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != Self::VALUE_VERSION {
            return Err(DecodeError::Version { found: version, expected: Self::VALUE_VERSION });
        }
        Ok(postcard::from_bytes(rest)?)
    }
}

/// A file's id: assigned once per path, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FileId(pub u64);

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A content's number, assigned when its chunk list is first stored and
/// never reused: the postings name contents by it (5 bytes in a key where
/// the content hash took 16: the Django tree's index went from 6.5 % to
/// 5.0 % of its file bytes). `content_by_id` maps it back to the hash.
/// Numbers start at 1; 0 is a record not stored (a query's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ContentId(pub u64);

impl ContentId {
    /// Bytes of a content id in a key (big-endian): 2^40 ids, a thousand
    /// new contents a second for 35 years.
    pub const BYTES: usize = 5;
    /// The largest id a key holds.
    pub const MAX: u64 = (1 << (8 * Self::BYTES as u64)) - 1;

    fn write(self, out: &mut Vec<u8>) {
        debug_assert!(self.0 <= Self::MAX);
        out.extend_from_slice(&self.0.to_be_bytes()[8 - Self::BYTES..]);
    }

    fn read(bytes: &[u8]) -> Result<ContentId, DecodeError> {
        let b: [u8; Self::BYTES] = fixed(bytes, "5")?;
        let mut full = [0u8; 8];
        full[8 - Self::BYTES..].copy_from_slice(&b);
        Ok(ContentId(u64::from_be_bytes(full)))
    }
}

impl std::fmt::Display for ContentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Nanoseconds since the Unix epoch.
pub type TimeNs = i64;

/// Now, in nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> TimeNs {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as TimeNs).unwrap_or(0)
}

fn fixed<const N: usize>(bytes: &[u8], what: &'static str) -> Result<[u8; N], DecodeError> {
    bytes.try_into().map_err(|_| DecodeError::KeyLength { found: bytes.len(), expected: what })
}

// ---------------------------------------------------------------- meta

/// Names in the `meta` CF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaKey {
    /// [`Format`]: schema version and chunking parameters.
    Format,
    /// [`MetaValue::Roots`]: the roots given to `simd index`, remembered.
    Roots,
    /// [`MetaValue::NextFileId`]: the next file id to hand out.
    NextFileId,
    /// [`MetaValue::LastUpdate`]: when the last change was written.
    LastUpdate,
    /// [`MetaValue::Counts`]: files and live contents, kept by the writer.
    Counts,
    /// [`MetaValue::NextContentId`]: the next content id to hand out
    /// (absent: 1).
    NextContentId,
    /// [`MetaValue::PostingsPending`]: a bulk load's postings are not
    /// written yet (see `store::PostingSpill`).
    PostingsPending,
    /// [`MetaValue::Expiry`]: when history retention last ran, and what
    /// was written since (absent: it never ran).
    Expiry,
    /// [`MetaValue::Marks`]: when file ids were handed out (absent: no
    /// file was first indexed since the index began keeping them).
    Marks,
}

impl MetaKey {
    pub const ALL: [MetaKey; 9] = [
        MetaKey::Format,
        MetaKey::Roots,
        MetaKey::NextFileId,
        MetaKey::LastUpdate,
        MetaKey::Counts,
        MetaKey::NextContentId,
        MetaKey::PostingsPending,
        MetaKey::Expiry,
        MetaKey::Marks,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MetaKey::Format => "format",
            MetaKey::Roots => "roots",
            MetaKey::NextFileId => "next_file_id",
            MetaKey::LastUpdate => "last_update",
            MetaKey::Counts => "counts",
            MetaKey::NextContentId => "next_content_id",
            MetaKey::PostingsPending => "postings_pending",
            MetaKey::Expiry => "expiry",
            MetaKey::Marks => "marks",
        }
    }
}

/// What the index was made with; fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    pub schema_version: u32,
    pub params: ChunkParams,
    pub created: TimeNs,
}

/// A `meta` value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaValue {
    Format(Format),
    Roots(Vec<Vec<u8>>),
    NextFileId(u64),
    LastUpdate(TimeNs),
    Counts(Counts),
    NextContentId(u64),
    PostingsPending,
    Expiry(Expiry),
    Marks(Vec<Mark>),
}

/// When file ids were handed out (`simd report --since`): the ids from
/// `next_file_id` up to the next mark's went to files first indexed
/// between `at` and `at + within` (for the last mark: every id from
/// `next_file_id` on). The writer adds one with the first id it hands out
/// past the last mark's `within`, so a mark's `within` is how precisely
/// it dates its ids. Oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub at: TimeNs,
    pub next_file_id: u64,
    pub within: TimeNs,
}

impl Mark {
    /// How long after a mark ids are handed out under it: a report asked
    /// for what came since T may show files indexed up to this long
    /// before T.
    pub const EVERY: TimeNs = 10 * 60 * 1_000_000_000;
    /// At most this many are kept: past it, the older half's marks are
    /// merged in pairs (each kept one's `within` then spans its pair), so
    /// older times are known more coarsely.
    pub const MAX: usize = 1024;

    /// Notes that id `next_file_id` is handed out at `at`: adds a mark,
    /// `within` `every` ([`Mark::EVERY`]), unless the last mark's covers
    /// it; true when it added one.
    pub fn add(marks: &mut Vec<Mark>, at: TimeNs, next_file_id: u64, every: TimeNs) -> bool {
        if marks.last().is_some_and(|m| at <= m.at.saturating_add(m.within) || m.next_file_id >= next_file_id) {
            return false;
        }
        marks.push(Mark { at, next_file_id, within: every });
        if marks.len() > Mark::MAX {
            let half = marks.len() / 2;
            let mut merged: Vec<Mark> = marks[..half]
                .chunks(2)
                .map(|pair| {
                    let mut m = pair[0];
                    if let Some(next) = pair.get(1) {
                        m.within = next.at.saturating_add(next.within) - m.at;
                    }
                    m
                })
                .collect();
            merged.extend_from_slice(&marks[half..]);
            *marks = merged;
        }
        true
    }

    /// The least file id of the files first indexed at `since` or later,
    /// as far as `marks` tell (to within a mark's `within` before it), the
    /// index's next file id being `next_file_id`; None when they cannot
    /// tell (the index began keeping marks after `since`, and held files
    /// then): every file may be.
    pub fn first_id_since(marks: &[Mark], since: TimeNs, next_file_id: u64) -> Option<u64> {
        let Some(k) = marks.iter().rposition(|m| m.at <= since) else {
            // Ids from 1 on: every file came after the first mark.
            return marks.first().filter(|m| m.next_file_id <= 1).map(|m| m.next_file_id);
        };
        let m = marks[k];
        if since > m.at.saturating_add(m.within) {
            // Its ids were all handed out before `since`.
            return Some(marks.get(k + 1).map_or(next_file_id, |n| n.next_file_id));
        }
        Some(m.next_file_id)
    }
}

/// Where history retention stands, kept by the writer in the batches that
/// write history, so that a run can tell whether a retention pass (which
/// reads all of `history`) is due without reading it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiry {
    /// When the last pass ran (wall clock).
    pub at: TimeNs,
    /// History records written since.
    pub records: u64,
    /// Chunk-list entries (runs) that version ghosts written since keep
    /// reachable.
    pub version_runs: u64,
    /// The retention that pass applied: days, then records (a run asking
    /// for another applies its own at once).
    pub kept_days: u64,
    pub kept_records: u64,
}

/// Totals the writer keeps current in the same batch as each change, so that
/// queries need not count (the checker verifies them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Files in `files`.
    pub files: u64,
    /// Contents with at least one name.
    pub contents: u64,
}

/// `meta`: maps a name to a piece of index-wide state.
///
/// ```text
/// key:   name bytes (ASCII, e.g. "format")
/// value: 0x01 ‖ postcard(MetaValue)
/// ```
pub struct Meta;

impl Table for Meta {
    const NAME: &'static str = "meta";
    const VALUE_VERSION: u8 = 1;
    type Key = MetaKey;
    type Value = MetaValue;

    fn encode_key(key: &MetaKey) -> Vec<u8> {
        key.name().as_bytes().to_vec()
    }

    fn decode_key(bytes: &[u8]) -> Result<MetaKey, DecodeError> {
        MetaKey::ALL
            .into_iter()
            .find(|k| k.name().as_bytes() == bytes)
            .ok_or(DecodeError::KeyLength { found: bytes.len(), expected: "a known meta name" })
    }
}

// ---------------------------------------------------------------- files

/// What the index knows of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The path's raw bytes (`OsStr` on Unix), never lossily converted.
    /// (Written as one byte string, not byte by byte: postcard's wire
    /// format is the same either way.)
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime: TimeNs,
    pub inode: u64,
    pub content: ContentHash,
    /// The device the file was on when its record was written (`st_dev`);
    /// with `inode`, it tells the names of one file (hard links) from
    /// copies. Not part of change detection: a network file system's
    /// device number changes when it is mounted again. 0: not known (a
    /// record of schema 8 or older, until the file is written again).
    pub dev: u64,
}

/// A `files` value of version 1 (schema 8 and older): no device.
#[derive(Deserialize)]
struct FileRecordV1 {
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    size: u64,
    mtime: TimeNs,
    inode: u64,
    content: ContentHash,
}

/// `files`: maps a file id to its record (file→content).
///
/// ```text
/// key:   file id (u64 BE, 8 bytes)
/// value: 0x02 ‖ postcard(FileRecord)   (0x01: no `dev`, read as 0)
/// ```
pub struct Files;

impl Table for Files {
    const NAME: &'static str = "files";
    const VALUE_VERSION: u8 = 2;
    type Key = FileId;
    type Value = FileRecord;

    fn decode_value(bytes: &[u8]) -> Result<FileRecord, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match version {
            Self::VALUE_VERSION => match file_record(rest) {
                Some(rec) => Ok(rec),
                None => Ok(postcard::from_bytes(rest)?),
            },
            1 => {
                let FileRecordV1 { path, size, mtime, inode, content } = postcard::from_bytes(rest)?;
                Ok(FileRecord { path, size, mtime, inode, content, dev: 0 })
            }
            found => Err(DecodeError::Version { found, expected: Self::VALUE_VERSION }),
        }
    }

    fn encode_key(key: &FileId) -> Vec<u8> {
        key.0.to_be_bytes().to_vec()
    }

    fn write_key(key: &FileId, out: &mut Vec<u8>) {
        out.extend_from_slice(&key.0.to_be_bytes());
    }

    fn decode_key(bytes: &[u8]) -> Result<FileId, DecodeError> {
        Ok(FileId(u64::from_be_bytes(fixed(bytes, "8")?)))
    }
}

/// A [`FileRecord`] as postcard writes it, read without serde: a walk
/// loads every record before it compares (`scan::Known::load`), where
/// postcard's field-by-field decoding (sixteen calls for the content
/// hash's bytes among them) was ~5 % of a re-index that changed nothing.
/// None for anything out of the ordinary (a varint of more than 63 bits, a
/// value cut short), which postcard then decodes or refuses; what this
/// reads, postcard reads alike (`tests::file_records_decode_as_postcard_does`).
fn file_record(bytes: &[u8]) -> Option<FileRecord> {
    let (stat, content) = file_fields(bytes)?;
    let FileStat { path, size, mtime, inode, dev } = stat;
    Some(FileRecord { path: path.to_vec(), size, mtime, inode, content, dev })
}

/// [`file_record`]'s fields, the path borrowed from `bytes`.
fn file_fields(bytes: &[u8]) -> Option<(FileStat<'_>, ContentHash)> {
    let mut b = Bytes(bytes);
    let len = usize::try_from(b.varint()?).ok()?;
    let path = b.take(len)?;
    let size = b.varint()?;
    let z = b.varint()?;
    // postcard's zigzag for signed integers.
    let mtime = (z >> 1) as i64 ^ -((z & 1) as i64);
    let inode = b.varint()?;
    let content = ContentHash(b.take(16)?.try_into().ok()?);
    let dev = b.varint()?;
    Some((FileStat { path, size, mtime, inode, dev }, content))
}

/// What a walk compares of a file's record ([`FileRecord`] without its
/// content), its path borrowed from the stored value: loading every
/// record's stats copied each path only to hash it and drop it
/// ([`Files::decode_stat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat<'a> {
    pub path: &'a [u8],
    pub size: u64,
    pub mtime: TimeNs,
    pub inode: u64,
    pub dev: u64,
}

impl FileStat<'_> {
    /// The stats of `rec`, borrowing its path.
    pub fn of(rec: &FileRecord) -> FileStat<'_> {
        FileStat { path: &rec.path, size: rec.size, mtime: rec.mtime, inode: rec.inode, dev: rec.dev }
    }
}

impl Files {
    /// The path and stats of a `files` value of the current version, read
    /// in place; None for anything else (a record of an older version, a
    /// number of over 63 bits, bytes that are no record), which
    /// [`Table::decode_value`] then reads or refuses.
    pub fn decode_stat(bytes: &[u8]) -> Option<FileStat<'_>> {
        match bytes.split_first() {
            Some((&Self::VALUE_VERSION, rest)) => Some(file_fields(rest)?.0),
            _ => None,
        }
    }
}

/// What is left of a value being read ([`file_record`]).
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    /// A varint of at most nine bytes (63 bits); postcard's longest is ten.
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0;
        for (i, &byte) in self.0.iter().enumerate().take(9) {
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.0 = &self.0[i + 1..];
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
}

// ---------------------------------------------------------------- paths

/// `paths`: maps a path to its file id.
///
/// ```text
/// key:   path bytes (variable length, no NUL)
/// value: 0x01 ‖ postcard(FileId)
/// ```
pub struct Paths;

impl Table for Paths {
    const NAME: &'static str = "paths";
    const VALUE_VERSION: u8 = 1;
    type Key = Vec<u8>;
    type Value = FileId;

    fn encode_key(key: &Vec<u8>) -> Vec<u8> {
        key.clone()
    }

    fn decode_key(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
        Ok(bytes.to_vec())
    }
}

// ---------------------------------------------------------------- content_chunks

/// A distinct content: its id, size, chunk list and word-shingle sketch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentRecord {
    /// Its id in the postings (0 for a record not stored).
    pub id: ContentId,
    pub size: u64,
    /// Chunks in file order, consecutive repeats merged into runs.
    #[serde(with = "packed_runs")]
    pub runs: Vec<ChunkRun>,
    pub sketch: Sketch,
}

/// A content's runs as (chunk key, length × 2 + 1 if the run repeats, then
/// its count if it does): almost every run is one chunk, and its count
/// byte was ~5 % of a record (value version 5). Value version 6 writes the
/// chunk's 8-byte [`ChunkKey`](crate::fingerprint::ChunkKey) where version
/// 5 wrote its whole 16-byte id (read by [`packed_runs::whole_ids`]).
mod packed_runs {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::ser::SerializeTuple;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::fingerprint::{ChunkId, ChunkKey, ChunkRun};

    /// A run, its chunk named by the whole id when `WHOLE_ID` (value
    /// version 5), by its key otherwise.
    struct Packed<const WHOLE_ID: bool>(ChunkRun);

    impl Serialize for Packed<false> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let r = &self.0;
            let repeats = r.count != 1;
            let mut t = s.serialize_tuple(if repeats { 3 } else { 2 })?;
            t.serialize_element(&r.key.0.to_be_bytes())?;
            t.serialize_element(&(u64::from(r.len) << 1 | u64::from(repeats)))?;
            if repeats {
                t.serialize_element(&r.count)?;
            }
            t.end()
        }
    }

    impl<'de, const WHOLE_ID: bool> Deserialize<'de> for Packed<WHOLE_ID> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V<const WHOLE_ID: bool>;
            impl<'de, const WHOLE_ID: bool> Visitor<'de> for V<WHOLE_ID> {
                type Value = Packed<WHOLE_ID>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a chunk run")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Packed<WHOLE_ID>, A::Error> {
                    let no_chunk = || A::Error::custom("run without its chunk");
                    let key = if WHOLE_ID {
                        seq.next_element::<ChunkId>()?.ok_or_else(no_chunk)?.key()
                    } else {
                        ChunkKey(u64::from_be_bytes(seq.next_element()?.ok_or_else(no_chunk)?))
                    };
                    let packed: u64 = seq.next_element()?.ok_or_else(|| A::Error::custom("run without its length"))?;
                    let len = u32::try_from(packed >> 1).map_err(|_| A::Error::custom("run length over u32"))?;
                    let count = if packed & 1 == 1 {
                        let c: u32 = seq.next_element()?.ok_or_else(|| A::Error::custom("run without its count"))?;
                        if c == 1 {
                            return Err(A::Error::custom("a repeated run of one chunk"));
                        }
                        c
                    } else {
                        1
                    };
                    Ok(Packed(ChunkRun { key, len, count }))
                }
            }
            // Postcard reads a tuple's fields one by one; the third is read
            // only when the second says it is there.
            d.deserialize_tuple(3, V::<WHOLE_ID>)
        }
    }

    pub fn serialize<S: Serializer>(runs: &[ChunkRun], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(runs.iter().map(|&r| Packed::<false>(r)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ChunkRun>, D::Error> {
        runs::<D, false>(d)
    }

    fn runs<'de, D: Deserializer<'de>, const WHOLE_ID: bool>(d: D) -> Result<Vec<ChunkRun>, D::Error> {
        struct Runs<const WHOLE_ID: bool>;
        impl<'de, const WHOLE_ID: bool> Visitor<'de> for Runs<WHOLE_ID> {
            type Value = Vec<ChunkRun>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("chunk runs")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<ChunkRun>, A::Error> {
                // A length read from the bytes is only a hint: capped, so a
                // corrupt one cannot allocate much.
                let mut runs = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(Packed::<WHOLE_ID>(r)) = seq.next_element()? {
                    runs.push(r);
                }
                Ok(runs)
            }
        }
        d.deserialize_seq(Runs::<WHOLE_ID>)
    }

    /// Runs read and passed over: a record read for its sketch only
    /// ([`super::ContentChunks::decode_sketch_head`]) allocates no list.
    pub struct Skipped;

    impl<'de> Deserialize<'de> for Skipped {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Skipped, D::Error> {
            struct Runs;
            impl<'de> Visitor<'de> for Runs {
                type Value = Skipped;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("chunk runs")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skipped, A::Error> {
                    while seq.next_element::<Packed<false>>()?.is_some() {}
                    Ok(Skipped)
                }
            }
            d.deserialize_seq(Runs)
        }
    }

    /// Runs of value version 5, each chunk named by its whole id.
    pub mod whole_ids {
        use serde::Deserializer;

        use crate::fingerprint::ChunkRun;

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ChunkRun>, D::Error> {
            super::runs::<D, true>(d)
        }
    }
}

/// A chunk run as value versions 3 and 4 wrote it (postcard of the whole
/// id, the length and the count): still read, never written.
#[derive(Deserialize)]
pub(crate) struct OldRun {
    id: ChunkId,
    len: u32,
    count: u32,
}

impl From<OldRun> for ChunkRun {
    fn from(r: OldRun) -> ChunkRun {
        ChunkRun { key: r.id.key(), len: r.len, count: r.count }
    }
}

impl ContentRecord {
    /// Each distinct chunk with its number of occurrences, sorted by chunk key.
    pub fn chunk_counts(&self) -> Vec<(ChunkKey, u32, u32)> {
        chunk_counts(&self.runs)
    }

    /// Chunks in file order, repeats counted.
    pub fn chunk_count(&self) -> u64 {
        chunk_count(&self.runs)
    }
}

fn chunk_count(runs: &[ChunkRun]) -> u64 {
    runs.iter().map(|r| u64::from(r.count)).sum()
}

/// Each distinct chunk of `runs` with its number of occurrences, sorted by
/// chunk key.
fn chunk_counts(runs: &[ChunkRun]) -> Vec<(ChunkKey, u32, u32)> {
    let mut v: Vec<(ChunkKey, u32, u32)> = runs.iter().map(|r| (r.key, r.len, r.count)).collect();
    v.sort_unstable_by_key(|&(key, _, _)| key);
    v.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.2 = a.2.saturating_add(b.2);
            true
        } else {
            false
        }
    });
    v
}

/// What taking a content's postings out needs of its record: its id, its
/// chunk list and its posted samples ([`Sketch::posted`]), not the whole
/// sketch; and its size, for counting (`simd status`). Read only
/// ([`ContentChunks::decode_postings`]), never written, so a record is
/// never stored with its sketch cut short.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentPostings {
    pub id: ContentId,
    pub size: u64,
    pub runs: Vec<ChunkRun>,
    pub posted: Vec<u32>,
}

impl ContentPostings {
    pub fn of(record: &ContentRecord) -> ContentPostings {
        ContentPostings {
            id: record.id,
            size: record.size,
            runs: record.runs.clone(),
            posted: record.sketch.posted().to_vec(),
        }
    }

    /// [`ContentRecord::chunk_counts`].
    pub fn chunk_counts(&self) -> Vec<(ChunkKey, u32, u32)> {
        chunk_counts(&self.runs)
    }

    /// [`ContentRecord::chunk_count`].
    pub fn chunk_count(&self) -> u64 {
        chunk_count(&self.runs)
    }
}

/// A [`ContentRecord`] of the current value version read as
/// [`ContentPostings`]: the same fields, the sketch decoded only as far as
/// its posted samples.
#[derive(Deserialize)]
struct PostingsOfRecord {
    id: ContentId,
    size: u64,
    #[serde(with = "packed_runs")]
    runs: Vec<ChunkRun>,
    posted: PostedSamples,
}

struct PostedSamples(Vec<u32>);

/// What the analysis's partition reads of a content's record to decide
/// which contents are candidates ([`ContentChunks::decode_sketch_head`]):
/// its id, its sketch's level, its number of samples and its posted
/// samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SketchHead {
    pub id: ContentId,
    pub level: u8,
    pub samples: u32,
    pub posted: Vec<u32>,
}

/// A [`ContentRecord`] of the current value version read for its
/// [`SketchHead`]: the chunk list passed over, the sketch borrowed.
#[derive(Deserialize)]
struct HeadOfRecord<'a> {
    id: ContentId,
    _size: u64,
    _runs: packed_runs::Skipped,
    sketch: &'a [u8],
}

/// A [`ContentRecord`] of the current value version read as a prior
/// content ([`ContentChunks::decode_prior`]): its sketch's bytes borrowed.
#[derive(Deserialize)]
struct PriorOfRecord<'a> {
    id: ContentId,
    size: u64,
    #[serde(with = "packed_runs")]
    runs: Vec<ChunkRun>,
    sketch: &'a [u8],
}

impl<'de> Deserialize<'de> for PostedSamples {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Borrowed: values are decoded from a slice ([`ContentChunks::decode_postings`]).
        let bytes = <&'de [u8]>::deserialize(d)?;
        crate::sketch::posted_of_bytes(bytes).map(PostedSamples).map_err(serde::de::Error::custom)
    }
}

/// `content_chunks`: maps a content hash to its chunk list (file→chunks).
///
/// ```text
/// key:   content hash (16 bytes)
/// value: 0x06 ‖ postcard(ContentRecord)
/// ```
pub struct ContentChunks;

/// A `content_chunks` value of schema versions 5 (value version 4): the
/// sketch coded as varint gaps. Still read, never written.
const RECORD_V4: u8 = 4;

#[derive(Deserialize)]
struct RecordV4 {
    id: ContentId,
    size: u64,
    runs: Vec<OldRun>,
    sketch: GapCoded,
}

/// A `content_chunks` value of schema versions 6 and 7 (value version 5):
/// the chunk list names each chunk by its whole id. Still read, never
/// written.
const RECORD_V5: u8 = 5;

#[derive(Deserialize)]
struct RecordV5 {
    id: ContentId,
    size: u64,
    #[serde(with = "packed_runs::whole_ids")]
    runs: Vec<ChunkRun>,
    sketch: Sketch,
}

impl Table for ContentChunks {
    const NAME: &'static str = "content_chunks";
    const VALUE_VERSION: u8 = 6;
    type Key = ContentHash;
    type Value = ContentRecord;

    fn decode_value(bytes: &[u8]) -> Result<ContentRecord, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        match version {
            Self::VALUE_VERSION => Ok(postcard::from_bytes(rest)?),
            RECORD_V5 => {
                let old: RecordV5 = postcard::from_bytes(rest)?;
                Ok(ContentRecord { id: old.id, size: old.size, runs: old.runs, sketch: old.sketch })
            }
            RECORD_V4 => {
                let old: RecordV4 = postcard::from_bytes(rest)?;
                let runs = old.runs.into_iter().map(ChunkRun::from).collect();
                Ok(ContentRecord { id: old.id, size: old.size, runs, sketch: old.sketch.0 })
            }
            found => Err(DecodeError::Version { found, expected: Self::VALUE_VERSION }),
        }
    }

    fn encode_key(key: &ContentHash) -> Vec<u8> {
        key.0.to_vec()
    }

    fn decode_key(bytes: &[u8]) -> Result<ContentHash, DecodeError> {
        Ok(ContentHash(fixed(bytes, "16")?))
    }
}

impl ContentChunks {
    /// A value read as [`ContentPostings`] ([`Store::get_postings`](super::Store::get_postings)).
    pub fn decode_postings(bytes: &[u8]) -> Result<ContentPostings, DecodeError> {
        match bytes.split_first() {
            Some((&Self::VALUE_VERSION, rest)) => {
                let r: PostingsOfRecord = postcard::from_bytes(rest)?;
                Ok(ContentPostings { id: r.id, size: r.size, runs: r.runs, posted: r.posted.0 })
            }
            // Older versions are rare (an index upgraded in place): whole.
            _ => Self::decode_value(bytes).map(|r| ContentPostings::of(&r)),
        }
    }

    /// A value read as its sketch's [`SketchHead`]: neither the chunk list
    /// nor the samples after the posted ones decoded.
    pub fn decode_sketch_head(bytes: &[u8]) -> Result<SketchHead, DecodeError> {
        match bytes.split_first() {
            Some((&Self::VALUE_VERSION, rest)) => {
                let r: HeadOfRecord = postcard::from_bytes(rest)?;
                let (level, samples, posted) = crate::sketch::head_of_bytes(r.sketch)
                    .map_err(|e| DecodeError::Postcard(serde::de::Error::custom(e)))?;
                Ok(SketchHead { id: r.id, level, samples, posted })
            }
            // Older versions are rare (an index upgraded in place): whole.
            _ => Self::decode_value(bytes).map(|r| SketchHead {
                id: r.id,
                level: r.sketch.level,
                samples: u32::try_from(r.sketch.samples.len()).unwrap_or(u32::MAX),
                posted: r.sketch.posted().to_vec(),
            }),
        }
    }

    /// A value of the current version, whose sketch was made as this simd
    /// makes one, as the prior content of a grown file
    /// (`fingerprint::Prior`): its sketch left as stored, and what taking
    /// its postings out needs ([`ContentChunks::decode_postings`]); None
    /// for an older one (an index upgraded in place keeps records sketched
    /// with other constants). A grown file's sketch goes on from such a
    /// record's, so a change to the sketch's constants must come with a new
    /// value version here, even where the bytes' layout stays.
    pub fn decode_prior(bytes: &[u8]) -> Result<Option<(ContentPostings, PriorRecord)>, DecodeError> {
        let Some((&Self::VALUE_VERSION, rest)) = bytes.split_first() else { return Ok(None) };
        let r: PriorOfRecord = postcard::from_bytes(rest)?;
        let posted =
            crate::sketch::posted_of_bytes(r.sketch).map_err(|e| DecodeError::Postcard(serde::de::Error::custom(e)))?;
        let postings = ContentPostings { id: r.id, size: r.size, runs: r.runs.clone(), posted };
        Ok(Some((postings, PriorRecord { runs: r.runs, sketch: r.sketch.to_vec() })))
    }
}

impl ContentChunks {
    /// A stored value of the current version given another content id:
    /// the id is its first field, so the rest of its bytes stay as they
    /// are (a chunk list kept for `simd lost` whose id passed to the
    /// content that replaced it; see `ingest::Writer::upsert`). None for a
    /// value of an older version or one that does not decode so.
    pub fn renumbered(stored: &[u8], id: ContentId) -> Option<Vec<u8>> {
        let (&Self::VALUE_VERSION, rest) = stored.split_first()? else { return None };
        let (_, after) = postcard::take_from_bytes::<ContentId>(rest).ok()?;
        let mut out = vec![Self::VALUE_VERSION];
        out.extend_from_slice(&postcard::to_stdvec(&id).ok()?);
        out.extend_from_slice(after);
        Some(out)
    }
}

// ---------------------------------------------------------------- chunk_contents

/// One posting: how often a chunk occurs in a content, and the chunk's
/// length (so that degree and byte figures need no chunk-list reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posting {
    pub count: u32,
    pub len: u32,
}

/// `chunk_contents`: postings, chunk→contents holding it (chunk→files).
/// A chunk is named by its [`ChunkKey`], the first 8 bytes of its id
/// (schema version 7; the whole 16 before).
///
/// ```text
/// key:   chunk key (8 bytes) ‖ content id (u40 BE, 5 bytes)
/// value: 0x01 ‖ postcard(Posting { count: u32, len: u32 })
/// ```
pub struct ChunkContents;

impl Table for ChunkContents {
    const NAME: &'static str = "chunk_contents";
    const VALUE_VERSION: u8 = 1;
    type Key = (ChunkKey, ContentId);
    type Value = Posting;

    fn encode_key(key: &(ChunkKey, ContentId)) -> Vec<u8> {
        let mut k = Vec::with_capacity(8 + ContentId::BYTES);
        Self::write_key(key, &mut k);
        k
    }

    fn write_key(&(chunk, content): &(ChunkKey, ContentId), out: &mut Vec<u8>) {
        out.extend_from_slice(&chunk.0.to_be_bytes());
        content.write(out);
    }

    fn decode_key(bytes: &[u8]) -> Result<(ChunkKey, ContentId), DecodeError> {
        let b: [u8; 13] = fixed(bytes, "13")?;
        Ok((ChunkKey(u64::from_be_bytes(fixed(&b[..8], "8")?)), ContentId::read(&b[8..])?))
    }
}

// ---------------------------------------------------------------- sketch_contents

/// `sketch_contents`: postings of the sketches' posted samples, sample →
/// contents holding it: how contents that share no chunk but much text
/// find each other.
///
/// ```text
/// key:   sample (u32 BE, 4 bytes) ‖ content id (u40 BE, 5 bytes)
/// value: 0x01 ‖ postcard(())   (i.e. the single byte 0x01)
/// ```
pub struct SketchContents;

impl Table for SketchContents {
    const NAME: &'static str = "sketch_contents";
    const VALUE_VERSION: u8 = 1;
    type Key = (u32, ContentId);
    type Value = ();

    fn encode_key(key: &(u32, ContentId)) -> Vec<u8> {
        let mut k = Vec::with_capacity(4 + ContentId::BYTES);
        Self::write_key(key, &mut k);
        k
    }

    fn write_key(&(sample, content): &(u32, ContentId), out: &mut Vec<u8>) {
        out.extend_from_slice(&sample.to_be_bytes());
        content.write(out);
    }

    fn decode_key(bytes: &[u8]) -> Result<(u32, ContentId), DecodeError> {
        let b: [u8; 9] = fixed(bytes, "9")?;
        Ok((u32::from_be_bytes(fixed(&b[..4], "4")?), ContentId::read(&b[4..])?))
    }
}

// ---------------------------------------------------------------- content_by_id

/// `content_by_id`: maps a content id to its content hash, for the
/// contents the postings name.
///
/// ```text
/// key:   content id (u40 BE, 5 bytes)
/// value: 0x01 ‖ postcard(ContentHash)   (its 16 bytes)
/// ```
pub struct ContentById;

impl Table for ContentById {
    const NAME: &'static str = "content_by_id";
    const VALUE_VERSION: u8 = 1;
    type Key = ContentId;
    type Value = ContentHash;

    fn encode_key(key: &ContentId) -> Vec<u8> {
        let mut k = Vec::with_capacity(ContentId::BYTES);
        key.write(&mut k);
        k
    }

    fn decode_key(bytes: &[u8]) -> Result<ContentId, DecodeError> {
        ContentId::read(bytes)
    }
}

// ---------------------------------------------------------------- content_names

/// `content_names`: content hash → the files holding it (content-hash→names).
///
/// ```text
/// key:   content hash (16 bytes) ‖ file id (u64 BE, 8 bytes)
/// value: 0x01 ‖ postcard(())   (i.e. the single byte 0x01)
/// ```
pub struct ContentNames;

impl Table for ContentNames {
    const NAME: &'static str = "content_names";
    const VALUE_VERSION: u8 = 1;
    type Key = (ContentHash, FileId);
    type Value = ();

    fn encode_key(key: &(ContentHash, FileId)) -> Vec<u8> {
        let mut k = Vec::with_capacity(24);
        Self::write_key(key, &mut k);
        k
    }

    fn write_key(&(content, file): &(ContentHash, FileId), out: &mut Vec<u8>) {
        out.extend_from_slice(&content.0);
        out.extend_from_slice(&file.0.to_be_bytes());
    }

    fn decode_key(bytes: &[u8]) -> Result<(ContentHash, FileId), DecodeError> {
        let b: [u8; 24] = fixed(bytes, "24")?;
        Ok((ContentHash(fixed(&b[..16], "16")?), FileId(u64::from_be_bytes(fixed(&b[16..], "8")?))))
    }
}

// ---------------------------------------------------------------- templates

/// A cluster that marked a chunk or a sample as template, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub marked: TimeNs,
    /// The cluster id it was marked from.
    pub cluster: u64,
}

/// Why a chunk (or a sketch sample) is template: the clusters that marked
/// it, the first first. Marks are a union: a chunk two clusters marked
/// stays marked until both are unmarked.
///
/// Stored as the first marker in the layout of value version 1 (`marked`,
/// `cluster`, `len`), then, only when other clusters marked it too,
/// `postcard(Vec<Marker>)` of those. postcard reads a value and leaves what
/// follows it, so a simd from before this reads the first marker and no
/// version changes (schema/templates.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateMark {
    /// The chunk's length (0 for a sample).
    pub len: u32,
    /// Never empty.
    pub by: Vec<Marker>,
}

impl TemplateMark {
    pub fn new(cluster: u64, marked: TimeNs, len: u32) -> TemplateMark {
        TemplateMark { len, by: vec![Marker { marked, cluster }] }
    }

    /// Whether `cluster` marked it.
    pub fn by(&self, cluster: u64) -> bool {
        self.by.iter().any(|m| m.cluster == cluster)
    }
}

/// The layout of a mark's first marker, as value version 1 stored the
/// only one.
#[derive(Serialize, Deserialize)]
struct FirstMarker {
    marked: TimeNs,
    cluster: u64,
    len: u32,
}

fn write_mark(version: u8, mark: &TemplateMark, out: &mut Vec<u8>) {
    out.push(version);
    let first = mark.by.first().copied().unwrap_or(Marker { marked: 0, cluster: 0 });
    let head = FirstMarker { marked: first.marked, cluster: first.cluster, len: mark.len };
    postcard::to_io(&head, &mut *out).expect("postcard encodes into a Vec");
    if mark.by.len() > 1 {
        postcard::to_io(&mark.by[1..], &mut *out).expect("postcard encodes into a Vec");
    }
}

fn decode_mark(version: u8, bytes: &[u8]) -> Result<TemplateMark, DecodeError> {
    let (&found, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if found != version {
        return Err(DecodeError::Version { found, expected: version });
    }
    let (head, rest): (FirstMarker, _) = postcard::take_from_bytes(rest)?;
    let mut by = vec![Marker { marked: head.marked, cluster: head.cluster }];
    if !rest.is_empty() {
        by.extend(postcard::from_bytes::<Vec<Marker>>(rest)?);
    }
    Ok(TemplateMark { len: head.len, by })
}

/// `templates`: template chunks, ignored by analysis.
///
/// ```text
/// key:   chunk key (u64 BE, 8 bytes; the whole 16-byte id before schema version 8)
/// value: 0x01 ‖ postcard(marked i64, cluster u64, len u32) [‖ postcard(Vec<Marker>)]
/// ```
pub struct Templates;

impl Table for Templates {
    const NAME: &'static str = "templates";
    const VALUE_VERSION: u8 = 1;
    type Key = ChunkKey;
    type Value = TemplateMark;

    fn write_value(value: &TemplateMark, out: &mut Vec<u8>) {
        write_mark(Self::VALUE_VERSION, value, out)
    }

    fn decode_value(bytes: &[u8]) -> Result<TemplateMark, DecodeError> {
        decode_mark(Self::VALUE_VERSION, bytes)
    }

    fn encode_key(key: &ChunkKey) -> Vec<u8> {
        key.0.to_be_bytes().to_vec()
    }

    fn decode_key(bytes: &[u8]) -> Result<ChunkKey, DecodeError> {
        Ok(ChunkKey(u64::from_be_bytes(fixed(bytes, "8")?)))
    }
}

// ---------------------------------------------------------------- template_samples

/// `template_samples`: sketch samples marked with a template, so that the
/// word measures ignore the template's text as the chunk measures ignore its
/// chunks.
///
/// ```text
/// key:   sample (u32 BE, 4 bytes)
/// value: as `templates`' (len is 0)
/// ```
pub struct TemplateSamples;

impl Table for TemplateSamples {
    const NAME: &'static str = "template_samples";
    const VALUE_VERSION: u8 = 1;
    type Key = u32;
    type Value = TemplateMark;

    fn write_value(value: &TemplateMark, out: &mut Vec<u8>) {
        write_mark(Self::VALUE_VERSION, value, out)
    }

    fn decode_value(bytes: &[u8]) -> Result<TemplateMark, DecodeError> {
        decode_mark(Self::VALUE_VERSION, bytes)
    }

    fn encode_key(key: &u32) -> Vec<u8> {
        key.to_be_bytes().to_vec()
    }

    fn decode_key(bytes: &[u8]) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(fixed(bytes, "4")?))
    }
}

// ---------------------------------------------------------------- history

/// What happened at a path that is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HistoryRecord {
    /// The file was deleted (or left the roots); its content is kept for
    /// lost-and-found while this record lives. `since` is the first file id
    /// handed out by the pass (an index run, a daemon batch) that saw it go:
    /// a live file with an id at least `since` appeared no earlier, so it may
    /// be where the file went; a lower id was there before.
    Ghost {
        content: ContentHash,
        size: u64,
        since: FileId,
        /// When a scan found the file gone: when a walk last found it there
        /// (its root's last whole walk before), so that `simd lost` says
        /// when it was last seen rather than when it was found gone. None
        /// when the daemon saw it go (the record's time is then when it
        /// went), and in records written before session 72. Stored after
        /// the record (see [`History`]), not in it.
        #[serde(skip)]
        seen: Option<TimeNs>,
    },
    /// The file was renamed to `to` with unchanged content.
    Moved {
        #[serde(with = "serde_bytes")]
        to: Vec<u8>,
        /// The content that moved, so that `simd lost` can tell whether it
        /// is still at `to`; None in records written before session 72.
        /// Stored after the record (see [`History`]), not in it.
        #[serde(skip)]
        content: Option<ContentHash>,
    },
}

impl HistoryRecord {
    /// The content whose chunk list this record keeps while it lives: a
    /// ghost's, and the content a move carries (`simd lost` measures what
    /// is left of it at a destination edited since).
    pub fn kept_content(&self) -> Option<ContentHash> {
        match self {
            HistoryRecord::Ghost { content, .. } => Some(*content),
            HistoryRecord::Moved { content, .. } => *content,
        }
    }
}

/// `history`: lost-and-found records per path.
///
/// ```text
/// key:   path bytes ‖ 0x00 ‖ time ns (i64 BE, 8 bytes)
/// value: 0x02 ‖ postcard(HistoryRecord) [‖ moved content (16 bytes) | ghost's last seen (i64 BE, 8 bytes)]
/// ```
///
/// Unix paths never contain NUL, so `path ‖ 0x00` is an exact prefix for one
/// path and `path ‖ '/'` one for a directory.
///
/// A move's content and a ghost's last seen follow the record rather than
/// being in it: postcard
/// reads a value and leaves what follows, so a simd from before it reads
/// the record as it did, and no version changes.
pub struct History;

impl Table for History {
    const NAME: &'static str = "history";
    const VALUE_VERSION: u8 = 2;
    type Key = (Vec<u8>, TimeNs);
    type Value = HistoryRecord;

    fn write_value(value: &HistoryRecord, out: &mut Vec<u8>) {
        out.push(Self::VALUE_VERSION);
        postcard::to_io(value, &mut *out).expect("postcard encodes into a Vec");
        match value {
            HistoryRecord::Moved { content: Some(c), .. } => out.extend_from_slice(&c.0),
            HistoryRecord::Ghost { seen: Some(t), .. } => out.extend_from_slice(&t.to_be_bytes()),
            _ => {}
        }
    }

    fn decode_value(bytes: &[u8]) -> Result<HistoryRecord, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != Self::VALUE_VERSION {
            return Err(DecodeError::Version { found: version, expected: Self::VALUE_VERSION });
        }
        let (mut rec, rest): (HistoryRecord, _) = postcard::take_from_bytes(rest)?;
        if !rest.is_empty() {
            match &mut rec {
                HistoryRecord::Moved { content, .. } => *content = Some(ContentHash(fixed(rest, "16")?)),
                HistoryRecord::Ghost { seen, .. } => *seen = Some(i64::from_be_bytes(fixed(rest, "8")?)),
            }
        }
        Ok(rec)
    }

    fn encode_key((path, time): &(Vec<u8>, TimeNs)) -> Vec<u8> {
        let mut k = Vec::with_capacity(path.len() + 9);
        k.extend_from_slice(path);
        k.push(0);
        // Flip the sign bit so that negative times (before 1970) still sort first.
        k.extend_from_slice(&((*time as u64) ^ (1 << 63)).to_be_bytes());
        k
    }

    fn decode_key(bytes: &[u8]) -> Result<(Vec<u8>, TimeNs), DecodeError> {
        if bytes.len() < 9 || bytes[bytes.len() - 9] != 0 {
            return Err(DecodeError::KeyLength { found: bytes.len(), expected: "path ‖ 0x00 ‖ 8" });
        }
        let (path, rest) = bytes.split_at(bytes.len() - 9);
        let t = u64::from_be_bytes(fixed(&rest[1..], "8")?) ^ (1 << 63);
        Ok((path.to_vec(), t as i64))
    }
}

/// Every CF's name, in the order they are created.
pub const ALL_CFS: [&str; 11] = [
    Meta::NAME,
    Files::NAME,
    Paths::NAME,
    ContentChunks::NAME,
    ChunkContents::NAME,
    SketchContents::NAME,
    ContentById::NAME,
    ContentNames::NAME,
    Templates::NAME,
    TemplateSamples::NAME,
    History::NAME,
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id16() -> impl Strategy<Value = [u8; 16]> {
        any::<[u8; 16]>()
    }

    fn content_id() -> impl Strategy<Value = ContentId> {
        (0..=ContentId::MAX).prop_map(ContentId)
    }

    /// A move's content follows the record: it reads back, and without it
    /// (a record written before) the move reads with no content, as a
    /// simd from before reads a record with it.
    #[test]
    fn a_moves_content_follows_its_record() {
        let with = HistoryRecord::Moved { to: b"/d/b.txt".to_vec(), content: Some(ContentHash([7; 16])) };
        let bytes = History::encode_value(&with);
        assert_eq!(History::decode_value(&bytes).unwrap(), with);
        let without = HistoryRecord::Moved { to: b"/d/b.txt".to_vec(), content: None };
        let old = History::encode_value(&without);
        assert_eq!(&bytes[..old.len()], &old[..]);
        assert_eq!(bytes.len(), old.len() + 16);
        assert_eq!(History::decode_value(&old).unwrap(), without);
        let read_before: HistoryRecord = postcard::from_bytes(&bytes[1..]).unwrap();
        assert_eq!(read_before, without);
        assert!(History::decode_value(&bytes[..bytes.len() - 1]).is_err());
        // A ghost's last seen, likewise.
        let content = ContentHash([9; 16]);
        let seen = HistoryRecord::Ghost { content, size: 5, since: FileId(3), seen: Some(-42) };
        let bytes = History::encode_value(&seen);
        assert_eq!(History::decode_value(&bytes).unwrap(), seen);
        let old = HistoryRecord::Ghost { content, size: 5, since: FileId(3), seen: None };
        assert_eq!(bytes.len(), History::encode_value(&old).len() + 8);
        assert_eq!(postcard::from_bytes::<HistoryRecord>(&bytes[1..]).unwrap(), old);
    }

    proptest! {
        /// A template mark of any number of clusters reads back as written,
        /// and its first marker reads as value version 1 stored it, which
        /// is what a simd from before marks were a union reads.
        #[test]
        fn template_marks_round_trip_and_read_as_version_1(
            len in any::<u32>(),
            by in proptest::collection::vec((any::<i64>(), any::<u64>()), 1..5),
        ) {
            let mark = TemplateMark { len, by: by.iter().map(|&(marked, cluster)| Marker { marked, cluster }).collect() };
            let bytes = Templates::encode_value(&mark);
            prop_assert_eq!(Templates::decode_value(&bytes).unwrap(), mark.clone());
            prop_assert_eq!(TemplateSamples::decode_value(&bytes).unwrap(), mark.clone());
            let old: FirstMarker = postcard::from_bytes(&bytes[1..]).unwrap();
            prop_assert_eq!((old.marked, old.cluster, old.len), (by[0].0, by[0].1, len));
            if by.len() == 1 {
                prop_assert_eq!(bytes.len(), 1 + postcard::to_allocvec(&old).unwrap().len());
            }
        }
    }

    proptest! {
        /// Ids handed out at increasing times, marked as the writer marks
        /// them: the least id `first_id_since` gives is never above an id
        /// handed out at `since` or later, and (while no marks were merged)
        /// the ids it takes in from before `since` are at most `every` older.
        #[test]
        fn marks_date_file_ids(
            gaps in proptest::collection::vec(0i64..2_000, 1..3_000),
            every in 1i64..5_000,
            probes in proptest::collection::vec(0i64..7_000_000, 1..20),
        ) {
            let (mut marks, mut times, mut merged) = (Vec::new(), Vec::new(), false);
            let mut t = 1_000;
            for (i, g) in gaps.iter().enumerate() {
                t += g;
                let before = marks.len();
                if Mark::add(&mut marks, t, i as u64 + 1, every) {
                    merged |= marks.len() <= before;
                }
                times.push(t);
            }
            prop_assert!(marks.len() <= Mark::MAX);
            let next = times.len() as u64 + 1;
            for since in probes {
                let first = Mark::first_id_since(&marks, since, next).expect("marks from the first id on");
                for (i, &at) in times.iter().enumerate() {
                    let id = i as u64 + 1;
                    if at >= since {
                        prop_assert!(id >= first, "id {id} at {at} left out of since {since} (from {first})");
                    } else if id >= first && !merged {
                        prop_assert!(at >= since - every, "id {id} at {at} taken in for since {since}");
                    }
                }
            }
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Meta::decode_key(&bytes);
            let _ = Meta::decode_value(&bytes);
            let _ = Files::decode_key(&bytes);
            let _ = Files::decode_value(&bytes);
            let _ = Paths::decode_value(&bytes);
            let _ = ContentChunks::decode_key(&bytes);
            let _ = ContentChunks::decode_value(&bytes);
            let _ = ContentChunks::decode_postings(&bytes);
            let _ = ChunkContents::decode_key(&bytes);
            let _ = SketchContents::decode_key(&bytes);
            let _ = ContentById::decode_key(&bytes);
            let _ = ContentById::decode_value(&bytes);
            let _ = TemplateSamples::decode_key(&bytes);
            let _ = ChunkContents::decode_value(&bytes);
            let _ = ContentNames::decode_key(&bytes);
            let _ = ContentNames::decode_value(&bytes);
            let _ = Templates::decode_value(&bytes);
            let _ = History::decode_key(&bytes);
            let _ = History::decode_value(&bytes);
        }

        #[test]
        fn file_records_decode_as_postcard_does(
            path in proptest::collection::vec(any::<u8>(), 0..300),
            size in prop_oneof![any::<u64>(), 0u64..1 << 20],
            mtime in prop_oneof![any::<i64>(), -(1i64 << 40)..1 << 62],
            inode in any::<u64>(),
            content in id16(),
            dev in prop_oneof![any::<u64>(), 0u64..1 << 16],
            cut in any::<prop::sample::Index>(),
            noise in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let rec = FileRecord { path, size, mtime, inode, content: ContentHash(content), dev };
            let bytes = Files::encode_value(&rec);
            prop_assert_eq!(Files::decode_value(&bytes).unwrap(), rec.clone());
            // The stats read in place are the record's, when read at all.
            if let Some(stat) = Files::decode_stat(&bytes) {
                prop_assert_eq!(stat, FileStat::of(&rec));
            }
            for b in [&noise[..], &bytes[..bytes.len() - 1]] {
                if let Some(stat) = Files::decode_stat(b) {
                    let rec = Files::decode_value(b).unwrap();
                    prop_assert_eq!(stat, FileStat::of(&rec));
                }
            }
            // What the fast path reads at all, it reads as postcard does:
            // whole values, values cut short, and arbitrary bytes.
            let cut = &bytes[1..1 + cut.index(bytes.len())];
            for b in [&bytes[1..], cut, &noise[..]] {
                if let Some(fast) = file_record(b) {
                    prop_assert_eq!(fast, postcard::from_bytes::<FileRecord>(b).unwrap());
                }
            }
            // And a record whose numbers fit 63 bits takes the fast path.
            let fits = |v: u64| v < 1 << 63;
            let zigzag = ((rec.mtime << 1) ^ (rec.mtime >> 63)) as u64;
            if fits(rec.size) && fits(zigzag) && fits(rec.inode) && fits(rec.dev) {
                prop_assert_eq!(Files::decode_stat(&bytes), Some(FileStat::of(&rec)));
                prop_assert_eq!(file_record(&bytes[1..]), Some(rec));
            }
        }

        #[test]
        fn file_keys_round_trip_in_order(a in any::<u64>(), b in any::<u64>()) {
            let (ka, kb) = (Files::encode_key(&FileId(a)), Files::encode_key(&FileId(b)));
            prop_assert_eq!(Files::decode_key(&ka).unwrap(), FileId(a));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn posting_keys_round_trip_in_order(c1 in id16(), h1 in content_id(), c2 in id16(), h2 in content_id()) {
            let (a, b) = ((ChunkId(c1).key(), h1), (ChunkId(c2).key(), h2));
            let (ka, kb) = (ChunkContents::encode_key(&a), ChunkContents::encode_key(&b));
            prop_assert_eq!(ChunkContents::decode_key(&ka).unwrap(), a);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn sketch_posting_keys_round_trip_in_order(s1 in any::<u32>(), h1 in content_id(), s2 in any::<u32>(), h2 in content_id()) {
            let (a, b) = ((s1, h1), (s2, h2));
            let (ka, kb) = (SketchContents::encode_key(&a), SketchContents::encode_key(&b));
            prop_assert_eq!(SketchContents::decode_key(&ka).unwrap(), a);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn content_id_keys_round_trip_in_order(a in content_id(), b in content_id()) {
            let (ka, kb) = (ContentById::encode_key(&a), ContentById::encode_key(&b));
            prop_assert_eq!(ContentById::decode_key(&ka).unwrap(), a);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn name_keys_round_trip_in_order(h1 in id16(), f1 in any::<u64>(), h2 in id16(), f2 in any::<u64>()) {
            let (a, b) = ((ContentHash(h1), FileId(f1)), (ContentHash(h2), FileId(f2)));
            let (ka, kb) = (ContentNames::encode_key(&a), ContentNames::encode_key(&b));
            prop_assert_eq!(ContentNames::decode_key(&ka).unwrap(), a);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn history_keys_round_trip_and_group_by_path(
            p in proptest::collection::vec(1u8..=255, 0..40),
            t1 in any::<i64>(),
            t2 in any::<i64>(),
        ) {
            let (ka, kb) = (History::encode_key(&(p.clone(), t1)), History::encode_key(&(p.clone(), t2)));
            prop_assert_eq!(History::decode_key(&ka).unwrap(), (p.clone(), t1));
            prop_assert_eq!(t1.cmp(&t2), ka.cmp(&kb));
        }

        #[test]
        fn values_round_trip(path in proptest::collection::vec(any::<u8>(), 0..300), size in any::<u64>(), mtime in any::<i64>()) {
            let rec = FileRecord { path, size, mtime, inode: size ^ 7, content: ContentHash([3; 16]), dev: size ^ 9 };
            prop_assert_eq!(Files::decode_value(&Files::encode_value(&rec)).unwrap(), rec);
        }
    }

    #[test]
    fn wrong_value_version_is_refused() {
        let mut v = ChunkContents::encode_value(&Posting { count: 3, len: 100 });
        v[0] = 9;
        assert!(matches!(ChunkContents::decode_value(&v), Err(DecodeError::Version { found: 9, expected: 1 })));
    }

    proptest! {
        #[test]
        fn content_records_round_trip(runs in proptest::collection::vec((any::<u64>(), 0u32..1_000_000, prop_oneof![Just(1u32), 2u32..5, any::<u32>()]), 0..40), words in 0usize..400) {
            let runs: Vec<ChunkRun> = runs.into_iter().map(|(id, len, count)| ChunkRun { key: ChunkKey(id), len, count }).collect();
            let text: String = (0..words).map(|i| format!("w{} ", i % 97)).collect();
            let rec = ContentRecord { id: ContentId(7), size: 12345, runs, sketch: crate::sketch::sketch_bytes(text.as_bytes()) };
            let bytes = ContentChunks::encode_value(&rec);
            prop_assert_eq!(ContentChunks::decode_postings(&bytes).unwrap(), ContentPostings::of(&rec));
            prop_assert_eq!(ContentChunks::decode_value(&bytes).unwrap(), rec.clone());
        }

        /// A stored record given another id, its other bytes as they were,
        /// reads back as the record with that id; an older version's is
        /// not given one.
        #[test]
        fn a_stored_record_renumbered_reads_back_with_its_new_id(id in any::<u64>(), new in 0u64..=ContentId::MAX, words in 0usize..400) {
            let text: String = (0..words).map(|i| format!("w{} ", i % 97)).collect();
            let runs = vec![ChunkRun { key: ChunkKey(id), len: 1000, count: 3 }];
            let rec = ContentRecord { id: ContentId(id % ContentId::MAX), size: 3000, runs, sketch: crate::sketch::sketch_bytes(text.as_bytes()) };
            let renumbered = ContentChunks::renumbered(&ContentChunks::encode_value(&rec), ContentId(new)).unwrap();
            prop_assert_eq!(ContentChunks::decode_value(&renumbered).unwrap(), ContentRecord { id: ContentId(new), ..rec.clone() });
            let mut older = ContentChunks::encode_value(&rec);
            older[0] = RECORD_V5;
            prop_assert_eq!(ContentChunks::renumbered(&older, ContentId(new)), None);
        }
    }

    #[test]
    fn a_content_record_of_value_version_4_is_still_read() {
        #[derive(Serialize)]
        struct V4<'a> {
            id: ContentId,
            size: u64,
            /// (whole chunk id, length, count)
            runs: &'a [(ChunkId, u32, u32)],
            sketch: GapCoded,
        }
        let old_runs = [(ChunkId([1; 16]), 1000, 1), (ChunkId([2; 16]), 9, 4)];
        let sketch = crate::sketch::sketch_bytes(b"one two three four five six seven");
        let mut bytes = vec![RECORD_V4];
        bytes.extend(
            postcard::to_allocvec(&V4 {
                id: ContentId(3),
                size: 1036,
                runs: &old_runs,
                sketch: GapCoded(sketch.clone()),
            })
            .unwrap(),
        );
        let rec = ContentChunks::decode_value(&bytes).unwrap();
        let runs = old_runs.map(|(id, len, count)| ChunkRun { key: id.key(), len, count }).to_vec();
        assert_eq!(rec, ContentRecord { id: ContentId(3), size: 1036, runs, sketch });
    }

    /// The example of value version 5 that `schema/content_chunks.md` gave
    /// until schema version 8: its chunks are read by their keys.
    #[test]
    fn a_content_record_of_value_version_5_is_still_read() {
        let hex = "05ac02d2090211111111111111111111111111111111d00f22222222222222222222222222222222d4030b000d0320009beffff6ff0f";
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let rec = ContentChunks::decode_value(&bytes).unwrap();
        assert_eq!((rec.id, rec.size), (ContentId(300), 1234));
        assert_eq!(
            rec.runs,
            [
                ChunkRun { key: ChunkKey(0x1111_1111_1111_1111), len: 1000, count: 1 },
                ChunkRun { key: ChunkKey(0x2222_2222_2222_2222), len: 234, count: 1 },
            ]
        );
        assert_eq!(rec.sketch.samples, [0x0400_8000, 0x1000_0000, 0x8000_0000]);
        assert_eq!(ContentChunks::decode_postings(&bytes).unwrap(), ContentPostings::of(&rec));
        // Read, but no grown file's sketch goes on from its sketch: value
        // version 5 was written with two sets of sketch constants.
        assert_eq!(ContentChunks::decode_prior(&bytes).unwrap(), None);
        let now = ContentChunks::encode_value(&rec);
        let (postings, prior) = ContentChunks::decode_prior(&now).unwrap().unwrap();
        assert_eq!(postings, ContentPostings::of(&rec));
        assert_eq!(prior.runs, rec.runs);
        assert_eq!(crate::sketch::sketch_of_bytes(&prior.sketch).unwrap(), rec.sketch);
    }

    #[test]
    fn a_repeated_run_of_one_chunk_is_refused() {
        let rec = ContentRecord {
            id: ContentId(1),
            size: 5,
            runs: vec![ChunkRun { key: ChunkKey(0x0101_0101_0101_0101), len: 5, count: 2 }],
            ..Default::default()
        };
        let mut v = ContentChunks::encode_value(&rec);
        // version, id, size, one run: 8 key bytes, then len × 2 + 1 = 11, then the count.
        assert_eq!(&v[..4], &[6, 1, 5, 1]);
        assert_eq!((v[12], v[13]), (11, 2));
        v[13] = 1;
        assert!(ContentChunks::decode_value(&v).is_err());
    }

    #[test]
    fn chunk_counts_merge_repeats() {
        let (a, b) = (ChunkKey(1), ChunkKey(2));
        let rec = ContentRecord {
            id: ContentId(1),
            size: 0,
            runs: vec![
                ChunkRun { key: b, len: 5, count: 1 },
                ChunkRun { key: a, len: 4, count: 2 },
                ChunkRun { key: b, len: 5, count: 3 },
            ],
            sketch: Default::default(),
        };
        assert_eq!(rec.chunk_counts(), vec![(a, 4, 2), (b, 5, 4)]);
    }
}
