//! Protocol state: the process-wide [`Fixture`] (configuration, dynamic tools, last
//! cancellation), one [`Session`] per client connection (negotiated version, log level,
//! subscriptions, in-flight requests, requests sent to the client) and the per-request
//! [`Ctx`] handlers use to send related messages.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};

use crate::catalog;
use crate::protocol::{self, id_key, RpcError, LATEST_VERSION};

/// How long a request sent to the client may wait for its answer.
const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// MCP log levels, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Lock a mutex, ignoring poisoning (a panicking handler must not wedge the fixture).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Command-line configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `serverInfo.name`.
    pub name: String,
    /// How many `bulk_<i>` tools to list.
    pub many_tools: usize,
    /// Page size for the list methods (`None` = no pagination).
    pub page_size: Option<usize>,
    /// `--describe TOOL=TEXT`: replaced tool descriptions (for drift tests).
    pub describe: Vec<(String, String)>,
}

/// Process-wide state shared by every session.
pub struct Fixture {
    /// The configuration.
    pub config: Config,
    dynamic_tools: Mutex<Vec<String>>,
    last_cancelled: Mutex<Option<Value>>,
}

impl Fixture {
    /// A fixture with `config`.
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(Fixture {
            config,
            dynamic_tools: Mutex::new(Vec::new()),
            last_cancelled: Mutex::new(None),
        })
    }

    /// Every tool definition, in listing order: fixed, dynamic, then bulk.
    pub fn tools(&self) -> Vec<Value> {
        let mut tools = catalog::base_tools();
        for (name, text) in &self.config.describe {
            if let Some(t) = tools.iter_mut().find(|t| t["name"] == name.as_str()) {
                t["description"] = serde_json::json!(text);
            }
        }
        tools.extend(
            lock(&self.dynamic_tools)
                .iter()
                .map(|n| catalog::dynamic_tool(n)),
        );
        tools.extend((0..self.config.many_tools).map(catalog::bulk_tool));
        tools
    }

    /// Whether `name` is a dynamic tool added by `trigger_list_changed`.
    pub fn is_dynamic_tool(&self, name: &str) -> bool {
        lock(&self.dynamic_tools).iter().any(|n| n == name)
    }

    /// Whether `name` is one of the `--many-tools` bulk tools.
    pub fn is_bulk_tool(&self, name: &str) -> bool {
        name.strip_prefix("bulk_")
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < self.config.many_tools && name == format!("bulk_{i}"))
    }

    /// Add the next `dynamic_<n>` tool; returns its name.
    pub fn add_dynamic_tool(&self) -> String {
        let mut tools = lock(&self.dynamic_tools);
        let name = format!("dynamic_{}", tools.len());
        tools.push(name.clone());
        name
    }

    /// The last `notifications/cancelled` received (`{"requestId","reason"}`).
    pub fn last_cancelled(&self) -> Option<Value> {
        lock(&self.last_cancelled).clone()
    }
}

/// What a request handler emits, in order, on its way to the transport.
#[derive(Debug)]
pub enum Out {
    /// A message related to the request (notification or request to the client).
    Message(Value),
    /// Close the request's SSE stream now (the client resumes it with `Last-Event-ID`).
    CloseStream,
    /// The final response (`None`: the request was cancelled, send nothing).
    Final(Option<Value>),
}

/// Delivers a message unrelated to any request; gives it back when there is nowhere to send it.
pub type UnrelatedSink = Box<dyn Fn(Value) -> Option<Value> + Send + Sync>;

struct State {
    protocol_version: String,
    client_capabilities: Value,
    log_level: usize,
    subscriptions: HashSet<String>,
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, Value>>>;

/// One client connection (the stdio peer, or one HTTP `Mcp-Session-Id`).
pub struct Session {
    /// The shared fixture state.
    pub fixture: Arc<Fixture>,
    /// The HTTP session id (`None` on stdio).
    pub id: Option<String>,
    state: Mutex<State>,
    pending: Mutex<Pending>,
    inflight: Mutex<HashMap<String, watch::Sender<bool>>>,
    next_id: AtomicU64,
    unrelated: UnrelatedSink,
}

impl Session {
    /// A new session; `unrelated` delivers server-initiated messages outside any request.
    pub fn new(fixture: Arc<Fixture>, id: Option<String>, unrelated: UnrelatedSink) -> Arc<Self> {
        Arc::new(Session {
            fixture,
            id,
            state: Mutex::new(State {
                protocol_version: LATEST_VERSION.to_string(),
                client_capabilities: json!({}),
                log_level: 0,
                subscriptions: HashSet::new(),
            }),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            unrelated,
        })
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> String {
        lock(&self.state).protocol_version.clone()
    }

    /// Record the outcome of `initialize`.
    pub fn set_initialized(&self, version: &str, client_capabilities: Value) {
        let mut st = lock(&self.state);
        st.protocol_version = version.to_string();
        st.client_capabilities = client_capabilities;
    }

    /// Whether the client declared capability `name` at initialization.
    pub fn client_supports(&self, name: &str) -> bool {
        lock(&self.state)
            .client_capabilities
            .get(name)
            .is_some_and(|c| !c.is_null())
    }

    /// Set the minimum log level (`logging/setLevel`).
    pub fn set_log_level(&self, level: &str) -> Result<(), RpcError> {
        let idx = LOG_LEVELS
            .iter()
            .position(|l| *l == level)
            .ok_or_else(|| RpcError::invalid_params(format!("Invalid log level: {level}")))?;
        lock(&self.state).log_level = idx;
        Ok(())
    }

    fn log_enabled(&self, level: &str) -> bool {
        let min = lock(&self.state).log_level;
        LOG_LEVELS.iter().position(|l| *l == level).unwrap_or(0) >= min
    }

    /// Subscribe to (or, with `on == false`, unsubscribe from) resource `uri`.
    pub fn subscribe(&self, uri: &str, on: bool) {
        let mut st = lock(&self.state);
        if on {
            st.subscriptions.insert(uri.to_string());
        } else {
            st.subscriptions.remove(uri);
        }
    }

    /// Start handling request `id`; its related messages and final response arrive on the
    /// returned channel. `notifications/cancelled` for `id` drops the handler and yields
    /// `Out::Final(None)`.
    pub fn spawn_request(
        self: &Arc<Self>,
        id: Value,
        method: String,
        params: Value,
    ) -> mpsc::UnboundedReceiver<Out> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (cancel_tx, mut cancel_rx) = watch::channel(false);
        let key = id_key(&id);
        lock(&self.inflight).insert(key.clone(), cancel_tx);
        let session = self.clone();
        tokio::spawn(async move {
            let ctx = Ctx {
                session: session.clone(),
                out: tx.clone(),
            };
            let outcome = tokio::select! {
                r = crate::handlers::handle(&ctx, &method, params) => Some(r),
                _ = cancel_rx.wait_for(|c| *c) => None,
            };
            lock(&session.inflight).remove(&key);
            let msg = match outcome {
                Some(Ok(result)) => Some(protocol::response(&id, result)),
                Some(Err(e)) => Some(protocol::error_response(&id, &e)),
                None => {
                    eprintln!("sluice-fixture: request {key} ({method}) cancelled");
                    None
                }
            };
            let _ = tx.send(Out::Final(msg));
        });
        rx
    }

    /// Handle a client notification.
    pub fn handle_notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let request_id = params.get("requestId").cloned().unwrap_or(Value::Null);
            let reason = params.get("reason").cloned().unwrap_or(Value::Null);
            *lock(&self.fixture.last_cancelled) =
                Some(json!({ "requestId": request_id, "reason": reason }));
            if let Some(cancel) = lock(&self.inflight).get(&id_key(&request_id)) {
                let _ = cancel.send(true);
            }
        }
    }

    /// Handle the client's answer to a request this server sent.
    pub fn handle_response(&self, id: &Value, outcome: Result<Value, Value>) {
        match lock(&self.pending).remove(&id_key(id)) {
            Some(waiter) => {
                let _ = waiter.send(outcome);
            }
            None => eprintln!("sluice-fixture: response to unknown request id {id}"),
        }
    }

    /// Deliver a message unrelated to any request; gives it back if nowhere to send it.
    pub fn send_unrelated(&self, msg: Value) -> Option<Value> {
        (self.unrelated)(msg)
    }
}

/// Removes a pending client request when the waiting handler goes away.
struct PendingGuard<'a> {
    session: &'a Session,
    key: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.session.pending).remove(&self.key);
    }
}

/// What a request handler can do besides returning its result.
pub struct Ctx {
    /// The session the request belongs to.
    pub session: Arc<Session>,
    out: mpsc::UnboundedSender<Out>,
}

impl Ctx {
    /// Send a message related to this request.
    pub fn send(&self, msg: Value) {
        let _ = self.out.send(Out::Message(msg));
    }

    /// Send a notification related to this request.
    pub fn notify(&self, method: &str, params: Value) {
        self.send(protocol::notification(method, params));
    }

    /// Send `notifications/message` at `level` if the session's log level lets it through.
    pub fn log(&self, level: &str, data: Value) {
        if self.session.log_enabled(level) {
            self.notify(
                "notifications/message",
                json!({ "level": level, "data": data }),
            );
        }
    }

    /// Send a notification unrelated to this request (the HTTP GET stream when open), falling
    /// back to this request's stream.
    pub fn notify_unrelated(&self, method: &str, params: Value) {
        if let Some(msg) = self
            .session
            .send_unrelated(protocol::notification(method, params))
        {
            self.send(msg);
        }
    }

    /// Close this request's SSE stream (HTTP only; the client resumes it).
    pub fn close_stream(&self) {
        let _ = self.out.send(Out::CloseStream);
    }

    /// Send request `method` to the client and wait for its result. `Err` holds a message.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let n = self.session.next_id.fetch_add(1, Ordering::Relaxed);
        let id = json!(n);
        let key = id_key(&id);
        let (tx, rx) = oneshot::channel();
        lock(&self.session.pending).insert(key.clone(), tx);
        let _guard = PendingGuard {
            session: &self.session,
            key,
        };
        self.send(protocol::request(&id, method, params));
        match tokio::time::timeout(CLIENT_REQUEST_TIMEOUT, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(format!(
                "MCP error {}: {}",
                error.get("code").unwrap_or(&Value::Null),
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
            )),
            Ok(Err(_)) => Err("the session ended before the client answered".into()),
            Err(_) => Err(format!("the client did not answer {method} in time")),
        }
    }
}
