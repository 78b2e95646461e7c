//! Golden indexes of every schema version (`tests/golden/`): the current
//! one is read and answers as it did when it was made; an upgradable older
//! one is upgraded in place by the first writer (readers are told to run
//! one) and then answers as it did; the others are refused with a message
//! naming both versions, never a RocksDB error.

use std::path::Path;

use assert_cmd::Command;

/// A copy of a golden index in a temp dir (the checked-in files are never
/// opened in place).
fn golden(version: u32) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), &target).unwrap();
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/index-v{version}"));
    copy(&src, &tmp.path().join("index"));
    tmp
}

fn simd(tmp: &tempfile::TempDir) -> Command {
    let mut c = Command::cargo_bin("simd").unwrap();
    c.arg("--db").arg(tmp.path().join("index")).env_remove("SIMD_DB").env_remove("SIMD_LOG");
    c
}

fn json(c: &mut Command) -> serde_json::Value {
    let out = c.assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

const TREE: &str = "/tmp/simd-golden/tree";

#[test]
fn the_current_version_reads_its_golden_index() {
    let g = golden(simd::store::SCHEMA_VERSION);
    answers_as_made(&g, 6);
    // Made before indexes noted when files were first indexed (`meta`'s
    // `marks`): `--since` cannot tell, says so, and keeps every file.
    let out = simd(&g).args(["--format", "json", "report", "--since", "1d"]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("dates the files it holds only from when simd first adds a file to it"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((r["identical"].as_array().unwrap().len(), r["clusters"].as_array().unwrap().len()), (1, 1), "{r:#}");
}

/// The golden index answers as it did when it was made, holding `files`
/// files (its six, and any indexed since).
fn answers_as_made(g: &tempfile::TempDir, files: u64) {
    simd(g).arg("check").assert().success();
    let r = json(simd(g).args(["--format", "json", "report"]));
    assert_eq!(r["index"]["files"], files);
    let sets = r["identical"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{r:#}");
    let files: Vec<&str> = sets[0]["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(files, [format!("{TREE}/guide-copy.txt"), format!("{TREE}/guide.txt")]);
    // The edited version links by its words alone.
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{r:#}");
    let link = &clusters[0]["links"][0];
    assert_eq!((link["kind"].as_str(), link["common"].as_u64()), (Some("similar"), Some(0)), "{link}");
    assert!(link["words"]["resemblance"].as_f64().unwrap() > 0.7, "{link}");
    // The rename between the two runs left a ghost that lost-and-found follows.
    let l = json(simd(g).args(["--format", "json", "lost", &format!("{TREE}/old-plan.txt")]));
    assert_eq!(l["files"][0]["candidates"][0]["path"], format!("{TREE}/plan.txt"), "{l:#}");
}

fn schema_version(g: &tempfile::TempDir) -> u64 {
    json(simd(g).args(["--format", "json", "status"]))["schema_version"].as_u64().unwrap()
}

#[test]
fn upgradable_versions_are_upgraded_by_a_writer_and_answer_as_made() {
    let current = simd::store::SCHEMA_VERSION;
    for &version in &simd::store::UPGRADABLE_VERSIONS {
        let g = golden(version);
        if simd::store::READ_AS_IS.contains(&version) {
            // Readers read it as it is, and leave it so.
            answers_as_made(&g, 6);
            assert_eq!(schema_version(&g), u64::from(version));
        } else {
            // Readers leave the index as it is, and say what upgrades it.
            for args in [&["status"][..], &["--format", "json", "report"], &["similar", "-"]] {
                let out = simd(&g).args(args).write_stdin("some words").assert().failure();
                let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
                let want = format!(
                    "index schema version {version}, this simd reads version {current} and upgrades it in place when \
                     it writes: run `simd index`"
                );
                assert!(err.contains(&want), "{args:?}: {err}");
            }
        }
        // The first writer upgrades it before it writes anything else.
        let more = g.path().join("more");
        std::fs::create_dir(&more).unwrap();
        std::fs::write(more.join("new.txt"), "a file written after the upgrade\n").unwrap();
        let out = simd(&g).arg("index").arg(&more).assert().success();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        let told = if version < 5 {
            format!("upgraded from schema version {version} to {current} (5 contents numbered, ")
        } else if version < 7 {
            // Version 5 and 6 postings are keyed by the whole chunk id: all
            // 51 chunk postings of the golden index (`simd check` counts 115
            // postings, 64 of them the posted samples of 4 non-empty contents).
            format!("upgraded from schema version {version} to {current} (51 postings re-keyed")
        } else if version < 8 {
            // Version 7 differs in its chunk lists, which are read as they
            // are, and its template marks (the golden index has none).
            format!(
                "upgraded from schema version {version} to {current} (contents stored from now on keep shorter chunk \
                 lists)"
            )
        } else {
            // Version 8's file records have no device, read as unknown.
            format!(
                "upgraded from schema version {version} to {current} (file records gain their device as scans find them"
            )
        };
        assert!(err.contains(&told), "{err}");
        assert_eq!(schema_version(&g), u64::from(current));
        answers_as_made(&g, 7);
    }
}

#[test]
fn older_versions_are_refused_with_both_versions_named() {
    for version in (1..simd::store::SCHEMA_VERSION).filter(|&v| !simd::store::reads_version(v)) {
        let g = golden(version);
        for args in [&["status"][..], &["--format", "json", "report"], &["index", TREE]] {
            let out = simd(&g).args(args).assert().failure();
            let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
            let want =
                format!("index schema version {version}, this simd reads version {}", simd::store::SCHEMA_VERSION);
            assert!(err.contains(&want), "{args:?}: {err}");
        }
    }
}
