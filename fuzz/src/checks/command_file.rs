//! `command_file`: an agent's command file (`commands/<name>.json`,
//! `cmdr::agents::validate_command_json`) and its `config.toml` (`AgentConfig::parse`),
//! both from the same text.
//!
//! Properties:
//! - nothing panics; errors are values with a message;
//! - a valid command file holds docs/contract.md §5's invariants and says what the JSON says: the
//!   document is an object with only `Description` and `items`; the description is the
//!   JSON's, trimmed and non-empty; there is one step per item, each a `user` message
//!   whose content lines are the JSON's strings, trimmed and non-empty; every item has only
//!   `type`, `role` and `content`;
//! - a valid config holds its bounds: `max_iterations` in 1..=100, `command_timeout_secs`
//!   at least 1, description and model trimmed, no empty model; an error is one line.

use cmdr::agents::{
    validate_command_json, AgentConfig, CommandItem, MessageRole, MAX_MAX_ITERATIONS,
    MIN_MAX_ITERATIONS,
};
use serde_json::Value;

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_command_file(&text);
    check_config(&text);
}

fn check_command_file(text: &str) {
    let (description, items) = match validate_command_json(text) {
        Ok(valid) => valid,
        Err(e) => {
            assert!(!e.message.is_empty(), "an error without a message");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => panic!("a valid command file that is not JSON: {e}"),
    };
    let Value::Object(top) = &value else {
        panic!("a valid command file that is not an object");
    };
    assert!(top.keys().all(|k| k == "Description" || k == "items"));
    assert!(!description.is_empty(), "empty description");
    assert_eq!(description, description.trim(), "untrimmed description");
    let json_description = top.get("Description").and_then(Value::as_str);
    assert_eq!(json_description.map(str::trim), Some(description.as_str()));

    let json_items = top.get("items").and_then(Value::as_array);
    assert!(!items.is_empty(), "a valid command without steps");
    assert_eq!(json_items.map(Vec::len), Some(items.len()));
    for (item, json) in items.iter().zip(json_items.into_iter().flatten()) {
        check_item(item, json);
    }
}

fn check_item(item: &CommandItem, json: &Value) {
    let CommandItem::Message { role, content } = item;
    assert_eq!(*role, MessageRole::User);
    let Value::Object(obj) = json else {
        panic!("a step from a non-object item");
    };
    assert!(obj
        .keys()
        .all(|k| k == "type" || k == "role" || k == "content"));
    assert_eq!(obj.get("type").and_then(Value::as_str), Some("message"));
    assert_eq!(obj.get("role").and_then(Value::as_str), Some("user"));
    assert!(!content.is_empty(), "a step without content");
    let json_lines: Vec<Option<&str>> = obj
        .get("content")
        .and_then(Value::as_array)
        .map(|lines| lines.iter().map(|l| l.as_str().map(str::trim)).collect())
        .unwrap_or_default();
    let lines: Vec<Option<&str>> = content.iter().map(|l| Some(l.as_str())).collect();
    assert_eq!(lines, json_lines, "content lines differ from the JSON's");
    for line in content {
        assert!(!line.is_empty() && line == line.trim(), "bad line {line:?}");
    }
    assert_eq!(item.instruction(), content.join("\n"));
}

fn check_config(text: &str) {
    let config = match AgentConfig::parse(text) {
        Ok(config) => config,
        Err(message) => {
            assert!(!message.is_empty(), "a config error without a message");
            assert!(!message.contains('\n'), "a config error on several lines");
            return;
        }
    };
    if let Some(n) = config.max_iterations {
        assert!((MIN_MAX_ITERATIONS..=MAX_MAX_ITERATIONS).contains(&n));
    }
    assert_ne!(config.command_timeout_secs, Some(0));
    let _ = config.command_timeout();
    if let Some(d) = &config.description {
        assert_eq!(d, d.trim(), "untrimmed description");
    }
    if let Some(m) = &config.model {
        assert!(!m.is_empty() && m == m.trim(), "bad model {m:?}");
    }
}
