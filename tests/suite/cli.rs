//! `cmdr exec` end to end: the real binary, real input files, real output.

use std::collections::HashMap;
use std::io::Write;
use std::process::Command as Process;

use assert_cmd::Command;
use cmdr_executors::{ExecutionStatus, OutputResult};

fn cmdr() -> Command {
    Command::cargo_bin("cmdr").unwrap()
}

fn results(stdout: &[u8]) -> Vec<OutputResult> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn by_id(results: &[OutputResult]) -> HashMap<String, Vec<OutputResult>> {
    let mut map: HashMap<String, Vec<OutputResult>> = HashMap::new();
    for r in results {
        map.entry(r.command_id.clone()).or_default().push(r.clone());
    }
    map
}

#[test]
fn one_json_argument_streams_results_as_json_lines() {
    let out = cmdr()
        .args([
            "exec",
            r#"{"command_id":"a1","commandType":"BASH_EXEC","command":"echo hi"}"#,
        ])
        .assert()
        .success();
    let results = results(&out.get_output().stdout);
    super::assert_one_terminal_last(&results);
    assert_eq!(super::data(&results), "hi\n");
    assert!(results.iter().all(|r| r.command_id == "a1"));
}

#[test]
fn a_malformed_line_fails_alone_and_the_rest_run() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        r#"{{"command_id":"ok-1","commandType":"BASH_EXEC","command":"echo one"}}"#
    )
    .unwrap();
    writeln!(
        file,
        r#"{{"command_id":"bad-1","commandType":"BASH_EXEC","command": oops}}"#
    )
    .unwrap();
    writeln!(file, r#"{{"command_id":"bad-2","commandType":"TELEPORT"}}"#).unwrap();
    writeln!(file).unwrap();
    writeln!(
        file,
        r#"{{"command_id":"ok-2","commandType":"LIST_DIRECTORY","path":"/"}}"#
    )
    .unwrap();
    let out = cmdr().arg("exec").arg(file.path()).assert().code(1);
    let results = by_id(&results(&out.get_output().stdout));
    assert_eq!(results.len(), 4, "{results:#?}");
    for id in ["ok-1", "ok-2"] {
        super::assert_one_terminal_last(&results[id]);
        assert_eq!(
            super::terminal(&results[id]).status,
            ExecutionStatus::Succeeded
        );
    }
    super::assert_failed(super::terminal(&results["bad-1"]), "MALFORMED_JSON");
    super::assert_failed(super::terminal(&results["bad-2"]), "UNKNOWN_COMMAND_TYPE");
}

/// A line of invalid UTF-8 fails alone (its id salvaged), a malformed line without a
/// readable id gets a generated one, and every other command still runs.
#[test]
fn a_line_of_invalid_utf8_or_without_an_id_fails_alone_under_an_id() {
    let mut input = Vec::new();
    input.extend_from_slice(
        b"{\"command_id\":\"ok-1\",\"commandType\":\"BASH_EXEC\",\"command\":\"echo one\"}\n",
    );
    input.extend_from_slice(b"{\"command_id\":\"bin\",\"commandType\":\"FILE_WRITE\",\"file_path\":\"/tmp/x\",\"content\":\"\xff\xfe\"}\n");
    input.extend_from_slice(b"\xc3\x28 no id at all\n");
    input.extend_from_slice(b"not json either\n");
    input.extend_from_slice(
        b"{\"command_id\":\"ok-2\",\"commandType\":\"BASH_EXEC\",\"command\":\"echo two\"}\n",
    );
    let out = cmdr()
        .args(["exec", "-"])
        .write_stdin(input)
        .assert()
        .code(1);
    let results = results(&out.get_output().stdout);
    let by_id = by_id(&results);
    for id in ["ok-1", "ok-2"] {
        assert_eq!(
            super::terminal(&by_id[id]).status,
            ExecutionStatus::Succeeded
        );
    }
    let bin = super::terminal(&by_id["bin"]);
    super::assert_failed(bin, "MALFORMED_JSON");
    assert!(
        bin.error.contains("UTF-8") && bin.error.contains("line 2"),
        "{bin:?}"
    );
    assert_eq!(bin.command_type, "FILE_WRITE");
    let anonymous: Vec<&OutputResult> = results
        .iter()
        .filter(|r| !["ok-1", "ok-2", "bin"].contains(&r.command_id.as_str()))
        .collect();
    assert_eq!(anonymous.len(), 2, "{results:#?}");
    for result in anonymous {
        super::assert_failed(result, "MALFORMED_JSON");
        assert_eq!(result.command_id.len(), 36, "a generated UUID: {result:?}");
    }
    assert_eq!(
        by_id.len(),
        5,
        "every input line is answered under its own id"
    );
}

#[test]
fn stdin_accepts_pretty_printed_objects_and_combine_prints_one_result_each() {
    let input = "{\n  \"command_id\": \"p1\",\n  \"commandType\": \"BASH_EXEC\",\n  \"command\": \"echo a; echo b\"\n}\n{\"command_id\":\"p2\",\"commandType\":\"BASH_EXEC\",\"command\":\"echo c\"}\n";
    let out = cmdr()
        .args(["exec", "-", "--combine"])
        .write_stdin(input)
        .assert()
        .success();
    let results = results(&out.get_output().stdout);
    assert_eq!(results.len(), 2);
    assert_eq!(
        (
            results[0].command_id.as_str(),
            results[0].result_data.as_str()
        ),
        ("p1", "a\nb\n")
    );
    assert_eq!(
        (
            results[1].command_id.as_str(),
            results[1].result_data.as_str()
        ),
        ("p2", "c\n")
    );
}

#[test]
fn jobs_run_commands_at_once_keeping_each_stream_in_order() {
    let input: String = (0..8)
        .map(|i| format!("{{\"command_id\":\"j{i}\",\"commandType\":\"BASH_EXEC\",\"command\":\"for k in 1 2 3; do echo {i}-$k; sleep 0.05; done\"}}\n"))
        .collect();
    let started = std::time::Instant::now();
    let out = cmdr()
        .args(["exec", "--jobs", "8"])
        .write_stdin(input)
        .assert()
        .success();
    let results = by_id(&results(&out.get_output().stdout));
    assert_eq!(results.len(), 8);
    for (id, messages) in &results {
        super::assert_one_terminal_last(messages);
        let i = id.trim_start_matches('j');
        assert_eq!(super::data(messages), format!("{i}-1\n{i}-2\n{i}-3\n"));
    }
    assert!(
        started.elapsed().as_secs_f64() < 8.0 * 0.15,
        "ran concurrently"
    );
}

#[test]
fn a_failing_command_makes_the_exit_status_non_zero() {
    cmdr()
        .args(["exec", r#"{"commandType":"BASH_EXEC","command":"exit 4"}"#])
        .assert()
        .code(1);
}

#[test]
fn an_unreadable_input_file_is_a_usage_error() {
    let out = cmdr()
        .args(["exec", "/no/such/commands.jsonl"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("/no/such/commands.jsonl"), "{stderr}");
    assert!(out.get_output().stdout.is_empty());
}

#[test]
fn user_input_without_a_terminal_fails_clearly() {
    let bin = assert_cmd::cargo::cargo_bin("cmdr");
    let out = Process::new("setsid")
        .arg(bin)
        .args([
            "exec",
            r#"{"command_id":"u1","commandType":"REQUEST_USER_INPUT","prompt":"name?"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let results = results(&out.stdout);
    let end = super::terminal(&results);
    super::assert_failed(end, "INPUT_UNAVAILABLE");
    assert!(end.error.contains("terminal"), "{end:?}");
}

#[test]
fn user_input_is_answered_on_the_terminal() {
    // `script` gives the child a pseudo-terminal; what we write to its stdin is typed there.
    let bin = assert_cmd::cargo::cargo_bin("cmdr");
    let json = r#"{"command_id":"u2","commandType":"REQUEST_USER_INPUT","prompt":"name?"}"#;
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{} exec --combine '{json}'", bin.display()),
            "/dev/null",
        ])
        .write_stdin("Ada\n")
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).replace('\r', "");
    let line = text
        .lines()
        .find_map(|l| l.find("{\"command_id\"").map(|i| &l[i..]))
        .expect("a result line");
    let result: OutputResult = serde_json::from_str(line).unwrap();
    assert_eq!(result.status, ExecutionStatus::Succeeded, "{text}");
    assert_eq!(result.result_data, "Ada");
    assert!(text.contains("name?"), "the prompt was shown: {text}");
}

/// After a question times out, the answer typed for the next one goes to the next one
/// (the timed-out question's reader must not swallow it). The answer is typed once the
/// second prompt is on the screen, which is after cmdr took its "shown" mark (see
/// `tty_input::tests::an_answer_typed_as_the_prompt_appears_answers_it`), so nothing here
/// races; the second question's long timeout only bounds a failing run on a busy machine.
#[test]
fn after_a_timed_out_question_the_next_answer_reaches_the_next_question() {
    let dir = tempfile::tempdir().unwrap();
    let commands = [
        serde_json::json!({"command_id": "q1", "commandType": "REQUEST_USER_INPUT",
            "prompt": "first?", "timeout_ms": 300}),
        serde_json::json!({"command_id": "q2", "commandType": "REQUEST_USER_INPUT",
            "prompt": "second?", "timeout_ms": 120000}),
    ];
    let file = dir.path().join("commands.jsonl");
    let lines: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("cmdr");
    let mut child = Process::new("script")
        .args([
            "-qec",
            &format!("{} exec --combine {}", bin.display(), file.display()),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut keyboard = child.stdin.take().unwrap();
    let mut screen = child.stdout.take().unwrap();
    // Type the answer once the second question is on the screen.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("second?") {
        let n = std::io::Read::read(&mut screen, &mut buf).unwrap();
        assert!(
            n > 0,
            "cmdr ended before asking: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    keyboard.write_all(b"Ada\n").unwrap();
    std::io::Read::read_to_end(&mut screen, &mut seen).unwrap();
    child.wait().unwrap();
    let text = String::from_utf8_lossy(&seen).replace('\r', "");
    let results: Vec<OutputResult> = text
        .lines()
        .filter_map(|l| l.find("{\"command_id\"").map(|i| &l[i..]))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = by_id(&results);
    assert_eq!(
        by_id["q1"][0].error_code.as_deref(),
        Some("TIMEOUT"),
        "{text}"
    );
    let q2 = &by_id["q2"][0];
    assert_eq!(q2.status, ExecutionStatus::Succeeded, "{text}");
    assert_eq!(q2.result_data, "Ada");
}

/// The attack: a shell pushes "yes" into cmdr's terminal (`TIOCSTI`), where cmdr reads the
/// answer to the next question. Shells get a session of their own when cmdr has a terminal,
/// so they have no terminal to push into; the question waits for the person (none here:
/// it times out).
#[test]
fn a_shell_cannot_type_the_answer_into_cmdrs_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let inject = r#"python3 -c 'import fcntl, termios
tty = open("/dev/tty", "rb")
for c in b"yes\n": fcntl.ioctl(tty, termios.TIOCSTI, bytes([c]))
print("injected")'"#;
    let commands = [
        serde_json::json!({"command_id": "inject", "commandType": "BASH_EXEC", "command": inject}),
        serde_json::json!({"command_id": "approve", "commandType": "REQUEST_USER_INPUT",
            "prompt": "Deploy?", "timeout_ms": 2000}),
    ];
    let file = dir.path().join("commands.jsonl");
    let lines: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("cmdr");
    let mut child = Process::new("script")
        .args([
            "-qec",
            &format!("{} exec --combine {}", bin.display(), file.display()),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The person types nothing, but the terminal stays open until cmdr is done.
    let _keyboard = child.stdin.take();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    child.wait().unwrap();
    let text = stdout.replace('\r', "");
    let results: Vec<OutputResult> = text
        .lines()
        .filter_map(|l| l.find("{\"command_id\"").map(|i| &l[i..]))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = by_id(&results);
    let inject = &by_id["inject"][0];
    assert!(!inject.result_data.contains("injected"), "{inject:?}");
    let approve = &by_id["approve"][0];
    assert_ne!(approve.result_data, "yes", "the shell answered: {text}");
    assert_eq!(approve.error_code.as_deref(), Some("TIMEOUT"), "{text}");
}

/// `cmdr exec --combine` keeps the head and tail of a long output within `--max-output`,
/// marks the cut and counts what it left out; `--max-output 0` keeps everything.
#[test]
fn exec_combine_is_bounded_by_max_output() {
    let command = r#"{"command_id":"long","commandType":"BASH_EXEC","command":"seq 1 100000"}"#;
    let all: String = (1..=100000).map(|i| format!("{i}\n")).collect();
    let out = cmdr()
        .args(["exec", "--combine", "--max-output", "1000", command])
        .assert()
        .success();
    let result = &results(&out.get_output().stdout)[0];
    assert_eq!(result.status, ExecutionStatus::Succeeded);
    assert!(result.result_data.starts_with(&all[..500]));
    assert!(result.result_data.ends_with(&all[all.len() - 500..]));
    assert!(result.result_data.contains("[OUTPUT_TRUNCATED: "));
    assert_eq!(result.truncated_bytes, Some((all.len() - 1000) as u64));
    let out = cmdr()
        .args(["exec", "--combine", "--max-output", "0", command])
        .assert()
        .success();
    let result = &results(&out.get_output().stdout)[0];
    assert_eq!(
        (result.result_data.len(), result.truncated_bytes),
        (all.len(), None)
    );
}

/// The environment shells get from `cmdr exec`: secrets and `CMDR_*` never by default,
/// and the `--env-*` flags build it as asked (`CMDR_*` stays out whatever they say).
#[test]
fn exec_builds_the_shell_environment_by_policy() {
    let env_of = |flags: &[&str]| -> String {
        let out = cmdr()
            .arg("exec")
            .args(flags)
            .args([
                "--combine",
                r#"{"commandType":"BASH_EXEC","command":"env"}"#,
            ])
            .env("GITHUB_TOKEN", "ghp-secret")
            .env("CMDR_LLM_API_KEY", "sk-secret")
            .env("MY_SETTING", "visible")
            .assert()
            .success();
        results(&out.get_output().stdout)[0].result_data.clone()
    };
    let default = env_of(&[]);
    assert!(default.contains("MY_SETTING=visible"), "{default}");
    assert!(
        !default.contains("ghp-secret") && !default.contains("sk-secret"),
        "{default}"
    );
    let kept = env_of(&["--env-keep-secrets"]);
    assert!(kept.contains("GITHUB_TOKEN=ghp-secret"), "{kept}");
    assert!(!kept.contains("sk-secret"), "CMDR_* never passes: {kept}");
    let core = env_of(&["--env-inherit", "core", "--env-set", "ADDED=1"]);
    assert!(core.contains("PATH=") && core.contains("ADDED=1"), "{core}");
    assert!(!core.contains("MY_SETTING"), "{core}");
    let excluded = env_of(&["--env-exclude", "my_*"]);
    assert!(!excluded.contains("MY_SETTING"), "{excluded}");
    cmdr()
        .args(["exec", "--env-inherit", "some", "{}"])
        .assert()
        .code(2);
}

/// Issue 32: credentials under names that do not say "key" or "token" (an SSH agent
/// socket, a `*_PAT`, npm's auth, a proxy or database URL with a password, a DSN, a webhook
/// URL) stay out of the shell by default; `--env-keep-secrets` brings them back.
#[test]
fn exec_keeps_credentials_under_other_names_out_of_the_shell() {
    let secrets = [
        ("SSH_AUTH_SOCK", "/tmp/agent-sock-secret"),
        ("GH_PAT", "github_pat_secret"),
        ("NPM_CONFIG__AUTH", "npm-auth-secret"),
        (
            "npm_config_//registry.npmjs.org/:_authToken",
            "npm-token-secret",
        ),
        ("HTTPS_PROXY", "http://user:proxy-secret@proxy.invalid:3128"),
        ("REDIS_URL", "redis://:redis-secret@cache.invalid:6379"),
        ("SENTRY_DSN", "https://dsn-secret@o1.invalid/1"),
        ("DATABASE_URL", "postgres://app@db.invalid/database-secret"),
        (
            "SLACK_WEBHOOK_URL",
            "https://hooks.invalid/services/webhook-secret",
        ),
    ];
    let env_of = |flags: &[&str]| -> String {
        let mut command = cmdr();
        command.arg("exec").args(flags).args([
            "--combine",
            r#"{"commandType":"BASH_EXEC","command":"env"}"#,
        ]);
        for (name, value) in secrets {
            command.env(name, value);
        }
        command.env("HTTP_PROXY", "http://proxy.invalid:3128");
        command.env("GIT_AUTHOR_NAME", "Ada");
        let out = command.assert().success();
        results(&out.get_output().stdout)[0].result_data.clone()
    };
    let default = env_of(&[]);
    for (name, value) in secrets {
        assert!(
            !default.contains(value),
            "{name} reached the shell: {default}"
        );
    }
    assert!(
        default.contains("HTTP_PROXY=http://proxy.invalid:3128")
            && default.contains("GIT_AUTHOR_NAME=Ada"),
        "{default}"
    );
    let kept = env_of(&["--env-keep-secrets"]);
    for (name, value) in secrets {
        assert!(kept.contains(&format!("{name}={value}")), "{name}: {kept}");
    }
}

#[test]
fn every_subcommand_has_help() {
    cmdr().arg("--help").assert().success();
    cmdr().args(["exec", "--help"]).assert().success();
}

#[test]
fn allow_root_confines_exec_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let inside = root_path.join("in.txt");
    let input = format!(
        "{}\n{}\n",
        serde_json::json!({"command_id":"in","commandType":"FILE_WRITE","file_path":inside,"content":"x"}),
        serde_json::json!({"command_id":"out","commandType":"FILE_READ","file_path":"/etc/hostname"}),
    );
    let out = cmdr()
        .args(["exec", "--allow-root"])
        .arg(&root_path)
        .arg("-")
        .write_stdin(input)
        .assert()
        .code(1);
    let output = out.get_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("commands confined to {}", root_path.display())),
        "{stderr}"
    );
    let results = by_id(&results(&output.stdout));
    assert_eq!(
        results["in"].last().unwrap().status,
        ExecutionStatus::Succeeded
    );
    let denied = results["out"].last().unwrap();
    assert_eq!(
        denied.error_code.as_deref(),
        Some("PATH_NOT_ALLOWED"),
        "{denied:?}"
    );
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "x");
}

#[test]
fn an_unusable_allow_root_is_a_usage_error() {
    let out = cmdr()
        .args(["exec", "--allow-root", "/definitely/not/here", "{}"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--allow-root /definitely/not/here"),
        "{stderr}"
    );
}

/// `--session-idle-secs` ends a shell session unused that long: the session's next command
/// runs in a new shell (a new pid), where without it the same shell goes on.
#[test]
fn session_idle_secs_ends_an_unused_session() {
    let session = |id: &str| {
        serde_json::json!({"command_id": id, "commandType": "BASH_EXEC", "session": "s",
                           "command": "echo $$"})
        .to_string()
    };
    let pause = serde_json::json!({"command_id": "pause", "commandType": "BASH_EXEC",
                                   "command": "sleep 3"})
    .to_string();
    let input = format!("{}\n{pause}\n{}\n", session("first"), session("second"));
    let pids = |extra: &[&str]| -> (String, String) {
        let out = cmdr()
            .args(["exec", "--combine"])
            .args(extra)
            .arg("-")
            .write_stdin(input.clone())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let results: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let pid = |id: &str| {
            results
                .iter()
                .find(|r| r["command_id"] == id)
                .and_then(|r| r["resultData"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        (pid("first"), pid("second"))
    };
    let (first, second) = pids(&["--session-idle-secs", "1"]);
    assert!(!first.is_empty() && !second.is_empty());
    assert_ne!(first, second, "the idle session was not ended");
    let (first, second) = pids(&[]);
    assert_eq!(
        first, second,
        "the session ended without being idle for long"
    );
}
