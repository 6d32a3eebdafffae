//! An agent run whose turns cannot be saved (issue 32.18), on a real full file system: the
//! database of a real `cmdr serve` lives on a 1 MiB tmpfs, which a filler file fills up
//! once the server has opened it. The run must not say `completed`: it ends with an
//! `error` event `STORE_ERROR` saying its turns were not saved.
//!
//! The tmpfs is mounted where the server keeps its database (`<dir>/data`); mounting needs
//! root, as the other disk-full test does (which uses a mount namespace of `cmdr exec`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};
use crate::serve::{db, Options, Serve};

/// A 1 MiB tmpfs on a directory, unmounted (lazily) when dropped.
struct SmallTmpfs {
    dir: PathBuf,
}

impl SmallTmpfs {
    fn mount(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "cmdr-run-disk-full"])
            .arg(dir)
            .status()
            .unwrap_or_else(|e| panic!("cannot run mount for the disk-full run test: {e}"));
        assert!(
            status.success(),
            "cannot mount a 1 MiB tmpfs for this test ({status}); it needs root"
        );
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Writes a filler file until the file system says it is full.
    fn fill(&self) {
        let mut filler = std::fs::File::create(self.dir.join("filler")).unwrap();
        let block = vec![b'x'; 4096];
        loop {
            match filler.write_all(&block).and_then(|()| filler.flush()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling the tmpfs failed otherwise: {e}"),
            }
        }
        let _ = filler.sync_all();
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_turns_cannot_be_saved_does_not_say_completed() {
    let dir = tempfile::tempdir().unwrap();
    let data = db(dir.path()).parent().unwrap().to_path_buf();
    let tmpfs = SmallTmpfs::mount(&data);
    // A long answer: its turn needs pages the full disk cannot give.
    let answer = "All done. ".repeat(20_000);
    let llm = FakeLlm::start(vec![Reply::text("Hello."), Reply::text(&answer)]).await;
    let serve = Serve::start_in(
        dir.path(),
        Options {
            llm: Some(&llm),
            ..Options::default()
        },
    )
    .await;
    // The conversation is created while there is room; then the disk fills up.
    let first = serve
        .sse("/agents/helper/stream", json!({"message": "hello"}))
        .await
        .all()
        .await;
    assert_eq!(first.last().unwrap()["type"], "done", "{first:?}");
    let id = first[0]["conversationId"].as_str().unwrap().to_owned();
    tmpfs.fill();

    let events = serve
        .sse(
            "/agents/helper/stream",
            json!({"message": "say you are done", "conversationId": id}),
        )
        .await
        .all()
        .await;
    let last = events.last().expect("the run answers");
    assert_ne!(
        last["type"], "done",
        "a run on a full disk said done: {last}"
    );
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["code"], "STORE_ERROR", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(message.contains("not saved"), "{message}");
    drop(serve);
}

/// `cmdr chat` on a full disk: a turn whose messages were not saved says so
/// (`STORE_ERROR` on stderr) and the chat exits 1, instead of a quiet `completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_that_cannot_be_saved_says_so() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tmpfs = SmallTmpfs::mount(&data);
    let answer = "All done. ".repeat(20_000);
    let llm = FakeLlm::start(vec![Reply::text("Hello."), Reply::text(&answer)]).await;
    let mut chat = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"))
        .arg("chat")
        .arg("--db")
        .arg(data.join("cmdr.db"))
        .arg("--working-folder")
        .arg(dir.path())
        .env("CMDR_LLM_BASE_URL", llm.base_url())
        .env("CMDR_LLM_MODEL", "fake-model")
        .env_remove("CMDR_LLM_API_KEY")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    let mut stdout = BufReader::new(chat.stdout.take().unwrap()).lines();
    stdin.write_all(b"hello\n").await.unwrap();
    tokio::time::timeout(crate::PATIENCE, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if line.contains("Hello.") {
                return;
            }
        }
        panic!("the chat ended before answering");
    })
    .await
    .expect("the first answer");
    // The conversation is saved; now the disk is full for the next turn.
    tmpfs.fill();
    stdin.write_all(b"more\n").await.unwrap();
    drop(stdin);
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    let out = tokio::time::timeout(crate::PATIENCE, chat.wait_with_output())
        .await
        .expect("the chat ends at the end of its input")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("STORE_ERROR"), "{stderr}");
    assert!(stderr.contains("not saved"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}
