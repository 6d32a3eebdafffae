//! Combined output is bounded: `?combine=true` and the MCP executor tools keep the head
//! and tail of a command's output (with an `OUTPUT_TRUNCATED` marker and
//! `truncatedBytes`), so a command printing hundreds of megabytes cannot grow a real
//! `cmdr serve` (before: the whole output was held, and one endless `yes` took the server
//! down with an allocation failure).

use serde_json::{json, Value};

use crate::proc_stats::mib;
use crate::rpc::{tool_json, Rpc};
use crate::serve::{Options, Serve};

/// Bytes the command prints.
const PRINTED: u64 = 200 << 20;
/// How much the server's peak resident memory may exceed its idle level (KiB): the
/// default limit keeps 4 MiB, and holds at most about 1.5 times that while combining.
const PEAK_GROWTH_BOUND_KIB: u64 = 64 * 1024;

/// Peak resident memory (`VmHWM`) of `pid`, KiB.
fn peak_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn printer() -> String {
    format!("head -c {PRINTED} /dev/zero | tr '\\0' a; echo; echo the-end")
}

fn assert_capped(result: &Value) {
    assert_eq!(
        result["status"],
        "SUCCEEDED",
        "{}",
        &result.to_string()[..300.min(result.to_string().len())]
    );
    let data = result["resultData"].as_str().unwrap();
    let limit = cmdr::executors::DEFAULT_COMBINED_LIMIT;
    assert!(data.len() < limit + 1024, "kept {} bytes", data.len());
    assert!(data.starts_with("aaaa"), "the head is kept");
    assert!(data.ends_with("the-end\n"), "the tail is kept");
    assert!(data.contains("[OUTPUT_TRUNCATED: "), "the cut is marked");
    let truncated = result["truncatedBytes"].as_u64().unwrap();
    let total = PRINTED + "\nthe-end\n".len() as u64;
    assert_eq!(
        truncated,
        total - limit as u64,
        "every byte left out is counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_combined_output_is_capped_and_the_server_stays_small() {
    let serve = Serve::start(Options::default()).await;
    let idle_kib = peak_kib(serve.pid);
    let response = serve
        .post(
            "/commands?combine=true",
            &json!({"commandType": "BASH_EXEC", "command": printer()}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.unwrap();
    assert_capped(&result);

    let (mut rpc, _) = Rpc::connect(&serve.mcp, None).await;
    let answer = rpc.call("bash_exec", json!({"command": printer()})).await;
    let (result, is_error) = tool_json(&answer);
    assert!(!is_error, "{answer}");
    assert_capped(&result);

    let peak = peak_kib(serve.pid);
    assert!(
        peak < idle_kib + PEAK_GROWTH_BOUND_KIB,
        "the server's peak memory grew from {:.1} to {:.1} MiB for {} MiB of output",
        mib(idle_kib),
        mib(peak),
        PRINTED >> 20
    );
    let health = serve.get("/health").await;
    assert_eq!(health["status"], "ok");
}
