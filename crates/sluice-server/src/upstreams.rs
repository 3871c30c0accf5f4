//! Upstream slots: one per configured upstream. A slot keeps the control connection (shared by
//! every client for stdio, used for lists by every transport), caches the upstream's lists,
//! restarts it with backoff when it fails, and opens per-session connections when the upstream
//! needs one per client (HTTP, or stdio with `"isolation": "session"`).

use crate::catalog::UpstreamLists;
use crate::gateway::Gateway;
use crate::session::Session;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_config::{Isolation, Transport, UpstreamSpec};
use sluice_core::{codes, RpcError};
use sluice_upstream::{Connection, Event, OpenOptions, StderrTail};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The health of an upstream.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Configured with `"enabled": false`.
    Disabled,
    /// Starting (first start or a restart).
    Starting,
    /// Connected and listed.
    Up,
    /// Not connected; the reason, and when the next attempt is due.
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
}

/// One configured upstream.
pub struct Slot {
    /// A number unique to this slot in the process (sessions key their own connections by
    /// it; a reload that keeps the upstream keeps the slot).
    pub serial: u64,
    stopped: std::sync::atomic::AtomicBool,
    stop: tokio::sync::Notify,
    /// The configuration.
    pub spec: UpstreamSpec,
    /// Live state.
    pub state: Mutex<SlotState>,
    /// Signalled after each start attempt (for start-up waiting).
    pub attempted: tokio::sync::Notify,
    /// The last stderr lines of its processes (stdio), across restarts.
    pub stderr: StderrTail,
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

/// The `clientInfo` Sluice sends upstream.
pub fn client_info() -> Value {
    json!({"name": "sluice", "title": "Sluice MCP gateway", "version": PKG_VERSION})
}

impl Slot {
    /// A new slot (not started).
    pub fn new(spec: UpstreamSpec) -> Slot {
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let status = if spec.enabled {
            Status::Starting
        } else {
            Status::Disabled
        };
        Slot {
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            stopped: std::sync::atomic::AtomicBool::new(false),
            stop: tokio::sync::Notify::new(),
            spec,
            state: Mutex::new(SlotState {
                status: Some(status),
                ..SlotState::default()
            }),
            attempted: tokio::sync::Notify::new(),
            stderr: StderrTail::default(),
        }
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
    /// control connection.
    pub fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop.notify_waiters();
    }

    /// Was the slot stopped?
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when the slot is stopped.
    async fn stopped(&self) {
        let n = self.stop.notified();
        if self.is_stopped() {
            return;
        }
        n.await
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
                let params = Some(serde_json::json!({"uri": uri}));
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
        self.state
            .lock()
            .control
            .as_ref()
            .is_some_and(Connection::is_modern)
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

    /// The request timeout for this upstream.
    pub fn timeout(&self, gw: &Gateway) -> Duration {
        Duration::from_millis(
            self.spec
                .timeout_ms
                .unwrap_or(gw.settings().request_timeout_ms),
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
        gw: &Arc<Gateway>,
        session: &Arc<Session>,
    ) -> Result<Connection, RpcError> {
        // A modern client's request is stateless, and a 2026-07-28 upstream has no sessions:
        // either way the upstream's control connection serves (no upstream session per client).
        // (A stdio upstream isolated per session keeps a process per legacy client even when it
        // speaks 2026-07-28: isolation is about its process state.)
        let modern_http = self.is_modern() && self.spec.transport != Transport::Stdio;
        if !self.per_session() || session.is_modern() || modern_http {
            let st = self.state.lock();
            return match (&st.status, &st.control) {
                (Some(Status::Up), Some(c)) if !c.is_closed() => Ok(c.clone()),
                _ => {
                    drop(st);
                    Err(self.unavailable())
                }
            };
        }
        if self.status() == Status::Disabled {
            return Err(self.unavailable());
        }
        let mut conns = session.conns.lock().await;
        if let Some(c) = conns.get(&self.serial) {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let opts = OpenOptions {
            client_info: client_info(),
            capabilities: session.client_capabilities.clone(),
            protocol_version: session.protocol_version.clone(),
            connect_timeout: Duration::from_millis(gw.settings().connect_timeout_ms),
            label: format!("{}#{}", self.spec.id, short(&session.id)),
            stderr: self.stderr.clone(),
        };
        let conn = Connection::open(&self.spec, opts, tx).await.map_err(|e| {
            RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("Upstream '{}' is unavailable: {e}", self.spec.id),
            )
            .with_data(json!({"upstream": self.spec.id}))
        })?;
        conns.insert(self.serial, conn.clone());
        drop(conns);
        tokio::spawn(pump(
            gw.clone(),
            self.clone(),
            conn.clone(),
            Some(Arc::downgrade(session)),
            rx,
        ));
        Ok(conn)
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// Deliver a connection's events to the gateway until it closes.
async fn pump(
    gw: Arc<Gateway>,
    slot: Arc<Slot>,
    conn: Connection,
    owner: Option<std::sync::Weak<Session>>,
    mut rx: mpsc::UnboundedReceiver<Event>,
) {
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Message(inc) => {
                let owner = owner.as_ref().and_then(|w| w.upgrade());
                gw.on_upstream_message(&slot, &conn, owner, inc).await;
                conn.event_done();
            }
            Event::Reply(msg) => {
                conn.resolve(msg);
                conn.event_done();
            }
            Event::Stream {
                related,
                paused,
                retry,
            } => {
                gw.on_upstream_stream(&conn, related, paused, retry);
                conn.event_done();
            }
            Event::Closed(_) => break,
        }
    }
}

/// Fetch every page of one list (bounded to 1000 pages).
async fn fetch_all(
    conn: &Connection,
    method: &str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let reply = conn
            .call(method, params, timeout)
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let Some(result) = reply.result() else {
            return Err(format!(
                "{method} failed: {}",
                reply.error_obj().cloned().unwrap_or(Value::Null)
            ));
        };
        if let Some(items) = result.get(key).and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// Fetch the lists the upstream's capabilities say it has.
pub async fn fetch_lists(
    conn: &Connection,
    caps: &Value,
    timeout: Duration,
) -> Result<UpstreamLists, String> {
    let mut lists = UpstreamLists::default();
    if caps.get("tools").is_some() {
        lists.tools = fetch_all(conn, "tools/list", "tools", timeout).await?;
    }
    if caps.get("prompts").is_some() {
        lists.prompts = fetch_all(conn, "prompts/list", "prompts", timeout).await?;
    }
    if caps.get("resources").is_some() {
        lists.resources = fetch_all(conn, "resources/list", "resources", timeout).await?;
        // Templates are optional even with the resources capability.
        lists.templates = fetch_all(
            conn,
            "resources/templates/list",
            "resourceTemplates",
            timeout,
        )
        .await
        .unwrap_or_default();
    }
    Ok(lists)
}

/// Keep the slot's control connection up: start, list, serve events, and restart with
/// exponential backoff after a failure, until the gateway shuts down.
pub async fn supervise(gw: Arc<Gateway>, slot: Arc<Slot>) {
    let initial = Duration::from_millis(gw.settings().restart_initial_ms);
    let max = Duration::from_millis(gw.settings().restart_max_ms);
    let mut backoff = initial;
    loop {
        if gw.is_shutting_down() || slot.is_stopped() {
            return;
        }
        slot.state.lock().status = Some(Status::Starting);
        let started = Instant::now();
        let (tx, rx) = mpsc::unbounded_channel();
        let caps = if slot.per_session() {
            json!({})
        } else {
            json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}})
        };
        let opts = OpenOptions {
            client_info: client_info(),
            capabilities: caps,
            protocol_version: sluice_core::version::LATEST_LEGACY.into(),
            connect_timeout: Duration::from_millis(gw.settings().connect_timeout_ms),
            label: slot.spec.id.clone(),
            stderr: slot.stderr.clone(),
        };
        let timeout = slot.timeout(&gw);
        let opened = match Connection::open(&slot.spec, opts, tx).await {
            Ok(conn) => {
                // The pump resolves replies, so it runs before the first call.
                let pump_task =
                    tokio::spawn(pump(gw.clone(), slot.clone(), conn.clone(), None, rx));
                let caps = conn
                    .init_result()
                    .get("capabilities")
                    .cloned()
                    .unwrap_or(Value::Null);
                match fetch_lists(&conn, &caps, timeout).await {
                    Ok(lists) => Ok((conn, lists, pump_task)),
                    Err(e) => {
                        conn.shutdown().await;
                        pump_task.abort();
                        Err(format!("listing failed: {e}"))
                    }
                }
            }
            Err(e) => Err(e.to_string()),
        };
        match opened {
            Ok((conn, lists, pump_task)) => {
                tracing::info!(upstream = %slot.spec.id, tools = lists.tools.len(), prompts = lists.prompts.len(), resources = lists.resources.len(), "upstream connected");
                {
                    let mut st = slot.state.lock();
                    st.status = Some(Status::Up);
                    st.init = Some(conn.init_result().clone());
                    st.lists = Some(lists);
                    st.control = Some(conn.clone());
                }
                // A 2026-07-28 upstream tells about list changes on a listen stream.
                conn.listen();
                let watched: Vec<String> = std::mem::take(&mut slot.state.lock().watched)
                    .into_iter()
                    .collect();
                for uri in watched {
                    slot.watch_resource(&uri);
                }
                gw.rebuild_catalog();
                slot.attempted.notify_waiters();
                tokio::select! {
                    _ = conn.closed() => {}
                    _ = gw.shutdown_signal() => {
                        conn.shutdown().await;
                        pump_task.abort();
                        return;
                    }
                    _ = slot.stopped() => {
                        slot.state.lock().control = None;
                        conn.shutdown().await;
                        pump_task.abort();
                        return;
                    }
                }
                pump_task.abort();
                let reason = conn
                    .close_reason()
                    .unwrap_or_else(|| "the connection closed".into());
                tracing::warn!(upstream = %slot.spec.id, "upstream down: {reason}; restarting in {} ms", backoff.as_millis());
                {
                    let mut st = slot.state.lock();
                    st.status = Some(Status::Down(reason));
                    st.control = None;
                    st.lists = None;
                    st.init = None;
                    st.restarts += 1;
                }
                conn.shutdown().await;
                gw.rebuild_catalog();
                if started.elapsed() > Duration::from_secs(30) {
                    backoff = initial;
                }
            }
            Err(reason) => {
                tracing::warn!(upstream = %slot.spec.id, "upstream failed to start: {reason}; retrying in {} ms", backoff.as_millis());
                {
                    let mut st = slot.state.lock();
                    st.status = Some(Status::Down(reason));
                    st.restarts += 1;
                }
                gw.rebuild_catalog();
                slot.attempted.notify_waiters();
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = gw.shutdown_signal() => return,
            _ = slot.stopped() => return,
        }
        backoff = (backoff * 2).min(max);
    }
}
