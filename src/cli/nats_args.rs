//! The NATS connection flags of `worker`, `submit` and `serve --nats`: credentials and TLS,
//! named like the `nats` CLI's (with a `nats-` prefix). Secrets are better given through
//! the environment than on a command line that `ps` shows.

use std::path::PathBuf;

use crate::nats::connect::NatsConnect;

/// How to authenticate to NATS and whether to use TLS.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NatsAuthArgs {
    /// NATS user name (a URL's `user:pass@` works too).
    #[arg(long = "nats-user", env = "CMDR_NATS_USER", value_name = "USER")]
    pub user: Option<String>,
    /// NATS password (prefer the environment variable).
    #[arg(
        long = "nats-password",
        env = "CMDR_NATS_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub password: Option<String>,
    /// NATS authentication token (prefer the environment variable).
    #[arg(
        long = "nats-token",
        env = "CMDR_NATS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// A file holding an nkey seed.
    #[arg(long = "nats-nkey", env = "CMDR_NATS_NKEY", value_name = "SEED_FILE")]
    pub nkey: Option<PathBuf>,
    /// A creds file (user JWT and seed).
    #[arg(long = "nats-creds", env = "CMDR_NATS_CREDS", value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// CA certificate to trust for TLS (PEM).
    #[arg(long = "nats-tlsca", env = "CMDR_NATS_TLSCA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate for TLS (PEM), with --nats-tlskey.
    #[arg(long = "nats-tlscert", env = "CMDR_NATS_TLSCERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// Client key for TLS (PEM).
    #[arg(long = "nats-tlskey", env = "CMDR_NATS_TLSKEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Require TLS even with nats:// URLs.
    #[arg(long = "nats-tls", env = "CMDR_NATS_TLS")]
    pub tls: bool,
    /// The producer id in this client's subjects (cmdr.commands.<id>.…); default: the NATS
    /// user name, else one stable for this user on this machine (docs/nats.md).
    /// Permissions confine a producer to its id's subjects.
    #[arg(long = "producer-id", env = "CMDR_PRODUCER_ID", value_name = "ID")]
    pub producer_id: Option<String>,
}

impl NatsAuthArgs {
    /// The connection to `servers` (one URL or a comma-separated list) named `name`.
    pub fn connect(&self, servers: &str, name: &str) -> NatsConnect {
        NatsConnect {
            user: self.user.clone(),
            password: self.password.clone(),
            token: self.token.clone(),
            nkey_file: self.nkey.clone(),
            creds_file: self.creds.clone(),
            tls_ca: self.tls_ca.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_required: self.tls,
            producer_id: self.producer_id.clone(),
            ..NatsConnect::new(servers, name)
        }
    }
}
