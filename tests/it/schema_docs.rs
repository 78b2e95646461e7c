//! `schema/` documents every column family's bytes; this test fails when the
//! code and the documents disagree: CF names, value versions, the schema
//! version, and a worked example per CF whose key and value bytes are
//! re-encoded here and compared with the hex in the document.

use std::path::Path;

use simd::chunker::ChunkParams;
use simd::fingerprint::{ChunkId, ChunkRun, ContentHash};
use simd::sketch::Sketch;
use simd::store::*;

const T: i64 = 1_700_000_000_000_000_000;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn example<X: Table>(key: X::Key, value: X::Value) -> (&'static str, u8, String, String) {
    (X::NAME, X::VALUE_VERSION, hex(&X::encode_key(&key)), hex(&X::encode_value(&value)))
}

/// The worked examples the documents show, built from typed values.
fn examples() -> Vec<(&'static str, u8, String, String)> {
    let content = ContentHash([0xab; 16]);
    let (c1, c2) = (ChunkId([0x11; 16]), ChunkId([0x22; 16]));
    let file = FileId(42);
    let id = ContentId(300);
    vec![
        example::<Meta>(
            MetaKey::Format,
            MetaValue::Format(Format { schema_version: 3, params: ChunkParams::default(), created: T }),
        ),
        example::<Meta>(MetaKey::NextContentId, MetaValue::NextContentId(301)),
        example::<Meta>(
            MetaKey::Expiry,
            MetaValue::Expiry(Expiry { at: T, records: 12, version_runs: 300, kept_days: 90, kept_records: 100_000 }),
        ),
        example::<Meta>(
            MetaKey::Marks,
            MetaValue::Marks(vec![
                Mark { at: T, next_file_id: 1, within: Mark::EVERY },
                Mark { at: T + 3_600_000_000_000, next_file_id: 5_000, within: Mark::EVERY },
            ]),
        ),
        example::<Files>(
            file,
            FileRecord {
                path: b"/docs/a.txt".to_vec(),
                size: 1234,
                mtime: T + 123_456_789,
                inode: 99,
                content,
                dev: 2049,
            },
        ),
        example::<Paths>(b"/docs/a.txt".to_vec(), file),
        example::<ContentChunks>(
            content,
            ContentRecord {
                id,
                size: 1234,
                runs: vec![
                    ChunkRun { key: c1.key(), len: 1000, count: 1 },
                    ChunkRun { key: c2.key(), len: 234, count: 1 },
                ],
                sketch: Sketch { level: 0, samples: vec![0x0400_8000, 0x1000_0000, 0x8000_0000] },
            },
        ),
        example::<ChunkContents>((c1.key(), id), Posting { count: 1, len: 1000 }),
        example::<SketchContents>((0x0400_8000, id), ()),
        example::<ContentById>(id, content),
        example::<ContentNames>((content, file), ()),
        example::<Templates>(c1.key(), TemplateMark::new(7, T, 1000)),
        example::<TemplateSamples>(0x0400_8000, TemplateMark::new(7, T, 0)),
        example::<History>(
            (b"/docs/old.txt".to_vec(), T),
            HistoryRecord::Ghost { content, size: 1234, since: FileId(40), seen: None },
        ),
    ]
}

#[test]
fn schema_documents_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("schema/README.md");
    assert!(
        readme.contains(&format!("Schema version: {SCHEMA_VERSION}")),
        "schema/README.md must say `Schema version: {SCHEMA_VERSION}`"
    );
    let mut docs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    docs.sort();
    let mut want: Vec<String> = ALL_CFS.iter().map(|n| format!("{n}.md")).collect();
    want.sort();
    assert_eq!(docs, want, "one document per column family");

    let mut wrong = Vec::new();
    for (name, version, key, value) in examples() {
        let doc = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap();
        let expect = [format!("Value version: {version}"), format!("key   {key}"), format!("value {value}")];
        for line in &expect {
            if !doc.contains(line.as_str()) {
                wrong.push(format!("schema/{name}.md lacks `{line}`"));
            }
        }
    }
    // Every name `meta` holds is in its document's key table.
    let meta = std::fs::read_to_string(dir.join("meta.md")).unwrap();
    for key in MetaKey::ALL {
        if !meta.contains(&format!("`{}`", key.name())) {
            wrong.push(format!("schema/meta.md does not name `{}`", key.name()));
        }
    }
    assert!(wrong.is_empty(), "code and schema/ disagree:\n{}", wrong.join("\n"));
}
