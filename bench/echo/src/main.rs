//! `sluice-bench-echo`: the benchmark suite's upstream. A deliberately cheap MCP server with one
//! `echo` tool that answers its arguments back as text and as `structuredContent`, over
//! Streamable HTTP (protocol 2025-11-25 and earlier: `initialize` mints an `Mcp-Session-Id`,
//! every reply is `application/json`, GET answers 405) or stdio (one JSON message per line).
//!
//! ```text
//! sluice-bench-echo [--listen 127.0.0.1:PORT] [--tools N] [--threads N]   (endpoint: /mcp)
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

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str =
    "usage: sluice-bench-echo [--listen HOST:PORT | --stdio] [--tools N] [--threads N]";
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST: &str = "2025-11-25";
const SESSION: &str = "mcp-session-id";

struct Options {
    listen: String,
    stdio: bool,
    hook_process: bool,
    tools: usize,
    threads: Option<usize>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        listen: "127.0.0.1:3001".into(),
        stdio: false,
        hook_process: false,
        tools: 1,
        threads: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => o.listen = value()?,
            "--stdio" => o.stdio = true,
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
    match rt.block_on(serve_http(echo, &opts.listen)) {
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
}

async fn serve_http(echo: Arc<Echo>, listen: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!(
        "sluice-bench-echo: listening on http://{}/mcp",
        listener.local_addr()?
    );
    let state = Arc::new(HttpState {
        echo,
        sessions: Mutex::new(HashSet::new()),
    });
    let app = Router::new()
        .route(
            "/mcp",
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .route("/hook", post(handle_hook))
        .with_state(state);
    axum::serve(listener, app).await
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
async fn handle_get() -> Response {
    let mut r = StatusCode::METHOD_NOT_ALLOWED.into_response();
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    r
}

async fn handle_delete(State(st): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    match session_of(&headers) {
        Some(s) if st.sessions.lock().remove(s) => StatusCode::OK.into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
