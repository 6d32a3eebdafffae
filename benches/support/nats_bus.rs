//! The NATS side of the benchmarks: a private `nats-server` (JetStream, free port,
//! temporary store, killed on drop), in-process workers on their own connections, a
//! producer, and a bare request/reply responder.

use std::net::TcpListener;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::Client;
use cmdr::nats::producer::{Producer, ProducerError, RemoteStream};
use cmdr::nats::worker::{self, WorkerOptions};
use cmdr_executors::{
    BashExecCommand, Command, CommandType, ExecContext, FnExecutor, Outcome, OutputResult, Registry,
};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::harness::{check_failed, ensure, succeeded, Failure};

/// Subject of the bare request/reply responder (outside `cmdr.>`: no worker sees it).
pub const ECHO: &str = "bench.echo";
pub use cmdr_test_support::PATIENCE;

/// A private nats-server with JetStream; killed (and its store removed) on drop.
pub struct NatsServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts `nats-server -js` on a free port with its store in a temporary directory.
    pub fn start() -> Result<Self, Failure> {
        let dir = tempfile::Builder::new()
            .prefix("cmdr-bench-nats-")
            .tempdir()?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.path().join("server.log"))?;
        let child = std::process::Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path().join("store"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| check_failed(format!("cannot start nats-server: {e}")))?;
        let mut server = Self { child, port, dir };
        server.wait_until_listening()?;
        Ok(server)
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// A new connection to this server.
    pub async fn connect(&self) -> Result<Client, Failure> {
        Ok(async_nats::connect(self.url()).await?)
    }

    fn wait_until_listening(&mut self) -> Result<(), Failure> {
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(self.dir.path().join("server.log"));
                let log = log.unwrap_or_default();
                return Err(check_failed(format!(
                    "nats-server exited ({status}): {log}"
                )));
            }
            ensure(Instant::now() < deadline, || {
                "nats-server did not listen".into()
            })?;
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `BASH_EXEC true` with no id (the producer or registry generates a UUID, as in
/// production).
pub fn bash_true() -> Command {
    Command::BashExec(BashExecCommand {
        command: "true".to_owned(),
        ..BashExecCommand::default()
    })
}

/// A registry whose `BASH_EXEC` is a no-op that succeeds at once and counts its runs.
/// Call inside the runtime.
pub fn noop_registry(ran: Arc<AtomicUsize>) -> Registry {
    let registry = Registry::new();
    let executor = FnExecutor(move |_: Command, _: ExecContext| {
        ran.fetch_add(1, Ordering::Relaxed);
        async { Ok(Outcome::succeeded("")) }
    });
    registry.register(CommandType::BashExec, executor);
    registry
}

/// An in-process worker (`worker::run`) on its own connection.
struct Worker {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), worker::WorkerError>>,
}

/// One server with its workers and a producer on its own connection.
pub struct Bus {
    /// The server (killed when the bus is dropped).
    pub server: NatsServer,
    /// Submits commands to the workers.
    pub producer: Producer,
    workers: Vec<Worker>,
    /// Runs counted by each no-op worker's executor (empty for real registries).
    ran: Vec<Arc<AtomicUsize>>,
    /// Commands whose stream ended `SUCCEEDED` on the producer side.
    pub succeeded: Arc<AtomicUsize>,
}

impl Bus {
    /// A server with one worker on `Registry::with_defaults()`.
    pub async fn with_default_worker() -> Result<Self, Failure> {
        let mut bus = Self::empty().await?;
        bus.add_worker(Registry::with_defaults()).await?;
        bus.until_ready().await?;
        Ok(bus)
    }

    /// A server with `workers` no-op workers, each with its own registry.
    pub async fn with_noop_workers(workers: usize) -> Result<Self, Failure> {
        let mut bus = Self::empty().await?;
        for _ in 0..workers {
            let ran = Arc::new(AtomicUsize::new(0));
            bus.add_worker(noop_registry(ran.clone())).await?;
            bus.ran.push(ran);
        }
        bus.until_ready().await?;
        Ok(bus)
    }

    async fn empty() -> Result<Self, Failure> {
        let server = NatsServer::start()?;
        let producer = Producer::new(server.connect().await?);
        Ok(Self {
            server,
            producer,
            workers: Vec::new(),
            ran: Vec::new(),
            succeeded: Arc::default(),
        })
    }

    async fn add_worker(&mut self, registry: Registry) -> Result<(), Failure> {
        let client = self.server.connect().await?;
        let stop = CancellationToken::new();
        let options = WorkerOptions {
            shutdown_grace: Duration::from_secs(1),
            ..WorkerOptions::default()
        };
        let until = stop.clone().cancelled_owned();
        let task = tokio::spawn(worker::run(client, registry, options, until));
        self.workers.push(Worker { stop, task });
        Ok(())
    }

    /// Submits `true` until a worker answers and every no-op worker has run a command
    /// (so no sample runs before the whole pool is subscribed).
    async fn until_ready(&self) -> Result<(), Failure> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.producer.submit(bash_true()).await {
                Err(ProducerError::NoWorkers(_)) => {}
                Err(e) => return Err(check_failed(format!("readiness probe: {e}"))),
                Ok(stream) => {
                    drain_remote(stream).await?;
                    self.succeeded.fetch_add(1, Ordering::Relaxed);
                    if self.ran.iter().all(|r| r.load(Ordering::Relaxed) > 0) {
                        return Ok(());
                    }
                }
            }
            ensure(Instant::now() < deadline, || {
                "the workers never all ran".into()
            })?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Checks that the no-op workers ran each succeeded command exactly once (no
    /// duplicates, none lost); returns each worker's share, for the log.
    pub fn exactly_once(&self) -> Result<Vec<usize>, Failure> {
        let ran: Vec<usize> = self.ran.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        let succeeded = self.succeeded.load(Ordering::Relaxed);
        let total: usize = ran.iter().sum();
        ensure(self.ran.is_empty() || total == succeeded, || {
            format!("workers ran {total} commands ({ran:?}), producer saw {succeeded} succeed")
        })?;
        Ok(ran)
    }

    /// Stops the workers gracefully (the server goes when the bus is dropped).
    pub async fn stop(self) -> Result<(), Failure> {
        for worker in &self.workers {
            worker.stop.cancel();
        }
        for worker in self.workers {
            let stopped = tokio::time::timeout(PATIENCE, worker.task).await;
            let stopped = stopped.map_err(|_| check_failed("a worker did not stop in time"))?;
            stopped?.map_err(|e| check_failed(format!("a worker failed: {e}")))?;
        }
        Ok(())
    }
}

/// Answers every request on [`ECHO`] at once with `reply`, on its own connection, until
/// the connection closes; returns once the subscription is known to the server.
pub async fn start_responder(server: &NatsServer, reply: bytes::Bytes) -> Result<(), Failure> {
    let client = server.connect().await?;
    let mut requests = client.subscribe(ECHO).await?;
    client.flush().await?;
    tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            if let Some(to) = request.reply {
                if client.publish(to, reply.clone()).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(())
}

/// Anything but `SUCCEEDED` fails the run here (the executors bench only reports it).
pub fn strict(failure: Failure) -> Failure {
    match failure {
        Failure::Engine(e) => check_failed(format!("not SUCCEEDED: {e}")),
        check => check,
    }
}

/// Reads a remote stream to its end: every message carries its command id, exactly one
/// terminal, last, and it is `SUCCEEDED`. Bounded by [`PATIENCE`].
pub async fn drain_remote(mut stream: RemoteStream) -> Result<OutputResult, Failure> {
    let id = stream.command_id().to_owned();
    let read = async move {
        let mut terminal = None;
        while let Some(message) = stream.next().await {
            ensure(terminal.is_none(), || "a message after the terminal".into())?;
            ensure(message.command_id == id, || {
                format!("a result of {} in the stream of {id}", message.command_id)
            })?;
            if message.status.is_terminal() {
                terminal = Some(message);
            }
        }
        terminal.ok_or_else(|| check_failed("the stream ended without a terminal"))
    };
    let terminal = tokio::time::timeout(PATIENCE, read).await??;
    succeeded(terminal).map_err(strict)
}
