//! The chain's session events: SessionStart for a 2026-07-28 request (which has no
//! `initialize` of its own), and Stop and SessionEnd when a session ends.

use super::{Chain, Ctx, Trace};
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::Phase;
use sluice_config::{HookEventKind, OnError};
use sluice_core::Message;
use std::time::Instant;

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
            let started = Instant::now();
            let ev = self.event(Phase::Request, hook, ctx, msg.clone(), None, trace);
            let (decision, reason, refusal) = match hook.decide(&ev, ctx, trace).await {
                Ok(Decision::Refuse(r)) => ("refuse", Some(r.reason.clone()), Some(r)),
                Ok(_) => ("pass", None, None),
                Err(HookFailure(why)) if hook.on_error == OnError::Refuse => (
                    "error",
                    Some(why.clone()),
                    Some(Refusal {
                        reason: format!("hook {} failed: {why}", hook.id),
                        for_agent: false,
                        error: None,
                    }),
                ),
                Err(HookFailure(why)) => ("error", Some(why), None),
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
    /// order (decisions are only logged).
    pub async fn stop(&self, session_id: &str) {
        self.stop_era(session_id, "legacy").await
    }

    /// [`Chain::stop`] for a session of `era` (`"legacy"` or `"modern"`).
    pub async fn stop_era(&self, session_id: &str, era: &'static str) {
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
                tool_use_id: None,
                answers: None,
            };
            let msg = Message::notification("notifications/stop", None);
            let mut trace = Trace::default();
            let mut ev = self.event(Phase::Request, hook, &ctx, msg, None, &trace);
            ev.event_name = hook.event.name();
            match hook.decide(&ev, &ctx, &mut trace).await {
                Ok(d) => tracing::debug!(hook = %hook.id, session = session_id, "Stop hook: {d:?}"),
                Err(e) => {
                    tracing::warn!(hook = %hook.id, session = session_id, "Stop hook failed: {e}")
                }
            }
        }
    }
}
