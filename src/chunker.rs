//! TTTD content-defined chunking (Two Thresholds, Two Divisors; Eshghi & Tang,
//! HP Labs TR 2005-30), as Forman et al. 2005 use it.
//!
//! The chunker is pure: bytes in, cut lengths out. It never opens a path,
//! never allocates per byte and keeps no state between chunks, so a stream
//! can be cut by repeatedly asking for the next cut of the bytes that start
//! at the previous one (see [`find_cut`]). Streaming over any buffer split
//! therefore gives exactly the cuts of the whole input in memory.
//!
//! The rolling hash is a gear hash (`h = (h << 2) + GEAR[byte]`): the value of
//! `h` depends only on the last 32 bytes, so the window is 32 bytes. "Hits the
//! divisor D" is the threshold test `h < 2^64 / D`, which has probability 1/D
//! and costs one compare per byte instead of a modulo. Every parameter set
//! has Tmin ≥ the window, so the hash at every eligible position depends on
//! the window alone, not on where the chunk started: after an edit, cuts
//! resynchronise at the first main-divisor hit past it.

use serde::{Deserialize, Serialize};

/// The published TTTD parameters for an average chunk of about 1 KB.
const PUBLISHED_AVG: u32 = 1000;
const PUBLISHED_MIN: u32 = 460;
const PUBLISHED_MAX: u32 = 2800;
const PUBLISHED_MAIN_DIV: u32 = 540;
const PUBLISHED_BACKUP_DIV: u32 = 270;

/// The smallest average chunk size accepted (Forman's fine pass): below it
/// Tmin would fall under the hash window.
pub const MIN_AVG_CHUNK: u32 = 100;
/// The largest average chunk size accepted (keeps chunk lengths in a `u32`
/// with plenty of room and the per-chunk buffer small).
pub const MAX_AVG_CHUNK: u32 = 1 << 20;

/// Gear hash window: the hash depends on this many trailing bytes (64 bits
/// shifted by 2 per byte).
const WINDOW: usize = 32;

/// TTTD parameters: no cut before `min` bytes, a cut where the hash hits
/// `main_div`, a backup cut remembered where it hits `backup_div`, and at
/// `max` bytes a cut at the last backup point (or at `max` if there is none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkParams {
    pub min: u32,
    pub max: u32,
    pub main_div: u32,
    pub backup_div: u32,
}

impl ChunkParams {
    /// Parameters for an average chunk of about `avg` bytes: the published
    /// 460/2800/540/270 for 1000, scaled linearly otherwise.
    pub fn for_average(avg: u32) -> Result<ChunkParams, InvalidParams> {
        if !(MIN_AVG_CHUNK..=MAX_AVG_CHUNK).contains(&avg) {
            return Err(InvalidParams { avg });
        }
        let scale =
            |v: u32| ((u64::from(v) * u64::from(avg) + u64::from(PUBLISHED_AVG) / 2) / u64::from(PUBLISHED_AVG)) as u32;
        Ok(ChunkParams {
            min: scale(PUBLISHED_MIN).max(1),
            max: scale(PUBLISHED_MAX),
            main_div: scale(PUBLISHED_MAIN_DIV).max(2),
            backup_div: scale(PUBLISHED_BACKUP_DIV).max(1),
        })
    }

    /// The hash thresholds for the two divisors.
    fn thresholds(&self) -> (u64, u64) {
        (u64::MAX / u64::from(self.main_div), u64::MAX / u64::from(self.backup_div))
    }
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams {
            min: PUBLISHED_MIN,
            max: PUBLISHED_MAX,
            main_div: PUBLISHED_MAIN_DIV,
            backup_div: PUBLISHED_BACKUP_DIV,
        }
    }
}

impl std::fmt::Display for ChunkParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tmin {} Tmax {} D {} D' {}", self.min, self.max, self.main_div, self.backup_div)
    }
}

/// An average chunk size outside [`MIN_AVG_CHUNK`, `MAX_AVG_CHUNK`].
#[derive(Debug, thiserror::Error)]
#[error("average chunk size {avg} is outside {MIN_AVG_CHUNK}..={MAX_AVG_CHUNK} bytes")]
pub struct InvalidParams {
    pub avg: u32,
}

/// 256 pseudo-random 64-bit gear values, fixed forever: changing them changes
/// every chunk boundary, so they are part of the index format.
static GEAR: [u64; 256] = gear_table();

const fn gear_table() -> [u64; 256] {
    // splitmix64 from a fixed seed.
    let mut table = [0u64; 256];
    let mut state: u64 = 0x5349_4d44_5454_5444; // "SIMDTTTD"
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
}

/// The length of the chunk that starts at `data[0]`, or `None` when more
/// bytes are needed to decide.
///
/// With `eof` set, `data` is the rest of the input and a cut is always
/// returned for non-empty `data` (the last chunk may be shorter than `min`).
/// Without it, a cut is returned as soon as one is certain: a main-divisor
/// hit, or reaching `max` bytes. Returns `None` for empty `data`.
#[inline]
pub fn find_cut(data: &[u8], params: &ChunkParams, eof: bool) -> Option<usize> {
    if data.is_empty() {
        return None;
    }
    let min = params.min as usize;
    let max = params.max as usize;
    if data.len() <= min {
        return eof.then_some(data.len());
    }
    let (main, backup) = params.thresholds();
    let end = data.len().min(max);
    // Warm the hash on the window before Tmin so the first eligible position
    // sees a full window; the result only depends on the chunk's own bytes.
    let mut h: u64 = 0;
    for &b in &data[min.saturating_sub(WINDOW)..min] {
        h = (h << 2).wrapping_add(GEAR[b as usize]);
    }
    let mut backup_cut = 0usize;
    let mut i = min;
    // Eight bytes a step. Each position's hash is needed for its test, but
    // the next step starts from the eighth, computed from `h` in one shift
    // and one add of the eight gear values combined (a shift distributes
    // over wrapping addition): the chain carried from step to step is two
    // operations per eight bytes, where one byte at a time it was two per
    // byte and bounded the loop (criterion `tttd`: 2.24 → 3.30 GiB/s; four
    // bytes a step gave 3.1).
    while i + 8 <= end {
        // One bounds check for the eight bytes: indexing `data[i + k]` kept
        // eight compares and branches in the loop.
        let bytes: &[u8; 8] = data[i..i + 8].try_into().expect("eight bytes");
        let g: [u64; 8] = std::array::from_fn(|k| GEAR[bytes[k] as usize]);
        let mut hs = [0u64; 8];
        let mut x = h;
        for (hk, &gk) in hs.iter_mut().zip(&g[..7]) {
            x = (x << 2).wrapping_add(gk);
            *hk = x;
        }
        let c = g.iter().fold(0u64, |c, &gk| (c << 2).wrapping_add(gk));
        hs[7] = (h << 16).wrapping_add(c);
        if hs.iter().any(|&x| x < backup) {
            for (k, hk) in hs.into_iter().enumerate() {
                if hk < backup {
                    if hk < main {
                        return Some(i + k + 1);
                    }
                    backup_cut = i + k + 1;
                }
            }
        }
        h = hs[7];
        i += 8;
    }
    while i < end {
        h = (h << 2).wrapping_add(GEAR[data[i] as usize]);
        i += 1;
        if h < backup {
            if h < main {
                return Some(i);
            }
            backup_cut = i;
        }
    }
    if end == max {
        // Reached Tmax: the last backup point, or Tmax itself.
        return Some(if backup_cut != 0 { backup_cut } else { max });
    }
    eof.then_some(data.len())
}

/// What decides a cut TTTD made at the end of a chunk ([`cut_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutKind {
    /// The chunk's own bytes: a main-divisor hit at its end, or Tmax
    /// reached with no backup point before it.
    Own,
    /// A backup point, taken because no main hit came by Tmax: the bytes
    /// up to Tmax past the chunk's start decide it.
    Backup,
}

/// Whether TTTD, cutting from `chunk`'s first byte, may have cut at its
/// end, and what decided that cut; None when it cannot have (its end is no
/// divisor hit, or its length is outside (Tmin, Tmax]). A content cut
/// before keeps its cuts where its bytes are unchanged: a file's prior
/// chunk list says where to look ([`crate::fingerprint`]), and this says
/// which of those cuts need no more than the chunk to be alike.
///
/// A chunk that may not have been cut so is told apart from one that was
/// only by bytes past its end, which [`find_cut`] would also read: a main
/// hit at the end means no earlier one, as the bytes before it are the
/// chunk's own.
pub fn cut_kind(chunk: &[u8], params: &ChunkParams) -> Option<CutKind> {
    let len = chunk.len();
    if len <= params.min as usize || len > params.max as usize {
        return None;
    }
    // The hash at the end depends on the last WINDOW bytes alone (Tmin
    // covers the window; with a smaller Tmin, `find_cut` warms it from the
    // chunk's start, as here). Folded eight bytes at a time, as in
    // `find_cut`: one byte at a time the chain of shifts and adds made
    // this check a fifth of the time of fingerprinting a file cut at its
    // prior's cuts.
    let window = &chunk[len.saturating_sub(WINDOW)..];
    let h = match window.as_chunks::<8>() {
        (eights, []) => eights
            .iter()
            .map(|e| e.iter().fold(0u64, |c, &b| (c << 2).wrapping_add(GEAR[b as usize])))
            .fold(0u64, |h, c| (h << 16).wrapping_add(c)),
        _ => window.iter().fold(0u64, |h, &b| (h << 2).wrapping_add(GEAR[b as usize])),
    };
    let (main, backup) = params.thresholds();
    if h < main || len == params.max as usize {
        Some(CutKind::Own)
    } else if h < backup {
        Some(CutKind::Backup)
    } else {
        None
    }
}

/// Cuts a whole in-memory input; returns the chunk lengths in order.
pub fn chunk_lengths(mut data: &[u8], params: &ChunkParams) -> Vec<usize> {
    let mut out = Vec::with_capacity(data.len() / params.min.max(1) as usize + 1);
    while let Some(cut) = find_cut(data, params, true) {
        out.push(cut);
        data = &data[cut..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small() -> ChunkParams {
        ChunkParams::for_average(MIN_AVG_CHUNK).unwrap()
    }

    #[test]
    fn tmin_always_covers_the_window() {
        for avg in [MIN_AVG_CHUNK, 101, 250, 1000, 4096, MAX_AVG_CHUNK] {
            assert!(ChunkParams::for_average(avg).unwrap().min as usize >= WINDOW, "avg {avg}");
        }
    }

    #[test]
    fn published_parameters_at_one_kilobyte() {
        assert_eq!(ChunkParams::for_average(1000).unwrap(), ChunkParams::default());
        let p = ChunkParams::for_average(100).unwrap();
        assert_eq!((p.min, p.max, p.main_div, p.backup_div), (46, 280, 54, 27));
        assert!(ChunkParams::for_average(99).is_err());
    }

    #[test]
    fn gear_table_is_fixed() {
        // The gear values are part of the index format: pin a few.
        assert_eq!(GEAR[0], gear_table()[0]);
        let distinct: std::collections::BTreeSet<u64> = GEAR.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn empty_and_tiny_inputs() {
        let p = ChunkParams::default();
        assert_eq!(chunk_lengths(b"", &p), Vec::<usize>::new());
        assert_eq!(chunk_lengths(b"abc", &p), vec![3]);
        assert_eq!(find_cut(b"abc", &p, false), None);
    }

    #[test]
    fn constant_input_cuts_at_max() {
        let p = ChunkParams::default();
        let data = vec![0u8; 10_000];
        let cuts = chunk_lengths(&data, &p);
        assert_eq!(cuts.iter().sum::<usize>(), data.len());
        // A constant run gives a constant hash: every chunk is the same size.
        assert!(cuts[..cuts.len() - 1].windows(2).all(|w| w[0] == w[1]));
    }

    /// TTTD as DESIGN.md defines it, one byte at a time, with the gear hash
    /// recomputed over the chunk's bytes so far: what [`find_cut`]'s
    /// unrolled loop must agree with, cut for cut.
    fn reference_cut(data: &[u8], p: &ChunkParams, eof: bool) -> Option<usize> {
        let (main, backup) = p.thresholds();
        let (min, max) = (p.min as usize, p.max as usize);
        if data.is_empty() {
            return None;
        }
        let mut backup_cut = None;
        for end in min + 1..=data.len().min(max) {
            let h = data[end.saturating_sub(WINDOW)..end]
                .iter()
                .fold(0u64, |h, &b| (h << 2).wrapping_add(GEAR[b as usize]));
            if h < main {
                return Some(end);
            }
            if h < backup {
                backup_cut = Some(end);
            }
        }
        if data.len() >= max {
            return Some(backup_cut.unwrap_or(max));
        }
        eof.then_some(data.len())
    }

    proptest! {
        #[test]
        fn cuts_match_the_definition_byte_by_byte(
            data in proptest::collection::vec(any::<u8>(), 0..6_000),
            avg in prop_oneof![Just(MIN_AVG_CHUNK), Just(1000u32)],
            eof in any::<bool>(),
            // Few distinct bytes make runs whose hashes repeat, and cuts at
            // Tmax and at backup points common.
            alphabet in prop_oneof![Just(256u16), Just(2u16), Just(5u16)],
        ) {
            let p = ChunkParams::for_average(avg).unwrap();
            let data: Vec<u8> = data.iter().map(|&b| (u16::from(b) % alphabet) as u8).collect();
            let mut at = 0;
            loop {
                let (got, want) = (find_cut(&data[at..], &p, eof), reference_cut(&data[at..], &p, eof));
                prop_assert_eq!(got, want, "at offset {}", at);
                match got {
                    Some(cut) if at + cut < data.len() => at += cut,
                    _ => break,
                }
            }
        }

        /// Every cut `find_cut` makes short of the input's end is one
        /// `cut_kind` allows, and a cut it calls its chunk's own is made
        /// whatever follows the chunk.
        #[test]
        fn every_cut_has_a_kind_and_an_own_cut_ignores_what_follows(
            data in proptest::collection::vec(any::<u8>(), 0..6_000),
            after in proptest::collection::vec(any::<u8>(), 0..3_000),
            avg in prop_oneof![Just(MIN_AVG_CHUNK), Just(1000u32)],
            alphabet in prop_oneof![Just(256u16), Just(2u16), Just(5u16)],
        ) {
            let p = ChunkParams::for_average(avg).unwrap();
            let data: Vec<u8> = data.iter().map(|&b| (u16::from(b) % alphabet) as u8).collect();
            let mut at = 0;
            while let Some(cut) = find_cut(&data[at..], &p, false) {
                let chunk = &data[at..at + cut];
                let kind = cut_kind(chunk, &p);
                prop_assert!(kind.is_some(), "a cut at {} of length {} without a kind", at, cut);
                if kind == Some(CutKind::Own) {
                    let other = [chunk, &after[..]].concat();
                    prop_assert_eq!(find_cut(&other, &p, true), Some(cut));
                }
                // No shorter length is a main hit: TTTD would have cut there.
                for l in p.min as usize + 1..cut {
                    prop_assert_ne!(cut_kind(&chunk[..l], &p), Some(CutKind::Own), "at {} + {}", at, l);
                }
                at += cut;
            }
            // And a length no cut can have.
            prop_assert_eq!(cut_kind(&data[..data.len().min(p.min as usize)], &p), None);
        }

        #[test]
        fn chunks_concatenate_and_respect_bounds(data in proptest::collection::vec(any::<u8>(), 0..20_000)) {
            let p = small();
            let cuts = chunk_lengths(&data, &p);
            prop_assert_eq!(cuts.iter().sum::<usize>(), data.len());
            if let Some((_, body)) = cuts.split_last() {
                for &c in body {
                    prop_assert!(c >= p.min as usize && c <= p.max as usize, "chunk {} outside bounds", c);
                }
            }
            prop_assert_eq!(cuts.clone(), chunk_lengths(&data, &p));
        }

        #[test]
        fn streaming_equals_in_memory(
            data in proptest::collection::vec(any::<u8>(), 0..20_000),
            splits in proptest::collection::vec(1usize..700, 1..200),
        ) {
            let p = small();
            let whole = chunk_lengths(&data, &p);
            // Feed the input in arbitrary pieces, keeping only the undecided tail.
            let mut streamed = Vec::new();
            let mut pending: Vec<u8> = Vec::new();
            let mut fed = 0;
            let mut split = splits.iter().cycle();
            while fed < data.len() {
                let take = (*split.next().unwrap()).min(data.len() - fed);
                pending.extend_from_slice(&data[fed..fed + take]);
                fed += take;
                let eof = fed == data.len();
                let mut start = 0;
                while let Some(cut) = find_cut(&pending[start..], &p, eof) {
                    streamed.push(cut);
                    start += cut;
                }
                pending.drain(..start);
            }
            prop_assert_eq!(whole, streamed);
        }

        #[test]
        fn an_insertion_only_changes_nearby_chunks(
            seed in any::<u64>(),
            at in 0.3f64..0.7,
            insert in proptest::collection::vec(any::<u8>(), 1..200),
        ) {
            let p = small();
            let mut rng = seed | 1;
            let data: Vec<u8> = (0..40_000).map(|_| { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng as u8 }).collect();
            let pos = (data.len() as f64 * at) as usize;
            let mut edited = data[..pos].to_vec();
            edited.extend_from_slice(&insert);
            edited.extend_from_slice(&data[pos..]);
            let spans = |d: &[u8]| {
                let mut off = 0;
                chunk_lengths(d, &p).into_iter().map(|c| { let s = (off, c); off += c; s }).collect::<Vec<_>>()
            };
            let before = spans(&data);
            let after = spans(&edited);
            // Chunks ending well before the edit are identical; chunks starting
            // well after it are the same bytes shifted by the insertion.
            let margin = 4 * p.max as usize;
            let before_set: std::collections::HashSet<(usize, usize)> = before.iter().copied().collect();
            for &(off, len) in &after {
                if off + len + margin < pos {
                    prop_assert!(before_set.contains(&(off, len)));
                } else if off > pos + insert.len() + margin {
                    prop_assert!(before_set.contains(&(off - insert.len(), len)));
                }
            }
        }
    }
}
