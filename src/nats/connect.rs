//! Connecting to NATS like a NATS client should: one or more server URLs (a cluster),
//! credentials (user and password, also from the URL's `user:pass@`; a token; an nkey seed
//! file; a creds (JWT) file), TLS (a CA, a client certificate and key, `tls://` URLs), and
//! the client's own reconnect backoff. Secrets never reach a log line or an error message:
//! URLs are shown with their credentials masked ([`redact`]), and the credentials are
//! taken out of the URLs before the client sees them.

use std::fmt;
use std::path::PathBuf;

use async_nats::{Client, ConnectOptions, Event, ServerAddr};

/// A user name and password.
type UserPass = (String, String);

/// How to reach and authenticate to NATS.
#[derive(Clone, Default)]
pub struct NatsConnect {
    /// Server URLs (`nats://`, `tls://`), tried in turn; more are learnt from the cluster.
    pub servers: Vec<String>,
    /// The connection's name (`cmdr worker` …), shown by the server.
    pub name: String,
    /// User name (with [`NatsConnect::password`]).
    pub user: Option<String>,
    /// Password of [`NatsConnect::user`].
    pub password: Option<String>,
    /// Authentication token.
    pub token: Option<String>,
    /// A file holding an nkey seed (`SU…`).
    pub nkey_file: Option<PathBuf>,
    /// A creds file (user JWT and nkey seed, as `nsc` writes them).
    pub creds_file: Option<PathBuf>,
    /// CA certificate(s) to trust (PEM).
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM), with [`NatsConnect::tls_key`].
    pub tls_cert: Option<PathBuf>,
    /// Client key (PEM).
    pub tls_key: Option<PathBuf>,
    /// Require TLS even with `nats://` URLs.
    pub tls_required: bool,
    /// The producer id this connection's commands carry (default: the user name); also
    /// its inbox prefix (`_INBOX.<id>`), so that permissions can give each producer its
    /// own replies.
    pub producer_id: Option<String>,
}

impl fmt::Debug for NatsConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let masked = |set: bool| if set { "***" } else { "-" };
        f.debug_struct("NatsConnect")
            .field("servers", &self.shown_servers())
            .field("name", &self.name)
            .field("user", &self.user)
            .field("password", &masked(self.password.is_some()))
            .field("token", &masked(self.token.is_some()))
            .field("nkey_file", &self.nkey_file)
            .field("creds_file", &self.creds_file)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("tls_required", &self.tls_required)
            .field("producer_id", &self.producer_id)
            .finish()
    }
}

/// Why connecting failed. The text never holds a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    /// A server URL that cannot be parsed (shown masked).
    #[error("invalid NATS server URL {url}: {why}")]
    Url {
        /// The URL, credentials masked.
        url: String,
        /// Why.
        why: String,
    },
    /// A credentials or certificate file that cannot be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    File {
        /// What the file was for.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Two ways to authenticate at once.
    #[error("{0}")]
    Conflict(&'static str),
    /// No server could be reached or the server refused us.
    #[error("cannot connect to NATS at {servers}: {source}")]
    Connect {
        /// The servers, credentials masked.
        servers: String,
        /// The client's error.
        source: async_nats::ConnectError,
    },
}

/// The default producer id of a client that names none and connects as no user: `u` and
/// 16 hex digits of SHA-256 of this machine's host name and the user id, so every run of
/// the same user on the same machine is the same producer (docs/nats.md, "Producer ids").
pub fn stable_producer_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let uid = rustix::process::getuid().as_raw();
    let seed = format!("{}\0{uid}", host.trim());
    let digest = ring::digest::digest(&ring::digest::SHA256, seed.as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("u{hex}")
}

impl NatsConnect {
    /// One server URL (or a comma-separated list), named `name`, without credentials.
    pub fn new(servers: &str, name: &str) -> Self {
        Self {
            servers: split_servers(servers),
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// The servers as they may be shown (credentials masked), comma-separated.
    pub fn shown_servers(&self) -> String {
        self.servers
            .iter()
            .map(|s| redact(s))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The producer id: the one given, else the user name (flag or URL), else
    /// [`stable_producer_id`] (the same for every run of this user on this machine, so a
    /// durable command resubmitted after a restart is still recognised).
    pub fn producer_id(&self) -> String {
        self.producer_id
            .clone()
            .or_else(|| self.user.clone())
            .or_else(|| {
                self.addresses()
                    .ok()
                    .and_then(|(_, from_url)| from_url)
                    .map(|(user, _)| user)
            })
            .unwrap_or_else(stable_producer_id)
    }

    /// Connects, logging (without secrets) which server it is connected to as that changes.
    pub async fn connect(&self) -> Result<Client, ConnectFailure> {
        let (addrs, from_url) = self.addresses()?;
        let options = self.options(from_url).await?;
        options
            .connect(addrs)
            .await
            .map_err(|source| ConnectFailure::Connect {
                servers: self.shown_servers(),
                source,
            })
    }

    /// The server addresses without credentials, and the user/password one of them held.
    fn addresses(&self) -> Result<(Vec<ServerAddr>, Option<UserPass>), ConnectFailure> {
        let mut from_url = None;
        let mut addrs = Vec::new();
        for server in &self.servers {
            let bad = |why: String| ConnectFailure::Url {
                url: redact(server),
                why,
            };
            let mut addr: ServerAddr = server
                .parse()
                .map_err(|e: std::io::Error| bad(e.to_string()))?;
            if let Some(user) = addr.username() {
                let user = percent_decode(user);
                let pass = addr.password().map(percent_decode).unwrap_or_default();
                from_url.get_or_insert((user, pass));
                let mut url = addr.into_inner();
                let _ = url.set_username("");
                let _ = url.set_password(None);
                addr = ServerAddr::from_url(url).map_err(|e| bad(e.to_string()))?;
            }
            addrs.push(addr);
        }
        if addrs.is_empty() {
            return Err(ConnectFailure::Url {
                url: String::new(),
                why: "no server URL given".to_owned(),
            });
        }
        Ok((addrs, from_url))
    }

    /// The client's options: name, credentials, TLS, logging of connection events.
    async fn options(&self, from_url: Option<UserPass>) -> Result<ConnectOptions, ConnectFailure> {
        let ways = [
            self.user.is_some() || from_url.is_some(),
            self.token.is_some(),
            self.nkey_file.is_some(),
            self.creds_file.is_some(),
        ];
        if ways.iter().filter(|w| **w).count() > 1 {
            return Err(ConnectFailure::Conflict(
                "give one way to authenticate to NATS: user and password, a token, an nkey \
                 or a creds file",
            ));
        }
        let mut options = ConnectOptions::new()
            .name(&self.name)
            .event_callback(|event| async move { log_event(event) });
        options = options.custom_inbox_prefix(format!("_INBOX.{}", self.producer_id()));
        if let Some(user) = &self.user {
            let password = self.password.clone().unwrap_or_default();
            options = options.user_and_password(user.clone(), password);
        } else if let Some((user, password)) = from_url {
            options = options.user_and_password(user, password);
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if let Some(path) = &self.nkey_file {
            let seed = read("nkey seed file", path)?;
            options = options.nkey(seed.trim().to_owned());
        }
        if let Some(path) = &self.creds_file {
            options =
                options
                    .credentials_file(path)
                    .await
                    .map_err(|source| ConnectFailure::File {
                        what: "creds file",
                        path: path.clone(),
                        source,
                    })?;
        }
        if let Some(ca) = &self.tls_ca {
            options = options.add_root_certificates(ca.clone());
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                options = options.add_client_certificate(cert.clone(), key.clone());
            }
            (None, None) => {}
            _ => {
                return Err(ConnectFailure::Conflict(
                    "a TLS client certificate needs its key (--nats-tlscert with --nats-tlskey)",
                ))
            }
        }
        if self.tls_required {
            options = options.require_tls(true);
        }
        Ok(options)
    }
}

/// The server a client is connected to, as `host:port (name)`, for `/health` and logs.
pub fn connected_server(client: &Client) -> String {
    let info = client.server_info();
    if info.server_name.is_empty() || info.server_name == info.server_id {
        format!("{}:{}", info.host, info.port)
    } else {
        format!("{}:{} ({})", info.host, info.port, info.server_name)
    }
}

fn log_event(event: Event) {
    match event {
        Event::Connected => tracing::info!("connected to NATS"),
        Event::Disconnected => tracing::warn!("disconnected from NATS; reconnecting"),
        other => tracing::info!("NATS: {other}"),
    }
}

fn read(what: &'static str, path: &PathBuf) -> Result<String, ConnectFailure> {
    std::fs::read_to_string(path).map_err(|source| ConnectFailure::File {
        what,
        path: path.clone(),
        source,
    })
}

/// A comma-separated list of URLs, blanks dropped.
fn split_servers(servers: &str) -> Vec<String> {
    servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `url` with any password (or a lone user, which may be a token) masked:
/// `nats://alice:***@host:4222`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let shown = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_owned(),
    };
    format!("{scheme}://{shown}@{host}")
}

/// Decodes `%XX` escapes of a URL's user or password.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_secrets() {
        assert_eq!(
            redact("nats://alice:s3cret@host:4222"),
            "nats://alice:***@host:4222"
        );
        assert_eq!(redact("nats://t0ken@host:4222"), "nats://***@host:4222");
        assert_eq!(redact("nats://host:4222"), "nats://host:4222");
        let connect = NatsConnect {
            password: Some("s3cret".into()),
            token: Some("t0ken".into()),
            ..NatsConnect::new("nats://a:pw@h:1, tls://h:2", "t")
        };
        let shown = format!("{connect:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken") && !shown.contains("pw"),
            "{shown}"
        );
        assert_eq!(connect.servers.len(), 2);
    }

    #[test]
    fn credentials_come_out_of_the_url() {
        let connect = NatsConnect::new("nats://al%40ice:p%3Aw@127.0.0.1:4222", "t");
        let (addrs, from_url) = connect.addresses().unwrap();
        assert_eq!(from_url, Some(("al@ice".to_owned(), "p:w".to_owned())));
        assert!(
            !addrs[0].as_url_str().contains("p%3Aw"),
            "{}",
            addrs[0].as_url_str()
        );
        assert_eq!(addrs[0].username(), None);
    }
}
