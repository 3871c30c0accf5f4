//! Users' own connections to a per-user upstream, seen and ended, with the real binary, the MCP
//! Python SDK client and the in-process OAuth server (`server.rs`): the admin API's Connections
//! view (`GET /api/connections`, `POST /api/connections/revoke`) lists who is connected, until
//! when, with which scopes, and ends one principal's connection (audited; that user's next call
//! asks again, the others' do not); the gateway's `sluice_connections` tool lets a user list,
//! connect (the same consent as a call, even before anyone could list the upstream's tools: a
//! URL elicitation, an `input_required` round for a 2026-07-28 client, -32042 for a client
//! that cannot be asked) and disconnect their own connection, and never another's. The page's view is driven in headless
//! Chromium (`tests/node/admin-connections.mjs`). No answer, log or audit line holds a token
//! the server issued.

use super::server::OAuthServer;
use crate::interop::{node22, node_dir, node_module_file, run_with_timeout};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, workspace_root, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";
const ADMIN_TOKEN: &str = "e2e-connections-admin-token-5d1e";

/// A gateway with the per-user upstream `remote` (the OAuth server's), three principals with
/// static tokens, the audit log on and the admin listener.
struct Gateway {
    server: OAuthServer,
    home: Home,
    url: String,
    admin: String,
    log: PathBuf,
    _proc: Proc,
}

const ENV: [(&str, &str); 1] = [("SLUICE_E2E_VAULT_KEY", VAULT_KEY)];

impl Gateway {
    async fn start(label: &str) -> Gateway {
        let server = OAuthServer::start(3600).await;
        let (port, admin) = (free_port(), free_port());
        let home = Home::new(label);
        home.write(
            "sluice.json",
            &json!({
                "listen": format!("127.0.0.1:{port}"),
                "admin": format!("127.0.0.1:{admin}"),
                "admin_token": ADMIN_TOKEN,
                "vault": {"key": "${env:SLUICE_E2E_VAULT_KEY}"},
                "restart_initial_ms": 100,
                "restart_max_ms": 300,
            })
            .to_string(),
        );
        home.expose(&json!({"version": 1, "upstreams": [
            {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
             "expose_all": true, "oauth": {"mode": "per_user"}}
        ]}));
        crate::auth::bearer_tokens(
            &home,
            &[
                ("alice", "alice-token"),
                ("bob", "bob-token"),
                ("carol", "carol-token"),
            ],
        );
        home.write("logs/log.config.json", r#"{"enabled": true}"#);
        let log = home.path().join("serve.log");
        let proc = super::support::serve(&home, port, &[], &ENV, Some(&log));
        sluice_e2e::wait_for_port(admin, Duration::from_secs(30));
        Gateway {
            server,
            url: format!("http://127.0.0.1:{port}/mcp"),
            admin: format!("http://127.0.0.1:{admin}"),
            home,
            log,
            _proc: proc,
        }
    }

    /// `connections_client.py`: `calls` (`[tool, arguments]` pairs) in one session as `user`.
    async fn session(&self, mode: &str, who: &str, answer: &str, calls: Value) -> Value {
        let script = workspace_root().join("tests/python/connections_client.py");
        let python = std::env::var_os("SLUICE_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("tests/python/.venv/bin/python"));
        let argv = [
            mode.to_string(),
            self.url.clone(),
            format!("{who}-token"),
            who.to_string(),
            answer.to_string(),
            calls.to_string(),
        ];
        let out = tokio::task::spawn_blocking(move || {
            Command::new(python)
                .arg(script)
                .args(argv)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "connections_client.py: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} / {stderr}"))
    }

    /// A Rust client of `who` (no elicitation capability), initialised.
    async fn client(&self, who: &str) -> Client {
        let mut c = Client::with_bearer(&self.url, &format!("{who}-token"));
        c.initialize(json!({})).await;
        c
    }

    /// A client of `who` once the gateway lists `remote_whoami` to it (bounded wait).
    async fn client_once_listed(&self, who: &str) -> Client {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let c = self.client(who).await;
            if c.tool_names().await.iter().any(|n| n == "remote_whoami") {
                return c;
            }
            assert!(Instant::now() < until, "remote_whoami never listed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The admin API: (status, body).
    async fn admin(&self, path: &str, body: Option<Value>, token: &str) -> (u16, Value) {
        let http = reqwest::Client::new();
        let url = format!("{}{path}", self.admin);
        let req = match body {
            Some(b) => http.post(url).json(&b),
            None => http.get(url),
        };
        let resp = req.bearer_auth(token).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// `POST /api/connections/revoke` for `principal`'s connection to `upstream`.
    async fn revoke(&self, upstream: &str, principal: &str, token: &str) -> (u16, Value) {
        let body = json!({"upstream": upstream, "principal": principal});
        self.admin("/api/connections/revoke", Some(body), token)
            .await
    }

    /// The principals of the `oauth.revoke` audit lines, once there are `n` (bounded wait);
    /// each of them names `remote` with the outcome `ok`.
    async fn revoked(&self, n: usize) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let lines = self.audited("oauth.revoke").await;
            if lines.len() >= n {
                assert!(
                    lines.iter().all(|(_, u, o)| u == "remote" && o == "ok"),
                    "{lines:?}"
                );
                return lines.into_iter().map(|(p, _, _)| p).collect();
            }
            assert!(
                Instant::now() < until,
                "{} oauth.revoke audit lines, not {n}",
                lines.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The principals the admin API lists as connected to `remote`.
    async fn connected(&self) -> Vec<String> {
        let (status, body) = self.admin("/api/connections", None, ADMIN_TOKEN).await;
        assert_eq!(status, 200, "{body}");
        self.assert_no_secret(&body.to_string(), "GET /api/connections");
        let rows = body["upstreams"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{body}");
        assert_eq!(rows[0]["upstream"], "remote", "{body}");
        rows[0]["principals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["principal"].as_str().unwrap().to_string())
            .collect()
    }

    /// The audit lines of `method`, as (principal, upstream, outcome).
    async fn audited(&self, method: &str) -> Vec<(String, String, String)> {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        self.home
            .audit_lines(usize::MAX)
            .await
            .iter()
            .filter(|l| l["method"] == method)
            .map(|l| (s(&l["principal"]), s(&l["upstream"]), s(&l["outcome"])))
            .collect()
    }

    /// No token, code or secret the OAuth server issued or received is in `text`.
    fn assert_no_secret(&self, text: &str, what: &str) {
        for secret in self.server.ledger.lock().unwrap().secrets() {
            assert!(!text.contains(&secret), "a secret reached {what}");
        }
    }

    /// Nor in the gateway's log and audit log.
    fn assert_no_secret_in_logs(&self) {
        let log = std::fs::read_to_string(&self.log).unwrap();
        self.assert_no_secret(&log, "the log");
        let audit = std::fs::read_to_string(self.home.path().join("logs/audit.jsonl")).unwrap();
        self.assert_no_secret(&audit, "the audit log");
    }
}

/// A call of `sluice_connections` with `args`.
async fn connections(c: &Client, args: Value) -> Value {
    c.call_tool("sluice_connections", args).await
}

/// The `sub` a `remote_whoami` result says served it.
fn sub_of(result: &Value) -> &str {
    result["text"][1].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_admin_page_lists_and_revokes_a_users_connection() {
    let gw = Gateway::start("oauth-connections-admin").await;
    // The operator's login lists the upstream's tools for everyone.
    super::support::login(&gw.home, "remote", &ENV).await;
    gw.client_once_listed("alice").await;
    assert!(gw.connected().await.is_empty());

    // alice and bob connect through their first call.
    let whoami = json!([["remote_whoami", {}]]);
    for who in ["alice", "bob"] {
        let s = gw.session("legacy", who, "browse", whoami.clone()).await;
        assert_eq!(s["asked"].as_array().unwrap().len(), 1, "{s}");
        assert_eq!(sub_of(&s["results"][0]), format!("sub={who}"), "{s}");
    }

    // The view: per upstream, who is connected, until when, with which scopes.
    assert_eq!(gw.connected().await, ["token:alice", "token:bob"]);
    let (_, body) = gw.admin("/api/connections", None, ADMIN_TOKEN).await;
    let alice = &body["upstreams"][0]["principals"][0];
    assert!(alice["expires_at"].as_u64().unwrap() > 0, "{body}");
    assert!(alice["scopes"].is_array(), "{body}");
    assert!(alice["refreshable"].is_boolean(), "{body}");
    assert_eq!(
        alice.as_object().unwrap().len(),
        4,
        "principal, expiry, scopes, refreshable and nothing else: {body}"
    );

    // The token is needed; unknown upstreams and principals are 404.
    let (status, _) = gw.admin("/api/connections", None, "wrong").await;
    assert_eq!(status, 401);
    let (status, _) = gw.revoke("remote", "token:alice", "wrong").await;
    assert_eq!(status, 401);
    let (status, body) = gw.revoke("nope", "token:alice", ADMIN_TOKEN).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(gw.connected().await, ["token:alice", "token:bob"]);

    // Revoke alice's: gone from the view, audited, and bob's stays.
    let (status, body) = gw.revoke("remote", "token:alice", ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["principal"], "token:alice", "{body}");
    gw.assert_no_secret(&body.to_string(), "the revoke's answer");
    assert_eq!(gw.connected().await, ["token:bob"]);
    let (status, body) = gw.revoke("remote", "token:alice", ADMIN_TOKEN).await;
    assert_eq!(status, 404, "revoked once: {body}");
    assert_eq!(gw.revoked(1).await, ["token:alice"]);

    // alice's next call asks her again (she declines); bob's goes on as him, unasked.
    let s = gw
        .session("legacy", "alice", "decline", whoami.clone())
        .await;
    assert_eq!(s["asked"].as_array().unwrap().len(), 1, "asked again: {s}");
    let e = &s["results"][0]["error"];
    assert_eq!(e["code"], -32000, "{s}");
    assert!(e["message"].as_str().unwrap().contains("declined"), "{s}");
    let s = gw.session("nocap", "bob", "browse", whoami).await;
    assert_eq!(sub_of(&s["results"][0]), "sub=bob", "{s}");

    // The page's view, in Chromium: bob's connection listed, revoked with its button.
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: run scripts/test (it installs Debian's chromium as root)"
    );
    node_module_file("playwright-core/package.json");
    let shots = workspace_root().join("target/admin-screenshots");
    let mut cmd = Command::new(node22());
    cmd.arg(node_dir().join("admin-connections.mjs"))
        .current_dir(node_dir())
        .env("ADMIN_URL", &gw.admin)
        .env("TOKEN", ADMIN_TOKEN)
        .env("UPSTREAM", "remote")
        .env("PRINCIPAL", "token:bob")
        .env("SHOTS", &shots);
    let run = tokio::task::spawn_blocking(move || run_with_timeout(cmd, Duration::from_secs(120)))
        .await
        .unwrap();
    assert!(
        run.success(),
        "admin-connections.mjs: {}\n{}\n{}",
        run.describe(),
        run.stdout,
        run.stderr
    );
    assert!(gw.connected().await.is_empty());
    assert_eq!(gw.revoked(2).await, ["token:alice", "token:bob"]);
    gw.assert_no_secret_in_logs();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_a_user_lists_connects_and_disconnects_only_their_own() {
    let gw = Gateway::start("oauth-connections-tool").await;
    // No operator login: nobody can list the upstream's tools yet, and the tool is there.
    let bob = gw.client("bob").await;
    let names = bob.tool_names().await;
    assert!(names.iter().any(|n| n == "sluice_connections"), "{names:?}");
    assert!(!names.iter().any(|n| n == "remote_whoami"), "{names:?}");

    // alice lists (not connected), connects through the tool (asked once, with the link),
    // lists again (connected, until when).
    let list = json!({"action": "list"});
    let s = gw
        .session(
            "legacy",
            "alice",
            "browse",
            json!([
                ["sluice_connections", list],
                ["sluice_connections", {"action": "connect", "upstream": "remote"}],
                ["sluice_connections", list],
                ["sluice_connections", {"action": "connect", "upstream": "remote"}],
            ]),
        )
        .await;
    let r = &s["results"];
    assert_eq!(
        r[0]["structured"],
        json!({"connections": [{"upstream": "remote", "connected": false}]}),
        "{s}"
    );
    let asked = s["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "asked once: {s}");
    assert_eq!(asked[0]["mode"], "url", "{s}");
    assert_eq!(asked[0]["page"]["status"], 200, "{s}");
    assert_eq!(r[1]["structured"]["upstream"], "remote", "{s}");
    assert_eq!(r[1]["structured"]["connected"], true, "{s}");
    let now = &r[2]["structured"]["connections"][0];
    assert_eq!(now["connected"], true, "{s}");
    assert!(now["expires_at"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(
        r[3]["structured"]["connected"], true,
        "already connected: {s}"
    );
    gw.assert_no_secret(&s.to_string(), "the tool's answers");

    // Her connection brought the upstream up; her calls are served as her.
    let alice = gw.client_once_listed("alice").await;
    let served = alice.call_tool("remote_whoami", json!({})).await;
    assert!(served.to_string().contains("sub=alice"), "{served}");

    // bob sees only his own, and cannot end hers: the tool takes no principal, and his
    // disconnect ends nothing of hers.
    let seen = connections(&bob, list.clone()).await;
    assert_eq!(
        seen["result"]["structuredContent"],
        json!({"connections": [{"upstream": "remote", "connected": false}]}),
        "{seen}"
    );
    assert!(!seen.to_string().contains("alice"), "{seen}");
    let e = connections(
        &bob,
        json!({"action": "disconnect", "upstream": "remote", "principal": "token:alice"}),
    )
    .await;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let e = connections(&bob, json!({"action": "disconnect", "upstream": "remote"})).await;
    assert_eq!(
        e["result"]["structuredContent"]["disconnected"], false,
        "{e}"
    );
    assert_eq!(gw.connected().await, ["token:alice"]);
    let mine = connections(&alice, list.clone()).await;
    assert_eq!(
        mine["result"]["structuredContent"]["connections"][0]["connected"], true,
        "{mine}"
    );
    // bob's client cannot be asked: connect answers -32042 with his own link.
    let e = connections(&bob, json!({"action": "connect", "upstream": "remote"})).await;
    assert_eq!(e["error"]["code"], -32042, "{e}");
    let link = e["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap();
    assert!(link.contains("/oauth/connect/"), "{e}");

    // carol, with a 2026-07-28 client, connects through the tool in an input_required round.
    let connect = json!({"action": "connect", "upstream": "remote"});
    let s = gw
        .session(
            "auto",
            "carol",
            "browse",
            json!([["sluice_connections", connect]]),
        )
        .await;
    assert_eq!(s["asked"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(s["results"][0]["structured"]["connected"], true, "{s}");
    assert_eq!(gw.connected().await, ["token:alice", "token:carol"]);

    // alice disconnects: audited, and her next call asks again.
    let done = connections(
        &alice,
        json!({"action": "disconnect", "upstream": "remote"}),
    )
    .await;
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"upstream": "remote", "disconnected": true, "revoked_at_server": false}),
        "{done}"
    );
    assert_eq!(gw.connected().await, ["token:carol"]);
    assert_eq!(gw.revoked(1).await, ["token:alice"]);
    let again = alice.call_tool("remote_whoami", json!({})).await;
    assert_eq!(again["error"]["code"], -32042, "asked again: {again}");
    gw.assert_no_secret_in_logs();
}
