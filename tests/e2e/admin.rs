//! The admin listener: the token, the JSON management API (each operation changing what a
//! connected MCP client sees), `/metrics` after known traffic, `/healthz` and `/readyz`, and the
//! web page driven in headless Chromium (`tests/node/admin-browser.mjs`).

use crate::interop::{node22, node_dir, node_module_file, run_with_timeout};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_sluice, wait_for_port, workspace_root};
use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "e2e-admin-token-0123456789";

/// A gateway with its admin listener.
struct Admin {
    _proc: sluice_e2e::Proc,
    mcp: String,
    url: String,
    http: reqwest::Client,
}

impl Admin {
    /// `sluice serve --home` on the tree, the admin listener on a free port with [`TOKEN`].
    fn start(home: &Home) -> Admin {
        if !home.path().join("sluice.json").exists() {
            home.write("sluice.json", &json!({"admin_token": TOKEN}).to_string());
        }
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let (proc, mcp) = start_sluice(&["--home", &home.arg(), "--admin", &addr]);
        wait_for_port(port, Duration::from_secs(20));
        Admin {
            _proc: proc,
            mcp,
            url: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    async fn get_with(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut rb = self.http.get(format!("{}{path}", self.url));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        let r = rb.send().await.expect("GET");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.get_with(path, Some(TOKEN)).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).expect("JSON")
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.post(path, body.clone()).await;
        assert_eq!(status, 200, "POST {path} {body}: {v}");
        v
    }
}

fn fixture_upstream(id: &str) -> Value {
    json!({"id": id, "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true})
}

/// Poll the client's tools/list until `check` holds (5 s).
async fn until_tools(c: &Client, what: &str, check: impl Fn(&[String]) -> bool) {
    let mut names = Vec::new();
    for _ in 0..50 {
        names = c.tool_names().await;
        if check(&names) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: tools/list is {names:?}");
}

#[tokio::test]
async fn the_admin_api_needs_the_token() {
    let home = Home::new("admin-token");
    home.expose(&json!({"version": 1, "upstreams": [fixture_upstream("fx")]}));
    let a = Admin::start(&home);
    assert_eq!(a.get_with("/api/overview", None).await.0, 401);
    assert_eq!(a.get_with("/api/overview", Some("wrong")).await.0, 401);
    assert_eq!(a.get_with("/metrics", None).await.0, 401);
    let (status, body) = a
        .http
        .post(format!("{}/api/tools/set", a.url))
        .json(&json!({"upstream": "fx", "tool": "echo", "enabled": false}))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!((status, body), (401, ()));
    assert_eq!(a.get("/api/overview").await["sessions"], json!(0));
    assert_eq!(
        a.get_with("/healthz", None).await,
        (200, r#"{"status":"ok"}"#.into())
    );
    let (status, page) = a.get_with("/", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>Sluice admin</title>"), "{page}");
    assert!(a.get_with("/app.js", None).await.1.contains("Bearer"));
    assert_eq!(a.get_with("/app.css", None).await.0, 200);
    assert_eq!(a.get_with("/nope", None).await.0, 404);

    // A non-loopback admin address needs a configured token.
    let bare = Home::new("admin-bare");
    let out = Command::new(bin("sluice"))
        .args(["serve", "--home", &bare.arg(), "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--admin")
        .arg(format!("0.0.0.0:{}", free_port()))
        .env_remove("SLUICE_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("refusing to serve the admin API on 0.0.0.0:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without a configured token one is generated and printed, and it works.
    let port = free_port();
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--home", &bare.arg(), "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--admin")
        .arg(format!("127.0.0.1:{port}"))
        .env_remove("SLUICE_ADMIN_TOKEN")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = sluice_e2e::Proc {
        child: cmd.spawn().unwrap(),
    };
    let stderr = child.child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Keep reading stderr to the end (the gateway must not write to a closed pipe).
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if l.contains("#token=") {
                let _ = tx.send(l);
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the token is printed");
    let token = line.split("#token=").nth(1).unwrap().trim().to_string();
    assert_eq!(token.len(), 64, "{line}");
    wait_for_port(port, Duration::from_secs(10));
    let r = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/overview"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["editable"], json!(true));
}

#[tokio::test]
async fn management_through_the_api_changes_what_clients_see() {
    let home = Home::new("admin-manage");
    home.expose(&json!({"version": 1, "upstreams": [fixture_upstream("fx")]}));
    let a = Admin::start(&home);
    let mut c = Client::new(&a.mcp);
    c.initialize(json!({})).await;
    until_tools(&c, "start", |n| n.contains(&"fx_echo".to_string())).await;

    // Disable an upstream tool.
    let rows = a.get("/api/tools").await;
    let echo = rows["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx_echo")
        .unwrap();
    assert_eq!(
        (echo["listed"].clone(), echo["upstream"].clone()),
        (json!(true), json!("fx"))
    );
    a.ok(
        "/api/tools/set",
        json!({"upstream": "fx", "tool": "echo", "enabled": false}),
    )
    .await;
    until_tools(&c, "disabled", |n| !n.contains(&"fx_echo".to_string())).await;

    // Rename one; an invalid name is refused with the field and nothing is written.
    a.ok(
        "/api/tools/set",
        json!({"upstream": "fx", "tool": "add", "as": "plus"}),
    )
    .await;
    until_tools(&c, "renamed", |n| {
        n.contains(&"plus".to_string()) && !n.contains(&"fx_add".to_string())
    })
    .await;
    let before = std::fs::read_to_string(home.path().join("mcp/expose.json")).unwrap();
    let (status, v) = a
        .post(
            "/api/tools/set",
            json!({"upstream": "fx", "tool": "add", "as": "not a name"}),
        )
        .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["errors"][0]["field"], json!("expose[1].as"), "{v}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("mcp/expose.json")).unwrap(),
        before
    );
    let (status, v) = a
        .post(
            "/api/tools/set",
            json!({"upstream": "nope", "tool": "x", "enabled": true}),
        )
        .await;
    assert_eq!(
        (status, v["error"].clone()),
        (400, json!("no upstream has the id \"nope\""))
    );

    // Hooks: add (off), enable, try, and the client is refused.
    a.ok(
        "/api/hooks/add",
        json!({"id": "no-plus", "event": "PreToolUse", "matcher": "plus", "command": "echo no plus >&2; exit 2"}),
    )
    .await;
    let hooks = a.get("/api/hooks").await;
    assert_eq!(
        (
            hooks["hooks"][0]["id"].clone(),
            hooks["hooks"][0]["enabled"].clone()
        ),
        (json!("no-plus"), json!(false))
    );
    let tried = a
        .ok(
            "/api/hooks/try",
            json!({"id": "no-plus", "tool": "plus", "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    assert_eq!(
        (tried["decision"].clone(), tried["reason"].clone()),
        (json!("refuse"), json!("no plus"))
    );
    let tried = a
        .ok(
            "/api/hooks/try",
            json!({"id": "no-plus", "tool": "fx_whoami"}),
        )
        .await;
    assert_eq!(tried["decision"], json!("not selected"));
    assert_eq!(
        c.call_tool("plus", json!({"a": 1, "b": 2})).await["result"]["structuredContent"]["sum"],
        json!(3)
    );
    a.ok("/api/hooks/set", json!({"id": "no-plus", "enabled": true}))
        .await;
    let r = c.call_tool("plus", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["error"]["code"], json!(-32030), "{r}");
    a.ok(
        "/api/hooks/update",
        json!({"id": "no-plus", "fields": {"matcher": "fx_echo"}}),
    )
    .await;
    let r = c.call_tool("plus", json!({"a": 1, "b": 2})).await;
    assert!(r.get("result").is_some(), "{r}");
    let (status, v) = a
        .post(
            "/api/hooks/update",
            json!({"id": "no-plus", "fields": {"on_error": "maybe"}}),
        )
        .await;
    assert_eq!(status, 422, "{v}");

    // Upstreams: add one live, disable it.
    a.ok("/api/upstreams/add", fixture_upstream("fy")).await;
    until_tools(&c, "added", |n| n.contains(&"fy_echo".to_string())).await;
    let ups = a.get("/api/upstreams").await;
    assert_eq!(ups["upstreams"][1]["id"], json!("fy"));
    a.ok(
        "/api/upstreams/set",
        json!({"id": "fy", "fields": {"enabled": false}}),
    )
    .await;
    until_tools(&c, "upstream disabled", |n| {
        !n.iter().any(|t| t.starts_with("fy_"))
    })
    .await;

    // The audit log: on, searched by tool and outcome.
    a.ok("/api/log/set", json!({"enabled": true})).await;
    let _ = c.call_tool("fx_whoami", json!({})).await;
    let _ = c.call_tool("plus", json!({"a": 2, "b": 2})).await;
    let mut found = Value::Null;
    for _ in 0..50 {
        found = a.get("/api/logs?tool=plus&outcome=ok").await;
        if found["events"].as_array().is_some_and(|e| !e.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = found["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{found}");
    assert_eq!(events[0]["tool"], json!("plus"));
    assert_eq!(
        a.get("/api/logs?outcome=refused").await["events"],
        json!([])
    );

    // A gateway without a tree (the built-in demo) cannot be edited.
    let port = free_port();
    let (_demo, _) = start_sluice(&["--admin", &format!("127.0.0.1:{port}")]);
    wait_for_port(port, Duration::from_secs(10));
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/log/set"))
        .header("authorization", "Bearer none")
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

/// Parse Prometheus text into `name{labels}` → value.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (key, value) = line.rsplit_once(' ').expect("NAME VALUE");
        out.insert(key.to_string(), value.parse::<f64>().expect("a number"));
    }
    out
}

#[tokio::test]
async fn metrics_count_known_traffic() {
    let home = Home::new("admin-metrics");
    home.expose(&json!({"version": 1, "upstreams": [fixture_upstream("fx")]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "watch", "event": "PreToolUse", "command": "exit 0", "enabled": true},
            {"id": "no-add", "event": "PreToolUse", "matcher": "fx_add", "command": "echo no >&2; exit 2", "enabled": true},
        ]})
        .to_string(),
    );
    let a = Admin::start(&home);
    let mut c = Client::new(&a.mcp);
    c.initialize(json!({})).await;
    for i in 0..3 {
        let r = c.call_tool("fx_echo", json!({"i": i})).await;
        assert!(r.get("result").is_some(), "{r}");
    }
    for _ in 0..2 {
        let r = c.call_tool("fx_add", json!({"a": 1, "b": 1})).await;
        assert_eq!(r["error"]["code"], json!(-32030));
    }
    let r = c.call_tool("nope", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32602));

    let mut m = HashMap::new();
    for _ in 0..50 {
        let (status, text) = a.get_with("/metrics", Some(TOKEN)).await;
        assert_eq!(status, 200);
        m = parse_metrics(&text);
        let total: f64 = m
            .iter()
            .filter(|(k, _)| k.starts_with("sluice_calls_total{"))
            .map(|(_, v)| v)
            .sum();
        if total >= 6.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let get = |k: &str| {
        m.get(k)
            .copied()
            .unwrap_or_else(|| panic!("{k} missing: {m:#?}"))
    };
    assert_eq!(
        get(r#"sluice_calls_total{method="tools/call",upstream="fx",tool="fx_echo",outcome="ok"}"#),
        3.0
    );
    assert_eq!(
        get(
            r#"sluice_calls_total{method="tools/call",upstream="fx",tool="fx_add",outcome="refused"}"#
        ),
        2.0
    );
    assert_eq!(
        get(r#"sluice_calls_total{method="tools/call",upstream="",tool="nope",outcome="error"}"#),
        1.0
    );
    // OpenTelemetry's MCP duration histograms, in their Prometheus form, beside those names.
    let server = r#"mcp_method_name="tools/call",gen_ai_operation_name="execute_tool",gen_ai_tool_name="fx_echo",mcp_protocol_version="2025-11-25",network_transport="tcp",network_protocol_name="http""#;
    assert_eq!(
        get(&format!(
            "mcp_server_operation_duration_seconds_count{{{server}}}"
        )),
        3.0
    );
    assert_eq!(
        get(&format!(
            r#"mcp_server_operation_duration_seconds_bucket{{{server},le="300"}}"#
        )),
        3.0
    );
    assert_eq!(
        get(
            r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_operation_name="execute_tool",gen_ai_tool_name="nope",error_type="-32602",rpc_response_status_code="-32602",mcp_protocol_version="2025-11-25",network_transport="tcp",network_protocol_name="http"}"#
        ),
        1.0
    );
    // The calls upstream (a stdio fixture): one series per protocol version it speaks.
    let client: f64 = m
        .iter()
        .filter(|(k, _)| {
            k.starts_with(r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_operation_name="execute_tool",gen_ai_tool_name="echo","#)
                && k.ends_with(r#"network_transport="pipe"}"#)
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(client, 3.0, "{m:#?}");
    assert_eq!(
        m.keys()
            .filter(|k| k.starts_with("sluice_calls_total{"))
            .count(),
        3
    );
    assert_eq!(
        get(r#"sluice_call_errors_total{upstream="fx",tool="fx_add"}"#),
        2.0
    );
    assert_eq!(
        get(r#"sluice_call_errors_total{upstream="",tool="nope"}"#),
        1.0
    );
    assert_eq!(
        get(r#"sluice_call_duration_seconds_count{upstream="fx",tool="fx_echo"}"#),
        3.0
    );
    assert_eq!(
        get(r#"sluice_call_duration_seconds_bucket{upstream="fx",tool="fx_echo",le="+Inf"}"#),
        3.0
    );
    assert!(get(r#"sluice_call_duration_seconds_sum{upstream="fx",tool="fx_echo"}"#) > 0.0);
    // "watch" sees every call (6: the unknown tool too); "no-add" refuses the 2 fx_add calls.
    assert_eq!(
        get(r#"sluice_hook_decisions_total{hook="watch",phase="request",decision="pass"}"#),
        6.0
    );
    assert_eq!(
        get(r#"sluice_hook_decisions_total{hook="no-add",phase="request",decision="refuse"}"#),
        2.0
    );
    assert_eq!(
        get(r#"sluice_hook_duration_seconds_count{hook="no-add"}"#),
        2.0
    );
    assert_eq!(get("sluice_sessions_active"), 1.0);
    assert_eq!(get(r#"sluice_upstream_up{upstream="fx"}"#), 1.0);
    assert_eq!(get(r#"sluice_upstream_restarts_total{upstream="fx"}"#), 0.0);
    assert_eq!(get(r#"sluice_reloads_total{result="failed"}"#), 0.0);

    // The overview agrees.
    let o = a.get("/api/overview").await;
    assert_eq!(
        (
            o["traffic"]["calls_total"].clone(),
            o["traffic"]["errors_total"].clone()
        ),
        (json!(6), json!(3))
    );
    let recent = a.get("/api/traffic/recent").await;
    assert_eq!(recent["events"].as_array().unwrap().len(), 6);

    // A rejected edit is counted.
    home.write("mcp/expose.json", "{ not json");
    let mut failed = 0.0;
    for _ in 0..50 {
        let text = a.get_with("/metrics", Some(TOKEN)).await.1;
        failed = parse_metrics(&text)[r#"sluice_reloads_total{result="failed"}"#];
        if failed > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(failed, 1.0);
}

#[tokio::test]
async fn readyz_reports_a_dead_upstream() {
    let home = Home::new("admin-ready");
    home.expose(&json!({"version": 1, "upstreams": [fixture_upstream("fx")]}));
    home.write(
        "sluice.json",
        &json!({"admin_token": TOKEN, "restart_initial_ms": 60000, "restart_max_ms": 60000})
            .to_string(),
    );
    let a = Admin::start(&home);
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = a.get_with("/readyz", None).await;
        if last.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.0, 200, "ready once fx is up: {}", last.1);
    let mut c = Client::new(&a.mcp);
    c.initialize(json!({})).await;
    let _ = c
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "fx_crash", "arguments": {}}}))
        .await;
    for _ in 0..50 {
        last = a.get_with("/readyz", None).await;
        if last.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last.0, 503, "{}", last.1);
    let v: Value = serde_json::from_str(&last.1).unwrap();
    assert_eq!(v["ready"], json!(false));
    assert_eq!(v["not_ready"][0]["upstream"], json!("fx"));
    assert_eq!(v["not_ready"][0]["status"], json!("down"));
    let ups = a.get("/api/upstreams").await;
    let fx = &ups["upstreams"][0];
    assert_eq!(
        (fx["status"].clone(), fx["restarts"].clone()),
        (json!("down"), json!(1))
    );
    assert!(
        fx["stderr"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("crash tool called")),
        "{fx}"
    );
    let text = a.get_with("/metrics", Some(TOKEN)).await.1;
    let m = parse_metrics(&text);
    assert_eq!(m[r#"sluice_upstream_up{upstream="fx"}"#], 0.0);
    assert_eq!(m[r#"sluice_upstream_restarts_total{upstream="fx"}"#], 1.0);

    // Replaced by an edit of its spec, the upstream starts at once and keeps its restart count.
    let mut fx2 = fixture_upstream("fx");
    fx2["args"] = json!(["--stdio", "--name", "fx2"]);
    home.expose(&json!({"version": 1, "upstreams": [fx2]}));
    let mut fx = Value::Null;
    for _ in 0..100 {
        fx = a.get("/api/upstreams").await["upstreams"][0].clone();
        if fx["status"] == json!("up") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        (fx["status"].clone(), fx["restarts"].clone()),
        (json!("up"), json!(1)),
        "{fx}"
    );
    let m = parse_metrics(&a.get_with("/metrics", Some(TOKEN)).await.1);
    assert_eq!(m[r#"sluice_upstream_restarts_total{upstream="fx"}"#], 1.0);
}

#[test]
fn the_page_in_chromium() {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: run scripts/test (it installs Debian's chromium as root)"
    );
    let script = node_dir().join("admin-browser.mjs");
    node_module_file("playwright-core/package.json");
    let home = Home::new("admin-browser");
    // A curated tool whose approved definition is not the upstream's: the page flags the change.
    home.expose(&json!({"version": 1, "upstreams": [fixture_upstream("fx")],
        "expose": [{"upstream": "fx", "tool": "test_simple_text", "as": "simple_text"}]}));
    home.write(
        "mcp/pins.json",
        &json!({"version": 1, "upstreams": {"fx": {"tools": {"test_simple_text": {
            "digest": format!("sha256:{}", "0".repeat(64)),
            "definition": {"name": "test_simple_text", "description": "An older description."}}}}}})
        .to_string(),
    );
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "watch-all", "event": "PreToolUse", "command": "exit 0", "enabled": true,
             "description": "Sees every tool call."},
            {"id": "no-add", "event": "PreToolUse", "matcher": "fx_add", "command": "echo no adding >&2; exit 2", "enabled": true,
             "description": "Refuses fx_add."},
        ]})
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let a = Admin::start(&home);
    let shots = workspace_root().join("target/admin-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let mut cmd = Command::new(node22());
    cmd.arg(&script)
        .current_dir(node_dir())
        .env("ADMIN_URL", &a.url)
        .env("TOKEN", TOKEN)
        .env("MCP_URL", &a.mcp)
        .env("SHOTS", &shots);
    let run = run_with_timeout(cmd, Duration::from_secs(150));
    assert!(
        run.success(),
        "admin-browser.mjs: {}\n{}\n{}",
        run.describe(),
        run.stdout,
        run.stderr
    );
    for page in ["overview", "tools", "hooks", "upstreams", "traffic", "logs"] {
        let p = shots.join(format!("{page}.png"));
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "{} is missing or empty", p.display());
    }
}
