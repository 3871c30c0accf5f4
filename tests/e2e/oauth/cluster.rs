//! A shared OAuth identity across two replicas of a cluster: the vault is the cluster's Redis,
//! so the grant one replica's callback stored serves both, and when the upstream stops taking
//! the token, both replicas' calls go through after one refresh, not two (the vault's lock).

use super::server::OAuthServer;
use super::support::{listed, login, text_of};
use crate::cluster::{keygen, Redis};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, Proc};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

fn replica(home: &Home, port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    super::support::serve(home, port, &["--no-admin", "--listen", &listen], &[], None)
}

/// `remote_whoami` called once listed: the session and the reply.
async fn call_when_listed(url: &str) -> (Client, Value) {
    let c = listed(url, "remote_whoami").await;
    let r = c.call_tool("remote_whoami", json!({})).await;
    (c, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_grant_and_refresh_it_once() {
    let redis = Redis::start();
    let server = OAuthServer::start(3600).await;
    let (a, b) = (free_port(), free_port());
    let home = Home::new("oauth-cluster");
    home.write(
        "sluice.json",
        &json!({
            "public_url": format!("http://127.0.0.1:{a}"),
            "vault": {"key": VAULT_KEY},
            "cluster": {"key": keygen(), "redis": redis.url()},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "shared"}}
    ]}));
    let _ra = replica(&home, a);
    let _rb = replica(&home, b);

    // Signed in once, through replica A's callback.
    login(&home, "remote", &[]).await;

    // Both replicas serve with it.
    let (ca, r) = call_when_listed(&format!("http://127.0.0.1:{a}/mcp")).await;
    assert_eq!(text_of(&r), "grant #1");
    let (cb, r) = call_when_listed(&format!("http://127.0.0.1:{b}/mcp")).await;
    assert_eq!(text_of(&r), "grant #1");
    assert_eq!(server.ledger.lock().unwrap().grants, ["authorization_code"]);

    // The grant is in Redis, sealed.
    let token = server.ledger.lock().unwrap().access[0].0.clone();
    let stored = redis.command(&["GET", "sluice:vault:oauth.grants:upstream:remote"]);
    assert!(stored.len() > 100, "the sealed grant: {stored:?}");
    assert!(
        !stored.contains(&token),
        "the vault in Redis holds the token in clear"
    );

    // The upstream stops taking the token: both replicas call at once; one refresh serves both.
    server.expire_access();
    let (ra, rb) = tokio::join!(
        ca.call_tool("remote_whoami", json!({})),
        cb.call_tool("remote_whoami", json!({}))
    );
    assert_eq!(text_of(&ra), "grant #2", "{ra}");
    assert_eq!(text_of(&rb), "grant #2", "{rb}");
    assert_eq!(
        server.ledger.lock().unwrap().grants,
        ["authorization_code", "refresh_token"]
    );
}
