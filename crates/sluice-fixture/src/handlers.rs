//! Request dispatch: one function per MCP method (tools are in [`crate::tools`]).

use serde_json::{json, Map, Value};

use crate::catalog;
use crate::protocol::{self, RpcError, METHOD_NOT_FOUND};
use crate::session::Ctx;

/// The capabilities this fixture announces.
fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": true },
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "logging": {},
        "completions": {}
    })
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("Missing or invalid string param: {key}")))
}

fn object_param(params: &Value, key: &str) -> Result<Map<String, Value>, RpcError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(RpcError::invalid_params(format!("{key} must be an object"))),
    }
}

/// A list result: `{<key>: page, nextCursor?}`.
fn list(ctx: &Ctx, key: &str, items: Vec<Value>, params: &Value) -> Result<Value, RpcError> {
    let (page, next) = catalog::paginate(
        items,
        params.get("cursor"),
        ctx.session.fixture.config.page_size,
    )?;
    let mut result = json!({ key: page });
    if let Some(next) = next {
        result["nextCursor"] = json!(next);
    }
    Ok(result)
}

/// Handle request `method`, returning its result (cancellation is handled by the caller).
pub async fn handle(ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
    match method {
        "initialize" => {
            let requested = params.get("protocolVersion").and_then(Value::as_str);
            let version = protocol::negotiate(requested);
            let client_caps = params.get("capabilities").cloned().unwrap_or(json!({}));
            ctx.session.set_initialized(version, client_caps);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": {
                    "name": ctx.session.fixture.config.name,
                    "version": env!("CARGO_PKG_VERSION")
                }
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => list(ctx, "tools", ctx.session.fixture.tools(), &params),
        "tools/call" => {
            let name = str_param(&params, "name")?.to_string();
            let args = object_param(&params, "arguments")?;
            let progress_token = params
                .get("_meta")
                .and_then(|m| m.get("progressToken"))
                .cloned();
            crate::tools::call(ctx, &name, args, progress_token).await
        }
        "prompts/list" => list(ctx, "prompts", catalog::prompts(), &params),
        "prompts/get" => {
            let name = str_param(&params, "name")?;
            catalog::get_prompt(name, &object_param(&params, "arguments")?)
        }
        "resources/list" => list(ctx, "resources", catalog::resources(), &params),
        "resources/templates/list" => list(
            ctx,
            "resourceTemplates",
            catalog::resource_templates(),
            &params,
        ),
        "resources/read" => catalog::read_resource(str_param(&params, "uri")?),
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = str_param(&params, "uri")?;
            ctx.session.subscribe(uri, method == "resources/subscribe");
            Ok(json!({}))
        }
        "logging/setLevel" => {
            ctx.session.set_log_level(str_param(&params, "level")?)?;
            Ok(json!({}))
        }
        "completion/complete" => {
            let reference = params.get("ref").cloned().unwrap_or(Value::Null);
            let argument = params.get("argument").cloned().unwrap_or(Value::Null);
            let values = catalog::complete(
                &reference,
                argument.get("name").and_then(Value::as_str).unwrap_or(""),
                argument.get("value").and_then(Value::as_str).unwrap_or(""),
            );
            Ok(json!({
                "completion": { "values": values, "total": values.len(), "hasMore": false }
            }))
        }
        _ => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
    }
}
