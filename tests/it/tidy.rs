//! Walls between rooms, checked by grepping the sources: only `store`
//! imports rocksdb, only `watch` imports notify, and every module starts with
//! a `//!` paragraph saying what it is for.

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn all() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files
        .into_iter()
        .map(|p| (p.strip_prefix(&root).unwrap().display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

#[test]
fn only_the_store_knows_rocksdb() {
    for (name, text) in all() {
        if !name.starts_with("store/") {
            assert!(!text.contains("rocksdb::"), "{name} uses rocksdb directly; go through store");
        }
    }
}

#[test]
fn only_the_watcher_knows_notify() {
    for (name, text) in all() {
        if !name.starts_with("watch") {
            assert!(!text.contains("notify::") && !text.contains("notify_debouncer"), "{name} uses notify");
        }
    }
}

#[test]
fn every_module_says_what_it_is_for() {
    for (name, text) in all() {
        assert!(text.starts_with("//!"), "{name} does not start with a //! paragraph");
    }
}
