//! The admin JSON API: what the page shows (overview, tools, hooks, upstreams and their OAuth
//! sign-in state; the traffic and the audit log are in `traffic.rs`), the management
//! operations, each through `sluice_config::manage`, and the start of an upstream's sign-in.

use super::Admin;
use crate::catalog::Route;
use crate::control::{self, Face};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use sluice_config::manage::{self, ManageError};
use sluice_config::{HookKindSpec, OAuthMode, Transport};
use sluice_core::Message;
use sluice_hooks::{Chain, Ctx, RequestOutcome, Trace};
use sluice_upstream::Status;
use std::sync::Arc;
use std::time::Duration;

type S = State<Arc<Admin>>;

/// An error answer, boxed (a `Response` is large).
type Fail = Box<Response>;

/// The `/api` routes.
pub fn routes() -> Router<Arc<Admin>> {
    Router::new()
        .route("/api/overview", get(overview))
        .route("/api/tools", get(tools))
        .route("/api/tools/set", post(tools_set))
        .route("/api/tools/add", post(tools_add))
        .route("/api/tools/accept", post(tools_accept))
        .route("/api/hooks", get(hooks))
        .route("/api/hooks/add", post(hooks_add))
        .route("/api/hooks/set", post(hooks_set))
        .route("/api/hooks/update", post(hooks_update))
        .route("/api/hooks/move", post(hooks_move))
        .route("/api/hooks/try", post(hooks_try))
        .route("/api/upstreams", get(upstreams))
        .route("/api/upstreams/add", post(upstreams_add))
        .route("/api/upstreams/set", post(upstreams_set))
        .route("/api/upstreams/restart", post(upstreams_restart))
        .route("/api/upstreams/connect", post(upstreams_connect))
        .route("/api/log/set", post(log_set))
}

fn err(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

fn fail(status: StatusCode, msg: impl Into<String>) -> Fail {
    Box::new(err(status, msg))
}

fn body_json(body: &Bytes) -> Result<Map<String, Value>, Fail> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(fail(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        )),
        Err(e) => Err(fail(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON: {e}"),
        )),
    }
}

fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> Result<&'a str, Fail> {
    m.get(k).and_then(Value::as_str).ok_or_else(|| {
        fail(
            StatusCode::BAD_REQUEST,
            format!("{k:?} (a string) is required"),
        )
    })
}

/// The home folder management writes to, or 409 when the gateway serves no `--home` tree.
fn home(admin: &Admin) -> Result<std::path::PathBuf, Fail> {
    if admin.opts.editable {
        Ok(admin.st.snapshot().config.home.clone())
    } else {
        Err(fail(
            StatusCode::CONFLICT,
            "this gateway serves no configuration tree (start it with --home DIR to manage it)",
        ))
    }
}

/// Answer a management operation: after a good write, apply it now (the reload watcher would
/// within half a second) so the answer means "live".
async fn done(admin: &Admin, r: Result<Value, ManageError>) -> Response {
    match r {
        Ok(v) => match control::apply_tree(&admin.st, Face::Admin).await {
            Ok(_) => Json(json!({"ok": true, "result": v})).into_response(),
            // Written, but the tree as it now stands on disk cannot be applied (for example an
            // earlier edit turned authentication off on an exposed listener): nothing of it is
            // live, and the running configuration is kept.
            Err(errors) => (
                StatusCode::CONFLICT,
                Json(json!({
                    "error": "the change was written, but the tree cannot be applied; the running configuration is kept",
                    "errors": errors_json(&errors),
                })),
            )
                .into_response(),
        },
        Err(ManageError::Invalid(errors)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "error": "the change was not written; the tree would be invalid",
                "errors": errors_json(&errors),
            })),
        )
            .into_response(),
        Err(ManageError::Bad(m)) => err(StatusCode::BAD_REQUEST, m),
        Err(ManageError::Io(e)) => err(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn errors_json(errors: &sluice_config::ConfigErrors) -> Vec<Value> {
    errors
        .0
        .iter()
        .map(|e| json!({"file": e.file, "field": e.field, "message": e.message, "text": e.to_string()}))
        .collect()
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return *r,
        }
    };
}

fn status_json(s: &Status) -> (&'static str, Option<String>) {
    match s {
        Status::Disabled => ("disabled", None),
        Status::Starting => ("starting", None),
        Status::Up => ("up", None),
        Status::Down(r) => ("down", Some(r.clone())),
    }
}

/// An OAuth upstream's sign-in state for the page: how it signs in, whether a grant is held,
/// when its access token expires, its scopes, and why a person must act. Never a token, secret
/// or code: [`sluice_oauth::Status`] holds none.
fn oauth_json(slot: &sluice_upstream::Slot, mode: OAuthMode, down: Option<&str>) -> Value {
    let mode = match mode {
        OAuthMode::Shared => "shared",
        OAuthMode::ClientCredentials => "client_credentials",
    };
    let status = match slot.identity() {
        Some(identity) => identity.status(),
        // The identity could not be made (no vault, an unreadable key file): the slot is down
        // and says why.
        None => sluice_oauth::Status::Failed(
            down.unwrap_or("the upstream's OAuth identity could not be made")
                .to_string(),
        ),
    };
    let (state, expires_at, scopes, refreshable, reason) = match status {
        sluice_oauth::Status::Unknown => ("unknown", None, Vec::new(), false, None),
        sluice_oauth::Status::Connected {
            expires_at,
            scopes,
            refreshable,
        } => ("connected", expires_at, scopes, refreshable, None),
        sluice_oauth::Status::NeedsLogin(why) => {
            ("needs_login", None, Vec::new(), false, Some(why))
        }
        sluice_oauth::Status::Failed(why) => ("failed", None, Vec::new(), false, Some(why)),
    };
    json!({
        "mode": mode, "state": state, "expires_at": expires_at, "scopes": scopes,
        "refreshable": refreshable, "reason": reason,
    })
}

fn upstream_rows(admin: &Admin, with_stderr: bool) -> Vec<Value> {
    let catalog = admin.st.snapshot().catalog.clone();
    catalog
        .slots
        .iter()
        .map(|slot| {
            let (status, reason) = status_json(&slot.status());
            let st = slot.state.lock();
            let tools = catalog
                .slots
                .iter()
                .position(|s| Arc::ptr_eq(s, slot))
                .map(|i| {
                    catalog
                        .tools()
                        .iter()
                        .filter_map(|t| t["name"].as_str())
                        .filter(|n| catalog.tool(n).is_some_and(|r| r.slot() == Some(i)))
                        .count()
                })
                .unwrap_or(0);
            let spec = &slot.spec;
            let target = match spec.transport {
                Transport::Stdio => std::iter::once(spec.command.as_str())
                    .chain(spec.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                Transport::Http | Transport::Sse => spec.url.clone(),
                Transport::Local => "tools/tools.register.json".into(),
            };
            let mut row = json!({
                "id": spec.id,
                "transport": format!("{:?}", spec.transport).to_lowercase(),
                "target": target,
                "enabled": spec.enabled,
                "expose_all": spec.expose_all,
                "description": spec.description,
                "status": status,
                "reason": reason,
                "restarts": st.restarts,
                "tools": tools,
                "server": st.init.as_ref().and_then(|i| i.get("serverInfo")).cloned(),
            });
            if let Some(o) = &spec.oauth {
                row["oauth"] = oauth_json(slot, o.mode, reason.as_deref());
            }
            if with_stderr {
                row["stderr"] = json!(slot.stderr.lines());
            }
            row
        })
        .collect()
}

async fn overview(State(admin): S) -> Response {
    let gw = &admin.st;
    let config = gw.snapshot().config.clone();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "home": config.home,
        "editable": admin.opts.editable,
        "sessions": gw.rt.sessions.len(),
        "tools_listed": gw.snapshot().catalog.tools().len(),
        "hooks_active": gw.snapshot().chain.hooks().len() + gw.snapshot().chain.controls().len(),
        "audit_log": {"enabled": config.logs.enabled, "path": config.logs.path},
        "reloads": {
            "ok": gw.rt.reloads.ok.load(std::sync::atomic::Ordering::Relaxed),
            "failed": gw.rt.reloads.failed.load(std::sync::atomic::Ordering::Relaxed),
            "last_error": gw.rt.reloads.last_error.lock().clone(),
        },
        "upstreams": upstream_rows(&admin, false),
        "traffic": admin.metrics.summary(),
    }))
    .into_response()
}

async fn tools(State(admin): S) -> Response {
    let gw = &admin.st;
    let config = gw.snapshot().config.clone();
    let catalog = gw.snapshot().catalog.clone();
    let mut rows = Vec::new();
    let listed =
        |name: &str, slot: usize| catalog.tool(name).is_some_and(|r| r.slot() == Some(slot));
    let drift = sluice_config::drift::load(&config.home);
    for (i, slot) in catalog.slots.iter().enumerate() {
        let spec = &slot.spec;
        if spec.transport == Transport::Local {
            continue;
        }
        let lists = slot.state.lock().lists.clone();
        let Some(lists) = lists else { continue };
        for tool in &lists.tools {
            let Some(tname) = tool["name"].as_str() else {
                continue;
            };
            let curated: Vec<_> = config
                .expose
                .expose
                .iter()
                .filter(|e| e.upstream == spec.id && e.tool == tname)
                .collect();
            let base = json!({
                "upstream": spec.id, "tool": tname, "source": "upstream",
                "description": tool["description"],
            });
            if curated.is_empty() {
                let name = if spec.transparent {
                    tname.to_string()
                } else {
                    format!("{}_{tname}", spec.id)
                };
                let mut r = base.clone();
                r["name"] = json!(name);
                r["enabled"] = json!(spec.transparent || spec.expose_all);
                r["listed"] = json!(listed(&name, i));
                r["category"] = json!("");
                r["curated"] = json!(false);
                rows.push(r);
            }
            for e in curated {
                let mut r = base.clone();
                r["name"] = json!(e.name);
                r["enabled"] = json!(e.enabled);
                r["listed"] = json!(listed(&e.name, i));
                r["category"] = json!(e.category);
                r["curated"] = json!(true);
                r["drifted"] = json!(drift.get(&e.name).is_some_and(|m| m.drifted()));
                rows.push(r);
            }
        }
    }
    // Curated entries of upstreams that are not connected.
    for e in &config.expose.expose {
        let connected = catalog
            .slots
            .iter()
            .any(|s| s.spec.id == e.upstream && s.state.lock().lists.is_some());
        if !connected {
            rows.push(json!({
                "upstream": e.upstream, "tool": e.tool, "source": "upstream", "name": e.name,
                "enabled": e.enabled, "listed": false, "category": e.category, "curated": true,
                "description": null, "note": "its upstream is not connected",
            }));
        }
    }
    for t in &config.register.tools {
        let st = config
            .register
            .state
            .get(&t.id)
            .copied()
            .unwrap_or_default();
        rows.push(json!({
            "name": t.id, "tool": t.id, "upstream": "local", "source": "register",
            "title": t.name, "description": t.summary, "category": t.category,
            "enabled": !st.disabled, "hidden": st.hidden,
            "listed": catalog.tool(&t.id).is_some(),
        }));
    }
    let meta: Vec<Value> = catalog
        .tools()
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .and_then(|n| catalog.tool(n))
                .is_some_and(|r| matches!(r, Route::Gateway(_)))
        })
        .map(|t| json!({"name": t["name"], "description": t["description"]}))
        .collect();
    Json(json!({"tools": rows, "meta_tools": meta, "editable": admin.opts.editable}))
        .into_response()
}

async fn tools_set(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let source = b
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or("upstream");
    if source == "register" {
        let id = tri!(str_field(&b, "id"));
        let enabled = b.get("enabled").and_then(Value::as_bool);
        let hidden = b.get("hidden").and_then(Value::as_bool);
        let r = manage::tool_set(&home, id, enabled, hidden).map(|_| json!(id));
        return done(&admin, r).await;
    }
    let upstream = tri!(str_field(&b, "upstream"));
    let tool = tri!(str_field(&b, "tool"));
    let mut fields = Map::new();
    for k in ["enabled", "as", "category"] {
        if let Some(v) = b.get(k) {
            fields.insert(k.into(), v.clone());
        }
    }
    if b.contains_key("hidden") {
        return err(
            StatusCode::BAD_REQUEST,
            "only register tools can be hidden; disable an upstream tool instead",
        );
    }
    let r = manage::expose_set(&home, upstream, tool, fields).map(|_| json!(tool));
    done(&admin, r).await
}

async fn tools_add(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let r = manage::tool_add(&home, Value::Object(b)).map(|_| Value::Null);
    done(&admin, r).await
}

/// Accept a drifted curated tool: `{"name": "<as>"}`.
async fn tools_accept(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let name = b
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let r = manage::tool_accept(&home, &name).map(|_| json!(name));
    done(&admin, r).await
}

fn hook_row(h: &sluice_config::HookSpec, active: bool, raw: Option<&Value>) -> Value {
    let (kind, detail) = match &h.kind {
        HookKindSpec::Command { command, .. } => ("command", json!(command)),
        HookKindSpec::Process { command } => ("process", json!(command)),
        HookKindSpec::Http { url, .. } => ("http", json!(url)),
        HookKindSpec::Civic { url } => ("civic", json!(url)),
        HookKindSpec::Builtin { name, .. } => ("builtin", json!(name)),
    };
    json!({
        "id": h.id, "event": h.event.name(), "type": kind, "detail": detail,
        "matcher": h.matcher, "methods": h.methods, "enabled": h.enabled, "active": active,
        "timeout_s": h.timeout.as_secs_f64(),
        "on_error": format!("{:?}", h.on_error).to_lowercase(),
        "description": h.description, "entry": raw,
    })
}

async fn hooks(State(admin): S) -> Response {
    let gw = &admin.st;
    let config = gw.snapshot().config.clone();
    let chain = gw.snapshot().chain.clone();
    let raw: Value = std::fs::read_to_string(config.home.join("hooks/hooks.manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let raw_of = |id: &str| {
        raw["hooks"]
            .as_array()
            .and_then(|a| a.iter().find(|h| h["id"] == id))
    };
    let rows: Vec<Value> = config
        .hooks
        .hooks
        .iter()
        .map(|h| {
            let active = chain
                .hooks()
                .iter()
                .chain(chain.controls())
                .any(|c| c.id == h.id);
            hook_row(h, active, raw_of(&h.id))
        })
        .collect();
    Json(json!({"hooks": rows, "editable": admin.opts.editable})).into_response()
}

async fn hooks_add(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let r = manage::hook_add(&home, Value::Object(b)).map(|_| Value::Null);
    done(&admin, r).await
}

async fn hooks_set(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(enabled) = b.get("enabled").and_then(Value::as_bool) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"enabled\" (true or false) is required",
        );
    };
    let r = manage::hook_set(&home, id, enabled).map(|_| json!(id));
    done(&admin, r).await
}

async fn hooks_update(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(fields) = b.get("fields").and_then(Value::as_object) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"fields\" (an object) is required",
        );
    };
    let r = manage::hook_update(&home, id, fields.clone()).map(|_| json!(id));
    done(&admin, r).await
}

async fn hooks_move(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(to) = b.get("to").and_then(Value::as_u64) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"to\" (a position, 0 = head) is required",
        );
    };
    let r = manage::hook_move(&home, id, to as usize).map(|_| json!(id));
    done(&admin, r).await
}

/// Fire one sample event through one hook (enabled for the test even when it is off) and show
/// what it decided. Body: `{"id", "phase": "request"|"response", "method", "tool", "arguments",
/// "result"}`; all but `id` have defaults (a `tools/call`).
async fn hooks_try(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let config = admin.st.snapshot().config.clone();
    let Some(spec) = config.hooks.hooks.iter().find(|h| h.id == id) else {
        return err(StatusCode::NOT_FOUND, format!("no hook has the id {id:?}"));
    };
    let mut spec = spec.clone();
    spec.enabled = true;
    let (chain, warnings) = Chain::build(std::slice::from_ref(&spec), &config.home);
    let phase = b.get("phase").and_then(Value::as_str).unwrap_or("request");
    let method = b
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("tools/call")
        .to_string();
    let catalog = admin.st.snapshot().catalog.clone();
    let tool = b
        .get("tool")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            (method == "tools/call")
                .then(|| {
                    catalog.tools().first()?["name"]
                        .as_str()
                        .map(str::to_string)
                })
                .flatten()
        });
    let upstream = tool
        .as_deref()
        .and_then(|n| catalog.tool(n))
        .and_then(|r| catalog.slots.get(r.slot()?))
        .map(|s| s.spec.id.clone());
    let args = b.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let params = if method == "tools/call" {
        json!({"name": tool, "arguments": args})
    } else {
        b.get("params").cloned().unwrap_or_else(|| json!({}))
    };
    let request = Message::request(json!("try-1"), &method, Some(params));
    let ctx = Ctx {
        session_id: "admin-try",
        method: &method,
        tool_name: tool.as_deref(),
        upstream: upstream.as_deref(),
        era: "legacy",
        tool: tool.as_deref().and_then(|n| catalog.tool_definition(n)),
        principal: None,
        upstream_tool: None,
        tool_use_id: None,
        answers: None,
    };
    let mut trace = Trace::default();
    let run = async {
        if phase == "response" {
            let result = b.get("result").cloned().unwrap_or_else(
                || json!({"content": [{"type": "text", "text": "A sample result."}]}),
            );
            let reply = Message::response(json!("try-1"), result);
            match chain
                .response(&ctx, reply, Some(&request), 1, &mut trace)
                .await
            {
                Ok(m) => json!({"outcome": "forward", "message": m.into_value()}),
                Err(r) => {
                    json!({"outcome": "refuse", "reason": r.reason, "for_agent": r.for_agent})
                }
            }
        } else {
            match chain.request(&ctx, request.clone(), &mut trace).await.0 {
                RequestOutcome::Forward(m) => {
                    json!({"outcome": "forward", "message": m.into_value()})
                }
                RequestOutcome::Answer(m) => {
                    json!({"outcome": "answer", "message": m.into_value()})
                }
                RequestOutcome::Refuse(r) => {
                    json!({"outcome": "refuse", "reason": r.reason, "for_agent": r.for_agent})
                }
                RequestOutcome::Ask(m, asks) => {
                    let reasons: Vec<&str> = asks.iter().map(|a| a.reason.as_str()).collect();
                    json!({"outcome": "ask", "reason": reasons.join("; "), "message": m.into_value()})
                }
            }
        }
    };
    let limit = spec.timeout + Duration::from_secs(5);
    let result = tokio::time::timeout(limit, run).await;
    chain.shutdown().await;
    let Ok(mut out) = result else {
        return err(
            StatusCode::GATEWAY_TIMEOUT,
            "the hook did not answer in time",
        );
    };
    let records: Vec<Value> = trace
        .records
        .iter()
        .map(|r| json!({"id": &*r.id, "phase": r.phase.as_str(), "decision": r.decision, "reason": r.reason, "us": r.micros}))
        .collect();
    out["decision"] = match trace.records.first() {
        Some(r) => json!(r.decision),
        None => json!("not selected"),
    };
    out["hooks"] = json!(records);
    out["explain_reason"] = json!(trace.explain_reason);
    out["controls"] = Value::Object(trace.controls.clone());
    out["request"] = request.into_value();
    out["warnings"] = json!(warnings);
    Json(out).into_response()
}

async fn upstreams(State(admin): S) -> Response {
    Json(json!({"upstreams": upstream_rows(&admin, true), "editable": admin.opts.editable}))
        .into_response()
}

async fn upstreams_add(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let r = manage::upstream_add(&home, Value::Object(b)).map(|_| Value::Null);
    done(&admin, r).await
}

async fn upstreams_set(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(fields) = b.get("fields").and_then(Value::as_object) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"fields\" (an object) is required",
        );
    };
    if fields.contains_key("id") {
        return err(
            StatusCode::BAD_REQUEST,
            "an upstream's id cannot be changed",
        );
    }
    let r = manage::upstream_set(&home, id, fields.clone()).map(|_| json!(id));
    done(&admin, r).await
}

async fn upstreams_restart(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let slot = admin.st.snapshot().slot(id).cloned();
    match slot {
        None => err(
            StatusCode::NOT_FOUND,
            format!("no upstream has the id {id:?}"),
        ),
        Some(s) if s.restart().await => Json(json!({"ok": true, "result": id})).into_response(),
        Some(_) => err(
            StatusCode::CONFLICT,
            format!("upstream {id:?} is not running (it restarts by itself when it fails)"),
        ),
    }
}

/// Start a person's sign-in to an upstream with `"oauth": {"mode": "shared"}`: `{"id"}` →
/// `{"ok": true, "result": {"url"}}`, the authorization URL for the admin's browser (no secret
/// in it: `state` and the PKCE challenge). The authorization server sends the browser back to
/// the MCP listener's `/oauth/callback`, which stores the grant and starts the upstream.
async fn upstreams_connect(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(slot) = admin.st.snapshot().slot(id).cloned() else {
        return err(
            StatusCode::NOT_FOUND,
            format!("no upstream has the id {id:?}"),
        );
    };
    match slot.spec.oauth.as_ref().map(|o| o.mode) {
        None => {
            return err(
                StatusCode::CONFLICT,
                format!("upstream {id:?} does not sign in with OAuth (its entry has no \"oauth\")"),
            )
        }
        Some(OAuthMode::ClientCredentials) => {
            return err(
                StatusCode::CONFLICT,
                format!(
                    "upstream {id:?} signs in with client credentials: it gets its tokens by itself, no person signs in"
                ),
            )
        }
        Some(OAuthMode::Shared) => {}
    }
    let (Some(identity), Some(ctx)) = (slot.identity(), admin.st.rt.slot_env.oauth.as_ref()) else {
        let why = match slot.status() {
            Status::Down(r) => r,
            _ => "its OAuth identity could not be made".into(),
        };
        return err(
            StatusCode::CONFLICT,
            format!("upstream {id:?} cannot sign in: {why}"),
        );
    };
    match identity.start_sign_in(&ctx.redirect_uri()).await {
        // The page opens it: only a web address (an authorization server's metadata names the
        // endpoint, and discovery does not check its scheme).
        Ok(started) if !is_web_url(&started.url) => err(
            StatusCode::BAD_GATEWAY,
            format!("signing in to upstream {id:?} could not start: the authorization endpoint is not an http(s) URL"),
        ),
        Ok(started) => Json(json!({"ok": true, "result": {"url": started.url}})).into_response(),
        Err(e) => err(
            StatusCode::BAD_GATEWAY,
            format!("signing in to upstream {id:?} could not start: {e}"),
        ),
    }
}

/// Is `url` an `http://` or `https://` address (what a browser may be sent to)?
fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

async fn log_set(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let Some(enabled) = b.get("enabled").and_then(Value::as_bool) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"enabled\" (true or false) is required",
        );
    };
    let r = manage::log_set(&home, enabled).map(|p| json!(p));
    done(&admin, r).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_web_addresses_are_opened() {
        assert!(super::is_web_url(
            "https://as.example.com/authorize?state=x"
        ));
        assert!(super::is_web_url("HTTP://localhost:3001/authorize"));
        assert!(!super::is_web_url("javascript:alert(1)"));
        assert!(!super::is_web_url("data:text/html,hi"));
        assert!(!super::is_web_url("http:/x"));
        assert!(!super::is_web_url(""));
    }
}
