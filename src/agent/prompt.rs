//! The system prompt that teaches a model the `<shell>` convention.

/// The default system prompt: the `<shell>` convention, where results arrive, sequential
/// execution and the working-directory rule.
pub const DEFAULT_SYSTEM_PROMPT: &str = include_str!("system_prompt.md");

/// The system prompt of a run: the default, then an agent's own instructions (its
/// `system_prompt.md`) after a blank line.
pub fn system_prompt(agent_instructions: Option<&str>) -> String {
    match agent_instructions.map(str::trim).filter(|s| !s.is_empty()) {
        Some(extra) => format!("{}\n\n{extra}\n", DEFAULT_SYSTEM_PROMPT.trim_end()),
        None => DEFAULT_SYSTEM_PROMPT.to_owned(),
    }
}
