//! In-place upgrades of older indexes: versions 3 and 4 to content ids,
//! where the postings name contents by [`ContentId`] instead of by content
//! hash (version 5), versions 5 and 6 to chunk keys, where the postings
//! name a chunk by the first 8 bytes of its id (version 7), and every older
//! version to template marks keyed the same way (version 8; its chunk lists
//! of whole ids are read as they are).
//!
//! The upgrade numbers every stored content (its record gains the id, and
//! `content_by_id` maps the id back), then rewrites each posting under its
//! new key. It commits in batches and can be resumed: records of both value
//! versions, and postings keys of both lengths, may sit side by side after
//! a crash, and the next writer carries on from there. Only once everything
//! is rewritten does the caller change the format record to version 5, so
//! a reader never sees a half-upgraded index as current.

use std::collections::HashMap;

use rocksdb::WriteBatch;
use serde::Deserialize;

use super::schema::OldRun;
use super::{
    ChunkContents, ContentById, ContentChunks, ContentId, ContentRecord, Meta, MetaKey, MetaValue, Result,
    SketchContents, Store, StoreError, Table, Templates,
};
use crate::fingerprint::{ChunkRun, ContentHash};
use crate::sketch::GapCoded;

/// A `content_chunks` value of schema versions 3 and 4 (value version 3):
/// the record without its id.
#[derive(Deserialize)]
struct RecordV3 {
    size: u64,
    runs: Vec<OldRun>,
    sketch: GapCoded,
}

const RECORD_V3: u8 = 3;
/// Key lengths of the postings in versions 3 and 4: the chunk id or the
/// sample, then the 16-byte content hash.
const OLD_CHUNK_KEY: usize = 32;
/// Key length of a chunk's posting in versions 5 and 6: the whole chunk
/// id, then the content id.
const V6_CHUNK_KEY: usize = 16 + ContentId::BYTES;
const OLD_SAMPLE_KEY: usize = 20;
/// Key length of a template mark before version 8: the whole chunk id.
const V7_TEMPLATE_KEY: usize = 16;
/// Writes per committed batch.
const BATCH_OPS: usize = 50_000;
/// At most this many content ids are remembered while postings are
/// rewritten (the rest are read back from their records).
const MEMO_MAX: usize = 1 << 20;

/// Read options for a whole-CF scan (postings CFs have a prefix extractor).
fn total_order() -> rocksdb::ReadOptions {
    let mut ro = rocksdb::ReadOptions::default();
    ro.set_total_order_seek(true);
    ro
}

/// What an upgrade rewrote.
pub(crate) struct Upgraded {
    pub contents: u64,
    pub postings: u64,
}

impl Store {
    /// Numbers every content and rewrites the postings by content id (see
    /// the module's comment). The caller then records version 5.
    pub(crate) fn upgrade_to_content_ids(&self) -> Result<Upgraded> {
        let mut next = match self.get::<Meta>(&MetaKey::NextContentId)? {
            Some(MetaValue::NextContentId(n)) => n,
            _ => 1,
        };
        let mut done = Upgraded { contents: 0, postings: 0 };

        // Each stored content gets an id, in the order of their hashes.
        let records = self.cf(ContentChunks::NAME);
        let by_id = self.cf(ContentById::NAME);
        let mut batch = WriteBatch::default();
        let mut it = self.db.raw_iterator_cf_opt(records, total_order());
        it.seek_to_first();
        while let Some((k, v)) = it.item() {
            if v.first() == Some(&RECORD_V3) {
                let hash = ContentChunks::decode_key(k).map_err(|e| self.corrupt_raw::<ContentChunks>(k, e))?;
                let old: RecordV3 =
                    postcard::from_bytes(&v[1..]).map_err(|e| self.corrupt_raw::<ContentChunks>(k, e))?;
                if next > ContentId::MAX {
                    return Err(StoreError::ContentIdsExhausted { dir: self.dir.clone() });
                }
                let runs = old.runs.into_iter().map(ChunkRun::from).collect();
                let rec = ContentRecord { id: ContentId(next), size: old.size, runs, sketch: old.sketch.0 };
                next += 1;
                batch.put_cf(records, k, ContentChunks::encode_value(&rec));
                batch.put_cf(by_id, ContentById::encode_key(&rec.id), ContentById::encode_value(&hash));
                done.contents += 1;
                if batch.len() >= BATCH_OPS {
                    self.commit_numbered(&mut batch, next)?;
                }
            }
            it.next();
        }
        it.status().map_err(|e| self.rocks(e))?;
        drop(it);
        self.commit_numbered(&mut batch, next)?;

        // Then every posting under its new key.
        let mut ids: HashMap<ContentHash, Option<ContentId>> = HashMap::new();
        done.postings += self.rekey::<ChunkContents>(OLD_CHUNK_KEY, 16, 8, &mut ids)?;
        done.postings += self.rekey::<SketchContents>(OLD_SAMPLE_KEY, 4, 4, &mut ids)?;

        // The old keys are tombstones now: compacting drops them, so the
        // upgraded index is as small as a new one (and flushing first
        // drops the write-ahead log the upgrade wrote).
        self.flush()?;
        for name in [ContentChunks::NAME, ChunkContents::NAME, SketchContents::NAME, ContentById::NAME] {
            self.db.compact_range_cf(self.cf(name), None::<&[u8]>, None::<&[u8]>);
        }
        Ok(done)
    }

    /// Writes `batch` with the next content id, and empties it.
    fn commit_numbered(&self, batch: &mut WriteBatch, next: u64) -> Result<()> {
        batch.put_cf(
            self.cf(Meta::NAME),
            Meta::encode_key(&MetaKey::NextContentId),
            Meta::encode_value(&MetaValue::NextContentId(next)),
        );
        self.db.write(std::mem::take(batch)).map_err(|e| self.rocks(e))
    }

    /// Rewrites every posting key of a version-5 or -6 index (the whole
    /// chunk id, then the content id) under the chunk's 8-byte key. In
    /// batches, and resumable: keys of both lengths may sit side by side
    /// after a crash, and only the old ones are rewritten. The caller then
    /// records version 7.
    pub(crate) fn upgrade_to_chunk_keys(&self) -> Result<u64> {
        let rewritten =
            self.rewrite_keys(ChunkContents::NAME, V6_CHUNK_KEY, |k| Ok(Some([&k[..8], &k[16..]].concat())))?;
        self.flush()?;
        self.db.compact_range_cf(self.cf(ChunkContents::NAME), None::<&[u8]>, None::<&[u8]>);
        Ok(rewritten)
    }

    /// Rewrites every key of `T` that is `old_len` bytes long (a `prefix`,
    /// then a content hash) as the prefix's first `keep` bytes and the
    /// content's id. A posting of a content with no record (which `simd
    /// check` would have called an inconsistency) is dropped: nothing could
    /// measure it.
    fn rekey<T: Table>(
        &self,
        old_len: usize,
        prefix: usize,
        keep: usize,
        ids: &mut HashMap<ContentHash, Option<ContentId>>,
    ) -> Result<u64> {
        self.rewrite_keys(T::NAME, old_len, |k| {
            let hash = ContentHash(k[prefix..].try_into().expect("old_len - prefix is 16"));
            if ids.len() >= MEMO_MAX {
                ids.clear();
            }
            let id = match ids.get(&hash) {
                Some(id) => *id,
                None => {
                    let id = self.get::<ContentChunks>(&hash)?.map(|r| r.id);
                    ids.insert(hash, id);
                    id
                }
            };
            Ok(id.map(|id| [&k[..keep], &ContentById::encode_key(&id)].concat()))
        })
    }

    /// Rewrites every template mark of an index older than version 8 (keyed
    /// by the whole chunk id) under the chunk's 8-byte key; resumable as
    /// the other upgrades are. Returns how many it rewrote.
    pub(crate) fn upgrade_template_keys(&self) -> Result<u64> {
        self.rewrite_keys(Templates::NAME, V7_TEMPLATE_KEY, |k| Ok(Some(k[..8].to_vec())))
    }

    /// Moves the value of every key of CF `name` that is `old_len` bytes
    /// long to the key `new_key` makes of it (or drops it, for None), in
    /// batches of [`BATCH_OPS`]; returns how many keys it rewrote. Keys of
    /// other lengths (already rewritten before a crash) are left as they are.
    fn rewrite_keys(
        &self,
        name: &'static str,
        old_len: usize,
        mut new_key: impl FnMut(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<u64> {
        let cf = self.cf(name);
        let mut batch = WriteBatch::default();
        let mut rewritten = 0;
        let mut it = self.db.raw_iterator_cf_opt(cf, total_order());
        it.seek_to_first();
        while let Some((k, v)) = it.item() {
            if k.len() == old_len {
                if let Some(key) = new_key(k)? {
                    batch.put_cf(cf, key, v);
                }
                batch.delete_cf(cf, k);
                rewritten += 1;
                if batch.len() >= BATCH_OPS {
                    self.db.write(std::mem::take(&mut batch)).map_err(|e| self.rocks(e))?;
                }
            }
            it.next();
        }
        it.status().map_err(|e| self.rocks(e))?;
        drop(it);
        self.db.write(batch).map_err(|e| self.rocks(e))?;
        Ok(rewritten)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::fingerprint::{ChunkId, ChunkKey};
    use crate::store::{Access, Format, TemplateMark, SCHEMA_VERSION};

    /// A whole chunk id for a key, as older versions keyed postings and
    /// template marks (the upgrades keep only its first 8 bytes).
    fn whole_id(key: ChunkKey) -> ChunkId {
        let mut id = [0xa5; 16];
        id[..8].copy_from_slice(&key.0.to_be_bytes());
        ChunkId(id)
    }

    /// Puts into `b` the format record an index of `version` has.
    fn says_version(s: &Store, b: &mut WriteBatch, version: u32) {
        let format = Format { schema_version: version, ..*s.format() };
        b.put_cf(s.cf(Meta::NAME), Meta::encode_key(&MetaKey::Format), Meta::encode_value(&MetaValue::Format(format)));
    }

    /// A writable copy of the golden version-4 index.
    fn golden_v4() -> tempfile::TempDir {
        golden(4)
    }

    /// A writable copy of a golden index.
    fn golden(version: u32) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/index-v{version}/db"));
        let db = tmp.path().join("db");
        std::fs::create_dir(&db).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), db.join(e.file_name())).unwrap();
        }
        tmp
    }

    /// Puts an upgraded index back where a crash part way through the
    /// upgrade would have left it: every `keep`-th content record back at
    /// value version 3 without its id mapping (a crash while numbering,
    /// when no posting is re-keyed yet), or, with `records` false, every
    /// `keep`-th posting back under its content hash (a crash while
    /// re-keying); the format record says 4 again.
    fn as_if_interrupted(s: &Store, records: bool, keep: usize) {
        let mut b = WriteBatch::default();
        let mut hashes: HashMap<ContentId, ContentHash> = HashMap::new();
        for (n, item) in s.scan::<ContentChunks>().enumerate() {
            let (hash, rec) = item.unwrap();
            hashes.insert(rec.id, hash);
            if records && n % keep == 0 {
                let mut v = vec![RECORD_V3];
                let runs: Vec<_> = rec.runs.iter().map(|r| (whole_id(r.key), r.len, r.count)).collect();
                v.extend(postcard::to_allocvec(&(rec.size, &runs, &GapCoded(rec.sketch.clone()))).unwrap());
                b.put_cf(s.cf(ContentChunks::NAME), hash.0, v);
                b.delete_cf(s.cf(ContentById::NAME), ContentById::encode_key(&rec.id));
            }
        }
        for (n, item) in s.scan::<ChunkContents>().enumerate() {
            let ((chunk, id), posting) = item.unwrap();
            if records || n % keep == 0 {
                b.delete_cf(s.cf(ChunkContents::NAME), ChunkContents::encode_key(&(chunk, id)));
                b.put_cf(
                    s.cf(ChunkContents::NAME),
                    [whole_id(chunk).0, hashes[&id].0].concat(),
                    ChunkContents::encode_value(&posting),
                );
            }
        }
        for (n, item) in s.scan::<SketchContents>().enumerate() {
            let ((sample, id), ()) = item.unwrap();
            if records || n % keep == 0 {
                b.delete_cf(s.cf(SketchContents::NAME), SketchContents::encode_key(&(sample, id)));
                let old = [&sample.to_be_bytes()[..], &hashes[&id].0].concat();
                b.put_cf(s.cf(SketchContents::NAME), old, SketchContents::encode_value(&()));
            }
        }
        says_version(s, &mut b, 4);
        s.db.write(b).unwrap();
    }

    #[test]
    fn an_upgrade_interrupted_at_any_step_carries_on_at_the_next_open() {
        for records in [true, false] {
            let tmp = golden_v4();
            let s = Store::open(tmp.path(), Access::Write, None).unwrap();
            assert_eq!(s.format().schema_version, SCHEMA_VERSION);
            let report = crate::check::check(&s).unwrap();
            assert!(report.is_consistent(), "{:?}", report.problems);
            let before = (report.contents, report.postings);
            as_if_interrupted(&s, records, 2);
            drop(s);

            // Readers are told to let a writer finish it.
            assert!(matches!(
                Store::open(tmp.path(), Access::Read, None),
                Err(StoreError::NeedsUpgrade { found: 4, expected: SCHEMA_VERSION, .. })
            ));
            let s = Store::open(tmp.path(), Access::Write, None).unwrap();
            assert_eq!(s.format().schema_version, SCHEMA_VERSION);
            let report = crate::check::check(&s).unwrap();
            assert!(report.is_consistent(), "records {records}: {:?}", report.problems);
            assert_eq!((report.contents, report.postings), before);
            // Nothing is left to do at the next open.
            let again = s.upgrade_to_content_ids().unwrap();
            assert_eq!((again.contents, again.postings), (0, 0));
        }
    }

    #[test]
    fn template_marks_keyed_by_the_whole_chunk_id_are_re_keyed() {
        let tmp = golden(7);
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        assert_eq!(s.format().schema_version, SCHEMA_VERSION);
        // Two marks as version 7 wrote them, and one already re-keyed (as a
        // crash part way through the upgrade leaves them); the format
        // record says 7 again.
        let mark = |cluster| Templates::encode_value(&TemplateMark::new(cluster, 1, 1000));
        let mut b = WriteBatch::default();
        let cf = s.cf(Templates::NAME);
        b.put_cf(cf, whole_id(ChunkKey(1)).0, mark(1));
        b.put_cf(cf, whole_id(ChunkKey(u64::MAX)).0, mark(2));
        b.put_cf(cf, Templates::encode_key(&ChunkKey(7)), mark(3));
        says_version(&s, &mut b, 7);
        s.db.write(b).unwrap();
        drop(s);

        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        assert_eq!(s.format().schema_version, SCHEMA_VERSION);
        let marks: Vec<(ChunkKey, u64)> =
            s.scan::<Templates>().map(|r| r.map(|(k, m)| (k, m.by[0].cluster))).collect::<Result<_>>().unwrap();
        assert_eq!(marks, [(ChunkKey(1), 1), (ChunkKey(7), 3), (ChunkKey(u64::MAX), 2)]);
        assert_eq!(s.upgrade_template_keys().unwrap(), 0, "nothing is left to re-key");
        assert!(crate::check::check(&s).unwrap().is_consistent());
    }

    #[test]
    fn a_chunk_key_upgrade_interrupted_part_way_carries_on_at_the_next_open() {
        let tmp = golden(6);
        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        assert_eq!(s.format().schema_version, SCHEMA_VERSION);
        let report = crate::check::check(&s).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        let before = (report.contents, report.postings);
        // Every other posting back under its version-6 key (the whole
        // chunk id), as a crash between two of the upgrade's batches
        // leaves them; the format record says 6 again.
        let mut b = WriteBatch::default();
        let mut reverted = 0;
        for (n, item) in s.scan::<ChunkContents>().enumerate() {
            let ((key, id), posting) = item.unwrap();
            if n % 2 == 0 {
                b.delete_cf(s.cf(ChunkContents::NAME), ChunkContents::encode_key(&(key, id)));
                let mut old = whole_id(key).0.to_vec();
                old.extend_from_slice(&ContentById::encode_key(&id));
                b.put_cf(s.cf(ChunkContents::NAME), old, ChunkContents::encode_value(&posting));
                reverted += 1;
            }
        }
        assert!(reverted > 10, "{reverted}");
        says_version(&s, &mut b, 6);
        s.db.write(b).unwrap();
        drop(s);

        let s = Store::open(tmp.path(), Access::Write, None).unwrap();
        assert_eq!(s.format().schema_version, SCHEMA_VERSION);
        let report = crate::check::check(&s).unwrap();
        assert!(report.is_consistent(), "{:?}", report.problems);
        assert_eq!((report.contents, report.postings), before);
        assert_eq!(s.upgrade_to_chunk_keys().unwrap(), 0, "nothing is left to re-key");
    }
}
