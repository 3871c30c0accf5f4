//! OpenTelemetry traces through the real binary: a local OTLP/HTTP receiver collects what the
//! gateway exports, and a small Streamable HTTP upstream records the trace context it is sent.
//! One tree with two hooks (explain, deny); calls continue the client's `traceparent` (HTTP
//! header or `params._meta`), an unsampled one is propagated but not exported.

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_port, Proc};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the OTLP receiver got: one entry per export request (its `content-type`, its
/// `x-api-key`, its JSON body).
type Exports = Arc<Mutex<Vec<(String, String, Value)>>>;

/// An OTLP/HTTP receiver on a free loopback port; returns its base URL.
async fn otlp_receiver(exports: Exports) -> String {
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let exports = exports.clone();
            async move {
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string()
                };
                let body: Value = serde_json::from_slice(&body).expect("an OTLP JSON body");
                exports
                    .lock()
                    .unwrap()
                    .push((h("content-type"), h("x-api-key"), body));
                axum::Json(json!({}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Every exported span (the resource's `service.name` checked on the way).
fn spans(exports: &Exports) -> Vec<Value> {
    let mut out = Vec::new();
    for (ctype, key, body) in exports.lock().unwrap().iter() {
        assert_eq!(ctype, "application/json");
        assert_eq!(
            key, "otlp-secret",
            "the configured header, ${{env:…}} expanded"
        );
        for rs in body["resourceSpans"].as_array().unwrap() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "service.name")
                .map(|a| a["value"]["stringValue"].clone());
            assert_eq!(service, Some(json!("sluice-e2e")));
            for ss in rs["scopeSpans"].as_array().unwrap() {
                assert_eq!(ss["scope"]["name"], "sluice");
                out.extend(ss["spans"].as_array().unwrap().iter().cloned());
            }
        }
    }
    out
}

/// The spans of one trace, once there are at least `n` (polls for up to 10 s).
async fn trace_spans(exports: &Exports, trace: &str, n: usize) -> Vec<Value> {
    let mut found = Vec::new();
    for _ in 0..100 {
        found = spans(exports)
            .into_iter()
            .filter(|s| s["traceId"] == trace)
            .collect();
        if found.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    found
}

/// A span's attributes as `key → value` (string, or the integer's decimal string).
fn attrs(span: &Value) -> BTreeMap<String, Value> {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let v = &a["value"];
            let v = v
                .get("stringValue")
                .or_else(|| v.get("intValue"))
                .or_else(|| v.get("boolValue"))
                .cloned()
                .unwrap();
            (a["key"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

fn expected(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn ns(span: &Value, field: &str) -> u64 {
    span[field].as_str().unwrap().parse().unwrap()
}

/// The spans of one kind (1 internal: hooks, 2 server, 3 client: the upstream call).
fn by_kind(spans: &[Value], kind: u64) -> Vec<&Value> {
    spans.iter().filter(|s| s["kind"] == kind).collect()
}

/// POST tools/call with `traceparent` as an HTTP header (when given) and `meta` as
/// `params._meta` (when given); returns the reply.
async fn call(
    c: &Client,
    id: u64,
    tool: &str,
    args: Value,
    traceparent: Option<&str>,
    meta: Option<Value>,
) -> Value {
    let mut params = json!({"name": tool, "arguments": args});
    if let Some(m) = meta {
        params["_meta"] = m;
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let headers: Vec<(&'static str, &str)> = traceparent
        .map(|t| vec![("traceparent", t)])
        .unwrap_or_default();
    let resp = finish(
        c.builder_with(&headers)
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    resp.reply()
}

/// POST any request with `traceparent` as its HTTP header; returns the reply.
async fn traced(c: &Client, id: u64, method: &str, params: Value, traceparent: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = finish(
        c.builder_with(&[("traceparent", traceparent)])
            .body(body.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    resp.reply()
}

/// Checks the hook and upstream children of a server span: they are its children, inside it
/// in time, and the hooks are `decisions` in order.
fn check_children(spans: &[Value], server: &Value, decisions: &[(&str, &str)]) {
    let (start, end) = (
        ns(server, "startTimeUnixNano"),
        ns(server, "endTimeUnixNano"),
    );
    assert!(start <= end);
    let hooks = by_kind(spans, 1);
    let got: Vec<(String, String)> = hooks
        .iter()
        .map(|h| {
            let a = attrs(h);
            assert_eq!(h["parentSpanId"], server["spanId"]);
            assert_eq!(a["sluice.hook.phase"], json!("request"));
            assert_eq!(
                h["name"],
                json!(format!("hook {}", a["sluice.hook.id"].as_str().unwrap()))
            );
            assert!(start <= ns(h, "startTimeUnixNano"));
            assert!(ns(h, "startTimeUnixNano") <= ns(h, "endTimeUnixNano"));
            assert!(ns(h, "endTimeUnixNano") <= end);
            (
                a["sluice.hook.id"].as_str().unwrap().to_string(),
                a["sluice.hook.decision"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = decisions
        .iter()
        .map(|(i, d)| (i.to_string(), d.to_string()))
        .collect();
    assert_eq!(got, want);
    for c in by_kind(spans, 3) {
        assert_eq!(c["parentSpanId"], server["spanId"]);
        assert!(start <= ns(c, "startTimeUnixNano"));
        assert!(ns(c, "endTimeUnixNano") <= end);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_for_requests_hooks_and_upstream_calls_reach_an_otlp_receiver() {
    let exports: Exports = Arc::default();
    let receiver = otlp_receiver(exports.clone()).await;
    let (upstream_url, seen) = sluice_e2e::recording::start("traced").await;
    let upstream_port = upstream_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .to_string();

    let home = Home::new("telemetry");
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    home.expose(&json!({"upstreams": [
        {"id": "traced", "transport": "http", "url": upstream_url, "expose_all": true},
        {"id": "st", "command": fixture, "args": ["--stdio", "--name", "st"], "expose_all": true, "era": "handshake"}
    ]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true},
            {"id": "deny", "type": "builtin", "builtin": "deny", "options": {"tools": ["traced_blocked"]}, "enabled": true}
        ]})
        .to_string(),
    );
    home.write(
        "sluice.json",
        &json!({"telemetry": {
            "otlp_endpoint": receiver,
            "service_name": "sluice-e2e",
            "headers": {"x-api-key": "${env:SLUICE_E2E_OTLP_KEY}"}
        }})
        .to_string(),
    );
    let port = free_port();
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--no-admin", "--home", &home.arg(), "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env("SLUICE_E2E_OTLP_KEY", "otlp-secret")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        );
    let _gw = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    let mut c = Client::new(&format!("http://127.0.0.1:{port}/mcp"));
    c.initialize(json!({})).await;
    let session = json!(c.session.clone().unwrap());
    for _ in 0..100 {
        if c.tool_names().await.contains(&"traced_echo".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let upstream_calls = |text: &str| -> Vec<(Option<String>, Value)> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|s| s.method == "tools/call" && s.params["arguments"]["text"] == text)
            .map(|s| (s.headers.get("traceparent").cloned(), s.params.clone()))
            .collect()
    };

    // 1. Unsampled (`-00`): continued and propagated, never exported.
    let trace_e = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";
    let r = call(
        &c,
        101,
        "traced_echo",
        json!({"reason": "tracing", "text": "e"}),
        Some(&format!("00-{trace_e}-e1e1e1e1e1e1e1e1-00")),
        None,
    )
    .await;
    assert!(r.get("result").is_some(), "{r}");
    let got = upstream_calls("e");
    assert_eq!(got.len(), 1);
    let tp = got[0].0.clone().expect("a traceparent header upstream");
    assert!(
        tp.starts_with(&format!("00-{trace_e}-")) && tp.ends_with("-00") && tp.len() == 55,
        "{tp}"
    );
    assert!(!tp.contains("e1e1e1e1e1e1e1e1"), "a span of its own: {tp}");

    // 2. The client's traceparent header: a server span under the client's, two hook spans,
    //    one upstream span whose id the upstream received.
    let trace_a = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let r = call(
        &c,
        102,
        "traced_echo",
        json!({"reason": "tracing", "text": "a"}),
        Some(&format!("00-{trace_a}-{client_span}-01")),
        None,
    )
    .await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!(json!({"text": "a"}).to_string())
    );
    let spans_a = trace_spans(&exports, trace_a, 4).await;
    assert_eq!(spans_a.len(), 4, "{spans_a:#?}");
    let server = by_kind(&spans_a, 2);
    assert_eq!(server.len(), 1, "{spans_a:#?}");
    let server = server[0];
    assert_eq!(server["parentSpanId"], client_span);
    assert_eq!(server["name"], "tools/call traced_echo");
    assert!(server.get("status").is_none(), "{server}");
    assert_eq!(
        attrs(server),
        expected(&[
            ("mcp.method.name", json!("tools/call")),
            ("mcp.session.id", session.clone()),
            ("mcp.tool.name", json!("traced_echo")),
            ("sluice.upstream", json!("traced")),
            ("jsonrpc.request.id", json!("102")),
            ("sluice.outcome", json!("ok")),
            // OpenTelemetry's MCP conventions (semantic-conventions-genai docs/gen-ai/mcp.md).
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.name", json!("traced_echo")),
            ("mcp.protocol.version", json!("2025-11-25")),
            ("network.transport", json!("tcp")),
            ("network.protocol.name", json!("http")),
        ])
    );
    check_children(&spans_a, server, &[("explain", "modify"), ("deny", "pass")]);
    let upstream = by_kind(&spans_a, 3);
    assert_eq!(upstream.len(), 1, "{spans_a:#?}");
    let upstream = upstream[0];
    assert_eq!(upstream["name"], "tools/call echo");
    let up_attrs = attrs(upstream);
    assert_eq!(
        up_attrs,
        expected(&[
            ("sluice.upstream", json!("traced")),
            ("mcp.method.name", json!("tools/call")),
            ("jsonrpc.request.id", up_attrs["jsonrpc.request.id"].clone()),
            ("mcp.tool.name", json!("echo")),
            ("server.address", json!("127.0.0.1")),
            ("server.port", json!(upstream_port)),
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.name", json!("echo")),
            ("mcp.protocol.version", json!("2025-11-25")),
            ("network.transport", json!("tcp")),
            ("network.protocol.name", json!("http")),
        ])
    );
    let up_span = upstream["spanId"].as_str().unwrap();
    let got = upstream_calls("a");
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].0.as_deref(),
        Some(format!("00-{trace_a}-{up_span}-01").as_str())
    );
    // No _meta was sent, none is invented (the explain reason travels inside only).
    assert!(got[0].1.get("_meta").is_none(), "{}", got[0].1);

    // 3. An upstream error: the server and upstream spans carry status error and the code.
    let trace_b = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0";
    let r = call(
        &c,
        103,
        "traced_fail",
        json!({"reason": "tracing", "text": "b"}),
        Some(&format!("00-{trace_b}-b1b1b1b1b1b1b1b1-01")),
        None,
    )
    .await;
    assert_eq!(r["error"]["code"], -32099, "{r}");
    let spans_b = trace_spans(&exports, trace_b, 4).await;
    assert_eq!(spans_b.len(), 4, "{spans_b:#?}");
    let server = by_kind(&spans_b, 2)[0];
    assert_eq!(server["parentSpanId"], "b1b1b1b1b1b1b1b1");
    assert_eq!(server["status"], json!({"code": 2, "message": "boom"}));
    let a = attrs(server);
    assert_eq!(a["sluice.outcome"], json!("error"));
    assert_eq!(a["rpc.jsonrpc.error_code"], json!("-32099"));
    assert_eq!(a["mcp.tool.name"], json!("traced_fail"));
    assert_eq!(a["error.type"], json!("-32099"));
    assert_eq!(a["rpc.response.status_code"], json!("-32099"));
    check_children(&spans_b, server, &[("explain", "modify"), ("deny", "pass")]);
    let upstream = by_kind(&spans_b, 3)[0];
    assert_eq!(upstream["status"], json!({"code": 2, "message": "boom"}));
    let a = attrs(upstream);
    assert_eq!(a["rpc.jsonrpc.error_code"], json!("-32099"));
    assert_eq!(a["error.type"], json!("-32099"));
    assert_eq!(a["rpc.response.status_code"], json!("-32099"));
    // Successful spans carry no error attributes.
    assert!(!attrs(by_kind(&spans_a, 2)[0]).contains_key("error.type"));

    // 4. A refusal: no upstream span, the deny hook's decision, outcome refused.
    let trace_c = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0";
    let r = call(
        &c,
        104,
        "traced_blocked",
        json!({"reason": "tracing", "text": "c"}),
        Some(&format!("00-{trace_c}-c1c1c1c1c1c1c1c1-01")),
        None,
    )
    .await;
    assert_eq!(r["error"]["code"], -32030, "{r}");
    let spans_c = trace_spans(&exports, trace_c, 3).await;
    assert_eq!(spans_c.len(), 3, "{spans_c:#?}");
    let server = by_kind(&spans_c, 2)[0];
    let a = attrs(server);
    assert_eq!(a["sluice.outcome"], json!("refused"));
    assert_eq!(a["rpc.jsonrpc.error_code"], json!("-32030"));
    assert_eq!(server["status"]["code"], 2);
    check_children(
        &spans_c,
        server,
        &[("explain", "modify"), ("deny", "refuse")],
    );
    assert!(by_kind(&spans_c, 3).is_empty());
    assert!(upstream_calls("c").is_empty());

    // 5. `params._meta.traceparent` (MCP's convention): continued, and replaced upstream by
    //    the upstream span's context (header and _meta alike).
    let trace_d = "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0";
    let r = call(
        &c,
        105,
        "traced_echo",
        json!({"reason": "tracing", "text": "d"}),
        None,
        Some(json!({"traceparent": format!("00-{trace_d}-d1d1d1d1d1d1d1d1-01")})),
    )
    .await;
    assert!(r.get("result").is_some(), "{r}");
    let spans_d = trace_spans(&exports, trace_d, 4).await;
    assert_eq!(spans_d.len(), 4, "{spans_d:#?}");
    let server = by_kind(&spans_d, 2)[0];
    assert_eq!(server["parentSpanId"], "d1d1d1d1d1d1d1d1");
    let up_span = by_kind(&spans_d, 3)[0]["spanId"]
        .as_str()
        .unwrap()
        .to_string();
    let want = format!("00-{trace_d}-{up_span}-01");
    let got = upstream_calls("d");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.as_deref(), Some(want.as_str()));
    assert_eq!(got[0].1["_meta"], json!({"traceparent": want}));

    // 6. An unknown tool: the gateway answers -32602 itself; error.type is the code.
    let trace_f = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0";
    let r = call(
        &c,
        106,
        "traced_nope",
        json!({"reason": "tracing"}),
        Some(&format!("00-{trace_f}-f1f1f1f1f1f1f1f1-01")),
        None,
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let spans_f = trace_spans(&exports, trace_f, 3).await;
    let server = by_kind(&spans_f, 2)[0];
    assert_eq!(server["name"], "tools/call traced_nope");
    assert_eq!(server["status"]["code"], 2);
    let a = attrs(server);
    assert_eq!(a["error.type"], json!("-32602"));
    assert_eq!(a["rpc.response.status_code"], json!("-32602"));
    assert_eq!(a["gen_ai.tool.name"], json!("traced_nope"));
    assert_eq!(a["gen_ai.operation.name"], json!("execute_tool"));
    assert!(by_kind(&spans_f, 3).is_empty(), "{spans_f:#?}");

    // 7. prompts/get through a stdio upstream: the prompt names both spans, the upstream span
    //    is a pipe; no gen_ai.operation.name (not a tool call).
    let mut prompt = None;
    for _ in 0..100 {
        let r = c.request("prompts/list", json!({})).await;
        prompt = r["result"]["prompts"].as_array().and_then(|ps| {
            ps.iter()
                .filter_map(|p| p["name"].as_str())
                .find(|n| n.ends_with("test_simple_prompt"))
                .map(str::to_string)
        });
        if prompt.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let prompt = prompt.expect("the stdio fixture's test_simple_prompt");
    let trace_g = "90909090909090909090909090909090";
    let r = traced(
        &c,
        107,
        "prompts/get",
        json!({"name": prompt}),
        &format!("00-{trace_g}-9191919191919191-01"),
    )
    .await;
    assert!(r.get("result").is_some(), "{r}");
    let spans_g = trace_spans(&exports, trace_g, 2).await;
    let server = by_kind(&spans_g, 2)[0];
    assert_eq!(server["name"], json!(format!("prompts/get {prompt}")));
    assert_eq!(
        attrs(server),
        expected(&[
            ("mcp.method.name", json!("prompts/get")),
            ("mcp.session.id", session.clone()),
            ("gen_ai.prompt.name", json!(prompt)),
            ("sluice.upstream", json!("st")),
            ("jsonrpc.request.id", json!("107")),
            ("sluice.outcome", json!("ok")),
            ("mcp.protocol.version", json!("2025-11-25")),
            ("network.transport", json!("tcp")),
            ("network.protocol.name", json!("http")),
        ])
    );
    let upstream = by_kind(&spans_g, 3);
    assert_eq!(upstream.len(), 1, "{spans_g:#?}");
    let upstream = upstream[0];
    assert_eq!(upstream["name"], "prompts/get test_simple_prompt");
    assert_eq!(upstream["parentSpanId"], server["spanId"]);
    let a = attrs(upstream);
    assert_eq!(
        a,
        expected(&[
            ("mcp.method.name", json!("prompts/get")),
            ("gen_ai.prompt.name", json!("test_simple_prompt")),
            ("sluice.upstream", json!("st")),
            ("jsonrpc.request.id", a["jsonrpc.request.id"].clone()),
            ("mcp.protocol.version", a["mcp.protocol.version"].clone()),
            ("network.transport", json!("pipe")),
        ])
    );
    assert!(a["mcp.protocol.version"]
        .as_str()
        .unwrap()
        .starts_with("20"));

    // 8. resources/read: the URI is an attribute, never part of the span name.
    let r = c.request("resources/list", json!({})).await;
    let uri = r["result"]["resources"]
        .as_array()
        .and_then(|rs| {
            rs.iter()
                .filter_map(|r| r["uri"].as_str())
                .find(|u| u.contains("static-text"))
        })
        .unwrap_or_else(|| panic!("a static-text resource in {r}"))
        .to_string();
    let trace_h = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0";
    let r = traced(
        &c,
        108,
        "resources/read",
        json!({"uri": uri}),
        &format!("00-{trace_h}-a1a1a1a1a1a1a1a1-01"),
    )
    .await;
    assert!(r.get("result").is_some(), "{r}");
    let spans_h = trace_spans(&exports, trace_h, 2).await;
    let server = by_kind(&spans_h, 2)[0];
    assert_eq!(server["name"], "resources/read");
    let a = attrs(server);
    assert_eq!(a["mcp.resource.uri"], json!(uri));
    assert!(!a.contains_key("gen_ai.operation.name"));
    let upstream = by_kind(&spans_h, 3)[0];
    assert_eq!(upstream["name"], "resources/read");
    assert!(attrs(upstream).contains_key("mcp.resource.uri"));

    // The unsampled call came first: had it been exported, it would be there by now.
    assert!(spans(&exports).iter().all(|s| s["traceId"] != trace_e));
    // Without a client context, a request starts a trace of its own (initialize, tools/list).
    let all = spans(&exports);
    let init = all
        .iter()
        .find(|s| s["name"] == "initialize")
        .expect("an initialize span");
    assert!(init.get("parentSpanId").is_none(), "{init}");
    assert_eq!(init["kind"], 2);
    let a = attrs(init);
    assert_eq!(a["mcp.session.id"], session);
    assert_eq!(a["mcp.protocol.version"], json!("2025-11-25"));
    assert_eq!(a["jsonrpc.request.id"], json!("0"));
    assert!(!a.contains_key("gen_ai.operation.name"));
}
