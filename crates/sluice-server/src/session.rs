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
//!
//! In a cluster a session is also [`Shared`]: its `Live` part is kept in the store (every
//! change written before the request that made it is answered), and messages that belong to no
//! request go to its GET stream's events in the store, which whichever replica holds the GET
//! stream reads.

use crate::channel::Out;
use crate::stream::StreamBuf;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_cluster::Store;
use sluice_core::{Message, Principal};
use sluice_upstream::Connection;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// What the client said at `initialize`: fixed for the session's life. The two values are
/// shared with every other live session whose client said the same (see [`Init::new`]).
#[derive(Debug, Clone)]
pub(crate) struct Init {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `capabilities` from the client's `initialize`.
    pub capabilities: Arc<Value>,
    /// `clientInfo` from the client's `initialize`.
    pub client_info: Arc<Value>,
    /// The endpoint it was initialised on (`mcp/endpoints.json`); `None`: `/mcp`.
    pub endpoint: Option<Arc<str>>,
}

impl Init {
    /// What a client said: `capabilities` and `clientInfo` are kept once for all the live
    /// sessions that said the same. A deployment's clients are a few programs, and each value
    /// as a tree is a few hundred bytes: most of what an idle session would otherwise hold.
    pub(crate) fn new(
        protocol_version: impl Into<String>,
        capabilities: Value,
        client_info: Value,
    ) -> Init {
        Init {
            protocol_version: protocol_version.into(),
            capabilities: interned(capabilities),
            client_info: interned(client_info),
            endpoint: None,
        }
    }

    /// What a client said, on the endpoint of this name (`None`: `/mcp`).
    pub(crate) fn on_endpoint(mut self, endpoint: Option<&str>) -> Init {
        self.endpoint = endpoint.map(Arc::from);
        self
    }

    /// What an `initialize` request's params say, at the negotiated `version`.
    pub(crate) fn of_initialize(params: &Value, version: &str) -> Init {
        Init::new(
            version,
            params
                .get("capabilities")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({})),
            params.get("clientInfo").cloned().unwrap_or(Value::Null),
        )
    }
}

/// The values live sessions share, by a hash of their JSON text. A value no live session holds
/// any more is dropped when the table has doubled since it was last swept, so the table stays
/// within twice the number of distinct live values.
struct Interned {
    by_hash: foldhash::HashMap<u64, std::sync::Weak<Value>>,
    sweep_at: usize,
}

static INTERNED: std::sync::LazyLock<Mutex<Interned>> = std::sync::LazyLock::new(|| {
    Mutex::new(Interned {
        by_hash: foldhash::HashMap::default(),
        sweep_at: 64,
    })
});

/// `value`, as the one copy live sessions share (a fresh one when a different value has the
/// same hash).
fn interned(value: Value) -> Arc<Value> {
    use std::hash::{BuildHasher, Hasher};
    /// Feeds JSON text to a hasher as it is written.
    struct Feed<H: Hasher>(H);
    impl<H: Hasher> std::io::Write for Feed<H> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.write(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut feed = Feed(foldhash::fast::FixedState::default().build_hasher());
    if serde_json::to_writer(&mut feed, &value).is_err() {
        return Arc::new(value);
    }
    let hash = feed.0.finish();
    let mut table = INTERNED.lock();
    if let Some(held) = table.by_hash.get(&hash).and_then(std::sync::Weak::upgrade) {
        if *held == value {
            return held;
        }
        return Arc::new(value);
    }
    if table.by_hash.len() >= table.sweep_at {
        table.by_hash.retain(|_, w| w.strong_count() > 0);
        table.sweep_at = (table.by_hash.len() * 2).max(64);
    }
    let value = Arc::new(value);
    table.by_hash.insert(hash, Arc::downgrade(&value));
    value
}

/// How far a session's last activity must have moved before it is written again.
const TOUCH_EVERY_MS: u64 = 50;

/// The instant session activity is measured from: an hour before the first time it is asked
/// for (so that every moment of this process lies after it).
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(std::time::Duration::from_secs(3600))
            .unwrap_or(now)
    })
}

/// Milliseconds since [`epoch`].
fn since_epoch_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What changes while a session lives.
#[derive(Debug)]
pub(crate) struct Live {
    /// The level a legacy client asked for with `logging/setLevel` (sent as `_meta` `logLevel`
    /// to 2026-07-28 upstreams, which have no setLevel).
    pub log_level: Mutex<Option<String>>,
    /// Resource URIs the client subscribed to.
    pub subscriptions: Mutex<HashSet<String>>,
    /// The catalog version the client has seen (it began on it, or was told of it): list
    /// changes up to it are not announced again.
    pub catalog_seen: AtomicU64,
    /// When the client was last heard, in ms since [`epoch`]; moved on only when it has moved
    /// by [`TOUCH_EVERY_MS`], so concurrent requests of one session do not each write it.
    last_seen: AtomicU64,
    closed: AtomicBool,
}

/// An upstream request forwarded to the client, waiting for the client's reply.
pub(crate) struct PendingServerRequest {
    /// The connection that asked.
    pub conn: Connection,
    /// The id the upstream gave it.
    pub upstream_id: Value,
    /// The request as the upstream sent it, kept when there are hooks (a reply's hooks see it).
    pub request: Option<Message>,
}

/// The session's own view of the catalog (`views.rs`) and what it was built from: the
/// gateway's catalog version and the generations of the session's own upstream lists.
#[derive(Default)]
pub(crate) struct CatalogView {
    /// The gateway catalog's version it was built on.
    pub base: u64,
    /// (slot index, generation) of each upstream list of the session's own.
    pub key: Vec<(usize, u64)>,
    /// The view.
    pub catalog: Option<Arc<crate::catalog::Catalog>>,
}

/// This process's routing tables for one session.
#[derive(Default)]
pub(crate) struct Routes {
    /// The session's own view of the catalog, when its upstream sessions list something else.
    pub view: Mutex<CatalogView>,
    /// Upstream requests sent to the client, by the id the client saw.
    pub server_requests: Mutex<HashMap<String, PendingServerRequest>>,
    /// Requests Sluice itself sent the client (bridging a 2026-07-28 upstream's input
    /// requests), by the id the client saw: where its reply goes.
    pub asked: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Message>>>,
    next_request: AtomicU64,
}

/// The SSE streams of a Streamable HTTP session.
pub(crate) struct HttpStreams {
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
    pub(crate) fn new(get: Arc<StreamBuf>) -> HttpStreams {
        HttpStreams {
            streams: Mutex::new(HashMap::new()),
            get,
            get_owner: std::sync::OnceLock::new(),
            get_delivered: Arc::new(AtomicU64::new(0)),
            next_stream: AtomicU64::new(1),
        }
    }

    /// These streams, numbered from `base` on (a cluster replica's streams carry its id).
    pub(crate) fn numbered_from(self, base: u64) -> HttpStreams {
        self.next_stream.store(base + 1, Ordering::Relaxed);
        self
    }

    /// Which GET stream is attached (0 = none, else its generation).
    pub(crate) fn get_owner(&self) -> &tokio::sync::watch::Sender<u64> {
        self.get_owner
            .get_or_init(|| tokio::sync::watch::channel(0).0)
    }

    /// Whether a GET stream is attached (without making the owner channel of an idle session).
    pub(crate) fn get_attached(&self) -> bool {
        self.get_owner.get().is_some_and(|o| *o.borrow() != 0)
    }

    /// The stream numbered `n` (0 = the GET stream), for `Last-Event-ID`.
    pub(crate) fn stream(&self, n: u64) -> Option<Arc<StreamBuf>> {
        if n == 0 {
            return Some(self.get.clone());
        }
        self.streams.lock().get(&n).cloned()
    }

    /// Drop the replay buffers of this session's finished POST streams (kept only for a
    /// resumption): how many, and the bytes of event data they held.
    pub(crate) fn drop_finished(&self) -> (u64, u64) {
        let mut streams = self.streams.lock();
        let (mut n, mut bytes) = (0, 0);
        streams.retain(|_, b| {
            if b.is_done() {
                n += 1;
                bytes += b.held_bytes() as u64;
                false
            } else {
                true
            }
        });
        (n, bytes)
    }

    /// A new POST stream (registered for resumption; the oldest finished ones are dropped).
    pub(crate) fn new_stream(&self, cap: usize, max_bytes: usize) -> Arc<StreamBuf> {
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
pub(crate) enum Outbound {
    /// Streamable HTTP: the session's SSE streams.
    Http(HttpStreams),
    /// stdio: the stdout writer.
    Stdio(mpsc::UnboundedSender<Out>),
}

/// A session served by every replica of a cluster: its handle in the store, and the writer of
/// its GET stream's events.
pub(crate) struct Shared {
    /// The session's handle (the name of its state in the store).
    pub handle: String,
    /// The store.
    pub store: Arc<Store>,
    /// This replica's id (the prefix of the request ids it sends the client).
    pub replica: Arc<str>,
    events: mpsc::UnboundedSender<(String, Option<&'static str>)>,
}

impl Shared {
    /// The shared part of a session; its events are written to the store in order, keeping at
    /// most `cap`.
    pub(crate) fn new(
        handle: String,
        store: Arc<Store>,
        replica: Arc<str>,
        ttl: std::time::Duration,
        cap: u64,
    ) -> Shared {
        let (events, mut rx) = mpsc::unbounded_channel::<(String, Option<&'static str>)>();
        let (h, st) = (handle.clone(), store.clone());
        tokio::spawn(async move {
            while let Some((json, once)) = rx.recv().await {
                if let Err(e) = st.push_event(&h, &json, once, cap, ttl).await {
                    tracing::warn!(handle = %h, "a message for the GET stream was lost: {e}");
                }
            }
        });
        Shared {
            handle,
            store,
            replica,
            events,
        }
    }
}

/// One client session.
pub(crate) struct Session {
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
    /// In a cluster: its shared part.
    pub shared: Option<Shared>,
    /// `kind:id` of the first principal recorded (it never changes: a request with another's
    /// credentials does not find the session).
    principal_key: std::sync::OnceLock<String>,
}

impl Session {
    /// A new session.
    pub(crate) fn new(id: String, init: Init, outbound: Outbound) -> Session {
        Session {
            id,
            init,
            live: Live {
                log_level: Mutex::new(None),
                subscriptions: Mutex::new(HashSet::new()),
                catalog_seen: AtomicU64::new(0),
                last_seen: AtomicU64::new(since_epoch_ms()),
                closed: AtomicBool::new(false),
            },
            routes: Routes::default(),
            outbound,
            principal: parking_lot::RwLock::new(None),
            authorization: parking_lot::RwLock::new(None),
            shared: None,
            principal_key: std::sync::OnceLock::new(),
        }
    }

    /// This session, served by every replica of a cluster.
    pub(crate) fn with_shared(mut self, shared: Shared) -> Session {
        self.shared = Some(shared);
        self
    }

    /// Send a message that belongs to no request (GET stream, or stdout). In a cluster it goes
    /// to the GET stream's events in the store, wherever the GET stream is held.
    pub(crate) fn send_unrelated(&self, msg: Message) {
        if let (Some(shared), Outbound::Http(_)) = (&self.shared, &self.outbound) {
            // A list change is announced by every replica that serves the session: once.
            let once = msg.method().and_then(|m| {
                [
                    "notifications/tools/list_changed",
                    "notifications/prompts/list_changed",
                    "notifications/resources/list_changed",
                ]
                .into_iter()
                .find(|l| *l == m)
            });
            let _ = shared.events.send((msg.to_json(), once));
            return;
        }
        match &self.outbound {
            Outbound::Http(h) => h.get.push(&msg),
            Outbound::Stdio(tx) => {
                let _ = tx.send(Out::Msg(msg));
            }
        }
    }

    /// The HTTP streams, for a Streamable HTTP session.
    pub(crate) fn http(&self) -> Option<&HttpStreams> {
        match &self.outbound {
            Outbound::Http(h) => Some(h),
            Outbound::Stdio(_) => None,
        }
    }

    /// Who the client authenticated as.
    pub(crate) fn principal(&self) -> Option<Arc<Principal>> {
        // Never set (the gateway has no auth): no lock taken.
        self.principal_key.get()?;
        self.principal.read().clone()
    }

    /// Who the client authenticated as, as `kind:id` (the key of its per-user grants and
    /// per-principal connections), when it did.
    pub(crate) fn principal_key(&self) -> Option<&str> {
        self.principal_key.get().map(String::as_str)
    }

    /// Record who the client authenticated as (at `initialize`, and again with each request's
    /// fresher token).
    pub(crate) fn set_principal(&self, p: Option<Arc<Principal>>) {
        if let Some(p) = &p {
            self.principal_key
                .get_or_init(|| format!("{}:{}", p.kind, p.id));
        }
        *self.principal.write() = p;
    }

    /// The client's latest `Authorization` header (sent only to upstreams that ask for it).
    pub(crate) fn authorization(&self) -> Option<Arc<str>> {
        self.authorization.read().clone()
    }

    /// Keep the client's `Authorization` header (each request may bring a fresher token).
    pub(crate) fn set_authorization(&self, value: Option<&str>) {
        let Some(v) = value else { return };
        if self.authorization.read().as_deref() != Some(v) {
            *self.authorization.write() = Some(Arc::from(v));
        }
    }

    /// Who this session is, for an upstream connection opened for it.
    pub(crate) fn upstream_ref(&self) -> sluice_upstream::SessionRef<'_> {
        sluice_upstream::SessionRef {
            id: &self.id,
            capabilities: &self.init.capabilities,
            protocol_version: &self.init.protocol_version,
            principal: self.principal_key.get().map(String::as_str),
        }
    }

    /// Does this session serve a modern-era (2026-07-28) client? Such a session lives for one
    /// request (HTTP) and has no handshake behind it.
    pub(crate) fn is_modern(&self) -> bool {
        sluice_core::version::is_modern(&self.init.protocol_version)
    }

    /// `"modern"` or `"legacy"`: the era hooks see.
    pub(crate) fn era(&self) -> &'static str {
        if self.is_modern() {
            "modern"
        } else {
            "legacy"
        }
    }

    /// Does the client support `cap` (a key of its capabilities)?
    pub(crate) fn has_capability(&self, cap: &str) -> bool {
        self.init
            .capabilities
            .get(cap)
            .is_some_and(|v| !v.is_null())
    }

    /// A fresh id for a request the gateway sends to this client (in a cluster it names this
    /// replica, where the client's reply must go).
    pub(crate) fn mint_request_id(&self) -> String {
        let n = self.routes.next_request.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.shared {
            Some(s) => format!("sluice-{}-{n}", s.replica),
            None => format!("sluice-{n}"),
        }
    }

    /// Keep the level the client asked for (in a cluster, in the store too, before answering).
    pub(crate) async fn set_log_level(&self, level: String) {
        if let Some(s) = &self.shared {
            if let Err(e) = s.store.set(&s.handle, "level", &level).await {
                tracing::warn!(session = %self.id, "the log level is kept on this replica only: {e}");
            }
        }
        *self.live.log_level.lock() = Some(level);
    }

    /// Keep a resource subscription (on) or drop it (in a cluster, in the store too).
    pub(crate) async fn set_subscribed(&self, uri: &str, on: bool) {
        if let Some(s) = &self.shared {
            let field = format!("sub:{uri}");
            let r = if on {
                s.store.set(&s.handle, &field, "1").await
            } else {
                s.store.unset(&s.handle, &field).await
            };
            if let Err(e) = r {
                tracing::warn!(session = %self.id, "the subscription is kept on this replica only: {e}");
            }
        }
        let mut subs = self.live.subscriptions.lock();
        if on {
            subs.insert(uri.to_string());
        } else {
            subs.remove(uri);
        }
    }

    /// Take the live state the store holds (another replica may have changed it). Returns the
    /// log level when it is new here (this replica's upstreams have not been told it).
    pub(crate) fn apply_shared(&self, fields: &HashMap<String, String>) -> Option<String> {
        let mut new_level = None;
        if let Some(level) = fields.get("level") {
            let mut l = self.live.log_level.lock();
            if l.as_deref() != Some(level) {
                *l = Some(level.clone());
                new_level = Some(level.clone());
            }
        }
        let subs: HashSet<String> = fields
            .keys()
            .filter_map(|k| k.strip_prefix("sub:"))
            .map(str::to_string)
            .collect();
        *self.live.subscriptions.lock() = subs;
        if let (Some(d), Some(http)) = (fields.get("gd").and_then(|v| v.parse().ok()), self.http())
        {
            http.get_delivered.fetch_max(d, Ordering::SeqCst);
        }
        new_level
    }

    /// Record activity (for the idle timeout).
    pub(crate) fn touch(&self) {
        let now = since_epoch_ms();
        let seen = &self.live.last_seen;
        if now >= seen.load(Ordering::Relaxed) + TOUCH_EVERY_MS {
            seen.store(now, Ordering::Relaxed);
        }
    }

    /// Seconds since the last activity.
    pub(crate) fn idle_secs(&self) -> u64 {
        let seen = self.live.last_seen.load(Ordering::Relaxed);
        since_epoch_ms().saturating_sub(seen) / 1000
    }

    /// Mark closed; returns false if it already was.
    pub(crate) fn mark_closed(&self) -> bool {
        !self.live.closed.swap(true, Ordering::SeqCst)
    }

    /// Has the session ended?
    pub(crate) fn is_closed(&self) -> bool {
        self.live.closed.load(Ordering::SeqCst)
    }
}

/// JSON text of an id, as a map key (`1` and `"1"` stay distinct).
pub(crate) fn id_key(id: &Value) -> String {
    sluice_core::exact::key(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn past_the_memory_ceiling_only_finished_streams_are_dropped() {
        let streams = HttpStreams::new(StreamBuf::new(0, 8, 1 << 20));
        let msg = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/message"}"#)
            .expect("a message");
        let done = streams.new_stream(8, 1 << 20);
        done.push(&msg);
        done.push(&msg);
        done.finish();
        let open = streams.new_stream(8, 1 << 20);
        open.push(&msg);
        let (n, bytes) = streams.drop_finished();
        assert_eq!((n, bytes), (1, 2 * msg.to_json().len() as u64));
        assert!(streams.stream(1).is_none(), "the finished one is gone");
        assert!(streams.stream(2).is_some(), "the open one stays");
        assert_eq!(streams.drop_finished(), (0, 0));
    }

    #[test]
    fn a_touch_resets_the_idle_time_and_concurrent_touches_write_once() {
        let (s, _rx) = crate::testing::session();
        assert_eq!(s.idle_secs(), 0);
        let ago = since_epoch_ms() - 5_000;
        s.live.last_seen.store(ago, Ordering::Relaxed);
        assert_eq!(s.idle_secs(), 5);
        s.touch();
        assert_eq!(s.idle_secs(), 0);
        let seen = s.live.last_seen.load(Ordering::Relaxed);
        assert!(seen > ago);
        // Within TOUCH_EVERY_MS of it, a touch leaves the time as it is.
        s.live
            .last_seen
            .store(seen + TOUCH_EVERY_MS - 1, Ordering::Relaxed);
        s.touch();
        assert_eq!(
            s.live.last_seen.load(Ordering::Relaxed),
            seen + TOUCH_EVERY_MS - 1
        );
    }

    #[test]
    fn sessions_whose_clients_said_the_same_share_one_copy_of_it() {
        let params = json!({
            "capabilities": {"roots": {"listChanged": true}, "x-interned-test": 1},
            "clientInfo": {"name": "interned-test-client", "version": "1.0"},
        });
        let a = Init::of_initialize(&params, "2025-11-25");
        let b = Init::of_initialize(&params, "2025-06-18");
        assert!(Arc::ptr_eq(&a.capabilities, &b.capabilities));
        assert!(Arc::ptr_eq(&a.client_info, &b.client_info));
        assert_eq!(*a.client_info, params["clientInfo"]);
        // Another client's value is its own.
        let other = json!({
            "capabilities": {"roots": {"listChanged": true}, "x-interned-test": 2},
            "clientInfo": {"name": "interned-test-client", "version": "1.0"},
        });
        let c = Init::of_initialize(&other, "2025-11-25");
        assert!(!Arc::ptr_eq(&a.capabilities, &c.capabilities));
        assert_eq!(*c.capabilities, other["capabilities"]);
        assert!(Arc::ptr_eq(&a.client_info, &c.client_info));
    }

    #[test]
    fn a_value_no_session_holds_is_swept_from_the_table() {
        let value = |i: usize| json!({"interned-sweep-test": i});
        // Far more distinct values than the table keeps without a sweep, none held.
        for i in 0..1000 {
            drop(interned(value(i)));
        }
        let held = interned(value(5000));
        let len = INTERNED.lock().by_hash.len();
        // Other tests intern values meanwhile: the bound is loose, but far below 1000.
        assert!(len < 200, "{len} values in the table");
        // A value still held is found again.
        assert!(Arc::ptr_eq(&held, &interned(value(5000))));
    }
}
