//! `FILE_READ`: chunked streaming, line ranges, and the refusals (binary, missing, dir).

use cmdr_executors::{combine_output_results, ExecutionStatus, Registry, READ_CHUNK_SIZE};
use serde_json::json;

use super::{assert_failed, command, data, run, terminal};

fn read(path: &std::path::Path) -> serde_json::Value {
    json!({"commandType":"FILE_READ","file_path":path})
}

#[tokio::test]
async fn a_large_file_streams_in_chunks_that_never_split_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("big.txt");
    let text: String = (0..60_000).map(|i| format!("{i} é€😀\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let registry = Registry::with_defaults();
    let messages = run(&registry, read(&path)).await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert!(
        messages.len() > text.len() / READ_CHUNK_SIZE,
        "streamed in chunks"
    );
    assert!(messages
        .iter()
        .all(|m| m.result_data.len() <= READ_CHUNK_SIZE));
    assert_eq!(data(&messages), text);
    let stream = registry.execute(command(read(&path))).await.unwrap();
    assert_eq!(combine_output_results(stream, None).await.result_data, text);
}

#[tokio::test]
async fn line_ranges_are_one_based_and_inclusive() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("lines.txt");
    let text: String = (1..=100_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let registry = Registry::with_defaults();
    let cases = [
        (json!(2), json!(3), "line 2\nline 3\n".to_owned()),
        (
            json!(99_999),
            json!(null),
            "line 99999\nline 100000\n".to_owned(),
        ),
        (json!(null), json!(1), "line 1\n".to_owned()),
        (json!(50_000), json!(50_000), "line 50000\n".to_owned()),
        (
            json!(99_999),
            json!(500_000),
            "line 99999\nline 100000\n".to_owned(),
        ),
    ];
    for (start, end, expected) in cases {
        let messages = run(
            &registry,
            json!({"commandType":"FILE_READ","file_path":path,"start_line":start,"end_line":end}),
        )
        .await;
        assert_eq!(data(&messages), expected, "{start}..{end}");
    }
}

#[tokio::test]
async fn bad_ranges_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("f.txt");
    std::fs::write(&path, "a\nb\n").unwrap();
    let registry = Registry::with_defaults();
    for (start, end) in [(0, 1), (5, 2)] {
        let messages = run(
            &registry,
            json!({"commandType":"FILE_READ","file_path":path,"start_line":start,"end_line":end}),
        )
        .await;
        assert_failed(terminal(&messages), "INVALID_INPUT");
    }
    let past = run(
        &registry,
        json!({"commandType":"FILE_READ","file_path":path,"start_line":3}),
    )
    .await;
    assert_failed(terminal(&past), "INVALID_INPUT");
    assert!(terminal(&past).error.contains("past the end"));
}

#[tokio::test]
async fn binary_and_non_utf8_files_fail_naming_their_size() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let binary = tmp.path().join("a.bin");
    std::fs::write(&binary, b"\x7fELF\0\0\x01binary").unwrap();
    let messages = run(&registry, read(&binary)).await;
    assert_failed(terminal(&messages), "NOT_TEXT");
    assert!(
        terminal(&messages).error.contains("13 bytes"),
        "{:?}",
        terminal(&messages)
    );
    assert_eq!(data(&messages), "", "nothing of a binary file is sent");
    let latin1 = tmp.path().join("latin1.txt");
    let mut bytes = "ok\n".repeat(50_000).into_bytes();
    bytes.extend_from_slice(b"caf\xe9\n");
    std::fs::write(&latin1, &bytes).unwrap();
    let messages = run(&registry, read(&latin1)).await;
    assert_failed(terminal(&messages), "NOT_TEXT");
    assert!(terminal(&messages).error.contains(&bytes.len().to_string()));
}

#[tokio::test]
async fn missing_files_directories_and_empty_files() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = Registry::with_defaults();
    let missing = run(&registry, read(&tmp.path().join("nope"))).await;
    assert_failed(terminal(&missing), "NOT_FOUND");
    let dir = run(&registry, read(tmp.path())).await;
    assert_failed(terminal(&dir), "NOT_A_FILE");
    assert!(terminal(&dir).error.contains("LIST_DIRECTORY"), "{dir:?}");
    let empty = tmp.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let messages = run(&registry, read(&empty)).await;
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
    assert_eq!(data(&messages), "");
}
