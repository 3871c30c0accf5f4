//! The admin page's side of an OAuth upstream, against a real OAuth-protected MCP server (the
//! MCP TypeScript SDK's example `simpleStreamableHttp --oauth --oauth-strict`, with its demo
//! authorization server): `/api/upstreams` shows the sign-in state, `POST
//! /api/upstreams/connect` starts a sign-in, the authorization server sends the browser back to
//! the gateway's `/oauth/callback`, and the upstream's tools are then served — while no
//! client id, code or token of the authorization server ever shows in the admin API.

use crate::interop::{node22, node_dir, node_module_file, run_with_timeout};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_port, Proc};
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TOKEN: &str = "e2e-oauth-admin-token-0123456789";
/// The client secret of the client credentials upstream: it must never show in the admin API.
const CC_SECRET: &str = "cc-secret-never-shown-5f0c2a";

/// The SDK's example server with OAuth on `mcp_port` (`/mcp`) and its demo authorization
/// server on `auth_port` (both read from `MCP_PORT` / `MCP_AUTH_PORT`; it names itself
/// `http://localhost:PORT`, so the upstream URL must say `localhost` for its `resource` to match).
pub(super) fn demo_server(mcp_port: u16, auth_port: u16) -> Proc {
    let script = node_module_file(
        "@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js",
    );
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(script)
        .arg("--oauth")
        .arg("--oauth-strict")
        .env("MCP_PORT", mcp_port.to_string())
        .env("MCP_AUTH_PORT", auth_port.to_string());
    let proc = Proc::spawn(cmd);
    wait_for_port(mcp_port, Duration::from_secs(30));
    wait_for_port(auth_port, Duration::from_secs(30));
    proc
}

/// A fresh vault key from `sluice vault keygen`.
pub(super) fn vault_key() -> String {
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["vault", "keygen"]);
    let run = run_with_timeout(cmd, Duration::from_secs(20));
    assert!(run.success(), "sluice vault keygen: {}", run.stderr);
    run.stdout.trim().to_string()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// Does `s` hold a UUID (8-4-4-4-12 hex digits)? The demo authorization server makes its
/// client ids, codes and access tokens with `randomUUID()`.
fn has_uuid(s: &str) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let b = s.as_bytes();
    let len: usize = GROUPS.iter().sum::<usize>() + 4;
    (0..b.len().saturating_sub(len - 1)).any(|start| {
        let mut i = start;
        GROUPS.iter().enumerate().all(|(n, &g)| {
            let hex = b[i..i + g].iter().all(u8::is_ascii_hexdigit);
            i += g;
            let dash = n == 4 || b[i] == b'-';
            i += 1;
            hex && dash
        })
    })
}

/// Every key and string of `v`, for the searches below.
fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                texts(x, out);
            }
        }
        _ => {}
    }
}

/// No key or string of `v` is a token field, a UUID (the demo server's client id, code or
/// token), `code`, or the client credentials upstream's secret.
fn assert_nothing_secret(v: &Value, code: Option<&str>) {
    let mut all = Vec::new();
    texts(v, &mut all);
    for s in &all {
        for bad in [
            "access_token",
            "refresh_token",
            "client_secret",
            "code_verifier",
        ] {
            assert!(!s.contains(bad), "{bad:?} shows in the admin API: {v}");
        }
        assert!(!has_uuid(s), "a UUID {s:?} shows in the admin API: {v}");
        assert!(!s.contains(CC_SECRET), "the client secret shows: {v}");
        if let Some(c) = code {
            assert!(!s.contains(c), "the authorization code shows: {v}");
        }
    }
}

struct Gateway {
    _proc: Proc,
    mcp: String,
    admin: String,
    http: reqwest::Client,
}

impl Gateway {
    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}{path}", self.admin))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET");
        let status = r.status().as_u16();
        let body = r.text().await.unwrap_or_default();
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).expect("JSON")
    }

    async fn post(&self, path: &str, body: Value, token: &str) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.admin))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The `/api/upstreams` row of `id`.
    async fn row(&self, id: &str) -> Value {
        let d = self.get("/api/upstreams").await;
        d["upstreams"]
            .as_array()
            .expect("upstreams")
            .iter()
            .find(|u| u["id"] == id)
            .unwrap_or_else(|| panic!("no row for {id}: {d}"))
            .clone()
    }

    /// Poll the row of `id` until `ok` holds (at most `limit`); the row then.
    async fn until(&self, id: &str, limit: Duration, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let row = self.row(id).await;
            if ok(&row) {
                return row;
            }
            assert!(
                Instant::now() < deadline,
                "upstream {id} did not get there within {limit:?}: {row}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test]
async fn connect_from_the_admin_api_signs_the_upstream_in() {
    let (mcp_port, auth_port) = (free_port(), free_port());
    let _demo = demo_server(mcp_port, auth_port);
    let demo_url = format!("http://localhost:{mcp_port}/mcp");
    let as_url = format!("http://localhost:{auth_port}");

    let (listen, admin) = (free_port(), free_port());
    let home = Home::new("oauth-admin");
    home.write(
        "sluice.json",
        &json!({
            "listen": format!("127.0.0.1:{listen}"),
            "admin": format!("127.0.0.1:{admin}"),
            "admin_token": TOKEN,
            "vault": {"key": vault_key()},
        })
        .to_string(),
    );
    // Nothing listens at the client credentials upstream's URL: it never gets a token, and
    // its secret must not show.
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "demo", "transport": "http", "url": demo_url, "expose_all": true,
         "oauth": {"mode": "shared"}},
        {"id": "cc", "transport": "http", "url": dead, "expose_all": true,
         "oauth": {"mode": "client_credentials", "client_id": "sluice-e2e", "client_secret": CC_SECRET}},
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"],
         "expose_all": true},
    ]}));
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--home", &home.arg()]).env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
    );
    let proc = Proc::spawn(cmd);
    wait_for_port(listen, Duration::from_secs(30));
    wait_for_port(admin, Duration::from_secs(30));
    let gw = Gateway {
        _proc: proc,
        mcp: format!("http://127.0.0.1:{listen}/mcp"),
        admin: format!("http://127.0.0.1:{admin}"),
        http: reqwest::Client::new(),
    };

    // Before any sign-in: the shared upstream needs a person, and says how without the page.
    let row = gw
        .until("demo", Duration::from_secs(15), |r| {
            r["oauth"]["state"] == "needs_login"
        })
        .await;
    let login = format!("run sluice upstream login demo --home {}", home.arg());
    assert_eq!(
        row["oauth"],
        json!({"mode": "shared", "state": "needs_login", "expires_at": null, "scopes": [],
               "refreshable": false, "reason": login}),
        "{row}"
    );
    assert_eq!(row["status"], "down", "{row}");
    assert_eq!(row["reason"], format!("needs login: {login}"), "{row}");
    let cc = gw.row("cc").await;
    // Refused connections never reach its authorization server: nothing is known yet.
    assert_eq!(
        cc["oauth"],
        json!({"mode": "client_credentials", "state": "unknown", "expires_at": null,
               "scopes": [], "refreshable": false, "reason": null}),
        "{cc}"
    );
    let fx = gw
        .until("fx", Duration::from_secs(15), |r| r["status"] == "up")
        .await;
    assert!(fx.get("oauth").is_none(), "{fx}");
    assert_nothing_secret(&gw.get("/api/upstreams").await, None);

    // What Connect refuses.
    assert_eq!(
        gw.post(
            "/api/upstreams/connect",
            json!({"id": "demo"}),
            "wrong-token"
        )
        .await
        .0,
        401
    );
    let (status, body) = gw
        .post("/api/upstreams/connect", json!({"id": "nope"}), TOKEN)
        .await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "no upstream has the id \"nope\""}))
    );
    let (status, body) = gw
        .post("/api/upstreams/connect", json!({"id": "fx"}), TOKEN)
        .await;
    assert_eq!(
        (status, body),
        (
            409,
            json!({"error": "upstream \"fx\" does not sign in with OAuth (its entry has no \"oauth\")"})
        )
    );
    let (status, body) = gw
        .post("/api/upstreams/connect", json!({"id": "cc"}), TOKEN)
        .await;
    assert_eq!(
        (status, body),
        (
            409,
            json!({"error": "upstream \"cc\" signs in with client credentials: it gets its tokens by itself, no person signs in"})
        )
    );
    let (status, body) = gw.post("/api/upstreams/connect", json!({}), TOKEN).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "\"id\" (a string) is required"}))
    );

    // Connect: the demo authorization server's authorize endpoint, for the gateway's callback.
    let (status, body) = gw
        .post("/api/upstreams/connect", json!({"id": "demo"}), TOKEN)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true, "{body}");
    let url = body["result"]["url"].as_str().expect("a URL").to_string();
    let authorize = format!("{as_url}/authorize?");
    assert!(url.starts_with(&authorize), "{url}");
    let parsed = reqwest::Url::parse(&url).expect("a URL");
    let q: HashMap<String, String> = parsed.query_pairs().into_owned().collect();
    let callback = format!("http://127.0.0.1:{listen}/oauth/callback");
    assert_eq!(q["response_type"], "code", "{url}");
    assert_eq!(q["redirect_uri"], callback, "{url}");
    assert_eq!(q["code_challenge_method"], "S256", "{url}");
    assert_eq!(q["resource"], demo_url, "{url}");
    assert_eq!(q["scope"], "mcp:tools", "{url}");
    assert!(
        has_uuid(&q["client_id"]),
        "registered at the demo server: {url}"
    );
    assert!(!q["state"].is_empty(), "{url}");
    let mut keys: Vec<&str> = q.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "client_id",
            "code_challenge",
            "code_challenge_method",
            "redirect_uri",
            "resource",
            "response_type",
            "scope",
            "state"
        ],
        "nothing else (no secret) in {url}"
    );

    // What a person's browser does: the demo server approves at once and redirects to the
    // gateway's callback with a code.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let r = browser.get(&url).send().await.expect("GET authorize");
    assert_eq!(r.status().as_u16(), 302, "{:?}", r.text().await);
    let location = r.headers()["location"].to_str().expect("text").to_string();
    let back = reqwest::Url::parse(&location).expect("a URL");
    assert!(location.starts_with(&format!("{callback}?")), "{location}");
    let back_q: HashMap<String, String> = back.query_pairs().into_owned().collect();
    assert_eq!(back_q["state"], q["state"], "{location}");
    let code = back_q["code"].clone();
    let r = browser.get(&location).send().await.expect("GET callback");
    let status = r.status().as_u16();
    let page = r.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Sluice is connected to demo. You can close this window."),
        "{page}"
    );
    assert!(!page.contains(&code), "{page}");

    // Connected: the grant's expiry (the demo server's tokens live an hour) and scopes, no
    // refresh token; the upstream comes up.
    let row = gw
        .until("demo", Duration::from_secs(15), |r| {
            r["oauth"]["state"] == "connected" && r["status"] == "up"
        })
        .await;
    let expires_at = row["oauth"]["expires_at"].as_u64().expect("a number");
    let t = now();
    assert!(
        (t + 3500..=t + 3600).contains(&expires_at),
        "{expires_at} vs now {t}: {row}"
    );
    assert_eq!(
        row["oauth"],
        json!({"mode": "shared", "state": "connected", "expires_at": expires_at,
               "scopes": ["mcp:tools"], "refreshable": false, "reason": null}),
        "{row}"
    );
    assert_eq!(row["reason"], Value::Null, "{row}");
    assert_eq!(
        row["server"]["name"], "simple-streamable-http-server",
        "{row}"
    );

    // Its tools through the gateway, called with the token the gateway holds.
    let mut c = Client::new(&gw.mcp);
    c.initialize(json!({})).await;
    let mut names: Vec<String> = c
        .tool_names()
        .await
        .into_iter()
        .filter(|n| n.starts_with("demo_"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "demo_collect-user-info",
            "demo_collect-user-info-task",
            "demo_delay",
            "demo_greet",
            "demo_list-files",
            "demo_multi-greet",
            "demo_start-notification-stream"
        ],
    );
    let reply = c.call_tool("demo_greet", json!({"name": "Sluice"})).await;
    assert_eq!(
        reply["result"]["content"],
        json!([{"type": "text", "text": "Hello, Sluice!"}]),
        "{reply}"
    );

    // Nothing of the grant in the admin API: no token field, no client id, code or token.
    assert_nothing_secret(&gw.get("/api/upstreams").await, Some(&code));
    assert_nothing_secret(&gw.get("/api/overview").await["upstreams"], Some(&code));
}

#[test]
fn uuids_are_found() {
    assert!(has_uuid("Bearer 0f8fad5b-d9cb-469f-a165-70867728950e"));
    assert!(has_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
    assert!(!has_uuid("0f8fad5b-d9cb-469f-a165-70867728950"));
    assert!(!has_uuid("0f8fad5bd9cb469fa16570867728950e"));
    assert!(!has_uuid(""));
}
