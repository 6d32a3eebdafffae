//! A real `nats-server` for one test: free port, JetStream, temporary store, killed on
//! drop. Fails with a clear message when `nats-server` is not installed.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nats-server.
pub struct NatsServer {
    child: Child,
    port: u16,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts a server with default limits.
    pub fn start() -> Self {
        Self::start_with_config("")
    }

    /// Starts a server with extra configuration-file text (e.g. `max_payload: 65536`).
    /// A free port can be taken by someone else before the server binds it: then the
    /// server exits and another port is tried.
    pub fn start_with_config(extra: &str) -> Self {
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let config = dir.path().join("nats.conf");
            let store = dir.path().join("store");
            std::fs::write(
                &config,
                format!(
                    "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n{extra}\n",
                    store.display().to_string()
                ),
            )
            .unwrap();
            let mut server = Self {
                child: spawn(&config),
                port,
                config,
                _dir: dir,
            };
            if server.wait_until_listening() {
                return server;
            }
        }
        panic!("nats-server could not start on a free port (5 tries)");
    }

    /// Kills the server (SIGKILL) and starts it again on the same port and store.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(&self.config);
        assert!(self.wait_until_listening(), "nats-server did not restart");
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Waits until this server (not some other process on the port: it must greet with
    /// NATS `INFO`) answers; `false` when it exited first (its port was taken).
    fn wait_until_listening(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            if greets_as_nats(self.port) {
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "nats-server did not start listening"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until a command published now would reach a worker (its queue subscription is
    /// known to the server): a request on a probe subject the worker never answers gets
    /// "no responders" until then.
    pub async fn wait_for_subscribers(&self, client: &async_nats::Client) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let probe = async_nats::Request::new()
                .payload("{}".into())
                .timeout(Some(Duration::from_millis(200)));
            match client.send_request("cmdr.commands.PROBE", probe).await {
                Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {}
                _ => return,
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no worker subscribed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nats-server to run: `CMDR_TEST_NATS_SERVER` if set, else the current release
/// `scripts/nats-server-current.sh` installs in `target/tools/`, else `nats-server` on PATH
/// (Debian's 2.9.10, the minimum supported version).
pub fn binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("CMDR_TEST_NATS_SERVER") {
        return path.into();
    }
    let current =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/nats-server");
    if current.is_file() {
        return current;
    }
    "nats-server".into()
}

pub(crate) fn spawn(config: &std::path::Path) -> Child {
    Command::new(binary())
        .arg("-c")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start nats-server ({e}): install it with `apt-get install nats-server` \
                 (scripts/ci-deps.sh does this for CI)"
            )
        })
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether whatever listens on `port` greets like a NATS server.
pub(crate) fn greets_as_nats(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut greeting = [0u8; 5];
    stream.read_exact(&mut greeting).is_ok() && &greeting == b"INFO "
}
