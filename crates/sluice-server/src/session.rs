//! A client session, in four parts with one job each:
//!
//! - [`Init`]: what the client said at `initialize` (version, capabilities, client info), fixed
//!   for the session's life — what a sealed session id can carry;
//! - [`Live`]: what changes while it lives and belongs to the session wherever it is served
//!   (log level, subscriptions, last activity, its end) — what a shared store would hold;
//! - [`Routes`]: this process's routing tables for it (calls in flight, upstream requests
//!   waiting on its replies, the gateway's own questions);
//! - [`Outbound`]: where messages to it go (the HTTP streams, or stdout).
//!
//! Its credentials (principal, `Authorization`) are refreshed by every request. Its own upstream
//! connections belong to the slots, keyed by the session id.

use crate::channel::Out;
use crate::stream::StreamBuf;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_core::{Message, Principal};
use sluice_upstream::Connection;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// What the client said at `initialize`: fixed for the session's life.
#[derive(Debug, Clone)]
pub struct Init {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `capabilities` from the client's `initialize`.
    pub capabilities: Value,
    /// `clientInfo` from the client's `initialize`.
    pub client_info: Value,
}

impl Init {
    /// What an `initialize` request's params say, at the negotiated `version`.
    pub fn of_initialize(params: &Value, version: &str) -> Init {
        Init {
            protocol_version: version.to_string(),
            capabilities: params
                .get("capabilities")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({})),
            client_info: params.get("clientInfo").cloned().unwrap_or(Value::Null),
        }
    }
}

/// What changes while a session lives.
#[derive(Debug)]
pub struct Live {
    /// The level a legacy client asked for with `logging/setLevel` (sent as `_meta` `logLevel`
    /// to 2026-07-28 upstreams, which have no setLevel).
    pub log_level: Mutex<Option<String>>,
    /// Resource URIs the client subscribed to.
    pub subscriptions: Mutex<HashSet<String>>,
    /// The catalog version the client has seen (it began on it, or was told of it): list
    /// changes up to it are not announced again.
    pub catalog_seen: AtomicU64,
    last_seen: Mutex<Instant>,
    closed: AtomicBool,
}

/// An upstream request forwarded to the client, waiting for the client's reply.
pub struct PendingServerRequest {
    /// The connection that asked.
    pub conn: Connection,
    /// The id the upstream gave it.
    pub upstream_id: Value,
}

/// A client request forwarded upstream and not answered yet.
pub struct InflightCall {
    /// The connection it went to.
    pub conn: Connection,
    /// The id it carries upstream.
    pub upstream_id: u64,
    /// Set when the client cancelled it.
    pub cancelled: Arc<AtomicBool>,
}

/// This process's routing tables for one session.
#[derive(Default)]
pub struct Routes {
    /// Client requests in flight, by the client's id (as JSON text).
    pub inflight: Mutex<HashMap<String, InflightCall>>,
    /// Upstream requests sent to the client, by the id the client saw.
    pub server_requests: Mutex<HashMap<String, PendingServerRequest>>,
    /// Requests Sluice itself sent the client (bridging a 2026-07-28 upstream's input
    /// requests), by the id the client saw: where its reply goes.
    pub asked: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Message>>>,
    next_request: AtomicU64,
}

/// The SSE streams of a Streamable HTTP session.
pub struct HttpStreams {
    /// The GET stream's buffer (stream 0): messages that belong to no request.
    pub get: Arc<StreamBuf>,
    /// The POST streams by number, for `Last-Event-ID` (the GET stream, 0, is `get`: an idle
    /// session's map stays empty and allocates nothing). Look up with [`HttpStreams::stream`].
    pub streams: Mutex<HashMap<u64, Arc<StreamBuf>>>,
    /// Which GET stream is attached: 0 = none, else its generation. A resumption
    /// (`Last-Event-ID`) takes over from an attached stream, which then ends. Made at the
    /// session's first GET (a watch channel is a few hundred bytes an idle session need not
    /// hold): read it with [`HttpStreams::get_owner`].
    get_owner: std::sync::OnceLock<tokio::sync::watch::Sender<u64>>,
    /// Last sequence delivered on the GET stream (a new GET starts after it).
    pub get_delivered: Arc<AtomicU64>,
    next_stream: AtomicU64,
}

impl HttpStreams {
    /// The streams of a session whose GET stream buffers `get`.
    pub fn new(get: Arc<StreamBuf>) -> HttpStreams {
        HttpStreams {
            streams: Mutex::new(HashMap::new()),
            get,
            get_owner: std::sync::OnceLock::new(),
            get_delivered: Arc::new(AtomicU64::new(0)),
            next_stream: AtomicU64::new(1),
        }
    }

    /// Which GET stream is attached (0 = none, else its generation).
    pub fn get_owner(&self) -> &tokio::sync::watch::Sender<u64> {
        self.get_owner
            .get_or_init(|| tokio::sync::watch::channel(0).0)
    }

    /// The stream numbered `n` (0 = the GET stream), for `Last-Event-ID`.
    pub fn stream(&self, n: u64) -> Option<Arc<StreamBuf>> {
        if n == 0 {
            return Some(self.get.clone());
        }
        self.streams.lock().get(&n).cloned()
    }

    /// A new POST stream (registered for resumption; the oldest finished ones are dropped).
    pub fn new_stream(&self, cap: usize, max_bytes: usize) -> Arc<StreamBuf> {
        let n = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let buf = StreamBuf::new(n, cap, max_bytes);
        let mut streams = self.streams.lock();
        if streams.len() > 64 {
            let mut done: Vec<u64> = streams
                .iter()
                .filter(|(k, b)| **k != 0 && b.is_done())
                .map(|(k, _)| *k)
                .collect();
            done.sort_unstable();
            for k in done.iter().take(done.len().saturating_sub(16)) {
                streams.remove(k);
            }
        }
        streams.insert(n, buf.clone());
        buf
    }
}

/// Where messages to the client that belong to no request go.
pub enum Outbound {
    /// Streamable HTTP: the session's SSE streams.
    Http(HttpStreams),
    /// stdio: the stdout writer.
    Stdio(mpsc::UnboundedSender<Out>),
}

/// One client session.
pub struct Session {
    /// The session id (the `Mcp-Session-Id` on HTTP).
    pub id: String,
    /// What the client said at `initialize`.
    pub init: Init,
    /// What changes while it lives.
    pub live: Live,
    /// This process's routing tables for it.
    pub routes: Routes,
    /// Where unrelated messages go.
    pub outbound: Outbound,
    /// Who the client authenticated as (HTTP with authentication on); refreshed by every
    /// request, whose credentials must name the same principal.
    principal: parking_lot::RwLock<Option<Arc<Principal>>>,
    /// The client's latest `Authorization` header, for upstreams with `forward_authorization`.
    authorization: parking_lot::RwLock<Option<Arc<str>>>,
}

impl Session {
    /// A new session.
    pub fn new(id: String, init: Init, outbound: Outbound) -> Session {
        Session {
            id,
            init,
            live: Live {
                log_level: Mutex::new(None),
                subscriptions: Mutex::new(HashSet::new()),
                catalog_seen: AtomicU64::new(0),
                last_seen: Mutex::new(Instant::now()),
                closed: AtomicBool::new(false),
            },
            routes: Routes::default(),
            outbound,
            principal: parking_lot::RwLock::new(None),
            authorization: parking_lot::RwLock::new(None),
        }
    }

    /// Send a message that belongs to no request (GET stream, or stdout).
    pub fn send_unrelated(&self, msg: Message) {
        match &self.outbound {
            Outbound::Http(h) => h.get.push(&msg),
            Outbound::Stdio(tx) => {
                let _ = tx.send(Out::Msg(msg));
            }
        }
    }

    /// The HTTP streams, for a Streamable HTTP session.
    pub fn http(&self) -> Option<&HttpStreams> {
        match &self.outbound {
            Outbound::Http(h) => Some(h),
            Outbound::Stdio(_) => None,
        }
    }

    /// Who the client authenticated as.
    pub fn principal(&self) -> Option<Arc<Principal>> {
        self.principal.read().clone()
    }

    /// Record who the client authenticated as (at `initialize`, and again with each request's
    /// fresher token).
    pub fn set_principal(&self, p: Option<Arc<Principal>>) {
        *self.principal.write() = p;
    }

    /// The client's latest `Authorization` header (sent only to upstreams that ask for it).
    pub fn authorization(&self) -> Option<Arc<str>> {
        self.authorization.read().clone()
    }

    /// Keep the client's `Authorization` header (each request may bring a fresher token).
    pub fn set_authorization(&self, value: Option<&str>) {
        let Some(v) = value else { return };
        if self.authorization.read().as_deref() != Some(v) {
            *self.authorization.write() = Some(Arc::from(v));
        }
    }

    /// Who this session is, for an upstream connection opened for it.
    pub fn upstream_ref(&self) -> sluice_upstream::SessionRef<'_> {
        sluice_upstream::SessionRef {
            id: &self.id,
            capabilities: &self.init.capabilities,
            protocol_version: &self.init.protocol_version,
        }
    }

    /// Does this session serve a modern-era (2026-07-28) client? Such a session lives for one
    /// request (HTTP) and has no handshake behind it.
    pub fn is_modern(&self) -> bool {
        sluice_core::version::is_modern(&self.init.protocol_version)
    }

    /// `"modern"` or `"legacy"`: the era hooks see.
    pub fn era(&self) -> &'static str {
        if self.is_modern() {
            "modern"
        } else {
            "legacy"
        }
    }

    /// Does the client support `cap` (a key of its capabilities)?
    pub fn has_capability(&self, cap: &str) -> bool {
        self.init
            .capabilities
            .get(cap)
            .is_some_and(|v| !v.is_null())
    }

    /// A fresh id for a request the gateway sends to this client.
    pub fn mint_request_id(&self) -> String {
        let n = self.routes.next_request.fetch_add(1, Ordering::Relaxed) + 1;
        format!("sluice-{n}")
    }

    /// Record activity (for the idle timeout).
    pub fn touch(&self) {
        *self.live.last_seen.lock() = Instant::now();
    }

    /// Seconds since the last activity.
    pub fn idle_secs(&self) -> u64 {
        self.live.last_seen.lock().elapsed().as_secs()
    }

    /// Mark closed; returns false if it already was.
    pub fn mark_closed(&self) -> bool {
        !self.live.closed.swap(true, Ordering::SeqCst)
    }

    /// Has the session ended?
    pub fn is_closed(&self) -> bool {
        self.live.closed.load(Ordering::SeqCst)
    }
}

/// JSON text of an id, as a map key (`1` and `"1"` stay distinct).
pub fn id_key(id: &Value) -> String {
    sluice_core::exact::key(id)
}
