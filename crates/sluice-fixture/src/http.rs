//! The Streamable HTTP transport at `/mcp`, both eras on one endpoint. Handshake era (spec
//! 2025-11-25): sessions (`Mcp-Session-Id`), POST answered with JSON or, when the handler sends
//! related messages first, an SSE stream; GET for the standalone stream (or `Last-Event-ID`
//! resumption); DELETE to end a session. Modern era (2026-07-28, a POST without a session that
//! carries the `_meta` envelope, a modern `MCP-Protocol-Version` or `server/discover`): the
//! standard headers are checked against the body (`-32020`), each request stands alone, its
//! SSE stream has no event ids, and closing that stream cancels the request. Host/Origin
//! validation when bound to loopback.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::handlers;
use crate::protocol::{self, Incoming, ModernMeta, RpcError, MODERN_VERSION};
use crate::session::{Era, EraMode, Fixture, ModernReq, Out, Session};
use crate::sse::Streams;
use crate::sync::lock;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const LAST_EVENT_ID: &str = "last-event-id";
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One HTTP session: the protocol session and its SSE streams.
struct HttpSession {
    core: Arc<Session>,
    streams: Arc<Mutex<Streams>>,
}

impl HttpSession {
    /// Priming events (empty data) only go to clients of 2025-11-25 or later.
    fn priming(&self) -> bool {
        self.core.protocol_version().as_str() >= "2025-11-25"
    }
}

struct HttpState {
    fixture: Arc<Fixture>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    check_host: bool,
}

/// Serve Streamable HTTP on `addr` until the process ends.
pub(crate) async fn run(fixture: Arc<Fixture>, addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    eprintln!("sluice-fixture: listening on http://{local}/mcp");
    let state = Arc::new(HttpState {
        fixture,
        sessions: Mutex::new(HashMap::new()),
        check_host: local.ip().is_loopback(),
    });
    let app = Router::new()
        .route(
            "/mcp",
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .with_state(state);
    axum::serve(listener, app).await
}

/// A JSON-RPC error response for request `id` with `status`.
fn rpc_error(status: StatusCode, id: &Value, error: &RpcError) -> Response {
    json_response(status, &protocol::error_response(id, error))
}

/// The HTTP status of a modern error response (`basic/transports/streamable-http`).
fn modern_status(code: i64) -> StatusCode {
    match code {
        protocol::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        protocol::HEADER_MISMATCH
        | protocol::MISSING_REQUIRED_CLIENT_CAPABILITY
        | protocol::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// A JSON-RPC error body with a null id.
fn http_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message }
    });
    json_response(status, &body)
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An SSE response whose body is what arrives on `rx`, with keep-alive comments when idle.
/// Dropping the body (the client went away) closes `rx`, which the sender can observe.
fn sse_response(rx: UnboundedReceiver<Bytes>) -> Response {
    let start = tokio::time::Instant::now() + KEEP_ALIVE;
    let ticker = tokio::time::interval_at(start, KEEP_ALIVE);
    let body = futures_util::stream::unfold((rx, ticker), |(mut rx, mut ticker)| async move {
        let chunk = tokio::select! {
            biased;
            chunk = rx.recv() => chunk?,
            _ = ticker.tick() => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok::<_, Infallible>(chunk), (rx, ticker)))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the comma-separated `Accept` header lists `mime` (or a wildcard covering it).
fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    let family = format!("{}/*", mime.split('/').next().unwrap_or(""));
    headers.get_all(header::ACCEPT).iter().any(|v| {
        v.to_str().unwrap_or("").split(',').any(|part| {
            let media = part
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            media == mime || media == "*/*" || media == family
        })
    })
}

/// Whether `host` (`name[:port]`) names the loopback interface.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = if host.starts_with('[') {
        host.split(']').next().map(|n| format!("{n}]"))
    } else {
        host.split(':').next().map(str::to_string)
    };
    matches!(name.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

/// DNS-rebinding protection: on a loopback listener, Host and Origin must be loopback names.
/// Returns the rejection to send, if any.
fn check_host(state: &HttpState, headers: &HeaderMap) -> Option<Response> {
    if !state.check_host {
        return None;
    }
    let host_ok = header_str(headers, header::HOST).is_none_or(is_loopback_host);
    let origin_ok = header_str(headers, header::ORIGIN).is_none_or(|origin| {
        origin
            .split_once("://")
            .is_some_and(|(_, rest)| is_loopback_host(rest.split('/').next().unwrap_or("")))
    });
    (!(host_ok && origin_ok)).then(|| {
        http_error(
            StatusCode::FORBIDDEN,
            -32000,
            "Forbidden: Host/Origin is not a loopback address",
        )
    })
}

/// The session named by the `Mcp-Session-Id` header (400 when missing, 404 when unknown).
fn find_session(state: &HttpState, headers: &HeaderMap) -> Result<Arc<HttpSession>, Box<Response>> {
    let Some(id) = header_str(headers, SESSION_HEADER) else {
        return Err(Box::new(http_error(
            StatusCode::BAD_REQUEST,
            -32000,
            "Bad Request: missing Mcp-Session-Id header",
        )));
    };
    lock(&state.sessions).get(id).cloned().ok_or_else(|| {
        Box::new(http_error(
            StatusCode::NOT_FOUND,
            -32001,
            "Session not found",
        ))
    })
}

fn new_session(state: &HttpState) -> (String, Arc<HttpSession>) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let streams = Arc::new(Mutex::new(Streams::default()));
    let for_unrelated = streams.clone();
    let core = Session::new(
        state.fixture.clone(),
        Some(id.clone()),
        Box::new(move |msg| {
            if lock(&for_unrelated).push_standalone(&msg) {
                None
            } else {
                Some(msg)
            }
        }),
    );
    let session = Arc::new(HttpSession { core, streams });
    lock(&state.sessions).insert(id.clone(), session.clone());
    eprintln!("sluice-fixture: session {id} created");
    (id, session)
}

/// Run a request: JSON if it finishes before sending anything else, otherwise an SSE stream
/// carrying its related messages and then its response.
async fn run_request(
    session: &Arc<HttpSession>,
    id: Value,
    method: String,
    params: Value,
) -> Response {
    let mut rx = handlers::spawn_request(&session.core, id, method, params, Era::Legacy);
    let first = rx.recv().await.unwrap_or(Out::Final(None));
    let first = match first {
        Out::Final(Some(msg)) => return json_response(StatusCode::OK, &msg),
        Out::Final(None) => {
            // Cancelled: no response; end the (empty) stream at once.
            let (_, body) = unbounded_channel();
            return sse_response(body);
        }
        other => other,
    };
    let priming = session.priming();
    let (stream_id, body) = lock(&session.streams).open(priming);
    let streams = session.streams.clone();
    tokio::spawn(async move {
        let mut next = Some(first);
        while let Some(out) = next {
            {
                let mut streams = lock(&streams);
                match out {
                    Out::Message(msg) => streams.push(stream_id, &msg),
                    // Without a priming event the client holds no event id to resume
                    // with, so the stream stays open.
                    Out::CloseStream if priming => streams.detach(stream_id),
                    Out::CloseStream => {}
                    Out::Final(msg) => {
                        if let Some(msg) = msg {
                            streams.push(stream_id, &msg);
                        }
                        streams.finish(stream_id);
                        return;
                    }
                }
            }
            next = rx.recv().await;
        }
        lock(&streams).finish(stream_id);
    });
    sse_response(body)
}

async fn handle_post(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(resp) = check_host(&state, &headers) {
        return resp;
    }
    if !(accepts(&headers, "application/json") && accepts(&headers, "text/event-stream")) {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        );
    }
    let json_body = header_str(&headers, header::CONTENT_TYPE).is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json_body {
        return http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32000,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let message = match protocol::parse(&body) {
        Ok(m) => m,
        Err(error) => return json_response(StatusCode::BAD_REQUEST, &error),
    };
    let era = state.fixture.config.era;
    // Session traffic is the handshake era (a modern-only server ignores the header).
    if era.legacy() && headers.contains_key(SESSION_HEADER) {
        return legacy_post(&state, &headers, message).await;
    }
    let modern = era == EraMode::Modern || (era.modern() && modern_signal(&headers, &message));
    match message {
        Incoming::Request { id, method, params } if modern => {
            if method == "initialize" && !protocol::has_modern_envelope(&params) {
                // Only reached by a modern-only server: name the versions it speaks.
                let requested = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let e = RpcError::unsupported_version(requested, &[MODERN_VERSION]);
                return rpc_error(StatusCode::BAD_REQUEST, &id, &e);
            }
            match modern_preflight(&state.fixture, &headers, &method, &params) {
                Ok(meta) => run_modern(&state.fixture, id, method, params, meta).await,
                Err((status, e)) => rpc_error(status, &id, &e),
            }
        }
        // No client-to-server notification is defined on modern HTTP; accept and ignore.
        Incoming::Notification { .. } if modern => StatusCode::ACCEPTED.into_response(),
        Incoming::Response { id, .. } if modern => rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            &RpcError::new(
                protocol::INVALID_REQUEST,
                "Invalid Request: clients send no responses in 2026-07-28",
            ),
        ),
        Incoming::Request { id, method, .. } if method == "server/discover" => {
            // A handshake-era server does not know the method (so a dual-era client falls back).
            rpc_error(
                StatusCode::NOT_FOUND,
                &id,
                &RpcError::method_not_found(&method),
            )
        }
        message => legacy_post(&state, &headers, message).await,
    }
}

/// Whether a session-less message is modern: the request carries the `_meta` envelope or is
/// `server/discover`, or the `MCP-Protocol-Version` header names a non-handshake version.
/// `initialize` without the envelope is always the handshake.
fn modern_signal(headers: &HeaderMap, message: &Incoming) -> bool {
    let header_modern =
        header_str(headers, VERSION_HEADER).is_some_and(|v| !protocol::is_supported(v.trim()));
    match message {
        Incoming::Request { method, params, .. } => {
            if protocol::has_modern_envelope(params) || method == "server/discover" {
                true
            } else {
                method != "initialize" && header_modern
            }
        }
        _ => header_modern,
    }
}

/// The handshake-era POST: `initialize` opens a session; everything else needs one.
async fn legacy_post(state: &HttpState, headers: &HeaderMap, message: Incoming) -> Response {
    if let Incoming::Request { id, method, params } = &message {
        if method == "initialize" {
            let (session_id, session) = new_session(state);
            let mut resp = run_request(&session, id.clone(), method.clone(), params.clone()).await;
            if let Ok(v) = HeaderValue::from_str(&session_id) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            return resp;
        }
    }

    let session = match find_session(state, headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    if let Some(version) = header_str(headers, VERSION_HEADER) {
        if !protocol::is_supported(version) {
            return http_error(
                StatusCode::BAD_REQUEST,
                -32000,
                &format!("Bad Request: unsupported MCP-Protocol-Version: {version}"),
            );
        }
    }
    match message {
        Incoming::Request { id, method, params } => run_request(&session, id, method, params).await,
        Incoming::Notification { method, params } => {
            session.core.handle_notification(&method, &params);
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, outcome } => {
            session.core.handle_response(&id, outcome);
            StatusCode::ACCEPTED.into_response()
        }
    }
}

/// Decode the standard alphabet, padded Base64 strictly (length a multiple of 4, `=` only as
/// final padding, zero trailing bits); `None` on any violation.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let last = i + 1 == bytes.len() / 4;
        let pad = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for c in &chunk[..4 - pad] {
            n = (n << 6) | sextet(*c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        if pad > 0 && decoded[3 - pad..].iter().any(|b| *b != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// A header value as the client meant it: `=?base64?…?=` decoded (strictly, as UTF-8), anything
/// else literally. `None`: a malformed encoding.
fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => String::from_utf8(base64_decode(encoded)?).ok(),
        None => Some(v.to_string()),
    }
}

/// A header's value with surrounding whitespace removed: `Ok(None)` when absent, `Err` when it
/// is not visible ASCII.
fn trimmed_header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, RpcError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim_matches([' ', '\t'])))
            .map_err(|_| RpcError::header_mismatch(format!("{name} has invalid characters"))),
    }
}

/// Whether a (decoded) header value equals a body value (numbers compare numerically).
fn header_matches(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => header
            .parse::<f64>()
            .ok()
            .zip(n.as_f64())
            .is_some_and(|(h, b)| h == b),
        other => header == other.to_string().as_str(),
    }
}

/// Check a modern request's envelope and standard headers against its body, in the order the
/// spec's examples imply: `-32020` for a missing or mismatched header, `-32602` for a bad
/// `_meta`, `-32022` for an unsupported version (all HTTP 400), `-32601` (HTTP 404) for a
/// method 2026-07-28 does not have.
fn modern_preflight(
    fixture: &Fixture,
    headers: &HeaderMap,
    method: &str,
    params: &Value,
) -> Result<ModernMeta, (StatusCode, RpcError)> {
    let bad = |e: RpcError| (StatusCode::BAD_REQUEST, e);
    let Some(version_header) = trimmed_header(headers, VERSION_HEADER).map_err(bad)? else {
        return Err(bad(RpcError::header_mismatch(
            "missing MCP-Protocol-Version header",
        )));
    };
    match trimmed_header(headers, METHOD_HEADER).map_err(bad)? {
        None => return Err(bad(RpcError::header_mismatch("missing Mcp-Method header"))),
        Some(h) if h != method => {
            return Err(bad(RpcError::header_mismatch(format!(
                "Mcp-Method header value '{h}' does not match body value '{method}'"
            ))))
        }
        Some(_) => {}
    }
    let meta = protocol::parse_modern_meta(params).map_err(bad)?;
    if version_header != meta.version {
        return Err(bad(RpcError::header_mismatch(format!(
            "MCP-Protocol-Version header value '{version_header}' does not match _meta value '{}'",
            meta.version
        ))));
    }
    protocol::check_modern_version(&meta.version, &fixture.supported_versions()).map_err(bad)?;
    if !fixture.serves_modern(method) {
        return Err((StatusCode::NOT_FOUND, RpcError::method_not_found(method)));
    }
    let name_source = match method {
        "tools/call" | "prompts/get" => params.get("name"),
        "resources/read" => params.get("uri"),
        _ => None,
    };
    // The tasks methods name their task (SEP-2663): checked when the header is sent.
    let task_named = matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel")
        && headers.contains_key(NAME_HEADER);
    let name_source = name_source.or(task_named.then(|| params.get("taskId")).flatten());
    if let Some(Value::String(expected)) = name_source {
        let Some(h) = trimmed_header(headers, NAME_HEADER).map_err(bad)? else {
            return Err(bad(RpcError::header_mismatch("missing Mcp-Name header")));
        };
        let decoded = decode_header_value(h).ok_or_else(|| {
            bad(RpcError::header_mismatch(
                "Mcp-Name has a malformed encoding",
            ))
        })?;
        if &decoded != expected {
            return Err(bad(RpcError::header_mismatch(format!(
                "Mcp-Name header value '{decoded}' does not match body value '{expected}'"
            ))));
        }
    }
    if method == "tools/call" {
        check_param_headers(fixture, headers, params).map_err(bad)?;
    }
    Ok(meta)
}

/// `Mcp-Param-{Name}` headers of a `tools/call` against the tool's `x-mcp-header` parameters.
fn check_param_headers(
    fixture: &Fixture,
    headers: &HeaderMap,
    params: &Value,
) -> Result<(), RpcError> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Ok(());
    };
    let Some(tool) = fixture.tools().into_iter().find(|t| t["name"] == name) else {
        return Ok(());
    };
    let Some(properties) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    for (prop, schema) in properties {
        let Some(suffix) = schema.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let header_name = format!("mcp-param-{}", suffix.to_ascii_lowercase());
        let header = trimmed_header(headers, &header_name)?;
        let body = params
            .get("arguments")
            .and_then(|a| a.get(prop))
            .filter(|v| !v.is_null());
        match (header, body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(RpcError::header_mismatch(format!(
                    "missing Mcp-Param-{suffix} header for argument {prop}"
                )))
            }
            (Some(_), None) => {
                return Err(RpcError::header_mismatch(format!(
                    "Mcp-Param-{suffix} header sent but argument {prop} has no value"
                )))
            }
            (Some(h), Some(v)) => {
                let decoded = decode_header_value(h).ok_or_else(|| {
                    RpcError::header_mismatch(format!(
                        "Mcp-Param-{suffix} has a malformed Base64 encoding"
                    ))
                })?;
                if !header_matches(&decoded, v) {
                    return Err(RpcError::header_mismatch(format!(
                        "Mcp-Param-{suffix} header value '{decoded}' does not match body value {v}"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Cancels a modern request when dropped while armed: the client closed its response stream
/// (or went away before the response), which is the 2026-07-28 cancellation signal.
struct CancelOnDrop {
    session: Arc<Session>,
    id: Value,
    /// Record the cancellation for `last_cancelled` (not for `subscriptions/listen`, whose
    /// streams normally end this way).
    record: bool,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            if self.record {
                self.session
                    .fixture
                    .record_cancelled(self.id.clone(), json!("client closed the response stream"));
            }
            self.session.cancel(&self.id);
        }
    }
}

/// One SSE event carrying `msg` (no event id: 2026-07-28 streams are not resumable).
fn modern_frame(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

/// Run a modern request on an ephemeral session: JSON when it finishes before sending anything
/// else (status per [`modern_status`]), otherwise an SSE stream of its related messages and
/// then its response. Closing the stream (or the connection) cancels the request.
async fn run_modern(
    fixture: &Arc<Fixture>,
    id: Value,
    method: String,
    params: Value,
    meta: ModernMeta,
) -> Response {
    let session = Session::new(fixture.clone(), None, Box::new(Some));
    let era = Era::Modern(Box::new(ModernReq::new(meta, &method, &params)));
    let record = method != "subscriptions/listen";
    let mut rx = handlers::spawn_request(&session, id.clone(), method, params, era);
    let mut guard = CancelOnDrop {
        session,
        id,
        record,
        armed: true,
    };
    let first = loop {
        match rx.recv().await {
            Some(Out::CloseStream) => continue,
            Some(out) => break out,
            None => break Out::Final(None),
        }
    };
    let first = match first {
        Out::Final(msg) => {
            guard.armed = false;
            return match msg {
                Some(msg) => {
                    let status = msg
                        .pointer("/error/code")
                        .and_then(Value::as_i64)
                        .map(modern_status)
                        .unwrap_or(StatusCode::OK);
                    json_response(status, &msg)
                }
                None => StatusCode::NO_CONTENT.into_response(),
            };
        }
        Out::Message(msg) => msg,
        Out::CloseStream => unreachable!("skipped above"),
    };
    let (tx, body) = unbounded_channel();
    let _ = tx.send(modern_frame(&first));
    tokio::spawn(async move {
        // Move the whole guard in (a disjoint capture of `guard.armed` would drop it here).
        let mut guard = guard;
        loop {
            tokio::select! {
                out = rx.recv() => match out {
                    Some(Out::Message(msg)) => {
                        let _ = tx.send(modern_frame(&msg));
                    }
                    Some(Out::CloseStream) => {}
                    Some(Out::Final(msg)) => {
                        if let Some(msg) = msg {
                            let _ = tx.send(modern_frame(&msg));
                        }
                        guard.armed = false;
                        return;
                    }
                    None => {
                        guard.armed = false;
                        return;
                    }
                },
                // The client closed the stream: dropping the armed guard cancels the request.
                () = tx.closed() => return,
            }
        }
    });
    sse_response(body)
}

/// `405 Method Not Allowed`: what a modern-only server answers to GET and DELETE.
fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response()
}

async fn handle_get(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(resp) = check_host(&state, &headers) {
        return resp;
    }
    if !state.fixture.config.era.legacy() {
        return method_not_allowed();
    }
    if !accepts(&headers, "text/event-stream") {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            -32000,
            "Not Acceptable: Accept must list text/event-stream",
        );
    }
    let session = match find_session(&state, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    if let Some(last) = header_str(&headers, LAST_EVENT_ID) {
        return match lock(&session.streams).resume(last) {
            Some(body) => sse_response(body),
            None => http_error(
                StatusCode::BAD_REQUEST,
                -32000,
                &format!("Bad Request: unknown Last-Event-ID: {last}"),
            ),
        };
    }
    let opened = lock(&session.streams).open_standalone(session.priming());
    match opened {
        Some(body) => sse_response(body),
        None => http_error(
            StatusCode::CONFLICT,
            -32000,
            "Conflict: only one standalone SSE stream is allowed per session",
        ),
    }
}

async fn handle_delete(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(resp) = check_host(&state, &headers) {
        return resp;
    }
    if !state.fixture.config.era.legacy() {
        return method_not_allowed();
    }
    let session = match find_session(&state, &headers) {
        Ok(s) => s,
        Err(resp) => {
            // Logged too, so a test can count every DELETE that reached the server.
            eprintln!(
                "sluice-fixture: DELETE of an unknown session answered {}",
                resp.status()
            );
            return *resp;
        }
    };
    if let Some(id) = &session.core.id {
        lock(&state.sessions).remove(id);
        eprintln!("sluice-fixture: session {id} deleted");
    }
    lock(&session.streams).close_all();
    StatusCode::OK.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback_host("127.0.0.1:8080"));
        assert!(is_loopback_host("localhost"));
        assert!(is_loopback_host("[::1]:3000"));
        assert!(!is_loopback_host("evil.example.com"));
        assert!(!is_loopback_host("localhost.evil.com:80"));
    }

    #[test]
    fn strict_base64() {
        assert_eq!(base64_decode("SGVsbG8=").unwrap(), b"Hello");
        assert_eq!(
            base64_decode("SGVsbG8sIOS4lueVjA==").unwrap(),
            "Hello, 世界".as_bytes()
        );
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("SGVsbG8").is_none(), "missing padding");
        assert!(base64_decode("SGVs!!!bG8=").is_none(), "bad characters");
        assert!(base64_decode("SG=sbG8=").is_none(), "padding inside");
        assert!(
            base64_decode("SGVsbG9=").is_none(),
            "non-zero trailing bits"
        );
        assert_eq!(decode_header_value("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert!(decode_header_value("=?base64?SGVsbG8?=").is_none());
        assert_eq!(decode_header_value("SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8=").unwrap(),
            "=?base64?SGVsbG8="
        );
    }

    #[test]
    fn header_values_compare_by_type() {
        assert!(header_matches("us-west1", &json!("us-west1")));
        assert!(header_matches("42.0", &json!(42)));
        assert!(header_matches("true", &json!(true)));
        assert!(!header_matches("1", &json!(true)));
        assert!(!header_matches("eu", &json!("us")));
    }

    #[test]
    fn modern_signals() {
        let req = |method: &str, params: Value| Incoming::Request {
            id: json!(1),
            method: method.into(),
            params,
        };
        let mut h = HeaderMap::new();
        assert!(modern_signal(&h, &req("server/discover", json!({}))));
        assert!(!modern_signal(&h, &req("tools/list", json!({}))));
        let envelope = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "x"}});
        assert!(modern_signal(&h, &req("tools/list", envelope)));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2025-11-25"));
        assert!(!modern_signal(&h, &req("tools/list", json!({}))));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        assert!(modern_signal(&h, &req("tools/list", json!({}))));
        assert!(!modern_signal(&h, &req("initialize", json!({}))));
        assert_eq!(modern_status(-32601), StatusCode::NOT_FOUND);
        assert_eq!(modern_status(-32021), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(-32602), StatusCode::OK);
    }

    #[test]
    fn accept_parsing() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!accepts(&h, "text/event-stream"));
    }
}
