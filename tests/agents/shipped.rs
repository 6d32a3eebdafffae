//! The agents shipped in `codex_agents/` all load, and every shipped command is valid.

use std::path::PathBuf;

use cmdr::agents::AgentCatalog;

fn shipped() -> AgentCatalog {
    AgentCatalog::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("codex_agents"))
}

#[test]
fn every_shipped_agent_loads_with_a_description_and_a_prompt() {
    let catalog = shipped();
    let agents = catalog.list_agents().unwrap();
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    assert!(names.contains(&"planning_agent"), "{names:?}");
    assert!(names.contains(&"coding_agent"), "{names:?}");
    for summary in &agents {
        assert_eq!(summary.error, None, "{}", summary.name);
        assert!(!summary.description.is_empty(), "{}", summary.name);
        let agent = catalog.agent(&summary.name).unwrap();
        let prompt = agent.system_prompt.unwrap_or_default();
        assert!(
            prompt.trim().len() > 200,
            "{}: a real system prompt",
            summary.name
        );
    }
}

#[test]
fn every_shipped_command_is_valid() {
    let catalog = shipped();
    let mut total = 0;
    for agent in catalog.list_agents().unwrap() {
        for entry in catalog.list_commands(&agent.name).unwrap() {
            assert!(
                !entry.disabled,
                "{}/{}: {:?}",
                agent.name,
                entry.name,
                entry.error()
            );
            let command = catalog.load_command(&agent.name, &entry.name).unwrap();
            assert_eq!(command.description, entry.description);
            total += 1;
        }
    }
    assert!(total >= 3, "at least improve_plan and two coding commands");
}

#[test]
fn improve_plan_is_a_real_multi_step_workflow() {
    let command = shipped()
        .load_command("planning_agent", "improve_plan")
        .unwrap();
    assert!(
        (8..=12).contains(&command.steps()),
        "{} steps",
        command.steps()
    );
}

#[test]
fn the_coding_agent_has_at_least_two_commands() {
    let commands = shipped().list_commands("coding_agent").unwrap();
    assert!(commands.len() >= 2, "{commands:?}");
}
