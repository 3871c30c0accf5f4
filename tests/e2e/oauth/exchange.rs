//! RFC 8693 token exchange and RFC 7009 revocation against a real authorization server:
//! authgent-server 0.3.4 (PyPI `authgent-server`, pinned in tests/python/requirements.txt and
//! run from tests/python/.venv), an open-source OAuth 2.1 server whose token endpoint implements
//! the token exchange grant (`subject_token`, `audience` / `resource`, `scope`,
//! `requested_token_type`; the issued token names the exchanging client in `act`).
//!
//! Two users' own tokens (client credentials tokens of two clients of that server, standing for
//! what each user's client presents to Sluice) are exchanged by Sluice's `Exchanger` as the
//! gateway's client: each exchanged token carries its own user's `sub`, the audience asked for
//! and the gateway as actor; a second call is answered from the cache; a token the server does
//! not accept fails with an error that does not hold it. Then an exchanged token is revoked at
//! the server's revocation endpoint and its introspection says it is no longer active.

use serde_json::{json, Value};
use sluice_e2e::{free_port, wait_for_port, workspace_root, Proc};
use sluice_oauth::exchange::ACCESS_TOKEN_TYPE;
use sluice_oauth::{ClientCredentials, ExchangeConfig, Exchanger, Fetcher, Grant, Revoked};
use std::process::{Command, Stdio};
use std::time::Duration;

const EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const AUDIENCE: &str = "https://crm.example.com/mcp";

/// authgent-server on a free loopback port, its database in a temporary folder.
pub(super) fn authgent() -> (Proc, String, tempdir::Dir) {
    let bin = std::env::var_os("SLUICE_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/python/.venv/bin/python"))
        .with_file_name("authgent-server");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test (it installs tests/python/requirements.txt)",
        bin.display()
    );
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let dir = tempdir::Dir::new("authgent");
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--host", "127.0.0.1", "--port", &port.to_string()])
        .current_dir(dir.path())
        .env("AUTHGENT_SERVER_URL", &base)
        .env(
            "AUTHGENT_DATABASE_URL",
            format!("sqlite+aiosqlite:///{}/authgent.db", dir.path().display()),
        )
        .env("AUTHGENT_SECRET_KEY", "ab".repeat(32))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let p = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(60));
    (p, base, dir)
}

/// A small temporary folder, removed when dropped.
pub(super) mod tempdir {
    pub(crate) struct Dir(std::path::PathBuf);
    impl Dir {
        pub(crate) fn new(label: &str) -> Dir {
            let p = std::env::temp_dir().join(format!(
                "sluice-e2e-{label}-{}-{}",
                std::process::id(),
                sluice_e2e::free_port()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
        pub(crate) fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Register a confidential client that may use client credentials and token exchange.
pub(super) async fn register(base: &str, name: &str) -> (String, String) {
    let r: Value = reqwest::Client::new()
        .post(format!("{base}/register"))
        .json(&json!({
            "client_name": name,
            "grant_types": ["client_credentials", EXCHANGE],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": "crm.read",
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        r["client_id"].as_str().unwrap().to_string(),
        r["client_secret"].as_str().unwrap().to_string(),
    )
}

/// POST `form` to `url` as `client` (HTTP Basic): the JSON answer.
pub(super) async fn post_as(url: &str, client: &(String, String), form: &[(&str, &str)]) -> Value {
    reqwest::Client::new()
        .post(url)
        .basic_auth(&client.0, Some(&client.1))
        .form(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A client credentials token of `client` (a user's own token, in this test).
async fn own_token(base: &str, client: &(String, String)) -> String {
    let form = [("grant_type", "client_credentials"), ("scope", "crm.read")];
    let r = post_as(&format!("{base}/token"), client, &form).await;
    r["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {r}"))
        .to_string()
}

/// The claims of a JWT (not verified: the server that signed it is the one in the test).
pub(super) fn claims(jwt: &str) -> Value {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// RFC 7662 introspection of `token` as `client`: `active`.
async fn active(base: &str, client: &(String, String), token: &str) -> bool {
    let r = post_as(&format!("{base}/introspect"), client, &[("token", token)]).await;
    r["active"].as_bool().unwrap_or(false)
}

#[tokio::test]
async fn token_exchange_and_revocation_against_authgent_server() {
    let (_server, base, _dir) = authgent();
    let gateway = register(&base, "sluice-gateway").await;
    let alice = register(&base, "alice-agent").await;
    let bob = register(&base, "bob-agent").await;
    let alice_token = own_token(&base, &alice).await;
    let bob_token = own_token(&base, &bob).await;

    let exchanger = Exchanger::new(
        ExchangeConfig {
            token_endpoint: format!("{base}/token"),
            audience: Some(AUDIENCE.into()),
            resource: None,
            scopes: vec!["crm.read".into()],
            requested_token_type: ACCESS_TOKEN_TYPE.into(),
            subject_token_type: ACCESS_TOKEN_TYPE.into(),
            actor: true,
            client: ClientCredentials {
                issuer: base.clone(),
                client_id: gateway.0.clone(),
                client_secret: Some(gateway.1.clone()),
                auth_method: "client_secret_basic".into(),
            },
            signing_key: None,
        },
        Fetcher::new(Vec::new()),
    );

    let for_alice = exchanger.token_for("alice", &alice_token).await.unwrap();
    let for_bob = exchanger.token_for("bob", &bob_token).await.unwrap();
    let bearer = |h: &reqwest::header::HeaderValue| {
        h.to_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap()
            .to_string()
    };
    let (a, b) = (bearer(&for_alice), bearer(&for_bob));
    assert_ne!(a, alice_token, "never the client's own token");
    let (ca, cb) = (claims(&a), claims(&b));
    assert_eq!(ca["sub"], claims(&alice_token)["sub"], "{ca}");
    assert_eq!(cb["sub"], claims(&bob_token)["sub"], "{cb}");
    assert_ne!(ca["sub"], cb["sub"]);
    assert_eq!(ca["aud"], AUDIENCE);
    assert_eq!(ca["scope"], "crm.read");
    assert_eq!(ca["act"]["sub"], format!("client:{}", gateway.0), "{ca}");
    assert!(active(&base, &gateway, &a).await);

    // From the cache: the same header, no new exchange.
    let again = exchanger.token_for("alice", &alice_token).await.unwrap();
    assert!(std::sync::Arc::ptr_eq(&for_alice, &again));

    // A token the server never issued: refused, and the error never holds it.
    let forged = format!("{}x", &alice_token[..alice_token.len() - 1]);
    let e = exchanger.token_for("mallory", &forged).await.unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(text.contains("token-exchange"), "{text}");
    assert!(
        !text.contains(&forged) && !text.contains(&alice_token),
        "{text}"
    );

    // RFC 7009: the exchanged token revoked at the server's revocation endpoint.
    let grant = Grant {
        access_token: a.clone(),
        refresh_token: None,
        expires_at: None,
        scopes: vec!["crm.read".into()],
        token_endpoint: format!("{base}/token"),
        resource: None,
        client: ClientCredentials {
            issuer: base.clone(),
            client_id: gateway.0.clone(),
            client_secret: Some(gateway.1.clone()),
            auth_method: "client_secret_basic".into(),
        },
        obtained_at: 0,
        revocation_endpoint: Some(format!("{base}/revoke")),
    };
    let revoked = sluice_oauth::revoke::revoke(&Fetcher::new(Vec::new()), &grant, None)
        .await
        .unwrap();
    assert_eq!(revoked, Revoked::AtServer);
    assert!(!active(&base, &gateway, &a).await, "revoked, still active");
    assert!(active(&base, &gateway, &b).await, "bob's is untouched");
}
