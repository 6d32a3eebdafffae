//! The conversation lock across processes, and `cmdr chat`'s start-up recovery (issue
//! 35.2): real `cmdr chat`, `cmdr commands run` and `cmdr serve` processes on one SQLite
//! file and the fake model. The first chat is held mid-turn by a `<shell>` command that
//! reads a fifo the test controls: it holds its conversation for as long as the test
//! wants, with no sleep anywhere.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::Arc;

use cmdr::agent::{Role, TurnStatus};
use cmdr::recovery::INTERRUPTED_NOTE;
use cmdr::store::{SqliteStore, Store};
use cmdr_test_support::serve::{db, Options, Serve};
use nix::sys::signal::Signal;
use serde_json::json;
use tokio::sync::Notify;

use super::chat_cli::Chat;
use crate::agent::fake_llm::{FakeLlm, Reply};

/// A world like `cmdr serve`'s (`agents/helper` with the command `hello`, `work/`, the
/// database `data/cmdr.sqlite3`) and a fifo for the held command.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let commands = dir.path().join("agents/helper/commands");
        std::fs::create_dir_all(&commands).unwrap();
        let hello = json!({
            "Description": "Say hello",
            "items": [{"type": "message", "role": "user", "content": ["Say hello"]}]
        });
        std::fs::write(commands.join("hello.json"), hello.to_string()).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let world = World { dir };
        let made = std::process::Command::new("mkfifo")
            .arg(world.fifo())
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo: {made}");
        world
    }

    fn db(&self) -> PathBuf {
        db(self.dir.path())
    }

    fn fifo(&self) -> PathBuf {
        self.dir.path().join("fifo")
    }

    /// `cmdr chat --db <db> ARGS`, working in `work/`.
    fn chat(&self, llm: &FakeLlm, args: &[&str]) -> Chat {
        let db = self.db();
        let mut all = vec!["--db", db.to_str().unwrap()];
        all.extend_from_slice(args);
        Chat::start_with(Some(llm), &self.dir.path().join("work"), &all)
    }

    /// A chat whose first turn runs `cat <fifo>`, once that command runs: the chat
    /// holds its new conversation. Returns it and the conversation's id.
    async fn holder(&self, llm: &FakeLlm) -> (Chat, String) {
        let cat = format!("cat {}", self.fifo().display());
        llm.push([Reply::text(&format!("<shell>{cat}</shell>"))]);
        let mut holder = self.chat(llm, &[]);
        holder.send("wait on the fifo").await;
        holder.wait_line(&format!("[cmd-1-0] running: {cat}")).await;
        let store = SqliteStore::open(&self.db()).unwrap();
        let conversations = store.conversations(Some("chat")).await.unwrap();
        assert_eq!(conversations.len(), 1, "{conversations:#?}");
        (holder, conversations[0].id.clone())
    }

    /// `cmdr ARGS` against this world, to its end.
    async fn cmdr(&self, llm: &FakeLlm, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
            .args(args)
            .env("CMDR_AGENTS_DIR", self.dir.path().join("agents"))
            .env("CMDR_DB", self.db())
            .env("CMDR_LLM_BASE_URL", llm.base_url())
            .env("CMDR_LLM_MODEL", "fake-model")
            .env_remove("CMDR_LLM_API_KEY")
            .current_dir(self.dir.path().join("work"))
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap()
    }
}

impl Drop for World {
    /// Ends a `cat` still reading the fifo (a test that failed before recovery killed
    /// it): a writer that opens and closes the fifo gives it end of file. Non-blocking,
    /// so that without a reader this fails at once instead of waiting for one.
    fn drop(&mut self) {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(self.fifo());
    }
}

/// Kills `chat` with SIGKILL (no code of its own runs) and waits for it to be gone.
async fn kill(chat: Chat) {
    chat.signal(Signal::SIGKILL);
    let (status, _, _) = chat.wait_exit().await;
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "{status}");
}

/// While one `cmdr chat` runs a turn of a conversation, a second `cmdr chat`, a
/// `cmdr commands run` and a `cmdr serve` request on the same database are each refused
/// with `RUN_IN_PROGRESS`; once the holder is SIGKILLed (its `cat` left running, an
/// orphan that must not inherit the lock), a new chat on it goes ahead.
#[tokio::test]
async fn a_conversation_mid_turn_is_refused_to_other_processes_until_its_holder_dies() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let (holder, id) = world.holder(&llm).await;

    let mut second = world.chat(&llm, &["--conversation", &id]);
    second.send("me too").await;
    second.wait_stderr("error [RUN_IN_PROGRESS]").await;
    let (status, _, stderr) = second.exit().await;
    assert_eq!(status.code(), Some(1), "a refused last turn: {stderr}");

    let run = ["commands", "run", "helper", "hello", "--conversation", &id];
    let out = world.cmdr(&llm, &run).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error [RUN_IN_PROGRESS]"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");

    let serve = Serve::start_in(
        world.dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    let body = json!({"instruction": "hi", "conversationId": id});
    let response = serve.post("/agents/helper/run", &body).await;
    let status = response.status();
    let answer = response.text().await.unwrap();
    assert_eq!(status, 409, "{answer}");
    assert!(answer.contains("RUN_IN_PROGRESS"), "{answer}");
    drop(serve);
    assert_eq!(llm.request_count(), 1, "no refused run asked the model");

    kill(holder).await;
    let mut after = world.chat(&llm, &["--conversation", &id]);
    after.send("are you there?").await;
    after.wait_line("done.").await;
    let (status, _, stderr) = after.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(llm.request_count(), 2);
}

/// A turn left running by a SIGKILLed `cmdr chat` is closed the way every front door
/// closes one (a `stopped` tool turn saying the result is unknown, the run marker gone)
/// as soon as the next `cmdr chat` on the database starts, even one that sends nothing.
#[tokio::test]
async fn a_turn_a_killed_chat_left_running_is_closed_when_the_next_chat_starts() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let (holder, id) = world.holder(&llm).await;
    kill(holder).await;

    let next = world.chat(&llm, &[]);
    let (status, _, stderr) = next.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");

    let store = SqliteStore::open(&world.db()).unwrap();
    let turns = store.turns(&id).await.unwrap();
    let last = turns.last().unwrap();
    assert_eq!(
        (last.role, last.status),
        (Role::Tool, TurnStatus::Stopped),
        "{turns:#?}"
    );
    assert!(last.content.contains(INTERRUPTED_NOTE), "{turns:#?}");
    assert!(store.run_markers().await.unwrap().is_empty());
}

/// The other way round: while `cmdr serve` runs a turn of a conversation (the model's
/// reply held open by the test), `cmdr chat --conversation` on it is refused; once the
/// server's run is done, the chat carries the conversation on.
#[tokio::test]
async fn a_chat_on_a_conversation_a_server_is_running_is_refused() {
    let world = World::new();
    let gate = Arc::new(Notify::new());
    let held = Reply::Gated(vec!["Hel".into()], Arc::clone(&gate), vec!["lo".into()]);
    let llm = FakeLlm::start(vec![held]).await;
    let serve = Serve::start_in(
        world.dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    let mut events = serve
        .sse("/agents/helper/stream", json!({"message": "hi"}))
        .await;
    let opened = events.until(|e| e["type"] == "conversation").await;
    let id = opened["conversationId"].as_str().unwrap().to_owned();
    llm.wait_requests(1).await;

    let mut chat = world.chat(&llm, &["--conversation", &id]);
    chat.send("me too").await;
    chat.wait_stderr("error [RUN_IN_PROGRESS]").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(llm.request_count(), 1, "the refused chat asked no model");

    gate.notify_one();
    let all = events.all().await;
    assert_eq!(all.last().unwrap()["type"], "done", "{all:?}");
    let mut chat = world.chat(&llm, &["--conversation", &id]);
    chat.send("and now?").await;
    chat.wait_line("done.").await;
    let (status, _, stderr) = chat.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// An attack (issue 35.2): the model of one conversation, from a shell confined by
/// `--allow-root work --landlock`, takes the lock file of every other conversation on
/// the database with `flock` (same user; Landlock confines writes, and `flock` needs
/// only a descriptor opened for reading) and leaves it held by a process of its own
/// session. Every other conversation is then refused `RUN_IN_PROGRESS` for as long as
/// that process lives — after the attacking chat is gone. Proposed fix: keep the lock
/// files where shells cannot open them (Landlock denies the lock directory to shells
/// when they run confined, `--landlock` grants reads per root, not everywhere), or take
/// the lock on something a shell cannot name (an abstract socket bound by a process
/// the sandbox scopes away from the shells).
#[tokio::test]
#[ignore = "hole: a model's shell flocks other conversations' lock files and refuses them RUN_IN_PROGRESS"]
async fn a_models_shell_cannot_hold_another_conversations_lock() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    llm.push([Reply::text("First.")]);
    let mut victim = world.chat(&llm, &[]);
    victim.send("hello").await;
    victim.wait_line("First.").await;
    let (status, _, stderr) = victim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let store = SqliteStore::open(&world.db()).unwrap();
    let victim_id = store.conversations(Some("chat")).await.unwrap()[0]
        .id
        .clone();
    drop(store);

    let locks = format!("{}.locks", world.db().display());
    let pids = world.dir.path().join("work/pids");
    // Each holder leads a session of its own (setsid), so no process group of the run
    // ends it; it writes its pid (its group's id) for the test to end it.
    let attack = format!(
        "for f in {locks}/*.lock; do setsid sh -c 'echo $$ >> {}; \
         exec flock -n -o \"$0\" sleep 1000' \"$f\" </dev/null >/dev/null 2>&1 & done",
        pids.display()
    );
    llm.push([
        Reply::text(&format!("<shell>{attack}</shell>")),
        Reply::text("Held."),
    ]);
    let work = world.dir.path().join("work");
    let mut attacker = world.chat(
        &llm,
        &["--allow-root", work.to_str().unwrap(), "--landlock"],
    );
    attacker.send("take them all").await;
    attacker.wait_line("Held.").await;
    let (status, _, stderr) = attacker.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let victim_lock = victim_lock_file(&locks, &victim_id);
    cmdr_test_support::results::eventually(
        "the victim's lock file held by the shell's flock",
        || held_elsewhere(&victim_lock),
    )
    .await;

    llm.push([Reply::text("Again.")]);
    let mut again = world.chat(&llm, &["--conversation", &victim_id]);
    again.send("are you there?").await;
    let (status, lines, stderr) = again.exit().await;
    for pid in std::fs::read_to_string(&pids).unwrap_or_default().lines() {
        let _ = std::process::Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{pid}")])
            .status();
    }
    assert!(!stderr.contains("RUN_IN_PROGRESS"), "{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(lines.iter().any(|l| l == "Again."), "{lines:#?}");
}

/// The lock file of `conversation` in `locks` (the SHA-256 of its id, by `sha256sum`).
fn victim_lock_file(locks: &str, conversation: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha256sum", "sh", conversation])
        .output()
        .unwrap();
    let hex = String::from_utf8_lossy(&out.stdout);
    format!("{locks}/{}.lock", hex.split_whitespace().next().unwrap())
}

/// Whether another open file holds `path`'s lock (`flock -n` fails on it).
fn held_elsewhere(path: &str) -> bool {
    std::process::Command::new("flock")
        .args(["-n", path, "true"])
        .status()
        .is_ok_and(|s| !s.success())
}

/// An attack on the lock's key (issue 35.2): the lock directory is named after the
/// database's real path, and a hard link is another real path to the same file. While a
/// chat holds a conversation, a second chat on the same database through a hard link
/// takes the conversation's lock in another directory and runs the conversation at the
/// same time (and SQLite, told two names, keeps two WAL files for one database — its
/// documented way to corrupt it). Proposed fix: name the lock directory by the file's
/// identity (device and inode, in a per-user runtime directory), or refuse a database
/// whose link count is not 1.
#[tokio::test]
#[ignore = "hole: a hard link to the database is a second lock directory; a conversation runs twice at once"]
async fn a_hard_link_to_the_database_does_not_bypass_the_lock() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    // A first chat makes the conversation and exits (its WAL checkpointed into the file,
    // so that the hard link sees it).
    llm.push([Reply::text("First.")]);
    let mut first = world.chat(&llm, &[]);
    first.send("hello").await;
    first.wait_line("First.").await;
    let (status, _, stderr) = first.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let store = SqliteStore::open(&world.db()).unwrap();
    let id = store.conversations(Some("chat")).await.unwrap()[0]
        .id
        .clone();
    drop(store);
    let cat = format!("cat {}", world.fifo().display());
    llm.push([Reply::text(&format!("<shell>{cat}</shell>"))]);
    let mut holder = world.chat(&llm, &["--conversation", &id]);
    holder.send("wait on the fifo").await;
    holder.wait_line(&format!("[cmd-1-0] running: {cat}")).await;
    let alias = world.dir.path().join("data/alias.sqlite3");
    std::fs::hard_link(world.db(), &alias).unwrap();

    llm.push([Reply::text("Second.")]);
    let alias_arg = alias.to_str().unwrap();
    let mut second = Chat::start_with(
        Some(&llm),
        &world.dir.path().join("work"),
        &["--db", alias_arg, "--conversation", &id],
    );
    second.send("me too").await;
    let (status, _, stderr) = second.exit().await;
    assert!(stderr.contains("RUN_IN_PROGRESS"), "{status}: {stderr}");
    assert_eq!(llm.request_count(), 2, "the second chat asked the model");
    drop(holder);
}
