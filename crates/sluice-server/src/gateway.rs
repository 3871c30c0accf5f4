//! The running gateway: its upstream slots, the merged catalog, the client sessions, the map of
//! forwarded calls, and the routing of everything upstreams start back to the right client.

use crate::audit::Audit;
use crate::catalog::{Catalog, ListKind};
use crate::session::{id_key, Outbound, PendingServerRequest, Session};
use crate::state::Snapshot;
use crate::upstreams::{supervise, Slot, Status};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_auth::{Authenticator, Policy};
use sluice_config::{Config, Settings, Transport, UpstreamSpec};
use sluice_core::{Kind, Message, RpcError};
use sluice_hooks::Chain;
use sluice_upstream::{Connection, Incoming};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// What travels toward a client on a request's own channel.
#[derive(Debug)]
pub enum Out {
    /// A message (related messages, then the reply).
    Msg(Message),
    /// The upstream opened an SSE reply stream (mirror it; prime with this retry, ms).
    Open(Option<u64>),
    /// The upstream paused the reply stream (SSE polling): end the client's stream with this
    /// retry hint (ms); the client resumes with `Last-Event-ID`.
    Pause(Option<u64>),
}

/// Where messages related to one client request go (its SSE stream, or stdout).
pub type Sink = mpsc::UnboundedSender<Out>;

/// Send a message on a sink; hand it back if the sink is closed.
pub fn send_msg(sink: &Sink, msg: Message) -> Result<(), Message> {
    sink.send(Out::Msg(msg)).map_err(|e| match e.0 {
        Out::Msg(m) => m,
        _ => unreachable!("sent a message"),
    })
}

/// A forwarded call, found again by the id it carries upstream.
pub struct CallRoute {
    /// The session that made it.
    pub session: Arc<Session>,
    /// The client's own progress token, if it asked for progress.
    pub progress_token: Option<Value>,
    /// Where related messages go.
    pub sink: Sink,
}

/// The running gateway.
pub struct Gateway {
    /// What is in force, swapped whole by a reload or a catalog rebuild.
    snapshot: ArcSwap<Snapshot>,
    /// Serialises the swaps (a rebuild loads, builds and stores under it).
    swapping: Mutex<()>,
    /// Serialises reloads.
    reloading: tokio::sync::Mutex<()>,
    catalog_version: AtomicU64,
    /// Client sessions by id.
    pub sessions: Mutex<HashMap<String, Arc<Session>>>,
    calls: Mutex<HashMap<(u64, u64), CallRoute>>,
    me: std::sync::Weak<Gateway>,
    traffic: tokio::sync::broadcast::Sender<Arc<Value>>,
    shutting_down: AtomicBool,
    shutdown: Notify,
    /// Results of live reloads of the tree (for metrics and the admin page).
    pub reloads: ReloadStats,
    /// The trace exporter (None: tracing is off; `sluice.json` changes need a restart).
    telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    /// The address the MCP listener is bound to (the default resource URI names it).
    bound: Mutex<Option<String>>,
    /// Modern-era state: calls waiting for a client's input, `subscriptions/listen` streams.
    pub(crate) rounds: crate::modern::Rounds,
}

/// The settings in force, read through the snapshot that holds them.
pub struct SettingsRef(Arc<Snapshot>);

impl std::ops::Deref for SettingsRef {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        self.0.settings()
    }
}

/// How live reloads went.
#[derive(Debug, Default)]
pub struct ReloadStats {
    /// Edits applied.
    pub ok: AtomicU64,
    /// Invalid edits (the running configuration was kept).
    pub failed: AtomicU64,
    /// The errors of the last failed reload (cleared by a good one).
    pub last_error: Mutex<Option<String>>,
}

/// Which face made an edit live (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// The file watcher (an edit on disk, by hand or by the CLI).
    Watcher,
    /// The admin API.
    Admin,
    /// The MCP management tools.
    Management,
}

impl Gateway {
    /// Build the gateway from a configuration (nothing is started yet).
    pub fn new(mut config: Config) -> Arc<Gateway> {
        add_local_upstream(&mut config);
        let telemetry = crate::telemetry::Telemetry::start(&config.settings.telemetry);
        let listen = config.settings.listen.clone();
        let slots: Vec<Arc<Slot>> = config
            .expose
            .upstreams
            .iter()
            .map(|s| Arc::new(Slot::new(s.clone())))
            .collect();
        let snapshot = Snapshot {
            funnel_prefix: funnel_prefix_of(&config),
            chain: Arc::new(build_chain(&config)),
            audit: Arc::new(build_audit(&config)),
            auth: Authenticator::new(&config.auth, &listen),
            policy: Arc::new(Policy::new(&config.auth.rules)),
            slots: slots.into(),
            catalog: Arc::new(Catalog::default()),
            config: Arc::new(config),
        };
        Arc::new_cyclic(|me| Gateway {
            me: me.clone(),
            snapshot: ArcSwap::from_pointee(snapshot),
            swapping: Mutex::new(()),
            reloading: tokio::sync::Mutex::new(()),
            catalog_version: AtomicU64::new(0),
            sessions: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            traffic: tokio::sync::broadcast::channel(4096).0,
            shutting_down: AtomicBool::new(false),
            shutdown: Notify::new(),
            reloads: ReloadStats::default(),
            telemetry,
            bound: Mutex::new(None),
            rounds: crate::modern::Rounds::default(),
        })
    }

    /// What is in force now: load it once per request and pass it down.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// The server settings in force.
    pub fn settings(&self) -> SettingsRef {
        SettingsRef(self.snapshot())
    }

    /// The authentication layer of the HTTP listener, when authentication is on.
    pub fn authenticator(&self) -> Option<Arc<Authenticator>> {
        self.snapshot.load().auth.clone()
    }

    /// The access rules.
    pub fn policy(&self) -> Arc<Policy> {
        self.snapshot.load().policy.clone()
    }

    /// The MCP listener is bound to `addr` (the default resource URI, `http://<addr>/mcp`,
    /// names the real port when the configuration said port 0).
    pub fn set_bound_address(&self, addr: &str) {
        *self.bound.lock() = Some(addr.to_string());
        let _swap = self.swapping.lock();
        let now = self.snapshot();
        let auth = Authenticator::new(&now.config.auth, addr);
        self.snapshot.store(Arc::new(now.with_auth(auth)));
    }

    /// Can the running listener take this configuration? One bound to a non-loopback address
    /// must keep authentication on.
    pub fn acceptable(&self, new: &Config) -> Result<(), sluice_config::ConfigErrors> {
        let exposed = self
            .listen_address()
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| !a.ip().is_loopback());
        if exposed && !new.auth.enabled && self.authenticator().is_some() {
            return Err(sluice_config::ConfigErrors(vec![sluice_config::ConfigError::new(
                &new.home.join("auth").join("auth.config.json"),
                "enabled",
                format!(
                    "the MCP listener is bound to the non-loopback address {}: authentication cannot be turned off while it runs",
                    self.listen_address()
                ),
            )]));
        }
        Ok(())
    }

    fn listen_address(&self) -> String {
        self.bound
            .lock()
            .clone()
            .unwrap_or_else(|| self.settings().listen.clone())
    }

    /// Start every enabled upstream and wait (at most the connect timeout) until each has made
    /// its first attempt.
    pub async fn start(self: &Arc<Gateway>) {
        let slots = self.slots();
        self.start_slots(&slots).await;
        // With no upstream coming up, the catalog (meta-tools, down routes) is built here.
        self.rebuild_catalog();
        let gw = self.clone();
        tokio::spawn(async move { gw.reap_idle_sessions().await });
    }

    /// Start the given slots' supervisors and wait (bounded) for their first attempts.
    async fn start_slots(self: &Arc<Gateway>, slots: &[Arc<Slot>]) {
        let mut waits = Vec::new();
        for slot in slots {
            if !slot.spec.enabled {
                continue;
            }
            let attempted = slot.attempted.notified();
            waits.push(async move {
                let _ = tokio::time::timeout(
                    Duration::from_millis(self.settings().connect_timeout_ms + 1000),
                    attempted,
                )
                .await;
            });
            tokio::spawn(supervise(self.clone(), slot.clone()));
        }
        futures_util::future::join_all(waits).await;
    }

    /// The slots now.
    pub fn slots(&self) -> Arc<[Arc<Slot>]> {
        self.snapshot.load().slots.clone()
    }

    /// The configuration now.
    pub fn config(&self) -> Arc<Config> {
        self.snapshot.load().config.clone()
    }

    /// The audit log now.
    pub fn audit(&self) -> Arc<Audit> {
        self.snapshot.load().audit.clone()
    }

    /// Is anyone recording exchanges (the audit log, or a live traffic subscriber)?
    pub fn observed(&self) -> bool {
        self.snapshot.load().audit.enabled() || self.traffic.receiver_count() > 0
    }

    /// Subscribe to the live traffic: one event per recorded exchange (the audit line's shape).
    pub fn traffic(&self) -> tokio::sync::broadcast::Receiver<Arc<Value>> {
        self.traffic.subscribe()
    }

    /// Record one exchange: to the audit log and to live traffic subscribers.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        session: &Session,
        method: &str,
        tool: Option<&str>,
        upstream: Option<&str>,
        started: std::time::Instant,
        outcome: &str,
        error: Option<String>,
        trace: &sluice_hooks::Trace,
    ) {
        let audit = self.audit();
        let watchers = self.traffic.receiver_count() > 0;
        if !audit.enabled() && !watchers {
            return;
        }
        let event = crate::audit::event(
            session, method, tool, upstream, started, outcome, error, trace,
        );
        audit.write(&event);
        if watchers {
            let _ = self.traffic.send(Arc::new(event));
        }
    }

    /// The trace exporter, when tracing is on.
    pub fn telemetry(&self) -> Option<&Arc<crate::telemetry::Telemetry>> {
        self.telemetry.as_ref()
    }

    /// The hook chain.
    pub fn chain(&self) -> Arc<Chain> {
        self.snapshot.load().chain.clone()
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.snapshot.load().catalog.clone()
    }

    /// Rebuild the catalog from the slots' lists and tell every session what changed.
    pub fn rebuild_catalog(&self) -> Vec<&'static str> {
        let (old, new) = {
            let _swap = self.swapping.lock();
            let now = self.snapshot();
            let catalog = self.build_catalog(&now.config, &now.slots, now.funnel_prefix.as_deref());
            let next = Arc::new(now.with_catalog(catalog));
            self.snapshot.store(next.clone());
            (now.catalog.clone(), next.catalog.clone())
        };
        let changed = changed_lists(&old, &new);
        self.announce(&changed);
        changed
    }

    /// A catalog over `slots`' current lists (and the drift check of curated tools).
    fn build_catalog(
        &self,
        config: &Config,
        slots: &Arc<[Arc<Slot>]>,
        funnel_prefix: Option<&str>,
    ) -> Catalog {
        let states: Vec<_> = slots.iter().map(|s| s.state.lock().lists.clone()).collect();
        let pairs: Vec<_> = slots
            .iter()
            .zip(states.iter())
            .map(|(s, l)| (&s.spec, l.as_ref()))
            .collect();
        let version = self.catalog_version.fetch_add(1, Ordering::Relaxed) + 1;
        let settings = &config.settings;
        let (mut catalog, warnings) = Catalog::build(
            version,
            &pairs,
            &config.expose.expose,
            funnel_prefix,
            settings
                .management_tools
                .then_some(settings.funnel_prefix.as_str()),
        );
        catalog.slots = slots.to_vec();
        self.check_drift(config, slots, &states);
        for w in warnings {
            tracing::warn!("{w}");
        }
        catalog
    }

    /// Tell every session that these lists changed (`notifications/…/list_changed`).
    fn announce(&self, changed: &[&'static str]) {
        if changed.is_empty() {
            return;
        }
        for m in changed {
            self.rounds.announce(m);
        }
        let sessions: Vec<_> = self.sessions.lock().values().cloned().collect();
        let hooked = !self.chain().is_empty();
        for s in sessions {
            for m in changed {
                let msg = Message::notification(m, None);
                if hooked {
                    // Response hooks see gateway notifications too; run them beside.
                    let chain_gw = self.me.upgrade();
                    let s = s.clone();
                    if let Some(gw) = chain_gw {
                        tokio::spawn(async move {
                            if let Ok(msg) = crate::pipeline::to_client(&gw, &s, msg, None).await {
                                s.send_unrelated(msg);
                            }
                        });
                    }
                } else {
                    s.send_unrelated(msg);
                }
            }
        }
    }

    /// Record the fingerprints of curated tools and flag the ones whose upstream changed them
    /// since they were accepted (`mcp/drift.json`). Writes only when something changed.
    fn check_drift(
        &self,
        config: &Config,
        slots: &[Arc<Slot>],
        lists: &[Option<crate::catalog::UpstreamLists>],
    ) {
        if config.expose.expose.is_empty() || !config.home.join("mcp").is_dir() {
            return;
        }
        let mut marks = sluice_config::drift::load(&config.home);
        let mut changed = false;
        for e in config.expose.expose.iter().filter(|e| e.enabled) {
            let Some(pos) = slots.iter().position(|s| s.spec.id == e.upstream) else {
                continue;
            };
            let Some(tool) = lists[pos].as_ref().and_then(|l| {
                l.tools
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(e.tool.as_str()))
            }) else {
                continue;
            };
            let now = sluice_config::drift::fingerprint(tool);
            match marks.get_mut(&e.name) {
                None => {
                    marks.insert(
                        e.name.clone(),
                        sluice_config::drift::Mark {
                            accepted: now.clone(),
                            current: now,
                        },
                    );
                    changed = true;
                }
                Some(m) if m.current != now => {
                    m.current = now;
                    changed = true;
                    if m.drifted() {
                        tracing::warn!(tool = %e.name, upstream = %e.upstream, "drift: the upstream changed this curated tool's description or schema; review it and run `sluice tool accept {}`", e.name);
                    }
                }
                Some(_) => {}
            }
        }
        if changed {
            if let Err(err) = sluice_config::drift::save(&config.home, &marks) {
                tracing::warn!(
                    "cannot write {}: {err}",
                    sluice_config::drift::path(&config.home).display()
                );
            }
        }
    }

    /// Register a new session.
    pub fn add_session(&self, session: Arc<Session>) {
        self.sessions.lock().insert(session.id.clone(), session);
    }

    /// Find a live session.
    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.lock().get(id).cloned()
    }

    /// End a session: forget it and close its own upstream connections.
    pub async fn end_session(&self, id: &str) -> bool {
        let Some(session) = self.sessions.lock().remove(id) else {
            return false;
        };
        if !session.mark_closed() {
            return true;
        }
        if let Outbound::Http(buf) = &session.outbound {
            buf.finish();
        }
        let conns: Vec<Connection> = session.conns.lock().await.drain().map(|(_, c)| c).collect();
        for c in conns {
            c.shutdown().await;
        }
        self.calls
            .lock()
            .retain(|_, r| !Arc::ptr_eq(&r.session, &session));
        tracing::info!(session = %id, "session ended");
        if !self.chain().is_empty() {
            let chain = self.chain();
            let sid = id.to_string();
            tokio::spawn(async move { chain.stop(&sid).await });
        }
        true
    }

    async fn reap_idle_sessions(self: Arc<Gateway>) {
        loop {
            let idle = self.settings().session_idle_secs;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(30.min(idle.max(1)))) => {}
                _ = self.shutdown_signal() => return,
            }
            let stale: Vec<String> = self
                .sessions
                .lock()
                .values()
                .filter(|s| s.idle_secs() >= idle && s.inflight.lock().is_empty())
                .map(|s| s.id.clone())
                .collect();
            for id in stale {
                tracing::info!(session = %id, "ending idle session");
                self.end_session(&id).await;
            }
        }
    }

    /// Record a forwarded call so related upstream messages find their way back.
    pub fn track_call(&self, conn: &Connection, upstream_id: u64, route: CallRoute) {
        self.calls
            .lock()
            .insert((conn.serial(), upstream_id), route);
    }

    /// Forget a forwarded call.
    pub fn untrack_call(&self, conn: &Connection, upstream_id: u64) {
        self.calls.lock().remove(&(conn.serial(), upstream_id));
    }

    /// Begin shutting down: supervisors stop, connections close.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.shutdown.notify_waiters();
        let ids: Vec<String> = self.sessions.lock().keys().cloned().collect();
        for id in ids {
            self.end_session(&id).await;
        }
        let controls: Vec<Connection> = self
            .slots()
            .iter()
            .filter_map(|s| s.state.lock().control.take())
            .collect();
        for c in controls {
            c.shutdown().await;
        }
        self.chain().shutdown().await;
        if let Some(t) = &self.telemetry {
            t.flush(Duration::from_secs(2)).await;
        }
    }

    /// Is the gateway shutting down?
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Resolves when shutdown begins.
    pub async fn shutdown_signal(&self) {
        let n = self.shutdown.notified();
        if self.is_shutting_down() {
            return;
        }
        n.await
    }

    /// The `initialize` result this gateway answers with. A single transparent upstream that
    /// is up lends its serverInfo, capabilities and instructions (so `--passthrough` is
    /// invisible); otherwise Sluice describes itself.
    pub fn initialize_result(&self, version: &str) -> Value {
        let slots = self.slots();
        if let [slot] = &*slots {
            if slot.spec.transparent {
                if let Some(init) = slot.state.lock().init.clone() {
                    let mut r = init;
                    if let Some(o) = r.as_object_mut() {
                        o.insert("protocolVersion".into(), json!(version));
                    }
                    return r;
                }
            }
        }
        json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "prompts": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "logging": {},
                "completions": {},
            },
            "serverInfo": {"name": "sluice", "title": "Sluice MCP gateway", "version": env!("CARGO_PKG_VERSION")},
            "instructions": self.instructions(),
        })
    }

    fn instructions(&self) -> String {
        let mut parts = vec!["Sluice gateway. Tools are named <upstream>_<tool>.".to_string()];
        for slot in self.slots().iter() {
            if let Some(i) = slot
                .state
                .lock()
                .init
                .as_ref()
                .and_then(|i| i.get("instructions"))
                .and_then(Value::as_str)
            {
                parts.push(format!("[{}] {i}", slot.spec.id));
            }
        }
        parts.join("\n")
    }

    /// Route a message an upstream started to the right client (or answer it here).
    pub async fn on_upstream_message(
        self: &Arc<Gateway>,
        slot: &Arc<Slot>,
        conn: &Connection,
        owner: Option<Arc<Session>>,
        inc: Incoming,
    ) {
        let Incoming { mut msg, related } = inc;
        let method = msg.method().unwrap_or("").to_string();
        // The call this message belongs to: the request whose stream carried it, or for
        // progress its token (which is the upstream id Sluice gave the call).
        let route_key = match (related, method.as_str()) {
            (_, "notifications/progress") => msg
                .params()
                .and_then(|p| p.get("progressToken"))
                .and_then(Value::as_u64)
                .or(related),
            (Some(r), _) => Some(r),
            _ => None,
        };
        let route = route_key.and_then(|k| {
            self.calls
                .lock()
                .get(&(conn.serial(), k))
                .map(|r| (r.session.clone(), r.progress_token.clone(), r.sink.clone()))
        });

        if msg.kind() == Kind::Notification {
            match method.as_str() {
                "notifications/tools/list_changed"
                | "notifications/prompts/list_changed"
                | "notifications/resources/list_changed" => {
                    let said: &'static str = match method.as_str() {
                        "notifications/tools/list_changed" => "notifications/tools/list_changed",
                        "notifications/prompts/list_changed" => {
                            "notifications/prompts/list_changed"
                        }
                        _ => "notifications/resources/list_changed",
                    };
                    // Re-listing calls this same connection, whose replies the caller of this
                    // function delivers: do it beside, not here.
                    let gw = self.clone();
                    let slot = slot.clone();
                    tokio::spawn(async move { gw.refresh_lists(&slot, said).await });
                    return;
                }
                "notifications/subscriptions/acknowledged" => {
                    // A 2026-07-28 upstream accepted one of Sluice's own listen streams.
                    tracing::debug!(upstream = %slot.spec.id, "listen stream acknowledged: {}", msg.to_json());
                    return;
                }
                "notifications/progress" => {
                    let Some((session, token, sink)) = route else {
                        tracing::debug!(upstream = %slot.spec.id, "progress for no known call");
                        return;
                    };
                    let Some(token) = token else { return };
                    msg.params_mut().insert("progressToken".into(), token);
                    self.deliver(&session, Some(&sink), msg, &slot.spec.id)
                        .await;
                    return;
                }
                "notifications/cancelled" => {
                    // The upstream withdrew a request it sent to a client.
                    let up_id = msg.params().and_then(|p| p.get("requestId")).cloned();
                    let sessions: Vec<_> = self.sessions.lock().values().cloned().collect();
                    for s in sessions {
                        let found = s
                            .server_requests
                            .lock()
                            .iter()
                            .find(|(_, p)| {
                                p.conn.serial() == conn.serial()
                                    && Some(&p.upstream_id) == up_id.as_ref()
                            })
                            .map(|(k, _)| k.clone());
                        if let Some(k) = found {
                            s.server_requests.lock().remove(&k);
                            msg.params_mut().insert("requestId".into(), json!(k));
                            self.deliver(&s, None, msg.clone(), &slot.spec.id).await;
                        }
                    }
                    return;
                }
                "notifications/resources/updated" => {
                    let uri = msg.param_str("uri").unwrap_or("").to_string();
                    self.rounds.resource_updated(&uri);
                    let targets: Vec<_> = match &owner {
                        Some(s) => vec![s.clone()],
                        None => self.sessions.lock().values().cloned().collect(),
                    };
                    for s in targets {
                        let subscribed = s.subscriptions.lock().contains(&uri);
                        if subscribed {
                            self.deliver(&s, None, msg.clone(), &slot.spec.id).await;
                        }
                    }
                    return;
                }
                _ => {}
            }
            // Logging and any other notification: to the call it belongs to, else the owning
            // session, else (a shared process) the latest call in flight on the connection,
            // else every session (a shared upstream speaks to all).
            let route = route.or_else(|| {
                owner
                    .is_none()
                    .then(|| self.latest_call_on(conn))
                    .flatten()
                    .map(|(s, sink)| (s, None, sink))
            });
            if let Some((session, _, sink)) = route {
                self.deliver(&session, Some(&sink), msg, &slot.spec.id)
                    .await;
            } else if let Some(s) = owner {
                self.deliver(&s, None, msg, &slot.spec.id).await;
            } else {
                let sessions: Vec<_> = self.sessions.lock().values().cloned().collect();
                for s in sessions {
                    self.deliver(&s, None, msg.clone(), &slot.spec.id).await;
                }
            }
            return;
        }

        // A request from the upstream.
        let up_id = msg.id().cloned().unwrap_or(Value::Null);
        let up_id_copy = up_id.clone();
        if method == "ping" {
            let _ = conn.send(&Message::response(up_id, json!({})));
            return;
        }
        // Which client: the one whose call caused it, else the session owning the connection,
        // else (a shared process) the client with the most recent call in flight on it.
        let target = route
            .as_ref()
            .map(|(s, _, sink)| (s.clone(), Some(sink.clone())))
            .or_else(|| owner.clone().map(|s| (s, None)))
            .or_else(|| self.latest_call_on(conn).map(|(s, sink)| (s, Some(sink))));
        let Some((session, sink)) = target else {
            let err = RpcError::new(
                sluice_core::codes::METHOD_NOT_FOUND,
                format!("Sluice has no client session to forward {method} to"),
            );
            let _ = conn.send(&Message::error(up_id, &err));
            return;
        };
        if let Some(cap) = client_capability_for(&method) {
            if !session.has_capability(cap) {
                let err = RpcError::new(
                    sluice_core::codes::METHOD_NOT_FOUND,
                    format!("The client did not declare the {cap} capability; {method} is not available"),
                );
                let _ = conn.send(&Message::error(up_id, &err));
                // A modern client's call fails with MissingRequiredClientCapability (-32021);
                // its round cancels the call upstream.
                if let (true, Some(sink)) = (session.is_modern(), sink.as_ref()) {
                    let missing = RpcError::new(
                        sluice_core::codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        format!("Missing required client capability: {cap} (the upstream asked for {method})"),
                    )
                    .with_data(json!({"requiredCapabilities": {cap: {}}}));
                    let _ = send_msg(sink, Message::error(Value::Null, &missing));
                }
                return;
            }
        }
        let client_id = session.mint_request_id();
        session.server_requests.lock().insert(
            client_id.clone(),
            PendingServerRequest {
                conn: conn.clone(),
                upstream_id: up_id_copy,
            },
        );
        msg.set_id(json!(client_id.clone()));
        if !self
            .deliver(&session, sink.as_ref(), msg, &slot.spec.id)
            .await
        {
            // A response hook refused the request on its way to the client: the upstream
            // hears why.
            session.server_requests.lock().remove(&client_id);
            let err = RpcError::new(sluice_core::codes::RESPONSE_REJECTED, "Response rejected");
            let _ = conn.send(&Message::error(up_id, &err));
        }
    }

    /// Ask the client something on the gateway's own behalf (a 2026-07-28 upstream's input
    /// request, for a legacy client): the request goes to it like an upstream's would (on the
    /// call's stream, through the response hooks), and its reply comes back here.
    pub async fn ask_client(
        &self,
        session: &Arc<Session>,
        sink: &Sink,
        method: &str,
        params: Option<Value>,
        upstream: &str,
    ) -> Result<Value, RpcError> {
        let Some(cap) = client_capability_for(method) else {
            return Err(RpcError::internal(format!(
                "Upstream '{upstream}' asked for input with {method}, which clients do not answer"
            )));
        };
        if !session.has_capability(cap) {
            return Err(RpcError::new(
                sluice_core::codes::METHOD_NOT_FOUND,
                format!("Upstream '{upstream}' needs {method}, but the client did not declare the {cap} capability"),
            ));
        }
        let client_id = session.mint_request_id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        session.asked.lock().insert(client_id.clone(), tx);
        let msg = Message::request(json!(client_id.clone()), method, params);
        if !self.deliver(session, Some(sink), msg, upstream).await {
            session.asked.lock().remove(&client_id);
            return Err(RpcError::new(
                sluice_core::codes::RESPONSE_REJECTED,
                "Response rejected",
            ));
        }
        let wait = Duration::from_millis(self.settings().request_timeout_ms);
        let reply = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => reply,
            _ => {
                session.asked.lock().remove(&client_id);
                return Err(RpcError::new(
                    sluice_core::codes::REQUEST_TIMEOUT,
                    format!(
                        "The client did not answer {method} within {} ms",
                        wait.as_millis()
                    ),
                ));
            }
        };
        match (reply.result(), reply.error_obj()) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(RpcError::new(
                e.get("code")
                    .and_then(Value::as_i64)
                    .unwrap_or(sluice_core::codes::INTERNAL_ERROR),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the client refused")
                    .to_string(),
            )),
            _ => Err(RpcError::internal(
                "the client answered with neither a result nor an error",
            )),
        }
    }

    /// Send a message toward a client through the response hooks: on the call's own stream
    /// when there is one (else the session's), false when a hook refused it.
    pub async fn deliver(
        &self,
        session: &Arc<Session>,
        sink: Option<&Sink>,
        msg: Message,
        upstream: &str,
    ) -> bool {
        let msg = match crate::pipeline::to_client(self, session, msg, Some(upstream)).await {
            Ok(m) => m,
            Err(_) => return false,
        };
        match sink {
            Some(sink) => {
                if let Err(msg) = send_msg(sink, msg) {
                    session.send_unrelated(msg);
                }
            }
            None => session.send_unrelated(msg),
        }
        true
    }

    /// An upstream reply stream opened or paused: tell the client's side of that call.
    pub fn on_upstream_stream(
        &self,
        conn: &Connection,
        related: u64,
        paused: bool,
        retry: Option<Duration>,
    ) {
        let sink = self
            .calls
            .lock()
            .get(&(conn.serial(), related))
            .map(|r| r.sink.clone());
        if let Some(sink) = sink {
            let ms = retry.map(|r| r.as_millis() as u64);
            let _ = sink.send(if paused {
                Out::Pause(ms)
            } else {
                Out::Open(ms)
            });
        }
    }

    /// The session and sink of the most recent call in flight on `conn` (for messages a shared
    /// stdio upstream sends without saying which call they belong to).
    fn latest_call_on(&self, conn: &Connection) -> Option<(Arc<Session>, Sink)> {
        self.calls
            .lock()
            .iter()
            .filter(|((serial, _), _)| *serial == conn.serial())
            .max_by_key(|((_, id), _)| *id)
            .map(|(_, r)| (r.session.clone(), r.sink.clone()))
    }

    /// Re-read a slot's lists after the upstream said they changed.
    /// Fetch an upstream's lists again after it said one changed (`said`), rebuild the
    /// catalog, and pass the upstream's word on to clients even when the merged lists look the
    /// same (it may have changed what an item does, not only which items there are).
    async fn refresh_lists(&self, slot: &Arc<Slot>, said: &'static str) {
        let control = slot.state.lock().control.clone();
        let Some(conn) = control else { return };
        let caps = conn
            .init_result()
            .get("capabilities")
            .cloned()
            .unwrap_or(Value::Null);
        match crate::upstreams::fetch_lists(&conn, &caps, slot.timeout(self)).await {
            Ok(lists) => {
                {
                    let mut st = slot.state.lock();
                    if st.status == Some(Status::Up) {
                        st.lists = Some(lists);
                    }
                }
                if !self.rebuild_catalog().contains(&said) {
                    self.announce(&[said]);
                }
            }
            Err(e) => tracing::warn!(upstream = %slot.spec.id, "refreshing lists failed: {e}"),
        }
    }

    /// Relay the client's reply to an upstream request back to the upstream, with the
    /// upstream's own id.
    pub fn relay_client_reply(&self, session: &Session, mut msg: Message) {
        let Some(id) = msg.id().and_then(Value::as_str).map(str::to_string) else {
            tracing::warn!(session = %session.id, "reply with an id Sluice never sent: {}", msg.to_json());
            return;
        };
        if let Some(waiter) = session.asked.lock().remove(&id) {
            let _ = waiter.send(msg);
            return;
        }
        let Some(pending) = session.server_requests.lock().remove(&id) else {
            tracing::warn!(session = %session.id, id, "reply to no pending request");
            return;
        };
        msg.set_id(pending.upstream_id);
        if let Err(e) = pending.conn.send(&msg) {
            tracing::warn!(session = %session.id, "relaying a reply upstream failed: {e}");
        }
    }

    /// The client cancelled one of its requests: tell the upstream (with its id) and stop
    /// waiting.
    pub fn cancel_client_request(
        &self,
        session: &Session,
        client_id: &Value,
        reason: Option<&Value>,
    ) {
        let call = session.inflight.lock().remove(&id_key(client_id));
        let Some(call) = call else { return };
        call.cancelled.store(true, Ordering::SeqCst);
        let mut params = json!({"requestId": call.upstream_id});
        if let Some(r) = reason {
            params["reason"] = r.clone();
        }
        let _ = call.conn.notify("notifications/cancelled", Some(params));
        call.conn.forget(call.upstream_id);
        self.untrack_call(&call.conn, call.upstream_id);
    }
}

/// The first-party register, when the tree has one, is the `local` upstream.
fn add_local_upstream(config: &mut Config) {
    if config.register.present {
        let mut local = UpstreamSpec::stdio("local", "", Vec::new());
        local.transport = Transport::Local;
        local.cwd = Some(config.home.clone());
        local.transparent = config.settings.list_register_tools;
        local.description = "First-party tools (tools/tools.register.json)".into();
        config.expose.upstreams.push(local);
    }
}

/// The client capability a server-to-client request needs (sampling, elicitation, roots).
fn client_capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// The funnel's meta-tool prefix when the funnel is on (`funnel` in sluice.json, else on when
/// the tree has a register or a `tools/` folder).
fn funnel_prefix_of(config: &Config) -> Option<String> {
    config
        .settings
        .funnel
        .unwrap_or(config.register.present || config.home.join("tools").is_dir())
        .then(|| config.settings.funnel_prefix.clone())
}

fn build_chain(config: &Config) -> Chain {
    let (chain, warnings) = Chain::build(&config.hooks.hooks, &config.home);
    for w in warnings {
        tracing::warn!("{w}");
    }
    chain
}

fn build_audit(config: &Config) -> Audit {
    if config.logs.enabled {
        Audit::to_file(config.logs.path.clone())
    } else {
        Audit::off()
    }
}

/// What a reload changed.
#[derive(Debug, Default, PartialEq)]
pub struct ReloadReport {
    /// Upstreams kept running as they were.
    pub kept: Vec<String>,
    /// Upstreams started (new or changed).
    pub started: Vec<String>,
    /// Upstreams stopped (removed or changed).
    pub stopped: Vec<String>,
    /// The hook chain was rebuilt.
    pub hooks: bool,
    /// The audit log was reopened.
    pub audit: bool,
    /// Authentication or access rules were rebuilt.
    pub auth: bool,
    /// Server settings (`sluice.json`) changed.
    pub settings: bool,
}

/// Which lists differ between two catalogs, as the notifications that say so.
fn changed_lists(old: &Catalog, new: &Catalog) -> Vec<&'static str> {
    let mut changed = Vec::new();
    for (kind, method) in [
        (ListKind::Tools, "notifications/tools/list_changed"),
        (ListKind::Prompts, "notifications/prompts/list_changed"),
        (ListKind::Resources, "notifications/resources/list_changed"),
    ] {
        let a = old.page(kind, None, usize::MAX).ok();
        let b = new.page(kind, None, usize::MAX).ok();
        let templates_changed = kind == ListKind::Resources
            && old.page(ListKind::Templates, None, usize::MAX).ok()
                != new.page(ListKind::Templates, None, usize::MAX).ok();
        if a != b || templates_changed {
            changed.push(method);
        }
    }
    changed
}

impl Gateway {
    /// Apply a new configuration: rebuild only what changed, and swap it in whole. An upstream
    /// whose spec is the same keeps its slot (its process and its sessions' connections); a
    /// changed one is replaced; a removed one is stopped. Calls in flight finish on the
    /// snapshot they started with.
    pub async fn reload(self: &Arc<Gateway>, mut new: Config) -> ReloadReport {
        let _guard = self.reloading.lock().await;
        add_local_upstream(&mut new);
        let now = self.snapshot();
        let old = now.config.clone();
        let mut report = ReloadReport::default();
        if new.settings != old.settings {
            let running = &old.settings;
            let mut restart_only = Vec::new();
            if new.settings.listen != running.listen {
                restart_only.push("listen");
            }
            if new.settings.admin != running.admin {
                restart_only.push("admin");
            }
            if new.settings.admin_token != running.admin_token {
                restart_only.push("admin_token");
            }
            if new.settings.telemetry != running.telemetry {
                restart_only.push("telemetry");
            }
            if !restart_only.is_empty() {
                tracing::warn!(
                    "sluice.json: {} apply at the next restart; every other setting applies now",
                    restart_only.join(", ")
                );
            }
            // The listener, the admin listener and the exporter keep what they started with.
            new.settings.listen = running.listen.clone();
            new.settings.admin = running.admin.clone();
            new.settings.admin_token = running.admin_token.clone();
            new.settings.telemetry = running.telemetry.clone();
            report.settings = new.settings != old.settings;
        }
        let mut next: Vec<Arc<Slot>> = Vec::new();
        let mut fresh: Vec<Arc<Slot>> = Vec::new();
        for spec in &new.expose.upstreams {
            match now.slots.iter().find(|s| s.spec == *spec) {
                Some(s) => {
                    report.kept.push(spec.id.clone());
                    next.push(s.clone());
                }
                None => {
                    report.started.push(spec.id.clone());
                    let s = Arc::new(Slot::new(spec.clone()));
                    fresh.push(s.clone());
                    next.push(s);
                }
            }
        }
        let gone: Vec<Arc<Slot>> = now
            .slots
            .iter()
            .filter(|s| !next.iter().any(|n| Arc::ptr_eq(n, s)))
            .cloned()
            .collect();
        let chain = if new.hooks != old.hooks {
            report.hooks = true;
            Arc::new(build_chain(&new))
        } else {
            now.chain.clone()
        };
        let audit = if new.logs != old.logs {
            report.audit = true;
            Arc::new(build_audit(&new))
        } else {
            now.audit.clone()
        };
        let rules_changed = new.auth.rules != old.auth.rules;
        let (auth, policy) = if new.auth != old.auth {
            report.auth = true;
            (
                Authenticator::new(&new.auth, &self.listen_address()),
                Arc::new(Policy::new(&new.auth.rules)),
            )
        } else {
            (now.auth.clone(), now.policy.clone())
        };
        let slots: Arc<[Arc<Slot>]> = next.into();
        let funnel_prefix = funnel_prefix_of(&new);
        let config = Arc::new(new);
        // One swap: every part of the new configuration comes into force together.
        let old_catalog = {
            let _swap = self.swapping.lock();
            let catalog = self.build_catalog(&config, &slots, funnel_prefix.as_deref());
            let before = self.snapshot();
            self.snapshot.store(Arc::new(Snapshot {
                config,
                slots,
                catalog: Arc::new(catalog),
                chain,
                policy,
                auth,
                audit,
                funnel_prefix,
            }));
            before.catalog.clone()
        };
        if report.hooks {
            let old_chain = now.chain.clone();
            tokio::spawn(async move { old_chain.shutdown().await });
        }
        for s in &gone {
            report.stopped.push(s.spec.id.clone());
            s.stop();
        }
        // Sessions' own connections to stopped upstreams close too.
        let sessions: Vec<_> = self.sessions.lock().values().cloned().collect();
        for session in sessions {
            let mut conns = session.conns.lock().await;
            for s in &gone {
                if let Some(c) = conns.remove(&s.serial) {
                    tokio::spawn(async move { c.shutdown().await });
                }
            }
        }
        let mut changed = changed_lists(&old_catalog, &self.catalog());
        if rules_changed {
            // What each caller may see changed: every list may look different to someone.
            changed = vec![
                "notifications/tools/list_changed",
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed",
            ];
        }
        self.announce(&changed);
        self.start_slots(&fresh).await;
        // Started slots rebuild the catalog when they come up; this covers none starting.
        self.rebuild_catalog();
        tracing::info!(kept = ?report.kept, started = ?report.started, stopped = ?report.stopped, hooks = report.hooks, audit = report.audit, auth = report.auth, "configuration reloaded");
        report
    }

    /// THE way an edit of the tree becomes live, for every face (the file watcher, which also
    /// carries the CLI's edits; the admin API; the MCP management tools): load and validate
    /// the tree, check that the running listener can take it ([`Gateway::acceptable`]), apply
    /// it by diff, and count the result in the reload statistics. An edit that fails any step
    /// changes nothing that is running; its errors are logged and returned.
    pub async fn apply_tree(
        self: &Arc<Gateway>,
        face: Face,
    ) -> Result<ReloadReport, sluice_config::ConfigErrors> {
        let home = self.config().home.clone();
        let env = |n: &str| std::env::var(n).ok();
        let loaded = Config::load(&home, &env).and_then(|(config, warnings)| {
            self.acceptable(&config)?;
            Ok((config, warnings))
        });
        match loaded {
            Ok((config, warnings)) => {
                for w in warnings {
                    tracing::warn!("{w}");
                }
                let report = self.reload(config).await;
                self.reloads.ok.fetch_add(1, Ordering::Relaxed);
                *self.reloads.last_error.lock() = None;
                Ok(report)
            }
            Err(errors) => {
                self.reloads.failed.fetch_add(1, Ordering::Relaxed);
                *self.reloads.last_error.lock() = Some(errors.to_string());
                tracing::error!(
                    ?face,
                    "the edited configuration cannot be applied; keeping the running one:\n{errors}"
                );
                Err(errors)
            }
        }
    }

    /// Watch the tree's files and apply them on change (polling every `every`).
    pub async fn watch(self: Arc<Gateway>, every: Duration) {
        let home = self.config().home.clone();
        let files = [
            "sluice.json",
            "mcp/expose.json",
            "hooks/hooks.manifest.json",
            "hooks/hooks.state.json",
            "logs/log.config.json",
            "tools/tools.register.json",
            "auth/auth.config.json",
        ];
        let stamp = || -> Vec<Option<(std::time::SystemTime, u64)>> {
            files
                .iter()
                .map(|f| {
                    std::fs::metadata(home.join(f))
                        .ok()
                        .and_then(|m| Some((m.modified().ok()?, m.len())))
                })
                .collect()
        };
        let mut last = stamp();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.shutdown_signal() => return,
            }
            let now = stamp();
            if now == last {
                continue;
            }
            last = now;
            let _ = self.apply_tree(Face::Watcher).await;
        }
    }
}
