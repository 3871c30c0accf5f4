//! The management tools (opt-in, `management_tools` in sluice.json): seed 003's `tf_*` set under
//! Sluice names, over the same operations as the CLI and the admin API
//! (`sluice_config::manage`). A good change is applied at once, so the answer means "live"; a
//! refused one is an `isError` result naming file and field.

use crate::gateway::{Face, Gateway};
use serde_json::{json, Map, Value};
use sluice_config::manage::{self, ManageError};
use sluice_core::RpcError;
use std::sync::Arc;

fn tool(prefix: &str, op: &str, description: &str, schema: Value) -> Value {
    json!({"name": format!("{prefix}_{op}"), "description": description, "inputSchema": schema})
}

/// The management tool definitions.
pub fn tools(prefix: &str) -> Vec<Value> {
    let entry = json!({"type": "object", "properties": {"entry": {"type": "object", "description": "The entry, in the file's own format."}}, "required": ["entry"]});
    vec![
        tool(
            prefix,
            "list",
            "List the tree's register tools (with their overlay state), hooks and upstreams.",
            json!({"type": "object", "properties": {"kind": {"type": "string", "enum": ["tools", "hooks", "upstreams"]}}}),
        ),
        tool(
            prefix,
            "tool_add",
            "Add a first-party tool to tools/tools.register.json.",
            entry.clone(),
        ),
        tool(
            prefix,
            "tool_set",
            "Enable, disable, hide or unhide a register tool.",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "enabled": {"type": "boolean"}, "hidden": {"type": "boolean"}}, "required": ["id"]}),
        ),
        tool(
            prefix,
            "hook_add",
            "Add a hook to hooks/hooks.manifest.json.",
            entry.clone(),
        ),
        tool(
            prefix,
            "hook_set",
            "Turn a hook on or off.",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "enabled": {"type": "boolean"}}, "required": ["id", "enabled"]}),
        ),
        tool(
            prefix,
            "upstream_add",
            "Add an upstream MCP server to mcp/expose.json.",
            entry,
        ),
        tool(
            prefix,
            "upstream_set",
            "Change fields of an upstream (enabled, expose_all, …).",
            json!({"type": "object", "properties": {"id": {"type": "string"}, "fields": {"type": "object"}}, "required": ["id", "fields"]}),
        ),
        tool(
            prefix,
            "log",
            "Turn the audit log on or off.",
            json!({"type": "object", "properties": {"enabled": {"type": "boolean"}}, "required": ["enabled"]}),
        ),
    ]
}

fn text(v: Value, is_error: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": if v.is_string() { v.as_str().unwrap_or("").to_string() } else { v.to_string() }}]});
    if is_error {
        r["isError"] = json!(true);
    } else if v.is_object() {
        r["structuredContent"] = v;
    }
    r
}

/// Run one management operation (`op` without the prefix).
pub async fn call(gw: &Arc<Gateway>, op: &str, args: &Value) -> Result<Value, RpcError> {
    let home = gw.config().home.clone();
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    let b = |k: &str| args.get(k).and_then(Value::as_bool);
    let entry = || args.get("entry").cloned().unwrap_or(Value::Null);
    let result: Result<Value, ManageError> = match op {
        "list" => {
            let config = gw.config();
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
                let slots = gw.slots();
                let ups: Vec<Value> = slots.iter().map(|s| json!({"id": s.spec.id, "enabled": s.spec.enabled, "status": format!("{:?}", s.status())})).collect();
                out.insert("upstreams".into(), json!(ups));
            }
            return Ok(text(Value::Object(out), false));
        }
        "tool_add" => manage::tool_add(&home, entry()).map(|_| json!("tool added")),
        "tool_set" => match s("id") {
            Some(id) => manage::tool_set(&home, &id, b("enabled"), b("hidden"))
                .map(|_| json!("tool updated")),
            None => return Err(RpcError::invalid_params("tool_set needs id")),
        },
        "hook_add" => manage::hook_add(&home, entry()).map(|_| json!("hook added")),
        "hook_set" => match (s("id"), b("enabled")) {
            (Some(id), Some(e)) => manage::hook_set(&home, &id, e).map(|_| json!("hook updated")),
            _ => return Err(RpcError::invalid_params("hook_set needs id and enabled")),
        },
        "upstream_add" => manage::upstream_add(&home, entry()).map(|_| json!("upstream added")),
        "upstream_set" => match (s("id"), args.get("fields").and_then(Value::as_object)) {
            (Some(id), Some(f)) => {
                manage::upstream_set(&home, &id, f.clone()).map(|_| json!("upstream updated"))
            }
            _ => return Err(RpcError::invalid_params("upstream_set needs id and fields")),
        },
        "log" => match b("enabled") {
            Some(e) => manage::log_set(&home, e).map(|p| {
                json!(format!(
                    "audit log {} ({})",
                    if e { "on" } else { "off" },
                    p.display()
                ))
            }),
            None => return Err(RpcError::invalid_params("log needs enabled")),
        },
        other => {
            return Err(RpcError::invalid_params(format!(
                "Unknown management tool: {other}"
            )))
        }
    };
    match result {
        // Apply now, so the answer means the change is live.
        Ok(v) => match gw.apply_tree(Face::Management).await {
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
