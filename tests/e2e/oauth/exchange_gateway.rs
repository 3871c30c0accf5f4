//! Token exchange through the gateway, end to end: Sluice serves an `exchange` upstream whose
//! clients authenticate to Sluice with JWTs of authgent-server (the same authorization server
//! as tests/e2e/oauth/exchange.rs: Sluice checks them against its `issuer` and JWKS). Each
//! call's token is exchanged there (RFC 8693) for one whose audience is the upstream, an MCP
//! server in this test that accepts only tokens for itself (checked by introspection at
//! authgent) and answers `whoami` with the `sub` it saw. Two users' calls carry their own
//! `sub`; a caller with no token or a forged one is refused by Sluice, one with a static token
//! is told it cannot be exchanged; the clients' own tokens reach neither the upstream (it
//! records every `Authorization` it got) nor the log. The upstream's tools are listed with
//! the gateway's own client credentials token; an exchange upstream without client
//! credentials, whose upstream asks for a token to list, is down with a reason saying so.

use super::exchange::{authgent, claims, register};
use super::support::{serve, settings, text_of};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use sluice_e2e::free_port;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";
const ENV: [(&str, &str); 1] = [("SLUICE_E2E_VAULT_KEY", VAULT_KEY)];
/// carol's static token (a principal of Sluice's own, not of the identity provider).
const CAROL: &str = "carol-static-token-not-for-the-idp";

/// The upstream: what it received, and where it checks tokens.
struct Upstream {
    /// authgent's base URL (introspection).
    authgent: String,
    /// Its own URL: the audience a token must carry.
    audience: String,
    /// Every `Authorization` value received, with the method it came with.
    seen: Mutex<Vec<(String, String)>>,
    /// The `sub` of each accepted request, with its method.
    subs: Mutex<Vec<(String, String)>>,
}

/// RFC 7662 introspection at authgent: the claims of an active token.
async fn introspect(base: &str, token: &str) -> Option<Value> {
    let r: Value = reqwest::Client::new()
        .post(format!("{base}/introspect"))
        .form(&[("token", token)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    (r["active"] == true).then_some(r)
}

/// The MCP endpoint: a stateless 2025-11-25 server with one tool, `whoami`, answering only
/// requests whose bearer token is active and issued for it.
async fn mcp(
    State(up): State<Arc<Upstream>>,
    headers: HeaderMap,
    Json(msg): Json<Value>,
) -> Response {
    let method = msg["method"].as_str().unwrap_or("").to_string();
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    up.seen.lock().unwrap().push((method.clone(), auth.clone()));
    let claims = match auth.strip_prefix("Bearer ") {
        Some(t) => introspect(&up.authgent, t).await,
        None => None,
    };
    let Some(claims) = claims.filter(|c| c["aud"] == up.audience.as_str()) else {
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", r#"Bearer error="invalid_token""#)],
        )
            .into_response();
    };
    let sub = claims["sub"].as_str().unwrap_or("").to_string();
    up.subs.lock().unwrap().push((method.clone(), sub.clone()));
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "exchange-upstream", "version": "1"}
        }),
        "tools/list" => json!({"tools": [
            {"name": "whoami", "description": "Who the token says", "inputSchema": {"type": "object"}}
        ]}),
        "tools/call" => json!({"content": [{"type": "text", "text": format!("sub={sub}")}]}),
        _ => {
            return Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}))
            .into_response()
        }
    };
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// The upstream on a free loopback port: its state and its URL.
async fn upstream(authgent: &str) -> (Arc<Upstream>, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", l.local_addr().unwrap());
    let up = Arc::new(Upstream {
        authgent: authgent.to_string(),
        audience: url.clone(),
        seen: Mutex::default(),
        subs: Mutex::default(),
    });
    let app = Router::new()
        .route("/mcp", axum::routing::post(mcp))
        .with_state(up.clone());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (up, url)
}

/// A client credentials token of `client` aimed at `resource`: a user's own token to Sluice.
async fn user_token(base: &str, client: &(String, String), resource: &str) -> String {
    let form = [
        ("grant_type", "client_credentials"),
        ("scope", "crm.read"),
        ("resource", resource),
    ];
    let r = super::exchange::post_as(&format!("{base}/token"), client, &form).await;
    r["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {r}"))
        .to_string()
}

/// A bare `tools/list` POST to the gateway, with `bearer` when given.
async fn list_with(url: &str, bearer: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    req.send().await.unwrap()
}

/// A session of `token`'s holder once the gateway lists `tool` (bounded).
async fn listed_as(url: &str, token: &str, tool: &str) -> Client {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let mut c = Client::with_bearer(url, token);
        c.initialize(json!({})).await;
        if c.tool_names().await.iter().any(|n| n == tool) {
            return c;
        }
        assert!(Instant::now() < until, "{tool} never listed at {url}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn each_user_reaches_the_upstream_as_themselves_through_the_exchange() {
    let (_server, base, dir) = authgent();
    let gateway = register(&base, "sluice-gateway").await;
    let alice = register(&base, "alice-agent").await;
    let bob = register(&base, "bob-agent").await;
    let (up, up_url) = upstream(&base).await;
    let (port, admin) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{port}/mcp");

    let home = Home::new("exchange-gw");
    settings(&home, port);
    let exchange = |id: &str, with_secret: bool| {
        let mut o = json!({"mode": "exchange", "token_endpoint": format!("{base}/token"),
            "client_id": gateway.0, "audience": up_url, "scopes": ["crm.read"]});
        if with_secret {
            o["client_secret"] = json!(gateway.1);
            o["actor"] = json!(true);
        } else {
            o["token_endpoint_auth"] = json!("none");
        }
        json!({"id": id, "transport": "http", "url": up_url, "expose_all": true, "oauth": o})
    };
    home.expose(
        &json!({"version": 1, "upstreams": [exchange("crm", true), exchange("pub", false)]}),
    );
    home.write(
        "auth/auth.config.json",
        &json!({
            "enabled": true,
            "resource": url,
            "issuer": base,
            "jwks_url": format!("{base}/.well-known/jwks.json"),
            "tokens": [{"name": "carol", "sha256": crate::auth::sha256_hex(CAROL), "scopes": []}],
        })
        .to_string(),
    );
    let log = dir.path().join("sluice.log");
    let admin_addr = format!("127.0.0.1:{admin}");
    let _gw = serve(&home, port, &["--admin", &admin_addr], &ENV, Some(&log));

    let alice_token = user_token(&base, &alice, &url).await;
    let bob_token = user_token(&base, &bob, &url).await;
    let (alice_sub, bob_sub) = (
        claims(&alice_token)["sub"].clone(),
        claims(&bob_token)["sub"].clone(),
    );
    assert_ne!(alice_sub, bob_sub);

    // Listed with the gateway's own token (its client credentials, aimed at the upstream).
    let a = listed_as(&url, &alice_token, "crm_whoami").await;
    let gateway_sub = format!("client:{}", gateway.0);
    assert!(
        up.subs
            .lock()
            .unwrap()
            .iter()
            .any(|(m, s)| m == "tools/list" && *s == gateway_sub),
        "{:?}",
        up.subs.lock().unwrap()
    );

    // Each user's call carries their own `sub`.
    let r = a.call_tool("crm_whoami", json!({})).await;
    assert_eq!(
        text_of(&r),
        format!("sub={}", alice_sub.as_str().unwrap()),
        "{r}"
    );
    let mut b = Client::with_bearer(&url, &bob_token);
    b.initialize(json!({})).await;
    let r = b.call_tool("crm_whoami", json!({})).await;
    assert_eq!(
        text_of(&r),
        format!("sub={}", bob_sub.as_str().unwrap()),
        "{r}"
    );
    // alice again, after bob: still alice.
    let r = a.call_tool("crm_whoami", json!({})).await;
    assert_eq!(
        text_of(&r),
        format!("sub={}", alice_sub.as_str().unwrap()),
        "{r}"
    );

    // No token, and a forged one: Sluice refuses them itself (401, a challenge naming why).
    let resp = list_with(&url, None).await;
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().get("www-authenticate").is_some());
    let forged = format!("{}x", &alice_token[..alice_token.len() - 1]);
    let resp = list_with(&url, Some(&forged)).await;
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.contains("invalid_token"), "{challenge}");

    // A static token of Sluice's own is never sent to the identity provider.
    let mut c = Client::with_bearer(&url, CAROL);
    c.initialize(json!({})).await;
    let r = c.call_tool("crm_whoami", json!({})).await;
    let msg = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert!(
        msg.contains("acts as each user through token exchange") && msg.contains("static token"),
        "{msg}"
    );

    // The exchange upstream without client credentials: down, and the reason says why.
    let until = Instant::now() + Duration::from_secs(20);
    let reason = loop {
        let r: Value = reqwest::get(format!("http://{admin_addr}/readyz"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let pub_ = r["not_ready"]
            .as_array()
            .and_then(|a| a.iter().find(|u| u["upstream"] == "pub").cloned());
        if let Some(reason) = pub_.and_then(|u| u["reason"].as_str().map(String::from)) {
            break reason;
        }
        assert!(Instant::now() < until, "pub never down: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        reason.contains("HTTP 401") && reason.contains("client_secret or private_key_file"),
        "{reason}"
    );

    // What the upstream received: never a client's own token, only tokens issued for it.
    let seen = up.seen.lock().unwrap().clone();
    for (method, auth) in &seen {
        for own in [&alice_token, &bob_token, &forged] {
            assert!(
                !auth.contains(own.as_str()),
                "{method} carried a client's own token"
            );
        }
        assert!(
            !auth.contains(CAROL),
            "{method} carried carol's static token"
        );
    }
    let exchanged: Vec<String> = seen
        .iter()
        .filter_map(|(_, a)| a.strip_prefix("Bearer ").map(String::from))
        .collect();
    assert!(!exchanged.is_empty());
    let issued_for_alice = exchanged
        .iter()
        .find(|t| claims(t)["sub"] == alice_sub)
        .expect("alice's exchanged token");
    assert_eq!(claims(issued_for_alice)["aud"], up_url.as_str());
    assert_eq!(claims(issued_for_alice)["act"]["sub"], gateway_sub.as_str());

    // Nothing secret in the log: the clients' tokens, the exchanged ones, the gateway's secret.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.is_empty());
    for secret in [&alice_token, &bob_token, &forged, &gateway.1]
        .into_iter()
        .chain(exchanged.iter())
        .map(String::as_str)
        .chain([CAROL])
    {
        assert!(!text.contains(secret), "a secret in the log");
    }
}
