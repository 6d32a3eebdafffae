//! The environment a shell starts with: built by a policy from cmdr's own environment,
//! never inherited wholesale.
//!
//! cmdr's environment holds its secrets (`CMDR_AUTH_TOKEN`, `CMDR_LLM_API_KEY`) and often
//! the operator's (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN` …). A model with a shell would
//! print them. The policy (after Codex's `shell_environment_policy`):
//!
//! 1. **inherit**: `all` of cmdr's variables (default), only the `core` ones
//!    ([`CORE_VARS`]: `HOME`, `PATH`, `USER`, `LANG` …), or `none`;
//! 2. **default excludes**: names matching [`DEFAULT_EXCLUDES`] (`*KEY*`, `*SECRET*`,
//!    `*TOKEN*`, `*PASSWORD*` …, case-insensitive) are dropped, unless
//!    `ignore_default_excludes`;
//! 3. **exclude**: more patterns to drop;
//! 4. **include_only**: if not empty, only names matching one of these are kept;
//! 5. **set**: variables set explicitly (kept whatever the patterns say).
//!
//! Whatever the policy, cmdr's own variables (`CMDR_*`) and the ones that would make bash
//! run code before the script ([`super::SHELL_STARTUP_VARS`]) are never inherited; a
//! variable cmdr sets itself (`CMDR_OWNER`, `CMDR_TREE`) and a command's own `env` come
//! after. Patterns are names with `*` wildcards, compared case-insensitively.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Variables `inherit = "core"` keeps.
pub const CORE_VARS: [&str; 14] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LC_ALL", "LC_CTYPE", "TERM", "TZ",
];

/// Patterns dropped unless `ignore_default_excludes`.
pub const DEFAULT_EXCLUDES: [&str; 6] = [
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
];

/// Never inherited, whatever the policy: cmdr's own configuration and secrets.
pub const NEVER_INHERITED: [&str; 1] = ["CMDR_*"];

/// Which of cmdr's variables a shell starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inherit {
    /// All of them (then filtered).
    #[default]
    All,
    /// Only [`CORE_VARS`].
    Core,
    /// None.
    None,
}

/// How a shell's environment is built (see the module docs). The default inherits all
/// but the secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvPolicy {
    /// Which variables to start from.
    #[serde(default)]
    pub inherit: Inherit,
    /// Keep names matching [`DEFAULT_EXCLUDES`].
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// More name patterns to drop.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// If not empty: only names matching one of these are kept.
    #[serde(default)]
    pub include_only: Vec<String>,
    /// Variables set explicitly.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

impl EnvPolicy {
    /// The environment for shells, from `vars` (cmdr's own, usually `std::env::vars()`).
    pub fn apply<I>(&self, vars: I) -> Vec<(String, String)>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut env: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(name, _)| self.keeps(name))
            .filter(|(name, _)| !self.set.contains_key(name))
            .collect();
        env.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.sort();
        env
    }

    /// The environment for shells from cmdr's own.
    pub fn apply_to_process(&self) -> Vec<(String, String)> {
        self.apply(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// Whether an inherited variable `name` is kept.
    fn keeps(&self, name: &str) -> bool {
        let any = |patterns: &[&str]| patterns.iter().any(|p| matches(p, name));
        if any(&NEVER_INHERITED) || super::SHELL_STARTUP_VARS.contains(&name) {
            return false;
        }
        let inherited = match self.inherit {
            Inherit::All => true,
            Inherit::Core => CORE_VARS.contains(&name),
            Inherit::None => false,
        };
        if !inherited || (!self.ignore_default_excludes && any(&DEFAULT_EXCLUDES)) {
            return false;
        }
        if self.exclude.iter().any(|p| matches(p, name)) {
            return false;
        }
        self.include_only.is_empty() || self.include_only.iter().any(|p| matches(p, name))
    }
}

/// Whether `name` matches `pattern` (`*` matches any run of characters), ignoring ASCII
/// case. Compares bytes in place: it runs for every inherited variable against every
/// pattern when a registry starts, which a one-shot `cmdr exec` pays for.
pub fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.as_bytes().split(|b| *b == b'*');
    let Some(first) = parts.next() else {
        return false;
    };
    let name = name.as_bytes();
    if !starts_with_ignoring_case(name, first) {
        return false;
    }
    let mut rest = &name[first.len()..];
    let Some(last) = parts.next_back() else {
        // No '*': an exact match.
        return rest.is_empty();
    };
    for part in parts {
        match find_ignoring_case(rest, part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest[rest.len() - last.len()..].eq_ignore_ascii_case(last)
}

fn starts_with_ignoring_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Where `needle` first occurs in `text`, ignoring ASCII case.
fn find_ignoring_case(text: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    text.windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "v".to_owned()))
            .collect()
    }

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn patterns_match_like_globs_ignoring_case() {
        assert!(matches("*KEY*", "CMDR_LLM_API_KEY"));
        assert!(matches("*key*", "my_Key_id"));
        assert!(matches("AWS_*", "AWS_REGION"));
        assert!(matches("*_TOKEN", "GITHUB_TOKEN"));
        assert!(!matches("*_TOKEN", "TOKENS"));
        assert!(matches("PATH", "path"));
        assert!(!matches("PATH", "PATHS"));
        assert!(matches("A*B*C", "AxxBxxC"));
        assert!(!matches("A*B*C", "AxxCxxB"));
    }

    /// The first implementation (upper-cased copies, `str::find`): the oracle.
    fn matches_by_uppercasing(pattern: &str, name: &str) -> bool {
        let (pattern, name) = (pattern.to_ascii_uppercase(), name.to_ascii_uppercase());
        let mut parts = pattern.split('*');
        let Some(first) = parts.next() else {
            return false;
        };
        let Some(mut rest) = name.strip_prefix(first) else {
            return false;
        };
        let parts: Vec<&str> = parts.collect();
        let Some((last, middle)) = parts.split_last() else {
            return rest.is_empty();
        };
        for part in middle {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last)
    }

    #[test]
    fn patterns_match_as_upper_cased_copies_did_for_every_short_pattern_and_name() {
        // Every pattern and name of up to four characters over an alphabet with both
        // cases, a non-ASCII letter and the wildcard.
        let alphabet = ["a", "A", "b", "*", "é", "_"];
        let mut words = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(last.iter().cloned());
        }
        let names: Vec<&String> = words.iter().filter(|w| !w.contains('*')).collect();
        let mut matched = 0;
        for pattern in &words {
            for name in &names {
                let expected = matches_by_uppercasing(pattern, name);
                assert_eq!(matches(pattern, name), expected, "{pattern:?} ~ {name:?}");
                matched += usize::from(expected);
            }
        }
        assert!(matched > 10_000, "{matched}");
    }

    #[test]
    fn the_default_drops_secrets_and_cmdrs_own_variables() {
        let env = EnvPolicy::default().apply(vars(&[
            "PATH",
            "HOME",
            "CMDR_AUTH_TOKEN",
            "CMDR_LLM_API_KEY",
            "CMDR_AGENTS_DIR",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "EDITOR",
            "BASH_ENV",
        ]));
        assert_eq!(names(&env), ["EDITOR", "HOME", "PATH"]);
    }

    #[test]
    fn inherit_include_only_exclude_and_set() {
        let all = vars(&[
            "PATH",
            "HOME",
            "EDITOR",
            "AWS_REGION",
            "API_KEY",
            "CMDR_AUTH_TOKEN",
        ]);
        let core = EnvPolicy {
            inherit: Inherit::Core,
            ..EnvPolicy::default()
        };
        assert_eq!(names(&core.apply(all.clone())), ["HOME", "PATH"]);
        let none = EnvPolicy {
            inherit: Inherit::None,
            set: [("X".to_owned(), "1".to_owned())].into(),
            ..EnvPolicy::default()
        };
        assert_eq!(none.apply(all.clone()), [("X".to_owned(), "1".to_owned())]);
        let keep_secrets = EnvPolicy {
            ignore_default_excludes: true,
            exclude: vec!["EDITOR".into()],
            include_only: vec!["*A*".into(), "PATH".into()],
            ..EnvPolicy::default()
        };
        // CMDR_* stays out whatever the policy.
        assert_eq!(
            names(&keep_secrets.apply(all)),
            ["API_KEY", "AWS_REGION", "PATH"]
        );
    }
}
