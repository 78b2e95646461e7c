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
//! Not used by the index yet: the tags are to be stored with a content and
//! read back by an edit (`docs/performance.md`, the daemon, session 48).

use super::{
    is_space, level_of, round, shingle_hash_of_keys, word_hash, Shingler, Sketch, EXACT_UP_TO, MAX_SAMPLES, WORDS,
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
    !is_space(data[i]) && (i == 0 || is_space(data[i - 1]))
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

/// Segment starts near `segments` equal parts, each at a word start, and
/// each segment of at least `WORDS − 1` words (so that no shingle crosses
/// two boundaries): a boundary that would leave fewer, next to a long
/// word, is left out.
fn segment_starts(data: &[u8], segments: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(segments - 1);
    let mut prev = 0;
    for k in 1..segments {
        let Some(s) = word_start_from(data, (k * data.len() / segments).max(prev + 1)) else { break };
        if has_words(data, prev, s, WORDS - 1) && has_words(data, s, data.len(), WORDS - 1) {
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
    if !has_words(data, 0, data.len(), WORDS) {
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
/// [`sketch_segmented`]'s, at about the cost of [`super::sketch_bytes`]);
/// None for a content of fewer than [`WORDS`] words.
pub fn sketch_tagged(data: &[u8], segments: usize) -> Option<(Sketch, Tags)> {
    if !has_words(data, 0, data.len(), WORDS) {
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
    let (sketch, inside, below) = s.finish_tagged();
    let mut merged: Vec<(u32, u16, u16)> =
        sketch.samples.iter().zip(&inside).map(|(&x, &parts)| (x, parts, 0)).collect();
    // The shingles across each boundary, which the parts leave out.
    let mut across: Vec<(u32, u16)> = Vec::new();
    for (k, &at) in starts.iter().enumerate() {
        let samples = crossing_samples(data, at);
        across.extend(samples.into_iter().filter(|&x| level_of(x) >= sketch.level).map(|x| (x, 1 << k)));
    }
    across.sort_unstable();
    for (x, bit) in across {
        match merged.binary_search_by_key(&x, |m| m.0) {
            Ok(i) => merged[i].2 |= bit,
            Err(i) => merged.insert(i, (x, 0, bit)),
        }
    }
    // The crossing shingles may raise the level (never lower it).
    let mut level = sketch.level;
    let mut below = below[..=starts.len()].to_vec();
    if level > 0 || merged.len() > EXACT_UP_TO {
        while merged.len() > MAX_SAMPLES {
            level += 1;
            let n = merged.partition_point(|m| level_of(m.0) >= level);
            below.iter_mut().for_each(|b| *b = 0);
            for m in merged[n..].iter().filter(|m| m.1 != 0) {
                below[m.1.trailing_zeros() as usize] += 1;
            }
            merged.truncate(n);
        }
    }
    if level == 0 {
        below.clear();
    }
    let sketch = Sketch { level, samples: merged.iter().map(|m| m.0).collect() };
    let tags = Tags {
        starts,
        inside: merged.iter().map(|m| m.1).collect(),
        across: merged.iter().map(|m| m.2).collect(),
        below,
    };
    Some((sketch, tags))
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
    let sketch = Sketch { level, samples: merged.iter().map(|m| m.0).collect() };
    let tags = Tags {
        starts,
        inside: merged.iter().map(|m| m.1).collect(),
        across: merged.iter().map(|m| m.2).collect(),
        below,
    };
    (sketch, tags)
}

#[cfg(test)]
mod tests {
    use super::super::edit_model;
    use super::*;
    use proptest::prelude::*;

    /// Text of words from a small vocabulary (shingles repeat), with runs
    /// repeated and now and then a long word.
    fn text(n: usize, vocab: u64, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = seed | 1;
        let mut step = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        while out.len() < n * 6 {
            let r = step();
            if r % 97 == 0 && out.len() > 200 {
                let at = (step() as usize) % (out.len() - 100);
                let run = out[at..at + 100].to_vec();
                out.extend_from_slice(&run);
            } else if r % 211 == 0 {
                out.extend(std::iter::repeat_n(b'z', 40 + (step() % 400) as usize));
            } else {
                out.extend_from_slice(format!("w{}", step() % vocab).as_bytes());
            }
            out.push(if r % 7 == 0 { b'\n' } else { b' ' });
        }
        out
    }

    proptest! {
        /// The segmented sketch is the content's sketch, and its tags say
        /// where each sample lies as the model finds it by the definitions.
        #[test]
        fn a_segmented_sketch_is_the_sketch_and_its_tags_say_where_samples_lie(
            n in 0usize..12_000,
            vocab in prop_oneof![Just(40u64), Just(300u64), Just(5_000u64)],
            seed in any::<u64>(),
            segments in 2usize..=16,
        ) {
            let data = text(n, vocab, seed);
            let Some((sketch, tags)) = sketch_segmented(&data, segments) else { return Ok(()) };
            prop_assert_eq!(&sketch, &crate::sketch::sketch_bytes(&data));
            prop_assert!(tags.starts.len() < segments);
            prop_assert_eq!(tags.inside.len(), sketch.samples.len());
            if let Some(model) = edit_model::tagged(&data, &tags.starts) {
                prop_assert_eq!(&model.sketch, &sketch);
                for (i, w) in model.wheres.iter().enumerate() {
                    let inside = w.inside.iter().fold(0u16, |m, &g| m | 1 << g);
                    let across = w.across.iter().fold(0u16, |m, &(x, y)| {
                        assert_eq!(y, x + 1, "a shingle crosses one boundary");
                        m | 1 << x
                    });
                    prop_assert_eq!((tags.inside[i], tags.across[i]), (inside, across), "sample {}", i);
                }
                // Lower bounds: no more than the model counts.
                prop_assert!(tags.below.iter().sum::<u32>() <= model.below.iter().sum::<u32>());
            } else {
                prop_assert_eq!(sketch.level, 0);
            }
        }
    }

    proptest! {
        /// One shingler fed the parts in turn gives what a shingler per
        /// part gives: the sketch, and where each sample lies.
        #[test]
        fn a_sketch_tagged_in_one_pass_is_the_segmented_sketch(
            n in 0usize..12_000,
            vocab in prop_oneof![Just(40u64), Just(300u64), Just(5_000u64)],
            seed in any::<u64>(),
            segments in 2usize..=SEGMENTS,
        ) {
            let data = text(n, vocab, seed);
            let got = sketch_tagged(&data, segments);
            let want = sketch_segmented(&data, segments);
            prop_assert_eq!(got.is_some(), want.is_some());
            if let (Some((gs, gt)), Some((ws, wt))) = (got, want) {
                prop_assert_eq!(gs, ws);
                prop_assert_eq!((&gt.starts, &gt.inside, &gt.across), (&wt.starts, &wt.inside, &wt.across));
                if let Some(model) = edit_model::tagged(&data, &gt.starts) {
                    prop_assert!(gt.below.iter().sum::<u32>() <= model.below.iter().sum::<u32>());
                }
            }
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
