//! The transport-independent state of one upstream session, shared by [`Connection`](crate::Connection)
//! and the wires that feed it: request ids, pending replies, the dispatch of what the upstream
//! sends (replies to their waiters, the rest as [`Event`]s), and the close. It imports no wire
//! and no connection, so every wire imports it without a cycle.

use crate::error::{UpstreamError, SESSION_ENDED};
use foldhash::HashMap;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};

/// A message the upstream started (a request to the client, or a notification).
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The message as the upstream sent it.
    pub msg: Message,
    /// The id (as minted by this connection) of the request whose response stream carried it,
    /// when the transport says so (Streamable HTTP).
    pub related: Option<u64>,
}

/// What a connection reports on its event channel.
#[derive(Debug)]
pub enum Event {
    /// The upstream sent a request or notification.
    Message(Incoming),
    /// A reply to one of this connection's requests (or its failure on the way), queued behind
    /// events the consumer has not finished yet, so that whatever the upstream sent before a reply (progress, logging,
    /// requests) is handled before the reply resolves its call: the consumer passes it to
    /// [`Connection::resolve`](crate::Connection::resolve). The consumer calls [`Connection::event_done`](crate::Connection::event_done) after each event.
    Reply(Held),
    /// The reply stream of one request changed: the upstream opened it as SSE (`Opened`), or
    /// closed it before the reply (`Paused`, SSE polling: Sluice resumes it). Carries the
    /// request id this connection minted and the upstream's `retry` hint.
    Stream {
        /// The request whose reply stream it is.
        related: u64,
        /// Opened or paused.
        paused: bool,
        /// The upstream's reconnection hint.
        retry: Option<std::time::Duration>,
    },
    /// The connection ended; no more events follow.
    Closed(String),
}

/// What a request got back: the upstream's reply, or why the request failed on its way.
#[derive(Debug)]
pub enum Answer {
    /// The upstream's reply: a result, or its JSON-RPC error.
    Reply(Message),
    /// The request failed on its way, and the upstream never answered it: it could not be
    /// sent, the upstream refused it over HTTP (an error status, the end of its session), or
    /// its reply stream broke.
    Failed(UpstreamError),
}

impl Answer {
    /// As a reply to the request `id`: the upstream's, or for a failed request the JSON-RPC
    /// error it is answered with ([`failure_reply`]).
    pub fn into_message(self, id: u64) -> Message {
        match self {
            Answer::Reply(msg) => msg,
            Answer::Failed(e) => failure_reply(id, &e),
        }
    }
}

/// The JSON-RPC error a request that failed on its way is answered with: -32000 and the
/// failure's text.
pub fn failure_reply(id: u64, e: &UpstreamError) -> Message {
    Message::error(
        json!(id),
        &RpcError::new(codes::UPSTREAM_UNAVAILABLE, e.to_string()),
    )
}

/// The answer to one of a connection's requests, held back behind events (see
/// [`Event::Reply`]).
#[derive(Debug)]
pub struct Held {
    /// The request's id (as this connection minted it).
    id: u64,
    answer: Answer,
}

/// Why a connection closed.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// The reason, as said (the process exited, the gateway shut it down, a stream failed).
    Because(String),
    /// The upstream ended the session ([`UpstreamError::SessionEnded`]).
    Session,
}

impl Ended {
    /// The reason, as [`Connection::close_reason`](crate::Connection::close_reason) says it.
    fn reason(&self) -> String {
        match self {
            Ended::Because(reason) => reason.clone(),
            Ended::Session => SESSION_ENDED.to_string(),
        }
    }

    /// What a call on the closed connection fails with.
    fn error(&self) -> UpstreamError {
        match self {
            Ended::Because(reason) => UpstreamError::Closed(reason.clone()),
            Ended::Session => UpstreamError::SessionEnded,
        }
    }
}

/// The last lines a stdio upstream wrote to stderr (bounded; shared, cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<std::collections::VecDeque<String>>>);

impl StderrTail {
    /// Lines kept.
    pub const CAPACITY: usize = 200;

    /// Keep one line (the oldest goes past [`StderrTail::CAPACITY`]).
    pub fn push(&self, line: String) {
        let mut q = self.0.lock();
        if q.len() >= Self::CAPACITY {
            q.pop_front();
        }
        q.push_back(line);
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }
}

/// Extra HTTP headers for one request, sent beside the upstream's configured `headers` (and
/// replacing one of the same name) on the POST that carries it: a W3C `traceparent`, or a
/// credential forwarded for an upstream that opts in. HTTP and legacy SSE upstreams send them;
/// stdio and local upstreams have no headers and ignore them. Names and values are checked when
/// sent: an invalid one is skipped (logged), never a failed call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraHeaders(pub Vec<(String, String)>);

impl ExtraHeaders {
    /// No extra headers.
    pub const NONE: ExtraHeaders = ExtraHeaders(Vec::new());

    /// Add one header.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.push((name.into(), value.into()));
    }

    /// Are there none?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The dispatch state of one upstream session (one per [`Connection`](crate::Connection), shared
/// with its wire's tasks).
pub(crate) struct Inner {
    pub label: String,
    pub serial: u64,
    pub next_id: AtomicU64,
    pub pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    events: mpsc::UnboundedSender<Event>,
    closed: AtomicBool,
    /// Set once the handshake is done: from then on replies queue behind unfinished events.
    pub ordered: AtomicBool,
    pub queued: AtomicUsize,
    /// Why it closed (None while open).
    ended: Mutex<Option<Ended>>,
    pub closed_notify: Notify,
    pub stderr: StderrTail,
    /// Set when the upstream speaks 2026-07-28: the `_meta` every request carries (version,
    /// default client capabilities, client info).
    pub modern: OnceLock<Map<String, Value>>,
}

impl Inner {
    /// Fresh state: no request sent, not closed; events go to `events`.
    pub(crate) fn new(
        label: String,
        events: mpsc::UnboundedSender<Event>,
        stderr: StderrTail,
    ) -> Inner {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        Inner {
            label,
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::default()),
            events,
            closed: AtomicBool::new(false),
            ordered: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            ended: Mutex::new(None),
            closed_notify: Notify::new(),
            stderr,
            modern: OnceLock::new(),
        }
    }

    /// Route one message from the upstream: replies to their waiter, the rest to the events.
    pub(crate) fn dispatch(&self, msg: Message, related: Option<u64>) {
        match msg.kind() {
            Kind::Response | Kind::Error => {
                let Some(id) = msg.id().and_then(Value::as_u64) else {
                    tracing::warn!(upstream = %self.label, "reply with an id this gateway never sent: {}", msg.to_json());
                    return;
                };
                self.answer(id, Answer::Reply(msg));
            }
            Kind::Request | Kind::Notification => {
                self.queue(Event::Message(Incoming { msg, related }));
            }
        }
    }

    /// Fail the request `id`: it failed on its way (its waiter gets [`Answer::Failed`]).
    pub(crate) fn fail(&self, id: u64, e: UpstreamError) {
        self.answer(id, Answer::Failed(e));
    }

    /// Fail the request `id` and close the connection with `why` ([`Inner::end`]): closed
    /// first, so the call that gets the failure finds it closed (its next request opens a new
    /// connection).
    pub(crate) fn fail_and_end(&self, id: u64, e: UpstreamError, why: Ended) {
        let waiter = self.pending.lock().remove(&id);
        self.end(why);
        if let Some(tx) = waiter {
            let _ = tx.send(Answer::Failed(e));
        }
    }

    /// Hand the answer of request `id` to its waiter. It waits behind events not yet handled
    /// (so what the upstream sent before it reaches the client first); with none queued it
    /// resolves at once.
    fn answer(&self, id: u64, answer: Answer) {
        if self.ordered.load(Ordering::Acquire) && self.queued.load(Ordering::Acquire) > 0 {
            self.queue(Event::Reply(Held { id, answer }));
        } else {
            self.resolve(Held { id, answer });
        }
    }

    /// Put an event on the channel, counted until the consumer says it is done.
    fn queue(&self, ev: Event) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.events.send(ev) {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            if let Event::Reply(held) = e.0 {
                self.resolve(held);
            }
        }
    }

    /// Report a change of a reply stream (see [`Event::Stream`]).
    pub(crate) fn stream_event(&self, related: u64, paused: bool, retry: Option<Duration>) {
        self.queue(Event::Stream {
            related,
            paused,
            retry,
        });
    }

    /// Hand an answer to the call waiting for it.
    pub(crate) fn resolve(&self, held: Held) {
        let Held { id, answer } = held;
        let waiter = self.pending.lock().remove(&id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => tracing::debug!(upstream = %self.label, id, "late reply dropped"),
        }
    }

    /// Mark the connection closed, fail every waiter, and report once.
    pub(crate) fn close(&self, reason: String) {
        self.end(Ended::Because(reason));
    }

    /// [`Inner::close`], saying why (what the calls still waiting fail with).
    pub(crate) fn end(&self, why: Ended) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let reason = why.reason();
        tracing::info!(upstream = %self.label, "connection closed: {reason}");
        *self.ended.lock() = Some(why);
        self.pending.lock().clear();
        self.closed_notify.notify_waiters();
        let _ = self.events.send(Event::Closed(reason));
    }

    /// Why the connection closed (None while open).
    pub(crate) fn close_reason(&self) -> Option<String> {
        self.ended.lock().as_ref().map(Ended::reason)
    }

    /// Is a reply to `id` still awaited?
    pub(crate) fn is_pending(&self, id: u64) -> bool {
        self.pending.lock().contains_key(&id)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// What a call on the closed connection fails with.
    pub(crate) fn closed_error(&self) -> UpstreamError {
        self.ended
            .lock()
            .as_ref()
            .map_or_else(|| UpstreamError::Closed("closed".into()), Ended::error)
    }
}
