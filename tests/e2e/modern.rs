//! The 2026-07-28 era toward clients, through the real binary with a legacy upstream behind it:
//! `server/discover`, the version and header rules with their exact errors, `resultType` and
//! cache hints, multi round-trip requests bridging the upstream's elicitation and sampling
//! requests (signed `requestState`: tampered, replayed and foreign states refused), cancellation
//! by closing the response stream, `subscriptions/listen`, hooks seeing `era: "modern"`, legacy
//! and modern clients on one listener, and two gateway processes answering alike.

use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client, Resp};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, Proc};
use std::time::Duration;

const V: &str = "2026-07-28";

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A tree with the fixture (`fx_*`) over stdio, spoken to in the handshake era (so its
/// sampling and elicitation requests are bridged into input_required rounds), and a command hook
/// that keeps its last payload.
fn home(label: &str) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true, "era": "handshake"}
    ]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "keep", "event": "PreToolUse", "type": "command",
             "command": "cat > \"${HOOKS_DIR}/payload.json\"", "enabled": true}
        ]})
        .to_string(),
    );
    home
}

/// A modern client: no session, `_meta` and the mirrored headers on every request.
struct Modern {
    http: reqwest::Client,
    url: String,
    capabilities: Value,
}

impl Modern {
    fn new(url: &str, capabilities: Value) -> Modern {
        Modern {
            http: reqwest::Client::new(),
            url: url.to_string(),
            capabilities,
        }
    }

    /// The body of a request (`params` gets the modern `_meta`).
    fn body(&self, id: u64, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        });
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    /// POST `body` with the standard headers derived from it, overridden by `headers`
    /// (a value of "" removes the header).
    async fn post_with(&self, body: &Value, headers: &[(&str, &str)]) -> Resp {
        let mut h: Vec<(String, String)> = vec![
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
            ("content-type".into(), "application/json".into()),
            ("mcp-protocol-version".into(), V.into()),
            ("mcp-method".into(), body["method"].as_str().unwrap().into()),
        ];
        if let Some(n) = body["params"]["name"]
            .as_str()
            .or(body["params"]["uri"].as_str())
        {
            if ["tools/call", "prompts/get", "resources/read"]
                .contains(&body["method"].as_str().unwrap())
            {
                h.push(("mcp-name".into(), n.into()));
            }
        }
        for (k, v) in headers {
            h.retain(|(n, _)| n != k);
            if !v.is_empty() {
                h.push((k.to_string(), v.to_string()));
            }
        }
        let mut rb = self.http.post(&self.url);
        for (k, v) in &h {
            rb = rb.header(k.as_str(), v.as_str());
        }
        finish(rb.body(body.to_string()).send().await.unwrap()).await
    }

    async fn request(&self, id: u64, method: &str, params: Value) -> Value {
        let r = self.post_with(&self.body(id, method, params), &[]).await;
        assert_eq!(r.status, 200, "{method}: {}", r.body);
        let reply = r.reply();
        assert_eq!(reply["id"], json!(id), "{reply}");
        reply
    }
}

fn server_info() -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": "sluice", "version": env!("CARGO_PKG_VERSION")}})
}

#[tokio::test]
async fn discover_versions_headers_and_result_marks() {
    let home = home("modern-basics");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = Modern::new(&url, json!({}));

    let d = c.request(1, "server/discover", json!({})).await;
    assert_eq!(
        d["result"],
        json!({
            "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
            "capabilities": {"tools": {"listChanged": true}, "prompts": {"listChanged": true},
                             "resources": {"listChanged": true}, "completions": {}},
            "instructions": d["result"]["instructions"],
            "resultType": "complete", "ttlMs": 0, "cacheScope": "public",
            "_meta": server_info(),
        })
    );

    // Lists: resultType and cache hints; a call: resultType, no cache hints.
    let list = c.request(2, "tools/list", json!({})).await;
    assert_eq!(list["result"]["resultType"], "complete");
    assert_eq!(list["result"]["ttlMs"], 0);
    assert_eq!(list["result"]["cacheScope"], "public");
    assert_eq!(list["result"]["_meta"], server_info());
    assert!(list["result"]["tools"].as_array().unwrap().len() > 5);
    let echo = c
        .request(
            3,
            "tools/call",
            json!({"name": "fx_echo", "arguments": {"a": 1}}),
        )
        .await;
    assert_eq!(
        echo["result"],
        json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1},
               "resultType": "complete", "_meta": server_info()})
    );
    let read = c
        .request(4, "resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(read["result"]["cacheScope"], "private", "{read}");

    // The header rules, each with its exact answer.
    let call = c.body(5, "tools/call", json!({"name": "fx_echo", "arguments": {}}));
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        ("no version header", vec![("mcp-protocol-version", "")], "Header mismatch: the MCP-Protocol-Version header is missing"),
        ("version mismatch", vec![("mcp-protocol-version", "2025-11-25")], "Header mismatch: MCP-Protocol-Version header value '2025-11-25' does not match body value '2026-07-28'"),
        ("no method header", vec![("mcp-method", "")], "Header mismatch: the Mcp-Method header is missing"),
        ("method mismatch", vec![("mcp-method", "tools/list")], "Header mismatch: Mcp-Method header value 'tools/list' does not match body value 'tools/call'"),
        ("no name header", vec![("mcp-name", "")], "Header mismatch: the Mcp-Name header is missing"),
        ("name mismatch", vec![("mcp-name", "fx_add")], "Header mismatch: Mcp-Name header value 'fx_add' does not match body value 'fx_echo'"),
        ("bad base64 name", vec![("mcp-name", "=?base64?%%%?=")], "Header mismatch: Mcp-Name is not valid base64"),
    ];
    for (label, headers, message) in cases {
        let r = c.post_with(&call, &headers).await;
        assert_eq!(r.status, 400, "{label}: {}", r.body);
        assert_eq!(
            serde_json::from_str::<Value>(&r.body).unwrap(),
            json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32020, "message": message}}),
            "{label}"
        );
    }
    // The base64 sentinel form of a matching name is accepted.
    let r = c
        .post_with(&call, &[("mcp-name", "=?base64?ZnhfZWNobw==?=")])
        .await;
    assert_eq!(r.status, 200, "{}", r.body);

    // An unsupported version: 400 and -32022 naming what is supported.
    let mut old = c.body(6, "tools/list", json!({}));
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = c
        .post_with(&old, &[("mcp-protocol-version", "2099-01-01")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap()["error"],
        json!({"code": -32022, "message": "Unsupported protocol version",
               "data": {"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                        "requested": "2099-01-01"}})
    );
    // Methods the modern era removed or never had: 404 with -32601.
    for m in ["ping", "logging/setLevel", "resources/subscribe", "no/such"] {
        let r = c.post_with(&c.body(7, m, json!({})), &[]).await;
        assert_eq!(r.status, 404, "{m}");
        assert_eq!(
            serde_json::from_str::<Value>(&r.body).unwrap()["error"],
            json!({"code": -32601, "message": format!("Method not found: {m}")})
        );
    }
    // The envelope: _meta with the version and the capabilities, else -32602 (HTTP 400).
    let mut bare = c.body(8, "tools/list", json!({}));
    bare["params"].as_object_mut().unwrap().remove("_meta");
    let r = c.post_with(&bare, &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap()["error"],
        json!({"code": -32602, "message": "Invalid params: params._meta is required (io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities)"})
    );
    let mut no_caps = c.body(9, "tools/list", json!({}));
    no_caps["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let r = c.post_with(&no_caps, &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap()["error"]["message"],
        "Invalid params: _meta is missing io.modelcontextprotocol/clientCapabilities"
    );
    // initialize dressed as a modern request is a removed method.
    let r = c.post_with(&c.body(10, "initialize", json!({})), &[]).await;
    assert_eq!(r.status, 404, "{}", r.body);
    // The hook saw a modern call, in the same shape as a legacy one (no transport _meta).
    let payload: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("hooks/payload.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(payload["era"], "modern");
    assert_eq!(payload["tool_name"], "fx_echo");
    assert_eq!(payload["request"]["params"].get("_meta"), None, "{payload}");
}

#[tokio::test]
async fn upstream_requests_become_input_required_rounds() {
    let home = home("modern-mrtr");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = Modern::new(&url, json!({"elicitation": {}, "sampling": {}}));

    // Elicitation: the legacy upstream's elicitation/create comes back as an input request.
    let params = json!({"name": "fx_test_elicitation", "arguments": {"message": "Your name?"}});
    let first = c.request(1, "tools/call", params.clone()).await;
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    let requests = r["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Your name?");
    let state = r["requestState"].as_str().unwrap().to_string();

    // A tampered state, and a state brought to another request, are refused.
    let mut retry = params.clone();
    retry["inputResponses"] = json!({key: {"action": "accept", "content": {"response": "Ada"}}});
    retry["requestState"] = json!(format!("{state}x"));
    let bad = c.request(2, "tools/call", retry.clone()).await;
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid requestState: "),
        "{bad}"
    );
    let mut other = retry.clone();
    other["arguments"]["message"] = json!("Something else?");
    other["requestState"] = json!(state);
    let bad = c.request(3, "tools/call", other).await;
    assert_eq!(
        bad["error"],
        json!({"code": -32602, "message": "Invalid requestState: it belongs to another request (method or params differ)"})
    );

    // The real retry: the answer goes upstream and the call completes, under the retry's id.
    retry["requestState"] = json!(state);
    let done = c.request(4, "tools/call", retry.clone()).await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "User response: action=accept, content={\"response\":\"Ada\"}",
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete");
    // The same state again: the call it continued is gone.
    let replay = c.request(5, "tools/call", retry).await;
    assert_eq!(
        replay["error"],
        json!({"code": -32602, "message": "Invalid requestState: the call it continues is gone (answered already, expired, or on another gateway instance)"})
    );

    // Sampling, with a retry that forgets the answer first: asked again, then completed.
    let params = json!({"name": "fx_test_sampling", "arguments": {"prompt": "Capital of France?"}});
    let first = c.request(6, "tools/call", params.clone()).await;
    let (key, request) = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(request["method"], "sampling/createMessage");
    let mut forgetful = params.clone();
    forgetful["requestState"] = first["result"]["requestState"].clone();
    forgetful["inputResponses"] = json!({});
    let again = c.request(7, "tools/call", forgetful).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(again["result"]["inputRequests"][&key], request);
    let mut retry = params.clone();
    retry["requestState"] = again["result"]["requestState"].clone();
    retry["inputResponses"] = json!({&key: {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model", "stopReason": "endTurn"}});
    let done = c.request(8, "tools/call", retry).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "LLM response: Paris",
        "{done}"
    );

    // A client without the capability is not asked: its call fails with -32021 (HTTP 400).
    let plain = Modern::new(&url, json!({}));
    let body = plain.body(
        9,
        "tools/call",
        json!({"name": "fx_test_elicitation", "arguments": {"message": "x"}}),
    );
    let r = plain.post_with(&body, &[]).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32021,
               "message": "Missing required client capability: elicitation (the upstream asked for elicitation/create)",
               "data": {"requiredCapabilities": {"elicitation": {}}}}})
    );
}

#[tokio::test]
async fn closing_the_response_stream_cancels_the_call() {
    let home = home("modern-cancel");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = Modern::new(&url, json!({}));
    let body = c.body(
        1,
        "tools/call",
        json!({"name": "fx_slow", "arguments": {"ms": 5000}}),
    );
    let send = c
        .http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "fx_slow")
        .body(body.to_string())
        .send();
    // Give up after a moment: the connection closes with the response unanswered.
    assert!(tokio::time::timeout(Duration::from_millis(500), send)
        .await
        .is_err());
    let mut seen = Value::Null;
    for _ in 0..50 {
        let r = c
            .request(
                2,
                "tools/call",
                json!({"name": "fx_last_cancelled", "arguments": {}}),
            )
            .await;
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or("none");
        if text != "none" {
            seen = serde_json::from_str(text).unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen["reason"], "the client closed the response stream",
        "{seen}"
    );
}

#[tokio::test]
async fn listen_streams_carry_the_list_changes_asked_for() {
    let home = home("modern-listen");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = Modern::new(&url, json!({}));
    let body = c.body(
        42,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false,
                                 "resourceSubscriptions": ["test://static-text"]}}),
    );
    let resp = c
        .http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut events = sluice_e2e::mcp::SseReader::new(resp);
    let (_, ack) = events.next().await.expect("the acknowledgement");
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"notifications": {"toolsListChanged": true,
                                            "resourceSubscriptions": ["test://static-text"]},
                          "_meta": {"io.modelcontextprotocol/subscriptionId": 42}}})
    );
    // The upstream reports a change of the resource (Sluice subscribed to it there).
    let mut updated = None;
    for i in 0..20 {
        c.request(
            100 + i,
            "tools/call",
            json!({"name": "fx_touch_resource", "arguments": {"uri": "test://static-text"}}),
        )
        .await;
        if let Ok(Some((_, m))) =
            tokio::time::timeout(Duration::from_millis(300), events.next()).await
        {
            updated = Some(m);
            break;
        }
    }
    assert_eq!(
        updated.expect("notifications/resources/updated"),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"uri": "test://static-text",
                          "_meta": {"io.modelcontextprotocol/subscriptionId": 42}}})
    );
    // A second upstream appears: the tools list changed.
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true, "era": "handshake"},
        {"id": "gx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let next = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("a notification within 10 s")
        .expect("the stream stays open");
    assert_eq!(
        next.1,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
               "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 42}}})
    );
}

#[tokio::test]
async fn legacy_and_modern_clients_share_a_listener_and_replicas_agree() {
    let home = home("modern-mixed");
    let (_a, url_a) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let (_b, url_b): (Proc, String) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    // A legacy session on the same listener.
    let mut legacy = Client::new(&url_a);
    legacy.initialize(json!({})).await;
    let echoed = legacy.call_tool("fx_echo", json!({"x": "legacy"})).await;
    assert_eq!(
        echoed["result"]["structuredContent"],
        json!({"x": "legacy"})
    );
    // Stateless modern requests spread over two processes give the same answers.
    let a = Modern::new(&url_a, json!({}));
    let b = Modern::new(&url_b, json!({}));
    for (i, (method, params)) in [
        ("tools/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        (
            "tools/call",
            json!({"name": "fx_add", "arguments": {"a": 2, "b": 40}}),
        ),
        (
            "prompts/get",
            json!({"name": "fx_test_simple_prompt", "arguments": {}}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i as u64 + 1;
        let ra = a.request(id, method, params.clone()).await;
        let rb = b.request(id, method, params).await;
        assert_eq!(ra, rb, "{method}");
        assert!(ra.get("result").is_some(), "{ra}");
    }
    // The legacy session is untouched by all this.
    let echoed = legacy.call_tool("fx_echo", json!({"x": "still"})).await;
    assert_eq!(echoed["result"]["structuredContent"], json!({"x": "still"}));
}

/// A modern client on the gateway's stdio: lines in, lines out (read by a thread, waited on
/// with a bound).
struct StdioModern {
    _gw: Proc,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl StdioModern {
    fn start(home: &Home) -> StdioModern {
        let mut cmd = std::process::Command::new(bin("sluice"));
        cmd.args(["serve", "--stdio", "--no-admin", "--home", &home.arg()]);
        let mut gw = Proc::spawn_piped(cmd);
        let stdin = gw.child.stdin.take().unwrap();
        let stdout = gw.child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).expect("only JSON on stdout");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        StdioModern {
            _gw: gw,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: &Value) {
        use std::io::Write;
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message with this id (other messages are skipped).
    fn reply(&mut self, id: u64) -> Value {
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("a reply within 20 s");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }
}

#[test]
fn the_modern_era_on_stdio() {
    let home = home("modern-stdio");
    let mut c = StdioModern::start(&home);
    let m = Modern::new("unused", json!({"elicitation": {}}));
    c.send(&m.body(1, "server/discover", json!({})));
    let d = c.reply(1);
    assert_eq!(d["result"]["supportedVersions"][0], "2026-07-28", "{d}");
    // Wait for the upstream's tools, then call one.
    let mut listed = false;
    for i in 0..100 {
        c.send(&m.body(100 + i, "tools/list", json!({})));
        let r = c.reply(100 + i);
        if r["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
        {
            listed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listed);
    c.send(&m.body(
        2,
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"via": "stdio"}}),
    ));
    let r = c.reply(2);
    assert_eq!(r["result"]["structuredContent"], json!({"via": "stdio"}));
    assert_eq!(r["result"]["resultType"], "complete");
    // An input_required round over stdio.
    let params = json!({"name": "fx_test_elicitation", "arguments": {"message": "Name?"}});
    c.send(&m.body(3, "tools/call", params.clone()));
    let first = c.reply(3);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let key = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let mut retry = params;
    retry["requestState"] = first["result"]["requestState"].clone();
    retry["inputResponses"] = json!({key: {"action": "decline"}});
    c.send(&m.body(4, "tools/call", retry));
    let done = c.reply(4);
    assert_eq!(
        done["result"]["content"][0]["text"], "User response: action=decline, content={}",
        "{done}"
    );
    // Unsupported version and removed methods, as JSON-RPC errors.
    let mut old = m.body(5, "tools/list", json!({}));
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    c.send(&old);
    assert_eq!(c.reply(5)["error"]["code"], -32022);
    c.send(&m.body(6, "ping", json!({})));
    assert_eq!(
        c.reply(6)["error"],
        json!({"code": -32601, "message": "Method not found: ping"})
    );
    // notifications/cancelled cancels a modern call on stdio.
    c.send(&m.body(
        7,
        "tools/call",
        json!({"name": "fx_slow", "arguments": {"ms": 5000}}),
    ));
    std::thread::sleep(Duration::from_millis(300));
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}),
    );
    let mut seen = String::new();
    for i in 0..50 {
        c.send(&m.body(
            200 + i,
            "tools/call",
            json!({"name": "fx_last_cancelled", "arguments": {}}),
        ));
        let r = c.reply(200 + i);
        seen = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if seen != "none" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen.contains("the client closed the response stream"),
        "{seen}"
    );
}
