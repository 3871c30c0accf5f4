//! Streamable HTTP per 2025-11-25: sessions, status codes for bad input, JSON and SSE replies,
//! the GET stream and `Last-Event-ID` resumption.

use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client, SseReader, ACCEPT_BOTH};
use sluice_e2e::start_sluice;

async fn demo() -> (sluice_e2e::Proc, Client) {
    let (gw, url) = start_sluice(&[]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    (gw, c)
}

fn error_of(body: &str) -> (i64, String) {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON body: {body:?}"));
    (
        v["error"]["code"].as_i64().expect("error code"),
        v["error"]["message"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn sessions_start_end_and_unknown_ones_are_404() {
    let (_gw, mut c) = demo().await;
    let sid = c.session.clone().unwrap();
    assert!(sid.len() >= 16 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    // A request without a session id: 400.
    let no_session = finish(
        c.http
            .post(&c.url)
            .header("accept", ACCEPT_BOTH)
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(no_session.status, 400);
    assert_eq!(error_of(&no_session.body).0, -32600);
    // DELETE ends it; afterwards the id is 404 (not 400).
    assert_eq!(c.end_session().await, 200);
    let after = c
        .post(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(after.status, 404, "{}", after.body);
    c.session = Some("no-such-session".into());
    let unknown = c
        .post(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .await;
    assert_eq!(unknown.status, 404);
}

#[tokio::test]
async fn bad_input_gets_exact_errors() {
    let (_gw, c) = demo().await;
    // Malformed JSON: 400 with -32700.
    let r = finish(c.builder().body("{nope").send().await.unwrap()).await;
    assert_eq!(r.status, 400);
    assert_eq!(error_of(&r.body).0, -32700);
    // Not JSON-RPC: 400 with -32600, keeping the id.
    let r = c
        .post(json!({"jsonrpc": "1.0", "id": 9, "method": "ping"}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        error_of(&r.body),
        (
            -32600,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"".into()
        )
    );
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap()["id"],
        json!(9)
    );
    // A batch: -32600.
    let r = finish(
        c.builder()
            .body(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(error_of(&r.body).0, -32600);
    // Unknown method: -32601 (HTTP 200, it is a JSON-RPC answer).
    let r = c.request("no/such/method", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32601, "message": "Method not found: no/such/method"})
    );
    // Unknown tool: -32602.
    let r = c.call_tool("ghost", json!({"reason": "probing"})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32602, "message": "Unknown tool: ghost"})
    );
    // A cursor the gateway never minted: -32602.
    let r = c.request("tools/list", json!({"cursor": "forged"})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32602, "message": "Invalid cursor: \"forged\""})
    );
    // Accept without text/event-stream: 406.
    let r = finish(
        c.http
            .post(&c.url)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .header("mcp-session-id", c.session.as_deref().unwrap())
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 406);
    // Wrong content type: 415.
    let r = finish(
        c.http
            .post(&c.url)
            .header("accept", ACCEPT_BOTH)
            .header("content-type", "text/plain")
            .header("mcp-session-id", c.session.as_deref().unwrap())
            .body("{}")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 415);
    // A foreign Origin: 403; a loopback one is fine.
    let r = finish(
        c.builder_with(&[("origin", "https://evil.example")])
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 403);
    let r = finish(
        c.builder_with(&[("origin", "http://localhost:3000")])
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    // An unsupported protocol version header: 400.
    let r = finish(
        c.builder_with(&[("mcp-protocol-version", "1999-01-01")])
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(error_of(&r.body)
        .1
        .contains("unsupported MCP-Protocol-Version \"1999-01-01\""));
    // A body over the limit (4 MiB by default): 413.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4 * 1024 * 1024 + 1)
    );
    let r = finish(c.builder().body(big).send().await.unwrap()).await;
    assert_eq!(r.status, 413);
    // Notifications and responses: 202, no body.
    let r = c
        .post(json!({"jsonrpc": "2.0", "method": "notifications/whatever"}))
        .await;
    assert_eq!((r.status, r.body.as_str()), (202, ""));
    // PUT: 405.
    let r = c.http.put(&c.url).send().await.unwrap();
    assert_eq!(r.status(), 405);
    // After all that, the session still serves.
    let r = c
        .call_tool("demo_echo", json!({"text": "still here", "reason": "test"}))
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"text": "still here"})
    );
}

#[tokio::test]
async fn get_stream_delivers_list_changed_and_resumes_after_last_event_id() {
    use sluice_e2e::tree::Home;
    let home = Home::new("getstream");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": sluice_e2e::bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // Only one GET stream at a time.
    let get = c.open_get(None).await;
    assert_eq!(get.status(), 200);
    assert_eq!(c.open_get(None).await.status(), 409);
    let mut sse = SseReader::new(get);
    // The fixture adds a tool and says so; the gateway refreshes and tells the client.
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], json!("ok"));
    let (id1, m1) = sse.next().await.expect("list_changed on the GET stream");
    assert_eq!(
        m1,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    assert!(c.tool_names().await.contains(&"fx_dynamic_0".to_string()));
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert!(r["result"].is_object());
    let (id2, _) = sse.next().await.expect("second list_changed");
    drop(sse);
    // Resume after the first event: exactly the second is replayed.
    let resumed = c.open_get(id1.as_deref()).await;
    assert_eq!(resumed.status(), 200);
    let mut sse = SseReader::new(resumed);
    let (rid, rm) = sse.next().await.unwrap();
    assert_eq!(rid, id2);
    assert_eq!(rm["method"], json!("notifications/tools/list_changed"));
    // A malformed Last-Event-ID is 400.
    assert_eq!(c.open_get(Some("garbage")).await.status(), 400);
}
