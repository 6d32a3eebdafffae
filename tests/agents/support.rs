//! A temporary agents directory and helpers to fill it.

use std::fs;
use std::path::PathBuf;

use cmdr::agents::AgentCatalog;
use tempfile::TempDir;

/// A fresh agents directory in a temp dir (removed on drop).
pub struct Fixture {
    tmp: TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Self {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    /// The catalog over the temp agents directory.
    pub fn catalog(&self) -> AgentCatalog {
        AgentCatalog::new(self.tmp.path().to_path_buf())
    }

    /// Creates (if needed) the folder of agent `name` and returns it.
    pub fn agent(&self, name: &str) -> PathBuf {
        let dir = self.tmp.path().join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `<agent>/<relative>` (creating folders).
    pub fn write(&self, agent: &str, relative: &str, text: &str) -> PathBuf {
        let path = self.agent(agent).join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    /// Writes `<agent>/commands/<file>`.
    pub fn command(&self, agent: &str, file: &str, text: &str) -> PathBuf {
        self.write(agent, &format!("commands/{file}"), text)
    }
}

/// A valid one-step command file with this description.
pub fn valid_command(description: &str) -> String {
    serde_json::json!({
        "Description": description,
        "items": [{"type": "message", "role": "user", "content": ["Do the thing."]}]
    })
    .to_string()
}
