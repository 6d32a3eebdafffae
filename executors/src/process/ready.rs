//! Readiness of a background process (`ready` of `BASH_EXEC`, docs/processes.md): an
//! output regex, a TCP port accepting connections on 127.0.0.1, an `http://` URL
//! answering 2xx — the first that passes, or all of them with `all`.
//!
//! The port and HTTP checks poll every [`POLL`]; the output check looks at every new piece
//! of output (within a window of the last [`OUTPUT_WINDOW`] bytes, so a match split
//! across reads is found).

use std::time::Duration;

use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::ExecError;
use crate::protocol::ReadyCheck;

/// How often the port and HTTP checks are tried.
pub const POLL: Duration = Duration::from_millis(50);
/// How long a check waits by default.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Output kept for the regex, at most.
const OUTPUT_WINDOW: usize = 64 * 1024;
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A parsed, checked `ready`.
#[derive(Debug)]
pub struct Readiness {
    output: Option<Regex>,
    port: Option<u16>,
    http: Option<HttpTarget>,
    all: bool,
    /// How long to wait.
    pub timeout: Duration,
    /// Which checks passed so far.
    passed: [bool; 3],
    /// Recent output, for the regex.
    window: String,
}

#[derive(Debug)]
struct HttpTarget {
    host: String,
    port: u16,
    path: String,
}

impl Readiness {
    /// Checks the fields of `ready`; `INVALID_INPUT` naming the bad one.
    pub fn parse(ready: &ReadyCheck) -> Result<Self, ExecError> {
        let invalid = |what: String| ExecError::InvalidInput(format!("ready.{what}"));
        let output = match &ready.output {
            Some(pattern) => Some(
                Regex::new(pattern)
                    .map_err(|e| invalid(format!("output is not a valid regex: {e}")))?,
            ),
            None => None,
        };
        if ready.port == Some(0) {
            return Err(invalid("port must be 1..65535".to_owned()));
        }
        let http = match &ready.http {
            Some(url) => Some(parse_http(url).ok_or_else(|| {
                invalid(format!(
                    "http must be an http://host[:port]/path URL, got '{url}'"
                ))
            })?),
            None => None,
        };
        if output.is_none() && ready.port.is_none() && http.is_none() {
            return Err(invalid(
                "needs at least one of output, port, http".to_owned(),
            ));
        }
        Ok(Self {
            output,
            port: ready.port,
            http,
            all: ready.all,
            timeout: ready
                .timeout_ms
                .map_or(DEFAULT_READY_TIMEOUT, Duration::from_millis),
            passed: [false; 3],
            window: String::new(),
        })
    }

    /// Takes new output; whether the process is ready now.
    pub fn saw_output(&mut self, text: &str) -> bool {
        if let Some(re) = &self.output {
            if !self.passed[0] {
                self.window.push_str(text);
                if self.window.len() > OUTPUT_WINDOW {
                    let mut cut = self.window.len() - OUTPUT_WINDOW;
                    while !self.window.is_char_boundary(cut) {
                        cut += 1;
                    }
                    self.window.drain(..cut);
                }
                if re.is_match(&self.window) {
                    self.passed[0] = true;
                    self.window = String::new();
                }
            }
        }
        self.done()
    }

    /// Tries the port and HTTP checks once; whether the process is ready now.
    pub async fn probe(&mut self) -> bool {
        if let (Some(port), false) = (self.port, self.passed[1]) {
            self.passed[1] = port_open(port).await;
        }
        if let (Some(target), false) = (&self.http, self.passed[2]) {
            self.passed[2] = http_ok(target).await;
        }
        self.done()
    }

    /// Whether it needs polling at all (a port or URL to try).
    pub fn polls(&self) -> bool {
        self.port.is_some() || self.http.is_some()
    }

    /// What was waited for, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(re) = &self.output {
            parts.push(format!("output matching /{}/", re.as_str()));
        }
        if let Some(port) = self.port {
            parts.push(format!("port {port}"));
        }
        if let Some(target) = &self.http {
            parts.push(format!(
                "http://{}:{}{}",
                target.host, target.port, target.path
            ));
        }
        parts.join(if self.all { " and " } else { " or " })
    }

    fn done(&self) -> bool {
        let wanted = [
            self.output.is_some(),
            self.port.is_some(),
            self.http.is_some(),
        ];
        let mut checks = wanted.iter().zip(self.passed).filter(|(w, _)| **w);
        if self.all {
            checks.all(|(_, p)| p)
        } else {
            checks.any(|(_, p)| p)
        }
    }
}

/// `http://host[:port][/path]` (no credentials, no https).
fn parse_http(url: &str) -> Option<HttpTarget> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') || path.contains(['\r', '\n', ' ']) {
        return None;
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
            (host, port.parse().ok()?)
        }
        _ => (authority, 80),
    };
    Some(HttpTarget {
        host: host.trim_matches(['[', ']']).to_owned(),
        port,
        path: path.to_owned(),
    })
}

async fn port_open(port: u16) -> bool {
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(("127.0.0.1", port))).await,
        Ok(Ok(_))
    )
}

/// A GET answered with a 2xx status line.
async fn http_ok(target: &HttpTarget) -> bool {
    let probe = async {
        let mut stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nUser-Agent: cmdr-ready\r\n\r\n",
            target.path, target.host
        );
        stream.write_all(request.as_bytes()).await?;
        let mut head = [0u8; 16];
        let mut n = 0;
        while n < head.len() {
            let read = stream.read(&mut head[n..]).await?;
            if read == 0 {
                break;
            }
            n += read;
        }
        Ok::<_, std::io::Error>(head[..n].to_vec())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(head)) => {
            let text = String::from_utf8_lossy(&head);
            let mut parts = text.split(' ');
            parts.next().is_some_and(|v| v.starts_with("HTTP/"))
                && parts
                    .next()
                    .is_some_and(|code| code.starts_with('2') && code.len() == 3)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_strictly() {
        let t = parse_http("http://127.0.0.1:8080/health?x=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 8080, "/health?x=1")
        );
        let t = parse_http("http://localhost").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        for bad in [
            "https://x/",
            "http://",
            "http://u:p@x/",
            "ftp://x",
            "http://x/a b",
            "http://x:99999/",
        ] {
            assert!(parse_http(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_first_check_passes_unless_all_are_wanted() {
        let ready = ReadyCheck {
            output: Some("listening on \\d+".into()),
            port: Some(1),
            ..ReadyCheck::default()
        };
        let mut any = Readiness::parse(&ready).unwrap();
        assert!(!any.saw_output("starting… listening on "));
        assert!(
            any.saw_output("8080\n"),
            "a match split across reads is found"
        );
        let mut all = Readiness::parse(&ReadyCheck { all: true, ..ready }).unwrap();
        assert!(!all.saw_output("listening on 8080"));
        assert!(Readiness::parse(&ReadyCheck::default()).is_err());
        assert!(Readiness::parse(&ReadyCheck {
            output: Some("(".into()),
            ..ReadyCheck::default()
        })
        .is_err());
    }
}
