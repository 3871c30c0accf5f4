//! Upstream slots: one per configured upstream. A slot keeps the control connection (shared by
//! every client for stdio, used for lists by every transport), caches the upstream's lists and
//! re-reads them when the upstream says they changed, restarts it with backoff when it fails,
//! and opens (and closes) the per-session connections of upstreams that need one per client
//! (HTTP, or stdio with `"isolation": "session"`).
//!
//! A slot never calls the gateway: what the upstream starts, and every change of the slot's
//! health or lists, arrives at the gateway as a [`SlotEvent`] on the channel of its
//! [`SlotEnv`]. A message or stream event carries a [`Done`]; the connection's later events (its
//! replies among them) wait until the gateway drops it, so a call's progress and requests reach
//! the client before its reply.

use crate::identity::{IdentityError, PerUser};
use crate::lists::{fetch_lists, ListError, UpstreamLists};
use crate::{Connection, Incoming, OpenOptions, StderrTail, UpstreamError};
use foldhash::HashMap;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_config::{Isolation, Transport, UpstreamSpec};
use sluice_core::worker::Sharded;
use sluice_core::{codes, RpcError};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch, Notify, OnceCell};
use tokio_util::sync::CancellationToken;

/// The health of an upstream.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Configured with `"enabled": false`.
    Disabled,
    /// Starting (first start or a restart).
    Starting,
    /// Connected and listed.
    Up,
    /// Not connected; the reason.
    Down(String),
}

/// The live state of one slot.
#[derive(Debug, Default)]
pub struct SlotState {
    /// Health.
    pub status: Option<Status>,
    /// The control connection while up.
    pub control: Option<Connection>,
    /// The upstream's lists while up.
    pub lists: Option<UpstreamLists>,
    /// The upstream's `initialize` result while up.
    pub init: Option<Value>,
    /// How many times it was (re)started after a failure.
    pub restarts: u64,
    /// Resource URIs a 2026-07-28 upstream reports updates of (listen streams opened on the
    /// control connection; opened again after a restart).
    pub watched: std::collections::HashSet<String>,
    /// A list_changed that came while the control connection was still being opened (its
    /// lists may be older than it): re-listed as soon as the connection is in place.
    pub stale: Option<&'static str>,
}

/// The timing settings a slot works with (live: a reload of `sluice.json` changes them).
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Default request timeout (an upstream's `timeout_ms` overrides it).
    pub request_timeout_ms: u64,
    /// Connect (and handshake) timeout.
    pub connect_timeout_ms: u64,
    /// First restart delay after a failure.
    pub restart_initial_ms: u64,
    /// Longest restart delay.
    pub restart_max_ms: u64,
}

/// What every slot is given by the gateway that runs it.
#[derive(Clone)]
pub struct SlotEnv {
    /// Where the slot's events go.
    pub events: mpsc::UnboundedSender<SlotEvent>,
    /// The timing settings now.
    pub timing: watch::Receiver<Timing>,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
    /// In a cluster: where the replicas share the upstream sessions of client sessions
    /// (Streamable HTTP upstreams); None: each connection opens its own.
    pub shared: Option<Arc<dyn crate::SharedSessions>>,
    /// The vault and public URL OAuth upstreams sign in with (None: no vault configured).
    pub oauth: Option<Arc<crate::OAuthContext>>,
}

/// Held while the gateway handles a connection's event; the connection's next events (and the
/// reply that may follow) wait until it is dropped.
pub struct Done(pub(crate) Option<oneshot::Sender<()>>);

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// What a slot tells the gateway.
pub enum SlotEvent {
    /// The upstream sent a request or notification on `conn` (list changes are handled by the
    /// slot itself and arrive as [`SlotEvent::Lists`]).
    Message {
        /// The slot.
        slot: Arc<Slot>,
        /// The connection it came on.
        conn: Connection,
        /// The session whose own connection it is (None: the shared control connection).
        owner: Option<Arc<str>>,
        /// The message.
        incoming: Incoming,
        /// Drop when handled.
        done: Done,
    },
    /// The reply stream of a call on `conn` opened or paused.
    Stream {
        /// The connection.
        conn: Connection,
        /// The call (the id this connection minted).
        related: u64,
        /// Opened or paused.
        paused: bool,
        /// The upstream's retry hint.
        retry: Option<Duration>,
        /// Drop when handled.
        done: Done,
    },
    /// The slot's lists or health changed (it came up, went down, or re-listed): the catalog
    /// is stale. `said` is the upstream's own list_changed notification, to pass on to
    /// clients even when the merged lists look the same.
    Lists {
        /// The slot.
        slot: Arc<Slot>,
        /// The upstream's notification, when it said one.
        said: Option<&'static str>,
    },
    /// The lists one session's own connection shows changed (the upstream said so on that
    /// connection): that session's view is stale, and it should be told.
    SessionLists {
        /// The slot.
        slot: Arc<Slot>,
        /// The session whose connection it is.
        session: Arc<str>,
        /// The upstream's notification.
        said: &'static str,
    },
}

/// Who a per-session connection is for.
#[derive(Debug, Clone, Copy)]
pub struct SessionRef<'a> {
    /// The session id.
    pub id: &'a str,
    /// The client's capabilities (sent upstream at `initialize`).
    pub capabilities: &'a Value,
    /// The negotiated protocol version.
    pub protocol_version: &'a str,
    /// Who the client authenticated as (`kind:id`), when it did: a 2026-07-28 client has no
    /// session, so an `"isolation": "session"` stdio upstream gives each principal its own
    /// process instead.
    pub principal: Option<&'a str>,
}

impl SessionRef<'_> {
    fn is_modern(&self) -> bool {
        sluice_core::version::is_modern(self.protocol_version)
    }
}

/// A session's own connection, opened once.
type SessionCell = Arc<OnceCell<Connection>>;

/// A session's own lists: a generation number and the lists.
pub(crate) type SessionLists = (u64, Arc<UpstreamLists>);

/// One configured upstream.
pub struct Slot {
    /// A number unique to this slot in the process (a reload that keeps the upstream keeps
    /// the slot).
    pub serial: u64,
    stopped: AtomicBool,
    stop: Notify,
    /// The configuration.
    pub spec: UpstreamSpec,
    /// Live state. Who changes its status or control connection calls [`Slot::publish`]
    /// under the same lock.
    pub state: Mutex<SlotState>,
    /// What every call asks of the state (up? modern?), published from it at each change:
    /// reading it writes nothing, where the state's lock is written by every thread's calls.
    hot: AtomicU8,
    /// Signalled after each start attempt (for start-up waiting).
    pub attempted: Notify,
    /// The last stderr lines of its processes (stdio), across restarts.
    pub stderr: StderrTail,
    pub(crate) env: SlotEnv,
    /// Per-session connections by session id (opened on first use).
    /// Sharded by session id: a call locks its session's shard only, which other sessions'
    /// calls (on other threads) seldom write.
    sessions: Sharded<Mutex<HashMap<Arc<str>, SessionCell>>>,
    /// Wakes the supervisor from its backoff (a sign-in finished: try now).
    retry: Notify,
    /// Its OAuth identity (an upstream with `oauth`), or why it could not be made.
    identity: Result<Option<Arc<sluice_oauth::Identity>>, Arc<IdentityError>>,
    /// A `per_user` upstream's identities, one per principal: each principal's calls go
    /// through a connection of its own that carries its own grant.
    per_user: Option<Arc<PerUser>>,
    /// An `exchange` upstream's token exchange: each call carries a token minted for its
    /// caller from the caller's own (RFC 8693).
    exchanger: Option<Arc<sluice_oauth::Exchanger>>,
    /// The lists of per-session connections that show something else than the control
    /// connection (`session_lists.rs`), by session id, with a generation number.
    /// Sharded by session id, as `sessions` is.
    pub(crate) session_lists: Sharded<Mutex<HashMap<Arc<str>, SessionLists>>>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("id", &self.spec.id)
            .field("serial", &self.serial)
            .finish()
    }
}

const PKG_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The prefix of a per-user upstream's connection key: `user:<principal>`.
pub const USER_KEY: &str = "user:";

/// The connection key of `principal`'s connection to a per-user upstream.
pub fn user_key(principal: &str) -> String {
    format!("{USER_KEY}{principal}")
}

/// What a user's sessions are told when their own lists differ from everyone's.
const LIST_CHANGED: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];

/// Bits of [`Slot::publish`]: the status is `Up`.
const HOT_UP: u8 = 1;
/// Bits of [`Slot::publish`]: the control connection speaks 2026-07-28.
const HOT_MODERN: u8 = 2;

/// The `clientInfo` Sluice sends upstream.
pub fn client_info() -> Value {
    json!({"name": "sluice", "title": "Sluice MCP gateway", "version": PKG_VERSION})
}

impl Slot {
    /// A new slot (not started).
    pub fn new(spec: UpstreamSpec, env: SlotEnv) -> Slot {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        let status = if spec.enabled {
            Status::Starting
        } else {
            Status::Disabled
        };
        let identity = match (&spec.oauth, &env.oauth) {
            (None, _) => Ok(None),
            (Some(_), Some(ctx)) => crate::identity::identity_for(&spec, ctx).map_err(Arc::new),
            (Some(_), None) => Err(Arc::new(IdentityError::NoVault)),
        };
        let per_user = match &env.oauth {
            Some(ctx) => PerUser::new(&spec, ctx).ok().flatten().map(Arc::new),
            None => None,
        };
        let exchanger = match &env.oauth {
            Some(ctx) => crate::identity::exchanger_for(&spec, ctx).ok().flatten(),
            None => None,
        };
        Slot {
            identity,
            per_user,
            exchanger,
            retry: Notify::new(),
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            stopped: AtomicBool::new(false),
            stop: Notify::new(),
            spec,
            state: Mutex::new(SlotState {
                status: Some(status),
                ..SlotState::default()
            }),
            hot: AtomicU8::new(0),
            attempted: Notify::new(),
            stderr: StderrTail::default(),
            env,
            sessions: Sharded::default(),
            session_lists: Sharded::default(),
        }
    }

    /// Publish what calls read of `st` (the state, locked by the caller who changed it).
    pub fn publish(&self, st: &SlotState) {
        let up = matches!(st.status, Some(Status::Up));
        let modern = st.control.as_ref().is_some_and(Connection::is_modern);
        self.hot.store(
            (u8::from(up) * HOT_UP) | (u8::from(modern) * HOT_MODERN),
            Ordering::Release,
        );
    }

    /// Start it again now if it is down and waiting (a sign-in finished); no effect when up.
    pub fn retry_now(&self) {
        self.retry.notify_one();
    }

    /// Its OAuth identity, when it signs in.
    pub fn identity(&self) -> Option<&Arc<sluice_oauth::Identity>> {
        self.identity.as_ref().ok().and_then(Option::as_ref)
    }

    /// A `per_user` upstream's identities (None: it signs in once for everyone, or not at all).
    pub fn per_user(&self) -> Option<&Arc<PerUser>> {
        self.per_user.as_ref()
    }

    /// An `exchange` upstream's token exchange (None: another mode).
    pub fn exchanger(&self) -> Option<&Arc<sluice_oauth::Exchanger>> {
        self.exchanger.as_ref()
    }

    /// Is the upstream up (connected and listed)?
    pub fn is_up(&self) -> bool {
        self.hot.load(Ordering::Acquire) & HOT_UP != 0
    }

    /// Restart the upstream now (the admin page's "restart"): its control connection closes and
    /// the supervisor starts it again after the usual backoff. False when it is not running.
    pub async fn restart(&self) -> bool {
        let control = self.state.lock().control.clone();
        match control {
            Some(c) => {
                c.shutdown().await;
                true
            }
            None => false,
        }
    }

    /// Stop this slot (a reload removed or replaced it): its supervisor ends and closes the
    /// control connection, and every session's own connection to it closes.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.stop.notify_waiters();
        for shard in self.session_lists.all() {
            shard.lock().clear();
        }
        let conns: Vec<_> = self
            .sessions
            .all()
            .flat_map(|shard| shard.lock().drain().collect::<Vec<_>>())
            .collect();
        let shared = self.shares_sessions();
        for (_, cell) in conns {
            if let Some(c) = cell.get().cloned() {
                tokio::spawn(async move {
                    crate::shared::close(&c, shared, "the upstream was removed or replaced").await
                });
            }
        }
    }

    /// Was the slot stopped?
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Resolves when the slot is stopped.
    async fn stopped(&self) {
        let n = self.stop.notified();
        if self.is_stopped() {
            return;
        }
        n.await
    }

    /// Is this a stdio upstream with a process per client session (`"isolation": "session"`)?
    pub fn isolated_stdio(&self) -> bool {
        self.spec.transport == Transport::Stdio && self.spec.isolation == Isolation::Session
    }

    /// Does every client session get its own connection?
    pub fn per_session(&self) -> bool {
        match self.spec.transport {
            Transport::Http | Transport::Sse => true,
            Transport::Stdio => self.spec.isolation == Isolation::Session,
            Transport::Local => false,
        }
    }

    /// Have the upstream tell about changes to `uri` on the control connection, once per URI:
    /// a listen stream for a 2026-07-28 upstream, `resources/subscribe` for a legacy one. Its
    /// `notifications/resources/updated` then reach every session and listen stream subscribed
    /// to the URI.
    pub fn watch_resource(&self, uri: &str) {
        let mut st = self.state.lock();
        if !st.watched.insert(uri.to_string()) {
            return;
        }
        let Some(c) = st.control.clone() else { return };
        drop(st);
        if c.is_modern() {
            c.listen_resource(uri);
        } else {
            let uri = uri.to_string();
            tokio::spawn(async move {
                let params = Some(json!({"uri": uri}));
                if let Err(e) = c
                    .call("resources/subscribe", params, Duration::from_secs(30))
                    .await
                {
                    tracing::warn!(upstream = %c.label(), "resources/subscribe {uri} failed: {e}");
                }
            });
        }
    }

    /// Does the upstream speak 2026-07-28 (as found when its control connection opened)?
    pub fn is_modern(&self) -> bool {
        self.hot.load(Ordering::Acquire) & HOT_MODERN != 0
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.state.lock().status.clone().unwrap_or(Status::Starting)
    }

    /// The upstream's capabilities while up.
    pub fn capabilities(&self) -> Option<Value> {
        self.state
            .lock()
            .init
            .as_ref()
            .and_then(|i| i.get("capabilities").cloned())
    }

    /// The control connection while up.
    pub fn control(&self) -> Option<Connection> {
        self.state.lock().control.clone()
    }

    /// The request timeout for this upstream.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(
            self.spec
                .timeout_ms
                .unwrap_or(self.env.timing.borrow().request_timeout_ms),
        )
    }

    /// The error for a call this upstream cannot take now (-32000, naming it and why).
    pub fn unavailable(&self) -> RpcError {
        let why = match self.status() {
            Status::Down(r) => r,
            Status::Starting => "it is starting".into(),
            Status::Disabled => "it is disabled".into(),
            Status::Up => "it is not connected".into(),
        };
        RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            format!("Upstream '{}' is unavailable: {why}", self.spec.id),
        )
        .with_data(json!({"upstream": self.spec.id}))
    }

    /// The connection a call from `session` goes through: the shared control connection, or the
    /// session's own (opened on first use).
    pub async fn connection_for(
        self: &Arc<Slot>,
        session: SessionRef<'_>,
    ) -> Result<Connection, RpcError> {
        self.connection_as(session, None).await
    }

    /// [`Slot::connection_for`], for a caller whose requests carry `bearer` (an `exchange`
    /// upstream: the token exchanged for that caller). The session's own connection is opened
    /// with it (its `initialize` carries it) and keeps the latest for what it sends unasked
    /// (notifications, replies, its GET stream); the control connection, shared by every
    /// caller, never takes it (each request carries its own).
    pub async fn connection_as(
        self: &Arc<Slot>,
        session: SessionRef<'_>,
        bearer: Option<&Arc<reqwest::header::HeaderValue>>,
    ) -> Result<Connection, RpcError> {
        // A modern client's request is stateless, and a 2026-07-28 upstream has no sessions:
        // either way the upstream's control connection serves (no upstream session per client).
        // (A stdio upstream isolated per session keeps a process per legacy client even when it
        // speaks 2026-07-28: isolation is about its process state.)
        let modern_http = self.is_modern() && self.spec.transport != Transport::Stdio;
        // A 2026-07-28 client of an isolated stdio upstream: one process per principal (its
        // requests have no session to own one), never one process shared by every client.
        let isolated_stdio =
            self.spec.transport == Transport::Stdio && self.spec.isolation == Isolation::Session;
        let per_principal = session.is_modern() && isolated_stdio;
        // A per-user upstream: one connection per principal, carrying its own grant, in
        // either era (the driver made sure the principal has connected).
        if let Some(users) = &self.per_user {
            return self.user_connection(session, users).await;
        }
        if !self.per_session() || (session.is_modern() && !per_principal) || modern_http {
            let st = self.state.lock();
            return match (&st.status, &st.control) {
                (Some(Status::Up), Some(c)) if !c.is_closed() => Ok(c.clone()),
                _ => {
                    drop(st);
                    Err(self.unavailable())
                }
            };
        }
        if self.status() == Status::Disabled || self.is_stopped() {
            return Err(self.unavailable());
        }
        // The map lock is short; opening runs under the session's own cell, so one session's
        // slow connect never holds up another's calls.
        let principal_key;
        let key = if per_principal {
            principal_key = format!("principal:{}", session.principal.unwrap_or("anonymous"));
            principal_key.as_str()
        } else {
            session.id
        };
        let mut dead = None;
        let cell = {
            let mut sessions = self.sessions.of(key).lock();
            match sessions.get(key) {
                // The common case: the session's connection is open (no allocation).
                Some(cell) if !cell.get().is_some_and(Connection::is_closed) => cell.clone(),
                old => {
                    // The upstream session it spoke in ended (shared ones are re-opened once).
                    dead = old
                        .and_then(|c| c.get())
                        .and_then(Connection::upstream_session)
                        .map(|s| s.id);
                    let cell = Arc::new(OnceCell::new());
                    sessions.insert(Arc::from(key), cell.clone());
                    cell
                }
            }
        };
        if let Some(open) = cell.get() {
            if let Some(b) = bearer {
                open.set_bearer(b);
            }
            return Ok(open.clone());
        }
        // Opening is boxed: the future of every call holds this one, and opening's is large.
        let shared = (!per_principal).then_some(dead.as_deref());
        let open = cell.get_or_try_init(|| self.open_for(session, key, shared, None, bearer));
        let conn = Box::pin(open).await.cloned()?;
        if let Some(b) = bearer {
            conn.set_bearer(b);
        }
        Ok(conn)
    }

    /// The connection of a per-user upstream's principal (`user:<principal>`), opened on first
    /// use with that principal's identity; one closed is opened again.
    async fn user_connection(
        self: &Arc<Slot>,
        session: SessionRef<'_>,
        users: &PerUser,
    ) -> Result<Connection, RpcError> {
        if self.status() == Status::Disabled || self.is_stopped() {
            return Err(self.unavailable());
        }
        let Some(principal) = session.principal else {
            return Err(RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!(
                    "Upstream '{}' acts as each user, and this caller is not authenticated",
                    self.spec.id
                ),
            ));
        };
        let key = user_key(principal);
        let cell = {
            let mut sessions = self.sessions.of(&key).lock();
            match sessions.get(key.as_str()) {
                Some(cell) if !cell.get().is_some_and(Connection::is_closed) => cell.clone(),
                _ => {
                    let cell = Arc::new(OnceCell::new());
                    sessions.insert(Arc::from(key.as_str()), cell.clone());
                    cell
                }
            }
        };
        if let Some(open) = cell.get() {
            return Ok(open.clone());
        }
        let identity = users.identity(principal);
        Box::pin(cell.get_or_try_init(|| self.open_for(session, &key, None, Some(identity), None)))
            .await
            .cloned()
    }

    /// Close a per-user upstream's connection of `principal` (its grant was revoked).
    pub async fn close_user(&self, principal: &str) {
        let key = user_key(principal);
        let cell = self.sessions.of(&key).lock().remove(key.as_str());
        if let Some(c) = cell.and_then(|c| c.get().cloned()) {
            c.shutdown().await;
        }
    }

    /// Open the connection of `key` (a session id, or `principal:…`). `shared`: a client
    /// session's key (with the upstream session id found ended, if any), whose upstream session
    /// the replicas of a cluster share.
    async fn open_for(
        self: &Arc<Slot>,
        session: SessionRef<'_>,
        key: &str,
        shared: Option<Option<&str>>,
        identity: Option<Arc<sluice_oauth::Identity>>,
        bearer: Option<&Arc<reqwest::header::HeaderValue>>,
    ) -> Result<Connection, RpcError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let opts = OpenOptions {
            client_info: client_info(),
            capabilities: session.capabilities.clone(),
            protocol_version: session.protocol_version.to_string(),
            connect_timeout: Duration::from_millis(self.env.timing.borrow().connect_timeout_ms),
            label: format!("{}#{}", self.spec.id, short(key)),
            stderr: self.stderr.clone(),
            identity: identity.or_else(|| self.identity().cloned()),
            bearer: bearer.cloned(),
        };
        let conn = match shared {
            Some(dead) if self.shares_sessions() => {
                crate::shared::open(self, key, dead, opts, tx).await
            }
            _ => Connection::open(&self.spec, opts, tx).await,
        }
        .map_err(|e| {
            RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("Upstream '{}' is unavailable: {e}", self.spec.id),
            )
            .with_data(json!({"upstream": self.spec.id}))
        })?;
        tokio::spawn(self.pump(conn.clone(), Some(Arc::from(key)), rx));
        // What this session's own upstream session lists (it may differ from the control
        // connection's: tools registered per session, after `initialize`). A user's connection
        // opens at a call, after that user's sessions listed: they are told when theirs differ.
        if self.read_session_lists(key, &conn).await && key.starts_with(USER_KEY) {
            for said in LIST_CHANGED {
                let _ = self.env_events().send(SlotEvent::SessionLists {
                    slot: self.clone(),
                    session: Arc::from(key),
                    said,
                });
            }
        }
        Ok(conn)
    }

    /// Has the session its own connection open?
    pub fn has_session_connection(&self, session_id: &str) -> bool {
        self.sessions
            .of(session_id)
            .lock()
            .get(session_id)
            .and_then(|c| c.get())
            .is_some_and(|c| !c.is_closed())
    }

    /// The session's own connection, when it has one open.
    pub fn session_connection(&self, session_id: &str) -> Option<Connection> {
        self.sessions
            .of(session_id)
            .lock()
            .get(session_id)
            .and_then(|c| c.get().cloned())
            .filter(|c| !c.is_closed())
    }

    /// The session ended: close its own connection.
    pub async fn close_session(&self, session_id: &str) {
        self.session_lists.of(session_id).lock().remove(session_id);
        let cell = self.sessions.of(session_id).lock().remove(session_id);
        if let Some(c) = cell.and_then(|c| c.get().cloned()) {
            let why = "the client's session ended";
            crate::shared::close(&c, self.shares_sessions(), why).await;
        }
    }

    /// Are this upstream's sessions shared by the replicas of a cluster (Streamable HTTP in a
    /// cluster)? Then closing a connection here leaves its upstream session open.
    pub fn shares_sessions(&self) -> bool {
        self.spec.transport == Transport::Http && self.env.shared.is_some()
    }

    /// Re-read the lists now, because another replica of a cluster heard this upstream say
    /// they changed; reported as a plain change (the gateway tells other replicas only of what
    /// an upstream said itself).
    pub async fn relist(self: Arc<Slot>) {
        self.refresh(None).await;
    }

    /// Fetch the lists again after the upstream said one changed, and tell the gateway.
    pub(crate) async fn refresh_lists(self: Arc<Slot>, said: &'static str) {
        self.refresh(Some(said)).await;
    }

    /// Fetch the lists again and report the change (`said`: the upstream's own notification).
    async fn refresh(self: Arc<Slot>, said: Option<&'static str>) {
        let conn = {
            let mut st = self.state.lock();
            match st.control.clone() {
                Some(c) => c,
                None => {
                    // The control connection is being opened: re-list once it is in place
                    // (it lists anyway when it opens).
                    if said.is_some() {
                        st.stale = said;
                    }
                    return;
                }
            }
        };
        // An exchange upstream's lists are read with the gateway's own token: a fresh one.
        if let Some(x) = self.exchanger.as_ref().filter(|x| x.has_own_credentials()) {
            match x.own_token().await {
                Ok(t) => conn.set_bearer(&t),
                Err(e) => {
                    tracing::warn!(upstream = %self.spec.id, "the gateway's own token, to list with, could not be had: {e}")
                }
            }
        }
        let caps = conn
            .init_result()
            .get("capabilities")
            .cloned()
            .unwrap_or(Value::Null);
        match fetch_lists(&conn, &caps, self.timeout()).await {
            Ok(lists) => {
                {
                    let mut st = self.state.lock();
                    if st.status == Some(Status::Up) {
                        st.lists = Some(lists);
                    }
                }
                self.changed(said);
            }
            Err(e) => tracing::warn!(upstream = %self.spec.id, "refreshing lists failed: {e}"),
        }
    }

    /// Where this slot's events go.
    pub(crate) fn env_events(&self) -> &mpsc::UnboundedSender<SlotEvent> {
        &self.env.events
    }

    fn changed(self: &Arc<Slot>, said: Option<&'static str>) {
        let _ = self.env.events.send(SlotEvent::Lists {
            slot: self.clone(),
            said,
        });
    }

    /// Keep the control connection up: start, list, serve events, and restart with
    /// exponential backoff after a failure, until the slot is stopped or the gateway shuts
    /// down.
    pub async fn supervise(self: Arc<Slot>) {
        let timing = self.env.timing.borrow().clone();
        let initial = Duration::from_millis(timing.restart_initial_ms);
        let max = Duration::from_millis(timing.restart_max_ms);
        let shutdown = self.env.shutdown.clone();
        let mut backoff = initial;
        loop {
            if shutdown.is_cancelled() || self.is_stopped() {
                return;
            }
            {
                let mut st = self.state.lock();
                st.status = Some(Status::Starting);
                self.publish(&st);
            }
            let started = Instant::now();
            match self.open_control().await {
                Ok((conn, lists, pump_task)) => {
                    tracing::info!(upstream = %self.spec.id, tools = lists.tools.len(), prompts = lists.prompts.len(), resources = lists.resources.len(), "upstream connected");
                    let stale = {
                        let mut st = self.state.lock();
                        st.status = Some(Status::Up);
                        st.init = Some(conn.init_result().clone());
                        st.lists = Some(lists);
                        st.control = Some(conn.clone());
                        self.publish(&st);
                        st.stale.take()
                    };
                    if let Some(said) = stale {
                        tokio::spawn(self.clone().refresh_lists(said));
                    }
                    // A 2026-07-28 upstream tells about list changes on a listen stream.
                    conn.listen();
                    let watched: Vec<String> = std::mem::take(&mut self.state.lock().watched)
                        .into_iter()
                        .collect();
                    for uri in watched {
                        self.watch_resource(&uri);
                    }
                    self.changed(None);
                    self.attempted.notify_waiters();
                    tokio::select! {
                        _ = conn.closed() => {}
                        _ = shutdown.cancelled() => {
                            conn.shutdown().await;
                            pump_task.abort();
                            return;
                        }
                        _ = self.stopped() => {
                            {
                                let mut st = self.state.lock();
                                st.control = None;
                                self.publish(&st);
                            }
                            conn.shutdown().await;
                            pump_task.abort();
                            return;
                        }
                    }
                    pump_task.abort();
                    if shutdown.is_cancelled() {
                        // Closed by the gateway's own shutdown: no restart, nothing to report.
                        conn.shutdown().await;
                        return;
                    }
                    let reason = conn
                        .close_reason()
                        .unwrap_or_else(|| "the connection closed".into());
                    tracing::warn!(upstream = %self.spec.id, "upstream down: {reason}; restarting in {} ms", backoff.as_millis());
                    {
                        let mut st = self.state.lock();
                        st.status = Some(Status::Down(reason));
                        st.control = None;
                        st.lists = None;
                        st.init = None;
                        st.restarts += 1;
                        self.publish(&st);
                    }
                    conn.shutdown().await;
                    self.changed(None);
                    if started.elapsed() > Duration::from_secs(30) {
                        backoff = initial;
                    }
                }
                Err(why) => {
                    tracing::warn!(upstream = %self.spec.id, "upstream failed to start: {why}; retrying in {} ms", backoff.as_millis());
                    {
                        let mut st = self.state.lock();
                        st.status = Some(Status::Down(why.to_string()));
                        st.restarts += 1;
                        self.publish(&st);
                    }
                    self.changed(None);
                    self.attempted.notify_waiters();
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.retry.notified() => backoff = initial / 2,
                _ = shutdown.cancelled() => return,
                _ = self.stopped() => return,
            }
            backoff = (backoff * 2).min(max);
        }
    }

    /// The identity a per-user upstream's lists are read with: the shared login when one is
    /// held (`sluice upstream login`), else the grant of a user who connected, so every
    /// principal can find its tools before connecting their own account.
    async fn lister(&self, users: &PerUser) -> Option<Arc<sluice_oauth::Identity>> {
        let shared = self.identity().cloned();
        if let Some(s) = &shared {
            if s.ready().await.is_ok() {
                return shared;
            }
        }
        match users.principals().await {
            Ok(held) => match held.first() {
                Some((principal, _)) => Some(users.identity(principal)),
                None => shared,
            },
            Err(e) => {
                tracing::warn!(upstream = %self.spec.id, "reading the connected users failed: {e}");
                shared
            }
        }
    }

    /// Open the control connection and read its lists.
    async fn open_control(
        self: &Arc<Slot>,
    ) -> Result<(Connection, UpstreamLists, tokio::task::JoinHandle<()>), StartError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let skills = json!({ sluice_skills::EXTENSION: {} });
        let caps = if self.per_session() {
            json!({"extensions": skills})
        } else {
            json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {},
                   "extensions": skills})
        };
        let identity = match &self.per_user {
            Some(users) => self.lister(users).await,
            None => self.identity().cloned(),
        };
        // An exchange upstream has no identity: its lists are read with the gateway's own
        // token when it has client credentials at the token endpoint, else with none.
        let bearer = match &self.exchanger {
            Some(x) if x.has_own_credentials() => {
                Some(x.own_token().await.map_err(StartError::OwnToken)?)
            }
            _ => None,
        };
        let opts = OpenOptions {
            client_info: client_info(),
            capabilities: caps,
            protocol_version: sluice_core::version::LATEST_LEGACY.into(),
            connect_timeout: Duration::from_millis(self.env.timing.borrow().connect_timeout_ms),
            label: self.spec.id.clone(),
            stderr: self.stderr.clone(),
            identity,
            bearer: bearer.clone(),
        };
        if let Err(why) = &self.identity {
            return Err(StartError::Identity(why.clone()));
        }
        let conn = Connection::open(&self.spec, opts, tx).await.map_err(|e| {
            match (&self.exchanger, &bearer, e.http_status()) {
                (Some(_), None, Some(401)) => StartError::NoOwnToken(e),
                _ => StartError::Connect(e),
            }
        })?;
        // The pump resolves replies, so it runs before the first call.
        let pump_task = tokio::spawn(self.pump(conn.clone(), None, rx));
        let caps = conn
            .init_result()
            .get("capabilities")
            .cloned()
            .unwrap_or(Value::Null);
        match fetch_lists(&conn, &caps, self.timeout()).await {
            Ok(lists) => Ok((conn, lists, pump_task)),
            Err(e) => {
                conn.shutdown().await;
                pump_task.abort();
                Err(StartError::Listing(e))
            }
        }
    }
}

/// Why a slot's control connection did not come up (its text is the slot's
/// [`Status::Down`] reason).
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// Its OAuth identity could not be made.
    #[error("{0}")]
    Identity(#[source] Arc<IdentityError>),
    /// The connection could not be opened.
    #[error("{0}")]
    Connect(#[source] UpstreamError),
    /// Its lists could not be read.
    #[error("listing failed: {0}")]
    Listing(#[source] ListError),
    /// An exchange upstream's lists: the gateway's own token could not be had.
    #[error("the gateway's own token, to list its tools with, could not be had: {0}")]
    OwnToken(#[source] sluice_oauth::AuthError),
    /// An exchange upstream asks for a token to list its tools, and the gateway has none.
    #[error("{0}: it acts as each user through token exchange and asks for a token before it lists its tools; Sluice lists them with a token of its own only when its oauth has client_id with client_secret or private_key_file (the client credentials grant at token_endpoint)")]
    NoOwnToken(#[source] UpstreamError),
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}
