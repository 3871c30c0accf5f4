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
}

impl HookEvent {
    /// The tool arguments (`params.arguments` of the tools/call request).
    pub fn tool_input(&self) -> Option<&Value> {
        let req = match self.phase {
            Phase::Request => Some(&self.message),
            Phase::Response => self.request.as_ref(),
        }?;
        req.params()?.get("arguments")
    }

    /// The JSON payload given to command, process and http hooks:
    /// `session_id`, `hook_event_name`, `tool_name`, `tool_input`, `tool_response`, `cwd`
    /// (the names Claude Code hook scripts read), plus `phase`, `method`, `upstream`, `era`,
    /// the raw JSON-RPC `message`, and the Zato-style `request` / `response` keys.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("session_id".into(), json!(self.session_id));
        o.insert("hook_event_name".into(), json!(self.event_name));
        o.insert("cwd".into(), json!(self.cwd.to_string_lossy()));
        if let Some(t) = &self.tool_name {
            o.insert("tool_name".into(), json!(t));
        }
        if let Some(input) = self.tool_input() {
            o.insert("tool_input".into(), input.clone());
        }
        if self.phase == Phase::Response && self.tool_name.is_some() {
            if let Some(r) = self.message.result() {
                o.insert("tool_response".into(), r.clone());
            } else if let Some(e) = self.message.error_obj() {
                o.insert("tool_response".into(), json!({"error": e}));
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
        Value::Object(o)
    }
}
