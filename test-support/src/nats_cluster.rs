//! A three-node JetStream cluster on loopback for one test: routes between three
//! `nats-server` processes, each with its own port, store and config; nodes can be
//! SIGKILLed and started again.

use std::net::TcpListener;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::nats_server::{greets_as_nats, spawn};

/// One node.
struct Node {
    child: Child,
    port: u16,
    config: std::path::PathBuf,
}

/// A running cluster of three nodes (`n0`, `n1`, `n2`).
pub struct NatsCluster {
    nodes: Vec<Node>,
    /// Configs, stores and logs; removed with the cluster.
    dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts three nodes and waits until JetStream has a meta leader. Needs a current
    /// nats-server (2.10+; `scripts/nats-server-current.sh`): 2.9's clustered JetStream
    /// does not come up reliably on loopback.
    pub async fn start() -> Self {
        let version = std::process::Command::new(crate::nats_server::binary())
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        assert!(
            !version.contains("v2.9.") && !version.is_empty(),
            "the cluster tests need nats-server 2.10 or later, found {version:?}: run \
             scripts/nats-server-current.sh"
        );
        for _ in 0..5 {
            if let Some(cluster) = Self::try_start().await {
                return cluster;
            }
        }
        panic!("the cluster did not come up (5 tries)");
    }

    /// Starts three nodes on fresh ports: `None` if a node died at its start (a port
    /// taken by someone else between its choice and the node's bind).
    async fn try_start() -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let free = free_ports(6);
        let ports: Vec<(u16, u16)> = free.chunks(2).map(|pair| (pair[0], pair[1])).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        let mut nodes = Vec::new();
        for (i, (port, route)) in ports.iter().enumerate() {
            let store = dir.path().join(format!("store-{i}"));
            let config = dir.path().join(format!("n{i}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: n{i}\nlisten: 127.0.0.1:{port}\nlog_file: {:?}\n\
                     jetstream {{ store_dir: {:?} }}\n\
                     cluster {{ name: cmdr-test, listen: 127.0.0.1:{route}, routes: [{}] }}\n",
                    dir.path().join(format!("n{i}.log")).display().to_string(),
                    store.display().to_string(),
                    routes.join(", ")
                ),
            )
            .unwrap();
            nodes.push(Node {
                child: spawn(&config),
                port: *port,
                config,
            });
        }
        let mut cluster = Self { nodes, dir };
        for node in 0..3 {
            cluster.wait_listening(node);
        }
        cluster.wait_for_jetstream().await.then_some(cluster)
    }

    /// Every node's URL, comma-separated (what clients are given).
    pub fn urls(&self) -> String {
        (0..3).map(|i| self.url(i)).collect::<Vec<_>>().join(",")
    }

    /// Node `i`'s URL.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// SIGKILLs node `i`.
    pub fn kill(&mut self, i: usize) {
        let _ = self.nodes[i].child.kill();
        let _ = self.nodes[i].child.wait();
    }

    /// Starts node `i` again (same port, store and config).
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].child = spawn(&self.nodes[i].config);
        self.wait_listening(i);
    }

    /// The index of the node named `name` (`n0` …).
    pub fn index_of(name: &str) -> Option<usize> {
        name.strip_prefix('n')?.parse().ok().filter(|i| *i < 3)
    }

    fn wait_listening(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !greets_as_nats(self.nodes[i].port) {
            assert!(Instant::now() < deadline, "node n{i} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last lines of each node's log (for a failure's message).
    fn logs(&self) -> String {
        (0..3)
            .map(|i| {
                let log = self.dir.path().join(format!("n{i}.log"));
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                format!("--- n{i}\n{tail}\n")
            })
            .collect()
    }

    /// Waits until JetStream answers (the cluster elected a meta leader) and can place a
    /// stream on all three peers: false as soon as a node has died instead.
    async fn wait_for_jetstream(&mut self) -> bool {
        let urls: Vec<String> = (0..3).map(|i| self.url(i)).collect();
        // Asked often with a short timeout: a request made before the meta leader is
        // elected goes unanswered, and the client's default (10 s) would sit it out.
        let client = async_nats::ConnectOptions::new()
            .request_timeout(Some(Duration::from_secs(1)))
            .connect(urls)
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        let deadline = Instant::now() + Duration::from_secs(30);
        while js.query_account().await.is_err() {
            if self.a_node_died() {
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster's JetStream never came up; the nodes' logs:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A meta leader is not yet a formed cluster: until it has heard from every peer,
        // an R3 stream is refused ("no suitable peers for placement, peer offline").
        // Ready means one can be placed.
        let probe = async_nats::jetstream::stream::Config {
            name: "CMDR_TEST_PLACEMENT".to_owned(),
            subjects: vec!["cmdr-test-placement.>".to_owned()],
            num_replicas: 3,
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        };
        loop {
            match js.create_stream(probe.clone()).await {
                Ok(_) => {
                    let _ = js.delete_stream("CMDR_TEST_PLACEMENT").await;
                    break;
                }
                Err(e) => {
                    if self.a_node_died() {
                        return false;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "the cluster never placed a stream on three peers ({e}); the nodes' logs:\n{}",
                        self.logs()
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        !self.a_node_died()
    }

    /// Whether a node has exited (a node whose port was taken exits at once, while another
    /// node may answer on that port).
    fn a_node_died(&mut self) -> bool {
        self.nodes
            .iter_mut()
            .any(|node| !matches!(node.child.try_wait(), Ok(None)))
    }
}

/// `n` distinct free ports: all held at once while chosen, since the kernel may hand out
/// the same port again to a bind right after another one's was closed.
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().unwrap().port())
        .collect()
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}
