//! What several subcommands set up alike: the model client from the environment and
//! the terminal view of agent events.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use super::chat_view::{ChatView, Mode};
use crate::llm::{LlmClient, LlmConfig, OpenAiClient};

/// The model client from the environment (`--model` standing in for `CMDR_LLM_MODEL`);
/// `None` when none is configured, with a hint on stderr signed by `who` (none when
/// `who` is `None`: the caller reports it).
pub(super) fn llm_client(who: Option<&str>, model: Option<&str>) -> Option<Arc<dyn LlmClient>> {
    let config = LlmConfig::from_lookup(|name| match (name, model) {
        ("CMDR_LLM_MODEL", Some(model)) => Some(model.to_owned()),
        _ => std::env::var(name).ok(),
    });
    match config.and_then(OpenAiClient::new) {
        Ok(client) => Some(Arc::new(client)),
        Err(e) => {
            let who = who?;
            let _ = writeln!(
                std::io::stderr(),
                "{who}: {e} — set CMDR_LLM_BASE_URL, CMDR_LLM_MODEL and CMDR_LLM_API_KEY \
                 to talk to a model"
            );
            None
        }
    }
}

/// The view for this process's stdout: redrawn in place on a terminal, plain otherwise.
pub(super) fn view(max_iterations: u32) -> ChatView {
    let mode = if std::io::stdout().is_terminal() {
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Mode::Terminal { colour: !no_colour }
    } else {
        Mode::Plain
    };
    ChatView::new(
        Box::new(std::io::stdout()),
        Box::new(std::io::stderr()),
        mode,
        max_iterations,
    )
}
