//! `cmdr serve` (REST, SSE and the web UI on one address, MCP over HTTP on another) and
//! `cmdr mcp` (MCP on stdio), both over one [`AppState`].

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::agents::ServiceOptions;
use super::concurrency::ConcurrencyArgs;
use super::confine::{self, ConfineArgs};
use super::nats_args::NatsAuthArgs;
use super::output_limit::OutputLimitArgs;
use super::server_limits::ServerLimitsArgs;
use super::setup::llm_client;
use super::{shutdown_signal, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::agents::AgentCatalog;
use crate::app::SetupError;
use crate::http::listener::{self, ListenerLimits};
use crate::mcp::SessionLimits;
use crate::nats::connect::NatsConnect;
use crate::server::{AppState, StateConfig};
use crate::store::SqliteStore;

/// How long in-flight runs get to stop and persist after SIGINT/SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serve the REST API, SSE streams and web UI (5010) and MCP over HTTP (5012).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address of the REST/SSE API and the web UI.
    #[arg(long, env = "CMDR_ADDR", default_value = "127.0.0.1:5010")]
    pub addr: SocketAddr,
    /// Address of the MCP server (streamable HTTP at `/mcp`).
    #[arg(long, env = "CMDR_MCP_ADDR", default_value = "127.0.0.1:5012")]
    pub mcp_addr: SocketAddr,
    /// Run commands on the NATS worker pool at this URL (or comma-separated URLs of a
    /// cluster) instead of in-process.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// Credentials and TLS for NATS.
    #[command(flatten)]
    pub nats_auth: NatsAuthArgs,
    /// Bearer token required on every route and tool; mandatory off loopback.
    #[arg(
        long,
        env = "CMDR_AUTH_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub auth_token: Option<String>,
    /// Where runs without a working folder start (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub working_folder: Option<PathBuf>,
    /// Where agents and conversations live.
    #[command(flatten)]
    pub options: ServiceOptions,
    /// Where commands may reach.
    #[command(flatten)]
    pub confine: ConfineArgs,
    /// How much output a combined result keeps (`?combine=true`, MCP executor tools).
    #[command(flatten)]
    pub output: OutputLimitArgs,
    /// What clients can hold: connections, half-sent requests, MCP sessions.
    #[command(flatten)]
    pub limits: ServerLimitsArgs,
    /// How many commands of one type run at once.
    #[command(flatten)]
    pub concurrency: ConcurrencyArgs,
}

/// Shortest token accepted when listening beyond loopback.
pub const MIN_OPEN_TOKEN_LEN: usize = 16;

/// Serve MCP on stdin/stdout (logs on stderr).
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Run commands on the NATS worker pool at this URL (or comma-separated URLs of a
    /// cluster) instead of in-process.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// Credentials and TLS for NATS.
    #[command(flatten)]
    pub nats_auth: NatsAuthArgs,
    /// Where runs without a working folder start (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub working_folder: Option<PathBuf>,
    /// Where agents and conversations live.
    #[command(flatten)]
    pub options: ServiceOptions,
    /// Where commands may reach.
    #[command(flatten)]
    pub confine: ConfineArgs,
    /// How much output a combined result keeps (`?combine=true`, MCP executor tools).
    #[command(flatten)]
    pub output: OutputLimitArgs,
    /// How many commands of one type run at once.
    #[command(flatten)]
    pub concurrency: ConcurrencyArgs,
}

fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn complain(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// What both subcommands build their state from; the error is a usage error.
fn state_config(
    options: &ServiceOptions,
    nats: Option<NatsConnect>,
    auth_token: Option<String>,
    working_folder: Option<PathBuf>,
    confine: &ConfineArgs,
    (output, concurrency): (OutputLimitArgs, ConcurrencyArgs),
) -> Result<StateConfig, SetupError> {
    let paths = confine.paths()?;
    if nats.is_some() && paths.is_restricted() {
        return Err(SetupError::Flag(
            "with --nats, commands run on the workers: confine them there \
             (`cmdr worker --allow-root DIR`)"
                .to_owned(),
        ));
    }
    if let Some(folder) = &working_folder {
        confine::check_folder(folder, &paths)?;
    }
    let default_cwd = working_folder
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok(StateConfig {
        agents_dir: options
            .agents_dir
            .clone()
            .unwrap_or_else(AgentCatalog::default_dir),
        db: options.db.clone().unwrap_or_else(SqliteStore::default_path),
        nats,
        auth_token,
        default_cwd: confine::default_folder(default_cwd, &paths),
        paths,
        landlock: confine.landlock,
        combined_limit: output.limit(),
        shell_env: confine.env.policy()?,
        max_concurrent: concurrency.max_concurrent,
        session_idle: concurrency.session_idle(),
    })
}

/// Why the token is refused, if it is: blank tokens never work; beyond loopback one is
/// required, at least [`MIN_OPEN_TOKEN_LEN`] characters long.
pub fn check_token(token: Option<&str>, open: bool) -> Result<(), SetupError> {
    let problem = match token.filter(|t| !t.is_empty()) {
        Some(t) if t.trim().is_empty() => {
            "the auth token is only whitespace: it would guard nothing".to_owned()
        }
        Some(t) if open && t.chars().count() < MIN_OPEN_TOKEN_LEN => format!(
            "listening beyond loopback needs an auth token of at least {MIN_OPEN_TOKEN_LEN} \
             characters (a short one can be guessed)"
        ),
        None if open => "listening beyond loopback needs --auth-token (or CMDR_AUTH_TOKEN): \
                         anyone who reaches the port could run commands on this machine"
            .to_owned(),
        Some(_) | None => return Ok(()),
    };
    Err(SetupError::Flag(problem))
}

/// Runs `cmdr serve` until SIGINT/SIGTERM.
pub async fn run(args: ServeArgs) -> u8 {
    let open = !args.addr.ip().is_loopback() || !args.mcp_addr.ip().is_loopback();
    if let Err(e) = check_token(args.auth_token.as_deref(), open) {
        complain(&format!("cmdr serve: {e}"));
        return EXIT_USAGE;
    }
    let fd_limit = listener::raise_fd_limit();
    let limits = (args.limits.listener(fd_limit), args.limits.sessions());
    let config = match state_config(
        &args.options,
        args.nats
            .as_deref()
            .map(|url| args.nats_auth.connect(url, "cmdr serve")),
        args.auth_token,
        args.working_folder,
        &args.confine,
        (args.output, args.concurrency),
    ) {
        Ok(config) => config,
        Err(e) => {
            complain(&format!("cmdr serve: {e}"));
            return EXIT_USAGE;
        }
    };
    let state = match AppState::build(config, llm_client(Some("cmdr serve"), None)).await {
        Ok(state) => state,
        Err(e) => {
            complain(&format!("cmdr serve: {e}"));
            return EXIT_FAILED;
        }
    };
    let (api, mcp) = match (bind(args.addr).await, bind(args.mcp_addr).await) {
        (Ok(api), Ok(mcp)) => (api, mcp),
        (Err(e), _) | (_, Err(e)) => {
            complain(&format!("cmdr serve: {e}"));
            return EXIT_USAGE;
        }
    };
    announce(&api, &mcp, state.input_keys.person_key());
    confine::report("cmdr serve", state.registry.confinement());
    serve_both(state, api, mcp, limits).await
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, SetupError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| SetupError::Bind { addr, source })
}

/// Prints the addresses on stdout. The answer-key address is the only place the person key
/// appears (never stderr, which is the log): whoever reads it may answer questions.
fn announce(api: &TcpListener, mcp: &TcpListener, answer_key: &str) {
    let (Ok(api), Ok(mcp)) = (api.local_addr(), mcp.local_addr()) else {
        return;
    };
    say(&format!("cmdr serve: web UI and REST API on http://{api}/"));
    say(&format!(
        "cmdr serve: MCP (streamable HTTP) on http://{mcp}/mcp"
    ));
    say(&format!(
        "cmdr serve: answer questions in the web UI at http://{api}/#answer-key={answer_key}"
    ));
}

/// Serves until a signal; then stops every run (each persists as `stopped`), lets the
/// connections finish within [`SHUTDOWN_GRACE`], and stops the executors.
async fn serve_both(
    state: AppState,
    api: TcpListener,
    mcp: TcpListener,
    (connection_limits, session_limits): (ListenerLimits, SessionLimits),
) -> u8 {
    let stop = CancellationToken::new();
    let config = crate::http::HttpConfig::default();
    let tasks = config.tasks.clone();
    // The web UI's static assets are served without the token (they hold no data; every
    // API call they make goes through the guarded routes).
    let api_app = crate::http::router_with(state.clone(), config).merge(crate::web::router());
    let mcp_app = crate::mcp::http_router_with(state.clone(), session_limits);
    let connections = TaskTracker::new();
    let api_server = listener::serve(
        api,
        api_app,
        connection_limits.clone(),
        stop.clone(),
        connections.clone(),
    );
    let mcp_server = listener::serve(
        mcp,
        mcp_app,
        connection_limits,
        stop.clone(),
        connections.clone(),
    );
    let servers = async { tokio::join!(api_server, mcp_server) };
    tokio::select! {
        _ = servers => {}
        () = shutdown_signal() => {}
    }
    say("cmdr serve: shutting down; stopping in-flight runs");
    state.shutdown.cancel();
    stop.cancel();
    tasks.close();
    connections.close();
    let drained = async {
        tasks.wait().await;
        connections.wait().await;
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
        complain("cmdr serve: runs or connections still open after the grace period");
    }
    state.registry.shutdown(Duration::from_secs(2)).await;
    EXIT_OK
}

/// Runs `cmdr mcp`: MCP over stdin/stdout until the client closes stdin.
pub async fn run_mcp(args: McpArgs) -> u8 {
    let config = match state_config(
        &args.options,
        args.nats
            .as_deref()
            .map(|url| args.nats_auth.connect(url, "cmdr mcp")),
        None,
        args.working_folder,
        &args.confine,
        (args.output, args.concurrency),
    ) {
        Ok(config) => config,
        Err(e) => {
            complain(&format!("cmdr mcp: {e}"));
            return EXIT_USAGE;
        }
    };
    let state = match AppState::build(config, llm_client(None, None)).await {
        Ok(state) => state,
        Err(e) => {
            complain(&format!("cmdr mcp: {e}"));
            return EXIT_FAILED;
        }
    };
    confine::report("cmdr mcp", state.registry.confinement());
    // Caught from here on: a SIGTERM while the first requests are answered ends cmdr
    // cleanly, not by the signal's default action.
    let signalled = shutdown_signal();
    let serving = crate::mcp::serve_stdio(state.clone());
    tokio::pin!(serving);
    let served = tokio::select! {
        served = &mut serving => served,
        () = signalled => {
            // Stop running calls, then let serve_stdio persist them before exiting.
            state.shutdown.cancel();
            serving.await
        }
    };
    state.shutdown.cancel();
    state.registry.shutdown(Duration::from_secs(2)).await;
    match served {
        Ok(()) => EXIT_OK,
        Err(e) => {
            complain(&format!("cmdr mcp: {e}"));
            EXIT_FAILED
        }
    }
}
