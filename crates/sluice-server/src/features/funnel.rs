//! The funnel: three meta-tools — `<prefix>_list_tools({category})` (short briefs),
//! `<prefix>_tool_instructions({name})` and `<prefix>_run_tool({name, args})` — that reach every
//! first-party register tool and every tool of every connected upstream, so a client can work
//! with hundreds of tools through three. Pure over the catalog and the access rules: a run is
//! a rewrite into the real `tools/call`, which the driver resolves and runs through the same
//! hooks as a direct call, under the real tool name.

use crate::catalog::{Catalog, FunnelTool, Route};
use crate::gateway_tools::GatewayTool;
use serde_json::{json, Value};
use sluice_auth::Policy;
use sluice_core::{Message, Principal, RpcError};
use sluice_hooks::builtin::explain::EXPLAIN_REASON_META;

/// What a meta-tool call comes to.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The result (or error) of `list_tools` / `tool_instructions`.
    Reply(Result<Value, RpcError>),
    /// `run_tool`: run this `tools/call` instead (same id).
    Run(Message),
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

/// Answer a call to one of the meta-tools (`tool` is not a management operation).
pub(crate) fn answer(
    catalog: &Catalog,
    policy: &Policy,
    principal: Option<&Principal>,
    tool: GatewayTool,
    msg: &Message,
) -> Answer {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let name = msg.param_str("name").unwrap_or("");
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    // The funnel shows and runs only what the caller's access rules let it see.
    let allowed = |t: &FunnelTool| policy.allows(sluice_auth::Item::Tool, &t.name, principal);
    match tool {
        GatewayTool::ListTools => {
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
            Answer::Reply(Ok(result(json!({"tools": briefs}))))
        }
        GatewayTool::ToolInstructions => {
            let Some(target) = args.get("name").and_then(Value::as_str) else {
                return Answer::Reply(Err(RpcError::invalid_params(format!("{name} needs name"))));
            };
            let Some(t) = find(catalog, target).filter(|t| allowed(t)) else {
                return Answer::Reply(Err(RpcError::invalid_params(format!(
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
            Answer::Reply(Ok(json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"name": t.name, "category": t.category, "source": t.upstream, "tool": t.tool}
            })))
        }
        GatewayTool::RunTool => {
            let Some(target) = args.get("name").and_then(Value::as_str) else {
                return Answer::Reply(Err(RpcError::invalid_params(format!("{name} needs name"))));
            };
            // A funnel tool, else any upstream tool the catalog routes (progressive discovery
            // without the funnel runs the listed tools through this tool).
            let real = match find(catalog, target) {
                Some(t) => allowed(t).then_some(t.name.as_str()),
                None => matches!(catalog.tool(target), Some(Route::Upstream { .. }))
                    .then_some(target)
                    .filter(|n| policy.allows(sluice_auth::Item::Tool, n, principal)),
            };
            let Some(real) = real else {
                return Answer::Reply(Err(RpcError::invalid_params(format!(
                    "Unknown tool: {target}"
                ))));
            };
            // The real call, under the real name.
            let mut params =
                json!({"name": real, "arguments": args.get("args").cloned().unwrap_or(json!({}))});
            if let Some(meta) = msg.param("_meta") {
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
            Answer::Run(Message::request(id, "tools/call", Some(params)))
        }
        GatewayTool::Manage(_) | GatewayTool::Connections | GatewayTool::SearchTools => {
            Answer::Reply(Err(RpcError::internal(
                "a management, connections or search tool is not a funnel meta-tool",
            )))
        }
    }
}

/// A funnel tool by its name, or a register tool by its display name.
fn find<'a>(catalog: &'a Catalog, name: &str) -> Option<&'a FunnelTool> {
    let tools = catalog.funnel_tools();
    tools.iter().find(|t| t.name == name).or_else(|| {
        tools.iter().find(|t| {
            t.upstream == "local" && t.tool.get("title").and_then(Value::as_str) == Some(name)
        })
    })
}
