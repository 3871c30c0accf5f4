//! What a per-user upstream lists differently per account is what that user sees once
//! connected. The test server lists `admin_reset` besides `whoami` for an account whose name
//! starts with `admin`. The operator's login lists `whoami` for everyone; alice connects her
//! upstream account `admin-alice` (through the link of a -32042, its confirmation page, the
//! authorization server and the callback): her session is told `tools/list_changed`, her lists
//! (and a new session's of hers) show `remote_admin_reset` and she can call it; bob, connected
//! as `bob`, and carol, not connected, see only `remote_whoami`, and bob's call to
//! `remote_admin_reset` is an unknown tool.

use super::server::OAuthServer;
use super::support::{login, settings};
use serde_json::{json, Value};
use sluice_e2e::free_port;
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use std::time::{Duration, Instant};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

/// The upstream's tools `c` lists (the gateway's own, such as `sluice_connections`, left out).
async fn remote_tools(c: &Client) -> Vec<String> {
    let mut names = c.tool_names().await;
    names.retain(|n| n.starts_with("remote_"));
    names
}

/// The link of a -32042 answer to `remote_whoami`.
async fn link_of(c: &Client) -> String {
    let asked = c.call_tool("remote_whoami", json!({})).await;
    assert_eq!(asked["error"]["code"], -32042, "{asked}");
    asked["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Open `link` as a browser whose person signs in upstream as `account`: the confirmation
/// page, its form posted back with the CSRF token, then the authorization server and the
/// callback. Returns the last page's status.
async fn connect(link: &str, account: &str) -> u16 {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("x-test-user", account.parse().unwrap());
    let b = reqwest::Client::builder()
        .cookie_store(true)
        .default_headers(h)
        .build()
        .unwrap();
    let page = b.get(link).send().await.unwrap().text().await.unwrap();
    let at = page.find("name=csrf value=\"").expect("the form's token") + 17;
    let csrf = &page[at..at + page[at..].find('"').unwrap()];
    let done = b
        .post(link)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    done.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_sees_what_the_upstream_lists_for_their_own_account() {
    let server = OAuthServer::start(3600).await;
    let port = free_port();
    let home = Home::new("oauth-user-lists");
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
        ],
    );
    let env = [("SLUICE_E2E_VAULT_KEY", VAULT_KEY)];
    let _gw = super::support::serve(&home, port, &[], &env, None);
    let url = format!("http://127.0.0.1:{port}/mcp");
    login(&home, "remote", &env).await;
    let session = |token: &'static str| {
        let url = url.clone();
        async move {
            let mut c = Client::with_bearer(&url, token);
            c.initialize(json!({})).await;
            c
        }
    };
    let until = Instant::now() + Duration::from_secs(20);
    let alice = loop {
        let c = session("alice-token").await;
        if remote_tools(&c).await == ["remote_whoami"] {
            break c;
        }
        assert!(Instant::now() < until, "remote_whoami never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut alice_stream = SseReader::new(alice.open_get(None).await);

    // alice connects her admin account; her first call opens her connection, and her session
    // is told that her lists changed.
    assert_eq!(connect(&link_of(&alice).await, "admin-alice").await, 200);
    let served = alice.call_tool("remote_whoami", json!({})).await;
    assert_eq!(
        served["result"]["content"][1]["text"], "sub=admin-alice",
        "{served}"
    );
    let told = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (_, m) = alice_stream.next().await.expect("the GET stream ended");
            if m["method"] == "notifications/tools/list_changed" {
                return m;
            }
        }
    })
    .await
    .expect("alice was never told her tools changed");
    assert_eq!(told["method"], "notifications/tools/list_changed");
    assert_eq!(
        remote_tools(&alice).await,
        ["remote_whoami", "remote_admin_reset"]
    );
    let reset = alice.call_tool("remote_admin_reset", json!({})).await;
    assert_eq!(reset["result"]["content"][1]["text"], "sub=admin-alice");
    // A new session of hers sees the same.
    let alice2 = session("alice-token").await;
    assert_eq!(
        remote_tools(&alice2).await,
        ["remote_whoami", "remote_admin_reset"]
    );

    // bob connects a plain account: his lists are everyone's, and the admin tool is unknown to him.
    let bob = session("bob-token").await;
    assert_eq!(connect(&link_of(&bob).await, "bob").await, 200);
    let served = bob.call_tool("remote_whoami", json!({})).await;
    assert_eq!(served["result"]["content"][1]["text"], "sub=bob");
    assert_eq!(remote_tools(&bob).await, ["remote_whoami"]);
    let refused: Value = bob.call_tool("remote_admin_reset", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // carol has not connected: she sees what the operator's login lists.
    let carol = session("carol-token").await;
    assert_eq!(remote_tools(&carol).await, ["remote_whoami"]);
}
