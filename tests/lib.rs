//! Shared helpers for the end-to-end tests: locate the workspace binaries, spawn them on free
//! loopback ports, wait for them to listen, and kill them when the test ends.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root (the folder holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Path of a binary built by this workspace (`sluice`, `sluice-fixture`, …).
///
/// The test command builds the whole workspace before running the tests, so the binaries sit
/// beside the test executable's profile folder.
pub fn bin(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let path = target.join(profile).join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace` before the tests",
        path.display()
    );
    path
}

/// A free TCP port on 127.0.0.1 (bound, read, released), below the kernel's ephemeral range
/// (32768 and up on Linux): between the release and the listen of the test's server, no test's
/// outgoing connection can be given it as its source port (the attack tests open thousands).
/// Picked from 20000–32767 with a per-process start and a shared counter, and reserved across
/// the run's test processes (nextest runs each test in its own) by a marker file created
/// exclusively in a directory of that run: two tests running at once never get the same port,
/// which a port handed out but not yet listened on would otherwise allow. A port that does not
/// bind is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_768;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = port_markers();
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n.wrapping_mul(7_919)) % SPAN) as u16;
        let reserved = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(port.to_string()))
            .is_ok();
        if !reserved {
            continue;
        }
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            drop(l);
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The directory of this run's port markers: one per nextest run (`NEXTEST_RUN_ID`), else one per
/// process. Other runs' directories older than a day are removed on the way.
fn port_markers() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::temp_dir().join("sluice-test-ports");
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                let old = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > Duration::from_secs(24 * 3600));
                if old {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let run = std::env::var("NEXTEST_RUN_ID")
            .unwrap_or_else(|_| format!("pid-{}", std::process::id()));
        let dir = root.join(run);
        std::fs::create_dir_all(&dir).expect("the port marker directory");
        dir
    })
    .clone()
}

/// Run `sluice client --era modern URL ARGS… --output json`, a 2026-07-28 client (no
/// `SLUICE_TOKEN` taken from the environment): its exit code, the JSON on its stdout (null when
/// there is none) and its stderr.
pub fn modern_client(url: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(bin("sluice"))
        .args(["client", "--era", "modern", url])
        .args(args)
        .args(["--output", "json"])
        .env_remove("SLUICE_TOKEN")
        .output()
        .expect("run sluice client");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Poll `check` every 100 ms until it holds; panic naming `what` after 10 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not happen within 10 s");
}

/// Wait until something accepts TCP connections on `port` of 127.0.0.1 (at most `timeout`).
pub fn wait_for_port(port: u16, timeout: Duration) {
    wait_for_addr(SocketAddr::from(([127, 0, 0, 1], port)), timeout);
}

/// Wait until something accepts TCP connections at `addr` (at most `timeout`).
pub fn wait_for_addr(addr: SocketAddr, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("nothing listened on {addr} within {timeout:?}");
}

/// A child process that is killed (and reaped) when dropped.
pub struct Proc {
    /// The running child.
    pub child: Child,
}

impl Proc {
    /// Spawn `cmd` with stdin null and stdout/stderr inherited (visible with `--nocapture`).
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null());
        let child = cmd.spawn().expect("spawn child process");
        Proc { child }
    }

    /// Spawn `cmd` with piped stdin/stdout (for stdio protocol tests).
    pub fn spawn_piped(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let child = cmd.spawn().expect("spawn child process");
        Proc { child }
    }

    /// The OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the fixture MCP server over Streamable HTTP on a free port; returns it and its `/mcp` URL.
pub fn start_fixture_http(extra_args: &[&str]) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(bin("sluice-fixture"));
    cmd.arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .args(extra_args);
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(20));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// Start `sluice serve` with the given arguments plus `--listen 127.0.0.1:<free>`; returns it and
/// its `/mcp` URL once it accepts connections.
pub fn start_sluice(args: &[&str]) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(bin("sluice"));
    cmd.arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        );
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

pub mod mcp {
    //! A small raw MCP client for the tests: it speaks Streamable HTTP or stdio by hand, so the
    //! tests can assert exact status codes, headers and bodies (the SDK clients are used in the
    //! interoperability tests).

    use futures_util::StreamExt;
    use serde_json::{json, Value};
    use std::time::Duration;

    /// The Accept header every compliant client sends.
    pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

    /// A finished HTTP response.
    #[derive(Debug)]
    pub struct Resp {
        /// HTTP status.
        pub status: u16,
        /// Response headers.
        pub headers: reqwest::header::HeaderMap,
        /// Body text.
        pub body: String,
    }

    impl Resp {
        /// The header value, if present.
        pub fn header(&self, name: &str) -> Option<String> {
            self.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        }

        /// Is the body an SSE stream?
        pub fn is_sse(&self) -> bool {
            self.header("content-type")
                .is_some_and(|c| c.starts_with("text/event-stream"))
        }

        /// Every JSON-RPC message in the body (one for JSON, each `data:` for SSE).
        pub fn messages(&self) -> Vec<Value> {
            if self.is_sse() {
                parse_sse(&self.body).into_iter().map(|(_, v)| v).collect()
            } else if self.body.is_empty() {
                Vec::new()
            } else {
                vec![serde_json::from_str(&self.body).expect("JSON body")]
            }
        }

        /// The last message (the reply).
        pub fn reply(&self) -> Value {
            self.messages().pop().expect("a reply message")
        }
    }

    /// Parse SSE text into (event id, JSON data) pairs, skipping priming events.
    pub fn parse_sse(body: &str) -> Vec<(Option<String>, Value)> {
        let mut out = Vec::new();
        for block in body.split("\n\n") {
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.trim().is_empty() {
                out.push((id, serde_json::from_str(&data).expect("JSON in SSE data")));
            }
        }
        out
    }

    /// Reads an SSE response incrementally.
    pub struct SseReader {
        stream: std::pin::Pin<
            Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>,
        >,
        buf: String,
    }

    impl SseReader {
        /// Wrap a streaming response.
        pub fn new(resp: reqwest::Response) -> SseReader {
            SseReader {
                stream: Box::pin(resp.bytes_stream()),
                buf: String::new(),
            }
        }

        /// The next message with its event id (None when the stream ends). Panics after 20 s.
        pub async fn next(&mut self) -> Option<(Option<String>, Value)> {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                while let Some(i) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..i + 2).collect();
                    if let Some(m) = parse_sse(&block).pop() {
                        return Some(m);
                    }
                }
                let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                    .await
                    .expect("an SSE event within 20 s");
                match chunk {
                    Some(Ok(b)) => self.buf.push_str(&String::from_utf8_lossy(&b)),
                    _ => return None,
                }
            }
        }
    }

    /// A raw Streamable HTTP client with one session.
    pub struct Client {
        /// The HTTP client.
        pub http: reqwest::Client,
        /// The `/mcp` URL.
        pub url: String,
        /// The session id after initialize.
        pub session: Option<String>,
        next_id: std::sync::atomic::AtomicU64,
    }

    impl Client {
        /// A client for `url` (not initialised).
        pub fn new(url: &str) -> Client {
            Client {
                http: reqwest::Client::new(),
                url: url.to_string(),
                session: None,
                next_id: std::sync::atomic::AtomicU64::new(1),
            }
        }

        /// A client (not initialised) whose requests carry `Authorization: Bearer <token>`.
        pub fn with_bearer(url: &str, token: &str) -> Client {
            let mut c = Client::new(url);
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(
                "authorization",
                format!("Bearer {token}").parse().expect("a header value"),
            );
            c.http = reqwest::Client::builder()
                .default_headers(h)
                .build()
                .expect("an HTTP client");
            c
        }

        /// End the session (DELETE with its id); returns the status.
        pub async fn end_session(&self) -> u16 {
            let sid = self.session.as_deref().expect("a session to end");
            self.http
                .delete(&self.url)
                .header("mcp-session-id", sid)
                .send()
                .await
                .expect("DELETE")
                .status()
                .as_u16()
        }

        /// Initialise with the given capabilities; returns the initialize result.
        pub async fn initialize(&mut self, capabilities: Value) -> Value {
            let resp = self
                .post(
                    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": capabilities,
                        "clientInfo": {"name": "sluice-e2e", "version": "1"}
                    }}),
                )
                .await;
            assert_eq!(resp.status, 200, "initialize: {}", resp.body);
            self.session = Some(resp.header("mcp-session-id").expect("Mcp-Session-Id"));
            let init = resp.reply();
            let n = self
                .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
            assert_eq!(n.status, 202);
            init["result"].clone()
        }

        /// A POST request builder with the standard headers (and the session).
        pub fn builder(&self) -> reqwest::RequestBuilder {
            self.builder_with(&[])
        }

        /// A POST request builder whose standard headers are replaced by `overrides`.
        pub fn builder_with(&self, overrides: &[(&'static str, &str)]) -> reqwest::RequestBuilder {
            use reqwest::header::{HeaderMap, HeaderValue};
            let mut h = HeaderMap::new();
            h.insert("accept", HeaderValue::from_static(ACCEPT_BOTH));
            h.insert("content-type", HeaderValue::from_static("application/json"));
            if let Some(s) = &self.session {
                h.insert("mcp-session-id", HeaderValue::from_str(s).unwrap());
                h.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2025-11-25"),
                );
            }
            for (k, v) in overrides {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            self.http.post(&self.url).headers(h)
        }

        /// POST one message and read the whole response.
        pub async fn post(&self, msg: Value) -> Resp {
            finish(
                self.builder()
                    .body(msg.to_string())
                    .send()
                    .await
                    .expect("POST"),
            )
            .await
        }

        /// POST one message and return the response unread (for streaming).
        pub async fn post_streaming(&self, msg: Value) -> reqwest::Response {
            self.builder()
                .body(msg.to_string())
                .send()
                .await
                .expect("POST")
        }

        /// A fresh request id.
        pub fn id(&self) -> u64 {
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        }

        /// Send a request; return the reply message (the last message of the response).
        pub async fn request(&self, method: &str, params: Value) -> Value {
            let id = self.id();
            let resp = self
                .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
                .await;
            assert_eq!(resp.status, 200, "{method}: {}", resp.body);
            let reply = resp.reply();
            assert_eq!(reply["id"], json!(id));
            reply
        }

        /// tools/call; returns the reply message.
        pub async fn call_tool(&self, name: &str, args: Value) -> Value {
            self.request("tools/call", json!({"name": name, "arguments": args}))
                .await
        }

        /// The names from tools/list (all pages).
        pub async fn tool_names(&self) -> Vec<String> {
            let mut names = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let params = match &cursor {
                    Some(c) => json!({"cursor": c}),
                    None => json!({}),
                };
                let r = self.request("tools/list", params).await;
                for t in r["result"]["tools"].as_array().expect("tools") {
                    names.push(t["name"].as_str().unwrap().to_string());
                }
                match r["result"]["nextCursor"].as_str() {
                    Some(c) => cursor = Some(c.to_string()),
                    None => return names,
                }
            }
        }

        /// Open the GET stream.
        pub async fn open_get(&self, last_event_id: Option<&str>) -> reqwest::Response {
            let mut rb = self
                .http
                .get(&self.url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", self.session.as_deref().unwrap_or(""));
            if let Some(l) = last_event_id {
                rb = rb.header("last-event-id", l);
            }
            rb.send().await.expect("GET")
        }
    }

    /// Read a whole response.
    pub async fn finish(resp: reqwest::Response) -> Resp {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap_or_default();
        Resp {
            status,
            headers,
            body,
        }
    }
}

pub mod tree {
    //! Configuration trees written into temporary folders for a test.

    use serde_json::Value;
    use std::path::{Path, PathBuf};

    /// A temporary home folder, removed on drop.
    pub struct Home {
        /// Its path.
        pub path: PathBuf,
    }

    impl Home {
        /// An empty home folder.
        pub fn new(label: &str) -> Home {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("sluice-e2e-{label}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create home");
            Home { path }
        }

        /// Write a file (creating folders) with the given text.
        pub fn write(&self, rel: &str, text: &str) -> &Home {
            let p = self.path.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }

        /// Write `mcp/expose.json`.
        pub fn expose(&self, v: &Value) -> &Home {
            self.write("mcp/expose.json", &serde_json::to_string_pretty(v).unwrap())
        }

        /// The path as a string argument.
        pub fn arg(&self) -> String {
            self.path.to_string_lossy().into_owned()
        }

        /// The path.
        pub fn path(&self) -> &Path {
            &self.path
        }

        /// The lines of the audit log `logs/audit.jsonl`, once there are at least `n` (waiting
        /// at most 5 s; then what there is).
        pub async fn audit_lines(&self, n: usize) -> Vec<Value> {
            let path = self.path.join("logs/audit.jsonl");
            let mut lines = Vec::new();
            for _ in 0..100 {
                lines = std::fs::read_to_string(&path)
                    .unwrap_or_default()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                if lines.len() >= n {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            lines
        }
    }

    impl Drop for Home {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub mod recording {
    //! A minimal Streamable HTTP MCP upstream that records every request it gets (method, HTTP
    //! headers, params), for tests that assert what the gateway sends upstream (trace context,
    //! forwarded credentials). Tools: `echo` (returns its arguments as text), `fail` (a JSON-RPC
    //! error), `blocked`.

    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode};
    use axum::response::IntoResponse;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    /// One request the upstream got.
    #[derive(Debug, Clone)]
    pub struct Seen {
        /// The JSON-RPC method.
        pub method: String,
        /// Every HTTP header (lowercase names).
        pub headers: BTreeMap<String, String>,
        /// The params.
        pub params: Value,
    }

    /// What the upstream has been sent, in order.
    pub type Log = Arc<Mutex<Vec<Seen>>>;

    /// Start it on a free loopback port; returns its `/mcp` URL and its log.
    pub async fn start(name: &str) -> (String, Log) {
        let log: Log = Arc::default();
        let seen = log.clone();
        let name = name.to_string();
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::any(move |method: Method, headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                let name = name.clone();
                async move {
                    if method != Method::POST {
                        return StatusCode::METHOD_NOT_ALLOWED.into_response();
                    }
                    let msg: Value = serde_json::from_slice(&body).unwrap();
                    let Some(id) = msg.get("id").cloned() else {
                        return StatusCode::ACCEPTED.into_response();
                    };
                    let m = msg["method"].as_str().unwrap_or("").to_string();
                    let headers = headers
                        .iter()
                        .map(|(k, v)| {
                            (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                        })
                        .collect();
                    seen.lock().unwrap().push(Seen {
                        method: m.clone(),
                        headers,
                        params: msg["params"].clone(),
                    });
                    let schema = json!({"type": "object"});
                    let reply = match m.as_str() {
                        "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                            "serverInfo": {"name": name, "version": "1"}}}),
                        "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                            {"name": "echo", "inputSchema": schema},
                            {"name": "fail", "inputSchema": schema},
                            {"name": "blocked", "inputSchema": schema}]}}),
                        "tools/call" if msg["params"]["name"] == "fail" => json!({"jsonrpc": "2.0",
                            "id": id, "error": {"code": -32099, "message": "boom"}}),
                        "tools/call" => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "content": [{"type": "text", "text": msg["params"]["arguments"].to_string()}]}}),
                        _ => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                    };
                    axum::Json(reply).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/mcp"), log)
    }
}
