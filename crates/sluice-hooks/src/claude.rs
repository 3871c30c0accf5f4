//! The Claude Code JSON output protocol: how a command hook's stdout after exit 0 (and a
//! Claude Code http hook's 2xx body) becomes a decision, read as [`crate::command`]'s module
//! docs say — `permissionDecision`, `decision: "block"`, `continue: false`, the Zato-style
//! shape, `updatedInput`, `additionalContext`; after a call (PostToolUse, PostToolUseFailure)
//! feedback that keeps the result (or, with `continue_on_block`, replaces it with the reason as a
//! tool error) and `updatedToolOutput`; `defer`; the elicitation events' `action`.

use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use crate::wire::{native_decision, truncate_chars};
use serde_json::{json, Value};
use sluice_core::Message;

/// The command line for logs.
fn short(command: &str) -> &str {
    truncate_chars(command, 200)
}

/// Read the JSON protocol from stdout of an exit 0 (see [`crate::command`]'s module docs).
pub(crate) fn read_json_protocol(
    command: &str,
    ev: &HookEvent,
    stdout: &[u8],
) -> Result<Decision, HookFailure> {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim();
    if text.is_empty() {
        return Ok(Decision::Pass);
    }
    let out = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => o,
        _ => {
            tracing::debug!(command = %short(command), stdout = %truncate_chars(text, 500), "hook stdout (advisory)");
            return Ok(Decision::Pass);
        }
    };
    if let Some(m) = out.get("systemMessage").and_then(Value::as_str) {
        tracing::info!(command = %short(command), "hook systemMessage: {m}");
    }
    let specific = out.get("hookSpecificOutput").and_then(Value::as_object);
    let field = |k: &str| specific.and_then(|s| s.get(k)).and_then(Value::as_str);
    if after_the_call(ev) {
        if let Some(d) = native_decision(ev, &out)? {
            return Ok(d);
        }
        return Ok(after_call_output(command, ev, &out));
    }
    if matches!(ev.event_name, "Elicitation" | "ElicitationResult") {
        let action = specific
            .and_then(|s| s.get("action"))
            .and_then(Value::as_str)
            .or_else(|| {
                (out.get("decision").and_then(Value::as_str) == Some("block")).then_some("decline")
            });
        if let Some(d) =
            action.and_then(|a| elicitation_answer(ev, a, specific.and_then(|s| s.get("content"))))
        {
            return Ok(d);
        }
    }

    match field("permissionDecision") {
        Some("deny") => {
            return Ok(refuse(field("permissionDecisionReason"), "denied by hook"));
        }
        Some("defer") if ev.phase == Phase::Request => {
            let reason = field("permissionDecisionReason")
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("the hook defers the decision");
            // deny > defer: a refusal read on still wins.
            return Ok(match read_after_permission(command, ev, &out)? {
                Decision::Refuse(r) => Decision::Refuse(r),
                _ => Decision::Defer(reason.to_string()),
            });
        }
        Some("ask") if ev.phase == Phase::Request => {
            let reason = field("permissionDecisionReason")
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("the hook asks for confirmation");
            // A later refusal wins over an ask (deny > ask > allow), so read on for one; an
            // `updatedInput` beside the ask is what the person is asked about, and what runs.
            let rest = read_after_permission(command, ev, &out)?;
            return Ok(match rest {
                Decision::Refuse(r) => Decision::Refuse(r),
                Decision::Modify(m) => Decision::Ask(reason.to_string(), Some(m)),
                _ => Decision::Ask(reason.to_string(), None),
            });
        }
        _ => {}
    }
    read_after_permission(command, ev, &out)
}

/// The JSON protocol after `permissionDecision`: block, stop, the Zato-style shape,
/// `updatedInput`, `additionalContext`.
fn read_after_permission(
    command: &str,
    ev: &HookEvent,
    out: &serde_json::Map<String, Value>,
) -> Result<Decision, HookFailure> {
    let specific = out.get("hookSpecificOutput").and_then(Value::as_object);
    let field = |k: &str| specific.and_then(|s| s.get(k)).and_then(Value::as_str);
    let str_of = |k: &str| out.get(k).and_then(Value::as_str);
    if str_of("decision") == Some("block") {
        return Ok(refuse(str_of("reason"), "blocked by hook"));
    }
    if out.get("continue") == Some(&Value::Bool(false)) {
        return Ok(refuse(str_of("stopReason"), "stopped by hook"));
    }
    if let Some(d) = native_decision(ev, out)? {
        return Ok(d);
    }

    let is_call = ev.method == "tools/call";
    if let Some(input) = specific.and_then(|s| s.get("updatedInput")) {
        match (input, ev.phase, ev.message.method()) {
            (Value::Object(_), Phase::Request, Some("tools/call")) => {
                let mut msg = ev.message.clone();
                msg.params_mut().insert("arguments".into(), input.clone());
                return Ok(crate::wire::replace(ev, msg));
            }
            _ => tracing::warn!(
                command = %short(command),
                phase = ev.phase.as_str(),
                method = %ev.method,
                "ignored the hook's updatedInput: it must be an object, and only replaces the arguments of a tools/call request"
            ),
        }
    }
    let context = field("additionalContext").or_else(|| str_of("additionalContext"));
    if let Some(context) = context.filter(|c| !c.is_empty()) {
        if ev.phase == Phase::Response && is_call {
            if let Some(msg) = with_context(&ev.message, context) {
                return Ok(Decision::Modify(msg));
            }
        }
        tracing::info!(
            command = %short(command),
            phase = ev.phase.as_str(),
            method = %ev.method,
            context = %context,
            "hook additionalContext not added (only a tools/call result can carry it)"
        );
    }
    Ok(Decision::Pass)
}

/// An Elicitation hook's answer for the upstream (the client is not asked), or an
/// ElicitationResult hook's change of the client's answer: `{"action": …, "content": …}`.
/// `None` for other events, or an action that is not accept, decline or cancel.
pub(crate) fn elicitation_answer(
    ev: &HookEvent,
    action: &str,
    content: Option<&Value>,
) -> Option<Decision> {
    if !matches!(action, "accept" | "decline" | "cancel") {
        return None;
    }
    let mut result = serde_json::Map::new();
    result.insert("action".into(), json!(action));
    if let (Some(c), "accept") = (content, action) {
        result.insert("content".into(), c.clone());
    }
    let id = ev.message.id().cloned().unwrap_or(Value::Null);
    let answer = Message::response(id, Value::Object(result));
    match ev.event_name {
        "Elicitation" => Some(Decision::Answer(answer)),
        "ElicitationResult" => Some(crate::wire::replace(ev, answer)),
        _ => None,
    }
}

/// Is this the response phase of a call, on Claude Code's events after the tool ran?
pub(crate) fn after_the_call(ev: &HookEvent) -> bool {
    ev.phase == Phase::Response
        && ev.method == "tools/call"
        && matches!(ev.event_name, "PostToolUse" | "PostToolUseFailure")
}

/// A block after the call: keep the reply and append `reason` for the agent (when the reply
/// can carry it); with the hook's `continue_on_block` on PostToolUse, the reply becomes the
/// reason as a tool error (`isError: true`), as Claude Code feeds a refusal back as the tool's
/// result. Recorded as feedback with the reason.
pub(crate) fn feedback(ev: &HookEvent, reply: &Message, reason: String) -> Decision {
    if ev.claude.continue_on_block && ev.event_name == "PostToolUse" {
        if let Some(m) = replace_output(
            reply,
            &json!({"content": [{"type": "text", "text": reason}], "isError": true}),
        ) {
            return Decision::Feedback(m, reason);
        }
    }
    let msg = with_context(reply, &reason).unwrap_or_else(|| reply.clone());
    Decision::Feedback(msg, reason)
}

/// PostToolUse / PostToolUseFailure JSON output (see the module docs).
fn after_call_output(
    command: &str,
    ev: &HookEvent,
    out: &serde_json::Map<String, Value>,
) -> Decision {
    let specific = out.get("hookSpecificOutput").and_then(Value::as_object);
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let mut msg = ev.message.clone();
    let mut changed = false;
    let updated = specific.and_then(|s| {
        s.get("updatedMCPToolOutput")
            .or_else(|| s.get("updatedToolOutput"))
    });
    if let Some(v) = updated {
        match replace_output(&msg, v) {
            Some(m) => {
                msg = m;
                changed = true;
            }
            None => {
                tracing::warn!(command = %short(command), "ignored the hook's updated tool output: it must be an object, an array or a string")
            }
        }
    }
    let mut reason = None;
    let mut notes = Vec::new();
    if out.get("decision").and_then(Value::as_str) == Some("block") {
        let r = text(out.get("reason")).unwrap_or_else(|| "blocked by hook".into());
        if ev.claude.continue_on_block && ev.event_name == "PostToolUse" {
            return feedback(ev, &msg, r);
        }
        notes.push(r.clone());
        reason = Some(r);
    }
    if out.get("continue") == Some(&Value::Bool(false)) {
        let r = text(out.get("stopReason")).unwrap_or_else(|| "stopped by hook".into());
        notes.push(r.clone());
        reason.get_or_insert(r);
    }
    if let Some(c) = text(specific.and_then(|s| s.get("additionalContext")))
        .or_else(|| text(out.get("additionalContext")))
    {
        notes.push(c);
    }
    for n in &notes {
        match with_context(&msg, n) {
            Some(m) => {
                msg = m;
                changed = true;
            }
            None => {
                tracing::info!(command = %short(command), note = %n, "hook feedback not added (an error reply cannot carry it)")
            }
        }
    }
    match reason {
        Some(r) => Decision::Feedback(msg, r),
        None if changed => Decision::Modify(msg),
        None => Decision::Pass,
    }
}

/// The reply with its result replaced by a hook's updated output: an object is the new result,
/// an array its `content`, a string one text item. `None` for anything else.
fn replace_output(reply: &Message, v: &Value) -> Option<Message> {
    let result = match v {
        Value::Object(_) => v.clone(),
        Value::Array(_) => json!({"content": v}),
        Value::String(s) => json!({"content": [{"type": "text", "text": s}]}),
        _ => return None,
    };
    Some(Message::response(
        reply.id().cloned().unwrap_or(Value::Null),
        result,
    ))
}

/// The reply with a text item appended to `result.content` (created when absent); `None` for an
/// error reply or a result that is not an object.
fn with_context(reply: &Message, context: &str) -> Option<Message> {
    let mut msg = reply.clone();
    let result = msg.result_mut()?.as_object_mut()?;
    let item = json!({"type": "text", "text": context});
    match result.get_mut("content") {
        Some(Value::Array(items)) => items.push(item),
        _ => {
            result.insert("content".into(), Value::Array(vec![item]));
        }
    }
    Some(msg)
}

fn refuse(reason: Option<&str>, default: &str) -> Decision {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    Decision::Refuse(Refusal {
        reason: reason.unwrap_or(default).to_string(),
        for_agent: true,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn call(phase: Phase) -> HookEvent {
        let req = Message::from_value(json!({"jsonrpc":"2.0","id":"r1","method":"tools/call",
            "params":{"name":"fs_write","arguments":{"path":"/tmp/x"},"_meta":{"k":1}}}))
        .unwrap();
        let (message, request) = match phase {
            Phase::Request => (req, None),
            Phase::Response => (
                Message::from_value(json!({"jsonrpc":"2.0","id":"r1",
                    "result":{"content":[{"type":"text","text":"ok"}]}}))
                .unwrap(),
                Some(req),
            ),
        };
        HookEvent {
            phase,
            event_name: if phase == Phase::Request {
                "PreToolUse"
            } else {
                "PostToolUse"
            },
            method: "tools/call".into(),
            session_id: "s".into(),
            tool_name: Some("fs_write".into()),
            upstream: Some("fs".into()),
            message,
            request,
            era: "legacy",
            cwd: PathBuf::from("/"),
            principal: None,
            upstream_sub: None,
            claude: Default::default(),
        }
    }

    fn read(ev: &HookEvent, out: Value) -> Decision {
        read_json_protocol("test", ev, out.to_string().as_bytes()).unwrap()
    }

    fn refused(reason: &str) -> Decision {
        Decision::Refuse(Refusal {
            reason: reason.into(),
            for_agent: true,
            error: None,
        })
    }

    #[test]
    fn json_protocol_blocks() {
        let ev = call(Phase::Request);
        let deny = json!({"hookSpecificOutput":{"hookEventName":"PreToolUse",
            "permissionDecision":"deny","permissionDecisionReason":"no writes"}});
        assert_eq!(read(&ev, deny), refused("no writes"));
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"deny"}})
            ),
            refused("denied by hook")
        );
        assert_eq!(
            read(&ev, json!({"decision":"block","reason":"nope"})),
            refused("nope")
        );
        assert_eq!(
            read(&ev, json!({"continue":false,"stopReason":"halt"})),
            refused("halt")
        );
        assert_eq!(
            read(&ev, json!({"continue":false})),
            refused("stopped by hook")
        );
        // allow goes on reading.
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"allow"},"decision":"block"})
            ),
            refused("blocked by hook")
        );
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"ask"}})
            ),
            Decision::Ask("the hook asks for confirmation".into(), None)
        );
        // A refusal after an ask wins; so it does after a defer (deny > defer).
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"ask"},"decision":"block","reason":"no"})
            ),
            refused("no")
        );
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"defer"}})
            ),
            Decision::Defer("the hook defers the decision".into())
        );
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"defer","permissionDecisionReason":"CI decides"}})
            ),
            Decision::Defer("CI decides".into())
        );
        assert_eq!(
            read(
                &ev,
                json!({"hookSpecificOutput":{"permissionDecision":"defer"},"continue":false,"stopReason":"halt"})
            ),
            refused("halt")
        );
        // After the call there is nothing to defer.
        assert_eq!(
            read(
                &call(Phase::Response),
                json!({"hookSpecificOutput":{"permissionDecision":"defer"}})
            ),
            Decision::Pass
        );
        assert_eq!(
            read(&ev, json!({"continue":true,"suppressOutput":true})),
            Decision::Pass
        );
    }

    #[test]
    fn updated_input_replaces_arguments_of_a_call_only() {
        let ev = call(Phase::Request);
        let d = read(
            &ev,
            json!({"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"path":"/safe/x"}}}),
        );
        let Decision::Modify(m) = d else {
            panic!("{d:?}")
        };
        assert_eq!(
            m.to_value(),
            json!({"jsonrpc":"2.0","id":"r1","method":"tools/call",
                "params":{"name":"fs_write","arguments":{"path":"/safe/x"},"_meta":{"k":1}}})
        );
        // Beside an ask, the update is what the person is asked about.
        let d = read(
            &ev,
            json!({"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?","updatedInput":{"path":"/safe/y"}}}),
        );
        let Decision::Ask(reason, Some(m)) = d else {
            panic!("{d:?}")
        };
        assert_eq!(reason, "sure?");
        assert_eq!(
            m.to_value()["params"]["arguments"],
            json!({"path": "/safe/y"})
        );
        // Not an object, or in the response phase: ignored.
        assert_eq!(
            read(&ev, json!({"hookSpecificOutput":{"updatedInput":"x"}})),
            Decision::Pass
        );
        let resp = call(Phase::Response);
        assert_eq!(
            read(
                &resp,
                json!({"hookSpecificOutput":{"updatedInput":{"a":1}}})
            ),
            Decision::Pass
        );
    }

    #[test]
    fn additional_context_is_appended_to_a_call_result() {
        let resp = call(Phase::Response);
        for out in [
            json!({"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"note"}}),
            json!({"additionalContext":"note"}),
        ] {
            let Decision::Modify(m) = read(&resp, out) else {
                panic!()
            };
            assert_eq!(
                m.to_value(),
                json!({"jsonrpc":"2.0","id":"r1","result":{"content":[
                    {"type":"text","text":"ok"},{"type":"text","text":"note"}]}})
            );
        }
        // Request phase: logged, pass.
        assert_eq!(
            read(&call(Phase::Request), json!({"additionalContext":"note"})),
            Decision::Pass
        );
        // An error reply cannot carry it.
        let mut err = call(Phase::Response);
        err.message = Message::from_value(
            json!({"jsonrpc":"2.0","id":"r1","error":{"code":-32000,"message":"x"}}),
        )
        .unwrap();
        assert_eq!(
            read(&err, json!({"additionalContext":"note"})),
            Decision::Pass
        );
    }

    #[test]
    fn after_the_call_output_keeps_the_result_and_feeds_back() {
        let resp = call(Phase::Response);
        let ok = |extra: Vec<Value>| {
            let mut content = vec![json!({"type":"text","text":"ok"})];
            content.extend(extra);
            Message::from_value(json!({"jsonrpc":"2.0","id":"r1","result":{"content": content}}))
                .unwrap()
        };
        assert_eq!(
            read(&resp, json!({"decision":"block","reason":"lint failed"})),
            Decision::Feedback(
                ok(vec![json!({"type":"text","text":"lint failed"})]),
                "lint failed".into()
            )
        );
        assert_eq!(
            read(
                &resp,
                json!({"continue":false,"stopReason":"halt","systemMessage":"shown"})
            ),
            Decision::Feedback(
                ok(vec![json!({"type":"text","text":"halt"})]),
                "halt".into()
            )
        );
        let replaced = read(
            &resp,
            json!({"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedMCPToolOutput":[{"type":"text","text":"[redacted]"}]}}),
        );
        assert_eq!(
            replaced,
            Decision::Modify(
                Message::from_value(json!({"jsonrpc":"2.0","id":"r1","result":{"content":[{"type":"text","text":"[redacted]"}]}}))
                    .unwrap()
            )
        );
        assert_eq!(
            read(
                &resp,
                json!({"hookSpecificOutput":{"updatedToolOutput":{"content":[],"isError":false}}})
            ),
            Decision::Modify(
                Message::from_value(
                    json!({"jsonrpc":"2.0","id":"r1","result":{"content":[],"isError":false}})
                )
                .unwrap()
            )
        );
        assert_eq!(read(&resp, json!({"suppressOutput": true})), Decision::Pass);

        // continue_on_block: the reason replaces the result, as a tool error.
        let mut on = call(Phase::Response);
        on.claude.continue_on_block = true;
        let as_error = Message::from_value(json!({"jsonrpc":"2.0","id":"r1","result":{
            "content":[{"type":"text","text":"writes outside src/ are refused"}],"isError":true}}))
        .unwrap();
        assert_eq!(
            read(
                &on,
                json!({"decision":"block","reason":"writes outside src/ are refused","hookSpecificOutput":{"additionalContext":"x"}})
            ),
            Decision::Feedback(as_error.clone(), "writes outside src/ are refused".into())
        );
        // An exit 2 (command.rs) goes the same way.
        assert_eq!(
            feedback(&on, &on.message, "writes outside src/ are refused".into()),
            Decision::Feedback(as_error, "writes outside src/ are refused".into())
        );
        // Not on PostToolUseFailure: appended as before.
        on.event_name = "PostToolUseFailure";
        assert_eq!(
            read(&on, json!({"decision":"block","reason":"lint failed"})),
            Decision::Feedback(
                ok(vec![json!({"type":"text","text":"lint failed"})]),
                "lint failed".into()
            )
        );
    }

    #[test]
    fn non_json_and_non_objects_are_advisory() {
        let ev = call(Phase::Request);
        for out in [&b"hello"[..], b"", b"  \n", b"[1,2]", b"\"deny\""] {
            assert_eq!(read_json_protocol("t", &ev, out).unwrap(), Decision::Pass);
        }
    }
}
