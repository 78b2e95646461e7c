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
//! 32-bit sample (rounded to [`SAMPLE_BITS`] bits after its leading one bit,
//! so that it stores small) whose *level* is its number of leading zero bits, and a
//! content keeps every sample of level ≥ L, with L the smallest level that
//! leaves at most [`MAX_SAMPLES`] (so between about K and 2K for any content
//! of more than [`EXACT_UP_TO`] distinct shingles, K = [`MAX_SAMPLES`]/2,
//! and all of them for a smaller one). Two
//! contents are compared on the samples of level ≥ max(L_A, L_B), a uniform
//! sample of both sets at the same rate, so the sample's resemblance and
//! containment estimate the real ones without bias.
//!
//! The sketch is built in the same single read as the chunks, in bounded
//! memory (at most 4 × [`EXACT_UP_TO`] samples and a batch are held, whatever the file's
//! size), and the result depends only on the set of shingles, not on how the
//! bytes arrived.

use fearless_simd::{dispatch, u8x32, Level, Simd, SimdBase};
#[cfg(target_arch = "x86_64")]
use fearless_simd::{u32x16, u64x8, u8x64, Avx512, SimdInto};
use serde::{Deserialize, Serialize};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

pub mod segments;

/// Words per shingle (Broder used 10 on web pages; 4 suits short documents).
pub const WORDS: usize = 4;

/// At most this many samples per content of more than [`EXACT_UP_TO`]
/// shingles: the level rises until they fit. A small file inside a large
/// one is compared at the large one's level, where it keeps few samples:
/// 512 → 1,024 took the generated corpus's F1 from 0.906–0.958 to
/// 0.941–0.974 over six seeds, and 1,536 (with [`EXACT_UP_TO`]) to
/// 0.956–0.978 (`docs/accuracy.md`). 2,048 gave 0.961–0.979 for 0.3 % more
/// of the file bytes, over the index's 6 % budget.
pub const MAX_SAMPLES: usize = 1536;

/// A content of at most this many distinct shingles keeps them all (level
/// 0), so that two such contents are compared exactly: a page of a few KB
/// holding a template is then measured exactly against the 10 KB pages
/// that hold the same one.
pub const EXACT_UP_TO: usize = 2048;

/// Two sketches that both keep more samples than this at the level they
/// are compared at are compared at a coarser level ([`Sketch::estimate`]).
pub const FULL_COMPARE: usize = 512;

/// An estimate from fewer samples than this (at a level above 0, where it
/// is a sample) does not decide a link: with n samples a containment of 0.8
/// is known to about ± 0.4/√n, so 5 samples could mean anything from 0.6 to
/// 1 (a small page against a large one, compared at the large one's level).
/// Measured: 20 took SQLAlchemy's tree from precision 0.64 to 0.90 (F1
/// 0.67 → 0.79) and changed nothing on the corpus or Django; 12 and 16
/// left half of those false links, 24 and 40 cost the corpus recall.
pub const MIN_TRUSTED_SAMPLES: u32 = 20;

/// Significant bits a sample keeps after its leading one bit: a sample is
/// a 32-bit hash rounded down to a 17-bit "float" (its level and 16 bits of
/// mantissa). Two distinct shingles of one level then give the same sample
/// with probability 2^-16, so two unrelated sketches of 512 samples share ~1
/// sample by accident (an error of ~0.002 in a resemblance); in exchange
/// gaps between rounded samples are small numbers: a sample took ~1.8
/// bytes where it took ~3.6 (the Django tree's index lost 6.4 MB of its
/// 36.7 MB, `docs/performance.md`), and ~1.3 once Rice-coded.
pub const SAMPLE_BITS: u32 = 16;

/// The smallest [`POSTED`] samples of a content (those of the highest
/// levels) are posted in the `sketch_contents` index, to find candidates; the
/// whole sketch is kept with the content to measure them.
pub const POSTED: usize = 16;

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

/// The sketch of a content whose shingles gave the samples of `s` and
/// also `sample` (a rounded one): for tests that mark a sketch to see
/// where a later one came from.
#[cfg(test)]
pub(crate) fn with_sample(s: &Sketch, sample: u32) -> Sketch {
    let mut samples = s.samples.clone();
    if let Err(k) = samples.binary_search(&sample) {
        samples.insert(k, sample);
    }
    let mut level = s.level;
    if level > 0 || samples.len() > EXACT_UP_TO {
        while samples.len() > MAX_SAMPLES {
            level += 1;
            samples.retain(|&x| level_of(x) >= level);
        }
    }
    Sketch { level, samples }
}

impl Sketch {
    /// Samples of level ≥ `level`: a prefix of the sorted list, since a
    /// higher level is a smaller number.
    fn at(&self, level: u8) -> &[u32] {
        if level <= self.level {
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

    /// The samples posted in the index to find candidates: a bottom-k
    /// sample of the shingle set, so two similar contents post many of the
    /// same ones.
    pub fn posted(&self) -> &[u32] {
        &self.samples[..self.samples.len().min(POSTED)]
    }

    /// The sketch without some samples (a template's): still a uniform
    /// sample, of the shingle set without the template's shingles.
    pub fn without<S: std::hash::BuildHasher>(&self, ignored: &std::collections::HashSet<u32, S>) -> Sketch {
        if ignored.is_empty() {
            return self.clone();
        }
        Sketch { level: self.level, samples: self.samples.iter().copied().filter(|s| !ignored.contains(s)).collect() }
    }

    /// [`Sketch::without`], in place (no copy when nothing is ignored).
    pub fn into_without<S: std::hash::BuildHasher>(mut self, ignored: &std::collections::HashSet<u32, S>) -> Sketch {
        if !ignored.is_empty() {
            self.samples.retain(|s| !ignored.contains(s));
        }
        self
    }

    /// Whether the content had any word at all.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The samples two sketches are compared on, and their level: those
    /// of the coarser sketch's level, where both are uniform samples at one
    /// rate. While both keep more than [`FULL_COMPARE`] samples there, a
    /// level coarser: 256–512 samples still bound the error to ~±0.03,
    /// and the merge, most of a report's time, costs half each level. The
    /// full sketch of a large content is for the small ones it may
    /// contain, which are compared at its level and keep more samples
    /// there the larger it is.
    fn compared<'a>(&'a self, other: &'a Sketch) -> (&'a [u32], &'a [u32], u8) {
        let mut level = self.level.max(other.level);
        let (mut a, mut b) = (self.at(level), other.at(level));
        while a.len() > FULL_COMPARE && b.len() > FULL_COMPARE && level < 32 {
            level += 1;
            (a, b) = (self.at(level), other.at(level));
        }
        (a, b, level)
    }

    /// Resemblance and containment of the two shingle sets, estimated on
    /// their common sample.
    pub fn estimate(&self, other: &Sketch) -> Estimate {
        let (a, b, level) = self.compared(other);
        let shared = shared_at_least(a, b, 0).expect("no bound to miss");
        Estimate::new(shared, a.len(), b.len(), level)
    }

    /// [`Sketch::estimate`], or None as soon as the common sample is too
    /// small for resemblance ≥ `min_resemblance` or either containment ≥
    /// `min_containment`: most pairs an analysis compares are far from
    /// both, and the merge stops after a fraction of the samples.
    pub fn estimate_if(&self, other: &Sketch, min_resemblance: f64, min_containment: f64) -> Option<Estimate> {
        let (a, b, level) = self.compared(other);
        let (na, nb) = (a.len(), b.len());
        if na == 0 || nb == 0 {
            return None;
        }
        // shared ≥ need for either: r = s / (na + nb − s) ≥ t ⇔ s ≥ t(na + nb)/(1 + t);
        // c = s / min(na, nb) ≥ t ⇔ s ≥ t·min(na, nb).
        let by_r = (min_resemblance * (na + nb) as f64 / (1.0 + min_resemblance)).ceil();
        let by_c = (min_containment * na.min(nb) as f64).ceil();
        let need = by_r.min(by_c).max(1.0) as usize;
        shared_at_least(a, b, need).map(|shared| Estimate::new(shared, na, nb, level))
    }
}

/// How many values two sorted lists share, or None once fewer than `need`
/// are still possible (0: merge to the end).
fn shared_at_least(a: &[u32], b: &[u32], need: usize) -> Option<usize> {
    shared_at_least_at(merge_level(), a, b, need)
}

/// The vector instructions the merge runs with: AVX2 where the CPU has it,
/// AVX-512 included. Compiled for AVX-512, its compares of eight values
/// go to mask registers, whose instructions the CPU runs on fewer ports:
/// a pair of 512-sample lists took ~0.9 µs against ~0.6 µs with AVX2's
/// (session 65's Intel VM, one process, alternated).
fn merge_level() -> Level {
    let level = simd_level();
    #[cfg(target_arch = "x86_64")]
    if let Some(avx2) = level.as_avx2() {
        return Level::Avx2(avx2);
    }
    level
}

/// [`shared_at_least`] with the vector instructions of `level`.
fn shared_at_least_at(level: Level, a: &[u32], b: &[u32], need: usize) -> Option<usize> {
    dispatch!(level, simd => shared_at_least_with(simd, a, b, need))
}

/// [`shared_at_least`] compiled for a set of vector instructions. The
/// merge is most of a fresh report's time (~28 % of its CPU on the
/// generated corpus), and it was bound by the wait for each step's loads,
/// whose places the step before decides: four values against four a step
/// or eight against eight took the same time. Two merges side by side
/// (below) took a pair of 512-sample sketches from ~1.4 to ~0.9 µs, and a
/// fresh report's CPU −5 % (`docs/performance.md`, session 65).
#[inline(always)]
fn shared_at_least_with<S: Simd>(simd: S, a: &[u32], b: &[u32], need: usize) -> Option<usize> {
    // A small sketch against a large one (a small file and one that may
    // contain it, compared at the large one's level): each sample of the
    // small side is looked for by binary search rather than walking the
    // large side's hundreds.
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.len() * 16 < large.len() {
        let (mut j, mut n) = (0, 0);
        for (i, &x) in small.iter().enumerate() {
            if n + (small.len() - i) < need {
                return None;
            }
            j += large[j..].partition_point(|&y| y < x);
            if j == large.len() {
                break;
            }
            n += usize::from(large[j] == x);
        }
        return (n >= need).then_some(n);
    }
    // Two merges side by side, of the lists' halves below and from a
    // value: each step of one waits on its loads (where the last one
    // moved it), and the other's go on meanwhile. The same value falls in
    // the same half of both lists, so the halves' counts add up.
    let (mut m1, mut m2) = if a.len() >= 32 && b.len() >= 32 {
        let (ka, at) = (a.len() / 2, a[a.len() / 2]);
        let kb = b.partition_point(|&y| y < at);
        (Merge::new(&a[..ka], &b[..kb]), Merge::new(&a[ka..], &b[kb..]))
    } else {
        (Merge::new(&[], &[]), Merge::new(a, b))
    };
    let mut n = 0;
    while m1.full() && m2.full() {
        if n + m1.most() + m2.most() < need {
            return None;
        }
        n += m1.step(simd) + m2.step(simd);
    }
    // Then each half to its end: the one with less left first, whole, and
    // the other as far as `need` can still be met.
    if n + m1.most() + m2.most() < need {
        return None;
    }
    let (first, second) = if m1.most() <= m2.most() { (m1, m2) } else { (m2, m1) };
    n += first.rest(simd, 0)?;
    n += second.rest(simd, need.saturating_sub(n))?;
    (n >= need).then_some(n)
}

/// One merge of two sorted lists of distinct values, at `i` in `a` and `j`
/// in `b`.
struct Merge<'a> {
    a: &'a [u32],
    b: &'a [u32],
    i: usize,
    j: usize,
}

impl<'a> Merge<'a> {
    fn new(a: &'a [u32], b: &'a [u32]) -> Self {
        Merge { a, b, i: 0, j: 0 }
    }

    /// Whether both lists have a block of eight left.
    fn full(&self) -> bool {
        self.i + 8 <= self.a.len() && self.j + 8 <= self.b.len()
    }

    /// The most values the lists can still share.
    fn most(&self) -> usize {
        (self.a.len() - self.i).min(self.b.len() - self.j)
    }

    /// Eight against eight: how many of the blocks' values are shared.
    /// The block with the smaller last value is done, as no later value of
    /// the other list can equal one of its values (both lists are distinct
    /// and sorted), and a pair of blocks meets once, so nothing is counted
    /// twice.
    #[inline(always)]
    fn step<S: Simd>(&mut self, simd: S) -> usize {
        let x: &[u32; 8] = self.a[self.i..self.i + 8].try_into().expect("8 values");
        let y: &[u32; 8] = self.b[self.j..self.j + 8].try_into().expect("8 values");
        let xv = fearless_simd::u32x8::from_slice(simd, x);
        let yv = fearless_simd::u32x8::from_slice(simd, y);
        // Each of x's values against each of y's: y turned by 0–7 places.
        let eq = |r| simd.simd_eq_u32x8(xv, r);
        let m = simd.or_mask32x8(
            simd.or_mask32x8(
                simd.or_mask32x8(eq(yv), eq(simd.slide_u32x8::<1>(yv, yv))),
                simd.or_mask32x8(eq(simd.slide_u32x8::<2>(yv, yv)), eq(simd.slide_u32x8::<3>(yv, yv))),
            ),
            simd.or_mask32x8(
                simd.or_mask32x8(eq(simd.slide_u32x8::<4>(yv, yv)), eq(simd.slide_u32x8::<5>(yv, yv))),
                simd.or_mask32x8(eq(simd.slide_u32x8::<6>(yv, yv)), eq(simd.slide_u32x8::<7>(yv, yv))),
            ),
        );
        self.i += 8 * usize::from(x[7] <= y[7]);
        self.j += 8 * usize::from(y[7] <= x[7]);
        simd.to_bitmask_mask32x8(m).count_ones() as usize
    }

    /// How many values the lists share from here on, or None once fewer
    /// than `need` are still possible.
    #[inline(always)]
    fn rest<S: Simd>(mut self, simd: S, need: usize) -> Option<usize> {
        let mut n = 0;
        while self.full() {
            if n + self.most() < need {
                return None;
            }
            n += self.step(simd);
        }
        let (a, b, mut i, mut j) = (self.a, self.b, self.i, self.j);
        while i < a.len() && j < b.len() {
            if n + (a.len() - i).min(b.len() - j) < need {
                return None;
            }
            // Branch-free: which side moves is data the CPU cannot predict.
            let (x, y) = (a[i], b[j]);
            i += usize::from(x <= y);
            j += usize::from(y <= x);
            n += usize::from(x == y);
        }
        (n >= need).then_some(n)
    }
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
    /// Samples of each side at the level compared.
    pub a_samples: u32,
    pub b_samples: u32,
    /// Compared at level 0: every shingle of both, the measures are exact.
    pub exact: bool,
}

impl Estimate {
    /// From `shared` common samples out of `na` and `nb` at `level`.
    fn new(shared: usize, na: usize, nb: usize, level: u8) -> Estimate {
        let ratio = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        let union = na + nb - shared;
        Estimate {
            resemblance: ratio(shared, union),
            a_in_b: ratio(shared, na),
            b_in_a: ratio(shared, nb),
            shared: shared as u32,
            samples: union as u32,
            a_samples: na as u32,
            b_samples: nb as u32,
            exact: level == 0,
        }
    }

    pub fn containment(&self) -> f64 {
        self.a_in_b.max(self.b_in_a)
    }

    /// Whether the resemblance rests on enough samples to decide a link.
    pub fn resemblance_trusted(&self) -> bool {
        self.exact || self.samples >= MIN_TRUSTED_SAMPLES
    }

    /// The larger containment among those resting on enough samples of the
    /// contained side (a small file against a much larger one is compared
    /// at the large one's level, where it may keep only a handful).
    pub fn trusted_containment(&self) -> f64 {
        let ok = |n: u32| self.exact || n >= MIN_TRUSTED_SAMPLES;
        let a = if ok(self.a_samples) { self.a_in_b } else { 0.0 };
        let b = if ok(self.b_samples) { self.b_in_a } else { 0.0 };
        a.max(b)
    }
}

/// A sample rounded to [`SAMPLE_BITS`] bits after its leading one.
fn round(sample: u32) -> u32 {
    let len = 32 - sample.leading_zeros();
    if len <= SAMPLE_BITS + 1 {
        return sample;
    }
    sample & !((1u32 << (len - 1 - SAMPLE_BITS)) - 1)
}

/// A rounded sample as a dense number, in the same order: its bit length,
/// then its [`SAMPLE_BITS`] bits after the leading one.
#[inline(always)]
fn code(sample: u32) -> u32 {
    // Without a branch on the length: shifted to the top of 64 bits and
    // past its leading one bit, the bits that follow it are the top ones
    // (zeros past the sample's end, as rounding pads a short one).
    let zeros = sample.leading_zeros();
    let after = ((u64::from(sample) << 32) << zeros) << 1;
    ((32 - zeros) << SAMPLE_BITS) | (after >> (64 - SAMPLE_BITS)) as u32
}

/// The sample of a [`code`], or None for a number no rounded sample has.
#[inline]
fn uncode(code: u32) -> Option<u32> {
    let (len, mantissa) = (code >> SAMPLE_BITS, code & ((1u32 << SAMPLE_BITS) - 1));
    // Most samples are longer than their mantissa, and decode with two
    // shifts (tested first: decoding and sorting call this per sample).
    if len > SAMPLE_BITS + 1 && len <= 32 {
        return Some((1u32 << (len - 1)) | (mantissa << (len - 1 - SAMPLE_BITS)));
    }
    match len {
        0 => (mantissa == 0).then_some(0),
        1..=32 => {
            let shift = SAMPLE_BITS + 1 - len;
            (mantissa & ((1u32 << shift) - 1) == 0).then(|| (1u32 << (len - 1)) | (mantissa >> shift))
        }
        _ => None,
    }
}

/// Bits that hold any [`code`]: a bit length of up to 32, then the mantissa.
const CODE_BITS: u32 = 6 + SAMPLE_BITS;
const CODE_MASK: u32 = (1 << CODE_BITS) - 1;
/// At most this many parts tag a sketch: the bits above a code.
pub const MAX_PARTS: usize = (32 - CODE_BITS) as usize;
/// The largest Rice parameter a gap is written with.
const MAX_RICE: u32 = 24;

// Stored as one byte string: the level, a Rice parameter, the number of
// samples, then bits: the first sample's code in `CODE_BITS` bits, and the
// gap to each next code (less one) Rice-coded, with a parameter that grows
// by one for each bit the sample before the gap is shorter than the
// level's longest. Samples are uniform in value, so a bit length holds half
// as many as the next one up, in as many codes: its gaps are twice as long.
// ~10 bits a sample, where the gaps as varints took ~13.5 (schema version
// 6; `schema/content_chunks.md` has the bytes).
impl Serialize for Sketch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&rice_encode(self))
    }
}

impl<'de> Deserialize<'de> for Sketch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Sketch;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sketch's bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Sketch, E> {
                rice_decode(v).map_err(E::custom)
            }
        }
        d.deserialize_bytes(V)
    }
}

/// The longest sample a sketch of `level` holds, in bits.
fn top_len(level: u8) -> u32 {
    32u32.saturating_sub(u32::from(level))
}

/// The Rice parameter of the gap after a sample of bit length `len`.
fn rice_k(base: u8, top: u32, len: u32) -> u32 {
    (u32::from(base) + top.saturating_sub(len)).min(MAX_RICE)
}

/// The Rice parameter for the gaps after a sketch's longest samples.
///
/// The gaps scaled to the longest samples' spacing set it: one less than
/// the bit length of their mean was, on simulated sketches of 5 to 1,024
/// samples, always the best (a geometric gap of mean m is best written
/// with about log2(m) - 1 low bits). Codes are cheap (a few shifts), so
/// the encoder computes each here and again as it writes it, rather than
/// keeping them in a list of their own (which measured slower).
#[inline(always)]
fn rice_base(sketch: &Sketch) -> u8 {
    let top = top_len(sketch.level);
    let Some((&first, rest)) = sketch.samples.split_first() else { return 0 };
    let (mut sum, mut prev) = (0u64, code(first));
    for &s in rest {
        let c = code(s);
        sum += u64::from((c - prev - 1) >> top.saturating_sub(prev >> SAMPLE_BITS).min(31));
        prev = c;
    }
    let mean = sum / (rest.len() as u64).max(1);
    (64 - mean.leading_zeros()).saturating_sub(1).min(MAX_RICE) as u8
}

/// The sketch's bytes: its level, the Rice parameter for the gaps after
/// the longest samples, the number of samples as a varint, then the bits.
fn rice_encode(sketch: &Sketch) -> Vec<u8> {
    dispatch!(simd_level(), simd => rice_encode_with(simd, sketch))
}

/// [`rice_encode`] compiled for a CPU's instruction set: with BMI2 and
/// LZCNT (which x86-64's baseline lacks) a shift by a variable count is
/// one instruction rather than three, and a sample's bit length one more;
/// the encoder does several of each per sample.
#[inline(always)]
fn rice_encode_with<S: Simd>(_simd: S, sketch: &Sketch) -> Vec<u8> {
    // ~10 bits a sample; the writer grows the buffer if a sketch needs more.
    let mut out = Vec::with_capacity(16 + sketch.samples.len() * 2);
    out.push(sketch.level);
    let Some(&first) = sketch.samples.first() else {
        out.extend([0, 0]);
        return out;
    };
    debug_assert!(
        sketch.samples.iter().all(|&s| round(s) == s) && sketch.samples.windows(2).all(|p| code(p[0]) < code(p[1])),
        "a sketch holds distinct rounded samples, sorted"
    );
    let top = top_len(sketch.level);
    let base = rice_base(sketch);
    out.push(base);
    let mut n = sketch.samples.len() as u32;
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    let mut w = BitWriter::new(out);
    let mut prev = code(first);
    w.put(prev, CODE_BITS);
    for &s in &sketch.samples[1..] {
        let c = code(s);
        w.rice(c - prev - 1, rice_k(base, top, prev >> SAMPLE_BITS));
        prev = c;
    }
    w.finish()
}

/// The sketch of [`rice_encode`]'s bytes, refusing any that no sketch makes.
fn rice_decode(bytes: &[u8]) -> Result<Sketch, &'static str> {
    rice_decode_first(bytes, usize::MAX)
}

/// A sketch from its stored bytes (what it serializes as).
pub fn sketch_of_bytes(bytes: &[u8]) -> Result<Sketch, &'static str> {
    rice_decode(bytes)
}

/// A sketch's stored bytes, as [`sketch_of_bytes`] takes them.
#[cfg(test)]
pub(crate) fn bytes_of_sketch(s: &Sketch) -> Vec<u8> {
    rice_encode(s)
}

/// The posted samples ([`Sketch::posted`]) of a sketch's stored bytes:
/// the first [`POSTED`] decoded, the rest not read (a sketch of ~1,000
/// samples is decoded for its 16 when a changed file's old content loses
/// its postings: ~4 % of the daemon's CPU in a burst).
pub fn posted_of_bytes(bytes: &[u8]) -> Result<Vec<u32>, &'static str> {
    Ok(rice_decode_first(bytes, POSTED)?.samples)
}

/// The level, the number of samples and the posted samples of a sketch's
/// stored bytes, the samples after those not read: what deciding whether
/// two contents are candidates needs of each (`analysis::Brief`).
pub fn head_of_bytes(bytes: &[u8]) -> Result<(u8, u32, Vec<u32>), &'static str> {
    let posted = rice_decode_first(bytes, POSTED)?;
    let mut n = 0u32;
    // The count follows the level and the Rice parameter, as a varint
    // (its bytes were checked by the decode above).
    for (at, &b) in bytes[2..].iter().enumerate().take(5) {
        n |= u32::from(b & 0x7f) << (7 * at as u32);
        if b < 0x80 {
            break;
        }
    }
    Ok((posted.level, n, posted.samples))
}

/// [`rice_decode`] of the first `limit` samples: the level and those
/// samples, the bits after them not read (nor checked).
fn rice_decode_first(bytes: &[u8], limit: usize) -> Result<Sketch, &'static str> {
    let mut samples = Vec::new();
    let level = rice_decode_into(bytes, limit, &mut samples, |_, sample| sample)?;
    Ok(Sketch { level, samples })
}

/// Decodes the first `limit` samples of a stored sketch and appends to
/// `out` what `pick` makes of each sample's [`code`] and the sample (the
/// codes come strictly increasing); returns the level.
#[inline(always)]
fn rice_decode_into(
    bytes: &[u8],
    limit: usize,
    out: &mut Vec<u32>,
    pick: impl Fn(u32, u32) -> u32,
) -> Result<u8, &'static str> {
    let [level, base, rest @ ..] = bytes else { return Err("sketch header cut short") };
    let (level, base) = (*level, *base);
    let mut n = 0u32;
    let mut at = 0;
    loop {
        let &b = rest.get(at).ok_or("sketch header cut short")?;
        n |= u32::from(b & 0x7f).checked_shl(7 * at as u32).filter(|_| at < 5).ok_or("sketch length overflow")?;
        at += 1;
        if b < 0x80 {
            break;
        }
    }
    let bits = &rest[at..];
    if level > 32 || u32::from(base) > MAX_RICE {
        return Err("sketch header out of range");
    }
    // Each sample takes at least one bit, so a count the bytes cannot hold
    // is refused before anything is allocated for it.
    if n as usize > bits.len().saturating_mul(8) {
        return Err("sketch holds fewer bits than samples");
    }
    let top = top_len(level);
    let mut r = BitReader::new(bits);
    let n = n.min(u32::try_from(limit).unwrap_or(u32::MAX));
    out.reserve(n as usize);
    if n == 0 {
        return Ok(level);
    }
    let mut c = r.get(CODE_BITS).ok_or("sketch bits end early")?;
    // The reader's state is held in locals through the loop: kept in the
    // reader, it went through the stack from one sample to the next
    // (`perf annotate`). In locals, a sample decodes in ~20-25 % less time
    // (the two ways interleaved in one process, 200 rounds each, three
    // runs: 11.5, 10.3 and 12.4 against 8.8, 8.2 and 9.3 ns a sample;
    // session 64).
    //
    // While 8 bytes are left, a refill loads them whole and leaves the
    // bits past `have` as they are (they are the stream's next bits, and
    // the next load puts the same ones there); the reader takes over, with
    // those bits cleared, for the last bytes and for a gap longer than the
    // bits at hand.
    let BitReader { bytes: mut rest, mut acc, n: mut have } = r;
    // A code's bit length is its sample's, and the codes increase, so the
    // Rice parameter (set by the length of the code before each gap)
    // changes only where a code reaches the next length, `next`.
    let (mut k, mut next) = (0u32, 0u32);
    for i in 0..n {
        if i > 0 {
            if have < 57 && rest.len() >= 8 {
                acc |= u64::from_le_bytes(rest[..8].try_into().expect("8 bytes")) << have;
                let take = (63 - have) / 8;
                rest = &rest[take as usize..];
                have += 8 * take;
            }
            let ones = acc.trailing_ones();
            let used = ones + 1 + k;
            let g = if used <= have && used < 64 {
                let low = (acc >> (ones + 1)) & ((1u64 << k) - 1);
                acc >>= used;
                have -= used;
                u32::try_from(u64::from(ones) << k | low).ok()
            } else {
                let bits_at_hand = if have == 64 { u64::MAX } else { (1u64 << have) - 1 };
                let mut slow = BitReader { bytes: rest, acc: acc & bits_at_hand, n: have };
                let g = slow.rice(k);
                BitReader { bytes: rest, acc, n: have } = slow;
                g
            };
            let g = g.ok_or("sketch bits end early or a gap overflows")?;
            c = c.checked_add(g).and_then(|x| x.checked_add(1)).ok_or("sketch sample overflow")?;
        }
        if c >= next {
            let len = c >> SAMPLE_BITS;
            if len > top {
                return Err("sketch sample below its level");
            }
            k = rice_k(base, top, len);
            next = (len + 1) << SAMPLE_BITS;
        }
        out.push(pick(c, uncode(c).ok_or("not a rounded sketch sample")?));
    }
    Ok(level)
}

/// Bits appended least significant first, after the bytes it was given.
///
/// Each put stores the pending bits as a whole 8-byte word and moves on by
/// the bytes that are now complete, so no put branches on whether a byte
/// or a word filled up (which a sketch's gaps make unpredictable). The
/// encoder runs on the writer's thread, ~5 % of a first index's CPU on a
/// tree of distinct files (`docs/performance.md`).
struct BitWriter {
    /// Complete bytes up to `pos`, then at least 8 bytes of room.
    out: Vec<u8>,
    pos: usize,
    /// The pending bits, fewer than 8 between puts.
    acc: u64,
    n: u32,
}

impl BitWriter {
    /// A writer appending to `out`.
    fn new(mut out: Vec<u8>) -> BitWriter {
        let pos = out.len();
        out.resize(out.capacity().max(pos + 8), 0);
        BitWriter { out, pos, acc: 0, n: 0 }
    }

    /// The low `bits` (≤ 32) bits of `v`, whose other bits are zero.
    #[inline(always)]
    fn put(&mut self, v: u32, bits: u32) {
        debug_assert!(bits <= 32 && (bits == 32 || v >> bits == 0) && self.n < 8);
        self.acc |= u64::from(v) << self.n;
        self.n += bits;
        if self.out.len() < self.pos + 8 {
            self.out = grow(std::mem::take(&mut self.out));
        }
        self.out[self.pos..self.pos + 8].copy_from_slice(&self.acc.to_le_bytes());
        let whole = self.n / 8;
        self.pos += whole as usize;
        // At most 39 bits were pending, so at most 4 bytes are shifted out.
        self.acc >>= 8 * whole;
        self.n -= 8 * whole;
    }

    /// `v` Rice-coded with parameter `k`: `v >> k` in unary, then the low
    /// `k` bits; in one put when they fit (nearly always).
    #[inline(always)]
    fn rice(&mut self, v: u32, k: u32) {
        let q = v >> k;
        let low = v & ((1u32 << k) - 1);
        if q + 1 + k <= 32 {
            let bits = ((1u64 << q) - 1) | u64::from(low) << (q + 1);
            self.put(bits as u32, q + 1 + k);
        } else {
            self.unary(q);
            self.put(low, k);
        }
    }

    /// `q` one bits, then a zero.
    #[inline(always)]
    fn unary(&mut self, mut q: u32) {
        while q >= 31 {
            self.put(u32::MAX >> 1, 31);
            q -= 31;
        }
        self.put((1u32 << q) - 1, q + 1);
    }

    fn finish(mut self) -> Vec<u8> {
        self.out.truncate(self.pos);
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// More room for a [`BitWriter`] whose sketch took more than guessed:
/// rare, and kept out of line, taking and returning the buffer, so that
/// the writer's state stays in registers (growing it in place, the
/// pending bits, their count and the position went through the stack at
/// every put).
#[cold]
#[inline(never)]
fn grow(mut out: Vec<u8>) -> Vec<u8> {
    out.resize(2 * out.len() + 8, 0);
    out
}

/// Reads what [`BitWriter`] wrote; None past the end.
struct BitReader<'a> {
    bytes: &'a [u8],
    acc: u64,
    n: u32,
}

impl<'a> BitReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, acc: 0, n: 0 }
    }

    fn refill(&mut self) {
        if let Some(word) = self.bytes.get(..8) {
            // Eight bytes at once; only whole bytes that fit are consumed.
            let take = (64 - self.n) / 8;
            self.acc |= u64::from_le_bytes(word.try_into().expect("8 bytes")) << self.n;
            // Bits of the word beyond `take` bytes shifted out the top or
            // are cleared: keep exactly `take` bytes.
            let keep = self.n + 8 * take;
            if keep < 64 {
                self.acc &= (1u64 << keep) - 1;
            }
            self.bytes = &self.bytes[take as usize..];
            self.n = keep;
        } else {
            while self.n <= 56 {
                let Some((&b, rest)) = self.bytes.split_first() else { break };
                self.acc |= u64::from(b) << self.n;
                self.bytes = rest;
                self.n += 8;
            }
        }
    }

    /// The next `bits` (≤ 32) bits.
    fn get(&mut self, bits: u32) -> Option<u32> {
        if bits == 0 {
            return Some(0);
        }
        if self.n < bits {
            self.refill();
            if self.n < bits {
                return None;
            }
        }
        let v = (self.acc & ((1u64 << bits) - 1)) as u32;
        self.acc >>= bits;
        self.n -= bits;
        Some(v)
    }

    /// A Rice-coded number with `k` (≤ 24) low bits, or None past the end
    /// or over `u32::MAX`: the ones up to the next zero, then the low bits.
    /// [`rice_decode_into`] reads most gaps itself, from the bits it holds,
    /// and calls this for the last bytes and for gaps longer than those.
    #[inline(always)]
    fn rice(&mut self, k: u32) -> Option<u32> {
        let q = self.unary()?;
        let low = self.get(k)?;
        q.checked_shl(k).filter(|&x| x >> k == q).map(|x| x | low)
    }

    /// Ones up to the next zero, which is consumed.
    fn unary(&mut self) -> Option<u32> {
        let mut q = 0u32;
        loop {
            if self.n == 0 {
                self.refill();
                if self.n == 0 {
                    return None;
                }
            }
            let ones = self.acc.trailing_ones().min(self.n);
            if ones < self.n {
                self.acc = self.acc.checked_shr(ones + 1).unwrap_or(0);
                self.n -= ones + 1;
                return Some(q.saturating_add(ones));
            }
            q = q.saturating_add(ones);
            self.acc = 0;
            self.n = 0;
        }
    }
}

/// A sketch in the encoding of schema versions 3 to 5 (`content_chunks`
/// value versions 3 and 4): the level and the gaps between the samples'
/// codes as varints. Still read, so that an index of those versions opens
/// without a rewrite; written only by tests that make such an index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GapCoded(pub Sketch);

impl Serialize for GapCoded {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut prev = 0u32;
        let gaps: Vec<u32> = self
            .0
            .samples
            .iter()
            .map(|&x| {
                debug_assert_eq!(round(x), x, "a sketch holds rounded samples");
                let c = code(x);
                let g = c - prev;
                prev = c;
                g
            })
            .collect();
        (self.0.level, gaps).serialize(s)
    }
}

impl<'de> Deserialize<'de> for GapCoded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (level, gaps): (u8, Vec<u32>) = Deserialize::deserialize(d)?;
        let mut samples = Vec::with_capacity(gaps.len());
        let mut prev = 0u32;
        for (i, g) in gaps.into_iter().enumerate() {
            if i > 0 && g == 0 {
                return Err(serde::de::Error::custom("sketch samples are not distinct"));
            }
            prev = prev.checked_add(g).ok_or_else(|| serde::de::Error::custom("sketch sample overflow"))?;
            samples.push(uncode(prev).ok_or_else(|| serde::de::Error::custom("not a rounded sketch sample"))?);
        }
        Ok(GapCoded(Sketch { level, samples }))
    }
}

/// ASCII whitespace as Python's `bytes.split()` sees it (with vertical tab,
/// which Rust's `is_ascii_whitespace` leaves out): the definition, which
/// [`space_mask64`] computes in vectors.
pub const fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

#[cfg(test)]
const fn space_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = is_space(b as u8);
        b += 1;
    }
    t
}
#[cfg(test)]
static SPACE: [bool; 256] = space_table();

const M: u64 = 0x9e37_79b9_7f4a_7c15;

/// Builds a sketch from a stream of bytes, fed in pieces of any size.
///
/// This runs over every byte a reader reads, beside TTTD and MD5, so it is
/// written for speed: whitespace is found 64 bytes at a time as a bit mask
/// (vector compares, no branch per byte), a word of under 16 bytes is
/// hashed from two loads with no branch on its length, the shingles of a
/// batch of words are hashed side by side, and samples are collected in a
/// vector that is sorted and thinned now and then rather than kept in a
/// hash set. The loops are compiled for each x86 vector instruction set
/// and the CPU's is picked at run time (`fearless_simd`, which the MD5
/// engine uses too); `docs/performance.md` has the figures.
pub struct Shingler {
    /// A word cut by the end of a piece: its hash state so far.
    partial: Option<WordState>,
    /// The last `WORDS` words' keys ([`shingle_hash_of_keys`]), oldest
    /// first once full.
    window: [u64; WORDS],
    words: u64,
    level: u8,
    /// Samples of level ≥ `level` as their [`code`]s (in the same order,
    /// and 22 bits: what [`radix_sort`] sorts, which then converts nothing),
    /// unsorted, possibly repeated.
    kept: Vec<u32>,
    /// The samples [`Shingler::sort_deciding_samples`] picks and sorts.
    picked: Vec<u32>,
    /// Room for [`radix_sort`].
    scratch: Vec<u32>,
    /// Fed from within a content whose earlier shingles are in `kept`
    /// already ([`sketch_grown`]): a few words fed are then no whole
    /// content of a few words.
    resumed: bool,
    /// How many of `kept`'s first samples are sorted and distinct: those
    /// of the earlier sketch, and then of each compaction, when resumed.
    sorted: usize,
    /// Fed a content part by part ([`Shingler::tagging`]); boxed, so
    /// that a shingler stays small where most are made without parts.
    parts: Option<Box<Parts>>,
}

/// The state of a shingler fed a content part by part: each code in `kept`
/// carries, above its [`CODE_BITS`], the parts holding its shingle (bit g
/// for part g), set on the codes from `untagged` on when the part ends or
/// before they are sorted.
#[derive(Default)]
struct Parts {
    part: u32,
    untagged: usize,
    /// The distinct samples the last rise of the level dropped, counted
    /// in the first part holding each (`segments::Tags::below`).
    below: [u32; MAX_PARTS],
}

/// The buffers of the last shingler dropped on this thread, for the next
/// one: a reader sketches thousands of contents one after another, and
/// each grew its buffers from nothing to a few thousand samples (one
/// allocation and copy per doubling) and zero-filled the sort's.
#[derive(Default)]
struct Spare {
    kept: Vec<u32>,
    picked: Vec<u32>,
    scratch: Vec<u32>,
}

thread_local! {
    static SPARE: std::cell::Cell<Option<Spare>> = const { std::cell::Cell::new(None) };
}

impl Drop for Shingler {
    fn drop(&mut self) {
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        let spare =
            Spare { kept, picked: std::mem::take(&mut self.picked), scratch: std::mem::take(&mut self.scratch) };
        // A thread being torn down has no spare to keep.
        let _ = SPARE.try_with(|s| s.set(Some(spare)));
    }
}

/// A word's hash over whole 8-byte blocks, the pending bytes of its last
/// block (little-endian), and its length.
#[derive(Clone, Copy, Default)]
struct WordState {
    acc: u64,
    block: u64,
    len: u64,
}

impl WordState {
    fn feed(&mut self, bytes: &[u8]) {
        // Byte by byte to a block boundary, then whole blocks: a word that
        // runs through whole pieces (a zero-filled or sparse file is one
        // word) is hashed 8 bytes at a time, as `word_hash` does.
        let head = bytes.len().min((8 - self.len % 8) as usize % 8);
        self.feed_bytes(&bytes[..head]);
        let mut blocks = bytes[head..].chunks_exact(8);
        for b in blocks.by_ref() {
            let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            self.acc = (self.acc ^ v).wrapping_mul(M).rotate_left(29);
            self.len += 8;
        }
        self.feed_bytes(blocks.remainder());
    }

    fn feed_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            let pending = self.len % 8;
            self.block |= u64::from(b) << (8 * pending);
            self.len += 1;
            if pending == 7 {
                self.acc = (self.acc ^ self.block).wrapping_mul(M).rotate_left(29);
                self.block = 0;
            }
        }
    }

    /// The word's hash.
    #[cfg(test)]
    fn finish(&self) -> u64 {
        self.key().wrapping_mul(M)
    }

    /// The word's [key](shingle_hash_of_keys): its hash before the last
    /// multiplication by `M`.
    fn key(&self) -> u64 {
        // A block of under 8 bytes leaves its top byte free for the length,
        // so "a" and "a\0" differ in the high bits the sample is taken from.
        self.acc ^ self.block ^ (self.len << 56)
    }
}

/// The key of the word `data[start..end]` (any length), equal to feeding
/// its bytes to an empty [`WordState`] in any pieces. Bytes after `end` in
/// `data` let the last partial block be read in one masked load.
fn word_hash(data: &[u8], start: usize, end: usize) -> u64 {
    let mut s = WordState::default();
    let mut at = start;
    while end - at >= 8 {
        let b = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        s.acc = (s.acc ^ b).wrapping_mul(M).rotate_left(29);
        at += 8;
    }
    s.len = (at - start) as u64;
    let rest = end - at;
    if rest > 0 && at + 8 <= data.len() {
        let b = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        s.block = b & ((1u64 << (8 * rest)) - 1);
        s.len += rest as u64;
    } else {
        s.feed(&data[at..end]);
    }
    s.key()
}

/// [`word_hash`] of the first `n` < 16 of the 16 bytes `b`: the same
/// value without a branch on the word's length (which text makes
/// unpredictable).
#[inline(always)]
fn short_word_hash(b: &[u8; 16], n: usize) -> u64 {
    let b0 = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let b1 = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
    // A word with a whole first block has it mixed in as `WordState::feed`
    // does, its second block pending; a shorter one has its first pending.
    let long = n >= 8;
    let acc = std::hint::select_unpredictable(long, b0.wrapping_mul(M).rotate_left(29), 0);
    let last = std::hint::select_unpredictable(long, b1, b0);
    let block = last & ((1u64 << (8 * (n & 7))) - 1);
    acc ^ block ^ ((n as u64) << 56)
}

/// The key of the word `data[start..end]`: [`short_word_hash`] for the
/// common word, of under 16 bytes with 16 readable, else [`word_hash`].
#[inline(always)]
fn hash_word(data: &[u8], start: usize, end: usize) -> u64 {
    match data.get(start..start + 16) {
        Some(b) if end - start < 16 => short_word_hash(b.try_into().expect("16 bytes"), end - start),
        _ => word_hash(data, start, end),
    }
}

/// Words found and hashed before their shingles are sampled, at most
/// ([`Shingler::feed`]).
const WORD_BATCH: usize = 64;

/// Whitespace bits of 64 bytes (bit k set when `bytes[k]` is ASCII
/// whitespace: 32, or 9..=13), compared as vectors: a handful of
/// instructions per 16 bytes (SSE2, which every x86-64 CPU has) or per 32
/// (AVX2, AVX-512), where a bit trick on 8 bytes in a `u64` took ~15 per 8.
#[inline(always)]
fn space_mask64<S: Simd>(simd: S, bytes: &[u8; 64]) -> u64 {
    // In two halves of 32 bytes whose bits are kept opaque to LLVM: seeing
    // them come from byte compares, it joined them as a vector of 64
    // one-bit lanes and, on AVX2, built that vector again byte by byte
    // from the bits (a hundred instructions a block, 31 % of the sketch's
    // time on text on a Zen 3 CPU, `docs/performance.md`).
    let (lo, hi) = bytes.split_at(32);
    let lo = std::hint::black_box(space_mask32(simd, lo));
    let hi = std::hint::black_box(space_mask32(simd, hi));
    lo | (hi << 32)
}

/// [`space_mask64`] of 32 bytes.
#[inline(always)]
fn space_mask32<S: Simd>(simd: S, bytes: &[u8]) -> u64 {
    let x = u8x32::from_slice(simd, bytes);
    let space = simd.simd_eq_u8x32(x, simd.splat_u8x32(b' '));
    // Tab to carriage return (9..=13): x − 9 is at most 4, unsigned.
    let control = simd.simd_le_u8x32(simd.sub_u8x32(x, simd.splat_u8x32(9)), simd.splat_u8x32(4));
    simd.to_bitmask_mask8x32(simd.or_mask8x32(space, control))
}

/// Byte k is (k / `div`) % `modulo`: a table of 64 bytes for the vectors
/// of [`block_word_keys`].
#[cfg(target_arch = "x86_64")]
const fn byte_table(div: usize, modulo: usize) -> [u8; 64] {
    let mut a = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        a[i] = (i / div % modulo) as u8;
        i += 1;
    }
    a
}

/// Byte k is k: the positions of a block's bytes.
#[cfg(target_arch = "x86_64")]
const IOTA: [u8; 64] = byte_table(1, 64);

/// Byte k is k / 8: each of 8 words' bytes spread over its 8-byte lane.
#[cfg(target_arch = "x86_64")]
const SPREAD: [u8; 64] = byte_table(8, 64);

/// Byte k is k % 8: a byte's place in its 8-byte lane.
#[cfg(target_arch = "x86_64")]
const LANE_OFFSET: [u8; 64] = byte_table(1, 8);

#[cfg(target_arch = "x86_64")]
fearless_simd::kernel!(
    /// The keys of the words of a block (`window[48..112]`, with the 48
    /// bytes before it and the 16 after) that start at the bits of
    /// `starts` and end at those of `ends` (the k-th start pairs with the
    /// k-th end; a start after the last end is left alone), after a word
    /// begun at `carried` in the window and ending at the first end, if
    /// there is one; written to `out` in order:
    /// [`short_word_hash`] of eight words at a time, each word's 16 bytes
    /// gathered from the window by a byte permutation, and [`word_hash`]
    /// for a word of 16 bytes or more. Where one word took ~30 scalar
    /// instructions, eight take ~25 vector ones: a first index of the
    /// generated corpus took 9 % less CPU (`docs/performance.md`, session
    /// 63).
    #[inline(always)]
    fn block_word_keys(
        token: Avx512,
        window: &[u8; 128],
        carried: Option<u8>,
        starts: u64,
        ends: u64,
        out: &mut [u64; 32],
    ) {
        let lo: __m512i = u8x64::from_slice(token, &window[..64]).into();
        let hi: __m512i = u8x64::from_slice(token, &window[64..]).into();
        let at_block: __m512i = u8x64::from_slice(token, &IOTA).into();
        let at_block = _mm512_add_epi8(at_block, _mm512_set1_epi8(48));
        let spread: __m512i = u8x64::from_slice(token, &SPREAD).into();
        let lane_offset: __m512i = u8x64::from_slice(token, &LANE_OFFSET).into();
        // Byte k of `s` and `e`: where the k-th word starts and ends.
        let mut s = _mm512_maskz_compress_epi8(starts, at_block);
        if let Some(c) = carried {
            s = _mm512_mask_set1_epi8(_mm512_maskz_expand_epi8(!1, s), 1, c as i8);
        }
        let e = _mm512_maskz_compress_epi8(ends, at_block);
        let len = _mm512_sub_epi8(e, s);
        let k = ends.count_ones() as usize;
        for g in 0..k.div_ceil(8) {
            let pick = _mm512_add_epi8(spread, _mm512_set1_epi8(8 * g as i8));
            // Each of the eight words' first 16 bytes, as two u64 lanes.
            let at = _mm512_add_epi8(_mm512_permutexvar_epi8(pick, s), lane_offset);
            let b0 = _mm512_permutex2var_epi8(lo, at, hi);
            let b1 = _mm512_permutex2var_epi8(lo, _mm512_add_epi8(at, _mm512_set1_epi8(8)), hi);
            // Each word's length, in the low byte of its lane.
            let n = _mm512_maskz_permutexvar_epi8(0x0101_0101_0101_0101, pick, len);
            // As `short_word_hash`, lane by lane.
            let long = _mm512_cmpge_epu64_mask(n, _mm512_set1_epi64(8));
            let mixed = _mm512_rol_epi64::<29>(_mm512_mullo_epi64(b0, _mm512_set1_epi64(M as i64)));
            let acc = _mm512_maskz_mov_epi64(long, mixed);
            let last = _mm512_mask_blend_epi64(long, b0, b1);
            let bits = _mm512_slli_epi64::<3>(_mm512_and_si512(n, _mm512_set1_epi64(7)));
            let keep = _mm512_sub_epi64(_mm512_sllv_epi64(_mm512_set1_epi64(1), bits), _mm512_set1_epi64(1));
            let key = _mm512_xor_si512(_mm512_xor_si512(acc, _mm512_and_si512(last, keep)), _mm512_slli_epi64::<56>(n));
            let key: u64x8<Avx512> = key.simd_into(token);
            out[8 * g..8 * g + 8].copy_from_slice(&<[u64; 8]>::from(key));
        }
        // Words of 16 bytes or more (rare in text, most of them in binary
        // data) are hashed whole.
        let mut long = _mm512_cmpge_epu8_mask(len, _mm512_set1_epi8(16)) & (u64::MAX >> (64 - k));
        if long != 0 {
            let s: u8x64<Avx512> = s.simd_into(token);
            let e: u8x64<Avx512> = e.simd_into(token);
            let (s, e) = (<[u8; 64]>::from(s), <[u8; 64]>::from(e));
            while long != 0 {
                let i = long.trailing_zeros() as usize;
                long &= long - 1;
                out[i] = word_hash(window, usize::from(s[i]), usize::from(e[i]));
            }
        }
    }
);

/// Appends to `kept` the codes of `codes[from..to]` under `bound`, in
/// order: [`keep_codes`] where the CPU has AVX-512, else a loop that
/// writes each code and counts it when it is under (no branch per code).
#[inline(always)]
fn keep_under<S: Simd>(
    simd: S,
    codes: &[u32; 2 * WORD_BATCH + 16],
    from: usize,
    to: usize,
    bound: u32,
    kept: &mut Vec<u32>,
) {
    let at = kept.len();
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = simd.level().as_avx512() {
        kept.resize(at + (to - from) + 16, 0);
        let n = keep_codes(t, codes, from, to, bound, &mut kept[at..]);
        kept.truncate(at + n);
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    kept.resize(at + (to - from), 0);
    let out = &mut kept[at..];
    let mut n = 0;
    for &c in &codes[from..to] {
        out[n] = c;
        n += usize::from(c < bound);
    }
    kept.truncate(at + n);
}

#[cfg(target_arch = "x86_64")]
fearless_simd::kernel!(
    /// The codes of `codes[from..to]` under `bound`, written in order to
    /// the front of `out`, 16 at a time (a compress of the codes under
    /// `bound`), and how many; `codes` has 16 more after `to`, `out` 16
    /// more than `to − from`. A first index of the
    /// generated corpus took 3–4 % less CPU (session 63).
    #[inline(always)]
    fn keep_codes(
        token: Avx512,
        codes: &[u32; 2 * WORD_BATCH + 16],
        from: usize,
        to: usize,
        bound: u32,
        out: &mut [u32],
    ) -> usize {
        let bound = _mm512_set1_epi32(bound as i32);
        let mut kept = 0;
        let mut at = from;
        while at < to {
            let v: __m512i = u32x16::from_slice(token, &codes[at..at + 16]).into();
            let lanes = if to - at >= 16 { u16::MAX } else { (1u16 << (to - at)) - 1 };
            let under = _mm512_mask_cmplt_epu32_mask(lanes, v, bound);
            let packed: u32x16<Avx512> = _mm512_maskz_compress_epi32(under, v).simd_into(token);
            out[kept..kept + 16].copy_from_slice(&<[u32; 16]>::from(packed));
            kept += under.count_ones() as usize;
            at += 16;
        }
        kept
    }
);

/// The CPU's vector instructions, detected once.
fn simd_level() -> Level {
    static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(Level::new)
}

impl Default for Shingler {
    fn default() -> Self {
        Self::new()
    }
}

impl Shingler {
    pub fn new() -> Shingler {
        let Spare { kept, picked, scratch } = SPARE.try_with(|s| s.take()).ok().flatten().unwrap_or_default();
        Shingler {
            partial: None,
            window: [0; WORDS],
            words: 0,
            level: 0,
            kept,
            picked,
            scratch,
            resumed: false,
            sorted: 0,
            parts: None,
        }
    }

    /// A shingler fed a content part by part, [`Shingler::next_part`]
    /// between them, whose sketch says which parts hold each sample
    /// ([`Shingler::finish_tagged`]). Shingles across parts are not
    /// taken: the caller shingles the words around each boundary
    /// (`segments::sketch_tagged`).
    pub fn tagging() -> Shingler {
        let mut s = Shingler::new();
        s.parts = Some(Box::default());
        s
    }

    /// Ends the current part: the next words begin a new one, and the
    /// first `WORDS − 1` of them complete no shingle. Called at a word
    /// start only.
    pub fn next_part(&mut self) {
        debug_assert!(self.partial.is_none(), "parts end where a word starts");
        self.tag_new();
        let p = self.parts.as_mut().expect("a shingler made by Shingler::tagging");
        p.part += 1;
        assert!((p.part as usize) < MAX_PARTS, "at most {MAX_PARTS} parts");
        self.words = 0;
    }

    /// Marks the codes kept since the last mark with the current part.
    fn tag_new(&mut self) {
        if let Some(p) = &mut self.parts {
            let bit = 1u32 << (CODE_BITS + p.part);
            for c in &mut self.kept[p.untagged..] {
                *c |= bit;
            }
            p.untagged = self.kept.len();
        }
    }

    /// A shingler holding the samples of a sketch as stored (`prior`), to
    /// be fed the rest of that content from the start of a word; None when
    /// the bytes are no sketch. The codes are decoded straight into the
    /// shingler's own buffer: decoding the samples and coding them again
    /// cost a burst of appended files ~2.5 % of the daemon's CPU.
    fn resume(prior: &[u8]) -> Option<Shingler> {
        let mut s = Shingler::new();
        s.level = rice_decode_into(prior, usize::MAX, &mut s.kept, |c, _| c).ok()?;
        s.resumed = true;
        // Decoded codes are sorted and distinct: each is the last plus a gap plus one.
        s.sorted = s.kept.len();
        Some(s)
    }

    /// Feeds the next bytes of the content.
    ///
    /// In two passes over each stretch of up to [`WORD_BATCH`] words:
    /// the words are found and hashed, then their shingles are sampled
    /// ([`Shingler::take_words`]). Each pass is a short loop with no
    /// branch that text makes unpredictable, where doing both per word
    /// kept more state than there are registers.
    pub fn feed(&mut self, data: &[u8]) {
        self.feed_at(simd_level(), data);
    }

    /// [`Shingler::feed`] with the vector instructions of `level`.
    fn feed_at(&mut self, level: Level, data: &[u8]) {
        dispatch!(level, simd => self.feed_with(simd, data))
    }

    /// [`Shingler::feed`] compiled for a set of vector instructions.
    #[inline(always)]
    fn feed_with<S: Simd>(&mut self, simd: S, data: &[u8]) {
        // Where the current word started in `data`, if it did (else it is
        // carried in `partial`, or there is no current word).
        let mut open: Option<usize> = None;
        let mut in_word = self.partial.is_some();
        let mut base: usize = 0;
        // The batch's word keys, after the last WORDS − 1 before it.
        let mut hashes = [0u64; WORDS - 1 + 2 * WORD_BATCH];
        hashes[..WORDS - 1].copy_from_slice(&self.window[1..]);
        let mut n = WORDS - 1;
        // Where the CPU has AVX-512 (with VBMI2), most blocks' words are
        // hashed eight at a time (`block_word_keys`, below).
        #[cfg(target_arch = "x86_64")]
        let avx512 = simd.level().as_avx512();
        for block in data.chunks(64) {
            let len = block.len();
            let space = match <&[u8; 64]>::try_from(block) {
                Ok(b) => space_mask64(simd, b),
                Err(_) => {
                    // The piece's last block, padded (a zero byte is no
                    // whitespace, and `valid` drops its bits anyway).
                    let mut padded = [0u8; 64];
                    padded[..len].copy_from_slice(block);
                    space_mask64(simd, &padded)
                }
            };
            let valid = if len == 64 { u64::MAX } else { (1u64 << len) - 1 };
            // Bit k of `prev`: the byte before byte k is whitespace (or
            // there is none and no word runs on into this piece).
            let prev = (space << 1) | u64::from(!in_word);
            let mut starts = !space & prev & valid;
            let mut ends = space & !prev & valid;
            // Where the CPU has AVX-512, the words of a block of four or
            // more are hashed together from a window of the block, the 48
            // bytes before it (a word begun there and ending here is one
            // of them) and the 16 after. (A block of fewer, as binary data
            // has, is left to the loop below: most of its words are long.)
            #[cfg(target_arch = "x86_64")]
            let window = match avx512 {
                Some(t) if ends.count_ones() >= 4 => {
                    base.checked_sub(48).and_then(|w| data.get(w..base + 80)).map(|w| (t, w))
                }
                _ => None,
            };
            #[cfg(target_arch = "x86_64")]
            let carried = match (window, open) {
                (Some(_), Some(s)) if in_word && s + 48 >= base => Some((s + 48 - base) as u8),
                _ => None,
            };
            #[cfg(not(target_arch = "x86_64"))]
            let carried: Option<u8> = None;
            if in_word && ends != 0 && carried.is_none() {
                // The first end closes a word begun before this block.
                let at = base + ends.trailing_zeros() as usize;
                ends &= ends - 1;
                hashes[n] = match open.take() {
                    Some(s) => hash_word(data, s, at),
                    None => {
                        let mut st = self.partial.take().expect("a word ends only after it began");
                        st.feed(&data[..at]);
                        st.key()
                    }
                };
                n += 1;
            }
            // Every other end closes a word begun in this block, and
            // starts and ends alternate: the k-th of each pair up.
            #[cfg(target_arch = "x86_64")]
            if let (Some((t, window)), true) = (window, ends != 0) {
                let window: &[u8; 128] = window.try_into().expect("128 bytes");
                let out: &mut [u64; 32] = (&mut hashes[n..n + 32]).try_into().expect("room for a block's words");
                block_word_keys(t, window, carried, starts, ends, out);
                n += ends.count_ones() as usize;
                if carried.is_some() {
                    open = None;
                }
                // Starts and ends alternate: what is left is the start of
                // a word that runs on past the block, after the last end.
                starts &= (u64::MAX << (63 - ends.leading_zeros())) << 1;
                ends = 0;
            }
            while ends != 0 {
                let s = base + starts.trailing_zeros() as usize;
                let e = base + ends.trailing_zeros() as usize;
                starts &= starts - 1;
                ends &= ends - 1;
                hashes[n] = hash_word(data, s, e);
                n += 1;
            }
            if starts != 0 {
                open = Some(base + starts.trailing_zeros() as usize);
            }
            in_word = if len == 0 { in_word } else { space >> (len - 1) & 1 == 0 };
            base += len;
            // A block holds at most 32 words: the next one fits.
            if n >= WORD_BATCH {
                self.take_words(simd, &mut hashes, n);
                n = WORDS - 1;
            }
        }
        self.take_words(simd, &mut hashes, n);
        if in_word {
            // The word goes on in the next piece: keep its hash state.
            let mut st = self.partial.take().unwrap_or_default();
            st.feed(&data[open.unwrap_or(0)..]);
            self.partial = Some(st);
        }
    }

    /// Takes the word keys `hashes[WORDS - 1..n]` (after the last
    /// `WORDS − 1` before them) into the window of the last [`WORDS`], keeps
    /// the samples of the shingles they complete whose level is kept, and moves the
    /// last `WORDS − 1` to the front for the next batch.
    ///
    /// The shingles' codes are computed in one loop with nothing carried
    /// from one to the next, which the compiler vectorises where the CPU
    /// multiplies 64-bit lanes (AVX-512), and kept in a second with no
    /// branch per shingle.
    #[inline(always)]
    fn take_words<S: Simd>(&mut self, simd: S, hashes: &mut [u64; WORDS - 1 + 2 * WORD_BATCH], n: usize) {
        let new = n - (WORDS - 1);
        if new == 0 {
            return;
        }
        // The content's first words complete no shingle.
        let skip = (WORDS as u64 - 1).saturating_sub(self.words).min(new as u64) as usize;
        // (16 more, that AVX-512 may read whole vectors of them.)
        let mut codes = [0u32; 2 * WORD_BATCH + 16];
        for (k, c) in codes[..new].iter_mut().enumerate() {
            let w: &[u64; WORDS] = hashes[k..k + WORDS].try_into().expect("a window");
            *c = code(shingle_hash_of_keys(w));
        }
        // A sample is kept when its level is, so when its bit length is at
        // most 32 − level.
        let bound = 33u32.saturating_sub(u32::from(self.level)) << SAMPLE_BITS;
        keep_under(simd, &codes, skip, new, bound, &mut self.kept);
        self.words += new as u64;
        self.window.copy_from_slice(&hashes[n - WORDS..n]);
        hashes.copy_within(n - (WORDS - 1)..n, 0);
        if self.kept.len() >= 4 * EXACT_UP_TO {
            self.compact();
        }
    }

    /// Sorts and dedups the samples, raising the level until they fit.
    fn compact(&mut self) {
        // Monomorphised, so that a sketch made without parts pays for
        // none of their masks.
        if self.parts.is_some() {
            self.compact_as::<true>()
        } else {
            self.compact_as::<false>()
        }
    }

    fn compact_as<const TAGGED: bool>(&mut self) {
        let mask = if TAGGED { CODE_MASK } else { u32::MAX };
        if TAGGED {
            self.tag_new();
        }
        if self.sorted > 0 {
            self.merge_new_samples();
        } else if !self.sort_deciding_samples::<TAGGED>() {
            radix_sort::<TAGGED>(&mut self.kept, &mut self.scratch);
            dedup::<TAGGED>(&mut self.kept);
        }
        if self.level > 0 || self.kept.len() > EXACT_UP_TO {
            while self.kept.len() > MAX_SAMPLES {
                self.level += 1;
                // Samples of the new level are a prefix: smaller numbers, whose
                // codes start with a bit length of at most 32 − level.
                let bound = 33u32.saturating_sub(u32::from(self.level)) << SAMPLE_BITS;
                let n = self.kept.partition_point(|&c| c & mask < bound);
                if let (true, Some(p)) = (TAGGED, &mut self.parts) {
                    // Distinct samples of the level just left, each in the
                    // first part holding it: they prove the level after
                    // an edit elsewhere (`segments`).
                    p.below = [0; MAX_PARTS];
                    for &c in &self.kept[n..] {
                        if parts_of(c) != 0 {
                            p.below[parts_of(c).trailing_zeros() as usize] += 1;
                        }
                    }
                }
                self.kept.truncate(n);
            }
        }
        if let Some(p) = &mut self.parts {
            p.untagged = self.kept.len();
        }
        if self.resumed {
            self.sorted = self.kept.len();
        }
    }

    /// Sorts and dedups `kept` when its first `sorted` are: the few new
    /// samples of a resumed shingler are sorted alone and merged in, where
    /// sorting them all again took most of [`sketch_grown`]'s time. They
    /// are merged in place from the back, so that the samples before the
    /// smallest new one stay where they are (copying them all to a second
    /// buffer was ~1.5 % of the daemon's CPU in a burst of appended files).
    fn merge_new_samples(&mut self) {
        let sorted = self.sorted;
        let new = &mut self.scratch;
        new.clear();
        new.extend_from_slice(&self.kept[sorted..]);
        self.kept.truncate(sorted);
        new.sort_unstable();
        new.dedup();
        let old = &self.kept[..];
        new.retain(|c| old.binary_search(c).is_err());
        let (n, m) = (self.kept.len(), new.len());
        self.kept.resize(n + m, 0);
        let (mut i, mut j) = (n, m);
        while j > 0 {
            // The larger of the two last ones not yet placed goes last.
            if i > 0 && self.kept[i - 1] > new[j - 1] {
                self.kept[i + j - 1] = self.kept[i - 1];
                i -= 1;
            } else {
                self.kept[i + j - 1] = new[j - 1];
                j -= 1;
            }
        }
    }

    /// Leaves in `kept`, sorted and distinct, only the samples the level
    /// is decided on, when those are enough to decide it; else false, with
    /// `kept` as it was.
    ///
    /// With `bound` the most the current level may keep ([`EXACT_UP_TO`]
    /// at level 0, else [`MAX_SAMPLES`]), they are the samples of the
    /// highest level `top` holding more than `bound` samples, repeats
    /// counted. If more than `bound` of them are distinct, no level up to
    /// `top` fits and the level is found among them; otherwise (a content
    /// repeating itself) the caller sorts them all. The sketch is the same
    /// either way, and a content of ~5,000 shingles sorts about half of
    /// them (`sketch-32k-files/text` −11 %).
    fn sort_deciding_samples<const TAGGED: bool>(&mut self) -> bool {
        let mask = if TAGGED { CODE_MASK } else { u32::MAX };
        let bound = if self.level == 0 { EXACT_UP_TO } else { MAX_SAMPLES };
        if self.kept.len() <= bound {
            return false;
        }
        // Counted in four tables: most samples fall in the lowest levels,
        // and one table's increments of one counter would wait on each other.
        let mut counts = [[0u32; 33]; 4];
        let mut quads = self.kept.chunks_exact(4);
        for q in quads.by_ref() {
            for (c, &s) in counts.iter_mut().zip(q) {
                c[level_of_code(s & mask) as usize] += 1;
            }
        }
        for &s in quads.remainder() {
            counts[0][level_of_code(s & mask) as usize] += 1;
        }
        let mut at_least = 0;
        let Some(top) = (usize::from(self.level) + 1..33).rev().find(|&l| {
            at_least += counts.iter().map(|c| c[l] as usize).sum::<usize>();
            at_least > bound
        }) else {
            return false;
        };
        // Branch-free selection: each sample is written, and kept when its
        // level is high enough.
        if self.picked.len() < self.kept.len() {
            self.picked.resize(self.kept.len(), 0);
        }
        let mut n = 0;
        for &s in &self.kept {
            self.picked[n] = s;
            n += usize::from(level_of_code(s & mask) as usize >= top);
        }
        self.picked.truncate(n);
        radix_sort::<TAGGED>(&mut self.picked, &mut self.scratch);
        dedup::<TAGGED>(&mut self.picked);
        if self.picked.len() <= bound {
            return false;
        }
        std::mem::swap(&mut self.kept, &mut self.picked);
        true
    }

    /// Takes the word the bytes fed end in, if they end in one.
    fn take_last_word(&mut self) {
        if let Some(st) = self.partial.take() {
            // The last word, taken as a batch of one.
            let mut keys = [0u64; WORDS - 1 + 2 * WORD_BATCH];
            keys[..WORDS - 1].copy_from_slice(&self.window[1..]);
            keys[WORDS - 1] = st.key();
            dispatch!(Level::baseline(), simd => self.take_words(simd, &mut keys, WORDS));
        }
    }

    /// The sketch of everything fed.
    pub fn finish(mut self) -> Sketch {
        self.take_last_word();
        // A content of 1..WORDS-1 words has its whole word sequence as its
        // one shingle (as the reference scorer does).
        if self.words > 0 && self.words < WORDS as u64 && !self.resumed && self.parts.is_none() {
            let n = self.words as usize;
            let mut seq = [0u64; WORDS];
            seq[..n].copy_from_slice(&self.window[WORDS - n..]);
            // Its one sample, at level 0 (nothing else was kept).
            self.kept.push(code(shingle_hash_of_keys(&seq[..n])));
        }
        self.compact();
        // A copy of just the samples: the buffer, grown to thousands,
        // goes back to the thread's spare when `self` drops.
        let samples = self.kept.iter().map(|&c| uncode(c).expect("the code of a rounded sample")).collect();
        Sketch { level: self.level, samples }
    }

    /// The sketch of everything fed part by part ([`Shingler::tagging`]),
    /// with the parts holding each sample and the bounds of the level below.
    pub fn finish_tagged(mut self) -> (Sketch, Vec<u16>, [u32; MAX_PARTS]) {
        self.take_last_word();
        self.compact();
        let parts = self.kept.iter().map(|&c| parts_of(c) as u16).collect();
        let samples = self.kept.iter().map(|&c| uncode(c & CODE_MASK).expect("the code of a rounded sample")).collect();
        let below = match &self.parts {
            Some(p) if self.level > 0 => p.below,
            _ => [0; MAX_PARTS],
        };
        (Sketch { level: self.level, samples }, parts, below)
    }
}

/// Sorts the [`code`]s of rounded samples, which fit in 22 bits: two
/// passes of 11 bits, where sorting the samples themselves by bytes took
/// three (a sample's top three bytes all vary), and the counts of both
/// passes are taken in one read. `scratch` is the second buffer. A
/// content's samples are sorted once at least, and for the many small
/// files of a document tree (hundreds of samples each) a comparison sort
/// was ~45 % of their sketching. (The samples are kept as codes while a
/// sketch is made, so the sort converts nothing.)
fn radix_sort<const TAGGED: bool>(v: &mut Vec<u32>, scratch: &mut Vec<u32>) {
    const DIGIT: u32 = CODE_BITS / 2;
    const BUCKETS: usize = 1 << DIGIT;
    // Two 2,048-entry tables to fill and sum: a comparison sort is quicker
    // below several hundred values.
    if v.len() < 512 {
        // By the code alone: parts above it ride along.
        if TAGGED {
            v.sort_unstable_by_key(|&c| c & CODE_MASK);
        } else {
            v.sort_unstable();
        }
        return;
    }
    let mut counts = [[0u32; BUCKETS]; 2];
    for &x in v.iter() {
        debug_assert!(TAGGED || x < 1 << CODE_BITS, "only codes are sorted");
        counts[0][x as usize & (BUCKETS - 1)] += 1;
        counts[1][(x >> DIGIT) as usize & (BUCKETS - 1)] += 1;
    }
    // The scratch buffer only grows: what it holds is overwritten.
    let n = v.len();
    if scratch.len() < n {
        scratch.resize(n, 0);
    }
    for (d, c) in counts.iter_mut().enumerate() {
        let shift = DIGIT * d as u32;
        if c[(v[0] >> shift) as usize & (BUCKETS - 1)] as usize == n {
            continue;
        }
        let mut sum = 0;
        for k in c.iter_mut() {
            (*k, sum) = (sum, sum + *k);
        }
        for &x in &v[..n] {
            let b = (x >> shift) as usize & (BUCKETS - 1);
            scratch[c[b] as usize] = x;
            c[b] += 1;
        }
        // `v` may now be the longer of the two: its first `n` are sorted.
        std::mem::swap(v, scratch);
    }
    v.truncate(n);
}

/// The level of the sample a [`code`] stands for: 32 less its bit length.
fn level_of_code(code: u32) -> u8 {
    32u32.saturating_sub(code >> SAMPLE_BITS) as u8
}

/// The parts a tagged code's shingles lie in ([`Shingler::tagging`]).
fn parts_of(code: u32) -> u32 {
    code >> CODE_BITS
}

/// Dedups sorted codes, merging the parts of equal ones when tagged.
fn dedup<const TAGGED: bool>(v: &mut Vec<u32>) {
    if !TAGGED {
        v.dedup();
        return;
    }
    v.dedup_by(|later, kept| {
        let same = (*later ^ *kept) & CODE_MASK == 0;
        if same {
            *kept |= *later & !CODE_MASK;
        }
        same
    });
}

/// Odd constants weighting the words of a shingle by position, so that the
/// sample depends on their order.
const C: [u64; WORDS] = [0xc2b2_ae3d_27d4_eb4f, 0x1656_67b1_9e37_79f9, 0xd6e8_feb8_6659_fd93, 0xa076_1d64_78bd_642f];

/// The hash of one shingle (a sequence of at most [`WORDS`] word hashes),
/// whose [`round`]ing is its sample: a position-weighted sum (the products
/// are independent, so a CPU does them side by side) folded once more, top
/// 32 bits.
#[cfg(test)]
fn shingle_hash(words: &[u64]) -> u32 {
    let mut h = words.len() as u64;
    for (w, c) in words.iter().zip(C) {
        h = h.wrapping_add(w.wrapping_mul(c));
    }
    ((h ^ (h >> 32)).wrapping_mul(M) >> 32) as u32
}

/// [`shingle_hash`] of the words whose *keys* are given, a word's key
/// being its hash before the last multiplication by `M`: each key is
/// multiplied by `C[i]·M` instead, which is the same product modulo 2^64
/// and spares the words' pass one multiplication per word.
#[inline(always)]
fn shingle_hash_of_keys(keys: &[u64]) -> u32 {
    const CM: [u64; WORDS] = {
        let mut cm = C;
        let mut i = 0;
        while i < WORDS {
            cm[i] = C[i].wrapping_mul(M);
            i += 1;
        }
        cm
    };
    let mut h = keys.len() as u64;
    for (k, c) in keys.iter().zip(CM) {
        h = h.wrapping_add(k.wrapping_mul(c));
    }
    ((h ^ (h >> 32)).wrapping_mul(M) >> 32) as u32
}

/// The sketch of an in-memory content.
pub fn sketch_bytes(data: &[u8]) -> Sketch {
    let mut s = Shingler::new();
    s.feed(data);
    s.finish()
}

/// How far back from its end [`sketch_grown`] looks for the start of a
/// prior content's last words before it gives up (a content whose end is
/// one long run without whitespace is sketched whole).
pub const GROWN_LOOK_BACK: usize = 64 << 10;

/// The sketch of `data`, whose first `prior_len` bytes are a content whose
/// sketch is `prior` (as stored: [`sketch_of_bytes`] takes it), made from
/// that sketch and the bytes past them: the same sketch as
/// [`sketch_bytes`]'s, at the cost of the new bytes.
///
/// A file grown at its end (a log appended to, a document given a new
/// paragraph) keeps every shingle it had when its earlier content's last
/// word ended where that content did: when the content ended with
/// whitespace, or what was added begins with it (a line added to a file
/// that had no newline at its end, a binary file grown by text). Its
/// shingle set is then the earlier set and the shingles that take a word
/// past `prior_len`, which all start within the earlier content's last
/// `WORDS − 1` words. The earlier sketch keeps every
/// sample of its level or above, and a larger set only ever needs a level
/// as high or higher, so the samples of the earlier sketch and of those
/// new shingles, thinned as any sketch is, are the sketch of the whole.
///
/// The caller vouches that `data[..prior_len]` is the content `prior`
/// sketches (the fingerprint checks its content hash). None, and the
/// content is to be sketched whole, when neither that content ends with
/// whitespace nor the bytes after it begin with it (its last word goes
/// on), when it has fewer than [`WORDS`] words
/// (a content of a few words is one shingle of them all), or ends in a
/// run longer than [`GROWN_LOOK_BACK`] without them; or when `prior` is
/// not a sketch's bytes (or holds a sample no sketch keeps).
pub fn sketch_grown(prior: &[u8], data: &[u8], prior_len: usize) -> Option<Sketch> {
    if prior_len > data.len() {
        return None;
    }
    let end = &data[prior_len.saturating_sub(GROWN_LOOK_BACK)..prior_len];
    let mut s = Shingler::grown(prior, end, data.get(prior_len).copied())?;
    s.feed(&data[prior_len..]);
    Some(s.finish())
}

/// The sketch of `data`, whose last `prior_len` bytes are a content whose
/// sketch is `prior` (as stored: [`sketch_of_bytes`] takes it), made from
/// that sketch and the bytes before them: the same sketch as
/// [`sketch_bytes`]'s, at the cost of the new bytes.
///
/// A file given new text at its start (a changelog or a news page given
/// an entry at its top) keeps every shingle it had when the new text ends
/// at a word break: when it ends with whitespace, or the earlier content
/// begins with it. Its shingle set is then the earlier set and the
/// shingles that start in the new text, which end within the earlier
/// content's first `WORDS − 1` words; a larger set needs a level as high
/// or higher, as for [`sketch_grown`].
///
/// The caller vouches that `data[data.len() - prior_len..]` is the content
/// `prior` sketches. None, and the content is to be sketched whole, when
/// the new text ends inside a word that the earlier content goes on with,
/// when that content has fewer than [`WORDS`] words or they do not start
/// within [`GROWN_LOOK_BACK`] of it, or when `prior` is not a sketch's
/// bytes; also when there are no new bytes.
pub fn sketch_prepended(prior: &[u8], data: &[u8], prior_len: usize) -> Option<Sketch> {
    let at = data.len().checked_sub(prior_len).filter(|&at| at > 0)?;
    let to = Shingler::prepended_to(&data[at..], data[at - 1])?;
    let mut s = Shingler::resume(prior)?;
    s.feed(&data[..at + to]);
    Some(s.finish())
}

impl Shingler {
    /// A shingler that goes on from an earlier content, to be fed what
    /// follows it ([`sketch_grown`], whose conditions it checks): `prior`
    /// is that content's sketch as stored, `end` its last bytes, its last
    /// [`GROWN_LOOK_BACK`] or all of them, and `next` the first byte
    /// after them, if known.
    pub fn grown(prior: &[u8], end: &[u8], next: Option<u8>) -> Option<Shingler> {
        let from = Shingler::grown_from(end, next)?;
        let mut s = Shingler::resume(prior)?;
        s.feed(&end[from..]);
        Some(s)
    }

    /// Where the new text before an earlier content (`earlier`, its bytes
    /// or their first [`GROWN_LOOK_BACK`] at least) is fed up to, relative
    /// to that content: to the end of its first `WORDS − 1` words, the last
    /// a shingle starting in the new text can take. `before` is the new
    /// text's last byte. None when the content's first word may go on from
    /// the new text's last (neither is whitespace), or when the content
    /// has fewer than [`WORDS`] words within the look-back.
    pub fn prepended_to(earlier: &[u8], before: u8) -> Option<usize> {
        if !is_space(before) && !earlier.first().is_some_and(|&b| is_space(b)) {
            return None;
        }
        let earlier = &earlier[..earlier.len().min(GROWN_LOOK_BACK)];
        // Over the first WORDS − 1 words, to where the next one starts.
        let (mut at, mut end) = (0, 0);
        for k in 0..WORDS {
            at += earlier[at..].iter().position(|&b| !is_space(b))?;
            if k == WORDS - 1 {
                return Some(end);
            }
            at += earlier[at..].iter().position(|&b| is_space(b))?;
            end = at;
        }
        unreachable!("the loop returns at its last word")
    }

    /// Where in `end` (as [`Shingler::grown`] takes it) the shingler that
    /// goes on from it starts: at its last `WORDS − 1` words; None when it
    /// cannot go on from there. Its last word is whole when it ends with
    /// whitespace or `next`, the byte that follows it, is whitespace.
    pub fn grown_from(end: &[u8], next: Option<u8>) -> Option<usize> {
        if !end.last().is_some_and(|&b| is_space(b)) && !next.is_some_and(is_space) {
            return None;
        }
        // Back over the last WORDS − 1 words, and then to the word before.
        let mut at = end.len();
        for k in 0..WORDS {
            while at > 0 && is_space(end[at - 1]) {
                at -= 1;
            }
            if at == 0 {
                return None;
            }
            if k == WORDS - 1 {
                break;
            }
            while at > 0 && !is_space(end[at - 1]) {
                at -= 1;
            }
        }
        // `at` ends the word before them: they start at the next word.
        Some(at + end[at..].iter().position(|&b| !is_space(b)).expect("a word follows"))
    }
}

#[cfg(test)]
mod edit_model;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The splitmix64 finaliser: every input bit reaches every output bit.
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

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

    /// The densest text, a one-letter word every two bytes (32 to a
    /// 64-byte block), fills the shingler's batch of word hashes fastest.
    #[test]
    fn one_letter_words_fill_the_batch_and_are_sketched_as_defined() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| [b'a' + (mix(u64::from(i)) % 26) as u8, b' ']).collect();
        for piece in [data.len(), 4096, 63] {
            let mut s = Shingler::new();
            for p in data.chunks(piece) {
                s.feed(p);
            }
            assert_eq!(s.finish(), sketch_by_definition(&data), "pieces of {piece} bytes");
        }
    }

    /// Every set of vector instructions this CPU has.
    fn cpu_levels() -> Vec<Level> {
        #[allow(unused_mut)]
        let mut levels = vec![Level::baseline()];
        #[cfg(target_arch = "x86_64")]
        {
            let detected = Level::new();
            levels.extend(detected.as_sse4_2().map(Level::Sse4_2));
            levels.extend(detected.as_avx2().map(Level::Avx2));
            levels.extend(detected.as_avx512().map(Level::Avx512));
        }
        levels
    }

    /// Every instruction set the loops are compiled for that this CPU
    /// has, the baseline included, gives the defined sketch: bytes of every
    /// value (those over 127 test that whitespace is compared unsigned).
    #[test]
    fn every_instruction_set_the_cpu_has_sketches_as_defined() {
        let data: Vec<u8> = (0..200_000u64)
            .map(|i| match mix(i) % 7 {
                0 => b" \t\n\r\x0b\x0c"[(mix(i) >> 8) as usize % 6],
                1 => (mix(i) >> 8) as u8,
                _ => b'a' + (mix(i) >> 8) as u8 % 3,
            })
            .collect();
        let expected = sketch_by_definition(&data);
        for level in cpu_levels() {
            let mut s = Shingler::new();
            for p in data.chunks(1000) {
                s.feed_at(level, p);
            }
            assert_eq!(s.finish(), expected, "{level:?}");
        }
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
    fn the_bounded_estimate_agrees_or_says_it_cannot_pass() {
        let a = sketch_bytes(&words(3000, 7));
        for (n, seed) in [(3000, 7), (2000, 7), (3000, 8), (300, 7)] {
            let b = sketch_bytes(&words(n, seed));
            let full = a.estimate(&b);
            let passes = full.resemblance >= 0.5 || full.containment() >= 0.8;
            match a.estimate_if(&b, 0.5, 0.8) {
                Some(e) => assert!(passes && e == full, "{n} {seed}: {e:?} {full:?}"),
                None => assert!(!passes, "{n} {seed}: {full:?}"),
            }
        }
    }

    /// `shared_at_least` both ways round, with every set of vector
    /// instructions this CPU has, against a count by binary search.
    fn shared_counted_alike(
        a: std::collections::BTreeSet<u32>,
        b: std::collections::BTreeSet<u32>,
        need: usize,
    ) -> Result<(), TestCaseError> {
        let (a, b): (Vec<u32>, Vec<u32>) = (a.into_iter().collect(), b.into_iter().collect());
        let n = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
        let want = (n >= need).then_some(n);
        for level in cpu_levels() {
            prop_assert_eq!(shared_at_least_at(level, &a, &b, need), want, "{:?}", level);
            prop_assert_eq!(shared_at_least_at(level, &b, &a, need), want, "{:?}", level);
        }
        Ok(())
    }

    /// Long lists that share most of their values, asked for as many as
    /// they share: a merge that stopped early on one half's bound alone
    /// would miss what the other half still holds.
    #[test]
    fn shared_samples_are_found_when_just_enough() {
        let a: std::collections::BTreeSet<u32> = (0..1200).map(|k| 3 * k).collect();
        let b: std::collections::BTreeSet<u32> =
            (0..1200).filter(|k| k % 7 != 0).map(|k| 3 * k).chain((0..300).map(|k| 15 * k + 1)).collect();
        let shared = a.intersection(&b).count();
        for need in [0, 1, shared / 2, shared - 1, shared, shared + 1] {
            shared_counted_alike(a.clone(), b.clone(), need).unwrap();
        }
    }

    proptest! {
        #[test]
        fn shared_samples_are_counted_alike_however_lopsided(a in proptest::collection::btree_set(0u32..5000, 0..40), b in proptest::collection::btree_set(0u32..5000, 0..1500), need in 0usize..30) {
            shared_counted_alike(a, b, need)?;
        }

        #[test]
        fn shared_samples_are_counted_alike_in_blocks(a in proptest::collection::btree_set(0u32..1500, 0..600), b in proptest::collection::btree_set(0u32..1500, 0..600), need in 0usize..400) {
            shared_counted_alike(a, b, need)?;
        }
    }

    #[test]
    fn containment_of_a_part() {
        let a = words(3000, 7);
        let part = &a[..a.len() / 3];
        let e = sketch_bytes(part).estimate(&sketch_bytes(&a));
        assert!(e.a_in_b > 0.9, "{e:?}");
        assert!((e.b_in_a - 1.0 / 3.0).abs() < 0.1, "{e:?}");
    }

    proptest! {
        #[test]
        fn codes_keep_rounded_samples_and_their_order(a in any::<u32>(), b in any::<u32>()) {
            let (ra, rb) = (round(a), round(b));
            prop_assert_eq!(round(ra), ra);
            prop_assert_eq!(uncode(code(ra)), Some(ra));
            prop_assert_eq!(ra.cmp(&rb), code(ra).cmp(&code(rb)));
            prop_assert_eq!(level_of(ra), level_of(a));
            // A hash's code is its rounded sample's, and tells its level.
            prop_assert_eq!(code(a), code(ra));
            prop_assert_eq!(level_of_code(code(a)), level_of(a));
            // Rounded down, by less than one unit of the 17th bit.
            prop_assert!(ra <= a && u64::from(a - ra) << (SAMPLE_BITS + 1) < 1u64 << (32 - a.leading_zeros()), "{a:#x} to {ra:#x}");
        }
    }

    #[test]
    fn a_code_no_rounded_sample_has_is_refused() {
        assert_eq!(uncode(5), None, "bit length 0 with a mantissa");
        assert_eq!(uncode(33 << SAMPLE_BITS), None, "bit length 33");
        assert_eq!(uncode((3 << SAMPLE_BITS) | 1), None, "bits below a short sample's last");
        assert_eq!(uncode((3 << SAMPLE_BITS) | (1 << (SAMPLE_BITS - 1))), Some(0b110));
    }

    #[test]
    fn round_trips_through_postcard() {
        for n in [0, 1, 3, 300, 5000, 50_000] {
            let s = sketch_bytes(&words(n, 3));
            let bytes = postcard::to_stdvec(&s).unwrap();
            assert_eq!(postcard::from_bytes::<Sketch>(&bytes).unwrap(), s, "{n} words");
            let old = postcard::to_stdvec(&GapCoded(s.clone())).unwrap();
            assert_eq!(postcard::from_bytes::<GapCoded>(&old).unwrap().0, s, "{n} words, the older encoding");
            if s.samples.len() > 100 {
                // 10-11.5 bits a sample, where the gaps as varints took 13.5-15.
                let bits = |b: &[u8]| 8.0 * b.len() as f64 / s.samples.len() as f64;
                assert!(bits(&bytes) < 0.8 * bits(&old), "{n} words: {} vs {}", bits(&bytes), bits(&old));
            }
        }
        assert!(postcard::from_bytes::<GapCoded>(&[0, 2, 5, 0]).is_err(), "repeated sample");
    }

    proptest! {
        #[test]
        fn any_sketch_round_trips(raw in proptest::collection::btree_set(any::<u32>(), 0..1200), level in 0u8..8) {
            let mut samples: Vec<u32> = raw.into_iter().map(round).filter(|&x| level_of(x) >= level).collect();
            samples.dedup();
            let s = Sketch { level, samples };
            let bytes = postcard::to_stdvec(&s).unwrap();
            prop_assert_eq!(postcard::from_bytes::<Sketch>(&bytes).unwrap(), s);
        }

        #[test]
        fn arbitrary_bytes_decode_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(s) = rice_decode(&bytes) {
                prop_assert!(s.samples.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(s.samples.iter().all(|&x| round(x) == x && level_of(x) >= s.level));
            }
        }

        /// The word-at-a-time writer puts down the bits of the format as
        /// `schema/content_chunks.md` defines them, as a writer of one bit
        /// at a time does: clustered samples with a few far apart give
        /// unary runs longer than a word.
        #[test]
        fn the_encoder_writes_the_format_bit_for_bit(
            near in proptest::collection::btree_set(0u32..1 << 12, 0..700),
            far in proptest::collection::btree_set(any::<u32>(), 0..6),
            level in 0u8..4,
        ) {
            let mut samples: Vec<u32> = near.into_iter().chain(far).map(round).filter(|&x| level_of(x) >= level).collect();
            samples.sort_unstable_by_key(|&x| code(x));
            samples.dedup();
            let s = Sketch { level, samples };
            prop_assert_eq!(rice_encode(&s), encode_bit_by_bit(&s));
        }
    }

    /// The stored form written the plain way: the header (with the
    /// encoder's own choice of parameter, [`rice_base`]), then each bit on
    /// its own, least significant first ([`rice_encode`] is the fast way).
    fn encode_bit_by_bit(s: &Sketch) -> Vec<u8> {
        let mut out = vec![s.level];
        let Some(&first) = s.samples.first() else { return vec![s.level, 0, 0] };
        let codes: Vec<u32> = s.samples.iter().map(|&x| code(x)).collect();
        let (top, base) = (top_len(s.level), rice_base(s));
        out.push(base);
        let mut n = codes.len();
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        let mut bits: Vec<bool> = (0..CODE_BITS).map(|i| code(first) >> i & 1 == 1).collect();
        for p in codes.windows(2) {
            let (gap, k) = (p[1] - p[0] - 1, rice_k(base, top, p[0] >> SAMPLE_BITS));
            bits.extend(std::iter::repeat_n(true, (gap >> k) as usize));
            bits.push(false);
            bits.extend((0..k).map(|i| gap >> i & 1 == 1));
        }
        out.extend(bits.chunks(8).map(|byte| byte.iter().rev().fold(0u8, |acc, &b| acc << 1 | u8::from(b))));
        out
    }

    #[test]
    fn a_sketch_no_encoder_makes_is_refused() {
        let s = sketch_bytes(&words(400, 9));
        let good = rice_encode(&s);
        assert!(rice_decode(&good[..good.len() - 3]).is_err(), "cut short");
        let mut more = good.clone();
        more[2] = more[2].wrapping_add(60);
        assert!(rice_decode(&more).is_err(), "more samples than bits");
        let mut high = good.clone();
        high[0] = 33;
        assert!(rice_decode(&high).is_err(), "level over 32");
        assert!(rice_decode(&[0]).is_err() && rice_decode(&[]).is_err(), "no header");
        assert_eq!(rice_decode(&[0, 0, 0]).unwrap(), Sketch::default());
        // A sample of a level below the sketch's, first or after others
        // (the decoder checks a code's level where its bit length changes).
        let below = |samples: &[u32]| encode_bit_by_bit(&Sketch { level: 4, samples: samples.to_vec() });
        let later = below(&[round(0x0100_0000), round(0x0800_0000), round(0xf000_0000)]);
        assert_eq!(rice_decode(&later), Err("sketch sample below its level"));
        assert_eq!(rice_decode(&below(&[round(0x1000_0000)])), Err("sketch sample below its level"));
        assert!(rice_decode(&below(&[round(0x0100_0000), round(0x0800_0000)])).is_ok());
    }

    #[test]
    fn posted_samples_are_the_smallest_and_decode_alone() {
        let s = sketch_bytes(&words(50_000, 5));
        assert_eq!(posted_of_bytes(&rice_encode(&s)).unwrap(), s.posted());
        let posted = s.posted();
        assert_eq!(posted.len(), POSTED);
        let max = *posted.last().unwrap();
        assert_eq!(s.samples.iter().filter(|&&x| x <= max).count(), POSTED);
        let small = sketch_bytes(b"just a few words here and there");
        assert_eq!(small.posted(), &small.samples[..], "a small content posts all");
        // The head: the level and count, read from the header alone (a
        // count of more than 127 takes two bytes of it).
        for s in [&s, &small, &Sketch::default()] {
            let head = head_of_bytes(&rice_encode(s)).unwrap();
            assert_eq!(head, (s.level, s.samples.len() as u32, s.posted().to_vec()));
        }
        assert!(s.samples.len() > 127 && s.level > 0);
    }

    /// The sketch as its definition reads, with none of the shingler's
    /// shortcuts: words split on whitespace byte by byte, each hashed by
    /// feeding it to a [`WordState`], every shingle's sample in a set, the
    /// level raised until the set fits.
    /// [`radix_sort`] of the codes `v`, with a scratch buffer of `left`
    /// values left over from an earlier sort (shorter or longer than `v`,
    /// anything in it), equals a comparison sort.
    fn radix_sorts_as_a_comparison_sort(mut v: Vec<u32>, left: usize) -> Result<(), TestCaseError> {
        let mut scratch = vec![u32::MAX; left];
        let mut expected = v.clone();
        expected.sort_unstable();
        radix_sort::<false>(&mut v, &mut scratch);
        prop_assert_eq!(v, expected);
        Ok(())
    }

    fn sketch_by_definition(data: &[u8]) -> Sketch {
        let words: Vec<u64> = data
            .split(|&b| SPACE[b as usize])
            .filter(|w| !w.is_empty())
            .map(|w| {
                let mut st = WordState::default();
                st.feed_bytes(w);
                st.finish()
            })
            .collect();
        let shingles: std::collections::BTreeSet<u32> = if words.len() < WORDS {
            words.is_empty().then(Default::default).unwrap_or_else(|| [round(shingle_hash(&words))].into())
        } else {
            words.windows(WORDS).map(|w| round(shingle_hash(w))).collect()
        };
        let mut level = 0u8;
        let mut samples: Vec<u32> = shingles.into_iter().collect();
        if samples.len() > EXACT_UP_TO {
            while samples.len() > MAX_SAMPLES {
                level += 1;
                samples.retain(|&s| level_of(s) >= level);
            }
        }
        Sketch { level, samples }
    }

    /// The sketch of `data` fed in pieces cut at `cuts` (any order, clamped).
    fn fed_in_pieces(data: &[u8], cuts: Vec<usize>) -> Sketch {
        fed_in_pieces_at(simd_level(), data, cuts)
    }

    /// [`fed_in_pieces`] with the vector instructions of `level`.
    fn fed_in_pieces_at(level: Level, data: &[u8], cuts: Vec<usize>) -> Sketch {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        let mut s = Shingler::new();
        let mut at = 0;
        for c in cuts {
            s.feed_at(level, &data[at..c]);
            at = c;
        }
        s.feed_at(level, &data[at..]);
        s.finish()
    }

    /// Text with words of every length from 1 to 40 bytes, so that words
    /// end at every offset of an 8-byte block, and runs of whitespace.
    fn ragged_text() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            (1usize..40, 0u8..26, prop_oneof![Just(&b" "[..]), Just(&b"\n"[..]), Just(&b" \t\r\n"[..])]),
            0..1500,
        )
        .prop_map(|words| {
            let mut out = Vec::new();
            for (len, c, sep) in words {
                out.extend((0..len).map(|i| b'a' + (c + i as u8) % 26));
                out.extend_from_slice(sep);
            }
            out
        })
    }

    /// An earlier content, from a few words to several thousand, or bytes
    /// of any value.
    fn earlier_text() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            ragged_text(),
            (0usize..5000, any::<u64>()).prop_map(|(n, seed)| words(n, seed)),
            proptest::collection::vec(prop_oneof![Just(b' '), 97u8..100, any::<u8>()], 0..3000),
        ]
    }

    /// Bytes added to an earlier content, at its end or its start.
    fn new_text() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            ragged_text(),
            (0usize..3000, any::<u64>()).prop_map(|(n, seed)| words(n, seed ^ 1)),
            proptest::collection::vec(prop_oneof![Just(b' '), 97u8..100, any::<u8>()], 0..300),
        ]
    }

    proptest! {
        #[test]
        fn the_shingler_computes_the_sketch_as_defined(data in prop_oneof![ragged_text(), proptest::collection::vec(prop_oneof![Just(b' '), 97u8..100, any::<u8>()], 0..20_000)]) {
            prop_assert_eq!(sketch_bytes(&data), sketch_by_definition(&data));
        }

        /// Contents larger than a sketch keeps, some repeating themselves
        /// (fewer distinct shingles than their count), fed in pieces: the
        /// level is decided on a part of the samples, or on all of them.
        #[test]
        fn large_and_repetitive_contents_are_sketched_as_defined(n in 0usize..12_000, repeats in 1usize..4, seed in any::<u64>(), piece in 1usize..100_000) {
            let data = words(n, seed).repeat(repeats);
            let mut s = Shingler::new();
            for p in data.chunks(piece) {
                s.feed(p);
            }
            prop_assert_eq!(s.finish(), sketch_by_definition(&data));
        }

        #[test]
        fn any_split_gives_the_same_sketch(data in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'\n'), 97u8..100, any::<u8>()], 0..3000), cuts in proptest::collection::vec(0usize..3000, 0..8)) {
            prop_assert_eq!(fed_in_pieces(&data, cuts), sketch_bytes(&data));
        }

        /// Words of every length, in blocks of a few or of many (AVX-512
        /// hashes those of a block of four or more eight at a time, and
        /// hashes whole those of 16 bytes or more), fed in pieces, with
        /// every set of vector instructions this CPU has.
        #[test]
        fn every_instruction_set_hashes_words_of_any_length_as_defined(data in ragged_text(), cuts in proptest::collection::vec(0usize..40_000, 0..8)) {
            let expected = sketch_by_definition(&data);
            for level in cpu_levels() {
                prop_assert_eq!(fed_in_pieces_at(level, &data, cuts.clone()), expected.clone(), "{:?}", level);
            }
        }

        /// Long words (a zero-filled file is one) cut by the pieces at
        /// every offset: hashed a block at a time where they run on.
        #[test]
        fn long_words_across_pieces_are_hashed_as_defined(data in proptest::collection::vec(prop_oneof![40 => 97u8..100, 1 => Just(b' ')], 0..6000), cuts in proptest::collection::vec(0usize..6000, 0..12)) {
            prop_assert_eq!(fed_in_pieces(&data, cuts), sketch_by_definition(&data));
        }

        #[test]
        fn the_space_mask_matches_the_table(bytes in any::<[u8; 64]>(), pick in any::<[bool; 64]>(), ws in any::<[u8; 64]>()) {
            // Whitespace mixed in on purpose: random bytes seldom are.
            let mut b = bytes;
            for i in 0..64 {
                if pick[i] {
                    b[i] = b" \t\n\x0b\x0c\r\x1f!\x08\x0e"[ws[i] as usize % 10];
                }
            }
            let expected = (0..64).fold(0u64, |m, i| m | u64::from(SPACE[b[i] as usize]) << i);
            for level in [Level::baseline(), simd_level()] {
                prop_assert_eq!(dispatch!(level, simd => space_mask64(simd, &b)), expected, "{:?}", level);
            }
        }

        #[test]
        fn radix_sort_sorts(v in proptest::collection::vec(prop_oneof![any::<u32>(), (0u32..300).prop_map(|x| x << 20), Just(7u32), 0u32..1 << 17], 0..3000), left in 0usize..4000) {
            radix_sorts_as_a_comparison_sort(v.into_iter().map(code).collect(), left)?;
        }

        #[test]
        fn radix_sort_sorts_when_a_pass_is_skipped(high in proptest::collection::vec(0u32..1 << 11, 512..3000), left in 0usize..4000) {
            // One digit the same in every code: its pass is skipped, and the
            // sorted codes end in what was the scratch buffer.
            radix_sorts_as_a_comparison_sort(high.into_iter().map(|h| h << 11).collect(), left)?;
        }

        #[test]
        fn the_sketch_is_bounded_and_its_level_minimal(n in 0usize..6000, seed in any::<u64>()) {
            let s = sketch_bytes(&words(n, seed));
            // Every shingle of a content of up to EXACT_UP_TO, else a sample.
            let bound = if s.level == 0 { EXACT_UP_TO } else { MAX_SAMPLES };
            prop_assert!(s.samples.len() <= bound);
            prop_assert!(s.level == 0 || n > EXACT_UP_TO);
            prop_assert!(s.samples.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(s.samples.iter().all(|&x| level_of(x) >= s.level));
        }

        /// A content grown at its end is sketched from its earlier sketch
        /// as from its bytes, whenever the earlier content's last word ends
        /// where it does (it ends with whitespace, or the new bytes begin
        /// with it) and it has a whole shingle; else it is to be sketched
        /// whole. The earlier contents run from a few words to several
        /// thousand (a level above 0, which the new words may raise).
        #[test]
        fn a_grown_content_is_sketched_from_its_earlier_sketch_as_from_its_bytes(
            prior in earlier_text(),
            tail in new_text(),
        ) {
            let mut data = prior.clone();
            data.extend_from_slice(&tail);
            let words = prior.split(|&b| SPACE[b as usize]).filter(|w| !w.is_empty()).count();
            // The earlier content's last word ends where it does.
            let word_break = [prior.last(), tail.first()].into_iter().flatten().any(|&b| SPACE[b as usize]);
            let usable = word_break && words >= WORDS;
            let grown = sketch_grown(&rice_encode(&sketch_bytes(&prior)), &data, prior.len());
            prop_assert_eq!(grown.is_some(), usable);
            if let Some(grown) = grown {
                prop_assert_eq!(grown, sketch_by_definition(&data));
            }
        }

        /// A content given new bytes at its start, sketched from its
        /// earlier sketch and those bytes: the sketch of the whole, when the
        /// new bytes end at a word break and the earlier content has a
        /// whole shingle; else it is to be sketched whole.
        #[test]
        fn a_content_given_a_new_start_is_sketched_from_its_earlier_sketch_as_from_its_bytes(
            prior in earlier_text(),
            head in new_text(),
        ) {
            let data = [&head[..], &prior[..]].concat();
            let words = prior.split(|&b| SPACE[b as usize]).filter(|w| !w.is_empty()).count();
            // The new bytes' last word ends where they do; no new bytes
            // is no new start (the caller has the content's sketch).
            let word_break = [head.last(), prior.first()].into_iter().flatten().any(|&b| SPACE[b as usize]);
            let usable = !head.is_empty() && word_break && words >= WORDS;
            let got = sketch_prepended(&rice_encode(&sketch_bytes(&prior)), &data, prior.len());
            prop_assert_eq!(got.is_some(), usable);
            if let Some(got) = got {
                prop_assert_eq!(got, sketch_by_definition(&data));
            }
        }
    }

    #[test]
    fn a_content_given_a_new_start_needs_a_word_break_before_it_and_a_whole_shingle() {
        let grow = |head: &[u8], prior: &[u8]| {
            let data = [head, prior].concat();
            sketch_prepended(&rice_encode(&sketch_bytes(prior)), &data, prior.len())
        };
        let prior = b"one two three four five\n";
        // "zero" might go on as "zeroone": the earlier shingles would go.
        assert_eq!(grow(b"zero", prior), None);
        assert_eq!(grow(b"zero\n", prior), Some(sketch_bytes(b"zero\none two three four five\n")));
        assert_eq!(grow(b"zero", b" one two three four\n"), Some(sketch_bytes(b"zero one two three four\n")));
        // Three words are one shingle of three, which four words are not.
        assert_eq!(grow(b"zero ", b"one two three\n"), None);
        // Only whitespace added: the same shingles.
        assert_eq!(grow(b"\n\n", prior), Some(sketch_bytes(prior)));
        // Nothing added is no new start.
        assert_eq!(grow(b"", prior), None);
        // A first word longer than the look-back.
        let long = [&vec![b'x'; GROWN_LOOK_BACK + 10], &b" a b c d\n"[..]].concat();
        assert_eq!(grow(b"e f\n", &long), None);
        // A new start of many words, compacted as it is fed.
        let (head, prior) = (words(30_000, 7), words(3000, 8));
        assert_eq!(grow(&head, &prior), Some(sketch_by_definition(&[&head[..], &prior].concat())));
    }

    #[test]
    fn a_grown_content_needs_its_earlier_end_at_a_word_break_and_a_whole_shingle() {
        let grow = |prior: &[u8], tail: &[u8]| {
            let data = [prior, tail].concat();
            sketch_grown(&rice_encode(&sketch_bytes(prior)), &data, prior.len())
        };
        // "five" might go on as "fives": a shingle the earlier set had goes.
        assert_eq!(grow(b"one two three four five", b"s six\n"), None);
        // Unless what follows it begins with whitespace: a line added to a
        // file without a newline at its end.
        let data = b"one two three four five\nsix\n";
        assert_eq!(grow(b"one two three four five", b"\nsix\n"), Some(sketch_bytes(data)));
        // Three words are one shingle of three, which four words are not.
        assert_eq!(grow(b"one two three\n", b"four\n"), None);
        let data = b"one two three four\nfive\n";
        assert_eq!(grow(b"one two three four\n", b"five\n"), Some(sketch_bytes(data)));
        // Only whitespace added: the same shingles.
        assert_eq!(grow(b"one two three four\n", b"\n\n"), Some(sketch_bytes(b"one two three four\n")));
        // A sample no sketch keeps is no earlier sketch: level 0, Rice
        // parameter 0, one sample, coded as a bit length of 5 with more
        // than 4 bits after its leading one; and bytes cut short are none.
        let odd = [0, 0, 1, 0xff, 0xff, 0x05];
        assert_eq!(sketch_of_bytes(&odd), Err("not a rounded sketch sample"));
        assert_eq!(sketch_grown(&odd, data, 19), None);
        let good = rice_encode(&sketch_bytes(b"one two three four\n"));
        assert_eq!(grow(b"one two three four\n", b"five\n"), sketch_grown(&good, data, 19));
        assert_eq!(sketch_grown(&good[..good.len() - 1], data, 19), None);
        // A tail long enough to be compacted as it is fed, more than once.
        let (prior, tail) = (words(3000, 5), words(30_000, 6));
        let data = [&prior[..], &tail].concat();
        assert_eq!(grow(&prior, &tail), Some(sketch_by_definition(&data)));
        // A run without whitespace longer than the look-back.
        let long = [&b"a b c d "[..], &vec![b'x'; GROWN_LOOK_BACK + 10], b"\n"].concat();
        assert_eq!(grow(&long, b"e f\n"), None);
    }
}
