//! Overload: the slow-client attack (thousands of connections dribbling heads and bodies from one
//! address) while a client on another loopback address is served, the actions the listener
//! takes (timeouts shortened near the cap, the connection idle the longest shed at it, slow
//! bodies cut, the cap per address and behind a trusted proxy), the cap on requests in flight
//! per principal, and the memory ceiling. Loopback only; every wait is bounded.

use crate::auth::sha256_hex;
use crate::limits::eof_within;
use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, ACCEPT_BOTH};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_sluice, wait_for_port};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Mutex;
use tokio::time::timeout;

const TOKEN: &str = "overload-admin-token-0123456789";

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A gateway over a fixture upstream `fx` with these settings (and the admin listener, with
/// [`TOKEN`]); its `/mcp` URL and admin base URL.
fn gateway(label: &str, mut settings: Value) -> (Home, sluice_e2e::Proc, String, String) {
    settings["admin_token"] = json!(TOKEN);
    let home = Home::new(label);
    home.write("sluice.json", &settings.to_string());
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--admin", &admin]);
    wait_for_port(port, Duration::from_secs(20));
    (home, gw, url, format!("http://{admin}"))
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("an IP:port")
}

/// A connection to `to` from the loopback address `from`.
async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// The gateway's overload action counters, from `/metrics`.
async fn actions(admin: &str) -> HashMap<String, f64> {
    let text = reqwest::Client::new()
        .get(format!("{admin}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("sluice_overload_actions_total{action=\""))
        .filter_map(|l| {
            let (name, value) = l.split_once("\"} ")?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Descriptors the process `pid` has open.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Let this process (and the gateway it starts) open `n` descriptors.
fn allow_descriptors(n: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft < n {
        setrlimit(Resource::RLIMIT_NOFILE, n.min(hard), hard).expect("setrlimit");
    }
}

/// One slow connection after another from `from` until `until`: each sends a head (and, with
/// `body`, a `Content-Length` and a body) one byte a second. The lifetime of each, from its
/// connect to its close by the gateway, goes to `lifetimes`.
async fn dribble(
    to: SocketAddr,
    body: bool,
    until: Instant,
    seed: u64,
    lifetimes: Arc<Mutex<Vec<Duration>>>,
) {
    let text = if body {
        format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    } else {
        String::new()
    };
    let dribbled: &[u8] = if body {
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}"
    } else {
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
    };
    let mut n = seed;
    while Instant::now() < until {
        let Ok(mut s) = connect_from([127, 0, 0, 1].into(), to).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let opened = Instant::now();
        if s.write_all(text.as_bytes()).await.is_ok() {
            let mut buf = [0u8; 1024];
            'slow: for i in 0.. {
                let byte = &dribbled[i % dribbled.len()..][..1];
                if s.write_all(byte).await.is_err() {
                    break;
                }
                let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
                loop {
                    match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break 'slow,
                        Ok(Ok(_)) => {}
                        Err(_) => break,
                    }
                }
                if opened.elapsed() > Duration::from_secs(60) {
                    break;
                }
            }
        }
        lifetimes.lock().await.push(opened.elapsed());
        drop(s);
        // Again after a second or two, spread so that the connections do not come in waves.
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        tokio::time::sleep(Duration::from_millis(1000 + (n >> 33) % 1000)).await;
    }
}

/// The slow-client attack: 200 connections dribbling a body and 2,000 dribbling a head, all
/// from 127.0.0.1, for 15 s (each closed one opens again), against a gateway with `settings`.
/// A client on 127.0.0.2, a new connection per probe, is answered within 1 s every time; every
/// slow connection is closed within 40 s of its connect; the gateway's descriptors return to
/// their idle count; the metrics show each of `expected` actions taken.
async fn attack(label: &str, settings: Value, expected: &[&str]) {
    allow_descriptors(16_384);
    let (_home, gw, url, admin) = gateway(label, settings);
    let to = addr_of(&url);
    let pid = gw.pid();
    // The probe: its own session, a new connection from 127.0.0.2 each time.
    let probe = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut session = Client::new(&url);
    session.http = probe.clone();
    session.initialize(json!({})).await;
    let ping = || async {
        let started = Instant::now();
        let r = session
            .post(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.reply()["result"], json!({}));
        started.elapsed()
    };
    ping().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = descriptors(pid);

    let until = Instant::now() + Duration::from_secs(15);
    let lifetimes = Arc::new(Mutex::new(Vec::new()));
    let mut attackers = tokio::task::JoinSet::new();
    for i in 0..200 {
        attackers.spawn(dribble(to, true, until, i, lifetimes.clone()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..2000 {
        attackers.spawn(dribble(to, false, until, 1000 + i, lifetimes.clone()));
    }
    let mut probes = Vec::new();
    while Instant::now() < until {
        probes.push(ping().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let slowest = probes.iter().max().copied().unwrap_or_default();
    eprintln!(
        "probes: {} answered, slowest {slowest:?}, median {:?}",
        probes.len(),
        {
            let mut p = probes.clone();
            p.sort();
            p[p.len() / 2]
        }
    );
    eprintln!("probe latencies: {probes:?}");
    assert!(
        probes.iter().all(|p| *p < Duration::from_secs(1)),
        "a probe waited 1 s or more: {probes:?}"
    );
    // Every slow connection ends (the attackers stop opening new ones).
    let ended = timeout(Duration::from_secs(60), async {
        while attackers.join_next().await.is_some() {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "slow connections still open 60 s after the attack"
    );
    let lifetimes = lifetimes.lock().await;
    let longest = lifetimes.iter().max().copied().unwrap_or_default();
    eprintln!(
        "slow connections: {} in all, the longest open {longest:?}",
        lifetimes.len()
    );
    assert!(
        longest < Duration::from_secs(40),
        "a slow connection stayed open {longest:?}"
    );
    // The gateway's descriptors come back to their idle count.
    let started = Instant::now();
    let mut now = descriptors(pid);
    while now > idle && started.elapsed() < Duration::from_secs(40) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        now = descriptors(pid);
    }
    eprintln!(
        "descriptors: {idle} idle, {now} after the attack ({:?} after its end)",
        started.elapsed()
    );
    assert!(now <= idle, "{now} descriptors open, {idle} when idle");
    // The metrics name each action taken.
    let taken = actions(&admin).await;
    eprintln!("overload actions: {taken:?}");
    for action in expected {
        assert!(taken[*action] > 0.0, "{action}: {taken:?}");
    }
    // And the probe's session is still served.
    ping().await;
}

/// The attack against the defaults (a cap of 1,024 connections, no cap per address): the
/// connections idle the longest are shed at the cap, the header timeout shrinks near it, slow
/// bodies are cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_from_one_address_leave_another_answered_within_a_second() {
    attack(
        "attack",
        json!({}),
        &["shed_at_cap", "header_timeout_shortened", "body_too_slow"],
    )
    .await;
}

/// The same with `max_connections_per_ip`: one address's connections past 900 are closed at
/// once, and the rest are still the overload actions' to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_past_max_connections_per_ip_are_closed_at_accept() {
    attack(
        "attack-per-ip",
        json!({"max_connections_per_ip": 900}),
        &[
            "per_ip_refused",
            "header_timeout_shortened",
            "body_too_slow",
        ],
    )
    .await;
}

#[tokio::test]
async fn at_the_cap_the_connection_idle_the_longest_is_closed_for_a_new_one() {
    let (_home, _gw, url, admin) = gateway("shed", json!({"max_connections": 2}));
    let to = addr_of(&url);
    let from: IpAddr = [127, 0, 0, 1].into();
    let mut oldest = connect_from(from, to).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut younger = connect_from(from, to).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The cap is reached with two idle connections: a third is served at once.
    let mut third = connect_from(from, to).await.unwrap();
    let req = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    third.write_all(req).await.unwrap();
    let mut buf = [0u8; 64];
    let n = timeout(Duration::from_secs(5), third.read(&mut buf))
        .await
        .expect("served within 5 s")
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 404"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    // The oldest made room; the younger one is still open.
    assert_eq!(
        eof_within(&mut oldest, Duration::from_secs(5))
            .await
            .as_deref(),
        Some("")
    );
    assert!(eof_within(&mut younger, Duration::from_millis(300))
        .await
        .is_none());
    assert_eq!(actions(&admin).await["shed_at_cap"], 1.0);
    // The admin page's Overview shows it too.
    let overview: Value = reqwest::Client::new()
        .get(format!("{admin}/api/overview"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let overload = &overview["overload"];
    assert_eq!(overload["actions"]["shed_at_cap"], 1, "{overload}");
    assert_eq!(overload["actions"]["body_too_slow"], 0, "{overload}");
    assert_eq!(overload["open_connections"], 2, "{overload}");
    assert_eq!(
        overload["resident_bytes"],
        Value::Null,
        "no ceiling: {overload}"
    );
}

#[tokio::test]
async fn near_the_cap_a_partial_head_gets_the_overload_header_timeout() {
    let (_home, _gw, url, admin) = gateway(
        "shortened",
        json!({"max_connections": 4, "header_timeout_ms": 60000,
               "overload": {"at_percent": 50, "header_timeout_ms": 1500}}),
    );
    let to = addr_of(&url);
    let from: IpAddr = [127, 0, 0, 1].into();
    // One connection alone gets the usual minute.
    let mut alone = connect_from(from, to).await.unwrap();
    alone.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
    assert!(eof_within(&mut alone, Duration::from_millis(1500))
        .await
        .is_none());
    // Two more make three of four: past the overload header timeout (its watchdog looks within a
    // second), the oldest is closed, then the others' 1.5 s pass and one of them is closed too.
    let mut second = connect_from(from, to).await.unwrap();
    let mut third = connect_from(from, to).await.unwrap();
    let started = Instant::now();
    assert_eq!(
        eof_within(&mut alone, Duration::from_secs(10))
            .await
            .as_deref(),
        Some("")
    );
    let either = async {
        tokio::select! {
            a = eof_within(&mut second, Duration::from_secs(10)) => a,
            b = eof_within(&mut third, Duration::from_secs(10)) => b,
        }
    };
    assert_eq!(either.await.as_deref(), Some(""));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(actions(&admin).await["header_timeout_shortened"] >= 2.0);
}

#[tokio::test]
async fn near_the_cap_an_idle_kept_alive_connection_gets_the_overload_idle_timeout() {
    let (_home, _gw, url, admin) = gateway(
        "idle-shortened",
        json!({"max_connections": 4, "idle_timeout_ms": 60000,
               "overload": {"at_percent": 50, "idle_timeout_ms": 300}}),
    );
    let to = addr_of(&url);
    let from: IpAddr = [127, 0, 0, 1].into();
    let req = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut s = connect_from(from, to).await.unwrap();
        s.write_all(req).await.unwrap();
        let mut buf = [0u8; 512];
        let n = timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 404"));
        kept.push(s);
    }
    // Two of four, both idle and kept alive: one is closed within about a second (which
    // leaves one: no longer under overload), long before the usual minute.
    let (a, b) = kept.split_at_mut(1);
    let (closed, other) = async {
        tokio::select! {
            x = eof_within(&mut a[0], Duration::from_secs(5)) => (x, 1),
            y = eof_within(&mut b[0], Duration::from_secs(5)) => (y, 0),
        }
    }
    .await;
    assert_eq!(closed.as_deref(), Some(""));
    // The other, idle as long, stays open: closing both would have been more than the
    // overload asked for (they reach the shortened timeout together).
    assert_eq!(
        eof_within(&mut kept[other], Duration::from_secs(1)).await,
        None
    );
    assert_eq!(actions(&admin).await["idle_timeout_shortened"], 1.0);
}

#[tokio::test]
async fn a_body_slower_than_the_minimum_rate_is_cut_with_408() {
    let (_home, _gw, url, admin) = gateway(
        "slowrate",
        json!({"min_body_bytes_per_sec": 100, "header_timeout_ms": 500}),
    );
    let mut s = connect_from([127, 0, 0, 1].into(), addr_of(&url))
        .await
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // A byte every 200 ms: 5 bytes a second against 100.
    let writer = async {
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if s.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let _ = timeout(Duration::from_millis(1500), writer).await;
    let got = eof_within(&mut s, Duration::from_secs(10))
        .await
        .expect("closed within 10 s");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    let body = &got[got.find("\r\n\r\n").unwrap() + 4..];
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
            "message": "Invalid Request: the body arrived slower than 100 bytes per second"}})
    );
    assert_eq!(actions(&admin).await["body_too_slow"], 1.0);
}

#[tokio::test]
async fn past_max_connections_per_ip_a_connection_is_closed_and_other_addresses_are_served() {
    let (_home, _gw, url, admin) = gateway("perip", json!({"max_connections_per_ip": 2}));
    let to = addr_of(&url);
    let one: IpAddr = [127, 0, 0, 1].into();
    let req = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    // Served once to the end: the accept loop runs, and the connection the test's start made
    // to see the port open (accepted first) has given its place back.
    let mut first = connect_from(one, to).await.unwrap();
    first.write_all(req).await.unwrap();
    let got = eof_within(&mut first, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(got.starts_with("HTTP/1.1 404"), "{got}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _a = connect_from(one, to).await.unwrap();
    let _b = connect_from(one, to).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = connect_from(one, to).await.unwrap();
    assert_eq!(
        eof_within(&mut third, Duration::from_secs(5))
            .await
            .as_deref(),
        Some(""),
        "closed at once, nothing written"
    );
    let mut other = connect_from([127, 0, 0, 2].into(), to).await.unwrap();
    other.write_all(req).await.unwrap();
    let got = eof_within(&mut other, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(got.starts_with("HTTP/1.1 404"), "{got}");
    assert_eq!(actions(&admin).await["per_ip_refused"], 1.0);
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_address_is_capped() {
    let (_home, _gw, url, admin) = gateway(
        "forwarded",
        json!({"max_connections_per_ip": 1, "trusted_proxies": ["127.0.0.1"]}),
    );
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // The proxy's own connections are not capped: two at once are served.
    let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fx_slow", "arguments": {"ms": 1500}}});
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let from = |ip: &'static str, msg: &Value| {
        c.builder_with(&[("x-forwarded-for", ip)])
            .body(msg.to_string())
            .send()
    };
    let busy = tokio::spawn(from("198.51.100.7", &slow));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = from("203.0.113.9, 198.51.100.7", &ping).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(
        refused.headers()["retry-after"].to_str().unwrap(),
        "1",
        "Retry-After"
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32029);
    assert_eq!(
        body["error"]["data"],
        json!({"limit": "max_connections_per_ip", "max": 1, "retryAfterMs": 1000})
    );
    // Another forwarded address, and the proxy itself, are served meanwhile.
    assert_eq!(from("198.51.100.8", &ping).await.unwrap().status(), 200);
    assert_eq!(c.post(ping.clone()).await.status, 200);
    let done = busy.await.unwrap().unwrap();
    assert_eq!(done.status(), 200);
    // Its call over, the address is served again.
    assert_eq!(from("198.51.100.7", &ping).await.unwrap().status(), 200);
    assert_eq!(actions(&admin).await["per_ip_forwarded_refused"], 1.0);
}

#[tokio::test]
async fn past_max_inflight_per_principal_a_request_is_32029_with_retry_after_ms() {
    let home = Home::new("inflight");
    home.write(
        "sluice.json",
        &json!({"max_inflight_per_principal": 1, "admin_token": TOKEN}).to_string(),
    );
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": [
            {"name": "alice", "sha256": sha256_hex("alice-secret")},
            {"name": "bob", "sha256": sha256_hex("bob-secret")}]})
        .to_string(),
    );
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--admin", &admin]);
    wait_for_port(port, Duration::from_secs(20));
    let mut alice = Client::with_bearer(&url, "alice-secret");
    alice.initialize(json!({})).await;
    let mut alice2 = Client::with_bearer(&url, "alice-secret");
    alice2.initialize(json!({})).await;
    let mut bob = Client::with_bearer(&url, "bob-secret");
    bob.initialize(json!({})).await;
    let alice = Arc::new(alice);
    let busy = {
        let alice = alice.clone();
        tokio::spawn(async move { alice.call_tool("fx_slow", json!({"ms": 1500})).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Alice's second request, on another session of hers: refused.
    let refused = alice2
        .post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "fx_echo", "arguments": {"x": 1}}}))
        .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert_eq!(
        refused.reply(),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32029,
            "message": "Too many requests in flight",
            "data": {"reason": "Too many requests in flight for this caller (1, max_inflight_per_principal). Retry in 500 ms.",
                "limit": "max_inflight_per_principal", "max": 1, "retryAfterMs": 500}}})
    );
    // Bob is served meanwhile.
    let r = bob.call_tool("fx_echo", json!({"x": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"x": 2}), "{r}");
    let done = busy.await.unwrap();
    assert!(done.get("result").is_some(), "{done}");
    // Her call over, she is served again.
    let r = alice2.call_tool("fx_echo", json!({"x": 3})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"x": 3}), "{r}");
    let taken = actions(&format!("http://{admin}")).await;
    assert_eq!(taken["inflight_refused"], 1.0);
}

/// An `initialize` request.
fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "sluice-e2e", "version": "1"}}})
}

/// The gateway's resident memory, MB.
fn resident_mb(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096 / (1024 * 1024)
}

/// A session that made ten calls whose SSE streams each keep about 3 MB for a resumption (a
/// progress token of 1 MB comes back in three progress notifications); None when its
/// `initialize` was refused (that response).
async fn heavy_session(url: &str) -> Result<Client, sluice_e2e::mcp::Resp> {
    let token = "t".repeat(1 << 20);
    let mut c = Client::new(url);
    let r = c.post(initialize()).await;
    if r.status != 200 {
        return Err(r);
    }
    c.session = Some(r.header("mcp-session-id").expect("a session"));
    for i in 0..10 {
        let r = c
            .post(
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "fx_test_tool_with_progress", "arguments": {},
                "_meta": {"progressToken": token}}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.is_sse());
    }
    Ok(c)
}

/// The memory ceiling: results kept for replay drive the gateway past `max_memory_mb`; new
/// sessions are then answered 503 with `Retry-After`, the kept replay buffers are dropped
/// (least recently used sessions first) and the gateway, never killed, serves new sessions
/// again once back under it. The ceiling is set, by a reload, 24 MB above what the gateway
/// holds after one such session.
#[tokio::test]
async fn past_max_memory_mb_new_sessions_are_503_and_replay_buffers_are_shed() {
    // The allocator gives freed pages back at once (its default waits, and then only when the
    // thread that owns them allocates again): see docs/deployment.md.
    std::env::set_var("MIMALLOC_PURGE_DELAY", "0");
    let settings = json!({"replay_bytes": 8388608, "max_body_bytes": 8388608});
    let (home, gw, url, admin) = gateway("memory", settings.clone());
    let warm = heavy_session(&url).await.expect("a first session");
    drop(warm);
    let held = resident_mb(gw.pid());
    let mut settings = settings;
    settings["admin_token"] = json!(TOKEN);
    settings["max_memory_mb"] = json!(held + 24);
    home.write("sluice.json", &settings.to_string());
    // In force once the gateway samples its memory.
    let started = Instant::now();
    while !reqwest::Client::new()
        .get(format!("{admin}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .contains("sluice_memory_resident_bytes")
    {
        assert!(started.elapsed() < Duration::from_secs(10), "no reload");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Four such sessions at once, twice, while a client tries to start one every 50 ms: while
    // the gateway is past the ceiling (it sheds, and is back under it within a sample or two)
    // it is refused.
    let prober = {
        let url = url.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(60) {
                let r = Client::new(&url).post(initialize()).await;
                if r.status != 200 {
                    return Some(r);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            None
        })
    };
    let mut kept = 0;
    for _ in 0..2 {
        let round: Vec<_> = (0..4).map(|_| heavy_session(&url)).collect();
        for c in futures_util::future::join_all(round).await {
            kept += usize::from(c.is_ok());
        }
        if prober.is_finished() {
            break;
        }
    }
    let peak = resident_mb(gw.pid());
    eprintln!(
        "memory: {held} MB held after one session, ceiling {} MB, {kept} sessions served, {peak} MB after them",
        held + 24,
    );
    let refused = prober.await.unwrap();
    let refused = refused.expect("an initialize refused past the ceiling");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    let body: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(body["error"]["data"]["limit"], "max_memory_mb");
    assert_eq!(body["error"]["data"]["retryAfterMs"], 1000);
    let taken = actions(&admin).await;
    assert!(taken["replay_shed"] > 0.0, "{taken:?}");
    assert!(taken["memory_refused"] >= 1.0, "{taken:?}");
    // Back under the ceiling, new sessions are served again; never killed.
    let started = Instant::now();
    loop {
        match heavy_session(&url).await {
            Ok(_) => break,
            Err(r) => assert!(
                started.elapsed() < Duration::from_secs(20),
                "still refused: {}",
                r.body
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("memory: {} MB at the end", resident_mb(gw.pid()));
    assert!(std::path::Path::new(&format!("/proc/{}", gw.pid())).exists());
}
