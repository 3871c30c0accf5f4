//! Faults: an upstream that crashes or never starts, a hung upstream call, bad bytes on the
//! stdio transport, and its shutdown. Each has an exact answer, and everyone else keeps being served.

use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, Proc};
use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::Duration;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

#[tokio::test]
async fn a_crashed_upstream_loses_its_tools_is_named_in_errors_and_comes_back() {
    let home = Home::new("crash");
    home.write("sluice.json", r#"{"restart_initial_ms": 1500}"#);
    home.expose(&json!({"upstreams": [
        {"id": "frail", "command": fixture(), "args": ["--stdio"], "expose_all": true},
        {"id": "steady", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut other = Client::new(&url);
    other.initialize(json!({})).await;
    let mut events = SseReader::new(c.open_get(None).await);

    let r = c.call_tool("frail_crash", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Upstream 'frail' failed during tools/call: connection closed"),
        "{msg}"
    );
    assert_eq!(r["error"]["data"]["upstream"], json!("frail"));

    // Its tools (and prompts and resources) leave the lists, and the client is told.
    let seen = until_tools_changed(&mut events).await;
    assert_eq!(
        seen,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );
    let names = other.tool_names().await;
    assert!(!names.iter().any(|n| n.starts_with("frail_")), "{names:?}");
    // Meanwhile a call to it names it; the other upstream serves on, in both sessions.
    // (The restart waits 1.5 s, so it is still down here.)
    let r = other.call_tool("frail_echo", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32000));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Upstream 'frail' is unavailable: the process closed its stdout (exited)"),
        "{r}"
    );
    let r = other.call_tool("steady_echo", json!({"still": "ok"})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"still": "ok"}));

    // It is restarted (after the 1.5 s backoff) and its tools come back.
    let seen = until_tools_changed(&mut events).await;
    assert_eq!(
        seen,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );
    assert!(c.tool_names().await.contains(&"frail_echo".to_string()));
    let r = c.call_tool("frail_echo", json!({"back": true})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"back": true}));
}

/// The methods of the next three notifications on the GET stream.
async fn until_tools_changed(events: &mut SseReader) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let (_, m) = events.next().await.expect("a notification");
        out.push(m["method"].as_str().unwrap_or("").to_string());
    }
    out
}

#[tokio::test]
async fn an_upstream_that_cannot_start_does_not_stop_the_others() {
    let home = Home::new("nostart");
    home.expose(&json!({
        "upstreams": [
            {"id": "ghost", "command": "/nonexistent/mcp-server"},
            {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
        ],
        "expose": [{"upstream": "ghost", "tool": "boo", "as": "ghost_boo"}]
    }));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let names = c.tool_names().await;
    assert!(names.contains(&"fx_echo".to_string()) && !names.contains(&"ghost_boo".to_string()));
    let r = c.call_tool("ghost_boo", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32000));
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Upstream 'ghost' is unavailable: "),
        "{msg}"
    );
    assert!(
        msg.contains("/nonexistent/mcp-server"),
        "the reason says what failed: {msg}"
    );
    assert_eq!(
        c.call_tool("fx_add", json!({"a": 1, "b": 1})).await["result"]["structuredContent"],
        json!({"sum": 2})
    );
}

#[tokio::test]
async fn a_hung_call_times_out_and_is_cancelled_upstream() {
    let home = Home::new("timeout");
    // The short timeout is the hung upstream's own; the bystander's upstream keeps the default,
    // so a stall of the loaded test machine cannot time its call out.
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true, "timeout_ms": 400},
        {"id": "fy", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut bystander = Client::new(&url);
    bystander.initialize(json!({})).await;
    let (hung, fine) = tokio::join!(
        c.call_tool("fx_slow", json!({"ms": 5000})),
        bystander.call_tool("fy_echo", json!({"x": 1}))
    );
    assert_eq!(fine["result"]["structuredContent"], json!({"x": 1}));
    assert_eq!(
        hung["error"],
        json!({"code": -32001, "message": "Upstream 'fx' did not answer tools/call within 400 ms; the request was cancelled upstream", "data": {"upstream": "fx", "timeoutMs": 400}})
    );
    // Asking fx what it was told is itself bound by its 400 ms: on a stalled machine that one
    // question may time out too, so it is asked again (bounded) only when it did (the cancellation
    // then reported may be that question's own: the same rule, with the same reason).
    let mut seen = None;
    for _ in 0..5 {
        let r = c.call_tool("fx_last_cancelled", json!({})).await;
        if r["error"]["code"] == json!(-32001) {
            continue;
        }
        seen = Some(
            serde_json::from_str::<Value>(r["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap(),
        );
        break;
    }
    let seen = seen.expect("fx_last_cancelled timed out 5 times");
    assert_eq!(seen["reason"], json!("Sluice: no reply within 400 ms"));
}

/// The same over Streamable HTTP, where the gateway POSTs the call from the caller's own future
/// (left to a task of its own when the caller stops waiting): the timeout answers the client,
/// the cancellation reaches the upstream under its id, and the session goes on being served
/// once the abandoned call's own reply has come and been dropped.
#[tokio::test]
async fn a_hung_call_to_an_http_upstream_times_out_and_the_session_goes_on() {
    let (_fx, fx_url) = sluice_e2e::start_fixture_http(&[]);
    let home = Home::new("timeout-http");
    home.write("sluice.json", r#"{"request_timeout_ms": 400}"#);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fx_url, "expose_all": true, "era": "handshake"}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let hung = c.call_tool("fx_slow", json!({"ms": 1500})).await;
    assert_eq!(
        hung["error"],
        json!({"code": -32001, "message": "Upstream 'fx' did not answer tools/call within 400 ms; the request was cancelled upstream", "data": {"upstream": "fx", "timeoutMs": 400}})
    );
    // The cancellation is a POST of its own, sent beside the timeout's answer: on a busy
    // machine the next call can reach the upstream first ("none"), so ask again, a bounded
    // number of times.
    let mut text = String::new();
    for _ in 0..50 {
        let r = c.call_tool("fx_last_cancelled", json!({})).await;
        text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        if text != "none" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(seen["reason"], json!("Sluice: no reply within 400 ms"));
    // After the abandoned call's own reply came (and was dropped), calls still work.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fine = c.call_tool("fx_echo", json!({"x": 2})).await;
    assert_eq!(fine["result"]["structuredContent"], json!({"x": 2}));
}

/// Read one line of stdout with a deadline.
fn read_line(r: &mut impl BufRead) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("read stdout");
    line
}

#[test]
fn stdio_mode_speaks_only_protocol_and_stops_its_children_when_stdin_closes() {
    let home = Home::new("stdio");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--stdio", "--home", &home.arg()])
        .env("RUST_LOG", "debug");
    let mut p = Proc::spawn_piped(cmd);
    let mut stdin = p.child.stdin.take().unwrap();
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let send =
        |stdin: &mut std::process::ChildStdin, line: &str| writeln!(stdin, "{line}").unwrap();

    // Before initialize only ping works.
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    );
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["error"]["code"], json!(-32600));
    send(&mut stdin, &json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string());
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["result"]["protocolVersion"], json!("2025-06-18"));
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    );
    send(&mut stdin, &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "fx_whoami", "arguments": {}}}).to_string());
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["id"], json!(3));
    let who = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let pid: u32 = who.rsplit("pid=").next().unwrap().trim().parse().unwrap();
    // Bad input gets an error line, and the session goes on.
    send(&mut stdin, "{broken");
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["error"]["code"], json!(-32700));
    assert_eq!(r["id"], Value::Null);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string(),
    );
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 4, "result": {}}));

    // Close stdin: the gateway exits cleanly, stdout ends, and the upstream process is gone.
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing but protocol on stdout");
    let status = wait_with_timeout(&mut p.child, Duration::from_secs(10));
    assert_eq!(status, Some(0));
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(30));
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
    assert!(gone, "upstream process {pid} was stopped");
}

#[test]
fn stdio_mode_answers_bytes_that_are_not_utf8_and_over_long_lines_and_goes_on() {
    let home = Home::new("stdio-bytes");
    home.write("sluice.json", r#"{"max_body_bytes": 1024}"#);
    home.expose(&json!({"upstreams": []}));
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--stdio", "--no-admin", "--home", &home.arg()]);
    let mut p = Proc::spawn_piped(cmd);
    let mut stdin = p.child.stdin.take().unwrap();
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let ping = |id: u64| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        )
    };

    // A line that is not UTF-8: a parse error with a null id, and the session goes on.
    stdin.write_all(b"\xff\xfe\n").unwrap();
    stdin.write_all(ping(1).as_bytes()).unwrap();
    stdin.flush().unwrap();
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");
    assert_eq!(r["id"], Value::Null);
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));

    // A line over the body limit: the same -32600 as ever, and the session goes on.
    stdin.write_all(&[b'x'; 64 * 1024]).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.write_all(ping(2).as_bytes()).unwrap();
    stdin.flush().unwrap();
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 1024 bytes"),
        "{r}"
    );
    assert_eq!(r["id"], Value::Null);
    let r: Value = serde_json::from_str(&read_line(&mut out)).unwrap();
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));

    drop(stdin);
    assert_eq!(
        wait_with_timeout(&mut p.child, Duration::from_secs(10)),
        Some(0)
    );
}

fn wait_with_timeout(child: &mut std::process::Child, t: Duration) -> Option<i32> {
    let deadline = std::time::Instant::now() + t;
    while std::time::Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A session that ends (DELETE) while one of its calls is in flight: the call's POST is still
/// answered. An upstream the sessions share (stdio) goes on with the call, and its answer comes
/// (an ended session is not a cancelled call); the session's own upstream session (HTTP) ends
/// with it, and the call is answered at once with an error saying so. Either way the gateway
/// serves a new session as before.
#[tokio::test]
async fn a_session_ended_mid_call_still_gets_an_answer() {
    let (_fx, fx_url) = sluice_e2e::start_fixture_http(&[]);
    let home = Home::new("ended-mid-call");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true},
        {"id": "web", "transport": "http", "url": fx_url, "expose_all": true, "era": "handshake"}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let shared = json!({"result": {"content": [{"type": "text", "text": "slept 800ms"}]}});
    let own = json!({"error": {"code": -32000, "message": "Upstream 'web' failed during tools/call: connection closed: the client's session ended", "data": {"upstream": "web"}}});
    for (tool, answer) in [("fx_slow", shared), ("web_slow", own)] {
        let mut c = Client::new(&url);
        c.initialize(json!({})).await;
        let call = c.post(
            json!({"jsonrpc": "2.0", "id": "mid", "method": "tools/call",
            "params": {"name": tool, "arguments": {"ms": 800}}}),
        );
        let end = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(c.end_session().await, 200);
        };
        let (resp, ()) = tokio::join!(call, end);
        let mut expected = json!({"jsonrpc": "2.0", "id": "mid"});
        expected
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        assert_eq!(resp.reply(), expected, "{tool}");
        let after = c
            .post(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            .await;
        assert_eq!(after.status, 404, "the session is gone: {}", after.body);
    }
    let mut next = Client::new(&url);
    next.initialize(json!({})).await;
    for tool in ["fx_add", "web_add"] {
        assert_eq!(
            next.call_tool(tool, json!({"a": 2, "b": 3})).await["result"]["structuredContent"],
            json!({"sum": 5}),
            "{tool}"
        );
    }
}
