//! `cmdr agents list`, `cmdr commands list|run` and `cmdr conversations list|show`: the
//! agent service on the command line. Errors print `error [CODE]: sentence` on stderr
//! and exit 1.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::chat_view::TICK;
use super::confine::{self, ConfineArgs};
use super::setup::{llm_client, view};
use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::agent::{RunOutcome, TurnStatus, DEFAULT_MAX_ITERATIONS};
use crate::agents::AgentCatalog;
use crate::app::{App, AppConfig, Executors, RegistryBuilder, SetupError, StoreChoice};
use crate::service::{AgentService, PreparedRun, RunTarget, ServiceError};
use crate::store::{SqliteStore, StoreError, StoredTurn};

/// Where agents and conversations live (shared by the agent subcommands).
#[derive(Debug, Clone, clap::Args)]
pub struct ServiceOptions {
    /// The agents folder (default: `codex_agents`).
    #[arg(long, env = "CMDR_AGENTS_DIR", value_name = "DIR", global = true)]
    pub agents_dir: Option<PathBuf>,
    /// The conversation database (default: `$CMDR_DATA_DIR/cmdr.sqlite3`, else under
    /// `$XDG_DATA_HOME/cmdr` or `~/.local/share/cmdr`).
    #[arg(long, env = "CMDR_DB", value_name = "FILE", global = true)]
    pub db: Option<PathBuf>,
}

/// List the agents of the agents folder.
#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: AgentsAction,
    /// Where agents live.
    #[command(flatten)]
    pub options: ServiceOptions,
}

/// Subcommands of `cmdr agents`.
#[derive(Debug, clap::Subcommand)]
pub enum AgentsAction {
    /// List the agents of the agents folder.
    List,
}

/// List and run agent commands (named multi-step prompt macros).
#[derive(Debug, clap::Args)]
pub struct CommandsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: CommandsAction,
    /// Where agents and conversations live.
    #[command(flatten)]
    pub options: ServiceOptions,
}

/// Subcommands of `cmdr commands`.
// Parsed once per process: the size of the `run` variant's flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum CommandsAction {
    /// List agent commands; invalid files are shown disabled, with the reason.
    List {
        /// Only this agent's commands.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// Run an agent command: its steps in order, in one conversation.
    Run {
        /// The agent.
        agent: String,
        /// The command (its file name without `.json`).
        command: String,
        /// Continue this conversation (default: a new one).
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
        /// Absolute path of the directory the commands start in.
        #[arg(long, value_name = "DIR")]
        working_folder: Option<String>,
        /// Where commands may reach.
        #[command(flatten)]
        confine: ConfineArgs,
    },
}

/// List conversations and print their transcripts.
#[derive(Debug, clap::Args)]
pub struct ConversationsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ConversationsAction,
    /// Where conversations live.
    #[command(flatten)]
    pub options: ServiceOptions,
}

/// Subcommands of `cmdr conversations`.
#[derive(Debug, clap::Subcommand)]
pub enum ConversationsAction {
    /// List conversations, most recent first.
    List {
        /// Only this agent's conversations.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// Print a conversation's transcript.
    Show {
        /// The conversation's id.
        id: String,
    },
}

impl ServiceOptions {
    fn catalog(&self) -> AgentCatalog {
        AgentCatalog::new(
            self.agents_dir
                .clone()
                .unwrap_or_else(AgentCatalog::default_dir),
        )
    }

    /// The service for subcommands that run nothing.
    async fn service(&self) -> Result<AgentService, ServiceError> {
        Ok(self.app(None, RegistryBuilder::new()).await?.service)
    }

    /// cmdr put together ([`App::build`]); `llm` only for subcommands that run agents,
    /// their commands in the registry `builder` makes.
    async fn app(
        &self,
        llm: Option<Arc<dyn crate::llm::LlmClient>>,
        builder: RegistryBuilder,
    ) -> Result<App, ServiceError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let default_cwd = confine::default_folder(cwd, builder.paths());
        let agents_dir = self
            .agents_dir
            .clone()
            .unwrap_or_else(AgentCatalog::default_dir);
        let db = self.db.clone().unwrap_or_else(SqliteStore::default_path);
        let config = AppConfig {
            executors: Executors::Local(Box::new(builder)),
            questions: None,
            llm,
            store: StoreChoice::Open(db),
            agents_dir,
            default_cwd,
            reap_orphans: false,
        };
        App::build(config).await.map_err(|e| match e {
            SetupError::Database { source, .. } => ServiceError::Store(source),
            other => ServiceError::Store(StoreError::Database(other.to_string())),
        })
    }
}

/// Prints `error [CODE]: sentence` and returns the failure status.
fn fail(error: &ServiceError) -> u8 {
    let _ = writeln!(std::io::stderr(), "error [{}]: {error}", error.code());
    EXIT_FAILED
}

/// Runs `cmdr agents …`.
pub async fn run_agents(args: AgentsArgs) -> u8 {
    let AgentsAction::List = args.action;
    let catalog = args.options.catalog();
    let listed = tokio::task::spawn_blocking(move || catalog.list_agents()).await;
    let agents = match listed {
        Ok(Ok(agents)) => agents,
        Ok(Err(e)) => return fail(&e.into()),
        Err(_) => return fail(&ServiceError::Internal("listing failed".into())),
    };
    let width = agents.iter().map(|a| a.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for agent in &agents {
        out.push_str(&format!("{:width$}  {}\n", agent.name, agent.description));
    }
    print(&out)
}

/// Runs `cmdr commands …`.
pub async fn run_commands(args: CommandsArgs) -> u8 {
    match args.action {
        CommandsAction::List { agent } => list_commands(&args.options, agent).await,
        CommandsAction::Run {
            agent,
            command,
            conversation,
            working_folder,
            confine,
        } => {
            let target = RunTarget {
                agent,
                conversation_id: conversation,
                working_folder,
            };
            run_command(&args.options, target, &command, &confine).await
        }
    }
}

async fn list_commands(options: &ServiceOptions, agent: Option<String>) -> u8 {
    let service = match options.service().await {
        Ok(service) => service,
        Err(e) => return fail(&e),
    };
    let agents = match agent {
        Some(agent) => vec![agent],
        None => match service.list_agents().await {
            Ok(agents) => agents.into_iter().map(|a| a.name).collect(),
            Err(e) => return fail(&e),
        },
    };
    let mut out = String::new();
    for agent in agents {
        let commands = match service.list_commands(&agent).await {
            Ok(commands) => commands,
            Err(e) => return fail(&e),
        };
        out.push_str(&format!("{agent}:\n"));
        if commands.is_empty() {
            out.push_str("  (no commands)\n");
        }
        for command in commands {
            match command.error() {
                Some(why) => out.push_str(&format!(
                    "  {}  [disabled] {}: {why}\n",
                    command.name, command.description
                )),
                None => out.push_str(&format!("  {}  {}\n", command.name, command.description)),
            }
        }
    }
    print(&out)
}

async fn run_command(
    options: &ServiceOptions,
    target: RunTarget,
    command: &str,
    confine: &ConfineArgs,
) -> u8 {
    let builder = match confine.builder() {
        Ok(builder) => builder,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error [INVALID_REQUEST]: {e}");
            return EXIT_USAGE;
        }
    };
    let service = match options.app(llm_client(None, None), builder).await {
        Ok(app) => {
            confine::report("cmdr commands run", app.registry.confinement());
            app.service
        }
        Err(e) => return fail(&e),
    };
    let run = match service.prepare_command(target, command).await {
        Ok(run) => run,
        Err(e) => return fail(&e),
    };
    let info = run.info().clone();
    let mut view = view(DEFAULT_MAX_ITERATIONS);
    view.say(&format!(
        "running {}/{} in conversation {} (model {})",
        info.agent_name,
        info.command_name.as_deref().unwrap_or(command),
        info.conversation_id,
        info.model_id
    ));
    let (outcome, interrupted) = drive(run, &mut view).await;
    view.finish();
    match outcome {
        _ if interrupted => EXIT_INTERRUPTED,
        RunOutcome::Completed | RunOutcome::MaxIterations => EXIT_OK,
        RunOutcome::Stopped
        | RunOutcome::MaxTokens
        | RunOutcome::Repeating
        | RunOutcome::Failed { .. } => EXIT_FAILED,
    }
}

/// Runs `run`, showing its events as they come; Ctrl-C (or SIGTERM) stops it after
/// killing the running command. Returns the outcome and whether it was interrupted.
async fn drive(run: PreparedRun, view: &mut super::chat_view::ChatView) -> (RunOutcome, bool) {
    let (tx, mut rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let task = run.run(tx, cancel.clone());
    let signal = super::shutdown_signal();
    tokio::pin!(task, signal);
    let mut interrupted = false;
    let outcome = loop {
        tokio::select! {
            biased;
            () = &mut signal, if !interrupted => {
                interrupted = true;
                cancel.cancel();
            }
            Some(event) = rx.recv() => view.event(event),
            outcome = &mut task => break outcome,
            _ = ticker.tick(), if view.animating() => view.tick(),
        }
    };
    while let Ok(event) = rx.try_recv() {
        view.event(event);
    }
    view.turn_end();
    (outcome, interrupted)
}

/// Runs `cmdr conversations …`.
pub async fn run_conversations(args: ConversationsArgs) -> u8 {
    let service = match args.options.service().await {
        Ok(service) => service,
        Err(e) => return fail(&e),
    };
    match args.action {
        ConversationsAction::List { agent } => {
            match service.conversations(agent.as_deref()).await {
                Ok(list) => {
                    let mut out = String::new();
                    for c in list {
                        let archived = if c.archived { "  [archived]" } else { "" };
                        out.push_str(&format!(
                            "{}  {}  {}  {}{archived}\n",
                            c.id, c.agent_name, c.updated_at, c.title
                        ));
                    }
                    print(&out)
                }
                Err(e) => fail(&e),
            }
        }
        ConversationsAction::Show { id } => match service.turns(&id).await {
            Ok(turns) => print(&transcript(&turns)),
            Err(e) => fail(&e),
        },
    }
}

/// A conversation as people read it: each turn under a header naming its role, with
/// `Command run: name (k/n)` notes and non-`ok` statuses.
pub fn transcript(turns: &[StoredTurn]) -> String {
    let mut out = String::new();
    for turn in turns {
        let role = serde_json::to_value(turn.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let mut header = format!("── {role} · {}", turn.created_at);
        if let Some(command) = &turn.command {
            header.push_str(&format!(
                " · Command run: {} ({}/{})",
                command.name, command.step_index, command.total_steps
            ));
        }
        match turn.status {
            TurnStatus::Ok => {}
            TurnStatus::Stopped => header.push_str(" · stopped"),
            TurnStatus::Failed => header.push_str(" · failed"),
        }
        out.push_str(&header);
        out.push('\n');
        out.push_str(&turn.content);
        if !turn.content.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// Prints `text` on stdout; a closed stdout is not an error worth a panic.
fn print(text: &str) -> u8 {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    EXIT_OK
}
