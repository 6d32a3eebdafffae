//! One Landlock domain per scope (`--landlock`; docs/confinement.md, "One Landlock domain
//! per scope"), attacked with real processes: a shell run for one client cannot signal,
//! trace (`/proc/<pid>/fd`, `environ`) or reach the abstract Unix sockets of another
//! client's processes, nor signal or trace cmdr; within its own scope everything still
//! works. Where the kernel lacks Landlock's scoping (ABI < 6) the tests say so and stop.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cmdr_executors::{
    ExecutionStatus, OutputResult, PathPolicy, ProcessState, Registry, RegistryConfig, Scope,
};
use serde_json::{json, Value};

use cmdr_test_support::results::run_in;

use super::{data, terminal, PATIENCE};

/// A root to confine to, and a registry confined to it with Landlock.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    registry: Registry,
}

/// The world, or `None` (with the reason printed) when this kernel cannot scope domains.
fn world() -> Option<World> {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let registry = Registry::with_config(RegistryConfig {
        paths: PathPolicy::allow_roots([&root]).unwrap(),
        landlock: true,
        ..RegistryConfig::default()
    });
    let status = registry.confinement().landlock.clone().unwrap().to_string();
    // Never claimed where not enforced: the status names what is missing.
    if status.starts_with("not enforced") || status.contains("signals") {
        eprintln!("SKIPPED: this kernel cannot scope Landlock domains: {status}");
        return None;
    }
    Some(World {
        _tmp: tmp,
        root,
        registry,
    })
}

impl World {
    /// Runs `json` in `scope`: its terminal result and all its output.
    async fn run(&self, scope: &Scope, json: Value) -> (OutputResult, String) {
        let messages = run_in(&self.registry, scope.clone(), json).await;
        (terminal(&messages).clone(), data(&messages))
    }

    /// Runs the one-shot `script` in `scope` (in the root): all its output.
    async fn sh(&self, scope: &Scope, script: &str) -> String {
        let json = json!({"commandType": "BASH_EXEC", "command": script, "working_dir": self.root});
        self.run(scope, json).await.1
    }

    /// Starts `script` in the background in `scope`; its process id.
    async fn start(&self, scope: &Scope, script: &str) -> String {
        let json = json!({"commandType": "BASH_EXEC", "command": script, "background": true,
                          "yield_ms": 0, "working_dir": self.root});
        let (end, _) = self.run(scope, json).await;
        assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
        end.process_id.expect("a process id")
    }

    /// Reads the output of process `id` of `scope` until it holds `key=<number>`: that
    /// number.
    async fn number(&self, scope: &Scope, id: &str, key: &str) -> u32 {
        let deadline = Instant::now() + PATIENCE;
        let mut text = String::new();
        let mut offset = 0;
        loop {
            if let Some(n) = number_after(&text, key) {
                return n;
            }
            assert!(Instant::now() < deadline, "no {key} in {text:?}");
            let json = json!({"commandType": "PROCESS_OUTPUT", "process_id": id,
                              "offset": offset, "wait_ms": 1000});
            let (read, _) = self.run(scope, json).await;
            assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:#?}");
            text.push_str(&read.result_data);
            offset = read.next_offset.expect("a next offset");
        }
    }

    /// Whether process `id` of `scope` still runs.
    fn running(&self, scope: &Scope, id: &str) -> bool {
        let process = self.registry.processes().get(scope, id).unwrap();
        process.state() == ProcessState::Running
    }
}

/// The number after `key=` in `text`, once the line holding it is complete.
fn number_after(text: &str, key: &str) -> Option<u32> {
    let rest = text.split(&format!("{key}=")).nth(1)?;
    let line = rest.split_once('\n')?.0;
    line.trim().parse().ok()
}

/// A script that tries, on `pid`, as `user` (a command prefix; empty: the shell's own
/// user), a signal 0, following one of its descriptors, reading its environment and (last)
/// a SIGTERM (with `term`; else another signal 0); one line per attempt, `<what>:ok` or
/// `<what>:<error>`.
fn attempts(pid: u32, term: bool, user: &str) -> String {
    let signal = if term { "-TERM" } else { "-0" };
    format!(
        "try() {{ local what=$1; shift; if out=$(\"$@\" 2>&1 >/dev/null); then echo \"$what:ok\"; \
         else echo \"$what:${{out:-failed}}\"; fi; }}; \
         try signal0 {user}kill -0 {pid}; try fd {user}readlink -v /proc/{pid}/fd/1; \
         try environ {user}cat /proc/{pid}/environ; try signal {user}kill {signal} {pid}"
    )
}

/// Whether the tests run as root.
fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A prefix running a command as `nobody`, when the tests run as root (and `setpriv` is
/// there): a victim and its attacker of the same unprivileged user, so that Landlock is
/// all that stands between them, as for cmdr run unprivileged. Empty otherwise.
fn unprivileged() -> &'static str {
    if root() && which("setpriv").is_some() {
        "setpriv --reuid=65534 --regid=65534 --clear-groups "
    } else {
        ""
    }
}

/// The line of `output` that starts with `what:`.
fn line<'a>(output: &'a str, what: &str) -> &'a str {
    output
        .lines()
        .find(|l| l.starts_with(&format!("{what}:")))
        .unwrap_or_else(|| panic!("no {what} in {output:?}"))
}

/// Asserts the kernel refused every attempt of [`attempts`] in `output`; the one on the
/// environment only with `environ` (root reads another domain's `environ` on Linux 6.18:
/// docs/confinement.md).
fn assert_refused(output: &str, whose: &str, environ: bool) {
    for what in ["signal0", "signal"] {
        let l = line(output, what);
        assert!(l.contains("Operation not permitted"), "{whose}: {l:?}");
    }
    let reads: &[&str] = if environ { &["fd", "environ"] } else { &["fd"] };
    for what in reads {
        let l = line(output, what);
        assert!(
            l.contains("Permission denied"),
            "{whose}: {l:?} in {output:?}"
        );
    }
}

#[tokio::test]
async fn a_shell_cannot_signal_or_trace_another_scopes_processes() {
    let Some(w) = world() else { return };
    let (alice, mallory) = (Scope::new("mcp:alice"), Scope::new("mcp:mallory"));
    let user = unprivileged();
    let victim = w
        .start(
            &alice,
            &format!("export SECRET_OF_ALICE=hunter2; echo pid=$$; exec {user}sleep 300"),
        )
        .await;
    let pid = w.number(&alice, &victim, "pid").await;
    // Alice's session shell too.
    let session = json!({"commandType": "BASH_EXEC", "command": "echo shell=$$", "session": "dev",
                         "working_dir": w.root});
    let (_, said) = w.run(&alice, session).await;
    let shell = number_after(&said, "shell").expect("the session's pid");

    // The session shell runs as the tests do (root here: its environment is not checked).
    let targets = [
        (pid, "background process", user, !root() || !user.is_empty()),
        (shell, "session shell", "", !root()),
    ];
    for (target, whose, user, environ) in targets {
        let attack = attempts(target, true, user);
        // From a one-shot command, a background process and a session of another scope.
        let output = w.sh(&mallory, &attack).await;
        assert_refused(&output, whose, environ);
        let spy = w.start(&mallory, &format!("{attack}; echo done=1")).await;
        w.number(&mallory, &spy, "done").await;
        let json = json!({"commandType": "PROCESS_OUTPUT", "process_id": spy, "offset": 0});
        let (read, _) = w.run(&mallory, json).await;
        assert_refused(&read.result_data, whose, environ);
        let json = json!({"commandType": "BASH_EXEC", "command": attack,
                          "session": "spy", "working_dir": w.root});
        let (_, output) = w.run(&mallory, json).await;
        assert_refused(&output, whose, environ);
    }
    // Both still run, untouched, and the secret never left.
    assert!(w.running(&alice, &victim));
    let (end, said) = w
        .run(
            &alice,
            json!({"commandType": "BASH_EXEC", "command": "echo alive", "session": "dev"}),
        )
        .await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?} {said}");
    assert!(said.contains("alive"), "{said}");
}

#[tokio::test]
async fn a_shell_cannot_signal_or_trace_cmdr_itself() {
    let Some(w) = world() else { return };
    let cmdr = std::process::id();
    // Only a harmless signal 0 is tried on the test process (cmdr's host here).
    for scope in [Scope::new("http"), Scope::default()] {
        let output = w.sh(&scope, &attempts(cmdr, false, "")).await;
        assert_refused(&output, &format!("cmdr, from {scope}"), !root());
        // And from a background process.
        let spy = w
            .start(
                &scope,
                &format!("{}; echo done=1", attempts(cmdr, false, "")),
            )
            .await;
        w.number(&scope, &spy, "done").await;
        let json = json!({"commandType": "PROCESS_OUTPUT", "process_id": spy, "offset": 0});
        let (read, _) = w.run(&scope, json).await;
        assert_refused(
            &read.result_data,
            "cmdr, from a background process",
            !root(),
        );
    }
}

#[tokio::test]
async fn a_scope_still_signals_and_traces_its_own_earlier_processes() {
    let Some(w) = world() else { return };
    let alice = Scope::new("conversation:alice");
    // A background process, and a job a one-shot command left running.
    let user = unprivileged();
    let job = w
        .start(
            &alice,
            &format!("export MINE=1; echo pid=$$; exec {user}sleep 300"),
        )
        .await;
    let pid = w.number(&alice, &job, "pid").await;
    let said = w
        .sh(
            &alice,
            &format!("{user}nohup sleep 300 >/dev/null 2>&1 & echo stray=$!"),
        )
        .await;
    let stray = number_after(&said, "stray").expect("the stray's pid");
    for target in [pid, stray] {
        let output = w.sh(&alice, &attempts(target, true, user)).await;
        for what in ["signal0", "signal", "fd", "environ"] {
            assert_eq!(line(&output, what), format!("{what}:ok"), "{output}");
        }
    }
    let process = w.registry.processes().get(&alice, &job).unwrap();
    process.wait_exit(PATIENCE).await;
    assert_eq!(process.state().signal_name().as_deref(), Some("TERM"));
}

/// A Python program listening on the abstract Unix socket named by its argument.
const LISTEN: &str = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
s.bind(chr(0)+sys.argv[1])\n\
s.listen(8)\n\
print(\"listening=1\",flush=True)\n\
while True:\n    c,_=s.accept()\n    c.sendall(b\"hello\")\n    c.close()\n";

/// A Python program connecting to the abstract Unix socket named by its argument.
const CONNECT: &str = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect(chr(0)+sys.argv[1])\n    print(\"connected:\"+s.recv(16).decode())\n\
except OSError as e:\n    print(\"refused:\"+e.strerror)\n";

#[tokio::test]
async fn a_shell_cannot_reach_another_scopes_abstract_socket() {
    let Some(w) = world() else { return };
    if which("python3").is_none() {
        eprintln!("SKIPPED: no python3 to listen on an abstract socket");
        return;
    }
    let (alice, mallory) = (Scope::new("mcp:alice"), Scope::new("mcp:mallory"));
    let name = format!("cmdr-test-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(w.root.join("listen.py"), LISTEN).unwrap();
    std::fs::write(w.root.join("connect.py"), CONNECT).unwrap();
    let listener = w
        .start(&alice, &format!("exec python3 listen.py {name}"))
        .await;
    w.number(&alice, &listener, "listening").await;
    let connect = format!("python3 connect.py {name}");
    let theirs = w.sh(&mallory, &connect).await;
    assert!(
        theirs.contains("refused:Operation not permitted"),
        "{theirs:?}"
    );
    let mine = w.sh(&alice, &connect).await;
    assert!(mine.contains("connected:hello"), "{mine:?}");
}

/// `program` on cmdr's `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

#[tokio::test]
async fn a_domain_ends_with_its_scope_and_a_new_one_serves_the_scope_after() {
    let Some(w) = world() else { return };
    let (alice, bob) = (Scope::new("mcp:alice"), Scope::new("mcp:bob"));
    assert_eq!(w.registry.landlock_domains(), 0, "started lazily");
    w.sh(&alice, "true").await;
    w.sh(&bob, "true").await;
    w.sh(&alice, "true").await;
    assert_eq!(w.registry.landlock_domains(), 2, "one per scope");
    w.registry.end_scope(&bob).await;
    assert_eq!(w.registry.landlock_domains(), 1);
    let output = w.sh(&bob, "echo again").await;
    assert!(output.contains("again"), "{output:?}");
    assert_eq!(w.registry.landlock_domains(), 2);
}

/// What a spawn costs: the median of `n` one-shot `true` commands of one scope, and of
/// `n` commands each in a new scope (a new domain: a thread, a ruleset).
async fn spawn_cost(registry: &Registry, dir: &Path, n: usize) -> (Duration, Duration) {
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut same = Vec::new();
    let mut fresh = Vec::new();
    for i in 0..n {
        for (scope, into) in [
            (Scope::new("bench"), &mut same),
            (Scope::new(format!("bench:{i}")), &mut fresh),
        ] {
            let started = Instant::now();
            let end = terminal(
                &run_in(
                    registry,
                    scope,
                    json!({"commandType": "BASH_EXEC", "command": "true", "working_dir": dir}),
                )
                .await,
            )
            .clone();
            into.push(started.elapsed());
            assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
        }
    }
    (median(same), median(fresh))
}

/// What a spawn costs when 8 commands of one scope start at once: the wall time of `n`
/// batches of 8 one-shot `true` commands, per command.
async fn parallel_cost(registry: &Registry, dir: &Path, n: u32) -> Duration {
    let started = Instant::now();
    let scope = Scope::new("bench");
    for _ in 0..n {
        let batch = (0..8).map(|_| {
            run_in(
                registry,
                scope.clone(),
                json!({"commandType": "BASH_EXEC", "command": "true", "working_dir": dir}),
            )
        });
        for messages in futures_util::future::join_all(batch).await {
            let end = terminal(&messages);
            assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
        }
    }
    started.elapsed() / (8 * n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p cmdr-executors --test executors spawn_cost -- --ignored --nocapture"]
async fn spawn_cost_with_and_without_scope_domains() {
    let Some(w) = world() else { return };
    let plain = Registry::with_defaults();
    let n = 200;
    let (plain_same, _) = spawn_cost(&plain, &w.root, n).await;
    let (same, fresh) = spawn_cost(&w.registry, &w.root, n).await;
    eprintln!(
        "median one-shot `true`, {n} runs: no Landlock {plain_same:?}; Landlock, a scope's \
         domain already up {same:?}; Landlock, each command in a new scope {fresh:?}"
    );
    let plain_parallel = parallel_cost(&plain, &w.root, 25).await;
    let parallel = parallel_cost(&w.registry, &w.root, 25).await;
    eprintln!(
        "8 at once in one scope, per command: no Landlock {plain_parallel:?}; Landlock {parallel:?}"
    );
    assert!(
        fresh < same + Duration::from_millis(20),
        "{fresh:?} {same:?}"
    );
}

#[tokio::test]
async fn a_shell_inherits_no_descriptor_of_another_scope() {
    let Some(w) = world() else { return };
    let (alice, mallory) = (Scope::new("mcp:alice"), Scope::new("mcp:mallory"));
    // Alice holds a terminal, pipes, and output spilled to a file (past 256 KiB in memory).
    let json = json!({"commandType": "BASH_EXEC", "command": "echo ready=1; exec sleep 300",
                      "background": true, "tty": true, "yield_ms": 0, "working_dir": w.root});
    let (end, _) = w.run(&alice, json).await;
    let tty = end.process_id.expect("a tty process");
    w.number(&alice, &tty, "ready").await;
    let spill = w
        .start(
            &alice,
            "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo done=1; exec sleep 300",
        )
        .await;
    w.number(&alice, &spill, "done").await;
    // Mallory's shells (one-shot and background) hold their stdio and nothing else.
    // Each descriptor of the shell and what it is (listed by a child, `ls`, so that the
    // listing itself adds none to the shell).
    let list = "ls -l /proc/$$/fd";
    let one_shot = w.sh(&mallory, list).await;
    let background = w.start(&mallory, &format!("{list}; echo done=1")).await;
    w.number(&mallory, &background, "done").await;
    let json = json!({"commandType": "PROCESS_OUTPUT", "process_id": background, "offset": 0});
    let (read, _) = w.run(&mallory, json).await;
    for output in [one_shot, read.result_data] {
        let fds: Vec<&str> = output
            .lines()
            .filter_map(|l| l.split_once(" -> "))
            .map(|(name, _)| name.rsplit(' ').next().unwrap_or(name))
            .collect();
        // stdio, and a one-shot command's report socket (a copy of its stdin).
        assert!(fds.len() >= 3, "{output:?}");
        let others: Vec<&&str> = fds
            .iter()
            .filter(|fd| !["0", "1", "2", "600"].contains(fd))
            .collect();
        assert!(others.is_empty(), "descriptors beyond stdio: {output:?}");
    }
}
