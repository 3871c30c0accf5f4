//! A hook's `ask`, as Claude Code means it: the person behind the client is asked with a form
//! elicitation naming the tool, its arguments and the hooks' reasons, and the call goes on only
//! on their yes.

use super::client_out::ask_client;
use super::hooks::Facts;
use crate::channel::Sink;
use crate::session::Session;
use crate::state::State;
use serde_json::{json, Value};
use sluice_config::AskFallback;
use sluice_core::{codes, Message};
use sluice_hooks::{AskRequest, Refusal};
use std::sync::Arc;

/// The most characters of the arguments an `ask` shows a person.
const ASK_ARGS_CHARS: usize = 2000;

/// The schema of the question an `ask` puts to a person: one required boolean `allow`.
pub(super) fn ask_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"allow": {
            "type": "boolean",
            "title": "Allow this call",
            "description": "true runs the call; false refuses it"
        }},
        "required": ["allow"]
    })
}

/// Hooks answered `ask` for `msg`: ask a person through the client, with a form elicitation
/// (`elicitation/create` on the request's stream; for a 2026-07-28 client the same request
/// ends the round with `input_required`, and its retry brings the answer back) whose message
/// names the tool, the arguments and the hooks' reasons. `Ok` only on `accept` with
/// `allow: true`. Declined, cancelled, not allowed, or unanswered: a refusal for the agent
/// saying so. A client without the elicitation capability gets the hooks' `ask_fallback`
/// (`deny` unless every asking hook says `allow`).
pub(super) async fn ask(
    st: &Arc<State>,
    session: &Arc<Session>,
    sink: &Sink,
    facts: &Facts,
    msg: &Message,
    asks: &[AskRequest],
) -> Result<(), Refusal> {
    let what = match &facts.tool_name {
        Some(t) => format!("the tool {t}"),
        None => format!("the request {}", facts.method),
    };
    let args = msg
        .params()
        .and_then(|p| p.get("arguments").or(Some(p)))
        .map(sluice_core::exact::to_string)
        .unwrap_or_else(|| "{}".into());
    // A person reads this: very long arguments are cut.
    let args = match args.char_indices().nth(ASK_ARGS_CHARS) {
        Some((i, _)) => format!(
            "{}… ({} characters in all)",
            &args[..i],
            args.chars().count()
        ),
        None => args,
    };
    let hooks: Vec<&str> = asks.iter().map(|a| a.hook.as_str()).collect();
    let reasons: Vec<&str> = asks.iter().map(|a| a.reason.as_str()).collect();
    let reasons = reasons.join("; ");
    let message = format!(
        "Allow the call of {what} with the arguments {args}? Hook {} asks: {reasons}",
        hooks.join(", ")
    );
    if !session.has_capability("elicitation") {
        let allowed = asks.iter().all(|a| a.fallback == AskFallback::Allow);
        tracing::info!(session = %session.id, tool = facts.tool_name.as_deref().unwrap_or(""), allowed, "a hook asked, and the client cannot be asked (no elicitation capability): the ask_fallback decides");
        return if allowed {
            Ok(())
        } else {
            Err(Refusal::for_agent(format!(
                "{reasons} (the hook asked for a person's approval, and this client cannot be asked: it declared no elicitation capability, so the call is refused)"
            )))
        };
    }
    let params = json!({"mode": "form", "message": message, "requestedSchema": ask_schema()});
    let answer = ask_client(
        st,
        session,
        sink,
        "elicitation/create",
        Some(params),
        "sluice",
    )
    .await;
    let answer = match answer {
        Ok(a) => a,
        Err(e) if e.code == codes::REQUEST_TIMEOUT => {
            return Err(Refusal::for_agent(format!(
                "{reasons} (the person asked did not answer in time, so the call is refused)"
            )))
        }
        Err(e) => {
            return Err(Refusal::for_agent(format!(
                "{reasons} (asking the person failed: {}; the call is refused)",
                e.message
            )))
        }
    };
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
    let allow = answer.pointer("/content/allow") == Some(&Value::Bool(true));
    match (action, allow) {
        ("accept", true) => {
            tracing::info!(session = %session.id, tool = facts.tool_name.as_deref().unwrap_or(""), "a person allowed the call a hook asked about");
            Ok(())
        }
        ("accept", false) => Err(Refusal::for_agent(format!(
            "{reasons} (the person asked did not allow the call)"
        ))),
        ("decline", _) => Err(Refusal::for_agent(format!(
            "{reasons} (the person asked declined the call)"
        ))),
        ("cancel", _) => Err(Refusal::for_agent(format!(
            "{reasons} (the person asked cancelled the question, so the call is refused)"
        ))),
        (other, _) => Err(Refusal::for_agent(format!(
            "{reasons} (the client answered the question with {other:?}, so the call is refused)"
        ))),
    }
}
