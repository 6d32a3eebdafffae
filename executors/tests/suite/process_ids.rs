//! Process ids carrying the registry's prefix (`RegistryConfig::process_id_prefix`), so an
//! id names the instance that holds it (a NATS worker: docs/nats.md).

use std::time::Duration;

use cmdr_executors::{ExecutionStatus, Registry, RegistryConfig};
use serde_json::json;

use super::{assert_failed, run, terminal};

#[tokio::test]
async fn ids_carry_the_prefix_and_only_prefixed_ids_are_found() {
    let registry = Registry::with_config(RegistryConfig {
        process_id_prefix: Some("w1-".to_owned()),
        ..RegistryConfig::default()
    });
    let started = run(
        &registry,
        json!({"commandType": "BASH_EXEC", "command": "echo hi; sleep 60", "background": true, "yield_ms": 100}),
    )
    .await;
    let id = terminal(&started).process_id.clone().expect("a process id");
    assert_eq!(id, "w1-p1");
    for other in ["p1", "w2-p1", "w1-p2", "w1-"] {
        let read = run(
            &registry,
            json!({"commandType": "PROCESS_OUTPUT", "process_id": other}),
        )
        .await;
        assert_failed(terminal(&read), "PROCESS_NOT_FOUND");
    }
    let read = run(
        &registry,
        json!({"commandType": "PROCESS_OUTPUT", "process_id": id, "offset": 0, "wait_ms": 5000}),
    )
    .await;
    let end = terminal(&read);
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{end:#?}");
    assert_eq!(end.process_id.as_deref(), Some("w1-p1"));
    assert!(end.result_data.starts_with("hi"), "{end:#?}");
    registry.shutdown(Duration::from_secs(1)).await;
}
