//! The chain's session events: SessionStart for a 2026-07-28 request (which has no
//! `initialize` of its own), and Stop and SessionEnd when a session ends.

use super::{Chain, Ctx, Trace};
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::Phase;
use serde_json::json;
use sluice_config::HookEventKind;
use sluice_core::Message;
use std::time::Instant;

/// Why a session ended: SessionEnd's `reason` in Claude Code's words ([`EndReason::claude`]),
/// and Sluice's own, exact word for it (`sluice_reason`, [`EndReason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The client ended it (HTTP DELETE): Claude Code's `logout`.
    Deleted,
    /// No traffic for `session_idle_secs`.
    Idle,
    /// The gateway shut down (for a stdio client: its stdin closed).
    Shutdown,
    /// The session was never admitted (the session limit was reached meanwhile).
    NotAdmitted,
    /// A 2026-07-28 request (a session of its own) was answered.
    RequestDone,
}

impl EndReason {
    /// Claude Code's SessionEnd `reason`: `logout` for a client that ended its session, else
    /// `other` (its `clear`, `resume`, `prompt_input_exit` and `bypass_permissions_disabled`
    /// are the agent's own).
    pub fn claude(self) -> &'static str {
        match self {
            EndReason::Deleted => "logout",
            _ => "other",
        }
    }

    /// Sluice's word: `client_delete`, `idle_timeout`, `shutdown`, `not_admitted`,
    /// `request_done`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Deleted => "client_delete",
            EndReason::Idle => "idle_timeout",
            EndReason::Shutdown => "shutdown",
            EndReason::NotAdmitted => "not_admitted",
            EndReason::RequestDone => "request_done",
        }
    }
}

impl Chain {
    /// Are there hooks on the session events (SessionStart, Stop, SessionEnd) that are shown
    /// payloads? (A 2026-07-28 request fires them as a session of its own.)
    pub fn has_session_hooks(&self) -> bool {
        self.hooks.iter().any(|h| {
            !h.is_builtin()
                && matches!(
                    h.event,
                    HookEventKind::SessionStart | HookEventKind::Stop | HookEventKind::SessionEnd
                )
        })
    }

    /// Run only the SessionStart hooks on `msg` (an `initialize` request): for a 2026-07-28
    /// request, which has no `initialize` of its own. A refusal stops them.
    pub async fn session_start(
        &self,
        ctx: &Ctx<'_>,
        msg: Message,
        trace: &mut Trace,
    ) -> Option<Refusal> {
        for hook in self
            .hooks
            .iter()
            .filter(|h| h.event == HookEventKind::SessionStart && !h.is_builtin())
        {
            if !hook.selects(Phase::Request, ctx) {
                continue;
            }
            if self.ran_detached(Phase::Request, hook, ctx, &msg, None, trace) {
                continue;
            }
            let started = Instant::now();
            let mut ev = self.event(Phase::Request, hook, ctx, msg.clone(), None, trace);
            let tools = self.tools.as_ref();
            let (decision, reason, refusal) = match hook.decide(&mut ev, ctx, trace, tools).await {
                Ok(Decision::Refuse(r)) => ("refuse", Some(r.reason.clone()), Some(r)),
                Ok(_) => ("pass", None, None),
                Err(HookFailure(why)) => {
                    let refusal = hook.failure_refusal(&why);
                    ("error", Some(why), refusal)
                }
            };
            trace
                .records
                .push(hook.record(Phase::Request, started, decision, reason));
            if refusal.is_some() {
                return refusal;
            }
        }
        None
    }

    /// Fire the `Stop` and `SessionEnd` hooks for a legacy session that ended, in manifest
    /// order (decisions are only logged), then remove its transcript (unless kept).
    pub async fn stop(&self, session_id: &str, why: EndReason) {
        self.stop_era(session_id, "legacy", why).await
    }

    /// [`Chain::stop`] for a session of `era` (`"legacy"` or `"modern"`).
    pub async fn stop_era(&self, session_id: &str, era: &'static str, why: EndReason) {
        self.fire_stop(session_id, era, why).await;
        self.drop_transcript(session_id);
    }

    /// Close the transcript of a session that ended, and remove it (unless the
    /// `keep_transcripts` setting keeps it). [`Chain::stop`] does it after the session's Stop
    /// and SessionEnd hooks.
    pub fn drop_transcript(&self, session_id: &str) {
        self.forget_session(session_id);
        if let Some(t) = &self.transcripts {
            t.end(session_id, self.keep_transcripts);
        }
    }

    async fn fire_stop(&self, session_id: &str, era: &'static str, why: EndReason) {
        for hook in self.hooks.iter().filter(|h| {
            matches!(h.event, HookEventKind::Stop | HookEventKind::SessionEnd) && !h.is_builtin()
        }) {
            let ctx = Ctx {
                session_id,
                method: "notifications/stop",
                tool_name: None,
                upstream: None,
                era,
                tool: None,
                principal: None,
                upstream_tool: None,
                upstream_sub: None,
                catalog: None,
                tool_use_id: None,
                answers: None,
            };
            let msg = Message::notification(
                "notifications/stop",
                Some(json!({"reason": why.claude(), "sluice_reason": why.as_str()})),
            );
            let mut trace = Trace::default();
            let mut ev = self.event(Phase::Request, hook, &ctx, msg, None, &trace);
            ev.event_name = hook.event.name();
            if hook.claude.run_async && self.detach(hook, ev.clone()) {
                continue;
            }
            match hook
                .decide(&mut ev, &ctx, &mut trace, self.tools.as_ref())
                .await
            {
                Ok(d) => tracing::debug!(hook = %hook.id, session = session_id, "Stop hook: {d:?}"),
                Err(e) => {
                    tracing::warn!(hook = %hook.id, session = session_id, "Stop hook failed: {e}")
                }
            }
        }
    }
}
