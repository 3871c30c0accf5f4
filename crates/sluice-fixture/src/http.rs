//! The Streamable HTTP transport (spec 2025-11-25) at `/mcp`: sessions (`Mcp-Session-Id`),
//! POST answered with JSON or, when the handler sends related messages first, an SSE stream;
//! GET for the standalone stream (or `Last-Event-ID` resumption); DELETE to end a session;
//! Host/Origin validation when bound to loopback.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::protocol::{self, Incoming};
use crate::session::{lock, Fixture, Out, Session};
use crate::sse::Streams;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
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
pub async fn run(fixture: Arc<Fixture>, addr: SocketAddr) -> std::io::Result<()> {
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
    let mut rx = session.core.spawn_request(id, method, params);
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

    if let Incoming::Request { id, method, params } = &message {
        if method == "initialize" {
            let (session_id, session) = new_session(&state);
            let mut resp = run_request(&session, id.clone(), method.clone(), params.clone()).await;
            if let Ok(v) = HeaderValue::from_str(&session_id) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            return resp;
        }
    }

    let session = match find_session(&state, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    if let Some(version) = header_str(&headers, VERSION_HEADER) {
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

async fn handle_get(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(resp) = check_host(&state, &headers) {
        return resp;
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
    let session = match find_session(&state, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
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
