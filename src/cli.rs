//! The command line: parses arguments, opens the index, calls the library
//! and prints. No logic of its own beyond choosing and formatting.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use crate::analysis::{cache, marks, AnalysisParams};
use crate::chunker::ChunkParams;
use crate::control::{self, Request};
use crate::fingerprint::WholeFrom;
use crate::ingest::{self, IndexOptions, IngestError, Summary};
use crate::query;
use crate::report::{self, View};
use crate::scan::WalkOptions;
use crate::store::{Access, Store, StoreError};
use crate::watch::DaemonState;

#[derive(Parser, Debug)]
#[command(
    name = "simd",
    version,
    about = "Keeps document repositories continuously deduplicated",
    args_override_self = true
)]
pub struct Cli {
    /// Index directory [default: ${XDG_DATA_HOME:-~/.local/share}/simd]
    #[arg(long, global = true, env = "SIMD_DB", value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Output format
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// No progress bar and no summary; errors and warnings still go to stderr
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More log output (-v: info, -vv: debug); SIMD_LOG overrides
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// One row per file name, or per link with `--table links` (`report` only)
    Csv,
    /// One standalone page (`report` only)
    Html,
}

/// What to scan and how, shared by `index` and `watch`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScanArgs {
    /// Leave out paths matching this glob (gitignore syntax; repeatable): '*.bak' a name anywhere, 'build/tmp' such a path at any depth, '/srv/kb/tmp' an absolute one
    #[arg(long, value_name = "GLOB", value_parser = parse_exclude)]
    pub exclude: Vec<String>,
    /// Do not honour .gitignore, .ignore and .simdignore files, and index
    /// clutter too: editors' locks, swap and auto-save files, partial
    /// downloads, folders' system files (~$x.docx, .x.swp, .DS_Store...;
    /// a `!` line in a .simdignore keeps those it names, as `!*.part`)
    #[arg(long)]
    pub no_ignore: bool,
    /// Do not enter directories on another file system than their root's
    /// (mount points: network shares, removable disks, /proc); a root
    /// inside another root, on a file system of its own, is still walked
    #[arg(long, short = 'x')]
    pub one_file_system: bool,
    /// Chunk workers; 0: one per core [default: one per core]
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
    /// Keep lost-and-found records this many days
    #[arg(long, allow_negative_numbers = true, value_name = "DAYS", default_value_t = 90)]
    pub keep_history_days: u64,
    /// Keep at most this many lost-and-found records (the newest; one per
    /// path, its newest)
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 100_000)]
    pub keep_history: usize,
    /// Files this large are indexed whole: identical copies and similar
    /// words are found, but no chunk list is kept, which bounds memory
    /// (e.g. 4GiB, 512M; at least 16MiB)
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_whole_from)]
    pub whole_from: WholeFrom,
}

impl ScanArgs {
    /// Whether an option that shapes what a run indexes or keeps is given
    /// (all but `--threads`): a running daemon has its own.
    fn shapes_the_run(&self) -> bool {
        let ScanArgs { exclude, no_ignore, one_file_system, threads: _, keep_history_days, keep_history, whole_from } =
            self;
        let kept = ingest::Retention::default();
        !exclude.is_empty()
            || *no_ignore
            || *one_file_system
            || *keep_history_days != kept.max_age_days
            || *keep_history != kept.max_records
            || *whole_from != WholeFrom::default()
    }
}

/// A size in bytes with an optional binary suffix (K, M, G, T, with or
/// without `iB`/`B`, any case): 1GiB, 512M, 16777216.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: u64 = n.parse().map_err(|_| format!("{s}: not a size (e.g. 1GiB, 512M, 16777216)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("{s}: not a size (e.g. 1GiB, 512M, 16777216)")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s}: too large"))
}

/// The signals that stop `simd index` and `simd watch` with what they did
/// kept: Ctrl-C, a service manager's stop, a closed terminal.
const STOP_SIGNALS: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

/// An `--exclude` pattern, checked before anything is opened (kept as
/// typed: the walk reads it through [`crate::scan::exclude_glob`]).
fn parse_exclude(s: &str) -> Result<String, String> {
    crate::scan::exclude_glob(s).map(|_| s.to_string())
}

fn parse_whole_from(s: &str) -> Result<WholeFrom, String> {
    let n = parse_size(s)?;
    if n < WholeFrom::MIN {
        return Err(format!("{s}: at least {} (16MiB)", WholeFrom::MIN));
    }
    Ok(WholeFrom(n))
}

impl ScanArgs {
    pub fn index_options(self, roots: Vec<PathBuf>, progress: bool) -> IndexOptions {
        IndexOptions {
            roots,
            walk: WalkOptions {
                excludes: self.exclude,
                no_ignore: self.no_ignore,
                threads: self.threads,
                skip_dirs: Vec::new(),
                kernel_dirs: Vec::new(),
                one_file_system: self.one_file_system,
                reread: Vec::new(),
                reread_files: Default::default(),
            },
            workers: self.threads,
            progress,
            retention: ingest::Retention { max_age_days: self.keep_history_days, max_records: self.keep_history },
            tolerate_missing: false,
            spared: Vec::new(),
            interrupt: None,
            whole_from: self.whole_from,
        }
    }
}

/// Link thresholds, shared by `report`, `similar` and `template mark`.
#[derive(clap::Args, Debug, Clone)]
pub struct Thresholds {
    /// A link needs at least this many bytes in common (in chunks, or estimated from words) [default: 100]
    #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
    pub min_bytes: Option<u64>,
    /// ... and resemblance at least this, in chunks or in words (0..1) [default: 0.5]
    #[arg(long, allow_negative_numbers = true, value_name = "R")]
    pub min_similarity: Option<f64>,
    /// ... or the smaller file at least this much inside the larger (0..1) [default: 0.8]
    #[arg(long, allow_negative_numbers = true, value_name = "C")]
    pub min_containment: Option<f64>,
    /// Ignore chunks held by more than this many distinct contents [default: half the contents, within 100..=1000]
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub max_degree: Option<u64>,
}

impl Thresholds {
    pub fn params(&self) -> Result<AnalysisParams> {
        let d = AnalysisParams::default();
        let p = AnalysisParams {
            min_bytes: self.min_bytes.unwrap_or(d.min_bytes),
            min_similarity: self.min_similarity.unwrap_or(d.min_similarity),
            min_containment: self.min_containment.unwrap_or(d.min_containment),
            max_degree: self.max_degree,
        };
        for (name, v) in [("--min-similarity", p.min_similarity), ("--min-containment", p.min_containment)] {
            if !(0.0..=1.0).contains(&v) {
                anyhow::bail!("{name} {v}: must be between 0 and 1");
            }
        }
        // A chunk links the contents that share it: with a cutoff under 2
        // every shared chunk is ignored, and nothing can link.
        if let Some(n @ 0..=1) = p.max_degree {
            anyhow::bail!("--max-degree {n}: must be at least 2 (a chunk shared by two contents is what links them)");
        }
        Ok(p)
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Scan roots once: chunk new or changed files, record deleted ones
    Index {
        /// Directories to index [default: the roots the index remembers]
        roots: Vec<PathBuf>,
        /// Average chunk size in bytes, fixed when the index is created [default: 1000]
        #[arg(long, allow_negative_numbers = true, value_name = "BYTES")]
        avg_chunk: Option<u32>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Identical-file sets, then clusters of similar files with their links
    Report {
        #[command(flatten)]
        thresholds: Thresholds,
        /// Only sets and clusters with a file under this path
        #[arg(long, value_name = "PATH")]
        under: Option<PathBuf>,
        /// Only identical sets of files at least this large, and clusters with a file at least this large
        /// (e.g. 1M, 64KiB; 1 leaves out empty files)
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        min_size: Option<u64>,
        /// Only identical sets and clusters with a file first indexed since WHEN: an age (90m, 12h, 7d, 2w)
        /// or a UTC time (2026-11-30, 2026-11-30 08:00); known to within 10 minutes before it
        #[arg(long, value_name = "WHEN", value_parser = parse_since)]
        since: Option<i64>,
        /// At most this many identical sets and this many clusters
        #[arg(long, allow_negative_numbers = true, value_name = "N")]
        limit: Option<usize>,
        /// At most this many links per cluster, strongest first (0: all). Text shows 10 unless told, html
        /// every link unless told (a large tree's page can be too large for a browser); json and csv list every link
        #[arg(long, allow_negative_numbers = true, value_name = "N")]
        links: Option<usize>,
        /// With --format csv: a row per file name of every identical set and cluster, or per link
        #[arg(long, value_enum, value_name = "TABLE")]
        table: Option<report::CsvTable>,
        /// Write the report to FILE instead of standard output
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Redo the whole analysis rather than reuse the last one (served as it is
        /// when the index did not change, else brought up to date)
        #[arg(long)]
        fresh: bool,
        /// Read every file of the identical sets shown (and the copies the clusters shown list) and compare them
        /// byte for byte: a name
        /// changed since indexed, gone, unreadable, or holding other bytes (an MD5 collision) is marked, and
        /// the exit status is then 4
        #[arg(long)]
        verify: bool,
    },
    /// Files in the index similar to FILE (which need not be indexed; - for stdin)
    Similar {
        /// The file to compare with the index (indexed or not; - reads standard input)
        file: PathBuf,
        #[command(flatten)]
        thresholds: Thresholds,
        /// List every file sharing payload, not only those passing the thresholds
        #[arg(long)]
        all: bool,
        /// At most this many answers
        #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 20)]
        limit: usize,
    },
    /// Where the content last seen at PATH (a file or a directory) lives now
    Lost {
        /// A file or directory as it was last seen (it need not exist now)
        path: PathBuf,
        /// For a directory: only the files that went from it since WHEN, an age (90m, 12h, 7d, 2w) or a UTC
        /// time (2026-11-30, 2026-11-30 08:00)
        #[arg(long, value_name = "WHEN", value_parser = parse_since)]
        since: Option<i64>,
        /// At most this many places per file (1 or more)
        #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 5, value_parser = at_least_one)]
        limit: usize,
    },
    /// Declare a cluster's shared chunks a template: later reports ignore them
    #[command(subcommand)]
    Template(TemplateCommand),
    /// Index, then keep the index live from file-system events until stopped (SIGINT/SIGTERM/SIGHUP)
    Watch {
        /// Directories to watch [default: the roots the index remembers]
        roots: Vec<PathBuf>,
        /// Gather a burst of events on a path for this long before handling it
        #[arg(long, allow_negative_numbers = true, value_name = "MS", default_value_t = 50)]
        debounce_ms: u64,
        /// Rescan this often when the inotify watch limit leaves part of the tree unwatched, or a root is on a network or FUSE file system
        #[arg(long, allow_negative_numbers = true, value_name = "SECS", default_value_t = 300, value_parser = some_seconds)]
        rescan_every: u64,
        /// Rescan everything this often even when every directory is watched, for changes that raise no inotify event (writes through a shared mmap or a hard link from outside the roots); 0: never
        #[arg(long, allow_negative_numbers = true, value_name = "SECS", default_value_t = crate::watch::FULL_RESCAN_EVERY.as_secs())]
        full_rescan_every: u64,
        /// Keep the files of a root that went away or was replaced (a share unmounted, a tree moved out) this long before recording them as removed, so that one back by then is not read again whole; `simd rescan` records them at once; 0: at once
        #[arg(long, allow_negative_numbers = true, value_name = "SECS", default_value_t = crate::watch::ROOT_GRACE.as_secs())]
        root_grace: u64,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Show what the index holds
    Status,
    /// Verify every cross-column-family invariant of the index
    Check,
    /// Ask the running `simd watch` to rescan its roots now (without a daemon, run `simd index`)
    Rescan,
    /// Read files again even where their size, mtime and inode are as indexed (a write that kept them,
    /// which `report --verify` finds as "other bytes"); the rest of their roots is brought up to date as
    /// `simd index` does
    Reread {
        /// Files or directories under the index's roots [default: every root]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Stop indexing roots: drop their files from the index and no longer remember them (the files are not touched)
    Forget {
        /// Roots the index remembers (`simd status` lists them); one gone for good is named by its old path
        #[arg(required = true)]
        roots: Vec<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum TemplateCommand {
    /// Mark the chunks shared by a cluster's files (id from `simd report`; a unique prefix will do)
    Mark {
        /// A cluster's id from `simd report` (a unique prefix will do)
        cluster: String,
        /// Mark chunks and word samples held by at least this fraction of the cluster's distinct contents (for a sample, of those whose sketches keep samples of its level)
        #[arg(long, allow_negative_numbers = true, value_name = "F", default_value_t = 1.0)]
        min_share: f64,
        #[command(flatten)]
        thresholds: Thresholds,
    },
    /// Unmark the template chunks marked from a cluster (or `all`)
    Unmark {
        /// The cluster the marks were made from (`simd template list` shows them), or `all`
        cluster: String,
    },
    /// List template chunks by the cluster they were marked from
    List,
}

/// Where the index lives when `--db` and `SIMD_DB` are not given.
pub fn default_db() -> Result<PathBuf> {
    // A relative value is ignored, as the XDG base directory spec says:
    // the index would move with the directory simd is run from.
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| std::path::Path::new(v).is_absolute()) {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").context("neither --db, SIMD_DB, XDG_DATA_HOME nor HOME is set")?;
            PathBuf::from(home).join(".local/share")
        }
    };
    Ok(base.join("simd"))
}

/// What the process should exit with.
pub enum Exit {
    Ok,
    /// The command ran, and found the index inconsistent.
    Inconsistent,
    /// Stopped early by SIGINT, SIGTERM or SIGHUP (its number), with what
    /// it did kept.
    Interrupted(i32),
    /// `report --verify` wrote its report, and a name it shows is not a
    /// copy now (as `sha256sum -c` fails when a file does not match).
    NotVerified,
}

pub fn run(cli: Cli) -> Result<Exit> {
    let db = match &cli.db {
        Some(d) => d.clone(),
        None => default_db()?,
    };
    // Reports can run to many thousand lines (25 MB of JSON on a 66k-file
    // tree): buffer in large writes, and flush once at the end.
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    // A script asking another command for CSV or HTML would get text it
    // did not ask for: said instead.
    if matches!(cli.format, Format::Csv | Format::Html) && !matches!(cli.command, Command::Report { .. }) {
        let name = if cli.format == Format::Csv { "csv" } else { "html" };
        anyhow::bail!("--format {name} is for `simd report` only; other commands write text or json");
    }
    match cli.command {
        Command::Index { roots, avg_chunk, scan } => {
            let params = avg_chunk.map(ChunkParams::for_average).transpose()?;
            roots_for_new_index(&db, &roots)?;
            // A daemon holds the index: it rescans, and adds the roots
            // given, rather than failing with "index in use". Options of
            // the run (what to leave out, history limits...) are the
            // daemon's own; given, they get that error and what to do.
            if avg_chunk.is_none() && !scan.shapes_the_run() && DaemonState::running(&db).is_some() {
                let request = if roots.is_empty() {
                    Request::Rescan
                } else {
                    let roots = ingest::canonical_roots(&roots, false)?;
                    Request::Add { roots: roots.iter().map(|r| crate::scan::path_bytes(r)).collect() }
                };
                let answer = ask_daemon(&db, &request, cli.quiet)?.map_err(|e| anyhow::anyhow!(e))?;
                if !cli.quiet {
                    print_answer(&mut out, cli.format, &answer)?;
                }
                // The daemon rescans its own roots: say which remembered
                // ones it left alone.
                if roots.is_empty() {
                    if let (Some(d), Ok(store)) = (DaemonState::running(&db), Store::open(&db, Access::Read, None)) {
                        let remembered: Vec<String> =
                            ingest::remembered(&store)?.iter().map(crate::show_path).collect();
                        let unwatched = unwatched_roots(&remembered, &d.roots);
                        if !unwatched.is_empty() {
                            eprintln!(
                                "simd: warning: the running `simd watch` (pid {}) does not watch {}: not rescanned \
                                 (stop it and run `simd index`, or restart it with no root to watch them all)",
                                d.pid,
                                unwatched.join(", ")
                            );
                        }
                    }
                }
                return Ok(Exit::Ok);
            }
            let opts = scan.index_options(roots, !cli.quiet && std::io::stderr().is_terminal());
            if let Exit::Interrupted(sig) = run_index(&db, opts, params, cli.quiet, cli.format, &mut out)? {
                return Ok(Exit::Interrupted(sig));
            }
        }
        Command::Report { thresholds, under, min_size, since, limit, links, table, out: out_file, fresh, verify } => {
            if table.is_some() && cli.format != Format::Csv {
                anyhow::bail!("--table chooses the rows of a csv report; add --format csv");
            }
            if verify && table == Some(report::CsvTable::Links) {
                anyhow::bail!("--verify reads the files of identical sets, which --table links does not list");
            }
            let table = table.unwrap_or_default();
            let store = Store::open(&db, Access::Read, None)?;
            warn_if_first_scan(&db, &store);
            let params = thresholds.params()?;
            // A path gone from the disk (a tree deleted, a share not
            // mounted) is taken as written: the index may hold its files.
            let under = match under {
                Some(p) => Some(crate::scan::path_bytes(&match p.canonicalize() {
                    Ok(c) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        crate::lost::lexical(&p).with_context(|| crate::show_path(&p))?
                    }
                    Err(e) => return Err(anyhow::Error::from(e).context(crate::show_path(&p))),
                })),
                None => None,
            };
            let links = match (cli.format, links) {
                (_, Some(0)) => None,
                (Format::Text, None) => Some(report::TEXT_LINKS),
                (_, n) => n,
            };
            let since = since
                .map(|at| first_id_since(&store, at).map(|first_id| report::Since { at, first_id }))
                .transpose()?;
            let view = View { under, min_size, since, limit, links, verified: None };
            let progress = !cli.quiet && std::io::stderr().is_terminal();
            let mut file = match &out_file {
                Some(p) => Some(
                    OutFile::create(p).with_context(|| format!("{}: cannot write the report", crate::show_path(p)))?,
                ),
                None => None,
            };
            let sink: &mut dyn Write = match &mut file {
                Some(f) => &mut f.writer,
                None => &mut out,
            };
            let format = cli.format;
            // Indented for a person at a terminal, one line for a program
            // (as `gh` does): the report of a large tree is tens of MB.
            let pretty = out_file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout());
            let mut all_copies = true;
            let written = cache::with_analysis(&store, &params, ingest::available_cores(), fresh, |analysis, from| {
                match from {
                    cache::Provenance::Cached => tracing::info!("analysis reused from the cache"),
                    cache::Provenance::Updated { relinked, renamed } => {
                        let names = match renamed {
                            Some(n) => format!("names of {n} read again"),
                            None => "every name read again".to_string(),
                        };
                        tracing::info!("analysis brought up to date: links of {relinked} contents found again, {names}")
                    }
                    cache::Provenance::Computed => tracing::info!("analysis computed"),
                }
                let mut view = view.clone();
                // The identical directories are found on another core while
                // the rest is written, and waited for where they come.
                crate::analysis::dirs::beside(&store, analysis, fresh, |dirs| {
                    if verify {
                        let v = verify_shown(&store, analysis, &view, progress);
                        all_copies = v.tally().not_copies() == 0;
                        view.verified = Some(v);
                    }
                    match format {
                        Format::Text => report::write_text(sink, analysis, &view, dirs)?,
                        Format::Json => report::write_json(sink, analysis, &view, dirs, pretty)?,
                        Format::Csv => report::write_csv(sink, analysis, &view, dirs, table)?,
                        Format::Html => {
                            let mut counted = Counted { inner: &mut *sink, bytes: 0 };
                            report::write_html(&mut counted, analysis, &view, dirs)?;
                            warn_if_large_page(counted.bytes, out_file.as_deref(), view.links.is_some());
                        }
                    }
                    sink.flush()
                })
            })?;
            match (written, &out_file) {
                // The report it was to replace is as it was.
                (Err(e), Some(p)) => {
                    return Err(
                        anyhow::Error::from(e).context(format!("{}: cannot write the report", crate::show_path(p)))
                    )
                }
                (written, _) => written?,
            }
            if let (Some(f), Some(p)) = (file, &out_file) {
                f.commit().with_context(|| format!("{}: cannot write the report", crate::show_path(p)))?;
            }
            if !all_copies {
                out.flush()?;
                return Ok(Exit::NotVerified);
            }
        }
        Command::Similar { file, thresholds, all, limit } => {
            let store = Store::open(&db, Access::Read, None)?;
            warn_if_first_scan(&db, &store);
            let params = thresholds.params()?;
            let mut indexed = false;
            let answer = if file.as_os_str() == "-" {
                query::similar(&store, std::io::stdin().lock(), None, &params, all, limit)?
            } else {
                // A character device (/dev/zero, a terminal, a tape) may never
                // end, or do something when opened: it is not opened.
                use std::os::unix::fs::FileTypeExt;
                // A socket cannot be opened as a file (ENXIO, "No such
                // device or address"): said as what it is.
                let kind = std::fs::metadata(&file).ok().map(|m| m.file_type()).and_then(|t| {
                    (t.is_char_device().then_some("a character device"))
                        .or(t.is_block_device().then_some("a block device"))
                        .or(t.is_socket().then_some("a socket"))
                });
                if let Some(kind) = kind {
                    anyhow::bail!(
                        "{}: is {kind}; `simd similar` reads a file or a pipe (or - for stdin)",
                        crate::show_path(&file)
                    );
                }
                let f = std::fs::File::open(&file).with_context(|| crate::show_path(&file))?;
                // A directory opens, and only its read fails ("Is a directory").
                if f.metadata().is_ok_and(|m| m.is_dir()) {
                    anyhow::bail!(
                        "{}: is a directory; `simd similar` takes one file (or - for stdin)",
                        crate::show_path(&file)
                    );
                }
                let own = file.canonicalize().ok().map(|p| crate::scan::path_bytes(&p));
                // The file itself is left out of its own answer (its indexed
                // version, too, if it changed since): say so.
                if let Some(own) = &own {
                    indexed = store.contains::<crate::store::Paths>(own)?;
                }
                query::similar(&store, f, own.as_deref(), &params, all, limit)?
            };
            match cli.format {
                Format::Json => {
                    let mut json = similar_json(&answer);
                    json["indexed"] = indexed.into();
                    writeln!(out, "{}", json_text(&json))?
                }
                _ => print_similar(&mut out, &file, &answer, indexed)?,
            }
        }
        Command::Lost { path, since, limit } => {
            let store = Store::open(&db, Access::Read, None)?;
            warn_if_first_scan(&db, &store);
            let lexical = crate::lost::lexical(&path).with_context(|| crate::show_path(&path))?;
            let abs = if crate::lost::knows(&store, &lexical)? {
                lexical
            } else {
                crate::lost::absolute(&lexical).with_context(|| crate::show_path(&path))?
            };
            let answer = crate::lost::lost(&store, &abs, limit, since)?;
            // A file's answer is its last record, whenever it was made.
            if since.is_some() && matches!(answer, crate::lost::Answer::Live { .. } | crate::lost::Answer::File(_)) {
                tracing::warn!(
                    "{}: a file: --since keeps what went from a directory in that time, and is not applied",
                    crate::show_path(&path)
                );
            }
            match cli.format {
                Format::Json => {
                    writeln!(out, "{}", json_text(&lost_json(&answer)))?;
                }
                _ => print_lost(&mut out, &answer)?,
            }
        }
        Command::Template(cmd) => template(&db, cmd, cli.format, &mut out)?,
        Command::Watch { roots, debounce_ms, rescan_every, full_rescan_every, root_grace, scan } => {
            roots_for_new_index(&db, &roots)?;
            stop_at_any_panic();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            for sig in STOP_SIGNALS {
                signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
            }
            // The first scan and rescans stop at a signal too (a first
            // index of a large tree takes minutes).
            let mut index = scan.index_options(roots, false);
            index.interrupt = Some(stop.clone());
            let opts = crate::watch::WatchOptions {
                index,
                debounce: std::time::Duration::from_millis(debounce_ms),
                rescan_every: std::time::Duration::from_secs(rescan_every),
                full_rescan_every: (full_rescan_every > 0).then(|| std::time::Duration::from_secs(full_rescan_every)),
                root_grace: std::time::Duration::from_secs(root_grace),
                // Tests make the daemon flush after a shorter quiet spell, to
                // see many flushes in little time (undocumented for users).
                flush_idle: crate::test_setting("SIMD_TEST_FLUSH_IDLE_MS")
                    .map_or(crate::watch::WatchOptions::default().flush_idle, std::time::Duration::from_millis),
                ..Default::default()
            };
            crate::watch::serve(&db, &opts, stop)?;
        }
        Command::Rescan => {
            if DaemonState::running(&db).is_none() {
                anyhow::bail!(
                    "{}: no `simd watch` runs on this index; `simd index` rescans its roots",
                    crate::show_path(&db)
                );
            }
            let answer = ask_daemon(&db, &Request::Rescan, cli.quiet)?.map_err(|e| anyhow::anyhow!(e))?;
            print_answer(&mut out, cli.format, &answer)?;
        }
        Command::Reread { paths, scan } => {
            // A read-only open tells which roots hold the paths, and works
            // beside a running daemon.
            let roots = ingest::remembered(&Store::open(&db, Access::Read, None)?)?;
            let mut named = Vec::new();
            for p in &paths {
                let path = indexed_name(p).with_context(|| crate::show_path(p))?;
                if !roots.iter().any(|r| path.starts_with(r)) {
                    let roots: Vec<String> = roots.iter().map(crate::show_path).collect();
                    anyhow::bail!(
                        "{}: not under a root of the index ({}); `simd index DIR` indexes a new one",
                        crate::show_path(p),
                        if roots.is_empty() { "it has none".to_string() } else { roots.join(", ") }
                    );
                }
                named.push(path);
            }
            let every = named.is_empty();
            if every {
                named = roots.clone();
            }
            let reread: Vec<Vec<u8>> = named.iter().map(|p| crate::scan::path_bytes(p)).collect();
            // A running daemon rereads with its own options; given, they
            // get the writer's "in use" error, which says what to do.
            if !scan.shapes_the_run() && DaemonState::running(&db).is_some() {
                // None named: the daemon's own roots.
                let paths = if every { Vec::new() } else { reread };
                let answer = ask_daemon(&db, &Request::Reread { paths }, cli.quiet)?.map_err(|e| anyhow::anyhow!(e))?;
                if !cli.quiet {
                    print_answer(&mut out, cli.format, &answer)?;
                }
                return Ok(Exit::Ok);
            }
            // Only the roots holding the paths are walked; all of them (as
            // `simd index` walks them, a missing one taken as emptied) when
            // none is named.
            let roots = match every {
                true => Vec::new(),
                false => roots.into_iter().filter(|r| named.iter().any(|p| p.starts_with(r))).collect(),
            };
            // The run's options as `simd index` takes them (what to leave
            // out, `--whole-from`...): a reread is an index run that reads more.
            let mut opts = scan.index_options(roots, !cli.quiet && std::io::stderr().is_terminal());
            opts.walk.reread_paths(reread);
            if let Exit::Interrupted(sig) = run_index(&db, opts, None, cli.quiet, cli.format, &mut out)? {
                return Ok(Exit::Interrupted(sig));
            }
            // A file named that the run leaves out (an exclude or an ignore
            // file covers it) was not read: said, rather than a summary
            // alone.
            let store = Store::open(&db, Access::Read, None)?;
            for p in named.iter().filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())) {
                if !store.contains::<crate::store::Paths>(&crate::scan::path_bytes(p))? {
                    let why = match p
                        .file_name()
                        .is_some_and(|n| crate::scan::is_clutter(std::os::unix::ffi::OsStrExt::as_bytes(n)))
                    {
                        true => {
                            "clutter: an editor's lock or swap file, a partial download or a folder's system file; \
                             a `!NAME` line in a .simdignore keeps it"
                        }
                        false => "an exclude or an ignore file leaves it out",
                    };
                    tracing::warn!("{}: not in the index ({why}): not read", crate::show_path(p));
                }
            }
        }
        Command::Forget { roots } => {
            // Absolute, as given (`forget` resolves symlinks only for a
            // path that is no remembered root itself).
            let mut named = Vec::new();
            for r in &roots {
                named.push(crate::scan::path_bytes(&crate::lost::lexical(r).with_context(|| crate::show_path(r))?));
            }
            print_answer(&mut out, cli.format, &write_or_ask_daemon(&db, Request::Forget { roots: named })?)?;
        }
        Command::Status => {
            let store = Store::open(&db, Access::Read, None)?;
            let mut s = crate::status::status(&store)?;
            s.daemon = DaemonState::running(&db);
            s.daemon_stopped = s.daemon.as_ref().is_some_and(DaemonState::stopped);
            if s.daemon.is_none() {
                s.writer_pid = crate::store::writer_pid(&db);
            }
            match cli.format {
                Format::Json => writeln!(out, "{}", json_text(&status_json(&s)?))?,
                _ => print_status(&mut out, &s)?,
            }
        }
        Command::Check => {
            // An index too damaged to open or to read through is broken
            // as surely as one whose invariants fail: exit 3 either way.
            let r = match Store::open(&db, Access::Read, None).and_then(|s| crate::check::check(&s)) {
                Ok(r) => r,
                Err(e) if e.is_corruption() => {
                    if cli.format == Format::Json {
                        let json = serde_json::json!({ "consistent": false, "error": e.to_string() });
                        writeln!(out, "{}", json_text(&json))?;
                        out.flush()?;
                    }
                    eprintln!("simd: {e}");
                    return Ok(Exit::Inconsistent);
                }
                Err(e) => return Err(e.into()),
            };
            if cli.format == Format::Json {
                let json = serde_json::json!({
                    "consistent": r.is_consistent(),
                    "files": r.files,
                    "contents": r.contents,
                    "postings": r.postings,
                    "history_records": r.ghosts,
                    "postings_pending": r.postings_pending,
                    "problems": r.problems,
                });
                writeln!(out, "{}", json_text(&json))?;
            } else {
                for p in &r.problems {
                    writeln!(out, "{p}")?;
                }
                writeln!(
                    out,
                    "{}: {}, {}, {}, {}: {}",
                    crate::show_path(&db),
                    count(r.files, "file"),
                    count(r.contents, "content"),
                    count(r.postings, "posting"),
                    count(r.ghosts, "history record"),
                    if r.is_consistent() { "consistent".to_string() } else { count(r.problems.len(), "problem") }
                )?;
                if r.postings_pending {
                    writeln!(
                        out,
                        "(the index's first run is still going and writes its postings at its end: they were not \
                         checked)"
                    )?;
                }
            }
            if !r.is_consistent() {
                out.flush()?;
                return Ok(Exit::Inconsistent);
            }
        }
    }
    out.flush()?;
    Ok(Exit::Ok)
}

fn similar_json(a: &query::Similar) -> serde_json::Value {
    serde_json::json!({
        "content": a.content.to_string(),
        "size": a.size,
        "payload": a.payload,
        "chunks": a.chunks,
        "similar": a.similar,
        "sharing": a.sharing,
        "indexed_version": a.own.map(|o| if o == a.content { "same" } else { "older" }),
        "hits": a.hits.iter().map(|h| serde_json::json!({
            "kind": if h.identical { "identical" } else { h.kind.map_or("shares", |k| k.as_str()) },
            "content": h.content.to_string(),
            "size": h.size,
            "payload": h.payload,
            "common": h.measures.common,
            // Four decimals, as the report's JSON.
            "resemblance": report::round(h.measures.resemblance),
            "query_in_file": report::round(h.measures.a_in_b),
            "file_in_query": report::round(h.measures.b_in_a),
            "words": {
                "resemblance": report::round(h.measures.words.resemblance),
                "query_in_file": report::round(h.measures.words.a_in_b),
                "file_in_query": report::round(h.measures.words.b_in_a),
            },
            "files": h.names.iter().zip(crate::analysis::links_among(&h.names)).map(|(n, of)| {
                let mut v = serde_json::to_value(report::JsonPath(&n.path)).unwrap_or_default();
                if let Some(j) = of {
                    v["hard_link_of"] = j.into();
                }
                v
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn print_similar(
    out: &mut impl Write,
    file: &std::path::Path,
    a: &query::Similar,
    indexed: bool,
) -> std::io::Result<()> {
    // A query of `--whole-from`'s default size or more is read whole, as
    // `simd index` reads such a file: "0 chunks (0 B payload)" read as if
    // nothing had been read.
    let cut = if a.chunks == 0 && a.size > 0 {
        format!(
            "read whole, with no chunk list (from {} on: matched by its words)",
            human_bytes(WholeFrom::default().0)
        )
    } else {
        format!("in {} ({} payload)", count(a.chunks, "chunk"), human_bytes(a.payload))
    };
    let sharing = if a.sharing > 0 { format!(" and {} sharing less of it", a.sharing) } else { String::new() };
    let shown = a.hits.len();
    let total = a.similar + a.sharing;
    let limited = if shown < total { format!(" (showing {shown}: --limit)") } else { String::new() };
    let own = match a.own {
        Some(o) if o == a.content => " (the file itself is in the index, and not listed)",
        Some(_) => {
            " (the index holds an older version of the file, changed since it was indexed, not listed: \
             `simd index` or a running daemon brings it up to date)"
        }
        None if indexed => " (the file itself is in the index, and not listed)",
        None => "",
    };
    writeln!(
        out,
        "{}: {} {}, {} similar{sharing}{limited}{own}",
        crate::show_path(file),
        human_bytes(a.size),
        cut,
        a.similar,
    )?;
    for h in &a.hits {
        let kind = if h.identical { "identical" } else { h.kind.map_or("shares", |k| k.as_str()) };
        writeln!(
            out,
            "  {:<9} {}  ({}; {} in common, resemblance {}, query in file {}, file in query {}; \
             in words {}, {}, {})",
            kind,
            crate::report_path(&h.names[0].path),
            human_bytes(h.size),
            human_bytes(h.measures.common),
            report::pct(h.measures.resemblance),
            report::pct(h.measures.a_in_b),
            report::pct(h.measures.b_in_a),
            report::pct(h.measures.words.resemblance),
            report::pct(h.measures.words.a_in_b),
            report::pct(h.measures.words.b_in_a)
        )?;
        let links = crate::analysis::links_among(&h.names);
        for (n, of) in h.names.iter().zip(links).skip(1) {
            let note = report::hard_link_note(&h.names, of, &crate::report_path);
            writeln!(out, "            = {}{note}", crate::report_path(&n.path))?;
        }
    }
    Ok(())
}

fn lost_file_json(f: &crate::lost::LostFile) -> serde_json::Value {
    let mut v = serde_json::json!({
        "last_seen": utc_ns(f.last_seen),
        "last_seen_ns": f.last_seen,
        "found_gone": f.found_gone.map(utc_ns),
        "found_gone_ns": f.found_gone,
        "content": f.content.map(|c| c.to_string()),
        "size": f.size,
        "moves": f.moves.iter().map(|p| report::JsonPath(p)).collect::<Vec<_>>(),
        "moves_end": match (f.moves.is_empty(), f.removed_there) {
            (true, _) => None,
            (false, true) => Some("removed"),
            (false, false) => Some("not_indexed"),
        },
        "candidates": f.candidates.iter().map(|c| {
            let mut e = serde_json::json!({
                "kind": c.kind.as_str(),
                "score": report::round(c.score),
                "resemblance": report::round(c.resemblance),
                "via": c.via.iter().map(|p| report::JsonPath(p)).collect::<Vec<_>>(),
            });
            if c.kind == crate::lost::Kind::Moved {
                e["changed_since"] = c.changed.into();
            }
            merge_path(&mut e, &c.path);
            e
        }).collect::<Vec<_>>(),
        "more_candidates": f.more,
        "more_identical": f.more_identical,
    });
    merge_path(&mut v, &f.path);
    v
}

/// Adds `path` or `path_b64` to a JSON object.
fn merge_path(v: &mut serde_json::Value, path: &[u8]) {
    if let (Some(obj), Ok(serde_json::Value::Object(p))) =
        (v.as_object_mut(), serde_json::to_value(report::JsonPath(path)))
    {
        obj.extend(p);
    }
}

fn lost_json(a: &crate::lost::Answer) -> serde_json::Value {
    use crate::lost::Answer;
    let mut v = match a {
        Answer::Live { content, .. } => serde_json::json!({ "state": "live", "content": content.to_string() }),
        Answer::Unknown { .. } => serde_json::json!({ "state": "unknown" }),
        Answer::File(f) => serde_json::json!({ "state": "lost", "files": [lost_file_json(f)] }),
        Answer::Dir { files, destinations, live, .. } => serde_json::json!({
            // A directory with files gone from it, or none of its own left
            // (all gone before `--since`).
            "state": if files.is_empty() && *live > 0 { "live_directory" } else { "lost_directory" },
            "live_files": live,
            "files": files.iter().map(lost_file_json).collect::<Vec<_>>(),
            "destinations": destinations.iter().map(|(d, n)| {
                let mut e = serde_json::json!({ "files": n });
                merge_path(&mut e, d);
                e
            }).collect::<Vec<_>>(),
        }),
    };
    if let Answer::Dir { since: Some(since), .. } = a {
        v["since"] = serde_json::json!(utc_ns(*since));
    }
    let path = match a {
        Answer::Live { path, .. } | Answer::Unknown { path } | Answer::Dir { path, .. } => path,
        Answer::File(f) => &f.path,
    };
    merge_path(&mut v, path);
    v
}

fn print_lost_file(out: &mut impl Write, f: &crate::lost::LostFile, indent: &str) -> std::io::Result<()> {
    let p = crate::report_path;
    let ago = ingest::now_ns().saturating_sub(f.last_seen) / 1_000_000_000;
    // Found gone by a scan: it went between the walk that last saw it and
    // that scan.
    let found = f.found_gone.map_or(String::new(), |t| format!(", found gone {}", utc_ns(t)));
    writeln!(
        out,
        "{indent}{}: last seen {} ({}){found}{}",
        p(&f.path),
        utc_ns(f.last_seen),
        human_ago(ago),
        f.size.map_or(String::new(), |s| format!(", {}", human_bytes(s)))
    )?;
    if !f.moves.is_empty() {
        let chain: Vec<String> = f.moves.iter().map(|m| p(m)).collect();
        let then = if f.removed_there { "removed there since" } else { "no longer in the index there" };
        writeln!(out, "{indent}  moved to {}, {then}", chain.join(" → "))?;
    }
    if f.candidates.is_empty() {
        writeln!(
            out,
            "{indent}  nothing in the index holds its content{}",
            f.content.map_or(String::new(), |c| format!(" (content {})", &c.to_string()[..12]))
        )?;
    }
    for c in &f.candidates {
        let via = if c.via.is_empty() {
            String::new()
        } else {
            format!("  via {}", c.via.iter().map(|v| p(v)).collect::<Vec<_>>().join(" → "))
        };
        match c.kind {
            crate::lost::Kind::Similar => writeln!(
                out,
                "{indent}  similar    {}  ({} of it there, resemblance {}){via}",
                p(&c.path),
                report::pct(c.score),
                report::pct(c.resemblance)
            )?,
            crate::lost::Kind::Moved if c.changed => writeln!(
                out,
                "{indent}  moved      {}  (changed there since: {} of it there, resemblance {}){via}",
                p(&c.path),
                report::pct(c.score),
                report::pct(c.resemblance)
            )?,
            k => writeln!(out, "{indent}  {:<10} {}{via}", k.as_str(), p(&c.path))?,
        }
    }
    if f.more > 0 {
        let (same, other) = (f.more_identical, f.more - f.more_identical);
        let copies =
            if same == 1 { "1 more identical copy".to_string() } else { format!("{same} more identical copies") };
        let holding = |n: usize, more: &str| match n {
            1 => format!("1 {more}file holding part of it"),
            _ => format!("{n} {more}files holding part of it"),
        };
        let more = match (same, other) {
            (_, 0) => copies,
            (0, _) => holding(other, "more "),
            _ => format!("{copies} and {}", holding(other, "")),
        };
        writeln!(out, "{indent}  … and {more} (--limit {} lists them)", f.candidates.len() + f.more)?;
    }
    Ok(())
}

fn print_lost(out: &mut impl Write, a: &crate::lost::Answer) -> std::io::Result<()> {
    use crate::lost::Answer;
    let p = crate::report_path;
    match a {
        Answer::Live { path, content } => {
            writeln!(out, "{}: live in the index (content {})", p(path), &content.to_string()[..12])
        }
        Answer::Unknown { path } if std::fs::symlink_metadata(crate::scan::bytes_path(path)).is_ok() => writeln!(
            out,
            "{}: it is there, but not in the index (outside its roots; excluded, ignored or clutter such as a lock \
             file; or not a regular file)",
            p(path)
        ),
        Answer::Unknown { path } => {
            writeln!(out, "{}: the index has no record of it (never indexed, or its history expired)", p(path))
        }
        Answer::File(f) => print_lost_file(out, f, ""),
        Answer::Dir { path, files, destinations, live, since } => {
            writeln!(
                out,
                "{}: directory, {} in the index, {} gone from it{}",
                p(path),
                count(*live, "file"),
                count(files.len(), "file"),
                since.map_or(String::new(), |s| format!(" since {}", utc_ns(s)))
            )?;
            if let Some((d, n)) = destinations.first() {
                writeln!(
                    out,
                    "  most went to {} ({n} of {} files, {})",
                    p(d),
                    files.len(),
                    report::pct(*n as f64 / files.len().max(1) as f64)
                )?;
            }
            for f in files {
                print_lost_file(out, f, "  ")?;
            }
            Ok(())
        }
    }
}

/// Makes a panic on any of the daemon's threads end the process at once.
/// Rust ends only the thread that panicked: the daemon would go on without
/// notify's event thread (blind to every later change, with nothing said
/// after the panic's one line) or without a stage of its pipeline. Ended
/// by SIGABRT instead, it is started again by its service manager
/// (`Restart=on-failure`), and a start's scan catches up with what changed
/// meanwhile; the index is consistent at any moment (its crash tests).
/// Not `exit`: that runs RocksDB's static destructors while other threads
/// still use it.
fn stop_at_any_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        tracing::error!(
            "a thread of the daemon failed (above): stopping now, so that it does not go on without it; \
             started again, its first scan catches up with what changed meanwhile"
        );
        std::process::abort();
    }));
}

/// Runs `simd index` (or `simd reread`) with no daemon holding the index,
/// and says what it did.
fn run_index(
    db: &std::path::Path,
    mut opts: IndexOptions,
    params: Option<ChunkParams>,
    quiet: bool,
    format: Format,
    out: &mut impl Write,
) -> Result<Exit> {
    // Ctrl-C (or SIGTERM) stops a long first index with what it read
    // so far written, for the next run to go on from; a second one
    // stops at once (what is written stays consistent either way).
    // So does SIGHUP: a terminal closed, an SSH session dropped
    // under a first index (which writes no WAL) killed it with
    // only what its memtables had flushed kept.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Which one came: the run exits with 128 + its number, as a shell
    // reports a process it stopped (130 for SIGINT, 143 for SIGTERM).
    let signal = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, stop.clone())
            .context("installing signal handlers")?;
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize).context("installing signal handlers")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    opts.interrupt = Some(stop.clone());
    // The walk runs on a read-only open, under the writer's lock:
    // a run that changes nothing never opens a writer (whose open
    // and close cost more than the walk on a small tree), and a
    // few changes are applied by a writer the lock is handed to.
    // The lock is taken first, so the reader sees the index as the
    // writer will (a writer ending in between would have left the
    // reader an index older than the one written to). Any failure
    // of the read-only open (an older schema, a foreign directory)
    // is left to the writer's open, which reports it; so is an
    // index whose first run was stopped before its postings were
    // written, which the writer's open rebuilds.
    let lock = match crate::store::index_exists(db) {
        true => Some(crate::store::lock_writer(db)?),
        false => None,
    };
    let mut summary = match lock {
        None => ingest::index(&Store::open_build(db, params)?, &opts)?,
        Some(lock) => match Store::open(db, Access::Read, params) {
            Ok(reader) if !reader.postings_pending()? => {
                ingest::index_locked(reader, lock, &opts, |lock| Store::open_writer(db, lock, params))?
            }
            other => {
                drop(other);
                ingest::index(&Store::open_writer(db, lock, params)?, &opts)?
            }
        },
    };
    // Stopped during a read-only walk that found nothing to do.
    summary.interrupted |= stop.load(std::sync::atomic::Ordering::Relaxed);
    if !quiet {
        match format {
            Format::Json => writeln!(out, "{}", json_text(&summary_json(&summary)))?,
            _ => print_summary(out, &summary)?,
        }
    }
    if summary.interrupted {
        out.flush()?;
        eprintln!(
            "simd: interrupted: the files read so far are indexed; `simd index` goes on from there \
             (files removed meanwhile are recorded then)"
        );
        let sig = signal.load(std::sync::atomic::Ordering::Relaxed) as i32;
        return Ok(Exit::Interrupted(if sig == 0 { signal_hook::consts::SIGINT } else { sig }));
    }
    Ok(Exit::Ok)
}

/// The least file id of the files first indexed at `at` or later, as the
/// index's marks tell (`report --since`); 0 (every file), with a warning,
/// where they cannot tell.
fn first_id_since(store: &Store, at: i64) -> Result<u64> {
    let marks = store.marks()?;
    Ok(crate::store::Mark::first_id_since(&marks, at, store.next_file_id()?).unwrap_or_else(|| {
        let from = marks
            .first()
            .map_or("from when simd first adds a file to it (it was made before simd dated files)".to_string(), |m| {
                format!("since {}", utc_ns(m.at))
            });
        tracing::warn!(
            "this index dates the files it holds only {from}: every file it held before then counts as indexed \
             since {}",
            utc_ns(at)
        );
        0
    }))
}

/// `path` as the index names it: absolute, the directories it lies in
/// resolved as the index's canonical roots are, its own name kept (a
/// symlink is not indexed: naming one rereads nothing, rather than a file
/// it points to). It must be there.
fn indexed_name(path: &std::path::Path) -> std::io::Result<PathBuf> {
    std::fs::symlink_metadata(path)?;
    let abs = std::path::absolute(path)?;
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => Ok(dir.canonicalize()?.join(name)),
        // `/`, or a path ending in `..`.
        _ => abs.canonicalize(),
    }
}

/// A new index needs roots, and roots that are there: checked before it is
/// made, so that a command that fails leaves no empty index behind.
fn roots_for_new_index(db: &std::path::Path, roots: &[std::path::PathBuf]) -> Result<()> {
    if crate::store::index_exists(db) {
        return Ok(());
    }
    if roots.is_empty() {
        return Err(ingest::IngestError::NoRoots.into());
    }
    ingest::canonical_roots(roots, false)?;
    Ok(())
}

/// After how long a wait for the daemon's answer the user is told what
/// it is doing.
const WAIT_NOTE: std::time::Duration = std::time::Duration::from_secs(10);

/// Hands `request` to the daemon holding the index and waits for its
/// answer, saying once on standard error (unless `quiet`, and only to a
/// person at a terminal) when it is long in coming.
fn ask_daemon(
    db: &std::path::Path,
    request: &Request,
    quiet: bool,
) -> Result<control::Response, control::ControlError> {
    let mut said = quiet || !std::io::stderr().is_terminal();
    let mut said_stopped = quiet;
    control::request(db, request, &mut |waited| {
        // A stopped daemon answers once continued, which may be never: said
        // at once, at a terminal or not (a script's wait would not end).
        if !said_stopped {
            if let Some(d) = DaemonState::running(db).filter(DaemonState::stopped) {
                said_stopped = true;
                eprintln!(
                    "simd: the daemon (pid {0}) is stopped (SIGSTOP, Ctrl-Z or a debugger): this waits until it is \
                     continued (`kill -CONT {0}`); Ctrl-C ends the wait, and the daemon still does the request once \
                     continued",
                    d.pid
                );
            }
        }
        if !said && waited >= WAIT_NOTE {
            said = true;
            let pid = DaemonState::running(db).map_or(String::new(), |s| format!(" (pid {})", s.pid));
            eprintln!(
                "simd: waiting for the daemon{pid} to finish; stopping this wait (Ctrl-C) does not stop it, and \
                 `simd status` shows how far it is"
            );
        }
    })
}

/// Runs a write request on the index, or hands it to the `simd watch` that
/// holds it (over its control socket).
fn write_or_ask_daemon(db: &std::path::Path, request: Request) -> Result<control::Answer> {
    // A writer's open would create a missing index, for nothing.
    if !crate::store::index_exists(db) {
        return Err(StoreError::Missing { dir: db.to_path_buf() }.into());
    }
    let answer = match Store::open(db, Access::Write, None) {
        Ok(store) => control::perform(&store, request, ingest::available_cores()),
        Err(StoreError::InUse { .. }) if DaemonState::running(db).is_some() => ask_daemon(db, &request, false)?,
        Err(e) => return Err(e.into()),
    };
    answer.map_err(|e| anyhow::anyhow!(e))
}

/// A command's JSON answer as text: indented for a person at a terminal,
/// one line for a program (as `gh` does; as `report` writes its own).
fn json_text(json: &impl serde::Serialize) -> String {
    let text =
        if std::io::stdout().is_terminal() { serde_json::to_string_pretty(json) } else { serde_json::to_string(json) };
    // What is serialized here are JSON values and lists of them, which
    // always serialize.
    text.unwrap_or_default()
}

/// What a write request did, in words or (`--format json`) as JSON.
fn print_answer(out: &mut impl Write, format: Format, answer: &control::Answer) -> Result<()> {
    match format {
        Format::Json => writeln!(out, "{}", json_text(&answer.json()))?,
        _ => writeln!(out, "{}", answer.text())?,
    }
    // A rescan the daemon's stop cut short: not done, whatever it says.
    if answer.json()["interrupted"] == serde_json::Value::Bool(true) {
        out.flush()?;
        anyhow::bail!(
            "the daemon was stopped before it finished this (what it read so far is indexed): run the command again \
             (with no daemon running, it runs by itself)"
        );
    }
    Ok(())
}

fn template(db: &std::path::Path, cmd: TemplateCommand, format: Format, out: &mut impl Write) -> Result<()> {
    match cmd {
        TemplateCommand::Mark { cluster, min_share, thresholds } => {
            if !(0.0..=1.0).contains(&min_share) || min_share == 0.0 {
                anyhow::bail!("--min-share {min_share}: must be above 0 and at most 1");
            }
            let params = thresholds.params()?;
            print_answer(out, format, &write_or_ask_daemon(db, Request::TemplateMark { cluster, min_share, params })?)?;
        }
        TemplateCommand::Unmark { cluster } => {
            print_answer(out, format, &write_or_ask_daemon(db, Request::TemplateUnmark { cluster })?)?;
        }
        TemplateCommand::List => {
            let store = Store::open(db, Access::Read, None)?;
            let list = marks::list(&store)?;
            if format == Format::Json {
                let marks: Vec<_> = list
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "cluster": t.cluster, "chunks": t.chunks, "bytes": t.bytes, "word_samples": t.samples,
                        })
                    })
                    .collect();
                writeln!(out, "{}", json_text(&marks))?;
                return Ok(());
            }
            if list.is_empty() {
                writeln!(out, "no template chunks or word samples")?;
            }
            for t in list {
                writeln!(
                    out,
                    "cluster {}: {}, {}, {}",
                    t.cluster,
                    count(t.chunks, "chunk"),
                    human_bytes(t.bytes),
                    count(t.samples, "word sample")
                )?;
            }
        }
    }
    Ok(())
}

/// Where `report --out FILE` writes: a new file beside FILE (mode and all),
/// renamed over it once the report is whole, so that a report that fails
/// (a full disk, an error) leaves the last one as it was, and a reader of
/// FILE (a web server publishing it) never gets half a page. Through a
/// symlink, the file it names is replaced, not the link. The new file
/// takes the old one's owner, group and extended attributes (its ACL) too;
/// a FILE that cannot be replaced by such a file (another user's, where
/// this one may not give files away), that has other names (hard links,
/// which a rename would part from it), that is not a regular file
/// (`/dev/stdout`, a FIFO), or is in a directory where no new file can be
/// made, is written in place, as a shell's `>` does.
struct OutFile {
    writer: std::io::BufWriter<std::fs::File>,
    /// (the new file, the file it replaces once whole), or None when
    /// written in place.
    aside: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl OutFile {
    fn create(p: &std::path::Path) -> std::io::Result<OutFile> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let target = link_target(p);
        let existing = std::fs::metadata(&target).ok();
        // A link still, after as many as the kernel follows: a loop, which
        // opening says so (and it is not replaced).
        let looped = std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink());
        if !looped && existing.as_ref().is_none_or(|m| m.is_file() && m.nlink() == 1) {
            if let (Some(dir), Some(name)) = (target.parent(), target.file_name()) {
                let mut tmp_name = std::ffi::OsString::from(".");
                tmp_name.push(name);
                tmp_name.push(format!(".simd-{}.part", std::process::id()));
                let tmp = dir.join(tmp_name);
                let mode =
                    existing.as_ref().map_or(0o666, |m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
                let made = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode & 0o7777).open(&tmp);
                if let Ok(f) = made {
                    if existing.as_ref().is_none_or(|m| take_on(&f, &target, m).is_ok()) {
                        remove_if_stopped(tmp.clone());
                        return Ok(OutFile { writer: std::io::BufWriter::new(f), aside: Some((tmp, target)) });
                    }
                    let _ = std::fs::remove_file(&tmp);
                }
            }
        }
        Ok(OutFile { writer: std::io::BufWriter::new(std::fs::File::create(p)?), aside: None })
    }

    /// The report is whole: it takes FILE's place.
    fn commit(mut self) -> std::io::Result<()> {
        self.writer.flush()?;
        match self.aside.take() {
            Some((tmp, target)) => std::fs::rename(&tmp, &target).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            }),
            None => Ok(()),
        }
    }
}

/// Gives the new file `f` what the file at `old` (of metadata `m`) has
/// beside its bytes: its extended attributes (an ACL, a label), its owner
/// and group, and its mode (which the umask narrowed, and which a change
/// of owner clears the set-id bits of), in that order.
fn take_on(f: &std::fs::File, old: &std::path::Path, m: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut names = vec![0u8; 4096];
    let len = loop {
        match rustix::fs::listxattr(old, &mut names[..]) {
            Ok(n) => break n,
            Err(rustix::io::Errno::RANGE) if names.len() < 1 << 20 => names.resize(names.len() * 4, 0),
            // No extended attributes there to keep.
            Err(rustix::io::Errno::NOTSUP) => break 0,
            Err(e) => return Err(e.into()),
        }
    };
    for name in names[..len].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
        let mut value = vec![0u8; 256];
        let n = loop {
            match rustix::fs::getxattr(old, name.as_c_str(), &mut value[..]) {
                Ok(n) => break n,
                Err(rustix::io::Errno::RANGE) if value.len() < 1 << 20 => value.resize(value.len() * 4, 0),
                Err(e) => return Err(e.into()),
            }
        };
        rustix::fs::fsetxattr(f, name.as_c_str(), &value[..n], rustix::fs::XattrFlags::empty())?;
    }
    let mine = f.metadata()?;
    if (mine.uid(), mine.gid()) != (m.uid(), m.gid()) {
        std::os::unix::fs::fchown(f, Some(m.uid()), Some(m.gid()))?;
    }
    f.set_permissions(m.permissions())
}

/// The file `p` names: itself, or what its symlinks lead to, even where
/// that does not exist yet (a link to the report still to be written is
/// written through, as a shell's `>` does, not replaced by a file).
fn link_target(p: &std::path::Path) -> std::path::PathBuf {
    if let Ok(t) = std::fs::canonicalize(p) {
        return t;
    }
    let mut at = p.to_path_buf();
    // As many links as the kernel follows (ELOOP past 40).
    for _ in 0..40 {
        let Ok(next) = std::fs::read_link(&at) else { break };
        at = match at.parent() {
            Some(dir) if next.is_relative() => dir.join(next),
            _ => next,
        };
    }
    at
}

/// A report stopped by SIGINT, SIGTERM or SIGHUP (a long `--verify`, a
/// fresh analysis of a large tree) leaves no new file behind either: a
/// thread waiting for those signals removes it, then lets the signal do
/// what it would have done.
fn remove_if_stopped(tmp: std::path::PathBuf) {
    let Ok(mut signals) = signal_hook::iterator::Signals::new(STOP_SIGNALS) else { return };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let _ = std::fs::remove_file(&tmp);
            let _ = signal_hook::low_level::emulate_default_handler(sig);
        }
    });
}

impl Drop for OutFile {
    /// A report not committed (an error) leaves no new file behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = &self.aside {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// A writer that counts what goes through it.
struct Counted<'a> {
    inner: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// An HTML report this large (100 MB) is more than a browser opens
/// without a long wait or a crash: the 400k-file tree's page of 1.09M
/// links was 195 MB, and 59 MB with `--links 10`.
const LARGE_PAGE: u64 = 100 << 20;

/// Warns when an HTML report of `bytes` is too large for a browser, and
/// says what makes it smaller.
fn warn_if_large_page(bytes: u64, out: Option<&std::path::Path>, links_limited: bool) {
    let large = crate::test_setting("SIMD_TEST_LARGE_PAGE").unwrap_or(LARGE_PAGE);
    if bytes < large {
        return;
    }
    let page = out.map_or_else(|| "the html report".to_string(), crate::show_path);
    let links =
        if links_limited { "" } else { "`--links 10` keeps each cluster's 10 strongest links (and every member); " };
    tracing::warn!(
        "{page}: {}, more than a browser opens readily; {links}`--limit N` keeps the N largest sets and clusters, \
         `--under PATH` those with a file under PATH",
        human_bytes(bytes)
    );
}

/// `simd report --verify`: reads the files of the identical sets `view`
/// shows, with a progress bar of the bytes on a terminal.
fn verify_shown(
    store: &Store,
    analysis: &crate::analysis::Analysis,
    view: &View,
    progress: bool,
) -> crate::verify::Verification {
    let sets = view.sets_to_verify(analysis);
    let bar = progress.then(|| {
        // Each name read once (a hard link not at all, and a set's first
        // name again where another disagrees with it: the bar may end
        // short or run on a little).
        let total = sets.iter().map(|s| s.size * s.names.len() as u64).sum();
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("verifying {bar:30} {bytes}/{total_bytes} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let on_bytes = |n: u64| {
        if let Some(bar) = &bar {
            bar.inc(n);
        }
    };
    let v = crate::verify::verify_sets(store, &sets, ingest::available_cores(), &on_bytes);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    tracing::info!(
        "verified {} sets: {} files, {} bytes read in {:.3} s",
        v.sets(),
        v.files_read,
        v.bytes_read,
        v.elapsed.as_secs_f64()
    );
    v
}

/// A query answered while the daemon holding the index is still on its
/// first scan answers from part of the tree: said, so that nobody takes a
/// partial report for the whole.
fn warn_if_first_scan(db: &std::path::Path, store: &Store) {
    // A first index writes its postings at its end (`store::PostingSpill`).
    if store.postings_pending().unwrap_or(false) {
        tracing::warn!(
            "the index's first run is still going: this answer covers only the files it has written so far, \
             and finds similar files only once it has ended"
        );
    }
    if let Some(d) = DaemonState::running(db).filter(|d| !d.ready) {
        tracing::warn!(
            "the daemon (pid {}) is still on its first scan of its roots: this answer covers only the files \
             indexed so far (`simd status` says when it is watching)",
            d.pid
        );
    }
}

fn print_summary(out: &mut impl Write, s: &Summary) -> std::io::Result<()> {
    let roots: Vec<String> = s.roots.iter().map(crate::show_path).collect();
    writeln!(out, "indexed {}", roots.join(", "))?;
    if !s.missing_roots.is_empty() {
        let missing: Vec<String> = s.missing_roots.iter().map(crate::show_path).collect();
        writeln!(out, "  missing roots (their files are recorded as removed): {}", missing.join(", "))?;
    }
    writeln!(
        out,
        "  files: {} new, {} changed, {} unchanged, {} moved, {} removed, {}{} skipped",
        s.new,
        s.changed,
        s.unchanged,
        s.moved,
        s.removed,
        if s.left_out > 0 {
            format!("{} left out by excludes, ignore files or as clutter, ", s.left_out)
        } else {
            String::new()
        },
        s.skipped.values().sum::<u64>()
    )?;
    for (reason, n) in &s.skipped {
        writeln!(out, "    {n} skipped: {}", reason.describe())?;
        for p in s.skipped_examples_of(*reason) {
            writeln!(out, "      {p}")?;
        }
    }
    writeln!(
        out,
        "  read {} in {:.2} s ({:.0} MB/s), {}; {} unchanged not read",
        human_bytes(s.bytes_read),
        s.elapsed.as_secs_f64(),
        s.throughput_mb_s(),
        count(s.new_contents, "new content"),
        human_bytes(s.bytes_unchanged)
    )?;
    if s.shared > 0 {
        writeln!(out, "  {} of files read under another name (hard links): not read again", count(s.shared, "name"))?;
    }
    if s.reread > 0 {
        writeln!(out, "  {}", reread_line(s))?;
    }
    if s.whole > 0 {
        writeln!(
            out,
            "  {} at least --whole-from's size: read whole, with no chunk list (identical copies and \
             similar words are found; shared chunks are not)",
            count(s.whole, "file")
        )?;
    }
    if let Some(rss) = peak_rss_bytes() {
        writeln!(out, "  peak memory {}", human_bytes(rss))?;
    }
    Ok(())
}

/// What `simd reread` found: files read whatever their stat said, and
/// how many of them held other bytes than the index had for them.
pub(crate) fn reread_line(s: &Summary) -> String {
    let read = format!("re-read {} whose size, mtime and inode were as indexed", count(s.reread, "file"));
    match s.reread_differed {
        0 => format!("{read}: each held the bytes indexed"),
        1 => format!("{read}: 1 held other bytes, and is now indexed as it is"),
        n => format!("{read}: {n} held other bytes, and are now indexed as they are"),
    }
}

fn summary_json(s: &Summary) -> serde_json::Value {
    let skipped = control::skipped_json(s);
    serde_json::json!({
        "interrupted": s.interrupted,
        "roots": s.roots.iter().map(|r| control::json_path(r)).collect::<Vec<_>>(),
        "missing_roots": s.missing_roots.iter().map(|r| control::json_path(r)).collect::<Vec<_>>(),
        "new": s.new,
        "changed": s.changed,
        "unchanged": s.unchanged,
        "moved": s.moved,
        "removed": s.removed,
        "left_out": s.left_out,
        "skipped": skipped,
        "bytes_read": s.bytes_read,
        "bytes_unchanged": s.bytes_unchanged,
        "new_contents": s.new_contents,
        "whole_files": s.whole,
        "shared_names": s.shared,
        "reread": s.reread,
        "reread_differed": s.reread_differed,
        "seconds": s.elapsed.as_secs_f64(),
        "peak_rss_bytes": peak_rss_bytes(),
    })
}

/// `simd status --format json`: the figures as they are, with every path
/// written as the reports write one (`path`, or `path_b64` for a name that
/// is not UTF-8), where the status and the daemon's state hold them as
/// text shows them.
fn status_json(s: &crate::status::Status) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(s)?;
    let paths = |shown: &[String]| shown.iter().map(|p| control::json_shown_path(p)).collect::<Vec<_>>();
    v["index"] = control::json_shown_path(&s.index);
    v["roots"] = paths(&s.roots).into();
    if let Some(d) = &s.daemon {
        v["daemon"]["roots"] = paths(&d.roots).into();
        v["daemon"]["missing_roots"] = paths(&d.missing_roots).into();
        v["daemon"]["spared_roots"] = (d.spared_roots.iter())
            .map(|(p, until)| {
                let mut e = control::json_shown_path(p);
                e["until_ns"] = (*until).into();
                e
            })
            .collect::<Vec<_>>()
            .into();
    }
    Ok(v)
}

fn print_status(out: &mut impl Write, s: &crate::status::Status) -> std::io::Result<()> {
    writeln!(out, "index        {}", s.index)?;
    writeln!(out, "schema       version {}, chunks {}", s.schema_version, s.params)?;
    writeln!(out, "roots        {}", if s.roots.is_empty() { "(none)".into() } else { s.roots.join(", ") })?;
    writeln!(out, "files        {} ({})", s.files, human_bytes(s.bytes))?;
    writeln!(out, "contents     {} distinct ({})", s.contents, human_bytes(s.content_bytes))?;
    writeln!(out, "chunks       {} ({} distinct)", s.chunks, s.distinct_chunks)?;
    writeln!(out, "history      {}", count(s.history, "record"))?;
    let ratio = if s.bytes > 0 {
        format!(", {:.1} % of file bytes", 100.0 * s.disk_bytes as f64 / s.bytes as f64)
    } else {
        String::new()
    };
    let mut cache =
        if s.cache_bytes > 0 { format!(" (+ {} report cache)", human_bytes(s.cache_bytes)) } else { String::new() };
    if s.wal_archive_bytes > 0 {
        cache.push_str(&format!(" (+ {} of write-ahead log kept for reports)", human_bytes(s.wal_archive_bytes)));
    }
    let tables = s.tables.iter().map(|t| t.files).sum::<usize>();
    let table_bytes = s.tables.iter().map(|t| t.bytes).sum::<u64>();
    let wal =
        if s.wal_bytes > 0 { format!(", {} of write-ahead log", human_bytes(s.wal_bytes)) } else { String::new() };
    // The rest: RocksDB's options files (~70 KiB each, two kept), its
    // manifest and small files, which weigh in a small index.
    let other = s.disk_bytes.saturating_sub(table_bytes + s.wal_bytes);
    writeln!(
        out,
        "on disk      {} ({} in {}{wal}, {} of RocksDB's options and manifest){ratio}{cache}",
        human_bytes(s.disk_bytes),
        human_bytes(table_bytes),
        count(tables as u64, "table file"),
        human_bytes(other)
    )?;
    let tables: Vec<String> =
        s.tables.iter().filter(|t| t.bytes > 0).map(|t| format!("{} {}", t.name, human_bytes(t.bytes))).collect();
    if !tables.is_empty() {
        writeln!(out, "  by table   {}", tables.join(", "))?;
    }
    writeln!(out, "last update  {}", s.last_update.map_or("never".into(), format_time))?;
    match &s.daemon {
        Some(d) => writeln!(
            out,
            "daemon       pid {}, {}, {} pending{}, {}, {} changed, {}{}{}, last event {}",
            d.pid,
            match (s.daemon_stopped, d.ready, d.disk_full_since) {
                (true, ..) => format!(
                    "STOPPED (SIGSTOP, Ctrl-Z or a debugger): nothing is kept current and requests wait until it is \
                     continued (`kill -CONT {}`)",
                    d.pid
                ),
                (_, _, Some(_)) => "PAUSED: the index's file system is full".into(),
                (_, true, None) => "watching".into(),
                (_, false, None) => "starting (reconcile scan)".into(),
            },
            d.pending,
            if d.reading > 0 { format!(", {} being read", count(d.reading, "large file")) } else { String::new() },
            count(d.batches, "batch"),
            count(d.changed_files, "file"),
            count(d.rescans, "rescan"),
            d.last_rescan.map_or(String::new(), |t| format!(" (last {})", format_time(t))),
            if d.degraded { ", DEGRADED: inotify limit reached, periodic rescans" } else { "" },
            d.last_event.map_or("none".into(), format_time)
        )?,
        None => match s.writer_pid {
            Some(pid) => writeln!(
                out,
                "daemon       not running; pid {pid} is writing the index (a `simd index`, `reread` or `forget` run): \
                 what it has not committed yet is not shown"
            )?,
            None => writeln!(out, "daemon       not running")?,
        },
    }
    if let Some(d) = s.daemon.as_ref().filter(|d| d.disk_full_since.is_some()) {
        writeln!(
            out,
            "             waiting since {} for {} free beside the index{}, then rescanning: make room there",
            format_time(d.disk_full_since.unwrap_or_default()),
            human_bytes(d.room.map_or(crate::watch::ROOM_TO_RESUME, |(_, need)| need)),
            d.room.map_or(String::new(), |(free, _)| format!(" ({} free now)", human_bytes(free)))
        )?;
    }
    if let Some(d) = s.daemon.as_ref() {
        let unwatched = unwatched_roots(&s.roots, &d.roots);
        if !unwatched.is_empty() {
            writeln!(
                out,
                "             NOT WATCHED by this daemon (started with other roots), so not kept current: {}",
                unwatched.join(", ")
            )?;
        }
    }
    if let Some(d) = s.daemon.as_ref().filter(|d| !d.missing_roots.is_empty()) {
        writeln!(out, "             MISSING roots, looked for every second: {}", d.missing_roots.join(", "))?;
    }
    if let Some(d) = s.daemon.as_ref().filter(|d| !d.spared_roots.is_empty()) {
        let spared: Vec<String> =
            d.spared_roots.iter().map(|(r, until)| format!("{r} (until {})", format_time_ahead(*until))).collect();
        writeln!(
            out,
            "             roots gone or replaced lately, whose files the index keeps until then (recorded as removed then \
             unless back; `simd rescan` now): {}",
            spared.join(", ")
        )?;
    }
    if let Some(d) = s.daemon.as_ref().filter(|d| !d.remote_roots.is_empty()) {
        writeln!(
            out,
            "             network or FUSE file systems, also rescanned periodically (other machines' changes raise no event): {}",
            d.remote_roots.join(", ")
        )?;
    }
    Ok(())
}

/// A count of at least one (`lost --limit`: with none shown, an answer
/// that has places read as one that has none).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("0 would show no place at all; give 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A number of seconds, 1 or more: `--rescan-every 0` would rescan without
/// a pause (clap's own range check said "0 is not in 1..18446744073709551615").
fn some_seconds(s: &str) -> Result<u64, String> {
    match s.parse::<i128>() {
        Ok(n) if n < 0 => Err("a negative number; give 1 or more seconds".to_string()),
        Ok(0) => Err("0 would rescan without a pause; give 1 or more seconds".to_string()),
        _ => s.parse::<u64>().map_err(|e| e.to_string()),
    }
}

/// A better message for an error than its own, where the CLI knows more:
/// an index held by a run that is no daemon (whose error advises stopping
/// a daemon and starting it again).
pub fn explain(e: &anyhow::Error) -> Option<String> {
    // Wrapped transparently, a store error is not in the chain itself.
    let in_use = |s: &StoreError| match s {
        StoreError::InUse { dir, pid } => Some((dir.clone(), pid.clone())),
        _ => None,
    };
    let (dir, pid) = e.chain().find_map(|c| {
        if let Some(s) = c.downcast_ref::<StoreError>() {
            return in_use(s);
        }
        match c.downcast_ref::<crate::watch::WatchError>() {
            Some(crate::watch::WatchError::Store(s)) => in_use(s),
            Some(crate::watch::WatchError::Ingest(IngestError::Store(s))) => in_use(s),
            _ => match c.downcast_ref::<IngestError>() {
                Some(IngestError::Store(s)) => in_use(s),
                _ => None,
            },
        }
    })?;
    let dir = dir.as_path();
    if DaemonState::running(dir).is_some() {
        return None;
    }
    Some(format!(
        "{}: index in use by pid {pid}, a `simd index`, `reread` or `forget` run: run this command again once it \
         has ended (stopped with kill -TERM {pid}, it keeps what it has read)",
        crate::show_path(dir)
    ))
}

/// The remembered roots (as shown) that none of a daemon's roots holds.
fn unwatched_roots<'a>(remembered: &'a [String], watched: &[String]) -> Vec<&'a str> {
    remembered
        .iter()
        .filter(|r| !watched.iter().any(|w| *r == w || r.strip_prefix(w.as_str()).is_some_and(|t| t.starts_with('/'))))
        .map(String::as_str)
        .collect()
}

/// "1 file", "2 files": a count and its noun, in the noun's number.
pub fn count(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    match n {
        1 => format!("1 {noun}"),
        _ if noun.ends_with("ch") || noun.ends_with('s') => format!("{n} {noun}es"),
        _ => format!("{n} {noun}s"),
    }
}

pub fn human_bytes(n: u64) -> String {
    indicatif::HumanBytes(n).to_string()
}

fn format_time(ns: i64) -> String {
    let ago = ingest::now_ns().saturating_sub(ns) / 1_000_000_000;
    format!("{} ({})", utc_ns(ns), human_ago(ago))
}

/// A time to come (ns since the epoch), with how far ahead it is.
fn format_time_ahead(ns: i64) -> String {
    let ahead = ns.saturating_sub(ingest::now_ns()).max(0) / 1_000_000_000;
    format!("{}, in {ahead} s", utc_ns(ns))
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch (Hinnant's
/// days-to-civil algorithm), so no date crate is needed for one line.
pub fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// [`utc`] of a time in ns since the epoch.
pub fn utc_ns(ns: i64) -> String {
    utc(ns.div_euclid(1_000_000_000))
}

/// Days since 1970-01-01 of a civil date (Hinnant's days-from-civil, the
/// inverse of [`utc`]'s).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `--since`: an age (`90m`, `12h`, `7d`, `2w`; `s` for seconds) before
/// now, or a time in UTC (`2026-11-30`, `2026-11-30 08:00`,
/// `2026-11-30T08:00:00Z`), in ns since the epoch.
fn parse_since(s: &str) -> Result<i64, String> {
    let bad = || format!("{s}: not an age (90m, 12h, 7d, 2w) or a UTC time (2026-11-30, 2026-11-30 08:00)");
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits > 0 && digits < t.len() && !t[digits..].starts_with('-') {
        let n: i64 = t[..digits].parse().map_err(|_| bad())?;
        let unit = match t[digits..].trim() {
            "s" | "sec" => 1,
            "m" | "min" => 60,
            "h" => 3_600,
            "d" => 86_400,
            "w" => 604_800,
            _ => return Err(bad()),
        };
        let ago = n
            .checked_mul(unit)
            .and_then(|x| x.checked_mul(1_000_000_000))
            .ok_or_else(|| format!("{s}: too long ago (at most {} days)", i64::MAX / 86_400_000_000_000))?;
        return Ok(ingest::now_ns().saturating_sub(ago));
    }
    let t = t.strip_suffix(" UTC").or_else(|| t.strip_suffix('Z')).unwrap_or(t);
    let (date, time) = t.split_once(['T', ' ']).unwrap_or((t, "00:00"));
    let num = |x: &str| x.parse::<i64>().map_err(|_| bad());
    let ymd: Vec<&str> = date.split('-').collect();
    let hms: Vec<&str> = time.trim().split(':').collect();
    let ([y, mo, d], 2..=3) = (ymd.as_slice(), hms.len()) else { return Err(bad()) };
    let (y, mo, d) = (num(y)?, num(mo)?, num(d)?);
    let (h, mi, sec) = (num(hms[0])?, num(hms[1])?, hms.get(2).map_or(Ok(0), |x| num(x))?);
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || sec > 60
        || [h, mi, sec].iter().any(|&v| v < 0)
    {
        return Err(bad());
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3_600 + mi * 60 + sec;
    // A day the month does not have (2026-02-30) would run on into the next.
    if !utc(secs).starts_with(&format!("{y:04}-{mo:02}-{d:02}")) {
        return Err(bad());
    }
    secs.checked_mul(1_000_000_000)
        .ok_or_else(|| format!("{s}: too far ahead (the index's times end at 2262-04-11, in nanoseconds since 1970)"))
}

fn human_ago(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s} s ago"),
        s if s < 7200 => format!("{} min ago", s / 60),
        s if s < 172_800 => format!("{} h ago", s / 3600),
        s => format!("{} days ago", s / 86_400),
    }
}

/// The process's peak resident set size (Linux: VmHWM), for the summary.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn since_takes_ages_and_utc_times() {
        for secs in [0, 951_782_400, 1_795_345_848, 1_795_305_600] {
            let shown = super::utc(secs);
            let date = shown.trim_end_matches(" UTC");
            assert_eq!(super::parse_since(&shown), Ok(secs * 1_000_000_000), "{shown}");
            assert_eq!(super::parse_since(&date.replace(' ', "T")), Ok(secs * 1_000_000_000), "{shown}");
        }
        assert_eq!(super::parse_since("2026-11-22"), Ok(1_795_305_600 * 1_000_000_000));
        assert_eq!(super::parse_since("2026-11-22 11:10"), Ok((1_795_345_848 - 48) * 1_000_000_000));
        let now = crate::ingest::now_ns();
        let week = super::parse_since("7d").unwrap();
        assert!((now - 7 * 86_400 * 1_000_000_000 - week).abs() < 60 * 1_000_000_000, "{week}");
        assert!(super::parse_since("90m").unwrap() > super::parse_since("2h").unwrap());
        for bad in
            ["", "7", "7y", "d", "2026-13-01", "2026-02-30", "2026-11-22 25:00", "2026/11/22", "yesterday", "2026-11"]
        {
            assert!(super::parse_since(bad).is_err(), "{bad}");
        }
        let far = super::parse_since("99999999d").unwrap_err();
        assert!(far.contains("too long ago"), "{far}");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc(1_795_345_848), "2026-11-22 11:10:48 UTC");
        assert_eq!(super::utc(-1), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        use super::count;
        assert_eq!([count(0, "set"), count(1, "set"), count(2, "set")], ["0 sets", "1 set", "2 sets"]);
        assert_eq!(
            [count(1, "batch"), count(3, "batch"), count(2, "new content")],
            ["1 batch", "3 batches", "2 new contents"]
        );
    }

    #[test]
    fn the_help_states_the_real_defaults() {
        use clap::CommandFactory;
        let d = crate::analysis::AnalysisParams::default();
        let help = super::Cli::command().find_subcommand_mut("report").unwrap().render_long_help().to_string();
        for (flag, value) in [
            ("--min-bytes", d.min_bytes.to_string()),
            ("--min-similarity", d.min_similarity.to_string()),
            ("--min-containment", d.min_containment.to_string()),
        ] {
            let at = help.find(flag).unwrap_or_else(|| panic!("{flag} not in the help"));
            let rest = &help[at..];
            let line_end = rest.find("[default: ").map(|i| &rest[i..]).unwrap();
            assert!(line_end.starts_with(&format!("[default: {value}]")), "{flag}: {}", &line_end[..20]);
        }
    }
}
