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
//!    `*TOKEN*`, `*PASSWORD*`, `*_PAT`, `SSH_AUTH_SOCK`, `*_DSN`, `*WEBHOOK*` …,
//!    case-insensitive), and values holding a URL with a password in it
//!    (`http://user:pass@proxy:3128`, `postgres://app:pw@db/app`: see
//!    [`has_url_password`]) are dropped, unless `ignore_default_excludes`;
//! 3. **exclude**: more patterns to drop;
//! 4. **include_only**: if not empty, only names matching one of these are kept;
//! 5. **no pagers**: inherited `*PAGER` variables are dropped and [`NO_PAGER`] (`PAGER`,
//!    `GIT_PAGER`, `MANPAGER` … = `cat`) set, so `git log` in a `tty` process prints and
//!    ends instead of waiting in `less` for a key;
//! 6. **set**: variables set explicitly (kept whatever the patterns say; they win over
//!    the pager defaults too).
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

/// Patterns dropped unless `ignore_default_excludes`: names that say they hold a secret,
/// and the usual places credentials hide under other names.
pub const DEFAULT_EXCLUDES: [&str; 20] = [
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*CREDENTIAL*",
    // Short names for a password or a personal access token (`DB_PASS`, `GH_PAT`).
    "*_PASS",
    "*_PWD",
    "*_PAT",
    // Auth material: npm's `NPM_CONFIG__AUTH`, `BASIC_AUTH_USER`, `HTTP_AUTHORIZATION`
    // (`GIT_AUTHOR_NAME` does not match).
    "AUTH",
    "AUTH_*",
    "*_AUTH",
    "*_AUTH_*",
    "*AUTHORIZATION*",
    // The SSH agent: a socket that signs as the user, to any host.
    "SSH_AUTH_SOCK",
    // Connection strings and URLs that carry their secret (Sentry DSNs, database URLs,
    // Slack-style webhook URLs).
    "DSN",
    "*_DSN",
    "*DATABASE_URL*",
    "*WEBHOOK*",
];

/// Pagers set to `cat` for every shell (after the inherited `*PAGER` variables are
/// dropped), unless the policy's `set` or a command's `env` sets them: a shell's output is
/// read by a program, and a `tty` process (`TERM=xterm-256color`) would otherwise open
/// `less` for `git log`, `man`, `systemctl`, `gh` or `aws` and wait for a key. Tools with
/// their own variable fall back to `PAGER` (`psql`, `bat`).
pub const NO_PAGER: [(&str, &str); 6] = [
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("GH_PAGER", "cat"),
    ("AWS_PAGER", "cat"),
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
            .filter(|(name, value)| self.keeps(name, value))
            .filter(|(name, _)| !matches("*PAGER", name))
            .filter(|(name, _)| !self.set.contains_key(name))
            .collect();
        env.extend(
            NO_PAGER
                .iter()
                .filter(|(name, _)| !self.set.contains_key(*name))
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
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

    /// Whether an inherited variable `name` (holding `value`) is kept.
    fn keeps(&self, name: &str, value: &str) -> bool {
        let any = |patterns: &[&str]| patterns.iter().any(|p| matches(p, name));
        if any(&NEVER_INHERITED) || super::SHELL_STARTUP_VARS.contains(&name) {
            return false;
        }
        let inherited = match self.inherit {
            Inherit::All => true,
            Inherit::Core => CORE_VARS.contains(&name),
            Inherit::None => false,
        };
        let secret = any(&DEFAULT_EXCLUDES) || has_url_password(name, value);
        if !inherited || (!self.ignore_default_excludes && secret) {
            return false;
        }
        if self.exclude.iter().any(|p| matches(p, name)) {
            return false;
        }
        self.include_only.is_empty() || self.include_only.iter().any(|p| matches(p, name))
    }
}

/// Whether `value` holds a URL with a password in its user information
/// (`scheme://user:password@host…`, anywhere in the value), or, for a `*PROXY*` variable
/// (which tools also take without a scheme), starts with `user:password@host`. A user name
/// alone (`ssh://git@host`) is not a secret.
fn has_url_password(name: &str, value: &str) -> bool {
    let schemeless = matches("*PROXY*", name).then_some(value);
    value
        .match_indices("://")
        .map(|(at, separator)| &value[at + separator.len()..])
        .chain(schemeless)
        .any(|rest| {
            let authority = rest
                .split(|c: char| matches!(c, '/' | '?' | '#' | ',') || c.is_whitespace())
                .next()
                .unwrap_or_default();
            authority
                .rsplit_once('@')
                .is_some_and(|(user_info, _)| user_info.contains(':'))
        })
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
        assert_eq!(names(&inherited(&env)), ["EDITOR", "HOME", "PATH"]);
    }

    /// What `env` holds beyond the pager defaults.
    fn inherited(env: &[(String, String)]) -> Vec<(String, String)> {
        env.iter()
            .filter(|(name, value)| !NO_PAGER.contains(&(name.as_str(), value.as_str())))
            .cloned()
            .collect()
    }

    /// Issue 32: credentials under names the first patterns missed, and URLs with a
    /// password inside, stay out by default; `ignore_default_excludes` brings them back.
    #[test]
    fn credentials_under_other_names_and_in_urls_are_dropped_by_default() {
        let secrets = [
            ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
            ("GH_PAT", "github_pat_11"),
            ("AZURE_DEVOPS_EXT_PAT", "pat"),
            ("NPM_CONFIG__AUTH", "dXNlcjpwYXNz"),
            ("npm_config_//registry.npmjs.org/:_authToken", "npm_abc"),
            ("BASIC_AUTH_USER", "admin"),
            ("HTTP_AUTHORIZATION", "Bearer x"),
            ("DB_PASS", "hunter2"),
            ("MYSQL_PWD", "hunter2"),
            ("SSH_PASSPHRASE", "words"),
            ("SENTRY_DSN", "https://k@o1.ingest.sentry.io/1"),
            ("DATABASE_URL", "postgres://localhost/app"),
            ("TEST_DATABASE_URL", "postgres://localhost/test"),
            (
                "SLACK_WEBHOOK_URL",
                "https://hooks.slack.com/services/T/B/x",
            ),
            ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
            ("http_proxy", "user:pw@proxy:3128"),
            ("ALL_PROXY", "socks5://u:p@proxy:1080"),
            ("REDIS_URL", "redis://:pw@cache:6379/0"),
            ("PIP_INDEX_URL", "https://u:p@pypi.example/simple"),
            ("MIRRORS", "https://a.example https://u:p@b.example/x"),
        ];
        let harmless = [
            ("GIT_AUTHOR_NAME", "Ada"),
            ("XAUTHORITY", "/run/user/1000/xauth"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("HTTP_PROXY", "http://proxy:3128"),
            ("GIT_REMOTE", "ssh://git@github.com/o/r.git"),
            ("EMAIL", "ada@example.com"),
            ("PWD", "/home/ada"),
            ("OLDPWD", "/tmp"),
            ("PATHS", "a:b@c"),
        ];
        let all: Vec<(String, String)> = secrets
            .iter()
            .chain(&harmless)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let kept = EnvPolicy::default().apply(all.clone());
        let mut expected: Vec<&str> = harmless.iter().map(|(k, _)| *k).collect();
        expected.sort_unstable();
        assert_eq!(names(&inherited(&kept)), expected);
        let keep_secrets = EnvPolicy {
            ignore_default_excludes: true,
            ..EnvPolicy::default()
        };
        assert_eq!(inherited(&keep_secrets.apply(all.clone())).len(), all.len());
    }

    /// Issue 33: pagers are `cat` unless set; inherited pagers are replaced, `set` wins.
    #[test]
    fn pagers_are_cat_unless_set() {
        let inherited = vec![
            ("PAGER".to_owned(), "less".to_owned()),
            ("PSQL_PAGER".to_owned(), "less -S".to_owned()),
            ("EDITOR".to_owned(), "vi".to_owned()),
        ];
        let env = EnvPolicy::default().apply(inherited.clone());
        let pagers: Vec<(&str, &str)> = env
            .iter()
            .filter(|(k, _)| k.ends_with("PAGER"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut expected = NO_PAGER.to_vec();
        expected.sort_unstable();
        assert_eq!(pagers, expected);
        assert!(env.contains(&("EDITOR".to_owned(), "vi".to_owned())));
        let chosen = EnvPolicy {
            inherit: Inherit::None,
            set: [("GIT_PAGER".to_owned(), "less".to_owned())].into(),
            ..EnvPolicy::default()
        };
        let env = chosen.apply(inherited);
        assert!(env.contains(&("GIT_PAGER".to_owned(), "less".to_owned())));
        assert!(env.contains(&("PAGER".to_owned(), "cat".to_owned())));
        assert_eq!(env.len(), NO_PAGER.len());
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
        assert_eq!(
            names(&inherited(&core.apply(all.clone()))),
            ["HOME", "PATH"]
        );
        let none = EnvPolicy {
            inherit: Inherit::None,
            set: [("X".to_owned(), "1".to_owned())].into(),
            ..EnvPolicy::default()
        };
        assert_eq!(
            inherited(&none.apply(all.clone())),
            [("X".to_owned(), "1".to_owned())]
        );
        let keep_secrets = EnvPolicy {
            ignore_default_excludes: true,
            exclude: vec!["EDITOR".into()],
            include_only: vec!["*A*".into(), "PATH".into()],
            ..EnvPolicy::default()
        };
        // CMDR_* stays out whatever the policy.
        assert_eq!(
            names(&inherited(&keep_secrets.apply(all))),
            ["API_KEY", "AWS_REGION", "PATH"]
        );
    }
}
