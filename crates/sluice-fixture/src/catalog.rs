//! The fixture's catalogue: tool, prompt and resource definitions (matching the conformance
//! suite's reference everything-server where the suite checks them, including its 2026-07-28
//! diagnostic tools), prompt rendering, resource reading and cursor pagination.

use serde_json::{json, Map, Value};

use crate::protocol::{RpcError, RESOURCE_NOT_FOUND};

/// A 1×1 red PNG pixel (the reference server's test image).
pub(crate) const TEST_IMAGE_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file (the reference server's test audio).
pub(crate) const TEST_AUDIO_BASE64: &str =
    "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The prompt that needs elicitation input first (2026-07-28 conformance, MRTR).
pub(crate) const INPUT_REQUIRED_PROMPT: &str = "test_input_required_result_prompt";

/// Content of `test://watched-resource`.
const WATCHED_RESOURCE_CONTENT: &str = "Watched resource content";

fn empty_schema() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "text": { "type": "string", "description": "Text to echo" } },
        "additionalProperties": true
    })
}

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": input_schema })
}

/// The fixed tools (conformance tools, then the gateway-test tools), in listing order.
pub(crate) fn base_tools() -> Vec<Value> {
    let mut tools = vec![
        tool(
            "test_simple_text",
            "Tests simple text content response",
            empty_schema(),
        ),
        tool(
            "test_image_content",
            "Tests image content response",
            empty_schema(),
        ),
        tool(
            "test_audio_content",
            "Tests audio content response",
            empty_schema(),
        ),
        tool(
            "test_embedded_resource",
            "Tests embedded resource content response",
            empty_schema(),
        ),
        tool(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            empty_schema(),
        ),
        tool(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
            empty_schema(),
        ),
        tool(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
            empty_schema(),
        ),
        tool(
            "test_error_handling",
            "Tests error response handling",
            empty_schema(),
        ),
        tool(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close \
             the stream mid-call and send the result after client reconnects.",
            empty_schema(),
        ),
        tool(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            json!({
                "type": "object",
                "properties": {
                    "prompt": { "type": "string", "description": "The prompt to send to the LLM" }
                },
                "required": ["prompt"]
            }),
        ),
        tool(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            json!({
                "type": "object",
                "properties": {
                    "message": { "type": "string", "description": "The message to show the user" }
                },
                "required": ["message"]
            }),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
            empty_schema(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
            empty_schema(),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {
                            "street": { "type": "string" },
                            "city": { "type": "string" }
                        }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" }
                },
                "additionalProperties": false
            }),
        ),
        tool(
            "echo",
            "Echoes its arguments: text is their JSON, structuredContent the arguments object",
            echo_schema(),
        ),
    ];
    let mut add = tool(
        "add",
        "Adds two numbers",
        json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
            "required": ["a", "b"]
        }),
    );
    add["outputSchema"] = json!({
        "type": "object",
        "properties": { "sum": { "type": "number" } },
        "required": ["sum"]
    });
    tools.push(add);
    tools.extend([
        tool(
            "slow",
            "Sleeps for ms milliseconds, then answers; honours notifications/cancelled",
            json!({
                "type": "object",
                "properties": { "ms": { "type": "number", "description": "Milliseconds to sleep" } },
                "required": ["ms"]
            }),
        ),
        tool(
            "last_cancelled",
            "Reports the last notifications/cancelled received ({\"requestId\",\"reason\"}) or \"none\"",
            empty_schema(),
        ),
        tool(
            "crash",
            "Exits the fixture process immediately with code 3",
            empty_schema(),
        ),
        tool(
            "trigger_list_changed",
            "Adds a tool dynamic_<n> and sends notifications/tools/list_changed",
            empty_schema(),
        ),
        tool(
            "whoami",
            "Reports the server name, process id and (over HTTP) the session id",
            empty_schema(),
        ),
        tool(
            "ask_roots",
            "Asks the client for roots/list and returns the result as JSON text",
            empty_schema(),
        ),
        tool(
            "touch_resource",
            "Sends notifications/resources/updated for uri to the clients subscribed to it",
            json!({
                "type": "object",
                "properties": { "uri": { "type": "string", "description": "The resource URI" } },
                "required": ["uri"]
            }),
        ),
        tool(
            "region_echo",
            "Echoes its arguments; region is mirrored in the Mcp-Param-Region header (2026-07-28)",
            json!({
                "type": "object",
                "properties": {
                    "region": {
                        "type": "string",
                        "description": "A region name",
                        "x-mcp-header": "Region"
                    },
                    "text": { "type": "string", "description": "Text to echo" }
                },
                "required": ["region"]
            }),
        ),
    ]);
    // The 2026-07-28 conformance suite's diagnostic tools.
    tools.extend(
        [
            (
                "test_missing_capability",
                "Needs the sampling client capability (-32021 without it)",
            ),
            (
                "test_input_required_result_elicitation",
                "MRTR: returns InputRequiredResult with elicitation request",
            ),
            (
                "test_input_required_result_sampling",
                "MRTR: returns InputRequiredResult with sampling request",
            ),
            (
                "test_input_required_result_list_roots",
                "MRTR: returns InputRequiredResult with roots/list request",
            ),
            (
                "test_input_required_result_request_state",
                "MRTR: returns InputRequiredResult with requestState",
            ),
            (
                "test_input_required_result_multiple_inputs",
                "MRTR: returns InputRequiredResult with multiple input requests",
            ),
            (
                "test_input_required_result_multi_round",
                "MRTR: multi-round InputRequiredResult workflow",
            ),
            (
                "test_input_required_result_tampered_state",
                "MRTR: integrity-protected requestState",
            ),
            (
                "test_input_required_result_capabilities",
                "MRTR: respects client capabilities in inputRequests",
            ),
            (
                "test_streaming_elicitation",
                "Needs elicitation input (input_required in 2026-07-28, a request before)",
            ),
            (
                "test_logging_tool",
                "Logs one info message (only when the request asks for logs)",
            ),
            (
                "test_trigger_tool_change",
                "Adds a tool dynamic_<n> and sends notifications/tools/list_changed",
            ),
            (
                "test_trigger_prompt_change",
                "Sends notifications/prompts/list_changed",
            ),
        ]
        .into_iter()
        .map(|(name, description)| tool(name, description, empty_schema())),
    );
    tools
}

/// Whether `name` is one of the fixed tools.
pub(crate) fn is_base_tool(name: &str) -> bool {
    base_tools().iter().any(|t| t["name"] == name)
}

/// The definition of a dynamic tool added by `trigger_list_changed`.
pub(crate) fn dynamic_tool(name: &str) -> Value {
    tool(
        name,
        "A tool added at run time (echoes its arguments)",
        echo_schema(),
    )
}

/// The definition of bulk tool `bulk_<i>` (from `--many-tools`).
pub(crate) fn bulk_tool(i: usize) -> Value {
    tool(
        &format!("bulk_{i}"),
        "A bulk tool (echoes its arguments)",
        echo_schema(),
    )
}

fn prompt_arg(name: &str, description: &str) -> Value {
    json!({ "name": name, "description": description, "required": true })
}

/// The prompts, in listing order.
pub(crate) fn prompts() -> Vec<Value> {
    vec![
        json!({
            "name": "test_simple_prompt",
            "title": "Simple Test Prompt",
            "description": "A simple prompt without arguments"
        }),
        json!({
            "name": "test_prompt_with_arguments",
            "title": "Prompt With Arguments",
            "description": "A prompt with required arguments",
            "arguments": [
                prompt_arg("arg1", "First test argument"),
                prompt_arg("arg2", "Second test argument")
            ]
        }),
        json!({
            "name": "test_prompt_with_embedded_resource",
            "title": "Prompt With Embedded Resource",
            "description": "A prompt that includes an embedded resource",
            "arguments": [prompt_arg("resourceUri", "URI of the resource to embed")]
        }),
        json!({
            "name": "test_prompt_with_image",
            "title": "Prompt With Image",
            "description": "A prompt that includes image content"
        }),
        json!({
            "name": INPUT_REQUIRED_PROMPT,
            "title": "Prompt Needing Input",
            "description": "MRTR: prompt that requires elicitation input"
        }),
    ]
}

fn user_text(text: &str) -> Value {
    json!({ "role": "user", "content": { "type": "text", "text": text } })
}

/// Render prompt `name` with `args` (the `prompts/get` result).
pub(crate) fn get_prompt(name: &str, args: &Map<String, Value>) -> Result<Value, RpcError> {
    let arg = |key: &str| -> Result<String, RpcError> {
        match args.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(RpcError::invalid_params(format!(
                "Argument {key} must be a string"
            ))),
            None => Err(RpcError::invalid_params(format!(
                "Missing required argument: {key}"
            ))),
        }
    };
    let messages = match name {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (arg("arg1")?, arg("arg2")?);
            vec![user_text(&format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = arg("resourceUri")?;
            vec![
                json!({
                    "role": "user",
                    "content": {
                        "type": "resource",
                        "resource": {
                            "uri": uri,
                            "mimeType": "text/plain",
                            "text": "Embedded resource content for testing."
                        }
                    }
                }),
                user_text("Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            json!({
                "role": "user",
                "content": { "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" }
            }),
            user_text("Please analyze the image above."),
        ],
        _ => return Err(RpcError::invalid_params(format!("Unknown prompt: {name}"))),
    };
    let description = prompts()
        .into_iter()
        .find(|p| p["name"] == name)
        .map(|p| p["description"].clone())
        .unwrap_or(Value::Null);
    Ok(json!({ "description": description, "messages": messages }))
}

/// The concrete resources, in listing order.
pub(crate) fn resources() -> Vec<Value> {
    vec![
        json!({
            "uri": "test://static-text",
            "name": "static-text",
            "title": "Static Text Resource",
            "description": "A static text resource for testing",
            "mimeType": "text/plain"
        }),
        json!({
            "uri": "test://static-binary",
            "name": "static-binary",
            "title": "Static Binary Resource",
            "description": "A static binary resource (image) for testing",
            "mimeType": "image/png"
        }),
        json!({
            "uri": "test://watched-resource",
            "name": "watched-resource",
            "title": "Watched Resource",
            "description": "A resource that can be subscribed to",
            "mimeType": "text/plain"
        }),
    ]
}

/// The resource templates.
pub(crate) fn resource_templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "test://template/{id}/data",
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json"
    })]
}

/// Read resource `uri` (the `resources/read` result).
pub(crate) fn read_resource(uri: &str) -> Result<Value, RpcError> {
    let content = match uri {
        "test://static-text" => json!({
            "uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."
        }),
        "test://static-binary" => json!({
            "uri": uri, "mimeType": "image/png", "blob": TEST_IMAGE_BASE64
        }),
        "test://watched-resource" => json!({
            "uri": uri, "mimeType": "text/plain", "text": WATCHED_RESOURCE_CONTENT
        }),
        _ => match template_id(uri) {
            Some(id) => {
                let text = json!({
                    "id": id, "templateTest": true, "data": format!("Data for ID: {id}")
                })
                .to_string();
                json!({ "uri": uri, "mimeType": "application/json", "text": text })
            }
            None => {
                return Err(RpcError::new(
                    RESOURCE_NOT_FOUND,
                    format!("Resource not found: {uri}"),
                ))
            }
        },
    };
    Ok(json!({ "contents": [content] }))
}

/// The `{id}` of a `test://template/{id}/data` URI.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// Completion candidates for `completion/complete` (prefix-filtered).
pub(crate) fn complete(reference: &Value, argument: &str, value: &str) -> Vec<String> {
    let candidates: &[&str] = match (reference.get("type").and_then(Value::as_str), argument) {
        (Some("ref/prompt"), "arg1" | "arg2") => &["paris", "park", "party"],
        (Some("ref/prompt"), "resourceUri") => &[
            "test://static-text",
            "test://static-binary",
            "test://watched-resource",
        ],
        (Some("ref/resource"), "id") => &["1", "2", "3", "123"],
        _ => &[],
    };
    candidates
        .iter()
        .filter(|c| c.starts_with(value))
        .map(|c| c.to_string())
        .collect()
}

const CURSOR_PREFIX: &str = "sluice-fixture-page:";

/// Cut `items` to the page starting at `cursor` (`null`/absent = first page) of `page_size`
/// items (`None` = everything). Returns the page and the cursor of the next one.
pub(crate) fn paginate(
    items: Vec<Value>,
    cursor: Option<&Value>,
    page_size: Option<usize>,
) -> Result<(Vec<Value>, Option<String>), RpcError> {
    let start = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => c
            .strip_prefix(CURSOR_PREFIX)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= items.len() && page_size.is_some())
            .ok_or_else(|| RpcError::invalid_params(format!("Invalid cursor: {c}")))?,
        Some(other) => return Err(RpcError::invalid_params(format!("Invalid cursor: {other}"))),
    };
    let Some(size) = page_size else {
        return Ok((items, None));
    };
    let end = (start + size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| format!("{CURSOR_PREFIX}{end}"));
    Ok((items[start..end].to_vec(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paginates() {
        let items: Vec<Value> = (0..5).map(|i| json!(i)).collect();
        let (page, next) = paginate(items.clone(), None, Some(2)).unwrap();
        assert_eq!(page, vec![json!(0), json!(1)]);
        let next = next.unwrap();
        let (page, next) = paginate(items.clone(), Some(&json!(next)), Some(2)).unwrap();
        assert_eq!(page, vec![json!(2), json!(3)]);
        let (page, last) = paginate(items.clone(), Some(&json!(next.unwrap())), Some(2)).unwrap();
        assert_eq!(page, vec![json!(4)]);
        assert!(last.is_none());
        assert!(paginate(items.clone(), Some(&json!("bogus")), Some(2)).is_err());
        assert_eq!(paginate(items, None, None).unwrap().0.len(), 5);
    }

    #[test]
    fn reads_template() {
        let r = read_resource("test://template/123/data").unwrap();
        assert_eq!(
            r["contents"][0]["text"],
            r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#
        );
        assert!(read_resource("test://nope").is_err());
    }
}
