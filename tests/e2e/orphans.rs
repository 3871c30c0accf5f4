//! No orphans: a stdio upstream runs in a process group of its own, and stopping it (the
//! gateway's shutdown on SIGTERM, a reload that removes it, a restart through the admin API)
//! ends the whole group, so `sh -c 'sleep … & exec server'` leaves no `sleep` behind.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_sluice, wait_for_port, Proc};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "e2e-admin-token-orphans-0123456789";

/// A `sleep` duration no other process uses (`97.<test pid><n>`), to find it in /proc.
fn unique_sleep() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "97.{}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The `fx` upstream: a shell that starts `sleep <secs>` in the background, then becomes the
/// fixture server.
fn upstream(secs: &str) -> Value {
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    json!({"id": "fx", "command": "sh",
           "args": ["-c", format!("sleep {secs} & exec '{fixture}' --stdio")],
           "expose_all": true})
}

/// A process's state letter and process group (`/proc/<pid>/stat`); `None` once it is gone.
fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesised command name: state, ppid, pgrp, …
    let rest = stat.rsplit_once(") ")?.1;
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    Some((state, f.next()?.parse().ok()?))
}

fn alive(pid: i32) -> bool {
    matches!(stat(pid), Some((s, _)) if s != 'Z' && s != 'X')
}

/// The live processes whose command line is `sleep <secs>`.
fn sleeps(secs: &str) -> Vec<i32> {
    let want = format!("sleep\0{secs}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline.ends_with(want.as_bytes())
            && (cmdline.len() == want.len()
                || cmdline[..cmdline.len() - want.len()].ends_with(b"/"))
            && alive(pid)
        {
            found.push(pid);
        }
    }
    found
}

/// The one `sleep <secs>` (waiting for it to start).
async fn the_sleep(secs: &str) -> i32 {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        match sleeps(secs)[..] {
            [pid] => return pid,
            [] if Instant::now() < end => tokio::time::sleep(Duration::from_millis(50)).await,
            ref other => panic!("sleep {secs}: {other:?}"),
        }
    }
}

/// Wait (bounded) until `pid` is gone; false when it still runs after `within`.
async fn gone(pid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    !alive(pid)
}

/// The server and its `sleep` are gone within `within` (the bound covers the stop's grace and
/// the reaping of the orphaned `sleep` by pid 1), and no `sleep <secs>` is left.
async fn all_gone(server: i32, sleep: i32, secs: &str, within: Duration) {
    assert!(gone(sleep, within).await, "sleep {sleep} still runs");
    assert!(
        gone(server, Duration::from_secs(2)).await,
        "server {server} still runs"
    );
    assert_eq!(sleeps(secs), Vec::<i32>::new());
}

/// Kills what a failed test left running (so a failure does not leave a `sleep` for minutes).
struct Sweep(String);

impl Drop for Sweep {
    fn drop(&mut self) {
        for pid in sleeps(&self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The fixture's pid (its `whoami` tool), which is the pgid of the upstream's group.
async fn fixture_pid(c: &Client) -> i32 {
    let r = c.call_tool("fx_whoami", json!({})).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    text.rsplit("pid=")
        .next()
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {r}"))
}

/// The upstream's `sleep` is in a group of its own, led by the fixture (not the gateway's).
async fn started(c: &Client, secs: &str, gateway: u32) -> (i32, i32) {
    let server = fixture_pid(c).await;
    let sleep = the_sleep(secs).await;
    let (_, pgid) = stat(sleep).expect("sleep runs");
    assert_eq!(
        pgid, server,
        "sleep {sleep} is in the group the server leads"
    );
    let (_, gateway_pgid) = stat(gateway as i32).expect("gateway runs");
    assert_ne!(pgid, gateway_pgid, "the upstream has a group of its own");
    (server, sleep)
}

/// SIGTERM to the gateway; its exit code once it exited (at most 15 s).
fn terminate(gw: &mut Proc) -> Option<i32> {
    let term = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(s) = gw.child.try_wait().unwrap() {
            return s.code();
        }
        assert!(Instant::now() < end, "the gateway did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[tokio::test]
async fn the_gateway_shutting_down_ends_the_upstreams_process_group() {
    let secs = unique_sleep();
    let _sweep = Sweep(secs.clone());
    let home = Home::new("orphans-shutdown");
    home.expose(&json!({"upstreams": [upstream(&secs)]}));
    let (mut gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let (server, sleep) = started(&c, &secs, gw.pid()).await;
    drop(c);

    assert_eq!(terminate(&mut gw), Some(0));
    // Its shutdown waited for the group: nothing of it is left once the gateway is gone.
    all_gone(server, sleep, &secs, Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_reload_that_removes_the_upstream_ends_its_process_group() {
    let secs = unique_sleep();
    let _sweep = Sweep(secs.clone());
    let home = Home::new("orphans-reload");
    home.expose(&json!({"upstreams": [upstream(&secs)]}));
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let (server, sleep) = started(&c, &secs, gw.pid()).await;

    home.expose(&json!({"upstreams": []}));
    all_gone(server, sleep, &secs, Duration::from_secs(15)).await;
    // The gateway serves on, without the upstream.
    assert!(!c.tool_names().await.iter().any(|n| n.starts_with("fx_")));
    assert!(alive(gw.pid() as i32));
}

#[tokio::test]
async fn a_restart_through_the_admin_api_ends_the_old_process_group() {
    let secs = unique_sleep();
    let _sweep = Sweep(secs.clone());
    let home = Home::new("orphans-restart");
    home.write(
        "sluice.json",
        &json!({"admin_token": TOKEN, "restart_initial_ms": 100}).to_string(),
    );
    home.expose(&json!({"upstreams": [upstream(&secs)]}));
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let (mut gw, url) = start_sluice(&["--home", &home.arg(), "--admin", &admin]);
    wait_for_port(port, Duration::from_secs(20));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let (server, sleep) = started(&c, &secs, gw.pid()).await;

    let r = reqwest::Client::new()
        .post(format!("http://{admin}/api/upstreams/restart"))
        .bearer_auth(TOKEN)
        .json(&json!({"id": "fx"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"ok": true, "result": "fx"})
    );
    all_gone(server, sleep, &secs, Duration::from_secs(5)).await;

    // It comes back, with a group of its own again, which the shutdown ends in turn.
    let end = Instant::now() + Duration::from_secs(20);
    let (server2, sleep2) = loop {
        let r = c.call_tool("fx_whoami", json!({})).await;
        if r["result"].is_object() {
            break started(&c, &secs, gw.pid()).await;
        }
        assert!(Instant::now() < end, "fx did not come back: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!((server2, sleep2), (server, sleep));
    drop(c);
    assert_eq!(terminate(&mut gw), Some(0));
    all_gone(server2, sleep2, &secs, Duration::from_secs(2)).await;
}
