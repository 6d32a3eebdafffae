//! Orphans of a SIGKILLed worker (docs/nats.md, "Processes"; docs/faults.md, "Orphans"):
//! a silent background process of a killed `cmdr worker` runs on, and the next worker on
//! the host kills it — and only it: a live worker's process and a dead non-worker's
//! (its own recovery's business) stay.

use cmdr_test_support::http::gone;
use serde_json::json;

use crate::processes::{
    list, one, producer_as, sigkill_and_wait, sigterm_and_wait, start, worker_of,
};
use crate::{eventually, NatsServer, WorkerProcess, PATIENCE};

/// The value of `name` in process `pid`'s environment.
fn env_of(pid: i32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let prefix = format!("{name}=");
    environ
        .split(|b| *b == 0)
        .find_map(|pair| pair.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Waits for the next log line of a worker containing `needle`.
fn next_line_with(log: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = log
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no log line with {needle:?}: {e}"));
        if line.contains(needle) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_worker_reaps_the_orphans_of_a_killed_worker_and_nothing_else() {
    let server = NatsServer::start();
    let producer = producer_as(&server, "tester").await;
    // The doomed worker: a silent process whose shell also started a `setsid` child.
    let wa = WorkerProcess::start_as(&server, "orphan-wa", &[]).await;
    let script = r#"setsid sleep 301 & echo "child=$!"; exec sleep 300"#;
    let id = start(&producer, script).await;
    assert_eq!(worker_of(&id), "orphan-wa");
    let output = crate::processes::read_until(&producer, &id, "child=").await;
    let child: i32 = output.result_data.trim()["child=".len()..].parse().unwrap();
    // A live worker with a silent process of its own (started until the pool picks it).
    let wb = WorkerProcess::start_as(&server, "orphan-wb", &[]).await;
    let mut doomed = vec![id];
    let living_id = loop {
        assert!(doomed.len() < 40, "every start went to orphan-wa");
        let id = start(&producer, "exec sleep 300").await;
        if worker_of(&id) == "orphan-wb" {
            break id;
        }
        doomed.push(id);
    };
    let listed = list(&producer).await;
    let pid_of = |id: &String| i32::try_from(listed[id]["pid"].as_i64().unwrap()).unwrap();
    let mut orphans: Vec<i32> = doomed.iter().map(pid_of).collect();
    orphans.push(child);
    let living = pid_of(&living_id);
    // Worker shells are marked with their owner and role.
    let dead_owner = env_of(orphans[0], "CMDR_OWNER").unwrap();
    assert_eq!(
        env_of(orphans[0], "CMDR_OWNER_ROLE").as_deref(),
        Some("worker")
    );
    assert_eq!(env_of(child, "CMDR_OWNER"), Some(dead_owner.clone()));
    // A process of the same dead owner without the worker role (as a `cmdr serve`'s shell
    // would be): the worker sweep leaves it to its own recovery.
    let mut not_a_workers = std::process::Command::new("sleep")
        .arg("300")
        .env("CMDR_OWNER", &dead_owner)
        .spawn()
        .unwrap();

    sigkill_and_wait(wa).await;
    // A new worker on the host sweeps at start-up and every second here.
    let (wc, log) = WorkerProcess::start_logged(
        &server,
        "orphan-wc",
        &["--orphan-sweep-secs", "1"],
        "cmdr::orphans=debug",
    )
    .await;
    let log = tokio::task::spawn_blocking(move || {
        next_line_with(&log, "orphan sweep done");
        log
    })
    .await
    .unwrap();
    for pid in &orphans {
        eventually("the killed worker's orphans are gone", || gone(*pid)).await;
    }
    // Two more sweeps later, the living owner's process and the non-worker's are there.
    tokio::task::spawn_blocking(move || {
        next_line_with(&log, "orphan sweep done");
        next_line_with(&log, "orphan sweep done");
    })
    .await
    .unwrap();
    assert!(!gone(living), "a live worker's process was killed");
    assert!(
        not_a_workers.try_wait().unwrap().is_none(),
        "a non-worker's process was killed by the worker sweep"
    );
    let read = one(
        &producer,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": living_id}),
    )
    .await;
    assert_eq!(read.process_state.as_deref(), Some("running"), "{read:#?}");

    let _ = not_a_workers.kill();
    let _ = not_a_workers.wait();
    sigterm_and_wait(wb).await;
    eventually("the live worker killed its process on shutdown", || {
        gone(living)
    })
    .await;
    sigterm_and_wait(wc).await;
}
