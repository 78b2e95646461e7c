//! The `simd` binary: parse, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use simd::cli::{self, Cli, Exit};

/// jemalloc for every allocation of the process, RocksDB's included (its
/// symbols replace the C library's `malloc`): under glibc's allocator a
/// daemon handling 20 changes a second grew from 96 to 120 MB RSS over ten
/// minutes, arena by arena, and stayed flat with at most two arenas
/// (docs/performance.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // clap takes an empty SIMD_DB for `--db ''` and answers "a value is
    // required for '--db <DIR>'", naming an option nobody gave. An empty
    // variable is most often one meant to be set and not (`SIMD_DB=$DIR`
    // with DIR unset): falling back to the default index would write where
    // the user did not mean to, so it is refused unless --db is given.
    let empty_env = std::env::var_os("SIMD_DB").is_some_and(|v| v.is_empty());
    if empty_env {
        std::env::remove_var("SIMD_DB");
    }
    let cli = Cli::parse();
    if empty_env && cli.db.is_none() {
        eprintln!("simd: SIMD_DB is set but empty: set it to the index directory, give --db DIR, or unset it for the default index");
        return ExitCode::from(2);
    }
    // `simd watch --format json` logs one JSON object a line, for a log
    // shipper; the other commands' JSON is their answer on stdout.
    let json_logs = cli.format == cli::Format::Json && matches!(cli.command, cli::Command::Watch { .. });
    init_logging(cli.verbose, cli.quiet, json_logs);
    simd::raise_open_file_limit();
    match cli::run(cli) {
        Ok(Exit::Ok) => ExitCode::SUCCESS,
        Ok(Exit::Inconsistent) => ExitCode::from(3),
        Ok(Exit::NotVerified) => ExitCode::from(4),
        // As a shell reports a process stopped by the signal: 130 for
        // SIGINT, 143 for SIGTERM.
        Ok(Exit::Interrupted(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(130)),
        // The reader went away (`simd report | head`): not an error. JSON
        // is written through serde_json, whose error holds the I/O error's
        // kind but does not name the error itself as its source.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                    || c.downcast_ref::<serde_json::Error>()
                        .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("simd: {}", cli::explain(&e).unwrap_or_else(|| chain(&e)));
            ExitCode::FAILURE
        }
    }
}

/// "outer: inner: innermost", without repeating a cause already in the message.
fn chain(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}

fn init_logging(verbose: u8, quiet: bool, json: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let fallback = || tracing_subscriber::EnvFilter::new(format!("simd={default},rocksdb=warn"));
    // A SIMD_LOG that does not parse is said, not taken silently for the
    // default: whoever set it is waiting for log lines that would not come.
    let filter = match std::env::var_os("SIMD_LOG") {
        None => fallback(),
        Some(v) if v.is_empty() => fallback(),
        Some(v) => match v.to_str().map(tracing_subscriber::EnvFilter::try_new) {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                eprintln!("simd: SIMD_LOG={}: not understood ({e}); logging at the default level", v.to_string_lossy());
                fallback()
            }
            None => {
                eprintln!("simd: SIMD_LOG is not UTF-8; logging at the default level");
                fallback()
            }
        },
    };
    // Colours only on a terminal: a service's log goes to a file or the
    // journal, where escape codes are noise.
    use std::io::IsTerminal;
    let log = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false);
    if json {
        // {"timestamp":…,"level":"WARN","message":…}: the event's fields
        // at the top level, no span lists.
        log.json().flatten_event(true).with_current_span(false).with_span_list(false).init();
    } else {
        log.with_ansi(std::io::stderr().is_terminal()).init();
    }
}
