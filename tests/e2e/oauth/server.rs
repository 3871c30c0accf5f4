//! An OAuth-protected MCP server for the tests, in process: an authorization server (RFC 8414
//! metadata, dynamic registration, an authorization endpoint that approves at once, a token
//! endpoint checking PKCE S256 and the client secret, refresh with rotation, revocation of
//! every grant on demand) and a protected MCP resource (RFC 9728 metadata, a 401 challenge, a
//! stateless Streamable HTTP endpoint with one tool, `whoami` (and `admin_reset` for an account
//! whose name starts with `admin`: what a server lists differently per user), which says the grant's number and
//! the person it was issued to: the browser's `x-test-user` header at the authorization
//! endpoint, as the AS's own sign-in would say; its access tokens are JWT-shaped (RFC 9068)
//! and name that person as `sub`). It records every secret it
//! hands out or receives, so a test can search the gateway's outputs for them.

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What the server has issued and seen.
#[derive(Default)]
pub(super) struct Ledger {
    /// Access tokens issued (newest last), with the scopes they carry.
    pub access: Vec<(String, Vec<String>)>,
    /// Refresh tokens issued.
    pub refresh: Vec<String>,
    /// Authorization codes issued.
    pub codes: Vec<String>,
    /// Client secrets issued by registration.
    pub client_secrets: Vec<String>,
    /// PKCE verifiers received.
    pub verifiers: Vec<String>,
    /// Code challenges by code.
    challenges: HashMap<String, String>,
    /// Refresh tokens still valid.
    live_refresh: HashSet<String>,
    /// Access tokens still valid.
    live_access: HashSet<String>,
    /// Token requests by grant type.
    pub grants: Vec<String>,
    /// `resource` of each token request.
    pub resources: Vec<Option<String>>,
    /// Bearer tokens the MCP endpoint accepted, in order.
    pub used: Vec<String>,
    /// Registrations (client_id → secret).
    clients: HashMap<String, String>,
    /// Tasks by id: the `whoami` result they hold.
    tasks: HashMap<String, Value>,
    /// The person each code, refresh token and access token was issued to (the browser's
    /// `x-test-user` at the authorization endpoint, as a signed-in session would say).
    users: HashMap<String, String>,
}

impl Ledger {
    /// Every secret value handed out or received.
    pub(super) fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.access.iter().map(|(t, _)| t.clone()).collect();
        out.extend(self.refresh.iter().cloned());
        out.extend(self.codes.iter().cloned());
        out.extend(self.client_secrets.iter().cloned());
        out.extend(self.verifiers.iter().cloned());
        out
    }
}

/// How the server behaves.
pub(super) struct Behaviour {
    /// `expires_in` of access tokens.
    pub expires_in: u64,
    /// Answer the MCP endpoint's requests (false: every request is refused with 401).
    pub serving: bool,
    /// Run `whoami` as a 2025-11-25 task when asked (`tasks` declared, `taskSupport:
    /// optional`): the task completes at once; `tasks/result` says whose grant created it
    /// (`sub=`) and whose fetched it (`fetched_by=`). Off unless a test turns it on before
    /// the gateway connects.
    pub tasks: bool,
}

/// A running server.
pub(super) struct OAuthServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// What it issued.
    pub ledger: Arc<Mutex<Ledger>>,
    /// Its behaviour, changeable while it runs.
    pub behaviour: Arc<Mutex<Behaviour>>,
}

#[derive(Clone)]
struct St {
    base: String,
    ledger: Arc<Mutex<Ledger>>,
    behaviour: Arc<Mutex<Behaviour>>,
}

fn random(prefix: &str) -> String {
    format!("{prefix}-{}-{}", uuid_like(), uuid_like())
}

fn uuid_like() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    format!("{:016x}", h.finish())
}

impl OAuthServer {
    /// Start it on a free loopback port.
    pub(super) async fn start(expires_in: u64) -> OAuthServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let st = St {
            base: base.clone(),
            ledger: Arc::default(),
            behaviour: Arc::new(Mutex::new(Behaviour {
                expires_in,
                serving: true,
                tasks: false,
            })),
        };
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/.well-known/oauth-authorization-server", get(as_meta))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(st.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        OAuthServer {
            base,
            ledger: st.ledger,
            behaviour: st.behaviour,
        }
    }

    /// The MCP endpoint.
    pub(super) fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Revoke every grant: access and refresh tokens stop working.
    pub(super) fn revoke_all(&self) {
        let mut l = self.ledger.lock().unwrap();
        l.live_access.clear();
        l.live_refresh.clear();
    }

    /// Expire every access token (refresh tokens still work).
    pub(super) fn expire_access(&self) {
        self.ledger.lock().unwrap().live_access.clear();
    }
}

async fn prm(State(st): State<St>) -> Json<Value> {
    Json(json!({
        "resource": format!("{}/mcp", st.base),
        "authorization_servers": [st.base],
        "scopes_supported": ["mcp:tools"],
    }))
}

async fn as_meta(State(st): State<St>) -> Json<Value> {
    let b = &st.base;
    Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"),
        "registration_endpoint": format!("{b}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "scopes_supported": ["mcp:tools", "offline_access"],
        "authorization_response_iss_parameter_supported": true,
    }))
}

async fn register(State(st): State<St>, Json(body): Json<Value>) -> Response {
    let id = random("client");
    let secret = random("csecret");
    let mut l = st.ledger.lock().unwrap();
    l.client_secrets.push(secret.clone());
    l.clients.insert(id.clone(), secret.clone());
    (
        StatusCode::CREATED,
        Json(json!({
            "client_id": id,
            "client_secret": secret,
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "client_secret_basic",
        })),
    )
        .into_response()
}

async fn authorize(
    State(st): State<St>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let code = random("code");
    let user = headers
        .get("x-test-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("operator")
        .to_string();
    let mut l = st.ledger.lock().unwrap();
    l.codes.push(code.clone());
    l.users.insert(code.clone(), user);
    l.challenges.insert(
        code.clone(),
        q.get("code_challenge").cloned().unwrap_or_default(),
    );
    let redirect = q.get("redirect_uri").cloned().unwrap_or_default();
    let state = q.get("state").cloned().unwrap_or_default();
    let iss: String = url_encode(&st.base);
    Redirect::to(&format!(
        "{redirect}?code={code}&state={}&iss={iss}",
        url_encode(&state)
    ))
    .into_response()
}

/// An access token shaped as an RFC 9068 JWT naming the person it was issued to (`sub`), as
/// identity providers issue them; unique, and never checked by its signature here (the
/// server knows its tokens).
fn jwt_access_token(user: &str) -> String {
    use base64::Engine;
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.{}",
        b64(json!({"alg": "HS256", "typ": "at+jwt"})),
        b64(json!({"sub": user, "jti": random("atoken")})),
        uuid_like()
    )
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn s256(verifier: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

fn basic_client(headers: &HeaderMap) -> Option<(String, String)> {
    use base64::Engine;
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(v.strip_prefix("Basic ")?)
        .ok()?;
    let (id, secret) = std::str::from_utf8(&raw).ok()?.split_once(':')?;
    Some((id.to_string(), secret.to_string()))
}

async fn token(
    State(st): State<St>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let bad = |e: &str| (StatusCode::BAD_REQUEST, Json(json!({"error": e}))).into_response();
    let expires_in = st.behaviour.lock().unwrap().expires_in;
    let mut l = st.ledger.lock().unwrap();
    let client_ok = match basic_client(&headers) {
        Some((id, secret)) => l.clients.get(&id) == Some(&secret),
        None => false,
    };
    if !client_ok {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let grant = f.get("grant_type").cloned().unwrap_or_default();
    l.grants.push(grant.clone());
    l.resources.push(f.get("resource").cloned());
    let by = f
        .get("code")
        .or_else(|| f.get("refresh_token"))
        .cloned()
        .unwrap_or_default();
    let user = l
        .users
        .get(&by)
        .cloned()
        .unwrap_or_else(|| "operator".into());
    match grant.as_str() {
        "authorization_code" => {
            let code = f.get("code").cloned().unwrap_or_default();
            let verifier = f.get("code_verifier").cloned().unwrap_or_default();
            l.verifiers.push(verifier.clone());
            match l.challenges.remove(&code) {
                Some(ch) if ch == s256(&verifier) => {}
                _ => return bad("invalid_grant"),
            }
        }
        "refresh_token" => {
            let rt = f.get("refresh_token").cloned().unwrap_or_default();
            if !l.live_refresh.remove(&rt) {
                return bad("invalid_grant");
            }
        }
        _ => return bad("unsupported_grant_type"),
    }
    let access = jwt_access_token(&user);
    let refresh = random("rtoken");
    l.access.push((access.clone(), vec!["mcp:tools".into()]));
    l.refresh.push(refresh.clone());
    l.live_access.insert(access.clone());
    l.live_refresh.insert(refresh.clone());
    l.users.insert(access.clone(), user.clone());
    l.users.insert(refresh.clone(), user);
    Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": expires_in,
        "refresh_token": refresh,
        "scope": "mcp:tools offline_access",
    }))
    .into_response()
}

async fn mcp(State(st): State<St>, headers: HeaderMap, body: String) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let (serving, tasks) = {
        let b = st.behaviour.lock().unwrap();
        (b.serving, b.tasks)
    };
    let valid = {
        let mut l = st.ledger.lock().unwrap();
        let ok = serving && token.as_ref().is_some_and(|t| l.live_access.contains(t));
        if ok {
            l.used.push(token.clone().unwrap_or_default());
        }
        ok
    };
    if !valid {
        let challenge = format!(
            "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            st.base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
            "",
        )
            .into_response();
    }
    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let id = msg.get("id").cloned();
    let method = msg["method"].as_str().unwrap_or("");
    let sub = || {
        st.ledger
            .lock()
            .unwrap()
            .users
            .get(token.as_deref().unwrap_or(""))
            .cloned()
            .unwrap_or_default()
    };
    let task_of = |task_id: &str| {
        json!({"taskId": task_id, "status": "completed", "createdAt": "2026-01-01T00:00:00Z",
               "ttl": 60000, "pollInterval": 100})
    };
    let result = match method {
        "initialize" => {
            let mut caps = json!({"tools": {}});
            if tasks {
                caps["tasks"] =
                    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
            }
            json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": caps,
                "serverInfo": {"name": "oauth-test-server", "version": "1"},
            })
        }
        "tools/list" => {
            let mut tool = json!({
                "name": "whoami",
                "description": "Says which token the call came with (by its number).",
                "inputSchema": {"type": "object"},
            });
            if tasks {
                tool["execution"] = json!({"taskSupport": "optional"});
            }
            // What an upstream lists differently per account: an admin's has one more tool.
            let mut tools = vec![tool];
            if sub().starts_with("admin") {
                tools.push(json!({
                    "name": "admin_reset",
                    "description": "Only an admin account lists this one.",
                    "inputSchema": {"type": "object"},
                }));
            }
            json!({"tools": tools})
        }
        "tools/call" => {
            let sub = sub();
            let mut l = st.ledger.lock().unwrap();
            let n = l.access.len();
            let result = json!({"content": [
                {"type": "text", "text": format!("grant #{n}")},
                {"type": "text", "text": format!("sub={sub}")},
            ]});
            match msg["params"].get("task") {
                Some(_) if tasks => {
                    let task_id = random("task");
                    l.tasks.insert(task_id.clone(), result);
                    json!({"task": task_of(&task_id)})
                }
                _ => result,
            }
        }
        "tasks/get" | "tasks/result" if tasks => {
            let task_id = msg["params"]["taskId"].as_str().unwrap_or("").to_string();
            let fetched_by = sub();
            let Some(mut held) = st.ledger.lock().unwrap().tasks.get(&task_id).cloned() else {
                return Json(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": "Unknown task"}}))
                .into_response();
            };
            match method {
                "tasks/get" => task_of(&task_id),
                _ => {
                    held["content"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"type": "text", "text": format!("fetched_by={fetched_by}")}));
                    held
                }
            }
        }
        _ if id.is_none() => return StatusCode::ACCEPTED.into_response(),
        _ => {
            return Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}))
                .into_response()
        }
    };
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
