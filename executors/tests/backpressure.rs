//! A command that prints without end, read slowly, keeps cmdr's memory bounded: the
//! executor waits for the reader and the shell blocks on its own pipe.
//!
//! Its own test binary, so the resident-memory measurement sees no other test.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cmdr_executors::{decode_command, ExecutionStatus, Registry};

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_printer_read_slowly_keeps_memory_bounded() {
    let registry = Registry::with_defaults();
    let command = decode_command(
        r#"{"commandType":"BASH_EXEC","command":"yes 'a line of output that repeats forever'","timeout_ms":600000}"#,
    )
    .unwrap();
    let mut stream = registry.execute(command).await.unwrap();
    let mut received = 0usize;
    for _ in 0..5 {
        received += stream.next().await.unwrap().result_data.len();
    }
    let before = rss_kib();
    // The slow reader: 20 reads, 50 ms apart. Unbounded buffering would take in
    // gigabytes meanwhile (`yes` writes well over 1 GB/s).
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let message = stream.next().await.unwrap();
        assert_eq!(message.status, ExecutionStatus::Running);
        received += message.result_data.len();
    }
    let grown_kib = rss_kib().saturating_sub(before);
    assert!(grown_kib < 64 * 1024, "memory grew by {grown_kib} KiB");
    assert!(received > 0);
    stream.cancel();
    let mut last = None;
    while let Some(message) = stream.next().await {
        last = Some(message);
    }
    let last = last.unwrap();
    assert_eq!(last.status, ExecutionStatus::Failed);
    assert_eq!(last.error_code.as_deref(), Some("CANCELLED"));
}
