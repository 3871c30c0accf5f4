//! Limits of the HTTP face (issue 14, items 2, 4 and 6): header rules (duplicates, DELETE's
//! version, allowed hosts), slow and greedy clients (header, body and idle timeouts, the
//! connection cap, session caps, the replay buffer in bytes) and shutdown with clients attached.
//! Raw TCP where the test needs to hold a connection half-written; every wait is bounded.

use crate::auth::sha256_hex;
use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client, SseReader, ACCEPT_BOTH};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A gateway over a fixture upstream `fx`, with these settings.
fn gateway(label: &str, settings: Value) -> (Home, sluice_e2e::Proc, String) {
    let home = Home::new(label);
    home.write("sluice.json", &settings.to_string());
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    (home, gw, url)
}

fn host_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string()
}

async fn raw(url: &str) -> TcpStream {
    TcpStream::connect(host_of(url)).await.expect("connect")
}

/// Read until the peer closes; None when it has not closed within `within`.
pub(crate) async fn eof_within(s: &mut TcpStream, within: Duration) -> Option<String> {
    let mut all = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    };
    timeout(within, read).await.ok()?;
    Some(String::from_utf8_lossy(&all).into_owned())
}

/// Read one response (head and a `Content-Length` body): status and body.
async fn read_response(s: &mut TcpStream) -> (u16, String) {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if text.len() >= end + 4 + len {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, text[end + 4..end + 4 + len].to_string());
            }
        }
        let n = timeout(deadline, s.read(&mut buf))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(
            n > 0,
            "the connection closed before a whole response: {text}"
        );
        all.extend_from_slice(&buf[..n]);
    }
}

fn error_body(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[tokio::test]
async fn a_partial_request_head_is_closed_after_header_timeout_and_others_are_served() {
    let (_home, _gw, url) = gateway("slowloris", json!({"header_timeout_ms": 300}));
    let mut slow = raw(&url).await;
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: ")
        .await
        .unwrap();
    // Meanwhile a normal client is served.
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    assert_eq!(c.request("ping", json!({})).await["result"], json!({}));
    let got = eof_within(&mut slow, Duration::from_secs(10)).await;
    assert_eq!(got.as_deref(), Some(""), "closed without a response");
    // A connection that sends nothing at all is closed too.
    let mut silent = raw(&url).await;
    assert_eq!(
        eof_within(&mut silent, Duration::from_secs(10))
            .await
            .as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn a_slow_body_is_408_with_a_json_rpc_error() {
    let (_home, _gw, url) = gateway("slowbody", json!({"body_timeout_ms": 300}));
    let mut s = raw(&url).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let (status, body) = read_response(&mut s).await;
    assert_eq!(status, 408, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        error_body(
            Value::Null,
            -32600,
            "Invalid Request: the body was not received within 300 ms"
        )
    );
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_idle_timeout() {
    let (_home, _gw, url) = gateway("idle", json!({"idle_timeout_ms": 300}));
    let mut s = raw(&url).await;
    let req = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    s.write_all(req).await.unwrap();
    assert_eq!(read_response(&mut s).await.0, 404);
    // Kept alive: a second request on it is served.
    s.write_all(req).await.unwrap();
    assert_eq!(read_response(&mut s).await.0, 404);
    // Then, silent, it is closed.
    assert_eq!(
        eof_within(&mut s, Duration::from_secs(10)).await.as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn past_max_connections_a_connection_waits_until_one_closes() {
    let (_home, _gw, url) = gateway(
        "conncap",
        json!({"max_connections": 2, "min_body_bytes_per_sec": 0}),
    );
    // Two connections busy with a request (a body still arriving): at the cap, none is idle
    // to make room (an idle one would be closed for the newcomer: tests/e2e/overload.rs).
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    let mut first = raw(&url).await;
    first.write_all(head.as_bytes()).await.unwrap();
    let mut second = raw(&url).await;
    second.write_all(head.as_bytes()).await.unwrap();
    // Let the gateway accept both.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut third = raw(&url).await; // the kernel's backlog takes it
    let req = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    third.write_all(req).await.unwrap();
    let mut buf = [0u8; 64];
    let early = timeout(Duration::from_millis(700), third.read(&mut buf)).await;
    assert!(early.is_err(), "served past the cap: {early:?}");
    drop(first);
    assert_eq!(read_response(&mut third).await.0, 404);
}

async fn initialize_raw(url: &str, bearer: Option<&str>) -> sluice_e2e::mcp::Resp {
    let c = match bearer {
        Some(t) => Client::with_bearer(url, t),
        None => Client::new(url),
    };
    c.post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "sluice-e2e", "version": "1"}}}),
    )
    .await
}

#[tokio::test]
async fn past_max_sessions_initialize_is_429_and_creates_nothing() {
    let (_home, _gw, url) = gateway("sesscap", json!({"max_sessions": 2}));
    let mut a = Client::new(&url);
    a.initialize(json!({})).await;
    let mut b = Client::new(&url);
    b.initialize(json!({})).await;
    let r = initialize_raw(&url, None).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("mcp-session-id"), None);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32029,
            "message": "Too many sessions: 2 live sessions (max_sessions); end one (DELETE) or try later",
            "data": {"limit": "max_sessions", "max": 2}}})
    );
    // Ending one makes room.
    let d = a
        .http
        .delete(&url)
        .header("mcp-session-id", a.session.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), 200);
    assert_eq!(initialize_raw(&url, None).await.status, 200);
}

#[tokio::test]
async fn past_max_sessions_per_principal_initialize_is_429_for_that_principal_only() {
    let home = Home::new("princap");
    home.write(
        "sluice.json",
        &json!({"max_sessions_per_principal": 1}).to_string(),
    );
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": [
            {"name": "alice", "sha256": sha256_hex("alice-secret")},
            {"name": "bob", "sha256": sha256_hex("bob-secret")}]})
        .to_string(),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    assert_eq!(initialize_raw(&url, Some("alice-secret")).await.status, 200);
    let r = initialize_raw(&url, Some("alice-secret")).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32029,
            "message": "Too many sessions: 1 live sessions for this principal (max_sessions_per_principal); end one (DELETE) or try later",
            "data": {"limit": "max_sessions_per_principal", "max": 1}}})
    );
    assert_eq!(initialize_raw(&url, Some("bob-secret")).await.status, 200);
}

#[tokio::test]
async fn duplicate_mcp_headers_are_400() {
    let (_home, _gw, url) = gateway("duphdr", json!({}));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let http = reqwest::Client::new();
    let send = |headers: Vec<(&'static str, &'static str)>, session: Option<String>| {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("accept", ACCEPT_BOTH.parse().unwrap());
        h.insert("content-type", "application/json".parse().unwrap());
        if let Some(s) = session {
            h.insert("mcp-session-id", s.parse().unwrap());
        }
        for (k, v) in headers {
            h.append(k, v.parse().unwrap());
        }
        http.post(&url)
            .headers(h)
            .body(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string())
            .send()
    };
    let versions = error_body(
        Value::Null,
        -32600,
        "Invalid Request: conflicting MCP-Protocol-Version headers: send one",
    );
    for pair in [
        [
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-protocol-version", "1999-01-01"),
        ],
        [
            ("mcp-protocol-version", "1999-01-01"),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    ] {
        let r = finish(send(pair.to_vec(), c.session.clone()).await.unwrap()).await;
        assert_eq!(r.status, 400, "{pair:?}: {}", r.body);
        assert_eq!(serde_json::from_str::<Value>(&r.body).unwrap(), versions);
    }
    // The same value twice is one value.
    let same = [("mcp-protocol-version", "2025-11-25"); 2];
    let r = finish(send(same.to_vec(), c.session.clone()).await.unwrap()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let sid: &'static str = Box::leak(c.session.clone().unwrap().into_boxed_str());
    let r = finish(
        send(
            vec![
                ("mcp-session-id", sid),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            c.session.clone(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        error_body(
            Value::Null,
            -32600,
            "Invalid Request: more than one Mcp-Session-Id header: send one"
        )
    );
}

#[tokio::test]
async fn delete_with_an_unsupported_version_is_400_and_deletes_nothing() {
    let (_home, _gw, url) = gateway("delver", json!({}));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let r = finish(
        c.http
            .delete(&url)
            .header("mcp-session-id", c.session.as_deref().unwrap())
            .header("mcp-protocol-version", "1999-01-01")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["error"]["code"], json!(-32600));
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Invalid Request: unsupported MCP-Protocol-Version \"1999-01-01\""));
    // The session lives on.
    assert_eq!(c.request("ping", json!({})).await["result"], json!({}));
}

#[tokio::test]
async fn allowed_hosts_refuses_other_hosts_with_403() {
    let (_home, _gw, url) = gateway("hosts", json!({"allowed_hosts": ["localhost"]}));
    let host = host_of(&url);
    let r = initialize_raw(&url, None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        serde_json::from_str::<Value>(&r.body).unwrap(),
        error_body(
            Value::Null,
            -32600,
            &format!("Invalid Request: Host \"{host}\" not allowed")
        )
    );
    let port = host.rsplit(':').next().unwrap();
    let c = Client::new(&url);
    let r = finish(
        c.builder()
            .header("host", format!("localhost:{port}"))
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "sluice-e2e", "version": "1"}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn a_resumed_get_stream_replays_only_the_bytes_kept() {
    let (_home, _gw, url) = gateway("replaybytes", json!({"replay_bytes": 400}));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // Each list change puts a notification on the GET stream's buffer.
    let mut events = SseReader::new(c.open_get(None).await);
    let mut seen = Vec::new();
    for _ in 0..8 {
        let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
        assert!(r["result"].is_object(), "{r}");
        let (id, m) = events.next().await.expect("a list change");
        seen.push((id.unwrap(), m.to_string().len()));
    }
    while let Ok(Some((id, m))) = timeout(Duration::from_millis(500), events.next()).await {
        seen.push((id.unwrap(), m.to_string().len()));
    }
    drop(events);
    let total: usize = seen.iter().map(|(_, n)| n).sum();
    assert!(
        total > 400,
        "the test's events must overflow 400 bytes: {seen:?}"
    );
    let mut replay = SseReader::new(c.open_get(Some("0-0")).await);
    let mut got = Vec::new();
    while let Ok(Some((id, _))) = timeout(Duration::from_millis(1000), replay.next()).await {
        got.push(id.unwrap());
    }
    // Only the newest events whose data fits in 400 bytes are replayed, in order.
    let ids: Vec<_> = seen.iter().map(|(id, _)| id.clone()).collect();
    assert!(
        !got.is_empty() && got.len() < ids.len(),
        "{got:?} of {ids:?}"
    );
    assert_eq!(
        got,
        ids[ids.len() - got.len()..],
        "a suffix of what was sent"
    );
    let kept: usize = seen[seen.len() - got.len()..].iter().map(|(_, n)| n).sum();
    assert!(kept <= 400, "{kept} bytes replayed");
    let one_more = seen[seen.len() - got.len() - 1].1;
    assert!(kept + one_more > 400, "as many as fit were kept");
}

/// The processes whose parent is `pid` (from `/proc/*/stat`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit(')').next()?.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

/// Wait (at most `within`) for the gateway to exit, then (at most 5 s) for each of `kids` to
/// be gone.
async fn exits_leaving_no_child(gw: &mut sluice_e2e::Proc, kids: Vec<u32>, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while gw.child.try_wait().unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "sluice did not exit within {within:?} of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for k in kids {
        while running(k) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "child {k} still runs"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Send SIGTERM to `pid`.
fn sigterm(pid: u32) {
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

#[tokio::test]
async fn sigterm_ends_get_streams_finishes_calls_in_flight_and_stops_every_child() {
    let (_home, mut gw, url) = gateway("drain", json!({"drain_ms": 8000}));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    assert!(c.tool_names().await.contains(&"fx_slow".to_string()));
    let kids = children(gw.pid());
    assert!(!kids.is_empty(), "the upstream runs as a child");
    let mut events = SseReader::new(c.open_get(None).await);
    let call = {
        let mut other = Client::new(&url);
        other.session = c.session.clone();
        let c = other;
        tokio::spawn(async move { c.call_tool("fx_slow", json!({"ms": 1500})).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    sigterm(gw.pid());
    // The GET stream ends at once (well before the call does).
    let ended = timeout(Duration::from_secs(5), events.next()).await;
    assert!(matches!(ended, Ok(None)), "the GET stream ended: {ended:?}");
    // The call in flight still gets its reply.
    let reply = timeout(Duration::from_secs(10), call)
        .await
        .expect("the call's reply")
        .unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], json!("slept 1500ms"));
    // The process exits within the drain time and a margin, and no child is left.
    exits_leaving_no_child(&mut gw, kids, Duration::from_secs(15)).await;
    // Nothing listens any more.
    assert!(TcpStream::connect(host_of(&url)).await.is_err());
}

#[tokio::test]
async fn an_open_get_stream_is_never_cut_by_the_header_or_idle_timeouts() {
    let (_home, _gw, url) = gateway(
        "ssealive",
        json!({"header_timeout_ms": 200, "idle_timeout_ms": 200}),
    );
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut events = SseReader::new(c.open_get(None).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert!(r["result"].is_object(), "{r}");
    let (_, m) = events.next().await.expect("the stream is still open");
    assert_eq!(m["method"], json!("notifications/tools/list_changed"));
}

#[tokio::test]
async fn past_drain_ms_the_gateway_exits_with_a_call_still_in_flight() {
    let (_home, mut gw, url) = gateway("drainlimit", json!({"drain_ms": 500}));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let kids = children(gw.pid());
    let call = tokio::spawn(async move {
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "fx_slow", "arguments": {"ms": 60000}}});
        match c.builder().body(msg.to_string()).send().await {
            Ok(resp) => Some(resp.text().await.map_err(|e| e.to_string())),
            Err(_) => None,
        }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    sigterm(gw.pid());
    // Although a 60 s call is in flight, the process exits after the drain, leaving no child.
    exits_leaving_no_child(&mut gw, kids, Duration::from_secs(10)).await;
    // The call's connection was closed without a reply.
    let r = timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ended")
        .unwrap();
    assert!(matches!(r, None | Some(Err(_))), "no reply: {r:?}");
}
