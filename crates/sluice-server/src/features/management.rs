//! The management tools (opt-in, `management_tools` in sluice.json): toolfunnel's `tf_*` set
//! under Sluice names, over the same operations as the CLI and the admin API
//! (`sluice_config::manage`). A good change is applied at once through the one apply path, so
//! the answer means "live"; a refused one is an `isError` result naming file and field.

use crate::control::{self, Applier};
use crate::gateway_tools::ManageOp;
use crate::state::State;
use serde_json::{json, Map, Value};
use sluice_config::manage::{self, ManageError};
use sluice_core::RpcError;
use std::sync::Arc;

fn text(v: Value, is_error: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": if v.is_string() { v.as_str().unwrap_or("").to_string() } else { v.to_string() }}]});
    if is_error {
        r["isError"] = json!(true);
    } else if v.is_object() {
        r["structuredContent"] = v;
    }
    r
}

/// Run one management operation.
pub(crate) async fn call(st: &Arc<State>, op: ManageOp, args: &Value) -> Result<Value, RpcError> {
    let snap = st.snapshot();
    let home = snap.config.home.clone();
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    let b = |k: &str| args.get(k).and_then(Value::as_bool);
    let entry = || args.get("entry").cloned().unwrap_or(Value::Null);
    let result: Result<Value, ManageError> = match op {
        ManageOp::List => {
            let config = &snap.config;
            let kind = s("kind");
            let mut out = Map::new();
            if kind.as_deref().is_none_or(|k| k == "tools") {
                let tools: Vec<Value> = config.register.tools.iter().map(|t| {
                    let st = config.register.state.get(&t.id).copied().unwrap_or_default();
                    json!({"id": t.id, "name": t.name, "category": t.category, "summary": t.summary, "enabled": !st.disabled, "hidden": st.hidden})
                }).collect();
                out.insert("tools".into(), json!(tools));
            }
            if kind.as_deref().is_none_or(|k| k == "hooks") {
                let hooks: Vec<Value> = config.hooks.hooks.iter().map(|h| json!({"id": h.id, "event": h.event.name(), "enabled": h.enabled, "description": h.description})).collect();
                out.insert("hooks".into(), json!(hooks));
            }
            if kind.as_deref().is_none_or(|k| k == "upstreams") {
                let slots = &snap.slots;
                let ups: Vec<Value> = slots.iter().map(|s| json!({"id": s.spec.id, "enabled": s.spec.enabled, "status": format!("{:?}", s.status())})).collect();
                out.insert("upstreams".into(), json!(ups));
            }
            return Ok(text(Value::Object(out), false));
        }
        ManageOp::ToolAdd => manage::tool_add(&home, entry()).map(|_| json!("tool added")),
        ManageOp::ToolSet => match s("id") {
            Some(id) => manage::tool_set(&home, &id, b("enabled"), b("hidden"))
                .map(|_| json!("tool updated")),
            None => return Err(RpcError::invalid_params("tool_set needs id")),
        },
        ManageOp::HookAdd => manage::hook_add(&home, entry()).map(|_| json!("hook added")),
        ManageOp::HookSet => match (s("id"), b("enabled")) {
            (Some(id), Some(e)) => manage::hook_set(&home, &id, e).map(|_| json!("hook updated")),
            _ => return Err(RpcError::invalid_params("hook_set needs id and enabled")),
        },
        ManageOp::UpstreamAdd => {
            manage::upstream_add(&home, entry()).map(|_| json!("upstream added"))
        }
        ManageOp::UpstreamSet => match (s("id"), args.get("fields").and_then(Value::as_object)) {
            (Some(id), Some(f)) => {
                manage::upstream_set(&home, &id, f.clone()).map(|_| json!("upstream updated"))
            }
            _ => return Err(RpcError::invalid_params("upstream_set needs id and fields")),
        },
        ManageOp::Log => match b("enabled") {
            Some(e) => manage::log_set(&home, e).map(|p| {
                json!(format!(
                    "audit log {} ({})",
                    if e { "on" } else { "off" },
                    p.display()
                ))
            }),
            None => return Err(RpcError::invalid_params("log needs enabled")),
        },
    };
    match result {
        // Apply now, so the answer means the change is live.
        Ok(v) => match control::apply_tree(st, Applier::Management).await {
            Ok(_) => Ok(text(v, false)),
            Err(errors) => Ok(text(
                json!(format!(
                    "the change was written, but the tree cannot be applied; the running configuration is kept:\n{errors}"
                )),
                true,
            )),
        },
        Err(e) => Ok(text(json!(e.to_string()), true)),
    }
}
