//! The control channel of a running daemon: commands that write the index
//! (template marks, a forced rescan or reread, adding or forgetting a root) while `simd watch` holds it reach the
//! daemon over a Unix socket in the index directory (`control.sock`, mode
//! 0600), one JSON line each way. The daemon does the work between batches,
//! with the writer's pending group committed first.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::analysis::AnalysisParams;

/// What a client asks the daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Re-walk the roots and reconcile, as `simd index` would.
    Rescan,
    TemplateMark {
        cluster: String,
        min_share: f64,
        params: AnalysisParams,
    },
    TemplateUnmark {
        cluster: String,
    },
    /// Stop indexing these roots (absolute paths, as bytes: resolved by the
    /// client, whose working directory they may be relative to).
    Forget {
        roots: Vec<Vec<u8>>,
    },
    /// Index these roots too, and watch them (canonical paths, as bytes):
    /// `simd index ROOT...` while the daemon runs.
    Add {
        roots: Vec<Vec<u8>>,
    },
    /// Rescan, reading the files at or under these paths (absolute, as
    /// bytes; none: every root the daemon watches) even where their stat
    /// is as recorded: `simd reread`.
    Reread {
        paths: Vec<Vec<u8>>,
    },
}

/// What the daemon answers: what was done, or why not.
pub type Response = Result<Answer, String>;

/// What was done: in words for a terminal, and as JSON for `--format json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    Both {
        text: String,
        json: serde_json::Value,
    },
    /// From a daemon of an earlier version, which answered in words only.
    Words(String),
}

impl Answer {
    pub fn new(text: String, json: serde_json::Value) -> Answer {
        Answer::Both { text, json }
    }

    pub fn text(&self) -> &str {
        match self {
            Answer::Both { text, .. } | Answer::Words(text) => text,
        }
    }

    pub fn json(&self) -> serde_json::Value {
        match self {
            Answer::Both { json, .. } => json.clone(),
            Answer::Words(text) => serde_json::json!({ "message": text }),
        }
    }
}

/// A path as the JSON reports write it (`path`, or `path_b64` for a name
/// that is not UTF-8).
pub fn json_path(p: &Path) -> serde_json::Value {
    serde_json::to_value(crate::report::JsonPath(&crate::scan::path_bytes(p))).expect("paths serialize")
}

/// What a run skipped, by reason, as `--format json` says it (`simd index`
/// and the daemon's rescan answers alike): each reason with its count and
/// its first few paths.
pub fn skipped_json(s: &crate::ingest::Summary) -> Vec<serde_json::Value> {
    (s.skipped.iter())
        .map(|(&r, n)| {
            let examples: Vec<_> = s.skipped_paths_of(r).map(json_path).collect();
            serde_json::json!({ "reason": r.describe(), "count": n, "examples": examples })
        })
        .collect()
}

/// The same, of a path as text shows it ([`crate::report_path`]).
pub fn json_shown_path(shown: &str) -> serde_json::Value {
    serde_json::to_value(crate::report::JsonPath(&crate::report_path_bytes(shown))).expect("paths serialize")
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "{}: cannot reach the daemon's control socket: {source}{}",
        crate::show_path(.path),
        connect_hint(.source)
    )]
    Connect { path: PathBuf, source: std::io::Error },
    #[error("{}: the daemon did not answer: {source}", crate::show_path(.path))]
    Exchange { path: PathBuf, source: std::io::Error },
    #[error(
        "{}: the daemon stopped before answering (killed, or stopped by a signal): run the command again (with no \
         daemon running, it runs by itself)",
        crate::show_path(.path)
    )]
    Stopped { path: PathBuf },
    #[error("{}: the daemon's answer is not understood: {source}", crate::show_path(.path))]
    Garbled { path: PathBuf, source: serde_json::Error },
}

/// What to do about a socket that cannot be reached.
fn connect_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => " (the daemon is starting, or stopping: try again in a moment)",
        std::io::ErrorKind::PermissionDenied => " (the daemon runs as another user: run this as that user)",
        std::io::ErrorKind::ConnectionRefused => " (the daemon is gone: run the command again)",
        _ => "",
    }
}

pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join("control.sock")
}

/// The socket's path as `bind` and `connect` can take it. A socket address
/// holds at most 107 bytes of path, so the socket of an index directory
/// deeper than that is reached through a descriptor of the directory,
/// `/proc/self/fd/N/control.sock` (as systemd does for long socket paths);
/// the descriptor stays open while the path is in use.
struct Reachable {
    path: PathBuf,
    _dir: Option<std::fs::File>,
}

/// Bytes a socket address's path may hold, its closing NUL not counted.
const SUN_PATH_MAX: usize = 107;

fn reachable(dir: &Path) -> std::io::Result<Reachable> {
    use std::os::fd::AsRawFd;
    let path = socket_path(dir);
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok(Reachable { path, _dir: None });
    }
    let handle = std::fs::File::open(dir)?;
    Ok(Reachable {
        path: PathBuf::from(format!("/proc/self/fd/{}/control.sock", handle.as_raw_fd())),
        _dir: Some(handle),
    })
}

/// How often a client waiting for the daemon's answer looks whether the
/// daemon still holds the index (a daemon that exits closes the
/// connection, which ends the wait at once anyway).
const ANSWER_POLL: Duration = Duration::from_secs(1);

/// Sends one request to the daemon holding the index in `dir`, and waits
/// for its answer as long as the daemon holds the index: a template mark
/// runs an analysis, a rescan walks the whole tree, a root handed to it is
/// read whole, which can take hours (a fixed wait of 10 minutes said
/// "did not answer" while the daemon went on and finished). `waiting` is
/// called with the time waited so far, about once a second.
pub fn request(dir: &Path, req: &Request, waiting: &mut dyn FnMut(Duration)) -> Result<Response, ControlError> {
    let path = socket_path(dir);
    let mut stream = reachable(dir)
        .and_then(|at| UnixStream::connect(&at.path))
        .map_err(|source| ControlError::Connect { path: path.clone(), source })?;
    let exchange = |source| ControlError::Exchange { path: path.clone(), source };
    stream.set_read_timeout(Some(ANSWER_POLL)).map_err(exchange)?;
    let mut line = serde_json::to_vec(req).expect("requests serialize");
    line.push(b'\n');
    stream.write_all(&line).map_err(exchange)?;
    let (started, mut reader, mut answer) = (std::time::Instant::now(), BufReader::new(stream), Vec::new());
    loop {
        // Bytes read before a timeout stay in `answer`.
        match reader.read_until(b'\n', &mut answer) {
            Ok(_) => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if crate::store::writer_pid(dir).is_none() {
                    return Err(ControlError::Stopped { path });
                }
                waiting(started.elapsed());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(exchange(e)),
        }
    }
    if answer.is_empty() {
        return Err(ControlError::Stopped { path });
    }
    serde_json::from_slice(&answer).map_err(|source| ControlError::Garbled { path: path.clone(), source })
}

/// A request received by the daemon, with where its answer goes.
pub struct Incoming {
    pub request: Request,
    pub reply: crossbeam_channel::Sender<Response>,
}

/// Listens on the control socket in a thread of its own and hands each
/// request to the daemon's loop through the returned channel. The socket
/// is removed when the listener is dropped.
pub struct Listener {
    path: PathBuf,
}

impl Listener {
    pub fn start(dir: &Path) -> std::io::Result<(Listener, crossbeam_channel::Receiver<Incoming>)> {
        let path = socket_path(dir);
        // A socket left by a daemon that was killed: the index lock (held by
        // this process) says no other daemon uses it.
        let _ = std::fs::remove_file(&path);
        let at = reachable(dir)?;
        let listener = UnixListener::bind(&at.path)?;
        std::fs::set_permissions(&at.path, std::fs::Permissions::from_mode(0o600))?;
        let (tx, rx) = crossbeam_channel::bounded::<Incoming>(16);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let tx = tx.clone();
                std::thread::spawn(move || serve(stream, &tx));
            }
        });
        Ok((Listener { path }, rx))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection: a request line in, the daemon's answer line out.
fn serve(stream: UnixStream, tx: &crossbeam_channel::Sender<Incoming>) {
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut line = String::new();
    if BufReader::new(stream).read_line(&mut line).is_err() {
        return;
    }
    let answer: Response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => {
            let (reply, answer) = crossbeam_channel::bounded(1);
            if tx.send(Incoming { request, reply }).is_err() {
                Err("the daemon is stopping".into())
            } else {
                answer.recv().unwrap_or_else(|_| Err("the daemon stopped before answering".into()))
            }
        }
        Err(e) => Err(format!("request not understood: {e}")),
    };
    let mut out = serde_json::to_vec(&answer).expect("answers serialize");
    out.push(b'\n');
    let _ = writer.write_all(&out);
}

/// Does a template request on an index this process holds for writing (the
/// daemon, or a command run while no daemon is), and says what was done.
pub fn perform(store: &crate::store::Store, request: Request, threads: usize) -> Response {
    use crate::analysis::{cache, marks};
    use crate::cli::{count, human_bytes};
    match request {
        Request::TemplateMark { cluster, min_share, params } => {
            let m = cache::with_analysis(store, &params, threads, false, |analysis, _| {
                marks::mark(store, analysis, &cluster, min_share)
            })
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
            let mut text = format!(
                "cluster {}: marked {} ({}) and {} as template; later reports ignore them",
                m.cluster,
                count(m.chunks, "chunk"),
                human_bytes(m.bytes),
                count(m.samples, "word sample")
            );
            if m.shared > 0 {
                text.push_str(&format!(
                    " ({} of the chunks other clusters marked too: they stay template until all are unmarked)",
                    m.shared
                ));
            }
            let mut json = serde_json::json!({
                "cluster": m.cluster, "chunks": m.chunks, "bytes": m.bytes, "word_samples": m.samples,
                "chunks_marked_by_others_too": m.shared, "distinct_contents": m.members,
            });
            if let Some(w) = &m.widest {
                text = format!(
                    "cluster {}: marked nothing: no chunk is held by {} of its {} distinct contents \
                     (--min-share {min_share}); the most widely held, {} ({}), {} in {} of them: \
                     `simd template mark {} --min-share {}` marks {}",
                    m.cluster,
                    if min_share >= 1.0 { "all".to_string() } else { format!("{:.0} %", min_share * 100.0) },
                    m.members,
                    count(w.chunks, "chunk"),
                    human_bytes(w.bytes),
                    if w.chunks == 1 { "is" } else { "are" },
                    w.held_by,
                    m.cluster,
                    w.min_share,
                    if w.chunks == 1 { "it" } else { "them" },
                );
                json["widest"] = serde_json::json!({
                    "held_by": w.held_by, "chunks": w.chunks, "bytes": w.bytes, "min_share": w.min_share,
                });
            }
            Ok(Answer::new(text, json))
        }
        Request::TemplateUnmark { cluster } => {
            let u = marks::unmark(store, &cluster).map_err(|e| e.to_string())?;
            let mut text =
                format!("unmarked {} and {}", count(u.chunks, "template chunk"), count(u.samples, "word sample"));
            if u.kept_chunks + u.kept_samples > 0 {
                text.push_str(&format!(
                    "; {} and {} stay template, marked by other clusters too",
                    count(u.kept_chunks, "chunk"),
                    count(u.kept_samples, "word sample")
                ));
            }
            Ok(Answer::new(
                text,
                serde_json::json!({
                    "unmarked_chunks": u.chunks, "unmarked_word_samples": u.samples,
                    "kept_chunks": u.kept_chunks, "kept_word_samples": u.kept_samples,
                }),
            ))
        }
        Request::Forget { roots } => {
            let roots: Vec<_> = roots.iter().map(|r| crate::scan::bytes_path(r)).collect();
            let f = crate::ingest::forget(store, &roots).map_err(|e| e.to_string())?;
            Ok(forgotten(&f))
        }
        Request::Rescan => Err("only a running `simd watch` rescans on request; `simd index` rescans the roots".into()),
        Request::Add { .. } => {
            Err("only a running `simd watch` adds roots on request; `simd index ROOT` indexes them".into())
        }
        Request::Reread { .. } => Err("only a running `simd watch` rereads on request; `simd reread` does it".into()),
    }
}

/// What `simd forget` says it did.
pub fn forgotten(f: &crate::ingest::Forgotten) -> Answer {
    let paths = |p: &[std::path::PathBuf]| p.iter().map(|r| json_path(r)).collect::<Vec<_>>();
    let json = serde_json::json!({
        "forgotten": paths(&f.roots),
        "files_dropped": f.files,
        "still_inside": f.covered.iter().map(|(root, inside)| serde_json::json!({
            "root": json_path(root), "inside": json_path(inside),
        })).collect::<Vec<_>>(),
        "roots": paths(&f.remaining),
    });
    Answer::new(forgotten_message(f), json)
}

fn forgotten_message(f: &crate::ingest::Forgotten) -> String {
    // Paths as reports print them: a name that is not UTF-8 keeps its bytes, escaped.
    let one = |p: &std::path::Path| crate::report_path(&crate::scan::path_bytes(p));
    let show = |p: &[std::path::PathBuf]| p.iter().map(|r| one(r)).collect::<Vec<_>>().join(", ");
    let mut s = format!(
        "forgot {}: {} dropped from the index (the files themselves are not touched)",
        show(&f.roots),
        crate::cli::count(f.files, "file")
    );
    for (root, inside) in &f.covered {
        s.push_str(&format!(
            "\n{} lies inside the root {}, which is still indexed: its files stay",
            one(root),
            one(inside)
        ));
    }
    if f.remaining.is_empty() {
        s.push_str("\nthe index remembers no roots now; `simd index ROOT` adds one");
    } else {
        s.push_str(&format!("\nroots now: {}", show(&f.remaining)));
    }
    s
}
