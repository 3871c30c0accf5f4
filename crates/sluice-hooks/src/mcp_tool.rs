//! The `mcp_tool` hook kind (Claude Code's `type: "mcp_tool"`): the hook calls a tool of one of
//! Sluice's own upstreams, through a [`ToolRunner`] the server gives the chain, and the tool's
//! result is the hook's answer.
//!
//! The arguments are the hook's `input` with `${path}` filled in from the hook input (the event
//! JSON a command hook reads on stdin): `${tool_input.file_path}`, `${session_id}`,
//! `${tool_name}`. A string that is exactly one `${path}` becomes that value as it is (an
//! object stays an object); inside a longer string the value is written as text (a string as
//! it is, anything else as JSON); a path that names nothing is `null`, or the empty string
//! inside a longer string.
//!
//! The answer: the text items of the result's `content`, joined, read exactly like a command
//! hook's stdout after exit 0 ([`crate::command`]: `permissionDecision`, `decision: "block"`,
//! `updatedInput`, …; text that is not a JSON object is advisory, and passes); a result with no
//! text but a `structuredContent` object is read as that object. A result with `isError: true`
//! is a non-blocking error, as Claude Code treats it (logged, the message passes); a call that
//! fails (no such upstream, the upstream down, a JSON-RPC error, a timeout) is a failure: the
//! chain applies the hook's `on_error`. With `on_failure: "block"` both refuse the message.

use crate::claude::read_json_protocol;
use crate::decision::{Decision, HookFailure};
use crate::event::HookEvent;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Why a [`ToolRunner`] could not call a tool.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolCallError {
    /// No upstream has this name.
    #[error("no upstream named {0:?}")]
    UnknownServer(String),
    /// The upstream cannot be reached now (down, starting, needs a login…).
    #[error("upstream {server:?} is unavailable: {reason}")]
    Unavailable {
        /// The upstream.
        server: String,
        /// Why.
        reason: String,
    },
    /// The upstream answered the `tools/call` with a JSON-RPC error.
    #[error("the upstream answered error {code}: {message}")]
    Rpc {
        /// The error's code.
        code: i64,
        /// The error's message.
        message: String,
    },
    /// The call did not finish in time.
    #[error("the call timed out")]
    Timeout,
}

/// Calls a tool of one of the gateway's upstreams for an `mcp_tool` hook. The server
/// implements it (a `tools/call` through its upstream slots) and gives it to the chain
/// ([`crate::Chain::with_tool_runner`]).
pub trait ToolRunner: Send + Sync {
    /// Call `tool` (the upstream's own name for it) of the upstream `server` with `args`;
    /// the `tools/call` result (`{"content": […], …}`).
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolCallError>>;
}

/// An `mcp_tool` hook.
#[derive(Debug, Clone)]
pub struct McpToolHook {
    server: String,
    tool: String,
    input: Value,
    fail_closed: bool,
    label: String,
}

impl McpToolHook {
    /// A hook calling `tool` of the upstream `server` with `input` (`${path}` filled in).
    pub fn new(server: String, tool: String, input: Value) -> McpToolHook {
        let label = format!("mcp_tool {server}/{tool}");
        McpToolHook {
            server,
            tool,
            input,
            fail_closed: false,
            label,
        }
    }

    /// `on_failure: "block"`: a result with `isError: true` is a failure too.
    pub fn failing_closed(mut self, yes: bool) -> McpToolHook {
        self.fail_closed = yes;
        self
    }

    /// Call the tool and read its answer.
    pub async fn decide(
        &self,
        ev: &HookEvent,
        runner: Option<&Arc<dyn ToolRunner>>,
    ) -> Result<Decision, HookFailure> {
        let Some(runner) = runner else {
            return Err(HookFailure(format!(
                "{}: no upstream to call (mcp_tool hooks run inside `sluice serve`)",
                self.label
            )));
        };
        let args = substitute(&self.input, &ev.to_json());
        let result = runner
            .call(&self.server, &self.tool, args)
            .await
            .map_err(|e| HookFailure(format!("{}: {e}", self.label)))?;
        let text = result_text(&result);
        if result.get("isError") == Some(&Value::Bool(true)) {
            let why = format!(
                "{}: the tool answered an error: {}",
                self.label,
                crate::wire::truncate_chars(text.trim(), 500)
            );
            if self.fail_closed {
                return Err(HookFailure(why));
            }
            tracing::warn!(
                event = ev.event_name,
                "{why} (a non-blocking error: the message passes)"
            );
            return Ok(Decision::Pass);
        }
        if text.trim().is_empty() {
            if let Some(s @ Value::Object(_)) = result.get("structuredContent") {
                return read_json_protocol(&self.label, ev, s.to_string().as_bytes());
            }
        }
        read_json_protocol(&self.label, ev, text.as_bytes())
    }
}

/// The text items of a result's `content`, joined with line breaks.
fn result_text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// `input` with every `${path}` filled in from `from` (see the module docs).
pub(crate) fn substitute(input: &Value, from: &Value) -> Value {
    match input {
        Value::String(s) => substitute_str(s, from),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, from)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), substitute(v, from)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn lookup<'a>(from: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(from, |v, key| match v {
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => v.get(key),
    })
}

fn substitute_str(s: &str, from: &Value) -> Value {
    let trimmed = s.trim();
    if let Some(path) = trimmed
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .filter(|p| !p.contains(['{', '}', '$']))
    {
        return lookup(from, path.trim()).cloned().unwrap_or(Value::Null);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        match lookup(from, after[..end].trim()) {
            Some(Value::String(v)) => out.push_str(v),
            Some(Value::Null) | None => {}
            Some(v) => out.push_str(&v.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Value::String(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_paths_are_filled_in_from_the_hook_input() {
        let from = json!({"session_id": "s-1", "tool_name": "mcp__fs__write",
            "tool_input": {"file_path": "/a/b.rs", "n": 3, "opts": {"x": [1, 2]}}});
        let input = json!({
            "path": "${tool_input.file_path}",
            "whole": "${tool_input.opts}",
            "n": "${tool_input.n}",
            "first": "${tool_input.opts.x.0}",
            "text": "session ${session_id}: ${tool_name} with ${tool_input.n} and ${nothing}!",
            "missing": "${tool_input.nope}",
            "list": ["${session_id}", 7, {"deep": "${tool_input.file_path}"}],
            "plain": "no $ here ${ unclosed"
        });
        assert_eq!(
            substitute(&input, &from),
            json!({
                "path": "/a/b.rs",
                "whole": {"x": [1, 2]},
                "n": 3,
                "first": 1,
                "text": "session s-1: mcp__fs__write with 3 and !",
                "missing": null,
                "list": ["s-1", 7, {"deep": "/a/b.rs"}],
                "plain": "no $ here ${ unclosed"
            })
        );
    }

    #[test]
    fn result_text_joins_text_items() {
        let r = json!({"content": [{"type": "text", "text": "{\"a\":"}, {"type": "image", "data": "x"}, {"type": "text", "text": "1}"}]});
        assert_eq!(result_text(&r), "{\"a\":\n1}");
        assert_eq!(result_text(&json!({})), "");
    }
}
