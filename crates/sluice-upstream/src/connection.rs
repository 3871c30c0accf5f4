//! A connection's public face: [`Connection`] (open, the handshake or the 2026-07-28 probe,
//! calls, notifications, shutdown) over one of the wires, and [`OpenOptions`]. The shared
//! dispatch state the wires feed lives in [`core`](crate::core).

use crate::core::{failure_reply, Answer, Event, ExtraHeaders, Held, Inner, StderrTail};
use crate::error::{ConnectError, ProtocolError, UpstreamError};
use crate::inline::{Detached, InlineReply};
use crate::shared::UpstreamSession;
use crate::{http, local, sse, stdio};
use serde_json::{json, Map, Value};
use sluice_config::{Era, Transport, UpstreamSpec};
use sluice_core::{version, Kind, Message};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The 2026-07-28 revision.
pub(crate) const MODERN: &str = "2026-07-28";

/// How to open a connection: who the gateway says it is, and what it offers.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// `clientInfo` sent in `initialize`.
    pub client_info: Value,
    /// `capabilities` sent in `initialize`.
    pub capabilities: Value,
    /// The protocol version asked for.
    pub protocol_version: String,
    /// Start-up plus handshake deadline.
    pub connect_timeout: Duration,
    /// A label for logs (the upstream id plus, for per-session connections, the session).
    pub label: String,
    /// Where a stdio process's stderr lines are kept (besides the log), for the admin page.
    pub stderr: StderrTail,
    /// http/sse: the OAuth identity its requests carry (None: only the configured headers).
    pub identity: Option<Arc<sluice_oauth::Identity>>,
    /// http, without an identity: the `Authorization` its requests carry when they set none
    /// (an `exchange` upstream's token; [`Connection::set_bearer`] replaces it).
    pub bearer: Option<Arc<reqwest::header::HeaderValue>>,
}

pub(crate) enum Wire {
    Stdio(stdio::StdioWire),
    Http(http::HttpWire),
    Sse(sse::SseWire),
    Local(local::LocalWire),
}

impl Wire {
    fn send(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Result<(), UpstreamError> {
        match self {
            Wire::Stdio(w) => w.send(msg),
            Wire::Http(w) => w.send(inner, msg, extra),
            Wire::Sse(w) => w.send(inner, msg, extra),
            Wire::Local(w) => {
                w.send(inner, msg);
                Ok(())
            }
        }
    }
}

/// One live MCP session with an upstream. Cheap to clone: one reference count (a call's
/// clones write one counter, not one per part).
#[derive(Clone)]
pub struct Connection(Arc<Parts>);

/// What a [`Connection`] and its clones share.
pub struct Parts {
    inner: Arc<Inner>,
    /// The wire, set once it is started (kept apart from [`Inner`], which the wires hold).
    wire: Arc<OnceLock<Wire>>,
    init: Value,
}

impl std::ops::Deref for Connection {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl Connection {
    fn of(inner: Arc<Inner>, wire: Arc<OnceLock<Wire>>, init: Value) -> Connection {
        Connection(Arc::new(Parts { inner, wire, init }))
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("label", &self.inner.label)
            .finish()
    }
}

/// Is `error` an `UnsupportedProtocolVersion` (-32022) whose `data.supported` names the
/// 2026-07-28 version?
fn offers_modern(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64)
        == Some(sluice_core::codes::UNSUPPORTED_PROTOCOL_VERSION)
        && error
            .pointer("/data/supported")
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().any(|x| x == MODERN))
}

impl Connection {
    /// Start or reach the upstream and run the `initialize` handshake.
    pub async fn open(
        spec: &UpstreamSpec,
        opts: OpenOptions,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Connection, UpstreamError> {
        let inner = Arc::new(Inner::new(opts.label.clone(), events, opts.stderr.clone()));
        let wire: Arc<OnceLock<Wire>> = Arc::default();
        let deadline = opts.connect_timeout;
        let result = tokio::time::timeout(deadline, async {
            if let Some(id) = &opts.identity {
                id.ready().await?;
            }
            let identity = opts.identity.clone();
            let started = match spec.transport {
                Transport::Stdio => Wire::Stdio(stdio::StdioWire::start(spec, &inner)?),
                Transport::Http => {
                    Wire::Http(http::HttpWire::new(spec, identity, opts.bearer.clone())?)
                }
                Transport::Sse => Wire::Sse(sse::SseWire::connect(spec, &inner, identity).await?),
                Transport::Local => Wire::Local(local::LocalWire::start(spec, &inner)),
            };
            let _ = wire.set(started);
            let conn = Connection::of(inner.clone(), wire.clone(), Value::Null);
            let probe = match (spec.era, spec.transport) {
                (_, Transport::Sse | Transport::Local) | (Era::Legacy, _) => None,
                (Era::Auto, _) => conn.discover(&opts, deadline, false).await?,
                (Era::Modern, _) => conn.discover(&opts, deadline, true).await?,
            };
            if let Some(init) = probe {
                return Ok(init);
            }
            if spec.era == Era::Modern {
                return Err(ProtocolError::NotModern.into());
            }
            let id = conn.next_id();
            let initialize = Message::request(
                json!(id),
                "initialize",
                Some(json!({
                    "protocolVersion": opts.protocol_version,
                    "capabilities": opts.capabilities,
                    "clientInfo": opts.client_info,
                })),
            );
            let reply = match conn
                .request(id, initialize, deadline, &ExtraHeaders::NONE)
                .await?
            {
                Answer::Reply(reply) => reply,
                // Said as the JSON-RPC error the request is answered with, the cause kept.
                Answer::Failed(cause) => {
                    let error = failure_reply(id, &cause)
                        .error_obj()
                        .cloned()
                        .unwrap_or(Value::Null);
                    return Err(ProtocolError::Initialize {
                        error,
                        cause: Some(Box::new(cause)),
                    }
                    .into());
                }
            };
            let result = match (reply.result(), reply.error_obj()) {
                (Some(r), _) => r.clone(),
                (None, Some(e)) => {
                    return Err(ProtocolError::Initialize {
                        error: e.clone(),
                        cause: None,
                    }
                    .into())
                }
                _ => return Err(ProtocolError::EmptyInitialize.into()),
            };
            if let Some(Wire::Http(w)) = wire.get() {
                if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                    w.set_protocol_version(v);
                }
            }
            match wire.get() {
                // Over HTTP the notification is a POST of its own: wait for its 202, so the
                // lists read next come from a session the upstream has finished initialising
                // (servers that register tools when initialised list them then).
                Some(Wire::Http(w)) => {
                    let done = Message::notification("notifications/initialized", None);
                    w.send_and_wait(&inner, &done).await?;
                    w.open_get_stream(&inner).await;
                }
                _ => conn.notify("notifications/initialized", None)?,
            }
            Ok::<Value, UpstreamError>(result)
        })
        .await;
        match result {
            Ok(Ok(init)) => {
                // From now on replies are ordered with the other events.
                inner.ordered.store(true, Ordering::Release);
                Ok(Connection::of(inner, wire, init))
            }
            Ok(Err(e)) => {
                inner.close(e.to_string());
                Connection::shutdown_wire(&wire).await;
                Err(e)
            }
            Err(_) => {
                let e = UpstreamError::Timeout(deadline.as_millis() as u64);
                inner.close(format!(
                    "start-up took longer than {} ms",
                    deadline.as_millis()
                ));
                Connection::shutdown_wire(&wire).await;
                Err(e)
            }
        }
    }

    /// A connection over an upstream session another replica of a cluster opened (Streamable
    /// HTTP only): its id and version are used as they are, no `initialize` is sent, and no
    /// GET stream is opened (the replica that opened the session holds it).
    pub fn adopt(
        spec: &UpstreamSpec,
        opts: OpenOptions,
        events: mpsc::UnboundedSender<Event>,
        shared: &UpstreamSession,
    ) -> Result<Connection, UpstreamError> {
        if spec.transport != Transport::Http {
            return Err(ConnectError::NotShareable.into());
        }
        let w = http::HttpWire::new(spec, opts.identity.clone(), opts.bearer.clone())?;
        w.adopt(&shared.id, &shared.protocol_version)?;
        let inner = Arc::new(Inner::new(opts.label, events, opts.stderr));
        inner.ordered.store(true, Ordering::Release);
        let wire: Arc<OnceLock<Wire>> = Arc::default();
        let _ = wire.set(Wire::Http(w));
        Ok(Connection::of(inner, wire, shared.init.clone()))
    }

    /// The upstream session this connection speaks in (Streamable HTTP with an
    /// `Mcp-Session-Id`), to share with other replicas.
    pub fn upstream_session(&self) -> Option<UpstreamSession> {
        let Some(Wire::Http(w)) = self.wire.get() else {
            return None;
        };
        let (id, protocol_version) = w.session()?;
        Some(UpstreamSession {
            id,
            protocol_version,
            init: self.init.clone(),
        })
    }

    /// Close this connection without ending its upstream session (no DELETE): other replicas
    /// of a cluster go on using it.
    pub async fn detach(&self, why: &str) {
        if let Some(Wire::Http(w)) = self.wire.get() {
            w.forget_session();
        }
        self.shutdown_because(why).await;
    }

    /// Carry `bearer` as the `Authorization` of every request that sets none (HTTP without an
    /// identity: an `exchange` upstream's connection of one caller, whose token was exchanged
    /// again).
    pub fn set_bearer(&self, bearer: &Arc<reqwest::header::HeaderValue>) {
        if let Some(Wire::Http(w)) = self.wire.get() {
            w.set_bearer(bearer);
        }
    }

    /// The upstream's `initialize` result (serverInfo, capabilities, instructions, …); for a
    /// 2026-07-28 upstream, the same fields from its `server/discover` result.
    pub fn init_result(&self) -> &Value {
        &self.init
    }

    /// Does the upstream speak 2026-07-28 (no session, `_meta` on every request)?
    pub fn is_modern(&self) -> bool {
        self.inner.modern.get().is_some()
    }

    /// Does a `tools/call` on this connection mirror `x-mcp-header` parameters into
    /// `Mcp-Param-*` headers (2026-07-28 over Streamable HTTP)? Then tools whose declarations
    /// are invalid must be rejected ([`crate::tool_headers`]).
    pub fn mirrors_param_headers(&self) -> bool {
        self.is_modern() && matches!(self.wire.get(), Some(Wire::Http(_)))
    }

    /// Probe with `server/discover`: the upstream speaks 2026-07-28 when it answers with that
    /// version among `supportedVersions`. Returns an `initialize`-shaped result then; `None`
    /// (and the wire back in the handshake era) otherwise. A probe refused for want of a
    /// credential the identity cannot get (a person must sign in again) is that error: the
    /// upstream's era is unknown, not the handshake one. A probe that may fall back to the
    /// handshake waits at most a third of `deadline` (5 s at most); one that may not (`pinned`:
    /// the configuration says 2026-07-28) waits the whole of it.
    async fn discover(
        &self,
        opts: &OpenOptions,
        deadline: Duration,
        pinned: bool,
    ) -> Result<Option<Value>, UpstreamError> {
        let wait = if pinned {
            deadline
        } else {
            (deadline / 3).min(Duration::from_secs(5))
        };
        let mut envelope = Map::new();
        envelope.insert(version::meta::PROTOCOL_VERSION.into(), json!(MODERN));
        envelope.insert(
            version::meta::CLIENT_CAPABILITIES.into(),
            opts.capabilities.clone(),
        );
        envelope.insert(version::meta::CLIENT_INFO.into(), opts.client_info.clone());
        if let Some(Wire::Http(w)) = self.wire.get() {
            w.set_modern(true, MODERN);
        }
        let mut result = None;
        // A server that refuses the version (-32022) names those it supports: when 2026-07-28
        // is among them, the probe is sent once more (as version negotiation asks).
        for attempt in 0..2 {
            let id = self.next_id();
            let msg = Message::request(
                json!(id),
                "server/discover",
                Some(json!({"_meta": envelope.clone()})),
            );
            let probe =
                tokio::time::timeout(wait, self.request(id, msg, deadline, &ExtraHeaders::NONE))
                    .await;
            match probe {
                Ok(Ok(Answer::Reply(reply))) => {
                    result = reply.result().cloned();
                    let again = attempt == 0 && reply.error_obj().is_some_and(offers_modern);
                    if !again {
                        break;
                    }
                    tracing::info!(upstream = %self.inner.label, "server/discover: the version was refused, and {MODERN} is supported: asking again");
                }
                Ok(Ok(Answer::Failed(e @ UpstreamError::Auth(_)))) => return Err(e),
                _ => break,
            }
        }
        let speaks = result
            .as_ref()
            .and_then(|r| r.get("supportedVersions"))
            .and_then(Value::as_array)
            .is_some_and(|v| v.iter().any(|x| x == MODERN));
        if !speaks {
            if let Some(Wire::Http(w)) = self.wire.get() {
                w.set_modern(false, MODERN);
            }
            tracing::debug!(upstream = %self.inner.label, "server/discover failed: the handshake era");
            return Ok(None);
        }
        let r = result.unwrap_or_default();
        let _ = self.inner.modern.set(envelope);
        tracing::info!(upstream = %self.inner.label, "the upstream speaks {MODERN}");
        Ok(Some(json!({
            "protocolVersion": MODERN,
            "capabilities": r.get("capabilities").cloned().unwrap_or(json!({})),
            "serverInfo": r
                .get("_meta")
                .and_then(|m| m.get(version::meta::SERVER_INFO))
                .cloned()
                .unwrap_or(json!({})),
            "instructions": r.get("instructions").cloned().unwrap_or(Value::Null),
        })))
    }

    /// Open a `subscriptions/listen` stream on a 2026-07-28 upstream for updates of one
    /// resource. No-op otherwise.
    pub fn listen_resource(&self, uri: &str) {
        if !self.is_modern() {
            return;
        }
        let id = self.next_id();
        let msg = Message::request(
            json!(id),
            "subscriptions/listen",
            Some(json!({"notifications": {"resourceSubscriptions": [uri]}})),
        );
        if let Err(e) = self.send(&msg) {
            tracing::warn!(upstream = %self.inner.label, "subscriptions/listen for {uri} failed: {e}");
        }
    }

    /// Open a `subscriptions/listen` stream on a 2026-07-28 upstream for its list changes
    /// (they arrive as events, like a legacy upstream's notifications). No-op otherwise.
    pub fn listen(&self) {
        if !self.is_modern() {
            return;
        }
        let id = self.next_id();
        let msg = Message::request(
            json!(id),
            "subscriptions/listen",
            Some(json!({"notifications": {
                "toolsListChanged": true,
                "promptsListChanged": true,
                "resourcesListChanged": true,
            }})),
        );
        if let Err(e) = self.send(&msg) {
            tracing::warn!(upstream = %self.inner.label, "subscriptions/listen failed: {e}");
        }
    }

    /// A number unique to this connection within the process (for keying maps).
    pub fn serial(&self) -> u64 {
        self.inner.serial
    }

    /// The label given at open.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Has the connection ended?
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Why the connection ended (None while open).
    pub fn close_reason(&self) -> Option<String> {
        self.inner.close_reason()
    }

    /// Reserve the id the next request will carry (so a caller can record it before sending).
    pub fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Mint request ids from `first` on (never going back): the replicas sharing one upstream
    /// session each use their own range, so their ids never collide upstream.
    pub fn ids_from(&self, first: u64) {
        self.inner.next_id.fetch_max(first, Ordering::Relaxed);
    }

    /// Send a request and wait for its reply (a result or an error message; a request that
    /// failed on its way is answered with the JSON-RPC error naming why, see
    /// [`Answer::into_message`]).
    pub async fn call(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Message, UpstreamError> {
        let id = self.next_id();
        self.call_with_id(id, Message::request(json!(id), method, params), timeout)
            .await
    }

    /// Send `msg` (a request whose id is `id`, from [`Connection::next_id`]) and wait for its
    /// reply, as [`Connection::call`] gives it. On timeout, `notifications/cancelled` is sent
    /// upstream.
    pub async fn call_with_id(
        &self,
        id: u64,
        msg: Message,
        timeout: Duration,
    ) -> Result<Message, UpstreamError> {
        self.request(id, msg, timeout, &ExtraHeaders::NONE)
            .await
            .map(|answer| answer.into_message(id))
    }

    /// Send `msg` (a request whose id is `id`, from [`Connection::next_id`]) with extra HTTP
    /// headers on the request that carries it (see [`ExtraHeaders`]), and wait for its
    /// [`Answer`]: the upstream's reply, or why the request failed on its way. `Err`: the
    /// connection is closed or closed meanwhile, or no answer came within `timeout` (then
    /// `notifications/cancelled` is sent upstream).
    pub async fn request(
        &self,
        id: u64,
        msg: Message,
        timeout: Duration,
        extra: &ExtraHeaders,
    ) -> Result<Answer, UpstreamError> {
        if self.inner.is_closed() {
            return Err(self.inner.closed_error());
        }
        let (tx, rx) = oneshot::channel();
        self.inner.pending.lock().insert(id, tx);
        // A handshake-era HTTP request is POSTed by this future itself: the reply wakes the
        // caller directly (no task in between). Should the caller give up first, the POST goes
        // on in a task of its own, as it would have.
        let inline = match (self.wire.get(), self.inner.modern.get()) {
            (Some(Wire::Http(w)), None) if !self.inner.is_closed() => {
                w.inline_request(&self.inner, &msg, extra)
            }
            _ => None,
        };
        let inline_here = inline.is_some();
        let post = Detached::new(inline.map(|p| Box::pin(p.run()) as _));
        if !inline_here {
            if let Err(e) = self.send_with_headers(&msg, extra) {
                self.inner.pending.lock().remove(&id);
                return Err(e);
            }
        }
        let closed = self.inner.closed_notify.notified();
        let sleep = tokio::time::sleep(timeout);
        // The reply (or the POST's failure) is dispatched by the POST run here, or by the
        // connection's events it waits behind.
        let reply = InlineReply::new(post, rx);
        tokio::pin!(closed, sleep, reply);
        tokio::select! {
            biased;
            reply = &mut reply => reply.map_err(|_| self.inner.closed_error()),
            _ = &mut closed => Err(self.inner.closed_error()),
            _ = &mut sleep => {
                self.inner.pending.lock().remove(&id);
                let ms = timeout.as_millis() as u64;
                let _ = self.notify("notifications/cancelled", Some(json!({
                    "requestId": id,
                    "reason": format!("Sluice: no reply within {ms} ms"),
                })));
                Err(UpstreamError::Timeout(ms))
            }
        }
    }

    /// The consumer finished handling one event (a message, a stream change or a reply) taken
    /// from the channel; replies stop waiting behind it.
    pub fn event_done(&self) {
        let _ = self
            .inner
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Resolve a reply delivered as [`Event::Reply`].
    pub fn resolve(&self, held: Held) {
        self.inner.resolve(held);
    }

    /// Forget a pending request (the caller gave up, e.g. the client cancelled it).
    pub fn forget(&self, id: u64) {
        self.inner.pending.lock().remove(&id);
    }

    /// Send a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.send(&Message::notification(method, params))
    }

    /// Send any message as is (e.g. a reply to the upstream's own request).
    pub fn send(&self, msg: &Message) -> Result<(), UpstreamError> {
        self.send_with_headers(msg, &ExtraHeaders::NONE)
    }

    fn send_with_headers(&self, msg: &Message, extra: &ExtraHeaders) -> Result<(), UpstreamError> {
        if self.inner.is_closed() {
            return Err(self.inner.closed_error());
        }
        if let (Some(envelope), Kind::Request) = (self.inner.modern.get(), msg.kind()) {
            // Every 2026-07-28 request carries the envelope; what the caller set (the calling
            // client's capabilities) wins.
            let mut msg = msg.clone();
            let params = msg.params_mut();
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                for (k, v) in envelope {
                    m.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            return match self.wire.get() {
                Some(w) => w.send(&self.inner, &msg, extra),
                None => Err(UpstreamError::Closed("not started".into())),
            };
        }
        match self.wire.get() {
            Some(w) => w.send(&self.inner, msg, extra),
            None => Err(UpstreamError::Closed("not started".into())),
        }
    }

    /// End the session: close stdin and stop the process (stdio), or DELETE the session (HTTP).
    pub async fn shutdown(&self) {
        self.shutdown_because("shut down by the gateway").await;
    }

    /// [`Connection::shutdown`], saying why to the calls still waiting on it.
    pub async fn shutdown_because(&self, why: &str) {
        self.inner.close(why.into());
        Connection::shutdown_wire(&self.wire).await;
    }

    /// Wait until the connection ends.
    pub async fn closed(&self) {
        loop {
            let n = self.inner.closed_notify.notified();
            if self.inner.is_closed() {
                return;
            }
            n.await;
        }
    }

    async fn shutdown_wire(wire: &OnceLock<Wire>) {
        match wire.get() {
            Some(Wire::Stdio(w)) => w.shutdown().await,
            Some(Wire::Http(w)) => w.shutdown().await,
            Some(Wire::Sse(w)) => w.shutdown(),
            Some(Wire::Local(w)) => w.shutdown(),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A Streamable HTTP upstream that opens session `s1` at `initialize`, takes
    /// `notifications/initialized`, has no GET stream, and answers every other request with
    /// 404 (it restarted: the session is gone).
    async fn forgetful_upstream() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: the head, then a body of Content-Length bytes.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let body =
                            String::from_utf8_lossy(&buf[head_end..head_end + len]).to_string();
                        buf.drain(..head_end + len);
                        let answer = if head.starts_with("get ") {
                            "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n"
                                .to_string()
                        } else if body.contains("\"initialize\"") {
                            let msg: Value = serde_json::from_str(&body).expect("json");
                            let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": {
                                "protocolVersion": "2025-06-18",
                                "capabilities": {},
                                "serverInfo": {"name": "forgetful", "version": "1"},
                            }})
                            .to_string();
                            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\ncontent-length: {}\r\n\r\n{reply}", reply.len())
                        } else if body.contains("notifications/initialized") {
                            "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_string()
                        } else {
                            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
                        };
                        if sock.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        format!("http://{addr}/mcp")
    }

    fn options() -> OpenOptions {
        OpenOptions {
            client_info: json!({"name": "test"}),
            capabilities: json!({}),
            protocol_version: "2025-06-18".into(),
            connect_timeout: Duration::from_secs(5),
            label: "forgetful".into(),
            stderr: StderrTail::default(),
            identity: None,
            bearer: None,
        }
    }

    /// The upstream's 404 to a request of its session fails that request with
    /// `SessionEnded` (the variant a shared session's call is retried on), answered with the
    /// text clients always saw, and ends the connection: later calls fail the same way.
    #[tokio::test]
    async fn a_404_in_a_session_ends_it_with_session_ended() {
        let url = forgetful_upstream().await;
        let mut spec = UpstreamSpec::http("forgetful", &url, Transport::Http);
        spec.era = Era::Legacy;
        let (tx, _rx) = mpsc::unbounded_channel();
        let conn = Connection::open(&spec, options(), tx).await.expect("open");
        assert_eq!(conn.upstream_session().map(|s| s.id).as_deref(), Some("s1"));
        let id = conn.next_id();
        let msg = Message::request(json!(id), "tools/call", Some(json!({"name": "x"})));
        let answer = conn
            .request(id, msg, Duration::from_secs(5), &ExtraHeaders::NONE)
            .await
            .expect("an answer");
        let Answer::Failed(e) = answer else {
            panic!("not a failure: {answer:?}")
        };
        assert!(matches!(e, UpstreamError::SessionEnded), "{e:?}");
        // What the client is answered with, as before.
        let reply = failure_reply(id, &e);
        assert_eq!(
            reply.error_obj(),
            Some(
                &json!({"code": -32000, "message": "connection closed: the upstream ended the session (HTTP 404)"})
            )
        );
        // The connection ended with it.
        assert!(conn.is_closed());
        assert_eq!(
            conn.close_reason().as_deref(),
            Some("the upstream ended the session (HTTP 404)")
        );
        let later = conn
            .call("tools/list", None, Duration::from_secs(5))
            .await
            .expect_err("closed");
        assert!(matches!(later, UpstreamError::SessionEnded), "{later:?}");
    }

    /// A refused `server/discover` is asked again only when the refusal is -32022 naming
    /// 2026-07-28 among the supported versions.
    #[test]
    fn a_refused_version_is_retried_only_when_2026_07_28_is_supported() {
        let refusal = |code: i64, supported: Value| json!({"code": code, "message": "m", "data": {"supported": supported, "requested": "x"}});
        assert!(offers_modern(&refusal(-32022, json!(["2026-07-28"]))));
        assert!(offers_modern(&refusal(
            -32022,
            json!(["2025-11-25", "2026-07-28"])
        )));
        assert!(!offers_modern(&refusal(-32022, json!(["2025-11-25"]))));
        assert!(!offers_modern(&refusal(-32600, json!(["2026-07-28"]))));
        assert!(!offers_modern(&json!({"code": -32022, "message": "m"})));
    }

    /// A 404 without a session (nothing to end) is an HTTP status, not the end of a session.
    #[tokio::test]
    async fn a_404_before_a_session_is_a_status() {
        let url = forgetful_upstream().await;
        let spec = UpstreamSpec::http("forgetful", &url, Transport::Http);
        let w = http::HttpWire::new(&spec, None, None).expect("wire");
        let (tx, _rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner::new("forgetful".into(), tx, StderrTail::default()));
        let (reply_tx, reply_rx) = oneshot::channel();
        inner.pending.lock().insert(7, reply_tx);
        let msg = Message::request(json!(7), "tools/list", None);
        let post = w
            .inline_request(&inner, &msg, &ExtraHeaders::NONE)
            .expect("a POST");
        post.run().await;
        let Ok(Answer::Failed(e)) = reply_rx.await else {
            panic!("no failure")
        };
        assert!(
            matches!(
                e,
                UpstreamError::Status {
                    status: 404,
                    body: None
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "protocol error: HTTP 404 Not Found");
        assert!(!inner.is_closed());
    }
}
