//! The explain hook (Civic's explain hook): every tool in `tools/list` gains a required `reason` parameter;
//! on `tools/call` the reason is recorded, stripped, and the call forwarded; a call without a
//! reason is refused with a message the agent can act on.

use crate::decision::{Decision, Refusal};
use crate::event::{HookEvent, Phase};
use serde_json::{json, Value};

/// The description of the added parameter (Civic's explain hook, verbatim).
pub const REASON_DESCRIPTION: &str =
    "A concise justification for using this tool, explaining how it helps achieve your goal";

/// The `_meta` key under which the stripped reason travels inside the gateway.
pub const EXPLAIN_REASON_META: &str = "sluice/reason";

/// What the agent is told when it leaves the reason out.
pub const MISSING_REASON: &str = "Missing required parameter 'reason': add a concise justification for using this tool, explaining how it helps achieve your goal, and call it again.";

/// The explain hook.
#[derive(Debug, Default, Clone)]
pub struct Explain;

/// Add `reason` to one tool's input schema (property, and `required` without duplicates).
pub fn add_reason(tool: &mut Value) {
    let Some(tool) = tool.as_object_mut() else {
        return;
    };
    let schema = tool
        .entry("inputSchema")
        .or_insert_with(|| json!({"type": "object"}));
    let Some(schema) = schema.as_object_mut() else {
        return;
    };
    let props = schema.entry("properties").or_insert_with(|| json!({}));
    if let Some(props) = props.as_object_mut() {
        props.insert(
            "reason".into(),
            json!({"type": "string", "description": REASON_DESCRIPTION}),
        );
    }
    let required = schema.entry("required").or_insert_with(|| json!([]));
    if !required.is_array() {
        *required = json!([]);
    }
    let list = required.as_array_mut().expect("array");
    if !list.iter().any(|r| r == "reason") {
        list.push(json!("reason"));
    }
}

impl Explain {
    /// The methods and phases it acts on: the response of `tools/list`, the request of
    /// `tools/call`.
    pub fn selects(phase: Phase, method: &str) -> bool {
        matches!(
            (phase, method),
            (Phase::Response, "tools/list") | (Phase::Request, "tools/call")
        )
    }

    /// Decide; a `tools/call` reason is also put in `reason` (the trace's `explain_reason`).
    pub fn decide(&self, ev: &HookEvent, reason_out: &mut Option<String>) -> Decision {
        match (ev.phase, ev.method.as_str()) {
            (Phase::Response, "tools/list") => {
                let mut msg = ev.message.clone();
                let Some(tools) = msg
                    .result_mut()
                    .and_then(|r| r.get_mut("tools"))
                    .and_then(Value::as_array_mut)
                else {
                    return Decision::Pass;
                };
                for t in tools.iter_mut() {
                    add_reason(t);
                }
                Decision::Modify(msg)
            }
            (Phase::Request, "tools/call") => {
                let reason = ev
                    .message
                    .params()
                    .and_then(|p| p.get("arguments"))
                    .and_then(|a| a.get("reason"))
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string);
                let Some(reason) = reason else {
                    return Decision::Refuse(Refusal::for_agent(MISSING_REASON));
                };
                tracing::info!(
                    session = %ev.session_id,
                    tool = ev.tool_name.as_deref().unwrap_or(""),
                    reason = %reason,
                    "explain"
                );
                *reason_out = Some(reason.clone());
                let mut msg = ev.message.clone();
                let params = msg.params_mut();
                if let Some(args) = params.get_mut("arguments").and_then(Value::as_object_mut) {
                    args.shift_remove("reason");
                }
                // Kept for the gateway (the funnel hands it to the real call); the router takes
                // it off before the message goes upstream.
                if let Some(meta) = params
                    .entry("_meta")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                {
                    meta.insert(EXPLAIN_REASON_META.into(), json!(reason));
                }
                Decision::Modify(msg)
            }
            _ => Decision::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_reason_once_and_creates_required() {
        let mut t = json!({"name": "fetch", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}});
        add_reason(&mut t);
        add_reason(&mut t);
        assert_eq!(
            t,
            json!({"name": "fetch", "inputSchema": {"type": "object", "properties": {
                "url": {"type": "string"},
                "reason": {"type": "string", "description": REASON_DESCRIPTION}
            }, "required": ["url", "reason"]}})
        );
        let mut bare = json!({"name": "x", "inputSchema": {"type": "object"}});
        add_reason(&mut bare);
        assert_eq!(bare["inputSchema"]["required"], json!(["reason"]));
    }
}
