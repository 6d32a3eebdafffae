//! `cmdr chat`: a terminal chat over the agent loop. Each line typed is one user turn;
//! the model's reply streams in and the `<shell>` commands it writes run in the working
//! folder (see [`super::chat_view`] for how that is shown).
//!
//! Keys: `/new` starts a new conversation, `/exit` or Ctrl-D quits, `/help` lists them.
//! Ctrl-C stops the running turn (its command's whole process tree); at the prompt it
//! says how to quit, and a second Ctrl-C in a row quits (exit status 130).
//!
//! Each turn runs through the agent service, like `cmdr commands run`: it holds the
//! conversation's lock (a second process on the same conversation is refused with
//! `RUN_IN_PROGRESS`), and the chat starts with recovery (closing the runs of a `cmdr`
//! that died mid-run). Conversations are saved like the agents' ([`super::chat_store`])
//! unless `--ephemeral`; `--conversation ID` resumes one. An `<ask>` question of the
//! agent takes the next input line as its answer ([`super::chat_input`]). At the end of
//! input the exit status is 1 when the last turn did not end normally (the model failed,
//! a reply was cut off, the agent repeated itself, the turn was refused), else 0.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::chat_input::{ChatInput, Question};
use super::chat_store::{ChatStore, CHAT_AGENT};
use super::chat_view::{ChatView, TICK};
use super::confine::{self, ConfineArgs};
use super::setup::{llm_client, view};
use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::agent::{
    system_prompt, RunOptions, RunOutcome, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS,
};
use crate::agents::AgentCatalog;
use crate::app::{App, AppConfig, Executors, StoreChoice};
use crate::service::{AgentService, PreparedRun, RunTarget, ServiceError};

/// Events of a run buffered between the loop and the screen.
const EVENT_BUFFER: usize = 64;
/// Lines read ahead from stdin (typed while a turn runs).
const INPUT_BUFFER: usize = 16;

/// What `/help` prints.
const HELP: &str = "\
Type a message and press Enter: the agent answers and runs the <shell> commands it writes.
  /new    start a new conversation (same working folder)
  /exit   quit (also Ctrl-D)
  /help   this list
Ctrl-C stops the running turn; at the prompt, press it twice to quit.";

/// Chat with the agent: it runs the `<shell>` commands it writes.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The directory commands start in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub working_folder: Option<PathBuf>,
    /// The model to ask (default: `CMDR_LLM_MODEL`).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Model replies (each with its commands) per message at most.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: u32,
    /// Deadline of each command, in seconds (default: 5 minutes).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    pub command_timeout_secs: Option<u64>,
    /// The longest model reply, in tokens (`max_tokens`; 0 sends no limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: u32,
    /// Continue this saved conversation (`cmdr conversations list` shows their ids).
    #[arg(long, value_name = "ID", conflicts_with = "ephemeral")]
    pub conversation: Option<String>,
    /// Save nothing (by default conversations are saved like the agents').
    #[arg(long)]
    pub ephemeral: bool,
    /// The conversation database (default: `$CMDR_DATA_DIR/cmdr.sqlite3`, else under
    /// `$XDG_DATA_HOME/cmdr` or `~/.local/share/cmdr`).
    #[arg(long, env = "CMDR_DB", value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Where commands may reach.
    #[command(flatten)]
    pub confine: ConfineArgs,
}

/// Runs `cmdr chat`; returns the exit status.
pub async fn run(args: ChatArgs) -> u8 {
    let (broker, questions) = ChatInput::new();
    let builder = match args.confine.builder() {
        Ok(builder) => builder,
        Err(message) => {
            eprint_line(&format!("cmdr chat: {message}"));
            return EXIT_USAGE;
        }
    };
    let paths = builder.paths();
    let folder = match working_folder(args.working_folder.as_deref()) {
        Ok(folder) if args.working_folder.is_none() => confine::default_folder(folder, paths),
        Ok(folder) => match confine::check_folder(&folder, paths) {
            Ok(()) => folder,
            Err(message) => {
                eprint_line(&format!("cmdr chat: {message}"));
                return EXIT_USAGE;
            }
        },
        Err(message) => {
            eprint_line(&format!("cmdr chat: {message}"));
            return EXIT_USAGE;
        }
    };
    let store = match open_store(&args) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let agent_name = match &args.conversation {
        Some(id) => match store.owner_of(id).await {
            Ok(agent) => agent,
            Err(e) => {
                eprint_line(&format!("cmdr chat: --conversation {id}: {e}"));
                return EXIT_USAGE;
            }
        },
        None => CHAT_AGENT.to_owned(),
    };
    let signals = Signals::install();
    // No agent folder is read: a chat's settings are its flags.
    let config = AppConfig {
        executors: Executors::Local(Box::new(builder)),
        questions: Some(std::sync::Arc::new(broker)),
        llm: llm_client(Some("cmdr chat"), args.model.as_deref()),
        store: StoreChoice::Given {
            store: store.store(),
            saved: store.is_saved(),
        },
        agents_dir: AgentCatalog::default_dir(),
        default_cwd: folder.clone(),
        reap_orphans: false,
    };
    let service = match App::build(config).await {
        Ok(app) => {
            confine::report("cmdr chat", app.registry.confinement());
            app.service
        }
        Err(e) => {
            eprint_line(&format!("cmdr chat: {e}"));
            return EXIT_FAILED;
        }
    };
    let options = RunOptions {
        system_prompt: system_prompt(None),
        model: args.model,
        max_iterations: args.max_iterations,
        command_timeout: args.command_timeout_secs.map(Duration::from_secs),
        max_tokens: (args.max_tokens > 0).then_some(args.max_tokens),
        ..RunOptions::default()
    };
    let mut chat = Chat {
        service,
        conversation: args.conversation,
        agent_name,
        questions,
        last: None,
        view: view(args.max_iterations),
        input: stdin_lines(),
        interactive: std::io::stdin().is_terminal(),
        options,
        folder,
        signals,
    };
    let status = chat.run().await;
    // The chat's processes do not outlive it.
    let registry = chat.service.agent_loop().registry();
    registry.shutdown(Duration::ZERO).await;
    status
}

/// The chat's database: in memory with `--ephemeral`; one that cannot be opened is a
/// warning (the chat goes on unsaved) unless a conversation is to be resumed from it.
/// `Err` is the exit status.
fn open_store(args: &ChatArgs) -> Result<ChatStore, u8> {
    let opened = if args.ephemeral {
        ChatStore::unsaved()
    } else {
        match ChatStore::open(args.db.as_deref()) {
            Ok(store) => Ok(store),
            Err(e) if args.conversation.is_none() => {
                eprint_line(&format!(
                    "cmdr chat: cannot open the conversation database: {e}; this chat is not saved"
                ));
                ChatStore::unsaved()
            }
            Err(e) => {
                eprint_line(&format!(
                    "cmdr chat: cannot open the conversation database: {e}"
                ));
                return Err(EXIT_USAGE);
            }
        }
    };
    opened.map_err(|e| {
        eprint_line(&format!("cmdr chat: {e}"));
        EXIT_FAILED
    })
}

/// The working folder, absolute and resolved; it must be an existing directory.
fn working_folder(arg: Option<&Path>) -> Result<PathBuf, String> {
    let Some(arg) = arg else {
        return std::env::current_dir()
            .map_err(|e| format!("cannot tell the current directory: {e}"));
    };
    let shown = arg.display();
    match std::fs::canonicalize(arg) {
        Ok(folder) if folder.is_dir() => Ok(folder),
        Ok(_) => Err(format!("--working-folder {shown}: not a directory")),
        Err(e) => Err(format!(
            "--working-folder {shown}: not an existing directory ({e})"
        )),
    }
}

/// One line on stderr; a closed stderr is ignored.
fn eprint_line(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Lines of stdin, read by a plain thread (a blocking read must not hold a runtime
/// worker, nor keep the runtime from shutting down). The channel closes at end of input.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(INPUT_BUFFER);
    let spawned = std::thread::Builder::new()
        .name("cmdr-chat-stdin".to_owned())
        .spawn(move || read_lines(&tx));
    if let Err(e) = spawned {
        eprint_line(&format!("cmdr chat: cannot read stdin: {e}"));
    }
    rx
}

/// Sends each line of stdin (without its line ending; invalid UTF-8 replaced) to `tx`.
fn read_lines(tx: &mpsc::Sender<String>) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("reading stdin: {e}");
                return;
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']).to_owned();
        if tx.blocking_send(line).is_err() {
            return;
        }
    }
}

/// A signal the chat reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sig {
    Interrupt,
    Terminate,
}

/// SIGINT and SIGTERM, caught (so neither kills the process outright).
struct Signals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl Signals {
    fn install() -> Self {
        let catch = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|e| tracing::warn!("cannot catch {name}: {e}"))
                .ok()
        };
        Self {
            interrupt: catch(SignalKind::interrupt(), "SIGINT"),
            terminate: catch(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// The next signal.
    async fn next(&mut self) -> Sig {
        tokio::select! {
            () = recv(&mut self.interrupt) => Sig::Interrupt,
            () = recv(&mut self.terminate) => Sig::Terminate,
        }
    }
}

/// Resolves at the next delivery of `signal`; never when it is not caught.
async fn recv(signal: &mut Option<Signal>) {
    if let Some(signal) = signal {
        if signal.recv().await.is_some() {
            return;
        }
    }
    std::future::pending().await
}

/// What one input line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Input<'a> {
    Nothing,
    Message(&'a str),
    New,
    Exit,
    Help,
    Unknown(&'a str),
}

/// A line that is one `/word` is a chat command; anything else goes to the model.
fn parse_input(line: &str) -> Input<'_> {
    let line = line.trim();
    if line.is_empty() {
        return Input::Nothing;
    }
    let is_word = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    match line.strip_prefix('/') {
        Some("new") => Input::New,
        Some("exit" | "quit") => Input::Exit,
        Some("help") => Input::Help,
        Some(word) if is_word(word) => Input::Unknown(line),
        _ => Input::Message(line),
    }
}

/// Whether the chat goes on after a line.
enum Flow {
    Continue,
    Exit(u8),
}

/// The running chat.
struct Chat {
    /// What the turns run through (lock, persistence, processes).
    service: AgentService,
    /// The conversation being continued; `None` until the first turn of a new one.
    conversation: Option<String>,
    /// The agent the conversation is stored under ([`CHAT_AGENT`] unless resumed).
    agent_name: String,
    /// `<ask>` questions of the running turn.
    questions: mpsc::Receiver<Question>,
    /// How the last turn ended.
    last: Option<RunOutcome>,
    /// The settings of every turn (the flags).
    options: RunOptions,
    folder: PathBuf,
    view: ChatView,
    input: mpsc::Receiver<String>,
    signals: Signals,
    /// stdin is a terminal: show a prompt and a greeting.
    interactive: bool,
}

impl Chat {
    async fn run(&mut self) -> u8 {
        if self.interactive {
            self.greet();
        }
        let mut interrupts = 0;
        loop {
            if self.interactive {
                self.view.prompt();
            }
            let line = tokio::select! {
                line = self.input.recv() => line,
                sig = self.signals.next() => {
                    interrupts += 1;
                    if sig == Sig::Terminate || interrupts > 1 {
                        self.view.finish();
                        return EXIT_INTERRUPTED;
                    }
                    self.view.warn("(/exit or Ctrl-D to quit)");
                    continue;
                }
            };
            let Some(line) = line else {
                self.view.finish();
                return self.exit_status();
            };
            interrupts = 0;
            self.view.line_entered();
            if let Flow::Exit(code) = self.handle(&line).await {
                return code;
            }
        }
    }

    /// The exit status at the end of input: 1 when the last turn did not end normally.
    fn exit_status(&self) -> u8 {
        match self.last {
            Some(RunOutcome::Failed { .. } | RunOutcome::MaxTokens | RunOutcome::Repeating) => {
                EXIT_FAILED
            }
            _ => EXIT_OK,
        }
    }

    fn greet(&mut self) {
        let model = self
            .service
            .agent_loop()
            .model_id(&self.options)
            .map(|m| format!("model {m}, "))
            .unwrap_or_default();
        let greeting = format!(
            "cmdr chat — {model}commands run in {}\n/help lists the keys, /exit or Ctrl-D quits.",
            self.folder.display()
        );
        self.view.say(&greeting);
    }

    async fn handle(&mut self, line: &str) -> Flow {
        match parse_input(line) {
            Input::Nothing => {}
            Input::Message(message) => return self.turn(message.to_owned()).await,
            Input::New => {
                // Leaving a conversation stops its processes: nothing here can reach
                // them any more.
                if let Some(left) = self.conversation.take() {
                    self.service.end_processes(&left).await;
                }
                self.agent_name = CHAT_AGENT.to_owned();
                let text = format!("new conversation (in {})", self.folder.display());
                self.view.say(&text);
            }
            Input::Exit => {
                self.view.finish();
                return Flow::Exit(EXIT_OK);
            }
            Input::Help => self.view.say(HELP),
            Input::Unknown(word) => {
                self.view.warn(&format!(
                    "unknown command {word} (/help lists the commands)"
                ));
            }
        }
        Flow::Continue
    }

    /// Runs one user turn through the service, showing its events as they come. Ctrl-C
    /// stops it; SIGTERM stops it and then ends the chat. A turn the service refuses (a
    /// busy conversation, no model) says why and counts as failed.
    async fn turn(&mut self, message: String) -> Flow {
        self.view.user_message(&message);
        let target = RunTarget {
            agent: self.agent_name.clone(),
            conversation_id: self.conversation.clone(),
            working_folder: None,
        };
        let prepared = self
            .service
            .prepare_instruction_with(target, self.options.clone(), message)
            .await;
        let run = match prepared {
            Ok(run) => run,
            Err(e) => {
                self.refused(&e);
                return Flow::Continue;
            }
        };
        self.conversation = Some(run.info().conversation_id.clone());
        let (flow, outcome) = self.drive(run).await;
        self.last = Some(outcome);
        flow
    }

    /// A turn the service refused before it started.
    fn refused(&mut self, error: &ServiceError) {
        let code = error.code();
        self.view.warn(&format!("error [{code}]: {error}"));
        self.last = Some(RunOutcome::Failed {
            code: code.into(),
            message: error.to_string(),
        });
    }

    /// Runs the turn to its end: events shown, `<ask>` questions answered by the next
    /// input line, signals obeyed.
    async fn drive(&mut self, run: PreparedRun) -> (Flow, RunOutcome) {
        let (tx, mut rx) = mpsc::channel(EVENT_BUFFER);
        let cancel = CancellationToken::new();
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut flow = Flow::Continue;
        let mut waiting: Option<tokio::sync::oneshot::Sender<String>> = None;
        let run = run.run(tx, cancel.clone());
        tokio::pin!(run);
        let outcome = loop {
            tokio::select! {
                biased;
                sig = self.signals.next() => {
                    cancel.cancel();
                    if sig == Sig::Terminate {
                        flow = Flow::Exit(EXIT_INTERRUPTED);
                    }
                }
                Some(event) = rx.recv() => self.view.event(event),
                Some((request, reply)) = self.questions.recv() => {
                    self.view.question(&request.prompt);
                    waiting = Some(reply);
                }
                line = self.input.recv(), if waiting.is_some() => {
                    if let (Some(reply), Some(line)) = (waiting.take(), line) {
                        self.view.answer(&line);
                        let _ = reply.send(line);
                    }
                }
                outcome = &mut run => break outcome,
                _ = ticker.tick(), if self.view.animating() => self.view.tick(),
            }
        };
        // Every event was sent before the run returned.
        while let Ok(event) = rx.try_recv() {
            self.view.event(event);
        }
        self.view.turn_end();
        (flow, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_messages_or_commands() {
        assert_eq!(parse_input("  "), Input::Nothing);
        assert_eq!(parse_input("/new"), Input::New);
        assert_eq!(parse_input(" /exit "), Input::Exit);
        assert_eq!(parse_input("/help"), Input::Help);
        assert_eq!(parse_input("/frob"), Input::Unknown("/frob"));
        assert_eq!(parse_input("/etc/hosts?"), Input::Message("/etc/hosts?"));
        assert_eq!(parse_input("/new please"), Input::Message("/new please"));
        assert_eq!(parse_input("list files"), Input::Message("list files"));
    }

    #[test]
    fn the_working_folder_must_be_a_directory() {
        assert!(working_folder(Some(Path::new("/definitely/not/here"))).is_err());
        assert!(working_folder(Some(Path::new("/"))).is_ok());
    }
}
