//! The conversation store against real SQLite files in temp dirs: every field round-trips,
//! the codes, ordering, restarts and crashes, concurrent writers, WAL readers, migrations.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cmdr::agent::{CommandMeta, Message, Role, ToolRun, TurnStatus};
use cmdr::store::{SqliteStore, Store, StoreError, StoredTurn, SCHEMA_VERSION, TITLE_MAX_CHARS};
use tempfile::TempDir;

fn db_in(dir: &TempDir) -> PathBuf {
    dir.path().join("nested").join("data").join("cmdr.sqlite3")
}

fn open(path: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(path).unwrap())
}

fn fresh() -> (TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&db_in(&dir));
    (dir, store)
}

fn user(content: &str) -> Message {
    Message::new(Role::User, content)
}

/// One message of every shape: each role and status, command metadata, tool runs with
/// and without exit codes, unicode, control characters, CRLF, empty and large content.
fn every_kind_of_message() -> Vec<Message> {
    let step = |k| {
        Some(CommandMeta {
            name: "improve_plan".into(),
            step_index: k,
            total_steps: 3,
        })
    };
    vec![
        Message {
            command: step(1),
            ..user("Improve the plan: ünïcødé, 日本語, emoji 🦀👩‍👩‍👧, RTL שלום, e\u{301}")
        },
        Message {
            command: step(1),
            ..Message::new(
                Role::Assistant,
                "<shell>ls -la\tsrc</shell>\r\nctrl: \u{1}\u{7}\u{1b}[31mred\u{1b}[0m \u{7f}",
            )
        },
        Message {
            tool_runs: vec![
                ToolRun {
                    command_id: "cmd-1-0".into(),
                    command: "ls -la\tsrc".into(),
                    status: "completed".into(),
                    exit_code: Some(0),
                    question: false,
                    process_id: None,
                },
                ToolRun {
                    command_id: "cmd-1-1".into(),
                    command: "sleep 100".into(),
                    status: "stopped".into(),
                    exit_code: None,
                    question: true,
                    process_id: Some("p1".into()),
                },
            ],
            status: TurnStatus::Stopped,
            ..Message::new(Role::Tool, "exit 0\n  leading and trailing spaces  \n\n")
        },
        Message {
            status: TurnStatus::Failed,
            ..Message::new(Role::Assistant, "")
        },
        user(&"x\u{2028}y 'quotes' \"double\" ; DROP TABLE turns; --\\".repeat(20_000)),
    ]
}

fn is_rfc3339_millis(timestamp: &str) -> bool {
    // 2025-01-31T12:00:00.123Z
    timestamp.len() == 24
        && timestamp.ends_with('Z')
        && timestamp.as_bytes()[10] == b'T'
        && timestamp.as_bytes()[19] == b'.'
        && humantime::parse_rfc3339(timestamp).is_ok()
}

fn contents(turns: &[StoredTurn]) -> Vec<&str> {
    turns.iter().map(|t| t.content.as_str()).collect()
}

#[tokio::test]
async fn create_get_and_list_conversations() {
    let (_dir, store) = fresh();
    let a = store
        .create_conversation("a", "planning_agent", Some("/tmp/work"))
        .await
        .unwrap();
    assert_eq!(a.id, "a");
    assert_eq!(a.agent_name, "planning_agent");
    assert_eq!(a.title, "");
    assert_eq!(a.cwd.as_deref(), Some("/tmp/work"));
    assert!(!a.archived);
    assert!(is_rfc3339_millis(&a.created_at), "{}", a.created_at);
    assert_eq!(a.created_at, a.updated_at);
    store
        .create_conversation("b", "coding_agent", None)
        .await
        .unwrap();
    store
        .create_conversation("c", "planning_agent", None)
        .await
        .unwrap();

    assert_eq!(store.conversation("a").await.unwrap(), Some(a.clone()));
    assert_eq!(store.conversation("nope").await.unwrap(), None);

    let ids =
        |list: Vec<cmdr::store::Conversation>| list.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.conversations(None).await.unwrap()),
        ["c", "b", "a"]
    );
    assert_eq!(
        ids(store.conversations(Some("planning_agent")).await.unwrap()),
        ["c", "a"]
    );
    assert_eq!(
        ids(store.conversations(Some("coding_agent")).await.unwrap()),
        ["b"]
    );
    assert!(store.conversations(Some("other")).await.unwrap().is_empty());

    // A new turn makes a conversation the most recent, even within one millisecond.
    store.append_turn("a", &user("hello")).await.unwrap();
    assert_eq!(
        ids(store.conversations(None).await.unwrap()),
        ["a", "c", "b"]
    );
    store.append_turn("b", &user("hi")).await.unwrap();
    assert_eq!(
        ids(store.conversations(None).await.unwrap()),
        ["b", "a", "c"]
    );
    assert_eq!(
        ids(store.conversations(Some("planning_agent")).await.unwrap()),
        ["a", "c"]
    );

    let a_now = store.conversation("a").await.unwrap().unwrap();
    assert_eq!(a_now.created_at, a.created_at);
    assert!(a_now.updated_at >= a.updated_at);
}

#[tokio::test]
async fn turns_round_trip_every_field_in_order() {
    let (_dir, store) = fresh();
    store
        .create_conversation("conv", "planning_agent", None)
        .await
        .unwrap();
    let messages = every_kind_of_message();
    let mut appended = Vec::new();
    for message in &messages {
        appended.push(store.append_turn("conv", message).await.unwrap());
    }

    let turns = store.turns("conv").await.unwrap();
    assert_eq!(turns, appended);
    let read_back: Vec<Message> = turns.iter().map(StoredTurn::to_message).collect();
    pretty_assertions::assert_eq!(read_back, messages);
    for turn in &turns {
        assert_eq!(turn.conversation_id, "conv");
        let id = uuid::Uuid::parse_str(&turn.id).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert!(is_rfc3339_millis(&turn.created_at), "{}", turn.created_at);
        assert_eq!(turn.created_at, turn.updated_at);
    }
    let mut ids: Vec<_> = turns.iter().map(|t| &t.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), turns.len());

    store
        .create_conversation("empty", "planning_agent", None)
        .await
        .unwrap();
    assert!(store.turns("empty").await.unwrap().is_empty());
}

#[tokio::test]
async fn unknown_conversation_is_conversation_not_found() {
    let (_dir, store) = fresh();
    let not_found = |err: StoreError| {
        assert_eq!(err.code(), cmdr::executors::ErrorCode::ConversationNotFound);
        assert_eq!(err, StoreError::ConversationNotFound("ghost".into()));
    };
    not_found(store.append_turn("ghost", &user("hi")).await.unwrap_err());
    not_found(store.turns("ghost").await.unwrap_err());
    not_found(store.set_cwd("ghost", "/tmp").await.unwrap_err());
    not_found(store.set_archived("ghost", true).await.unwrap_err());
    // Nothing was written on the way.
    assert!(store.conversations(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn duplicate_create_is_conversation_exists() {
    let (_dir, store) = fresh();
    let first = store
        .create_conversation("dup", "planning_agent", Some("/a"))
        .await
        .unwrap();
    store.append_turn("dup", &user("keep me")).await.unwrap();
    let err = store
        .create_conversation("dup", "coding_agent", None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::ConversationExists);
    assert_eq!(err, StoreError::ConversationExists("dup".into()));
    let kept = store.conversation("dup").await.unwrap().unwrap();
    assert_eq!(kept.agent_name, first.agent_name);
    assert_eq!(kept.cwd, first.cwd);
    assert_eq!(contents(&store.turns("dup").await.unwrap()), ["keep me"]);
}

#[tokio::test]
async fn title_comes_from_the_first_user_message() {
    let (_dir, store) = fresh();
    store
        .create_conversation("t", "planning_agent", None)
        .await
        .unwrap();
    let title = || async { store.conversation("t").await.unwrap().unwrap().title };

    store
        .append_turn("t", &Message::new(Role::Assistant, "I speak first"))
        .await
        .unwrap();
    assert_eq!(title().await, "");
    store.append_turn("t", &user(" \n\t ")).await.unwrap();
    assert_eq!(title().await, "", "a blank message gives no title");
    store
        .append_turn("t", &user("  Improve\nthe \t plan\r\n please "))
        .await
        .unwrap();
    assert_eq!(title().await, "Improve the plan please");
    store
        .append_turn("t", &user("a later message"))
        .await
        .unwrap();
    assert_eq!(title().await, "Improve the plan please");

    store
        .create_conversation("long", "planning_agent", None)
        .await
        .unwrap();
    let long = "é🦀".repeat(100);
    store.append_turn("long", &user(&long)).await.unwrap();
    let title = store.conversation("long").await.unwrap().unwrap().title;
    assert_eq!(title.chars().count(), TITLE_MAX_CHARS);
    assert!(long.starts_with(&title));
}

#[tokio::test]
async fn archive_flag_round_trips_and_keeps_the_order() {
    let (_dir, store) = fresh();
    store
        .create_conversation("old", "planning_agent", None)
        .await
        .unwrap();
    store
        .create_conversation("new", "planning_agent", None)
        .await
        .unwrap();
    store.set_archived("old", true).await.unwrap();
    let old = store.conversation("old").await.unwrap().unwrap();
    assert!(old.archived);
    assert!(!store.conversation("new").await.unwrap().unwrap().archived);
    let order: Vec<_> = store
        .conversations(None)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(order, ["new", "old"], "archiving is not activity");
    store.set_archived("old", true).await.unwrap(); // idempotent
    store.set_archived("old", false).await.unwrap();
    assert!(!store.conversation("old").await.unwrap().unwrap().archived);
}

#[tokio::test]
async fn cwd_is_set_and_replaced() {
    let (_dir, store) = fresh();
    store
        .create_conversation("w", "coding_agent", None)
        .await
        .unwrap();
    assert_eq!(store.conversation("w").await.unwrap().unwrap().cwd, None);
    store.set_cwd("w", "/srv/project one").await.unwrap();
    assert_eq!(
        store
            .conversation("w")
            .await
            .unwrap()
            .unwrap()
            .cwd
            .as_deref(),
        Some("/srv/project one")
    );
    store.set_cwd("w", "/srv/ünï").await.unwrap();
    assert_eq!(
        store
            .conversation("w")
            .await
            .unwrap()
            .unwrap()
            .cwd
            .as_deref(),
        Some("/srv/ünï")
    );
}

#[tokio::test]
async fn the_database_survives_a_restart_with_every_turn_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let messages = every_kind_of_message();
    let (before_conv, before_turns) = {
        let store = open(&path);
        store
            .create_conversation("r", "planning_agent", Some("/w"))
            .await
            .unwrap();
        for message in &messages {
            store.append_turn("r", message).await.unwrap();
        }
        store.set_archived("r", true).await.unwrap();
        (
            store.conversation("r").await.unwrap().unwrap(),
            store.turns("r").await.unwrap(),
        )
    }; // dropped: the store thread closes the connection

    let store = open(&path);
    assert_eq!(store.conversation("r").await.unwrap().unwrap(), before_conv);
    let after = store.turns("r").await.unwrap();
    pretty_assertions::assert_eq!(after, before_turns);
    let read_back: Vec<Message> = after.iter().map(StoredTurn::to_message).collect();
    assert_eq!(read_back, messages);
    // And it keeps working after the restart.
    store
        .append_turn("r", &user("after restart"))
        .await
        .unwrap();
    assert_eq!(store.turns("r").await.unwrap().len(), messages.len() + 1);
}

/// Set by [`every_committed_turn_survives_a_crash`] for the child it starts.
const CRASH_DB_ENV: &str = "CMDR_STORE_TEST_CRASH_DB";
const CRASH_TURNS: usize = 300;

/// The child of [`every_committed_turn_survives_a_crash`]: writes, then dies by SIGKILL
/// without closing anything (no destructors, no checkpoint). Does nothing when run by hand.
#[tokio::test]
#[ignore = "run as a child process by every_committed_turn_survives_a_crash"]
async fn crash_writer_child() {
    let Some(path) = std::env::var_os(CRASH_DB_ENV) else {
        return;
    };
    let store = open(Path::new(&path));
    store
        .create_conversation("crash", "planning_agent", None)
        .await
        .unwrap();
    for n in 0..CRASH_TURNS {
        store
            .append_turn("crash", &user(&format!("turn {n}")))
            .await
            .unwrap();
    }
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL).unwrap();
    unreachable!("SIGKILL");
}

#[test]
fn every_committed_turn_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "store::crash_writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CRASH_DB_ENV, &path)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "the child must have been killed: {status:?}"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = open(&path);
        let turns = store.turns("crash").await.unwrap();
        let expected: Vec<String> = (0..CRASH_TURNS).map(|n| format!("turn {n}")).collect();
        assert_eq!(contents(&turns), expected);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_keep_every_turn_in_order() {
    const TASKS: usize = 8;
    const TURNS: usize = 200;
    const SHARED_EVERY: usize = 4;
    let (_dir, store) = fresh();
    store
        .create_conversation("shared", "planning_agent", None)
        .await
        .unwrap();
    for task in 0..TASKS {
        store
            .create_conversation(&format!("own-{task}"), "planning_agent", None)
            .await
            .unwrap();
    }

    let mut handles = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        handles.push(tokio::spawn(async move {
            let own = format!("own-{task}");
            for n in 0..TURNS {
                let content = format!("task {task} turn {n}");
                store.append_turn(&own, &user(&content)).await.unwrap();
                if n % SHARED_EVERY == 0 {
                    store.append_turn("shared", &user(&content)).await.unwrap();
                }
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }

    for task in 0..TASKS {
        let turns = store.turns(&format!("own-{task}")).await.unwrap();
        let expected: Vec<String> = (0..TURNS)
            .map(|n| format!("task {task} turn {n}"))
            .collect();
        assert_eq!(contents(&turns), expected);
    }
    let shared = store.turns("shared").await.unwrap();
    assert_eq!(shared.len(), TASKS * TURNS / SHARED_EVERY);
    for task in 0..TASKS {
        let prefix = format!("task {task} turn ");
        let mine: Vec<usize> = shared
            .iter()
            .filter_map(|t| t.content.strip_prefix(&prefix))
            .map(|n| n.parse().unwrap())
            .collect();
        let expected: Vec<usize> = (0..TURNS).step_by(SHARED_EVERY).collect();
        assert_eq!(
            mine, expected,
            "task {task}'s turns in the shared conversation"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_on_the_same_file_sees_the_first_ones_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let first = open(&path);
    let second = open(&path);

    first
        .create_conversation("x", "planning_agent", None)
        .await
        .unwrap();
    first
        .append_turn("x", &user("from the first"))
        .await
        .unwrap();
    assert_eq!(
        contents(&second.turns("x").await.unwrap()),
        ["from the first"]
    );
    second
        .append_turn("x", &user("from the second"))
        .await
        .unwrap();
    assert_eq!(
        contents(&first.turns("x").await.unwrap()),
        ["from the first", "from the second"]
    );
    assert_eq!(
        first.conversation("x").await.unwrap().unwrap().title,
        "from the first"
    );

    // Both writing at once: the busy timeout queues them, nothing is lost.
    let write = |store: Arc<dyn Store>, who: &'static str| {
        tokio::spawn(async move {
            for n in 0..100 {
                store
                    .append_turn("x", &user(&format!("{who} {n}")))
                    .await
                    .unwrap();
            }
        })
    };
    let (a, b) = (
        write(Arc::clone(&first), "first"),
        write(Arc::clone(&second), "second"),
    );
    a.await.unwrap();
    b.await.unwrap();
    let turns = first.turns("x").await.unwrap();
    assert_eq!(turns.len(), 202);
    for who in ["first", "second"] {
        let prefix = format!("{who} ");
        let mine: Vec<u32> = turns
            .iter()
            .filter_map(|t| t.content.strip_prefix(&prefix))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(mine, (0..100).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn migration_is_idempotent_and_sets_user_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let first = open(&path);
    first
        .create_conversation("m", "planning_agent", None)
        .await
        .unwrap();
    let second = open(&path); // migrating an up-to-date database is a no-op
    drop(second);
    drop(first);
    let third = open(&path);
    assert!(third.conversation("m").await.unwrap().is_some());

    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        tables,
        ["conversations", "runs", "sqlite_sequence", "turns"]
    );
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_database_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let err = SqliteStore::open(&path).unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::StoreError);
    let message = err.to_string();
    assert!(message.contains("cmdr.sqlite3"), "{message}");
    assert!(
        !message.contains(&*dir.path().to_string_lossy()),
        "{message}"
    );
}

#[tokio::test]
async fn serializes_with_the_wire_names() {
    let store = SqliteStore::open_in_memory().unwrap();
    let conversation = store
        .create_conversation("s", "planning_agent", None)
        .await
        .unwrap();
    let json = serde_json::to_value(&conversation).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "agentName",
            "archived",
            "createdAt",
            "cwd",
            "id",
            "title",
            "updatedAt"
        ]
    );

    let plain = store.append_turn("s", &user("hi")).await.unwrap();
    let json = serde_json::to_value(&plain).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "content",
            "conversationId",
            "createdAt",
            "id",
            "role",
            "status",
            "updatedAt"
        ]
    );
    assert_eq!(json["role"], "user");
    assert_eq!(json["status"], "ok");

    let tool = every_kind_of_message().swap_remove(2);
    let tagged = Message {
        command: Some(CommandMeta {
            name: "c".into(),
            step_index: 2,
            total_steps: 5,
        }),
        ..tool
    };
    let turn = store.append_turn("s", &tagged).await.unwrap();
    let json = serde_json::to_value(&turn).unwrap();
    assert_eq!(json["command"]["stepIndex"], 2);
    assert_eq!(json["command"]["totalSteps"], 5);
    assert_eq!(json["toolRuns"][0]["commandId"], "cmd-1-0");
    assert_eq!(json["status"], "stopped");
    let back: StoredTurn = serde_json::from_value(json).unwrap();
    assert_eq!(back, turn);
}

#[tokio::test]
async fn in_memory_store_works_behind_the_trait() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .create_conversation("mem", "planning_agent", None)
        .await
        .unwrap();
    store.append_turn("mem", &user("one")).await.unwrap();
    store
        .append_turn("mem", &Message::new(Role::Assistant, "two"))
        .await
        .unwrap();
    assert_eq!(contents(&store.turns("mem").await.unwrap()), ["one", "two"]);
}

/// A run marker of a process that is gone (no such pid), as a SIGKILLed `cmdr` leaves it.
fn dead_owner() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    format!("{}:4194304999:1", boot.trim())
}

/// The store opens, migrates, reads and writes: opening a database (to list conversations,
/// say) never closes a dead process's run, and never kills the processes it left. Start-up
/// recovery, asked for, does both.
#[tokio::test]
async fn opening_a_database_never_kills_anything() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = open(&path);
    store
        .create_conversation("left-open", "planning_agent", None)
        .await
        .unwrap();
    store.append_turn("left-open", &user("go")).await.unwrap();
    drop(store);
    let owner = dead_owner();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO runs (conversation_id, owner, started_at) VALUES ('left-open', ?1, 'then')",
        [&owner],
    )
    .unwrap();
    drop(conn);
    // A shell the dead cmdr started, still running for nobody.
    let mut orphan = std::process::Command::new("sleep")
        .arg("600")
        .env(cmdr::orphans::OWNER_VAR, &owner)
        .spawn()
        .unwrap();

    let store = open(&path);
    let listed = store.conversations(None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(contents(&store.turns("left-open").await.unwrap()), ["go"]);
    assert_eq!(orphan.try_wait().unwrap(), None, "opening killed a process");
    let markers = store.run_markers().await.unwrap();
    assert_eq!(markers.len(), 1, "opening closed a run");

    let recovered = cmdr::recovery::recover(store.as_ref()).await.unwrap();
    assert_eq!(recovered.closed, markers);
    assert_eq!(recovered.killed, [orphan.id()]);
    let status = orphan.wait().unwrap();
    assert!(!status.success(), "the orphan was killed: {status}");
    let turns = store.turns("left-open").await.unwrap();
    assert_eq!(
        turns.iter().map(|t| (t.role, t.status)).collect::<Vec<_>>(),
        [
            (Role::User, TurnStatus::Ok),
            (Role::Assistant, TurnStatus::Stopped)
        ]
    );
    assert!(store.run_markers().await.unwrap().is_empty());
    // A second recovery finds nothing to do.
    let again = cmdr::recovery::recover(store.as_ref()).await.unwrap();
    assert_eq!(again, cmdr::recovery::Recovered::default());
}

/// The run locks of a database live beside its real path, named after it: the same
/// directory whichever path (a symbolic link, another spelling) opened it; none for a
/// database in memory, which no other process can open.
#[test]
fn the_lock_dir_is_beside_the_real_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let file = real.join("data/cmdr.sqlite3");
    let store = SqliteStore::open(&file).unwrap();
    let expected = real.join("data/cmdr.sqlite3.locks");
    assert_eq!(store.lock_dir(), Some(expected.clone()));
    drop(store);
    let link = real.join("link.sqlite3");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let through_link = SqliteStore::open(&link).unwrap();
    assert_eq!(through_link.lock_dir(), Some(expected));
    assert_eq!(SqliteStore::open_in_memory().unwrap().lock_dir(), None);
}
