//! What `cmdr exec` writes its results to: a pipe, a socket or a file it was given, each
//! left as it was given (the descriptor's flags are shared with whoever gave it), every
//! line arriving in order, a reader that stops reading stalling nothing but the printing
//! (the commands' timeouts still fire), and a reader that goes away ending the run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use cmdr_executors::{ExecutionStatus, OutputResult};
use cmdr_test_support::http::gone;
use nix::fcntl::{fcntl, FcntlArg, OFlag};

/// A command printing one short line.
const HELLO: &str = r#"{"command_id":"hi","commandType":"BASH_EXEC","command":"echo hello"}"#;

fn cmdr(json: &str, stdout: impl Into<Stdio>) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("cmdr"))
        .args(["exec", json])
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn results(text: &[u8]) -> Vec<OutputResult> {
    String::from_utf8_lossy(text)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// Reads everything `reader` gets: the results of [`HELLO`], whole.
fn assert_hello(reader: &mut impl Read) {
    let mut text = Vec::new();
    reader.read_to_end(&mut text).unwrap();
    let results = results(&text);
    super::assert_one_terminal_last(&results);
    assert_eq!(super::data(&results), "hello\n");
}

fn non_blocking(fd: impl AsFd) -> bool {
    let flags = fcntl(fd, FcntlArg::F_GETFL).unwrap();
    OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK)
}

#[test]
fn a_pipe_is_written_without_changing_the_descriptor_it_was_given() {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = cmdr(HELLO, writer.try_clone().unwrap());
    assert!(child.wait().unwrap().success());
    // The write end cmdr was given is shared with this process: a shell's next command
    // would get EAGAIN from a description left non-blocking.
    assert!(
        !non_blocking(&writer),
        "cmdr left the pipe it was given non-blocking"
    );
    drop(writer);
    assert_hello(&mut reader);
}

#[test]
fn a_socket_is_written_without_changing_the_descriptor_it_was_given() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = cmdr(HELLO, OwnedFd::from(theirs.try_clone().unwrap()));
    assert!(child.wait().unwrap().success());
    assert!(
        !non_blocking(&theirs),
        "cmdr left the socket it was given non-blocking"
    );
    drop(theirs);
    assert_hello(&mut &ours);
}

#[test]
fn a_file_opened_for_appending_is_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    std::fs::write(&path, "before\n").unwrap();
    let file = OpenOptions::new().append(true).open(&path).unwrap();
    let mut child = cmdr(HELLO, file);
    assert!(child.wait().unwrap().success());
    let mut file = File::options().append(true).open(&path).unwrap();
    writeln!(file, "after").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"before"), "{text}");
    assert_eq!(lines.last(), Some(&"after"), "{text}");
    let middle = lines.get(1..lines.len() - 1).unwrap_or_default().join("\n");
    let results = results(middle.as_bytes());
    super::assert_one_terminal_last(&results);
    assert_eq!(super::data(&results), "hello\n");
}

#[test]
fn output_past_what_is_written_from_the_runtime_arrives_whole_and_in_order() {
    let json = r#"{"commandType":"BASH_EXEC","command":"seq 1 200000"}"#;
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = cmdr(json, writer);
    let mut text = Vec::new();
    reader.read_to_end(&mut text).unwrap();
    assert!(child.wait().unwrap().success());
    let results = results(&text);
    super::assert_one_terminal_last(&results);
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert!(
        super::data(&results) == expected,
        "the output differs from seq's"
    );
}

/// A pipe given read-only as stdout stays unwritten: reopening it for writing would turn a
/// descriptor cmdr may only read into one it writes (the results go nowhere, as they
/// always did with such a stdout).
#[test]
fn a_pipe_given_read_only_is_not_written() {
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = cmdr(HELLO, reader.try_clone().unwrap());
    child.wait().unwrap();
    drop(writer);
    let mut text = Vec::new();
    (&reader).read_to_end(&mut text).unwrap();
    assert!(
        text.is_empty(),
        "cmdr wrote into the read end it was given: {:?}",
        String::from_utf8_lossy(&text)
    );
}

/// The reader's pipe holds one page and nobody reads it: the printer waits, and the
/// command's timeout still ends the command (a printer blocking the runtime would leave
/// the shell running).
#[tokio::test]
async fn a_reader_that_stops_reading_does_not_stop_a_commands_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let json = serde_json::json!({
        "commandType": "BASH_EXEC",
        "command": format!(
            "echo $$ > {}; head -c 20000 /dev/zero | tr '\\0' a; exec sleep 300",
            pid_file.display()
        ),
        "timeout_ms": 1000,
    })
    .to_string();
    let (mut reader, writer) = std::io::pipe().unwrap();
    fcntl(&writer, FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let mut child = cmdr(&json, writer);
    let pid = shell_pid(&pid_file).await;
    super::eventually("the timed-out shell was killed", || gone(pid)).await;
    let mut text = Vec::new();
    reader.read_to_end(&mut text).unwrap();
    assert!(!child.wait().unwrap().success());
    let results = results(&text);
    super::assert_one_terminal_last(&results);
    let last = super::terminal(&results);
    assert_eq!(last.status, ExecutionStatus::Failed, "{last:?}");
    assert_eq!(last.error_code.as_deref(), Some("TIMEOUT"), "{last:?}");
    assert_eq!(super::data(&results), "a".repeat(20_000));
}

/// A reader that goes away mid-command (an agent killed): cmdr sees it at its next line,
/// ends with a failure and stops the command, over a pipe and over a socket.
#[tokio::test]
async fn a_reader_that_goes_away_ends_the_run_and_its_command() {
    for over_socket in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let json = serde_json::json!({
            "commandType": "BASH_EXEC",
            "command": format!(
                "echo $$ > {}; while :; do echo tick; sleep 0.05; done",
                pid_file.display()
            ),
        })
        .to_string();
        let (mut child, reader): (_, Box<dyn std::any::Any>) = if over_socket {
            let (ours, theirs) = UnixStream::pair().unwrap();
            (cmdr(&json, OwnedFd::from(theirs)), Box::new(ours))
        } else {
            let (reader, writer) = std::io::pipe().unwrap();
            (cmdr(&json, writer), Box::new(reader))
        };
        let pid = shell_pid(&pid_file).await;
        drop(reader);
        let mut status = None;
        super::eventually("cmdr ended", || {
            status = child.try_wait().unwrap();
            status.is_some()
        })
        .await;
        assert!(
            !status.is_some_and(|s| s.success()),
            "socket: {over_socket}"
        );
        super::eventually("the command was stopped", || gone(pid)).await;
    }
}

/// The pid a command's shell wrote to `file`, once it has.
async fn shell_pid(file: &std::path::Path) -> i32 {
    let mut pid = None;
    super::eventually("the shell wrote its pid", || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        pid.is_some()
    })
    .await;
    pid.unwrap_or_default()
}
