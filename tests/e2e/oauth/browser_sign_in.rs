//! A connect link binds to its person by signing the browser in first: the gateway's own
//! authentication is OAuth with `oidc-provider` (a certified OpenID provider, in Node) as the
//! issuer of the principals' JWTs and the identity provider browsers sign in at
//! (`browser_sign_in`). bob's client gets a connect link for the per-user upstream (-32042);
//! alice opens it and signs in at the provider as alice: 403, nothing stored, and bob is still
//! not connected; bob opens the same link, signs in as bob, and goes on to the upstream's
//! authorization server: connected, and his call is answered with his own grant (`sub=bob`).
//! The gateway's client secret at the provider never reaches the log or the audit log.

use super::server::OAuthServer;
use super::support::{login, settings};
use crate::interop::{node22, node_dir};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, wait_for_port, workspace_root, Proc};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";
const CLIENT_SECRET: &str = "idp-client-secret-e2e-7f3a";

/// The provider on `port`, its one client the gateway's on `gateway_port`.
fn provider(port: u16, gateway_port: u16) -> Proc {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg("oidc-idp.mjs")
        .arg(port.to_string())
        .arg("sluice")
        .arg(CLIENT_SECRET)
        .arg(format!("http://127.0.0.1:{gateway_port}/oauth/signed-in"))
        .arg(workspace_root().join("tests/keys/rs256.pem"));
    let p = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    p
}

/// An access token of the provider's issuer for `sub`, meant for the gateway at `resource`.
fn token(issuer: &str, resource: &str, sub: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    crate::auth::mint(
        jsonwebtoken::Algorithm::RS256,
        json!({"iss": issuer, "aud": resource, "sub": sub, "iat": now, "exp": now + 600}),
    )
}

/// A browser with its own cookies, following redirects; `who` is the person the upstream's
/// test authorization server signs in (its `x-test-user` header).
fn browser(who: &str) -> reqwest::Client {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("x-test-user", who.parse().unwrap());
    reqwest::Client::builder()
        .cookie_store(true)
        .default_headers(h)
        .redirect(reqwest::redirect::Policy::limited(20))
        .build()
        .unwrap()
}

/// The value of `name=` in an HTML attribute list, e.g. `action="…"`.
fn attr(html: &str, name: &str) -> Option<String> {
    let start = html.find(&format!("{name}=\""))? + name.len() + 2;
    let end = html[start..].find('"')? + start;
    Some(
        html[start..end]
            .replace("&amp;", "&")
            .replace("&#x2F;", "/"),
    )
}

/// Open `link` in `b` and sign in at the provider as `login`, through its login and consent
/// forms; returns the status and text of the page the browser ends on.
async fn open_and_sign_in(
    b: &reqwest::Client,
    link: &str,
    idp: &str,
    login: &str,
) -> (u16, String) {
    let mut resp = b.get(link).send().await.unwrap();
    for _ in 0..4 {
        let here = resp.url().clone();
        let at_provider = here.as_str().starts_with(idp);
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        if !at_provider || status != 200 || !text.contains("<form") {
            return (status, text);
        }
        let form = &text[text.find("<form").unwrap()..];
        let action = attr(form, "action").expect("the provider's form has an action");
        let prompt = attr(&form[form.find("name=\"prompt\"").unwrap()..], "value").unwrap();
        let mut fields = vec![("prompt", prompt.clone())];
        if prompt == "login" {
            fields.push(("login", login.to_string()));
            fields.push(("password", "any".to_string()));
        }
        let url = here.join(&action).unwrap();
        resp = b.post(url).form(&fields).send().await.unwrap();
    }
    panic!("the provider asked more than four times");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_link_opened_by_someone_else_is_refused_after_they_sign_in() {
    let server = OAuthServer::start(3600).await;
    let port = free_port();
    let idp_port = free_port();
    let _idp = provider(idp_port, port);
    let issuer = format!("http://127.0.0.1:{idp_port}");
    let resource = format!("http://127.0.0.1:{port}/mcp");

    let home = Home::new("oauth-browser-sign-in");
    settings(&home, port);
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "per_user"}}
    ]}));
    home.write(
        "auth/auth.config.json",
        &json!({
            "enabled": true,
            "issuer": issuer,
            "jwks_url": format!("{issuer}/jwks"),
            "browser_sign_in": {"client_id": "sluice", "client_secret": "${env:IDP_SECRET}"}
        })
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let log = home.path().join("serve.log");
    let env = [
        ("SLUICE_E2E_VAULT_KEY", VAULT_KEY),
        ("IDP_SECRET", CLIENT_SECRET),
    ];
    let _gw = super::support::serve(&home, port, &[], &env, Some(&log));
    login(&home, "remote", &env).await;

    let bob_token = token(&issuer, &resource, "bob");
    let until = Instant::now() + Duration::from_secs(20);
    let bob = loop {
        let mut c = Client::with_bearer(&resource, &bob_token);
        c.initialize(json!({})).await;
        if c.tool_names().await.iter().any(|n| n == "remote_whoami") {
            break c;
        }
        assert!(Instant::now() < until, "remote_whoami never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // bob's client declared no URL elicitation: -32042 carries his link.
    let asked = bob.call_tool("remote_whoami", json!({})).await;
    assert_eq!(asked["error"]["code"], -32042, "{asked}");
    let link = asked["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(link.starts_with(&format!("http://127.0.0.1:{port}/oauth/connect/")));

    // alice opens bob's link: she must sign in first, and the provider says she is alice.
    let (status, page) = open_and_sign_in(&browser("alice"), &link, &issuer, "alice").await;
    assert_eq!(status, 403, "{page}");
    assert!(
        page.contains(
            "You signed in as alice, and this link connects remote for bob. Nothing was connected."
        ),
        "{page}"
    );
    // Nothing was stored: bob is still asked to connect, and no grant was issued upstream.
    let again = bob.call_tool("remote_whoami", json!({})).await;
    assert_eq!(again["error"]["code"], -32042, "{again}");
    let issued_before = server.ledger.lock().unwrap().access.len();

    // bob opens his own (first) link: signed in as bob, on to the upstream, connected.
    let (status, page) = open_and_sign_in(&browser("bob"), &link, &issuer, "bob").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Your account is connected to remote"),
        "{page}"
    );
    assert_eq!(
        server.ledger.lock().unwrap().access.len(),
        issued_before + 1
    );
    let served = bob.call_tool("remote_whoami", json!({})).await;
    assert_eq!(
        served["result"]["content"][1]["text"], "sub=bob",
        "{served}"
    );
    // The link was used: it is gone now.
    let used = reqwest::get(&link).await.unwrap();
    assert_eq!(used.status(), 410);

    // A sign-in answered to a browser that did not start it is refused.
    let stray = reqwest::get(format!(
        "http://127.0.0.1:{port}/oauth/signed-in?code=x&state=y"
    ))
    .await
    .unwrap();
    assert_eq!(stray.status(), 403);

    // The audit log: one connect, bob's. No secret in the log or the audit log.
    let lines: Vec<Value> = home.audit_lines(usize::MAX).await;
    let connects: Vec<&Value> = lines
        .iter()
        .filter(|l| l["method"] == "oauth.connect")
        .collect();
    assert_eq!(connects.len(), 1, "{connects:?}");
    assert_eq!(connects[0]["principal"], "jwt:bob");
    let text = std::fs::read_to_string(&log).unwrap();
    let audit = serde_json::to_string(&lines).unwrap();
    for secret in [CLIENT_SECRET, bob_token.as_str()] {
        assert!(!text.contains(secret), "a secret in the log");
        assert!(!audit.contains(secret), "a secret in the audit log");
    }
    let issued: Vec<String> = server
        .ledger
        .lock()
        .unwrap()
        .access
        .iter()
        .map(|(t, _)| t.clone())
        .collect();
    for t in &issued {
        assert!(!text.contains(t.as_str()), "an upstream token in the log");
    }
    assert!(text.contains("a connect link was opened by someone else"));
}
