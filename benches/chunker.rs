//! Chunker throughput on random and on text data (target ≥ 1 GB/s per core),
//! and the full fingerprint (TTTD + MD5 per chunk + content hash) beside it,
//! with plain MD5 over the same bytes as the baseline measured in the same run,
//! and the word-shingle sketch (in one large file and in 4 and 32 KB files, and
//! with `SIMD_BENCH_TREE=DIR` in the files of a real tree); and the sketch's
//! stored form, Rice-coded, beside the varint gaps it replaced; and 32 KB
//! files grown by a line, cut at their prior contents' cuts beside cut by
//! TTTD alone.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use md5::{Digest, Md5};
use simd::chunker::{chunk_lengths, ChunkParams};
use simd::fingerprint::{fingerprint_bytes, fingerprint_many, ContentHash, Lookup, Prior, PriorRecord};
use simd::sketch::segments::{sketch_edited, sketch_tagged, SEGMENTS, TAG_FROM};
use simd::sketch::{sketch_bytes, GapCoded};

const SIZE: usize = 16 << 20;

fn random(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// English-like text: words from a small vocabulary, spaces and newlines.
fn text(len: usize) -> Vec<u8> {
    const WORDS: [&str; 24] = [
        "the",
        "index",
        "of",
        "a",
        "repository",
        "chunk",
        "similar",
        "documents",
        "and",
        "files",
        "is",
        "version",
        "support",
        "copy",
        "to",
        "in",
        "that",
        "for",
        "report",
        "template",
        "cluster",
        "moved",
        "deleted",
        "found",
    ];
    let r = random(len / 3);
    let mut out = Vec::with_capacity(len + 16);
    let mut i = 0;
    while out.len() < len {
        out.extend_from_slice(WORDS[r[i % r.len()] as usize % WORDS.len()].as_bytes());
        out.push(if i % 11 == 10 { b'\n' } else { b' ' });
        i += 1;
    }
    out.truncate(len);
    out
}

/// The contents of the regular files under `dir`, in path order, up to
/// `budget` bytes.
fn tree_files(dir: &std::path::Path, budget: usize) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("a readable directory").flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => dirs.push(e.path()),
                Ok(t) if t.is_file() => paths.push(e.path()),
                _ => {}
            }
        }
    }
    paths.sort();
    let mut total = 0;
    let mut out = Vec::new();
    for p in paths {
        if total >= budget {
            break;
        }
        if let Ok(data) = std::fs::read(&p) {
            total += data.len();
            out.push(data);
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let params = ChunkParams::default();
    let mut g = c.benchmark_group("chunker");
    g.throughput(Throughput::Bytes(SIZE as u64));
    g.sample_size(20);
    for (name, data) in [("random", random(SIZE)), ("text", text(SIZE))] {
        g.bench_with_input(BenchmarkId::new("tttd", name), &data, |b, d| b.iter(|| chunk_lengths(d, &params)));
        g.bench_with_input(BenchmarkId::new("tttd+md5", name), &data, |b, d| b.iter(|| fingerprint_bytes(d, &params)));
        g.bench_with_input(BenchmarkId::new("md5-baseline", name), &data, |b, d| b.iter(|| Md5::digest(d)));
        g.bench_with_input(BenchmarkId::new("sketch", name), &data, |b, d| b.iter(|| sketch_bytes(d)));
        // Most files of a document tree are small: every shingle is kept.
        g.bench_with_input(BenchmarkId::new("sketch-4k-files", name), &data, |b, d| {
            b.iter(|| d.chunks(4096).map(|f| sketch_bytes(f).samples.len()).sum::<usize>())
        });
        // The generated corpus's contents average ~27 KB: more shingles than
        // a sketch keeps, so its level is found by sorting them.
        g.bench_with_input(BenchmarkId::new("sketch-32k-files", name), &data, |b, d| {
            b.iter(|| d.chunks(32 << 10).map(|f| sketch_bytes(f).samples.len()).sum::<usize>())
        });
        // The same with where each sample lies among eight segments
        // (`sketch::segments`, for edits in the middle).
        g.bench_with_input(BenchmarkId::new("sketch-tagged-32k-files", name), &data, |b, d| {
            b.iter(|| {
                d.chunks(32 << 10).map(|f| sketch_tagged(f, SEGMENTS).map_or(0, |s| s.0.samples.len())).sum::<usize>()
            })
        });
    }
    g.finish();

    // A line inserted in the middle of each of 16 MiB of text files, of
    // 32 KB and of 256 KB: the new content sketched from its bytes, against
    // from its earlier sketch and tags (`sketch::segments::sketch_edited`;
    // those it must sketch whole are, in both).
    let line = b"\n# a line inserted in the middle\n";
    for (name, size) in [("edited-32k-files", 32usize << 10), ("edited-256k-files", 256 << 10)] {
        let edits: Vec<(Vec<u8>, Vec<u8>, _)> = text(16 << 20)
            .chunks(size)
            .map(|f| {
                let at = f.len() / 2;
                let new = [&f[..at], &line[..], &f[at..]].concat();
                (f.to_vec(), new, sketch_tagged(f, SEGMENTS).expect("words"))
            })
            .collect();
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(edits.iter().map(|e| e.1.len() as u64).sum()));
        g.sample_size(20);
        g.bench_function("sketch-baseline", |b| {
            b.iter(|| edits.iter().map(|e| sketch_bytes(&e.1).samples.len()).sum::<usize>())
        });
        g.bench_function("sketch-edited", |b| {
            b.iter(|| {
                edits
                    .iter()
                    .map(|(old, new, (sketch, tags))| {
                        let at = old.len() / 2;
                        match sketch_edited(sketch, tags, old.len(), new, at, at) {
                            Ok((s, _)) => s.samples.len(),
                            Err(_) => sketch_bytes(new).samples.len(),
                        }
                    })
                    .sum::<usize>()
            })
        });
        g.finish();
    }

    // The sketch of the files of a real tree, each whole as a reader
    // sketches it: SIMD_BENCH_TREE=DIR (its first 128 MB of files, sorted
    // by path); nothing runs without it.
    if let Ok(dir) = std::env::var("SIMD_BENCH_TREE") {
        let files = tree_files(std::path::Path::new(&dir), 128 << 20);
        let mut g = c.benchmark_group("sketch-tree");
        g.throughput(Throughput::Bytes(files.iter().map(|f| f.len() as u64).sum()));
        g.sample_size(10);
        g.bench_with_input(BenchmarkId::new("sketch", &dir), &files, |b, fs| {
            b.iter(|| fs.iter().map(|f| sketch_bytes(f).samples.len()).sum::<usize>())
        });
        // The same sketches with where each sample lies among eight
        // segments (`sketch::segments`, for edits in the middle): one
        // shingler fed the segments in turn, and one per segment.
        g.bench_with_input(BenchmarkId::new("sketch-tagged", &dir), &files, |b, fs| {
            b.iter(|| fs.iter().map(|f| sketch_tagged(f, SEGMENTS).map_or(0, |s| s.0.samples.len())).sum::<usize>())
        });
        // Tags only for contents of at least TAG_FROM bytes.
        g.bench_with_input(BenchmarkId::new("sketch-tagged-from-16k", &dir), &files, |b, fs| {
            b.iter(|| {
                fs.iter()
                    .map(|f| match f.len() >= TAG_FROM {
                        true => sketch_tagged(f, SEGMENTS).map_or(0, |s| s.0.samples.len()),
                        false => sketch_bytes(f).samples.len(),
                    })
                    .sum::<usize>()
            })
        });
        g.finish();
    }

    // A burst of appends: 32 KB text files, each its prior content and a
    // line, read and fingerprinted in batches of 16 as the daemon's readers
    // do. The
    // index holds no sketch of theirs to go on from (`known` says yes, so
    // none is made either way): what differs is where the cuts come from.
    let files: Vec<Vec<u8>> = text(256 << 15).chunks(32 << 10).map(|f| [f, b"\n# one more line\n"].concat()).collect();
    let records: std::collections::HashMap<ContentHash, PriorRecord> = files
        .iter()
        .map(|f| {
            let fp = fingerprint_bytes(&f[..32 << 10], &params);
            (fp.content, PriorRecord { runs: fp.runs, sketch: Vec::new() })
        })
        .collect();
    let priors: Vec<Option<Prior>> = files
        .iter()
        .map(|f| Some(Prior { content: fingerprint_bytes(&f[..32 << 10], &params).content, size: 32 << 10 }))
        .collect();
    let prior_of = |c: &ContentHash| records.get(c).cloned();
    let mut g = c.benchmark_group("grown-32k-files");
    g.throughput(Throughput::Bytes(files.iter().map(|f| f.len() as u64).sum()));
    g.sample_size(20);
    for (name, priors) in [("cut-by-tttd-baseline", vec![None; files.len()]), ("cut-at-prior-cuts", priors)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let lookup = Lookup { known: &|_| true, prior: &prior_of };
                files
                    .chunks(16)
                    .zip(priors.chunks(16))
                    .map(|(fs, ps)| {
                        // Copied first, as a reader reads a batch into its
                        // buffer: the bytes are then in the cache, which a
                        // cut check that reads 32 bytes a chunk relies on.
                        let read: Vec<Vec<u8>> = fs.to_vec();
                        let slices: Vec<&[u8]> = read.iter().map(Vec::as_slice).collect();
                        fingerprint_many(&slices, ps, &params, lookup).len()
                    })
                    .sum::<usize>()
            })
        });
    }
    g.finish();

    // Encoding happens once per new content (on the daemon's writer
    // thread), decoding once per content a report or query reads.
    let mut g = c.benchmark_group("sketch-codec");
    for (name, sketch) in [("full", sketch_bytes(&text(1 << 20))), ("4k-file", sketch_bytes(&text(4096)))] {
        g.throughput(Throughput::Elements(sketch.samples.len() as u64));
        let rice = postcard::to_stdvec(&sketch).unwrap();
        let gaps = postcard::to_stdvec(&GapCoded(sketch.clone())).unwrap();
        g.bench_with_input(BenchmarkId::new("rice-encode", name), &sketch, |b, s| {
            b.iter(|| postcard::to_stdvec(s).unwrap().len())
        });
        g.bench_with_input(BenchmarkId::new("varint-encode-baseline", name), &sketch, |b, s| {
            b.iter(|| postcard::to_stdvec(&GapCoded(s.clone())).unwrap().len())
        });
        g.bench_with_input(BenchmarkId::new("rice-decode", name), &rice, |b, bytes| {
            b.iter(|| postcard::from_bytes::<simd::sketch::Sketch>(bytes).unwrap().samples.len())
        });
        g.bench_with_input(BenchmarkId::new("varint-decode-baseline", name), &gaps, |b, bytes| {
            b.iter(|| postcard::from_bytes::<GapCoded>(bytes).unwrap().0.samples.len())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
