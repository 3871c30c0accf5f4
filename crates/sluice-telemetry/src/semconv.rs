//! OpenTelemetry's semantic conventions for MCP: the span names, attributes and error types
//! Sluice's spans and `mcp.*.operation.duration` histograms carry.
//!
//! Checked against `docs/gen-ai/mcp.md` and `model/mcp/*.yaml` of
//! open-telemetry/semantic-conventions-genai (status Development; the MCP conventions moved
//! there from open-telemetry/semantic-conventions, whose v1.41 they link for the shared
//! `error.type`, `rpc.*`, `network.*`, `server.*` and `jsonrpc.*` attributes). See [`SPEC`].

use serde_json::Value;
use sluice_core::{Kind, Message};

/// Where the conventions followed here come from (also printed in docs/configuration.md).
pub const SPEC: &str =
    "open-telemetry/semantic-conventions-genai docs/gen-ai/mcp.md (Development, after v0.1.0)";

/// How a peer is reached: `network.transport` and `network.protocol.name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// Streamable HTTP (or SSE): TCP.
    Http,
    /// stdio: a pipe.
    Stdio,
}

impl Net {
    /// `network.transport`: `tcp` for HTTP, `pipe` for stdio.
    pub fn transport(self) -> &'static str {
        match self {
            Net::Http => "tcp",
            Net::Stdio => "pipe",
        }
    }

    /// `network.protocol.name`: `http` when it applies.
    pub fn protocol_name(self) -> Option<&'static str> {
        match self {
            Net::Http => Some("http"),
            Net::Stdio => None,
        }
    }
}

/// The client side of a request the gateway serves.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    /// `mcp.session.id`: the session, when the request belongs to one (not 2026-07-28).
    pub session_id: Option<&'a str>,
    /// `mcp.protocol.version`: the version negotiated (or sent, 2026-07-28).
    pub protocol_version: &'a str,
    /// How the client is connected.
    pub net: Net,
}

/// What one MCP request or notification names, as the conventions record it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operation {
    /// `mcp.method.name`.
    pub method: String,
    /// `gen_ai.tool.name` (tools/call).
    pub tool: Option<String>,
    /// `gen_ai.prompt.name` (prompts/get).
    pub prompt: Option<String>,
    /// `mcp.resource.uri` (resources/read, subscribe, unsubscribe, notifications/resources/updated).
    pub resource_uri: Option<String>,
    /// `jsonrpc.request.id`: absent for a notification or a `null` id.
    pub request_id: Option<String>,
}

impl Operation {
    /// What `msg` names.
    pub fn of(msg: &Message) -> Operation {
        let method = msg.method().unwrap_or("").to_string();
        let name = |m: &str| {
            (method == m)
                .then(|| msg.param_str("name").map(str::to_string))
                .flatten()
        };
        let tool = name("tools/call");
        let prompt = name("prompts/get");
        let resource_uri = matches!(
            method.as_str(),
            "resources/read"
                | "resources/subscribe"
                | "resources/unsubscribe"
                | "notifications/resources/updated"
        )
        .then(|| msg.param_str("uri").map(str::to_string))
        .flatten();
        let request_id = match msg.id() {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => Some(sluice_core::exact::to_string(v)),
        };
        Operation {
            method,
            tool,
            prompt,
            resource_uri,
            request_id,
        }
    }

    /// `{mcp.method.name} {target}`, the target being the tool or prompt name (never the
    /// resource URI: high cardinality).
    pub fn span_name(&self) -> String {
        match self.tool.as_ref().or(self.prompt.as_ref()) {
            Some(t) => format!("{} {t}", self.method),
            None => self.method.clone(),
        }
    }

    /// `gen_ai.operation.name`: `execute_tool` for a tool call, nothing otherwise.
    pub fn gen_ai_operation(&self) -> Option<&'static str> {
        (self.method == "tools/call").then_some("execute_tool")
    }

    /// The attributes spans and metrics share: method, operation, tool and prompt names.
    pub fn common(&self) -> Vec<(&'static str, String)> {
        self.common_refs()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect()
    }

    /// [`Operation::common`], borrowed (for a metric's series, which owns its labels only
    /// when it is new).
    pub fn common_refs(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::with_capacity(8);
        out.push(("mcp.method.name", self.method.as_str()));
        if let Some(op) = self.gen_ai_operation() {
            out.push(("gen_ai.operation.name", op));
        }
        if let Some(t) = &self.tool {
            out.push(("gen_ai.tool.name", t.as_str()));
        }
        if let Some(p) = &self.prompt {
            out.push(("gen_ai.prompt.name", p.as_str()));
        }
        out
    }
}

/// How an operation failed: `error.type`, `rpc.response.status_code` and the span status'
/// description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `error.type`: the JSON-RPC error code, `tool_error` (a CallToolResult with `isError`),
    /// or a low-cardinality name of a transport failure (`timeout`, `_OTHER`).
    pub error_type: String,
    /// `rpc.response.status_code`: the JSON-RPC error code.
    pub status_code: Option<i64>,
    /// The span status' description: the JSON-RPC error's message, else `error_type`.
    pub message: String,
}

impl Failure {
    /// How `reply` (the answer to `op`) failed, if it did.
    pub fn of_reply(op: &Operation, reply: &Message) -> Option<Failure> {
        if reply.kind() == Kind::Error {
            let e = reply.error_obj();
            let code = e.and_then(|e| e.get("code")).and_then(Value::as_i64);
            let error_type = code.map_or_else(|| "_OTHER".to_string(), |c| c.to_string());
            let message = e
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map_or_else(|| error_type.clone(), str::to_string);
            return Some(Failure {
                error_type,
                status_code: code,
                message,
            });
        }
        let is_error = op.method == "tools/call" && reply.result_bool("isError") == Some(true);
        is_error.then(|| Failure {
            error_type: "tool_error".into(),
            status_code: None,
            message: "tool_error".into(),
        })
    }

    /// A call that got no reply: `kind` is its `error.type` (`timeout`, `_OTHER`, …).
    pub fn transport(kind: &str, message: String) -> Failure {
        Failure {
            error_type: kind.to_string(),
            status_code: None,
            message,
        }
    }

    /// `error.type` and, with a code, `rpc.response.status_code`.
    pub fn attrs(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("error.type", self.error_type.clone())];
        if let Some(c) = self.status_code {
            out.push(("rpc.response.status_code", c.to_string()));
        }
        out
    }
}

/// `network.transport`, `network.protocol.name` and `mcp.protocol.version` (when known).
pub fn network(net: Net, protocol_version: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(3);
    if let Some(v) = protocol_version.filter(|v| !v.is_empty()) {
        out.push(("mcp.protocol.version", v.to_string()));
    }
    out.push(("network.transport", net.transport().to_string()));
    if let Some(p) = net.protocol_name() {
        out.push(("network.protocol.name", p.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(v: Value) -> Message {
        Message::from_value(v).unwrap()
    }

    #[test]
    fn a_tool_call_names_its_tool_and_the_execute_tool_operation() {
        let op = Operation::of(&msg(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "get-weather", "arguments": {}}}),
        ));
        assert_eq!(op.span_name(), "tools/call get-weather");
        assert_eq!(op.request_id.as_deref(), Some("7"));
        assert_eq!(
            op.common(),
            vec![
                ("mcp.method.name", "tools/call".to_string()),
                ("gen_ai.operation.name", "execute_tool".to_string()),
                ("gen_ai.tool.name", "get-weather".to_string()),
            ]
        );
    }

    #[test]
    fn prompts_and_resources_name_their_target_but_only_prompts_go_in_the_span_name() {
        let p = Operation::of(&msg(
            json!({"jsonrpc": "2.0", "id": "r-1", "method": "prompts/get",
            "params": {"name": "analyze-code"}}),
        ));
        assert_eq!(p.span_name(), "prompts/get analyze-code");
        assert_eq!(p.request_id.as_deref(), Some("r-1"));
        assert_eq!(
            p.common(),
            vec![
                ("mcp.method.name", "prompts/get".to_string()),
                ("gen_ai.prompt.name", "analyze-code".to_string()),
            ]
        );
        let r = Operation::of(&msg(
            json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": {"uri": "file:///report.pdf"}}),
        ));
        assert_eq!(r.span_name(), "resources/read");
        assert_eq!(r.resource_uri.as_deref(), Some("file:///report.pdf"));
        assert_eq!(r.gen_ai_operation(), None);
        // A notification has no request id; a name param elsewhere is no tool.
        let n = Operation::of(&msg(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"name": "x"}}),
        ));
        assert_eq!(n.request_id, None);
        assert_eq!(n.tool, None);
        assert_eq!(n.span_name(), "notifications/cancelled");
    }

    #[test]
    fn failures_carry_the_code_as_error_type_or_tool_error() {
        let call = Operation::of(&msg(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t"}}),
        ));
        let err = msg(json!({"jsonrpc": "2.0", "id": 1,
            "error": {"code": -32602, "message": "Unknown tool: t"}}));
        let f = Failure::of_reply(&call, &err).unwrap();
        assert_eq!(
            f.attrs(),
            vec![
                ("error.type", "-32602".to_string()),
                ("rpc.response.status_code", "-32602".to_string()),
            ]
        );
        assert_eq!(f.message, "Unknown tool: t");
        let tool_error = msg(json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [], "isError": true}}));
        let f = Failure::of_reply(&call, &tool_error).unwrap();
        assert_eq!(f.attrs(), vec![("error.type", "tool_error".to_string())]);
        let ok = msg(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}));
        assert_eq!(Failure::of_reply(&call, &ok), None);
        let t = Failure::transport("timeout", "no reply within 5 ms".into());
        assert_eq!(t.attrs(), vec![("error.type", "timeout".to_string())]);
    }

    #[test]
    fn the_network_attributes_follow_the_transport() {
        assert_eq!(
            network(Net::Http, Some("2025-11-25")),
            vec![
                ("mcp.protocol.version", "2025-11-25".to_string()),
                ("network.transport", "tcp".to_string()),
                ("network.protocol.name", "http".to_string()),
            ]
        );
        assert_eq!(
            network(Net::Stdio, None),
            vec![("network.transport", "pipe".to_string())]
        );
    }
}
