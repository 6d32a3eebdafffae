//! Unified-diff parsing and application (temporary stub with the agreed API; the real
//! engine replaces this file).

/// What the patch does to the file.
pub enum PatchedFile {
    /// New content of an existing file.
    Modified(String),
    /// Content of a created file.
    Created(String),
    /// The file is deleted.
    Deleted,
}

/// A patch that applied.
pub struct PatchApplied {
    /// What to do with the file.
    pub file: PatchedFile,
    /// Hunks applied.
    pub hunks: usize,
    /// Notes for people.
    pub notes: Vec<String>,
}

/// Why a patch did not apply.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// Not implemented yet.
    #[error("patch engine not available")]
    Invalid,
}

impl PatchError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        "PATCH_INVALID"
    }
}

/// Applies `patch` to `original`.
pub fn apply_patch(_original: Option<&str>, _patch: &str) -> Result<PatchApplied, PatchError> {
    Err(PatchError::Invalid)
}
