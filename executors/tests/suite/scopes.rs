//! Process scopes (docs/processes.md, "Scopes") through a real registry and real
//! processes: a scope never sees, reads, writes to, kills or lists another scope's
//! processes or sessions; each scope has its own limit; ending a scope kills its whole
//! trees and nothing else.

use std::time::Duration;

use cmdr_executors::{
    ExecutionStatus, OutputResult, ProcessLimits, Registry, RegistryConfig, Scope,
};
use serde_json::{json, Value};

use cmdr_test_support::http::gone;
use cmdr_test_support::results::run_in;

use super::{assert_failed, data, eventually, terminal, PATIENCE};

async fn one(registry: &Registry, scope: &Scope, json: Value) -> OutputResult {
    terminal(&run_in(registry, scope.clone(), json).await).clone()
}

/// Runs `command` in session `dev` of `scope`: its terminal result and all its output.
async fn in_session(registry: &Registry, scope: &Scope, command: &str) -> (OutputResult, String) {
    let json = json!({"commandType": "BASH_EXEC", "command": command, "session": "dev"});
    let messages = run_in(registry, scope.clone(), json).await;
    (terminal(&messages).clone(), data(&messages))
}

/// Starts `script` in the background in `scope`; its process id.
async fn start(registry: &Registry, scope: &Scope, script: &str) -> String {
    let end = one(
        registry,
        scope,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 100}),
    )
    .await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    end.process_id.expect("a process id")
}

/// The ids `PROCESS_LIST` shows in `scope`.
async fn listed(registry: &Registry, scope: &Scope) -> Vec<String> {
    let list = one(registry, scope, json!({"commandType": "PROCESS_LIST"})).await;
    assert_eq!(list.status, ExecutionStatus::Succeeded, "{list:#?}");
    let entries: Vec<Value> = serde_json::from_str(&list.result_data).unwrap();
    entries
        .iter()
        .map(|e| e["processId"].as_str().unwrap().to_owned())
        .collect()
}

/// Reads the output of `id` in `scope` until it contains `needle`.
async fn read_until(registry: &Registry, scope: &Scope, id: &str, needle: &str) -> String {
    let mut text = String::new();
    let mut offset = 0;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !text.contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {needle:?} in {text:?}"
        );
        let read = one(
            registry,
            scope,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": offset, "wait_ms": 1000}),
        )
        .await;
        assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:#?}");
        text.push_str(&read.result_data);
        offset = read.next_offset.expect("a next offset");
    }
    text
}

/// The number after `key=` in `text`.
fn number_after(text: &str, key: &str) -> i32 {
    text.split(key)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
}

#[tokio::test]
async fn a_scope_cannot_read_write_kill_or_list_another_scopes_process() {
    let registry = Registry::with_defaults();
    let (alice, mallory) = (Scope::new("mcp:alice"), Scope::new("mcp:mallory"));
    let id = start(
        &registry,
        &alice,
        "read -r -p 'Proceed? ' answer; echo \"answer=$answer\"",
    )
    .await;
    // An id the table has never held, for comparison.
    let unknown = "p999";
    for scope in [&mallory, &Scope::default()] {
        for (target, text) in [(id.as_str(), "theirs"), (unknown, "unknown")] {
            let attempts = [
                json!({"commandType": "PROCESS_OUTPUT", "process_id": target, "offset": 0}),
                json!({"commandType": "PROCESS_INPUT", "process_id": target, "input": "n\n"}),
                json!({"commandType": "PROCESS_KILL", "process_id": target, "signal": "KILL"}),
            ];
            for attempt in attempts {
                let refused = one(&registry, scope, attempt.clone()).await;
                assert_failed(&refused, "PROCESS_NOT_FOUND");
                // Indistinguishable from an unknown id: the same words, the id aside.
                assert_eq!(
                    refused.error.replace(target, "ID"),
                    "no process 'ID'",
                    "{text}: {refused:#?}"
                );
                assert_eq!(refused.result_data, "", "{text}: {refused:#?}");
            }
        }
        assert!(listed(&registry, scope).await.is_empty());
    }
    // The owner's process was neither answered nor killed, and the owner still drives it.
    assert_eq!(listed(&registry, &alice).await, vec![id.clone()]);
    let reply = one(
        &registry,
        &alice,
        json!({"commandType": "PROCESS_INPUT", "process_id": id, "input": "y\n", "yield_ms": 30000}),
    )
    .await;
    assert_eq!(reply.status, ExecutionStatus::Succeeded, "{reply:#?}");
    assert!(reply.result_data.contains("answer=y"), "{reply:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn sessions_of_the_same_name_in_two_scopes_are_two_shells() {
    let registry = Registry::with_defaults();
    let (a, b) = (Scope::new("http"), Scope::new("conversation:7"));
    let (set, _) = in_session(&registry, &a, "SECRET=alpha; cd /tmp").await;
    assert_eq!(set.status, ExecutionStatus::Succeeded, "{set:#?}");
    let (peek, seen) = in_session(&registry, &b, "echo \"secret=${SECRET:-unset} $PWD\"").await;
    assert_eq!(peek.status, ExecutionStatus::Succeeded, "{peek:#?}");
    assert!(seen.starts_with("secret=unset "), "{seen:?}");
    assert_ne!(peek.final_cwd.as_deref(), Some("/tmp"));
    let (_, mine) = in_session(&registry, &a, "echo \"secret=$SECRET\"").await;
    assert_eq!(mine, "secret=alpha\n");
    // Each scope lists its own shell only, and cannot kill the other's.
    let (in_a, in_b) = (listed(&registry, &a).await, listed(&registry, &b).await);
    assert_eq!((in_a.len(), in_b.len()), (1, 1), "{in_a:?} {in_b:?}");
    assert_ne!(in_a, in_b);
    let kill = one(
        &registry,
        &b,
        json!({"commandType": "PROCESS_KILL", "process_id": in_a[0]}),
    )
    .await;
    assert_failed(&kill, "PROCESS_NOT_FOUND");
    let (_, still) = in_session(&registry, &a, "echo \"secret=$SECRET\"").await;
    assert_eq!(still, "secret=alpha\n");
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn each_scope_has_its_own_limit_beside_the_global_one() {
    let config = RegistryConfig {
        processes: ProcessLimits {
            max_running: 3,
            max_running_per_scope: 2,
            ..ProcessLimits::default()
        },
        ..RegistryConfig::default()
    };
    let registry = Registry::with_config(config);
    let (greedy, other) = (Scope::new("mcp:greedy"), Scope::new("mcp:other"));
    start(&registry, &greedy, "sleep 60").await;
    let second = start(&registry, &greedy, "sleep 60").await;
    let background = json!({"commandType": "BASH_EXEC", "command": "sleep 60", "background": true});
    let refused = one(&registry, &greedy, background.clone()).await;
    assert_failed(&refused, "TOO_MANY_PROCESSES");
    assert!(refused.error.contains("in this scope"), "{refused:#?}");
    // A session is a process too: it counts against the scope.
    let session = json!({"commandType": "BASH_EXEC", "command": "true", "session": "s"});
    assert_failed(
        &one(&registry, &greedy, session).await,
        "TOO_MANY_PROCESSES",
    );
    // The greedy scope does not starve another one …
    start(&registry, &other, "sleep 60").await;
    // … but the whole registry still has its limit.
    let over = one(&registry, &other, background.clone()).await;
    assert_failed(&over, "TOO_MANY_PROCESSES");
    assert!(over.error.contains("in this cmdr"), "{over:#?}");
    // A stopped process frees its scope's place.
    let kill = json!({"commandType": "PROCESS_KILL", "process_id": second, "signal": "KILL"});
    assert_eq!(
        one(&registry, &greedy, kill).await.status,
        ExecutionStatus::Succeeded
    );
    start(&registry, &greedy, "sleep 60").await;
    registry.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn ending_a_scope_kills_its_whole_trees_and_nothing_else() {
    let registry = Registry::with_defaults();
    let (ending, staying) = (Scope::new("mcp:ending"), Scope::new("mcp:staying"));
    // A tree that ignores SIGTERM and holds a child that left its process group.
    let stubborn = start(
        &registry,
        &ending,
        "trap '' TERM; setsid sleep 300 & echo \"shell=$$ child=$!\"; while :; do sleep 0.05; done",
    )
    .await;
    let text = read_until(&registry, &ending, &stubborn, "child=").await;
    let (shell, child) = (number_after(&text, "shell="), number_after(&text, "child="));
    let (_, session) = in_session(&registry, &ending, "echo \"session=$$\"").await;
    let session_shell = number_after(&session, "session=");
    let survivor = start(&registry, &staying, "echo \"shell=$$\"; sleep 300").await;
    let text = read_until(&registry, &staying, &survivor, "shell=").await;
    let survivor_shell = number_after(&text, "shell=");
    for pid in [shell, child, session_shell, survivor_shell] {
        assert!(!gone(pid), "{pid} runs before the scope ends");
    }

    registry.end_scope(&ending).await;

    for pid in [shell, child, session_shell] {
        eventually(&format!("{pid} of the ended scope is gone"), || gone(pid)).await;
    }
    assert!(
        !gone(survivor_shell),
        "the other scope's process was killed"
    );
    assert_eq!(listed(&registry, &staying).await, vec![survivor.clone()]);
    // The ended scope is empty, and may start again (a new session shell, too).
    assert!(listed(&registry, &ending).await.is_empty());
    let gone_id = one(
        &registry,
        &ending,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": stubborn}),
    )
    .await;
    assert_failed(&gone_id, "PROCESS_NOT_FOUND");
    let (again, text) = in_session(&registry, &ending, "echo \"session=$$\"").await;
    assert_eq!(again.status, ExecutionStatus::Succeeded, "{again:#?}");
    assert_ne!(number_after(&text, "session="), session_shell);
    registry.shutdown(Duration::from_secs(1)).await;
    eventually("shutdown takes the rest", || gone(survivor_shell)).await;
}
