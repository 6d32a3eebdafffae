//! Request bodies that cannot hold the server's memory (docs/http.md, "Limits").
//!
//! A body is buffered by its handler as it arrives, so a client that sends a large body
//! slowly (or stalls half-way) would keep what it sent so far in memory for as long as it
//! likes, and a few hundred such clients would take the server past any memory limit.
//! Every request body of both addresses is therefore a [`Guarded`] body:
//!
//! - **a deadline**: the whole body must arrive within [`BodyLimits::timeout`] of the
//!   request head; past it the body fails and the request is answered `408
//!   BODY_TIMEOUT`;
//! - **a budget shared by the server**: every byte of a body counts against
//!   [`BodyBudget`] until the body is dropped (its handler has taken what it needed); a
//!   byte beyond the budget fails the body and the request is answered `503
//!   BODY_BUDGET_EXHAUSTED`. Requests without a body (`/health`, every `GET`) take
//!   nothing, so they are served whatever the floods.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use cmdr_executors::ErrorCode;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;

use super::error::ApiError;

/// Default time a request body has to arrive whole.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Default cap on the bytes of request bodies held at once, server-wide.
pub const DEFAULT_BODY_BUDGET: usize = 64 << 20;

/// The bytes of request bodies the server holds at once, and their cap.
#[derive(Debug)]
pub struct BodyBudget {
    max: usize,
    held: AtomicUsize,
}

impl BodyBudget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            held: AtomicUsize::new(0),
        })
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Takes `n` bytes, if they fit.
    fn take(&self, n: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(n).filter(|&total| total <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }
}

/// The limits every request body of a server is held to.
#[derive(Debug, Clone)]
pub struct BodyLimits {
    /// Time from the request head to the body's last byte.
    pub timeout: Duration,
    /// The server-wide budget (shared by both addresses).
    pub budget: Arc<BodyBudget>,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_BODY_TIMEOUT,
            budget: BodyBudget::new(DEFAULT_BODY_BUDGET),
        }
    }
}

/// Why a body failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyFailure {
    /// It did not arrive whole in time.
    #[error("the request body did not arrive within {0:?}")]
    Timeout(Duration),
    /// The server holds as many body bytes as it may.
    #[error("the server is holding as many request bytes as it may; try again shortly")]
    Budget,
}

impl BodyFailure {
    /// The answer to a request whose body failed so.
    pub fn response(self) -> Response {
        let code = match self {
            BodyFailure::Timeout(_) => ErrorCode::BodyTimeout,
            BodyFailure::Budget => ErrorCode::BodyBudgetExhausted,
        };
        let mut response = ApiError::new(code, self.to_string()).into_response();
        if self == BodyFailure::Budget {
            response
                .headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        response
    }
}

/// A request body held to [`BodyLimits`]; its failure, if any, is left in the shared cell
/// for the connection to answer with.
pub struct Guarded {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limits: BodyLimits,
    taken: usize,
    failed: Arc<OnceLock<BodyFailure>>,
}

impl Guarded {
    /// `inner` held to `limits` from now; a failure goes to `failed`.
    pub fn new(inner: Incoming, limits: &BodyLimits, failed: Arc<OnceLock<BodyFailure>>) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep(limits.timeout)),
            limits: limits.clone(),
            taken: 0,
            failed,
        }
    }

    fn fail(&self, why: BodyFailure) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let _ = self.failed.set(why);
        Poll::Ready(Some(Err(axum::Error::new(why))))
    }
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, Bytes::len);
                if !this.limits.budget.take(n) {
                    return this.fail(BodyFailure::Budget);
                }
                this.taken += n;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(axum::Error::new(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => this.fail(BodyFailure::Timeout(this.limits.timeout)),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.limits.budget.give_back(self.taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_takes_what_fits_and_gets_it_back() {
        let budget = BodyBudget::new(10);
        assert!(budget.take(6));
        assert!(!budget.take(5), "over the cap");
        assert!(budget.take(4));
        assert_eq!(budget.held(), 10);
        budget.give_back(6);
        assert!(budget.take(5));
        assert!(!budget.take(usize::MAX), "no overflow");
    }
}
