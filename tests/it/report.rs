//! `simd report`, `simd similar` and templates end to end, on trees whose
//! answer is known: identical copies, edited versions, a file inside another,
//! a shared boilerplate, unrelated files.

use super::{boilerplate_articles, next_second, noise, text, write_keeping_stat, Env};

/// `base` with `n` small edits spread evenly (each replaces 8 bytes).
fn edited(base: &[u8], n: usize, seed: u8) -> Vec<u8> {
    let mut v = base.to_vec();
    for k in 0..n {
        let at = (k + 1) * v.len() / (n + 1);
        for (i, b) in v[at..at + 8].iter_mut().enumerate() {
            *b = b'A' + ((seed as usize + i + k) % 26) as u8;
        }
    }
    v
}

fn json(env: &Env, args: &[&str]) -> serde_json::Value {
    env.json(args)
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string()).collect()
}

/// A tree with one known cluster and one known identical set.
fn corpus(env: &Env) {
    let doc = text(1, 6000); // ~40 KB
    env.write("a/doc.txt", &doc);
    env.write("b/doc-copy.txt", &doc);
    env.write("c/doc-copy2.txt", &doc);
    env.write("a/doc-v2.txt", edited(&doc, 3, 1));
    env.write("b/doc-v3.txt", edited(&edited(&doc, 3, 1), 4, 9));
    let small = text(2, 1500);
    env.write("a/small.txt", &small);
    env.write("b/big-with-small.txt", [text(3, 5000), small.clone(), text(4, 5000)].concat());
    for i in 0..6 {
        env.write(&format!("u/unrelated{i}.bin"), noise(100 + i, 30_000));
    }
}

#[test]
fn report_finds_identical_sets_clusters_and_containment() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let r = json(&env, &["report"]);
    assert_eq!(r["index"]["files"], 13);
    // One identical set: the three copies, listed back in full.
    let sets = r["identical"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{r:#}");
    assert_eq!(sets[0]["copies"], 3);
    let mut copies = names(&sets[0]["files"]);
    copies.sort();
    assert_eq!(copies, ["doc-copy.txt", "doc-copy2.txt", "doc.txt"]);
    assert_eq!(sets[0]["wasted"].as_u64().unwrap(), 2 * sets[0]["size"].as_u64().unwrap());
    // Two clusters: the versions of doc (copies collapsed to one member), and small inside big.
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 2, "{r:#}");
    let versions = &clusters[0];
    assert_eq!(versions["files"], 5);
    assert_eq!(versions["members"].as_array().unwrap().len(), 3);
    for l in versions["links"].as_array().unwrap() {
        assert_eq!(l["kind"], "similar");
        assert!(l["resemblance"].as_f64().unwrap() > 0.5, "{l}");
    }
    let contain = &clusters[1];
    let link = &contain["links"][0];
    assert_eq!(link["kind"], "contains", "{contain:#}");
    let inner = if names(&contain["members"][link["a"].as_u64().unwrap() as usize]["files"])[0] == "small.txt" {
        link["a_in_b"].as_f64().unwrap()
    } else {
        link["b_in_a"].as_f64().unwrap()
    };
    assert!(inner > 0.6, "{contain:#}");
    assert!(link["resemblance"].as_f64().unwrap() < 0.3);
}

/// `--min-size` keeps the identical sets of files at least that large and
/// the clusters with such a file: empty files (a set of thousands in a
/// source tree, nothing to save) go with `--min-size 1`, and `--verify`
/// reads only what is shown.
#[test]
fn min_size_leaves_out_small_sets_and_clusters() {
    let env = Env::new();
    for rel in ["e/1", "e/2", "e/3"] {
        env.write(rel, b"");
    }
    for rel in ["s/1", "s/2"] {
        env.write(rel, text(1, 50));
    }
    for rel in ["b/1", "b/2"] {
        env.write(rel, noise(2, 200_000));
    }
    // A cluster: a document and a longer version of it, ~30 KB each.
    let doc = text(3, 5_000);
    env.write("c/doc", &doc);
    env.write("c/doc-longer", [doc.as_slice(), &text(4, 300)].concat());
    env.index();
    let shape = |args: &[&str]| {
        let r = json(&env, &[["report"].as_slice(), args].concat());
        let sizes: Vec<u64> = r["identical"].as_array().unwrap().iter().map(|s| s["size"].as_u64().unwrap()).collect();
        (sizes, r["clusters"].as_array().unwrap().len(), r)
    };
    let small = text(1, 50).len() as u64;
    let (sizes, clusters, all) = shape(&[]);
    assert_eq!((sizes, clusters), (vec![200_000, small, 0], 1), "{all:#}");
    let (sizes, clusters, r) = shape(&["--min-size", "1"]);
    assert_eq!((sizes, clusters), (vec![200_000, small], 1), "{r:#}");
    let sel = &r["selected"];
    assert_eq!((sel["min_size"].as_u64(), sel["identical_sets"].as_u64()), (Some(1), Some(2)), "{sel}");
    assert_eq!(sel["identical_files"].as_u64(), Some(4), "{sel}");
    let (sizes, clusters, r) = shape(&["--min-size", "100k"]);
    assert_eq!((sizes, clusters), (vec![200_000], 0), "{r:#}");
    assert_eq!(r["totals"]["identical_sets"].as_u64(), Some(3), "the totals are the index's: {r:#}");
    let (sizes, clusters, _) = shape(&["--min-size", "200000"]);
    assert_eq!((sizes, clusters), (vec![200_000], 0));
    let (sizes, clusters, _) = shape(&["--min-size", "200001"]);
    assert_eq!((sizes, clusters), (vec![], 0));
    let (_, clusters, _) = shape(&["--min-size", "30k"]);
    assert_eq!(clusters, 1, "the longer version is over 30 KiB");

    let out = env.simd().args(["report", "--min-size", "100KiB"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("of files of at least 100.00 KiB: 1 set, 2 files, "), "{text}");
    let verified = json(&env, &["report", "--verify", "--min-size", "1"]);
    assert_eq!(verified["verify"]["files_read"].as_u64(), Some(4), "{verified:#}");
    let out = env.simd().args(["report", "--min-size", "ten"]).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("ten: not a size"));
}

/// `--since` keeps the identical sets and clusters with a file first
/// indexed since a time (file ids grow as files are first indexed, and
/// the index notes when: `store::Mark`): a new copy of an old file makes
/// its set new, a file moved keeps its id and makes nothing new.
#[test]
fn since_keeps_what_was_first_indexed_since() {
    let env = Env::new();
    for rel in ["old/1", "old/2"] {
        env.write(rel, text(1, 300));
    }
    env.write("keep/a", text(2, 300));
    let doc = text(3, 5_000);
    env.write("c/doc", &doc);
    env.write("c/doc-longer", [doc.as_slice(), &text(4, 300)].concat());
    // A mark for every file first indexed, where the writer makes one
    // every 10 minutes.
    let index = || {
        env.simd().env("SIMD_TEST_MARK_EVERY_MS", "0").args(["-q", "index"]).arg(&env.root).assert().success();
    };
    index();
    // Then what comes after it.
    let since = next_second();
    env.write("new/a-copy", text(2, 300));
    for rel in ["new/x", "new/y"] {
        env.write(rel, text(5, 300));
    }
    index();
    let shape = |args: &[&str]| {
        let r = json(&env, &[["report"].as_slice(), args].concat());
        let sets: Vec<Vec<String>> = r["identical"].as_array().unwrap().iter().map(|s| names(&s["files"])).collect();
        (sets, r["clusters"].as_array().unwrap().len(), r)
    };
    let (sets, clusters, all) = shape(&[]);
    assert_eq!((sets.len(), clusters), (3, 1), "{all:#}");
    let (mut sets, clusters, r) = shape(&["--since", &since]);
    sets.sort();
    assert_eq!((sets, clusters), (vec![vec!["a".to_string(), "a-copy".to_string()], vec!["x".into(), "y".into()]], 0));
    assert_eq!(r["selected"]["since"].as_str(), Some(since.as_str()), "{r:#}");
    assert_eq!(r["totals"]["identical_sets"].as_u64(), Some(3), "{r:#}");
    let (sets, clusters, _) = shape(&["--since", "1h"]);
    assert_eq!((sets.len(), clusters), (3, 1), "an hour ago: everything");

    std::fs::create_dir(env.root.join("moved")).unwrap();
    std::fs::rename(env.root.join("old/2"), env.root.join("moved/2")).unwrap();
    index();
    let (sets, clusters, r) = shape(&["--since", &since]);
    assert_eq!((sets.len(), clusters), (2, 0), "a move is not new: {r:#}");
    let out = env.simd().args(["report", "--since", &since]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains(&format!("with a file first indexed since {since}: 2 sets, 4 files, ")), "{text}");
    let out = env.simd().args(["report", "--since", "last tuesday"]).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("not an age"));
}

#[test]
fn thresholds_limit_under_and_out_shape_the_report() {
    let env = Env::new();
    corpus(&env);
    env.index();
    // At 100 %, only pairs one of which is wholly inside the other (in chunks
    // or in the word sample) still link: small.txt in big-with-small.txt.
    let all = json(&env, &["report", "--min-similarity", "0.01", "--min-containment", "0.01"]);
    let r = json(&env, &["report", "--min-similarity", "1", "--min-containment", "1"]);
    let links = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["clusters"].as_array().unwrap().iter().flat_map(|c| c["links"].as_array().unwrap().clone()).collect()
    };
    assert!(links(&r).len() < links(&all).len(), "{r:#}");
    assert!(r["clusters"].as_array().unwrap().iter().any(|c| c["files"] == 2), "small in big: {r:#}");
    for l in links(&r) {
        let whole = |m: &serde_json::Value| m["a_in_b"] == 1.0 || m["b_in_a"] == 1.0;
        assert!(l["kind"] == "contains" && (whole(&l) || whole(&l["words"])), "{l}");
    }
    assert_eq!(r["identical"].as_array().unwrap().len(), 1, "identical sets do not depend on thresholds");
    // A huge min-bytes drops every link.
    let r = json(&env, &["report", "--min-bytes", "10000000"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 0);
    let r = json(&env, &["report", "--limit", "1"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 1);
    assert_eq!(r["totals"]["clusters"], 2);
    assert_eq!((r["selected"]["clusters"].as_u64(), r["selected"]["shown_clusters"].as_u64()), (Some(2), Some(1)));
    assert!(json(&env, &["report"]).get("selected").is_none(), "no selection, no `selected`");
    // Only what touches c/: the identical set (doc-copy2 is there) and the versions cluster.
    let c = env.root.join("c");
    let r = json(&env, &["report", "--under", c.to_str().unwrap()]);
    assert_eq!((r["identical"].as_array().unwrap().len(), r["clusters"].as_array().unwrap().len()), (1, 1));
    let sel = &r["selected"];
    assert_eq!((sel["identical_sets"].as_u64(), sel["clusters"].as_u64()), (Some(1), Some(1)), "{sel}");
    assert_eq!(sel["identical_files"], r["identical"][0]["files"].as_array().unwrap().len(), "{sel}");
    assert_eq!(sel["wasted_bytes"], r["identical"][0]["wasted"], "{sel}");
    assert_eq!(sel["cluster_files"], r["clusters"][0]["files"], "{sel}");
    assert_eq!(sel["under"]["path"].as_str(), c.canonicalize().unwrap().to_str(), "{sel}");
    // Text says how many sets and clusters the path has, and how many show.
    let out = env.simd().args(["report", "--limit", "0", "--under"]).arg(&c).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let under = format!("with a file under {}: 1 set, ", c.canonicalize().unwrap().display());
    assert!(text.contains(&under), "{text}");
    assert!(text.contains("showing 0 of 1 set and 0 of 1 cluster"), "{text}");
    let r = json(&env, &["report", "--under", env.root.join("u").to_str().unwrap()]);
    assert_eq!((r["identical"].as_array().unwrap().len(), r["clusters"].as_array().unwrap().len()), (0, 0));
    let out = env.tmp.path().join("report.csv");
    env.simd().args(["--format", "csv", "report", "--table", "links", "--out"]).arg(&out).assert().success().stdout("");
    let csv = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("cluster,a,b,kind,common_bytes,resemblance"));
    // One row per link: 3 among the versions (each pair), 1 containment.
    assert_eq!(lines.len(), 1 + 3 + 1, "{csv}");
    assert!(lines.iter().any(|l| l.contains(",contains,")));
    // By default a row per name: the set's 3 copies, then the clusters'
    // members, the copies of doc.txt again among its versions.
    let out = env.simd().args(["report", "--format", "csv"]).assert().success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["kind", "group", "content", "size", "names", "path", "hard_link_of"]);
    let kinds: Vec<&str> = rows[1..].iter().map(|r| r[0]).collect();
    assert_eq!(kinds, [["identical"; 3].as_slice(), &["similar"; 5 + 2]].concat(), "{csv}");
    let set = &r_set(&env);
    for row in &rows[1..4] {
        assert_eq!((row[2], row[3], row[4], row[6]), (set.0.as_str(), set.1.as_str(), "3", ""), "{csv}");
    }
    let mut copies: Vec<&str> = rows[1..4].iter().map(|r| r[5].rsplit('/').next().unwrap()).collect();
    copies.sort();
    assert_eq!(copies, ["doc-copy.txt", "doc-copy2.txt", "doc.txt"]);
    // Every name of the clusters, each under its cluster's id.
    let clusters = json(&env, &["report"])["clusters"].as_array().unwrap().clone();
    for c in &clusters {
        let id = c["id"].as_str().unwrap();
        let mut want: Vec<String> = c["members"].as_array().unwrap().iter().flat_map(|m| names(&m["files"])).collect();
        let mut got: Vec<&str> =
            rows[4..].iter().filter(|r| r[1] == id).map(|r| r[5].rsplit('/').next().unwrap()).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{csv}");
    }
    // --table is about CSV: asked of another format, refused.
    let out = env.simd().args(["report", "--table", "links"]).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--table chooses the rows of a csv report; add --format csv"), "{err}");
}

/// The one identical set's content hash and size, as JSON gives them.
fn r_set(env: &Env) -> (String, String) {
    let r = json(env, &["report"]);
    let s = &r["identical"][0];
    (s["content"].as_str().unwrap().to_owned(), s["size"].to_string())
}

#[test]
fn text_report_reads_at_a_glance() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let out = env.simd().arg("report").assert().success();
    let t = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for needle in [
        "13 files",
        "identical: 1 set, 3 files",
        "similar: 2 clusters",
        "A. Identical files",
        "3 copies of",
        "B. Clusters of similar files",
        "contains",
        "= ", // identical copies listed under their member
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
}

#[test]
fn a_text_report_shows_the_strongest_links_of_a_cluster_and_says_how_many_more() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let r = json(&env, &["report"]);
    let text = |links: &str| {
        let out = env.simd().args(["report", "--links", links]).assert().success();
        String::from_utf8_lossy(&out.get_output().stdout).into_owned()
    };
    // The largest of a JSON link's six measures.
    let strength = |l: &serde_json::Value| {
        ["resemblance", "a_in_b", "b_in_a"]
            .iter()
            .flat_map(|m| [l[m].as_f64().unwrap(), l["words"][m].as_f64().unwrap()])
            .fold(0.0, f64::max)
    };
    let clusters = r["clusters"].as_array().unwrap();
    let total: usize = clusters.iter().map(|c| c["links"].as_array().unwrap().len()).sum();
    let versions = clusters.iter().find(|c| c["links"].as_array().unwrap().len() >= 3).expect("{r:#}");
    let n = versions["links"].as_array().unwrap().len();

    let one = text("1");
    // A link's line starts `[a]–[b]` (a member's line starts `[a] path`).
    let link_lines = |t: &str| t.lines().filter(|l| l.trim_start().starts_with('[') && l.contains("]–[")).count();
    assert_eq!(link_lines(&one), clusters.len(), "one link a cluster:\n{one}");
    assert!(one.contains(&format!("the 1 strongest of its {n} links:")), "{one}");
    assert!(one.contains(&format!("… {} more (`--links 0` shows them all here", n - 1)), "{one}");
    // The one shown is the strongest.
    let heading = format!("the 1 strongest of its {n} links:\n");
    let line = one.split(heading.as_str()).nth(1).and_then(|rest| rest.lines().next()).unwrap();
    let links = versions["links"].as_array().unwrap();
    let pair =
        |l: &serde_json::Value| format!("[{}]–[{}] ", l["a"].as_u64().unwrap() + 1, l["b"].as_u64().unwrap() + 1);
    let shown = links.iter().find(|l| line.trim_start().starts_with(&pair(l))).expect(line);
    assert_eq!(strength(shown), links.iter().map(strength).fold(0.0, f64::max), "{one}");

    // `--links 0` lists them all, as the default does when there are few.
    for all in [text("0"), text("10")] {
        assert_eq!(link_lines(&all), total, "{all}");
        assert!(!all.contains("strongest") && !all.contains(" more ("), "{all}");
    }
}

#[test]
fn an_html_report_is_one_page_with_every_link_and_its_paths_escaped() {
    let env = Env::new();
    corpus(&env);
    // A name HTML would read as markup, twice (an identical set).
    let odd = "odd/<b>&\"it's\".txt";
    env.write(odd, text(7, 300));
    env.write("odd/plain.txt", text(7, 300));
    env.index();
    let r = json(&env, &["report"]);
    let html = |args: &[&str]| {
        let out = env.simd().args(["--format", "html", "report"]).args(args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let page = html(&[]);
    assert!(page.starts_with("<!doctype html>\n") && page.ends_with("</html>\n"), "{page}");
    assert!(page.contains("<p>identical: 2 sets, 5 files"), "{page}");
    assert!(page.contains("odd/&lt;b&gt;&amp;&quot;it&#39;s&quot;.txt</li>"), "{page}");
    assert!(!page.contains("<b>"), "a path is never markup:\n{page}");
    // Every cluster, and every link of each as a table row.
    let clusters = r["clusters"].as_array().unwrap();
    for c in clusters {
        assert!(page.contains(&format!("<section id=\"cluster-{}\">", c["id"].as_str().unwrap())), "{page}");
    }
    let links: usize = clusters.iter().map(|c| c["links"].as_array().unwrap().len()).sum();
    assert_eq!(page.matches("<tr><td>").count(), links, "{page}");
    // The same view as text: `--limit 1` keeps one set and one cluster.
    let one = html(&["--limit", "1"]);
    assert_eq!((one.matches("<section id=").count(), one.matches("copies of").count()), (1, 1), "{one}");
    // `--links 1`: each cluster's strongest link, and how many more; 0, all.
    let counts: Vec<usize> = clusters.iter().map(|c| c["links"].as_array().unwrap().len()).collect();
    assert!(counts.iter().any(|&n| n > 1), "a cluster with more than one link: {counts:?}");
    let strongest = html(&["--links", "1"]);
    assert_eq!(strongest.matches("<tr><td>").count(), counts.iter().filter(|&&n| n > 0).count(), "{strongest}");
    for &n in counts.iter().filter(|&&n| n > 1) {
        let more = format!("<p>… {} more (<code>--links 0</code> shows them all)</p>", n - 1);
        assert!(strongest.contains(&format!("the 1 strongest of its {n} links")) && strongest.contains(&more));
    }
    assert_eq!(html(&["--links", "0"]), page);
}

#[test]
fn a_repeated_report_reuses_the_analysis_until_the_index_changes() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let run = |env: &Env| {
        let out = env.simd().args(["-v", "--format", "json", "report"]).assert().success();
        String::from_utf8_lossy(&out.get_output().stderr).into_owned()
    };
    assert!(run(&env).contains("analysis computed"));
    assert!(run(&env).contains("analysis reused from the cache"));
    // A cache made by another simd build (its identity is after the
    // version byte) is not served.
    let cache = env.db.join("analysis.cache");
    let mut bytes = std::fs::read(&cache).unwrap();
    bytes[1] ^= 0xff;
    std::fs::write(&cache, bytes).unwrap();
    assert!(run(&env).contains("analysis computed"));
    assert!(run(&env).contains("analysis reused from the cache"));
    env.write("a/doc-v4.txt", edited(&text(1, 6000), 2, 5));
    env.index();
    assert!(run(&env).contains("analysis brought up to date: links of 1 contents found again"));
    assert!(run(&env).contains("analysis reused from the cache"));
}

/// A cache whose bytes changed on the disk (a bit rotted, a write torn by
/// a crash) is not served: every report, repeated or brought up to date,
/// equals a fresh one. Without checksums, one byte changed in the analysis
/// decoded to another one as often as not.
#[test]
fn a_cache_changed_on_disk_is_never_served() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let report = |env: &Env| -> serde_json::Value { json(env, &["report"]) };
    let want = report(&env);
    let cache = env.db.join("analysis.cache");
    let good = std::fs::read(&cache).unwrap();
    // Sixty bytes spread over the header, the basis, the analysis and the
    // checksums, and the last.
    let offsets: Vec<usize> = (0..good.len()).step_by(good.len() / 60).chain([good.len() - 1]).collect();
    assert!(offsets.len() > 40, "{} bytes", good.len());
    for &at in &offsets {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&cache, &bad).unwrap();
        assert_eq!(report(&env), want, "byte {at} of {} changed", good.len());
    }
    // Brought up to date from a changed cache: its basis is read then.
    env.write("a/doc-v4.txt", edited(&text(1, 6000), 2, 5));
    env.index();
    let want = fresh_report(&env, &[]);
    for &at in offsets.iter().step_by(3) {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&cache, &bad).unwrap();
        assert_eq!(report(&env), want, "byte {at} of {} changed, then a file added", good.len());
    }
}

/// The report of an index as a fresh analysis finds it, from a copy of the
/// index without its analysis cache (so the original's cache, and the
/// chain of updates it stands for, are left alone).
fn fresh_report(env: &Env, args: &[&str]) -> serde_json::Value {
    let copy = env.tmp.path().join("fresh-copy");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(copy.join("db")).unwrap();
    for e in std::fs::read_dir(env.db.join("db")).unwrap() {
        let e = e.unwrap();
        // The write-ahead log's archive (`db/archive/`) is no part of the
        // index's state.
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), copy.join("db").join(e.file_name())).unwrap();
        }
    }
    let out = env.simd().arg("--db").arg(&copy).args(["--format", "json", "report"]).args(args).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn an_analysis_brought_up_to_date_equals_a_fresh_one() {
    // Under the default cutoff and under a cutoff of 3, where adding and
    // removing copies of a shared header pushes its chunks (and shared
    // posted samples) over the cutoff and back.
    for extra in [&[][..], &["--max-degree", "3"][..]] {
        let env = Env::new();
        let header = text(90, 1500);
        let docs: Vec<Vec<u8>> = (0..4).map(|i| text(10 + i, 3000)).collect();
        for (i, d) in docs.iter().enumerate() {
            env.write(&format!("d{i}/v1.txt"), d);
            env.write(&format!("d{i}/v2.txt"), edited(d, 3, i as u8));
            env.write(&format!("d{i}/copy.txt"), d);
        }
        for i in 0..3u64 {
            env.write(&format!("h/page{i}.txt"), [header.clone(), text(40 + i, 800)].concat());
        }
        env.write("mix/inside.txt", [text(60, 2000), docs[3].clone()].concat());
        // Versions that share words but no chunk: found by posted samples,
        // which go over the sample cap of 3 once a fourth version comes.
        let prose = text(80, 3000);
        for every in [40, 45, 50] {
            env.write(&format!("w/r{every}.txt"), reworded(&prose, every));
        }
        env.index();
        let report = |env: &Env| {
            let out = env.simd().args(["-v", "--format", "json", "report"]).args(extra).assert().success();
            let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
            (serde_json::from_slice::<serde_json::Value>(&out.get_output().stdout).unwrap(), stderr)
        };
        assert!(report(&env).1.contains("analysis computed"));
        let round = |env: &Env, what: &str| {
            env.index();
            let (updated, stderr) = report(env);
            assert!(stderr.contains("analysis brought up to date"), "{what}, {extra:?}: {stderr}");
            assert!(stderr.contains("names of"), "{what}, {extra:?}: every name read again: {stderr}");
            let fresh = fresh_report(env, extra);
            assert_eq!(updated, fresh, "{what}, {extra:?}: the updated analysis differs from a fresh one");
            updated
        };
        env.write("d0/v3.txt", edited(&docs[0], 5, 7));
        std::fs::remove_file(env.root.join("d1/v2.txt")).unwrap();
        let r = round(&env, "a version added, another deleted");
        let common = |r: &serde_json::Value| r["ignored"]["common_chunks"].as_u64().unwrap();
        let before_header = common(&r);
        for i in 3..6u64 {
            env.write(&format!("h/page{i}.txt"), [header.clone(), text(40 + i, 800)].concat());
        }
        env.write("d2/copy2.txt", &docs[2]);
        env.write("w/r55.txt", reworded(&prose, 55));
        let r = round(&env, "the header in 6 pages");
        if !extra.is_empty() {
            assert!(common(&r) > before_header, "{before_header} then {}", common(&r));
        }
        std::fs::rename(env.root.join("d3/v2.txt"), env.root.join("d3/renamed.txt")).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(env.root.join("d3/v1.txt")).unwrap();
        std::io::Write::write_all(&mut f, &text(70, 50)).unwrap();
        drop(f);
        let r = round(&env, "a file renamed, another appended to");
        let with_header = common(&r);
        for i in 1..6u64 {
            std::fs::remove_file(env.root.join(format!("h/page{i}.txt"))).unwrap();
        }
        std::fs::remove_file(env.root.join("w/r55.txt")).unwrap();
        let r = round(&env, "the header back in one page");
        if !extra.is_empty() {
            // The header's chunks went over the cutoff and came back.
            assert!(with_header > common(&r), "{with_header} then {}", common(&r));
        }
        // Under templates: marking one is a fresh analysis; updates follow.
        let id = r["clusters"][0]["id"].as_str().unwrap().to_string();
        env.simd().args(["template", "mark", &id]).args(extra).assert().success();
        assert!(report(&env).1.contains("analysis computed"));
        env.write("d0/v4.txt", edited(&docs[0], 2, 11));
        env.write("d3/v2.txt", edited(&docs[3], 4, 3));
        round(&env, "versions added under a template");
    }
}

#[test]
fn templates_are_ignored_without_rereading_a_file() {
    let env = Env::new();
    boilerplate_articles(&env);
    env.write("kb/other.txt", noise(300, 9000));
    env.index();
    let r = json(&env, &["report"]);
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{r:#}");
    let id = clusters[0]["id"].as_str().unwrap().to_string();
    // The files are gone: nothing can be re-read, the index alone answers.
    std::fs::remove_dir_all(env.root.join("kb")).unwrap();
    let out = env.simd().args(["template", "mark", &id[..6]]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("as template"));
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 0, "{r:#}");
    assert!(r["ignored"]["template_chunks"].as_u64().unwrap() > 0);
    assert!(r["ignored"]["template_bytes"].as_u64().unwrap() >= 4 * 1000);
    let list = env.simd().args(["template", "list"]).assert().success();
    assert!(String::from_utf8_lossy(&list.get_output().stdout).contains(&format!("cluster {id}")));
    let list = json(&env, &["template", "list"]);
    assert_eq!((list[0]["cluster"].as_str(), list.as_array().map(Vec::len)), (Some(id.as_str()), Some(1)), "{list:#}");
    assert_eq!(list[0]["chunks"], r["ignored"]["template_chunks"], "{list:#}");
    let said = json(&env, &["template", "unmark", &id]);
    assert_eq!(said["unmarked_chunks"], list[0]["chunks"], "{said:#}");
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 1);
    let out = env.simd().args(["template", "mark", "ffffffffffff"]).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("no cluster ffffffffffff"));
}

/// Marks are a union: two clusters sharing a header (too little of each
/// file to link them) both mark it, and unmarking one leaves the header
/// template for the other, whose cluster stays gone. A mark of a cluster
/// already marked, an unmark of a cluster never marked and an empty id
/// each fail with what to do.
#[test]
fn a_chunk_two_clusters_marked_stays_template_until_both_are_unmarked() {
    let env = Env::new();
    let header = text(1, 1500);
    for i in 0..3u64 {
        env.write(&format!("a/{i}.txt"), [header.clone(), text(2, 4000), text(10 + i, 300)].concat());
        env.write(&format!("b/{i}.txt"), [header.clone(), text(3, 4000), text(20 + i, 300)].concat());
    }
    env.index();
    let clusters = |r: &serde_json::Value| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = r["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let first = &c["members"][0]["files"][0];
                let dir = if first["path"].as_str().unwrap().contains("/a/") { "a" } else { "b" };
                (dir.to_string(), c["id"].as_str().unwrap().to_string())
            })
            .collect();
        v.sort();
        v
    };
    let listed = |env: &Env| -> Vec<(String, u64)> {
        let l = json(env, &["template", "list"]);
        l.as_array()
            .unwrap()
            .iter()
            .map(|t| (t["cluster"].as_str().unwrap().to_string(), t["chunks"].as_u64().unwrap()))
            .collect()
    };
    let before = clusters(&json(&env, &["report"]));
    assert_eq!(before.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(), ["a", "b"], "{before:?}");
    let (ca, cb) = (before[0].1.clone(), before[1].1.clone());

    let b = json(&env, &["template", "mark", &cb]);
    assert_eq!(b["chunks_marked_by_others_too"], 0, "{b:#}");
    assert_eq!(clusters(&json(&env, &["report"])), [before[0].clone()]);
    let a = json(&env, &["template", "mark", &ca]);
    // The header's chunks: B marked them first.
    let shared = a["chunks_marked_by_others_too"].as_u64().unwrap();
    assert!(shared >= 3 && shared < a["chunks"].as_u64().unwrap(), "{a:#}");
    assert!(clusters(&json(&env, &["report"])).is_empty());
    let mut want = vec![(ca.clone(), a["chunks"].as_u64().unwrap()), (cb.clone(), b["chunks"].as_u64().unwrap())];
    want.sort();
    assert_eq!(listed(&env), want, "each cluster lists every chunk it marked");

    let out = env.simd().args(["template", "mark", &cb]).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&format!("cluster {cb} is marked already")) && err.contains("template unmark"), "{err}");

    let u = json(&env, &["template", "unmark", &ca]);
    assert_eq!(u["kept_chunks"].as_u64(), Some(shared), "{u:#}");
    assert_eq!(u["unmarked_chunks"].as_u64(), Some(a["chunks"].as_u64().unwrap() - shared), "{u:#}");
    // A's own chunks link it again; B's header is still template for B.
    assert_eq!(clusters(&json(&env, &["report"])), [before[0].clone()]);
    assert_eq!(listed(&env), [(cb.clone(), b["chunks"].as_u64().unwrap())]);

    for (id, says) in [(ca.as_str(), "no template marks from cluster"), ("", "no cluster id given")] {
        let out = env.simd().args(["template", "unmark", id]).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains(says), "{id:?}: {err}");
    }
    let u = json(&env, &["template", "unmark", &cb]);
    assert_eq!((u["unmarked_chunks"].as_u64(), u["kept_chunks"].as_u64()), (b["chunks"].as_u64(), Some(0)), "{u:#}");
    assert_eq!(clusters(&json(&env, &["report"])), before);
    assert!(listed(&env).is_empty());
}

/// A boilerplate shared by small pages and by one large file, whose sketch
/// keeps only the boilerplate's rarer samples (its level is higher): each
/// sample is counted among the files whose sketches keep its level, so the
/// mark takes all of the boilerplate's words out of the pages, and nothing
/// is left to join them. Counted among all five, only the samples the large
/// file keeps were marked, and the pages stayed one cluster by the rest.
#[test]
fn a_mark_takes_a_boilerplates_words_out_of_pages_beside_a_large_file() {
    let env = Env::new();
    // Words that occur nowhere else: ten bytes each.
    let words = |seed: u64, n: usize| -> Vec<u8> {
        noise(seed, 4 * n)
            .chunks(4)
            .flat_map(|w| format!("w{:08x} ", u32::from_le_bytes(w.try_into().unwrap())).into_bytes())
            .collect()
    };
    let boiler = words(1, 200);
    for i in 0..4u64 {
        env.write(&format!("pages/p{i}.txt"), [boiler.clone(), words(100 + i, 30)].concat());
    }
    env.write("big.txt", [boiler.clone(), words(2, 8000)].concat());
    env.index();
    let r = json(&env, &["report"]);
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{r:#}");
    assert!(clusters[0]["files"].as_u64().unwrap() >= 4, "{r:#}");
    let id = clusters[0]["id"].as_str().unwrap().to_string();
    let said = json(&env, &["template", "mark", &id]);
    // ~197 shingles lie inside the boilerplate; the large file (level 3
    // or so) keeps about an eighth of them.
    let marked = said["word_samples"].as_u64().unwrap();
    assert!(marked >= 150, "{said:#}");
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 0, "{r:#}");
    // Listed and taken back with the chunks.
    let list = json(&env, &["template", "list"]);
    assert_eq!((list[0]["cluster"].as_str(), list[0]["word_samples"].as_u64()), (Some(id.as_str()), Some(marked)));
    let said = json(&env, &["template", "unmark", &id]);
    assert_eq!(said["unmarked_word_samples"].as_u64(), Some(marked), "{said:#}");
    assert_eq!(json(&env, &["report"])["clusters"].as_array().unwrap().len(), 1);
}

/// A cluster joined through a chain of links (A inside B, C inside B) may
/// share no chunk among all its files, which the default `--min-share 1`
/// asks for: the mark says so and names the share that marks the most
/// widely held chunks, which then works.
#[test]
fn a_mark_that_finds_nothing_shared_by_all_says_what_would_be_marked() {
    let env = Env::new();
    let (t1, t2) = (noise(1, 8000), noise(2, 8000));
    env.write("a.bin", [t1.clone(), noise(3, 1000)].concat());
    env.write("b.bin", [t1.clone(), t2.clone(), noise(4, 1000)].concat());
    env.write("c.bin", [t2.clone(), noise(5, 1000)].concat());
    env.index();
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 1, "{r:#}");
    let id = r["clusters"][0]["id"].as_str().unwrap().to_string();
    let said = json(&env, &["template", "mark", &id]);
    assert_eq!((said["chunks"].as_u64(), said["word_samples"].as_u64()), (Some(0), Some(0)), "{said:#}");
    assert_eq!(said["distinct_contents"], 3, "{said:#}");
    let widest = &said["widest"];
    assert_eq!(widest["held_by"], 2, "{said:#}");
    assert!(widest["bytes"].as_u64().unwrap() >= 12_000, "both shared parts, most of their bytes: {said:#}");
    let share = widest["min_share"].as_f64().unwrap();
    assert!(share > 0.5 && share < 0.67, "{said:#}");
    let out = env.simd().args(["template", "mark", &id]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains(&format!("simd template mark {id} --min-share {share}")), "{text}");

    let said = json(&env, &["template", "mark", &id, "--min-share", &share.to_string()]);
    assert_eq!(said["chunks"], widest["chunks"], "{said:#}");
    assert!(said["widest"].is_null(), "{said:#}");
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 0, "{r:#}");
}

#[test]
fn over_common_chunks_are_cut_off_and_counted() {
    let env = Env::new();
    let header = noise(7, 8000);
    for i in 0..5u64 {
        env.write(&format!("f{i}.txt"), [header.clone(), noise(10 + i, 2000)].concat());
    }
    env.index();
    let r = json(&env, &["report"]);
    assert_eq!(r["clusters"].as_array().unwrap().len(), 1);
    // Over the cutoff the shared chunks take no part: no byte in common is
    // left. The cutoff is on chunks; the word measures still see the shared
    // text (a boilerplate is taken out of both with `template mark`).
    let r = json(&env, &["report", "--max-degree", "4"]);
    for c in r["clusters"].as_array().unwrap() {
        for l in c["links"].as_array().unwrap() {
            assert_eq!(l["common"], 0, "{l}");
            assert!(l["words"]["resemblance"].as_f64().unwrap() >= 0.5, "{l}");
        }
    }
    assert!(r["ignored"]["common_chunks"].as_u64().unwrap() >= 1);
    assert!(r["ignored"]["common_bytes"].as_u64().unwrap() >= 5 * 2000);
    assert_eq!(r["params"]["max_degree"], 4);
}

/// Hard links in a cluster are one file, as in identical sets: counted
/// once, marked in every format, and not offered by `similar` as a copy
/// of the file they are.
#[test]
fn hard_links_in_a_cluster_are_one_file() {
    let env = Env::new();
    let doc = text(1, 6000);
    let a = env.write("a.txt", &doc);
    std::fs::hard_link(&a, env.root.join("a-link.txt")).unwrap();
    env.write("a-copy.txt", &doc);
    env.write("a-v2.txt", edited(&doc, 3, 1));
    env.index();
    let r = json(&env, &["report"]);
    let c = &r["clusters"][0];
    assert_eq!(r["clusters"].as_array().map(Vec::len), Some(1), "{r:#}");
    // a.txt (and its link), its copy, and the version: three files.
    assert_eq!(c["files"], 3, "{r:#}");
    let size = doc.len() as u64;
    assert_eq!(c["bytes"].as_u64(), Some(2 * size + edited(&doc, 3, 1).len() as u64), "{r:#}");
    let member = c["members"].as_array().unwrap().iter().find(|m| m["files"].as_array().unwrap().len() == 3).unwrap();
    let files = member["files"].as_array().unwrap();
    let at = |name: &str| files.iter().position(|f| f["path"].as_str().unwrap().ends_with(name)).unwrap();
    let (i, j) = (at("/a.txt"), at("/a-link.txt"));
    let (first, second) = (i.min(j), i.max(j));
    assert_eq!(files[second]["hard_link_of"], first, "{r:#}");
    assert!(files[first].get("hard_link_of").is_none(), "{r:#}");
    assert!(files[at("/a-copy.txt")].get("hard_link_of").is_none(), "{r:#}");
    assert_eq!(r["totals"]["cluster_files"], 3, "{r:#}");
    let out = env.simd().args(["report"]).assert().success();
    let text_out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text_out.contains("3 files") && text_out.contains("(hard link of "), "{text_out}");
    let out = env.simd().args(["--format", "csv", "report"]).assert().success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let rows: Vec<&str> = csv.lines().filter(|l| l.starts_with("similar,")).collect();
    let linked = rows.iter().filter(|l| !l.ends_with(',')).count();
    assert_eq!(linked, 1, "one similar row names the file it is a hard link of: {csv}");

    // `similar` of a.txt: its link is a.txt itself, not a copy.
    let s = json(&env, &["similar", a.to_str().unwrap()]);
    let named: Vec<String> = s["hits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()))
        .collect();
    assert!(named.iter().any(|n| n.ends_with("/a-copy.txt")), "{s:#}");
    assert!(!named.iter().any(|n| n.ends_with("/a-link.txt") || n.ends_with("/a.txt")), "{s:#}");
    assert_eq!(s["similar"], 2, "{s:#}");
}

#[test]
fn similar_answers_for_unindexed_files_and_stdin_identical_first() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let doc = text(1, 6000);
    let query = env.tmp.path().join("query.txt");
    std::fs::write(&query, edited(&doc, 2, 7)).unwrap();
    let r = json(&env, &["similar", query.to_str().unwrap()]);
    let hits = r["hits"].as_array().unwrap();
    assert_eq!((hits.len(), r["indexed"].as_bool()), (3, Some(false)), "{r:#}");
    assert!(hits.iter().all(|h| h["kind"] == "similar"));
    // The original (with its two copies) resembles an edit of it best.
    assert_eq!(names(&hits[0]["files"]).len(), 3);

    // stdin, exact copy: identical first, then the versions.
    let out = env.simd().args(["--format", "json", "similar", "-"]).write_stdin(doc.clone()).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["hits"][0]["kind"], "identical");
    assert_eq!(r["hits"][0]["resemblance"], 1.0);
    assert_eq!(r["hits"].as_array().unwrap().len(), 3);

    // An indexed file does not answer for itself, but its copies do.
    let r = json(&env, &["similar", env.root.join("a/doc.txt").to_str().unwrap()]);
    let first = names(&r["hits"][0]["files"]);
    assert_eq!(r["hits"][0]["kind"], "identical");
    assert!(!first.contains(&"doc.txt".to_string()) && first.len() == 2, "{first:?}");
    assert_eq!(r["indexed"], true, "{r:#}");
    // CSV and HTML are report formats: asked of another command, refused
    // rather than answered in text.
    let out = env.simd().args(["--format", "csv", "similar"]).arg(env.root.join("a/doc.txt")).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--format csv is for `simd report` only"), "{err}");
    let out = env.simd().arg("similar").arg(env.root.join("a/doc.txt")).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.lines().next().unwrap().ends_with("(the file itself is in the index, and not listed)"), "{said}");

    // The counts are of every answer, before --limit; --all counts apart
    // those sharing less than a link.
    let doc_path = env.root.join("a/doc.txt");
    let r = json(&env, &["similar", doc_path.to_str().unwrap()]);
    let (similar, shown) = (r["similar"].as_u64().unwrap(), r["hits"].as_array().unwrap().len() as u64);
    assert_eq!((similar, shown, r["sharing"].as_u64()), (3, 3, Some(0)), "{r:#}");
    assert_eq!(r["indexed_version"], "same", "{r:#}");
    let r = json(&env, &["similar", doc_path.to_str().unwrap(), "--limit", "1"]);
    assert_eq!((r["similar"].as_u64(), r["hits"].as_array().unwrap().len()), (Some(3), 1), "{r:#}");
    let out = env.simd().args(["similar", "--limit", "1"]).arg(&doc_path).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.lines().next().unwrap().contains(", 3 similar (showing 1: --limit)"), "{said}");
    let small = env.root.join("a/small.txt");
    let r = json(&env, &["similar", small.to_str().unwrap(), "--all", "--min-bytes", "1000000"]);
    let passing = r["hits"].as_array().unwrap().iter().filter(|h| h["kind"] != "shares").count() as u64;
    assert_eq!(r["similar"].as_u64(), Some(passing), "{r:#}");
    assert_eq!(r["sharing"].as_u64(), Some(r["hits"].as_array().unwrap().len() as u64 - passing), "{r:#}");
    assert!(r["sharing"].as_u64().unwrap() >= 1, "big-with-small shares it, under 1 MB in common: {r:#}");
    // Changed since it was indexed: the index's older version is left out
    // too, and said so.
    let v2 = env.root.join("a/doc-v2.txt");
    let mut body = std::fs::read(&v2).unwrap();
    body.extend_from_slice(&text(77, 200));
    std::fs::write(&v2, &body).unwrap();
    let r = json(&env, &["similar", v2.to_str().unwrap()]);
    assert_eq!(r["indexed_version"], "older", "{r:#}");
    assert!(r["hits"].as_array().unwrap().iter().all(|h| !h["files"].to_string().contains("doc-v2.txt")), "{r:#}");
    assert_eq!(r["similar"].as_u64(), Some(r["hits"].as_array().unwrap().len() as u64), "{r:#}");
    let out = env.simd().arg("similar").arg(&v2).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.lines().next().unwrap().contains("the index holds an older version of the file"), "{said}");
    env.index();

    // Something unrelated: no answer.
    let lone = env.tmp.path().join("lone.bin");
    std::fs::write(&lone, noise(999, 20_000)).unwrap();
    assert_eq!(json(&env, &["similar", lone.to_str().unwrap()])["hits"].as_array().unwrap().len(), 0);

    // A directory is refused by name, and a missing file named.
    let refused = |path: &std::path::Path| {
        // Bounded: a device read for ever would otherwise hang the test.
        let mut run = env.simd();
        run.args(["similar", path.to_str().unwrap()]).timeout(std::time::Duration::from_secs(60));
        let out = run.assert().failure();
        String::from_utf8_lossy(&out.get_output().stderr).into_owned()
    };
    let dir = env.root.join("a");
    let err = refused(&dir);
    assert!(err.contains(&format!("{}: is a directory", dir.display())) && err.contains("one file"), "{err}");
    let missing = env.tmp.path().join("missing.txt");
    let err = refused(&missing);
    assert!(err.contains(&format!("{}: No such file", missing.display())), "{err}");
    // A name that is not UTF-8 is said as the report writes it, not lossily.
    let odd = env.tmp.path().join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"odd\xff dir"));
    std::fs::create_dir(&odd).unwrap();
    let mut run = env.simd();
    let out = run.arg("similar").arg(&odd).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&format!("{}/odd\\xff dir: is a directory", env.tmp.path().display())), "{err}");
    // A device that never ends is not read; a pipe is (process substitution).
    let err = refused(std::path::Path::new("/dev/zero"));
    assert!(err.contains("/dev/zero: is a character device"), "{err}");
    // A socket cannot be opened at all: said as what it is.
    let socket = env.tmp.path().join("control.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let err = refused(&socket);
    assert!(err.contains(&format!("{}: is a socket", socket.display())), "{err}");
    let out = env.simd().args(["--format", "json", "similar", "/dev/stdin"]).write_stdin(doc).assert().success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["hits"][0]["kind"], "identical", "{r:#}");
}

/// `similar` learns a candidate's chunk degrees (for its payload) only as
/// far as it must: a large file sharing one piece with the query is shown
/// too large to link after a few, and a file whose payload is small only
/// because most of its chunks are over the cutoff is still measured
/// exactly. Both answers are those `--all` (every degree learnt) gives.
#[test]
fn similar_learns_degrees_only_as_far_as_a_link_needs() {
    let env = Env::new();
    let q = noise(50, 30_000);
    let common = noise(51, 40_000);
    // Held by four contents, over `--max-degree 2`: ignored.
    for i in 0..3u64 {
        env.write(&format!("c{i}.bin"), [common.clone(), noise(60 + i, 5000)].concat());
    }
    // Most of the query but for its ignored chunks: a link only once they
    // are known to be ignored (~60 KB in all, 20 KB in common).
    env.write("inside.bin", [common.clone(), q[5000..25_000].to_vec()].concat());
    // 2 MB sharing one piece of the query: no link.
    env.write("big.bin", [noise(52, 2 << 20), q[5000..9000].to_vec()].concat());
    env.index();
    let query = env.tmp.path().join("q.bin");
    std::fs::write(&query, &q).unwrap();
    let ask = |all: bool| {
        let mut run = env.simd();
        run.env("SIMD_LOG", "simd=debug").args(["--format", "json", "similar", "--max-degree", "2"]);
        if all {
            run.arg("--all");
        }
        let out = run.arg(&query).assert().success();
        let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        (r, String::from_utf8_lossy(&out.get_output().stderr).into_owned())
    };
    let (r, log) = ask(false);
    let hits = r["hits"].as_array().unwrap();
    let tails: Vec<String> = hits.iter().map(|h| names(&h["files"])[0].clone()).collect();
    assert_eq!(tails, ["inside.bin"], "{r:#}");
    assert_eq!(hits[0]["kind"], "similar", "{r:#}");
    assert!(hits[0]["payload"].as_u64().unwrap() < 25_000, "its shared block is ignored: {r:#}");
    assert!(log.contains(", 1 candidates shown too large to link"), "{log}");
    let (all, _) = ask(true);
    let linked: Vec<_> = all["hits"].as_array().unwrap().iter().filter(|h| h["kind"] != "shares").cloned().collect();
    assert_eq!(&linked, hits, "{all:#}");
    assert!(all["hits"].as_array().unwrap().iter().any(|h| names(&h["files"])[0] == "big.bin"), "{all:#}");
}

/// A content that loses its last name, has its record dropped by history's
/// retention, and comes back between two reports has a new content id
/// (the postings name it by that one): an update takes the id from the
/// record, not from the cache, and a new content finds it through the
/// postings.
#[test]
fn a_content_back_under_a_new_id_is_found_by_an_update() {
    let env = Env::new();
    let doc = text(70, 3000);
    env.write("a.txt", &doc);
    env.write("b.txt", edited(&doc, 3, 1));
    for i in 0..4u64 {
        env.write(&format!("other{i}.txt"), text(80 + i, 2000));
    }
    env.index();
    env.simd().args(["report"]).assert().success();
    let id_of = |env: &Env| {
        let store = env.open();
        let path = super::path_of(&env.root.join("a.txt").canonicalize().unwrap());
        let file = store.get::<simd::store::Paths>(&path).unwrap().expect("a.txt is indexed");
        let content = store.get::<simd::store::Files>(&file).unwrap().expect("its record").content;
        store.get_postings(&content).unwrap().expect("its content's record").id
    };
    let before = id_of(&env);
    std::fs::remove_file(env.root.join("a.txt")).unwrap();
    env.simd().args(["index", "--keep-history-days", "0"]).arg(&env.root).assert().success();
    env.write("a.txt", &doc);
    // A new version, relinked: it finds a.txt's content through the
    // postings, by its new id.
    env.write("c.txt", edited(&doc, 5, 2));
    env.index();
    assert_ne!(id_of(&env), before, "the content came back under a new id");
    let out = env.simd().args(["-v", "--format", "json", "report"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("analysis brought up to date"), "{stderr}");
    let updated: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(updated, fresh_report(&env, &[]));
    assert_eq!(updated["totals"]["clusters"], 1, "{updated:#}");
}

/// `base` (words separated by single spaces) with one word in `every`
/// replaced: edits too dense for any 1 KB chunk to survive.
/// Random rounds of changes (seeded): after each, the analysis brought up
/// to date must be the fresh one.
#[test]
fn random_changes_keep_the_updated_analysis_equal_to_a_fresh_one() {
    for extra in [&[][..], &["--max-degree", "2"][..]] {
        let env = Env::new();
        let mut x: u64 = 0x5eed_cafe;
        let mut rand = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        // Text (linked by chunks and words) and binary (by chunks alone).
        let bases: Vec<Vec<u8>> =
            (0..6).map(|i| if i % 2 == 0 { text(100 + i, 1200) } else { noise(100 + i, 9000) }).collect();
        let header = noise(150, 5000);
        let mut live: Vec<String> = Vec::new();
        for (i, b) in bases.iter().enumerate() {
            let name = format!("b{i}.txt");
            env.write(&name, b);
            live.push(name);
        }
        env.index();
        env.simd().args(["report"]).args(extra).assert().success();
        let (mut next, mut patched) = (0, 0);
        for round in 0..25 {
            for _ in 0..1 + rand(4) {
                next += 1;
                match rand(8) {
                    // A new version of a base, a copy, a page with the shared header.
                    0 => {
                        let name = format!("v{next}.txt");
                        env.write(&name, edited(&bases[rand(bases.len())], 1 + rand(4), next as u8));
                        live.push(name);
                    }
                    1 if !live.is_empty() => {
                        let from = env.root.join(&live[rand(live.len())]);
                        let name = format!("c{next}.txt");
                        std::fs::copy(from, env.root.join(&name)).unwrap();
                        live.push(name);
                    }
                    2 => {
                        let name = format!("h{next}.txt");
                        env.write(&name, [header.clone(), noise(200 + next as u64, 2000)].concat());
                        live.push(name);
                    }
                    3 if live.len() > 2 => {
                        let gone = live.swap_remove(rand(live.len()));
                        std::fs::remove_file(env.root.join(gone)).unwrap();
                    }
                    4 if !live.is_empty() => {
                        let p = env.root.join(&live[rand(live.len())]);
                        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
                        std::io::Write::write_all(&mut f, &text(300 + next as u64, 40)).unwrap();
                    }
                    // A second name of one file (a hard link: no copy).
                    6 if !live.is_empty() => {
                        let name = format!("l{next}.txt");
                        std::fs::hard_link(env.root.join(&live[rand(live.len())]), env.root.join(&name)).unwrap();
                        live.push(name);
                    }
                    // The same bytes saved as a new file over the old (an
                    // editor's save): a hard link of it becomes a copy,
                    // with no content or name changed.
                    7 if !live.is_empty() => {
                        let p = env.root.join(&live[rand(live.len())]);
                        let tmp = env.root.join(".saving");
                        std::fs::write(&tmp, std::fs::read(&p).unwrap()).unwrap();
                        std::fs::rename(&tmp, &p).unwrap();
                    }
                    _ if !live.is_empty() => {
                        let k = rand(live.len());
                        let name = format!("r{next}.txt");
                        std::fs::rename(env.root.join(&live[k]), env.root.join(&name)).unwrap();
                        live[k] = name;
                    }
                    _ => {}
                }
            }
            env.index();
            let out = env.simd().args(["-v", "--format", "json", "report"]).args(extra).assert().success();
            let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
            assert!(stderr.contains("analysis brought up to date") || stderr.contains("reused"), "{stderr}");
            // The names kept from the cache but for the records written
            // since (the write-ahead log says which).
            patched += usize::from(stderr.contains("names of"));
            let updated: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
            assert_eq!(updated, fresh_report(&env, extra), "round {round}, {extra:?}");
        }
        assert!(patched >= 20, "{patched} of 25 rounds kept the cached names");
    }
}

fn reworded(base: &[u8], every: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, w) in base.split(|&b| b == b' ').enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if i % every == every / 2 {
            out.extend_from_slice(format!("edit{i}").as_bytes());
        } else {
            out.extend_from_slice(w);
        }
    }
    out
}

#[test]
fn scattered_edits_that_leave_no_chunk_are_found_by_their_words() {
    let env = Env::new();
    let doc = text(5, 8000);
    env.write("v1/guide.txt", &doc);
    // One word in 40 changed: about every 250 bytes, so no 1 KB chunk is
    // shared, while 90 % of the 4-word shingles are (r = 36/44 ≈ 0.82).
    env.write("v2/guide.txt", reworded(&doc, 40));
    env.write("other/notes.txt", text(6, 8000));
    env.index();
    let r = json(&env, &["report"]);
    let clusters = r["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{r:#}");
    let l = &clusters[0]["links"][0];
    assert_eq!(l["kind"], "similar");
    assert!(l["resemblance"].as_f64().unwrap() < 0.2, "chunks see little: {l}");
    let words = l["words"]["resemblance"].as_f64().unwrap();
    assert!((0.7..0.95).contains(&words), "{l}");
    let mut files: Vec<String> = clusters[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["files"][0]["path"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    assert!(files[0].ends_with("v1/guide.txt") && files[1].ends_with("v2/guide.txt"), "{files:?}");

    // `similar` finds it too, from a third version not in the index.
    let query = env.tmp.path().join("v3.txt");
    std::fs::write(&query, reworded(&doc, 60)).unwrap();
    let s = json(&env, &["similar", query.to_str().unwrap()]);
    let hits = s["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{s:#}");
    assert!(hits.iter().all(|h| h["kind"] == "similar" && h["words"]["resemblance"].as_f64().unwrap() > 0.5), "{s:#}");
}

/// `simd report | head`: the reader going away is no error, in any format
/// (JSON once said "simd: Broken pipe (os error 32)" and exited 1).
#[test]
fn a_reader_that_stops_reading_is_not_an_error() {
    use std::io::Read;
    let env = Env::new();
    // Past simd's 1 MiB output buffer and a pipe's 64 KiB, so that the
    // report is still being written when its reader goes: the error then
    // comes from within serde_json, not from the last flush.
    let dir = "a-directory-of-a-rather-long-name-".repeat(6);
    for i in 0..4500u64 {
        env.write(&format!("{dir}/copies-{}/file-{i}.txt", i % 3), text(i % 1500, 50));
    }
    env.index();
    let whole = env.simd().args(["--format", "json", "report"]).assert().success();
    assert!(whole.get_output().stdout.len() > 1_200_000, "{} bytes", whole.get_output().stdout.len());
    for format in ["json", "text", "csv", "html"] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("simd"))
            .arg("--db")
            .arg(&env.db)
            .args(["--format", format, "report"])
            .env_remove("SIMD_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 1];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.is_empty(), "{format}: {:?} {err}", out.status);
    }
}

#[test]
fn empty_and_one_file_indexes_report_nothing_to_do() {
    let env = Env::new();
    env.index();
    let r = json(&env, &["report"]);
    assert_eq!((r["index"]["files"].as_u64(), r["clusters"].as_array().unwrap().len()), (Some(0), 0));
    let t = env.simd().arg("report").assert().success();
    assert!(String::from_utf8_lossy(&t.get_output().stdout).contains("none"));
    env.write("only.txt", text(1, 2000));
    env.index();
    let r = json(&env, &["report"]);
    assert_eq!(r["index"]["files"], 1);
    assert_eq!((r["identical"].as_array().unwrap().len(), r["clusters"].as_array().unwrap().len()), (0, 0));
}

/// `words` words from a vocabulary of 20,000, seeded.
fn prose(seed: u64, words: usize) -> Vec<u8> {
    let bytes = noise(seed, words * 2);
    let mut out = Vec::new();
    for w in bytes.chunks(2) {
        out.extend_from_slice(format!("w{} ", (usize::from(w[0]) << 8 | usize::from(w[1])) % 20_000).as_bytes());
    }
    out
}

#[test]
fn similar_finds_the_large_file_holding_the_query_on_one_shared_posted_sample() {
    // A query inside a file 16 times its size, with one word in 40 changed
    // so that no chunk is shared: the large file posts its 16 smallest
    // samples, and about one of them falls in the query. `similar` must
    // still measure it (one posted sample in common is the analysis's rule
    // for contents 4 times apart), while single samples met by chance are
    // not worth a record read. Seeds are searched for the case the rule is
    // about: exactly one of the large file's posted samples in the query's
    // sketch, and it among the query's own posted ones.
    let (query, big) = (0..200u64)
        .map(|s| {
            let q = prose(1000 + s, 1200);
            (q.clone(), [prose(2000 + s, 9000), reworded(&q, 40), prose(3000 + s, 9000)].concat())
        })
        .find(|(q, big)| {
            let (qs, bs) = (simd::sketch::sketch_bytes(q), simd::sketch::sketch_bytes(big));
            let shared: Vec<u32> =
                bs.posted().iter().copied().filter(|s| qs.samples.binary_search(s).is_ok()).collect();
            shared.len() == 1 && qs.posted().contains(&shared[0])
        })
        .expect("a seed where the two share exactly one posted sample");
    let env = Env::new();
    env.write("big/manual.txt", &big);
    for i in 0..4 {
        env.write(&format!("other/notes{i}.txt"), prose(4000 + i, 3000));
    }
    env.index();
    let q = env.tmp.path().join("query.txt");
    std::fs::write(&q, &query).unwrap();
    let s = json(&env, &["similar", q.to_str().unwrap()]);
    let hits = s["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{s:#}");
    assert!(hits[0]["files"][0]["path"].as_str().unwrap().ends_with("big/manual.txt"), "{s:#}");
    assert_eq!(hits[0]["common"], 0, "no chunk is shared: {s:#}");
    assert!(hits[0]["words"]["query_in_file"].as_f64().unwrap() > 0.8, "{s:#}");
}

/// The names of one file (hard links) are one copy, as fclones and jdupes
/// count them: a set wastes the bytes of its other files only, and one
/// file's names alone make no set. The records of an older index hold no
/// device; a run's walk adds it without reading a file.
#[test]
fn hard_links_are_one_copy_not_waste() {
    use simd::store::{Access, Files, Store};
    let env = Env::new();
    let body = text(1, 400);
    let a = env.write("a.txt", &body);
    std::fs::hard_link(&a, env.root.join("a-link.txt")).unwrap();
    env.write("sub/copy.txt", &body);
    let solo = env.write("solo.txt", text(2, 300));
    std::fs::hard_link(&solo, env.root.join("sub/solo-link.txt")).unwrap();
    env.simd().args(["--quiet", "index"]).arg(&env.root).assert().success();
    let root = env.root.canonicalize().unwrap();
    let size = body.len() as u64;
    let one_set = |what: &str| {
        let r = env.json(&["report"]);
        let sets = r["identical"].as_array().unwrap();
        assert_eq!(sets.len(), 1, "{what}: solo.txt's two names are one file: {r:#}");
        let s = &sets[0];
        assert_eq!((s["copies"].as_u64(), s["wasted"].as_u64()), (Some(2), Some(size)), "{what}: {s:#}");
        let files: Vec<(String, Option<u64>)> = s["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["path"].as_str().unwrap().to_owned(), f["hard_link_of"].as_u64()))
            .collect();
        let at = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
        assert_eq!(files, [(at("a-link.txt"), None), (at("a.txt"), Some(0)), (at("sub/copy.txt"), None)], "{what}");
        assert_eq!(r["totals"]["wasted_bytes"].as_u64(), Some(size), "{what}");
        let text = env.simd().arg("report").assert().success();
        let text = String::from_utf8_lossy(&text.get_output().stdout).into_owned();
        assert!(text.contains("2 copies (and 1 hard link) of"), "{what}: {text}");
        assert!(text.contains(&format!("{}  (hard link of {})", at("a.txt"), at("a-link.txt"))), "{what}: {text}");
        // A CSV row per name says which name a hard link is of.
        let csv = env.simd().args(["report", "--format", "csv"]).assert().success();
        let csv = String::from_utf8_lossy(&csv.get_output().stdout).into_owned();
        let rows: Vec<(&str, &str)> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(','))
            .map(|r| (r.clone().nth(5).unwrap(), r.clone().nth(6).unwrap()))
            .collect();
        let (link, copy, first) = (at("a.txt"), at("sub/copy.txt"), at("a-link.txt"));
        assert_eq!(rows, [(first.as_str(), ""), (link.as_str(), first.as_str()), (copy.as_str(), "")], "{what}: {csv}");
    };
    one_set("a first index");

    // As an index of schema 8 left them: no devices. Every name then
    // counts as a copy, until a run has walked the files.
    {
        let s = Store::open(&env.db, Access::Write, None).unwrap();
        let mut b = s.batch();
        for item in s.scan::<Files>() {
            let (id, mut rec) = item.unwrap();
            rec.dev = 0;
            b.put::<Files>(&id, &rec);
        }
        s.write(b).unwrap();
    }
    let r = env.json(&["report"]);
    assert_eq!(r["totals"]["wasted_bytes"].as_u64(), Some(2 * size + text(2, 300).len() as u64), "{r:#}");
    let run = env.json(&["index"]);
    assert_eq!((run["bytes_read"].as_u64(), run["unchanged"].as_u64()), (Some(0), Some(5)), "{run:#}");
    one_set("devices added by a walk");
    env.check();
}

/// The verdict `--verify` gave each name of each set shown, by its path
/// under the tree; and each set's `verified`, in the order of their first
/// names.
fn verdicts(env: &Env, r: &serde_json::Value) -> (Vec<(String, String)>, Vec<bool>) {
    let rel = |f: &serde_json::Value| {
        let p = std::path::PathBuf::from(f["path"].as_str().unwrap());
        p.strip_prefix(env.root.canonicalize().unwrap()).unwrap().to_string_lossy().into_owned()
    };
    let (mut names, mut sets) = (Vec::new(), Vec::new());
    for s in r["identical"].as_array().unwrap() {
        let files = s["files"].as_array().unwrap();
        for f in files {
            let mut v = f["verify"].as_str().unwrap().to_string();
            if v == "unreadable" {
                v = format!("unreadable: {}", f["error"].as_str().unwrap());
            }
            names.push((rel(f), v));
        }
        sets.push((rel(&files[0]), s["verified"].as_bool().unwrap()));
    }
    names.sort();
    sets.sort();
    (names, sets.into_iter().map(|(_, verified)| verified).collect())
}

/// `--verify` reads the names of each set shown and compares their bytes:
/// a copy holds the set's bytes; a name changed since indexed, gone, now a
/// symlink or a FIFO is said to be so; one whose bytes changed under the
/// size and mtime the index recorded holds other bytes, also when it is
/// its set's first name (the one the others would be compared with). Hard
/// links are one file. The files are left as they were.
#[test]
fn report_verify_compares_each_sets_names_byte_for_byte() {
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let env = Env::new();
    // Three blocks of comparison, and a hard link.
    let big = noise(7, 300_000);
    for rel in ["a/big", "b/big", "b/big-2", "b/big-to-fifo"] {
        env.write(rel, &big);
    }
    std::fs::hard_link(env.root.join("a/big"), env.root.join("a/big-hard-link")).unwrap();
    let small = text(3, 300);
    for rel in ["c/1", "c/2", "c/3"] {
        env.write(rel, &small);
    }
    for rel in ["d/s", "d/s-appended", "d/s-removed", "d/s-symlink"] {
        env.write(rel, b"hello world\n");
    }
    let intact = text(4, 400);
    for rel in ["e/x", "e/y"] {
        env.write(rel, &intact);
    }
    // More names than are compared at a time.
    let many = text(5, 200);
    for i in 0..70 {
        env.write(&format!("f/{i:02}"), &many);
    }
    env.index();
    let plain = json(&env, &["report"]);
    assert_eq!(plain["identical"].as_array().unwrap().len(), 5, "{plain:#}");
    assert!(plain.get("verify").is_none() && !plain.to_string().contains("\"verify"), "{plain:#}");
    let csv = |args: &[&str]| {
        let out = env.simd().args(["--format", "csv", "report"]).args(args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    assert!(csv(&[]).starts_with("kind,group,content,size,names,path,hard_link_of\n"));

    // What the index has not seen. The big set's last name and the small
    // set's first get other bytes under the same size and mtime (as an
    // MD5 collision would look, or a write that kept the mtime).
    let set_of = |dir: &str| -> Vec<String> {
        let set = plain["identical"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["files"][0]["path"].as_str().unwrap().contains(&format!("/{dir}/")))
            .unwrap();
        set["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()).collect()
    };
    let keep_mtime_write = |path: &str, at: u64| write_keeping_stat(path, at, b"\xff");
    // Of the big set, a name compared with another (not its first, nor
    // the hard link or the name about to become a FIFO).
    let big_set = set_of("a");
    assert!(big_set[0].ends_with("/a/big"), "{big_set:?}");
    let big_last =
        big_set[1..].iter().rev().find(|p| p.ends_with("/b/big") || p.ends_with("/b/big-2")).unwrap().clone();
    keep_mtime_write(&big_last, 200_000);
    let small_first = set_of("c")[0].clone();
    keep_mtime_write(&small_first, 5);
    let many_first = set_of("f")[0].clone();
    keep_mtime_write(&many_first, 7);
    std::fs::OpenOptions::new().append(true).open(env.root.join("d/s-appended")).unwrap().write_all(b"!").unwrap();
    std::fs::remove_file(env.root.join("d/s-removed")).unwrap();
    std::fs::remove_file(env.root.join("d/s-symlink")).unwrap();
    std::os::unix::fs::symlink(env.root.join("d/s"), env.root.join("d/s-symlink")).unwrap();
    std::fs::remove_file(env.root.join("b/big-to-fifo")).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(env.root.join("b/big-to-fifo")).status().unwrap().success());
    let stat = |p: &str| {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.len(), m.mtime(), m.mtime_nsec(), m.ino(), std::fs::read(p).unwrap())
    };
    let before = (stat(&big_last), stat(&small_first));

    // Some name shown is not a copy now: the report is written, and the
    // exit status says so.
    let failing = |args: &[&str]| {
        let out = env.simd().args(args).assert().code(4);
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let r: serde_json::Value = serde_json::from_str(&failing(&["--format", "json", "report", "--verify"])).unwrap();
    let rel = |p: &str| p.rsplit_once("/tree/").unwrap().1.to_string();
    let (mut names, sets) = verdicts(&env, &r);
    // The set of 70: its first name has other bytes, every other is a copy.
    let many_verdicts: Vec<(String, String)> = names.iter().filter(|(p, _)| p.starts_with("f/")).cloned().collect();
    let many_want: Vec<(String, String)> = (0..70)
        .map(|i| format!("f/{i:02}"))
        .map(|p| {
            let v = if p == rel(&many_first) { "differs" } else { "same" };
            (p, v.to_string())
        })
        .collect();
    assert_eq!(many_verdicts, many_want);
    names.retain(|(p, _)| !p.starts_with("f/"));
    let mut want: Vec<(String, String)> = [
        ("a/big", "same"),
        ("a/big-hard-link", "same"),
        ("b/big", "same"),
        ("b/big-2", "same"),
        ("b/big-to-fifo", "changed"),
        ("c/1", "same"),
        ("c/2", "same"),
        ("c/3", "same"),
        ("d/s", "same"),
        ("d/s-appended", "changed"),
        ("d/s-removed", "gone"),
        ("d/s-symlink", "changed"),
        ("e/x", "same"),
        ("e/y", "same"),
    ]
    .iter()
    .map(|&(p, v)| (p.to_string(), v.to_string()))
    .collect();
    for p in [rel(&big_last), rel(&small_first)] {
        want.iter_mut().find(|(q, _)| *q == p).unwrap().1 = "differs".to_string();
    }
    assert_eq!(names, want, "{r:#}");
    assert_eq!(sets, [false, false, false, true, false], "{r:#}");
    let v = &r["verify"];
    assert_eq!(
        (
            v["sets"].as_u64(),
            v["changed"].as_u64(),
            v["gone"].as_u64(),
            v["unreadable"].as_u64(),
            v["differs"].as_u64()
        ),
        (Some(5), Some(3), Some(1), Some(0), Some(3)),
        "{v}"
    );
    assert!(v["bytes_read"].as_u64().unwrap() >= 3 * 300_000, "{v}");
    // Nothing the verification read was changed by it.
    assert_eq!((stat(&big_last), stat(&small_first)), before);
    assert!(std::fs::symlink_metadata(env.root.join("b/big-to-fifo")).unwrap().file_type().is_fifo());

    // The same in text and CSV; `--limit` verifies only the sets shown.
    let text = failing(&["report", "--verify"]);
    assert!(text.contains("verified byte for byte: 5 sets shown, "), "{text}");
    assert!(
        text.contains("7 names are not copies now (3 changed since indexed, 1 gone, 3 with other bytes)"),
        "{text}"
    );
    assert_eq!(text.matches("  verified\n").count(), 1, "{text}");
    assert!(text.contains("not verified: 1 of 4 names hold the set's bytes"), "{text}");
    assert!(text.contains(&format!("{small_first}  [other bytes than the set's")), "{text}");
    assert!(text.contains("/d/s-removed  [gone since indexed]"), "{text}");
    let rows = failing(&["--format", "csv", "report", "--verify"]);
    assert!(rows.starts_with("kind,group,content,size,names,path,hard_link_of,verify\n"), "{rows}");
    assert!(rows.lines().any(|l| l.ends_with("/d/s-removed,,gone")), "{rows}");
    assert_eq!(rows.lines().filter(|l| l.ends_with(",same")).count(), 8 + 69, "{rows}");
    let one: serde_json::Value =
        serde_json::from_str(&failing(&["--format", "json", "report", "--verify", "--limit", "1"])).unwrap();
    assert_eq!(one["verify"]["sets"], 1, "{one:#}");
    // A view whose names are all copies exits 0.
    let under = env.root.join("e");
    let intact = json(&env, &["report", "--verify", "--under", under.to_str().unwrap()]);
    assert_eq!(
        (intact["verify"]["sets"].as_u64(), intact["identical"][0]["verified"].as_bool()),
        (Some(1), Some(true))
    );
    let out = env.simd().args(["--format", "csv", "report", "--verify", "--table", "links"]).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--verify reads the files of identical sets"), "{err}");

    // The summary's remedy for the names with other bytes: read again,
    // they are indexed as they are; the rest of the root is brought up to
    // date as `simd index` would, so that every name shown is a copy now.
    assert!(text.contains("`simd reread PATH...` indexes a name marked with other bytes as it is"), "{text}");
    let said = json(&env, &["reread", &big_last, &small_first, &many_first]);
    assert_eq!((said["reread"].as_u64(), said["reread_differed"].as_u64()), (Some(3), Some(3)), "{said:#}");
    let after = json(&env, &["report", "--verify"]);
    // The big set less its rewritten name and the FIFO (its hard link read
    // once), the small one less its first, the intact one, and the 69.
    let read = (after["verify"]["sets"].as_u64(), after["verify"]["files_read"].as_u64());
    assert_eq!(read, (Some(4), Some(2 + 2 + 2 + 69)), "{after:#}");
}

/// A cluster lists a member's copies as such: `--verify` reads them too,
/// when `--limit` (or `--under`, `--min-size`) leaves the member's own
/// identical set out of section A, and marks them in every format.
#[test]
fn report_verify_reads_the_copies_a_cluster_lists() {
    let env = Env::new();
    for rel in ["b/1", "b/2"] {
        env.write(rel, noise(2, 200_000));
    }
    let doc = text(3, 5_000);
    env.write("c/doc", &doc);
    let copy = env.write("x/doc-copy", &doc);
    env.write("c/doc-longer", [doc.as_slice(), &text(4, 300)].concat());
    env.index();
    write_keeping_stat(&copy, 10, b"\xff");
    let copy = copy.canonicalize().unwrap().to_str().unwrap().to_string();
    let failing = |args: &[&str]| {
        let out = env.simd().args(args).args(["report", "--verify", "--limit", "1"]).assert().code(4);
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let r: serde_json::Value = serde_json::from_str(&failing(&["--format", "json"])).unwrap();
    assert_eq!(r["identical"].as_array().unwrap().len(), 1, "only the big set is shown: {r:#}");
    assert_eq!((r["verify"]["sets"].as_u64(), r["verify"]["differs"].as_u64()), (Some(2), Some(1)), "{r:#}");
    let member =
        r["clusters"][0]["members"].as_array().unwrap().iter().find(|m| m["files"].as_array().unwrap().len() == 2);
    let verdicts: Vec<(String, String)> = member.unwrap_or_else(|| panic!("{r:#}"))["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f["verify"].as_str().unwrap().to_string()))
        .collect();
    assert!(verdicts.contains(&(copy.clone(), "differs".to_string())), "{verdicts:?}");
    assert!(verdicts.iter().any(|(p, v)| p.ends_with("/c/doc") && v == "same"), "{verdicts:?}");
    // The member without copies has no verdicts: none of its names was read.
    let single =
        r["clusters"][0]["members"].as_array().unwrap().iter().find(|m| m["files"].as_array().unwrap().len() == 1);
    assert!(single.unwrap()["files"][0].get("verify").is_none(), "{r:#}");

    let text = failing(&[]);
    assert!(text.contains("verified byte for byte: 1 set shown and the copies of 1 cluster member, "), "{text}");
    let marked = |l: &str| {
        l.contains(&copy) && l.ends_with("[other bytes than the set's, with the size and mtime the index recorded]")
    };
    assert!(text.lines().any(marked), "{text}");
    let rows = failing(&["--format", "csv"]);
    assert!(rows.lines().any(|l| l.starts_with("similar,") && l.contains(&copy) && l.ends_with(",differs")), "{rows}");
    assert!(rows.lines().any(|l| l.starts_with("similar,") && l.ends_with("/c/doc-longer,,")), "{rows}");
    let page = failing(&["--format", "html"]);
    assert!(page.contains(&format!("{copy}</span>  [other bytes than the set&#39;s")), "{page}");
}

/// An HTML report too large for a browser says so on stderr, and what
/// makes it smaller (`--links` only when the links are not limited yet);
/// the page is written whole all the same. A report under the size says
/// nothing. (The size is 100 MB; the test makes it small.)
#[test]
fn a_large_html_report_says_what_makes_it_smaller() {
    let env = Env::new();
    corpus(&env);
    env.index();
    let html = |large: Option<&str>, args: &[&str]| {
        let mut cmd = env.simd();
        if let Some(n) = large {
            cmd.env("SIMD_TEST_LARGE_PAGE", n);
        }
        let out = cmd.args(["--format", "html", "report"]).args(args).assert().success();
        let out = out.get_output();
        (String::from_utf8(out.stdout.clone()).unwrap(), String::from_utf8(out.stderr.clone()).unwrap())
    };
    let (page, quiet) = html(None, &[]);
    assert!(page.ends_with("</html>\n") && quiet.is_empty(), "{quiet}");
    let size = page.len();
    let (same, said) = html(Some(&size.to_string()), &[]);
    assert_eq!(same, page);
    assert!(said.contains("the html report: ") && said.contains("more than a browser opens readily"), "{said}");
    assert!(said.contains("`--links 10`") && said.contains("`--limit N`"), "{said}");
    let out = env.tmp.path().join("report.html");
    let (_, said) = html(Some("1"), &["--links", "1", "--out", out.to_str().unwrap()]);
    assert!(
        said.contains(&format!("{}: ", out.display())) && !said.contains("--links") && said.contains("--under"),
        "{said}"
    );
    let (_, quiet) = html(Some(&(size + 1).to_string()), &[]);
    assert!(quiet.is_empty(), "{quiet}");
}

/// A name `--verify` may not read is unreadable, with the error, not a
/// copy; the others are compared without it. (As root, which reads any
/// file, the report runs as nobody.)
#[test]
fn report_verify_says_which_names_it_could_not_read() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let doc = text(8, 300);
    for rel in ["a", "b", "c"] {
        env.write(rel, &doc);
    }
    env.index();
    let secret = env.root.join("b");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = env.simd();
    if super::is_root() {
        for p in [env.tmp.path(), env.root.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        assert!(std::process::Command::new("chmod").arg("-R").arg("a+rwX").arg(&env.db).status().unwrap().success());
        let bin = assert_cmd::cargo::cargo_bin("simd");
        cmd = assert_cmd::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(bin).arg("--db").arg(&env.db);
    }
    let out = cmd.args(["--format", "json", "report", "--verify"]).assert().code(4);
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let (names, sets) = verdicts(&env, &r);
    assert_eq!(sets, [false]);
    let unreadable: Vec<&str> =
        names.iter().filter(|(_, v)| v.starts_with("unreadable: ")).map(|(p, _)| p.as_str()).collect();
    assert_eq!(unreadable, ["b"], "{names:?}");
    assert!(names.iter().any(|(p, v)| p == "b" && v.contains("ermission denied")), "{names:?}");
    assert_eq!(names.iter().filter(|(_, v)| v == "same").count(), 2, "{names:?}");
    assert_eq!(r["verify"]["unreadable"], 1, "{r:#}");
    assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0);
}

/// `--out FILE` replaces FILE only with a whole report: one that fails (a
/// write error, as on a full disk: a file-size limit here) leaves the last
/// report as it was and nothing beside it. The new one keeps the old one's
/// mode, a symlink stays a link to the file it names (which it makes if
/// need be), and a FILE that is not a regular file (`/dev/null`) is
/// written in place.
#[test]
fn report_out_replaces_its_file_only_with_a_whole_report() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    corpus(&env);
    env.index();
    let dir = env.tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("report.json");
    std::fs::write(&file, "the last report\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("report.json", dir.join("link")).unwrap();
    let listing = || {
        let mut v: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    // A report larger than the limit fails, and changes nothing.
    let bin = assert_cmd::cargo::cargo_bin("simd");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" --db \"$1\" --format json report --out \"$2\"")
        .arg(&bin)
        .arg(&env.db)
        .arg(dir.join("link"))
        .env_remove("SIMD_DB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a report went through under a 512-byte file limit: {err}");
    assert!(err.contains("link: cannot write the report") && err.contains("File too large"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "the last report\n");
    assert_eq!(listing(), ["link", "report.json"]);
    // With room: the file the link names is replaced, whole, with its mode.
    env.simd().args(["--format", "json", "report", "--out"]).arg(dir.join("link")).assert().success();
    assert!(std::fs::symlink_metadata(dir.join("link")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o640);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(r, json(&env, &["report"]));
    assert_eq!(listing(), ["link", "report.json"]);
    env.simd().args(["report", "--out", "/dev/null"]).assert().success();
    // A link to a report not written yet is written through too.
    std::os::unix::fs::symlink("new.json", dir.join("to-new")).unwrap();
    env.simd().args(["--format", "json", "report", "--out"]).arg(dir.join("to-new")).assert().success();
    assert!(std::fs::symlink_metadata(dir.join("to-new")).unwrap().file_type().is_symlink());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.join("new.json")).unwrap()).unwrap(), r);
    // A link to itself is an error, and stays a link.
    std::os::unix::fs::symlink("loop", dir.join("loop")).unwrap();
    let out = env.simd().args(["report", "--out"]).arg(dir.join("loop")).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("cannot write the report"), "{out:?}");
    assert!(std::fs::symlink_metadata(dir.join("loop")).unwrap().file_type().is_symlink());
}

/// The file `--out` replaces keeps what it had beside its bytes: its
/// extended attributes, its owner and group (given away by root), and
/// its other names: a file with hard links is written in place, so that
/// every name of it shows the new report.
#[test]
fn report_out_keeps_the_owner_attributes_and_links_of_the_file_it_replaces() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    corpus(&env);
    env.index();
    let want = json(&env, &["report"]);
    let dir = env.tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let (file, alias) = (dir.join("report.json"), dir.join("published.json"));
    std::fs::write(&file, "the last report\n").unwrap();
    rustix::fs::setxattr(&file, "user.origin", b"the team's share", rustix::fs::XattrFlags::empty()).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    }
    let report = || env.simd().args(["--format", "json", "report", "--out"]).arg(&file).assert().success();
    report();
    let read = |p: &std::path::Path| serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).unwrap()).unwrap();
    assert_eq!(read(&file), want);
    let mut value = [0u8; 64];
    let n = rustix::fs::getxattr(&file, "user.origin", &mut value).expect("the attribute was kept");
    assert_eq!(&value[..n], b"the team's share");
    let m = std::fs::metadata(&file).unwrap();
    if root {
        assert_eq!((m.uid(), m.gid()), (65534, 65534), "the owner was kept");
    }
    // A second name: both show the new report, and stay one file.
    std::fs::write(&file, "the last report\n").unwrap();
    std::fs::hard_link(&file, &alias).unwrap();
    report();
    assert_eq!((read(&file), read(&alias)), (want.clone(), want));
    assert_eq!(std::fs::metadata(&file).unwrap().ino(), std::fs::metadata(&alias).unwrap().ino());
    let mut left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, ["published.json", "report.json"]);
}

/// A JSON report's identical directories (`extra` its options), and
/// whether its debug log says `said`.
fn directories_said(env: &Env, extra: &[&str], said: &str) -> (serde_json::Value, bool) {
    let out =
        env.simd().env("SIMD_LOG", "simd=debug").args(["--format", "json", "report"]).args(extra).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    (r["directories"].clone(), err.contains(said))
}

/// A report of an index that has not changed since the last one reads the
/// identical directories that one found (`analysis::dirs`, kept beside
/// the analysis cache), where it walked every path again; one after a
/// change, a `--fresh` one, or one whose kept file is damaged finds them
/// anew, and all of them say the same as a fresh report.
#[test]
fn a_repeated_report_reads_the_identical_directories_the_last_one_found() {
    let env = Env::new();
    for dir in ["a", "b"] {
        env.write(&format!("{dir}/x.txt"), text(1, 300));
        env.write(&format!("{dir}/y.txt"), text(2, 300));
    }
    env.index();
    let report = |extra: &[&str]| directories_said(&env, extra, "identical directories from the last report");
    let sets = |d: &serde_json::Value| d.as_array().map_or(0, Vec::len);
    let (first, kept) = report(&[]);
    assert!(!kept && sets(&first) == 1, "{first:#}");
    let (again, kept) = report(&[]);
    assert!(kept, "the second report reads what the first found");
    assert_eq!(again, first);
    let (fresh, kept) = report(&["--fresh"]);
    assert!(!kept && fresh == first, "{fresh:#}");
    // A directory copied: the index changed, so they are found again.
    for f in ["x.txt", "y.txt"] {
        env.write(&format!("c/{f}"), std::fs::read(env.root.join("a").join(f)).unwrap());
    }
    env.index();
    let (after, kept) = report(&[]);
    assert!(!kept, "the index changed since");
    assert_eq!(after[0]["paths"].as_array().map(Vec::len), Some(3), "{after:#}");
    assert_eq!(after, report(&["--fresh"]).0);
    // A kept file with a byte changed is not used.
    let kept_file = env.db.join("directories.cache");
    let mut bytes = std::fs::read(&kept_file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&kept_file, bytes).unwrap();
    let (damaged, kept) = report(&[]);
    assert!(!kept && damaged == after, "{damaged:#}");
}

/// A report after a change brings the last report's directories up to
/// date, doing again only those above the paths changed: after each of a
/// series of changes (an edit breaking a set, a directory copied, one
/// removed, one renamed, siblings whose names sort between a directory
/// and its subdirectories, a copy's status changed by another file's
/// edit), the same directories as a report that walks every path.
#[test]
fn a_report_after_a_change_redoes_only_the_directories_above_it() {
    let env = Env::new();
    let tree =
        [("x.txt", text(1, 300)), ("y.txt", text(2, 300)), ("sub/z.txt", text(3, 300)), ("sub/w.txt", text(4, 300))];
    for dir in ["a", "b", "a-1", "deep/c"] {
        for (f, body) in &tree {
            env.write(&format!("{dir}/{f}"), body);
        }
    }
    env.write("b-0/lone.txt", text(5, 300));
    env.index();
    let report = |extra: &[&str]| directories_said(&env, extra, "directories done again");
    let (first, updated) = report(&[]);
    assert!(!updated && first.as_array().map(Vec::len) == Some(1), "{first:#}");
    assert_eq!(first[0]["paths"].as_array().map(Vec::len), Some(4), "{first:#}");
    type Step<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let steps: Vec<Step> = vec![
        ("an edit breaks a set", Box::new(|| drop(env.write("b/sub/z.txt", text(6, 300))))),
        (
            "a directory copied",
            Box::new(|| {
                for (f, body) in &tree {
                    env.write(&format!("new/copy/{f}"), body);
                }
            }),
        ),
        ("a directory removed", Box::new(|| std::fs::remove_dir_all(env.root.join("a-1")).unwrap())),
        (
            "a directory renamed",
            Box::new(|| std::fs::rename(env.root.join("deep/c"), env.root.join("deep/c-moved")).unwrap()),
        ),
        ("a sibling sorting between", Box::new(|| drop(env.write("a-0/x.txt", text(1, 300))))),
        ("the lone file copied", Box::new(|| drop(env.write("a/sub/lone.txt", text(5, 300))))),
        ("the edit undone", Box::new(|| drop(env.write("b/sub/z.txt", text(3, 300))))),
    ];
    for (what, change) in steps {
        change();
        env.index();
        let (after, updated) = report(&[]);
        assert!(updated, "{what}: brought up to date");
        assert_eq!(after, report(&["--fresh"]).0, "{what}");
    }
    // `a` holds the lone file's copy now: b, c and the new copy are left.
    let (last, _) = report(&[]);
    let paths: Vec<&str> = last[0]["paths"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(last.as_array().map(Vec::len), Some(1), "{last:#}");
    assert!(
        paths.len() == 3 && ["/b", "/deep/c-moved", "/new/copy"].iter().zip(&paths).all(|(s, p)| p.ends_with(s)),
        "{paths:?}"
    );
    env.check();
}

/// Directories whose files are, name for name, copies of another's are
/// reported as one set, at their top: a subdirectory of each of a set
/// says nothing more, a copy with one file more or one file other is no
/// copy, and directories of hard links, of empty files or of one file are
/// left out. A change to one directory takes it out of its set.
#[test]
fn identical_directories_are_found_name_for_name() {
    let env = Env::new();
    let files = [
        ("x.txt", text(1, 300)),
        ("y.bin", noise(2, 5_000)),
        ("sub/z1.txt", text(3, 200)),
        ("sub/z2.txt", text(4, 100)),
        ("sub/deeper/v.txt", text(9, 100)),
        ("sub/deeper/w.txt", text(10, 100)),
    ];
    let size: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    let sub: u64 = files[2..].iter().map(|(_, b)| b.len() as u64).sum();
    for dir in ["a", "b", "more", "other", "deep/er/c"] {
        for (rel, body) in &files {
            env.write(&format!("{dir}/{rel}"), body);
        }
    }
    env.write("more/extra.txt", text(5, 50));
    env.write("other/x.txt", text(6, 300));
    // a/sub's files under another name, in a directory of its own.
    for (rel, body) in &files[2..] {
        env.write(&format!("e/{}", rel.replace("sub/", "sub2/")), body);
    }
    std::fs::create_dir(env.root.join("h")).unwrap();
    for (rel, _) in &files {
        let to = env.root.join("h").join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::hard_link(env.root.join("a").join(rel), to).unwrap();
    }
    for dir in ["empty1", "empty2"] {
        env.write(&format!("{dir}/__init__.py"), b"");
        env.write(&format!("{dir}/keep"), b"");
    }
    for dir in ["one1", "one2"] {
        env.write(&format!("{dir}/only.txt"), text(7, 100));
    }
    // Hard links of another directory's files but one, copied again (a
    // `cp -al` backup after a file was saved anew): what that file takes.
    let linked = env.write("l1/p.txt", text(11, 20));
    let again = noise(12, 1_000);
    env.write("l1/q.bin", &again);
    std::fs::create_dir(env.root.join("l2")).unwrap();
    std::fs::hard_link(&linked, env.root.join("l2/p.txt")).unwrap();
    env.write("l2/q.bin", &again);
    env.index();
    let root = env.root.canonicalize().unwrap();
    let at = |rel: &str| root.join(rel).to_str().unwrap().to_owned();
    let sets = |r: &serde_json::Value| -> Vec<(Vec<String>, u64, u64, u64)> {
        r["directories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let paths = d["paths"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap().to_owned());
                (
                    paths.collect(),
                    d["files"].as_u64().unwrap(),
                    d["size"].as_u64().unwrap(),
                    d["wasted"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let r = json(&env, &["report"]);
    // a, b, deep/er/c and h (hard links of a's files: one more name, no
    // more bytes); then the sub directories with e/sub2, which is no
    // subdirectory of a set's. "more" has a file more, "other" another x.
    // The sub/deeper directories are those of the sub set: not repeated.
    let top = (vec![at("a"), at("b"), at("deep/er/c"), at("h")], 6, size, 2 * size);
    let subs = (
        vec![at("a/sub"), at("b/sub"), at("deep/er/c/sub"), at("e/sub2"), at("h/sub"), at("more/sub"), at("other/sub")],
        4,
        sub,
        5 * sub,
    );
    let l_size = text(11, 20).len() as u64 + 1_000;
    let ls = (vec![at("l1"), at("l2")], 2, l_size, 1_000);
    assert_eq!(sets(&r), [top.clone(), subs.clone(), ls.clone()], "{:#}", r["directories"]);
    let of: Vec<Option<u64>> =
        r["directories"][0]["paths"].as_array().unwrap().iter().map(|p| p["hard_links_of"].as_u64()).collect();
    assert_eq!(of, [Some(3), None, None, Some(0)], "a and h: {:#}", r["directories"][0]);
    let totals = &r["directory_totals"];
    assert_eq!((totals["sets"].as_u64(), totals["directories"].as_u64()), (Some(3), Some(13)), "{totals:#}");
    // What removing all but the first of each set frees: b and deep/er/c
    // whole, then e/sub2, more/sub and other/sub (b/sub and deep/er/c/sub
    // go with their parents: not counted twice), and l2's copied file.
    assert_eq!(totals["wasted_bytes"].as_u64(), Some(2 * size + 3 * sub + 1_000), "{totals:#}");
    assert!(totals.get("selected_sets").is_none(), "{totals:#}");

    // The view's filters: --under, --min-size, --limit.
    let r = json(&env, &["report", "--under", root.join("e").to_str().unwrap()]);
    assert_eq!(sets(&r), std::slice::from_ref(&subs), "{:#}", r["directories"]);
    assert_eq!(r["directory_totals"]["selected_sets"].as_u64(), Some(1), "{:#}", r["directory_totals"]);
    // A path gone from the disk is taken as written: the index holds it.
    std::fs::rename(root.join("e"), root.join("e-moved")).unwrap();
    let r = json(&env, &["report", "--under", root.join("e").to_str().unwrap()]);
    assert_eq!(sets(&r), std::slice::from_ref(&subs), "{:#}", r["directories"]);
    std::fs::rename(root.join("e-moved"), root.join("e")).unwrap();
    // A path inside copied directories: the set that holds it.
    let r = json(&env, &["report", "--under", root.join("b/sub/deeper").to_str().unwrap()]);
    assert_eq!(sets(&r), [top.clone(), subs.clone()], "{:#}", r["directories"]);
    let r = json(&env, &["report", "--min-size", &(sub + 1).to_string()]);
    assert_eq!(sets(&r), std::slice::from_ref(&top), "{:#}", r["directories"]);
    let r = json(&env, &["report", "--limit", "1"]);
    assert_eq!(sets(&r), std::slice::from_ref(&top), "{:#}", r["directories"]);
    let totals = &r["directory_totals"];
    assert_eq!((totals["selected_sets"].as_u64(), totals["shown_sets"].as_u64()), (Some(3), Some(1)), "{totals:#}");

    // Text, CSV and HTML list them too.
    let out = env.simd().arg("report").assert().success();
    let text_out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let c = text_out.split("C. Identical directories").nth(1).expect("a section C");
    assert!(c.starts_with("\n  3 sets, 13 directories, "), "{c}");
    assert!(c.contains(&format!("4 copies of a directory of 6 files ({}", simd::cli::human_bytes(size))), "{c}");
    let listed: Vec<&str> =
        c.lines().map(str::trim).filter(|l| l.starts_with('/')).map(|l| l.split("  (").next().unwrap()).collect();
    // a and h are hard links of each other's files: either alone frees
    // nothing, and says so (as a and h under them).
    let note = |of: &str| format!("  (hard links of {}: removing it frees nothing)", at(of));
    assert!(
        c.contains(&format!("{}{}\n", at("a"), note("h"))) && c.contains(&format!("{}{}\n", at("h"), note("a"))),
        "{c}"
    );
    assert!(c.contains(&format!("{}{}\n", at("h/sub"), note("a/sub"))), "{c}");
    assert!(c.contains(&format!("{}\n", at("b"))) && c.contains(&format!("{}\n", at("l2"))), "{c}");
    assert_eq!(listed, [top.0.clone(), subs.0.clone(), ls.0.clone()].concat(), "{c}");
    let out = env.simd().args(["report", "--format", "csv"]).assert().success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let rows: Vec<&str> = csv.lines().filter(|l| l.starts_with("directory,")).collect();
    assert_eq!(rows.len(), 13, "{csv}");
    assert!(rows[0].ends_with(&format!(",{size},4,{},{}", at("a"), at("h"))), "{csv}");
    assert!(rows[1].ends_with(&format!(",{size},4,{},", at("b"))), "{csv}");
    let out = env.simd().args(["report", "--format", "html"]).assert().success();
    let html = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(html.contains("<h2>C. Identical directories</h2>"), "{html}");
    assert!(html.contains(&format!("<li class=\"path\">{}</li>", at("deep/er/c"))), "{html}");

    // A file added to b takes b out, and its sub directory is then a
    // set's own; an analysis brought up to date says so as a fresh one.
    env.write("b/new.txt", text(8, 40));
    env.index();
    let r = json(&env, &["report"]);
    let top = (vec![at("a"), at("deep/er/c"), at("h")], 6, size, size);
    assert_eq!(sets(&r), [subs, top, ls], "most bytes wasted first: {:#}", r["directories"]);
    assert_eq!(r, fresh_report(&env, &[]), "the updated analysis differs from a fresh one");
}

/// An empty query finds an identical file only where the index holds an
/// empty file: it counted "1 similar (showing 0)" with none indexed.
#[test]
fn an_empty_query_finds_an_empty_file_only_when_one_is_indexed() {
    let env = Env::new();
    env.write("a.txt", text(61, 300));
    env.index();
    let empty = env.tmp.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let r = env.json(&["similar", empty.to_str().unwrap()]);
    assert_eq!((r["similar"].as_u64(), r["hits"].as_array().map(Vec::len)), (Some(0), Some(0)), "{r:#}");
    env.write("e0", b"");
    env.index();
    let r = env.json(&["similar", empty.to_str().unwrap()]);
    assert_eq!((r["similar"].as_u64(), r["hits"].as_array().map(Vec::len)), (Some(1), Some(1)), "{r:#}");
    assert_eq!(r["hits"][0]["kind"], "identical", "{r:#}");
    // All of it, in words too (they said 0 %: an empty file has none).
    assert_eq!(
        (r["hits"][0]["resemblance"].as_f64(), r["hits"][0]["words"]["resemblance"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    let out = env.simd().args(["similar", empty.to_str().unwrap()]).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.contains("in words 100%, 100%, 100%"), "{said}");
}

/// Two versions a byte apart, one with a second name (a hard link): the
/// text says how close they are without rounding to "100%", the HTML page
/// counts its link in the singular and keeps a name's spaces, and the
/// CSV of links counts files, not names, as the JSON does.
#[test]
fn near_identical_versions_and_a_hard_link_are_told_as_they_are() {
    let env = Env::new();
    let a = text(64, 40_000);
    let mut b = a.clone();
    b[a.len() / 2] ^= 0x20;
    env.write("a.txt", &a);
    let bp = env.write("b  two spaces.txt", &b);
    std::fs::hard_link(&bp, env.root.join("b-link.txt")).unwrap();
    env.index();
    let r = env.json(&["report"]);
    let c = &r["clusters"][0];
    assert_eq!((r["clusters"].as_array().map(Vec::len), c["files"].as_u64()), (Some(1), Some(2)), "{r:#}");
    let link = &c["links"][0];
    assert!(link["resemblance"].as_f64().unwrap() < 1.0 && link["resemblance"].as_f64().unwrap() > 0.99, "{r:#}");
    let out = env.simd().arg("report").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = text.lines().find(|l| l.contains("[1]–[2]")).unwrap();
    assert!(line.contains("in [2] 99.") && line.contains("in [1] 99.") && !line.contains("] 100%"), "{text}");
    let out = env.simd().args(["--format", "html", "report"]).assert().success();
    let page = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(page.contains("<summary>1 link, strongest first</summary>"), "{page}");
    assert!(page.contains(".path{white-space:pre-wrap}") && page.contains("b  two spaces.txt"), "{page}");
    let out = env.simd().args(["--format", "csv", "report", "--table", "links"]).assert().success();
    let csv = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(&row[row.len() - 2..], ["1", "1"], "{csv}");
    // `similar` of a.txt tells the hard link as the report does.
    let a_path = env.root.join("a.txt");
    let s = env.json(&["similar", a_path.to_str().unwrap()]);
    let files = &s["hits"][0]["files"];
    let names: Vec<&str> = files.as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(names[0].ends_with("b  two spaces.txt") || names[0].ends_with("b-link.txt"), "{s:#}");
    assert_eq!((files[0].get("hard_link_of"), &files[1]["hard_link_of"]), (None, &serde_json::json!(0)), "{s:#}");
    let out = env.simd().args(["similar"]).arg(&a_path).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(said.contains(&format!("  (hard link of {})", names[0])), "{said}");
}

/// A negative number is said to be one (clap took `-1` for an unknown
/// option, and its tip made it a root), and a cutoff under 2 is refused.
#[test]
fn bad_numbers_are_named_as_given() {
    let env = Env::new();
    env.write("a.txt", text(62, 300));
    env.index();
    for (args, said) in [
        (&["report", "--limit", "-1"][..], "invalid value '-1' for '--limit <N>'"),
        (&["index", "--keep-history", "-1"][..], "invalid value '-1' for '--keep-history <N>'"),
        (&["report", "--min-similarity", "-0.1"][..], "--min-similarity -0.1: must be between 0 and 1"),
        (&["report", "--max-degree", "1"][..], "--max-degree 1: must be at least 2"),
        (&["report", "--since", "3000-01-01"][..], "3000-01-01: too far ahead"),
        (&["watch", "--rescan-every", "0"][..], "0 would rescan without a pause; give 1 or more seconds"),
        (&["watch", "--rescan-every", "-5"][..], "a negative number; give 1 or more seconds"),
    ] {
        let out = env.simd().args(args).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains(said), "{args:?}: {err}");
    }
}

/// A SIMD_LOG that does not parse is said (it was taken silently for the
/// default), and the command runs on; a good one takes effect.
#[test]
fn a_log_filter_that_does_not_parse_is_said() {
    let env = Env::new();
    env.write("a.txt", text(63, 300));
    let out = env.simd().env("SIMD_LOG", "simd=loud").args(["index"]).arg(&env.root).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("SIMD_LOG=simd=loud: not understood"), "{err}");
    let out = env.simd().env("SIMD_LOG", "simd=debug").args(["index"]).arg(&env.root).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("not understood") && err.contains("DEBUG"), "{err}");
}

/// Pages that share a header and little else link every one to every
/// other: the text and HTML reports say so under the cluster, with the
/// `template mark` that would leave the header out; a cluster of a few
/// linked versions is not told that.
#[test]
fn a_cluster_linked_nearly_pair_by_pair_points_at_template_mark() {
    let env = Env::new();
    let header = text(70, 800);
    for i in 0..24u64 {
        let mut page = header.clone();
        page.extend(text(1000 + i, 60));
        env.write(&format!("pages/p{i:02}.html"), page);
    }
    let base = text(71, 3000);
    for i in 0..3u64 {
        let mut v = base.clone();
        v.extend(text(2000 + i, 100));
        env.write(&format!("versions/v{i}.txt"), v);
    }
    env.index();
    let r = env.json(&["report"]);
    let clusters = r["clusters"].as_array().unwrap();
    let pages = clusters.iter().find(|c| c["members"].as_array().unwrap().len() == 24).expect("the pages' cluster");
    let id = pages["id"].as_str().unwrap();
    assert_eq!(pages["links"].as_array().unwrap().len(), 276, "{pages:#}");
    let out = env.simd().args(["report", "--links", "3"]).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let note = "nearly every member is linked to every other (276 of the 276 pairs)";
    assert_eq!(said.matches(note).count(), 1, "{said}");
    assert!(said.contains(&format!("`simd template mark {id}` leaves it out of the links")), "{said}");
    let out = env.simd().args(["--format", "html", "report", "--links", "3"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains(note));
}
