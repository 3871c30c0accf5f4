//! Upstreams of the 2026-07-28 era through the real binary: Sluice finds each upstream's era
//! (`server/discover`, falling back to `initialize`), speaks it, and bridges: a legacy client
//! gets a modern upstream's `input_required` rounds as the elicitation and sampling requests it
//! knows (and legacy-shaped results); a modern client gets them as they are and its retry may
//! land on another gateway process; the 0.2.0-alpha conformance suite's 2026-07-28 requirements
//! give the same verdicts through the gateway as against the fixture directly.

use crate::interop::{node22, node_dir, node_module_file, run_with_timeout};
use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};
use std::process::Command;
use std::time::Duration;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// The per-scenario verdict lines of a conformance run (`✓ name: N passed, M failed`), sorted.
fn verdicts(stdout: &str) -> Vec<String> {
    let mut v: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with('✓') || l.starts_with('✗'))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn run_2026_suite(url: &str) -> (bool, Vec<String>, String) {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(node_module_file("conformance-2026/dist/index.js"))
        .args(["server", "--url", url, "--requirements", "2026-07-28"]);
    let run = run_with_timeout(cmd, Duration::from_secs(600));
    let v = verdicts(&run.stdout);
    (run.success(), v, run.stdout)
}

#[test]
fn the_2026_conformance_requirements_pass_through_the_gateway_as_directly() {
    let (_fixture, fixture_url) = start_fixture_http(&[]);
    let (_gw, url) = start_sluice(&["--passthrough", &fixture_url, "--no-admin"]);
    let (direct_ok, direct, direct_out) = run_2026_suite(&fixture_url);
    assert!(
        direct_ok,
        "the fixture must meet the 2026-07-28 requirements directly:\n{direct_out}"
    );
    assert!(
        direct.iter().any(|l| l.starts_with("✓ server-stateless: ")),
        "{direct_out}"
    );
    assert!(
        direct.len() >= 40,
        "expected at least 40 scenarios: {direct:?}"
    );
    let (gw_ok, through, gw_out) = run_2026_suite(&url);
    assert!(gw_ok, "through the gateway:\n{gw_out}");
    assert_eq!(through, direct, "per-scenario verdicts differ");
}

/// A tree whose only upstream is the fixture over stdio, in the era given by `args`.
fn home(label: &str, args: &[&str], extra: Value) -> Home {
    let home = Home::new(label);
    let mut up = json!({"id": "fx", "command": fixture(), "args": args, "expose_all": true});
    if let (Some(u), Some(e)) = (up.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            u.insert(k.clone(), v.clone());
        }
    }
    home.expose(&json!({"upstreams": [up]}));
    home
}

#[tokio::test]
async fn a_legacy_client_answers_a_modern_upstreams_input_requests() {
    let home = home(
        "modern-up-legacy-client",
        &["--stdio", "--era", "modern"],
        json!({}),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({"elicitation": {}, "sampling": {}}))
        .await;

    // A plain call: the result is legacy-shaped (no resultType, no serverInfo stamp).
    let r = c.call_tool("fx_echo", json!({"k": "v"})).await;
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "{\"k\":\"v\"}"}], "structuredContent": {"k": "v"}})
    );

    // Elicitation: the upstream's input request reaches the client as elicitation/create on
    // the call's stream; the answer goes back in the retried request.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "fx_test_elicitation", "arguments": {"message": "Your name?"}}});
    let resp = c.post_streaming(call).await;
    let mut events = SseReader::new(resp);
    let (_, asked) = events.next().await.expect("elicitation/create");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Your name?");
    let answered = c
        .post(json!({"jsonrpc": "2.0", "id": asked["id"],
                     "result": {"action": "accept", "content": {"response": "Ada"}}}))
        .await;
    assert_eq!(answered.status, 202);
    let (_, done) = events.next().await.expect("the reply");
    assert_eq!(done["id"], 7);
    assert_eq!(
        done["result"]["content"][0]["text"],
        "User response: action=accept, content={\"response\":\"Ada\"}",
        "{done}"
    );
    assert_eq!(done["result"].get("resultType"), None);

    // Sampling, the same way.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                      "params": {"name": "fx_test_sampling", "arguments": {"prompt": "Capital of France?"}}});
    let mut events = SseReader::new(c.post_streaming(call).await);
    let (_, asked) = events.next().await.expect("sampling/createMessage");
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    c.post(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "Paris"},
        "model": "test-model", "stopReason": "endTurn"}}))
        .await;
    let (_, done) = events.next().await.expect("the reply");
    assert_eq!(
        done["result"]["content"][0]["text"], "LLM response: Paris",
        "{done}"
    );

    // A client without the capability is told which one the upstream needs.
    let mut plain = Client::new(&url);
    plain.initialize(json!({})).await;
    let r = plain
        .call_tool("fx_test_elicitation", json!({"message": "x"}))
        .await;
    assert_eq!(r["error"]["code"], -32021, "{r}");

    // resources/subscribe is Sluice's own toward a modern upstream (a listen stream there);
    // the upstream's update reaches the subscribed client.
    let mut get = SseReader::new(c.open_get(None).await);
    let sub = c
        .request("resources/subscribe", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(sub["result"], json!({}), "{sub}");
    let mut seen = None;
    for _ in 0..20 {
        c.call_tool("fx_touch_resource", json!({"uri": "test://static-text"}))
            .await;
        if let Ok(Some((_, m))) = tokio::time::timeout(Duration::from_millis(300), get.next()).await
        {
            seen = Some(m);
            break;
        }
    }
    let seen = seen.expect("notifications/resources/updated");
    assert_eq!(seen["method"], "notifications/resources/updated", "{seen}");
    assert_eq!(seen["params"]["uri"], "test://static-text", "{seen}");
    // The upstream's listen stream names its subscription; the gateway passes that on.
    assert!(
        seen["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_number(),
        "{seen}"
    );
}

#[tokio::test]
async fn a_modern_clients_retry_may_land_on_another_gateway() {
    // One HTTP upstream of the 2026-07-28 era behind two gateway processes.
    let (_fixture, fixture_url) = start_fixture_http(&["--era", "modern"]);
    let home = Home::new("modern-up-two");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fixture_url, "expose_all": true, "era": "stateless"}
    ]}));
    let (_a, url_a) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let (_b, url_b) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let post = |url: String, body: Value| async move {
        let r = reqwest::Client::new()
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "fx_test_elicitation")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map(str::to_string)
            .unwrap_or(text);
        serde_json::from_str::<Value>(&data).unwrap()
    };
    let params =
        json!({"name": "fx_test_elicitation", "arguments": {"message": "Name?"}, "_meta": meta});
    let first = post(
        url_a.clone(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
    )
    .await;
    // The upstream's own round, passed through: its keys, its state.
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    assert_eq!(
        r["inputRequests"]["elicitation"]["method"],
        "elicitation/create"
    );
    let state = r["requestState"].as_str().unwrap();
    assert!(
        !state.starts_with("sluice1."),
        "the upstream's own state: {state}"
    );
    let mut retry = params.clone();
    retry["inputResponses"] =
        json!({"elicitation": {"action": "accept", "content": {"response": "Ada"}}});
    retry["requestState"] = json!(state);
    let done = post(
        url_b.clone(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry}),
    )
    .await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "User response: action=accept, content={\"response\":\"Ada\"}",
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete");
}

#[tokio::test]
async fn each_upstreams_era_is_found_and_a_wrong_pin_is_reported() {
    let home = Home::new("modern-up-eras");
    home.expose(&json!({"upstreams": [
        {"id": "old", "command": fixture(), "args": ["--stdio", "--era", "legacy"], "expose_all": true},
        {"id": "new", "command": fixture(), "args": ["--stdio", "--era", "modern"], "expose_all": true},
        {"id": "pinned", "command": fixture(), "args": ["--stdio", "--era", "legacy"], "expose_all": true, "era": "stateless"}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    for tool in ["old_echo", "new_echo"] {
        let r = c.call_tool(tool, json!({"via": tool})).await;
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"via": tool}),
            "{r}"
        );
    }
    // The era shows in what the upstream knows of the client. Over the handshake, the shared
    // process saw the gateway's own capabilities (sampling included); in 2026-07-28 each
    // request carries this client's (none), so the upstream refuses with -32021.
    let old = c.call_tool("old_test_missing_capability", json!({})).await;
    assert_eq!(
        old["result"]["content"][0]["text"], "The client declared the sampling capability",
        "{old}"
    );
    let new = c.call_tool("new_test_missing_capability", json!({})).await;
    assert_eq!(new["error"]["code"], -32021, "{new}");
    assert_eq!(
        new["error"]["data"],
        json!({"requiredCapabilities": {"sampling": {}}}),
        "{new}"
    );
    // An upstream pinned to an era it does not speak is down, and says why.
    let r = c.call_tool("pinned_echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("does not speak 2026-07-28 (server/discover failed) and the configuration says era \"modern\""),
        "{r}"
    );
}

#[tokio::test]
async fn progress_cancellation_and_list_changes_cross_the_bridge() {
    // A legacy client in front of a 2026-07-28 upstream over HTTP (no sessions there).
    let (_fixture, fixture_url) = start_fixture_http(&["--era", "modern"]);
    let home = Home::new("modern-up-bridge");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fixture_url, "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;

    // Progress: the client's token, back on the call's stream.
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "fx_test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "tok-1"}}});
    let mut events = SseReader::new(c.post_streaming(call).await);
    let mut progress = Vec::new();
    let reply = loop {
        let (_, m) = events.next().await.expect("progress, then the reply");
        if m["method"] == "notifications/progress" {
            progress.push(m["params"]["progressToken"].clone());
        } else {
            break m;
        }
    };
    assert_eq!(reply["id"], 5, "{reply}");
    assert!(!progress.is_empty(), "no progress reached the client");
    assert!(progress.iter().all(|t| t == "tok-1"), "{progress:?}");

    // Cancellation: the legacy client's notifications/cancelled closes the modern request's
    // stream upstream, which is how a 2026-07-28 server hears it.
    let slow = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                      "params": {"name": "fx_slow", "arguments": {"ms": 5000}}});
    let pending = tokio::spawn({
        let b = c.builder().body(slow.to_string());
        async move { b.send().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = c
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 6, "reason": "enough"}}),
        )
        .await;
    assert_eq!(n.status, 202);
    let mut seen = String::new();
    for _ in 0..50 {
        let r = c.call_tool("fx_last_cancelled", json!({})).await;
        seen = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if seen != "none" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.contains("client closed the response stream"), "{seen}");
    pending.abort();

    // A list change upstream (told on Sluice's listen stream there) reaches the client.
    let mut get = SseReader::new(c.open_get(None).await);
    c.call_tool("fx_trigger_list_changed", json!({})).await;
    let (_, m) = tokio::time::timeout(Duration::from_secs(10), get.next())
        .await
        .expect("a notification within 10 s")
        .expect("the GET stream stays open");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
}
