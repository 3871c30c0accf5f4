//! Tool implementations (`tools/call`): the conformance suite's tools, with the reference
//! everything-server's outputs, and the tools Sluice's own tests use.

use std::time::Duration;

use serde_json::{json, Map, Number, Value};

use crate::catalog::{TEST_AUDIO_BASE64, TEST_IMAGE_BASE64};
use crate::protocol::RpcError;
use crate::session::Ctx;

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

async fn elicit(ctx: &Ctx, params: Value, prefix: &str) -> Value {
    if !ctx.session.client_supports("elicitation") {
        return text(
            "Elicitation not supported or error: Client does not support elicitation \
             (required for elicitation/create)",
        );
    }
    match ctx.request("elicitation/create", params).await {
        Ok(result) => text(format!(
            "{prefix}: action={}, content={}",
            result
                .get("action")
                .map(js_string)
                .unwrap_or_else(|| "undefined".into()),
            json_or_empty(result.get("content"))
        )),
        Err(e) => text(format!("Elicitation not supported or error: {e}")),
    }
}

async fn sampling(ctx: &Ctx, args: &Map<String, Value>) -> Value {
    let Some(prompt) = args.get("prompt").and_then(Value::as_str) else {
        return tool_error("Invalid arguments: prompt must be a string");
    };
    if !ctx.session.client_supports("sampling") {
        return text(
            "Sampling not supported or error: Client does not support sampling \
             (required for sampling/createMessage)",
        );
    }
    let params = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100
    });
    match ctx.request("sampling/createMessage", params).await {
        Ok(result) => {
            let reply = result
                .pointer("/content/text")
                .or_else(|| result.pointer("/message/content/text"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("No response");
            text(format!("LLM response: {reply}"))
        }
        Err(e) => text(format!("Sampling not supported or error: {e}")),
    }
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

async fn ask_roots(ctx: &Ctx) -> Value {
    if !ctx.session.client_supports("roots") {
        return tool_error("Client does not support roots (required for roots/list)");
    }
    match ctx.request("roots/list", json!({})).await {
        Ok(result) => json!({
            "content": [{ "type": "text", "text": result.to_string() }],
            "structuredContent": result
        }),
        Err(e) => tool_error(format!("roots/list failed: {e}")),
    }
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
pub async fn call(
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
        "test_sampling" => sampling(ctx, &args).await,
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
            elicit(ctx, params, "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            let params = json!({
                "message": "Please review and update the form fields with defaults",
                "requestedSchema": sep1034_schema()
            });
            elicit(ctx, params, "Elicitation completed").await
        }
        "test_elicitation_sep1330_enums" => {
            let params = json!({
                "message": "Please select options from the enum fields",
                "requestedSchema": sep1330_schema()
            });
            elicit(ctx, params, "Elicitation completed").await
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
        "trigger_list_changed" => {
            let added = fixture.add_dynamic_tool();
            eprintln!("sluice-fixture: added tool {added}");
            ctx.notify_unrelated("notifications/tools/list_changed", json!({}));
            text("ok")
        }
        "whoami" => {
            let mut who = format!("{} pid={}", fixture.config.name, std::process::id());
            if let Some(id) = &ctx.session.id {
                who.push_str(&format!(" session={id}"));
            }
            text(who)
        }
        "ask_roots" => ask_roots(ctx).await,
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
