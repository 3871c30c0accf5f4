//! A real OAuth-protected MCP server behind the gateway: the MCP TypeScript SDK's example
//! `simpleStreamableHttp --oauth --oauth-strict` (its demo authorization server approves at
//! once, registers clients dynamically, checks the `resource`, and issues one-hour tokens
//! without refresh tokens). An operator signs in with `sluice upstream login`; tools list and
//! call; a restarted gateway keeps the grant; after `sluice upstream logout` the gateway asks
//! for a login, and a new login brings it back. (The demo issues no refresh tokens and has no
//! revocation: refresh and revocation are shown against the test's own OAuth server, shared.rs.)
//!
//! The same server in per-user mode (`"oauth": {"mode": "per_user"}`), with two principals
//! authenticated by JWTs from the tests' JWKS (`sub` alice and bob): each connects their own
//! account through the URL elicitation, with the MCP Python SDK client whose browser follows the
//! link (Sluice's confirmation page, the demo authorization server, the callback); alice in the
//! handshake era, bob with a 2026-07-28 client. The demo says nothing about the user in its
//! results (its authorization server signs everyone in as one demo user), so the test reads
//! which access token served each call from the demo's own log of each request's
//! `Authenticated user` (the token its introspection accepted).

use super::admin::{demo_server, vault_key};
use super::support::{connect_client, listed, login, settings, text_of};
use crate::auth::{claims, jwks_server, mint, ISSUER};
use crate::interop::{node22, node_dir, node_module_file};
use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_port, Proc};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn serve(home: &Home, port: u16, key: &str) -> Proc {
    super::support::serve(
        home,
        port,
        &["--no-admin"],
        &[("SLUICE_E2E_VAULT_KEY", key)],
        None,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_oauth_example_server_behind_the_gateway() {
    let (mcp_port, auth_port, port) = (free_port(), free_port(), free_port());
    let server = demo_server(mcp_port, auth_port);
    let key = vault_key();
    let home = Home::new("oauth-sdk");
    settings(&home, port);
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "demo", "transport": "http", "url": format!("http://localhost:{mcp_port}/mcp"),
         "expose_all": true, "oauth": {"mode": "shared"}}
    ]}));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let gw = serve(&home, port, &key);

    let env = [("SLUICE_E2E_VAULT_KEY", key.as_str())];
    let (_, said) = login(&home, "demo", &env).await;
    assert!(
        said.contains("connected demo: scopes [mcp:tools], expires in"),
        "{said}"
    );
    let c = listed(&url, "demo_greet").await;
    let r = c.call_tool("demo_greet", json!({"name": "Sluice"})).await;
    assert_eq!(text_of(&r), "Hello, Sluice!");

    // The gateway restarted: the grant is kept (no login).
    drop(c);
    drop(gw);
    let gw = serve(&home, port, &key);
    let c = listed(&url, "demo_greet").await;
    let r = c.call_tool("demo_greet", json!({"name": "again"})).await;
    assert_eq!(text_of(&r), "Hello, again!");

    // The operator logs out (the gateway stopped): the next gateway asks for a login.
    drop(c);
    drop(gw);
    let out = Command::new(bin("sluice"))
        .args(["upstream", "logout", "demo", "--home", &home.arg()])
        .env("SLUICE_E2E_VAULT_KEY", &key)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "forgot the grant of demo\n"
    );
    let gw = serve(&home, port, &key);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let until = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = c.call_tool("demo_greet", json!({"name": "x"})).await;
        if r["error"]["code"] == -32000 || Instant::now() > until {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        r["error"]["message"],
        format!(
            "Upstream 'demo' is unavailable: needs login: run sluice upstream login demo --home {}",
            home.arg()
        ),
        "{r}"
    );

    // A new login brings it back.
    login(&home, "demo", &env).await;
    let c = listed(&url, "demo_greet").await;
    let r = c.call_tool("demo_greet", json!({"name": "back"})).await;
    assert_eq!(text_of(&r), "Hello, back!");
    drop(c);
    drop(gw);
    drop(server);
}

/// The demo server (as [`demo_server`]) with its stdout, where it logs every request's
/// `Authenticated user: { token: '…', … }`, appended to `log`.
fn demo_server_logged(mcp_port: u16, auth_port: u16, log: &Path) -> Proc {
    let script = node_module_file(
        "@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js",
    );
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .args([
            script.as_os_str(),
            "--oauth".as_ref(),
            "--oauth-strict".as_ref(),
        ])
        .env("MCP_PORT", mcp_port.to_string())
        .env("MCP_AUTH_PORT", auth_port.to_string())
        .stdout(Stdio::from(std::fs::File::create(log).unwrap()));
    let proc = Proc::spawn(cmd);
    wait_for_port(mcp_port, Duration::from_secs(30));
    wait_for_port(auth_port, Duration::from_secs(30));
    proc
}

/// The access tokens the demo accepted in `log` from byte `from` on (its requests since then).
fn tokens_since(log: &Path, from: usize) -> BTreeSet<String> {
    let text = std::fs::read_to_string(log).unwrap();
    text[from..]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("token: '"))
        .filter_map(|rest| rest.split_once('\''))
        .map(|(token, _)| token.to_string())
        .collect()
}

fn len_of(log: &Path) -> usize {
    std::fs::metadata(log).unwrap().len() as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_connects_their_own_account_to_the_sdk_oauth_example_server() {
    let (mcp_port, auth_port, port) = (free_port(), free_port(), free_port());
    let home = Home::new("oauth-sdk-per-user");
    let demo_log = home.path().join("demo.log");
    let server = demo_server_logged(mcp_port, auth_port, &demo_log);
    let key = vault_key();
    let (jwks, _) = jwks_server().await;
    settings(&home, port);
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "demo", "transport": "http", "url": format!("http://localhost:{mcp_port}/mcp"),
         "expose_all": true, "oauth": {"mode": "per_user"}}
    ]}));
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "issuer": ISSUER, "jwks_url": jwks,
                "authorization_servers": [ISSUER]})
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let log = home.path().join("serve.log");
    let env = [("SLUICE_E2E_VAULT_KEY", key.as_str())];
    let gw = super::support::serve(&home, port, &["--no-admin"], &env, Some(&log));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let alice_jwt = mint(jsonwebtoken::Algorithm::RS256, claims(&url, "alice", "mcp"));
    let bob_jwt = mint(jsonwebtoken::Algorithm::ES256, claims(&url, "bob", "mcp"));

    // The operator's login lists the demo's tools for everyone.
    login(&home, "demo", &env).await;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = Client::with_bearer(&url, &alice_jwt);
        c.initialize(json!({})).await;
        if c.tool_names().await.iter().any(|n| n == "demo_greet") {
            break;
        }
        assert!(Instant::now() < until, "demo_greet never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listing = tokens_since(&demo_log, 0);
    assert_eq!(listing.len(), 1, "the operator's token alone: {listing:?}");

    // Each step: (era, principal, JWT, asked to connect?); the tokens the demo accepted meanwhile.
    let mut served = Vec::new();
    for (mode, user, jwt, asked) in [
        ("legacy", "alice", &alice_jwt, 1),
        ("auto", "bob", &bob_jwt, 1),
        ("legacy", "alice", &alice_jwt, 0),
        ("auto", "bob", &bob_jwt, 0),
    ] {
        let from = len_of(&demo_log);
        let args = json!({"name": user});
        let r = connect_client(mode, &url, jwt, "demo_greet", &args, user, "browse").await;
        let questions = r["asked"].as_array().unwrap();
        assert_eq!(questions.len(), asked, "{user} ({mode}): {r}");
        if let Some(q) = questions.first() {
            assert_eq!(q["mode"], "url", "{r}");
            let link = q["url"].as_str().unwrap();
            assert!(
                link.starts_with(&format!("http://127.0.0.1:{port}/oauth/connect/")),
                "{link}"
            );
            assert_eq!(
                q["message"],
                "The tool demo_greet acts as you on demo: open this link to connect your demo account (it is yours alone and expires in 10 minutes).",
                "{r}"
            );
            assert_eq!(q["page"]["status"], 200, "{r}");
            assert!(
                q["page"]["text"]
                    .as_str()
                    .unwrap()
                    .contains("Your account is connected to demo."),
                "{r}"
            );
        }
        let hello = json!({"text": [format!("Hello, {user}!")]});
        assert_eq!(r["first"], hello, "{user} ({mode}): {r}");
        assert_eq!(r["second"], hello, "{user} ({mode}): {r}");
        let mut tokens = tokens_since(&demo_log, from);
        for t in &listing {
            tokens.remove(t);
        }
        assert_eq!(tokens.len(), 1, "{user}'s calls used one token: {tokens:?}");
        served.push(tokens.into_iter().next().unwrap());
    }
    // alice's grant served both her runs, bob's both of his, and the two differ (and neither
    // is the operator's).
    assert_eq!(served[0], served[2], "alice's token");
    assert_eq!(served[1], served[3], "bob's token");
    assert_ne!(served[0], served[1], "alice and bob share a token");
    let all = tokens_since(&demo_log, 0);
    assert_eq!(all.len(), 3, "the operator's, alice's and bob's: {all:?}");

    // Each connect is an audit line naming whom and what.
    let lines = home.audit_lines(usize::MAX).await;
    let connects: Vec<(&str, &str, &str)> = lines
        .iter()
        .filter(|l| l["method"] == "oauth.connect")
        .map(|l| {
            (
                l["principal"].as_str().unwrap_or(""),
                l["upstream"].as_str().unwrap_or(""),
                l["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        connects,
        vec![("jwt:alice", "demo", "ok"), ("jwt:bob", "demo", "ok")]
    );

    // No access token the demo issued, and no principal's JWT, reached the gateway's logs.
    drop(gw);
    let text = std::fs::read_to_string(&log).unwrap();
    let audit = std::fs::read_to_string(home.path().join("logs/audit.jsonl")).unwrap();
    assert!(
        text.contains("a user connected their account"),
        "the log is the gateway's"
    );
    for secret in all.iter().chain([&alice_jwt, &bob_jwt]) {
        assert!(!text.contains(secret.as_str()), "a token reached the log");
        assert!(
            !audit.contains(secret.as_str()),
            "a token reached the audit log"
        );
    }
    drop(server);
}
