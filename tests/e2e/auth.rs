//! Authentication and authorization through the real binary: JWTs minted here with RS256 and
//! ES256 keys and checked against a JWKS served by a local server (every bad token answered
//! with its exact status and challenge), static tokens stored as hashes, RFC 9728 metadata,
//! sessions bound to their principal, access rules filtering lists and refusing calls, and the
//! principal reaching hooks and the audit log.

use axum::routing::get;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, workspace_root};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const ISSUER: &str = "https://issuer.sluice.test";

fn key(name: &str) -> Vec<u8> {
    std::fs::read(workspace_root().join("tests/keys").join(name)).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Serve `tests/keys/jwks.json` on loopback; returns its URL and a count of fetches.
pub(crate) async fn jwks_server() -> (String, Arc<AtomicUsize>) {
    let jwks: Value =
        serde_json::from_slice(&key("jwks.json")).expect("tests/keys/jwks.json is JSON");
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/jwks.json",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let jwks = jwks.clone();
            async move { axum::Json(jwks) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/jwks.json"), hits)
}

/// A signed token. `alg` RS256 uses rs256.pem (kid rs-1), ES256 es256.pem (kid es-1).
pub(crate) fn mint(alg: Algorithm, claims: Value) -> String {
    let (kid, key) = match alg {
        Algorithm::RS256 => (
            "rs-1",
            EncodingKey::from_rsa_pem(&key("rs256.pem")).unwrap(),
        ),
        Algorithm::ES256 => ("es-1", EncodingKey::from_ec_pem(&key("es256.pem")).unwrap()),
        _ => unreachable!(),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

pub(crate) fn claims(aud: &str, sub: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": aud, "sub": sub, "scope": scope, "iat": now(), "exp": now() + 600})
}

fn b64(v: &Value) -> String {
    use std::fmt::Write;
    // base64url without padding, by hand (the tests crate has no base64 dependency).
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = v.to_string().into_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |acc, b| acc << 8 | *b as u32) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            let _ = write!(out, "{}", T[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A home whose listener requires `mcp`, with a static token `ci-bot` = "static-secret",
/// JWTs from ISSUER, access rules, a command hook that keeps the last payload, and the audit log.
fn home(jwks_url: &str) -> Home {
    let home = Home::new("auth");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write(
        "auth/auth.config.json",
        &json!({
            "enabled": true,
            "issuer": ISSUER,
            "jwks_url": jwks_url,
            "required_scopes": ["mcp"],
            "authorization_servers": [ISSUER],
            "tokens": [{"name": "ci-bot", "sha256": sha256_hex("static-secret"), "scopes": ["mcp"]}],
            "rules": [
                {"effect": "allow", "tools": ["fx_add"], "scopes": ["math"]},
                {"effect": "deny", "tools": ["fx_crash", "fx_slow"], "claims": {"team": "guests"}},
                {"effect": "deny", "prompts": ["*"], "principals": ["ci-bot"]}
            ]
        })
        .to_string(),
    );
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "keep-payload", "event": "PreToolUse", "type": "command",
             "command": "cat > \"${HOOKS_DIR}/payload.json\"", "enabled": true}
        ]})
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    home
}

/// SHA-256 of a token, through the binary (`sluice auth hash`), as a user would make it.
pub(crate) fn sha256_hex(token: &str) -> String {
    let out = std::process::Command::new(bin("sluice"))
        .args(["auth", "hash", token])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Turn bearer-token authentication on in `home` for these (name, token) pairs, each token
/// stored as its SHA-256.
pub(crate) fn bearer_tokens(home: &Home, people: &[(&str, &str)]) {
    let tokens: Vec<Value> = people
        .iter()
        .map(|(name, token)| json!({"name": name, "sha256": sha256_hex(token)}))
        .collect();
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": tokens}).to_string(),
    );
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// POST initialize with these extra headers: (status, WWW-Authenticate, body).
async fn try_init(url: &str, headers: &[(&'static str, &str)]) -> (u16, Option<String>, Value) {
    let c = Client::new(url);
    let resp = c.builder_with(headers).body(INIT).send().await.unwrap();
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let body = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
    (status, challenge, body)
}

#[tokio::test]
async fn every_bad_token_gets_its_status_and_challenge() {
    let (jwks, _) = jwks_server().await;
    let home = home(&jwks);
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let base = url.trim_end_matches("/mcp").to_string();
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");

    // No credentials: 401 with where to find the metadata and the scope to ask for.
    let (status, challenge, body) = try_init(&url, &[]).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp\"").as_str())
    );
    assert_eq!(
        body,
        json!({"error": "unauthorized", "error_description": "authentication required"})
    );

    // RFC 9728 metadata at both well-known locations, without credentials.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let doc: Value = reqwest::get(format!("{base}{path}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            doc,
            json!({
                "resource": url,
                "bearer_methods_supported": ["header"],
                "resource_name": "Sluice MCP gateway",
                "authorization_servers": [ISSUER],
                "scopes_supported": ["mcp"],
            }),
            "{path}"
        );
    }

    let good = claims(&url, "alice", "mcp");
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = good.clone();
        f(&mut c);
        c
    };
    let other_key = {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("rs-1".into());
        jsonwebtoken::encode(
            &header,
            &good,
            &EncodingKey::from_rsa_pem(&key("rs256-other.pem")).unwrap(),
        )
        .unwrap()
    };
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&good)
    );
    let cases: Vec<(&str, String, u16, &str, &str)> =
        vec![
        (
            "expired",
            mint(Algorithm::RS256, with(&|c| { c["exp"] = json!(now() - 120); })),
            401,
            "invalid_token",
            "the token has expired",
        ),
        (
            "not yet valid",
            mint(Algorithm::ES256, with(&|c| { c["nbf"] = json!(now() + 300); })),
            401,
            "invalid_token",
            "the token is not valid yet (nbf)",
        ),
        (
            "wrong audience",
            mint(Algorithm::RS256, with(&|c| { c["aud"] = json!("https://elsewhere.test/mcp"); })),
            401,
            "invalid_token",
            "the token is not meant for this resource (aud)",
        ),
        (
            "wrong issuer",
            mint(Algorithm::ES256, with(&|c| { c["iss"] = json!("https://evil.test"); })),
            401,
            "invalid_token",
            "the token comes from another issuer (iss)",
        ),
        (
            "bad signature",
            other_key,
            401,
            "invalid_token",
            "the signature does not verify",
        ),
        (
            "alg none",
            unsigned,
            401,
            "invalid_token",
            "malformed token: not a signed JWT, or an algorithm Sluice never accepts (none, HMAC)",
        ),
        (
            "missing scope",
            mint(Algorithm::RS256, with(&|c| { c["scope"] = json!("read"); })),
            403,
            "insufficient_scope",
            "the token lacks the scope mcp",
        ),
        (
            "unknown static token",
            "not-a-token".to_string(),
            401,
            "invalid_token",
            "unknown token",
        ),
    ];
    for (label, token, status, error, description) in cases {
        let auth = format!("Bearer {token}");
        let (got, challenge, body) = try_init(&url, &[("authorization", &auth)]).await;
        assert_eq!(got, status, "{label}: {body}");
        assert_eq!(
            body,
            json!({"error": error, "error_description": description}),
            "{label}"
        );
        assert_eq!(
            challenge.as_deref(),
            Some(
                format!(
                    "Bearer error=\"{error}\", error_description=\"{description}\", resource_metadata=\"{metadata_url}\", scope=\"mcp\""
                )
                .as_str()
            ),
            "{label}"
        );
    }

    // The good ones: RS256 and ES256 JWTs, the static token (as a bearer and as an API key).
    for token in [
        mint(Algorithm::RS256, good.clone()),
        mint(Algorithm::ES256, good.clone()),
        "static-secret".to_string(),
    ] {
        let mut c = Client::with_bearer(&url, &token);
        let init = c.initialize(json!({})).await;
        assert_eq!(init["serverInfo"]["name"], "sluice");
        assert_eq!(
            c.call_tool("fx_echo", json!({"text": "hi"})).await["result"]["structuredContent"],
            json!({"text": "hi"})
        );
    }
    let (status, _, _) = try_init(&url, &[("x-api-key", "static-secret")]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn access_rules_filter_lists_refuse_calls_and_the_principal_is_seen() {
    let (jwks, hits) = jwks_server().await;
    let home = home(&jwks);
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);

    // alice holds `math`: fx_add is listed and callable.
    let alice_token = mint(Algorithm::RS256, claims(&url, "alice", "mcp math"));
    let mut alice = Client::with_bearer(&url, &alice_token);
    alice.initialize(json!({})).await;
    let names = alice.tool_names().await;
    assert!(names.contains(&"fx_add".to_string()), "{names:?}");
    assert!(names.contains(&"fx_crash".to_string()), "{names:?}");
    let sum = alice.call_tool("fx_add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum["result"]["structuredContent"]["sum"], 5, "{sum}");

    // The hook saw alice, with her scopes and claims.
    let payload: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("hooks/payload.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(payload["principal"]["id"], "alice");
    assert_eq!(payload["principal"]["kind"], "jwt");
    assert_eq!(payload["principal"]["scopes"], json!(["mcp", "math"]));
    assert_eq!(payload["principal"]["claims"]["iss"], ISSUER);

    // guest (team guests, no math): fx_add, fx_crash and fx_slow are neither listed nor callable.
    let mut guest_claims = claims(&url, "guest", "mcp");
    guest_claims["team"] = json!("guests");
    let mut guest = Client::with_bearer(&url, &mint(Algorithm::ES256, guest_claims));
    guest.initialize(json!({})).await;
    let names = guest.tool_names().await;
    for hidden in ["fx_add", "fx_crash", "fx_slow"] {
        assert!(
            !names.contains(&hidden.to_string()),
            "{hidden} in {names:?}"
        );
    }
    assert!(names.contains(&"fx_echo".to_string()));
    let refused = guest.call_tool("fx_add", json!({"a": 1, "b": 1})).await;
    assert_eq!(
        refused["error"],
        json!({"code": -32602, "message": "Unknown tool: fx_add"}),
        "exactly what an unknown tool gets"
    );
    // Prompts: ci-bot may see none; alice sees the fixture's.
    let mut bot = Client::with_bearer(&url, "static-secret");
    bot.initialize(json!({})).await;
    assert_eq!(
        bot.request("prompts/list", json!({})).await["result"]["prompts"],
        json!([])
    );
    let prompts = alice.request("prompts/list", json!({})).await;
    assert!(
        !prompts["result"]["prompts"].as_array().unwrap().is_empty(),
        "{prompts}"
    );
    let name = prompts["result"]["prompts"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let got = bot.request("prompts/get", json!({"name": name})).await;
    assert_eq!(
        got["error"],
        json!({"code": -32602, "message": format!("Unknown prompt: {name}")})
    );

    // A session belongs to its principal: bob cannot use alice's session id.
    let mut bob = Client::with_bearer(&url, &mint(Algorithm::RS256, claims(&url, "bob", "mcp")));
    bob.session = alice.session.clone();
    let hijack = bob
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_eq!(hijack.status, 404, "{}", hijack.body);

    // The audit log names the principal of every call, and why the guest was refused.
    // The audit log is written beside the calls (it never blocks one): wait for the lines.
    let mut lines: Vec<Value> = Vec::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(home.path().join("logs/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let refused = lines
            .iter()
            .any(|l| l["tool"] == "fx_add" && l["outcome"] == "refused");
        if refused {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let alice_add = lines
        .iter()
        .find(|l| l["tool"] == "fx_add" && l["outcome"] == "ok")
        .expect("alice's call is audited");
    assert_eq!(alice_add["principal"], "alice");
    let guest_add = lines
        .iter()
        .find(|l| l["tool"] == "fx_add" && l["outcome"] == "refused")
        .expect("the guest's refusal is audited");
    assert_eq!(guest_add["principal"], "guest");
    assert_eq!(
        guest_add["error"],
        "access rules: guest may not use the tool fx_add"
    );
    // One JWKS fetch served every token (the set is cached).
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_unreachable_jwks_is_503_and_static_tokens_still_work() {
    // A JWKS URL nobody serves: a token cannot be checked, which is the gateway's problem (503),
    // not the client's.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/jwks.json", l.local_addr().unwrap())
    };
    let home = home(&dead);
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let token = mint(Algorithm::RS256, claims(&url, "alice", "mcp"));
    let auth = format!("Bearer {token}");
    let (status, challenge, body) = try_init(&url, &[("authorization", &auth)]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(challenge, None);
    assert_eq!(body["error"], "temporarily_unavailable");
    // Static tokens do not depend on the JWKS.
    let (status, _, _) = try_init(&url, &[("authorization", "Bearer static-secret")]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_client_token_goes_only_to_upstreams_that_ask_for_it() {
    let (open_url, open_log) = sluice_e2e::recording::start("open").await;
    let (fwd_url, fwd_log) = sluice_e2e::recording::start("fwd").await;
    let home = Home::new("auth-forward");
    home.expose(&json!({"upstreams": [
        {"id": "open", "transport": "http", "url": open_url, "expose_all": true,
         "headers": {"X-Service-Key": "gateway-own"}},
        {"id": "fwd", "transport": "http", "url": fwd_url, "expose_all": true,
         "forward_authorization": true}
    ]}));
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": [{"name": "ci-bot", "sha256": sha256_hex("static-secret")}]})
            .to_string(),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::with_bearer(&url, "static-secret");
    c.initialize(json!({})).await;
    for _ in 0..100 {
        let names = c.tool_names().await;
        if names.contains(&"open_echo".to_string()) && names.contains(&"fwd_echo".to_string()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for tool in ["open_echo", "fwd_echo"] {
        let r = c.call_tool(tool, json!({"x": 1})).await;
        assert_eq!(r["result"]["content"][0]["text"], "{\"x\":1}", "{r}");
    }
    let calls = |log: &sluice_e2e::recording::Log| -> Vec<sluice_e2e::recording::Seen> {
        log.lock()
            .unwrap()
            .iter()
            .filter(|s| s.method == "tools/call")
            .cloned()
            .collect()
    };
    let open = calls(&open_log);
    assert_eq!(open.len(), 1);
    assert_eq!(
        open[0].headers.get("authorization"),
        None,
        "never passed by default"
    );
    assert_eq!(
        open[0].headers.get("x-service-key").map(String::as_str),
        Some("gateway-own")
    );
    // No request of any kind carried it to the upstream that did not ask.
    assert!(open_log
        .lock()
        .unwrap()
        .iter()
        .all(|s| !s.headers.contains_key("authorization")));
    let fwd = calls(&fwd_log);
    assert_eq!(fwd.len(), 1);
    assert_eq!(
        fwd[0].headers.get("authorization").map(String::as_str),
        Some("Bearer static-secret")
    );
}
