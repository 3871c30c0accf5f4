//! Request dispatch: [`spawn_request`] runs a session's request (the transports call it with
//! the session), and one function per MCP method (tools are in [`crate::tools`]), for both
//! eras. Modern (2026-07-28) requests also get `server/discover` and `subscriptions/listen`,
//! lose the handshake-era methods, and have their results completed with `resultType`, the
//! `io.modelcontextprotocol/serverInfo` stamp and, where cacheable, `ttlMs`/`cacheScope`.
//! With `--skills`, both eras also get the Skills extension's methods and the skill files
//! (see [`crate::skills`]).

use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::catalog;
use crate::mrtr::AskError;
use crate::protocol::{
    self, id_key, RpcError, META_SERVER_INFO, META_SUBSCRIPTION_ID, RESOURCE_NOT_FOUND,
};
use crate::session::{Ctx, Era, Filter, Out, Session};
use crate::skills;

/// Methods whose complete modern results carry caching hints (`server/utilities/caching`).
const CACHEABLE: [&str; 8] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "skills/list",
    "skills/get",
];

/// The capabilities this fixture announces.
fn capabilities(ctx: &Ctx) -> Value {
    let mut caps = json!({
        "tools": { "listChanged": true },
        "prompts": { "listChanged": true },
        "resources": { "subscribe": true, "listChanged": true },
        "logging": {},
        "completions": {}
    });
    let mut extensions = Map::new();
    if ctx.session.fixture.config.tasks {
        if ctx.is_modern() {
            extensions.insert(crate::tasks::EXTENSION.into(), json!({}));
        } else {
            caps["tasks"] = crate::task_methods::legacy_capability();
        }
    }
    if ctx.session.fixture.skills.is_some() {
        extensions.insert(skills::EXTENSION.into(), skills::capability());
    }
    if !extensions.is_empty() {
        caps["extensions"] = Value::Object(extensions);
    }
    caps
}

/// `{name, version}` of this server.
fn server_info(ctx: &Ctx) -> Value {
    json!({ "name": ctx.session.fixture.config.name, "version": env!("CARGO_PKG_VERSION") })
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

/// Start handling request `id` of `session` in `era`; its related messages and final response
/// arrive on the returned channel. [`Session::cancel`] (or `notifications/cancelled`) for `id`
/// drops the handler and yields `Out::Final(None)`.
pub(crate) fn spawn_request(
    session: &Arc<Session>,
    id: Value,
    method: String,
    params: Value,
    era: Era,
) -> mpsc::UnboundedReceiver<Out> {
    let (tx, rx) = mpsc::unbounded_channel();
    let key = id_key(&id);
    let mut cancel_rx = session.track_request(key.clone());
    let session = session.clone();
    tokio::spawn(async move {
        let ctx = Ctx::new(session.clone(), id.clone(), era, tx.clone());
        let outcome = tokio::select! {
            r = handle(&ctx, &method, params) => Some(r),
            _ = cancel_rx.wait_for(|c| *c) => None,
        };
        drop(ctx);
        session.untrack_request(&key);
        let msg = match outcome {
            Some(Ok(result)) => Some(protocol::response(&id, result)),
            Some(Err(e)) => Some(protocol::error_response(&id, &e)),
            None => {
                eprintln!("sluice-fixture: request {key} ({method}) cancelled");
                None
            }
        };
        let _ = tx.send(Out::Final(msg));
    });
    rx
}

/// Handle request `method` in the request's era, returning its result (cancellation is
/// handled by the caller).
pub(crate) async fn handle(ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
    if let Some(r) = crate::task_methods::handle(ctx, method, &params).await {
        return r.map(|result| match ctx.is_modern() {
            true => decorate(ctx, method, result),
            false => result,
        });
    }
    if ctx.is_modern() {
        let result = modern(ctx, method, params).await?;
        return Ok(decorate(ctx, method, result));
    }
    match method {
        "initialize" => {
            let requested = params.get("protocolVersion").and_then(Value::as_str);
            let version = protocol::negotiate(requested);
            let client_caps = params.get("capabilities").cloned().unwrap_or(json!({}));
            ctx.session.set_initialized(version, client_caps);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": capabilities(ctx),
                "serverInfo": server_info(ctx)
            }))
        }
        "ping" => Ok(json!({})),
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = str_param(&params, "uri")?;
            ctx.session.subscribe(uri, method == "resources/subscribe");
            Ok(json!({}))
        }
        "logging/setLevel" => {
            ctx.session.set_log_level(str_param(&params, "level")?)?;
            Ok(json!({}))
        }
        _ => common(ctx, method, params).await,
    }
}

/// The methods both eras share.
async fn common(ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
    match method {
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
            if name == catalog::INPUT_REQUIRED_PROMPT {
                return input_required_prompt(ctx).await;
            }
            catalog::get_prompt(name, &object_param(&params, "arguments")?)
        }
        "resources/list" => {
            let mut resources = catalog::resources();
            if let Some(tree) = ctx.session.fixture.skill_tree() {
                resources.extend(tree.resources());
            }
            list(ctx, "resources", resources, &params)
        }
        "resources/templates/list" => list(
            ctx,
            "resourceTemplates",
            catalog::resource_templates(),
            &params,
        ),
        "resources/read" => {
            let uri = str_param(&params, "uri")?;
            if let Some(tree) = ctx.session.fixture.skill_tree() {
                if uri.starts_with(skills::SCHEME) {
                    // -32602 in both eras, as the extension says for a skill file not served.
                    return tree.read(uri);
                }
            }
            catalog::read_resource(uri).map_err(|e| {
                if ctx.is_modern() && e.code == RESOURCE_NOT_FOUND {
                    // 2026-07-28: "resource not found" is -32602 (SEP-2164), with the URI.
                    RpcError::invalid_params(e.message).with_data(json!({ "uri": uri }))
                } else {
                    e
                }
            })
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
        m if skills::METHODS.contains(&m) => skill_method(ctx, m, &params),
        _ => Err(RpcError::method_not_found(method)),
    }
}

/// `skills/list`, `skills/get` and `resources/directory/read` (`-32601` without `--skills`).
fn skill_method(ctx: &Ctx, method: &str, params: &Value) -> Result<Value, RpcError> {
    let Some(tree) = ctx.session.fixture.skill_tree() else {
        return Err(RpcError::method_not_found(method));
    };
    match method {
        "skills/list" => list(ctx, "skills", tree.entries(), params),
        "skills/get" => Ok(json!({ "skill": tree.get(str_param(params, "uri")?)? })),
        _ => list(
            ctx,
            "resources",
            tree.directory(str_param(params, "uri")?)?,
            params,
        ),
    }
}

/// The modern-era dispatch (the envelope was checked by the transport).
async fn modern(ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
    match method {
        "server/discover" => Ok(json!({
            "supportedVersions": ctx.session.fixture.supported_versions(),
            "capabilities": capabilities(ctx),
            "instructions": "Sluice's fixture MCP server: conformance test tools, prompts and \
                             resources, plus echo, add, slow and friends for gateway tests."
        })),
        "subscriptions/listen" => listen(ctx, &params).await,
        m if ctx.session.fixture.serves_modern(m) => common(ctx, method, params).await,
        _ => Err(RpcError::method_not_found(method)),
    }
}

/// `subscriptions/listen`: acknowledge, then forward the changes the client asked for until the
/// stream is cancelled (closed on HTTP, `notifications/cancelled` on stdio).
async fn listen(ctx: &Ctx, params: &Value) -> Result<Value, RpcError> {
    let Some(requested) = params.get("notifications").and_then(Value::as_object) else {
        return Err(RpcError::invalid_params(
            "Invalid params: notifications (a SubscriptionFilter object) is required",
        ));
    };
    // Every filter member is one this fixture can honour.
    let filter = Filter::from_value(requested);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _subscription = ctx
        .session
        .fixture
        .subscribe(ctx.id.clone(), filter.clone(), tx);
    ctx.notify(
        "notifications/subscriptions/acknowledged",
        json!({
            "_meta": { META_SUBSCRIPTION_ID: ctx.id },
            "notifications": filter.to_value()
        }),
    );
    while let Some(msg) = rx.recv().await {
        ctx.send(msg);
    }
    Ok(json!({ "_meta": { META_SUBSCRIPTION_ID: ctx.id } }))
}

/// The `test_input_required_result_prompt` prompt: needs one elicitation first (a legacy
/// client without elicitation gets the prompt without being asked, as the tools degrade).
async fn input_required_prompt(ctx: &Ctx) -> Result<Value, RpcError> {
    let prompt = |context: &str| {
        json!({
            "description": "A prompt that needs elicitation input first",
            "messages": [{
                "role": "user",
                "content": { "type": "text", "text": format!("Prompt with context: {context}") }
            }]
        })
    };
    if !ctx.is_modern() && !ctx.client_supports("elicitation") {
        return Ok(prompt("(none: the client does not support elicitation)"));
    }
    let params = json!({
        "message": "What context should the prompt use?",
        "requestedSchema": {
            "type": "object",
            "properties": { "context": { "type": "string" } },
            "required": ["context"]
        }
    });
    let answer = match ctx
        .ask_one("user_context", "elicitation/create", params)
        .await
    {
        Ok(a) => a,
        Err(AskError::InputRequired(r)) => return Ok(r),
        Err(AskError::Rpc(e)) => return Err(e),
        Err(AskError::Failed(e)) => {
            return Err(RpcError::new(-32603, format!("Elicitation failed: {e}")))
        }
    };
    let context = answer
        .pointer("/content/context")
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_else(|| "(none)".into());
    Ok(prompt(&context))
}

/// Complete a modern result: `resultType` (default `"complete"`), the serverInfo stamp in
/// `_meta`, and for complete cacheable results `ttlMs` and `cacheScope`.
fn decorate(ctx: &Ctx, method: &str, mut result: Value) -> Value {
    let Some(obj) = result.as_object_mut() else {
        return result;
    };
    let complete = obj.entry("resultType").or_insert_with(|| json!("complete")) == "complete";
    let meta = obj.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(META_SERVER_INFO)
            .or_insert_with(|| server_info(ctx));
    }
    if complete && CACHEABLE.contains(&method) {
        obj.entry("ttlMs")
            .or_insert_with(|| json!(ctx.session.fixture.config.ttl_ms));
        let scope = if method == "resources/read" {
            "private"
        } else {
            "public"
        };
        obj.entry("cacheScope").or_insert_with(|| json!(scope));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_modern_meta;
    use crate::session::tests::fixture;
    use crate::session::{Era, EraMode, ModernReq};

    fn modern_ctx() -> Ctx {
        let params = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }});
        let meta = parse_modern_meta(&params).unwrap();
        let era = Era::Modern(Box::new(ModernReq::new(meta, "tools/list", &params)));
        Ctx::for_test(fixture(EraMode::Both), json!(1), era)
    }

    #[test]
    fn decorates_modern_results() {
        let ctx = modern_ctx();
        let r = decorate(&ctx, "tools/list", json!({"tools": []}));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "public");
        assert_eq!(r["_meta"][META_SERVER_INFO]["name"], "test");
        let r = decorate(&ctx, "resources/read", json!({"contents": []}));
        assert_eq!(r["cacheScope"], "private");
        let r = decorate(
            &ctx,
            "tools/call",
            json!({"content": [], "_meta": {"k": 1}}),
        );
        assert!(r.get("ttlMs").is_none());
        assert_eq!(r["_meta"]["k"], 1);
        let r = decorate(
            &ctx,
            "prompts/get",
            json!({"resultType": "input_required", "requestState": "s"}),
        );
        assert_eq!(r["resultType"], "input_required");
        let r = decorate(
            &ctx,
            "resources/read",
            json!({"resultType": "input_required"}),
        );
        assert!(r.get("ttlMs").is_none(), "input_required is not cacheable");
    }

    #[tokio::test]
    async fn the_input_required_prompt_in_both_eras() {
        // Legacy, no elicitation capability: the prompt comes without asking.
        let legacy = Ctx::for_test(fixture(EraMode::Both), json!(1), Era::Legacy);
        let p = json!({"name": catalog::INPUT_REQUIRED_PROMPT});
        let r = handle(&legacy, "prompts/get", p.clone()).await.unwrap();
        assert!(r["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("does not support elicitation"));
        // Modern without the capability: -32021.
        let e = handle(&modern_ctx(), "prompts/get", p).await.unwrap_err();
        assert_eq!(e.code, -32021);
    }

    #[tokio::test]
    async fn modern_dispatch_drops_handshake_methods() {
        let ctx = modern_ctx();
        for m in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            assert_eq!(
                handle(&ctx, m, json!({})).await.unwrap_err().code,
                -32601,
                "{m}"
            );
        }
        let d = handle(&ctx, "server/discover", json!({})).await.unwrap();
        assert_eq!(d["supportedVersions"][0], "2026-07-28");
        let e = handle(&ctx, "resources/read", json!({"uri": "test://nope"}))
            .await
            .unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(e.data.unwrap()["uri"], "test://nope");
    }
}
