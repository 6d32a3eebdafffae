//! `AgentCatalog::load_command`: name check first (no disk), then the agent, then the
//! file, then the schema.

use std::fs;

use cmdr::agents::{AgentCatalog, AgentCommand, CommandItem, MessageRole};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::agents::support::{valid_command, Fixture};

#[test]
fn loads_a_valid_command_with_trimmed_steps() {
    let fx = Fixture::new();
    let text = json!({
        "Description": " Three steps ",
        "items": [
            {"type": "message", "role": "user", "content": ["  Read the plan.  ", "Then stop."]},
            {"type": "message", "role": "user", "content": ["Step two"]},
            {"content": ["Step three"], "role": "user", "type": "message"},
        ]
    });
    fx.command("helper", "three.json", &text.to_string());
    let command = fx.catalog().load_command("helper", "three").unwrap();
    assert_eq!(
        command,
        AgentCommand {
            name: "three".into(),
            description: "Three steps".into(),
            items: vec![
                CommandItem::Message {
                    role: MessageRole::User,
                    content: vec!["Read the plan.".into(), "Then stop.".into()],
                },
                CommandItem::Message {
                    role: MessageRole::User,
                    content: vec!["Step two".into()],
                },
                CommandItem::Message {
                    role: MessageRole::User,
                    content: vec!["Step three".into()],
                },
            ],
        }
    );
    assert_eq!(command.steps(), 3);
    assert_eq!(command.items[0].instruction(), "Read the plan.\nThen stop.");
    assert_eq!(command.items[2].instruction(), "Step three");
}

#[test]
fn traversal_names_are_command_invalid_before_touching_the_disk() {
    // The name is checked first: neither the agents directory nor the agent exists, and
    // the answer is still COMMAND_INVALID (not AGENT_NOT_FOUND).
    let catalog = AgentCatalog::new("/definitely/not/an/agents/dir".into());
    for name in [
        "../bad",
        "a/b",
        "a\\b",
        "..",
        "",
        ".hidden",
        "..\\x",
        "x/../../etc/passwd",
    ] {
        let err = catalog.load_command("no_such_agent", name).unwrap_err();
        assert_eq!(
            err.code(),
            cmdr::executors::ErrorCode::CommandInvalid,
            "{name:?}: {err}"
        );
    }
    let err = catalog.load_command("no_such_agent", "../bad").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid command: command name `../bad` is not allowed: names cannot contain `/` or `\\`"
    );
    let err = catalog.load_command("no_such_agent", "a\\b").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid command: command name `a\\b` is not allowed: names cannot contain `/` or `\\`"
    );
    let err = catalog.load_command("no_such_agent", "a\nb/c").unwrap_err();
    assert!(err.to_string().contains("`a\\nb/c`"), "one line: {err}");
    let err = catalog.load_command("no_such_agent", "a..b").unwrap_err();
    assert!(err.to_string().contains("cannot contain `..`"), "{err}");
}

#[test]
fn traversal_cannot_reach_a_real_file_outside_commands() {
    let fx = Fixture::new();
    // A perfectly valid command file one level above `commands/`.
    fx.write("helper", "outside.json", &valid_command("Outside"));
    fx.command("helper", "inside.json", &valid_command("Inside"));
    let err = fx
        .catalog()
        .load_command("helper", "../outside")
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::CommandInvalid);
}

#[test]
fn unknown_agent_is_agent_not_found() {
    let fx = Fixture::new();
    let err = fx
        .catalog()
        .load_command("nobody", "improve_plan")
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentNotFound);
    let err = fx
        .catalog()
        .load_command("../x", "improve_plan")
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentNotFound);
}

#[test]
fn missing_file_is_command_not_found() {
    let fx = Fixture::new();
    fx.agent("helper");
    // No commands/ folder at all.
    let err = fx
        .catalog()
        .load_command("helper", "improve_plan")
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::CommandNotFound);
    assert_eq!(
        err.to_string(),
        "agent `helper` has no command `improve_plan`"
    );
    // A commands/ folder without that file, and a folder named like the file.
    fx.command("helper", "other.json", &valid_command("Other"));
    fs::create_dir_all(fx.agent("helper").join("commands/dir.json")).unwrap();
    for name in ["improve_plan", "dir", "other.json"] {
        let err = fx.catalog().load_command("helper", name).unwrap_err();
        assert_eq!(
            err.code(),
            cmdr::executors::ErrorCode::CommandNotFound,
            "{name}"
        );
    }
}

#[test]
fn invalid_file_is_command_invalid_naming_the_problem() {
    let fx = Fixture::new();
    let text = json!({
        "Description": "Broken third step",
        "items": [
            {"type": "message", "role": "user", "content": ["one"]},
            {"type": "message", "role": "user", "content": ["two"]},
            {"type": "message", "role": "user", "content": ["three", "   "]},
        ]
    });
    fx.command("helper", "broken.json", &text.to_string());
    let err = fx.catalog().load_command("helper", "broken").unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::CommandInvalid);
    assert_eq!(
        err.to_string(),
        "invalid command: helper/commands/broken.json: items[2].content[1]: must be a non-empty string"
    );

    fx.command("helper", "syntax.json", "{\"Description\": ");
    let err = fx.catalog().load_command("helper", "syntax").unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::CommandInvalid);
    assert!(err.to_string().contains("not valid JSON"), "{err}");
}

#[test]
fn listing_and_loading_agree() {
    let fx = Fixture::new();
    fx.command("helper", "good.json", &valid_command("Good"));
    fx.command("helper", "bad.json", r#"{"Description": "x"}"#);
    let catalog = fx.catalog();
    for entry in catalog.list_commands("helper").unwrap() {
        let loaded = catalog.load_command("helper", &entry.name);
        assert_eq!(loaded.is_err(), entry.disabled, "{}", entry.name);
        if let Err(err) = loaded {
            assert!(err.to_string().ends_with(entry.error().unwrap()), "{err}");
        }
    }
}
