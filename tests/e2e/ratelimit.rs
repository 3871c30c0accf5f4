//! The `rate-limit` builtin through the real binary: per-tool and global token buckets in memory
//! (-32029 with `data.limit` and `data.retryAfterMs`, other tools and other methods unaffected),
//! buckets in Redis shared by two gateway processes (and a Redis that goes away fails the hook
//! closed), and `check` naming the field of bad options.
//!
//! The Redis test starts its own `redis-server` (Debian's package, on PATH) on a free port; it
//! fails, never skips, when `redis-server` is not installed.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_sluice, wait_for_port, Proc};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A home with one stdio fixture upstream `fx` (tools `fx_<tool>`) and these hooks.
fn home_with(label: &str, hooks: Value) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write(
        "hooks/hooks.manifest.json",
        &serde_json::to_string_pretty(&json!({"version": 1, "hooks": hooks})).unwrap(),
    );
    home
}

fn rate_limit(options: Value) -> Value {
    json!({"id": "rate", "type": "builtin", "builtin": "rate-limit", "options": options, "enabled": true})
}

async fn gateway(home: &Home) -> (Proc, Client) {
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    (gw, c)
}

async fn echo(c: &Client, n: u64) -> Value {
    c.call_tool("fx_echo", json!({"n": n})).await
}

fn assert_ok(r: &Value, n: u64) {
    assert_eq!(r["result"]["structuredContent"], json!({"n": n}), "{r}");
}

/// Assert `r` is the rate-limit error for `limit`; returns its `retryAfterMs`.
fn assert_limited(r: &Value, limit: &str) -> u64 {
    let e = &r["error"];
    assert_eq!(e["code"], json!(-32029), "{r}");
    assert_eq!(e["message"], json!("Rate limit exceeded"), "{r}");
    assert_eq!(e["data"]["limit"], json!(limit), "{r}");
    let reason = e["data"]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("Rate limit exceeded "), "{r}");
    let wait = e["data"]["retryAfterMs"].as_u64().unwrap_or(0);
    assert!(wait > 0, "{r}");
    wait
}

#[tokio::test]
async fn memory_buckets_limit_per_tool_and_globally() {
    let home = home_with(
        "rl-memory",
        json!([rate_limit(json!({
            "global": {"rate": 1, "per": "hour", "burst": 5},
            "per_tool": {
                "fx_echo": {"rate": 1, "per": "hour", "burst": 2},
                "fx_*": {"rate": 100, "per": "second"}
            }
        }))]),
    );
    let (_gw, c) = gateway(&home).await;
    // fx_echo: a burst of 2, then its own bucket is empty for about an hour.
    assert_ok(&echo(&c, 1).await, 1);
    assert_ok(&echo(&c, 2).await, 2);
    let wait = assert_limited(&echo(&c, 3).await, "per_tool");
    assert!(wait > 3_500_000 && wait <= 3_600_000, "{wait}");
    assert!(
        echo(&c, 3).await["error"]["data"]["reason"]
            .as_str()
            .unwrap()
            .starts_with(
                "Rate limit exceeded for tool \"fx_echo\" (1 request per hour, bursts of up to 2). Retry in "
            )
    );
    // Another tool still works: the refusals took no global token (2 of 5 used so far).
    for _ in 0..3 {
        let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}), "{r}");
    }
    // The global bucket is empty now, for every tool.
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    let wait = assert_limited(&r, "global");
    assert!(wait > 0 && wait <= 3_600_000, "{wait}");
    // Only tools/call is limited by default.
    assert!(c.tool_names().await.contains(&"fx_echo".to_string()));
}

/// `redis-server` on PATH, or a failure saying how to install it.
fn redis_server() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "redis-server is not installed: the rate-limit Redis test needs it. Install \
                 Debian's package (`apt-get install redis-server`; scripts/test does so when run \
                 as root)"
            )
        })
}

/// One Redis command over RESP; the raw answer.
fn redis_command(port: u16, args: &[&str]) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn redis_buckets_are_shared_by_every_replica() {
    let server = redis_server();
    let port = free_port();
    let mut cmd = Command::new(&server);
    cmd.args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null());
    let mut redis = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(20));

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("sluice:e2e:{}:{nanos}:", std::process::id());
    const N: u64 = 4;
    let mut hook = rate_limit(json!({
        "global": {"rate": 1, "per": "hour", "burst": N},
        "redis": format!("redis://127.0.0.1:{port}/0"),
        "key_prefix": prefix
    }));
    hook["timeout"] = json!(2);
    let home = home_with("rl-redis", json!([hook]));
    // Two replicas with the same tree.
    let (_a_gw, a) = gateway(&home).await;
    let (_b_gw, b) = gateway(&home).await;

    // N calls spread across both succeed.
    for n in 0..N {
        let c = if n % 2 == 0 { &a } else { &b };
        assert_ok(&echo(c, n).await, n);
    }
    // The next, on either, is over the shared limit.
    let wait = assert_limited(&echo(&a, N).await, "global");
    assert!(wait > 3_500_000 && wait <= 3_600_000, "{wait}");
    assert_limited(&echo(&b, N).await, "global");

    // The bucket is in Redis, under the prefix, and expires once it would be full again.
    let pttl = redis_command(port, &["PTTL", &format!("{prefix}global")]);
    let pttl: i64 = pttl.trim().trim_start_matches(':').parse().unwrap();
    assert!(pttl > 0 && pttl <= 4 * 3_600_000 + 1000, "{pttl}");

    // Redis gone: the hook fails, and fails closed (on_error refuse), within its timeout.
    let _ = redis.child.kill();
    let _ = redis.child.wait();
    let started = Instant::now();
    let r = echo(&a, 99).await;
    assert_eq!(r["error"]["code"], json!(-32030), "{r}");
    assert!(started.elapsed() < Duration::from_secs(6), "{r}");
}

#[test]
fn check_names_the_field_of_bad_rate_limit_options() {
    let home = home_with(
        "rl-check",
        json!([rate_limit(json!({
            "global": {"rate": 0, "per": "day"},
            "per_tool": {"fx_(": {"rate": 1, "per": "second", "burst": -1}},
            "redis": "http://127.0.0.1:6379"
        }))]),
    );
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let m = home
        .path()
        .join("hooks/hooks.manifest.json")
        .display()
        .to_string();
    for e in [
        format!("error: {m}: hooks[0].options.global.rate: must be a positive number"),
        format!("error: {m}: hooks[0].options.global.per: unknown unit \"day\" (second, minute or hour)"),
        format!("error: {m}: hooks[0].options.per_tool.fx_(: \"fx_(\" is not a valid regex: unclosed group"),
        format!("error: {m}: hooks[0].options.per_tool.fx_(.burst: must be a positive integer"),
        format!("error: {m}: hooks[0].options.redis: \"http://127.0.0.1:6379\" is not a redis:// URL"),
    ] {
        assert!(text.lines().any(|l| l == e), "missing {e:?} in:\n{text}");
    }
}

#[tokio::test]
async fn each_principal_has_its_own_bucket() {
    let home = home_with(
        "rl-principal",
        json!([rate_limit(
            json!({"per_principal": {"rate": 1, "per": "hour", "burst": 2}})
        )]),
    );
    crate::auth::bearer_tokens(&home, &[("alice", "alice-secret"), ("bob", "bob-secret")]);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut alice = Client::with_bearer(&url, "alice-secret");
    alice.initialize(json!({})).await;
    let mut bob = Client::with_bearer(&url, "bob-secret");
    bob.initialize(json!({})).await;
    assert_ok(&echo(&alice, 1).await, 1);
    assert_ok(&echo(&alice, 2).await, 2);
    let limited = echo(&alice, 3).await;
    assert_limited(&limited, "per_principal");
    assert!(
        limited["error"]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("alice"),
        "{limited}"
    );
    // bob's bucket is his own.
    assert_ok(&echo(&bob, 4).await, 4);
    assert_ok(&echo(&bob, 5).await, 5);
    assert_limited(&echo(&bob, 6).await, "per_principal");
}
