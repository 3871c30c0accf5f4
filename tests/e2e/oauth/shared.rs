//! A shared OAuth identity end to end, against the in-process OAuth-protected server
//! (`server.rs`): the upstream is down with "needs login" until an operator runs `sluice
//! upstream login`; then tools list and call; an access token refused by the server is
//! refreshed without the call failing, and one near its expiry is refreshed before it expires;
//! a restarted gateway keeps the grant; a revoked grant turns into "needs login" with the
//! reason logged. Then every secret the server handed out or received is searched for in every
//! output of the gateway: its log, the login command's output, the audit log, the exported
//! spans, the admin API and metrics, the hook payloads, the replies, `sluice check`, and the
//! vault file (sealed).

use super::server::OAuthServer;
use super::support::{listed, login, text_of};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, Proc};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ADMIN_TOKEN: &str = "admin-token-0123456789";
const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

/// Spans received by an OTLP/HTTP receiver (the raw bodies).
async fn otlp_receiver(bodies: Arc<Mutex<Vec<String>>>) -> String {
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: String| {
            let bodies = bodies.clone();
            async move {
                bodies.lock().unwrap().push(body);
                axum::Json(json!({}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn tree(server: &OAuthServer, port: u16, admin: u16, otlp: &str) -> Home {
    let home = Home::new("oauth-shared");
    home.write(
        "sluice.json",
        &json!({
            "listen": format!("127.0.0.1:{port}"),
            "admin": format!("127.0.0.1:{admin}"),
            "admin_token": ADMIN_TOKEN,
            "vault": {"key": "${env:SLUICE_E2E_VAULT_KEY}"},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
            "telemetry": {"otlp_endpoint": otlp, "service_name": "sluice-oauth-e2e"},
        })
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "shared"}}
    ]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "keep-requests", "event": "Request", "type": "command",
             "command": "cat >> \"${HOOKS_DIR}/payloads.jsonl\"; echo >> \"${HOOKS_DIR}/payloads.jsonl\"", "enabled": true},
            {"id": "keep-responses", "event": "Response", "type": "command",
             "command": "cat >> \"${HOOKS_DIR}/payloads.jsonl\"; echo >> \"${HOOKS_DIR}/payloads.jsonl\"", "enabled": true}
        ]})
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    home
}

fn serve(home: &Home, port: u16, log: &Path) -> Proc {
    super::support::serve(
        home,
        port,
        &[],
        &[("SLUICE_E2E_VAULT_KEY", VAULT_KEY)],
        Some(log),
    )
}

/// `remote_whoami` called once listed: the session and the reply.
async fn call_when_listed(url: &str) -> (Client, Value) {
    let c = listed(url, "remote_whoami").await;
    let r = c.call_tool("remote_whoami", json!({})).await;
    (c, r)
}

/// Stop the gateway as an operator would (SIGTERM, then wait: its log is written out).
fn stop(mut gw: Proc) {
    let _ = Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status();
    let until = Instant::now() + Duration::from_secs(15);
    while gw.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < until,
            "the gateway did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The log's last lines above DEBUG, for a failure's message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains(" DEBUG ")).collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_identity_signs_in_once_refreshes_survives_restarts_and_leaks_nothing() {
    let server = OAuthServer::start(3600).await;
    let spans = Arc::new(Mutex::new(Vec::new()));
    let otlp = otlp_receiver(spans.clone()).await;
    let (port, admin) = (free_port(), free_port());
    let home = tree(&server, port, admin, &otlp);
    let log = home.path().join("serve.log");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut outputs: Vec<(String, String)> = Vec::new();

    // Not signed in: the upstream is down with the reason, everything else works.
    let gw = serve(&home, port, &log);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let until = Instant::now() + Duration::from_secs(10);
    let before = loop {
        let r = c.call_tool("remote_whoami", json!({})).await;
        if r["error"]["code"] == -32000 || Instant::now() > until {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(before["error"]["code"], -32000, "{before}");
    assert_eq!(
        before["error"]["message"],
        "Upstream 'remote' is unavailable: needs login: run sluice upstream login remote --home "
            .to_string()
            + &home.arg(),
        "{before}"
    );
    outputs.push(("reply before login".into(), before.to_string()));

    // The operator signs in; the gateway takes the grant at its callback.
    let (lout, lerr) = login(&home, "remote", &[("SLUICE_E2E_VAULT_KEY", VAULT_KEY)]).await;
    assert!(
        lerr.contains("connected remote: scopes [mcp:tools offline_access]"),
        "{lerr}"
    );
    outputs.push(("login stdout".into(), lout));
    outputs.push(("login stderr".into(), lerr));
    let (c, r) = call_when_listed(&url).await;
    assert_eq!(text_of(&r), "grant #1");
    // A callback no sign-in waits for (a forged or stale state) is refused and stores nothing.
    let forged = reqwest::get(format!(
        "http://127.0.0.1:{port}/oauth/callback?code=forged&state=forged"
    ))
    .await
    .unwrap();
    assert_eq!(forged.status(), 400);
    assert!(forged
        .text()
        .await
        .unwrap()
        .contains("no sign-in is waiting for this link"));
    assert_eq!(server.ledger.lock().unwrap().grants, ["authorization_code"]);
    {
        let l = server.ledger.lock().unwrap();
        assert_eq!(l.grants, ["authorization_code"]);
        assert_eq!(l.resources, [Some(server.mcp_url())]);
    }

    // The server stops taking the token: refreshed, and the call does not fail.
    server.expire_access();
    let r = c.call_tool("remote_whoami", json!({})).await;
    assert_eq!(text_of(&r), "grant #2", "{r}");
    assert_eq!(
        server.ledger.lock().unwrap().grants,
        ["authorization_code", "refresh_token"]
    );

    // A token within a minute of its expiry is refreshed before it expires (in the
    // background: the call that notices goes with the old token, which still works).
    server.behaviour.lock().unwrap().expires_in = 61;
    server.expire_access();
    let r = c.call_tool("remote_whoami", json!({})).await;
    assert_eq!(text_of(&r), "grant #3");
    // The next token lives an hour: one refresh before expiry, not one per call.
    server.behaviour.lock().unwrap().expires_in = 3600;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = c.call_tool("remote_whoami", json!({})).await;
    assert!(text_of(&r).starts_with("grant #"), "{r}");
    let until = Instant::now() + Duration::from_secs(10);
    while server.ledger.lock().unwrap().grants.len() < 4 {
        assert!(Instant::now() < until, "no refresh before expiry");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.ledger.lock().unwrap().grants[3], "refresh_token");
    // The next calls go with the refreshed token (the refresh finished and let go of its lock).
    let newest = server.ledger.lock().unwrap().access[3].0.clone();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.call_tool("remote_whoami", json!({})).await;
        assert_eq!(text_of(&r), "grant #4");
        if server.ledger.lock().unwrap().used.last() == Some(&newest) {
            break;
        }
        assert!(Instant::now() < until, "the refreshed token is never used");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // What the admin API and metrics say (no secret in them: checked below).
    let http = reqwest::Client::new();
    for path in ["/api/upstreams", "/api/overview", "/metrics"] {
        let body = http
            .get(format!("http://127.0.0.1:{admin}{path}"))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        outputs.push((format!("admin {path}"), body));
    }

    // A restarted gateway keeps the grant: no new sign-in.
    drop(c);
    stop(gw);
    let gw = serve(&home, port, &log);
    let (c, r) = call_when_listed(&url).await;
    assert!(text_of(&r).starts_with("grant #"), "{r}");
    assert_eq!(
        server
            .ledger
            .lock()
            .unwrap()
            .grants
            .iter()
            .filter(|g| *g == "authorization_code")
            .count(),
        1
    );

    // The grant is revoked: the refresh is refused, the upstream needs a login, and says why.
    server.revoke_all();
    let r = c.call_tool("remote_whoami", json!({})).await;
    assert_eq!(r["error"]["code"], -32000, "{r}");
    let msg = r["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains(&format!("needs login: the refresh was refused (the token endpoint refused the refresh_token request: {}/token: invalid_grant)", server.base))
            && msg.ends_with(&format!("run sluice upstream login remote --home {}", home.arg())),
        "{msg}\n--- log:\n{}",
        log_tail(&log)
    );
    outputs.push(("reply after revocation".into(), r.to_string()));
    let check = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .env("SLUICE_E2E_VAULT_KEY", VAULT_KEY)
        .output()
        .unwrap();
    outputs.push((
        "sluice check".into(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        ),
    ));
    drop(c);
    stop(gw);

    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains(&format!(
            "refresh failed: the token endpoint refused the refresh_token request: {}/token: invalid_grant",
            server.base
        )),
        "the log says why the grant is gone"
    );
    outputs.push(("serve log".into(), log_text));
    let read = |rel: &str| std::fs::read_to_string(home.path().join(rel)).unwrap_or_default();
    let audit = read("logs/audit.jsonl");
    assert!(
        audit.contains("remote_whoami"),
        "the audit log has the calls"
    );
    outputs.push(("audit log".into(), audit));
    let payloads = read("hooks/payloads.jsonl");
    assert!(
        payloads.contains("remote_whoami"),
        "the hooks saw the calls"
    );
    outputs.push(("hook payloads".into(), payloads));
    let spans = spans.lock().unwrap().join("\n");
    assert!(spans.contains("remote_whoami"), "spans were exported");
    outputs.push(("spans".into(), spans));
    let vault = std::fs::read(home.path().join("vault.db")).unwrap();
    let mut wal = std::fs::read(home.path().join("vault.db-wal")).unwrap_or_default();
    wal.extend(vault);
    outputs.push((
        "vault file".into(),
        String::from_utf8_lossy(&wal).into_owned(),
    ));

    // The vault key rotates: `sluice vault rotate` seals what the old key sealed (the client
    // registration is still there) with the new one, and the old key can go.
    let rotate = |keys: Value| {
        let mut settings: Value = serde_json::from_str(
            &std::fs::read_to_string(home.path().join("sluice.json")).unwrap(),
        )
        .unwrap();
        settings["vault"]["key"] = keys;
        home.write("sluice.json", &settings.to_string());
        let out = Command::new(bin("sluice"))
            .args(["vault", "rotate", "--home", &home.arg()])
            .env("SLUICE_E2E_VAULT_KEY", VAULT_KEY)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let new_key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let vault_file = home.path().join("vault.db");
    let (ok, said) = rotate(json!([new_key, "${env:SLUICE_E2E_VAULT_KEY}"]));
    assert!(ok, "{said}");
    assert_eq!(
        said,
        format!(
            "sealed 1 row(s) again with the first key (file {})\n",
            vault_file.display()
        )
    );
    let (ok, said) = rotate(json!(new_key));
    assert!(ok, "{said}");
    assert_eq!(
        said,
        format!(
            "sealed 0 row(s) again with the first key (file {})\n",
            vault_file.display()
        )
    );

    let secrets = server.ledger.lock().unwrap().secrets();
    // Four access and four refresh tokens (the sign-in and three refreshes), one code, one
    // registered client secret, one PKCE verifier.
    assert_eq!(secrets.len(), 11, "the secrets of the flow");
    for secret in &secrets {
        for (name, text) in &outputs {
            assert!(
                !text.contains(secret.as_str()),
                "{name} holds a secret ({secret})"
            );
        }
    }
}
