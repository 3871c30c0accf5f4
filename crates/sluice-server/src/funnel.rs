//! The funnel: three meta-tools — `<prefix>_list_tools({category})` (short briefs),
//! `<prefix>_tool_instructions({name})` and `<prefix>_run_tool({name, args})` — that reach every
//! first-party register tool and every tool of every connected upstream, so a client can work
//! with hundreds of tools through three. A run goes through the same hooks as a direct call,
//! under the real tool name.

use crate::gateway::{Gateway, Sink};
use crate::router::Outcome;
use crate::session::Session;
use serde_json::{json, Value};
use sluice_core::{Message, RpcError};
use sluice_hooks::builtin::explain::EXPLAIN_REASON_META;
use std::sync::Arc;

/// The three meta-tool definitions.
pub fn meta_tools(prefix: &str) -> Vec<Value> {
    vec![
        json!({
            "name": format!("{prefix}_list_tools"),
            "title": "List tools",
            "description": "List the tools available through this gateway as short briefs (name, summary, category). Optionally filter by an exact category. Then call the tool_instructions meta-tool for one tool's full usage, and run_tool to run it.",
            "inputSchema": {"type": "object", "properties": {"category": {"type": "string", "description": "Only tools of this category (exact match)."}}}
        }),
        json!({
            "name": format!("{prefix}_tool_instructions"),
            "title": "Tool instructions",
            "description": "Return the full usage instructions of one tool (by name), including its input schema.",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string", "description": "The tool's name as listed."}}, "required": ["name"]}
        }),
        json!({
            "name": format!("{prefix}_run_tool"),
            "title": "Run tool",
            "description": "Run one tool by name with its arguments (an object) and return its result.",
            "inputSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "The tool's name as listed."},
                "args": {"type": "object", "description": "The tool's arguments."}
            }, "required": ["name"]}
        }),
    ]
}

fn summary_of(tool: &Value) -> String {
    let d = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    d.lines().next().unwrap_or("").to_string()
}

fn result(v: Value) -> Value {
    json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v})
}

/// Answer a call to one of the meta-tools.
pub async fn call(gw: &Arc<Gateway>, session: &Arc<Session>, msg: Message, sink: &Sink) -> Outcome {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let catalog = gw.catalog();
    let prefix = catalog
        .funnel_prefix()
        .or(catalog.management_prefix())
        .unwrap_or("sluice")
        .to_string();
    let name = msg.param_str("name").unwrap_or("").to_string();
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    let reply = |r: Result<Value, RpcError>| match r {
        Ok(v) => Outcome::Reply(Message::response(id.clone(), v)),
        Err(e) => Outcome::Reply(Message::error(id.clone(), &e)),
    };
    let op = name.strip_prefix(&format!("{prefix}_")).unwrap_or("");
    // The funnel shows and runs only what the caller's access rules let it see.
    let policy = gw.policy();
    let principal = session.principal();
    let allowed = |t: &crate::catalog::FunnelTool| {
        policy.allows(sluice_auth::Item::Tool, &t.name, principal.as_deref())
    };
    match op {
        "list_tools" => {
            let category = args.get("category").and_then(Value::as_str);
            let briefs: Vec<Value> = catalog
                .funnel_tools()
                .iter()
                .filter(|t| category.is_none_or(|c| t.category == c) && allowed(t))
                .map(|t| {
                    json!({
                        "name": t.name,
                        "summary": summary_of(&t.tool),
                        "category": t.category,
                        "source": t.upstream,
                    })
                })
                .collect();
            reply(Ok(result(json!({"tools": briefs}))))
        }
        "tool_instructions" => {
            let Some(target) = args.get("name").and_then(Value::as_str) else {
                return reply(Err(RpcError::invalid_params(format!("{name} needs name"))));
            };
            let Some(t) = find(&catalog, target).filter(|t| allowed(t)) else {
                return reply(Err(RpcError::invalid_params(format!(
                    "Unknown tool: {target}"
                ))));
            };
            let mut text = t
                .tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(schema) = t.tool.get("inputSchema") {
                text.push_str("\n\nInput schema:\n");
                text.push_str(&serde_json::to_string_pretty(schema).unwrap_or_default());
            }
            reply(Ok(json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"name": t.name, "category": t.category, "source": t.upstream, "tool": t.tool}
            })))
        }
        "run_tool" => {
            let Some(target) = args.get("name").and_then(Value::as_str) else {
                return reply(Err(RpcError::invalid_params(format!("{name} needs name"))));
            };
            let Some(t) = find(&catalog, target).filter(|t| allowed(t)) else {
                return reply(Err(RpcError::invalid_params(format!(
                    "Unknown tool: {target}"
                ))));
            };
            // The real call, under the real name, through the whole pipeline (hooks included).
            let mut params = json!({"name": t.name, "arguments": args.get("args").cloned().unwrap_or(json!({}))});
            if let Some(meta) = msg.params().and_then(|p| p.get("_meta")) {
                params["_meta"] = meta.clone();
                // The explain hook took the reason off the meta-call; the real call carries it
                // again, so the hooks see the same call as a direct one.
                if let (Some(reason), Some(a)) = (
                    meta.get(EXPLAIN_REASON_META),
                    params["arguments"].as_object_mut(),
                ) {
                    a.entry("reason").or_insert(reason.clone());
                }
            }
            let inner = Message::request(id.clone(), "tools/call", Some(params));
            Box::pin(crate::pipeline::client_request(gw, session, inner, sink)).await
        }
        _ if catalog.management_prefix().is_some() => {
            reply(crate::management::call(gw, op, &args).await)
        }
        _ => reply(Err(RpcError::invalid_params(format!(
            "Unknown tool: {name}"
        )))),
    }
}

/// A funnel tool by its name, or a register tool by its display name.
fn find<'a>(
    catalog: &'a crate::catalog::Catalog,
    name: &str,
) -> Option<&'a crate::catalog::FunnelTool> {
    let tools = catalog.funnel_tools();
    tools.iter().find(|t| t.name == name).or_else(|| {
        tools.iter().find(|t| {
            t.upstream == "local" && t.tool.get("title").and_then(Value::as_str) == Some(name)
        })
    })
}
