//! The 2026-07-28 era toward clients over Streamable HTTP: requests that carry their protocol
//! version and capabilities in `_meta` and need no session. Checks the version (-32022) and the
//! mirrored headers (-32020), answers `server/discover`, runs every other request through the
//! same pipeline as a legacy one (on a session that lives for that request), marks results with
//! `resultType` (and `ttlMs` / `cacheScope` where cacheable), turns requests an upstream sends to
//! the client (sampling, elicitation, roots) into an `input_required` result whose signed
//! `requestState` the retry brings back (multi round-trip requests), serves
//! `subscriptions/listen`, and treats a closed response stream as cancellation.

use crate::channel::Out;
use crate::http::{header_str, is_reply, json_error, json_reply, sse_headers, KEEPALIVE, PROTOCOL};
use crate::listeners::Listener;
use crate::proxy;
use crate::session::{HttpStreams, Init, Outbound, Session};
use crate::state::State;
use crate::stream::StreamBuf;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use parking_lot::Mutex;
use ring::hmac;
use serde_json::{json, Map, Value};
use sluice_core::version::{self, meta};
use sluice_core::{codes, Kind, Message, Principal, RpcError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// How Sluice's own `requestState` values begin; any other state belongs to a 2026-07-28
/// upstream and goes to it untouched.
const STATE_PREFIX: &str = "sluice1.";

/// How long a client has to answer an `input_required` result.
const STATE_TTL: Duration = Duration::from_secs(300);
/// Calls waiting for a client's input at once; the oldest is cancelled beyond this.
const MAX_PARKED: usize = 10_000;

/// The methods a modern client may call (anything else: HTTP 404, -32601).
const METHODS: &[&str] = &[
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
];

/// Results clients may cache (`ttlMs`, `cacheScope`).
const CACHEABLE: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// Does this POST speak the modern era? It carries no session, is not `initialize`, and its
/// `_meta` (or `MCP-Protocol-Version` header) names a modern version, or it is `server/discover`.
pub fn detect(headers: &HeaderMap, msg: &Message) -> bool {
    if headers.contains_key(crate::http::SESSION) {
        return false;
    }
    let modern_header = header_str(headers, PROTOCOL).is_some_and(version::is_modern);
    if msg.method() == Some("initialize") {
        // A legacy handshake, unless it comes dressed as a modern request (then: 404).
        return modern_header
            || meta_str(msg, meta::PROTOCOL_VERSION).is_some_and(version::is_modern);
    }
    meta_str(msg, meta::PROTOCOL_VERSION).is_some()
        || msg.method() == Some("server/discover")
        || modern_header
}

/// The request envelope every modern request must carry: `params._meta` with the protocol
/// version and the client's capabilities (-32602 otherwise). Returns the version.
fn envelope(msg: &Message) -> Result<String, RpcError> {
    let Some(m) = meta_of(msg) else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta is required ({} and {})",
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES
        )));
    };
    let Some(v) = m.get(meta::PROTOCOL_VERSION).and_then(Value::as_str) else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: _meta is missing {}",
            meta::PROTOCOL_VERSION
        )));
    };
    if !m
        .get(meta::CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: _meta is missing {}",
            meta::CLIENT_CAPABILITIES
        )));
    }
    Ok(v.to_string())
}

/// The log level a request opts in to (`_meta` `logLevel`), as a rank: no level, no log
/// messages (the 2026-07-28 rule).
fn log_rank(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .map(|p| p as u8)
}

fn wanted_log_rank(msg: &Message) -> Option<u8> {
    meta_str(msg, meta::LOG_LEVEL).and_then(log_rank)
}

fn meta_of(msg: &Message) -> Option<&Map<String, Value>> {
    msg.params()?.get("_meta")?.as_object()
}

fn meta_str<'a>(msg: &'a Message, key: &str) -> Option<&'a str> {
    meta_of(msg)?.get(key)?.as_str()
}

/// What the modern era keeps between a call's rounds: the calls waiting for a client's input,
/// and the key that signs their `requestState`.
pub struct Rounds {
    key: hmac::Key,
    parked: Mutex<HashMap<String, Parked>>,
}

impl Default for Rounds {
    fn default() -> Rounds {
        let rng = ring::rand::SystemRandom::new();
        Rounds {
            key: hmac::Key::generate(hmac::HMAC_SHA256, &rng).expect("the system RNG works"),
            parked: Mutex::new(HashMap::new()),
        }
    }
}

/// A call waiting for the client's answers to its input requests.
struct Parked {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Out>,
    guard: CancelGuard,
    /// Input request key → the id Sluice gave the upstream's request, and the request itself.
    pending: Vec<(String, Value)>,
    expires: Instant,
}

/// Cancels the call (the upstream hears `notifications/cancelled`) when dropped armed: the
/// client closed the response stream, or a parked call expired.
struct CancelGuard {
    st: Arc<State>,
    session: Arc<Session>,
    id: Value,
    work: tokio::task::AbortHandle,
    armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(session = %self.session.id, "modern request cancelled: its response stream closed");
            crate::proxy::forward::cancel(
                &self.st,
                &self.session,
                &self.id,
                Some(&json!("the client closed the response stream")),
            );
            self.work.abort();
        }
    }
}

impl Rounds {
    fn sign(&self, payload: &Value) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = b64.encode(payload.to_string());
        let tag = hmac::sign(&self.key, body.as_bytes());
        format!("{STATE_PREFIX}{body}.{}", b64.encode(tag.as_ref()))
    }

    /// The payload of a state this gateway signed, or why not.
    fn verify(&self, state: &str) -> Result<Value, &'static str> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        if state.len() > 2048 {
            return Err("it is too long");
        }
        let state = state
            .strip_prefix(STATE_PREFIX)
            .ok_or("it is not a Sluice request state")?;
        let (body, tag) = state
            .split_once('.')
            .ok_or("it is not a Sluice request state")?;
        let tag = b64
            .decode(tag)
            .map_err(|_| "it is not a Sluice request state")?;
        hmac::verify(&self.key, body.as_bytes(), &tag).map_err(|_| {
            "its signature does not verify (it was changed, or another gateway instance issued it)"
        })?;
        let bytes = b64
            .decode(body)
            .map_err(|_| "it is not a Sluice request state")?;
        serde_json::from_slice(&bytes).map_err(|_| "it is not a Sluice request state")
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A digest of what identifies a request across its rounds: its method and its params without
/// `_meta`, `inputResponses` and `requestState`, keys sorted.
fn digest(method: &str, params: Option<&Map<String, Value>>) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&m[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for i in a {
                    canonical(i, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::from(method);
    if let Some(p) = params {
        let mut p = p.clone();
        for k in ["_meta", "inputResponses", "requestState"] {
            p.remove(k);
        }
        canonical(&Value::Object(p), &mut text);
    }
    let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn bad_request(code: i64, message: String, data: Option<Value>, id: Option<&Value>) -> Response {
    let mut e = RpcError::new(code, message);
    if let Some(d) = data {
        e = e.with_data(d);
    }
    json_error(StatusCode::BAD_REQUEST, e, id)
}

/// Decode the `=?base64?…?=` sentinel of `Mcp-Name` / `Mcp-Param-*` values.
fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(v.to_string()),
    }
}

/// The 2026-07-28 header rules: `MCP-Protocol-Version` equal to the `_meta` version, `Mcp-Method`
/// equal to the method, `Mcp-Name` equal to `params.name` / `params.uri` where required, and each
/// `Mcp-Param-{x}` a tool's `x-mcp-header` parameters call for equal to its argument.
#[allow(clippy::result_large_err)] // the error is the HTTP response itself, built once
fn check_headers(
    st: &State,
    headers: &HeaderMap,
    msg: &Message,
    requested: &str,
) -> Result<(), Response> {
    let id = msg.id();
    let method = msg.method().unwrap_or("");
    let mismatch = |m: String| {
        bad_request(
            codes::HEADER_MISMATCH,
            format!("Header mismatch: {m}"),
            None,
            id,
        )
    };
    if headers.get(PROTOCOL).is_some() && header_str(headers, PROTOCOL).is_none() {
        return Err(mismatch(
            "MCP-Protocol-Version has invalid characters".into(),
        ));
    }
    match header_str(headers, PROTOCOL) {
        None => {
            return Err(mismatch(
                "the MCP-Protocol-Version header is missing".into(),
            ))
        }
        Some(v) if v != requested => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header value '{v}' does not match body value '{requested}'"
            )))
        }
        Some(_) => {}
    }
    match headers
        .get(sluice_core::headers::METHOD)
        .map(|v| v.to_str())
    {
        None => return Err(mismatch("the Mcp-Method header is missing".into())),
        Some(Err(_)) => return Err(mismatch("Mcp-Method has invalid characters".into())),
        Some(Ok(v)) if v != method => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{v}' does not match body value '{method}'"
            )))
        }
        Some(Ok(_)) => {}
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(key) = name_key {
        let body = msg.param_str(key).unwrap_or("");
        let header = match headers.get(sluice_core::headers::NAME).map(|v| v.to_str()) {
            None => return Err(mismatch("the Mcp-Name header is missing".into())),
            Some(Err(_)) => return Err(mismatch("Mcp-Name has invalid characters".into())),
            Some(Ok(v)) => decode_header_value(v)
                .ok_or_else(|| mismatch("Mcp-Name is not valid base64".into()))?,
        };
        if header != body {
            return Err(mismatch(format!(
                "Mcp-Name header value '{header}' does not match body value '{body}'"
            )));
        }
    }
    if method == "tools/call" {
        let catalog = st.snapshot().catalog.clone();
        let name = msg.param_str("name").unwrap_or("");
        if let Some(schema) = catalog
            .tool_definition(name)
            .and_then(|t| t.get("inputSchema"))
        {
            let args = msg
                .params()
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut wanted = Vec::new();
            sluice_core::headers::header_params(schema, &args, &mut wanted);
            for (header, value) in wanted {
                let hname = sluice_core::headers::param_header(&header);
                let got = match headers.get(&hname).map(|v| v.to_str()) {
                    None => {
                        return Err(mismatch(format!(
                            "the Mcp-Param-{header} header is missing"
                        )))
                    }
                    Some(Err(_)) => {
                        return Err(mismatch(format!(
                            "Mcp-Param-{header} has invalid characters"
                        )))
                    }
                    Some(Ok(v)) => decode_header_value(v).ok_or_else(|| {
                        mismatch(format!("Mcp-Param-{header} is not valid base64"))
                    })?,
                };
                let same = match &value {
                    Value::String(s) => *s == got,
                    Value::Bool(b) => got == b.to_string(),
                    Value::Number(n) => got
                        .parse::<f64>()
                        .ok()
                        .zip(n.as_f64())
                        .is_some_and(|(a, b)| a == b),
                    _ => false,
                };
                if !same {
                    return Err(mismatch(format!(
                        "Mcp-Param-{header} header value '{got}' does not match body value {value}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Serve one modern request (the caller detected the era and authenticated the caller).
pub async fn post(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    headers: &HeaderMap,
    msg: Message,
    principal: Option<Arc<Principal>>,
) -> Response {
    match msg.kind() {
        Kind::Request => {}
        Kind::Notification => return StatusCode::ACCEPTED.into_response(),
        Kind::Response | Kind::Error => {
            return bad_request(
                codes::INVALID_REQUEST,
                "modern clients send no responses: answer input requests by retrying the request with inputResponses".into(),
                None,
                None,
            )
        }
    }
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let requested = match envelope(&msg) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e, Some(&id)),
    };
    if let Err(r) = check_headers(&st, headers, &msg, &requested) {
        return r;
    }
    if !version::is_modern(&requested) {
        return bad_request(
            codes::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version".into(),
            Some(json!({"supported": version::ALL_VERSIONS, "requested": requested})),
            Some(&id),
        );
    }
    if !METHODS.contains(&method.as_str()) {
        return json_error(
            StatusCode::NOT_FOUND,
            RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            ),
            Some(&id),
        );
    }
    if method == "server/discover" {
        return json_reply(decorate(&st, &method, discover(&st, id)));
    }
    let session = ephemeral_session(&st, Some(headers), &msg, &requested, principal);
    if method == "subscriptions/listen" {
        return listen(&st, id, &msg);
    }
    let (out, out_rx) = mpsc::unbounded_channel::<Message>();
    tokio::spawn(start(st, rounds, session, msg, out));
    respond(out_rx).await
}

/// Answer over HTTP with what a round emits: JSON when its first message is the reply (or an
/// `input_required` result), else an SSE stream of everything it emits. Dropping the response
/// (the client closed it) closes the channel, which cancels the round's call.
async fn respond(mut out_rx: mpsc::UnboundedReceiver<Message>) -> Response {
    match out_rx.recv().await {
        None => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            RpcError::internal("the call ended without a reply"),
            None,
        ),
        Some(m)
            if m.kind() == Kind::Error
                && m.error_code() == Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY) =>
        {
            let mut r = json_reply(m);
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        }
        Some(m) if is_reply(&m) => json_reply(m),
        Some(m) => sse_headers(Body::from_stream(sse_body(out_rx, Some(m))).into_response()),
    }
}

/// Run a modern request (a first attempt, or a retry bringing `requestState`) and emit its
/// notifications and its final message on `out`.
async fn start(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    session: Arc<Session>,
    msg: Message,
    out: mpsc::UnboundedSender<Message>,
) {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    if let Some(state) = msg
        .params()
        .and_then(|p| p.get("requestState"))
        .and_then(Value::as_str)
        .filter(|s| s.starts_with(STATE_PREFIX))
        .map(str::to_string)
    {
        return resume(st, rounds, session, msg, &state, out).await;
    }
    let digest = digest(&method, msg.params().and_then(Value::as_object));
    let log = wanted_log_rank(&msg);
    let msg = strip_meta(msg);
    let (tx, rx) = mpsc::unbounded_channel::<Out>();
    let work = {
        let st = st.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let outcome = proxy::client_request(&st, &session, msg, &tx).await;
            let _ = tx.send(Out::Msg(outcome.into_reply()));
        })
    };
    let guard = CancelGuard {
        st: st.clone(),
        session: session.clone(),
        id: id.clone(),
        work: work.abort_handle(),
        armed: true,
    };
    round(st, rounds, session, rx, guard, id, method, digest, log, out).await
}

/// The session of one modern request: its version, capabilities and client info from `_meta`,
/// its principal from the listener.
fn ephemeral_session(
    st: &State,
    headers: Option<&HeaderMap>,
    msg: &Message,
    requested: &str,
    principal: Option<Arc<Principal>>,
) -> Arc<Session> {
    let m = meta_of(msg);
    let init = Init {
        protocol_version: requested.to_string(),
        capabilities: m
            .and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or(json!({})),
        client_info: m
            .and_then(|m| m.get(meta::CLIENT_INFO))
            .cloned()
            .unwrap_or(Value::Null),
    };
    let buf = StreamBuf::new(0, st.snapshot().settings().replay_events.min(16) as usize);
    let session = Arc::new(Session::new(
        format!("modern-{}", uuid::Uuid::new_v4().simple()),
        init,
        Outbound::Http(HttpStreams::new(buf)),
    ));
    session.set_principal(principal);
    session.set_authorization(headers.and_then(|h| header_str(h, "authorization")));
    session
}

/// The request as hooks and upstreams see it: without the modern `_meta` keys (they are the
/// transport's; the era is a field of the hook event), so one hook serves both eras.
fn strip_meta(mut msg: Message) -> Message {
    let params = msg.params_mut();
    if let Some(m) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        for k in [
            meta::PROTOCOL_VERSION,
            meta::CLIENT_INFO,
            meta::CLIENT_CAPABILITIES,
        ] {
            m.remove(k);
        }
        if m.is_empty() {
            params.remove("_meta");
        }
    }
    msg
}

/// `server/discover`: the versions and capabilities of the gateway.
fn discover(st: &State, id: Value) -> Message {
    let init = crate::proxy::route::initialize_result(&st.snapshot(), version::LATEST_LEGACY);
    let mut capabilities = init.get("capabilities").cloned().unwrap_or(json!({}));
    if let Some(c) = capabilities.as_object_mut() {
        // Modern clients subscribe through subscriptions/listen; there is no logging/setLevel.
        if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
            r.remove("subscribe");
        }
        c.remove("logging");
    }
    let mut result = json!({
        "supportedVersions": version::ALL_VERSIONS,
        "capabilities": capabilities,
    });
    if let Some(i) = init.get("instructions") {
        result["instructions"] = i.clone();
    }
    Message::response(id, result)
}

/// Mark a reply for a modern client: `resultType`, `ttlMs` / `cacheScope` on cacheable results,
/// and the gateway's `serverInfo` in `_meta`.
fn decorate(st: &State, method: &str, mut reply: Message) -> Message {
    if reply.kind() != Kind::Response {
        return reply;
    }
    let snap = st.snapshot();
    let private = snap.auth.is_some() && !snap.policy.is_open();
    if let Some(result) = reply.result_mut().and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        if CACHEABLE.contains(&method) {
            result.entry("ttlMs").or_insert_with(|| json!(0));
            let scope = if private || method == "resources/read" {
                "private"
            } else {
                "public"
            };
            result.entry("cacheScope").or_insert_with(|| json!(scope));
        }
        let m = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = m.as_object_mut() {
            m.insert(
                meta::SERVER_INFO.into(),
                json!({"name": "sluice", "version": env!("CARGO_PKG_VERSION")}),
            );
        }
    }
    reply
}

/// Follow a call until its reply or its first request for input, emitting its notifications
/// on `out`. A request the upstream sends the client ends the round with an `input_required`
/// result and parks the call. When the receiver of `out` goes away (the client closed the
/// stream) the guard cancels the call.
#[allow(clippy::too_many_arguments)]
async fn round(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    session: Arc<Session>,
    mut rx: mpsc::UnboundedReceiver<Out>,
    mut guard: CancelGuard,
    reply_id: Value,
    method: String,
    digest: String,
    log: Option<u8>,
    out: mpsc::UnboundedSender<Message>,
) {
    loop {
        let item = tokio::select! {
            i = rx.recv() => i,
            () = out.closed() => return,
        };
        let Some(item) = item else {
            guard.armed = false;
            let err = RpcError::internal("the call ended without a reply");
            let _ = out.send(Message::error(reply_id, &err));
            return;
        };
        let Out::Msg(m) = item else { continue };
        if is_reply(&m) {
            // The call needs a capability the client lacks: it fails, and stops upstream
            // (the guard stays armed).
            guard.armed = m.error_code() == Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY);
            let mut m = m;
            m.set_id(reply_id);
            let _ = out.send(decorate(&st, &method, m));
            return;
        }
        if m.kind() == Kind::Request {
            let reply = park(&rounds, session, rx, guard, m, &reply_id, &method, digest);
            let _ = out.send(reply);
            return;
        }
        if m.method() == Some("notifications/message") {
            // Log messages only for a request that opted in, at or above its level.
            let level = m.param_str("level").and_then(log_rank).unwrap_or(0);
            if log.is_none_or(|min| level < min) {
                continue;
            }
        }
        if out.send(m).is_err() {
            return;
        }
    }
}

/// An SSE body of messages (with keep-alive comments between them), ending when the sender is
/// dropped. When the client closes the stream the body is dropped, and with it the receiver:
/// the sender sees that (`closed()`), which is how a closed stream cancels a call.
fn sse_body(
    rx: mpsc::UnboundedReceiver<Message>,
    first: Option<Message>,
) -> impl futures_util::Stream<Item = Result<axum::body::Bytes, std::convert::Infallible>> {
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
    futures_util::stream::unfold(
        (rx, first, tick),
        |(mut rx, mut first, mut tick)| async move {
            if let Some(m) = first.take() {
                return Some((Ok(event(&m)), (rx, None, tick)));
            }
            tokio::select! {
                m = rx.recv() => m.map(|m| (Ok(event(&m)), (rx, None, tick))),
                _ = tick.tick() => Some((Ok(axum::body::Bytes::from_static(b":\n\n")), (rx, None, tick))),
            }
        },
    )
}

fn event(m: &Message) -> axum::body::Bytes {
    axum::body::Bytes::from(format!("event: message\ndata: {}\n\n", m.to_json()))
}

/// Park a call that needs the client's input; answer `input_required` with every input request
/// that is already waiting (one round gathers what the upstream asked for at once).
#[allow(clippy::too_many_arguments)]
fn park(
    rounds: &Rounds,
    session: Arc<Session>,
    mut rx: mpsc::UnboundedReceiver<Out>,
    guard: CancelGuard,
    first: Message,
    reply_id: &Value,
    method: &str,
    digest: String,
) -> Message {
    let mut requests = vec![first];
    while let Ok(Out::Msg(m)) = rx.try_recv() {
        if m.kind() == Kind::Request {
            requests.push(m);
        }
        // Anything else arriving in the same instant is dropped: the round is over.
    }
    let pending: Vec<(String, Value)> = requests
        .iter()
        .filter_map(|r| {
            let key = r.id()?.as_str()?.to_string();
            let mut req = Map::new();
            req.insert("method".into(), json!(r.method().unwrap_or("")));
            if let Some(p) = r.params() {
                req.insert("params".into(), p.clone());
            }
            Some((key, Value::Object(req)))
        })
        .collect();
    let token = uuid::Uuid::new_v4().simple().to_string();
    let principal = session.principal().map(|p| p.id.clone());
    let state = rounds.sign(&json!({
        "k": token,
        "p": principal,
        "d": digest,
        "e": unix_now() + STATE_TTL.as_secs(),
    }));
    let input_requests: Map<String, Value> = pending.iter().cloned().collect();
    {
        let mut parked = rounds.parked.lock();
        let now = Instant::now();
        // Expired calls are cancelled (their guards drop armed); the table stays bounded.
        parked.retain(|_, p| p.expires > now);
        if parked.len() >= MAX_PARKED {
            if let Some(oldest) = parked
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone())
            {
                parked.remove(&oldest);
            }
        }
        parked.insert(
            token,
            Parked {
                session,
                rx,
                guard,
                pending,
                expires: now + STATE_TTL,
            },
        );
    }
    tracing::debug!(method, "modern call waits for the client's input");
    Message::response(
        reply_id.clone(),
        json!({
            "resultType": "input_required",
            "inputRequests": input_requests,
            "requestState": state,
            "_meta": {meta::SERVER_INFO: {"name": "sluice", "version": env!("CARGO_PKG_VERSION")}},
        }),
    )
}

/// A retry carrying `requestState`: verify it, hand the client's answers to the waiting
/// upstream requests, and follow the call on.
async fn resume(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    session: Arc<Session>,
    msg: Message,
    state: &str,
    out: mpsc::UnboundedSender<Message>,
) {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let invalid = |why: &str| {
        let _ = out.send(Message::error(
            id.clone(),
            &RpcError::invalid_params(format!("Invalid requestState: {why}")),
        ));
    };
    let payload = match rounds.verify(state) {
        Ok(p) => p,
        Err(why) => return invalid(why),
    };
    let digest = digest(&method, msg.params().and_then(Value::as_object));
    if payload["e"].as_u64().unwrap_or(0) < unix_now() {
        return invalid("it has expired");
    }
    if payload["d"] != json!(digest) {
        return invalid("it belongs to another request (method or params differ)");
    }
    let principal = session.principal().map(|p| p.id.clone());
    if payload["p"] != json!(principal) {
        return invalid("it was issued to another principal");
    }
    let key = payload["k"].as_str().unwrap_or("");
    let Some(parked) = rounds.parked.lock().remove(key) else {
        return invalid("the call it continues is gone (answered already, expired, or on another gateway instance)");
    };
    let responses = msg
        .params()
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Parked {
        session: call_session,
        rx,
        guard,
        pending,
        ..
    } = parked;
    let mut missing = Vec::new();
    for (key, request) in pending {
        match responses.get(&key) {
            Some(answer) => crate::proxy::inbound::relay_client_reply(
                &call_session,
                Message::response(json!(key), answer.clone()),
            ),
            None => missing.push((key, request)),
        }
    }
    if !missing.is_empty() {
        // Ask again for what is still missing (the spec's advice), under a fresh state.
        let first = {
            let (key, req) = &missing[0];
            Message::request(
                json!(key),
                req["method"].as_str().unwrap_or(""),
                req.get("params").cloned(),
            )
        };
        let (tx, rx2) = mpsc::unbounded_channel::<Out>();
        for (key, req) in missing.iter().skip(1) {
            let _ = tx.send(Out::Msg(Message::request(
                json!(key),
                req["method"].as_str().unwrap_or(""),
                req.get("params").cloned(),
            )));
        }
        drop(tx);
        // Re-park with the original receiver; the extra requests ride in front of it.
        let merged = merge(rx2, rx);
        let _ = out.send(park(
            &rounds,
            call_session,
            merged,
            guard,
            first,
            &id,
            &method,
            digest,
        ));
        return;
    }
    let log = wanted_log_rank(&msg);
    round(
        st,
        rounds,
        call_session,
        rx,
        guard,
        id,
        method,
        digest,
        log,
        out,
    )
    .await
}

/// One receiver that yields everything of `a`, then everything of `b`.
fn merge(
    mut a: mpsc::UnboundedReceiver<Out>,
    mut b: mpsc::UnboundedReceiver<Out>,
) -> mpsc::UnboundedReceiver<Out> {
    let (tx, rx) = mpsc::unbounded_channel();
    while let Ok(m) = a.try_recv() {
        let _ = tx.send(m);
    }
    tokio::spawn(async move {
        while let Some(m) = b.recv().await {
            if tx.send(m).is_err() {
                return;
            }
        }
    });
    rx
}

/// `subscriptions/listen` over HTTP: the acknowledgement, then the notifications asked for,
/// on one SSE stream until the client closes it.
fn listen(st: &State, id: Value, msg: &Message) -> Response {
    let (ack, rx) = subscribe(st, id, msg);
    let body = Body::from_stream(sse_body(rx, Some(ack)));
    sse_headers(body.into_response())
}

/// Register a listen stream: its acknowledgement (the notification types Sluice honours of
/// those asked for), and the receiver of its notifications.
fn subscribe(st: &State, id: Value, msg: &Message) -> (Message, mpsc::UnboundedReceiver<Message>) {
    let filter = msg
        .params()
        .and_then(|p| p.get("notifications"))
        .cloned()
        .unwrap_or(json!({}));
    let want = |k: &str| filter.get(k).and_then(Value::as_bool).unwrap_or(false);
    let (tools, prompts, resources) = (
        want("toolsListChanged"),
        want("promptsListChanged"),
        want("resourcesListChanged"),
    );
    let mut honoured = Map::new();
    for (k, on) in [
        ("toolsListChanged", tools),
        ("promptsListChanged", prompts),
        ("resourcesListChanged", resources),
    ] {
        if on {
            honoured.insert(k.into(), json!(true));
        }
    }
    // Resource updates: for the URIs an upstream serves, Sluice subscribes upstream (once per
    // URI) and relays the updates; URIs nobody serves are left out of the acknowledgement.
    let catalog = st.snapshot().catalog.clone();
    let mut uris = std::collections::HashSet::new();
    for uri in filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some(slot) = crate::proxy::route::resource_slot(&catalog, uri) {
            slot.watch_resource(uri);
            uris.insert(uri.to_string());
        }
    }
    if !uris.is_empty() {
        let mut list: Vec<&String> = uris.iter().collect();
        list.sort();
        honoured.insert("resourceSubscriptions".into(), json!(list));
    }
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let ack = Message::notification(
        "notifications/subscriptions/acknowledged",
        Some(json!({"notifications": honoured, "_meta": {meta::SUBSCRIPTION_ID: id}})),
    );
    st.rt.listeners.add(Listener {
        id,
        tools,
        prompts,
        resources,
        uris,
        tx,
    });
    (ack, rx)
}

/// The modern era on stdio: requests carry `_meta` and need no `initialize`; each runs on its
/// own session and writes its messages to stdout; `notifications/cancelled` cancels one (and
/// ends a `subscriptions/listen` stream).
#[derive(Default)]
pub struct Stdio {
    running: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
}

impl Stdio {
    /// Is this message for the modern side: a request naming a modern version in `_meta` (or
    /// `server/discover`), or the cancellation of one?
    pub fn wants(&self, msg: &Message) -> bool {
        match msg.kind() {
            Kind::Request => {
                meta_str(msg, meta::PROTOCOL_VERSION).is_some()
                    || msg.method() == Some("server/discover")
            }
            Kind::Notification => msg.method() == Some("notifications/cancelled"),
            _ => false,
        }
    }

    /// Serve one modern message; everything it produces goes to `out`.
    pub fn handle(
        &self,
        st: &Arc<State>,
        rounds: &Arc<Rounds>,
        msg: Message,
        out: &mpsc::UnboundedSender<Out>,
    ) {
        let send = |m: Message| {
            let _ = out.send(Out::Msg(m));
        };
        if msg.kind() == Kind::Notification {
            let key = msg
                .params()
                .and_then(|p| p.get("requestId"))
                .map(crate::session::id_key);
            if let Some(task) = key.and_then(|k| self.running.lock().remove(&k)) {
                task.abort();
            }
            return;
        }
        let id = msg.id().cloned().unwrap_or(Value::Null);
        let method = msg.method().unwrap_or("").to_string();
        let requested = match envelope(&msg) {
            Ok(v) => v,
            Err(e) => return send(Message::error(id, &e)),
        };
        if !version::is_modern(&requested) {
            let e = RpcError::new(
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            )
            .with_data(json!({"supported": version::ALL_VERSIONS, "requested": requested}));
            return send(Message::error(id, &e));
        }
        if !METHODS.contains(&method.as_str()) {
            let e = RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            );
            return send(Message::error(id, &e));
        }
        if method == "server/discover" {
            return send(decorate(st, &method, discover(st, id)));
        }
        let key = crate::session::id_key(&id);
        let (msg_out, mut msg_rx) = mpsc::unbounded_channel::<Message>();
        if method == "subscriptions/listen" {
            let (ack, rx) = subscribe(st, id, &msg);
            send(ack);
            msg_rx = rx;
            drop(msg_out);
        } else {
            let principal = Some(Arc::new(Principal::stdio()));
            let session = ephemeral_session(st, None, &msg, &requested, principal);
            tokio::spawn(start(st.clone(), rounds.clone(), session, msg, msg_out));
        }
        // Aborting the forwarder drops the receiver, which cancels the round's call.
        let out = out.clone();
        let running = self.running.clone();
        let done_key = key.clone();
        let forward = tokio::spawn(async move {
            while let Some(m) = msg_rx.recv().await {
                if out.send(Out::Msg(m)).is_err() {
                    break;
                }
            }
            running.lock().remove(&done_key);
        });
        self.running.lock().insert(key, forward.abort_handle());
    }
}
