//! `validate_command_json`: every rule of the strict schema (docs/contract.md §5), each error naming
//! the exact key or item.

use cmdr::agents::{validate_command_json, CommandFileError, CommandItem, MessageRole};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

/// The error of a document that must be rejected, as displayed.
fn rejected(doc: Value) -> String {
    rejected_text(&doc.to_string())
}

fn rejected_text(text: &str) -> String {
    match validate_command_json(text) {
        Ok(ok) => panic!("accepted {text}: {ok:?}"),
        Err(e) => e.to_string(),
    }
}

fn step(content: Value) -> Value {
    json!({"type": "message", "role": "user", "content": content})
}

#[test]
fn a_valid_document_is_accepted() {
    let (description, items) = validate_command_json(
        &json!({"Description": "Say hi", "items": [step(json!(["hi"]))]}).to_string(),
    )
    .unwrap();
    assert_eq!(description, "Say hi");
    assert_eq!(
        items,
        vec![CommandItem::Message {
            role: MessageRole::User,
            content: vec!["hi".into()],
        }]
    );
}

#[test]
fn description_and_content_are_trimmed() {
    let (description, items) = validate_command_json(
        &json!({
            "Description": "\n  Improve the plan \t",
            "items": [step(json!(["  first  ", " second ", "keeps\ninner\nlines\n"]))]
        })
        .to_string(),
    )
    .unwrap();
    assert_eq!(description, "Improve the plan");
    assert_eq!(
        items,
        vec![CommandItem::Message {
            role: MessageRole::User,
            content: vec![
                "first".into(),
                "second".into(),
                "keeps\ninner\nlines".into()
            ],
        }]
    );
    assert_eq!(items[0].instruction(), "first\nsecond\nkeeps\ninner\nlines");
}

#[test]
fn invalid_json_is_rejected_with_the_position() {
    let error = rejected_text("{ not valid json");
    assert!(error.starts_with("not valid JSON: "), "{error}");
    assert!(error.contains("line 1 column 3"), "{error}");
    assert!(rejected_text("").starts_with("not valid JSON"));
}

#[test]
fn the_top_level_must_be_an_object() {
    assert_eq!(
        rejected(json!([])),
        "must be a JSON object with `Description` and `items`, found an array"
    );
    assert_eq!(
        rejected(json!("text")),
        "must be a JSON object with `Description` and `items`, found a string"
    );
}

#[test]
fn description_is_required_and_non_blank() {
    let items = json!([step(json!(["x"]))]);
    assert_eq!(
        rejected(json!({"items": items})),
        "Description: missing; expected a non-empty string"
    );
    assert_eq!(
        rejected(json!({"Description": "", "items": items})),
        "Description: must be a non-empty string"
    );
    assert_eq!(
        rejected(json!({"Description": "   \n\t", "items": items})),
        "Description: must be a non-empty string"
    );
    assert_eq!(
        rejected(json!({"Description": 7, "items": items})),
        "Description: must be a string, found a number"
    );
    assert_eq!(
        rejected(json!({"Description": null, "items": items})),
        "Description: must be a string, found null"
    );
}

#[test]
fn items_are_required_and_non_empty() {
    assert_eq!(
        rejected(json!({"Description": "d"})),
        "items: missing; expected a non-empty array of steps"
    );
    assert_eq!(
        rejected(json!({"Description": "d", "items": []})),
        "items: must contain at least one item"
    );
    assert_eq!(
        rejected(json!({"Description": "d", "items": step(json!(["x"]))})),
        "items: must be an array, found an object"
    );
}

#[test]
fn each_item_must_be_an_object() {
    assert_eq!(
        rejected(json!({"Description": "d", "items": [step(json!(["x"])), "do it"]})),
        "items[1]: must be an object, found a string"
    );
}

#[test]
fn only_message_items_are_supported() {
    let doc = |item: Value| json!({"Description": "d", "items": [step(json!(["x"])), item]});
    assert_eq!(
        rejected(doc(
            json!({"type": "tool", "role": "user", "content": ["x"]})
        )),
        "items[1].type: unsupported item type \"tool\"; supported types: \"message\""
    );
    assert_eq!(
        rejected(doc(
            json!({"type": "Message", "role": "user", "content": ["x"]})
        )),
        "items[1].type: unsupported item type \"Message\"; supported types: \"message\""
    );
    assert_eq!(
        rejected(doc(json!({"role": "user", "content": ["x"]}))),
        "items[1].type: missing; supported types: \"message\""
    );
    assert_eq!(
        rejected(doc(json!({"type": 1, "role": "user", "content": ["x"]}))),
        "items[1].type: must be a string, found a number"
    );
}

#[test]
fn only_the_user_role_is_supported() {
    let doc = |item: Value| json!({"Description": "d", "items": [item]});
    assert_eq!(
        rejected(doc(
            json!({"type": "message", "role": "assistant", "content": ["x"]})
        )),
        "items[0].role: unsupported role \"assistant\"; only \"user\" is supported"
    );
    assert_eq!(
        rejected(doc(json!({"type": "message", "content": ["x"]}))),
        "items[0].role: missing; expected \"user\""
    );
    assert_eq!(
        rejected(doc(
            json!({"type": "message", "role": ["user"], "content": ["x"]})
        )),
        "items[0].role: must be a string, found an array"
    );
}

#[test]
fn content_must_be_a_non_empty_array_of_non_blank_strings() {
    let doc =
        |content: Value| json!({"Description": "d", "items": [step(json!(["ok"])), step(content)]});
    assert_eq!(
        rejected(doc(json!("not-an-array"))),
        "items[1].content: must be an array of strings, found a string"
    );
    assert_eq!(
        rejected(doc(json!([]))),
        "items[1].content: must contain at least one string"
    );
    assert_eq!(
        rejected(doc(json!(["   "]))),
        "items[1].content[0]: must be a non-empty string"
    );
    assert_eq!(
        rejected(doc(json!(["fine", "", "fine"]))),
        "items[1].content[1]: must be a non-empty string"
    );
    assert_eq!(
        rejected(doc(json!(["fine", 3]))),
        "items[1].content[1]: must be a string, found a number"
    );
    assert_eq!(
        rejected(json!({"Description": "d", "items": [{"type": "message", "role": "user"}]})),
        "items[0].content: missing; expected a non-empty array of strings"
    );
}

#[test]
fn unknown_top_level_keys_are_rejected_by_name() {
    let items = json!([step(json!(["x"]))]);
    assert_eq!(
        rejected(json!({"Description": "d", "items": items, "extra": true})),
        "unknown key `extra`; allowed keys: `Description`, `items`"
    );
    assert_eq!(
        rejected(json!({"Description": "d", "items": items, "b": 1, "a": 2})),
        "unknown keys `a`, `b`; allowed keys: `Description`, `items`"
    );
    // Keys are case-sensitive; the near miss is pointed out.
    assert_eq!(
        rejected(json!({"description": "d", "items": items})),
        "unknown key `description` (did you mean `Description`? keys are case-sensitive); \
         allowed keys: `Description`, `items`"
    );
}

#[test]
fn unknown_item_keys_are_rejected_by_name() {
    assert_eq!(
        rejected(json!({"Description": "d", "items": [
            step(json!(["x"])),
            {"type": "message", "role": "user", "content": ["x"], "title": "t"}
        ]})),
        "items[1]: unknown key `title`; allowed keys: `type`, `role`, `content`"
    );
}

#[test]
fn the_error_carries_its_path_separately() {
    let err = validate_command_json(
        &json!({"Description": "d", "items": [step(json!(["x", " "]))]}).to_string(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        CommandFileError {
            path: "items[0].content[1]".into(),
            message: "must be a non-empty string".into(),
        }
    );
}

#[test]
fn items_serialize_in_the_file_format() {
    let (_, items) = validate_command_json(
        &json!({"Description": "d", "items": [step(json!([" a ", "b"]))]}).to_string(),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&items).unwrap(),
        json!([{"type": "message", "role": "user", "content": ["a", "b"]}])
    );
}
