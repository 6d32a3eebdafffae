//! [`Demux`]: one subscription per producer for the results of all its commands
//! (`cmdr.results.<producer>.*`, core mode) and one for their questions
//! (`cmdr.input.<producer>.*`, both modes), each routed to the command's [`Mailbox`] by
//! the last subject token, the command id.
//!
//! Subscribing per command cost four protocol operations per command (two `SUB`, two
//! `UNSUB`) and as much subscription churn in the server. Measured, that churn was not
//! where the bus's time went (the server's share of the profile did not fall; BENCHMARKS.md,
//! N2), but one subscription keeps a producer's server-side footprint flat however many
//! commands are in flight. The two subscriptions are made on first use and live as long as
//! the producer (its last clone).
//!
//! A command is registered before it is published, so no early result is missed, and its
//! [`Registration`] deregisters it when its stream is dropped. Routing never waits: a
//! mailbox holds a bounded number of unread bytes and then overflows (`mailbox`), so a
//! slow or abandoned stream cannot stall the other commands' results, nor make the server
//! drop messages for the whole subscription (a slow consumer). Messages for an id nobody
//! registered (a stream already dropped, or another process using the same producer id)
//! are ignored; so are such questions, which then wait for the command's own timeout or
//! cancel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_nats::{Client, Message, Subscriber};
use dashmap::DashMap;
use futures_util::StreamExt;
use tokio::sync::OnceCell;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::mailbox::Mailbox;
use super::{nats_error, ProducerError};
use crate::nats::subjects;

/// Unread bytes a command's mailbox holds by default before it overflows.
pub const DEFAULT_RESULT_BUFFER: usize = 64 * 1024 * 1024;

/// The mailboxes of the commands in flight, by command id (several when one id is
/// submitted twice at once: each stream gets every message).
type Routes = DashMap<String, Vec<Arc<Mailbox>>>;

/// What a subscription carries.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Results,
    Questions,
}

/// A producer's two subscriptions and the routing table they deliver through.
pub(super) struct Demux {
    client: Client,
    producer: Arc<str>,
    limit: usize,
    routes: Arc<Routes>,
    results: OnceCell<()>,
    questions: OnceCell<()>,
    /// Set when a subscription ended on its own (the connection closed for good).
    closed: Arc<AtomicBool>,
    stop: CancellationToken,
    /// Stops the routing tasks (and so unsubscribes) when the last producer clone goes.
    _stop_on_drop: DropGuard,
}

impl Demux {
    /// No subscription yet: they are made on first use.
    pub(super) fn new(client: Client, producer: Arc<str>, limit: usize) -> Self {
        let stop = CancellationToken::new();
        Self {
            client,
            producer,
            limit,
            routes: Arc::default(),
            results: OnceCell::new(),
            questions: OnceCell::new(),
            closed: Arc::default(),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        }
    }

    /// Unread bytes each command's mailbox holds.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Registers command `id` (subscribing first if this is the first command): its
    /// questions, and with `results` its results, go to the registration's mailbox from
    /// now on.
    pub(super) async fn register(
        &self,
        id: &str,
        results: bool,
    ) -> Result<Registration, ProducerError> {
        if results {
            self.results
                .get_or_try_init(|| self.start(Kind::Results))
                .await?;
        }
        self.questions
            .get_or_try_init(|| self.start(Kind::Questions))
            .await?;
        let mailbox = Arc::new(Mailbox::new(self.limit, results));
        self.routes
            .entry(id.to_owned())
            .or_default()
            .push(mailbox.clone());
        if self.closed.load(Ordering::SeqCst) {
            mailbox.close();
        }
        Ok(Registration {
            routes: self.routes.clone(),
            id: id.to_owned(),
            mailbox,
        })
    }

    /// Subscribes to every command's results or questions and routes them in a task.
    async fn start(&self, kind: Kind) -> Result<(), ProducerError> {
        let subject = match kind {
            Kind::Results => subjects::results(&self.producer, "*"),
            Kind::Questions => subjects::input(&self.producer, "*"),
        };
        let prefix = subject.trim_end_matches('*').to_owned();
        let subscriber = self.client.subscribe(subject).await.map_err(nats_error)?;
        let router = Router {
            routes: self.routes.clone(),
            prefix,
            kind,
        };
        let (stop, closed) = (self.stop.clone(), self.closed.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = router.run(subscriber) => {
                    closed.store(true, Ordering::SeqCst);
                    router.close_all();
                }
                () = stop.cancelled() => {}
            }
        });
        Ok(())
    }
}

/// Routes one subscription's messages.
struct Router {
    routes: Arc<Routes>,
    /// The subject up to the command id (`cmdr.results.<producer>.`).
    prefix: String,
    kind: Kind,
}

impl Router {
    /// Until the subscription ends.
    async fn run(&self, mut subscriber: Subscriber) {
        while let Some(message) = subscriber.next().await {
            self.route(message);
        }
        tracing::warn!(prefix = %self.prefix, "the producer's subscription ended");
    }

    fn route(&self, message: Message) {
        let Some(id) = message.subject.strip_prefix(self.prefix.as_str()) else {
            return;
        };
        let Some(mailboxes) = self.routes.get(id) else {
            tracing::debug!(subject = %message.subject, "no stream for this command: ignored");
            return;
        };
        match self.kind {
            Kind::Results => {
                for mailbox in mailboxes.iter().filter(|m| m.takes_results()) {
                    mailbox.push_result(message.payload.clone());
                }
            }
            // One answer per question: the first stream of the id asks.
            Kind::Questions => {
                if let Some(mailbox) = mailboxes.first() {
                    mailbox.push_question(message);
                }
            }
        }
    }

    /// The subscription ended: every stream waiting on it ends too.
    fn close_all(&self) {
        for entry in self.routes.iter() {
            entry.value().iter().for_each(|mailbox| mailbox.close());
        }
    }
}

/// A command's place in the routing table; deregisters on drop.
pub(super) struct Registration {
    routes: Arc<Routes>,
    id: String,
    mailbox: Arc<Mailbox>,
}

impl Registration {
    /// Where the command's messages arrive.
    pub(super) fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.routes.remove_if_mut(&self.id, |_, mailboxes| {
            mailboxes.retain(|m| !Arc::ptr_eq(m, &self.mailbox));
            mailboxes.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::nats::producer::mailbox::{Delivery, End};

    fn router(routes: &Arc<Routes>, kind: Kind) -> Router {
        Router {
            routes: routes.clone(),
            prefix: "cmdr.results.p.".to_owned(),
            kind,
        }
    }

    fn message(id: &str, payload: &'static [u8]) -> Message {
        Message {
            subject: format!("cmdr.results.p.{id}").into(),
            reply: None,
            payload: bytes::Bytes::from_static(payload),
            headers: None,
            status: None,
            description: None,
            length: payload.len(),
        }
    }

    fn register(routes: &Arc<Routes>, id: &str, limit: usize) -> Registration {
        let mailbox = Arc::new(Mailbox::new(limit, true));
        routes
            .entry(id.to_owned())
            .or_default()
            .push(mailbox.clone());
        Registration {
            routes: routes.clone(),
            id: id.to_owned(),
            mailbox,
        }
    }

    fn next(registration: &Registration) -> Poll<Delivery> {
        let mut cx = Context::from_waker(Waker::noop());
        registration.mailbox().poll_next(&mut cx)
    }

    fn result(payload: &'static str) -> bytes::Bytes {
        bytes::Bytes::from_static(payload.as_bytes())
    }

    #[test]
    fn results_reach_their_own_command_only() {
        let routes = Arc::default();
        let (a, b) = (
            register(&routes, "a", 1 << 20),
            register(&routes, "b", 1 << 20),
        );
        let router = router(&routes, Kind::Results);
        router.route(message("a", b"1"));
        router.route(message("b", b"2"));
        router.route(message("nobody", b"3"));
        router.route(message("a", b"4"));
        assert!(matches!(next(&a), Poll::Ready(Delivery::Result(p)) if p == result("1")));
        assert!(matches!(next(&a), Poll::Ready(Delivery::Result(p)) if p == result("4")));
        assert!(next(&a).is_pending());
        assert!(matches!(next(&b), Poll::Ready(Delivery::Result(p)) if p == result("2")));
        drop(a);
        assert!(!routes.contains_key("a"), "deregistered on drop");
        assert!(routes.contains_key("b"));
    }

    #[test]
    fn a_full_mailbox_does_not_hold_up_the_others() {
        let routes = Arc::default();
        let slow = register(&routes, "slow", 10);
        let fast = register(&routes, "fast", 1 << 20);
        let router = router(&routes, Kind::Results);
        for _ in 0..1_000 {
            router.route(message("slow", b"unread"));
        }
        router.route(message("fast", b"done"));
        assert!(matches!(next(&fast), Poll::Ready(Delivery::Result(p)) if p == result("done")));
        assert!(matches!(next(&slow), Poll::Ready(Delivery::Result(p)) if p == result("unread")));
        assert!(matches!(
            next(&slow),
            Poll::Ready(Delivery::End(End::Overflowed(10)))
        ));
    }

    #[test]
    fn one_id_twice_gets_every_message_in_both() {
        let routes = Arc::default();
        let (first, second) = (
            register(&routes, "x", 1 << 20),
            register(&routes, "x", 1 << 20),
        );
        router(&routes, Kind::Results).route(message("x", b"r"));
        assert!(matches!(next(&first), Poll::Ready(Delivery::Result(p)) if p == result("r")));
        drop(first);
        assert!(matches!(next(&second), Poll::Ready(Delivery::Result(p)) if p == result("r")));
        drop(second);
        assert!(routes.is_empty());
    }

    #[test]
    fn questions_go_to_one_stream() {
        let routes = Arc::default();
        let (first, second) = (
            register(&routes, "x", 1 << 20),
            register(&routes, "x", 1 << 20),
        );
        router(&routes, Kind::Questions).route(message("x", b"?"));
        assert!(matches!(next(&first), Poll::Ready(Delivery::Question(_))));
        assert!(next(&second).is_pending());
    }
}
