//! `AgentCatalog::list_agents`: folders only, sorted, hidden skipped, broken configs
//! still listed.

use std::fs;

use cmdr::agents::{AgentCatalog, AgentSummary, INVALID_AGENT_DESCRIPTION};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::agents::support::Fixture;

#[test]
fn a_missing_agents_dir_is_an_empty_list() {
    let catalog = AgentCatalog::new("/no/such/agents/dir".into());
    assert_eq!(catalog.list_agents().unwrap(), vec![]);
}

#[test]
fn folders_are_agents_sorted_by_name() {
    let fx = Fixture::new();
    fx.write("zeta", "config.toml", "description = \"Last\"\n");
    fx.agent("alpha");
    fx.write("mid", "config.toml", "model = \"m\"\n");
    fx.agent(".git");
    fx.agent(".hidden_agent");
    fs::write(fx.catalog().dir().join("README.md"), "# agents").unwrap();
    fs::write(fx.catalog().dir().join("loose.toml"), "").unwrap();

    let agents = fx.catalog().list_agents().unwrap();
    let summary = |name: &str, description: &str| AgentSummary {
        name: name.into(),
        description: description.into(),
        error: None,
    };
    assert_eq!(
        agents,
        vec![
            summary("alpha", ""),
            summary("mid", ""),
            summary("zeta", "Last")
        ]
    );
}

#[test]
fn an_agent_with_a_broken_config_is_still_listed() {
    let fx = Fixture::new();
    fx.write("broken", "config.toml", "descripton = \"typo\"\n");
    fx.write("fine", "config.toml", "description = \"Fine\"\n");
    let agents = fx.catalog().list_agents().unwrap();
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0].name, "broken");
    assert_eq!(agents[0].description, INVALID_AGENT_DESCRIPTION);
    assert_eq!(agents[0].description, "Invalid agent config");
    let error = agents[0].error.as_deref().unwrap();
    assert!(error.contains("unknown key `descripton`"), "{error}");
    assert_eq!(agents[1].description, "Fine");
    assert_eq!(agents[1].error, None);
}

#[test]
fn summaries_serialize_as_name_and_description() {
    let fx = Fixture::new();
    fx.write("broken", "config.toml", "x = 1\n");
    assert_eq!(
        serde_json::to_value(fx.catalog().list_agents().unwrap()).unwrap(),
        json!([{"name": "broken", "description": "Invalid agent config"}])
    );
}

#[test]
fn every_listed_agent_can_be_looked_up() {
    let fx = Fixture::new();
    fx.agent("one");
    fx.agent("two");
    fx.agent("a..b"); // not a usable name: not listed
    let catalog = fx.catalog();
    let agents = catalog.list_agents().unwrap();
    assert_eq!(agents.len(), 2);
    for summary in agents {
        assert_eq!(catalog.agent(&summary.name).unwrap().name, summary.name);
    }
}

#[test]
fn default_dir_is_codex_agents_unless_overridden() {
    // Only checks the fallback when the variable is unset in this process (tests do not
    // mutate the environment: other threads may read it).
    if std::env::var_os("CMDR_AGENTS_DIR").is_none() {
        assert_eq!(
            AgentCatalog::default_dir(),
            std::path::Path::new("codex_agents")
        );
    }
}
