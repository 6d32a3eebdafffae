//! The command's own `env`: names and values the kernel can actually set.
//!
//! A name with `=` would silently set another variable (`{"A=B": "c"}` is `A` = `B=c`), an
//! empty name or a NUL byte cannot be passed at all: all are refused with `INVALID_INPUT`
//! naming the key, before anything runs.

use std::collections::BTreeMap;

use crate::error::ExecError;

/// Checks every name and value of `env`.
pub(super) fn check(env: Option<&BTreeMap<String, String>>) -> Result<(), ExecError> {
    let Some(env) = env else {
        return Ok(());
    };
    for (key, value) in env {
        let problem = if key.is_empty() {
            Some("an empty name")
        } else if key.contains('=') {
            Some("a name containing '='")
        } else if key.contains('\0') {
            Some("a name containing a NUL byte")
        } else if value.contains('\0') {
            Some("a value containing a NUL byte")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(ExecError::InvalidInput(format!(
                "env {:?}: {problem} cannot be set as an environment variable",
                key
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_and_values_the_kernel_cannot_set_are_refused() {
        for (key, value) in [("A=B", "c"), ("", "x"), ("A\0B", "x"), ("OK", "a\0b")] {
            let err = check(Some(&env(&[(key, value)]))).unwrap_err();
            assert_eq!(err.code(), crate::ErrorCode::InvalidInput, "{key:?}");
            assert!(err.to_string().contains("env "), "{err}");
        }
        assert!(check(Some(&env(&[("PATH_2", "a=b c"), ("_x", "")]))).is_ok());
        assert!(check(None).is_ok());
    }
}
