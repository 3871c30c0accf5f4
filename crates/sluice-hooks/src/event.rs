//! What a hook is shown: one event (a message at a phase, with its context) and its JSON form,
//! which uses the field names Claude Code and toolfunnel hook scripts read.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use sluice_core::exact::{Exact, ExactMap};
use sluice_core::{Message, Principal};
use std::borrow::Cow;
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
    /// The `sub` of the upstream identity whose token serves the call, when known (never the
    /// token): payload field `upstream_sub`, present only then.
    pub upstream_sub: Option<String>,
    /// The fields Claude Code sends beside the common ones.
    pub claude: ClaudeFields,
}

/// The fields of a Claude Code hook input that the gateway fills in from the session and the
/// call: `transcript_path`, `permission_mode`, `tool_use_id`, `duration_ms` (and how the
/// hook's answer is read: `continue_on_block`).
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
    /// The hook's `continue_on_block` (PostToolUse): a block replaces the result with its
    /// reason, as a tool error.
    pub continue_on_block: bool,
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
    /// Sluice's own `phase`, `method`, `upstream`, `era`, `principal`, `upstream_sub` (when
    /// known), the raw JSON-RPC
    /// `message`, and the Zato-style `request` / `response` keys.
    pub fn to_json(&self) -> Value {
        let o: Map<String, Value> = self
            .fields()
            .into_iter()
            .map(|(k, f)| {
                let v = match f {
                    Field::Text(s) => Value::String(s.into_owned()),
                    Field::Val(v) => v.clone(),
                    Field::Owned(v) => v,
                    Field::Message => self.message.to_value(),
                    Field::Request => self.request.as_ref().map_or(Value::Null, Message::to_value),
                };
                (k.to_string(), v)
            })
            .collect();
        Value::Object(o)
    }

    /// [`HookEvent::to_json`] serialised (exact ids as their text), written straight from the
    /// event: a message kept as the text it came as goes in as that text, nothing is copied
    /// into a tree first.
    pub fn payload(&self) -> String {
        let out = Payload {
            fields: self.fields(),
            message: (&self.message, as_text(&self.message)),
            request: self.request.as_ref().map(|r| (r, as_text(r))),
        };
        serde_json::to_string(&out).expect("a hook payload always serialises")
    }

    /// The payload's members, in order (a key set twice keeps its first place and its last
    /// value, as a map would).
    fn fields(&self) -> Vec<(&'static str, Field<'_>)> {
        let mut o = Fields(Vec::with_capacity(24));
        o.set("session_id", Field::Text(self.session_id.as_str().into()));
        if let Some(t) = &self.claude.transcript_path {
            o.set("transcript_path", Field::Text(t.to_string_lossy()));
        }
        o.set("cwd", Field::Text(self.cwd.to_string_lossy()));
        // What Claude Code sends and a gateway cannot know: the prompt (a gateway never sees
        // one), the agent's scratchpad folder and its reasoning effort.
        o.set("prompt_id", Field::Owned(Value::Null));
        o.set("scratchpad_dir", Field::Owned(Value::Null));
        o.set(
            "permission_mode",
            Field::Text(
                self.claude
                    .permission_mode
                    .as_deref()
                    .unwrap_or("default")
                    .into(),
            ),
        );
        o.set("effort", Field::Owned(Value::Null));
        o.set("hook_event_name", Field::Text(self.event_name.into()));
        if let Some(t) = &self.tool_name {
            o.set("tool_name", Field::Text(t.as_str().into()));
        }
        if let Some(input) = self.tool_input() {
            o.set("tool_input", Field::Val(input));
        }
        if let Some(id) = &self.claude.tool_use_id {
            o.set("tool_use_id", Field::Text(id.as_str().into()));
        }
        if self.phase == Phase::Response && self.tool_name.is_some() {
            if let Some(r) = self.message.result() {
                o.set("tool_response", Field::Val(r));
            } else if let Some(e) = self.message.error_obj() {
                o.set("tool_response", Field::Owned(json!({"error": e})));
            }
            if let Some(ms) = self.claude.duration_ms {
                o.set("duration_ms", Field::Owned(json!(ms)));
            }
            if self.event_name == "PostToolUseFailure" {
                o.set("error", Field::Text(failure_text(&self.message).into()));
                o.set("is_interrupt", Field::Owned(Value::Bool(false)));
            }
        }
        // Claude Code names the MCP server of an MCP tool's call; behind the gateway that is the
        // upstream (the `<upstream>` of `mcp__<upstream>__<tool>`), configured in the gateway.
        if let (Some(_), Some(u)) = (&self.tool_name, &self.upstream) {
            if matches!(
                self.event_name,
                "PreToolUse" | "PostToolUse" | "PostToolUseFailure"
            ) {
                o.set(
                    "mcp_server",
                    Field::Owned(json!({"name": u, "source": "sluice"})),
                );
            }
        }
        o.set("phase", Field::Text(self.phase.as_str().into()));
        o.set("method", Field::Text(self.method.as_str().into()));
        o.set(
            "upstream",
            self.upstream
                .as_deref()
                .map_or(Field::Owned(Value::Null), |u| Field::Text(u.into())),
        );
        o.set("era", Field::Text(self.era.into()));
        o.set(
            "principal",
            Field::Owned(
                self.principal
                    .as_ref()
                    .map(|p| p.to_json())
                    .unwrap_or(Value::Null),
            ),
        );
        if let Some(sub) = &self.upstream_sub {
            o.set("upstream_sub", Field::Text(sub.as_str().into()));
        }
        o.set("message", Field::Message);
        match self.phase {
            Phase::Request => {
                o.set("request", Field::Message);
            }
            Phase::Response => {
                if self.request.is_some() {
                    o.set("request", Field::Request);
                }
                o.set("response", Field::Message);
            }
        }
        match self.event_name {
            // Why the session ended, in Claude Code's words (`logout` for a client's DELETE,
            // else `other`) and in Sluice's own (`sluice_reason`, see `EndReason`).
            "SessionEnd" => {
                let said = |k: &str| self.message.param_str(k).map(str::to_string);
                o.set(
                    "reason",
                    Field::Text(said("reason").unwrap_or_else(|| "other".into()).into()),
                );
                if let Some(r) = said("sluice_reason") {
                    o.set("sluice_reason", Field::Text(r.into()));
                }
            }
            "Stop" => {
                o.set("stop_hook_active", Field::Owned(Value::Bool(false)));
                // The model's turns never cross the wire.
                o.set("last_assistant_message", Field::Owned(Value::Null));
            }
            // A session behind a gateway always starts fresh (Claude Code's `resume`, `clear`
            // and `compact` are the agent's own); the client's model is not said on the wire.
            "SessionStart" => {
                o.set("source", Field::Text("startup".into()));
                o.set("model", Field::Owned(Value::Null));
            }
            _ => {}
        }
        // Claude Code's elicitation fields; its `message` (the question) wins over the raw
        // JSON-RPC message, which stays under `response`.
        match self.event_name {
            "Elicitation" => {
                let p = self.message.params();
                let get = |k: &str| p.and_then(|p| p.get(k));
                o.set("mcp_server_name", Field::Owned(json!(self.upstream)));
                o.set(
                    "message",
                    get("message").map_or(Field::Owned(Value::Null), Field::Val),
                );
                o.set(
                    "mode",
                    get("mode").map_or(Field::Text("form".into()), Field::Val),
                );
                for (key, param) in [
                    ("url", "url"),
                    ("elicitation_id", "elicitationId"),
                    ("requested_schema", "requestedSchema"),
                ] {
                    if let Some(v) = get(param) {
                        o.set(key, Field::Val(v));
                    }
                }
            }
            "ElicitationResult" => {
                let r = self.message.result();
                o.set("mcp_server_name", Field::Owned(json!(self.upstream)));
                o.set(
                    "action",
                    r.and_then(|r| r.get("action"))
                        .map_or(Field::Owned(Value::Null), Field::Val),
                );
                if let Some(c) = r.and_then(|r| r.get("content")) {
                    o.set("content", Field::Val(c));
                }
            }
            _ => {}
        }
        o.0
    }
}

/// One member of a hook payload.
enum Field<'a> {
    Text(Cow<'a, str>),
    Val(&'a Value),
    Owned(Value),
    /// The event's message.
    Message,
    /// The request a reply answers.
    Request,
}

/// The payload's members as they are set.
struct Fields<'a>(Vec<(&'static str, Field<'a>)>);

impl<'a> Fields<'a> {
    /// Set `key`: in its first place when it was set before.
    fn set(&mut self, key: &'static str, value: Field<'a>) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
}

/// The text of a message kept as text, checked once however many members hold it; `None`
/// for one kept as a tree.
fn as_text(m: &Message) -> Option<Box<RawValue>> {
    (m.raw_pieces().is_some() || m.received_text().is_some())
        .then(|| RawValue::from_string(m.to_json()).ok())
        .flatten()
}

/// The payload being serialised: its members, and the event's message and request each with
/// its text when kept as text.
struct Payload<'a> {
    fields: Vec<(&'static str, Field<'a>)>,
    message: (&'a Message, Option<Box<RawValue>>),
    request: Option<(&'a Message, Option<Box<RawValue>>)>,
}

/// A message, as its text or from its tree.
struct Whole<'a>(&'a (&'a Message, Option<Box<RawValue>>));

impl Serialize for Whole<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            (_, Some(raw)) => raw.serialize(s),
            (m, None) => ExactMap(m.as_object()).serialize(s),
        }
    }
}

impl Serialize for Payload<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (k, f) in &self.fields {
            match f {
                Field::Text(v) => map.serialize_entry(k, v)?,
                Field::Val(v) => map.serialize_entry(k, &Exact(v))?,
                Field::Owned(v) => map.serialize_entry(k, &Exact(v))?,
                Field::Message => map.serialize_entry(k, &Whole(&self.message))?,
                Field::Request => match &self.request {
                    Some(r) => map.serialize_entry(k, &Whole(r))?,
                    None => map.serialize_entry(k, &Value::Null)?,
                },
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::exact;

    fn event(
        phase: Phase,
        name: &'static str,
        message: Message,
        request: Option<Message>,
    ) -> HookEvent {
        HookEvent {
            phase,
            event_name: name,
            method: "tools/call".into(),
            session_id: "s-1".into(),
            tool_name: Some("crm_find".into()),
            upstream: Some("crm".into()),
            message,
            request,
            era: "legacy",
            cwd: PathBuf::from("/srv/sluice"),
            principal: Some(Arc::new(Principal::stdio())),
            upstream_sub: None,
            claude: ClaudeFields {
                transcript_path: Some(PathBuf::from("/srv/sluice/transcripts/s-1.jsonl")),
                permission_mode: None,
                tool_use_id: Some("toolu_1".into()),
                duration_ms: (phase == Phase::Response).then_some(12),
                continue_on_block: false,
            },
        }
    }

    /// The payload is `to_json` serialised, byte for byte, whether the messages are kept as
    /// text or as trees (exact ids included), in every phase and for the events that set a
    /// member twice.
    #[test]
    fn the_payload_is_to_json_serialised() {
        let call_text = br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"crm_find","arguments":{"q":"a\"b","n":[1,2.5]}}}"#;
        let raw_call = Message::parse(call_text).unwrap();
        assert!(raw_call.received_text().is_some(), "kept as text");
        let tree_call = Message::parse_tree(call_text).unwrap();
        let ok = br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{"content":[{"type":"text","text":"x"}]}}"#;
        let failed = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"gone"}}"#;
        let elicit = Message::from_value(
            json!({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
            "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}),
        )
        .unwrap();
        let end = Message::from_value(json!({"jsonrpc": "2.0", "method": "session/end",
            "params": {"reason": "logout", "sluice_reason": "client_delete"}}))
        .unwrap();
        let events = [
            event(Phase::Request, "PreToolUse", raw_call.clone(), None),
            event(Phase::Request, "Request", tree_call.clone(), None),
            event(
                Phase::Response,
                "PostToolUse",
                Message::parse_reply(ok).unwrap(),
                Some(raw_call.clone()),
            ),
            event(
                Phase::Response,
                "PostToolUse",
                Message::parse_tree(ok).unwrap(),
                Some(tree_call),
            ),
            event(
                Phase::Response,
                "PostToolUseFailure",
                Message::parse_reply(failed).unwrap(),
                Some(raw_call),
            ),
            event(Phase::Response, "Elicitation", elicit, None),
            event(Phase::Request, "SessionEnd", end, None),
        ];
        for ev in &events {
            let payload = ev.payload();
            assert_eq!(
                payload,
                exact::to_string(&ev.to_json()),
                "{}",
                ev.event_name
            );
        }
        let elicitation: Value = serde_json::from_str(&events[5].payload()).unwrap();
        assert_eq!(elicitation["message"], "Name?");
        let at = elicitation
            .as_object()
            .and_then(|o| o.keys().position(|k| k == "message"));
        assert_eq!(at, Some(16), "the question in the raw message's place");
        let pre: Value = serde_json::from_str(&events[0].payload()).unwrap();
        let keys: Vec<&str> = pre
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys[..9],
            [
                "session_id",
                "transcript_path",
                "cwd",
                "prompt_id",
                "scratchpad_dir",
                "permission_mode",
                "effort",
                "hook_event_name",
                "tool_name"
            ]
        );
        for k in ["prompt_id", "scratchpad_dir", "effort"] {
            assert_eq!(pre[k], Value::Null, "{k}");
        }
        // The upstream as Claude Code's `mcp_server`, on the tool events only.
        for (i, ev) in events.iter().enumerate() {
            let p: Value = serde_json::from_str(&ev.payload()).unwrap();
            let want = matches!(
                ev.event_name,
                "PreToolUse" | "PostToolUse" | "PostToolUseFailure"
            )
            .then(|| json!({"name": "crm", "source": "sluice"}));
            assert_eq!(p.get("mcp_server"), want.as_ref(), "{i}: {}", ev.event_name);
        }
        assert!(events[0]
            .payload()
            .contains(r#""id":123456789012345678901234567890"#));
    }

    /// The upstream identity that serves a call is named by its `sub`, after `principal`, and
    /// only when known.
    #[test]
    fn the_upstream_identity_is_named_when_known() {
        let call = Message::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "crm_find", "arguments": {}}}))
        .unwrap();
        let mut ev = event(Phase::Request, "PreToolUse", call, None);
        let unknown: Value = serde_json::from_str(&ev.payload()).unwrap();
        assert!(unknown.get("upstream_sub").is_none(), "{unknown}");
        ev.upstream_sub = Some("alice@example.com".into());
        let payload = ev.payload();
        assert_eq!(payload, exact::to_string(&ev.to_json()));
        let known: Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(known["upstream_sub"], "alice@example.com");
        let keys: Vec<&String> = known.as_object().unwrap().keys().collect();
        let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
        assert_eq!(at("upstream_sub"), at("principal") + 1);
    }
}
