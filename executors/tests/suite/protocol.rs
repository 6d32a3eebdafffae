//! Wire formats: the published examples decode; results encode as specified; bad input is
//! rejected with errors that say what is wrong.

use cmdr_executors::{
    decode_command, BashExecCommand, Command, CommandType, ErrorCode, ExecutionStatus, OutputResult,
};
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn spec_and_original_readme_examples_decode() {
    let examples = [
        r#"{"command_id":"unique-id-1","commandType":"BASH_EXEC","description":"Run ls in /tmp","command":"ls -l /tmp"}"#,
        r#"{"command_id":"unique-id-2","commandType":"FILE_READ","description":"Read config file","file_path":"/path/to/your/config.yaml"}"#,
        r#"{"command_id":"unique-id-3","commandType":"FILE_WRITE","description":"Write initial data","file_path":"/path/to/output.txt","content":"This is the content to write.\nSecond line."}"#,
        r#"{"command_id":"unique-id-4","commandType":"PATCH_FILE","description":"Apply code changes","file_path":"/path/to/source.go","patch":"--- a/source.go\n+++ b/source.go\n@@ -1,1 +1,2 @@\n package main\n+import \"fmt\""}"#,
        r#"{"command_id":"unique-id-5","commandType":"LIST_DIRECTORY","description":"List project root","path":"/path/to/directory"}"#,
        r#"{"command_id":"unique-id-6","commandType":"REQUEST_USER_INPUT","description":"Ask for API key","prompt":"Please enter your API Key:"}"#,
        r#"{"commandType":"BASH_EXEC","command":"make","working_dir":"/src","timeout_ms":60000,"env":{"CI":"1"}}"#,
        r#"{"commandType":"FILE_READ","file_path":"/x","start_line":10,"end_line":20}"#,
        r#"{"commandType":"FILE_WRITE","file_path":"/x","content":"","create_dirs":true}"#,
        r#"{"commandType":"REQUEST_USER_INPUT","prompt":"?","timeout_ms":1000}"#,
    ];
    let expected = [
        CommandType::BashExec,
        CommandType::FileRead,
        CommandType::FileWrite,
        CommandType::PatchFile,
        CommandType::ListDirectory,
        CommandType::RequestUserInput,
        CommandType::BashExec,
        CommandType::FileRead,
        CommandType::FileWrite,
        CommandType::RequestUserInput,
    ];
    for (text, ty) in examples.iter().zip(expected) {
        let command = decode_command(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(command.command_type(), ty);
        assert!(!command.command_id().is_empty());
    }
}

#[test]
fn bash_fields_decode_exactly() {
    let command = decode_command(
        r#"{"command_id":"b1","commandType":"BASH_EXEC","command":"make","working_dir":"/src","timeout_ms":60000,"env":{"CI":"1"},"extra":"ignored"}"#,
    )
    .unwrap();
    let Command::BashExec(bash) = command else {
        panic!("not bash")
    };
    assert_eq!(
        bash,
        BashExecCommand {
            command_id: "b1".into(),
            description: None,
            command: "make".into(),
            working_dir: Some("/src".into()),
            timeout_ms: Some(60000),
            env: Some([("CI".to_owned(), "1".to_owned())].into()),
            base_env: None,
            background: false,
            yield_ms: None,
            ready: None,
            tty: false,
            cols: None,
            rows: None,
            session: None,
        }
    );
}

#[test]
fn missing_command_id_gets_a_uuid() {
    let a = decode_command(r#"{"commandType":"LIST_DIRECTORY","path":"/"}"#).unwrap();
    let b =
        decode_command(r#"{"command_id":"","commandType":"LIST_DIRECTORY","path":"/"}"#).unwrap();
    assert_eq!(a.command_id().len(), 36);
    assert_eq!(b.command_id().len(), 36);
    assert_ne!(a.command_id(), b.command_id());
}

#[test]
fn results_encode_with_the_published_names_and_omit_empty_fields() {
    let result = OutputResult {
        command_id: "c1".into(),
        command_type: "FILE_WRITE".into(),
        status: ExecutionStatus::Succeeded,
        message: "done".into(),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!({"command_id":"c1","commandType":"FILE_WRITE","status":"SUCCEEDED","message":"done"})
    );
    let full = OutputResult {
        error: "exit status 2".into(),
        result_data: "out".into(),
        exit_code: Some(2),
        final_cwd: Some("/tmp".into()),
        duration_ms: Some(5),
        status: ExecutionStatus::Failed,
        ..result
    };
    assert_eq!(
        serde_json::to_value(&full).unwrap(),
        json!({"command_id":"c1","commandType":"FILE_WRITE","status":"FAILED","message":"done",
               "error":"exit status 2","resultData":"out","exitCode":2,"finalCwd":"/tmp","durationMs":5})
    );
}

#[test]
fn results_decode_with_error_and_result_data_absent_or_empty() {
    let absent: OutputResult = serde_json::from_str(
        r#"{"command_id":"x","commandType":"BASH_EXEC","status":"RUNNING","message":"m"}"#,
    )
    .unwrap();
    let empty: OutputResult = serde_json::from_str(
        r#"{"command_id":"x","commandType":"BASH_EXEC","status":"RUNNING","message":"m","error":"","resultData":""}"#,
    )
    .unwrap();
    assert_eq!(absent, empty);
}

fn rejection(text: &str) -> (Option<String>, String, ErrorCode) {
    let failure = decode_command(text).expect_err("rejected");
    (
        failure.command_id.clone(),
        failure.error.to_string(),
        failure.error.code(),
    )
}

#[test]
fn unknown_type_is_named() {
    let (id, error, code) = rejection(r#"{"command_id":"u1","commandType":"RM_RF"}"#);
    assert_eq!(id.as_deref(), Some("u1"));
    assert_eq!(code, ErrorCode::UnknownCommandType);
    assert!(
        error.contains("RM_RF") && error.contains("BASH_EXEC"),
        "{error}"
    );
}

#[test]
fn missing_type_and_missing_fields_are_named() {
    let (_, error, code) = rejection(r#"{"command_id":"m1","command":"ls"}"#);
    assert_eq!(code, ErrorCode::UnknownCommandType);
    assert!(error.contains("commandType"), "{error}");
    let (id, error, code) = rejection(r#"{"command_id":"m2","commandType":"BASH_EXEC"}"#);
    assert_eq!(
        (id.as_deref(), code),
        (Some("m2"), ErrorCode::InvalidCommand)
    );
    assert!(error.contains("`command`"), "{error}");
    let (_, error, _) = rejection(r#"{"commandType":"FILE_WRITE","file_path":"/x"}"#);
    assert!(error.contains("`content`"), "{error}");
}

#[test]
fn wrong_types_name_the_field_path() {
    let (_, error, code) =
        rejection(r#"{"commandType":"BASH_EXEC","command":"ls","timeout_ms":"soon"}"#);
    assert_eq!(code, ErrorCode::InvalidCommand);
    assert!(error.contains("timeout_ms"), "{error}");
    let (_, error, _) = rejection(r#"{"commandType":"BASH_EXEC","command":"ls","env":{"A":1}}"#);
    assert!(error.contains("env.A"), "{error}");
    let (_, error, _) = rejection(r#"{"commandType":"BASH_EXEC","command":["ls"]}"#);
    assert!(error.contains("command"), "{error}");
}

#[test]
fn malformed_json_is_rejected_and_the_id_salvaged() {
    let (id, error, code) = rejection(r#"{"command_id":"broken-1","commandType":"BASH_EXEC","#);
    assert_eq!(
        (id.as_deref(), code),
        (Some("broken-1"), ErrorCode::MalformedJson)
    );
    assert!(error.contains("malformed JSON"), "{error}");
    for text in ["", "   ", "[1,2]", "\"BASH_EXEC\"", "null", "{{", "\u{0}"] {
        let failure = decode_command(text).expect_err(text);
        assert_eq!(
            failure.error.code(),
            cmdr_executors::ErrorCode::MalformedJson,
            "{text:?}"
        );
    }
}

#[test]
fn the_command_id_can_be_peeked_without_a_full_decode() {
    use cmdr_executors::peek_command_id;
    assert_eq!(
        peek_command_id(br#"{"command_id":"p1","commandType":"BASH_EXEC","command":"ls"}"#)
            .as_deref(),
        Some("p1")
    );
    assert_eq!(
        peek_command_id(br#"{"command_id":"p2","commandType":"#).as_deref(),
        Some("p2")
    );
    assert_eq!(peek_command_id(br#"{"commandType":"BASH_EXEC"}"#), None);
}
