//! Which agent and command names may be turned into paths. Checked before anything is
//! read, so a name can never reach outside the agents directory.

/// Why `name` cannot be an agent's name, or `None` when it can: non-empty, no `/`, `\`,
/// `..` or NUL, and no leading `.` (hidden folders are not agents).
pub(crate) fn agent_name_problem(name: &str) -> Option<&'static str> {
    common_problem(name).or_else(|| {
        name.starts_with('.')
            .then_some("agent names cannot start with `.`")
    })
}

/// Why `name` cannot be a command's name, or `None` when it can: the same rules as agent
/// names (a command is `commands/<name>.json`; hidden files are never listed, so a name
/// with a leading `.` is refused too).
pub(crate) fn command_name_problem(name: &str) -> Option<&'static str> {
    common_problem(name).or_else(|| {
        name.starts_with('.')
            .then_some("command names cannot start with `.`")
    })
}

/// Longest agent or command name, in bytes (a file name's limit on Linux).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// Why `name` is too long to be a name, if it is.
pub(crate) fn too_long(name: &str) -> Option<&'static str> {
    (name.len() > MAX_NAME_BYTES).then_some("names are at most 255 bytes")
}

fn common_problem(name: &str) -> Option<&'static str> {
    if let Some(problem) = too_long(name) {
        Some(problem)
    } else if name.is_empty() {
        Some("the name is empty")
    } else if name.contains(['/', '\\']) {
        Some("names cannot contain `/` or `\\`")
    } else if name.contains("..") {
        Some("names cannot contain `..`")
    } else if name.contains('\0') {
        Some("names cannot contain NUL")
    } else {
        None
    }
}

/// Whether a directory entry is hidden (its name starts with `.`).
pub(crate) fn is_hidden(file_name: &str) -> bool {
    file_name.starts_with('.')
}
