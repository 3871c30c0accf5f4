//! What a hook decides: the one vocabulary every kind speaks.

use sluice_core::Message;

/// A refusal: why, and whether the reason is meant for the agent (then it reaches the client
/// in `error.data.reason`; otherwise only the log and the audit log see it).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Why.
    pub reason: String,
    /// Show the reason to the agent.
    pub for_agent: bool,
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
    /// Refuse: -32030 in the request phase, -32031 in the response phase.
    Refuse(Refusal),
}

/// A hook failed to decide (timed out, crashed, answered something unreadable). The chain
/// applies the hook's `on_error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HookFailure(pub String);
