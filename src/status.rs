//! `simd status`: what the index holds, counted exactly from the index.

use serde::Serialize;

use crate::chunker::ChunkParams;
use crate::fingerprint::{ChunkKey, ContentHash};
use crate::store::{ChunkContents, ContentNames, Files, History, Meta, MetaKey, MetaValue, Store, StoreError, TimeNs};

/// Figures for `simd status`.
#[derive(Debug, Serialize)]
pub struct Status {
    pub index: String,
    pub schema_version: u32,
    pub params: ChunkParams,
    pub roots: Vec<String>,
    /// Files (names) in the index.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Distinct contents with at least one name.
    pub contents: u64,
    /// Total size of the distinct contents.
    pub content_bytes: u64,
    /// Chunks in the distinct contents (repeats counted).
    pub chunks: u64,
    /// Distinct chunk ids among them.
    pub distinct_chunks: u64,
    /// Lost-and-found records.
    pub history: u64,
    /// The index on disk (RocksDB, without the report cache and the
    /// write-ahead log kept for reports).
    pub disk_bytes: u64,
    /// The write-ahead log files' part of `disk_bytes`: changes not yet in
    /// table files (a daemon flushes them after an idle second, or every
    /// 30 s of steady changes), and a flushed log RocksDB had not deleted
    /// yet when its writer closed (a few KB after a `simd index`, deleted
    /// by the next writer).
    pub wal_bytes: u64,
    /// Write-ahead log files kept after their flush, for reports to read
    /// which file records changed since their cached analysis (~2–3
    /// minutes of it, 16 MB when RocksDB last checked); not part of
    /// `disk_bytes`.
    pub wal_archive_bytes: u64,
    /// Table files by column family, largest first.
    pub tables: Vec<TableSize>,
    /// The cached last analysis, if any.
    pub cache_bytes: u64,
    pub created: TimeNs,
    pub last_update: Option<TimeNs>,
    /// The daemon holding the index, if one runs.
    pub daemon: Option<crate::watch::DaemonState>,
    /// Whether that daemon's process is stopped (SIGSTOP, Ctrl-Z, a
    /// debugger): it keeps nothing current and answers no request until
    /// it is continued.
    pub daemon_stopped: bool,
    /// Else the process writing to the index, if one does (a `simd index`
    /// run): its pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_pid: Option<u32>,
}

/// One column family's table files on disk.
#[derive(Debug, Serialize)]
pub struct TableSize {
    pub name: &'static str,
    pub bytes: u64,
    /// How many table files hold them.
    pub files: usize,
}

pub fn status(store: &Store) -> Result<Status, StoreError> {
    // Three tables scanned side by side: the names (with a point read per
    // content) and the postings on threads of their own, the files here.
    // `simd status` on a 47.7k-file index, two cores: 286 → 201 ms (its
    // CPU time 257 → 333 ms, not looked into).
    let (files, contents, distinct_chunks) = std::thread::scope(|s| {
        let contents = s.spawn(|| count_contents(store));
        let chunks = s.spawn(|| count_distinct_chunks(store));
        let files = count_files(store);
        (
            files,
            contents.join().expect("counting contents does not panic"),
            chunks.join().expect("counting chunks does not panic"),
        )
    });
    let ((files, bytes), (contents, content_bytes, chunks), distinct_chunks) = (files?, contents?, distinct_chunks?);
    let history = store.scan::<History>().count() as u64;
    let roots = store.roots()?.iter().map(|r| crate::report_path(r)).collect();
    let last_update = match store.get::<Meta>(&MetaKey::LastUpdate)? {
        Some(MetaValue::LastUpdate(t)) => Some(t),
        _ => None,
    };
    let format = store.format();
    Ok(Status {
        index: crate::show_path(store.dir()),
        schema_version: format.schema_version,
        params: format.params,
        roots,
        files,
        bytes,
        contents,
        content_bytes,
        chunks,
        distinct_chunks,
        history,
        disk_bytes: store.disk_size(),
        wal_bytes: store.wal_size(),
        wal_archive_bytes: store.wal_archive_size(),
        tables: store.table_sizes()?.into_iter().map(|(name, bytes, files)| TableSize { name, bytes, files }).collect(),
        cache_bytes: crate::analysis::cache::size(store),
        created: format.created,
        last_update,
        daemon: None,
        daemon_stopped: false,
        writer_pid: None,
    })
}

/// Files in the index and their total size.
fn count_files(store: &Store) -> Result<(u64, u64), StoreError> {
    let (mut files, mut bytes) = (0, 0);
    for item in store.scan::<Files>() {
        let (_, rec) = item?;
        files += 1;
        bytes += rec.size;
    }
    Ok((files, bytes))
}

/// Contents with a name, their total size and their chunks.
fn count_contents(store: &Store) -> Result<(u64, u64, u64), StoreError> {
    let (mut contents, mut content_bytes, mut chunks) = (0, 0, 0);
    let mut last: Option<ContentHash> = None;
    // Names and records are both in content order: merged, each record
    // is read once, in order, where a point read per content was most of
    // a status on 400k files (2.4–4.2 s). Records are read without their
    // whole sketch, whose decoding was ~30 % of a status.
    let mut records = store.scan_postings();
    let mut record = records.next().transpose()?;
    for item in store.scan::<ContentNames>() {
        let ((content, _), ()) = item?;
        if last == Some(content) {
            continue;
        }
        last = Some(content);
        while record.as_ref().is_some_and(|(c, _)| *c < content) {
            record = records.next().transpose()?;
        }
        match &record {
            Some((c, rec)) if *c == content => {
                contents += 1;
                content_bytes += rec.size;
                chunks += rec.chunk_count();
            }
            _ => {}
        }
    }
    Ok((contents, content_bytes, chunks))
}

/// Distinct chunk ids among the postings.
fn count_distinct_chunks(store: &Store) -> Result<u64, StoreError> {
    let mut distinct = 0;
    let mut last: Option<ChunkKey> = None;
    for item in store.scan::<ChunkContents>() {
        let ((chunk, _), _) = item?;
        if last != Some(chunk) {
            distinct += 1;
            last = Some(chunk);
        }
    }
    Ok(distinct)
}
