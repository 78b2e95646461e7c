//! Fingerprints: the MD5 of every chunk, from one streaming read, and the
//! content hash derived from them.
//!
//! The content hash is MD5 over the file's sequence of (chunk id, length),
//! as Forman et al. do: it identifies a file by content alone while every
//! byte is hashed exactly once. Memory is one fixed read buffer plus the
//! chunk list, which is run-length encoded so that long runs of one chunk
//! (sparse or zero-filled files) cost one entry.

use std::io::{self, Read};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::chunker::{find_cut, ChunkParams};

/// MD5 of a chunk's bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkId(pub [u8; 16]);

/// MD5 over a file's sequence of (chunk id, chunk length): identifies content.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ContentHash(pub [u8; 16]);

macro_rules! hex_debug {
    ($t:ty) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                for b in self.0 {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    };
}
hex_debug!(ChunkId);
hex_debug!(ContentHash);

/// `count` consecutive occurrences of one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRun {
    pub id: ChunkId,
    pub len: u32,
    pub count: u32,
}

/// What one read of a file yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub content: ContentHash,
    pub size: u64,
    /// The file's chunks in order, consecutive repeats merged.
    pub runs: Vec<ChunkRun>,
}

impl Fingerprint {
    /// Number of chunks, repeats counted.
    pub fn chunk_count(&self) -> u64 {
        self.runs.iter().map(|r| u64::from(r.count)).sum()
    }
}

/// Builds a [`Fingerprint`] chunk by chunk.
struct Builder {
    content: Md5,
    size: u64,
    runs: Vec<ChunkRun>,
}

impl Builder {
    fn new() -> Self {
        Builder { content: Md5::new(), size: 0, runs: Vec::new() }
    }

    fn push(&mut self, chunk: &[u8]) {
        let id = ChunkId(Md5::digest(chunk).into());
        let len = chunk.len() as u32;
        self.content.update(id.0);
        self.content.update(len.to_be_bytes());
        self.size += chunk.len() as u64;
        match self.runs.last_mut() {
            Some(last) if last.id == id && last.len == len && last.count < u32::MAX => last.count += 1,
            _ => self.runs.push(ChunkRun { id, len, count: 1 }),
        }
    }

    fn finish(self) -> Fingerprint {
        Fingerprint { content: ContentHash(self.content.finalize().into()), size: self.size, runs: self.runs }
    }
}

/// The read buffer size: large enough that the undecided tail (< Tmax) that
/// is moved to the front after each refill is a small fraction of it.
pub const READ_BUF: usize = 1 << 20;

/// Fingerprints an in-memory input.
pub fn fingerprint_bytes(data: &[u8], params: &ChunkParams) -> Fingerprint {
    let mut b = Builder::new();
    let mut rest = data;
    while let Some(cut) = find_cut(rest, params, true) {
        b.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    b.finish()
}

/// Fingerprints a stream with one fixed [`READ_BUF`] buffer, reading it
/// exactly once. `buf` is reused between calls.
pub fn fingerprint_reader<R: Read>(reader: R, params: &ChunkParams, buf: &mut Vec<u8>) -> io::Result<Fingerprint> {
    fingerprint_reader_sized(reader, params, buf, READ_BUF)
}

/// [`fingerprint_reader`] with a given buffer size (at least two maximal
/// chunks, so that every refill makes progress).
fn fingerprint_reader_sized<R: Read>(
    mut reader: R,
    params: &ChunkParams,
    buf: &mut Vec<u8>,
    size: usize,
) -> io::Result<Fingerprint> {
    let cap = size.max(2 * params.max as usize);
    buf.clear();
    buf.resize(cap, 0);
    let mut b = Builder::new();
    let mut filled = 0usize;
    let mut eof = false;
    loop {
        while !eof && filled < buf.len() {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => eof = true,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut start = 0;
        while let Some(cut) = find_cut(&buf[start..filled], params, eof) {
            b.push(&buf[start..start + cut]);
            start += cut;
        }
        if eof {
            break;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A reader that hands out at most `step` bytes per call.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn empty_input_has_the_md5_of_nothing() {
        let f = fingerprint_bytes(b"", &ChunkParams::default());
        assert_eq!(f.size, 0);
        assert!(f.runs.is_empty());
        assert_eq!(f.content.to_string(), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn zero_filled_input_collapses_to_one_run() {
        let p = ChunkParams::default();
        let data = vec![0u8; 1 << 20];
        let f = fingerprint_bytes(&data, &p);
        assert!(f.runs.len() <= 2, "{} runs", f.runs.len());
        assert_eq!(f.size, data.len() as u64);
        let total: u64 = f.runs.iter().map(|r| u64::from(r.len) * u64::from(r.count)).sum();
        assert_eq!(total, data.len() as u64);
    }

    #[test]
    fn content_hash_depends_on_content_only() {
        let p = ChunkParams::default();
        let a: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut b = a.clone();
        assert_eq!(fingerprint_bytes(&a, &p).content, fingerprint_bytes(&b, &p).content);
        b[25_000] ^= 1;
        assert_ne!(fingerprint_bytes(&a, &p).content, fingerprint_bytes(&b, &p).content);
    }

    proptest! {
        #[test]
        fn reader_equals_bytes(
            data in proptest::collection::vec(any::<u8>(), 0..30_000),
            step in 1usize..5000,
            size in 0usize..4000,
        ) {
            let p = ChunkParams::for_average(128).unwrap();
            let mut buf = Vec::new();
            let streamed = fingerprint_reader_sized(Trickle { data: &data, step }, &p, &mut buf, size).unwrap();
            prop_assert_eq!(streamed, fingerprint_bytes(&data, &p));
        }
    }
}
