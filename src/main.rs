//! The `cmdr` binary: parses the command line, sets up logging on stderr, runs.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// The global allocator (mimalloc) and its settings.
mod allocator;
/// The entry point before the C library's `_start` (static x86-64 Linux builds).
mod entry;

/// How long to wait at exit for blocking threads (a terminal prompt nobody answered).
const EXIT_GRACE: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let cli = cmdr::cli::Cli::one_shot().unwrap_or_else(cmdr::cli::Cli::parse);
    let exit_at_once = cli.may_exit_at_once();
    init_logging();
    // Before any command runs: they must not read cmdr's secrets from /proc.
    cmdr::undumpable::hide_from_commands();
    // One TLS crypto provider (rustls' ring) for every HTTPS user, before any runtime.
    cmdr::llm::OpenAiClient::install_crypto_provider();
    let mut builder = if cli.single_threaded() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cmdr: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(cli.run());
    runtime.shutdown_timeout(EXIT_GRACE);
    // Leaves no empty cgroup behind for the next cmdr to sweep at its start-up.
    cmdr_executors::remove_cgroups();
    if exit_at_once {
        exit_now(code);
    }
    ExitCode::from(code)
}

/// Ends the process without the C library's exit handlers, for a run that
/// [may](cmdr::cli::Cli::may_exit_at_once): nothing of its needs them (the runtime is shut
/// down, the cgroups removed, the kernel closes the rest), and mimalloc's (collecting and
/// purging its arenas) cost a one-shot `cmdr exec` ~0.15 ms (BENCHMARKS.md, X3). Its one
/// stdout writer has finished, so nobody holds stdout's lock; stderr is unbuffered.
fn exit_now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().lock().flush();
    // SAFETY: `_exit` only ends the process; every buffer cmdr writes through is flushed.
    unsafe { nix::libc::_exit(code.into()) }
}

/// Logs go to stderr (stdout carries results); `RUST_LOG` / `CMDR_LOG` set the filter.
/// Without either, warnings and errors by a plain level: no filter to parse at the start
/// of every one-shot `cmdr exec` (BENCHMARKS.md, X3).
fn init_logging() {
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match std::env::var("CMDR_LOG").or_else(|_| std::env::var("RUST_LOG")) {
        Ok(filter) => logs
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .init(),
        Err(_) => logs.with_max_level(tracing::Level::WARN).init(),
    }
}
