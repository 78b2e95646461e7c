//! Segmented sketches: a content's sketch made from the sketches of its
//! segments and of the few shingles across their boundaries, with where
//! each sample lies. That is what sketching an edit in the middle of a
//! content from its earlier sketch needs (`edit_model` holds the plan by
//! the definitions; `docs/performance.md`, the daemon, session 48).
//!
//! The sketch is the same as the whole content's: the union of the
//! segments' shingle sets and the crossing shingles is the content's set.
//! [`sketch_tagged`] feeds one shingler the segments in turn
//! ([`Shingler::tagging`]: each kept code carries the segments it was seen
//! in, in bits above it that the sort never reads), and hashes the few
//! shingles across each boundary apart. `sketch_segmented`, one shingler
//! per segment and a merge, is the slow reference the tests hold it to.
//!
//! Not used by the index: wired in (tags stored with a content, read back
//! by an edit), it saved ~6 % of an insert burst's CPU on the generated
//! corpus and cost a first index ~5 %, so it stays on the branch
//! `wip/incremental-sketch` until edits of large files call for it
//! (`docs/performance.md`, the daemon, sessions 48 and 49).

use serde::{Deserialize, Serialize};

use super::{
    is_space, level_of, round, shingle_hash_of_keys, word_hash, Shingler, Sketch, EXACT_UP_TO, MAX_PARTS, MAX_SAMPLES,
    WORDS,
};

/// Segments a content is cut into.
pub const SEGMENTS: usize = 8;

/// Contents smaller than this are not worth tags: their sketch keeps every
/// shingle (level 0) up to ~12 KB of text, and sketching one whole again
/// after an edit costs little.
pub const TAG_FROM: usize = 16 << 10;

/// Where the samples of a segmented sketch lie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tags {
    /// Where segments 1.. start: word starts, increasing.
    pub starts: Vec<usize>,
    /// Per sample: bit g when segment g holds one of its shingles wholly.
    pub inside: Vec<u16>,
    /// Per sample: bit k when one of its shingles crosses `starts[k]`.
    pub across: Vec<u16>,
    /// Per segment: distinct samples of the level just below the sketch's,
    /// each counted in one segment that holds it wholly (a lower bound on
    /// what the segment holds; empty at level 0).
    pub below: Vec<u32>,
}

/// Tags as stored: the segment starts as gaps, the bounds, then a nibble
/// a sample (its one segment when it lies in one only and crosses no
/// boundary, else [`ESCAPE`] and its masks in `escaped`, in order), two
/// to a byte: ~4 bits a sample.
#[derive(Serialize, Deserialize)]
struct Packed {
    gaps: Vec<u32>,
    below: Vec<u32>,
    nibbles: Vec<u8>,
    escaped: Vec<(u16, u16)>,
}

const ESCAPE: u8 = 15;

impl Tags {
    /// The tags' bytes as stored beside their sketch.
    pub fn encode(&self) -> Vec<u8> {
        let mut prev = 0;
        let gaps = self
            .starts
            .iter()
            .map(|&s| {
                let g = (s - prev) as u32;
                prev = s;
                g
            })
            .collect();
        let mut nibbles = vec![0u8; self.inside.len().div_ceil(2)];
        let mut escaped = Vec::new();
        for (i, (&inside, &across)) in self.inside.iter().zip(&self.across).enumerate() {
            let n = if across == 0 && inside.is_power_of_two() {
                inside.trailing_zeros() as u8
            } else {
                escaped.push((inside, across));
                ESCAPE
            };
            nibbles[i / 2] |= n << (4 * (i % 2));
        }
        postcard::to_stdvec(&Packed { gaps, below: self.below.clone(), nibbles, escaped })
            .expect("tags serialise to a vector")
    }

    /// Tags from their bytes, for a sketch of `samples` samples; an error
    /// for bytes no [`Tags::encode`] of such tags gives.
    pub fn decode(bytes: &[u8], samples: usize) -> Result<Tags, &'static str> {
        let p: Packed = postcard::from_bytes(bytes).map_err(|_| "tags do not decode")?;
        let segments = p.gaps.len() + 1;
        if segments > MAX_PARTS || !(p.below.is_empty() || p.below.len() == segments) {
            return Err("tags of too many segments");
        }
        if p.nibbles.len() != samples.div_ceil(2) {
            return Err("tags for another number of samples");
        }
        let mut starts = Vec::with_capacity(p.gaps.len());
        let mut at = 0usize;
        for g in p.gaps {
            if g == 0 {
                return Err("segment starts not increasing");
            }
            at = at.checked_add(g as usize).ok_or("segment start overflow")?;
            starts.push(at);
        }
        let (mut inside, mut across) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
        let mut escaped = p.escaped.into_iter();
        let fits = |m: u16, n: usize| u32::from(m) >> n == 0;
        for i in 0..samples {
            match (p.nibbles[i / 2] >> (4 * (i % 2))) & 15 {
                ESCAPE => {
                    let (a, b) = escaped.next().ok_or("fewer escaped tags than escapes")?;
                    if !fits(a, segments) || !fits(b, segments - 1) || (a == 0 && b == 0) {
                        return Err("a tag outside the segments");
                    }
                    inside.push(a);
                    across.push(b);
                }
                g if usize::from(g) < segments => {
                    inside.push(1 << g);
                    across.push(0);
                }
                _ => return Err("a tag outside the segments"),
            }
        }
        if escaped.next().is_some() {
            return Err("more escaped tags than escapes");
        }
        Ok(Tags { starts, inside, across, below: p.below })
    }
}

#[cfg(test)]
impl Shingler {
    /// A shingler for a part of a content: a part of fewer than [`WORDS`]
    /// words has no shingle (a content of so few has them all as one).
    fn part() -> Shingler {
        let mut s = Shingler::new();
        s.resumed = true;
        s
    }
}

/// The sketch of `data[from..to]`'s own shingles.
#[cfg(test)]
fn part_sketch(data: &[u8], from: usize, to: usize) -> Sketch {
    let mut s = Shingler::part();
    s.feed(&data[from..to]);
    s.finish()
}

fn starts_word(data: &[u8], i: usize) -> bool {
    i < data.len() && !is_space(data[i]) && (i == 0 || is_space(data[i - 1]))
}

/// The first word start at or after `at`, if any.
fn word_start_from(data: &[u8], at: usize) -> Option<usize> {
    (at..data.len()).find(|&i| starts_word(data, i))
}

/// Whether `data[from..to]` holds at least `n` word starts.
fn has_words(data: &[u8], from: usize, to: usize, n: usize) -> bool {
    (from..to).filter(|&i| starts_word(data, i)).take(n).count() == n
}

/// Where the `n`-th word before `at` starts (0 if there are fewer).
fn words_back(data: &[u8], at: usize, n: usize) -> usize {
    (0..at).rev().filter(|&i| starts_word(data, i)).nth(n - 1).unwrap_or(0)
}

/// Where the `n`-th word from `at` (a word start) ends.
#[cfg(test)]
fn words_on(data: &[u8], at: usize, n: usize) -> usize {
    (at..data.len())
        .filter(|&i| !is_space(data[i]) && (i + 1 == data.len() || is_space(data[i + 1])))
        .nth(n - 1)
        .map_or(data.len(), |i| i + 1)
}

/// How far from a segment's planned start its words are looked for: a
/// content with so little whitespace (a binary file) keeps fewer segments
/// rather than be scanned at length.
const LOOK: usize = 512;

/// Segment starts near `segments` equal parts, each at a word start with
/// `WORDS − 1` words before it and after it in its segment (so that no
/// shingle crosses two boundaries), within [`LOOK`] bytes: a boundary
/// that finds none so is left out.
fn segment_starts(data: &[u8], segments: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(segments - 1);
    let mut prev = 0;
    for k in 1..segments {
        let at = (k * data.len() / segments).max(prev + 1);
        let Some(s) = word_start_from(&data[..data.len().min(at + LOOK)], at) else { continue };
        let (before, after) = (prev.max(s.saturating_sub(LOOK)), data.len().min(s + LOOK));
        if has_words(data, before, s, WORDS - 1) && has_words(data, s, after, WORDS - 1) {
            starts.push(s);
            prev = s;
        }
    }
    starts
}

/// The sketch of `data` and its tags, from up to `segments` parts, by one
/// shingler per part (what [`sketch_tagged`] is tested against: 2.8–3.6
/// times the cost of a sketch); None for a content of fewer than [`WORDS`]
/// words (its one shingle is all of them, which no part has).
#[cfg(test)]
pub fn sketch_segmented(data: &[u8], segments: usize) -> Option<(Sketch, Tags)> {
    if !has_words(data, 0, data.len().min(LOOK), WORDS) {
        return None;
    }
    let starts = segment_starts(data, segments);
    let mut bounds = Vec::with_capacity(starts.len() + 2);
    bounds.push(0);
    bounds.extend_from_slice(&starts);
    bounds.push(data.len());
    let parts: Vec<Sketch> = bounds.windows(2).map(|w| part_sketch(data, w[0], w[1])).collect();
    let crossing: Vec<Sketch> = starts
        .iter()
        .map(|&s| part_sketch(data, words_back(data, s, WORDS - 1), words_on(data, s, WORDS - 1)))
        .collect();
    Some(union(&parts, &crossing, starts))
}

/// The sketch of `data` and its tags, from up to `segments` parts, made by
/// one shingler fed the parts in turn (the same sketch and tags as
/// [`sketch_segmented`]'s); None for a content whose first [`WORDS`]
/// words do not start within [`LOOK`] bytes (fewer words than a shingle,
/// or a binary file), to be sketched untagged.
pub fn sketch_tagged(data: &[u8], segments: usize) -> Option<(Sketch, Tags)> {
    assert!(segments <= MAX_PARTS, "at most {MAX_PARTS} segments");
    // A content whose first words are not near its start is not tagged
    // (nor scanned at length for them).
    if !has_words(data, 0, data.len().min(LOOK), WORDS) {
        return None;
    }
    let starts = segment_starts(data, segments);
    let mut s = Shingler::tagging();
    let mut from = 0;
    for &at in &starts {
        s.feed(&data[from..at]);
        s.next_part();
        from = at;
    }
    s.feed(&data[from..]);
    let (mut sketch, mut inside, below) = s.finish_tagged();
    let mut across = vec![0u16; sketch.samples.len()];
    // The shingles across each boundary, which the parts leave out: a few
    // samples, most of them new ones.
    for (k, &at) in starts.iter().enumerate() {
        for x in crossing_samples(data, at).into_iter().filter(|&x| level_of(x) >= sketch.level) {
            match sketch.samples.binary_search(&x) {
                Ok(i) => across[i] |= 1 << k,
                Err(i) => {
                    sketch.samples.insert(i, x);
                    inside.insert(i, 0);
                    across.insert(i, 1 << k);
                }
            }
        }
    }
    // They may raise the level (never lower it).
    let mut below = below[..=starts.len()].to_vec();
    if sketch.level > 0 || sketch.samples.len() > EXACT_UP_TO {
        let all: Vec<(u32, u16, u16)> =
            sketch.samples.iter().zip(&inside).zip(&across).map(|((&x, &i), &a)| (x, i, a)).collect();
        let mut level = sketch.level;
        if let Some(b) = raise(&all, &mut level, starts.len() + 1) {
            below = b;
            let n = at_least(&all, level);
            sketch.level = level;
            sketch.samples.truncate(n);
            inside.truncate(n);
            across.truncate(n);
        }
    }
    if sketch.level == 0 {
        below.clear();
    }
    Some((sketch, Tags { starts, inside, across, below }))
}

/// Why an edited content is to be sketched whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whole {
    /// A sketch of level 0 (every shingle kept): cheap to make again.
    Exact,
    /// The segments the edit touched hold fewer than `WORDS − 1` words
    /// once edited.
    Short,
    /// The kept samples and the untouched segments' bounds do not prove
    /// that the level stays.
    LevelMayFall,
    /// The tags are not those of the sketch, or the edit does not fit the
    /// contents' lengths.
    Mismatch,
}

/// The sketch and tags of `data`, the content `prior` and `tags` are of
/// (`old_len` bytes) with `old[a..b_old]` replaced by `data[a..b_old +
/// data.len() − old_len]`, the bytes before and after the same: the samples
/// seen in segments the edit did not touch are kept, and only the touched
/// segments, merged into one, and the shingles across its two boundaries
/// are shingled again. The same sketch as `data`'s bytes give
/// ([`super::sketch_bytes`]); the plan by the definitions is
/// `edit_model::edited`.
pub fn sketch_edited(
    prior: &Sketch,
    tags: &Tags,
    old_len: usize,
    data: &[u8],
    a: usize,
    b_old: usize,
) -> Result<(Sketch, Tags), Whole> {
    if prior.level == 0 {
        return Err(Whole::Exact);
    }
    let last = tags.starts.len();
    if tags.inside.len() != prior.samples.len()
        || tags.across.len() != prior.samples.len()
        || tags.below.len() != last + 1
        || a > b_old
        || b_old > old_len
        || a + (old_len - b_old) > data.len()
        || tags.starts.last().is_some_and(|&s| s >= old_len)
    {
        return Err(Whole::Mismatch);
    }
    let delta = data.len() as isize - old_len as isize;
    let segment = |at: usize| tags.starts.partition_point(|&s| s <= at);
    let start_of = |g: usize| if g == 0 { 0 } else { tags.starts[g - 1] };
    let (mut c0, mut c1) = (segment(a), segment(b_old.max(a + 1) - 1).max(segment(a)));
    // The merged segment must begin and end at word starts of the new
    // content: an edit at a boundary that joins or splits a word there
    // takes the neighbour in too.
    while c0 > 0 && !starts_word(data, start_of(c0)) {
        c0 -= 1;
    }
    let new_start = |g: usize| (tags.starts[g] as isize + delta) as usize;
    while c1 < last && !starts_word(data, new_start(c1)) {
        c1 += 1;
    }
    let (p, q) = (start_of(c0), if c1 < last { new_start(c1) } else { data.len() });
    if !has_words(data, p, q, WORDS - 1) {
        return Err(Whole::Short);
    }
    let inside_bits = |m: u16| {
        let low = m & ((1u16 << c0) - 1);
        let high = (u32::from(m) >> (c1 + 1)) as u16;
        low | high << (c0 + 1)
    };
    // Boundary k lies between segments k and k + 1.
    let across_bits = |m: u16| {
        let keep_low = if c0 >= 1 { m & ((1u16 << (c0 - 1)) - 1) } else { 0 };
        let high = (u32::from(m) >> (c1 + 1)) as u16;
        keep_low | high << (c0 + 1)
    };
    let mut kept: Vec<(u32, u16, u16)> = Vec::with_capacity(prior.samples.len());
    for ((&x, &inside), &across) in prior.samples.iter().zip(&tags.inside).zip(&tags.across) {
        let (i, c) = (inside_bits(inside), across_bits(across));
        if i != 0 || c != 0 {
            kept.push((x, i, c));
        }
    }
    // The merged segment's own shingles (sorted), and the few across its
    // boundaries put in among them.
    let mut s = Shingler::tagging();
    s.feed(&data[p..q]);
    let (own, _, _) = s.finish_tagged();
    let top = prior.level.max(own.level);
    let mut fresh: Vec<(u32, u16, u16)> =
        own.samples.iter().filter(|&&x| level_of(x) + 1 >= top).map(|&x| (x, 1u16 << c0, 0)).collect();
    let mut crossing: Vec<(u32, u16)> = Vec::with_capacity(2 * (WORDS - 1));
    if c0 > 0 {
        crossing.extend(crossing_samples(data, p).into_iter().map(|x| (x, 1u16 << (c0 - 1))));
    }
    if c1 < last {
        crossing.extend(crossing_samples(data, q).into_iter().map(|x| (x, 1u16 << c0)));
    }
    for (x, bit) in crossing.into_iter().filter(|&(x, _)| level_of(x) + 1 >= top) {
        match fresh.binary_search_by_key(&x, |f| f.0) {
            Ok(i) => fresh[i].2 |= bit,
            Err(i) => fresh.insert(i, (x, 0, bit)),
        }
    }
    // Both sorted and distinct: merged, the tags of a sample in both
    // put together.
    let mut all: Vec<(u32, u16, u16)> = Vec::with_capacity(kept.len() + fresh.len());
    let (mut i, mut j) = (0, 0);
    while i < kept.len() && j < fresh.len() {
        // Branch-free: which side comes next is data the CPU cannot predict.
        let (k, f) = (kept[i], fresh[j]);
        let (from_k, from_f) = (k.0 <= f.0, f.0 <= k.0);
        let none = (0, 0, 0);
        let (a, b) =
            (std::hint::select_unpredictable(from_k, k, none), std::hint::select_unpredictable(from_f, f, none));
        all.push((a.0 | b.0, a.1 | b.1, a.2 | b.2));
        i += usize::from(from_k);
        j += usize::from(from_f);
    }
    all.extend_from_slice(&kept[i..]);
    all.extend_from_slice(&fresh[j..]);
    let starts: Vec<usize> = tags.starts[..c0.min(last)].iter().copied().chain((c1..last).map(new_start)).collect();
    let segments = starts.len() + 1;
    let mut level = top;
    let bounds;
    if let Some(b) = raise(&all, &mut level, segments) {
        bounds = b;
    } else if level == prior.level {
        // The level stays if the level below holds too many to fit: the
        // kept samples, and those the untouched segments still hold.
        let untouched: u32 = tags.below.iter().enumerate().filter(|&(g, _)| g < c0 || g > c1).map(|(_, &n)| n).sum();
        let room = if level == 1 { EXACT_UP_TO } else { MAX_SAMPLES };
        if at_least(&all, level) + untouched as usize <= room {
            return Err(Whole::LevelMayFall);
        }
        let mut b: Vec<u32> =
            tags.below.iter().enumerate().filter(|&(g, _)| g <= c0 || g > c1).map(|(_, &n)| n).collect();
        // The merged segment's may be counted elsewhere already.
        b[c0] = 0;
        bounds = b;
    } else {
        // The merged segment's own level is the content's: what it has of
        // the level below, each in its first segment.
        bounds = below(&all, level, segments);
    }
    all.truncate(at_least(&all, level));
    Ok(sketch_and_tags(&all, level, starts, bounds))
}

/// The sketch of `level` holding `all`'s samples (sample, segments
/// holding it, boundaries crossed), and its tags.
fn sketch_and_tags(all: &[(u32, u16, u16)], level: u8, starts: Vec<usize>, below: Vec<u32>) -> (Sketch, Tags) {
    let sketch = Sketch { level, samples: all.iter().map(|e| e.0).collect() };
    let tags =
        Tags { starts, inside: all.iter().map(|e| e.1).collect(), across: all.iter().map(|e| e.2).collect(), below };
    (sketch, tags)
}

/// How many of `all`'s samples (sorted: higher levels first) are of
/// `level` or above.
fn at_least(all: &[(u32, u16, u16)], level: u8) -> usize {
    all.partition_point(|e| level_of(e.0) >= level)
}

/// Raises `level` until `all`'s samples of it and above fit in a sketch;
/// when it rose, the distinct samples of the level just below, each
/// counted in the first of `segments` holding it wholly.
fn raise(all: &[(u32, u16, u16)], level: &mut u8, segments: usize) -> Option<Vec<u32>> {
    if at_least(all, *level) <= MAX_SAMPLES {
        return None;
    }
    while at_least(all, *level) > MAX_SAMPLES {
        *level += 1;
    }
    Some(below(all, *level, segments))
}

/// The distinct samples of `all` (sorted) of the level just below `level`,
/// each counted in the first of `segments` holding it wholly.
fn below(all: &[(u32, u16, u16)], level: u8, segments: usize) -> Vec<u32> {
    let mut below = vec![0u32; segments];
    let (from, to) = (at_least(all, level), at_least(all, level - 1));
    for e in all[from..to].iter().filter(|e| e.1 != 0) {
        below[e.1.trailing_zeros() as usize] += 1;
    }
    below
}

/// The samples of the `WORDS − 1` shingles across a segment start `at`
/// (with at least `WORDS − 1` words either side), hashed as the shingler
/// hashes them.
fn crossing_samples(data: &[u8], at: usize) -> [u32; WORDS - 1] {
    let mut keys = [0u64; 2 * (WORDS - 1)];
    let mut i = words_back(data, at, WORDS - 1);
    for key in &mut keys {
        let start = i + data[i..].iter().position(|&b| !is_space(b)).expect("words either side");
        let end = data[start..].iter().position(|&b| is_space(b)).map_or(data.len(), |n| start + n);
        *key = word_hash(data, start, end);
        i = end;
    }
    std::array::from_fn(|k| round(shingle_hash_of_keys(&keys[k..k + WORDS])))
}

/// The whole content's sketch and tags from its parts' sketches and its
/// crossing shingles' samples.
#[cfg(test)]
fn union(parts: &[Sketch], crossing: &[Sketch], starts: Vec<usize>) -> (Sketch, Tags) {
    // Every part holds its samples of its own level and above, and the
    // whole content's level is at least each part's.
    let top = parts.iter().map(|p| p.level).max().unwrap_or(0);
    // One level lower too, for the bounds below.
    let floor = top.saturating_sub(1);
    let mut all: Vec<u64> = Vec::new();
    let tagged =
        |s: u32, inside: u16, across: u16| (u64::from(s) << 32) | (u64::from(inside) << 16) | u64::from(across);
    for (g, p) in parts.iter().enumerate() {
        all.extend(p.samples.iter().filter(|&&s| level_of(s) >= floor).map(|&s| tagged(s, 1 << g, 0)));
    }
    for (k, c) in crossing.iter().enumerate() {
        all.extend(c.samples.iter().filter(|&&s| level_of(s) >= floor).map(|&s| tagged(s, 0, 1 << k)));
    }
    all.sort_unstable();
    let mut merged: Vec<(u32, u16, u16)> = Vec::with_capacity(all.len());
    for e in all {
        let (s, inside, across) = ((e >> 32) as u32, (e >> 16) as u16, e as u16);
        match merged.last_mut() {
            Some(m) if m.0 == s => {
                m.1 |= inside;
                m.2 |= across;
            }
            _ => merged.push((s, inside, across)),
        }
    }
    let at_least = |l: u8| merged.iter().filter(|m| level_of(m.0) >= l).count();
    let mut level = top;
    // At level 0 every part kept all its shingles: all are here.
    if top > 0 || merged.len() > EXACT_UP_TO {
        while at_least(level) > MAX_SAMPLES {
            level += 1;
        }
    }
    let mut below = vec![0u32; parts.len()];
    if level > 0 {
        for m in merged.iter().filter(|m| level_of(m.0) == level - 1 && m.1 != 0) {
            below[m.1.trailing_zeros() as usize] += 1;
        }
    } else {
        below.clear();
    }
    merged.retain(|m| level_of(m.0) >= level);
    sketch_and_tags(&merged, level, starts, below)
}

#[cfg(test)]
mod tests {
    use super::super::edit_model::{self, text};
    use super::*;
    use proptest::prelude::*;

    /// Tags as the model finds them by the definitions: where each sample
    /// lies, and bounds no larger than the model's counts; a sketch the
    /// model does not tag is of level 0.
    fn check_tags(data: &[u8], sketch: &Sketch, tags: &Tags) -> Result<(), TestCaseError> {
        let Some(model) = edit_model::tagged(data, &tags.starts) else {
            prop_assert_eq!(sketch.level, 0);
            return Ok(());
        };
        prop_assert_eq!(&model.sketch, sketch);
        for (i, w) in model.wheres.iter().enumerate() {
            let inside = w.inside.iter().fold(0u16, |m, &g| m | 1 << g);
            let across = w.across.iter().fold(0u16, |m, &(x, y)| {
                assert_eq!(y, x + 1, "a shingle crosses one boundary");
                m | 1 << x
            });
            prop_assert_eq!((tags.inside[i], tags.across[i]), (inside, across), "sample {}", i);
        }
        prop_assert_eq!(tags.below.len(), tags.starts.len() + 1);
        prop_assert!(tags.below.iter().sum::<u32>() <= model.below.iter().sum::<u32>());
        Ok(())
    }

    proptest! {
        /// A sketch tagged by one shingler fed the segments in turn, and
        /// one made by a shingler per segment: both are the content's
        /// sketch, and their tags say where each sample lies as the model
        /// finds it by the definitions.
        #[test]
        fn a_tagged_sketch_is_the_sketch_and_its_tags_say_where_samples_lie(
            n in 0usize..12_000,
            vocab in prop_oneof![Just(40u64), Just(300u64), Just(5_000u64)],
            seed in any::<u64>(),
            segments in 2usize..=MAX_PARTS,
        ) {
            let data = text(n, vocab, seed);
            let got = sketch_tagged(&data, segments);
            let want = sketch_segmented(&data, segments);
            prop_assert_eq!(got.is_some(), want.is_some());
            let (Some((gs, gt)), Some((ws, wt))) = (got, want) else { return Ok(()) };
            prop_assert_eq!(&ws, &crate::sketch::sketch_bytes(&data));
            prop_assert!(wt.starts.len() < segments);
            check_tags(&data, &ws, &wt)?;
            prop_assert_eq!(&gs, &ws);
            prop_assert_eq!((&gt.starts, &gt.inside, &gt.across), (&wt.starts, &wt.inside, &wt.across));
            check_tags(&data, &gs, &gt)?;
        }
    }

    proptest! {
        /// An edited content is sketched from its earlier sketch and tags
        /// as from its bytes, with the tags a fresh look finds; or it is
        /// to be sketched whole. Two edits in a row, the second from the
        /// first's tags.
        #[test]
        fn an_edited_content_is_sketched_from_its_tags_as_from_its_bytes(
            n in 2_000usize..9_000,
            vocab in prop_oneof![Just(300u64), Just(5_000u64)],
            seed in any::<u64>(),
            edits in proptest::collection::vec((any::<usize>(), 0usize..400, 0usize..60, any::<u64>()), 2),
        ) {
            let mut data = text(n, vocab, seed);
            let Some((mut sketch, mut tags)) = sketch_tagged(&data, SEGMENTS) else { return Ok(()) };
            for (at, del, ins_words, s) in edits {
                let a = at % (data.len() + 1);
                let del = del.min(data.len() - a);
                let ins = text(ins_words, vocab, s);
                let new = [&data[..a], &ins[..ins.len().min(ins_words * 6)], &data[a + del..]].concat();
                match sketch_edited(&sketch, &tags, data.len(), &new, a, a + del) {
                    Ok((s2, t2)) => {
                        prop_assert_eq!(&s2, &crate::sketch::sketch_bytes(&new));
                        check_tags(&new, &s2, &t2)?;
                        (sketch, tags) = (s2, t2);
                    }
                    Err(_) => match sketch_tagged(&new, SEGMENTS) {
                        Some(fresh) => (sketch, tags) = fresh,
                        None => return Ok(()),
                    },
                }
                data = new;
            }
        }
    }

    proptest! {
        /// Edits that do not fit the contents, or tags of another sketch,
        /// are refused or sketched, never a panic.
        #[test]
        fn any_edit_and_tags_are_safe(
            n in 2_000usize..4_000,
            seed in any::<u64>(),
            a in any::<usize>(),
            b in any::<usize>(),
            old_len in any::<usize>(),
            len in 0usize..30_000,
        ) {
            let data = text(n, 5_000, seed);
            let Some((sketch, tags)) = sketch_tagged(&data, SEGMENTS) else { return Ok(()) };
            let other = text(len / 6, 5_000, seed ^ 1);
            let (a, b, old_len) = (a % (data.len() * 2), b % (data.len() * 2), old_len % (data.len() * 2));
            let _ = sketch_edited(&sketch, &tags, old_len, &other, a, b);
            let _ = sketch_edited(&sketch, &tags, data.len(), &other, a.min(b), a.max(b));
        }
    }

    /// How often an edit of a few words is sketched from the tags.
    #[test]
    fn most_small_edits_are_sketched_from_the_tags() {
        let (mut ok, mut whole) = (0, std::collections::BTreeMap::new());
        for seed in 1..=60u64 {
            let data = text(3_000 + 400 * seed as usize, 5_000, seed);
            let (sketch, tags) = sketch_tagged(&data, SEGMENTS).expect("words");
            let a = (seed as usize * 7919) % data.len();
            let new = [&data[..a], &b" inserted words here "[..], &data[a..]].concat();
            match sketch_edited(&sketch, &tags, data.len(), &new, a, a) {
                Ok((s, _)) => {
                    assert_eq!(s, crate::sketch::sketch_bytes(&new));
                    ok += 1;
                }
                Err(w) => *whole.entry(format!("{w:?}")).or_insert(0) += 1,
            }
        }
        eprintln!("from the tags: {ok} of 60; whole: {whole:?}");
        assert!(ok >= 30, "{ok} of 60 from the tags; whole: {whole:?}");
    }

    proptest! {
        /// Tags read back as written; any bytes are refused or read, never
        /// a panic.
        #[test]
        fn tags_read_back_and_any_bytes_are_safe(
            n in 0usize..6_000,
            vocab in prop_oneof![Just(40u64), Just(5_000u64)],
            seed in any::<u64>(),
            junk in proptest::collection::vec(any::<u8>(), 0..64),
            samples in 0usize..40,
        ) {
            if let Some((sketch, tags)) = sketch_tagged(&text(n, vocab, seed), SEGMENTS) {
                let bytes = tags.encode();
                prop_assert_eq!(Tags::decode(&bytes, sketch.samples.len()), Ok(tags));
                prop_assert!(Tags::decode(&bytes, sketch.samples.len() + 2).is_err());
            }
            let _ = Tags::decode(&junk, samples);
        }
    }

    #[test]
    fn a_content_of_a_few_hundred_words_is_cut_and_a_few_words_are_not() {
        let (_, tags) = sketch_segmented(&text(400, 5_000, 7), SEGMENTS).expect("400 words");
        assert!(tags.starts.len() >= SEGMENTS / 2, "{:?}", tags.starts);
        // Seven words: two segments, of three words and four.
        let (s, tags) = sketch_segmented(b"one two three four five six seven", SEGMENTS).expect("seven words");
        assert_eq!((tags.starts.len(), s.samples.len()), (1, 4));
        assert_eq!(sketch_segmented(b"one two three", SEGMENTS), None);
    }
}
