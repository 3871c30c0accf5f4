//! The downstream Streamable HTTP transport (2025-11-25): `/mcp` for POST, GET and DELETE (and
//! `/mcp/<name>` for each endpoint of `mcp/endpoints.json`, served from its own snapshot); sessions by `Mcp-Session-Id`; replies as JSON, or as SSE when a request produces
//! related messages; the GET stream; `Last-Event-ID` resumption; and the exact HTTP errors for
//! bad input (400, 403, 404, 405, 406, 413, 415).

use super::body::BodyError;
use super::http_session::{find_session, store_unavailable};
use super::rules::{self, accepts_all};
use crate::channel::{is_reply, Out};
use crate::control;
use crate::http_parts::{
    header_str, json_error, json_pieces, json_reply, sse_headers, KEEPALIVE, SESSION,
};
use crate::modern::rounds::Rounds;
use crate::proxy;
use crate::session::{HttpStreams, Init, Outbound, Session};
use crate::state::{Held, SessionCap, Snapshot, State};
use crate::stream::StreamBuf;
use axum::body::{Body, Bytes};
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};
use sluice_auth::{Authenticator, Denial};
use sluice_core::{version, Kind, Message, Principal, RpcError};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the HTTP face serves from: the gateway's state and the modern era's rounds.
pub(crate) struct HttpFace {
    /// The gateway's state.
    pub st: Arc<State>,
    /// Calls of 2026-07-28 clients waiting for their input.
    pub rounds: Arc<Rounds>,
}

/// The axum router serving MCP at `/mcp`.
pub(crate) fn router(face: Arc<HttpFace>) -> Router {
    Router::new()
        .route("/mcp", any(mcp))
        .route("/mcp/", any(mcp))
        .route("/mcp/{endpoint}", any(mcp_endpoint))
        .route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*path}",
            axum::routing::get(resource_metadata),
        )
        .route(
            sluice_upstream::identity::CALLBACK_PATH,
            axum::routing::get(oauth_callback),
        )
        .route(
            sluice_upstream::identity::CLIENT_METADATA_PATH,
            axum::routing::get(client_metadata),
        )
        .route(
            "/oauth/connect/{id}",
            axum::routing::get(oauth_connect).post(oauth_connect),
        )
        .route(
            sluice_oauth::signin::SIGNED_IN_PATH,
            axum::routing::get(oauth_signed_in),
        )
        .with_state(face)
}

async fn mcp(AxState(face): AxState<Arc<HttpFace>>, req: axum::extract::Request) -> Response {
    serve(face, req).await
}

async fn mcp_endpoint(
    AxState(face): AxState<Arc<HttpFace>>,
    axum::extract::Path(endpoint): axum::extract::Path<String>,
    req: axum::extract::Request,
) -> Response {
    match endpoint_snapshot(&face, &endpoint) {
        Ok(snap) => serve_from(face, req, snap).await,
        Err(not_found) => *not_found,
    }
}

/// What is in force for `/mcp/<name>`: the snapshot of the endpoint of that name, or the 404
/// for a name `mcp/endpoints.json` does not have. The MCP listener asks this for a request to
/// such a path before it goes to [`serve_from`], as it does for `/mcp`; the router's route
/// (`mcp_endpoint`) does the same.
pub(crate) fn endpoint_snapshot(face: &HttpFace, name: &str) -> Result<Held, Box<Response>> {
    match face.st.held().endpoint(name) {
        Some(e) => Ok(Held::of(e.clone())),
        None => Err(Box::new(json_error(
            StatusCode::NOT_FOUND,
            RpcError::invalid_request(format!(
                "No endpoint {name:?} here (mcp/endpoints.json names the endpoints served at /mcp/<name>)"
            )),
            None,
        ))),
    }
}

/// Serve one request to `/mcp`. The MCP listener calls this for each request to that path on a
/// connection, with that connection's own `face` (whose count only the connection's thread
/// writes); the router's route (`mcp`) is the same for anyone serving [`router`].
/// A plain function returning the future, not an `async fn` around it: the future is moved into
/// a box for every request, and a wrapper's state would hold the inner future once more.
pub(crate) fn serve(
    face: Arc<HttpFace>,
    req: axum::extract::Request,
) -> impl std::future::Future<Output = Response> {
    // What is in force, loaded once for the whole request (through this thread's handle).
    let snap = face.st.held();
    serve_from(face, req, snap)
}

/// Serve one request from `snap`: `/mcp`'s, or an endpoint's (whose sessions it alone finds).
pub(crate) async fn serve_from(
    face: Arc<HttpFace>,
    req: axum::extract::Request,
    snap: Held,
) -> Response {
    // Taken apart rather than extracted: the `HeaderMap` extractor would clone the headers.
    let (parts, body) = req.into_parts();
    let (method, headers) = (parts.method, parts.headers);
    let st = &face.st;
    if let Err(r) = rules::check(&snap, &headers) {
        return r;
    }
    let principal = match &snap.auth {
        None => None,
        Some(auth) => {
            let credentials = (
                header_str(&headers, header::AUTHORIZATION),
                header_str(&headers, "x-api-key"),
            );
            match auth.authenticate(credentials.0, credentials.1).await {
                Ok(p) => Some(p),
                Err(denial) => return denied(auth, &denial),
            }
        }
    };
    match method {
        Method::POST => match sluice_telemetry::http_parent(st.rt.telemetry().as_deref(), &headers)
        {
            Some(parent) => {
                let post = post(&face, snap, headers, body, principal);
                sluice_telemetry::with_http_parent(parent, post).await
            }
            None => post(&face, snap, headers, body, principal).await,
        },
        // Boxed: the POST path is the hot one, and the future of this handler is as large as
        // its largest branch (it is moved into axum's box for every request).
        Method::GET => {
            Box::pin(super::http_get::get(
                st,
                headers,
                principal,
                snap.endpoint_name(),
            ))
            .await
        }
        Method::DELETE => Box::pin(delete(st, headers, principal, snap.endpoint_name())).await,
        _ => {
            let mut r = json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                RpcError::invalid_request("use POST, GET or DELETE"),
                None,
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// 401 / 403 / 503 with the `WWW-Authenticate` challenge (RFC 6750, RFC 9728).
fn denied(auth: &Authenticator, denial: &Denial) -> Response {
    tracing::info!(status = denial.status, error = ?denial.error, "request not authenticated: {}", denial.description);
    let body = json!({
        "error": denial.error.unwrap_or("unauthorized"),
        "error_description": denial.description,
    });
    let status = StatusCode::from_u16(denial.status).unwrap_or(StatusCode::UNAUTHORIZED);
    let mut r = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response();
    if status != StatusCode::SERVICE_UNAVAILABLE {
        if let Ok(v) = HeaderValue::from_str(&auth.challenge(denial)) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
    }
    r
}

/// RFC 9728 protected-resource metadata (404 when authentication is off).
async fn oauth_callback(AxState(face): AxState<Arc<HttpFace>>, uri: axum::http::Uri) -> Response {
    crate::upstream_oauth::callback(&face.st, uri.query()).await
}

async fn oauth_connect(
    AxState(face): AxState<Arc<HttpFace>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    req: axum::extract::Request,
) -> Response {
    crate::connect_page::connect_link(&face.st, &id, req).await
}

async fn oauth_signed_in(
    AxState(face): AxState<Arc<HttpFace>>,
    req: axum::extract::Request,
) -> Response {
    crate::connect_page::signed_in(&face.st, req).await
}

async fn client_metadata(AxState(face): AxState<Arc<HttpFace>>) -> Response {
    crate::upstream_oauth::client_metadata(&face.st)
}

async fn resource_metadata(AxState(face): AxState<Arc<HttpFace>>) -> Response {
    match face.st.snapshot().auth.clone() {
        Some(auth) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            auth.metadata().to_string(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn post(
    face: &Arc<HttpFace>,
    snap: Held,
    headers: HeaderMap,
    body: Body,
    principal: Option<Arc<Principal>>,
) -> Response {
    let st = &face.st;
    if !accepts_all(&headers, ["application/json", "text/event-stream"]) {
        return json_error(
            StatusCode::NOT_ACCEPTABLE,
            RpcError::invalid_request(
                "Accept must list both application/json and text/event-stream",
            ),
            None,
        );
    }
    let ctype = header_str(&headers, header::CONTENT_TYPE).unwrap_or("");
    if !ctype.to_ascii_lowercase().starts_with("application/json") {
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RpcError::invalid_request("Content-Type must be application/json"),
            None,
        );
    }
    let settings = snap.settings();
    let limits = super::body::Limits {
        max: settings.max_body_bytes as usize,
        within: std::time::Duration::from_millis(settings.body_timeout_ms),
        min_rate: settings.min_body_bytes_per_sec,
    };
    let overload = st.rt.overload();
    let allowance = || {
        let ms = if overload.pressed(settings) {
            settings
                .header_timeout_ms
                .min(settings.overload.header_timeout_ms)
        } else {
            settings.header_timeout_ms
        };
        std::time::Duration::from_millis(ms)
    };
    let bytes: Bytes = match super::body::read(body, &limits, allowance).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                RpcError::invalid_request(format!("the body is larger than {} bytes", limits.max)),
                None,
            )
        }
        Err(BodyError::TimedOut) => {
            return json_error(
                StatusCode::REQUEST_TIMEOUT,
                RpcError::invalid_request(format!(
                    "the body was not received within {} ms",
                    limits.within.as_millis()
                )),
                None,
            )
        }
        Err(BodyError::TooSlow) => {
            overload.count(sluice_telemetry::Action::BodyTooSlow);
            return json_error(
                StatusCode::REQUEST_TIMEOUT,
                RpcError::invalid_request(format!(
                    "the body arrived slower than {} bytes per second",
                    limits.min_rate
                )),
                None,
            );
        }
    };
    let msg = match proxy::parse_client(&snap, &bytes) {
        Ok(m) => m,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, *e.error, e.id.as_ref()),
    };
    // The branches other than a request in a session are boxed, so that this future (moved
    // into axum's box for every request) is only as large as the hot path needs.
    if crate::modern::detect(&headers, &msg) {
        // Each 2026-07-28 request is a session of its own.
        if let Some(r) = past_memory_ceiling(st, &snap, msg.id()) {
            return r;
        }
        let rounds = face.rounds.clone();
        return Box::pin(super::http_modern::post(
            st.clone(),
            rounds,
            &headers,
            msg,
            principal,
            snap.endpoint_name(),
        ))
        .await;
    }
    if msg.method() == Some("initialize") && msg.kind() == Kind::Request {
        return Box::pin(initialize(st, &snap, &headers, msg, principal)).await;
    }
    if let Err(r) = rules::check_version(&headers) {
        return r;
    }
    let session = match find_session(st, &headers, principal, snap.endpoint_name()).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    // A reply or cancellation another replica of a cluster must see.
    if st.rt.scale().hand_message(st, &session, &msg).await {
        return StatusCode::ACCEPTED.into_response();
    }
    match msg.kind() {
        Kind::Notification | Kind::Response | Kind::Error => {
            Box::pin(proxy::client_message(st, &session, msg)).await;
            StatusCode::ACCEPTED.into_response()
        }
        Kind::Request => request(face, snap, session, msg).await,
    }
}

async fn initialize(
    st: &Arc<State>,
    snap: &Snapshot,
    headers: &HeaderMap,
    msg: Message,
    principal: Option<Arc<Principal>>,
) -> Response {
    if headers.contains_key(SESSION) {
        return json_error(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_request("initialize must not carry Mcp-Session-Id"),
            msg.id(),
        );
    }
    if let Some(r) = past_memory_ceiling(st, snap, msg.id()) {
        return r;
    }
    let settings = snap.settings();
    let (max, per) = (settings.max_sessions, settings.max_sessions_per_principal);
    if let Some(cap) = st.rt.sessions().over_cap(principal.as_deref(), max, per) {
        return too_many_sessions(cap, msg.id());
    }
    let params = msg.params().cloned().unwrap_or(Value::Null);
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = version::negotiate(requested);
    let init = Init::of_initialize(&params, version).on_endpoint(snap.endpoint_name());
    let ttl = std::time::Duration::from_secs(settings.session_idle_secs);
    let new = st
        .rt
        .scale()
        .new_session(&init, principal.as_deref(), ttl, settings.replay_events);
    let id = new.id.clone();
    let buf = StreamBuf::new(
        0,
        settings.replay_events as usize,
        settings.replay_bytes as usize,
    );
    let streams = HttpStreams::new(buf).numbered_from(new.stream_base);
    let mut session = Session::new(id.clone(), init, Outbound::Http(streams));
    if let Some(shared) = new.shared {
        session = session.with_shared(shared);
    }
    let session = Arc::new(session);
    session.set_principal(principal);
    session.set_authorization(header_str(headers, header::AUTHORIZATION));
    let client = params
        .get("clientInfo")
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let reply = match proxy::initialize(st, &session, msg, version).await {
        Ok(reply) => reply,
        // Refused by a hook: no session.
        Err(reply) => return json_reply(reply),
    };
    // In a cluster every replica learns of it through the store before the client has its id.
    if let Err(e) = st.rt.scale().admit(&session, ttl).await {
        let chain = snap.chain.clone();
        let sid = id.clone();
        tokio::spawn(async move { chain.stop(&sid, sluice_hooks::EndReason::NotAdmitted).await });
        tracing::error!("initialize refused: {e}");
        return store_unavailable(&e);
    }
    let sealed = session.shared.is_some();
    if let Err(cap) = st.rt.sessions().try_add(session, max, per) {
        // Another initialize took the last place meanwhile: nothing stays.
        let chain = snap.chain.clone();
        let sid = id.clone();
        tokio::spawn(async move { chain.stop(&sid, sluice_hooks::EndReason::NotAdmitted).await });
        return too_many_sessions(cap, reply.id());
    }
    tracing::info!(session = %id, version, client, sealed, "session started");
    let mut r = (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        reply.to_json(),
    )
        .into_response();
    r.headers_mut().insert(
        SESSION,
        HeaderValue::from_str(&id).expect("hex or base64url id"),
    );
    r
}

/// 429 for an `initialize` past a session cap (-32029, naming the cap and its value).
fn too_many_sessions(cap: SessionCap, id: Option<&Value>) -> Response {
    let (name, max) = match cap {
        SessionCap::Global(n) => ("max_sessions", n),
        SessionCap::PerPrincipal(n) => ("max_sessions_per_principal", n),
    };
    let what = match cap {
        SessionCap::Global(_) => "live sessions",
        SessionCap::PerPrincipal(_) => "live sessions for this principal",
    };
    let error = RpcError::new(
        TOO_MANY_SESSIONS,
        format!("Too many sessions: {max} {what} ({name}); end one (DELETE) or try later"),
    )
    .with_data(json!({"limit": name, "max": max}));
    tracing::warn!(limit = name, max, "initialize refused: session cap reached");
    json_error(StatusCode::TOO_MANY_REQUESTS, error, id)
}

/// Past `max_memory_mb` (as last sampled), a new session is answered 503 with `Retry-After`.
fn past_memory_ceiling(st: &State, snap: &Snapshot, id: Option<&Value>) -> Option<Response> {
    let mb = snap.settings().max_memory_mb?;
    let overload = st.rt.overload();
    if !overload.over_memory() {
        return None;
    }
    overload.count(sluice_telemetry::Action::MemoryRefused);
    tracing::warn!(
        max_memory_mb = mb,
        "a new session refused: past max_memory_mb"
    );
    let secs = crate::overload::MEMORY_RETRY_AFTER_SECS;
    let error = RpcError::new(
        sluice_core::codes::UPSTREAM_UNAVAILABLE,
        format!(
            "The gateway is past its memory ceiling ({mb} MB, max_memory_mb); retry in {secs} s"
        ),
    )
    .with_data(json!({"limit": "max_memory_mb", "max": mb, "retryAfterMs": secs * 1000}));
    let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, error, id);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    Some(r)
}

/// The JSON-RPC code of an `initialize` refused by a session cap.
const TOO_MANY_SESSIONS: i64 = -32029;

/// Run a request. The reply is JSON when nothing related arrives before it; otherwise the
/// response turns into an SSE stream that carries the related messages and then the reply.
/// Related messages and the reply share one channel, so they reach the client in the order
/// they happened. The work continues when the client disconnects (a disconnect is not a
/// cancellation).
async fn request(
    face: &Arc<HttpFace>,
    snap: Held,
    session: Arc<Session>,
    msg: Message,
) -> Response {
    let st = &face.st;
    // Only a list request can be answered from the cached pages (boxed: a call's future need
    // not hold that one's).
    if let Some(kind) = proxy::lists::list_kind(&msg) {
        let cached = proxy::lists::cached(st, &snap, &session, &msg, kind);
        if let Some(reply) = Box::pin(cached).await {
            return json_pieces(reply.into_pieces());
        }
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    // Run the request here while the reply is plain JSON (no task per call); when something
    // related arrives first, the rest runs in its own task behind an SSE stream. Boxed where it
    // is made (a local future would stay in this one's state after the move). The reply is the
    // work's output, not a message on the channel, and the sender lives until the reply is
    // sent: the channel's receiver holds this task's waker, and a wake from inside the task's
    // own poll would make tokio hand the task to another worker thread.
    // What the work owns, it owns through handles whose counts this thread alone writes (the
    // connection's face, the thread's snapshot) or the session's few requests write.
    let mut work = Box::pin({
        let face = face.clone();
        let snap = snap.clone();
        let session = session.clone();
        async move {
            let outcome = proxy::client_request(&face.st, &snap, &session, msg, &tx).await;
            (outcome.into_reply(), tx)
        }
    });
    let first = tokio::select! {
        biased;
        first = rx.recv() => first,
        (reply, tx) = &mut work => {
            return match rx.try_recv() {
                Err(_) if is_reply(&reply) => {
                    // The receiver goes first: the sender's drop then wakes no one.
                    drop(rx);
                    drop(tx);
                    json_reply(reply)
                }
                Err(_) => sse_response(&snap, &session, Out::Msg(reply), rx),
                // Something related came before the reply: it goes first, on a stream.
                Ok(first) => {
                    let _ = tx.send(Out::Msg(reply));
                    drop(tx);
                    sse_response(&snap, &session, first, rx)
                }
            };
        }
    };
    match first {
        // A reply before the work ended: the rest of the work is not needed.
        Some(Out::Msg(first)) if is_reply(&first) => json_reply(first),
        Some(first) => {
            tokio::spawn(async move {
                let (reply, tx) = work.await;
                let _ = tx.send(Out::Msg(reply));
            });
            sse_response(&snap, &session, first, rx)
        }
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// Answer with an SSE stream: the first item, then everything until the reply. An upstream
/// that paused its stream (SSE polling) pauses this one too: the client's stream ends with the
/// upstream's retry hint, the buffer lives on, and the client resumes with `Last-Event-ID`.
fn sse_response(
    snap: &Snapshot,
    session: &Arc<Session>,
    first: Out,
    mut rx: mpsc::UnboundedReceiver<Out>,
) -> Response {
    let Some(http) = session.http() else {
        unreachable!("an HTTP request's session has HTTP streams")
    };
    let buf = http.new_stream(
        snap.settings().replay_events as usize,
        snap.settings().replay_bytes as usize,
    );
    if let Out::Open(Some(ms)) | Out::Pause(Some(ms)) = first {
        buf.set_retry(ms);
    }
    // The client's reader exists before anything is pushed, so a pause that comes first (SSE
    // polling) still ends this stream rather than only later readers.
    let prime = session.init.protocol_version.as_str() >= "2025-11-25";
    let body = Body::from_stream(buf.reader(0, prime, KEEPALIVE, None));
    let pump = buf.clone();
    tokio::spawn(async move {
        let mut next = Some(first);
        loop {
            let item = match next.take() {
                Some(i) => i,
                None => match rx.recv().await {
                    Some(i) => i,
                    None => break,
                },
            };
            match item {
                Out::Msg(m) => {
                    pump.push(&m);
                    if is_reply(&m) {
                        break;
                    }
                }
                Out::Open(_) => {}
                Out::Pause(ms) => pump.pause(ms),
            }
        }
        pump.finish();
    });
    sse_headers(body.into_response())
}

async fn delete(
    st: &Arc<State>,
    headers: HeaderMap,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Response {
    if let Err(r) = rules::check_version(&headers) {
        return r;
    }
    let session = match find_session(st, &headers, principal, endpoint).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    // In a cluster: ended in the store first, so the next request anywhere is 404; every
    // replica hears it and ends its part.
    let mut ended = None;
    if let Some(sh) = &session.shared {
        match sh.store.end(&sh.handle).await {
            Ok(fields) => ended = fields,
            Err(e) => return store_unavailable(&e.0),
        }
    }
    control::end_session(st, &session.id, sluice_hooks::EndReason::Deleted).await;
    // This replica ended it: it ends the upstream sessions every replica shared, once.
    if let Some(fields) = ended {
        crate::shared_upstreams::end_upstreams(st, &fields).await;
    }
    StatusCode::OK.into_response()
}
