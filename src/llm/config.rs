//! Where the model lives and how long to wait for it, read from the environment.

use std::fmt;
use std::time::Duration;

use super::LlmError;

/// Variable holding the provider's OpenAI-compatible base URL (required).
const ENV_BASE_URL: &str = "CMDR_LLM_BASE_URL";
/// Variable holding the API key (optional: local servers such as Ollama need none).
const ENV_API_KEY: &str = "CMDR_LLM_API_KEY";
/// Variable holding the default model name (required).
const ENV_MODEL: &str = "CMDR_LLM_MODEL";
/// Variable holding the idle timeout in whole seconds (optional, default 120).
const ENV_IDLE_TIMEOUT_SECS: &str = "CMDR_LLM_IDLE_TIMEOUT_SECS";
/// Variable holding how long a provider answering 503 is asked again, in whole seconds
/// (optional, default 60).
const ENV_LOADING_WAIT_SECS: &str = "CMDR_LLM_LOADING_WAIT_SECS";

/// How to reach an OpenAI-compatible chat-completions provider.
///
/// `Debug` never shows the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct LlmConfig {
    /// The provider's base URL, e.g. `https://api.openai.com/v1`,
    /// `https://generativelanguage.googleapis.com/v1beta/openai` or
    /// `http://localhost:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// The model used when a request names none.
    pub model: String,
    /// How long the stream may stay silent (no bytes at all) before it fails with
    /// [`LlmError::Timeout`]; also bounds the wait for the response headers.
    pub idle_timeout: Duration,
    /// How long establishing the connection (TCP and TLS) may take.
    pub connect_timeout: Duration,
    /// How long a provider that answers 503 (e.g. a local server still loading its model)
    /// is asked again, with a growing pause, before the 503 is the answer.
    pub loading_wait: Duration,
}

impl LlmConfig {
    /// The idle timeout when `CMDR_LLM_IDLE_TIMEOUT_SECS` is unset.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
    /// The connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The loading wait when `CMDR_LLM_LOADING_WAIT_SECS` is unset.
    pub const DEFAULT_LOADING_WAIT: Duration = Duration::from_secs(60);

    /// A configuration without API key and with the default timeouts.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            loading_wait: Self::DEFAULT_LOADING_WAIT,
        }
    }

    /// Reads `CMDR_LLM_BASE_URL`, `CMDR_LLM_API_KEY`, `CMDR_LLM_MODEL` and
    /// `CMDR_LLM_IDLE_TIMEOUT_SECS` from the process environment (see
    /// [`from_lookup`](Self::from_lookup)).
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (a variable name → its value).
    ///
    /// Blank values count as unset. A missing base URL or model gives
    /// [`LlmError::NotConfigured`] naming every missing variable; an idle timeout that is
    /// not a positive whole number of seconds gives [`LlmError::NotConfigured`] too.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let base_url = get(ENV_BASE_URL);
        let model = get(ENV_MODEL);
        let (Some(base_url), Some(model)) = (base_url.clone(), model.clone()) else {
            let missing: Vec<&str> = [(ENV_BASE_URL, base_url), (ENV_MODEL, model)]
                .into_iter()
                .filter_map(|(name, value)| value.is_none().then_some(name))
                .collect();
            return Err(LlmError::NotConfigured(format!(
                "{} not set",
                missing.join(" and ")
            )));
        };
        let idle_timeout = match get(ENV_IDLE_TIMEOUT_SECS) {
            None => Self::DEFAULT_IDLE_TIMEOUT,
            Some(text) => parse_secs(ENV_IDLE_TIMEOUT_SECS, &text, 1)?,
        };
        let loading_wait = match get(ENV_LOADING_WAIT_SECS) {
            None => Self::DEFAULT_LOADING_WAIT,
            Some(text) => parse_secs(ENV_LOADING_WAIT_SECS, &text, 0)?,
        };
        Ok(Self {
            api_key: get(ENV_API_KEY),
            idle_timeout,
            loading_wait,
            ..Self::new(base_url, model)
        })
    }
}

/// Parses a whole number of seconds, at least `min`, for the variable `name`.
fn parse_secs(name: &str, text: &str, min: u64) -> Result<Duration, LlmError> {
    match text.parse::<u64>() {
        Ok(secs) if secs >= min => Ok(Duration::from_secs(secs)),
        _ => Err(LlmError::NotConfigured(format!(
            "{name} must be a whole number of seconds (at least {min}), got {text:?}"
        ))),
    }
}

/// `url` without user name, password, query or fragment (where credentials may hide), for
/// errors and logs. Text that is not a URL is returned as is (it holds no credentials
/// a URL parser would find either).
pub(super) fn safe_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.to_owned();
    };
    // Both fail only for URLs that cannot have credentials (`mailto:` …): nothing to strip.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    parsed.into()
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &safe_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("loading_wait", &self.loading_wait)
            .finish()
    }
}
