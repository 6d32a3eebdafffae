//! `--allow-root DIR` and `--landlock`: the confinement flags of every subcommand that
//! runs commands (see docs/confinement.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use cmdr_executors::{Confinement, EnvPolicy, Inherit, PathPolicy, SandboxStatus};

use crate::app::{RegistryBuilder, SetupError};

/// Where commands may reach.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfineArgs {
    /// Confine every file command and every working_dir / working folder to DIR
    /// (repeatable; symlinks are resolved, so a link cannot lead out). Default: no limit.
    #[arg(
        long = "allow-root",
        value_name = "DIR",
        env = "CMDR_ALLOW_ROOTS",
        value_delimiter = ':'
    )]
    pub allow_roots: Vec<PathBuf>,
    /// Also confine what BASH_EXEC processes write to the allowed roots, with Linux
    /// Landlock (reported at start-up when the kernel cannot enforce it).
    #[arg(long, env = "CMDR_LANDLOCK", requires = "allow_roots")]
    pub landlock: bool,
    /// Let file commands cross a mount point placed inside an allowed root (by default
    /// they refuse it: `RESOLVE_NO_XDEV`, issue 32.19).
    #[arg(long, env = "CMDR_CROSS_MOUNTS", requires = "allow_roots")]
    pub cross_mounts: bool,
    /// What environment shells get.
    #[command(flatten)]
    pub env: ShellEnvArgs,
}

/// `--env-*`: how the environment of shells is built from cmdr's own (see
/// docs/security.md). Default: everything but secrets (`*KEY*`, `*SECRET*`, `*TOKEN*`,
/// `*PASSWORD*` …) and cmdr's own `CMDR_*` variables.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ShellEnvArgs {
    /// Which of cmdr's variables shells start from: all, core (HOME, PATH, USER, LANG …)
    /// or none.
    #[arg(
        long = "env-inherit",
        env = "CMDR_ENV_INHERIT",
        value_name = "all|core|none"
    )]
    pub inherit: Option<String>,
    /// Drop variables whose names match PATTERN (`*` wildcards, any case; repeatable).
    #[arg(
        long = "env-exclude",
        env = "CMDR_ENV_EXCLUDE",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    pub exclude: Vec<String>,
    /// Keep only variables whose names match one of these patterns (repeatable).
    #[arg(
        long = "env-include-only",
        env = "CMDR_ENV_INCLUDE_ONLY",
        value_name = "PATTERN",
        value_delimiter = ','
    )]
    pub include_only: Vec<String>,
    /// Set NAME=VALUE in every shell (repeatable).
    #[arg(long = "env-set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Keep variables that look like secrets (*KEY*, *SECRET*, *TOKEN*, SSH_AUTH_SOCK,
    /// URLs with a password …); cmdr's own CMDR_* variables are never passed on.
    #[arg(long = "env-keep-secrets", env = "CMDR_ENV_KEEP_SECRETS")]
    pub keep_secrets: bool,
}

impl ShellEnvArgs {
    /// The policy these flags describe; the error names the bad flag value.
    pub fn policy(&self) -> Result<EnvPolicy, SetupError> {
        let inherit = match self
            .inherit
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("all") => Inherit::All,
            Some("core") => Inherit::Core,
            Some("none") => Inherit::None,
            Some(other) => {
                return Err(SetupError::Flag(format!(
                    "--env-inherit {other}: expected all, core or none"
                )))
            }
        };
        let mut set = std::collections::BTreeMap::new();
        for pair in &self.set {
            match pair.split_once('=') {
                Some((name, value)) if !name.is_empty() && !name.contains('\0') => {
                    set.insert(name.to_owned(), value.to_owned());
                }
                _ => {
                    return Err(SetupError::Flag(format!(
                        "--env-set {pair}: expected NAME=VALUE"
                    )))
                }
            }
        }
        Ok(EnvPolicy {
            inherit,
            ignore_default_excludes: self.keep_secrets,
            exclude: self.exclude.clone(),
            include_only: self.include_only.clone(),
            set,
        })
    }
}

impl ConfineArgs {
    /// The allowed roots these flags name; the error says which root is unusable.
    pub fn paths(&self) -> Result<PathPolicy, SetupError> {
        Ok(PathPolicy::allow_roots(&self.allow_roots)?.crossing_mounts(self.cross_mounts))
    }

    /// A registry builder confined (and its shells' environment built) as these flags say.
    pub fn builder(&self) -> Result<RegistryBuilder, SetupError> {
        Ok(RegistryBuilder::new()
            .confine(self.paths()?, self.landlock)
            .shell_env(self.env.policy()?))
    }
}

/// Tells on stderr, signed by `who`, what is confined (nothing when nothing is asked).
pub fn report(who: &str, confinement: &Confinement) {
    if let Some(trees) = &confinement.process_trees {
        tracing::info!("{who}: stopped commands' process trees are found by {trees}");
    }
    if !confinement.paths.is_restricted() {
        return;
    }
    let roots: Vec<String> = confinement
        .paths
        .roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    let mut text = format!(
        "{who}: commands confined to {}; file commands: {}",
        roots.join(", "),
        crate::server::file_commands(&confinement.paths)
    );
    match &confinement.landlock {
        None => text.push_str("; BASH_EXEC writes are not confined (no --landlock)"),
        Some(SandboxStatus::Enforced) => text
            .push_str("; BASH_EXEC writes: Landlock enforced, each scope in a domain of its own"),
        Some(status) => text.push_str(&format!("; BASH_EXEC writes: Landlock {status}")),
    }
    tracing::info!("{text}");
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// The folder runs start in when none is given: `preferred` if the policy allows it,
/// else the first allowed root (a confined server started elsewhere still works).
pub fn default_folder(preferred: PathBuf, paths: &PathPolicy) -> PathBuf {
    match (
        paths.check(&preferred, "working folder"),
        paths.roots().first(),
    ) {
        (Err(_), Some(root)) => root.clone(),
        _ => preferred,
    }
}

/// Whether `folder` is allowed; the error names the rule.
pub fn check_folder(folder: &Path, paths: &PathPolicy) -> Result<(), SetupError> {
    Ok(paths.check(folder, "--working-folder")?)
}
