//! A pool on an authenticated bus: workers and producers connect with a user and password
//! (flags, environment, or the URL's `user:pass@`), a token, an nkey seed, or over TLS with
//! a CA; several server URLs are tried in turn; and no secret ever reaches stderr.

use std::path::Path;
use std::process::{Output, Stdio};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{NatsServer, PATIENCE};

const COMMAND: &str = r#"{"commandType":"BASH_EXEC","command":"echo ran-on-the-pool"}"#;

fn cmdr() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdr"));
    for var in [
        "CMDR_NATS_USER",
        "CMDR_NATS_PASSWORD",
        "CMDR_NATS_TOKEN",
        "CMDR_NATS_URL",
    ] {
        command.env_remove(var);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// A `cmdr worker` with these arguments and environment, once it says it is serving.
async fn worker(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut command = cmdr();
    command.arg("worker").args(args).envs(env.iter().copied());
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("cmdr worker: serving") {
                return line;
            }
        }
        panic!("the worker ended before serving");
    })
    .await
    .expect("the worker serves");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    assert!(!ready.contains("s3cret"), "{ready}");
    child
}

/// `cmdr submit --combine` with these arguments, to its end.
async fn submit(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = cmdr();
    command
        .arg("submit")
        .arg("--combine")
        .args(args)
        .arg(COMMAND)
        .envs(env.iter().copied());
    tokio::time::timeout(PATIENCE, command.output())
        .await
        .expect("submit ends")
        .unwrap()
}

fn assert_ran(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("ran-on-the-pool"),
        "status {:?}\nstdout {stdout}\nstderr {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A refused connection: a clear failure, the secret nowhere in what was printed.
fn assert_refused_quietly(output: &Output, secret: &str) {
    assert!(!output.status.success());
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("NATS"), "{printed}");
    assert!(
        !printed.contains(secret),
        "the secret was printed: {printed}"
    );
}

#[tokio::test]
async fn users_and_passwords_from_flags_environment_and_url_never_printed() {
    let server = NatsServer::start_with_config(
        "authorization { users = [ {user: worker, password: \"w0rker-s3cret\"}, \
         {user: producer, password: \"pr0ducer-s3cret\"} ] }",
    );
    let url = server.url();
    let _worker = worker(
        &["--nats", &url, "--nats-user", "worker"],
        &[("CMDR_NATS_PASSWORD", "w0rker-s3cret")],
    )
    .await;
    let with_url = url.replace("nats://", "nats://producer:pr0ducer-s3cret@");
    assert_ran(&submit(&["--nats", &with_url], &[]).await);
    let flags = [
        "--nats",
        &url,
        "--nats-user",
        "producer",
        "--nats-password",
        "pr0ducer-s3cret",
    ];
    assert_ran(&submit(&flags, &[]).await);

    let wrong_url = url.replace("nats://", "nats://producer:wr0ng-s3cret@");
    let refused = submit(&["--nats", &wrong_url], &[]).await;
    assert_refused_quietly(&refused, "wr0ng-s3cret");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("producer:***"));
    let refused = submit(
        &["--nats", &url, "--nats-user", "producer"],
        &[("CMDR_NATS_PASSWORD", "wr0ng-s3cret")],
    )
    .await;
    assert_refused_quietly(&refused, "wr0ng-s3cret");
    let anonymous = submit(&["--nats", &url], &[]).await;
    assert!(
        !anonymous.status.success(),
        "an anonymous producer is refused"
    );
}

#[tokio::test]
async fn a_token_or_an_nkey_authenticates() {
    let server = NatsServer::start_with_config("authorization { token: \"t0ken-s3cret\" }");
    let url = server.url();
    let _worker = worker(&["--nats", &url], &[("CMDR_NATS_TOKEN", "t0ken-s3cret")]).await;
    assert_ran(&submit(&["--nats", &url, "--nats-token", "t0ken-s3cret"], &[]).await);
    let refused = submit(&["--nats", &url, "--nats-token", "n0t-the-s3cret"], &[]).await;
    assert_refused_quietly(&refused, "n0t-the-s3cret");

    let key = nkeys::KeyPair::new_user();
    let dir = tempfile::tempdir().unwrap();
    let seed_file = dir.path().join("user.nk");
    std::fs::write(&seed_file, key.seed().unwrap()).unwrap();
    let server = NatsServer::start_with_config(&format!(
        "authorization {{ users = [ {{nkey: {}}} ] }}",
        key.public_key()
    ));
    let url = server.url();
    let seed = seed_file.to_str().unwrap();
    let _worker = worker(&["--nats", &url, "--nats-nkey", seed], &[]).await;
    assert_ran(&submit(&["--nats", &url, "--nats-nkey", seed], &[]).await);
    let other = nkeys::KeyPair::new_user();
    let other_file = dir.path().join("other.nk");
    std::fs::write(&other_file, other.seed().unwrap()).unwrap();
    let refused = submit(
        &["--nats", &url, "--nats-nkey", other_file.to_str().unwrap()],
        &[],
    )
    .await;
    assert_refused_quietly(&refused, &other.seed().unwrap());
}

/// A CA and a server certificate for 127.0.0.1, made with openssl.
fn certificates(dir: &Path) {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed (scripts/ci-deps.sh)");
        assert!(status.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=cmdr test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
}

#[tokio::test]
async fn tls_with_a_ca_and_several_servers() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let server = NatsServer::start_with_config(&format!(
        "tls {{ cert_file: {:?}, key_file: {:?} }}",
        dir.path().join("server.pem").display().to_string(),
        dir.path().join("server.key").display().to_string()
    ));
    let tls_url = format!("tls://127.0.0.1:{}", server.port());
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let _worker = worker(&["--nats", &tls_url, "--nats-tlsca", ca], &[]).await;
    // The first server of the list is down: the client goes on to the next.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("nats://127.0.0.1:{}", dead.local_addr().unwrap().port());
    drop(dead);
    let servers = format!("{dead_url},{tls_url}");
    assert_ran(&submit(&["--nats", &servers, "--nats-tlsca", ca], &[]).await);
    let untrusted = submit(&["--nats", &tls_url], &[]).await;
    assert!(
        !untrusted.status.success(),
        "a server the CA does not vouch for is refused"
    );
}

#[tokio::test]
async fn health_names_the_server_in_use() {
    let server = NatsServer::start();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("nats://127.0.0.1:{}", dead.local_addr().unwrap().port());
    drop(dead);
    let dir = tempfile::tempdir().unwrap();
    let state = cmdr::server::AppState::build(
        cmdr::server::StateConfig {
            agents_dir: dir.path().join("agents"),
            db: dir.path().join("cmdr.sqlite3"),
            nats: Some(cmdr::nats::connect::NatsConnect::new(
                &format!("{dead_url},{}", server.url()),
                "test",
            )),
            auth_token: None,
            default_cwd: dir.path().to_owned(),
            paths: cmdr_executors::PathPolicy::unrestricted(),
            landlock: false,
            combined_limit: cmdr_executors::DEFAULT_COMBINED_LIMIT,
            shell_env: Default::default(),
            max_concurrent: cmdr_executors::DEFAULT_MAX_CONCURRENT,
            session_idle: std::time::Duration::from_secs(1800),
        },
        None,
    )
    .await
    .unwrap();
    let health = state.health().await;
    assert_eq!(health.nats, "connected");
    let named = health.nats_server.unwrap();
    assert!(named.contains(&server.port().to_string()), "{named}");
}
