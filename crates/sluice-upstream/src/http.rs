//! The Streamable HTTP transport (2025-03-26 … 2025-11-25): one POST per message, replies as JSON
//! or as an SSE stream, `Mcp-Session-Id` and `MCP-Protocol-Version` headers, the GET stream for
//! unrelated server messages, and DELETE to end the session.

use crate::core::{ExtraHeaders, Inner};
use crate::error::UpstreamError;
use futures_util::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::Value;
use sluice_config::UpstreamSpec;
use sluice_core::{headers, Kind, Message};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

/// One HTTP client for every upstream connection: connection pooling and keep-alive across
/// sessions.
pub(crate) fn shared_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(64)
                .tcp_nodelay(true)
                .build()
                .expect("HTTP client")
        })
        .clone()
}

pub(crate) fn header_map(spec: &UpstreamSpec) -> Result<HeaderMap, UpstreamError> {
    let mut headers = HeaderMap::new();
    for (k, v) in &spec.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| UpstreamError::Connect(format!("bad header name {k:?}: {e}")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|e| UpstreamError::Connect(format!("bad value for header {k:?}: {e}")))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// A request's [`ExtraHeaders`] onto `rb`, replacing configured headers of the same name.
/// An invalid name or value is skipped with a warning.
pub(crate) fn with_extra(
    rb: reqwest::RequestBuilder,
    extra: &ExtraHeaders,
) -> reqwest::RequestBuilder {
    if extra.is_empty() {
        return rb;
    }
    let mut map = HeaderMap::with_capacity(extra.0.len());
    for (k, v) in &extra.0 {
        match (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            (Ok(name), Ok(value)) => {
                map.insert(name, value);
            }
            _ => tracing::warn!("skipped an invalid extra header {k:?} on an upstream request"),
        }
    }
    rb.headers(map)
}

/// A header value for `Mcp-Name` / `Mcp-Param-*`: as is when it is plain visible ASCII, else
/// the `=?base64?…?=` form (2026-07-28 value encoding).
pub fn header_value(v: &str) -> String {
    use base64::Engine;
    let sentinel_like = v.starts_with("=?base64?") && v.ends_with("?=");
    let visible = v.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = v.starts_with(' ') || v.ends_with(' ');
    let plain = !v.is_empty() && visible && !padded && !sentinel_like;
    if plain {
        v.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v.as_bytes())
        )
    }
}

struct State {
    session: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// 2026-07-28: no session; `Mcp-Method` / `Mcp-Name` on every request; cancellation by
    /// dropping the request's response stream.
    modern: bool,
    /// Modern requests in flight, by id (aborting one closes its stream: the cancellation).
    posts: std::collections::HashMap<u64, tokio::task::AbortHandle>,
}

/// What every request of one upstream session needs (shared with the tasks that send).
pub(crate) struct Core {
    client: reqwest::Client,
    /// Parsed once (reqwest would parse a string on every request).
    url: reqwest::Url,
    headers: HeaderMap,
    state: Mutex<State>,
}

pub(crate) struct HttpWire {
    core: Arc<Core>,
}

impl HttpWire {
    pub fn new(spec: &UpstreamSpec) -> Result<HttpWire, UpstreamError> {
        let url = reqwest::Url::parse(&spec.url)
            .map_err(|e| UpstreamError::Connect(format!("bad url {:?}: {e}", spec.url)))?;
        Ok(HttpWire {
            core: Arc::new(Core {
                client: shared_client(),
                url,
                headers: header_map(spec)?,
                state: Mutex::new(State {
                    session: None,
                    version: None,
                    modern: false,
                    posts: std::collections::HashMap::new(),
                }),
            }),
        })
    }

    pub fn set_protocol_version(&self, v: &str) {
        self.core.state.lock().version = HeaderValue::from_str(v).ok();
    }

    /// Use an upstream session opened elsewhere (another replica of a cluster): its
    /// `Mcp-Session-Id` and negotiated version go on every request, no `initialize`.
    pub fn adopt(&self, session: &str, version: &str) -> Result<(), UpstreamError> {
        let bad = |e| UpstreamError::Connect(format!("bad shared upstream session: {e}"));
        let mut st = self.core.state.lock();
        st.session = Some(HeaderValue::from_str(session).map_err(bad)?);
        st.version = Some(HeaderValue::from_str(version).map_err(bad)?);
        Ok(())
    }

    /// The upstream's `Mcp-Session-Id` and the negotiated version, when it gave a session.
    pub fn session(&self) -> Option<(String, String)> {
        let st = self.core.state.lock();
        let id = st.session.as_ref()?.to_str().ok()?.to_string();
        let v = st.version.as_ref()?.to_str().ok()?.to_string();
        Some((id, v))
    }

    /// Forget the upstream session (shutting down then sends no DELETE: it lives on for
    /// other replicas).
    pub fn forget_session(&self) {
        self.core.state.lock().session = None;
    }

    /// Speak 2026-07-28 (`on`), or go back to the handshake era after a failed probe.
    pub fn set_modern(&self, on: bool, version: &str) {
        let mut st = self.core.state.lock();
        st.modern = on;
        st.version = if on {
            HeaderValue::from_str(version).ok()
        } else {
            None
        };
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        self.core.request(method)
    }
}

impl Core {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut rb = self.client.request(method, self.url.clone());
        if !self.headers.is_empty() {
            rb = rb.headers(self.headers.clone());
        }
        let st = self.state.lock();
        if let Some(s) = &st.session {
            rb = rb.header(headers::SESSION_ID, s.clone());
        }
        if let Some(v) = &st.version {
            rb = rb.header(headers::PROTOCOL_VERSION, v.clone());
        }
        rb
    }
}

impl HttpWire {
    pub fn send(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Result<(), UpstreamError> {
        let modern = self.core.state.lock().modern;
        if modern && msg.kind() != Kind::Request {
            // 2026-07-28 over HTTP has no client-to-server notifications: a cancellation closes
            // the request's stream; anything else is not sent.
            if msg.method() == Some("notifications/cancelled") {
                let id = msg
                    .params()
                    .and_then(|p| p.get("requestId"))
                    .and_then(Value::as_u64);
                if let Some(task) = id.and_then(|id| self.core.state.lock().posts.remove(&id)) {
                    task.abort();
                }
            }
            return Ok(());
        }
        let mut rb = self
            .request(reqwest::Method::POST)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(msg.to_json());
        if modern {
            rb = rb.header(headers::METHOD, msg.method().unwrap_or(""));
            let name = match msg.method() {
                Some("tools/call") | Some("prompts/get") => msg.param_str("name"),
                Some("resources/read") => msg.param_str("uri"),
                Some("tasks/get" | "tasks/update" | "tasks/cancel") => msg.param_str("taskId"),
                _ => None,
            };
            if let Some(n) = name {
                rb = rb.header(headers::NAME, header_value(n));
            }
        }
        let rb = with_extra(rb, extra);
        let inner = inner.clone();
        let core = self.core.clone();
        let request_id = match msg.kind() {
            Kind::Request => msg.id().and_then(Value::as_u64),
            _ => None,
        };
        let is_init = msg.method() == Some("initialize");
        let track = modern.then_some(request_id).flatten();
        let task = tokio::spawn(async move {
            let outcome = post(rb, &core, &inner, request_id, is_init).await;
            if let Err(e) = outcome {
                match request_id {
                    Some(id) => {
                        // Fail the waiting call with a JSON-RPC error naming the cause.
                        let err = sluice_core::RpcError::new(
                            sluice_core::codes::UPSTREAM_UNAVAILABLE,
                            e.to_string(),
                        );
                        inner.dispatch(Message::error(serde_json::json!(id), &err), None);
                    }
                    // A notification still in flight when the connection was shut down (the
                    // session is gone): expected, not worth a warning.
                    None if inner.is_closed() => {
                        tracing::debug!(upstream = %inner.label, "sending a message failed after the shutdown: {e}")
                    }
                    None => {
                        tracing::warn!(upstream = %inner.label, "sending a message failed: {e}")
                    }
                }
                if let UpstreamError::Closed(reason) = e {
                    inner.close(reason);
                }
            }
            if let Some(id) = track {
                core.state.lock().posts.remove(&id);
            }
        });
        if let Some(id) = track {
            let mut st = self.core.state.lock();
            if !task.is_finished() {
                st.posts.insert(id, task.abort_handle());
            }
        }
        Ok(())
    }

    /// POST one notification and wait for the server's answer (202), for the one message
    /// whose order matters to what follows: `notifications/initialized`.
    pub async fn send_and_wait(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
    ) -> Result<(), UpstreamError> {
        let rb = self
            .request(reqwest::Method::POST)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(msg.to_json());
        post(rb, &self.core, inner, None, false).await
    }

    /// Open the GET stream for messages unrelated to any request (405 = the server has none).
    pub fn open_get_stream(&self, inner: &Arc<Inner>) {
        let rb = self
            .request(reqwest::Method::GET)
            .header(ACCEPT, "text/event-stream");
        let inner = inner.clone();
        tokio::spawn(async move {
            match rb.send().await {
                Ok(resp) if resp.status().is_success() => {
                    let _ = read_sse(resp, &inner, None).await;
                }
                Ok(resp) => {
                    tracing::debug!(upstream = %inner.label, status = %resp.status(), "no GET stream")
                }
                Err(e) => tracing::debug!(upstream = %inner.label, "GET stream failed: {e}"),
            }
        });
    }

    pub async fn shutdown(&self) {
        {
            let mut st = self.core.state.lock();
            for (_, task) in st.posts.drain() {
                task.abort();
            }
        }
        if self.core.state.lock().session.is_none() {
            return;
        }
        let rb = self.request(reqwest::Method::DELETE);
        let _ = tokio::time::timeout(Duration::from_secs(2), rb.send()).await;
    }
}

async fn post(
    rb: reqwest::RequestBuilder,
    core: &Arc<Core>,
    inner: &Arc<Inner>,
    request_id: Option<u64>,
    is_init: bool,
) -> Result<(), UpstreamError> {
    let resp = rb
        .send()
        .await
        .map_err(|e| UpstreamError::Connect(format!("POST failed: {e}")))?;
    let status = resp.status();
    if is_init && status.is_success() {
        if let Some(s) = resp.headers().get(headers::SESSION_ID) {
            core.state.lock().session = Some(s.clone());
        }
    }
    if status == StatusCode::ACCEPTED {
        return Ok(());
    }
    if status == StatusCode::NOT_FOUND && core.state.lock().session.is_some() {
        return Err(UpstreamError::Closed(
            "the upstream ended the session (HTTP 404)".into(),
        ));
    }
    let ctype = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ctype.starts_with("text/event-stream") {
        let mut end = read_sse(resp, inner, request_id).await;
        // The stream ended before the reply: resume it with `Last-Event-ID` (bounded).
        if let Some(id) = request_id {
            for _ in 0..5 {
                if end.answered || inner.is_closed() {
                    break;
                }
                let Some((event_id, retry)) = end.last.clone() else {
                    break;
                };
                inner.stream_event(id, true, retry);
                tokio::time::sleep(retry.unwrap_or(Duration::from_millis(100))).await;
                let rb = core
                    .request(reqwest::Method::GET)
                    .header(ACCEPT, "text/event-stream");
                match rb.header(headers::LAST_EVENT_ID, &event_id).send().await {
                    Ok(r) if r.status().is_success() => {
                        let next = read_sse(r, inner, request_id).await;
                        end = SseEnd {
                            answered: next.answered,
                            last: next.last.or(end.last),
                        };
                    }
                    Ok(r) => {
                        return Err(UpstreamError::Protocol(format!(
                            "the reply stream broke and resuming it failed: HTTP {}",
                            r.status()
                        )))
                    }
                    Err(e) => {
                        return Err(UpstreamError::Protocol(format!(
                            "the reply stream broke and resuming it failed: {e}"
                        )))
                    }
                }
            }
            if !end.answered && inner.is_pending(id) {
                return Err(UpstreamError::Protocol(
                    "the reply stream ended without a reply".into(),
                ));
            }
        }
        return Ok(());
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| UpstreamError::Protocol(format!("reading the reply failed: {e}")))?;
    if body.is_empty() {
        if status.is_success() {
            return Ok(());
        }
        return Err(UpstreamError::Protocol(format!("HTTP {status}")));
    }
    match Message::parse(&body) {
        Ok(mut msg) => {
            // An error answering this POST without the request's id (servers that reject a
            // request before reading it, e.g. "no session" with `id: null`) still answers it.
            if let (Kind::Error, Some(id)) = (msg.kind(), request_id) {
                if msg.id().is_none_or(Value::is_null) {
                    msg.set_id(serde_json::json!(id));
                }
            }
            inner.dispatch(msg, request_id);
            Ok(())
        }
        Err(_) if !status.is_success() => Err(UpstreamError::Protocol(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ))),
        Err(e) => Err(UpstreamError::Protocol(format!(
            "the reply is not JSON-RPC: {}",
            e.error.message
        ))),
    }
}

/// Read an SSE body, dispatching each `message` event. Says whether the reply to `related`
/// came, and the last event id seen with the server's `retry` hint, for resuming.
pub(crate) async fn read_sse(
    resp: reqwest::Response,
    inner: &Arc<Inner>,
    related: Option<u64>,
) -> SseEnd {
    use eventsource_stream::Eventsource;
    let mut events = resp.bytes_stream().eventsource();
    let mut last: Option<(String, Option<Duration>)> = None;
    let mut answered = false;
    while let Some(ev) = events.next().await {
        match ev {
            Ok(ev) => {
                if !ev.id.is_empty() {
                    let retry = ev.retry.or(last.as_ref().and_then(|(_, r)| *r));
                    // A priming event (an id, no data) opens a reply stream.
                    if last.is_none() && ev.data.trim().is_empty() {
                        if let Some(id) = related {
                            inner.stream_event(id, false, retry);
                        }
                    }
                    last = Some((ev.id.clone(), retry));
                }
                if ev.data.trim().is_empty() || (ev.event != "message" && !ev.event.is_empty()) {
                    continue;
                }
                match Message::parse(ev.data.as_bytes()) {
                    Ok(msg) => {
                        if related.is_some()
                            && matches!(msg.kind(), Kind::Response | Kind::Error)
                            && msg.id().and_then(Value::as_u64) == related
                        {
                            answered = true;
                        }
                        inner.dispatch(msg, related)
                    }
                    Err(e) => {
                        tracing::warn!(upstream = %inner.label, "bad SSE message: {}", e.error.message)
                    }
                }
            }
            Err(e) => {
                tracing::debug!(upstream = %inner.label, "SSE stream ended: {e}");
                break;
            }
        }
    }
    SseEnd { answered, last }
}

/// How an SSE body ended.
pub(crate) struct SseEnd {
    /// The reply to the related request came on it.
    pub answered: bool,
    /// The last event id and the `retry` hint.
    pub last: Option<(String, Option<Duration>)>,
}

#[cfg(test)]
mod header_value_tests {
    use super::header_value;

    /// The examples of the 2026-07-28 Streamable HTTP page, "Value Encoding".
    #[test]
    fn values_are_encoded_as_the_spec_shows() {
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(
            header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }
}
