//! What a hook decides: the one vocabulary every kind speaks.

use serde_json::{json, Value};
use sluice_core::{codes, Message, RpcError};

use crate::event::Phase;

/// A refusal: why, and whether the reason is meant for the agent (then it reaches the client
/// in `error.data.reason`; otherwise only the log and the audit log see it).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Why (for the log and the audit line; for the agent too when `for_agent`).
    pub reason: String,
    /// Show the reason to the agent.
    pub for_agent: bool,
    /// An error of its own to answer with instead of -32030 / -32031 (the `validate` builtin's
    /// -32602 listing every violation). `None` for every other refusal.
    pub error: Option<Box<RpcError>>,
}

impl Refusal {
    /// A refusal whose reason is meant for the agent.
    pub fn for_agent(reason: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason.into(),
            for_agent: true,
            error: None,
        }
    }

    /// The JSON-RPC error the client gets for this refusal in `phase`: its own `error` when it
    /// has one, else -32030 "Request rejected" (request phase) or -32031 "Response rejected"
    /// (response phase), with `data.reason` only when the reason is meant for the agent.
    pub fn to_error(&self, phase: Phase, id: Value) -> Message {
        if let Some(err) = &self.error {
            return Message::error(id, err);
        }
        let (code, message) = match phase {
            Phase::Request => (codes::REQUEST_REJECTED, "Request rejected"),
            Phase::Response => (codes::RESPONSE_REJECTED, "Response rejected"),
        };
        let mut err = RpcError::new(code, message);
        if self.for_agent {
            err = err.with_data(json!({"reason": self.reason}));
        }
        Message::error(id, &err)
    }
}

/// A hook's decision on one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Leave the message as it is.
    Pass,
    /// Replace the message (request phase: the request goes on changed; response phase: the
    /// client gets this instead).
    Modify(Message),
    /// Request phase only: reply with this (its id is set to the request's) without calling an
    /// upstream.
    Answer(Message),
    /// Refuse: -32030 in the request phase, -32031 in the response phase (or the refusal's own
    /// error).
    Refuse(Refusal),
    /// Request phase: a person must decide (Claude Code's `permissionDecision: "ask"`, with
    /// the hook's reason). The gateway asks the client with an elicitation. The message, when
    /// given, replaces the request first (the ask's `updatedInput`): the person is asked about
    /// it, and it is what runs when they allow it.
    Ask(String, Option<Message>),
    /// Request phase: Claude Code's `permissionDecision: "defer"` (with the hook's reason): the
    /// decision is left to the caller of a session no one attends. Behind the gateway no caller
    /// can resume a deferred call, so the chain refuses it, unless a hook denies it (deny >
    /// defer > ask > allow).
    Defer(String),
    /// Response phase: the reply goes on as given (the hook's reason appended to a call's
    /// result for the agent), and the reason is recorded (Claude Code's PostToolUse block).
    Feedback(Message, String),
}

/// A hook failed to decide (timed out, crashed, answered something unreadable). The chain
/// applies the hook's `on_error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HookFailure(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_errors() {
        let r = Refusal::for_agent("no");
        assert_eq!(
            r.to_error(Phase::Request, json!(1)).to_value(),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32030, "message": "Request rejected", "data": {"reason": "no"}}})
        );
        let quiet = Refusal {
            for_agent: false,
            ..r.clone()
        };
        assert_eq!(
            quiet.to_error(Phase::Response, json!(2)).to_value()["error"],
            json!({"code": -32031, "message": "Response rejected"})
        );
        let own = Refusal {
            error: Some(Box::new(
                RpcError::new(-32602, "bad").with_data(json!({"violations": []})),
            )),
            ..r
        };
        assert_eq!(
            own.to_error(Phase::Request, json!(3)).to_value()["error"],
            json!({"code": -32602, "message": "bad", "data": {"violations": []}})
        );
    }
}
