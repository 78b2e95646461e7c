//! `simd index` and `simd status` end to end: incremental runs, identical
//! copies writing no chunk data, deletions leaving ghosts.

use super::{noise, path_of, text, write_keeping_stat, Env};
use simd::store::{Access, ContentChunks, History, HistoryRecord, Store};

/// A file with several names (hard links, as snapshot trees made with
/// `cp -al` or rsnapshot hold every file) is read once a run: its other
/// names take the fingerprint read under the first, and the summary says
/// how many were not read. One reader (`--threads 1`) makes the order, and
/// so the count, exact.
#[test]
fn a_file_with_several_names_is_read_once() {
    let env = Env::new();
    let body = noise(5, 300_000);
    let a = env.write("s0/a.bin", &body);
    for s in ["s1", "s2"] {
        std::fs::create_dir_all(env.root.join(s)).unwrap();
        std::fs::hard_link(&a, env.root.join(s).join("a.bin")).unwrap();
    }
    env.write("s0/other.txt", text(1, 500));
    let run = || {
        let out = env.simd().args(["--format", "json", "index", "--threads", "1"]).arg(&env.root).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let s = run();
    let other = text(1, 500).len() as u64;
    assert_eq!((s["new"].as_u64(), s["shared_names"].as_u64()), (Some(4), Some(2)), "{s:#}");
    assert_eq!(s["bytes_read"].as_u64(), Some(body.len() as u64 + other), "the file's bytes read once: {s:#}");
    env.check();
    let files = env.files();
    let of = |rel: &str| files.iter().find(|(p, _)| p.ends_with(rel.as_bytes())).map(|(_, c)| c.clone()).unwrap();
    assert!(["s1/a.bin", "s2/a.bin"].iter().all(|r| of(r) == of("s0/a.bin")));
    // Changed through one name: every name changed, and it is read once.
    let mut edited = body.clone();
    edited[1000..1100].fill(b'z');
    std::fs::write(env.root.join("s1/a.bin"), &edited).unwrap();
    let s = run();
    assert_eq!((s["changed"].as_u64(), s["shared_names"].as_u64()), (Some(3), Some(2)), "{s:#}");
    assert_eq!(s["bytes_read"].as_u64(), Some(edited.len() as u64), "{s:#}");
    env.check();
    let files = env.files();
    let of = |rel: &str| files.iter().find(|(p, _)| p.ends_with(rel.as_bytes())).map(|(_, c)| c.clone()).unwrap();
    assert!(["s0/a.bin", "s2/a.bin"].iter().all(|r| of(r) == of("s1/a.bin")));
    let fresh = simd::fingerprint::fingerprint_bytes(&edited, &simd::chunker::ChunkParams::default());
    assert_eq!(of("s0/a.bin"), fresh.content.to_string(), "the edited content, under every name");
}

#[test]
fn first_run_then_nothing_changed_then_one_change() {
    let env = Env::new();
    for i in 0..40 {
        env.write(&format!("d{}/f{i}.txt", i % 4), text(i, 500 + 50 * i as usize));
    }
    let s = env.index();
    assert_eq!((s["new"].as_u64(), s["changed"].as_u64(), s["unchanged"].as_u64()), (Some(40), Some(0), Some(0)));
    assert!(s["bytes_read"].as_u64().unwrap() > 0);
    env.check();

    let s = env.index();
    assert_eq!((s["new"].as_u64(), s["unchanged"].as_u64(), s["bytes_read"].as_u64()), (Some(0), Some(40), Some(0)));

    // A changed file is read again and points at its new content.
    let before = env.files();
    let p = env.write("d1/f5.txt", text(999, 700));
    let s = env.index();
    assert_eq!((s["changed"].as_u64(), s["unchanged"].as_u64()), (Some(1), Some(39)));
    let after = env.files();
    let key = path_of(&p.canonicalize().unwrap());
    let old = before.iter().find(|(path, _)| *path == key).unwrap();
    let new = after.iter().find(|(path, _)| *path == key).unwrap();
    assert_ne!(old.1, new.1);
    env.check();
}

/// A run that changes a few files reads them while its writer opens,
/// looking their earlier contents up in the read-only open the walk used
/// (`ingest::index_prewalked`). Within one run: two files take the same new
/// content (each reader finds it new; one is written), one takes the
/// content another gave up, one grows (its prior read for the resync and
/// the sketch), one goes. The index then equals a fresh one of the tree.
#[test]
fn changes_read_beside_the_writers_open_match_a_fresh_index() {
    let env = Env::new();
    for i in 0..12u64 {
        env.write(&format!("d/f{i}.txt"), text(i, 400 + 40 * i as usize));
    }
    env.write("d/blob.bin", noise(7, 20_000));
    env.index();
    let given_up = std::fs::read(env.root.join("d/f1.txt")).unwrap();
    let same = text(500, 900);
    env.write("d/f1.txt", &same);
    env.write("d/f2.txt", &same);
    env.write("d/f3.txt", &given_up);
    let mut grown = std::fs::read(env.root.join("d/f4.txt")).unwrap();
    grown.extend_from_slice(b" and a few more words at the end\n");
    env.write("d/f4.txt", &grown);
    let mut blob = noise(7, 20_000);
    blob[9_000..9_100].copy_from_slice(&noise(8, 100));
    env.write("d/blob.bin", &blob);
    std::fs::remove_file(env.root.join("d/f5.txt")).unwrap();
    let s = env.index();
    assert_eq!((s["changed"].as_u64(), s["removed"].as_u64()), (Some(5), Some(1)), "{s}");
    env.check();
    env.assert_same_as_fresh(&[&env.root]);
    let same_content = env.files().into_iter().filter(|(p, _)| p.ends_with(b"f1.txt") || p.ends_with(b"f2.txt"));
    let hashes: std::collections::HashSet<_> = same_content.map(|(_, h)| h).collect();
    assert_eq!(hashes.len(), 1, "f1 and f2 hold one content");
}

/// A run that finds more changed files than a read-only walk collects
/// (4,096) has its writer opened during that walk, at the first changed
/// file (`ingest::index_locked`), and walks again with it: every file is
/// read once, and the index equals a fresh one.
#[test]
fn a_run_past_what_a_walk_collects_walks_again_with_the_writer_it_opened() {
    let env = Env::new();
    const N: u64 = 4_200;
    for i in 0..N {
        env.write(&format!("d{}/f{i}.txt", i % 16), format!("file {i}\n"));
    }
    assert_eq!(env.index()["new"].as_u64(), Some(N));
    for i in 0..N {
        env.write(&format!("d{}/f{i}.txt", i % 16), format!("file {i}, changed\n"));
    }
    let s = env.index();
    assert_eq!((s["changed"].as_u64(), s["unchanged"].as_u64()), (Some(N), Some(0)), "{s}");
    env.check();
    env.assert_same_as_fresh(&[&env.root]);
}

#[test]
fn identical_copies_share_one_content() {
    let env = Env::new();
    let body = text(7, 3000);
    for i in 0..5 {
        env.write(&format!("copy{i}.txt"), &body);
    }
    env.write("other.txt", text(8, 3000));
    let s = env.index();
    assert_eq!(s["new"].as_u64(), Some(6));
    assert_eq!(s["new_contents"].as_u64(), Some(2));
    let store = env.open();
    assert_eq!(store.scan::<ContentChunks>().count(), 2);
    let out = env.simd().args(["--format", "json", "status"]).output().unwrap();
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["files"].as_u64(), Some(6));
    assert_eq!(st["contents"].as_u64(), Some(2));
    assert!(st["distinct_chunks"].as_u64().unwrap() > 2);
    // The two contents' bytes and chunks (read without their sketches).
    assert_eq!(st["content_bytes"].as_u64(), Some((body.len() + text(8, 3000).len()) as u64));
    let records: Vec<_> = store.scan::<ContentChunks>().map(|r| r.unwrap().1).collect();
    assert_eq!(st["chunks"].as_u64(), Some(records.iter().map(|r| r.chunk_count()).sum()));
    env.check();
}

#[test]
fn deletion_leaves_a_ghost_and_drops_postings_of_the_last_name() {
    let env = Env::new();
    let only = env.write("only.txt", noise(1, 20_000));
    let a = env.write("a.txt", noise(2, 20_000));
    env.write("b.txt", noise(2, 20_000));
    env.index();
    let only_key = path_of(&only.canonicalize().unwrap());
    let a_key = path_of(&a.canonicalize().unwrap());
    std::fs::remove_file(&only).unwrap();
    std::fs::remove_file(&a).unwrap();
    let s = env.index();
    assert_eq!(s["removed"].as_u64(), Some(2));
    env.check();
    let store = env.open();
    let ghosts: Vec<_> = store.scan::<History>().map(|r| r.unwrap()).collect();
    assert_eq!(ghosts.len(), 2);
    for key in [&only_key, &a_key] {
        let g = ghosts.iter().find(|((p, _), _)| p == key).expect("ghost for the deleted path");
        assert!(matches!(g.1, HistoryRecord::Ghost { size: 20_000, .. }));
    }
    // The chunk list of the content with no name left is kept for lost-and-found.
    assert_eq!(store.scan::<ContentChunks>().count(), 2);
    drop(store);
    // It comes back to life, without being re-chunked, if the content reappears.
    std::fs::write(&only, noise(1, 20_000)).unwrap();
    let s = env.index();
    assert_eq!((s["new"].as_u64(), s["new_contents"].as_u64()), (Some(1), Some(0)));
    env.check();
}

/// A remembered root replaced by a symlink (a release directory moved
/// aside, a link to another put in its place) is not followed, as no
/// symlink is: its files are recorded as removed, with a warning that says
/// where it leads, and the link's target is no new root.
#[test]
fn a_remembered_root_replaced_by_a_symlink_is_missing() {
    let env = Env::new();
    let (a, b, other) = super::two_roots_and_another(&env);
    super::link_in_place_of(&b, &other);
    let out = env.simd().args(["--format", "json", "index"]).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!((s["new"].as_u64(), s["removed"].as_u64()), (Some(0), Some(1)), "{s}");
    assert_eq!(s["missing_roots"], serde_json::json!([{ "path": b.to_str().unwrap() }]), "{s}");
    let other = other.canonicalize().unwrap();
    let said = format!("{}: this root now leads to {} through a symlink", b.display(), other.display());
    assert!(err.contains(&said) && !err.contains("root is missing"), "{err}");
    let roots = env.json(&["status"])["roots"].clone();
    assert_eq!(roots, serde_json::json!([{ "path": a.to_str().unwrap() }, { "path": b.to_str().unwrap() }]), "{roots}");
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert_eq!(names, [a.join("one.txt").to_str().unwrap()], "{names:?}");
    env.check();
}

/// A remembered root that is gone (deleted, moved away, not mounted) is
/// walked as an empty one, with a warning naming it, and the other roots
/// are indexed; it stays remembered and is indexed again once back. When
/// every root is gone, the run changes nothing and says why.
#[test]
fn a_missing_remembered_root_is_walked_as_empty_but_not_every_root() {
    let env = Env::new();
    let (a, b) = (env.root.join("a"), env.root.join("b"));
    env.write("a/one.txt", text(1, 300));
    env.write("b/two.txt", text(2, 300));
    env.write("b/three.txt", text(3, 300));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    std::fs::remove_dir_all(&b).unwrap();
    env.write("a/four.txt", text(4, 300));
    let run = |env: &Env| {
        let out = env.simd().args(["--format", "json", "index"]).assert().success();
        let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        (s, String::from_utf8_lossy(&out.get_output().stderr).into_owned())
    };
    let (s, err) = run(&env);
    assert_eq!((s["new"].as_u64(), s["removed"].as_u64()), (Some(1), Some(2)), "{s}");
    assert_eq!(s["missing_roots"], serde_json::json!([{ "path": b.to_str().unwrap() }]), "{s}");
    assert!(err.contains(&format!("{}: No such file", b.display())) && err.contains("root is missing"), "{err}");
    // Said once, though a read-only walk looked first and handed over,
    // with the way to stop indexing it.
    assert_eq!(err.matches("root is missing").count(), 1, "{err}");
    assert!(err.contains("`simd forget` it if it is gone for good"), "{err}");
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with(a.to_str().unwrap())), "{names:?}");
    // Its deleted files are in lost-and-found.
    let lost = env.json(&["lost", b.join("two.txt").to_str().unwrap()]);
    assert_eq!(
        (lost["state"].as_str(), lost["files"][0]["size"].as_u64()),
        (Some("lost"), Some(text(2, 300).len() as u64)),
        "{lost}"
    );

    // Back: indexed again, as a root still remembered.
    env.write("b/two.txt", text(2, 300));
    let (s, err) = run(&env);
    assert_eq!((s["new"].as_u64(), s["missing_roots"].as_array().map(Vec::len)), (Some(1), Some(0)), "{s}");
    assert!(!err.contains("missing"), "{err}");

    // Every root gone: nothing changes, and the run fails saying why.
    let before = env.files();
    std::fs::remove_dir_all(&env.root).unwrap();
    let out = env.simd().arg("index").assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("every root of the index is missing or not mounted; nothing was changed"), "{err}");
    assert_eq!(env.files(), before);
    env.check();
}

/// `simd forget`: a root's files leave the index (not its tree), those a
/// remaining root holds stay, nothing goes to lost-and-found, a chunk list
/// a ghost still needs is kept, and later runs leave the root alone: the
/// index equals a fresh one of the roots kept.
#[test]
fn a_forgotten_root_leaves_the_index_and_later_runs() {
    let env = Env::new();
    let (a, b, sub) = (env.root.join("a"), env.root.join("b"), env.root.join("a/sub"));
    env.write("a/one.txt", text(1, 300));
    env.write("a/copy.txt", text(2, 300));
    env.write("a/gone.txt", text(3, 300));
    env.write("a/again.txt", text(3, 300));
    env.write("a/sub/kept.txt", text(4, 300));
    env.write("b/two.txt", text(2, 300));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    // A root inside another, remembered on its own.
    env.simd().args(["--quiet", "index"]).arg(&sub).assert().success();
    // A ghost whose content only a file under `a` still has.
    std::fs::remove_file(a.join("gone.txt")).unwrap();
    env.simd().args(["--quiet", "index"]).assert().success();
    let history = |env: &Env| env.open().scan::<History>().count();
    assert_eq!(history(&env), 1);

    // Refused with nothing changed: not a root, or inside one.
    let before = env.files();
    let out = env.simd().arg("forget").arg(env.root.join("elsewhere")).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("not a root of the index; the roots are") && err.contains(b.to_str().unwrap()), "{err}");
    let out = env.simd().arg("forget").arg(a.join("x/..")).arg(env.root.join("b/deeper")).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("deeper: not a root") && err.contains(&format!("inside the root {}", b.display())), "{err}");
    assert_eq!(env.files(), before);

    // Given relative, with a trailing slash.
    let out = env.simd().current_dir(&env.root).args(["forget", "a/"]).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains(&format!("forgot {}: 3 files dropped", a.display())), "{said}");
    assert!(said.contains(&format!("roots now: {}, {}", b.display(), sub.display())), "{said}");
    env.check();
    assert_eq!(history(&env), 1, "forgetting is not losing: no ghosts");
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with(&format!("{}/", a.display())) || n.ends_with("sub/kept.txt")));
    assert!(a.join("one.txt").exists(), "the files themselves stay");
    // The ghost's content keeps its chunk list; the others without a name lose theirs.
    let store = env.open();
    let lists = store.scan::<ContentChunks>().count();
    assert_eq!(lists, 3, "two live contents and the ghost's");
    let ghost = store.scan::<History>().next().unwrap().unwrap().1;
    let HistoryRecord::Ghost { content, .. } = ghost else { panic!("{ghost:?}") };
    assert!(store.get::<ContentChunks>(&content).unwrap().is_some());
    drop(store);

    // Later runs walk what is left, and leave `a` alone.
    env.write("a/new.txt", text(5, 300));
    let out = env.simd().args(["--format", "json", "index"]).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((s["new"].as_u64(), s["unchanged"].as_u64(), s["removed"].as_u64()), (Some(0), Some(2), Some(0)));
    env.assert_same_as_fresh(&[&b, &sub]);

    // A root gone for good is named by its old path.
    std::fs::remove_dir_all(&b).unwrap();
    let out = env.simd().arg("forget").arg(&b).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains("1 file dropped") && said.contains(&format!("roots now: {}", sub.display())), "{said}");
    env.check();
    let held = env.files().len() as u64;
    let said = env.json(&["forget", sub.to_str().unwrap()]);
    assert_eq!(said["forgotten"], serde_json::json!([{ "path": sub.to_str().unwrap() }]), "{said:#}");
    assert_eq!((said["files_dropped"].as_u64(), said["roots"].as_array().map(Vec::len)), (Some(held), Some(0)));
    assert!(env.files().is_empty());
    env.check();

    // A root whose name is not UTF-8 is named back with its bytes escaped.
    use std::os::unix::ffi::OsStrExt;
    let odd = env.root.join(std::ffi::OsStr::from_bytes(b"odd\xff"));
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("f.txt"), text(6, 300)).unwrap();
    env.simd().args(["--quiet", "index"]).arg(&odd).assert().success();
    let out = env.simd().arg("forget").arg(&odd).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains("odd\\xff: 1 file dropped"), "{said}");

    // A root moved, with a symlink left at its old path to where it went,
    // indexed there as a root too: `forget OLD` forgets the old root, not
    // the one the link leads to.
    let (old, new) = (env.root.join("q"), env.root.join("r"));
    env.write("q/q.txt", text(7, 300));
    env.simd().args(["--quiet", "index"]).arg(&old).assert().success();
    std::fs::rename(&old, &new).unwrap();
    std::os::unix::fs::symlink(&new, &old).unwrap();
    env.simd().args(["--quiet", "index"]).arg(&new).assert().success();
    let said = env.json(&["forget", old.to_str().unwrap()]);
    let root = env.root.canonicalize().unwrap();
    assert_eq!(said["forgotten"], serde_json::json!([{ "path": root.join("q").to_str().unwrap() }]), "{said:#}");
    assert_eq!(said["roots"], serde_json::json!([{ "path": root.join("r").to_str().unwrap() }]), "{said:#}");
    env.check();
}

#[test]
fn roots_are_remembered_and_the_index_never_indexes_itself() {
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    // An index inside the tree it indexes.
    let db = env.root.join(".simd-index");
    let run = |args: &[&str]| {
        let mut c = env.simd();
        c.arg("--db").arg(&db).args(["--format", "json"]).args(args);
        let out = c.assert().success();
        serde_json::from_slice::<serde_json::Value>(&out.get_output().stdout).unwrap()
    };
    let s = run(&["index", env.root.to_str().unwrap()]);
    assert_eq!(s["new"].as_u64(), Some(1));
    env.write("b.txt", text(2, 400));
    // No roots: the remembered ones.
    let s = run(&["index"]);
    assert_eq!((s["new"].as_u64(), s["unchanged"].as_u64()), (Some(1), Some(1)));
    let st = run(&["status"]);
    assert_eq!(st["files"].as_u64(), Some(2));
    assert_eq!(st["roots"][0]["path"].as_str().unwrap(), env.root.canonicalize().unwrap().to_str().unwrap());
}

/// The index lives under `$XDG_DATA_HOME/simd` (else `~/.local/share/simd`)
/// when neither --db nor SIMD_DB names it, so `simd index DIR` then `simd
/// report` just works. An empty SIMD_DB (a variable meant to be set and
/// not) is refused with what to do, unless --db is given: the default
/// index is not where the user meant to write.
#[test]
fn the_index_is_found_where_no_option_names_it() {
    let env = Env::new();
    env.write("a.txt", text(1, 400));
    env.write("b.txt", text(1, 400));
    let home = env.tmp.path().join("home");
    let bare = |envs: &[(&str, &std::path::Path)]| {
        let mut c = assert_cmd::Command::cargo_bin("simd").unwrap();
        c.env_remove("SIMD_DB").env_remove("SIMD_LOG").env_remove("XDG_DATA_HOME").env("HOME", &home);
        for (k, v) in envs {
            c.env(k, v);
        }
        c
    };
    bare(&[]).args(["--quiet", "index"]).arg(&env.root).assert().success();
    let default = home.join(".local/share/simd");
    let st = Store::open(&default, Access::Read, None).unwrap();
    assert_eq!(super::files_of(&st).len(), 2);
    drop(st);
    let out = bare(&[]).args(["--format", "json", "report"]).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["identical"].as_array().map(Vec::len), Some(1), "{r}");

    let xdg = env.tmp.path().join("xdg");
    bare(&[("XDG_DATA_HOME", &xdg)]).args(["--quiet", "index"]).arg(&env.root).assert().success();
    assert!(xdg.join("simd").is_dir());
    // A relative one is ignored (the XDG spec): the index stays in ~.
    let relative = std::path::Path::new("rel");
    bare(&[("XDG_DATA_HOME", relative)]).current_dir(env.tmp.path()).args(["--quiet", "index"]).assert().success();
    assert!(!env.tmp.path().join("rel").exists());

    let empty = std::path::Path::new("");
    let out = bare(&[("SIMD_DB", empty)]).arg("status").assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("SIMD_DB is set but empty") && !err.contains("--db <DIR>"), "{err}");
    // Nothing was written in the default place by the refused command.
    let listing = std::fs::read_dir(&default).unwrap().count();
    bare(&[("SIMD_DB", empty)]).args(["--quiet", "index"]).arg(&env.root).assert().code(2);
    assert_eq!(std::fs::read_dir(&default).unwrap().count(), listing);
    bare(&[("SIMD_DB", empty)]).arg("--db").arg(&env.db).args(["--quiet", "index"]).arg(&env.root).assert().success();
    assert_eq!(env.files().len(), 2);
}

/// A line of an ignore file that is not a glob is said, with the file and
/// line, and the file's other lines still apply.
#[test]
fn a_bad_line_of_an_ignore_file_is_said_and_the_rest_applies() {
    let env = Env::new();
    env.write("keep.txt", text(1, 300));
    env.write("sub/drop.log", text(2, 300));
    env.write("sub/keep.log", text(3, 300));
    env.write("sub/.simdignore", "a{b\ndrop.log\n");
    let out = env.simd().args(["--format", "json", "index"]).arg(&env.root).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("sub/.simdignore: line 1: error parsing glob 'a{b'") && err.contains("that line is left out"),
        "{err}"
    );
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(names.iter().any(|n| n.ends_with("/sub/keep.log")), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with("/drop.log")), "{names:?}");
}

#[test]
fn ignore_files_and_excludes_are_honoured() {
    let env = Env::new();
    env.write("keep.txt", text(1, 300));
    env.write("build/out.bin", noise(1, 3000));
    env.write("notes.tmp", text(2, 300));
    env.write(".gitignore", "build/\n");
    env.write(".git/objects/aa", noise(3, 100));
    let out = env.simd().args(["--format", "json", "index", "--exclude", "*.tmp"]).arg(&env.root).assert().success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    // keep.txt and .gitignore itself.
    assert_eq!(s["new"].as_u64(), Some(2), "{s}");
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(names.iter().any(|n| n.ends_with("/keep.txt")));
    assert!(!names.iter().any(|n| n.contains("/build/") || n.ends_with(".tmp") || n.contains("/.git/")));

    // Excluded after it was indexed: it leaves the index but is not lost
    // (no ghost), while a copy deleted in the same run leaves one, and
    // its content's chunk list stays for it.
    env.write("copy.txt", text(1, 300));
    env.write("other.txt", text(3, 300));
    env.simd().args(["--quiet", "index"]).arg(&env.root).assert().success();
    std::fs::remove_file(env.root.join("copy.txt")).unwrap();
    let out = env
        .simd()
        .args(["--format", "json", "index", "--exclude", "keep.txt", "--exclude", "other.txt"])
        .arg(&env.root)
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((s["removed"].as_u64(), s["left_out"].as_u64()), (Some(1), Some(2)), "{s}");
    env.check();
    let store = env.open();
    let ghosts: Vec<Vec<u8>> = store.scan::<History>().map(|r| r.unwrap().0 .0).collect();
    assert_eq!(ghosts, [super::path_of(&env.root.join("copy.txt"))]);
    // .gitignore's, notes.tmp's (indexed by the run without its exclude:
    // excludes hold for one run) and the ghost's; other.txt's went.
    assert_eq!(store.scan::<ContentChunks>().count(), 3);
    drop(store);
    let lost = |p: &str| {
        let out = env.simd().arg("lost").arg(env.root.join(p)).assert().success();
        String::from_utf8_lossy(&out.get_output().stdout).into_owned()
    };
    assert!(lost("keep.txt").contains("it is there, but not in the index"), "{}", lost("keep.txt"));
    assert!(lost("copy.txt").contains("last seen"), "{}", lost("copy.txt"));
}

/// What programs keep beside documents only while they work on them
/// (office suites' and editors' locks, swap and auto-save files, partial
/// downloads) and folders' system files are left out and counted with
/// their reason (`scan::is_clutter`). Were they indexed, every lock file
/// dropped would be a file lost, and the copies of `desktop.ini` an
/// identical set. `--no-ignore` indexes them; a run without it takes them
/// out again, not as files lost.
#[test]
fn editors_locks_and_folders_system_files_are_left_out() {
    let env = Env::new();
    let clutter = [
        "~$plan.docx",
        ".~lock.plan.odt#",
        "~WRL0001.tmp",
        ".plan.txt.swp",
        "#plan.txt#",
        "a/desktop.ini",
        "b/desktop.ini",
        "a/Thumbs.db",
        ".DS_Store",
        "._plan.docx",
        "big.iso.crdownload",
        ".nfs000000000123abcd00000001",
    ];
    let kept = ["plan.docx", "plan.odt", "plan.txt", "plan.txt~", "notes.swp", "b/readme.txt"];
    for (i, p) in kept.iter().enumerate() {
        env.write(p, text(i as u64, 400));
    }
    // The clutter's bytes alike: indexed, it would be an identical set.
    for p in clutter {
        env.write(p, text(99, 300));
    }
    let names = |env: &Env| -> Vec<String> {
        let mut n: Vec<String> = (env.files().iter())
            .map(|(p, _)| {
                String::from_utf8_lossy(&p[path_of(&env.root.canonicalize().unwrap()).len() + 1..]).into_owned()
            })
            .collect();
        n.sort();
        n
    };
    let root = env.root.to_str().unwrap();
    let s = env.json(&["index", root]);
    assert_eq!(s["new"].as_u64(), Some(kept.len() as u64), "{s:#}");
    let skipped = &s["skipped"][0];
    assert!(skipped["reason"].as_str().unwrap().contains("a folder's system file"), "{s:#}");
    assert_eq!(skipped["count"].as_u64(), Some(clutter.len() as u64), "{s:#}");
    let mut want: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
    want.sort();
    assert_eq!(names(&env), want);
    let report = env.json(&["report"]);
    assert_eq!(report["identical"].as_array().map(Vec::len), Some(0), "{report:#}");

    let s = env.json(&["index", "--no-ignore", root]);
    assert_eq!(s["new"].as_u64(), Some(clutter.len() as u64), "{s:#}");
    assert_eq!(names(&env).len(), kept.len() + clutter.len());
    let report = env.json(&["report"]);
    assert_eq!(report["identical"].as_array().map(Vec::len), Some(1), "{report:#}");

    // Left out again: out of the index, and no ghost for lost-and-found.
    let s = env.json(&["index", root]);
    assert_eq!((s["left_out"].as_u64(), s["removed"].as_u64()), (Some(clutter.len() as u64), Some(0)), "{s:#}");
    assert_eq!(names(&env), want);
    env.check();
    assert_eq!(env.open().scan::<History>().count(), 0);
}

/// Clutter named by a `!` line of an ignore file is kept (a tool's own
/// `.part` files, say), the nearest ignore file deciding; clutter named
/// by none stays out.
#[test]
fn a_bang_line_in_an_ignore_file_keeps_the_clutter_it_names() {
    let env = Env::new();
    env.write(".simdignore", "!*.part\n");
    env.write("a/.simdignore", "!desktop.ini\n");
    env.write("sub/.simdignore", "*.part\n");
    let kept = ["x.part", "dl/y.part", "a/desktop.ini", "plan.docx"];
    let out = ["sub/z.part", "b/desktop.ini", "~$plan.docx", "dl/.DS_Store"];
    for (i, p) in kept.iter().chain(&out).enumerate() {
        env.write(p, text(i as u64, 300));
    }
    let s = env.json(&["index", env.root.to_str().unwrap()]);
    let root = path_of(&env.root.canonicalize().unwrap());
    let mut names: Vec<String> = (env.files().iter())
        .map(|(p, _)| String::from_utf8_lossy(&p[root.len() + 1..]).into_owned())
        .filter(|n| !n.ends_with("ignore"))
        .collect();
    names.sort();
    let mut want: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
    want.sort();
    assert_eq!(names, want, "{s:#}");
    // Three are clutter named by no `!` line; `sub/z.part` an ignore file
    // leaves out.
    let clutter = s["skipped"].as_array().unwrap().iter().find(|r| r["reason"].as_str().unwrap().contains("clutter"));
    assert_eq!(clutter.and_then(|r| r["count"].as_u64()), Some(3), "{s:#}");
    env.check();
}

/// An `--exclude` pattern is checked before anything is written: a
/// blank one (an unset `--exclude "$VAR"`, which a glob reads as
/// "everything") or one that is no glob is refused, and neither an index
/// nor a root is made or remembered. A pattern with a slash inside matches
/// at any depth; one starting with a slash is an absolute path.
#[test]
fn exclude_patterns_are_checked_first_and_match_at_any_depth() {
    let env = Env::new();
    env.write("a/build/tmp/t.txt", text(1, 100));
    env.write("a/build/keep.txt", text(2, 100));
    env.write("a/old/x.txt", text(3, 100));
    env.write("b.txt", text(4, 100));
    for (pattern, said) in [("", "an empty pattern"), (" ", "an empty pattern"), ("[", "unclosed character class")] {
        let out = env.simd().args(["index", "--exclude", pattern]).arg(&env.root).assert().failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains(&format!("invalid value '{pattern}' for '--exclude <GLOB>': {said}")), "{stderr}");
        assert!(!env.db.exists(), "{pattern:?}: nothing is written");
    }
    let old = env.root.join("a/old").canonicalize().unwrap();
    let s =
        env.json(&["index", "--exclude", "build/tmp", "--exclude", old.to_str().unwrap(), env.root.to_str().unwrap()]);
    assert_eq!(s["new"].as_u64(), Some(2), "{s}");
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(
        names.iter().any(|n| n.ends_with("/a/build/keep.txt")) && names.iter().any(|n| n.ends_with("/b.txt")),
        "{names:?}"
    );
    // An index that exists gains no root from a refused run.
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    env.simd().args(["index", "--exclude", "", other.to_str().unwrap()]).assert().failure();
    let roots = env.json(&["status"])["roots"].clone();
    assert_eq!(roots.as_array().unwrap().len(), 1, "{roots}");
}

/// A pattern is matched inside the roots, never against the directories
/// above one: `tree/**` meant for nested `tree/` directories left out
/// every file of a root named `tree`. An absolute pattern over a whole
/// root is refused; one outside every root, or a path from where simd
/// runs, matches nothing and is said to.
#[test]
fn exclude_patterns_match_inside_the_roots_only() {
    let env = Env::new();
    assert!(env.root.ends_with("tree"));
    env.write("a.txt", text(1, 100));
    env.write("sub/tree/nested.txt", text(2, 100));
    env.write("sub/keep.txt", text(3, 100));
    let s = env.json(&["index", "--exclude", "tree/**", env.root.to_str().unwrap()]);
    assert_eq!(s["new"].as_u64(), Some(2), "{s}");
    // The index names every file: made for its owner's eyes only.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&env.db).unwrap().permissions().mode() & 0o777, 0o700);
    let names: Vec<String> = env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(names.iter().all(|n| !n.ends_with("nested.txt")), "{names:?}");
    // The same from the tree's parent's name, and a pattern anchored at a
    // directory above the root: nothing of the root leaves.
    let parent = env.root.parent().unwrap().file_name().unwrap().to_str().unwrap().to_string();
    let s = env.json(&["index", "--exclude", &format!("{parent}/**"), "--exclude", "tree/**"]);
    assert_eq!((s["removed"].as_u64(), s["unchanged"].as_u64()), (Some(0), Some(2)), "{s}");
    let above = format!("{}/*", env.root.parent().unwrap().canonicalize().unwrap().display());
    let out = env.simd().args(["index", "--exclude", &above]).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("an --exclude pattern leaves out this whole root; nothing was changed"), "{err}");
    assert_eq!(env.files().len(), 2);
    let out = env.simd().args(["index", "--exclude", "/sub"]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("--exclude /sub: an absolute path outside every root, which matches nothing"), "{err}");
    // Nor is the index directory a root.
    let out = env.simd().arg("index").arg(env.db.join("db")).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("db: the index directory (or inside it): simd does not index its own index"), "{err}");
    let out = env.simd().args(["index", "--exclude", "./sub"]).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(err.contains("./sub: a path from where simd runs matches nothing"), "{err}");
    env.check();
}

#[test]
fn other_chunk_parameters_are_refused_by_name() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.simd().args(["index", "--avg-chunk", "1000"]).arg(&env.root).assert().success();
    let out = env.simd().args(["index", "--avg-chunk", "100"]).arg(&env.root).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("Tmin 460 Tmax 2800 D 540 D' 270") && err.contains("Tmin 46 Tmax 280"), "{err}");
}

#[test]
fn status_text_names_the_figures() {
    let env = Env::new();
    env.write("a.txt", text(1, 3000));
    env.write("b.txt", text(1, 3000));
    env.index();
    let out = env.simd().arg("status").assert().success();
    let t = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for needle in ["files        2", "contents     1 distinct", "chunks", "on disk", "Tmin 460", "last update"] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    // The index run flushed its tables: they are listed by column family,
    // largest first, and they are part of what is on disk.
    let out = env.simd().args(["--format", "json", "status"]).assert().success();
    let st: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let tables = st["tables"].as_array().unwrap();
    assert_eq!(tables.len(), simd::store::ALL_CFS.len(), "{st}");
    let sizes: Vec<u64> = tables.iter().map(|t| t["bytes"].as_u64().unwrap()).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    let named = |n: &str| tables.iter().find(|t| t["name"] == n).unwrap()["bytes"].as_u64().unwrap();
    assert!(named("content_chunks") > 0 && named("files") > 0, "{st}");
    assert!(sizes.iter().sum::<u64>() <= st["disk_bytes"].as_u64().unwrap(), "{st}");
    let line = t.lines().find(|l| l.starts_with("  by table   ")).unwrap_or_else(|| panic!("no tables in\n{t}"));
    assert!(line.contains("content_chunks ") && line.contains("files "), "{line}");
    assert!(t.contains("daemon       not running\n") && st.get("writer_pid").is_none(), "{t}");
    // A process writing to the index (here, this one holding the writer's
    // lock, as a `simd index` run does) is named by its pid.
    let lock = simd::store::lock_writer(&env.db).unwrap();
    let out = env.simd().arg("status").assert().success();
    let t = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(t.contains(&format!("not running; pid {} is writing the index", std::process::id())), "{t}");
    assert_eq!(env.json(&["status"])["writer_pid"].as_u64(), Some(u64::from(std::process::id())));
    drop(lock);
    assert!(env.json(&["status"]).get("writer_pid").is_none());
}

/// `simd status` counts the contents with a name, their bytes and chunks,
/// by merging `content_names` with the records in key order: the records
/// of contents whose files are gone (kept for `simd lost`) lie between
/// them and are not counted. Checked against a point read per content.
#[test]
fn status_counts_the_named_contents_beside_records_kept_for_history() {
    use simd::store::ContentNames;
    let env = Env::new();
    for i in 0..30u64 {
        env.write(&format!("f{i}.txt"), text(100 + i, 200 + 40 * i as usize));
    }
    env.write("copy.txt", text(100, 200));
    env.index();
    for i in (0..30).step_by(3) {
        std::fs::remove_file(env.root.join(format!("f{i}.txt"))).unwrap();
    }
    env.index();
    let store = env.open();
    let (mut contents, mut bytes, mut chunks, mut last) = (0u64, 0u64, 0u64, None);
    for item in store.scan::<ContentNames>() {
        let ((content, _), ()) = item.unwrap();
        if last.replace(content) != Some(content) {
            let rec = store.get_postings(&content).unwrap().unwrap();
            (contents, bytes, chunks) = (contents + 1, bytes + rec.size, chunks + rec.chunk_count());
        }
    }
    let kept = store.scan::<ContentChunks>().count() as u64;
    drop(store);
    assert_eq!(contents, 21, "f0 keeps its name through copy.txt");
    assert!(kept > contents, "records kept for history: {kept}");
    let st = env.json(&["status"]);
    assert_eq!(
        (st["contents"].as_u64(), st["content_bytes"].as_u64(), st["chunks"].as_u64()),
        (Some(contents), Some(bytes), Some(chunks)),
        "{st}"
    );
}

/// Table files per column family, from `simd status --format json`.
pub fn table_files(env: &Env) -> Vec<(String, u64)> {
    let out = env.simd().args(["--format", "json", "status"]).assert().success();
    let st: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let tables = st["tables"].as_array().unwrap().iter();
    tables.map(|t| (t["name"].as_str().unwrap().to_owned(), t["files"].as_u64().unwrap())).collect()
}

/// The write-ahead log files in the index, and their bytes.
fn wal_files(env: &Env) -> (usize, u64) {
    let logs = std::fs::read_dir(env.db.join("db"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len());
    logs.fold((0, 0), |(n, bytes), len| (n + 1, bytes + len))
}

/// A run that changes one small file ends with its WAL synced, not flushed
/// (`Store::flush_unless_small`): the next runs and every reader see its
/// change, a writer's open does not flush what earlier runs left, and the
/// WAL files left stay few (a run flushes once they pass the bound).
#[test]
fn small_runs_leave_their_changes_in_a_bounded_wal() {
    let env = Env::new();
    for i in 0..20 {
        env.write(&format!("d/f{i}.txt"), text(i, 400));
    }
    env.index();
    let tables = |env: &Env| table_files(env).iter().map(|(_, n)| n).sum::<u64>();
    let mut after = vec![(wal_files(&env).0, tables(&env))];
    for i in 0..12u64 {
        env.write("d/f3.txt", text(100 + i, 400 + i as usize));
        assert_eq!(env.index()["changed"].as_u64(), Some(1));
        let (logs, bytes) = wal_files(&env);
        // The bound (8 files, 256 KiB) and the next run's own file; twice
        // that, as the files a flush made obsolete may stay until the next
        // writer's open deletes them (seen in CI, on a busy machine: 10
        // files, 9 of them flushed).
        assert!(logs <= 2 * 9 && bytes <= 2 * (300 << 10), "{logs} WAL files, {bytes} bytes after run {i}");
        after.push((logs, tables(&env)));
        // Readers replay what is not flushed: the change is there.
        env.assert_same_as_fresh(&[&env.root]);
    }
    // Runs left their WAL (each a file more, and no table file more: the
    // next writer kept what it recovered), and one flushed them all.
    let kept = after.windows(2).filter(|w| w[1].0 == w[0].0 + 1).inspect(|w| assert_eq!(w[1].1, w[0].1, "{after:?}"));
    assert!(kept.count() >= 6, "{after:?}");
    assert!(after.windows(2).any(|w| w[1].0 < w[0].0), "never flushed: {after:?}");
    env.check();
}

#[test]
fn runs_that_each_add_a_file_do_not_leave_a_table_file_each() {
    let env = Env::new();
    env.write("a.txt", text(1, 300));
    env.index();
    // Each run's changes are flushed, at its end or a later run's
    // (`Store::flush_unless_small`), and a flush's new file ids (and
    // content ids, and here paths) come after all others: RocksDB alone
    // kept every such file (on this small index, five more table files a
    // flush), and every command opens them.
    for i in 0..16 {
        env.write(&format!("n{i:02}.txt"), text(i + 2, 300));
        env.index();
    }
    // At most three in level 0 and four small ones below, per table.
    let tables = table_files(&env);
    assert!(tables.iter().all(|(_, n)| *n <= 7), "{tables:?}");
    let out = env.simd().arg("status").assert().success();
    let t = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let total: u64 = tables.iter().map(|(_, n)| n).sum();
    // (Then maybe the write-ahead log: RocksDB may leave a flushed one of a
    // few KB for the next writer to delete.)
    assert!(t.contains(&format!(" in {total} table files")), "{t}");
    // RocksDB's options files (~70 KiB each) are told apart from the tables.
    assert!(t.contains("of RocksDB's options and manifest)"), "{t}");
    // What the merges rewrote is all there.
    env.simd().arg("check").assert().success();
    let out = env.simd().args(["--format", "json", "lost"]).arg(env.root.join("n03.txt")).assert().success();
    let lost: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(lost["state"], "live", "{lost}");
}

#[test]
fn nested_roots_are_walked_once() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("a/b/f{i}.txt"), text(i, 300));
    }
    env.write("a/top.txt", text(99, 300));
    let out = env
        .simd()
        .args(["--format", "json", "index"])
        .arg(env.root.join("a"))
        .arg(env.root.join("a/b"))
        .arg(env.root.join("a/./b"))
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(s["new"].as_u64(), Some(31), "{s}");
    assert_eq!(s["roots"].as_array().unwrap().len(), 1, "{s}");
    env.check();
    assert_eq!(env.files().len(), 31);
}

#[test]
fn the_checker_finds_each_planted_inconsistency() {
    use simd::store::{
        Access, ChunkContents, ContentById, ContentId, Mark, Meta, MetaKey, MetaValue, Paths, Posting, SketchContents,
        Store,
    };

    let env = Env::new();
    env.write("a.txt", text(1, 4000));
    env.write("b.txt", text(2, 4000));
    env.write("c.txt", text(3, 4000));
    env.index();
    env.check();

    // One fault of each kind, planted in one batch.
    let store = Store::open(&env.db, Access::Write, None).unwrap();
    let (_, rec) = store.scan::<ContentChunks>().next().unwrap().unwrap();
    let ((chunk, _), _) = store.scan::<ChunkContents>().next().unwrap().unwrap();
    let ((sample, holder), ()) = store.scan::<SketchContents>().next().unwrap().unwrap();
    let (path, _) = store.scan::<Paths>().next().unwrap().unwrap();
    let mut b = store.batch();
    b.delete::<ContentById>(&rec.id);
    b.put::<ChunkContents>(&(chunk, ContentId(999)), &Posting { count: 1, len: 10 });
    b.delete::<SketchContents>(&(sample, holder));
    b.delete::<Paths>(&path);
    b.put::<Meta>(&MetaKey::NextContentId, &MetaValue::NextContentId(1));
    b.put::<Meta>(&MetaKey::Marks, &MetaValue::Marks(vec![Mark { at: 5, next_file_id: 9, within: 0 }]));
    store.write(b).unwrap();
    drop(store);

    let out = env.simd().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "an inconsistent index exits 3");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "content_by_id holds 2 ids for 3 kept chunk lists".to_string(),
        "content id c999: no chunk list has this id".to_string(),
        format!("sketch posting for sample {sample:08x} missing"),
        "has no paths entry".to_string(),
        "meta next_content_id is Some(NextContentId(1))".to_string(),
        "meta marks are out of order or name ids not handed out (next file id 4)".to_string(),
    ] {
        assert!(text.contains(&want), "`{want}` not in:\n{text}");
    }
    let out = env.simd().args(["--format", "json", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "an inconsistent index exits 3, in JSON too");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["consistent"].as_bool(), r["files"].as_u64()), (Some(false), Some(3)), "{r:#}");
    assert_eq!(r["problems"].as_array().map(Vec::len), Some(text.lines().count() - 1), "{r:#}\n{text}");
}

/// The checker compares column families as sorted lists walked side by
/// side: a fault at either end of a list, or where both hold a key but
/// disagree, is found as a point lookup found it.
#[test]
fn the_checker_finds_faults_among_postings_and_names() {
    use simd::store::{Access, ChunkContents, ContentChunks, ContentNames, Posting, SketchContents, Store};

    let env = Env::new();
    for k in 0..4 {
        env.write(&format!("f{k}.txt"), text(k, 3000));
    }
    // A content of two names, one of which goes: the content stays live.
    env.write("copy.txt", text(2, 3000));
    env.index();
    env.check();

    let store = Store::open(&env.db, Access::Write, None).unwrap();
    let ((chunk, holder), posting) = store.scan::<ChunkContents>().last().unwrap().unwrap();
    let ((first_chunk, first_holder), _) = store.scan::<ChunkContents>().next().unwrap().unwrap();
    let names: Vec<_> = store.scan::<ContentNames>().map(|item| item.unwrap().0).collect();
    let (content, file) = names.windows(2).find(|w| w[0].0 == w[1].0).expect("a content of two names")[0];
    let (rec_hash, rec) = store.scan::<ContentChunks>().next().unwrap().unwrap();
    let mut b = store.batch();
    // The last posting says another count; the first is gone; a sample no
    // sketch posted, past every other; a file's name entry is gone.
    b.put::<ChunkContents>(&(chunk, holder), &Posting { count: posting.count + 1, ..posting });
    b.delete::<ChunkContents>(&(first_chunk, first_holder));
    b.put::<SketchContents>(&(u32::MAX, rec.id), &());
    b.delete::<ContentNames>(&(content, file));
    store.write(b).unwrap();
    drop(store);

    let out = env.simd().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "an inconsistent index exits 3");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        format!("posting {chunk} in content"),
        format!("chunk list says Posting {{ count: {}", posting.count),
        format!("posting for chunk {first_chunk} missing"),
        format!("sketch posting {:08x} in content {rec_hash} ({})", u32::MAX, rec.id),
        format!("files {file} holds content {content} but content_names lacks it"),
    ] {
        assert!(text.contains(&want), "`{want}` not in:\n{text}");
    }
    // Those four and nothing else: a walk that lost its place would find
    // the rest of a list wrong too.
    assert_eq!(text.lines().count(), 1 + 4, "{text}");
}

#[test]
fn records_loaded_for_the_walk_answer_as_point_lookups_do() {
    use simd::scan::Known;
    use simd::store::{Access, Store};

    let env = Env::new();
    env.write("a.txt", text(1, 500));
    env.write("sub/b.txt", text(2, 500));
    env.write("sub/c.txt", text(1, 500));
    env.index();
    let store = Store::open(&env.db, Access::Read, None).unwrap();
    let (loaded, ids) = Known::load(&store, 3, &|p| !p.ends_with(b"c.txt")).unwrap();
    assert_eq!(ids.map(|v| v.len()), Some(2), "the ids of the records that pass");
    assert!(matches!(loaded, Known::Loaded(_)));
    for rel in ["a.txt", "sub/b.txt", "sub/c.txt", "sub/missing.txt"] {
        let path = env.root.join(rel);
        let (got, want) = (loaded.get(&store, &path).unwrap(), Known::Lookups.get(&store, &path).unwrap());
        assert_eq!(got, want, "{rel}");
        assert_eq!(got.is_some(), rel != "sub/missing.txt", "{rel}");
    }
    assert!(Known::Nothing.get(&store, &env.root.join("a.txt")).unwrap().is_none());
    // Only the stats kept, the rest read from the index when asked.
    let stats = Known::stats(&store, 3).unwrap();
    for rel in ["a.txt", "sub/b.txt", "sub/c.txt", "sub/missing.txt"] {
        let path = env.root.join(rel);
        assert_eq!(stats.get(&store, &path).unwrap(), Known::Lookups.get(&store, &path).unwrap(), "{rel}");
    }
}

/// Past `Known::LOAD_MAX` files (the tests make it 1), a walk keeps only
/// each record's stats by a hash of its path (`scan::Known::Stats`), both
/// in a read-only walk and in a writer's: nothing changed, then each kind
/// of change, then more changed files than a read-only walk collects.
/// Each run counts what changed, and the index equals a fresh one.
#[test]
fn a_walk_that_keeps_only_stats_finds_every_change() {
    let env = Env::new();
    let index = || -> serde_json::Value {
        let out = env
            .simd()
            .env("SIMD_TEST_LOAD_MAX", "1")
            .args(["--format", "json", "index"])
            .arg(&env.root)
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    for i in 0..30 {
        env.write(&format!("d{}/f{i}.txt", i % 3), text(i, 400));
    }
    assert_eq!(index()["new"].as_u64(), Some(30));
    let counts = |s: &serde_json::Value| {
        ["new", "changed", "unchanged", "moved", "removed"].map(|k| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}")))
    };
    assert_eq!(counts(&index()), [0, 0, 30, 0, 0]);

    env.write("d1/f1.txt", text(100, 500));
    let mut grown = std::fs::read(env.root.join("d2/f2.txt")).unwrap();
    grown.extend_from_slice(b" and more words at its end\n");
    env.write("d2/f2.txt", &grown);
    env.write("d0/new.txt", text(101, 300));
    std::fs::remove_file(env.root.join("d0/f3.txt")).unwrap();
    std::fs::create_dir(env.root.join("e")).unwrap();
    std::fs::rename(env.root.join("d1/f4.txt"), env.root.join("e/f4.txt")).unwrap();
    assert_eq!(counts(&index()), [1, 2, 26, 1, 1]);
    env.check();
    env.assert_same_as_fresh(&[&env.root]);

    // More changed files than a read-only walk collects (4,096): the
    // writer's walk keeps stats too.
    for i in 0..4_200 {
        env.write(&format!("g{}/f{i}.txt", i % 8), format!("file {i}\n"));
    }
    assert_eq!(index()["new"].as_u64(), Some(4_200));
    for i in 0..4_200 {
        env.write(&format!("g{}/f{i}.txt", i % 8), format!("file {i}, changed\n"));
    }
    std::fs::remove_file(env.root.join("d0/f0.txt")).unwrap();
    assert_eq!(counts(&index()), [0, 4_200, 29, 0, 1]);
    env.check();
    env.assert_same_as_fresh(&[&env.root]);
}

#[test]
fn a_run_that_changes_nothing_leaves_the_index_as_it_was() {
    let env = Env::new();
    for i in 0..20 {
        env.write(&format!("d{}/f{i}.txt", i % 3), text(i, 300));
    }
    env.write("link-target.txt", text(50, 300));
    std::os::unix::fs::symlink("link-target.txt", env.root.join("a-link")).unwrap();
    env.index();
    let before = env.db_listing();
    let s = env.index();
    assert_eq!((s["unchanged"].as_u64(), s["new"].as_u64(), s["removed"].as_u64()), (Some(21), Some(0), Some(0)));
    assert_eq!(env.db_listing(), before, "a run that changed nothing wrote to the index");

    // Each kind of change still reaches the writer: a file gone, a file
    // turned into a symlink, a new root.
    std::fs::remove_file(env.root.join("d0/f0.txt")).unwrap();
    assert_eq!(env.index()["removed"].as_u64(), Some(1));
    std::fs::remove_file(env.root.join("d1/f1.txt")).unwrap();
    std::os::unix::fs::symlink("f4.txt", env.root.join("d1/f1.txt")).unwrap();
    assert_eq!(env.index()["removed"].as_u64(), Some(1));
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("x.txt"), text(60, 300)).unwrap();
    let s = env.json(&["index", other.to_str().unwrap()]);
    assert_eq!(s["new"].as_u64(), Some(1));
    env.check();
}

/// A run over some of the remembered roots looks for files gone under
/// those alone: with nothing changed under them it writes nothing, though
/// a file went under another root meanwhile; a file gone under them goes
/// (with its ghost) and one changed is read again, while the other root's
/// gone file stays until that root is walked.
#[test]
fn a_run_over_some_roots_looks_for_files_gone_under_those_alone() {
    let env = Env::new();
    let (a, b) = (env.root.join("a"), env.root.join("b"));
    for (i, name) in ["a/one.txt", "a/two.txt", "a/sub/three.txt", "b/four.txt", "b/five.txt"].iter().enumerate() {
        env.write(name, text(i as u64 + 1, 300));
    }
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).assert().success();
    let run_a = || env.json(&["index", a.to_str().unwrap()]);
    let counts = |s: &serde_json::Value| {
        ["new", "changed", "unchanged", "removed"].map(|k| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}")))
    };
    let names =
        || -> Vec<String> { env.files().iter().map(|(p, _)| String::from_utf8_lossy(p).into_owned()).collect() };

    std::fs::remove_file(b.join("four.txt")).unwrap();
    let before = env.db_listing();
    assert_eq!(counts(&run_a()), [0, 0, 3, 0]);
    assert_eq!(env.db_listing(), before, "a run that changed nothing under its root wrote to the index");

    std::fs::remove_file(a.join("one.txt")).unwrap();
    env.write("a/sub/three.txt", text(30, 300));
    assert_eq!(counts(&run_a()), [0, 1, 1, 1]);
    let held = names();
    assert_eq!(held.len(), 4, "{held:?}");
    assert!(held.iter().any(|n| n.ends_with("b/four.txt")), "b was not walked: {held:?}");
    assert!(!held.iter().any(|n| n.ends_with("a/one.txt")), "{held:?}");
    let lost = env.json(&["lost", a.join("one.txt").to_str().unwrap()]);
    assert_eq!(lost["state"].as_str(), Some("lost"), "{lost}");

    // Every root remembered: b's file goes now.
    assert_eq!(counts(&env.json(&["index"])), [0, 0, 3, 1]);
    assert!(!names().iter().any(|n| n.ends_with("b/four.txt")));
    env.check();
}

/// A write that kept a file's size, mtime and inode is not seen by `simd
/// index`; `simd reread PATH` reads the file anyway, walking only the
/// roots that hold PATH, and says whether its bytes were those indexed.
#[test]
fn reread_reads_files_whose_stat_hid_a_write() {
    let env = Env::new();
    let other = env.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("d.txt"), text(4, 300)).unwrap();
    let a2 = env.write("a/2.txt", text(1, 300));
    env.write("a/1.txt", text(1, 300));
    env.write("b/3.bin", noise(3, 5_000));
    env.simd().args(["--quiet", "index"]).arg(&env.root).arg(&other).assert().success();
    let counts = |s: &serde_json::Value| {
        ["changed", "unchanged", "reread", "reread_differed"]
            .map(|k| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}")))
    };
    write_keeping_stat(&a2, 10, b"XXXX");
    let indexed = env.files();
    assert_eq!(counts(&env.json(&["index"])), [0, 4, 0, 0]);
    assert_eq!(env.files(), indexed, "simd index read a file whose stat was as recorded");
    let report = env.json(&["report"]);
    assert_eq!(report["identical"].as_array().unwrap().len(), 1, "{report:#}");

    let said = env.json(&["reread", a2.to_str().unwrap()]);
    assert_eq!(counts(&said), [1, 2, 1, 1], "{said:#}");
    let root = env.root.canonicalize().unwrap();
    assert_eq!(
        said["roots"],
        serde_json::json!([{ "path": root.to_str().unwrap() }]),
        "only the root holding the path is walked"
    );
    env.assert_same_as_fresh(&[&env.root, &other]);
    let report = env.json(&["report"]);
    assert_eq!(report["identical"].as_array().unwrap().len(), 0, "{report:#}");
    let text = env.simd().args(["reread", a2.to_str().unwrap()]).assert().success();
    let text = String::from_utf8_lossy(&text.get_output().stdout).into_owned();
    assert!(
        text.contains("re-read 1 file whose size, mtime and inode were as indexed: each held the bytes indexed"),
        "{text}"
    );

    // A directory: each file under it; nothing named: every root.
    assert_eq!(counts(&env.json(&["reread", root.join("a").to_str().unwrap()])), [0, 3, 2, 0]);
    assert_eq!(counts(&env.json(&["reread"])), [0, 4, 4, 0]);
    // A path through a symlinked directory is the path the index holds.
    std::os::unix::fs::symlink(root.join("b"), env.tmp.path().join("link-to-b")).unwrap();
    let via_link = env.tmp.path().join("link-to-b/3.bin");
    assert_eq!(counts(&env.json(&["reread", via_link.to_str().unwrap()])), [0, 3, 1, 0]);
    // The run's options are `simd index`'s: a file excluded leaves the index.
    let said = env.json(&["reread", "--exclude", "*.bin", root.join("b").to_str().unwrap()]);
    assert_eq!((counts(&said), said["left_out"].as_u64()), ([0, 2, 0, 0], Some(1)), "{said:#}");
    // Named, a file left out is said not read.
    let out = env.simd().args(["reread", "--exclude", "*.bin"]).arg(root.join("b/3.bin")).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("b/3.bin: not in the index (an exclude or an ignore file leaves it out): not read"), "{err}");

    // One name of a file with several (a hard link elsewhere in the
    // root): the other names are read with it, and take its new bytes.
    // Read alone, the other name kept the old content: two "copies" of
    // one file, and `simd index` never saw it.
    let body = noise(9, 6_000);
    let one = env.write("c/one.bin", &body);
    std::fs::create_dir_all(env.root.join("d")).unwrap();
    std::fs::hard_link(&one, env.root.join("d/other-name.bin")).unwrap();
    env.write("c/copy.bin", &body);
    env.index();
    write_keeping_stat(&one, 100, b"CHANGED!");
    env.json(&["reread", root.join("c/one.bin").to_str().unwrap()]);
    let content = |rel: &str| {
        let p = root.join(rel);
        env.files().into_iter().find(|(path, _)| *path == super::path_of(&p)).map(|(_, c)| c).unwrap()
    };
    assert_eq!(content("c/one.bin"), content("d/other-name.bin"), "both names of one file hold one content");
    assert_ne!(content("c/one.bin"), content("c/copy.bin"));
    env.assert_same_as_fresh(&[&env.root, &other]);

    for (path, says) in
        [(env.tmp.path().to_path_buf(), "not under a root of the index"), (root.join("a/missing.txt"), "No such file")]
    {
        let out = env.simd().arg("reread").arg(&path).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains(says), "{err}");
    }
    env.check();
}

/// Readers open the index while a writer changes it, flushes and compacts
/// all the time (`simd index` runs back to back, each ending with a flush
/// of every column family, over 64 KB memtables): every open succeeds and
/// sees a consistent index. Before readers kept their table files open and
/// opened again when the manifest moved, some opens failed on a file the
/// writer had just deleted (12 of 511 `simd check` runs beside a daemon
/// flushing every second, `docs/performance.md`).
#[test]
fn readers_open_a_consistent_index_while_a_writer_flushes_and_compacts() {
    let env = Env::new();
    for i in 0..200u64 {
        env.write(&format!("d{}/f{i}.txt", i % 10), text(i, 120));
    }
    env.simd().args(["--quiet", "index"]).arg(&env.root).assert().success();
    let done = std::sync::atomic::AtomicBool::new(false);
    let opens = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let store = Store::open(&env.db, Access::Read, None).unwrap_or_else(|e| panic!("open {n}: {e}"));
                let report = simd::check::check(&store).unwrap_or_else(|e| panic!("check {n}: {e}"));
                assert!(report.is_consistent(), "open {n}: {:?}", report.problems);
                n += 1;
            }
            n
        });
        for round in 0..40u64 {
            for k in 0..20 {
                env.write(&format!("d{}/f{}.txt", k % 10, (round * 20 + k) % 200), text(500 + round * 20 + k, 120));
            }
            env.simd().env("SIMD_TEST_MEMTABLE_KB", "64").args(["--quiet", "index"]).arg(&env.root).assert().success();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(opens > 40, "{opens} opens");
}

/// On a file system that keeps whole seconds (FAT, ext4 with small inodes,
/// many network servers), a file written again within the second it was
/// read, to the same size, keeps size, mtime and inode. A record read that
/// close to the file's change is written so that the next run reads the
/// file again (git's "racily clean"): the second write is not missed, and
/// once the second is long past the file is read no more.
#[test]
fn a_same_size_write_in_the_second_of_the_read_is_not_missed() {
    let env = Env::new();
    let p = env.write("a.txt", "version-A 00001\n");
    // Stamped as such a file system stamps it: a whole second (the next,
    // so that the read falls within it whatever this machine's pace).
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let stamp = std::time::UNIX_EPOCH + std::time::Duration::from_secs(now.as_secs() + 1);
    std::fs::File::options().write(true).open(&p).unwrap().set_modified(stamp).unwrap();
    assert_eq!(env.index()["new"].as_u64(), Some(1));
    write_keeping_stat(&p, 0, b"version-B 00001\n");
    let s = env.index();
    assert_eq!((s["changed"].as_u64(), s["unchanged"].as_u64()), (Some(1), Some(0)), "{s}");
    let fresh = Env::new();
    fresh.write("a.txt", "version-B 00001\n");
    let held: Vec<String> = env.files().into_iter().map(|f| f.1).collect();
    assert_eq!(held, fresh_contents(&fresh));
    // Read once more after the tick, as it is then; then no more.
    let past = stamp + std::time::Duration::from_millis(2100);
    std::thread::sleep(past.duration_since(std::time::SystemTime::now()).unwrap_or_default());
    let s = env.index();
    assert_eq!((s["unchanged"].as_u64(), s["bytes_read"].as_u64()), (Some(1), Some(16)), "{s}");
    let s = env.index();
    assert_eq!((s["unchanged"].as_u64(), s["bytes_read"].as_u64()), (Some(1), Some(0)), "{s}");
    env.check();
}

fn fresh_contents(env: &Env) -> Vec<String> {
    env.index();
    env.files().into_iter().map(|f| f.1).collect()
}

/// Under `-x` a root inside another, on a file system of its own, is
/// walked as a root: the outer root's walk stops at its mount point, and
/// folding it into the outer root left it never walked (its files taken
/// out of the index as "left out"). Mounted in a mount namespace of the
/// test's own (`unshare`), so that nothing outside sees it.
#[test]
fn a_root_mounted_inside_another_is_walked_under_one_file_system() {
    let env = Env::new();
    env.write("top.txt", text(71, 300));
    std::fs::create_dir(env.root.join("m")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("simd");
    let script = r#"set -e
        mount -t tmpfs tmpfs "$1/m"
        printf 'inner %s\n' $(seq 1 300) > "$1/m/inner.txt"
        "$2" --db "$3" --format json index -x "$1/m" "$1"
        "$2" --db "$3" --format json index -x
        "$2" --db "$3" --format json index -x "$1""#;
    let user = if super::is_root() { "-m" } else { "-rm" };
    let out = std::process::Command::new("unshare")
        .args([user, "sh", "-c", script, "sh"])
        .arg(&env.root)
        .arg(&bin)
        .arg(&env.db)
        .env_remove("SIMD_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<serde_json::Value> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let counts =
        |s: &serde_json::Value| ["new", "unchanged", "left_out", "removed"].map(|k| s[k].as_u64().unwrap()).to_vec();
    assert_eq!(counts(&runs[0]), [2, 0, 0, 0], "{:#}", runs[0]);
    assert_eq!(runs[0]["roots"].as_array().map(Vec::len), Some(2), "{:#}", runs[0]);
    // The remembered roots; then the outer one named alone, which takes
    // the remembered root inside it along, as it does without `-x`.
    for run in &runs[1..] {
        assert_eq!(counts(run), [0, 2, 0, 0], "{run:#}");
        assert_eq!(run["roots"].as_array().map(Vec::len), Some(2), "{run:#}");
    }
    env.check();
}
