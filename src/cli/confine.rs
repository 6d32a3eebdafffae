//! `--allow-root DIR` and `--landlock`: the confinement flags of every subcommand that
//! runs commands (see docs/confinement.md).

use std::io::Write;
use std::path::{Path, PathBuf};

use cmdr_executors::{Confinement, PathPolicy, RegistryConfig, SandboxStatus};

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
}

impl ConfineArgs {
    /// Sets `config` up accordingly (and marks its shells as this process's, see
    /// [`crate::orphans`]); the error says which root is unusable.
    pub fn apply(&self, config: &mut RegistryConfig) -> Result<(), String> {
        config.paths = PathPolicy::allow_roots(&self.allow_roots).map_err(|e| e.to_string())?;
        config.landlock = self.landlock;
        crate::orphans::mark_shells(config);
        Ok(())
    }

    /// The registry config with only confinement set.
    pub fn registry_config(&self) -> Result<RegistryConfig, String> {
        let mut config = RegistryConfig::default();
        self.apply(&mut config)?;
        Ok(config)
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
        Some(SandboxStatus::Enforced) => text.push_str("; BASH_EXEC writes: Landlock enforced"),
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
pub fn check_folder(folder: &Path, paths: &PathPolicy) -> Result<(), String> {
    paths
        .check(folder, "--working-folder")
        .map_err(|denied| denied.to_string())
}
