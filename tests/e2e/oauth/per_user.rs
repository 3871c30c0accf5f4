//! Each user acts as themselves upstream (`"oauth": {"mode": "per_user"}`), end to end with the
//! MCP Python SDK client against the in-process OAuth-protected server (`server.rs`), two
//! principals with static tokens: the operator's login lists the tools for everyone; alice, in
//! the handshake era, is asked with a URL elicitation, opens the link as a browser would
//! (Sluice's confirmation page, then the authorization server, then the callback), and her
//! call goes on and is answered with her own grant (`sub=alice`) — once: her next call is not
//! asked again; bob, with a 2026-07-28 client, gets the same question as an `input_required`
//! round and his retry is answered with his own grant (`sub=bob`); carol's client, which
//! declared no URL elicitation, gets -32042 carrying the link; dave declines and his call is
//! answered with the reason. Each connect is an audit line (principal, upstream), and no token
//! the server issued reaches the gateway's log or the audit log.

use super::server::OAuthServer;
use super::support::{connect_client, login, settings};
use serde_json::{json, Value};
use sluice_e2e::free_port;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

/// `connect_client.py`: `remote_whoami` called twice as `user` with `token`.
async fn run(mode: &str, url: &str, token: &str, user: &str, answer: &str) -> Value {
    connect_client(mode, url, token, "remote_whoami", &json!({}), user, answer).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_connects_their_own_account_and_is_served_with_it() {
    let server = OAuthServer::start(3600).await;
    let port = free_port();
    let home = Home::new("oauth-per-user");
    settings(&home, port);
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
            ("dave", "dave-token"),
        ],
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let log = home.path().join("serve.log");
    let env = [("SLUICE_E2E_VAULT_KEY", VAULT_KEY)];
    let _gw = super::support::serve(&home, port, &[], &env, Some(&log));
    let url = format!("http://127.0.0.1:{port}/mcp");

    // The operator's login is the one that lists the upstream's tools for everyone.
    login(&home, "remote", &env).await;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let mut c = Client::with_bearer(&url, "alice-token");
        c.initialize(json!({})).await;
        if c.tool_names().await.iter().any(|n| n == "remote_whoami") {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "remote_whoami never listed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // alice, handshake era: asked once with a URL elicitation, served as herself.
    let alice = run("legacy", &url, "alice-token", "alice", "browse").await;
    let asked = alice["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "asked once: {alice}");
    assert_eq!(asked[0]["mode"], "url", "{alice}");
    let link = asked[0]["url"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{port}/oauth/connect/")),
        "{link}"
    );
    assert!(
        asked[0]["message"].as_str().unwrap().contains("remote"),
        "{alice}"
    );
    assert_eq!(asked[0]["page"]["status"], 200, "{alice}");
    assert_eq!(
        alice["first"]["text"][1], "sub=alice",
        "the call went on: {alice}"
    );
    assert_eq!(alice["second"]["text"][1], "sub=alice", "{alice}");
    // The link was single use.
    let again = reqwest::get(link).await.unwrap();
    assert_eq!(again.status(), 410);

    // bob, 2026-07-28: an input_required round, then his retry is answered as him.
    let bob = run("auto", &url, "bob-token", "bob", "browse").await;
    assert_eq!(bob["asked"].as_array().unwrap().len(), 1, "{bob}");
    assert_eq!(bob["first"]["text"][1], "sub=bob", "{bob}");
    assert_eq!(bob["second"]["text"][1], "sub=bob", "{bob}");

    // carol's client cannot be asked: -32042 with the link in `data.elicitations`.
    let carol = run("nocap", &url, "carol-token", "carol", "browse").await;
    let e = &carol["first"]["error"];
    assert_eq!(e["code"], -32042, "{carol}");
    let el = &e["data"]["elicitations"][0];
    assert_eq!(el["mode"], "url", "{carol}");
    assert!(
        el["url"].as_str().unwrap().contains("/oauth/connect/"),
        "{carol}"
    );
    assert!(el["elicitationId"].is_string(), "{carol}");

    // dave declines: the call is answered with why.
    let dave = run("legacy", &url, "dave-token", "dave", "decline").await;
    let e = &dave["first"]["error"];
    assert_eq!(e["code"], -32000, "{dave}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("you declined to connect your account"),
        "{dave}"
    );

    // Each connect is an audit line naming whom and what, never a token.
    let lines = home.audit_lines(usize::MAX).await;
    let connects: Vec<(String, String, String)> = lines
        .iter()
        .filter(|l| l["method"] == "oauth.connect")
        .map(|l| {
            (
                l["principal"].as_str().unwrap_or("").to_string(),
                l["upstream"].as_str().unwrap_or("").to_string(),
                l["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        connects,
        vec![
            ("token:alice".into(), "remote".into(), "ok".into()),
            ("token:bob".into(), "remote".into(), "ok".into()),
        ]
    );

    // alice's and bob's calls used their own grants; nothing issued reached the log.
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in server.ledger.lock().unwrap().secrets() {
        assert!(!text.contains(&secret), "a secret reached the log");
        let audit = std::fs::read_to_string(home.path().join("logs/audit.jsonl")).unwrap();
        assert!(!audit.contains(&secret), "a secret reached the audit log");
    }
    assert!(
        !text.contains(link.rsplit('/').next().unwrap()),
        "the link's id reached the log"
    );
}
