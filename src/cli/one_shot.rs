//! `cmdr exec '{…}'` — the one-shot form an agent runs for each command — read without
//! clap.
//!
//! Building and running clap's parser for `exec` touched enough of clap's code and data
//! to be ~7 % of a one-shot run (BENCHMARKS.md, X3). This form has nothing to parse: one
//! argument, a JSON object, every option at its default. So when the command line is
//! exactly `exec` and one argument that starts with `{`, and no `CMDR_` variable is set
//! (which could set an option's value), the arguments are those defaults; any other
//! command line, `--help` and every error included, goes to clap. A unit test checks
//! that both read such a command line the same.

use std::ffi::OsString;

use cmdr_executors::{DEFAULT_COMBINED_LIMIT, DEFAULT_MAX_CONCURRENT};

use super::concurrency::ConcurrencyArgs;
use super::confine::ConfineArgs;
use super::output_limit::OutputLimitArgs;
use super::{Cli, CliCommand, ExecArgs};

/// The prefix of cmdr's own environment variables, some of which set options.
const OWN_VARIABLES: &str = "CMDR_";

impl Cli {
    /// The command line read without clap when it is `cmdr exec '{…}'` (see the module's
    /// documentation); `None` for every other one.
    pub fn one_shot() -> Option<Self> {
        let cmdr_variables = std::env::vars_os().any(|(name, _)| {
            name.as_encoded_bytes()
                .starts_with(OWN_VARIABLES.as_bytes())
        });
        one_shot_from(std::env::args_os().skip(1), cmdr_variables)
    }
}

/// [`Cli::one_shot`] of these arguments (the program's name left out).
fn one_shot_from(args: impl IntoIterator<Item = OsString>, cmdr_variables: bool) -> Option<Cli> {
    let mut args = args.into_iter();
    let (Some(subcommand), Some(input), None) = (args.next(), args.next(), args.next()) else {
        return None;
    };
    let input = input.into_string().ok()?;
    if cmdr_variables || subcommand != "exec" || !input.trim_start().starts_with('{') {
        return None;
    }
    Some(Cli {
        command: CliCommand::Exec(ExecArgs {
            input: Some(input),
            combine: false,
            jobs: 1,
            timeout_ms: None,
            confine: ConfineArgs::default(),
            output: OutputLimitArgs {
                max_output: DEFAULT_COMBINED_LIMIT,
            },
            concurrency: ConcurrencyArgs {
                max_concurrent: DEFAULT_MAX_CONCURRENT,
            },
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn read(args: &[&str]) -> Option<Cli> {
        one_shot_from(args.iter().map(OsString::from), false)
    }

    /// Both readings of a one-shot command line agree (clap's, as `cmdr` without the fast
    /// path would read it, with no `CMDR_` variable set in this process).
    #[test]
    fn a_one_shot_command_line_reads_as_clap_reads_it() {
        assert!(
            !std::env::vars().any(|(name, _)| name.starts_with(OWN_VARIABLES)),
            "the test needs an environment without CMDR_ variables"
        );
        for json in [
            r#"{"commandType":"BASH_EXEC","command":"true"}"#,
            r#"  {"command_id":"a","commandType":"FILE_READ","path":"/etc/hosts"}"#,
            "{",
        ] {
            let fast = read(&["exec", json]).expect("a one-shot command line");
            let clap = Cli::try_parse_from(["cmdr", "exec", json]).expect("clap reads it");
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{json}");
        }
    }

    #[test]
    fn every_other_command_line_is_left_to_clap() {
        let json = r#"{"commandType":"BASH_EXEC","command":"true"}"#;
        for args in [
            &["exec"][..],
            &["exec", "-"],
            &["exec", "commands.jsonl"],
            &["exec", "--help"],
            &["exec", "--combine", json],
            &["exec", json, "--combine"],
            &["submit", json],
            &["--version"],
            &[],
        ] {
            assert!(read(args).is_none(), "{args:?}");
        }
        let with_variables = one_shot_from(["exec", json].map(OsString::from), true);
        assert!(
            with_variables.is_none(),
            "a CMDR_ variable may set an option"
        );
    }
}
