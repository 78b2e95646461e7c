//! Word-shingle sketches: the second feature of a content, beside its chunks.
//!
//! A chunk is shared only when a whole run of ~1 KB survives unchanged, so
//! two versions of a document with edits scattered every few hundred bytes
//! share no chunk at all while most of their text is the same. Broder's
//! shingles survive such edits: a content is the SET of its runs of
//! [`WORDS`] consecutive words (split on ASCII whitespace), and resemblance
//! and containment are measured on those sets (Broder 1997, §2).
//!
//! Keeping every shingle would cost more than the file, so a sketch keeps a
//! sample (Broder's MOD_m sketch, made adaptive): each shingle hashes to a
//! 32-bit sample whose *level* is its number of leading zero bits, and a
//! content keeps every sample of level ≥ L, with L the smallest level that
//! leaves at most [`MAX_SAMPLES`] (so between about K and 2K for any content
//! of more than K distinct shingles, and all of them for a smaller one). Two
//! contents are compared on the samples of level ≥ max(L_A, L_B), a uniform
//! sample of both sets at the same rate, so the sample's resemblance and
//! containment estimate the real ones without bias.
//!
//! The sketch is built in the same single read as the chunks, in bounded
//! memory (at most 2K+1 samples are held, whatever the file's size), and the
//! result depends only on the set of shingles, not on how the bytes arrived.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// Words per shingle (Broder used 10 on web pages; 4 suits short documents).
pub const WORDS: usize = 4;

/// At most this many samples per content: the level rises until they fit.
/// 512 (K = 256) keeps the estimates within a few hundredths near the
/// thresholds; measured in `docs/accuracy.md`.
pub const MAX_SAMPLES: usize = 512;

/// Samples [`POST_SHIFT`] levels above a content's own are posted in the
/// `sketch_contents` index (1/8 of its samples), to find candidates; the
/// whole sketch is kept with the content to measure them.
pub const POST_SHIFT: u8 = 3;

/// A content's sample of its shingle set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sketch {
    /// Every sample of level ≥ `level` is kept.
    pub level: u8,
    /// Sorted, distinct.
    pub samples: Vec<u32>,
}

/// A sample's level: how many leading zero bits it has.
pub fn level_of(sample: u32) -> u8 {
    sample.leading_zeros() as u8
}

impl Sketch {
    /// Samples of level ≥ `level`: a prefix of the sorted list, since a
    /// higher level is a smaller number.
    fn at(&self, level: u8) -> &[u32] {
        if level == 0 {
            return &self.samples;
        }
        if level >= 32 {
            let n = self.samples.partition_point(|&s| s == 0);
            return &self.samples[..n];
        }
        let bound = 1u32 << (32 - u32::from(level));
        let n = self.samples.partition_point(|&s| s < bound);
        &self.samples[..n]
    }

    /// The samples posted in the index to find candidates.
    pub fn posted(&self) -> &[u32] {
        self.at(self.level.saturating_add(POST_SHIFT))
    }

    /// The sketch without some samples (a template's): still a uniform
    /// sample, of the shingle set without the template's shingles.
    pub fn without(&self, ignored: &std::collections::HashSet<u32>) -> Sketch {
        if ignored.is_empty() {
            return self.clone();
        }
        Sketch { level: self.level, samples: self.samples.iter().copied().filter(|s| !ignored.contains(s)).collect() }
    }

    /// Whether the content had any word at all.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Resemblance and containment of the two shingle sets, estimated on
    /// their common sample.
    pub fn estimate(&self, other: &Sketch) -> Estimate {
        let level = self.level.max(other.level);
        let (a, b) = (self.at(level), other.at(level));
        let shared = sorted_intersection(a, b);
        let ratio = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        Estimate {
            resemblance: ratio(shared, a.len() + b.len() - shared),
            a_in_b: ratio(shared, a.len()),
            b_in_a: ratio(shared, b.len()),
            shared: shared as u32,
            samples: (a.len() + b.len() - shared) as u32,
        }
    }
}

fn sorted_intersection(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Word-shingle resemblance and containment, estimated from two sketches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub resemblance: f64,
    pub a_in_b: f64,
    pub b_in_a: f64,
    /// Samples in common, and in the union, at the level compared.
    pub shared: u32,
    pub samples: u32,
}

impl Estimate {
    pub fn containment(&self) -> f64 {
        self.a_in_b.max(self.b_in_a)
    }
}

// Stored as the level and the gaps between sorted samples: gaps are small
// numbers for a full sketch, so postcard's varints take about 2–3 bytes a
// sample instead of 4.
impl Serialize for Sketch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut prev = 0u32;
        let gaps: Vec<u32> = self
            .samples
            .iter()
            .map(|&x| {
                let g = x - prev;
                prev = x;
                g
            })
            .collect();
        (self.level, gaps).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sketch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (level, gaps): (u8, Vec<u32>) = Deserialize::deserialize(d)?;
        let mut samples = Vec::with_capacity(gaps.len());
        let mut prev = 0u32;
        for (i, g) in gaps.into_iter().enumerate() {
            if i > 0 && g == 0 {
                return Err(serde::de::Error::custom("sketch samples are not distinct"));
            }
            prev = prev.checked_add(g).ok_or_else(|| serde::de::Error::custom("sketch sample overflow"))?;
            samples.push(prev);
        }
        Ok(Sketch { level, samples })
    }
}

/// ASCII whitespace as Python's `bytes.split()` sees it (with vertical tab,
/// which Rust's `is_ascii_whitespace` leaves out).
const fn space_table() -> [bool; 256] {
    let mut t = [false; 256];
    t[b' ' as usize] = true;
    t[b'\t' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[0x0b] = true;
    t[0x0c] = true;
    t
}
static SPACE: [bool; 256] = space_table();

const M: u64 = 0x9e37_79b9_7f4a_7c15;

/// The splitmix64 finaliser: every input bit reaches every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Builds a sketch from a stream of bytes, fed in pieces of any size.
pub struct Shingler {
    /// The word being read: its hash over whole 8-byte blocks, the pending
    /// bytes of the last block, and its length.
    word: u64,
    block: u64,
    pending: u32,
    word_len: u64,
    in_word: bool,
    /// The last `WORDS` word hashes, oldest first once full.
    window: [u64; WORDS],
    words: u64,
    level: u8,
    kept: HashSet<u32>,
}

impl Default for Shingler {
    fn default() -> Self {
        Self::new()
    }
}

impl Shingler {
    pub fn new() -> Shingler {
        Shingler {
            word: 0,
            block: 0,
            pending: 0,
            word_len: 0,
            in_word: false,
            window: [0; WORDS],
            words: 0,
            level: 0,
            kept: HashSet::new(),
        }
    }

    /// Feeds the next bytes of the content.
    pub fn feed(&mut self, data: &[u8]) {
        for &b in data {
            if SPACE[b as usize] {
                if self.in_word {
                    self.end_word();
                }
            } else {
                self.in_word = true;
                self.block |= u64::from(b) << (8 * self.pending);
                self.pending += 1;
                self.word_len += 1;
                if self.pending == 8 {
                    self.word = (self.word ^ self.block).wrapping_mul(M).rotate_left(29);
                    self.block = 0;
                    self.pending = 0;
                }
            }
        }
    }

    fn end_word(&mut self) {
        let h = mix((self.word ^ self.block).wrapping_mul(M) ^ self.word_len);
        self.word = 0;
        self.block = 0;
        self.pending = 0;
        self.word_len = 0;
        self.in_word = false;
        self.window.copy_within(1.., 0);
        self.window[WORDS - 1] = h;
        self.words += 1;
        if self.words >= WORDS as u64 {
            let s = shingle_sample(&self.window);
            self.offer(s);
        }
    }

    fn offer(&mut self, sample: u32) {
        if level_of(sample) < self.level || !self.kept.insert(sample) {
            return;
        }
        while self.kept.len() > MAX_SAMPLES {
            self.level += 1;
            let level = self.level;
            self.kept.retain(|&s| level_of(s) >= level);
        }
    }

    /// The sketch of everything fed.
    pub fn finish(mut self) -> Sketch {
        if self.in_word {
            self.end_word();
        }
        // A content of 1..WORDS-1 words has its whole word sequence as its
        // one shingle (as the reference scorer does).
        if self.words > 0 && self.words < WORDS as u64 {
            let n = self.words as usize;
            let mut seq = [0u64; WORDS];
            seq[..n].copy_from_slice(&self.window[WORDS - n..]);
            let s = shingle_sample(&seq[..n]);
            self.offer(s);
        }
        let mut samples: Vec<u32> = self.kept.into_iter().collect();
        samples.sort_unstable();
        Sketch { level: self.level, samples }
    }
}

/// The sample of one shingle (a sequence of word hashes): the top 32 bits
/// of an order-dependent mix.
fn shingle_sample(words: &[u64]) -> u32 {
    let mut h = words.len() as u64;
    for &w in words {
        h = (h ^ w).wrapping_mul(M).rotate_left(27);
    }
    (mix(h) >> 32) as u32
}

/// The sketch of an in-memory content.
pub fn sketch_bytes(data: &[u8]) -> Sketch {
    let mut s = Shingler::new();
    s.feed(data);
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(n: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = seed;
        for _ in 0..n {
            x = mix(x.wrapping_add(M));
            out.extend_from_slice(format!("w{} ", x % 5000).as_bytes());
        }
        out
    }

    #[test]
    fn identical_text_resembles_fully_and_whitespace_does_not_matter() {
        let a = sketch_bytes(b"the quick brown fox jumps over the lazy dog");
        let b = sketch_bytes(b"  the quick\tbrown\n\nfox jumps over\r\nthe lazy dog\n");
        assert_eq!(a, b);
        assert_eq!(a.samples.len(), 6);
        let e = a.estimate(&b);
        assert_eq!((e.resemblance, e.a_in_b, e.b_in_a), (1.0, 1.0, 1.0));
    }

    #[test]
    fn small_contents_are_measured_exactly() {
        // 9 words: 6 shingles; changing the last word changes the last 4.
        let a = sketch_bytes(b"a b c d e f g h i");
        let b = sketch_bytes(b"a b c d e f g h X");
        let e = a.estimate(&b);
        assert_eq!(e.shared, 5);
        assert!((e.resemblance - 5.0 / 7.0).abs() < 1e-12);
        // Fewer than WORDS words make one shingle of the whole sequence.
        assert_eq!(sketch_bytes(b"one two").samples.len(), 1);
        assert_ne!(sketch_bytes(b"one two"), sketch_bytes(b"two one"));
        assert!(sketch_bytes(b" \n\t").is_empty());
    }

    #[test]
    fn scattered_edits_keep_a_high_estimate_on_a_large_content() {
        let a = words(20_000, 1);
        // Change one word in 60: about 1 shingle in 15 changes per edit window.
        let mut b = a.clone();
        let mut k = 0;
        for i in 0..b.len() {
            if b[i] == b' ' {
                k += 1;
                if k % 60 == 0 {
                    b[i - 1] = b'#';
                }
            }
        }
        let (sa, sb) = (sketch_bytes(&a), sketch_bytes(&b));
        assert!(sa.samples.len() <= MAX_SAMPLES && sa.samples.len() > MAX_SAMPLES / 4, "{}", sa.samples.len());
        assert!(sa.level > 0);
        let e = sa.estimate(&sb);
        // Exact: 4 of every 60 shingles differ, r = 56/64 = 0.875.
        assert!((e.resemblance - 0.875).abs() < 0.06, "{e:?}");
    }

    #[test]
    fn containment_of_a_part() {
        let a = words(3000, 7);
        let part = &a[..a.len() / 3];
        let e = sketch_bytes(part).estimate(&sketch_bytes(&a));
        assert!(e.a_in_b > 0.9, "{e:?}");
        assert!((e.b_in_a - 1.0 / 3.0).abs() < 0.1, "{e:?}");
    }

    #[test]
    fn round_trips_through_postcard() {
        let s = sketch_bytes(&words(5000, 3));
        let bytes = postcard::to_stdvec(&s).unwrap();
        assert!(bytes.len() < 4 * s.samples.len(), "gaps are varints: {} bytes", bytes.len());
        assert_eq!(postcard::from_bytes::<Sketch>(&bytes).unwrap(), s);
        assert!(postcard::from_bytes::<Sketch>(&[0, 2, 5, 0]).is_err(), "repeated sample");
    }

    #[test]
    fn posted_samples_are_the_highest_levels() {
        let s = sketch_bytes(&words(50_000, 5));
        let posted = s.posted();
        assert!(!posted.is_empty() && posted.len() < s.samples.len() / 4);
        assert!(posted.iter().all(|&x| level_of(x) >= s.level + POST_SHIFT));
        assert_eq!(s.samples.iter().filter(|&&x| level_of(x) >= s.level + POST_SHIFT).count(), posted.len());
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_sketch(data in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\n'), 97u8..100, any::<u8>()], 0..3000), cuts in proptest::collection::vec(0usize..3000, 0..8)) {
            let whole = sketch_bytes(&data);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let mut s = Shingler::new();
            let mut at = 0;
            for c in cuts {
                s.feed(&data[at..c]);
                at = c;
            }
            s.feed(&data[at..]);
            prop_assert_eq!(s.finish(), whole);
        }

        #[test]
        fn the_sketch_is_bounded_and_its_level_minimal(n in 0usize..6000, seed in any::<u64>()) {
            let s = sketch_bytes(&words(n, seed));
            prop_assert!(s.samples.len() <= MAX_SAMPLES);
            prop_assert!(s.samples.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(s.samples.iter().all(|&x| level_of(x) >= s.level));
        }
    }
}
