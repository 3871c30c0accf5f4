//! What a hook is shown: one event (a message at a phase, with its context) and its JSON form,
//! which uses the field names Claude Code and toolfunnel hook scripts read.

use serde_json::{json, Map, Value};
use sluice_core::{Message, Principal};
use std::path::PathBuf;
use std::sync::Arc;

/// Which way a message is travelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// From the client toward the gateway and upstreams (requests, notifications, and the
    /// client's replies to upstream requests).
    Request,
    /// Toward the client (replies, gateway-made errors, upstream requests and notifications).
    Response,
}

impl Phase {
    /// `"request"` or `"response"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Request => "request",
            Phase::Response => "response",
        }
    }
}

/// One event a hook decides on.
#[derive(Debug, Clone)]
pub struct HookEvent {
    /// The phase.
    pub phase: Phase,
    /// The lifecycle name: `PreToolUse`, `PostToolUse`, `SessionStart`, `Stop`, `Request`,
    /// `Response`.
    pub event_name: &'static str,
    /// The JSON-RPC method this is about (for a reply: the method of the request it answers).
    pub method: String,
    /// The client session.
    pub session_id: String,
    /// The client-facing tool name, for `tools/call` and its reply.
    pub tool_name: Option<String>,
    /// The upstream the message goes to or comes from, when known.
    pub upstream: Option<String>,
    /// The message being decided on.
    pub message: Message,
    /// In the response phase, the request the reply answers (when there is one).
    pub request: Option<Message>,
    /// The protocol era of the client: `"legacy"` or `"modern"`.
    pub era: &'static str,
    /// The gateway's home folder (`cwd` of the payload).
    pub cwd: PathBuf,
    /// Who is calling, when the listener authenticates (`None`: unauthenticated loopback).
    pub principal: Option<Arc<Principal>>,
    /// The fields Claude Code sends beside the common ones.
    pub claude: ClaudeFields,
}

/// The fields of a Claude Code hook input that the gateway fills in from the session and the
/// call: `transcript_path`, `permission_mode`, `tool_use_id`, `duration_ms`.
#[derive(Debug, Clone, Default)]
pub struct ClaudeFields {
    /// The session's transcript (JSON lines; see [`crate::transcript`]).
    pub transcript_path: Option<PathBuf>,
    /// `permission_mode` (`default` when `None`).
    pub permission_mode: Option<String>,
    /// One id for a call's PreToolUse and PostToolUse events.
    pub tool_use_id: Option<String>,
    /// In the response phase of a call: milliseconds from its dispatch to its reply.
    pub duration_ms: Option<u64>,
}

/// Is this `tools/call` reply a failure: an error reply, or a result with `isError: true`?
pub fn is_failure(reply: &Message) -> bool {
    match reply.result() {
        Some(r) => r.get("isError") == Some(&Value::Bool(true)),
        None => reply.error_obj().is_some(),
    }
}

/// What failed, as one string (PostToolUseFailure's `error`): the error's message, or the
/// text of an `isError` result.
pub fn failure_text(reply: &Message) -> String {
    if let Some(e) = reply.error_obj() {
        return e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string();
    }
    reply
        .result()
        .and_then(|r| r.get("content"))
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

impl HookEvent {
    /// The tool arguments (`params.arguments` of the tools/call request).
    pub fn tool_input(&self) -> Option<&Value> {
        let req = match self.phase {
            Phase::Request => Some(&self.message),
            Phase::Response => self.request.as_ref(),
        }?;
        req.param("arguments")
    }

    /// The JSON payload given to command, process and http hooks: the fields Claude Code
    /// sends — `session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`,
    /// `tool_name`, `tool_input`, `tool_use_id`, and in the response phase of a call
    /// `tool_response` and `duration_ms` (PostToolUseFailure: `error`, `is_interrupt`) — plus
    /// Sluice's own `phase`, `method`, `upstream`, `era`, `principal`, the raw JSON-RPC
    /// `message`, and the Zato-style `request` / `response` keys.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("session_id".into(), json!(self.session_id));
        if let Some(t) = &self.claude.transcript_path {
            o.insert("transcript_path".into(), json!(t.to_string_lossy()));
        }
        o.insert("cwd".into(), json!(self.cwd.to_string_lossy()));
        o.insert(
            "permission_mode".into(),
            json!(self.claude.permission_mode.as_deref().unwrap_or("default")),
        );
        o.insert("hook_event_name".into(), json!(self.event_name));
        if let Some(t) = &self.tool_name {
            o.insert("tool_name".into(), json!(t));
        }
        if let Some(input) = self.tool_input() {
            o.insert("tool_input".into(), input.clone());
        }
        if let Some(id) = &self.claude.tool_use_id {
            o.insert("tool_use_id".into(), json!(id));
        }
        if self.phase == Phase::Response && self.tool_name.is_some() {
            if let Some(r) = self.message.result() {
                o.insert("tool_response".into(), r.clone());
            } else if let Some(e) = self.message.error_obj() {
                o.insert("tool_response".into(), json!({"error": e}));
            }
            if let Some(ms) = self.claude.duration_ms {
                o.insert("duration_ms".into(), json!(ms));
            }
            if self.event_name == "PostToolUseFailure" {
                o.insert("error".into(), json!(failure_text(&self.message)));
                o.insert("is_interrupt".into(), json!(false));
            }
        }
        o.insert("phase".into(), json!(self.phase.as_str()));
        o.insert("method".into(), json!(self.method));
        o.insert(
            "upstream".into(),
            self.upstream
                .as_ref()
                .map(|u| json!(u))
                .unwrap_or(Value::Null),
        );
        o.insert("era".into(), json!(self.era));
        o.insert(
            "principal".into(),
            self.principal
                .as_ref()
                .map(|p| p.to_json())
                .unwrap_or(Value::Null),
        );
        o.insert("message".into(), self.message.to_value());
        match self.phase {
            Phase::Request => {
                o.insert("request".into(), self.message.to_value());
            }
            Phase::Response => {
                if let Some(r) = &self.request {
                    o.insert("request".into(), r.to_value());
                }
                o.insert("response".into(), self.message.to_value());
            }
        }
        match self.event_name {
            // Why the session ended, in Claude Code's words (`logout` for a client's DELETE,
            // else `other`) and in Sluice's own (`sluice_reason`, see `EndReason`).
            "SessionEnd" => {
                let said = |k: &str| self.message.param_str(k).map(str::to_string);
                o.insert(
                    "reason".into(),
                    json!(said("reason").unwrap_or_else(|| "other".into())),
                );
                if let Some(r) = said("sluice_reason") {
                    o.insert("sluice_reason".into(), json!(r));
                }
            }
            "Stop" => {
                o.insert("stop_hook_active".into(), json!(false));
            }
            // A session behind a gateway always starts fresh (Claude Code's `resume`, `clear`
            // and `compact` are the agent's own).
            "SessionStart" => {
                o.insert("source".into(), json!("startup"));
            }
            _ => {}
        }
        // Claude Code's elicitation fields; its `message` (the question) wins over the raw
        // JSON-RPC message, which stays under `response`.
        match self.event_name {
            "Elicitation" => {
                let p = self.message.params();
                let get = |k: &str| p.and_then(|p| p.get(k)).cloned();
                o.insert("mcp_server_name".into(), json!(self.upstream));
                o.insert("message".into(), get("message").unwrap_or(Value::Null));
                o.insert("mode".into(), get("mode").unwrap_or_else(|| json!("form")));
                for (key, param) in [
                    ("url", "url"),
                    ("elicitation_id", "elicitationId"),
                    ("requested_schema", "requestedSchema"),
                ] {
                    if let Some(v) = get(param) {
                        o.insert(key.into(), v);
                    }
                }
            }
            "ElicitationResult" => {
                let r = self.message.result();
                o.insert("mcp_server_name".into(), json!(self.upstream));
                o.insert(
                    "action".into(),
                    r.and_then(|r| r.get("action"))
                        .cloned()
                        .unwrap_or(Value::Null),
                );
                if let Some(c) = r.and_then(|r| r.get("content")) {
                    o.insert("content".into(), c.clone());
                }
            }
            _ => {}
        }
        Value::Object(o)
    }
}
