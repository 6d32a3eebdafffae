//! `config.toml` and `AgentCatalog::agent`: strict keys, ranges, the system prompt.

use std::time::Duration;

use cmdr::agents::{AgentConfig, AgentError};
use pretty_assertions::assert_eq;

use crate::agents::support::Fixture;

#[test]
fn an_agent_without_files_has_the_defaults() {
    let fx = Fixture::new();
    let dir = fx.agent("bare");
    let agent = fx.catalog().agent("bare").unwrap();
    assert_eq!(agent.name, "bare");
    assert_eq!(agent.dir, dir);
    assert_eq!(agent.config, AgentConfig::default());
    assert_eq!(agent.system_prompt, None);
}

#[test]
fn every_key_is_read() {
    let fx = Fixture::new();
    fx.write(
        "full",
        "config.toml",
        "# comment\ndescription = \"  Plans things  \"\nmodel = \"gemini-2.5-pro\"\n\
         max_iterations = 25\ncommand_timeout_secs = 90\nmax_tokens = 512\n",
    );
    fx.write("full", "system_prompt.md", "You plan.\n");
    let agent = fx.catalog().agent("full").unwrap();
    assert_eq!(
        agent.config,
        AgentConfig {
            description: Some("Plans things".into()),
            model: Some("gemini-2.5-pro".into()),
            max_iterations: Some(25),
            command_timeout_secs: Some(90),
            max_tokens: Some(512),
            shell_environment_policy: None,
        }
    );
    assert_eq!(agent.config.max_tokens_or(Some(4096)), Some(512));
    assert_eq!(
        agent.config.command_timeout(),
        Some(Duration::from_secs(90))
    );
    assert_eq!(agent.system_prompt.as_deref(), Some("You plan.\n"));
}

#[test]
fn an_unknown_key_is_agent_invalid_naming_the_file_and_the_key() {
    let fx = Fixture::new();
    fx.write(
        "typo",
        "config.toml",
        "description = \"ok\"\ntemperature = 0.2\n",
    );
    let err = fx.catalog().agent("typo").unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentInvalid);
    let AgentError::AgentInvalid { agent, reason } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(agent, "typo");
    assert!(reason.starts_with("typo/config.toml line 2"), "{reason}");
    let message = err.to_string();
    assert!(message.contains("unknown key `temperature`"), "{message}");
    assert!(message.contains("`max_iterations`"), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
}

#[test]
fn max_iterations_must_be_between_1_and_100() {
    let fx = Fixture::new();
    for (value, ok) in [
        ("0", false),
        ("1", true),
        ("100", true),
        ("101", false),
        ("-3", false),
    ] {
        fx.write("a", "config.toml", &format!("max_iterations = {value}\n"));
        let result = fx.catalog().agent("a");
        assert_eq!(result.is_ok(), ok, "{value}: {result:?}");
        if let Err(err) = result {
            assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentInvalid);
            assert!(err.to_string().contains("max_iterations"), "{err}");
        }
    }
}

#[test]
fn wrong_types_and_syntax_are_agent_invalid() {
    let fx = Fixture::new();
    for text in [
        "max_iterations = \"ten\"\n",
        "command_timeout_secs = 0\n",
        "model = 3\n",
        "description = \n",
        "[section]\nx = 1\n",
    ] {
        fx.write("a", "config.toml", text);
        let err = fx.catalog().agent("a").unwrap_err();
        assert_eq!(
            err.code(),
            cmdr::executors::ErrorCode::AgentInvalid,
            "{text}"
        );
        assert!(err.to_string().contains("a/config.toml"), "{err}");
    }
}

#[test]
fn a_shell_environment_policy_is_parsed_strictly() {
    let config = AgentConfig::parse(
        "[shell_environment_policy]\ninherit = \"core\"\nexclude = [\"AWS_*\"]\nset = { CI = \"1\" }\n",
    )
    .unwrap();
    let policy = config.shell_environment_policy.unwrap();
    assert_eq!(policy.inherit, cmdr::executors::Inherit::Core);
    assert_eq!(policy.exclude, ["AWS_*"]);
    assert_eq!(policy.set["CI"], "1");
    let bad = AgentConfig::parse("[shell_environment_policy]\ninherit = \"some\"\n").unwrap_err();
    assert!(bad.contains("line 2") && bad.contains("some"), "{bad}");
    let unknown =
        AgentConfig::parse("[shell_environment_policy]\ninherits = \"all\"\n").unwrap_err();
    assert!(unknown.contains("inherits"), "{unknown}");
}

#[test]
fn parse_is_usable_alone() {
    assert_eq!(AgentConfig::parse("").unwrap(), AgentConfig::default());
    assert_eq!(
        AgentConfig::parse("max_iterations = 0").unwrap_err(),
        "max_iterations must be between 1 and 100, got 0"
    );
}

#[test]
fn unknown_or_unsafe_agent_names_are_agent_not_found() {
    let fx = Fixture::new();
    fx.agent("real");
    fx.agent(".hidden");
    std::fs::write(fx.catalog().dir().join("file_agent"), "").unwrap();
    for name in [
        "nope",
        "",
        ".hidden",
        "..",
        "../real",
        "real/",
        "r\\eal",
        "file_agent",
    ] {
        let err = fx.catalog().agent(name).unwrap_err();
        assert_eq!(
            err.code(),
            cmdr::executors::ErrorCode::AgentNotFound,
            "{name:?}"
        );
    }
    let err = cmdr::agents::AgentCatalog::new("/no/such/dir".into())
        .agent("real")
        .unwrap_err();
    assert_eq!(err.code(), cmdr::executors::ErrorCode::AgentNotFound);
}
