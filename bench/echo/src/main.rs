//! `sluice-bench-echo`: the benchmark suite's upstream. A deliberately cheap MCP server with one
//! `echo` tool that answers its arguments back as text and as `structuredContent`, over
//! Streamable HTTP (protocol 2025-11-25 and earlier: `initialize` mints an `Mcp-Session-Id`,
//! every reply is `application/json`, GET answers 405) or stdio (one JSON message per line).
//!
//! ```text
//! sluice-bench-echo [--listen 127.0.0.1:PORT] [--tools N] [--threads N] [--oauth]   (endpoint: /mcp)
//! sluice-bench-echo --stdio [--tools N]
//! sluice-bench-echo --hook-process
//! ```
//!
//! `--tools N` lists N tools in all: `echo` plus `echo_0001` … (each of them echoes too), for the
//! "tools/list with 1,000 tools" measurement. Raw serde_json, no SDK: the point is to cost as
//! little as possible so the gateway's share of each call stands out.
//!
//! It also plays the two hook services of the benchmark's hook configurations, answering "pass"
//! as cheaply as possible: `POST /hook` on the HTTP listener (Sluice's `http` hook kind: a 200
//! with no body leaves the message unchanged), and `--hook-process` (the `process` kind: JSON
//! lines `{"id": N, "event": …}` in, `{"id": N, "decision": "pass"}` out).
//!
//! `--oauth` makes the HTTP echo an OAuth-protected MCP server with its own tiny authorization
//! server, for the rows that price how the gateway authenticates to its upstream: `/mcp` wants
//! `Authorization: Bearer <token>` (else 401 with `WWW-Authenticate: Bearer
//! resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"`), that RFC 9728 document
//! is served, RFC 8414 metadata at `/.well-known/oauth-authorization-server` (issuer `<base>`,
//! client credentials and authorization code, `client_secret_basic`, PKCE S256 and the `iss`
//! parameter listed), `GET /authorize` approves at once (a code back to the redirect URI, with
//! `state` and `iss`), and `POST /token` grants client credentials, or a code it handed out
//! (once), to client [`CLIENT_ID`] with secret [`CLIENT_SECRET`] (HTTP Basic): a random token,
//! `expires_in` 3600 (never enforced). Without the flag none of this exists: the only cost left
//! on `/mcp` is a branch on an `Option`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str =
    "usage: sluice-bench-echo [--listen HOST:PORT | --stdio] [--tools N] [--threads N] [--oauth]";
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST: &str = "2025-11-25";
const SESSION: &str = "mcp-session-id";
/// `--oauth`: the one client the authorization server knows.
pub const CLIENT_ID: &str = "sluice-bench";
/// `--oauth`: its secret (sent with HTTP Basic).
pub const CLIENT_SECRET: &str = "sluice-bench-secret";

struct Options {
    listen: String,
    stdio: bool,
    hook_process: bool,
    tools: usize,
    threads: Option<usize>,
    oauth: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        listen: "127.0.0.1:3001".into(),
        stdio: false,
        hook_process: false,
        tools: 1,
        threads: None,
        oauth: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => o.listen = value()?,
            "--stdio" => o.stdio = true,
            "--oauth" => o.oauth = true,
            "--hook-process" => o.hook_process = true,
            "--tools" => {
                o.tools = value()?
                    .parse()
                    .map_err(|_| "--tools needs a number".to_string())?
            }
            "--threads" => {
                o.threads = Some(
                    value()?
                        .parse()
                        .map_err(|_| "--threads needs a number".to_string())?,
                )
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("sluice-bench-echo: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.hook_process {
        return match serve_hook_process() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice-bench-echo: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let echo = Arc::new(Echo::new(opts.tools.max(1)));
    if opts.stdio {
        return match serve_stdio(&echo) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice-bench-echo: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = opts.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build().expect("tokio runtime");
    match rt.block_on(serve_http(echo, &opts.listen, opts.oauth)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench-echo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The protocol half, shared by both transports.
struct Echo {
    /// The `result` of `tools/list`, serialised once.
    tools_result: String,
    /// Names of the tools (all echo).
    names: HashSet<String>,
}

impl Echo {
    fn new(tools: usize) -> Echo {
        let schema = json!({"type": "object", "additionalProperties": true});
        let mut list = vec![json!({
            "name": "echo",
            "description": "Answers its arguments back, as text and as structuredContent.",
            "inputSchema": schema,
        })];
        for i in 1..tools {
            list.push(json!({
                "name": format!("echo_{i:04}"),
                "description": format!("Echo number {i}: answers its arguments back."),
                "inputSchema": schema,
            }));
        }
        let names = list
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        Echo {
            tools_result: json!({ "tools": list }).to_string(),
            names,
        }
    }

    /// Answer one request (`method`, `params`) with the JSON text of a whole reply, given the
    /// request's id as JSON text.
    fn answer(&self, id: &str, method: &str, params: Option<&Value>) -> String {
        match method {
            "initialize" => {
                let asked = params
                    .and_then(|p| p.get("protocolVersion"))
                    .and_then(Value::as_str);
                let version = asked
                    .and_then(|a| VERSIONS.iter().find(|v| **v == a))
                    .copied()
                    .unwrap_or(LATEST);
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "sluice-bench-echo", "version": env!("CARGO_PKG_VERSION")},
                });
                reply(id, &result.to_string())
            }
            "ping" => reply(id, "{}"),
            "tools/list" => reply(id, &self.tools_result),
            "tools/call" => {
                let name = params
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !self.names.contains(name) {
                    return error(id, -32602, &format!("Unknown tool: {name}"));
                }
                let empty = Value::Object(Map::new());
                let args = params.and_then(|p| p.get("arguments")).unwrap_or(&empty);
                let text = args.to_string();
                // `text` is the arguments' JSON; as a JSON string it needs escaping once more.
                let result = format!(
                    r#"{{"content":[{{"type":"text","text":{}}}],"structuredContent":{text},"isError":false}}"#,
                    Value::String(text.clone())
                );
                reply(id, &result)
            }
            _ => error(id, -32601, &format!("Method not found: {method}")),
        }
    }
}

fn reply(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

fn error(id: &str, code: i64, message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}}}}}"#,
        Value::String(message.to_string())
    )
}

/// What one incoming message is.
enum Incoming {
    Request {
        id: String,
        method: String,
        params: Option<Value>,
    },
    /// A notification, or a reply to a request of ours (we send none).
    Other,
}

fn classify(bytes: &[u8]) -> Result<Incoming, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("parse error: {e}"))?;
    let Value::Object(mut m) = v else {
        return Err("not a JSON-RPC object (batches are not supported)".into());
    };
    match (m.remove("id"), m.remove("method")) {
        (Some(id), Some(Value::String(method))) => Ok(Incoming::Request {
            id: id.to_string(),
            method,
            params: m.remove("params"),
        }),
        _ => Ok(Incoming::Other),
    }
}

// --- stdio ------------------------------------------------------------------------------------

fn serve_stdio(echo: &Echo) -> std::io::Result<()> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            out.flush()?;
            return Ok(());
        }
        let text = line.trim_ascii();
        if !text.is_empty() {
            match classify(text) {
                Ok(Incoming::Request { id, method, params }) => {
                    out.write_all(echo.answer(&id, &method, params.as_ref()).as_bytes())?;
                    out.write_all(b"\n")?;
                }
                Ok(Incoming::Other) => {}
                Err(e) => {
                    out.write_all(error("null", -32700, &e).as_bytes())?;
                    out.write_all(b"\n")?;
                }
            }
        }
        // Flush only when nothing more is waiting: replies to a burst go out together.
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}

// --- the process hook -------------------------------------------------------------------------

/// A `process` hook that passes everything: `{"id": N, …}` in, `{"id": N, "decision": "pass"}`
/// out, one line each.
fn serve_hook_process() -> std::io::Result<()> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            out.flush()?;
            return Ok(());
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        let id = serde_json::from_slice::<Value>(&line)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null);
        writeln!(out, r#"{{"id":{id},"decision":"pass"}}"#)?;
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}

// --- Streamable HTTP --------------------------------------------------------------------------

struct HttpState {
    echo: Arc<Echo>,
    sessions: Mutex<HashSet<String>>,
    /// `--oauth`: the resource server's and authorization server's state; None: no checks.
    oauth: Option<OAuth>,
}

async fn serve_http(echo: Arc<Echo>, listen: &str, oauth: bool) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    eprintln!("sluice-bench-echo: listening on http://{addr}/mcp");
    let oauth = oauth.then(|| OAuth::new(&format!("http://{addr}")));
    let with_oauth = oauth.is_some();
    let state = Arc::new(HttpState {
        echo,
        sessions: Mutex::new(HashSet::new()),
        oauth,
    });
    let mut app = Router::new()
        .route(
            "/mcp",
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .route("/hook", post(handle_hook));
    if with_oauth {
        app = app
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(auth_server_metadata),
            )
            .route("/authorize", get(handle_authorize))
            .route("/token", post(handle_token));
    }
    axum::serve(listener, app.with_state(state)).await
}

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn session_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION).and_then(|v| v.to_str().ok())
}

async fn handle_post(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = st.oauth.as_ref().and_then(|o| o.refuse(&headers)) {
        return refused;
    }
    let msg = match classify(&body) {
        Ok(m) => m,
        Err(e) => return json_response(StatusCode::BAD_REQUEST, error("null", -32700, &e)),
    };
    let (id, method, params) = match msg {
        Incoming::Request { id, method, params } => (id, method, params),
        Incoming::Other => return StatusCode::ACCEPTED.into_response(),
    };
    if method == "initialize" {
        let sid = uuid::Uuid::new_v4().simple().to_string();
        st.sessions.lock().insert(sid.clone());
        let mut r = json_response(
            StatusCode::OK,
            st.echo.answer(&id, &method, params.as_ref()),
        );
        r.headers_mut()
            .insert(SESSION, HeaderValue::from_str(&sid).expect("hex id"));
        return r;
    }
    match session_of(&headers) {
        None => json_response(
            StatusCode::BAD_REQUEST,
            error(
                &id,
                -32600,
                "missing Mcp-Session-Id (send initialize first)",
            ),
        ),
        Some(s) if !st.sessions.lock().contains(s) => json_response(
            StatusCode::NOT_FOUND,
            error(&id, -32001, "Session not found"),
        ),
        Some(_) => json_response(
            StatusCode::OK,
            st.echo.answer(&id, &method, params.as_ref()),
        ),
    }
}

/// The `http` hook service: a 200 with no body leaves the message unchanged.
async fn handle_hook() -> StatusCode {
    StatusCode::OK
}

/// No server-initiated messages: no GET stream.
async fn handle_get(State(st): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(refused) = st.oauth.as_ref().and_then(|o| o.refuse(&headers)) {
        return refused;
    }
    let mut r = StatusCode::METHOD_NOT_ALLOWED.into_response();
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    r
}

async fn handle_delete(State(st): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(refused) = st.oauth.as_ref().and_then(|o| o.refuse(&headers)) {
        return refused;
    }
    match session_of(&headers) {
        Some(s) if st.sessions.lock().remove(s) => StatusCode::OK.into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

// --- --oauth: the protected resource and its authorization server ------------------------------

/// What `--oauth` adds: the documents (serialised once), the client's expected credentials and
/// the access tokens handed out.
struct OAuth {
    /// The RFC 9728 protected resource metadata of `/mcp`.
    resource_metadata: String,
    /// The RFC 8414 authorization server metadata.
    auth_server_metadata: String,
    /// The `WWW-Authenticate` of a 401 on `/mcp`.
    challenge: HeaderValue,
    /// The `Authorization` a token request must carry: `Basic base64(id:secret)`.
    basic: String,
    /// Every access token granted (they never expire here).
    tokens: RwLock<HashSet<String>>,
    /// Authorization codes handed out and not yet exchanged.
    codes: Mutex<HashSet<String>>,
    /// The issuer (`<base>`), sent as RFC 9207's `iss` with each code.
    issuer: String,
}

impl OAuth {
    /// The server at `base` (`http://HOST:PORT`, no trailing slash).
    fn new(base: &str) -> OAuth {
        let resource_metadata = json!({
            "resource": format!("{base}/mcp"),
            "authorization_servers": [base],
            "bearer_methods_supported": ["header"],
        });
        // The authorization endpoint approves at once (a person who always says yes): what a
        // per-user upstream's consent round trip costs without a person in it.
        let auth_server_metadata = json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "authorization_response_iss_parameter_supported": true,
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
        });
        let challenge = format!(
            r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
        );
        OAuth {
            resource_metadata: resource_metadata.to_string(),
            auth_server_metadata: auth_server_metadata.to_string(),
            challenge: HeaderValue::from_str(&challenge).expect("an ASCII challenge"),
            basic: format!(
                "Basic {}",
                base64(format!("{CLIENT_ID}:{CLIENT_SECRET}").as_bytes())
            ),
            tokens: RwLock::new(HashSet::new()),
            codes: Mutex::new(HashSet::new()),
            issuer: base.to_string(),
        }
    }

    /// None when `headers` carry a bearer token this server granted; else the 401 to answer.
    fn refuse(&self, headers: &HeaderMap) -> Option<Response> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_at_checked(7))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer "))
            .map(|(_, token)| token);
        if token.is_some_and(|t| self.tokens.read().contains(t)) {
            return None;
        }
        let mut r = StatusCode::UNAUTHORIZED.into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, self.challenge.clone());
        Some(r)
    }
}

/// `GET /.well-known/oauth-protected-resource/mcp`.
async fn resource_metadata(State(st): State<Arc<HttpState>>) -> Response {
    let o = st.oauth.as_ref().expect("routed with --oauth only");
    json_response(StatusCode::OK, o.resource_metadata.clone())
}

/// `GET /.well-known/oauth-authorization-server`.
async fn auth_server_metadata(State(st): State<Arc<HttpState>>) -> Response {
    let o = st.oauth.as_ref().expect("routed with --oauth only");
    json_response(StatusCode::OK, o.auth_server_metadata.clone())
}

/// `GET /authorize?redirect_uri=…&state=…`: approved at once, a code sent back (with `state` and
/// `iss`) to the redirect URI. PKCE is the client's business here: the code is all that is
/// checked at the token endpoint.
async fn handle_authorize(State(st): State<Arc<HttpState>>, uri: axum::http::Uri) -> Response {
    let o = st.oauth.as_ref().expect("routed with --oauth only");
    let query = uri.query().unwrap_or("");
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .map(percent_decode)
    };
    let (Some(redirect), state) = (param("redirect_uri"), param("state").unwrap_or_default())
    else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let code = uuid::Uuid::new_v4().simple().to_string();
    o.codes.lock().insert(code.clone());
    let location = format!(
        "{redirect}?code={code}&state={}&iss={}",
        percent_encode(&state),
        percent_encode(&o.issuer)
    );
    let mut r = StatusCode::FOUND.into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `%XX` escapes of everything but unreserved characters (RFC 3986).
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A query value with its `%XX` escapes (and `+`) decoded.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `POST /token`: the client credentials grant, and the authorization code grant for a code
/// [`handle_authorize`] handed out (once), for [`CLIENT_ID`] authenticated with HTTP Basic.
async fn handle_token(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let o = st.oauth.as_ref().expect("routed with --oauth only");
    let token_error = |status: StatusCode, error: &str| {
        let mut r = json_response(status, json!({ "error": error }).to_string());
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    };
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if basic != Some(o.basic.as_str()) {
        let mut r = token_error(StatusCode::UNAUTHORIZED, "invalid_client");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Basic realm="sluice-bench-echo""#),
        );
        return r;
    }
    let field = |name: &[u8]| {
        body.split(|b| *b == b'&').find_map(|pair| {
            pair.strip_prefix(name)
                .and_then(|v| v.strip_prefix(b"="))
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
    };
    match field(b"grant_type").as_deref() {
        Some("client_credentials") => {}
        Some("authorization_code") => {
            let code = field(b"code").unwrap_or_default();
            if !o.codes.lock().remove(&code) {
                return token_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
        }
        _ => return token_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let granted = {
        let mut tokens = o.tokens.write();
        tokens.insert(token.clone());
        tokens.len()
    };
    eprintln!("sluice-bench-echo: granted access token {granted} to {CLIENT_ID}");
    let mut r = json_response(
        StatusCode::OK,
        json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}).to_string(),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Standard base64 with padding (RFC 4648), for the one Basic credential.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }

    #[test]
    fn only_granted_bearer_tokens_pass() {
        let o = OAuth::new("http://127.0.0.1:1");
        o.tokens.write().insert("abc".into());
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            h
        };
        assert!(o.refuse(&with("Bearer abc")).is_none());
        assert!(o.refuse(&with("bearer abc")).is_none());
        for refused in [with("Bearer abd"), with("Basic abc"), HeaderMap::new()] {
            let r = o.refuse(&refused).expect("refused");
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(
                r.headers()[header::WWW_AUTHENTICATE],
                r#"Bearer resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp""#
            );
        }
    }
}
