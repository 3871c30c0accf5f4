//! The Streamable HTTP transport (2025-03-26 … 2025-11-25): one POST per message, replies as JSON
//! or as an SSE stream, `Mcp-Session-Id` and `MCP-Protocol-Version` headers, the GET stream for
//! unrelated server messages, and DELETE to end the session.

use crate::core::{Ended, ExtraHeaders, Inner};
use crate::error::{ConnectError, ProtocolError, UpstreamError};
use futures_util::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE,
};
use reqwest::StatusCode;
use serde_json::Value;
use sluice_config::UpstreamSpec;
use sluice_core::{headers, Kind, Message};
use sluice_http::{Client, Reply};
use sluice_oauth::{Challenge, Identity};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// `Mcp-Session-Id` and `MCP-Protocol-Version`, on every request of a session (as names: a
/// header looked up or inserted by its text is parsed every time).
const SESSION_ID: HeaderName = HeaderName::from_static(headers::SESSION_ID);
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);

/// How long opening a session waits for the server to answer its GET stream (a server that
/// holds the answer back is not waited for longer; the stream opens when it answers).
const GET_STREAM_WAIT: Duration = Duration::from_secs(1);

pub(crate) fn header_map(spec: &UpstreamSpec) -> Result<HeaderMap, UpstreamError> {
    let mut headers = HeaderMap::new();
    for (k, v) in &spec.headers {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|e| ConnectError::BadHeaderName {
                name: k.clone(),
                source: e.into(),
            })?;
        let value = HeaderValue::from_str(v).map_err(|e| ConnectError::BadHeaderValue {
            name: k.clone(),
            source: e.into(),
        })?;
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
    add_extra(&mut map, extra);
    rb.headers(map)
}

/// [`with_extra`] onto a header map.
fn add_extra(map: &mut HeaderMap, extra: &ExtraHeaders) {
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
    client: Client,
    /// Parsed once (reqwest would parse a string on every request).
    url: reqwest::Url,
    headers: HeaderMap,
    state: Mutex<State>,
    /// The OAuth identity whose bearer token every request carries.
    identity: Option<Arc<Identity>>,
    /// Without an identity: the `Authorization` every request that sets none carries (an
    /// `exchange` upstream's token for this connection's caller, or the gateway's own for its
    /// control connection), replaced as it is exchanged again.
    bearer: Mutex<Option<Arc<HeaderValue>>>,
}

pub(crate) struct HttpWire {
    core: Arc<Core>,
}

impl HttpWire {
    pub(crate) fn new(
        spec: &UpstreamSpec,
        identity: Option<Arc<Identity>>,
        bearer: Option<Arc<HeaderValue>>,
    ) -> Result<HttpWire, UpstreamError> {
        let url = reqwest::Url::parse(&spec.url).map_err(|e| ConnectError::BadUrl {
            url: spec.url.clone(),
            source: e.into(),
        })?;
        Ok(HttpWire {
            core: Arc::new(Core {
                client: Client::for_url(&url),
                url,
                headers: header_map(spec)?,
                state: Mutex::new(State {
                    session: None,
                    version: None,
                    modern: false,
                    posts: std::collections::HashMap::new(),
                }),
                identity,
                bearer: Mutex::new(bearer),
            }),
        })
    }

    /// Carry `bearer` from now on (see `Core::bearer`); the same value again costs a pointer
    /// comparison.
    pub(crate) fn set_bearer(&self, bearer: &Arc<HeaderValue>) {
        let mut held = self.core.bearer.lock();
        if !held.as_ref().is_some_and(|h| Arc::ptr_eq(h, bearer)) {
            *held = Some(bearer.clone());
        }
    }

    pub(crate) fn set_protocol_version(&self, v: &str) {
        self.core.state.lock().version = HeaderValue::from_str(v).ok();
    }

    /// Use an upstream session opened elsewhere (another replica of a cluster): its
    /// `Mcp-Session-Id` and negotiated version go on every request, no `initialize`.
    pub(crate) fn adopt(&self, session: &str, version: &str) -> Result<(), UpstreamError> {
        let bad = |e: reqwest::header::InvalidHeaderValue| ConnectError::BadSharedSession {
            source: e.into(),
        };
        let mut st = self.core.state.lock();
        st.session = Some(HeaderValue::from_str(session).map_err(bad)?);
        st.version = Some(HeaderValue::from_str(version).map_err(bad)?);
        Ok(())
    }

    /// The upstream's `Mcp-Session-Id` and the negotiated version, when it gave a session.
    pub(crate) fn session(&self) -> Option<(String, String)> {
        let st = self.core.state.lock();
        let id = st.session.as_ref()?.to_str().ok()?.to_string();
        let v = st.version.as_ref()?.to_str().ok()?.to_string();
        Some((id, v))
    }

    /// Forget the upstream session (shutting down then sends no DELETE: it lives on for
    /// other replicas).
    pub(crate) fn forget_session(&self) {
        self.core.state.lock().session = None;
    }

    /// Speak 2026-07-28 (`on`), or go back to the handshake era after a failed probe.
    pub(crate) fn set_modern(&self, on: bool, version: &str) {
        let mut st = self.core.state.lock();
        st.modern = on;
        st.version = if on {
            HeaderValue::from_str(version).ok()
        } else {
            None
        };
    }
}

impl Core {
    /// Send a request of the session: its headers, then `add` (which win over them).
    async fn send(
        &self,
        method: reqwest::Method,
        add: HeaderMap,
        body: Option<bytes::Bytes>,
    ) -> Result<Reply, sluice_http::Error> {
        let headers = self.under_session(add);
        self.client.send(method, &self.url, headers, body).await
    }

    /// `own`, with the headers every request of the session carries that it does not set
    /// itself: the session id, the protocol version and the configured ones. The same set as
    /// the session's extended with `own`, without building the session's map first.
    fn under_session(&self, mut own: HeaderMap) -> HeaderMap {
        // A POST of an identity's upstream carries the token it read already (`authorized`).
        if !own.contains_key(AUTHORIZATION) {
            let bearer = match &self.identity {
                Some(i) => i.bearer(),
                None => self.bearer.lock().clone(),
            };
            if let Some(bearer) = bearer {
                own.insert(AUTHORIZATION, (*bearer).clone());
            }
        }
        {
            let st = self.state.lock();
            for (name, value) in [(SESSION_ID, &st.session), (PROTOCOL_VERSION, &st.version)] {
                if let Some(v) = value {
                    if !own.contains_key(&name) {
                        own.insert(name, v.clone());
                    }
                }
            }
        }
        for name in self.headers.keys() {
            if !own.contains_key(name) {
                for v in self.headers.get_all(name) {
                    own.append(name.clone(), v.clone());
                }
            }
        }
        own
    }

    /// A POST that got no response: the URL, and why.
    fn post_failed(&self, e: sluice_http::Error) -> UpstreamError {
        ConnectError::Post {
            url: self.url.to_string(),
            source: e,
        }
        .into()
    }

    /// A GET of the session's event stream (resuming after `last_event_id`).
    async fn get_stream(&self, last_event_id: Option<&str>) -> Result<Reply, sluice_http::Error> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(id) = last_event_id.and_then(|v| HeaderValue::from_str(v).ok()) {
            h.insert(headers::LAST_EVENT_ID, id);
        }
        self.send(reqwest::Method::GET, h, None).await
    }
}

/// One POST of a message, ready to go.
pub(crate) struct Post {
    core: Arc<Core>,
    inner: Arc<Inner>,
    headers: HeaderMap,
    body: bytes::Bytes,
    request_id: Option<u64>,
    is_init: bool,
    /// A modern request tracked for cancellation (removed when it ends).
    track: Option<u64>,
}

impl Post {
    /// Send it and dispatch what comes back; a failure answers the request (if it is one) with
    /// a JSON-RPC error naming the cause.
    pub(crate) async fn run(self) {
        let Post {
            core,
            inner,
            headers,
            body,
            request_id,
            is_init,
            track,
        } = self;
        let outcome = post(&core, &inner, headers, body, request_id, is_init).await;
        if let Err(e) = outcome {
            // After some failures the connection is of no use: the upstream ended the session,
            // or a person must sign in (its slot reports the reason and tries again).
            let ends = match &e {
                UpstreamError::SessionEnded => Some(Ended::Session),
                UpstreamError::Auth(sluice_oauth::AuthError::NeedsLogin(_)) => {
                    Some(Ended::Because(e.to_string()))
                }
                _ => None,
            };
            match (request_id, ends) {
                // The waiting call gets the cause (answered with a JSON-RPC error naming it).
                (Some(id), Some(why)) => inner.fail_and_end(id, e, why),
                (Some(id), None) => inner.fail(id, e),
                (None, ends) => {
                    if inner.is_closed() {
                        // A notification still in flight when the connection was shut down
                        // (the session is gone): expected, not worth a warning.
                        tracing::debug!(upstream = %inner.label, "sending a message failed after the shutdown: {e}")
                    } else {
                        tracing::warn!(upstream = %inner.label, "sending a message failed: {e}")
                    }
                    if let Some(why) = ends {
                        inner.end(why);
                    }
                }
            }
        }
        if let Some(id) = track {
            core.state.lock().posts.remove(&id);
        }
    }
}

impl HttpWire {
    /// Send `msg` in a task of its own.
    pub(crate) fn send(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Result<(), UpstreamError> {
        let Some(post) = self.prepare(inner, msg, extra) else {
            return Ok(());
        };
        let track = post.track;
        let task = tokio::spawn(post.run());
        if let Some(id) = track {
            let mut st = self.core.state.lock();
            if !task.is_finished() {
                st.posts.insert(id, task.abort_handle());
            }
        }
        Ok(())
    }

    /// The POST of a handshake-era request, for the caller to run itself (no task of its own,
    /// no hand-over of the reply between tasks); `None` for anything else (sent with
    /// [`HttpWire::send`]).
    pub(crate) fn inline_request(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Option<Post> {
        if msg.kind() != Kind::Request || self.core.state.lock().modern {
            return None;
        }
        self.prepare(inner, msg, extra)
    }

    /// The POST that carries `msg` (`None`: nothing is sent, a 2026-07-28 notification).
    fn prepare(&self, inner: &Arc<Inner>, msg: &Message, extra: &ExtraHeaders) -> Option<Post> {
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
            return None;
        }
        let mut h = HeaderMap::with_capacity(4 + extra.0.len());
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if modern {
            if let Ok(v) = HeaderValue::from_str(msg.method().unwrap_or("")) {
                h.insert(headers::METHOD, v);
            }
            let name = match msg.method() {
                Some("tools/call") | Some("prompts/get") => msg.param_str("name"),
                Some("resources/read") => msg.param_str("uri"),
                Some("tasks/get" | "tasks/update" | "tasks/cancel") => msg.param_str("taskId"),
                _ => None,
            };
            if let Some(v) = name.and_then(|n| HeaderValue::from_str(&header_value(n)).ok()) {
                h.insert(headers::NAME, v);
            }
        }
        add_extra(&mut h, extra);
        let request_id = match msg.kind() {
            Kind::Request => msg.id().and_then(Value::as_u64),
            _ => None,
        };
        Some(Post {
            core: self.core.clone(),
            inner: inner.clone(),
            headers: h,
            body: bytes::Bytes::from(msg.to_json()),
            request_id,
            is_init: msg.method() == Some("initialize"),
            track: modern.then_some(request_id).flatten(),
        })
    }

    /// POST one notification and wait for the server's answer (202), for the one message
    /// whose order matters to what follows: `notifications/initialized`.
    pub(crate) async fn send_and_wait(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
    ) -> Result<(), UpstreamError> {
        let mut h = HeaderMap::with_capacity(2);
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = bytes::Bytes::from(msg.to_json());
        post(&self.core, inner, h, body, None, false).await
    }

    /// Open the GET stream for messages unrelated to any request (405 = the server has none),
    /// and wait (at most [`GET_STREAM_WAIT`]) until the server has answered it, so that it is
    /// open before the session's first request: a server then never takes a GET arriving
    /// during a request for the client resuming that request's stream.
    pub(crate) async fn open_get_stream(&self, inner: &Arc<Inner>) {
        let inner = inner.clone();
        let core = self.core.clone();
        let (opened, answered) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let resp = core.get_stream(None).await;
            let _ = opened.send(());
            match resp {
                Ok(resp) if resp.status.is_success() => {
                    let _ = read_sse(resp, &inner, None).await;
                }
                Ok(resp) => {
                    tracing::debug!(upstream = %inner.label, status = %resp.status, "no GET stream")
                }
                Err(e) => tracing::debug!(upstream = %inner.label, "GET stream failed: {e}"),
            }
        });
        let _ = tokio::time::timeout(GET_STREAM_WAIT, answered).await;
    }

    pub(crate) async fn shutdown(&self) {
        {
            let mut st = self.core.state.lock();
            for (_, task) in st.posts.drain() {
                task.abort();
            }
        }
        if self.core.state.lock().session.is_none() {
            return;
        }
        let delete = self
            .core
            .send(reqwest::Method::DELETE, HeaderMap::new(), None);
        let _ = tokio::time::timeout(Duration::from_secs(2), delete).await;
    }
}

async fn post(
    core: &Arc<Core>,
    inner: &Arc<Inner>,
    headers: HeaderMap,
    body: bytes::Bytes,
    request_id: Option<u64>,
    is_init: bool,
) -> Result<(), UpstreamError> {
    let resp = match &core.identity {
        None => core
            .send(reqwest::Method::POST, headers, Some(body))
            .await
            .map_err(|e| core.post_failed(e))?,
        Some(identity) => authorized(core, identity, headers, body).await?,
    };
    let status = resp.status;
    if is_init && status.is_success() {
        if let Some(s) = resp.headers.get(SESSION_ID) {
            core.state.lock().session = Some(s.clone());
        }
    }
    if status == StatusCode::ACCEPTED {
        return Ok(());
    }
    if status == StatusCode::NOT_FOUND && core.state.lock().session.is_some() {
        return Err(UpstreamError::SessionEnded);
    }
    let ctype = resp
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ctype.starts_with("text/event-stream") {
        // Boxed: a JSON reply's future need not hold a stream's.
        return Box::pin(sse_reply(core, inner, resp, request_id)).await;
    }
    let body = resp.bytes().await.map_err(ProtocolError::Body)?;
    if body.is_empty() {
        if status.is_success() {
            return Ok(());
        }
        return Err(UpstreamError::Status {
            status: status.as_u16(),
            body: None,
        });
    }
    match Message::parse_reply(&body) {
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
        Err(_) if !status.is_success() => Err(UpstreamError::Status {
            status: status.as_u16(),
            body: Some(String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()),
        }),
        // A notification (or a reply) is accepted with a 202 and no body; a server that
        // accepts it with a 200 and a body that is no message (some answer `{"result": {}}`)
        // has still accepted it.
        Err(e) if request_id.is_none() => {
            tracing::debug!(upstream = %inner.label, "ignored the body of an accepted notification: {}", e.error.message);
            Ok(())
        }
        Err(e) => Err(ProtocolError::NotJsonRpc(e.error.message).into()),
    }
}

/// POST with the identity's bearer token; a 401, or a 403 `insufficient_scope`, is handed to the
/// identity (refresh, step-up, sign in again) and the POST sent again, a bounded number of times.
async fn authorized(
    core: &Arc<Core>,
    identity: &Arc<Identity>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Result<Reply, UpstreamError> {
    // One first try, then at most one more per step-up allowed and one after a refresh.
    for _ in 0..=sluice_oauth::identity::STEP_UP_LIMIT + 1 {
        // The token read once: sent, and named to the identity if it is refused.
        let used = identity.bearer();
        let mut attempt = headers.clone();
        if let Some(b) = &used {
            attempt.insert(AUTHORIZATION, (**b).clone());
        }
        let resp = core
            .send(reqwest::Method::POST, attempt, Some(body.clone()))
            .await
            .map_err(|e| core.post_failed(e))?;
        let status = resp.status;
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            identity.accepted();
            return Ok(resp);
        }
        let challenge = Challenge::parse(
            resp.headers
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        if status == StatusCode::FORBIDDEN && !challenge.insufficient_scope() {
            return Ok(resp);
        }
        identity
            .refused(status.as_u16(), &challenge, used.as_deref())
            .await?;
    }
    Err(UpstreamError::Auth(sluice_oauth::AuthError::RetryLimit(
        sluice_oauth::identity::STEP_UP_LIMIT,
    )))
}

/// The rest of a POST answered with an SSE stream: each message dispatched; a stream that
/// ends before the reply is resumed with `Last-Event-ID` (bounded).
async fn sse_reply(
    core: &Arc<Core>,
    inner: &Arc<Inner>,
    resp: Reply,
    request_id: Option<u64>,
) -> Result<(), UpstreamError> {
    let mut end = read_sse(resp, inner, request_id).await;
    // The stream ended before the reply: resume it with `Last-Event-ID` (bounded).
    if let Some(id) = request_id {
        for _ in 0..5 {
            // Answered (on this stream, or on another one) or closed: nothing to resume.
            if end.answered || inner.is_closed() || !inner.is_pending(id) {
                break;
            }
            let Some((event_id, retry)) = end.last.clone() else {
                break;
            };
            inner.stream_event(id, true, retry);
            tokio::time::sleep(retry.unwrap_or(Duration::from_millis(100))).await;
            match core.get_stream(Some(&event_id)).await {
                Ok(r) if r.status.is_success() => {
                    let next = read_sse(r, inner, request_id).await;
                    end = SseEnd {
                        answered: next.answered,
                        last: next.last.or(end.last),
                    };
                }
                Ok(r) => {
                    return Err(ProtocolError::ResumeStatus {
                        status: r.status.as_u16(),
                    }
                    .into())
                }
                Err(e) => return Err(ProtocolError::Resume(e).into()),
            }
        }
        if !end.answered && inner.is_pending(id) {
            return Err(ProtocolError::NoReply.into());
        }
    }
    Ok(())
}

/// Read an SSE body, dispatching each `message` event. Says whether the reply to `related`
/// came, and the last event id seen with the server's `retry` hint, for resuming.
pub(crate) async fn read_sse(resp: Reply, inner: &Arc<Inner>, related: Option<u64>) -> SseEnd {
    use eventsource_stream::Eventsource;
    let mut events = resp.stream().eventsource();
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
                match Message::parse_reply(ev.data.as_bytes()) {
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
