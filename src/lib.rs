//! simd keeps a live index of which files in a document repository are
//! identical, which are near-duplicates, and where moved or deleted files
//! went: files are cut into content-defined chunks (TTTD), each chunk is
//! hashed with MD5, and the file-chunk graph is kept in RocksDB.
//!
//! See `docs/ARCHITECTURE.md` for the map of modules and their invariants.

pub mod analysis;
pub mod check;
pub mod chunker;
pub mod cli;
pub mod control;
pub mod fingerprint;
pub mod ingest;
pub mod lost;
pub mod query;
pub mod report;
pub mod scan;
pub mod sketch;
pub mod status;
pub mod store;
pub mod watch;

/// A path's bytes for a human: UTF-8 as is; otherwise each byte that is not
/// valid UTF-8 (and each control character) as `\xNN`, so that nothing is lost
/// or silently replaced.
pub fn report_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn report_path_keeps_every_byte_visible() {
        assert_eq!(super::report_path(b"/a/b c.txt"), "/a/b c.txt");
        assert_eq!(super::report_path("/é/中".as_bytes()), "/é/中");
        assert_eq!(super::report_path(b"/a\xffb\nc"), "/a\\xffb\\x0ac");
    }
}
