//! When each MCP session was last used, and whether a call of its is running: what the
//! session cap needs to evict the least-recently-used idle session instead of locking new
//! clients out (issue 32.15). A `ping` is not use; a session with a call still answering is
//! not idle.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::response::Response;
use futures_core::Stream;
use rmcp::transport::common::server_side_http::SessionId;

/// One session's use.
#[derive(Debug, Clone, Copy)]
struct Use {
    last: Instant,
    busy: usize,
}

/// The use of every session the gate has seen, by session id.
#[derive(Debug, Default)]
pub struct SessionUse {
    table: Mutex<HashMap<String, Use>>,
}

impl SessionUse {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Use>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A session was just created: it counts as used now.
    pub fn created(&self, id: &str) {
        self.table().insert(
            id.to_owned(),
            Use {
                last: Instant::now(),
                busy: 0,
            },
        );
    }

    /// A call of session `id` starts: it is used now, and busy until the guard drops.
    pub fn begin(self: &Arc<Self>, id: &str) -> Busy {
        let mut table = self.table();
        let entry = table.entry(id.to_owned()).or_insert(Use {
            last: Instant::now(),
            busy: 0,
        });
        entry.last = Instant::now();
        entry.busy += 1;
        Busy {
            usage: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Of the `open` sessions, the idle one used least recently (never seen counts as
    /// oldest); the table forgets sessions that are no longer open.
    pub fn victim(&self, open: &[SessionId]) -> Option<SessionId> {
        let mut table = self.table();
        table.retain(|id, _| open.iter().any(|open| open.as_ref() == id.as_str()));
        open.iter()
            .filter_map(|id| match table.get(id.as_ref()) {
                None => Some((None, id)),
                Some(u) if u.busy == 0 => Some((Some(u.last), id)),
                Some(_) => None,
            })
            .min_by_key(|(last, _)| *last)
            .map(|(_, id)| id.clone())
    }

    /// Session `id` was closed.
    pub fn forget(&self, id: &str) {
        self.table().remove(id);
    }
}

/// Keeps a session busy while it lives.
#[derive(Debug)]
pub struct Busy {
    usage: Arc<SessionUse>,
    id: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut table = self.usage.table();
        if let Some(entry) = table.get_mut(&self.id) {
            entry.busy = entry.busy.saturating_sub(1);
            entry.last = Instant::now();
        }
    }
}

/// `response`, keeping `busy` until its body is finished or dropped (a streamed answer
/// is a call still running).
pub fn hold_until_sent(response: Response, busy: Busy) -> Response {
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(Holding {
        inner: body.into_data_stream(),
        busy: Some(busy),
    });
    Response::from_parts(parts, body)
}

/// A response stream holding a [`Busy`] until its end.
struct Holding {
    inner: BodyDataStream,
    busy: Option<Busy>,
}

impl Stream for Holding {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None) = next {
            self.busy.take();
        }
        next
    }
}
