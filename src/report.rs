//! Report renderers: the identical-file sets, the clusters and the
//! identical directories of an [`Analysis`] as text (for a terminal, in the
//! spirit of Forman's Figures 5 and 6), JSON (schema in
//! `docs/report-json.md`), CSV (one row per name or per link) or one
//! standalone HTML page (to read in a browser or pass on).
//! Renderers only format; they never touch the index.

use std::io::{self, Write};

use base64::Engine;
use serde::ser::SerializeMap;
use serde::Serialize;
use serde_json::{json, Value};

use crate::analysis::dirs::{DirSet, LateDirs};
use crate::analysis::{Analysis, Cluster, IdenticalSet, Link, Member, Name};
use crate::cli::{count, human_bytes};
use crate::fingerprint::{hex16, ContentHash};
use crate::scan::is_under;
use crate::verify::{SetCheck, Verification};

/// What to show of an analysis.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// Only sets and clusters with a name under this path.
    pub under: Option<Vec<u8>>,
    /// Only identical sets of files at least this large, and clusters with
    /// a member at least this large (`--min-size`: 1 leaves empty files
    /// out, 1M the copies not worth a look).
    pub min_size: Option<u64>,
    /// Only sets and clusters with a name first indexed since a time
    /// (`--since`).
    pub since: Option<Since>,
    /// At most this many identical sets and this many clusters.
    pub limit: Option<usize>,
    /// Text and HTML: at most this many links per cluster, strongest
    /// first (None: all of them). JSON and CSV always hold every link.
    pub links: Option<usize>,
    /// `--verify`: what reading the shown sets' files found.
    pub verified: Option<Verification>,
}

/// `--since`: the time asked for, and the least file id of the files
/// first indexed then or later (ids grow as files are first indexed; the
/// index's marks say when, `store::Mark`).
#[derive(Clone, Copy, Debug)]
pub struct Since {
    pub at: crate::store::TimeNs,
    pub first_id: u64,
}

/// Links a text report shows per cluster unless told otherwise: a cluster
/// of a few hundred files held together by a shared licence has a
/// thousand links, which would bury the rest of the report on a terminal.
pub const TEXT_LINKS: usize = 10;

impl View {
    /// How many of `c`'s links a text or HTML report shows (`--links`).
    fn links_shown(&self, c: &Cluster) -> usize {
        self.links.unwrap_or(usize::MAX).min(c.links.len())
    }

    fn keeps_names<'a>(&self, names: impl Iterator<Item = &'a Name> + Clone) -> bool {
        let under = match &self.under {
            None => true,
            Some(dir) => names.clone().any(|n| is_under(&n.path, dir)),
        };
        under && self.since.is_none_or(|s| names.clone().any(|n| n.id.0 >= s.first_id))
    }

    /// Whether the view keeps all sets and clusters, before `--limit`.
    fn keeps_all(&self) -> bool {
        self.under.is_none() && self.min_size.is_none() && self.since.is_none()
    }

    /// The identical sets `--under` and `--min-size` keep, before `--limit`.
    fn kept_sets<'a, 's>(&'s self, a: &'a Analysis) -> impl Iterator<Item = &'a IdenticalSet> + use<'a, 's> {
        let min = self.min_size.unwrap_or(0);
        a.identical.iter().filter(move |s| s.size >= min && self.keeps_names(s.names.iter()))
    }

    /// The identical directories `--under`, `--min-size` and `--since`
    /// keep, before `--limit`: those with a directory under the path or
    /// holding it (a set left out as its parents' says the path is a
    /// copy too), of at least that many bytes, with a file first indexed
    /// since then.
    fn kept_dirs<'a, 's>(&'s self, dirs: &'a [DirSet]) -> impl Iterator<Item = &'a DirSet> + use<'a, 's> {
        let min = self.min_size.unwrap_or(0);
        dirs.iter().filter(move |d| {
            d.size >= min
                && self.under.as_ref().is_none_or(|u| d.dirs.iter().any(|p| is_under(p, u) || is_under(u, p)))
                && self.since.is_none_or(|s| d.newest.0 >= s.first_id)
        })
    }

    /// The identical directories this view shows.
    pub fn select_dirs<'a>(&self, dirs: &'a [DirSet]) -> Vec<&'a DirSet> {
        self.kept_dirs(dirs).take(self.limit.unwrap_or(usize::MAX)).collect()
    }

    /// How many sets of identical directories, and directories, the view
    /// keeps before `--limit`.
    fn kept_dir_totals(&self, dirs: &[DirSet]) -> (usize, usize) {
        self.kept_dirs(dirs).fold((0, 0), |(sets, n), d| (sets + 1, n + d.dirs.len()))
    }

    /// The clusters `--under` and `--min-size` keep, before `--limit`.
    fn kept_clusters<'a, 's>(&'s self, a: &'a Analysis) -> impl Iterator<Item = &'a Cluster> + use<'a, 's> {
        let min = self.min_size.unwrap_or(0);
        a.clusters.iter().filter(move |c| {
            c.members.iter().any(|m| m.size >= min) && self.keeps_names(c.members.iter().flat_map(|m| m.names.iter()))
        })
    }

    /// Totals of the sets and clusters `--under` and `--min-size` keep, before `--limit`.
    fn selected(&self, a: &Analysis) -> Totals {
        let (mut sets, mut set_files, mut wasted) = (0, 0, 0);
        for s in self.kept_sets(a) {
            (sets, set_files, wasted) = (sets + 1, set_files + s.names.len(), wasted + s.wasted());
        }
        let (mut clusters, mut cluster_files) = (0, 0);
        for c in self.kept_clusters(a) {
            (clusters, cluster_files) = (clusters + 1, cluster_files + c.files());
        }
        Totals { sets, set_files, wasted, clusters, cluster_files }
    }

    /// What `--verify` found for `s`.
    fn check(&self, s: &IdenticalSet) -> Option<&SetCheck> {
        self.verified.as_ref().and_then(|v| v.of(s))
    }

    /// What `--verify` found for the names of a cluster's member (its
    /// identical set's verdicts, when it has copies).
    fn member_check(&self, m: &Member) -> Option<&SetCheck> {
        self.verified.as_ref().and_then(|v| v.of_content(&m.content))
    }

    /// `--verify`'s note after the `k`th name of member `m` (empty for a
    /// copy, or a name not read).
    fn member_note(&self, m: &Member, k: usize) -> String {
        let verdict = self.member_check(m).zip(m.names.get(k)).and_then(|(c, n)| c.verdict_of(k, n.id));
        verdict.map(crate::verify::Verdict::note).unwrap_or_default()
    }

    /// The identical sets whose names `--verify` reads: those shown, and
    /// those of the shown clusters' members with copies (a cluster lists
    /// a member's copies as such, whether or not `--under`, `--min-size`
    /// or `--limit` show its set), each once.
    pub fn sets_to_verify<'a>(&self, a: &'a Analysis) -> Vec<&'a IdenticalSet> {
        let (mut sets, clusters) = self.select(a);
        let mut members: crate::scan::HashSet<ContentHash> =
            clusters.iter().flat_map(|c| &c.members).filter(|m| m.names.len() > 1).map(|m| m.content).collect();
        for s in &sets {
            members.remove(&s.content);
        }
        if !members.is_empty() {
            sets.extend(a.identical.iter().filter(|s| members.contains(&s.content)));
        }
        sets
    }

    /// The identical sets and clusters this view shows.
    pub fn select<'a>(&self, a: &'a Analysis) -> (Vec<&'a IdenticalSet>, Vec<&'a Cluster>) {
        let limit = self.limit.unwrap_or(usize::MAX);
        (self.kept_sets(a).take(limit).collect(), self.kept_clusters(a).take(limit).collect())
    }
}

/// Counts of identical sets and clusters, and of their files.
struct Totals {
    sets: usize,
    set_files: usize,
    wasted: u64,
    clusters: usize,
    cluster_files: usize,
}

/// A path for JSON: `{"path": str}` when it is UTF-8, else `{"path_b64": raw bytes in base64}`.
pub struct JsonPath<'a>(pub &'a [u8]);

impl JsonPath<'_> {
    /// The path's entry in a map being written.
    fn entry<M: serde::ser::SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        match std::str::from_utf8(self.0) {
            Ok(p) => m.serialize_entry("path", p),
            Err(_) => m.serialize_entry("path_b64", &base64::engine::general_purpose::STANDARD.encode(self.0)),
        }
    }
}

impl Serialize for JsonPath<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        self.entry(&mut m)?;
        m.end()
    }
}

pub(crate) fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// An identical set's names as a JSON array: each path, for a name that
/// is a hard link of an earlier one `hard_link_of`, its index, and with
/// `--verify` the name's verdict (`verify`, and `error` for one unreadable).
struct JsonSetFiles<'a>(&'a IdenticalSet, Option<&'a SetCheck>);

/// A name in JSON: its path, the name it is a hard link of, and with
/// `--verify` its verdict.
struct JsonFile<'a>(&'a [u8], Option<usize>, Option<&'a crate::verify::Verdict>);

impl Serialize for JsonFile<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        JsonPath(self.0).entry(&mut m)?;
        if let Some(of) = self.1 {
            m.serialize_entry("hard_link_of", &of)?;
        }
        if let Some(v) = self.2 {
            m.serialize_entry("verify", v.as_str())?;
            if let crate::verify::Verdict::Unreadable(e) = v {
                m.serialize_entry("error", e)?;
            }
        }
        m.end()
    }
}

impl Serialize for JsonSetFiles<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (set, check) = (self.0, self.1);
        s.collect_seq(
            set.names
                .iter()
                .enumerate()
                .map(|(k, n)| JsonFile(&n.path, set.link_of(k), check.and_then(|c| c.verdicts.get(k)))),
        )
    }
}

/// A cluster member's names as a JSON array: paths, for a name that is a
/// hard link of an earlier one `hard_link_of`, and with `--verify` each
/// one's verdict when the member has copies.
struct JsonMemberFiles<'a>(&'a Member, Option<&'a SetCheck>);

impl Serialize for JsonMemberFiles<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (m, check) = (self.0, self.1);
        let links = m.links_of();
        s.collect_seq(
            m.names
                .iter()
                .enumerate()
                .map(|(k, n)| JsonFile(&n.path, links[k], check.and_then(|c| c.verdict_of(k, n.id)))),
        )
    }
}

/// A content hash as its hex string, without a `String` for each.
struct JsonHash<'a>(&'a ContentHash);

impl Serialize for JsonHash<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(std::str::from_utf8(&hex16(&self.0 .0)).expect("hex digits are ASCII"))
    }
}

#[derive(Serialize)]
struct JsonReport<'a, 'd> {
    format: &'static str,
    index: Value,
    params: Value,
    ignored: Value,
    totals: Value,
    /// With `--under` or `--limit`: what they kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    selected: Option<Value>,
    /// With `--verify`: what reading the shown sets found.
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<Value>,
    identical: Vec<JsonSet<'a>>,
    clusters: Vec<JsonCluster<'a>>,
    /// Last, as they are found beside the rest ([`LateDirs`]).
    directories: JsonDirs<'a, 'd>,
    directory_totals: JsonDirTotals<'a, 'd>,
}

/// The identical directories a view shows, then their totals
/// (`directory_totals`), once found.
struct JsonDirs<'a, 'd>(&'a LateDirs<'d>, &'a View);

impl Serialize for JsonDirs<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let all = self.0.get().map_err(serde::ser::Error::custom)?;
        s.collect_seq(self.1.select_dirs(all).into_iter().map(|d| JsonDirSet {
            signature: JsonHash(&d.signature),
            files: d.files,
            size: d.size,
            copies: d.dirs.len(),
            wasted: d.wasted,
            paths: d.dirs.iter().zip(&d.links_of).map(|(p, &of)| JsonDirPath(p, of)).collect(),
        }))
    }
}

/// What the JSON report ends with: the identical directories' totals.
struct JsonDirTotals<'a, 'd>(&'a LateDirs<'d>, &'a View);

impl Serialize for JsonDirTotals<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (all, view) = (self.0.get().map_err(serde::ser::Error::custom)?, self.1);
        let mut v = json!({
            "sets": all.len(),
            "directories": all.iter().map(|d| d.dirs.len()).sum::<usize>(),
            "wasted_bytes": crate::analysis::dirs::total_wasted(all),
        });
        if !view.keeps_all() || view.limit.is_some() {
            let (sets, dirs) = view.kept_dir_totals(all);
            v["selected_sets"] = json!(sets);
            v["selected_directories"] = json!(dirs);
            v["shown_sets"] = json!(view.select_dirs(all).len());
        }
        v.serialize(s)
    }
}

/// A directory of a set in JSON: its path, and when its files are all
/// hard links of another directory's of the set, that one's index.
struct JsonDirPath<'a>(&'a [u8], Option<usize>);

impl Serialize for JsonDirPath<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        JsonPath(self.0).entry(&mut m)?;
        if let Some(of) = self.1 {
            m.serialize_entry("hard_links_of", &of)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct JsonDirSet<'a> {
    signature: JsonHash<'a>,
    files: usize,
    size: u64,
    copies: usize,
    wasted: u64,
    paths: Vec<JsonDirPath<'a>>,
}

#[derive(Serialize)]
struct JsonSet<'a> {
    content: JsonHash<'a>,
    size: u64,
    copies: usize,
    wasted: u64,
    /// With `--verify`: whether every name holds the set's bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    verified: Option<bool>,
    files: JsonSetFiles<'a>,
}

#[derive(Serialize)]
struct JsonCluster<'a> {
    id: String,
    files: usize,
    bytes: u64,
    members: JsonMembers<'a>,
    links: JsonLinks<'a>,
}

/// A cluster's members as a JSON array, each written as it comes.
struct JsonMembers<'a>(&'a [Member], &'a View);

impl Serialize for JsonMembers<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|m| JsonMember {
            content: JsonHash(&m.content),
            size: m.size,
            payload: m.payload,
            files: JsonMemberFiles(m, self.1.member_check(m)),
        }))
    }
}

/// A cluster's links as a JSON array, each written as it comes: the list
/// of them made first took 96 MB of a report of a 400k-file tree's 1.09M
/// links (`heaptrack`, `docs/performance.md`, session 67).
struct JsonLinks<'a>(&'a [Link]);

impl Serialize for JsonLinks<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|l| JsonLink {
            a: l.a,
            b: l.b,
            kind: l.kind.as_str(),
            common: l.measures.common,
            resemblance: round(l.measures.resemblance),
            a_in_b: round(l.measures.a_in_b),
            b_in_a: round(l.measures.b_in_a),
            words: JsonWords {
                resemblance: round(l.measures.words.resemblance),
                a_in_b: round(l.measures.words.a_in_b),
                b_in_a: round(l.measures.words.b_in_a),
            },
        }))
    }
}

#[derive(Serialize)]
struct JsonMember<'a> {
    content: JsonHash<'a>,
    size: u64,
    payload: u64,
    files: JsonMemberFiles<'a>,
}

#[derive(Serialize)]
struct JsonLink {
    a: usize,
    b: usize,
    kind: &'static str,
    common: u64,
    resemblance: f64,
    a_in_b: f64,
    b_in_a: f64,
    words: JsonWords,
}

#[derive(Serialize)]
struct JsonWords {
    resemblance: f64,
    a_in_b: f64,
    b_in_a: f64,
}

/// Writes the report as JSON (schema: `docs/report-json.md`), streaming:
/// no document tree is built in memory. `pretty` indents it for a reader;
/// a program gets it on one line (on a 66k-file tree, 19 MB instead of 34,
/// and a quarter of a repeated report's time).
pub fn write_json(out: &mut dyn Write, a: &Analysis, view: &View, dirs: &LateDirs, pretty: bool) -> io::Result<()> {
    let (sets, clusters) = view.select(a);
    let report = JsonReport {
        format: "simd-report/1",
        index: json!({ "sequence": a.sequence, "files": a.files, "contents": a.contents, "bytes": a.bytes }),
        params: json!({
            "min_bytes": a.params.min_bytes,
            "min_similarity": a.params.min_similarity,
            "min_containment": a.params.min_containment,
            "max_degree": a.cutoff,
        }),
        ignored: json!({
            "common_chunks": a.ignored.common_chunks,
            "common_bytes": a.ignored.common_bytes,
            "template_chunks": a.ignored.template_chunks,
            "template_bytes": a.ignored.template_bytes,
        }),
        totals: json!({
            "identical_sets": a.identical.len(),
            "identical_files": a.identical.iter().map(|s| s.names.len()).sum::<usize>(),
            "wasted_bytes": a.wasted(),
            "clusters": a.clusters.len(),
            "cluster_files": a.clusters.iter().map(Cluster::files).sum::<usize>(),
        }),
        selected: (!view.keeps_all() || view.limit.is_some()).then(|| {
            let t = view.selected(a);
            let mut v = json!({
                "identical_sets": t.sets,
                "identical_files": t.set_files,
                "wasted_bytes": t.wasted,
                "clusters": t.clusters,
                "cluster_files": t.cluster_files,
                "shown_sets": sets.len(),
                "shown_clusters": clusters.len(),
            });
            if let Some(under) = &view.under {
                v["under"] = serde_json::to_value(JsonPath(under)).unwrap_or(Value::Null);
            }
            if let Some(min) = view.min_size {
                v["min_size"] = json!(min);
            }
            if let Some(since) = view.since {
                v["since"] = json!(crate::cli::utc_ns(since.at));
            }
            v
        }),
        verify: view.verified.as_ref().map(|v| {
            let t = v.tally();
            json!({
                "sets": v.sets(),
                "files_read": v.files_read,
                "bytes_read": v.bytes_read,
                "changed": t.changed,
                "gone": t.gone,
                "unreadable": t.unreadable,
                "differs": t.differs,
            })
        }),
        identical: sets
            .iter()
            .map(|s| JsonSet {
                content: JsonHash(&s.content),
                size: s.size,
                copies: s.copies(),
                wasted: s.wasted(),
                verified: view.check(s).map(SetCheck::all_same),
                files: JsonSetFiles(s, view.check(s)),
            })
            .collect(),
        clusters: clusters
            .iter()
            .map(|c| JsonCluster {
                id: c.id_str(),
                files: c.files(),
                bytes: c.bytes(),
                members: JsonMembers(&c.members, view),
                links: JsonLinks(&c.links),
            })
            .collect(),
        directories: JsonDirs(dirs, view),
        directory_totals: JsonDirTotals(dirs, view),
    };
    // serde_json writes a token at a time: through a buffer of a concrete
    // type those writes are inlined copies, not a virtual call each.
    let mut buffered = io::BufWriter::with_capacity(1 << 16, &mut *out);
    if pretty {
        serde_json::to_writer_pretty(&mut buffered, &report).map_err(io::Error::from)?;
    } else {
        serde_json::to_writer(&mut buffered, &report).map_err(io::Error::from)?;
    }
    writeln!(buffered)?;
    buffered.flush()
}

/// One CSV field, quoted when it needs to be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// What a CSV report lists, a row each (`--table`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvTable {
    /// One row per name of every identical set and every cluster member (the default)
    #[default]
    Files,
    /// One row per link between two members of a cluster
    Links,
}

pub fn write_csv(out: &mut dyn Write, a: &Analysis, view: &View, dirs: &LateDirs, table: CsvTable) -> io::Result<()> {
    match table {
        CsvTable::Files => write_csv_files(out, a, view, dirs),
        CsvTable::Links => write_csv_links(out, a, view),
    }
}

/// One row per name: the identical sets first, then the clusters' members,
/// in the order the text report lists them. `group` is the set's short
/// content hash or the cluster's id, as the text report shows them; a
/// name that is a hard link says of which name (`hard_link_of`), so a
/// script deleting copies can leave hard links alone.
fn write_csv_files(out: &mut dyn Write, a: &Analysis, view: &View, dirs: &LateDirs) -> io::Result<()> {
    let (sets, clusters) = view.select(a);
    let p = |n: &Name| csv_field(&crate::report_path(&n.path));
    // With --verify, a last column: each name's verdict (empty for a
    // cluster member's one name, which is not read).
    let verify = view.verified.is_some();
    writeln!(out, "kind,group,content,size,names,path,hard_link_of{}", if verify { ",verify" } else { "" })?;
    for s in sets {
        let (group, content) = (short_hash(&s.content), s.content.to_string());
        let check = view.check(s);
        for (k, n) in s.names.iter().enumerate() {
            let link = s.link_of(k).map(|j| p(&s.names[j])).unwrap_or_default();
            let verdict = match check.and_then(|c| c.verdicts.get(k)) {
                Some(v) => format!(",{}", v.as_str()),
                None if verify => ",".to_string(),
                None => String::new(),
            };
            writeln!(out, "identical,{group},{content},{},{},{},{link}{verdict}", s.size, s.names.len(), p(n))?;
        }
    }
    for c in clusters {
        let group = c.id_str();
        for m in &c.members {
            let content = m.content.to_string();
            let check = view.member_check(m);
            let links = m.links_of();
            for (k, n) in m.names.iter().enumerate() {
                let link = links[k].map(|j| p(&m.names[j])).unwrap_or_default();
                let verdict = match check.and_then(|c| c.verdict_of(k, n.id)) {
                    Some(v) => format!(",{}", v.as_str()),
                    None if verify => ",".to_string(),
                    None => String::new(),
                };
                writeln!(out, "similar,{group},{content},{},{},{},{link}{verdict}", m.size, m.names.len(), p(n))?;
            }
        }
    }
    // A directory's row: its set's signature for a content, the bytes of
    // each directory for a size, and how many directories for names.
    let empty = if verify { "," } else { "" };
    for d in view.select_dirs(dirs.get()?) {
        let (group, signature) = (short_hash(&d.signature), d.signature.to_string());
        for (path, of) in d.dirs.iter().zip(&d.links_of) {
            let path = csv_field(&crate::report_path(path));
            let of = of.map(|j| csv_field(&crate::report_path(&d.dirs[j]))).unwrap_or_default();
            writeln!(out, "directory,{group},{signature},{},{},{path},{of}{empty}", d.size, d.dirs.len())?;
        }
    }
    Ok(())
}

fn write_csv_links(out: &mut dyn Write, a: &Analysis, view: &View) -> io::Result<()> {
    let (_, clusters) = view.select(a);
    writeln!(
        out,
        "cluster,a,b,kind,common_bytes,resemblance,a_in_b,b_in_a,\
         words_resemblance,words_a_in_b,words_b_in_a,a_size,b_size,a_copies,b_copies"
    )?;
    for c in clusters {
        for l in &c.links {
            let (ma, mb) = (&c.members[l.a], &c.members[l.b]);
            let first =
                |m: &crate::analysis::Member| m.names.first().map(|n| crate::report_path(&n.path)).unwrap_or_default();
            writeln!(
                out,
                "{},{},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{},{},{},{}",
                c.id_str(),
                csv_field(&first(ma)),
                csv_field(&first(mb)),
                l.kind.as_str(),
                l.measures.common,
                // Rounded as the JSON report rounds them (half away from
                // zero): `{:.4}` alone rounds a tie such as 0.65625 to even.
                round(l.measures.resemblance),
                round(l.measures.a_in_b),
                round(l.measures.b_in_a),
                round(l.measures.words.resemblance),
                round(l.measures.words.a_in_b),
                round(l.measures.words.b_in_a),
                ma.size,
                mb.size,
                // Copies are files, as in the JSON report: a file with
                // several names (hard links) is one.
                ma.files(),
                mb.files()
            )?;
        }
    }
    Ok(())
}

/// A share as a whole percentage, never "100%" for less than all nor "0%"
/// for more than nothing (a link of resemblance 0.996 is not between
/// identical files).
pub fn pct(x: f64) -> String {
    let p = 100.0 * x;
    match p {
        p if (99.5..100.0).contains(&p) => format!("{:.1}%", p.min(99.9)),
        p if p > 0.0 && p < 0.5 => format!("{:.1}%", p.max(0.1)),
        p => format!("{p:.0}%"),
    }
}

/// The totals a report opens with, a line each (text and HTML).
fn summary_lines(a: &Analysis, view: &View, shown: (usize, usize)) -> Vec<String> {
    let identical_files: usize = a.identical.iter().map(|s| s.names.len()).sum();
    let cluster_files: usize = a.clusters.iter().map(Cluster::files).sum();
    let mut lines = vec![
        format!("{} ({}), {}", count(a.files, "file"), human_bytes(a.bytes), count(a.contents, "distinct content")),
        format!(
            "identical: {}, {}, {} wasted    similar: {}, {}",
            count(a.identical.len(), "set"),
            count(identical_files, "file"),
            human_bytes(a.wasted()),
            count(a.clusters.len(), "cluster"),
            count(cluster_files, "file")
        ),
        format!(
            "ignored: {} in more than {} ({} of the contents' bytes), {} ({} of the contents' bytes)",
            count(a.ignored.common_chunks, "chunk"),
            count(a.cutoff, "content"),
            human_bytes(a.ignored.common_bytes),
            count(a.ignored.template_chunks, "template chunk"),
            human_bytes(a.ignored.template_bytes)
        ),
        format!(
            "links: ≥ {} in common and resemblance ≥ {} or containment ≥ {}",
            human_bytes(a.params.min_bytes),
            pct(a.params.min_similarity),
            pct(a.params.min_containment)
        ),
    ];
    if let Some(v) = &view.verified {
        lines.push(verify_line(v, shown.0));
    }
    if view.keeps_all() && view.limit.is_none() {
        return lines;
    }
    let t = view.selected(a);
    if !view.keeps_all() {
        lines.push(format!(
            "{}: {}, {}, {} wasted    similar: {}, {}",
            view_filters(view),
            count(t.sets, "set"),
            count(t.set_files, "file"),
            human_bytes(t.wasted),
            count(t.clusters, "cluster"),
            count(t.cluster_files, "file")
        ));
    }
    if view.limit.is_some_and(|n| n < t.sets.max(t.clusters)) {
        lines.push(format!(
            "showing {} of {} and {} of {}",
            shown.0,
            count(t.sets, "set"),
            shown.1,
            count(t.clusters, "cluster")
        ));
    }
    lines
}

/// What `--under`, `--min-size` and `--since` keep, in words.
fn view_filters(view: &View) -> String {
    let mut what = Vec::new();
    if let Some(under) = &view.under {
        what.push(format!("with a file under {}", crate::report_path(under)));
    }
    if let Some(min) = view.min_size {
        what.push(format!("of files of at least {}", human_bytes(min)));
    }
    if let Some(since) = view.since {
        what.push(format!("with a file first indexed since {}", crate::cli::utc_ns(since.at)));
    }
    what.join(", ")
}

/// Section C's opening lines (text and HTML): the identical directories'
/// totals, and what the view keeps of them.
fn dir_lines(all: &[DirSet], view: &View) -> Vec<String> {
    let n: usize = all.iter().map(|d| d.dirs.len()).sum();
    let mut lines = vec![format!(
        "{}, {n} {}, {} wasted (their files are among the identical files)",
        count(all.len(), "set"),
        if n == 1 { "directory" } else { "directories" },
        human_bytes(crate::analysis::dirs::total_wasted(all))
    )];
    let (kept, kept_dirs) = view.kept_dir_totals(all);
    if !view.keeps_all() {
        lines.push(format!("{}: {}, {kept_dirs} directories", view_filters(view), count(kept, "set")));
    }
    if view.limit.is_some_and(|l| l < kept) {
        lines.push(format!("showing {} of {}", view.select_dirs(all).len(), count(kept, "set")));
    }
    lines
}

/// What `--verify` found, in a line.
fn verify_line(v: &Verification, shown: usize) -> String {
    let t = v.tally();
    let sets = match v.sets().saturating_sub(shown) {
        0 => format!("{} shown", count(v.sets(), "set")),
        members => format!("{} shown and the copies of {}", count(shown, "set"), count(members, "cluster member")),
    };
    let read = format!(
        "verified byte for byte: {sets}, {} read ({}) in {:.1} s",
        count(v.files_read as usize, "file"),
        human_bytes(v.bytes_read),
        v.elapsed.as_secs_f64()
    );
    let n = t.not_copies();
    if n == 0 {
        return format!("{read}: every name holds its set's bytes");
    }
    let mut not = Vec::new();
    for (k, what) in [
        (t.changed, "changed since indexed"),
        (t.gone, "gone"),
        (t.unreadable, "unreadable"),
        (t.differs, "with other bytes"),
    ] {
        if k > 0 {
            not.push(format!("{k} {what}"));
        }
    }
    let mut hint = String::new();
    if t.changed + t.gone > 0 {
        hint.push_str("; `simd index` brings the index up to date");
    }
    if t.differs > 0 {
        hint.push_str(
            "; `simd reread PATH...` indexes a name marked with other bytes as it is (its size and mtime are as \
             indexed, so `simd index` does not read it)",
        );
    }
    let (is, copies) = if n == 1 { ("is", "a copy") } else { ("are", "copies") };
    format!("{read}: {} {is} not {copies} now ({}){hint}", count(n, "name"), not.join(", "))
}

/// A set's verification after its heading: nothing without `--verify`.
fn check_note(check: Option<&SetCheck>) -> String {
    let Some(c) = check else { return String::new() };
    if c.all_same() {
        return "  verified".to_string();
    }
    let same = c.verdicts.iter().filter(|v| **v == crate::verify::Verdict::Same).count();
    format!("  not verified: {same} of {} names hold the set's bytes", c.verdicts.len())
}

/// What `--verify` says of a set's name `k`.
fn name_note(check: Option<&SetCheck>, k: usize) -> String {
    check.and_then(|c| c.verdicts.get(k)).map(crate::verify::Verdict::note).unwrap_or_default()
}

/// What an identical directory set is, in a line (text and HTML).
fn dir_heading(d: &DirSet) -> String {
    format!(
        "{} copies of a directory of {} ({}), {} wasted",
        d.dirs.len(),
        count(d.files, "file"),
        human_bytes(d.size),
        human_bytes(d.wasted)
    )
}

/// An identical set's heading (text and HTML).
fn set_heading(s: &IdenticalSet) -> String {
    let copies = s.copies();
    let links = match s.names.len() - copies {
        0 => String::new(),
        1 => " (and 1 hard link)".to_string(),
        n => format!(" (and {n} hard links)"),
    };
    format!("{copies} copies{links} of {}, {} wasted", human_bytes(s.size), human_bytes(s.wasted()))
}

/// What a name of an identical set is: a copy, or a hard link of an
/// earlier name (text and HTML).
fn link_note(s: &IdenticalSet, k: usize, p: &dyn Fn(&[u8]) -> String) -> String {
    hard_link_note(&s.names, s.link_of(k), p)
}

/// "  (hard link of NAME)" for a name that is a hard link of `names[j]`
/// (`of`), else nothing: the identical sets', the members' and
/// `simd similar`'s hits' (text and HTML).
pub(crate) fn hard_link_note(names: &[Name], of: Option<usize>, p: &dyn Fn(&[u8]) -> String) -> String {
    of.map(|j| format!("  (hard link of {})", p(&names[j].path))).unwrap_or_default()
}

/// A cluster member's name that is a hard link of an earlier one says so
/// (text and HTML), as an identical set's does.
fn member_link_note(m: &Member, links: &[Option<usize>], k: usize, p: &dyn Fn(&[u8]) -> String) -> String {
    hard_link_note(&m.names, links[k], p)
}

/// What a directory of an identical set is: a copy, or hard links of
/// another's files (text and HTML).
fn dir_link_note(d: &DirSet, k: usize, p: &dyn Fn(&[u8]) -> String) -> String {
    let of = d.links_of.get(k).copied().flatten();
    of.map(|j| format!("  (hard links of {}: removing it frees nothing)", p(&d.dirs[j]))).unwrap_or_default()
}

/// A content hash's first 12 hex digits, as reports show it.
fn short_hash(c: &ContentHash) -> String {
    c.to_string()[..12].to_string()
}

/// Members from which a cluster whose members are nearly all linked to
/// each other is pointed at `template mark`.
const DENSE_MEMBERS: usize = 20;

/// For a large cluster whose members are nearly all linked to each
/// other (nine pairs in ten or more), what that may mean: pages sharing a
/// header or boilerplate make such complete graphs (1,000 of them make
/// 499,500 links, and a report of 10 such groups was 1 GB of JSON), and
/// `template mark` takes what most of them hold out of the links. Many
/// versions of one document make them too, so it is said as a question.
fn dense_note(c: &Cluster) -> Option<String> {
    let n = c.members.len();
    let pairs = n * (n - 1) / 2;
    (n >= DENSE_MEMBERS && c.links.len() * 10 >= pairs * 9).then(|| {
        format!(
            "nearly every member is linked to every other ({} of the {} pairs): if what they share is a \
             template or boilerplate rather than the text of one document, `simd template mark {}` leaves it \
             out of the links",
            c.links.len(),
            pairs,
            c.id_str()
        )
    })
}

/// A cluster's heading after its id (text and HTML).
fn cluster_heading(c: &Cluster) -> String {
    format!("{}, {}, {}", count(c.files(), "file"), human_bytes(c.bytes()), count(c.links.len(), "link"))
}

/// How strong a link is, to show the strongest first: the largest of its
/// six measures.
fn strength(l: &Link) -> f64 {
    let (m, w) = (&l.measures, &l.measures.words);
    [m.resemblance, m.a_in_b, m.b_in_a, w.resemblance, w.a_in_b, w.b_in_a].into_iter().fold(0.0, f64::max)
}

/// A cluster's links, strongest first.
fn strongest_first(c: &Cluster) -> Vec<&Link> {
    let mut links: Vec<&Link> = c.links.iter().collect();
    links.sort_by(|x, y| strength(y).total_cmp(&strength(x)));
    links
}

pub fn write_text(out: &mut dyn Write, a: &Analysis, view: &View, dirs: &LateDirs) -> io::Result<()> {
    let (sets, clusters) = view.select(a);
    let p = crate::report_path;
    for line in summary_lines(a, view, (sets.len(), clusters.len())) {
        writeln!(out, "{line}")?;
    }

    writeln!(out, "\nA. Identical files")?;
    if sets.is_empty() {
        writeln!(out, "  none")?;
    }
    for (i, s) in sets.iter().enumerate() {
        let check = view.check(s);
        writeln!(out, "  {:>4}. {}  [{}]{}", i + 1, set_heading(s), short_hash(&s.content), check_note(check))?;
        for (k, n) in s.names.iter().enumerate() {
            writeln!(out, "        {}{}{}", p(&n.path), link_note(s, k, &p), name_note(check, k))?;
        }
    }

    writeln!(out, "\nB. Clusters of similar files")?;
    if clusters.is_empty() {
        writeln!(out, "  none")?;
    }
    for c in clusters {
        writeln!(out, "  cluster {}: {}", c.id_str(), cluster_heading(c))?;
        if let Some(note) = dense_note(c) {
            writeln!(out, "    {note}")?;
        }
        for (i, m) in c.members.iter().enumerate() {
            let first = m.names.first().map(|n| p(&n.path)).unwrap_or_default();
            writeln!(out, "    [{}] {}  ({}){}", i + 1, first, human_bytes(m.size), view.member_note(m, 0))?;
            let links = m.links_of();
            for (k, n) in m.names.iter().enumerate().skip(1) {
                let link = member_link_note(m, &links, k, &p);
                writeln!(out, "        = {}{link}{}", p(&n.path), view.member_note(m, k))?;
            }
        }
        let shown = view.links_shown(c);
        let links = if shown < c.links.len() {
            writeln!(out, "    the {shown} strongest of its {} links:", c.links.len())?;
            strongest_first(c).into_iter().take(shown).collect()
        } else {
            c.links.iter().collect::<Vec<_>>()
        };
        for l in links {
            writeln!(
                out,
                "      [{}]–[{}] {:<8} {} in common, resemblance {}, [{}] in [{}] {}, [{}] in [{}] {}; \
                 in words: resemblance {}, {} and {}",
                l.a + 1,
                l.b + 1,
                l.kind.as_str(),
                human_bytes(l.measures.common),
                pct(l.measures.resemblance),
                l.a + 1,
                l.b + 1,
                pct(l.measures.a_in_b),
                l.b + 1,
                l.a + 1,
                pct(l.measures.b_in_a),
                pct(l.measures.words.resemblance),
                pct(l.measures.words.a_in_b),
                pct(l.measures.words.b_in_a)
            )?;
        }
        if shown < c.links.len() {
            writeln!(
                out,
                "      … {} more (`--links 0` shows them all here; json and csv list every link)",
                c.links.len() - shown
            )?;
        }
    }

    writeln!(out, "\nC. Identical directories")?;
    let all = dirs.get()?;
    if !all.is_empty() {
        for line in dir_lines(all, view) {
            writeln!(out, "  {line}")?;
        }
    }
    let dirs = view.select_dirs(all);
    if dirs.is_empty() {
        writeln!(out, "  none")?;
    }
    for (i, d) in dirs.iter().enumerate() {
        writeln!(out, "  {:>4}. {}  [{}]", i + 1, dir_heading(d), short_hash(&d.signature))?;
        for (k, path) in d.dirs.iter().enumerate() {
            writeln!(out, "        {}{}", p(path), dir_link_note(d, k, &p))?;
        }
    }
    Ok(())
}

/// `s` as HTML text: `&`, `<`, `>` and both quotes escaped (a path may
/// hold any of them).
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const HTML_STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:90em}\
code,.path{font-family:ui-monospace,monospace}table{border-collapse:collapse;margin:.5em 0}\
th,td{border:1px solid #ccc;padding:.15em .5em;text-align:right}td.kind{text-align:left}\
summary{cursor:pointer}li{margin:.1em 0}.copy{color:#555}.path{white-space:pre-wrap}";

/// One standalone page (no scripts, nothing fetched): the totals, the
/// identical sets, and each cluster with its members and its links
/// (every one unless `view.links` says how many), strongest first, in a
/// table that folds away. The same view as the text report (`--under`,
/// `--limit`); paths are shown as text shows them.
pub fn write_html(out: &mut dyn Write, a: &Analysis, view: &View, dirs: &LateDirs) -> io::Result<()> {
    let (sets, clusters) = view.select(a);
    let p = |path: &[u8]| html_escape(&crate::report_path(path));
    writeln!(out, "<!doctype html>")?;
    writeln!(out, "<html lang=\"en\"><head><meta charset=\"utf-8\"><title>simd report</title>")?;
    writeln!(out, "<style>{HTML_STYLE}</style></head><body>")?;
    writeln!(out, "<h1>simd report</h1>")?;
    for line in summary_lines(a, view, (sets.len(), clusters.len())) {
        writeln!(out, "<p>{}</p>", html_escape(&line))?;
    }

    writeln!(out, "<h2>A. Identical files</h2>")?;
    if sets.is_empty() {
        writeln!(out, "<p>none</p>")?;
    } else {
        writeln!(out, "<ol>")?;
        for s in sets {
            let check = view.check(s);
            writeln!(
                out,
                "<li><details><summary>{} <code>{}</code>{}</summary><ul>",
                set_heading(s),
                short_hash(&s.content),
                html_escape(&check_note(check))
            )?;
            for (k, n) in s.names.iter().enumerate() {
                let note = html_escape(&name_note(check, k));
                writeln!(out, "<li class=\"path\">{}{}{note}</li>", p(&n.path), link_note(s, k, &p))?;
            }
            writeln!(out, "</ul></details></li>")?;
        }
        writeln!(out, "</ol>")?;
    }

    writeln!(out, "<h2>B. Clusters of similar files</h2>")?;
    if clusters.is_empty() {
        writeln!(out, "<p>none</p>")?;
    }
    for c in clusters {
        let id = c.id_str();
        writeln!(out, "<section id=\"cluster-{id}\">")?;
        writeln!(out, "<h3>cluster <code>{id}</code>: {}</h3>", cluster_heading(c))?;
        if let Some(note) = dense_note(c) {
            writeln!(out, "<p>{}</p>", html_escape(&note))?;
        }
        writeln!(out, "<ol>")?;
        for m in &c.members {
            let first = m.names.first().map(|n| p(&n.path)).unwrap_or_default();
            let note = html_escape(&view.member_note(m, 0));
            write!(out, "<li><span class=\"path\">{first}</span> ({}){note}", human_bytes(m.size))?;
            let links = m.links_of();
            for (k, n) in m.names.iter().enumerate().skip(1) {
                let note = html_escape(&view.member_note(m, k));
                let link = member_link_note(m, &links, k, &p);
                write!(out, "<br><span class=\"path copy\">= {}</span>{link}{note}", p(&n.path))?;
            }
            writeln!(out, "</li>")?;
        }
        writeln!(out, "</ol>")?;
        let shown = view.links_shown(c);
        let heading = if shown < c.links.len() {
            format!("the {shown} strongest of its {} links", c.links.len())
        } else {
            format!("{}, strongest first", crate::cli::count(c.links.len(), "link"))
        };
        writeln!(
            out,
            "<details><summary>{heading}</summary><table><thead>\
             <tr><th colspan=\"3\"></th><th colspan=\"4\">in chunks</th><th colspan=\"3\">in words</th></tr>\
             <tr><th>a</th><th>b</th><th>kind</th><th>in common</th><th>resemblance</th><th>a in b</th>\
             <th>b in a</th><th>resemblance</th><th>a in b</th><th>b in a</th></tr></thead><tbody>"
        )?;
        for l in strongest_first(c).into_iter().take(shown) {
            let (m, w) = (&l.measures, &l.measures.words);
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"kind\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                l.a + 1,
                l.b + 1,
                l.kind.as_str(),
                human_bytes(m.common),
                pct(m.resemblance),
                pct(m.a_in_b),
                pct(m.b_in_a),
                pct(w.resemblance),
                pct(w.a_in_b),
                pct(w.b_in_a)
            )?;
        }
        writeln!(out, "</tbody></table>")?;
        if shown < c.links.len() {
            writeln!(out, "<p>… {} more (<code>--links 0</code> shows them all)</p>", c.links.len() - shown)?;
        }
        writeln!(out, "</details></section>")?;
    }

    writeln!(out, "<h2>C. Identical directories</h2>")?;
    let all = dirs.get()?;
    if !all.is_empty() {
        for line in dir_lines(all, view) {
            writeln!(out, "<p>{}</p>", html_escape(&line))?;
        }
    }
    let dirs = view.select_dirs(all);
    if dirs.is_empty() {
        writeln!(out, "<p>none</p>")?;
    } else {
        writeln!(out, "<ol>")?;
        for d in dirs {
            writeln!(
                out,
                "<li><details><summary>{} <code>{}</code></summary><ul>",
                dir_heading(d),
                short_hash(&d.signature)
            )?;
            for (k, path) in d.dirs.iter().enumerate() {
                writeln!(out, "<li class=\"path\">{}{}</li>", p(path), dir_link_note(d, k, &p))?;
            }
            writeln!(out, "</ul></details></li>")?;
        }
        writeln!(out, "</ol>")?;
    }
    writeln!(out, "</body></html>")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_share_is_never_rounded_to_all_or_nothing() {
        let said: Vec<String> = [1.0, 0.9961, 0.995, 0.994, 0.5, 0.004, 0.0001, 0.0].map(super::pct).into();
        assert_eq!(said, ["100%", "99.6%", "99.5%", "99%", "50%", "0.4%", "0.1%", "0%"]);
    }

    /// A tie (a word ratio's power-of-two denominator makes them common)
    /// reads the same in CSV as in JSON: `{:.4}` alone would round it to
    /// even, 0.6562 against JSON's 0.6563.
    #[test]
    fn csv_and_json_round_a_measure_alike() {
        for (x, want) in [(0.65625, "0.6563"), (0.34375, "0.3438"), (0.123449, "0.1234"), (1.0, "1.0000")] {
            let json = serde_json::json!(super::round(x)).to_string();
            let csv = format!("{:.4}", super::round(x));
            assert_eq!(csv, want, "{x}");
            assert_eq!(json.parse::<f64>().unwrap(), csv.parse::<f64>().unwrap(), "{x}");
        }
    }
}
