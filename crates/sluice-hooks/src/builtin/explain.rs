//! The explain hook (Civic's explain hook): every tool in `tools/list` gains a required `reason` parameter;
//! on `tools/call` the reason is recorded, stripped, and the call forwarded; a call without a
//! reason, or with one that is not a non-empty string, is refused with a message that says
//! what is wrong. The parameter's description is Civic's README text by default,
//! `options.description`, or `options.preset: "civic"` for the text Civic's explain hook asks
//! for today (`GOAL: … JUSTIFICATION: … CHOICE: …`).

use crate::decision::{Decision, Refusal};
use crate::event::{HookEvent, Phase};
use serde_json::{json, Map, Value};
use sluice_config::ExplainOptions;
use sluice_core::member;

/// The description of the added parameter (Civic's explain hook's README, verbatim; preset
/// `readme`, the default).
pub const REASON_DESCRIPTION: &str =
    "A concise justification for using this tool, explaining how it helps achieve your goal";

/// The description Civic's explain hook sets today (its source, verbatim; preset `civic`).
pub const CIVIC_REASON_DESCRIPTION: &str = "A justification for using this tool, explaining how it helps achieve your goal. Should contain the following: GOAL: <Your current goal>, JUSTIFICATION: <how this tool helps achieve the goal>, CHOICE: <why you chose to use this tool over other available tools>.";

/// The `_meta` key under which the stripped reason travels inside the gateway.
pub const EXPLAIN_REASON_META: &str = "sluice/reason";

/// What the agent is told when it leaves the reason out.
pub const MISSING_REASON: &str = "Missing required parameter 'reason': add a concise justification for using this tool, explaining how it helps achieve your goal, and call it again.";

/// The explain hook: the description its `reason` parameter carries.
#[derive(Debug, Clone)]
pub struct Explain {
    description: String,
}

impl Default for Explain {
    fn default() -> Explain {
        Explain {
            description: REASON_DESCRIPTION.into(),
        }
    }
}

/// Add `reason` with the default description to one tool's input schema.
pub fn add_reason(tool: &mut Value) {
    add_reason_described(tool, REASON_DESCRIPTION)
}

/// What is wrong with a `reason` argument that is there but is not a non-empty string.
fn bad_reason(v: &Value) -> String {
    let what = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        Value::String(_) => {
            return "The 'reason' parameter is empty: give a concise justification for using this tool, explaining how it helps achieve your goal, and call it again.".into()
        }
    };
    format!("The 'reason' parameter must be a string, not {what}: give a concise justification for using this tool, explaining how it helps achieve your goal, as text, and call it again.")
}

/// Add `reason` described by `description` to one tool's input schema (property, and
/// `required` without duplicates).
fn add_reason_described(tool: &mut Value, description: &str) {
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
            json!({"type": "string", "description": description}),
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
    /// From its options: `description`, or `preset` (`readme`, `civic`).
    pub fn from_options(o: &ExplainOptions) -> Explain {
        let description = match (&o.description, o.preset.as_deref()) {
            (Some(d), _) => d.clone(),
            (None, Some("civic")) => CIVIC_REASON_DESCRIPTION.into(),
            _ => REASON_DESCRIPTION.into(),
        };
        Explain { description }
    }

    /// The methods and phases it acts on: the response of `tools/list`, the request of
    /// `tools/call`.
    pub fn selects(phase: Phase, method: &str) -> bool {
        matches!(
            (phase, method),
            (Phase::Response, "tools/list") | (Phase::Request, "tools/call")
        )
    }

    /// Decide; a `tools/call` reason is also put in `reason` (the trace's `explain_reason`). A
    /// change is made to the event's message itself, which `Modify` carries away (no copy).
    pub fn decide(&self, ev: &mut HookEvent, reason_out: &mut Option<String>) -> Decision {
        match (ev.phase, ev.method.as_str()) {
            (Phase::Response, "tools/list") => {
                let Some(tools) = ev
                    .message
                    .result_mut()
                    .and_then(|r| r.get_mut("tools"))
                    .and_then(Value::as_array_mut)
                else {
                    return Decision::Pass;
                };
                for t in tools.iter_mut() {
                    add_reason_described(t, &self.description);
                }
                Decision::Modify(ev.message.take())
            }
            (Phase::Request, "tools/call") => {
                let given = ev.tool_input().and_then(|a| member::of(a, "reason"));
                let reason = match given {
                    None => return Decision::Refuse(Refusal::for_agent(MISSING_REASON)),
                    Some(Value::String(r)) if !r.trim().is_empty() => r.trim().to_string(),
                    Some(v) => return Decision::Refuse(Refusal::for_agent(bad_reason(v))),
                };
                tracing::info!(
                    session = %ev.session_id,
                    tool = ev.tool_name.as_deref().unwrap_or(""),
                    reason = %reason,
                    "explain"
                );
                // A request kept as text stays text: only `arguments` and `_meta` are written
                // anew.
                let mut msg = ev.message.take();
                if let Some(args) = msg.param_mut("arguments").and_then(Value::as_object_mut) {
                    args.shift_remove("reason");
                }
                // Kept for the gateway (the funnel hands it to the real call); the router takes
                // it off before the message goes upstream.
                let reason_value = Value::String(reason.clone());
                match msg.param_mut("_meta") {
                    Some(Value::Object(meta)) => {
                        meta.insert(EXPLAIN_REASON_META.into(), reason_value);
                    }
                    Some(_) => {}
                    None => {
                        let mut meta = Map::with_capacity(1);
                        meta.insert(EXPLAIN_REASON_META.into(), reason_value);
                        msg.set_param("_meta", Value::Object(meta));
                    }
                }
                *reason_out = Some(reason);
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

    #[test]
    fn presets_and_descriptions() {
        let civic = Explain::from_options(&ExplainOptions {
            preset: Some("civic".into()),
            ..Default::default()
        });
        assert!(civic
            .description
            .contains("GOAL: <Your current goal>, JUSTIFICATION:"));
        let own = Explain::from_options(&ExplainOptions {
            description: Some("Why?".into()),
            ..Default::default()
        });
        assert_eq!(own.description, "Why?");
        assert_eq!(
            Explain::from_options(&ExplainOptions::default()).description,
            REASON_DESCRIPTION
        );
    }

    #[test]
    fn a_reason_that_is_not_text_says_so() {
        assert!(bad_reason(&json!(42))
            .starts_with("The 'reason' parameter must be a string, not a number"));
        assert!(bad_reason(&json!("")).starts_with("The 'reason' parameter is empty"));
        assert!(bad_reason(&json!(["a"])).contains("not an array"));
    }

    #[test]
    fn a_call_kept_as_text_is_changed_as_a_parsed_one_and_stays_text() {
        let explain = Explain::from_options(&ExplainOptions::default());
        for text in [
            // No `_meta`: one is added at the end of `params`.
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{"n":1.10,"reason":" why "},"task":{"ttl":2.50}}}"#,
            // The client's own `_meta` gains the reason beside its members.
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"progressToken":2},"name":"t","arguments":{"reason":"why","n":1}}}"#,
            // A `_meta` that is not an object is left as it is.
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{"reason":"why"},"_meta":7}}"#,
        ] {
            let decide = |message: sluice_core::Message| {
                let mut ev = crate::builtin::deny::tests::call("t", json!({}));
                ev.message = message;
                let mut reason = None;
                match explain.decide(&mut ev, &mut reason) {
                    Decision::Modify(m) => (m, reason),
                    other => panic!("{other:?}"),
                }
            };
            let (lazy, lazy_reason) = decide(sluice_core::Message::parse(text.as_bytes()).unwrap());
            let (tree, tree_reason) =
                decide(sluice_core::Message::parse_tree(text.as_bytes()).unwrap());
            assert_eq!(lazy_reason.as_deref(), Some("why"), "{text}");
            assert_eq!(lazy_reason, tree_reason);
            assert_eq!(lazy.to_value(), tree.to_value(), "{text}");
            assert!(lazy.param("arguments").unwrap().get("reason").is_none());
            // Kept as text: what the hook did not change is written as received.
            let out = lazy.to_json();
            assert_eq!(
                serde_json::from_str::<Value>(&out).unwrap(),
                tree.to_value()
            );
            if text.contains("2.50") {
                assert!(out.contains(r#""task":{"ttl":2.50}"#), "{out}");
            }
            assert!(out.starts_with(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"#));
        }
    }
}
