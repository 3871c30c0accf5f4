//! Protocol state: the process-wide [`Fixture`] (configuration, dynamic tools, last
//! cancellation, open `subscriptions/listen` streams, the requestState key), one [`Session`]
//! per client connection (negotiated version, log level, subscriptions, in-flight requests,
//! requests sent to the client) and the per-request [`Ctx`] handlers use to send related
//! messages. A request is served in one of two eras ([`Era`]): legacy (state from the
//! `initialize` handshake of its session) or modern (state from its own `_meta`).

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot, watch};

use crate::catalog;
use crate::protocol::{
    self, id_key, ModernMeta, RpcError, LATEST_VERSION, LOG_LEVELS, META_SUBSCRIPTION_ID,
    MODERN_VERSION, SUPPORTED_VERSIONS,
};
use crate::sync::lock;

/// How long a request sent to the client may wait for its answer.
const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Which protocol eras the fixture serves (`--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EraMode {
    /// Only the handshake era (2024-11-05 … 2025-11-25): `server/discover` is unknown.
    Legacy,
    /// Only 2026-07-28: `initialize` is refused.
    Modern,
    /// Both, chosen per request.
    Both,
}

impl EraMode {
    /// Whether modern requests are served.
    pub(crate) fn modern(self) -> bool {
        self != EraMode::Legacy
    }

    /// Whether legacy (`initialize`) clients are served.
    pub(crate) fn legacy(self) -> bool {
        self != EraMode::Modern
    }
}

/// Command-line configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// `serverInfo.name`.
    pub name: String,
    /// How many `bulk_<i>` tools to list.
    pub many_tools: usize,
    /// Page size for the list methods (`None` = no pagination).
    pub page_size: Option<usize>,
    /// `--describe TOOL=TEXT`: replaced tool descriptions (for drift tests).
    pub describe: Vec<(String, String)>,
    /// `--era`: which protocol eras are served.
    pub era: EraMode,
    /// `--ttl-ms`: the `ttlMs` caching hint on modern cacheable results.
    pub ttl_ms: u64,
    /// `--tasks`: serve tasks and the task tools.
    pub tasks: bool,
    /// `--skills`: serve the skill tree through the Skills extension.
    pub skills: bool,
    /// `--skills-tamper`: how the served `SKILL.md` of `pdf-processing` differs from its entry.
    pub skills_tamper: Option<crate::skills::Tamper>,
}

/// What a `subscriptions/listen` stream asked for (and was granted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// `toolsListChanged`.
    pub tools: bool,
    /// `promptsListChanged`.
    pub prompts: bool,
    /// `resourcesListChanged`.
    pub resources: bool,
    /// `resourceSubscriptions`.
    pub uris: Vec<String>,
}

impl Filter {
    /// Read a `SubscriptionFilter` object (unknown members are ignored).
    pub(crate) fn from_value(v: &Map<String, Value>) -> Self {
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        Filter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris: v
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|u| u.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The filter as a `SubscriptionFilter` object (only the granted members).
    pub(crate) fn to_value(&self) -> Value {
        let mut m = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(key.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(m)
    }
}

/// A change the open `subscriptions/listen` streams may want to hear about.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/resources/list_changed`.
    Resources,
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/updated` for this URI.
    ResourceUpdated(String),
}

struct Subscription {
    serial: u64,
    id: Value,
    filter: Filter,
    tx: mpsc::UnboundedSender<Value>,
}

/// Keeps a `subscriptions/listen` stream registered; dropping it ends the subscription.
pub(crate) struct SubscriptionGuard {
    fixture: Arc<Fixture>,
    serial: u64,
}

impl Drop for SubscriptionGuard {
    fn drop(&mut self) {
        lock(&self.fixture.subscriptions).retain(|s| s.serial != self.serial);
    }
}

/// Process-wide state shared by every session.
pub(crate) struct Fixture {
    /// The configuration.
    pub config: Config,
    dynamic_tools: Mutex<Vec<String>>,
    last_cancelled: Mutex<Option<Value>>,
    subscriptions: Mutex<Vec<Subscription>>,
    next_subscription: AtomicU64,
    state_key: RandomState,
    /// Tasks (`--tasks`).
    pub tasks: crate::tasks::Store,
    /// The skill tree (`--skills`), replaced whole by the `skills_edit` tool.
    pub skills: Option<Mutex<Arc<crate::skills::Tree>>>,
    /// How many times `skills_edit` changed the tree.
    skills_edition: AtomicU64,
}

impl Fixture {
    /// A fixture with `config`.
    pub(crate) fn new(config: Config) -> Arc<Self> {
        Arc::new(Fixture {
            dynamic_tools: Mutex::new(Vec::new()),
            last_cancelled: Mutex::new(None),
            subscriptions: Mutex::new(Vec::new()),
            next_subscription: AtomicU64::new(1),
            state_key: RandomState::new(),
            tasks: crate::tasks::Store::default(),
            skills: config
                .skills
                .then(|| Mutex::new(Arc::new(crate::skills::Tree::new(config.skills_tamper, 0)))),
            skills_edition: AtomicU64::new(0),
            config,
        })
    }

    /// The versions `server/discover` lists (and `-32022` names): the modern one, then the
    /// legacy ones newest first (only those of the served eras).
    pub(crate) fn supported_versions(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.config.era.modern() {
            v.push(MODERN_VERSION);
        }
        if self.config.era.legacy() {
            v.extend(SUPPORTED_VERSIONS.iter().rev());
        }
        v
    }

    /// A keyed 64-bit MAC (SipHash with a per-process random key) of `data`.
    pub(crate) fn mac(&self, data: &[u8]) -> u64 {
        self.state_key.hash_one(data)
    }

    /// Record a cancelled request (what the `last_cancelled` tool reports).
    pub(crate) fn record_cancelled(&self, request_id: Value, reason: Value) {
        *lock(&self.last_cancelled) = Some(json!({ "requestId": request_id, "reason": reason }));
    }

    /// Register a `subscriptions/listen` stream opened by request `id`; matching changes are
    /// sent on `tx` (already tagged with the subscription id) until the guard is dropped.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        id: Value,
        filter: Filter,
        tx: mpsc::UnboundedSender<Value>,
    ) -> SubscriptionGuard {
        let serial = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        lock(&self.subscriptions).push(Subscription {
            serial,
            id,
            filter,
            tx,
        });
        SubscriptionGuard {
            fixture: self.clone(),
            serial,
        }
    }

    /// Tell every open subscription that asked for `change` about it.
    pub(crate) fn broadcast(&self, change: &Change) {
        let mut subs = lock(&self.subscriptions);
        subs.retain(|s| !s.tx.is_closed());
        for sub in subs.iter() {
            let meta = json!({ META_SUBSCRIPTION_ID: sub.id });
            let msg = match change {
                Change::Tools if sub.filter.tools => protocol::notification(
                    "notifications/tools/list_changed",
                    json!({ "_meta": meta }),
                ),
                Change::Resources if sub.filter.resources => protocol::notification(
                    "notifications/resources/list_changed",
                    json!({ "_meta": meta }),
                ),
                Change::Prompts if sub.filter.prompts => protocol::notification(
                    "notifications/prompts/list_changed",
                    json!({ "_meta": meta }),
                ),
                Change::ResourceUpdated(uri) if sub.filter.uris.contains(uri) => {
                    protocol::notification(
                        "notifications/resources/updated",
                        json!({ "_meta": meta, "uri": uri }),
                    )
                }
                _ => continue,
            };
            let _ = sub.tx.send(msg);
        }
    }

    /// Every tool definition, in listing order: fixed, dynamic, then bulk.
    pub(crate) fn tools(&self) -> Vec<Value> {
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
        if self.config.tasks {
            tools.extend(crate::tasks::tools());
        }
        if self.skills.is_some() {
            tools.push(crate::skills::edit_tool());
        }
        tools
    }

    /// Whether a modern request may name `method` (the extensions' methods with `--tasks` and
    /// `--skills`).
    pub(crate) fn serves_modern(&self, method: &str) -> bool {
        protocol::is_modern_method(method)
            || (self.config.tasks && crate::tasks::MODERN_METHODS.contains(&method))
            || (self.skills.is_some() && crate::skills::METHODS.contains(&method))
    }

    /// The skill tree served now (`--skills`).
    pub(crate) fn skill_tree(&self) -> Option<Arc<crate::skills::Tree>> {
        self.skills.as_ref().map(|t| lock(t).clone())
    }

    /// The `skills_edit` tool: the next edition of the tree; returns its number.
    pub(crate) fn edit_skills(&self) -> Option<u64> {
        let tree = self.skills.as_ref()?;
        let n = self.skills_edition.fetch_add(1, Ordering::SeqCst) + 1;
        *lock(tree) = Arc::new(crate::skills::Tree::new(self.config.skills_tamper, n));
        Some(n)
    }

    /// Whether `name` is a dynamic tool added by `trigger_list_changed`.
    pub(crate) fn is_dynamic_tool(&self, name: &str) -> bool {
        lock(&self.dynamic_tools).iter().any(|n| n == name)
    }

    /// Whether `name` is one of the `--many-tools` bulk tools.
    pub(crate) fn is_bulk_tool(&self, name: &str) -> bool {
        name.strip_prefix("bulk_")
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < self.config.many_tools && name == format!("bulk_{i}"))
    }

    /// Add the next `dynamic_<n>` tool; returns its name.
    pub(crate) fn add_dynamic_tool(&self) -> String {
        let mut tools = lock(&self.dynamic_tools);
        let name = format!("dynamic_{}", tools.len());
        tools.push(name.clone());
        name
    }

    /// The last `notifications/cancelled` received (`{"requestId","reason"}`).
    pub(crate) fn last_cancelled(&self) -> Option<Value> {
        lock(&self.last_cancelled).clone()
    }
}

/// What a request handler emits, in order, on its way to the transport.
#[derive(Debug)]
pub(crate) enum Out {
    /// A message related to the request (notification or request to the client).
    Message(Value),
    /// Close the request's SSE stream now (the client resumes it with `Last-Event-ID`).
    CloseStream,
    /// The final response (`None`: the request was cancelled, send nothing).
    Final(Option<Value>),
}

/// Delivers a message unrelated to any request; gives it back when there is nowhere to send it.
pub(crate) type UnrelatedSink = Box<dyn Fn(Value) -> Option<Value> + Send + Sync>;

struct State {
    protocol_version: String,
    client_capabilities: Value,
    log_level: usize,
    subscriptions: HashSet<String>,
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, Value>>>;

/// One client connection (the stdio peer, or one HTTP `Mcp-Session-Id`).
pub(crate) struct Session {
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
    pub(crate) fn new(
        fixture: Arc<Fixture>,
        id: Option<String>,
        unrelated: UnrelatedSink,
    ) -> Arc<Self> {
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
    pub(crate) fn protocol_version(&self) -> String {
        lock(&self.state).protocol_version.clone()
    }

    /// Record the outcome of `initialize`.
    pub(crate) fn set_initialized(&self, version: &str, client_capabilities: Value) {
        let mut st = lock(&self.state);
        st.protocol_version = version.to_string();
        st.client_capabilities = client_capabilities;
    }

    /// Whether the client declared capability `name` at initialization.
    pub(crate) fn client_supports(&self, name: &str) -> bool {
        lock(&self.state)
            .client_capabilities
            .get(name)
            .is_some_and(|c| !c.is_null())
    }

    /// Set the minimum log level (`logging/setLevel`).
    pub(crate) fn set_log_level(&self, level: &str) -> Result<(), RpcError> {
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
    pub(crate) fn subscribe(&self, uri: &str, on: bool) {
        let mut st = lock(&self.state);
        if on {
            st.subscriptions.insert(uri.to_string());
        } else {
            st.subscriptions.remove(uri);
        }
    }

    /// Whether the client subscribed to resource `uri` (`resources/subscribe`).
    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.state).subscriptions.contains(uri)
    }

    /// Register in-flight request `key`; the returned receiver turns `true` when
    /// [`Session::cancel`] (or `notifications/cancelled`) names it.
    pub(crate) fn track_request(&self, key: String) -> watch::Receiver<bool> {
        let (cancel_tx, cancel_rx) = watch::channel(false);
        lock(&self.inflight).insert(key, cancel_tx);
        cancel_rx
    }

    /// Forget in-flight request `key` (its handler finished or was cancelled).
    pub(crate) fn untrack_request(&self, key: &str) {
        lock(&self.inflight).remove(key);
    }

    /// Cancel in-flight request `id` (no response will be sent); unknown ids are ignored.
    pub(crate) fn cancel(&self, id: &Value) {
        if let Some(cancel) = lock(&self.inflight).get(&id_key(id)) {
            let _ = cancel.send(true);
        }
    }

    /// Handle a client notification.
    pub(crate) fn handle_notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let request_id = params.get("requestId").cloned().unwrap_or(Value::Null);
            let reason = params.get("reason").cloned().unwrap_or(Value::Null);
            self.fixture.record_cancelled(request_id.clone(), reason);
            self.cancel(&request_id);
        }
    }

    /// Handle the client's answer to a request this server sent.
    pub(crate) fn handle_response(&self, id: &Value, outcome: Result<Value, Value>) {
        match lock(&self.pending).remove(&id_key(id)) {
            Some(waiter) => {
                let _ = waiter.send(outcome);
            }
            None => eprintln!("sluice-fixture: response to unknown request id {id}"),
        }
    }

    /// Deliver a message unrelated to any request; gives it back if nowhere to send it.
    pub(crate) fn send_unrelated(&self, msg: Value) -> Option<Value> {
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

/// The era a request is served in.
#[derive(Debug, Clone)]
pub(crate) enum Era {
    /// Handshake era: capabilities, version and log level come from the session.
    Legacy,
    /// 2026-07-28: everything comes from the request itself.
    Modern(Box<ModernReq>),
}

/// What a modern request carries besides its method-specific params.
#[derive(Debug, Clone)]
pub(crate) struct ModernReq {
    /// The `_meta` envelope.
    pub meta: ModernMeta,
    /// `params.inputResponses` as sent (validated when a tool asks for input).
    pub input_responses: Option<Value>,
    /// `params.requestState` as sent (verified when a tool asks for input).
    pub request_state: Option<Value>,
    /// What a requestState is bound to: the method, the name or URI and the arguments.
    pub binding: String,
}

impl ModernReq {
    /// The modern context of request `method` with `params` and envelope `meta`.
    pub(crate) fn new(meta: ModernMeta, method: &str, params: &Value) -> Self {
        let target = params
            .get("name")
            .or_else(|| params.get("uri"))
            .map(Value::to_string)
            .unwrap_or_default();
        let args = params
            .get("arguments")
            .map(Value::to_string)
            .unwrap_or_default();
        ModernReq {
            meta,
            input_responses: params.get("inputResponses").cloned(),
            request_state: params.get("requestState").cloned(),
            binding: format!("{method}\n{target}\n{args}"),
        }
    }
}

/// What a request handler can do besides returning its result.
pub(crate) struct Ctx {
    /// The session the request belongs to (an ephemeral one for a modern HTTP request).
    pub session: Arc<Session>,
    /// The request id.
    pub id: Value,
    /// The era the request is served in.
    pub era: Era,
    /// Input responses gathered so far while handling this request (modern MRTR).
    pub(crate) gathered: Mutex<Map<String, Value>>,
    out: mpsc::UnboundedSender<Out>,
}

impl Ctx {
    /// The context of request `id` on `session` in `era`; what the handler emits goes to `out`.
    pub(crate) fn new(
        session: Arc<Session>,
        id: Value,
        era: Era,
        out: mpsc::UnboundedSender<Out>,
    ) -> Ctx {
        Ctx {
            session,
            id,
            era,
            gathered: Mutex::new(Map::new()),
            out,
        }
    }

    /// The modern context, if this is a modern request.
    pub(crate) fn modern(&self) -> Option<&ModernReq> {
        match &self.era {
            Era::Modern(m) => Some(m),
            Era::Legacy => None,
        }
    }

    /// Whether this is a modern (2026-07-28) request.
    pub(crate) fn is_modern(&self) -> bool {
        self.modern().is_some()
    }

    /// Whether the client declared capability `name` (at initialization, or in this request's
    /// `_meta` for a modern request).
    pub(crate) fn client_supports(&self, name: &str) -> bool {
        match &self.era {
            Era::Legacy => self.session.client_supports(name),
            Era::Modern(m) => m
                .meta
                .client_capabilities
                .get(name)
                .is_some_and(|c| !c.is_null()),
        }
    }

    fn log_enabled(&self, level: &str) -> bool {
        match &self.era {
            Era::Legacy => self.session.log_enabled(level),
            Era::Modern(m) => m
                .meta
                .log_level
                .is_some_and(|min| LOG_LEVELS.iter().position(|l| *l == level).unwrap_or(0) >= min),
        }
    }

    /// Send a message related to this request.
    pub(crate) fn send(&self, msg: Value) {
        let _ = self.out.send(Out::Message(msg));
    }

    /// Send a notification related to this request.
    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.send(protocol::notification(method, params));
    }

    /// Send `notifications/message` at `level` if the log level lets it through (the
    /// session's; for a modern request its `_meta` logLevel, and nothing when that is absent).
    pub(crate) fn log(&self, level: &str, data: Value) {
        if self.log_enabled(level) {
            self.notify(
                "notifications/message",
                json!({ "level": level, "data": data }),
            );
        }
    }

    /// Send a notification unrelated to this request (the HTTP GET stream when open), falling
    /// back to this request's stream. A modern request has no such channel: nothing is sent
    /// (modern clients hear about changes on `subscriptions/listen`, see [`Fixture::broadcast`]).
    pub(crate) fn notify_unrelated(&self, method: &str, params: Value) {
        if self.is_modern() {
            return;
        }
        if let Some(msg) = self
            .session
            .send_unrelated(protocol::notification(method, params))
        {
            self.send(msg);
        }
    }

    /// Close this request's SSE stream (HTTP only; the client resumes it).
    pub(crate) fn close_stream(&self) {
        let _ = self.out.send(Out::CloseStream);
    }

    /// Send request `method` to the client and wait for its result. `Err` holds a message.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
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

#[cfg(test)]
impl Ctx {
    /// A context for request `id` in `era` on a fresh stdio-like session (for unit tests).
    pub(crate) fn for_test(fixture: Arc<Fixture>, id: Value, era: Era) -> Ctx {
        let (out, _) = mpsc::unbounded_channel();
        Ctx::new(Session::new(fixture, None, Box::new(Some)), id, era, out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fixture with default options serving `era`.
    pub(crate) fn fixture(era: EraMode) -> Arc<Fixture> {
        Fixture::new(Config {
            name: "test".into(),
            many_tools: 0,
            page_size: None,
            describe: Vec::new(),
            era,
            ttl_ms: 0,
            tasks: false,
            skills: false,
            skills_tamper: None,
        })
    }

    #[test]
    fn supported_versions_follow_the_era() {
        assert_eq!(
            fixture(EraMode::Both).supported_versions(),
            [
                MODERN_VERSION,
                "2025-11-25",
                "2025-06-18",
                "2025-03-26",
                "2024-11-05"
            ]
        );
        assert_eq!(
            fixture(EraMode::Modern).supported_versions(),
            [MODERN_VERSION]
        );
        assert_eq!(fixture(EraMode::Legacy).supported_versions().len(), 4);
    }

    #[test]
    fn filter_round_trips_only_what_was_granted() {
        let v = json!({"toolsListChanged": true, "promptsListChanged": false,
                       "resourceSubscriptions": ["a://b"], "bogus": 1});
        let f = Filter::from_value(v.as_object().unwrap());
        assert!(f.tools && !f.prompts && !f.resources);
        assert_eq!(
            f.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a://b"]})
        );
    }

    #[test]
    fn broadcast_reaches_matching_subscriptions_until_dropped() {
        let fx = fixture(EraMode::Both);
        let (tx_tools, mut rx_tools) = mpsc::unbounded_channel();
        let (tx_res, mut rx_res) = mpsc::unbounded_channel();
        let tools = Filter {
            tools: true,
            ..Filter::default()
        };
        let res = Filter {
            uris: vec!["test://x".into()],
            ..Filter::default()
        };
        let g1 = fx.subscribe(json!(1), tools, tx_tools);
        let _g2 = fx.subscribe(json!("two"), res, tx_res);
        fx.broadcast(&Change::Tools);
        fx.broadcast(&Change::ResourceUpdated("test://y".into()));
        fx.broadcast(&Change::ResourceUpdated("test://x".into()));
        let n = rx_tools.try_recv().unwrap();
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_eq!(n["params"]["_meta"][META_SUBSCRIPTION_ID], 1);
        assert!(rx_tools.try_recv().is_err());
        let n = rx_res.try_recv().unwrap();
        assert_eq!(n["params"]["uri"], "test://x");
        assert_eq!(n["params"]["_meta"][META_SUBSCRIPTION_ID], "two");
        assert!(rx_res.try_recv().is_err());
        drop(g1);
        assert_eq!(lock(&fx.subscriptions).len(), 1);
    }
}
