//! The admin JSON API: what the page shows (overview, tools, hooks, upstreams and their OAuth
//! sign-in state; the traffic and the audit log are in `traffic.rs`), the management
//! operations, each through `sluice_config::manage`, and the start of an upstream's sign-in.

use super::reply::{body_json, done, err, home, str_field, tri, S};
use super::upstreams::upstream_rows;
use super::Admin;
use crate::catalog::Route;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use sluice_config::manage;
use sluice_config::{HookKindSpec, Transport};
use sluice_core::Message;
use sluice_hooks::{Chain, Ctx, RequestOutcome, Trace};
use std::sync::Arc;
use std::time::Duration;

/// The `/api` routes.
pub(crate) fn routes() -> Router<Arc<Admin>> {
    use super::upstreams::{
        upstreams, upstreams_add, upstreams_connect, upstreams_restart, upstreams_set,
    };
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

/// Each endpoint of `mcp/endpoints.json`: its path, what it lists, its live sessions.
fn endpoint_rows(st: &crate::state::State) -> Vec<Value> {
    let snap = st.snapshot();
    let sessions = st.rt.sessions().all();
    snap.endpoints
        .iter()
        .filter_map(|e| {
            let def = e.endpoint.as_ref()?;
            let live = sessions
                .iter()
                .filter(|s| s.init.endpoint.as_deref() == Some(def.name.as_str()))
                .count();
            Some(json!({
                "name": def.name,
                "path": format!("/mcp/{}", def.name),
                "description": def.description,
                "tools_listed": e.catalog.tools().len(),
                "sessions": live,
                "discovery": if e.settings().discovery == sluice_config::Discovery::Search { "search" } else { "all" },
                "hooks": def.hooks.len(),
                "rules": def.rules.len(),
            }))
        })
        .collect()
}

async fn overview(State(admin): S) -> Response {
    let st = &admin.st;
    let config = st.snapshot().config.clone();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "home": config.home,
        "editable": admin.opts.editable,
        "sessions": st.rt.sessions().len(),
        "tools_listed": st.snapshot().catalog.tools().len(),
        "hooks_active": st.snapshot().chain.hooks().len() + st.snapshot().chain.controls().len(),
        "audit_log": {"enabled": config.logs.enabled, "path": config.logs.path},
        "reloads": {
            "ok": st.rt.reloads().ok.load(std::sync::atomic::Ordering::Relaxed),
            "failed": st.rt.reloads().failed.load(std::sync::atomic::Ordering::Relaxed),
            "last_error": st.rt.reloads().last_error.lock().clone(),
        },
        "upstreams": upstream_rows(&admin, false),
        "endpoints": endpoint_rows(st),
        "traffic": admin.metrics.summary(),
        "overload": st.rt.overload().counts(st.snapshot().settings()).to_json(),
    }))
    .into_response()
}

async fn tools(State(admin): S) -> Response {
    let st = &admin.st;
    let config = st.snapshot().config.clone();
    let catalog = st.snapshot().catalog.clone();
    let mut rows = Vec::new();
    // Read from disk: what the gateway recorded a moment ago, before the watcher applies it.
    let pins = sluice_config::pins::PinFile::load(&config.home).unwrap_or_default();
    let listed =
        |name: &str, slot: usize| catalog.tool(name).is_some_and(|r| r.slot() == Some(slot));
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
            let mut base = json!({
                "upstream": spec.id, "tool": tname, "source": "upstream",
                "description": tool["description"],
            });
            let pin = super::pins::row_state(&pins, &spec.id, tname);
            if let (Some(b), Value::Object(p)) = (base.as_object_mut(), pin) {
                b.extend(p);
            }
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
                r["drifted"] = json!(r["pin"] == "changed");
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
        HookKindSpec::McpTool { server, tool, .. } => {
            ("mcp_tool", json!(format!("{server}/{tool}")))
        }
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
    let st = &admin.st;
    let config = st.snapshot().config.clone();
    let chain = st.snapshot().chain.clone();
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
    let (mut chain, warnings) = Chain::build(std::slice::from_ref(&spec), &config.home);
    if let Some(tools) = admin.st.snapshot().chain.tool_runner() {
        chain = chain.with_tool_runner(tools);
    }
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
        upstream_sub: None,
        tool_use_id: None,
        answers: None,
        catalog: Some(&*catalog),
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
