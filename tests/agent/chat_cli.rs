//! `cmdr chat` end to end: the real binary, the fake OpenAI-compatible server, real
//! commands in a temporary folder. stdout is a pipe, so the chat prints its plain,
//! greppable lines; the tests read them one by one until the expected one appears
//! (no sleeps), failing with everything seen after a generous timeout.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

use crate::agent::fake_llm::{FakeLlm, Reply};

use cmdr_test_support::PATIENCE;

/// A running `cmdr chat` (also used by `super::chat_lock`).
pub(super) struct Chat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: mpsc::UnboundedReceiver<String>,
    /// stdout lines read so far.
    seen: Vec<String>,
    /// stderr lines read so far.
    seen_err: Vec<String>,
}

impl Chat {
    /// Starts `cmdr chat --ephemeral` in `folder`, talking to `llm` (no model
    /// configured when `None`).
    fn start(llm: Option<&FakeLlm>, folder: &Path) -> Chat {
        Chat::start_with(llm, folder, &["--ephemeral"])
    }

    /// Starts `cmdr chat` with `args` in `folder`, talking to `llm`.
    pub(super) fn start_with(llm: Option<&FakeLlm>, folder: &Path, args: &[&str]) -> Chat {
        let mut command = chat_command();
        command.arg("--working-folder").arg(folder).args(args);
        if let Some(llm) = llm {
            command
                .env("CMDR_LLM_BASE_URL", llm.base_url())
                .env("CMDR_LLM_MODEL", "fake-model");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cmdr chat starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Chat {
            child,
            stdin,
            stdout,
            stderr: rx,
            seen: Vec::new(),
            seen_err: Vec::new(),
        }
    }

    /// Types `line` and Enter.
    pub(super) async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends `signal` to the chat process.
    pub(super) fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.child.id().expect("still running")).unwrap();
        kill(Pid::from_raw(pid), signal).unwrap();
    }

    /// Reads stdout until a line satisfies `want`; returns its index in `seen`.
    async fn wait_for(&mut self, what: &str, want: impl Fn(&str) -> bool) -> usize {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let line = match timeout_at(deadline, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => self.fail(&format!("stdout ended before {what}")),
                Ok(Err(e)) => self.fail(&format!("reading stdout for {what}: {e}")),
                Err(_) => self.fail(&format!("no {what} within {PATIENCE:?}")),
            };
            self.seen.push(line);
            if want(self.seen.last().unwrap()) {
                return self.seen.len() - 1;
            }
        }
    }

    /// Reads stdout until exactly `expected` is printed.
    pub(super) async fn wait_line(&mut self, expected: &str) -> usize {
        self.wait_for(&format!("line {expected:?}"), |line| line == expected)
            .await
    }

    /// Reads stderr until a line contains `text`.
    pub(super) async fn wait_stderr(&mut self, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match timeout_at(deadline, self.stderr.recv()).await {
                Ok(Some(line)) => {
                    let found = line.contains(text);
                    self.seen_err.push(line);
                    if found {
                        return;
                    }
                }
                Ok(None) => self.fail(&format!("stderr ended before {text:?}")),
                Err(_) => self.fail(&format!("no {text:?} on stderr within {PATIENCE:?}")),
            }
        }
    }

    /// Closes stdin (Ctrl-D) if still open, waits for the exit; returns the status and
    /// everything printed on stdout and stderr.
    pub(super) async fn exit(mut self) -> (ExitStatus, Vec<String>, String) {
        self.stdin = None;
        self.wait_exit().await
    }

    /// Waits for the exit with stdin left open (no end of input competing).
    pub(super) async fn wait_exit(mut self) -> (ExitStatus, Vec<String>, String) {
        let deadline = Instant::now() + PATIENCE;
        while let Ok(Ok(Some(line))) = timeout_at(deadline, self.stdout.next_line()).await {
            self.seen.push(line);
        }
        while let Ok(Some(line)) = timeout_at(deadline, self.stderr.recv()).await {
            self.seen_err.push(line);
        }
        let Ok(status) = timeout_at(deadline, self.child.wait()).await else {
            self.fail("the chat did not exit");
        };
        (status.unwrap(), self.seen, self.seen_err.join("\n"))
    }

    fn fail(&self, why: &str) -> ! {
        panic!(
            "{why}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.seen.join("\n"),
            self.seen_err.join("\n")
        )
    }
}

/// `cmdr chat` without any model configuration from the test's own environment.
fn chat_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .arg("chat")
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_LLM_MODEL")
        .env_remove("CMDR_LLM_IDLE_TIMEOUT_SECS")
        .kill_on_drop(true);
    command
}

/// The index of the line equal to `line`.
fn index(seen: &[String], line: &str) -> usize {
    seen.iter()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("no line {line:?} in {seen:#?}"))
}

/// The index of the first line starting with `prefix`.
fn index_prefix(seen: &[String], prefix: &str) -> usize {
    seen.iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in {seen:#?}"))
}

#[tokio::test]
async fn three_commands_go_queued_running_completed_each_with_its_own_output() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::chunks([
            "Three of them:\n<shell>echo one</shell>\n<sh",
            "ell>echo two</shell>\n<shell>echo three</shell>\n",
        ]),
        Reply::text("All three ran."),
    ])
    .await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("print one, two and three").await;
    let end = chat.wait_line("All three ran.").await;

    let seen = chat.seen.clone();
    let mut previous_end = 0;
    for (i, word) in ["one", "two", "three"].into_iter().enumerate() {
        let id = format!("cmd-1-{i}");
        let queued = index(&seen, &format!("[{id}] queued: echo {word}"));
        let running = index(&seen, &format!("[{id}] running: echo {word}"));
        let output = index(&seen, &format!("  │ {word}"));
        let completed = index_prefix(&seen, &format!("[{id}] completed in "));
        assert!(queued < running, "{seen:#?}");
        assert!(previous_end < running, "one command at a time: {seen:#?}");
        assert!(running < output && output < completed, "{seen:#?}");
        assert!(completed < end, "{seen:#?}");
        previous_end = completed;
    }
    assert!(seen.contains(&"Three of them:".to_owned()), "{seen:#?}");

    chat.send("/exit").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
}

#[tokio::test]
async fn the_same_command_twice_gets_two_ids_both_completed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x").unwrap();
    let llm = FakeLlm::start(vec![Reply::text("<shell>ls</shell> <shell>ls</shell>")]).await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("list twice").await;
    chat.wait_line("done.").await;

    let seen = chat.seen.clone();
    for id in ["cmd-1-0", "cmd-1-1"] {
        index(&seen, &format!("[{id}] queued: ls"));
        index(&seen, &format!("[{id}] running: ls"));
        index_prefix(&seen, &format!("[{id}] completed in "));
    }
    let listings = seen.iter().filter(|l| *l == "  │ a.txt").count();
    assert_eq!(listings, 2, "{seen:#?}");

    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
}

#[tokio::test]
async fn slash_new_starts_a_new_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("first question").await;
    chat.wait_line("first answer").await;
    chat.send("/new").await;
    chat.wait_for("the new conversation", |l| {
        l.starts_with("new conversation")
    })
    .await;
    chat.send("/frob").await;
    chat.wait_stderr("unknown command /frob").await;
    chat.send("second question").await;
    chat.wait_line("second answer").await;

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"], "second question");

    chat.send("/exit").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
}

#[tokio::test]
async fn ctrl_c_stops_the_running_command_and_the_chat_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>sleep 1000</shell>"),
        Reply::text("back again"),
    ])
    .await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("wait a long time").await;
    chat.wait_line("[cmd-1-0] running: sleep 1000").await;
    chat.signal(Signal::SIGINT);
    chat.wait_line("[cmd-1-0] stopped").await;
    chat.wait_line("stopped").await;

    chat.send("again").await;
    chat.wait_line("back again").await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "a stopped turn prompts no more");
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "again");

    chat.send("/exit").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
}

#[tokio::test]
async fn ctrl_c_twice_at_the_prompt_quits_with_130() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![]).await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("/help").await;
    chat.wait_for("the help", |l| l.contains("/exit")).await;
    chat.signal(Signal::SIGINT);
    chat.wait_stderr("/exit or Ctrl-D to quit").await;
    chat.signal(Signal::SIGINT);
    let (status, _, stderr) = chat.wait_exit().await;
    assert_eq!(status.code(), Some(130), "stderr: {stderr}");
}

#[tokio::test]
async fn without_a_model_the_chat_starts_and_each_message_says_llm_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let mut chat = Chat::start(None, dir.path());
    chat.wait_stderr("CMDR_LLM_BASE_URL").await;
    chat.send("hello").await;
    chat.wait_stderr("error [LLM_UNAVAILABLE]").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(
        status.code(),
        Some(1),
        "the last turn failed; stderr: {stderr}"
    );
}

#[tokio::test]
async fn a_missing_working_folder_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-here");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for (folder, says) in [
        (&missing, "not an existing directory"),
        (&file, "not a directory"),
    ] {
        let output = chat_command()
            .arg("--working-folder")
            .arg(folder)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
        assert!(stderr.contains("--working-folder"), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[tokio::test]
async fn plain_chat_echoes_each_message_and_saves_a_conversation_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("cmdr.sqlite3");
    let db_arg = db.to_str().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("First answer."),
        Reply::text("Second answer."),
    ])
    .await;
    let mut chat = Chat::start_with(Some(&llm), dir.path(), &["--db", db_arg]);
    chat.send("hello there").await;
    let echo = chat.wait_line("» hello there").await;
    let answer = chat.wait_line("First answer.").await;
    assert!(echo < answer);
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");

    let store = cmdr::store::SqliteStore::open(&db).unwrap();
    use cmdr::store::Store;
    let conversations = store.conversations(Some("chat")).await.unwrap();
    assert_eq!(conversations.len(), 1);
    let id = conversations[0].id.clone();
    let turns = store.turns(&id).await.unwrap();
    let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
    assert_eq!(contents, ["hello there", "First answer."]);
    drop(store);

    let mut chat = Chat::start_with(
        Some(&llm),
        dir.path(),
        &["--db", db_arg, "--conversation", &id],
    );
    chat.send("and again").await;
    chat.wait_line("Second answer.").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let sent = llm.requests()[1]["messages"].to_string();
    assert!(
        sent.contains("hello there") && sent.contains("First answer."),
        "{sent}"
    );
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .args(["conversations", "list", "--db", db_arg])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
}

#[tokio::test]
async fn an_ask_of_the_agent_takes_the_next_line_as_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("<ask>Proceed with the cleanup?</ask>"),
        Reply::text("Cleaning up."),
    ])
    .await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("clean up").await;
    chat.wait_line("? Proceed with the cleanup?").await;
    chat.send("yes, go").await;
    chat.wait_line("Cleaning up.").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let sent = llm.requests()[1]["messages"].to_string();
    assert!(
        sent.contains("? Proceed with the cleanup?\\nyes, go"),
        "{sent}"
    );
}

#[tokio::test]
async fn the_exit_status_says_whether_the_last_turn_ended_normally() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::Status(500, r#"{"error":{"message":"boom"}}"#.into()),
        Reply::text("fine now"),
    ])
    .await;
    let mut chat = Chat::start(Some(&llm), dir.path());
    chat.send("one").await;
    chat.wait_stderr("boom").await;
    chat.send("two").await;
    chat.wait_line("fine now").await;
    let (status, _, _) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "the last turn succeeded");
}

/// A resumed conversation whose last directory was deleted since runs its commands in
/// the chat's working folder (not in a directory that cannot be entered).
#[tokio::test]
async fn a_resumed_conversation_whose_folder_is_gone_runs_in_the_working_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = std::fs::canonicalize(dir.path()).unwrap();
    let gone = folder.join("gone");
    std::fs::create_dir(&gone).unwrap();
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("cmdr.sqlite3");
    let db_arg = db.to_str().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("Noted."),
        Reply::text("<shell>pwd</shell>"),
    ])
    .await;
    let mut chat = Chat::start_with(Some(&llm), &gone, &["--db", db_arg]);
    chat.send("remember this folder").await;
    chat.wait_line("Noted.").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let store = cmdr::store::SqliteStore::open(&db).unwrap();
    use cmdr::store::Store;
    let id = store.conversations(None).await.unwrap()[0].id.clone();
    drop(store);
    std::fs::remove_dir(&gone).unwrap();

    let args = ["--db", db_arg, "--conversation", &id];
    let mut chat = Chat::start_with(Some(&llm), &folder, &args);
    chat.send("where are we?").await;
    chat.wait_line(&format!("  │ {}", folder.display())).await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}
