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
pub mod mounts;
pub mod query;
pub mod report;
pub mod scan;
pub mod sketch;
pub mod status;
pub mod store;
pub mod verify;
pub mod watch;

/// A number the tests set through the environment (`SIMD_TEST_…`) to make
/// a bound small or a wait short, so that a crash or a flush comes within a
/// small test (undocumented for users); None when it is unset or not a
/// number.
pub(crate) fn test_setting(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Raises the process's soft limit on open files to its hard limit. A
/// reader opens every table file of the index at once (`store`: so that a
/// writer's compaction cannot delete one from under it), and an index of
/// a repository of a few TB (~64 MB a table file) holds more than the
/// soft limit of 1,024 that systemd and most shells start a process with;
/// the hard limit (524,288 under systemd) is what the administrator allows.
/// Nothing is said when it cannot be raised: the limit then stays as it was.
pub fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // Linux refuses more than fs.nr_open (1,048,576 by default), and an
    // unlimited hard limit reads as None.
    const MOST: u64 = 1 << 20;
    let limit = getrlimit(Resource::Nofile);
    let want = limit.maximum.unwrap_or(MOST).min(MOST);
    if limit.current.is_some_and(|soft| soft < want) {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(want), maximum: limit.maximum });
    }
}

/// A path's bytes for a human: UTF-8 as is, except that each byte that is
/// not valid UTF-8, and each byte of a control character or of a
/// bidirectional formatting character, shows as `\xNN`, and a backslash as
/// `\\` (as `ls -b` does). The bidirectional ones (U+202E and its kin)
/// would otherwise reorder what a terminal shows after them, so that
/// `report\u{202e}fdp.exe` reads as `reportexe.pdf`. Nothing is lost or silently
/// replaced, and two different paths never show the same: `\xNN` always
/// stands for one byte, so a name holding the four characters `\xff`
/// (shown `\\xff`) is told from one holding the byte 0xff.
pub fn report_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if c.is_control() || is_bidi_format(c) || is_invisible(c) {
                let mut utf8 = [0; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    // A space at the end shows as nothing: `a.txt ` would read as `a.txt`.
    if out.ends_with(' ') {
        out.pop();
        out.push_str("\\x20");
    }
    out
}

/// The bytes of a path as [`report_path`] shows it: its inverse (a `\\`
/// is a backslash, a `\xNN` one byte, every other character itself).
pub fn report_path_bytes(shown: &str) -> Vec<u8> {
    let (b, mut out, mut k) = (shown.as_bytes(), Vec::with_capacity(shown.len()), 0);
    while k < b.len() {
        match (b[k], b.get(k + 1)) {
            (b'\\', Some(b'\\')) => (out.push(b'\\'), k += 2),
            (b'\\', Some(b'x'))
                if let Some(v) = shown.get(k + 2..k + 4).and_then(|h| u8::from_str_radix(h, 16).ok()) =>
            {
                (out.push(v), k += 4)
            }
            (c, _) => (out.push(c), k += 1),
        };
    }
    out
}

/// Unicode's explicit bidirectional formatting characters: the marks,
/// embeddings, overrides and isolates that change the order in which the
/// text around them is shown.
fn is_bidi_format(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Characters that break a line for some readers, show as nothing or as
/// a plain space, so that two names look the same: the line and paragraph
/// separators (which Python's `splitlines` splits on), Unicode's default
/// ignorable code points (soft hyphen, zero-width spaces and joiners, the
/// byte-order mark, the word joiner and invisible operators, the Hangul
/// fillers, variation selectors, tag characters and those reserved as
/// ignorable), and the spaces other than U+0020 that are as narrow as it
/// or narrower (no-break, en, em, thin, hair...; the ideographic space,
/// as wide as a CJK character, is told apart in the text it sits in).
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00a0}' | '\u{00ad}' | '\u{034f}' | '\u{115f}' | '\u{1160}' | '\u{1680}' | '\u{17b4}' | '\u{17b5}'
            | '\u{180b}'..='\u{180f}' | '\u{2000}'..='\u{200d}' | '\u{2028}' | '\u{2029}' | '\u{202f}'
            | '\u{205f}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// [`report_path`] of a path: for paths in messages and logs, which
/// `Path::display` would show lossily (U+FFFD for bytes that are not UTF-8).
pub fn show_path(path: impl AsRef<std::path::Path>) -> String {
    use std::os::unix::ffi::OsStrExt;
    report_path(path.as_ref().as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::{report_path, report_path_bytes};

    #[test]
    fn a_shown_path_gives_its_bytes_back() {
        for p in
            [&b"/a/b c.txt"[..], "/\u{e9}/\u{202e}x".as_bytes(), b"/a\xffb\nc", b"a\\b", b"a\\xff", b"\\\\x4", b"a b "]
        {
            assert_eq!(report_path_bytes(&report_path(p)), p, "{}", report_path(p));
        }
    }

    #[test]
    fn report_path_keeps_every_byte_visible() {
        assert_eq!(report_path(b"/a/b c.txt"), "/a/b c.txt");
        assert_eq!(report_path("/é/中".as_bytes()), "/é/中");
        assert_eq!(report_path(b"/a\xffb\nc"), "/a\\xffb\\x0ac");
        // A C1 control character is two bytes of UTF-8, each shown.
        assert_eq!(report_path("a\u{85}b".as_bytes()), "a\\xc2\\x85b");
        assert_eq!(report_path(b"a\\b"), "a\\\\b");
        // A right-to-left override would show what follows it reversed.
        assert_eq!(report_path("report\u{202e}fdp.exe".as_bytes()), "report\\xe2\\x80\\xaefdp.exe");
        assert_eq!(report_path("a\u{2067}b\u{200f}".as_bytes()), "a\\xe2\\x81\\xa7b\\xe2\\x80\\x8f");
        // A line separator (a line break to Python's `splitlines`), and
        // characters that show as nothing, so that two names look alike.
        assert_eq!(report_path("a\u{2028}b".as_bytes()), "a\\xe2\\x80\\xa8b");
        assert_eq!(report_path("z\u{200b}w\u{feff}".as_bytes()), "z\\xe2\\x80\\x8bw\\xef\\xbb\\xbf");
        assert_eq!(report_path("t\u{e0041}".as_bytes()), "t\\xf3\\xa0\\x81\\x81");
        // A variation selector, a Hangul filler, a no-break space and a
        // space at the end show as nothing or as a plain space would.
        assert_eq!(report_path("a\u{fe0f}b\u{3164}".as_bytes()), "a\\xef\\xb8\\x8fb\\xe3\\x85\\xa4");
        assert_eq!(report_path("a\u{a0}b c ".as_bytes()), "a\\xc2\\xa0b c\\x20");
        assert_eq!(report_path("\u{3000}/ ".as_bytes()), "\u{3000}/\\x20");
    }

    /// Reads [`report_path`]'s output back: `\\` is a backslash, `\xNN` a
    /// byte, anything else itself.
    fn unescape(shown: &str) -> Vec<u8> {
        let (b, mut out, mut i) = (shown.as_bytes(), Vec::new(), 0);
        while i < b.len() {
            let (byte, len) = match (b[i], b.get(i + 1)) {
                (b'\\', Some(b'\\')) => (b'\\', 2),
                (b'\\', Some(b'x')) => (u8::from_str_radix(&shown[i + 2..i + 4], 16).unwrap(), 4),
                (c, _) => (c, 1),
            };
            out.push(byte);
            i += len;
        }
        out
    }

    proptest::proptest! {
        /// Two different paths never show the same: what is shown reads
        /// back to the bytes it came from.
        #[test]
        fn a_shown_path_reads_back_to_its_bytes(bytes in proptest::collection::vec(proptest::prop_oneof![
            proptest::prelude::Just(b'\\'), proptest::prelude::Just(b'x'), proptest::prelude::Just(b'f'),
            proptest::prelude::Just(0xc2u8), proptest::prelude::Just(0x85u8), proptest::prelude::any::<u8>(),
        ], 0..24)) {
            proptest::prop_assert_eq!(unescape(&report_path(&bytes)), bytes);
        }
    }
}
