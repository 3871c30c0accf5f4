//! A real OAuth-protected MCP server behind the gateway: the MCP TypeScript SDK's example
//! `simpleStreamableHttp --oauth --oauth-strict` (its demo authorization server approves at
//! once, registers clients dynamically, checks the `resource`, and issues one-hour tokens
//! without refresh tokens). An operator signs in with `sluice upstream login`; tools list and
//! call; a restarted gateway keeps the grant; after `sluice upstream logout` the gateway asks
//! for a login, and a new login brings it back. (The demo issues no refresh tokens and has no
//! revocation: refresh and revocation are shown against the test's own OAuth server, shared.rs.)

use super::admin::{demo_server, vault_key};
use super::support::{listed, login, text_of};
use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, Proc};
use std::process::Command;
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
    home.write(
        "sluice.json",
        &json!({
            "listen": format!("127.0.0.1:{port}"),
            "vault": {"key": "${env:SLUICE_E2E_VAULT_KEY}"},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
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
