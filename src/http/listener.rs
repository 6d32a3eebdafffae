//! The accept loop of `cmdr serve`'s two addresses: HTTP/1.1 connections served by hyper
//! with limits an idle or half-open connection flood cannot get past.
//!
//! - **A connection cap** ([`ListenerLimits::max_connections`] per address). When the
//!   cap is reached, a new connection takes the slot of the oldest *idle* connection (one
//!   with no request in progress: connected but silent, half-sent headers, or kept alive
//!   between requests), which is closed. Only when every slot is busy with a request is
//!   the newcomer refused: it gets `503 TOO_MANY_CONNECTIONS` once its request head
//!   arrived, then the socket is closed. So a flood of idle sockets never locks anyone out,
//!   and `/health` keeps answering.
//! - **A header-read timeout** ([`ListenerLimits::header_timeout`]): a connection that has
//!   not sent a whole request head within it (from connect, or from the end of its previous
//!   response) is closed. This is also the keep-alive idle timeout.
//! - **Request bodies** ([`super::request_body`]): each must arrive within a deadline, and
//!   the bytes of all bodies held at once (both addresses) are capped, so slow or stalled
//!   uploads cannot hold the server's memory.
//! - **File descriptors**: [`raise_fd_limit`] lifts the soft `RLIMIT_NOFILE` to the hard
//!   limit at start-up, and [`fitting_cap`] keeps the caps of both addresses within it.
//!
//! HTTP/2 is not offered (clients of a plain-text local server speak HTTP/1.1).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use cmdr_executors::ErrorCode;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use super::request_body::{BodyFailure, BodyLimits, Guarded};

/// Default cap on concurrent connections per address.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Default time a client has to send a whole request head.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an evicted idle connection may take to close before it is dropped.
const EVICT_GRACE: Duration = Duration::from_secs(1);

/// How long a refused connection has to send its request head before it is just closed.
const REFUSE_READ: Duration = Duration::from_secs(2);

/// Refused connections being answered at once; beyond it they are closed unanswered.
const MAX_REFUSING: usize = 64;

/// File descriptors kept for everything but connections (database, shells' pipes, logs).
const FD_RESERVE: u64 = 256;

/// The limits of one listening address.
#[derive(Debug, Clone)]
pub struct ListenerLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to send a whole request head (and keep-alive idle time).
    pub header_timeout: Duration,
    /// What request bodies are held to (the budget is shared with the other address).
    pub bodies: BodyLimits,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            bodies: BodyLimits::default(),
        }
    }
}

/// Raises the soft open-files limit to the hard limit; returns the soft limit in force.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => return hard,
            Err(e) => tracing::warn!("cannot raise the open-files limit to {hard}: {e}"),
        }
    }
    soft
}

/// The per-address connection cap that fits `listeners` addresses into `fd_limit`
/// descriptors (after a reserve), at most `requested` and at least 1.
pub fn fitting_cap(requested: usize, fd_limit: u64, listeners: u64) -> usize {
    let per_listener = fd_limit.saturating_sub(FD_RESERVE) / listeners.max(1);
    let fitting = usize::try_from(per_listener).unwrap_or(usize::MAX);
    requested.min(fitting).max(1)
}

/// One served connection, as the slot table sees it.
struct Slot {
    /// Requests in progress on it (responses not yet fully sent).
    busy: Arc<AtomicUsize>,
    /// Fired to close it (when idle) to make room.
    evict: CancellationToken,
}

/// The slot table of one address.
struct Slots {
    max: usize,
    table: Mutex<Table>,
}

/// Connections by age (accept order).
#[derive(Default)]
struct Table {
    next_id: u64,
    slots: BTreeMap<u64, Slot>,
}

impl Slots {
    /// A slot for a new connection, evicting the oldest idle one if the table is full;
    /// `None` when every connection is busy.
    fn take(&self, stop: &CancellationToken) -> Option<(u64, Arc<AtomicUsize>, CancellationToken)> {
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let Table { next_id, slots } = &mut *guard;
        if slots.len() >= self.max {
            let idle = slots
                .iter()
                .find(|(_, slot)| slot.busy.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id)?;
            if let Some(slot) = slots.remove(&idle) {
                slot.evict.cancel();
            }
        }
        let id = *next_id;
        *next_id += 1;
        let busy = Arc::new(AtomicUsize::new(0));
        let evict = stop.child_token();
        slots.insert(
            id,
            Slot {
                busy: busy.clone(),
                evict: evict.clone(),
            },
        );
        Some((id, busy, evict))
    }

    fn release(&self, id: u64) {
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        guard.slots.remove(&id);
    }
}

/// Serves `app` on `listener` until `stop` fires, then lets every connection finish its
/// request in progress (tracked by `connections`: `close()` + `wait()` to wait for them).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ListenerLimits,
    stop: CancellationToken,
    connections: TaskTracker,
) {
    let slots = Arc::new(Slots {
        max: limits.max_connections.max(1),
        table: Mutex::default(),
    });
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: wait a moment instead of spinning.
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            // Small SSE events must not wait for delayed ACKs (Nagle).
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        match slots.take(&stop) {
            Some((id, busy, evict)) => {
                let (slots, app, limits) = (slots.clone(), app.clone(), limits.clone());
                connections.spawn(async move {
                    serve_connection(stream, app, limits, busy, evict).await;
                    slots.release(id);
                });
            }
            None => {
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream).await;
                        drop(permit);
                    });
                }
            }
        }
    }
}

/// Serves one connection until it closes, or closes it when `evict` fires while no
/// request is in progress.
async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: ListenerLimits,
    busy: Arc<AtomicUsize>,
    evict: CancellationToken,
) {
    let counter = busy.clone();
    let header_timeout = limits.header_timeout;
    let bodies = limits.bodies;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (app, guard) = (app.clone(), Busy::enter(counter.clone()));
        let failed = Arc::new(std::sync::OnceLock::<BodyFailure>::new());
        let request = request.map(|body| Body::new(Guarded::new(body, &bodies, failed.clone())));
        async move {
            let mut response = match app.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            // A body that failed its limits is answered as such, whatever the handler
            // made of the failed read.
            if let Some(failure) = failed.get() {
                response = failure.response();
            }
            Ok::<_, Infallible>(response.map(|body| Body::new(Counted { body, guard })))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = evict.cancelled() => {
            connection.as_mut().graceful_shutdown();
            if busy.load(Ordering::Acquire) == 0 {
                tokio::time::timeout(EVICT_GRACE, connection.as_mut())
                    .await
                    .unwrap_or(Ok(()))
            } else {
                connection.as_mut().await
            }
        }
    };
    if let Err(e) = served {
        tracing::debug!("connection ended: {e}");
    }
}

/// Answers a connection over the cap: reads its request head (briefly), sends 503
/// `TOO_MANY_CONNECTIONS` and closes.
async fn refuse(mut stream: TcpStream) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let read_head = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    };
    if !tokio::time::timeout(REFUSE_READ, read_head)
        .await
        .unwrap_or(false)
    {
        return;
    }
    let body = serde_json::json!({
        "error": "unavailable",
        "code": ErrorCode::TooManyConnections.as_str(),
        "message": "cmdr is serving as many connections as it may; try again shortly",
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSE_READ, stream.write_all(response.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// Counts a request in progress from its start until its response body is dropped.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body holding its request's [`Busy`] mark.
struct Counted {
    body: Body,
    guard: Busy,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let _ = &self.guard;
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_the_descriptor_limit() {
        assert_eq!(fitting_cap(1024, 1_048_576, 2), 1024);
        assert_eq!(fitting_cap(1024, 1024, 2), 384);
        assert_eq!(fitting_cap(1024, 100, 2), 1);
        assert_eq!(fitting_cap(0, 100_000, 2), 1);
    }

    #[test]
    fn a_full_table_evicts_its_oldest_idle_connection_or_refuses() {
        let stop = CancellationToken::new();
        let slots = Slots {
            max: 2,
            table: Mutex::default(),
        };
        let (first, first_busy, first_evict) = slots.take(&stop).unwrap();
        let (_, second_busy, second_evict) = slots.take(&stop).unwrap();
        first_busy.fetch_add(1, Ordering::AcqRel);
        let (third, _, _) = slots.take(&stop).unwrap();
        assert!(!first_evict.is_cancelled(), "a busy connection stays");
        assert!(
            second_evict.is_cancelled(),
            "the oldest idle one makes room"
        );
        second_busy.fetch_add(1, Ordering::AcqRel);
        let third_busy = slots.table.lock().unwrap().slots[&third].busy.clone();
        third_busy.fetch_add(1, Ordering::AcqRel);
        assert!(slots.take(&stop).is_none(), "every slot busy: refused");
        slots.release(first);
        assert!(slots.take(&stop).is_some());
    }
}
