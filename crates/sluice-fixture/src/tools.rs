//! Tool implementations (`tools/call`): the conformance suite's tools, with the reference
//! everything-server's outputs, and the tools Sluice's own tests use. Tools that need input
//! from the client (elicitation, sampling, roots) ask through [`Ctx::ask`], which sends a
//! request to a legacy client and answers a modern one with `input_required`.

use std::time::Duration;

use serde_json::{json, Map, Number, Value};

use crate::catalog::{self, TEST_AUDIO_BASE64, TEST_IMAGE_BASE64};
use crate::mrtr::{AskError, InputRequest};
use crate::protocol::RpcError;
use crate::session::{Change, Ctx};

/// What to do after asking the client for input: go on with the answer, or answer the request
/// now (`Err(result)`: an `input_required` result, or the tool's own failure text).
type Asked<T> = Result<T, Value>;

/// Settle an ask: `failed` turns a legacy client-request failure into the tool's result.
fn settle<T>(
    r: Result<T, AskError>,
    failed: impl FnOnce(String) -> Value,
) -> Result<Asked<T>, RpcError> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(AskError::InputRequired(result)) => Ok(Err(result)),
        Err(AskError::Failed(e)) => Ok(Err(failed(e))),
        Err(AskError::Rpc(e)) => Err(e),
    }
}

/// When the client lacks capability `cap`: a modern request gets `-32021`; a legacy one the
/// tool result `legacy`.
fn lacks(ctx: &Ctx, cap: &str, legacy: Value) -> Result<Value, RpcError> {
    if ctx.is_modern() {
        Err(RpcError::missing_capability(cap))
    } else {
        Ok(legacy)
    }
}

/// The JSON value of `answer.content[field]` as text (strings unquoted).
fn content_field(answer: &Value, field: &str) -> String {
    answer
        .get("content")
        .and_then(|c| c.get(field))
        .map(js_string)
        .unwrap_or_else(|| "(none)".into())
}

/// The text of a sampling answer (`content.text`, or the first text block).
fn sampled_text(answer: &Value) -> Option<&str> {
    answer
        .pointer("/content/text")
        .or_else(|| answer.pointer("/content/0/text"))
        .or_else(|| answer.pointer("/message/content/text"))
        .and_then(Value::as_str)
}

fn text(s: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": s.into() }] })
}

fn tool_error(s: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": s.into() }], "isError": true })
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// The JS `String(v)` of a JSON value (strings unquoted).
fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `JSON.stringify(v || {})`.
fn json_or_empty(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_string(),
        Some(v) => v.to_string(),
    }
}

/// Echo `args`: text is their JSON, structuredContent the object itself.
fn echo(args: Map<String, Value>) -> Value {
    let args = Value::Object(args);
    json!({
        "content": [{ "type": "text", "text": args.to_string() }],
        "structuredContent": args
    })
}

/// A JSON number for `x`, written without a fraction when it is a safe integer (like JS).
fn number(x: f64) -> Option<Value> {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        Some(json!(x as i64))
    } else {
        Number::from_f64(x).map(Value::Number)
    }
}

fn add(args: &Map<String, Value>) -> Value {
    let (Some(a), Some(b)) = (args.get("a"), args.get("b")) else {
        return tool_error("Invalid arguments: a and b are required numbers");
    };
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x.checked_add(y).map(|s| json!(s)),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => number(x + y),
            _ => return tool_error("Invalid arguments: a and b must be numbers"),
        },
    };
    match sum {
        Some(sum) => json!({
            "content": [{ "type": "text", "text": sum.to_string() }],
            "structuredContent": { "sum": sum }
        }),
        None => tool_error("The sum is out of range"),
    }
}

async fn elicit(ctx: &Ctx, params: Value, prefix: &str) -> Result<Value, RpcError> {
    if !ctx.client_supports("elicitation") {
        return lacks(
            ctx,
            "elicitation",
            text(
                "Elicitation not supported or error: Client does not support elicitation \
                 (required for elicitation/create)",
            ),
        );
    }
    let asked = ctx
        .ask_one("elicitation", "elicitation/create", params)
        .await;
    let result = match settle(asked, |e| {
        text(format!("Elicitation not supported or error: {e}"))
    })? {
        Ok(result) => result,
        Err(done) => return Ok(done),
    };
    Ok(text(format!(
        "{prefix}: action={}, content={}",
        result
            .get("action")
            .map(js_string)
            .unwrap_or_else(|| "undefined".into()),
        json_or_empty(result.get("content"))
    )))
}

async fn sampling(ctx: &Ctx, args: &Map<String, Value>) -> Result<Value, RpcError> {
    let Some(prompt) = args.get("prompt").and_then(Value::as_str) else {
        return Ok(tool_error("Invalid arguments: prompt must be a string"));
    };
    if !ctx.client_supports("sampling") {
        return lacks(
            ctx,
            "sampling",
            text(
                "Sampling not supported or error: Client does not support sampling \
                 (required for sampling/createMessage)",
            ),
        );
    }
    let params = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100
    });
    let asked = ctx
        .ask_one("sampling", "sampling/createMessage", params)
        .await;
    let result = match settle(asked, |e| {
        text(format!("Sampling not supported or error: {e}"))
    })? {
        Ok(result) => result,
        Err(done) => return Ok(done),
    };
    let reply = sampled_text(&result)
        .filter(|s| !s.is_empty())
        .unwrap_or("No response");
    Ok(text(format!("LLM response: {reply}")))
}

async fn with_logging(ctx: &Ctx) -> Value {
    ctx.log("info", json!("Tool execution started"));
    sleep_ms(50).await;
    ctx.log("info", json!("Tool processing data"));
    sleep_ms(50).await;
    ctx.log("info", json!("Tool execution completed"));
    text("Tool with logging executed successfully")
}

async fn with_progress(ctx: &Ctx, token: Option<Value>) -> Value {
    for (i, step) in [0, 50, 100].into_iter().enumerate() {
        if i > 0 {
            sleep_ms(50).await;
        }
        if let Some(token) = &token {
            ctx.notify(
                "notifications/progress",
                json!({
                    "progressToken": token,
                    "progress": step,
                    "total": 100,
                    "message": format!("Completed step {step} of 100")
                }),
            );
        }
    }
    text(token.as_ref().map(js_string).unwrap_or_else(|| "0".into()))
}

async fn ask_roots(ctx: &Ctx) -> Result<Value, RpcError> {
    if !ctx.client_supports("roots") {
        return lacks(
            ctx,
            "roots",
            tool_error("Client does not support roots (required for roots/list)"),
        );
    }
    let asked = ctx.ask_one("roots", "roots/list", json!({})).await;
    let result = match settle(asked, |e| tool_error(format!("roots/list failed: {e}")))? {
        Ok(result) => result,
        Err(done) => return Ok(done),
    };
    Ok(json!({
        "content": [{ "type": "text", "text": result.to_string() }],
        "structuredContent": result
    }))
}

/// An elicitation asking for one field `field` of `kind` (a JSON Schema type).
fn elicit_field(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { field: { "type": kind } },
            "required": [field]
        }
    })
}

/// A sampling request for `prompt`.
fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": max_tokens
    })
}

/// The 2026-07-28 conformance suite's multi round-trip tools
/// (`test_input_required_result_*`), plus `test_streaming_elicitation`.
async fn input_required_tool(ctx: &Ctx, name: &str) -> Result<Value, RpcError> {
    let failed = |e: String| tool_error(format!("Client request failed: {e}"));
    let elicit_name = || {
        InputRequest::new(
            "user_name",
            "elicitation/create",
            elicit_field("What is your name?", "name", "string"),
        )
    };
    let confirm = || {
        InputRequest::new(
            "confirm",
            "elicitation/create",
            elicit_field("Please confirm", "ok", "boolean"),
        )
    };
    let roots = || InputRequest::new("client_roots", "roots/list", json!({}));
    let one = |r: InputRequest| async move {
        let asked = ctx.ask(std::slice::from_ref(&r), false).await;
        settle(asked.map(|mut v| v.remove(0)), failed)
    };
    Ok(match name {
        "test_input_required_result_elicitation" => match one(elicit_name()).await? {
            Ok(a) => text(format!("Hello, {}!", content_field(&a, "name"))),
            Err(done) => done,
        },
        "test_input_required_result_sampling" => {
            let r = InputRequest::new(
                "capital_question",
                "sampling/createMessage",
                sample("What is the capital of France?", 100),
            );
            match one(r).await? {
                Ok(a) => text(format!(
                    "Sampling response: {}",
                    sampled_text(&a).unwrap_or("(no text)")
                )),
                Err(done) => done,
            }
        }
        "test_input_required_result_list_roots" => match one(roots()).await? {
            Ok(a) => {
                let uris: Vec<String> = a["roots"]
                    .as_array()
                    .map(|r| r.iter().map(|x| js_string(&x["uri"])).collect())
                    .unwrap_or_default();
                text(format!(
                    "Received {} root(s): {}",
                    uris.len(),
                    uris.join(", ")
                ))
            }
            Err(done) => done,
        },
        "test_input_required_result_request_state" => {
            match settle(ctx.ask(&[confirm()], true).await, failed)? {
                Ok(_) => text("state-ok: requestState validated"),
                Err(done) => done,
            }
        }
        "test_input_required_result_tampered_state" => match one(confirm()).await? {
            Ok(_) => text("state-ok: requestState verified"),
            Err(done) => done,
        },
        "test_input_required_result_multiple_inputs" => {
            let requests = [
                elicit_name(),
                InputRequest::new(
                    "greeting",
                    "sampling/createMessage",
                    sample("Generate a greeting", 50),
                ),
                roots(),
            ];
            match settle(ctx.ask(&requests, false).await, failed)? {
                Ok(a) => text(format!(
                    "Received all inputs: name={}, greeting={}, roots={}",
                    content_field(&a[0], "name"),
                    sampled_text(&a[1]).unwrap_or("(no text)"),
                    a[2]["roots"].as_array().map(Vec::len).unwrap_or(0)
                )),
                Err(done) => done,
            }
        }
        "test_input_required_result_multi_round" => {
            let step1 = InputRequest::new(
                "step1",
                "elicitation/create",
                elicit_field("Step 1: What is your name?", "name", "string"),
            );
            let first = match one(step1).await? {
                Ok(a) => a,
                Err(done) => return Ok(done),
            };
            let step2 = InputRequest::new(
                "step2",
                "elicitation/create",
                elicit_field("Step 2: What is your favorite color?", "color", "string"),
            );
            match one(step2).await? {
                Ok(second) => text(format!(
                    "Hello {}, your favorite color is {}",
                    content_field(&first, "name"),
                    content_field(&second, "color")
                )),
                Err(done) => done,
            }
        }
        "test_input_required_result_capabilities" => {
            let mut requests = Vec::new();
            if ctx.client_supports("elicitation") {
                requests.push(InputRequest::new(
                    "elicit_input",
                    "elicitation/create",
                    elicit_field("Elicitation input", "value", "string"),
                ));
            }
            if ctx.client_supports("sampling") {
                requests.push(InputRequest::new(
                    "sample_input",
                    "sampling/createMessage",
                    sample("Sample request", 50),
                ));
            }
            if requests.is_empty() {
                return Ok(text("No supported capabilities declared"));
            }
            match settle(ctx.ask(&requests, false).await, failed)? {
                Ok(_) => {
                    let keys: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
                    text(format!("capabilities-ok: received {}", keys.join(",")))
                }
                Err(done) => done,
            }
        }
        // test_streaming_elicitation
        _ => {
            if !ctx.client_supports("elicitation") {
                return lacks(
                    ctx,
                    "elicitation",
                    tool_error("Client does not support elicitation"),
                );
            }
            match one(confirm()).await? {
                Ok(_) => text("Streaming complete"),
                Err(done) => done,
            }
        }
    })
}

fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "User name", "default": "John Doe" },
            "age": { "type": "integer", "description": "User age", "default": 30 },
            "score": { "type": "number", "description": "User score", "default": 95.5 },
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": { "type": "boolean", "description": "Verification status", "default": true }
        },
        "required": []
    })
}

fn sep1330_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"]
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    { "const": "value1", "title": "First Option" },
                    { "const": "value2", "title": "Second Option" },
                    { "const": "value3", "title": "Third Option" }
                ]
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        { "const": "value1", "title": "First Choice" },
                        { "const": "value2", "title": "Second Choice" },
                        { "const": "value3", "title": "Third Choice" }
                    ]
                }
            }
        },
        "required": []
    })
}

/// Call tool `name` with `args`; `-32602` for an unknown tool.
pub(crate) async fn call(
    ctx: &Ctx,
    name: &str,
    args: Map<String, Value>,
    progress_token: Option<Value>,
) -> Result<Value, RpcError> {
    let fixture = &ctx.session.fixture;
    Ok(match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => json!({
            "content": [{ "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" }]
        }),
        "test_audio_content" => json!({
            "content": [{ "type": "audio", "data": TEST_AUDIO_BASE64, "mimeType": "audio/wav" }]
        }),
        "test_embedded_resource" => json!({
            "content": [{
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content."
                }
            }]
        }),
        "test_multiple_content_types" => json!({
            "content": [
                { "type": "text", "text": "Multiple content types test:" },
                { "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://mixed-content-resource",
                        "mimeType": "application/json",
                        "text": json!({ "test": "data", "value": 123 }).to_string()
                    }
                }
            ]
        }),
        "test_tool_with_logging" => with_logging(ctx).await,
        "test_tool_with_progress" => with_progress(ctx, progress_token).await,
        "test_error_handling" => tool_error("This tool intentionally returns an error for testing"),
        "test_reconnection" => {
            ctx.close_stream();
            sleep_ms(100).await;
            text(
                "Reconnection test completed successfully. If you received this, the client \
                 properly reconnected after stream closure.",
            )
        }
        "test_sampling" => sampling(ctx, &args).await?,
        "test_elicitation" => {
            let Some(message) = args.get("message").and_then(Value::as_str) else {
                return Ok(tool_error("Invalid arguments: message must be a string"));
            };
            let params = json!({
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "response": { "type": "string", "description": "User's response" }
                    },
                    "required": ["response"]
                }
            });
            elicit(ctx, params, "User response").await?
        }
        "test_elicitation_sep1034_defaults" => {
            let params = json!({
                "message": "Please review and update the form fields with defaults",
                "requestedSchema": sep1034_schema()
            });
            elicit(ctx, params, "Elicitation completed").await?
        }
        "test_elicitation_sep1330_enums" => {
            let params = json!({
                "message": "Please select options from the enum fields",
                "requestedSchema": sep1330_schema()
            });
            elicit(ctx, params, "Elicitation completed").await?
        }
        "json_schema_2020_12_tool" => text(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args)
        )),
        "echo" => echo(args),
        "add" => add(&args),
        "slow" => {
            let Some(ms) = args
                .get("ms")
                .filter(|v| v.as_f64().is_some_and(|x| x >= 0.0))
            else {
                return Ok(tool_error(
                    "Invalid arguments: ms must be a non-negative number",
                ));
            };
            let millis = ms.as_f64().unwrap_or(0.0).round() as u64;
            sleep_ms(millis).await;
            text(format!("slept {ms}ms"))
        }
        "last_cancelled" => text(
            fixture
                .last_cancelled()
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into()),
        ),
        "crash" => {
            eprintln!("sluice-fixture: crash tool called, exiting with code 3");
            std::process::exit(3);
        }
        "trigger_list_changed" | "test_trigger_tool_change" => {
            let added = fixture.add_dynamic_tool();
            eprintln!("sluice-fixture: added tool {added}");
            ctx.notify_unrelated("notifications/tools/list_changed", json!({}));
            fixture.broadcast(&Change::Tools);
            text(if name == "trigger_list_changed" {
                "ok"
            } else {
                "Mutation triggered"
            })
        }
        "skills_edit" => {
            let Some(n) = fixture.edit_skills() else {
                return Ok(tool_error("Unknown tool: skills_edit (no --skills)"));
            };
            if args.get("notify").and_then(Value::as_bool) == Some(true) {
                ctx.notify_unrelated("notifications/resources/list_changed", json!({}));
                fixture.broadcast(&Change::Resources);
            }
            text(format!("edition {n}"))
        }
        "test_trigger_prompt_change" => {
            ctx.notify_unrelated("notifications/prompts/list_changed", json!({}));
            fixture.broadcast(&Change::Prompts);
            text("Mutation triggered")
        }
        "touch_resource" => {
            let Some(uri) = args.get("uri").and_then(Value::as_str) else {
                return Ok(tool_error("Invalid arguments: uri must be a string"));
            };
            if ctx.session.is_subscribed(uri) {
                ctx.notify_unrelated("notifications/resources/updated", json!({ "uri": uri }));
            }
            fixture.broadcast(&Change::ResourceUpdated(uri.to_string()));
            text("ok")
        }
        "test_missing_capability" => {
            if ctx.client_supports("sampling") {
                text("The client declared the sampling capability")
            } else {
                lacks(
                    ctx,
                    "sampling",
                    tool_error("Client does not support sampling"),
                )?
            }
        }
        "test_logging_tool" => {
            ctx.log("info", json!("Diagnostic trace logging activated"));
            text("Logging evaluated")
        }
        "test_streaming_elicitation" => input_required_tool(ctx, name).await?,
        n if n.starts_with("test_input_required_result_") && catalog::is_base_tool(n) => {
            input_required_tool(ctx, name).await?
        }
        "region_echo" => echo(args),
        "whoami" => {
            let mut who = format!("{} pid={}", fixture.config.name, std::process::id());
            if let Some(id) = &ctx.session.id {
                who.push_str(&format!(" session={id}"));
            }
            text(who)
        }
        "ask_roots" => ask_roots(ctx).await?,
        _ if fixture.is_dynamic_tool(name) || fixture.is_bulk_tool(name) => echo(args),
        _ => return Err(RpcError::invalid_params(format!("Unknown tool: {name}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_like_js() {
        let args = |a: Value, b: Value| {
            let mut m = Map::new();
            m.insert("a".into(), a);
            m.insert("b".into(), b);
            m
        };
        assert_eq!(add(&args(json!(2), json!(3)))["content"][0]["text"], "5");
        assert_eq!(
            add(&args(json!(1.5), json!(1.5)))["structuredContent"]["sum"],
            json!(3)
        );
        assert_eq!(
            add(&args(json!(0.25), json!(1)))["content"][0]["text"],
            "1.25"
        );
        assert_eq!(add(&args(json!("x"), json!(1)))["isError"], true);
    }

    #[test]
    fn echo_keeps_order() {
        let v: Value = serde_json::from_str(r#"{"z":1,"text":"hi","a":[true]}"#).unwrap();
        let Value::Object(m) = v.clone() else {
            unreachable!()
        };
        let r = echo(m);
        assert_eq!(r["content"][0]["text"], r#"{"z":1,"text":"hi","a":[true]}"#);
        assert_eq!(r["structuredContent"], v);
    }
}
