//! The typed record of one exchange (a tool call, a refusal): what the audit line carries, what
//! the live traffic view shows and what the metrics count.
//!
//! It serializes to the audit line's JSON, field for field in this order (`time`, `session`,
//! `client`, `principal`, `method`, `tool`, `upstream`, `duration_ms`, `outcome`, `error`,
//! `explain_reason`, `controls`, `hooks`, and `task` when the exchange created or collected a
//! task); the e2e tests and the admin page read that shape.

use serde::Serialize;
use serde_json::{Map, Value};
use sluice_hooks::Trace;
use std::time::Instant;

/// One recorded exchange.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// When it was recorded (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
    pub time: String,
    /// The client session's id.
    pub session: String,
    /// The client's `clientInfo.name`, as it sent it.
    pub client: Option<Value>,
    /// The authenticated principal's id.
    pub principal: Option<String>,
    /// The method.
    pub method: String,
    /// The client-facing tool name (tools/call).
    pub tool: Option<String>,
    /// The upstream it went to.
    pub upstream: Option<String>,
    /// From the request's arrival to the recording, in milliseconds.
    pub duration_ms: f64,
    /// `ok`, `error`, `refused` or `cancelled`.
    pub outcome: String,
    /// The error or refusal reason.
    pub error: Option<String>,
    /// The reason the explain hook recorded.
    pub explain_reason: Option<String>,
    /// What the response controls changed, by builtin.
    pub controls: Map<String, Value>,
    /// Each hook's decision, in the order they ran.
    pub hooks: Vec<HookLine>,
    /// The task the exchange created or collected (the gateway's task id), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The endpoint it was served on (`mcp/endpoints.json`'s name); absent for `/mcp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// One hook's decision in an [`Exchange`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookLine {
    /// The hook id.
    pub id: String,
    /// `request` or `response`.
    pub phase: &'static str,
    /// `pass`, `modify`, `answer`, `refuse` or `error`.
    pub decision: &'static str,
    /// The refusal reason, or the failure.
    pub reason: Option<String>,
    /// How long it took, µs.
    pub us: u64,
}

/// Who made the exchange: the session's facts, as plain values.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The session id.
    pub session: &'a str,
    /// The client's `clientInfo.name`.
    pub client: Option<&'a Value>,
    /// The authenticated principal's id.
    pub principal: Option<&'a str>,
}

/// What happened, as the request driver knows it when the exchange ends.
#[derive(Debug)]
pub struct Ended<'a> {
    /// The method.
    pub method: &'a str,
    /// The client-facing tool name (tools/call).
    pub tool: Option<&'a str>,
    /// The upstream it went to.
    pub upstream: Option<&'a str>,
    /// When it started.
    pub started: Instant,
    /// `ok`, `error`, `refused` or `cancelled`.
    pub outcome: &'a str,
    /// The error or refusal reason.
    pub error: Option<String>,
    /// What the hooks decided.
    pub trace: &'a Trace,
}

impl Exchange {
    /// The record of `call`, made by `caller`, ending now.
    pub fn new(caller: Caller<'_>, call: Ended<'_>) -> Exchange {
        let hooks = call
            .trace
            .records
            .iter()
            .map(|r| HookLine {
                id: r.id.to_string(),
                phase: r.phase.as_str(),
                decision: r.decision,
                reason: r.reason.clone(),
                us: r.micros,
            })
            .collect();
        Exchange {
            time: sluice_core::time::now_rfc3339(),
            session: caller.session.to_string(),
            client: caller.client.cloned(),
            principal: caller.principal.map(str::to_string),
            method: call.method.to_string(),
            tool: call.tool.map(str::to_string),
            upstream: call.upstream.map(str::to_string),
            duration_ms: call.started.elapsed().as_secs_f64() * 1000.0,
            outcome: call.outcome.to_string(),
            error: call.error,
            explain_reason: call.trace.explain_reason.clone(),
            controls: call.trace.controls.clone(),
            hooks,
            task: None,
            endpoint: None,
        }
    }

    /// The audit line (compact JSON, no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// As a JSON value (the admin API's traffic views).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

pub use sluice_core::time::rfc3339;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_hooks::{HookRecord, Phase};

    /// The line is byte for byte what the server wrote with `json!` before the record was typed.
    #[test]
    fn the_audit_line_keeps_its_shape() {
        let mut trace = Trace {
            explain_reason: Some("because".into()),
            ..Trace::default()
        };
        trace.controls.insert("mask".into(), json!(2));
        trace.records.push(HookRecord {
            id: "no-add".into(),
            phase: Phase::Request,
            decision: "refuse",
            reason: Some("no \"adding\"".into()),
            micros: 12,
            started: Instant::now(),
        });
        let client = json!("cli");
        let x = Exchange::new(
            Caller {
                session: "s1",
                client: Some(&client),
                principal: None,
            },
            Ended {
                method: "tools/call",
                tool: Some("fx_add"),
                upstream: None,
                started: Instant::now(),
                outcome: "refused",
                error: Some("no".into()),
                trace: &trace,
            },
        );
        let hooks: Vec<Value> = trace
            .records
            .iter()
            .map(|r| json!({"id": &*r.id, "phase": r.phase.as_str(), "decision": r.decision, "reason": r.reason, "us": r.micros}))
            .collect();
        let before = json!({
            "time": x.time,
            "session": "s1",
            "client": client,
            "principal": Value::Null,
            "method": "tools/call",
            "tool": Some("fx_add"),
            "upstream": None::<&str>,
            "duration_ms": x.duration_ms,
            "outcome": "refused",
            "error": Some("no"),
            "explain_reason": trace.explain_reason,
            "controls": trace.controls,
            "hooks": hooks,
        });
        assert_eq!(x.to_line(), before.to_string());
        assert_eq!(x.to_value(), before);
    }
}
