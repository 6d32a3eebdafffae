//! The `cmdr` binary: parses the command line, sets up logging on stderr, runs.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// The global allocator: mimalloc rather than glibc's malloc, because a command's buffers
/// and messages are allocated on one thread and freed on another, which glibc serialises
/// on its arena locks (~24 % of the NATS throughput bench's CPU; docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long to wait at exit for blocking threads (a terminal prompt nobody answered).
const EXIT_GRACE: Duration = Duration::from_millis(200);

fn main() -> ExitCode {
    let cli = cmdr::cli::Cli::parse();
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
    ExitCode::from(code)
}

/// Logs go to stderr (stdout carries results); `RUST_LOG` / `CMDR_LOG` set the filter.
/// Without either, warnings and errors.
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
