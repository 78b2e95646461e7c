//! `simd lost`: moves, renames and deletions seen by successive `simd index`
//! runs (a delete and a create, connected by the ghost's content).

use std::fs;

use super::{next_second, noise, text, Env};

fn lost(env: &Env, path: &std::path::Path) -> serde_json::Value {
    let out = env.simd().args(["--format", "json", "lost"]).arg(path).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn status(env: &Env) -> serde_json::Value {
    let out = env.simd().args(["--format", "json", "status"]).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn tail(v: &serde_json::Value) -> String {
    v["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string()
}

/// `base` with `n` evenly spread 8-byte substitutions.
fn edit(base: &[u8], n: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    for k in 0..n {
        let at = (k + 1) * v.len() / (n + 1);
        v[at..at + 8].copy_from_slice(b"EDITED!!");
    }
    v
}

#[test]
fn renames_moves_edits_copies_and_deletions() {
    let env = Env::new();
    let a = env.write("docs/a.txt", text(1, 4000));
    let b = env.write("docs/b.txt", text(2, 4000));
    let c = env.write("docs/c.txt", text(3, 4000));
    let d = env.write("docs/d.txt", text(4, 4000));
    let e = env.write("docs/e.txt", noise(5, 20_000));
    let keep = env.write("docs/keep.txt", text(6, 500));
    env.index();
    let root = env.root.canonicalize().unwrap();

    fs::rename(&a, env.root.join("docs/a-renamed.txt")).unwrap(); // rename
    fs::create_dir(env.root.join("archive")).unwrap();
    fs::rename(&b, env.root.join("archive/b.txt")).unwrap(); // move across directories
    fs::write(env.root.join("archive/c-v2.txt"), edit(&text(3, 4000), 2)).unwrap(); // move plus edit
    fs::remove_file(&c).unwrap();
    fs::copy(&d, env.root.join("archive/d-copy.txt")).unwrap(); // copy, then delete the original
    fs::remove_file(&d).unwrap();
    fs::remove_file(&e).unwrap(); // gone for good
    let s = env.index();
    // The rename, the move and the copy-then-delete: a file gone whose
    // content appeared elsewhere in the same pass was moved.
    assert_eq!((s["moved"].as_u64(), s["removed"].as_u64()), (Some(3), Some(2)), "{s:#}");

    let r = lost(&env, &a);
    assert_eq!(r["state"], "lost");
    let best = &r["files"][0]["candidates"][0];
    assert_eq!((best["kind"].as_str(), tail(best).as_str()), (Some("moved"), "a-renamed.txt"), "{r:#}");
    let r = lost(&env, &b);
    assert_eq!(r["files"][0]["candidates"][0]["path"], root.join("archive/b.txt").to_str().unwrap());
    let r = lost(&env, &c);
    let best = &r["files"][0]["candidates"][0];
    assert_eq!((best["kind"].as_str(), tail(best).as_str()), (Some("similar"), "c-v2.txt"), "{r:#}");
    assert!(best["score"].as_f64().unwrap() > 0.5, "{r:#}");
    let r = lost(&env, &d);
    let best = &r["files"][0]["candidates"][0];
    assert_eq!((best["kind"].as_str(), tail(best).as_str()), (Some("moved"), "d-copy.txt"), "{r:#}");
    // No surviving copy: no candidates, and the last known facts.
    let r = lost(&env, &e);
    assert_eq!(r["files"][0]["candidates"].as_array().unwrap().len(), 0, "{r:#}");
    assert_eq!(r["files"][0]["size"], 20_000);
    assert!(r["files"][0]["last_seen"].as_str().unwrap().ends_with("UTC"));
    let text_out = env.simd().arg("lost").arg(&e).assert().success();
    assert!(String::from_utf8_lossy(&text_out.get_output().stdout).contains("nothing in the index holds its content"));
    // Live and unknown paths say so.
    assert_eq!(lost(&env, &keep)["state"], "live");
    assert_eq!(lost(&env, &env.root.join("docs/never.txt"))["state"], "unknown");
    // Relative paths work too.
    let out = env.simd().current_dir(&env.root).args(["--format", "json", "lost", "docs/e.txt"]).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["state"], "lost");
}

/// A file a scan finds gone was last seen by the last walk that found it
/// there, a run that changed nothing included (no writer opens then), not
/// when the scan found it gone: `lost` says both.
#[test]
fn a_file_found_gone_by_a_scan_says_when_it_was_last_seen() {
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64;
    let env = Env::new();
    let a = env.write("a.txt", text(1, 2000));
    env.write("b.txt", text(2, 2000));
    env.index();
    next_second();
    let before_second = now();
    let s = env.index();
    let after_second = now();
    assert_eq!(s["unchanged"], 2, "{s}");
    next_second();
    fs::remove_file(&a).unwrap();
    next_second();
    let before_third = now();
    env.index();
    let r = lost(&env, &a);
    let f = &r["files"][0];
    let (seen, gone) = (f["last_seen_ns"].as_i64().unwrap(), f["found_gone_ns"].as_i64().unwrap());
    assert!(before_second <= seen && seen <= after_second, "the no-change run saw it last: {r:#}");
    assert!(gone >= before_third, "{r:#}");
    let out = env.simd().arg("lost").arg(&a).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.contains(", found gone "), "{said}");
    // The walks are noted beside the index, a line a root.
    let walked = std::fs::read_to_string(env.db.join("walked")).unwrap();
    assert_eq!(walked.lines().count(), 1, "{walked}");
}

#[test]
fn a_chain_of_moves_ends_at_the_newest_place() {
    let env = Env::new();
    let a = env.write("a.txt", text(1, 3000));
    env.index();
    fs::rename(&a, env.root.join("b.txt")).unwrap();
    env.index();
    fs::rename(env.root.join("b.txt"), env.root.join("c.txt")).unwrap();
    env.index();
    let r = lost(&env, &a);
    let cands = r["files"][0]["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 1, "{r:#}");
    assert_eq!(tail(&cands[0]), "c.txt");
    assert_eq!(tail(&lost(&env, &env.root.join("b.txt"))["files"][0]["candidates"][0]), "c.txt");
    assert_eq!(r["files"][0]["moves"].as_array().map(Vec::len), Some(0), "the chain is in the answer's via: {r:#}");
    // The end of the chain removed: no file holds the content, and the
    // answer says where it went before it was lost.
    fs::remove_file(env.root.join("c.txt")).unwrap();
    env.index();
    let r = lost(&env, &a);
    let f = &r["files"][0];
    assert_eq!(f["candidates"].as_array().map(Vec::len), Some(0), "{r:#}");
    let moves: Vec<String> = f["moves"].as_array().unwrap().iter().map(tail).collect();
    assert_eq!(moves, ["b.txt", "c.txt"], "{r:#}");
    let out = env.simd().arg("lost").arg(&a).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let root = env.root.canonicalize().unwrap();
    let (b, c) = (root.join("b.txt"), root.join("c.txt"));
    let line = format!("moved to {} → {}, removed there since", b.display(), c.display());
    assert!(text.contains(&line), "{text}");
    assert!(text.contains("nothing in the index holds its content"), "{text}");
}

#[test]
fn a_directory_moved_and_partly_edited_says_where_it_went() {
    let env = Env::new();
    for i in 0..10u64 {
        env.write(&format!("old/f{i}.txt"), text(100 + i, 2500));
    }
    env.index();
    fs::rename(env.root.join("old"), env.root.join("new")).unwrap();
    for i in 0..3u64 {
        fs::write(env.root.join(format!("new/f{i}.txt")), edit(&text(100 + i, 2500), 1)).unwrap();
    }
    env.index();
    let r = lost(&env, &env.root.join("old"));
    assert_eq!(r["state"], "lost_directory", "{r:#}");
    let files = r["files"].as_array().unwrap();
    assert_eq!(files.len(), 10);
    for f in files {
        let name = tail(f);
        let best = &f["candidates"][0];
        assert_eq!(tail(best), name, "{f:#}");
        assert_eq!(
            best["kind"],
            if ["f0.txt", "f1.txt", "f2.txt"].contains(&name.as_str()) { "similar" } else { "moved" }
        );
    }
    let dest = &r["destinations"][0];
    assert_eq!((dest["path"].as_str().unwrap().rsplit('/').next(), dest["files"].as_u64()), (Some("new"), Some(10)));
}

/// A directory that is still there, asked about before and after some of
/// its files go: it answers with what the index holds under it, not "not
/// in the index".
#[test]
fn a_live_directory_says_what_it_holds_and_what_left_it() {
    let env = Env::new();
    for i in 0..4u64 {
        env.write(&format!("docs/f{i}.txt"), text(300 + i, 2000));
    }
    env.write("docs-other/x.txt", text(400, 2000));
    env.index();
    let r = lost(&env, &env.root.join("docs"));
    assert_eq!((r["state"].as_str(), r["live_files"].as_u64()), (Some("live_directory"), Some(4)), "{r:#}");
    assert!(r["files"].as_array().unwrap().is_empty(), "{r:#}");
    let out = env.simd().arg("lost").arg(env.root.join("docs")).assert().success();
    let text_answer = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text_answer.contains("directory, 4 files in the index, 0 files gone from it"), "{text_answer}");

    fs::remove_file(env.root.join("docs/f0.txt")).unwrap();
    env.index();
    let r = lost(&env, &env.root.join("docs"));
    assert_eq!((r["state"].as_str(), r["live_files"].as_u64()), (Some("lost_directory"), Some(3)), "{r:#}");
    assert_eq!(r["files"].as_array().unwrap().len(), 1, "{r:#}");
    // "docs" is a prefix of "docs-other", not its parent.
    let r = lost(&env, &env.root.join("doc"));
    assert_eq!(r["state"], "unknown", "{r:#}");
}

/// `simd lost DIR --since WHEN` answers for the files that went from DIR
/// since then: what went missing today, and where it went.
#[test]
fn lost_since_keeps_what_went_in_that_time() {
    let env = Env::new();
    for i in 0..4u64 {
        env.write(&format!("docs/f{i}.txt"), text(500 + i, 2000));
    }
    env.index();
    fs::remove_file(env.root.join("docs/f0.txt")).unwrap();
    env.index();
    // Then what comes after it.
    let since = next_second();
    fs::create_dir(env.root.join("kept")).unwrap();
    fs::rename(env.root.join("docs/f1.txt"), env.root.join("kept/f1.txt")).unwrap();
    fs::remove_file(env.root.join("docs/f2.txt")).unwrap();
    env.index();
    let docs = env.root.join("docs");
    let names = |r: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = r["files"].as_array().unwrap().iter().map(tail).collect();
        v.sort();
        v
    };
    let all = lost(&env, &docs);
    assert_eq!(names(&all), ["f0.txt", "f1.txt", "f2.txt"], "{all:#}");
    assert!(all.get("since").is_none(), "{all:#}");
    let out = env.simd().args(["--format", "json", "lost", "--since", &since]).arg(&docs).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(names(&r), ["f1.txt", "f2.txt"], "{r:#}");
    assert_eq!((r["since"].as_str(), r["live_files"].as_u64()), (Some(since.as_str()), Some(1)), "{r:#}");
    let moved = r["files"].as_array().unwrap().iter().find(|f| tail(f) == "f1.txt").unwrap();
    assert_eq!(moved["candidates"][0]["kind"], "moved", "{moved:#}");
    let out = env.simd().args(["lost", "--since", "1h"]).arg(&docs).assert().success();
    let text_answer = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text_answer.contains("directory, 1 file in the index, 3 files gone from it since "), "{text_answer}");
    // A file's answer is its last record, whenever: --since is said not
    // to apply, rather than ignored without a word.
    let out = env.simd().args(["lost", "--since", "1h"]).arg(docs.join("f0.txt")).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(said.contains("f0.txt: a file: --since keeps what went from a directory in that time"), "{said}");
    // Every file gone, none since a later time: a lost directory still,
    // not a live one.
    fs::remove_file(env.root.join("docs/f3.txt")).unwrap();
    env.index();
    let later = next_second();
    let out = env.simd().args(["--format", "json", "lost", "--since", &later]).arg(&docs).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        (r["state"].as_str(), r["live_files"].as_u64(), names(&r).len()),
        (Some("lost_directory"), Some(0), 0),
        "{r:#}"
    );
}

/// A directory moved away with a symlink left in its place (to the
/// directory that now holds it): the user asks by the old path, which
/// now resolves elsewhere; the index answers for the path as it was.
#[test]
fn a_directory_replaced_by_a_symlink_is_asked_about_as_it_was() {
    let env = Env::new();
    env.write("docs/plan.txt", text(500, 2000));
    env.write("elsewhere/keep.txt", text(501, 2000));
    env.index();
    fs::rename(env.root.join("docs"), env.root.join("elsewhere/docs-2024")).unwrap();
    std::os::unix::fs::symlink("elsewhere", env.root.join("docs")).unwrap();
    env.index();
    let r = lost(&env, &env.root.join("docs/plan.txt"));
    let best = &r["files"][0]["candidates"][0];
    assert_eq!((r["state"].as_str(), best["kind"].as_str()), (Some("lost"), Some("moved")), "{r:#}");
    assert!(best["path"].as_str().unwrap().ends_with("/elsewhere/docs-2024/plan.txt"), "{r:#}");
    // A path the index does not know still resolves through symlinks, as
    // the index stores the real paths.
    let r = lost(&env, &env.root.join("docs/keep.txt"));
    assert!((r["state"] == "live") && r["path"].as_str().unwrap().ends_with("/elsewhere/keep.txt"), "{r:#}");
}

#[test]
fn history_expires_by_count_and_takes_unreferenced_chunk_lists_with_it() {
    let env = Env::new();
    let paths: Vec<_> = (0..4u64).map(|i| env.write(&format!("f{i}.bin"), noise(i, 10_000))).collect();
    env.index();
    for p in &paths {
        fs::remove_file(p).unwrap();
    }
    env.index();
    assert_eq!(status(&env)["history"], 4);
    // A change triggers retention: keep only the newest record.
    env.write("new.txt", text(9, 100));
    env.simd().args(["index", "--keep-history", "1"]).arg(&env.root).assert().success();
    assert_eq!(status(&env)["history"], 1);
    env.check(); // no chunk list is left without a name or a ghost
                 // Age: everything older than 0 days goes.
    env.write("newer.txt", text(10, 100));
    env.simd().args(["index", "--keep-history-days", "0"]).arg(&env.root).assert().success();
    assert_eq!(status(&env)["history"], 0);
    env.check();
    assert_eq!(lost(&env, &paths[0])["state"], "unknown");
}

#[test]
fn a_moved_file_with_copies_elsewhere_is_found_at_its_new_place_first() {
    let env = Env::new();
    let body = text(42, 2000);
    // Older copies of the same content, under the same name and another.
    env.write("keep/report.txt", &body);
    env.write("aaa/copy-of-report.txt", &body);
    let old = env.write("old/report.txt", &body);
    env.index();
    fs::create_dir(env.root.join("zzz")).unwrap();
    fs::rename(&old, env.root.join("zzz/report.txt")).unwrap();
    env.index();
    let r = lost(&env, &old);
    let c = r["files"][0]["candidates"].as_array().unwrap();
    // The copy that appeared when the old one went is where it moved; the
    // copies that were there already follow it, the closest name first.
    let got: Vec<(&str, &str)> = c.iter().map(|c| (c["kind"].as_str().unwrap(), c["path"].as_str().unwrap())).collect();
    assert_eq!(got.len(), 3, "{r:#}");
    assert!(got[0].0 == "moved" && got[0].1.ends_with("/zzz/report.txt"), "{r:#}");
    assert!(got[1].0 == "identical" && got[1].1.ends_with("/keep/report.txt"), "{r:#}");
    assert!(got[2].0 == "identical" && got[2].1.ends_with("/aaa/copy-of-report.txt"), "{r:#}");
    assert_eq!(
        (r["files"][0]["size"].as_u64(), c[0]["changed_since"].as_bool()),
        (Some(body.len() as u64), Some(false))
    );
    assert!(r["files"][0]["content"].is_string(), "{r:#}");
    // Asked about the directory, the move alone answers for the file.
    let r = lost(&env, &env.root.join("old"));
    assert_eq!(r["files"][0]["candidates"].as_array().map(Vec::len), Some(1), "{r:#}");
}

/// A file moved, then edited or replaced at its new place: the move says
/// so, with how much of the moved content is still there, and the
/// content's copies follow it, or come first when the move kept less
/// than half of it. A move recorded before moves held their content is
/// told by the ghost an edit at the destination left there.
#[test]
fn a_move_whose_destination_changed_since_says_so() {
    use simd::store::{Access, History, HistoryRecord, Store};
    let env = Env::new();
    let body = text(7, 4000);
    let a = env.write("a.txt", &body);
    env.write("copy/a.txt", &body);
    let c = env.write("c.txt", text(8, 4000));
    env.index();
    fs::rename(&a, env.root.join("b.txt")).unwrap();
    fs::rename(&c, env.root.join("d.txt")).unwrap();
    env.index();
    let kinds = |r: &serde_json::Value| -> Vec<(String, String, bool, f64)> {
        r["files"][0]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let changed = c["changed_since"].as_bool().unwrap_or(false);
                (c["kind"].as_str().unwrap().to_string(), tail(c), changed, c["score"].as_f64().unwrap())
            })
            .collect()
    };
    let r = lost(&env, &a);
    assert_eq!(
        kinds(&r),
        [("moved".into(), "b.txt".into(), false, 1.0), ("identical".into(), "a.txt".into(), false, 1.0)]
    );

    // Edited at its new place: text added.
    next_second();
    fs::write(env.root.join("b.txt"), [body.clone(), text(9, 300)].concat()).unwrap();
    env.index();
    let r = lost(&env, &a);
    let k = kinds(&r);
    assert_eq!((k[0].0.as_str(), k[0].1.as_str(), k[0].2), ("moved", "b.txt", true), "{r:#}");
    // All of it is there, in a larger file.
    let resemblance = r["files"][0]["candidates"][0]["resemblance"].as_f64().unwrap();
    assert!(k[0].3 == 1.0 && resemblance > 0.8 && resemblance < 1.0, "{r:#}");
    assert_eq!((k[1].0.as_str(), k[1].3), ("identical", 1.0), "{r:#}");
    let out = env.simd().arg("lost").arg(&a).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("(changed there since: "));

    // Replaced there by other text: the copy is the better answer.
    fs::write(env.root.join("b.txt"), text(10, 4000)).unwrap();
    env.index();
    let k = kinds(&lost(&env, &a));
    assert_eq!((k[0].0.as_str(), k[0].1.as_str()), ("identical", "a.txt"), "{k:?}");
    assert_eq!((k[1].0.as_str(), k[1].1.as_str(), k[1].2), ("moved", "b.txt", true), "{k:?}");
    assert!(k[1].3 < 0.1, "{k:?}");

    // A move record without its content (as written before): the edit at
    // d.txt left the moved content no name, and so a ghost there.
    {
        let store = Store::open(&env.db, Access::Write, None).unwrap();
        let c_bytes = super::path_of(&env.root.canonicalize().unwrap().join("c.txt"));
        let (key, rec) = store.history_of(&c_bytes).last().unwrap().unwrap();
        let HistoryRecord::Moved { to, content } = rec else { panic!("{rec:?}") };
        assert!(content.is_some());
        let mut b = store.batch();
        b.put::<History>(&key, &HistoryRecord::Moved { to, content: None });
        store.write(b).unwrap();
    }
    let r = lost(&env, &c);
    assert_eq!(kinds(&r)[0], ("moved".into(), "d.txt".into(), false, 1.0), "{r:#}");
    next_second();
    fs::write(env.root.join("d.txt"), [text(8, 2000), text(11, 2000)].concat()).unwrap();
    env.index();
    let r = lost(&env, &c);
    let k = kinds(&r);
    assert_eq!((k[0].0.as_str(), k[0].1.as_str(), k[0].2), ("moved", "d.txt", true), "{r:#}");
    assert!(k[0].3 > 0.3 && k[0].3 < 0.7, "{r:#}");
    env.check();
}

#[test]
fn copies_moved_while_nothing_ran_each_go_back_to_where_they_came_from() {
    let env = Env::new();
    let body = text(44, 2000);
    let edited_body = edit(&text(45, 3000), 2);
    // One content in three places, and a file that will be moved and edited
    // while an identical copy of its old bytes sits in a renamed directory.
    let a = env.write("proj/2009/report.txt", &body);
    let b = env.write("proj/2009/sub/report.txt", &body);
    let c = env.write("docs/report.txt", &body);
    let notes = env.write("team/notes.txt", text(45, 3000));
    env.write("proj/2009/notes.txt", text(45, 3000));
    env.index();
    // The directory is renamed, docs/report.txt moves away under a new
    // name, and team/notes.txt moves and is edited.
    fs::rename(env.root.join("proj/2009"), env.root.join("proj/2009-old")).unwrap();
    fs::create_dir(env.root.join("elsewhere")).unwrap();
    fs::rename(&c, env.root.join("elsewhere/renamed.txt")).unwrap();
    fs::remove_file(&notes).unwrap();
    fs::create_dir(env.root.join("team2")).unwrap();
    env.write("team2/notes.txt", &edited_body);
    let s = env.index();
    // Only team2/notes.txt is new: the others are the moved files.
    assert_eq!((s["new"].as_u64(), s["moved"].as_u64(), s["removed"].as_u64()), (Some(1), Some(4), Some(1)), "{s:#}");
    let first = |p: &std::path::Path| {
        let r = lost(&env, p);
        let best = r["files"][0]["candidates"][0].clone();
        (best["kind"].as_str().unwrap().to_string(), best["path"].as_str().unwrap().to_string())
    };
    let root = env.root.canonicalize().unwrap();
    let at = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    assert_eq!(first(&a), ("moved".into(), at("proj/2009-old/report.txt")));
    assert_eq!(first(&b), ("moved".into(), at("proj/2009-old/sub/report.txt")));
    assert_eq!(first(&c), ("moved".into(), at("elsewhere/renamed.txt")));
    // Moved and edited: the new file, not the old bytes' copy that only
    // looked new because its directory was renamed in the same pass.
    assert_eq!(first(&notes), ("similar".into(), at("team2/notes.txt")));
    env.check();
}

#[test]
fn a_file_moved_and_edited_beats_older_copies_and_older_versions() {
    let env = Env::new();
    let body = text(43, 3000);
    // An older identical copy under another name, and an older version.
    env.write("backup/notes-2023.txt", &body);
    env.write("drafts/notes-draft.txt", edit(&body, 3));
    let old = env.write("old/notes.txt", &body);
    env.index();
    fs::remove_file(&old).unwrap();
    // Moved and edited with words changed every few hundred bytes: no chunk
    // survives, the word sketch still sees most of it.
    let edited: Vec<u8> = String::from_utf8(body.clone()).unwrap().replace("version", "release").into_bytes();
    env.write("new/notes.txt", &edited);
    env.index();
    let r = lost(&env, &old);
    let c = r["files"][0]["candidates"].as_array().unwrap();
    // The file that appeared when the old one went comes first, then the
    // copy that was already there, then the old draft.
    assert_eq!(c[0]["kind"], "similar", "{r:#}");
    assert!(c[0]["path"].as_str().unwrap().ends_with("/new/notes.txt"), "{r:#}");
    assert_eq!(c[1]["kind"], "identical", "{r:#}");
    assert!(c[1]["path"].as_str().unwrap().ends_with("/backup/notes-2023.txt"), "{r:#}");
    assert!(c[2]["path"].as_str().unwrap().ends_with("/drafts/notes-draft.txt"), "{r:#}");
}

#[test]
fn an_empty_file_is_found_only_where_it_moved_not_in_every_empty_file() {
    let env = Env::new();
    env.write("pkg/other/__init__.py", b"");
    let gone = env.write("pkg/gone/__init__.py", b"");
    let moved = env.write("pkg/old/__init__.py", b"");
    env.index();
    fs::create_dir(env.root.join("pkg/new")).unwrap();
    fs::rename(&moved, env.root.join("pkg/new/__init__.py")).unwrap();
    env.index();
    // Deleted later: the empty files that were there before are not answers.
    fs::remove_file(&gone).unwrap();
    env.index();
    let r = lost(&env, &gone);
    assert_eq!(r["files"][0]["candidates"].as_array().unwrap().len(), 0, "{r:#}");
    let r = lost(&env, &moved);
    let c = r["files"][0]["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 1, "{r:#}");
    assert!(c[0]["path"].as_str().unwrap().ends_with("/pkg/new/__init__.py"), "{r:#}");
}

#[test]
fn thousands_of_copies_moved_at_once_keep_their_names() {
    // 1,100 empty files moved with their directory: more pairs than are
    // compared all against all, so they are paired by file name.
    let env = Env::new();
    for i in 0..1100 {
        env.write(&format!("old/f{i}.txt"), b"");
    }
    env.index();
    fs::rename(env.root.join("old"), env.root.join("new")).unwrap();
    let s = env.index();
    assert_eq!((s["moved"].as_u64(), s["removed"].as_u64()), (Some(1100), Some(0)), "{s:#}");
    for i in [0, 517, 1099] {
        let r = lost(&env, &env.root.join(format!("old/f{i}.txt")));
        let best = &r["files"][0]["candidates"][0];
        assert_eq!((best["kind"].as_str(), tail(best)), (Some("moved"), format!("f{i}.txt")), "{r:#}");
    }
    env.check();
}

/// A file changed in place run after run keeps one record under its path
/// (its newest: the one `simd lost` reads) once retention has run, not one
/// per version holding that version's chunk list; deleted in the end, its
/// newest content is found where a copy of it lives, and another deleted
/// file's ghost stays. Retention runs when it is due (10 minutes, 1 % of
/// the cap, enough chunk lists kept for earlier versions, or other
/// retention options), not after every run: until then the versions'
/// records stay, and `simd lost` answers from the newest.
#[test]
fn a_file_changed_in_place_many_times_keeps_one_record_not_one_per_version() {
    let env = Env::new();
    let log = env.write("logs/app.log", text(5, 20_000));
    let gone = env.write("gone.txt", text(6, 300));
    let gone_size = fs::metadata(&gone).unwrap().len();
    env.index();
    fs::remove_file(&gone).unwrap();
    env.index();
    let mut body = fs::read(&log).unwrap();
    for k in 0..12 {
        body.extend_from_slice(format!("request {k} served\n").as_bytes());
        fs::write(&log, &body).unwrap();
        env.index();
        // The deleted file's ghost, and the log's previous versions: no
        // retention pass is due yet.
        assert_eq!(status(&env)["history"], 2 + k, "after change {k}");
    }
    env.check();
    // Other retention options make a pass due at once: the deleted file's
    // ghost, and the log's newest previous version.
    body.extend_from_slice(b"request 12 served\n");
    fs::write(&log, &body).unwrap();
    env.simd().args(["index", "--keep-history-days", "365"]).arg(&env.root).assert().success();
    assert_eq!(status(&env)["history"], 2);
    env.check();
    let copy = env.write("archive/app.log", &body);
    fs::remove_file(&log).unwrap();
    env.index();
    let r = lost(&env, &log);
    let best = &r["files"][0]["candidates"][0];
    assert_eq!(best["path"], copy.canonicalize().unwrap().to_str().unwrap(), "{r:#}");
    let r = lost(&env, &gone);
    assert_eq!((r["state"].as_str(), r["files"][0]["size"].as_u64()), (Some("lost"), Some(gone_size)), "{r:#}");
    env.check();
}

#[test]
fn a_live_file_holding_only_a_sliver_of_a_lost_one_is_no_answer() {
    let env = Env::new();
    // Words of their own (the test vocabulary's 16 words would make any
    // two texts share ~6 % of their shingles by chance).
    let words = |tag: &str, n: usize| -> String { (0..n).map(|i| format!("{tag}{i} ")).collect() };
    let lost_text = words("lost", 40_000).into_bytes();
    // The sliver: four whole chunks of the lost file (~1 % of it), so that
    // it shares chunks with it and is measured, not merely never found.
    let lengths = simd::chunker::chunk_lengths(&lost_text, &simd::chunker::ChunkParams::default());
    let start: usize = lengths[..100].iter().sum();
    let end = start + lengths[100..104].iter().sum::<usize>();
    let holding = |own: &str, piece: &[u8]| [words(own, 2000).as_bytes(), piece, words(own, 2000).as_bytes()].concat();
    let gone = env.write("gone.txt", &lost_text);
    env.write("sliver.txt", holding("s", &lost_text[start..end]));
    let tenth = lost_text.len() / 10;
    env.write("part.txt", holding("p", &lost_text[4 * tenth..6 * tenth])); // ~20 % of it
    env.index();
    fs::remove_file(&gone).unwrap();
    env.index();
    let r = lost(&env, &gone);
    let found = r["files"][0]["candidates"].as_array().unwrap();
    assert_eq!(found.iter().map(tail).collect::<Vec<_>>(), ["part.txt"], "{r:#}");
    assert!((0.15..0.25).contains(&found[0]["score"].as_f64().unwrap()), "{r:#}");
}

#[test]
fn a_move_into_a_root_forgotten_since_is_followed_by_its_content() {
    let env = Env::new();
    let (a, b, c) = (env.root.join("a"), env.root.join("b"), env.root.join("c"));
    let body = text(21, 3000);
    let moved = env.write("a/h.txt", &body);
    env.write("b/h.txt", &body);
    env.write("c/other.txt", text(22, 500));
    env.simd().args(["--quiet", "index"]).arg(&a).arg(&b).arg(&c).assert().success();
    fs::rename(&moved, c.join("h.txt")).unwrap();
    env.simd().args(["--quiet", "index"]).assert().success();
    let r = lost(&env, &moved);
    assert_eq!(r["files"][0]["candidates"][0]["kind"], "moved", "{r:#}");

    // The destination leaves the index without a ghost: the chain ends
    // there, and the moved content's other copy answers.
    env.simd().arg("forget").arg(&c).assert().success();
    let r = lost(&env, &moved);
    let f = &r["files"][0];
    let cands = f["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 1, "{r:#}");
    assert_eq!((cands[0]["kind"].as_str(), cands[0]["path"].as_str()), (Some("identical"), b.join("h.txt").to_str()));
    assert_eq!(f["moves"][0]["path"].as_str(), c.join("h.txt").to_str(), "{r:#}");
    assert_eq!(f["moves_end"], "not_indexed", "{r:#}");
    let out = env.simd().arg("lost").arg(&moved).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(said.contains("no longer in the index there") && said.contains("identical"), "{said}");

    // A chain ending at a removal says so.
    let twice = env.write("b/t.txt", text(23, 2000));
    env.write("b/t-copy.txt", text(23, 2000));
    env.simd().args(["--quiet", "index"]).assert().success();
    fs::rename(&twice, b.join("t2.txt")).unwrap();
    env.simd().args(["--quiet", "index"]).assert().success();
    fs::remove_file(b.join("t2.txt")).unwrap();
    env.simd().args(["--quiet", "index"]).assert().success();
    let r = lost(&env, &twice);
    assert_eq!(r["files"][0]["moves_end"], "removed", "{r:#}");
    assert_eq!(r["files"][0]["candidates"][0]["kind"], "identical", "{r:#}");
    env.check();
}

/// A chain with an edit at a stop (a → b, b edited, b → c) is what left
/// `a` followed to `c`, changed there since; and the chunk list of the
/// content a move carries stays while the move does, after the ghosts of
/// its edits at the destination expire (session 73's audit: both were
/// answered as an unchanged move, or as 0% of it there).
#[test]
fn a_chain_with_an_edit_on_the_way_says_the_content_changed() {
    let env = Env::new();
    let body: Vec<u8> = (1..=3000).flat_map(|i| format!("line number {i}\n").into_bytes()).collect();
    let a = env.write("a.txt", &body);
    env.write("copy.txt", &body);
    env.index();
    fs::rename(&a, env.root.join("b.txt")).unwrap();
    env.index();
    next_second();
    let mut edited = body.clone();
    edited.splice(20_000..20_000, b"an inserted paragraph\n".iter().copied());
    fs::write(env.root.join("b.txt"), &edited).unwrap();
    env.index();
    fs::rename(env.root.join("b.txt"), env.root.join("c.txt")).unwrap();
    env.index();
    let r = lost(&env, &a);
    let f = &r["files"][0];
    let c0 = &f["candidates"][0];
    assert_eq!(
        (c0["kind"].as_str(), tail(c0).as_str(), c0["changed_since"].as_bool()),
        (Some("moved"), "c.txt", Some(true)),
        "{r:#}"
    );
    assert_eq!(f["size"].as_u64(), Some(body.len() as u64), "{r:#}");
    assert_eq!(
        (f["candidates"][1]["kind"].as_str(), tail(&f["candidates"][1]).as_str()),
        (Some("identical"), "copy.txt"),
        "{r:#}"
    );
    let out = env.simd().arg("lost").arg(&a).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.contains("(changed there since: 100% of it there, resemblance "), "{said}");

    // A file with no copy moved, then edited twice at its destination: a
    // pass of retention (due: the options changed) drops the destination's
    // superseded ghosts, not the content the move carried.
    let d = env.write("d.txt", &body[..30_000]);
    env.index();
    fs::rename(&d, env.root.join("e.txt")).unwrap();
    env.index();
    let mut e = body[..30_000].to_vec();
    for (k, at) in [(1, 10_000), (2, 20_000)] {
        next_second();
        e.splice(at..at, format!("edit {k}\n").into_bytes());
        fs::write(env.root.join("e.txt"), &e).unwrap();
        let keep = if k == 2 { "1000" } else { "100000" };
        env.simd().args(["-q", "index", "--keep-history", keep]).assert().success();
    }
    let r = lost(&env, &d);
    let c0 = &r["files"][0]["candidates"][0];
    assert_eq!((c0["kind"].as_str(), c0["changed_since"].as_bool()), (Some("moved"), Some(true)), "{r:#}");
    assert!(c0["score"].as_f64().unwrap() > 0.9, "{r:#}");
    env.check();
}

/// A content with more places than `--limit` shows says how many more
/// there are, and of which kind, rather than stopping without a word.
#[test]
fn places_past_the_limit_are_counted() {
    let env = Env::new();
    let body = text(1, 3000);
    for i in 0..7 {
        env.write(&format!("copies/{i}/plan.txt"), &body);
    }
    let mut edited = body.clone();
    edited.extend_from_slice(&text(2, 200));
    for i in 0..3 {
        env.write(&format!("versions/{i}/plan.txt"), &edited);
    }
    let gone = env.write("old/plan.txt", &body);
    env.index();
    fs::remove_file(&gone).unwrap();
    env.index();
    let r = lost(&env, &gone);
    let f = &r["files"][0];
    // Five shown (the default limit), the other two copies and the three
    // edited versions counted.
    assert_eq!(f["candidates"].as_array().map(Vec::len), Some(5), "{r:#}");
    assert_eq!((f["more_candidates"].as_u64(), f["more_identical"].as_u64()), (Some(5), Some(2)), "{r:#}");
    let out = env.simd().arg("lost").arg(&gone).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        said.contains("… and 2 more identical copies and 3 files holding part of it (--limit 10 lists them)"),
        "{said}"
    );
    let out = env.simd().args(["lost", "--limit", "10"]).arg(&gone).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!said.contains("more") && said.matches("similar").count() == 3, "{said}");
}
