//! `AgentCatalog::list_commands`: disk on every call, `*.json` only, sorted, invalid files
//! listed disabled with the reason available.

use std::fs;

use cmdr::agents::{CommandEntry, INVALID_COMMAND_DESCRIPTION};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::agents::support::{valid_command, Fixture};

fn names(entries: &[CommandEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn missing_commands_folder_is_an_empty_list() {
    let fx = Fixture::new();
    fx.agent("helper");
    assert_eq!(fx.catalog().list_commands("helper").unwrap(), vec![]);
}

#[test]
fn empty_commands_folder_is_an_empty_list() {
    let fx = Fixture::new();
    fs::create_dir_all(fx.agent("helper").join("commands")).unwrap();
    assert_eq!(fx.catalog().list_commands("helper").unwrap(), vec![]);
}

#[test]
fn valid_file_is_enabled_with_its_trimmed_description() {
    let fx = Fixture::new();
    fx.command(
        "helper",
        "improve_plan.json",
        &valid_command("  Improve the plan  "),
    );
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(
        entries,
        vec![CommandEntry {
            name: "improve_plan".into(),
            description: "Improve the plan".into(),
            disabled: false,
            error: None,
        }]
    );
    assert_eq!(entries[0].error(), None);
}

#[test]
fn syntax_invalid_file_is_disabled_with_the_parse_error() {
    let fx = Fixture::new();
    fx.command("helper", "bad.json", "{ not valid json");
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(entries.len(), 1);
    let bad = &entries[0];
    assert_eq!(bad.name, "bad");
    assert_eq!(bad.description, INVALID_COMMAND_DESCRIPTION);
    assert_eq!(bad.description, "Invalid command file");
    assert!(bad.disabled);
    let error = bad.error().unwrap();
    assert!(error.starts_with("not valid JSON"), "{error}");
    assert!(error.contains("line 1"), "{error}");
}

#[test]
fn schema_invalid_file_is_disabled_with_the_validation_error() {
    let fx = Fixture::new();
    fx.command(
        "helper",
        "bad-schema.json",
        r#"{"Description": "Has no steps", "items": []}"#,
    );
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(
        entries,
        vec![CommandEntry {
            name: "bad-schema".into(),
            description: "Invalid command file".into(),
            disabled: true,
            error: Some("items: must contain at least one item".into()),
        }]
    );
}

#[test]
fn non_utf8_file_is_disabled() {
    let fx = Fixture::new();
    let path = fx.command("helper", "binary.json", "");
    fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert!(entries[0].disabled);
    assert_eq!(entries[0].error(), Some("the file is not UTF-8 text"));
}

#[test]
fn only_visible_json_files_are_commands() {
    let fx = Fixture::new();
    fx.command("helper", "real.json", &valid_command("Real"));
    fx.command("helper", "README.md", "# notes");
    fx.command("helper", "notes.txt", "not a command");
    fx.command("helper", "real.json.bak", &valid_command("Backup"));
    fx.command(
        "helper",
        "UPPER.JSON",
        &valid_command("Wrong case extension"),
    );
    fx.command("helper", ".hidden.json", &valid_command("Hidden"));
    fx.command("helper", ".json", &valid_command("No stem"));
    fs::create_dir_all(fx.agent("helper").join("commands/folder.json")).unwrap();
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(names(&entries), vec!["real"]);
}

#[test]
fn entries_are_sorted_by_name() {
    let fx = Fixture::new();
    for name in ["z", "a", "m_step", "b"] {
        fx.command("helper", &format!("{name}.json"), &valid_command(name));
    }
    fx.command("helper", "c.json", "[]");
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(names(&entries), vec!["a", "b", "c", "m_step", "z"]);
}

#[test]
fn listing_reads_the_disk_every_time() {
    let fx = Fixture::new();
    let catalog = fx.catalog();
    fx.command("helper", "a.json", &valid_command("First"));
    assert_eq!(names(&catalog.list_commands("helper").unwrap()), vec!["a"]);

    // Added, edited and broken between two listings: all visible at once.
    fx.command("helper", "b.json", &valid_command("Second"));
    let entries = catalog.list_commands("helper").unwrap();
    assert_eq!(names(&entries), vec!["a", "b"]);
    assert_eq!(entries[1].description, "Second");

    fx.command("helper", "a.json", &valid_command("First, edited"));
    assert_eq!(
        catalog.list_commands("helper").unwrap()[0].description,
        "First, edited"
    );

    fx.command("helper", "b.json", "{");
    assert!(catalog.list_commands("helper").unwrap()[1].disabled);

    fs::remove_file(fx.agent("helper").join("commands/a.json")).unwrap();
    assert_eq!(names(&catalog.list_commands("helper").unwrap()), vec!["b"]);
}

#[test]
fn unknown_agent_is_agent_not_found() {
    let fx = Fixture::new();
    fx.agent("helper");
    for agent in ["nobody", "", "../helper", "helper/..", ".hidden", "a\\b"] {
        let err = fx.catalog().list_commands(agent).unwrap_err();
        assert_eq!(
            err.code(),
            cmdr::executors::ErrorCode::AgentNotFound,
            "{agent:?}: {err}"
        );
    }
    let err = fx.catalog().list_commands("nobody").unwrap_err();
    assert_eq!(err.to_string(), "agent `nobody` not found");
}

#[test]
fn a_file_agent_is_not_an_agent() {
    let fx = Fixture::new();
    fx.agent("helper");
    fs::write(fx.catalog().dir().join("loose_file"), "x").unwrap();
    let err = fx.catalog().list_commands("loose_file").unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentNotFound);
}

#[test]
fn listing_commands_does_not_need_a_valid_config() {
    let fx = Fixture::new();
    fx.write("helper", "config.toml", "nonsense = true\n");
    fx.command("helper", "a.json", &valid_command("Still listed"));
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(entries[0].description, "Still listed");
}

#[test]
fn a_file_name_that_cannot_be_run_is_listed_disabled() {
    let fx = Fixture::new();
    fx.command("helper", "a..b.json", &valid_command("Dots"));
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(entries[0].name, "a..b");
    assert!(entries[0].disabled);
    assert!(entries[0].error().unwrap().contains("`..`"));
}

#[test]
fn entries_serialize_without_the_error_and_with_disabled_only_when_true() {
    let fx = Fixture::new();
    fx.command("helper", "good.json", &valid_command("Good"));
    fx.command("helper", "bad.json", "{");
    let entries = fx.catalog().list_commands("helper").unwrap();
    assert_eq!(
        serde_json::to_value(&entries).unwrap(),
        json!([
            {"name": "bad", "description": "Invalid command file", "disabled": true},
            {"name": "good", "description": "Good"},
        ])
    );
}
