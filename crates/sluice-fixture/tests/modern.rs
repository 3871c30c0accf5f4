//! The fixture as a 2026-07-28 (modern era) server, checked with raw JSON over Streamable HTTP
//! and stdio: `server/discover`, the header and envelope errors, `resultType` and caching
//! hints, multi round-trip requests (`input_required` + retry), `subscriptions/listen`,
//! cancellation, progress and logging, the `--era` switch, and legacy sessions served side by
//! side with modern requests by one process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const MODERN: &str = "2026-07-28";
const FIXTURE: &str = env!("CARGO_BIN_EXE_sluice-fixture");
const WAIT: Duration = Duration::from_secs(10);

/// A fixture serving HTTP on an ephemeral loopback port; killed on drop.
struct HttpFixture {
    child: Child,
    url: String,
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_http(extra: &[&str]) -> HttpFixture {
    let mut child = Command::new(FIXTURE)
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the fixture");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "fixture exited");
        if let Some(rest) = line.trim().strip_prefix("sluice-fixture: listening on ") {
            break rest.to_string();
        }
    };
    // Keep draining stderr so the fixture never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    HttpFixture { child, url }
}

/// The modern `_meta` envelope with client capabilities `caps`.
fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": { "name": "modern-test", "version": "1.0.0" },
        "io.modelcontextprotocol/clientCapabilities": caps
    })
}

/// `params` with the modern envelope (capabilities `caps`) merged into its `_meta`.
fn with_meta(mut params: Value, caps: Value) -> Value {
    let mut m = meta(caps);
    if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
        for (k, v) in extra {
            m[k] = v.clone();
        }
    }
    params["_meta"] = m;
    params
}

fn all_caps() -> Value {
    json!({ "elicitation": {}, "sampling": {}, "roots": {} })
}

/// The standard 2026-07-28 headers for `method` with `params`.
fn standard_headers(method: &str, params: &Value) -> Vec<(String, String)> {
    let mut h = vec![
        ("MCP-Protocol-Version".to_string(), MODERN.to_string()),
        ("Mcp-Method".to_string(), method.to_string()),
    ];
    let name = match method {
        "tools/call" | "prompts/get" => params.get("name"),
        "resources/read" => params.get("uri"),
        _ => None,
    };
    if let Some(name) = name.and_then(Value::as_str) {
        h.push(("Mcp-Name".to_string(), name.to_string()));
    }
    h
}

/// One HTTP exchange: status, content type and the JSON-RPC messages of the body (one for
/// JSON, every `data:` event for SSE).
struct Reply {
    status: u16,
    content_type: String,
    messages: Vec<Value>,
}

impl Reply {
    /// The response message (the last one with a result or an error).
    fn response(&self) -> &Value {
        self.messages
            .iter()
            .rev()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .expect("a JSON-RPC response")
    }

    fn result(&self) -> &Value {
        let r = self.response();
        assert!(r.get("error").is_none(), "unexpected error: {r}");
        &r["result"]
    }

    fn error_code(&self) -> i64 {
        self.response()["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error, got {}", self.response()))
    }
}

fn sse_data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

async fn post_raw(url: &str, headers: &[(String, String)], body: &Value) -> Reply {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string())
        .timeout(WAIT);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req.send().await.expect("POST");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.text().await.unwrap_or_default();
    let messages = if content_type.starts_with("text/event-stream") {
        sse_data(&text)
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))]
    };
    Reply {
        status,
        content_type,
        messages,
    }
}

/// A conformant modern request (`params` gets the envelope with capabilities `caps`).
async fn modern(url: &str, id: Value, method: &str, params: Value, caps: Value) -> Reply {
    let params = with_meta(params, caps);
    let headers = standard_headers(method, &params);
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    post_raw(url, &headers, &body).await
}

/// A modern request with the standard headers altered by `edit`.
async fn modern_with_headers(
    url: &str,
    method: &str,
    params: Value,
    edit: impl FnOnce(&mut Vec<(String, String)>),
) -> Reply {
    let params = with_meta(params, json!({}));
    let mut headers = standard_headers(method, &params);
    edit(&mut headers);
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    post_raw(url, &headers, &body).await
}

fn set(headers: &mut Vec<(String, String)>, name: &str, value: Option<&str>) {
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    if let Some(v) = value {
        headers.push((name.to_string(), v.to_string()));
    }
}

/// Reads an SSE response event by event.
struct SseReader {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: String,
}

impl SseReader {
    fn new(resp: reqwest::Response) -> Self {
        SseReader {
            stream: resp.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed(),
            buf: String::new(),
        }
    }

    /// The next event's JSON data (`Err` on timeout).
    async fn next(&mut self) -> Result<Value, tokio::time::error::Elapsed> {
        let fut = async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let frame: String = self.buf.drain(..end + 2).collect();
                    if let Some(v) = sse_data(&frame).into_iter().next() {
                        return v;
                    }
                    continue;
                }
                let chunk = self.stream.next().await.expect("stream open").unwrap();
                self.buf.push_str(&String::from_utf8_lossy(&chunk));
            }
        };
        tokio::time::timeout(WAIT, fut).await
    }
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

#[tokio::test]
async fn discover_lists_both_eras_and_stamps_the_result() {
    let fx = start_http(&["--name", "fx-modern", "--ttl-ms", "5000"]);
    let r = modern(&fx.url, json!(1), "server/discover", json!({}), json!({})).await;
    assert_eq!(r.status, 200);
    let result = r.result();
    assert_eq!(
        result["supportedVersions"],
        json!([
            MODERN,
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(result["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fx-modern"
    );
    assert_eq!(result["ttlMs"], 5000);
    assert_eq!(result["cacheScope"], "public");
    // No session is minted for a modern request.
    let resp = reqwest::Client::new()
        .post(&fx.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "server/discover")
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover",
                   "params": {"_meta": meta(json!({}))}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("mcp-session-id").is_none());
}

#[tokio::test]
async fn header_errors_are_400_with_header_mismatch() {
    let fx = start_http(&[]);
    let url = fx.url.as_str();
    let echo = json!({ "name": "echo", "arguments": { "text": "hi" } });
    let cases: Vec<(&str, Reply)> = vec![
        (
            "missing MCP-Protocol-Version",
            modern_with_headers(url, "tools/list", json!({}), |h| {
                set(h, "MCP-Protocol-Version", None)
            })
            .await,
        ),
        (
            "MCP-Protocol-Version differs from _meta",
            modern_with_headers(url, "tools/list", json!({}), |h| {
                set(h, "MCP-Protocol-Version", Some("2025-11-25"))
            })
            .await,
        ),
        (
            "missing Mcp-Method",
            modern_with_headers(url, "tools/list", json!({}), |h| set(h, "Mcp-Method", None)).await,
        ),
        (
            "Mcp-Method differs from the body",
            modern_with_headers(url, "tools/list", json!({}), |h| {
                set(h, "Mcp-Method", Some("prompts/list"))
            })
            .await,
        ),
        (
            "Mcp-Method differs in case",
            modern_with_headers(url, "tools/list", json!({}), |h| {
                set(h, "Mcp-Method", Some("TOOLS/LIST"))
            })
            .await,
        ),
        (
            "missing Mcp-Name",
            modern_with_headers(url, "tools/call", echo.clone(), |h| {
                set(h, "Mcp-Name", None)
            })
            .await,
        ),
        (
            "Mcp-Name differs from params.name",
            modern_with_headers(url, "tools/call", echo.clone(), |h| {
                set(h, "Mcp-Name", Some("add"))
            })
            .await,
        ),
        (
            "Mcp-Name differs from params.uri",
            modern_with_headers(
                url,
                "resources/read",
                json!({ "uri": "test://static-text" }),
                |h| set(h, "Mcp-Name", Some("test://static-binary")),
            )
            .await,
        ),
        (
            "missing Mcp-Param-Region",
            modern_with_headers(
                url,
                "tools/call",
                json!({ "name": "region_echo", "arguments": { "region": "us-west1" } }),
                |_| {},
            )
            .await,
        ),
        (
            "Mcp-Param-Region differs",
            modern_with_headers(
                url,
                "tools/call",
                json!({ "name": "region_echo", "arguments": { "region": "us-west1" } }),
                |h| set(h, "Mcp-Param-Region", Some("eu-west1")),
            )
            .await,
        ),
        (
            "Mcp-Param-Region with bad Base64 padding",
            modern_with_headers(
                url,
                "tools/call",
                json!({ "name": "region_echo", "arguments": { "region": "Hello" } }),
                |h| set(h, "Mcp-Param-Region", Some("=?base64?SGVsbG8?=")),
            )
            .await,
        ),
    ];
    for (what, r) in &cases {
        assert_eq!(r.status, 400, "{what}: {:?}", r.messages);
        assert_eq!(r.error_code(), -32020, "{what}");
        assert_eq!(r.response()["id"], 7, "{what}: the error echoes the id");
    }
    // Whitespace around values, lower-case header names and the Base64 form are accepted.
    let ok = modern_with_headers(url, "tools/call", echo.clone(), |h| {
        set(h, "Mcp-Name", None);
        set(h, "mcp-name", Some("  echo  "));
    })
    .await;
    assert_eq!(ok.status, 200, "{:?}", ok.messages);
    let ok = modern_with_headers(
        url,
        "tools/call",
        json!({ "name": "region_echo", "arguments": { "region": "Hello, 世界" } }),
        |h| {
            set(
                h,
                "Mcp-Param-Region",
                Some("=?base64?SGVsbG8sIOS4lueVjA==?="),
            )
        },
    )
    .await;
    assert_eq!(ok.status, 200, "{:?}", ok.messages);
    assert_eq!(ok.result()["structuredContent"]["region"], "Hello, 世界");
}

#[tokio::test]
async fn envelope_and_version_errors() {
    let fx = start_http(&[]);
    // An unsupported version: -32022 naming what is supported and what was asked for.
    let params = json!({ "_meta": {
        "io.modelcontextprotocol/protocolVersion": "1900-01-01",
        "io.modelcontextprotocol/clientCapabilities": {}
    }});
    let mut headers = standard_headers("server/discover", &params);
    set(&mut headers, "MCP-Protocol-Version", Some("1900-01-01"));
    let body = json!({"jsonrpc": "2.0", "id": 301, "method": "server/discover", "params": params});
    let r = post_raw(&fx.url, &headers, &body).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), -32022);
    let data = &r.response()["error"]["data"];
    assert_eq!(data["requested"], "1900-01-01");
    assert_eq!(data["supported"][0], MODERN);
    assert_eq!(r.response()["id"], 301);

    // A missing envelope field: -32602, HTTP 400.
    for params in [
        json!({}),
        json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": MODERN } }),
        json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities": {} } }),
    ] {
        let headers = standard_headers("server/discover", &params);
        let body =
            json!({"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": params});
        let r = post_raw(&fx.url, &headers, &body).await;
        assert_eq!(r.status, 400, "{params}");
        assert_eq!(r.error_code(), -32602, "{params}");
    }

    // Unknown and removed methods: 404 with -32601.
    for method in [
        "unknown/method",
        "ping",
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
    ] {
        let r = modern(&fx.url, json!(500), method, json!({}), json!({})).await;
        assert_eq!(r.status, 404, "{method}");
        assert_eq!(r.error_code(), -32601, "{method}");
    }

    // A tool that needs a capability the request did not declare: -32021, HTTP 400.
    let r = modern(
        &fx.url,
        json!(401),
        "tools/call",
        json!({ "name": "test_sampling", "arguments": { "prompt": "hi" } }),
        json!({ "elicitation": {} }),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), -32021);
    assert_eq!(
        r.response()["error"]["data"]["requiredCapabilities"],
        json!({ "sampling": {} })
    );
}

#[tokio::test]
async fn results_carry_result_type_and_caching_hints() {
    let fx = start_http(&[]);
    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let r = modern(&fx.url, json!(1), method, json!({}), json!({})).await;
        let result = r.result();
        assert_eq!(result["resultType"], "complete", "{method}");
        assert_eq!(result["ttlMs"], 0, "{method}");
        assert_eq!(result["cacheScope"], "public", "{method}");
        assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"].is_string());
    }
    let r = modern(
        &fx.url,
        json!(2),
        "resources/read",
        json!({ "uri": "test://static-text" }),
        json!({}),
    )
    .await;
    let result = r.result();
    assert_eq!(result["contents"][0]["uri"], "test://static-text");
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");

    // A tool result: resultType and serverInfo, but no caching hints.
    let r = modern(
        &fx.url,
        json!(3),
        "tools/call",
        json!({ "name": "add", "arguments": { "a": 2, "b": 3 } }),
        json!({}),
    )
    .await;
    let result = r.result();
    assert_eq!(result["structuredContent"]["sum"], 5);
    assert_eq!(result["resultType"], "complete");
    assert!(result.get("ttlMs").is_none());

    // Resource not found is -32602 in 2026-07-28, with the URI.
    let r = modern(
        &fx.url,
        json!(4),
        "resources/read",
        json!({ "uri": "test://nope" }),
        json!({}),
    )
    .await;
    assert_eq!(r.error_code(), -32602);
    assert_eq!(r.response()["error"]["data"]["uri"], "test://nope");
}

#[tokio::test]
async fn elicitation_round_trip_over_http() {
    let fx = start_http(&[]);
    let params = json!({ "name": "test_elicitation", "arguments": { "message": "Your name?" } });
    let r = modern(&fx.url, json!(1), "tools/call", params.clone(), all_caps()).await;
    let first = r.result().clone();
    assert_eq!(first["resultType"], "input_required");
    let request = &first["inputRequests"]["elicitation"];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Your name?");
    assert_eq!(
        request["params"]["requestedSchema"]["required"],
        json!(["response"])
    );
    let state = first["requestState"].as_str().unwrap().to_string();
    assert!(
        first.get("ttlMs").is_none(),
        "input_required is not cacheable"
    );

    // The retry: a new id, the same params, the answer and the echoed state.
    let mut retry = params.clone();
    retry["inputResponses"] = json!({
        "elicitation": { "action": "accept", "content": { "response": "Ada" } }
    });
    retry["requestState"] = json!(state);
    let r = modern(&fx.url, json!(2), "tools/call", retry.clone(), all_caps()).await;
    let done = r.result();
    assert_eq!(done["resultType"], "complete");
    assert_eq!(
        text_of(done),
        r#"User response: action=accept, content={"response":"Ada"}"#
    );

    // A tampered requestState is refused.
    let mut tampered = retry.clone();
    tampered["requestState"] = json!(format!("{state}-TAMPERED"));
    let r = modern(&fx.url, json!(3), "tools/call", tampered, all_caps()).await;
    assert_eq!(r.error_code(), -32602);
    // So is a state issued for other arguments.
    let mut elsewhere = retry.clone();
    elsewhere["arguments"]["message"] = json!("Another question?");
    let r = modern(&fx.url, json!(4), "tools/call", elsewhere, all_caps()).await;
    assert_eq!(r.error_code(), -32602);
    // An answer of the wrong shape is a protocol error.
    let mut malformed = params.clone();
    malformed["inputResponses"] = json!({ "elicitation": 12345 });
    let r = modern(&fx.url, json!(5), "tools/call", malformed, all_caps()).await;
    assert_eq!(r.error_code(), -32602);
    // A retry without the answer asks again.
    let mut wrong_key = params;
    wrong_key["inputResponses"] = json!({ "other": { "action": "accept" } });
    let r = modern(&fx.url, json!(6), "tools/call", wrong_key, all_caps()).await;
    assert_eq!(r.result()["resultType"], "input_required");
}

#[tokio::test]
async fn multi_round_keeps_earlier_answers_in_the_request_state() {
    let fx = start_http(&[]);
    let params = json!({ "name": "test_input_required_result_multi_round", "arguments": {} });
    let r = modern(&fx.url, json!(1), "tools/call", params.clone(), all_caps()).await;
    let r1 = r.result().clone();
    assert!(r1["inputRequests"]["step1"].is_object());
    let mut p2 = params.clone();
    p2["inputResponses"] = json!({ "step1": { "action": "accept", "content": { "name": "Ada" } } });
    p2["requestState"] = r1["requestState"].clone();
    let r = modern(&fx.url, json!(2), "tools/call", p2, all_caps()).await;
    let r2 = r.result().clone();
    assert_eq!(r2["resultType"], "input_required");
    assert!(r2["inputRequests"]["step2"].is_object());
    assert_ne!(r2["requestState"], r1["requestState"]);
    let mut p3 = params;
    p3["inputResponses"] =
        json!({ "step2": { "action": "accept", "content": { "color": "blue" } } });
    p3["requestState"] = r2["requestState"].clone();
    let r = modern(&fx.url, json!(3), "tools/call", p3, all_caps()).await;
    assert_eq!(
        text_of(r.result()),
        "Hello Ada, your favorite color is blue"
    );
}

#[tokio::test]
async fn progress_and_logging_ride_the_request_stream() {
    let fx = start_http(&[]);
    let r = modern(
        &fx.url,
        json!(1),
        "tools/call",
        json!({ "name": "test_tool_with_progress", "arguments": {},
                "_meta": { "progressToken": "tok-1" } }),
        json!({}),
    )
    .await;
    assert!(r.content_type.starts_with("text/event-stream"));
    let progress: Vec<_> = r
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3);
    assert_eq!(progress[2]["params"]["progressToken"], "tok-1");
    assert_eq!(r.response()["id"], 1);
    assert_eq!(r.result()["resultType"], "complete");
    // SSE events carry no ids: 2026-07-28 streams are not resumable.
    assert!(r
        .messages
        .iter()
        .all(|m| m.get("id").is_none() || m["id"] == 1));

    // Log messages only when the request asks for them.
    let quiet = modern(
        &fx.url,
        json!(2),
        "tools/call",
        json!({ "name": "test_tool_with_logging", "arguments": {} }),
        json!({}),
    )
    .await;
    assert!(quiet
        .messages
        .iter()
        .all(|m| m["method"] != "notifications/message"));
    let loud = modern(
        &fx.url,
        json!(3),
        "tools/call",
        json!({ "name": "test_tool_with_logging", "arguments": {},
                "_meta": { "io.modelcontextprotocol/logLevel": "info" } }),
        json!({}),
    )
    .await;
    let logs = loud
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 3);
}

#[tokio::test]
async fn listen_acknowledges_then_delivers_what_was_asked_for() {
    let fx = start_http(&[]);
    let params = with_meta(
        json!({ "notifications": {
            "toolsListChanged": true,
            "resourceSubscriptions": ["test://watched-resource"]
        }}),
        json!({}),
    );
    let mut req = reqwest::Client::new()
        .post(&fx.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in standard_headers("subscriptions/listen", &params) {
        req = req.header(k, v);
    }
    let resp = req
        .body(
            json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
                   "params": params})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut events = SseReader::new(resp);
    let ack = events.next().await.expect("the acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({ "toolsListChanged": true, "resourceSubscriptions": ["test://watched-resource"] })
    );

    // Changes made by other requests reach the stream; unasked-for ones do not.
    for (i, (name, args)) in [
        ("test_trigger_prompt_change", json!({})),
        ("trigger_list_changed", json!({})),
        ("touch_resource", json!({ "uri": "test://static-text" })),
        (
            "touch_resource",
            json!({ "uri": "test://watched-resource" }),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let r = modern(
            &fx.url,
            json!(10 + i),
            "tools/call",
            json!({ "name": name, "arguments": args }),
            json!({}),
        )
        .await;
        assert_eq!(r.result()["resultType"], "complete");
    }
    let changed = events.next().await.expect("list_changed");
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let updated = events.next().await.expect("resources/updated");
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], "test://watched-resource");
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    // The new tool is listed.
    let r = modern(&fx.url, json!(20), "tools/list", json!({}), json!({})).await;
    assert!(r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "dynamic_0"));
}

#[tokio::test]
async fn closing_the_response_stream_cancels_the_request() {
    let fx = start_http(&[]);
    // Give up on a slow call after a moment: the connection closes, which cancels it.
    let params = with_meta(
        json!({ "name": "slow", "arguments": { "ms": 20000 } }),
        json!({}),
    );
    let mut req = reqwest::Client::new()
        .post(&fx.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (k, v) in standard_headers("tools/call", &params) {
        req = req.header(k, v);
    }
    let call = req
        .body(
            json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": params})
                .to_string(),
        )
        .send();
    assert!(tokio::time::timeout(Duration::from_millis(300), call)
        .await
        .is_err());
    let mut report = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = modern(
            &fx.url,
            json!(2),
            "tools/call",
            json!({ "name": "last_cancelled", "arguments": {} }),
            json!({}),
        )
        .await;
        report = text_of(r.result()).to_string();
        if report != "none" {
            break;
        }
    }
    let report: Value = serde_json::from_str(&report).expect("a cancellation report");
    assert_eq!(report["requestId"], "slow-1");
}

#[tokio::test]
async fn a_legacy_session_and_modern_requests_side_by_side() {
    let fx = start_http(&[]);
    let client = reqwest::Client::new();
    let legacy = |body: Value, session: Option<String>| {
        let mut req = client
            .post(&fx.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(s) = session {
            req = req
                .header("Mcp-Session-Id", s)
                .header("MCP-Protocol-Version", "2025-11-25");
        }
        req.send()
    };
    let init = legacy(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "legacy-test", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let init: Value = serde_json::from_str(&init.text().await.unwrap()).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(init["result"].get("resultType").is_none());

    // A modern request in between needs no session and does not disturb the legacy one.
    let r = modern(
        &fx.url,
        json!(1),
        "tools/call",
        json!({ "name": "echo", "arguments": { "era": "modern" } }),
        json!({}),
    )
    .await;
    assert_eq!(r.result()["structuredContent"]["era"], "modern");

    let resp = legacy(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"era": "legacy"}}}),
        Some(session.clone()),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(body["result"]["structuredContent"]["era"], "legacy");
    assert!(body["result"].get("resultType").is_none());

    // The legacy client still gets server-to-client requests, not input_required.
    let resp = legacy(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "test_sampling", "arguments": {"prompt": "hi"}}}),
        Some(session.clone()),
    )
    .await
    .unwrap();
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert!(text_of(&body["result"]).starts_with("Sampling not supported"));

    // A session-less request without the envelope is still a legacy error, not a modern one.
    let resp = legacy(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn era_switch_legacy_and_modern_only() {
    let legacy = start_http(&["--era", "legacy"]);
    let r = modern(
        &legacy.url,
        json!(1),
        "server/discover",
        json!({}),
        json!({}),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.error_code(), -32601);

    let modern_only = start_http(&["--era", "modern"]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy-test", "version": "1"}}});
    let r = post_raw(&modern_only.url, &[], &body).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), -32022);
    assert_eq!(
        r.response()["error"]["data"],
        json!({ "supported": [MODERN], "requested": "2025-11-25" })
    );
    let r = modern(
        &modern_only.url,
        json!(2),
        "server/discover",
        json!({}),
        json!({}),
    )
    .await;
    assert_eq!(r.result()["supportedVersions"], json!([MODERN]));
    let get = reqwest::Client::new()
        .get(&modern_only.url)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
}

/// A fixture on stdio, driven line by line.
struct StdioFixture {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl StdioFixture {
    fn start(extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(FIXTURE)
            .arg("--stdio")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the fixture");
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        StdioFixture {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, msg: Value) {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a message in time")
            .unwrap()
            .expect("stdout open");
        serde_json::from_str(&line).unwrap()
    }

    /// Send request `id` and collect messages until its response (returned last).
    async fn call(&mut self, id: Value, method: &str, params: Value) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut seen = Vec::new();
        loop {
            let msg = self.recv().await;
            let done = msg["id"] == id && msg.get("method").is_none();
            seen.push(msg);
            if done {
                return seen;
            }
        }
    }

    async fn response(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.call(id, method, params).await.pop().unwrap()
    }
}

impl Drop for StdioFixture {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test]
async fn stdio_serves_both_eras_with_round_trips_cancellation_and_listen() {
    let mut fx = StdioFixture::start(&[]);
    let r = fx
        .response(
            json!(1),
            "server/discover",
            json!({ "_meta": meta(json!({})) }),
        )
        .await;
    assert_eq!(r["result"]["supportedVersions"][0], MODERN);
    assert_eq!(r["result"]["resultType"], "complete");

    // Sampling via input_required and a retry.
    let params =
        json!({ "name": "test_sampling", "arguments": { "prompt": "Capital of France?" } });
    let r = fx
        .response(
            json!(2),
            "tools/call",
            with_meta(params.clone(), all_caps()),
        )
        .await;
    let first = &r["result"];
    assert_eq!(first["resultType"], "input_required");
    let request = &first["inputRequests"]["sampling"];
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "Capital of France?"
    );
    assert_eq!(request["params"]["maxTokens"], 100);
    let mut retry = params.clone();
    retry["inputResponses"] = json!({ "sampling": {
        "role": "assistant", "content": { "type": "text", "text": "Paris" },
        "model": "test-model", "stopReason": "endTurn"
    }});
    retry["requestState"] = first["requestState"].clone();
    let r = fx
        .response(json!(3), "tools/call", with_meta(retry, all_caps()))
        .await;
    assert_eq!(text_of(&r["result"]), "LLM response: Paris");

    // Roots too.
    let r = fx
        .response(
            json!(4),
            "tools/call",
            with_meta(json!({ "name": "ask_roots", "arguments": {} }), all_caps()),
        )
        .await;
    assert_eq!(
        r["result"]["inputRequests"]["roots"]["method"],
        "roots/list"
    );

    // A listen stream: acknowledged first, then the list change it asked for.
    fx.send(json!({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen",
                   "params": with_meta(json!({"notifications": {"toolsListChanged": true}}), json!({}))}))
        .await;
    let ack = fx.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub"
    );
    let seen = fx
        .call(
            json!(5),
            "tools/call",
            with_meta(
                json!({ "name": "trigger_list_changed", "arguments": {} }),
                json!({}),
            ),
        )
        .await;
    let mut notes: Vec<Value> = seen
        .into_iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .collect();
    if notes.is_empty() {
        notes.push(fx.recv().await);
    }
    assert_eq!(notes[0]["method"], "notifications/tools/list_changed");
    assert_eq!(
        notes[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub"
    );
    fx.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "sub"}}),
    )
    .await;

    // A slow modern call cancelled by notifications/cancelled sends no response.
    fx.send(json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                   "params": with_meta(json!({"name": "slow", "arguments": {"ms": 20000}}), json!({}))}))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    fx.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "slow", "reason": "test"}}),
    )
    .await;
    let r = fx
        .response(
            json!(6),
            "tools/call",
            with_meta(
                json!({ "name": "last_cancelled", "arguments": {} }),
                json!({}),
            ),
        )
        .await;
    assert_eq!(
        text_of(&r["result"]),
        r#"{"requestId":"slow","reason":"test"}"#
    );

    // The same process still serves a legacy client's handshake and requests.
    let r = fx
        .response(
            json!(7),
            "initialize",
            json!({ "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "legacy", "version": "1" } }),
        )
        .await;
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    fx.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let r = fx.response(json!(8), "ping", json!({})).await;
    assert_eq!(r["result"], json!({}));
    // ... while a modern ping is a method that no longer exists.
    let r = fx
        .response(json!(9), "ping", json!({ "_meta": meta(json!({})) }))
        .await;
    assert_eq!(r["error"]["code"], -32601);
}

#[tokio::test]
async fn stdio_era_switch() {
    let mut legacy = StdioFixture::start(&["--era", "legacy"]);
    let r = legacy
        .response(
            json!(1),
            "server/discover",
            json!({ "_meta": meta(json!({})) }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32601);

    let mut modern_only = StdioFixture::start(&["--era", "modern"]);
    let r = modern_only
        .response(
            json!(1),
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "legacy", "version": "1" } }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["supported"], json!([MODERN]));
    // Without the envelope, a request to a modern-only server is malformed.
    let r = modern_only
        .response(json!(2), "tools/list", json!({}))
        .await;
    assert_eq!(r["error"]["code"], -32602);
}
