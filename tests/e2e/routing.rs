//! Routing of everything that is not a plain call and reply: progress tokens, upstream
//! requests to the client (sampling, elicitation, roots) and the client's replies, logging
//! messages, cancellation in both directions, and per-session isolation.

use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A gateway in front of one stdio fixture (`st`) and one HTTP fixture (`web`), all tools listed,
/// both spoken to in the handshake era (these tests are about legacy routing: sessions, ids,
/// server-to-client requests; `modern_upstreams.rs` covers 2026-07-28 upstreams).
async fn gateway(label: &str) -> (Vec<sluice_e2e::Proc>, Home, String) {
    let (web, web_url) = start_fixture_http(&["--name", "web"]);
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "st", "command": fixture(), "args": ["--stdio", "--name", "st"], "expose_all": true, "era": "handshake"},
        {"id": "web", "transport": "http", "url": web_url, "expose_all": true, "era": "handshake"}
    ]}));
    let (gw, url) = start_sluice(&["--home", &home.arg()]);
    (vec![web, gw], home, url)
}

#[tokio::test]
async fn progress_notifications_carry_the_clients_own_token() {
    let (_p, _h, url) = gateway("progress").await;
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    for tool in ["st_test_tool_with_progress", "web_test_tool_with_progress"] {
        let resp = c
            .post(
                json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
                "name": tool, "arguments": {}, "_meta": {"progressToken": "my-token"}}}),
            )
            .await;
        assert!(resp.is_sse(), "{tool}: progress makes the reply a stream");
        let msgs = resp.messages();
        let progress: Vec<&Value> = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{tool}: {msgs:?}");
        for (p, step) in progress.iter().zip([0, 50, 100]) {
            assert_eq!(p["params"]["progressToken"], json!("my-token"));
            assert_eq!(p["params"]["progress"], json!(step));
        }
        let last = msgs.last().unwrap();
        assert_eq!(last["id"], json!(5));
        assert!(last["result"]["content"].is_array());
    }
}

#[tokio::test]
async fn logging_messages_reach_the_caller() {
    let (_p, _h, url) = gateway("logging").await;
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    for tool in ["st_test_tool_with_logging", "web_test_tool_with_logging"] {
        let resp = c.post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}})).await;
        let msgs = resp.messages();
        let logs: Vec<&Value> = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .collect();
        assert_eq!(logs.len(), 3, "{tool}: {msgs:?}");
        assert_eq!(logs[0]["params"]["data"], json!("Tool execution started"));
        assert_eq!(
            msgs.last().unwrap()["result"]["content"][0]["text"],
            json!("Tool with logging executed successfully")
        );
    }
}

/// Call `tool` and answer the one upstream request that arrives on the call's stream with
/// `answer`; returns (the request the client saw, the final reply).
async fn call_and_answer(c: &Client, tool: &str, args: Value, answer: Value) -> (Value, Value) {
    let resp = c
        .post_streaming(json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": tool, "arguments": args}}))
        .await;
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let (_, req) = sse.next().await.expect("an upstream request on the stream");
    let reply = json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": answer});
    let ack = c.post(reply).await;
    assert_eq!(ack.status, 202);
    let (_, fin) = sse.next().await.expect("the final reply");
    (req, fin)
}

#[tokio::test]
async fn sampling_elicitation_and_roots_go_to_the_calling_client_and_back() {
    let (_p, _h, url) = gateway("server-requests").await;
    let mut c = Client::new(&url);
    c.initialize(json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}}))
        .await;
    for prefix in ["st", "web"] {
        let (req, fin) = call_and_answer(
            &c,
            &format!("{prefix}_test_sampling"),
            json!({"prompt": "Say hi"}),
            json!({"role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "m", "stopReason": "endTurn"}),
        )
        .await;
        assert_eq!(req["method"], json!("sampling/createMessage"));
        assert_eq!(
            req["params"]["messages"][0]["content"]["text"],
            json!("Say hi")
        );
        assert!(
            req["id"].as_str().unwrap().starts_with("sluice-"),
            "the gateway mints its own id"
        );
        assert_eq!(fin["id"], json!(11));
        assert_eq!(
            fin["result"]["content"][0]["text"],
            json!("LLM response: hi there")
        );

        let (req, fin) = call_and_answer(
            &c,
            &format!("{prefix}_test_elicitation"),
            json!({"message": "Name?"}),
            json!({"action": "accept", "content": {"response": "Ada"}}),
        )
        .await;
        assert_eq!(req["method"], json!("elicitation/create"));
        assert_eq!(
            fin["result"]["content"][0]["text"],
            json!("User response: action=accept, content={\"response\":\"Ada\"}")
        );

        let (req, fin) = call_and_answer(
            &c,
            &format!("{prefix}_ask_roots"),
            json!({}),
            json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
        )
        .await;
        assert_eq!(req["method"], json!("roots/list"));
        assert_eq!(
            fin["result"]["structuredContent"],
            json!({"roots": [{"uri": "file:///work", "name": "work"}]})
        );
    }
}

#[tokio::test]
async fn a_client_without_the_capability_is_not_asked() {
    let (_p, _h, url) = gateway("no-caps").await;
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // HTTP upstream: the per-session upstream session carries the client's own (empty)
    // capabilities, so the upstream knows not to ask.
    let r = c
        .call_tool("web_test_sampling", json!({"prompt": "x"}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], json!("Sampling not supported or error: Client does not support sampling (required for sampling/createMessage)"));
    // Shared stdio upstream: the gateway refuses on the client's behalf.
    let r = c
        .call_tool("st_test_sampling", json!({"prompt": "x"}))
        .await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Sampling not supported or error:")
            && text.contains("did not declare the sampling capability"),
        "{text}"
    );
}

#[tokio::test]
async fn cancellation_reaches_the_upstream_with_its_own_id() {
    let (_p, _h, url) = gateway("cancel").await;
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    for prefix in ["st", "web"] {
        let slow = c.post(json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": format!("{prefix}_slow"), "arguments": {"ms": 10000}}}));
        let cancel = async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let r = c.post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1", "reason": "changed my mind"}})).await;
            assert_eq!(r.status, 202);
        };
        let (resp, ()) = tokio::join!(slow, cancel);
        // The HTTP request still ends (with an error saying why), long before the 10 s.
        assert_eq!(
            resp.reply()["error"]["message"],
            json!("Request cancelled by the client")
        );
        // Over HTTP the cancellation is its own POST upstream, so it may land a moment after
        // the client's answer: ask until the upstream has seen it (bounded).
        let mut seen = Value::Null;
        for _ in 0..40 {
            let r = c
                .call_tool(&format!("{prefix}_last_cancelled"), json!({}))
                .await;
            let text = r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string();
            if text != "none" {
                seen = serde_json::from_str(&text).unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(seen["reason"], json!("changed my mind"));
        assert!(
            seen["requestId"].is_u64(),
            "upstream saw the gateway's numeric id, not the client's: {seen}"
        );
    }
}

#[tokio::test]
async fn stdio_isolation_gives_each_session_its_own_process() {
    let home = Home::new("isolation");
    home.expose(&json!({"upstreams": [
        {"id": "shared", "command": fixture(), "args": ["--stdio"], "expose_all": true},
        {"id": "own", "command": fixture(), "args": ["--stdio"], "expose_all": true, "isolation": "session"}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut a = Client::new(&url);
    let mut b = Client::new(&url);
    a.initialize(json!({})).await;
    b.initialize(json!({})).await;
    let who = |r: Value| {
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (sa, sb) = (
        who(a.call_tool("shared_whoami", json!({})).await),
        who(b.call_tool("shared_whoami", json!({})).await),
    );
    assert_eq!(sa, sb, "one shared process");
    let (oa, ob) = (
        who(a.call_tool("own_whoami", json!({})).await),
        who(b.call_tool("own_whoami", json!({})).await),
    );
    assert_ne!(oa, ob, "one process per session");
    assert_eq!(
        oa,
        who(a.call_tool("own_whoami", json!({})).await),
        "and it stays the session's"
    );
    // Ending a session stops its own process.
    let pid: u32 = oa
        .rsplit("pid=")
        .next()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(a.end_session().await, 200);
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
    assert!(gone, "the session's process {pid} was stopped");
}

#[tokio::test]
async fn http_upstreams_get_one_upstream_session_per_client() {
    let (_p, _h, url) = gateway("http-sessions").await;
    let mut a = Client::new(&url);
    let mut b = Client::new(&url);
    a.initialize(json!({})).await;
    b.initialize(json!({})).await;
    let who = |r: Value| {
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let wa = who(a.call_tool("web_whoami", json!({})).await);
    let wb = who(b.call_tool("web_whoami", json!({})).await);
    assert!(wa.contains(" session=") && wb.contains(" session="));
    assert_ne!(wa, wb);
    assert_eq!(wa, who(a.call_tool("web_whoami", json!({})).await));
}

#[tokio::test]
async fn sse_polling_is_mirrored_and_resumed_on_both_sides() {
    // The fixture's test_reconnection primes its SSE reply stream, closes it before replying
    // (SSE polling), and replies once the client resumes with Last-Event-ID. The gateway mirrors
    // that to its client (priming event with the retry hint, then the stream closes), resumes the
    // upstream stream itself, and the client resumes the gateway's stream to get the reply.
    let (_p, _h, url) = gateway("sse-polling").await;
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let resp = c
        .post_streaming(json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "web_test_reconnection", "arguments": {}}}))
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let first = sluice_e2e::mcp::finish(resp).await;
    // Priming event (an id, the upstream's retry hint, empty data), then the pause.
    let mut lines = first.body.lines();
    let id_line = lines.next().unwrap();
    assert!(
        id_line.starts_with("id: ") && id_line.ends_with("-0"),
        "{:?}",
        first.body
    );
    assert!(first.body.contains("\nretry: "), "{:?}", first.body);
    assert!(
        first.messages().is_empty(),
        "no reply before the pause: {:?}",
        first.body
    );
    let last_id = id_line.trim_start_matches("id: ");
    let mut resumed = SseReader::new(c.open_get(Some(last_id)).await);
    let (_, reply) = resumed.next().await.expect("the reply after resuming");
    assert_eq!(reply["id"], json!(21));
    assert_eq!(
        reply["result"]["content"][0]["text"],
        json!("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.")
    );
}
