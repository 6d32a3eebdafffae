//! `--max-output`: how much of a command's output a combined result keeps.

use cmdr_executors::DEFAULT_COMBINED_LIMIT;

/// The combined-output limit of `exec --combine`, `submit --combine`, and of `serve`/`mcp`
/// (`?combine=true`, the MCP executor tools).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct OutputLimitArgs {
    /// Bytes of output a combined result keeps (its head and tail, with an
    /// OUTPUT_TRUNCATED marker between); 0: no limit.
    #[arg(
        long = "max-output",
        env = "CMDR_MAX_OUTPUT",
        value_name = "BYTES",
        default_value_t = DEFAULT_COMBINED_LIMIT
    )]
    pub max_output: usize,
}

impl OutputLimitArgs {
    /// The limit in bytes (`usize::MAX` for "no limit").
    pub fn limit(&self) -> usize {
        match self.max_output {
            0 => usize::MAX,
            n => n,
        }
    }
}
