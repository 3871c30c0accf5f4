//! The chain: the enabled hooks in manifest order. The request phase runs head → tail; a hook
//! that answers or refuses stops it, and the reply then travels back tail → head only through
//! the hooks the request reached (the onion). Each hook selects by phase, method glob and
//! tool-name matcher, and has a timeout and an `on_error`.

use crate::builtin::Explain;
use crate::command::CommandHook;
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use crate::http::HttpHook;
use crate::process::ProcessHook;
use regex::Regex;
use sluice_config::{HookEventKind, HookKindSpec, HookSpec, OnError};
use sluice_core::Message;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a hook runs.
pub enum Kind {
    /// The explain builtin.
    Explain(Explain),
    /// A process per event.
    Command(CommandHook),
    /// One long-lived child.
    Process(ProcessHook),
    /// A hook service.
    Http(HttpHook),
}

enum Matcher {
    Always,
    Regex(Regex),
    Never,
}

/// One hook in the chain.
pub struct Hook {
    /// Its id.
    pub id: String,
    /// Its lifecycle event.
    pub event: HookEventKind,
    request: bool,
    response: bool,
    methods: Vec<String>,
    matcher: Matcher,
    timeout: Duration,
    on_error: OnError,
    kind: Kind,
}

/// What one hook did with one message (for the log and the audit line).
#[derive(Debug, Clone, PartialEq)]
pub struct HookRecord {
    /// The hook id.
    pub id: String,
    /// The phase.
    pub phase: Phase,
    /// `pass`, `modify`, `answer`, `refuse`, or `error` (then `on_error` decided).
    pub decision: &'static str,
    /// The refusal reason, or the failure.
    pub reason: Option<String>,
    /// How long it took, µs.
    pub micros: u64,
}

/// What the hooks did to one exchange.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// Each hook's decision, in the order they ran.
    pub records: Vec<HookRecord>,
    /// The reason the explain hook recorded.
    pub explain_reason: Option<String>,
}

/// Where an event comes from: the facts hooks select on and are shown.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// The client session id.
    pub session_id: &'a str,
    /// The method (for a reply: its request's method).
    pub method: &'a str,
    /// The client-facing tool name (tools/call).
    pub tool_name: Option<&'a str>,
    /// The upstream involved, when known.
    pub upstream: Option<&'a str>,
    /// `"legacy"` or `"modern"`.
    pub era: &'static str,
}

/// The outcome of the request phase.
#[derive(Debug)]
pub enum RequestOutcome {
    /// Go on with this message.
    Forward(Message),
    /// Reply with this instead of routing.
    Answer(Message),
    /// Refused.
    Refuse(Refusal),
}

/// Does `glob` (only `*` is special) match `s`?
pub fn glob_match(glob: &str, s: &str) -> bool {
    if glob == "*" {
        return true;
    }
    let parts: Vec<&str> = glob.split('*').collect();
    if parts.len() == 1 {
        return glob == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || !s.ends_with(last) || s.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

impl Hook {
    fn selects(&self, phase: Phase, ctx: &Ctx) -> bool {
        let phase_ok = match phase {
            Phase::Request => self.request,
            Phase::Response => self.response,
        };
        if !phase_ok {
            return false;
        }
        if let Kind::Explain(_) = self.kind {
            return Explain::selects(phase, ctx.method);
        }
        if !self.methods.iter().any(|g| glob_match(g, ctx.method)) {
            return false;
        }
        match &self.matcher {
            Matcher::Always => true,
            Matcher::Never => false,
            Matcher::Regex(r) => ctx.tool_name.is_some_and(|t| r.is_match(t)),
        }
    }

    async fn decide(&self, ev: &HookEvent, trace: &mut Trace) -> Result<Decision, HookFailure> {
        let run = async {
            match &self.kind {
                Kind::Explain(e) => Ok(e.decide(ev, trace)),
                Kind::Command(c) => c.decide(ev).await,
                Kind::Process(p) => p.decide(ev).await,
                Kind::Http(h) => h.decide(ev).await,
            }
        };
        // The kinds enforce their own timeouts (and kill what they started); this is the net.
        match tokio::time::timeout(self.timeout + Duration::from_secs(1), run).await {
            Ok(r) => r,
            Err(_) => Err(HookFailure(format!(
                "timed out after {:.1} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }
}

/// The enabled hooks, in order.
#[derive(Default)]
pub struct Chain {
    hooks: Vec<Hook>,
    cwd: PathBuf,
}

impl Chain {
    /// Build from the manifest (only enabled hooks that can fire). Returns the chain and
    /// warnings.
    pub fn build(specs: &[HookSpec], cwd: &Path) -> (Chain, Vec<String>) {
        let mut hooks = Vec::new();
        let mut warnings = Vec::new();
        for s in specs.iter().filter(|s| s.enabled) {
            let (request, response) = match s.event {
                HookEventKind::PreToolUse
                | HookEventKind::SessionStart
                | HookEventKind::Request => (true, false),
                HookEventKind::PostToolUse | HookEventKind::Response => (false, true),
                HookEventKind::Stop => (false, false),
                HookEventKind::UserPromptSubmit | HookEventKind::PreCompact => continue,
            };
            let matcher = match s.matcher.as_str() {
                "" | "*" => Matcher::Always,
                m => match Regex::new(&format!("^(?:{m})$")) {
                    Ok(r) => Matcher::Regex(r),
                    Err(_) => Matcher::Never,
                },
            };
            let kind = match &s.kind {
                HookKindSpec::Builtin { name, .. } if name == "explain" => Kind::Explain(Explain),
                HookKindSpec::Builtin { name, .. } => {
                    warnings.push(format!(
                        "hook {:?}: builtin {name:?} is not available; skipped",
                        s.id
                    ));
                    continue;
                }
                HookKindSpec::Command { command, .. } => Kind::Command(CommandHook::new(
                    command.clone(),
                    cwd.to_path_buf(),
                    s.timeout,
                )),
                HookKindSpec::Process { command } => Kind::Process(ProcessHook::new(
                    s.id.clone(),
                    command.clone(),
                    cwd.to_path_buf(),
                    s.timeout,
                )),
                HookKindSpec::Http { url, headers } => {
                    let headers = headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    match HttpHook::new(url.clone(), headers, s.timeout) {
                        Ok(h) => Kind::Http(h),
                        Err(e) => {
                            warnings.push(format!("hook {:?}: {e}; skipped", s.id));
                            continue;
                        }
                    }
                }
            };
            let (request, response) = match kind {
                Kind::Explain(_) => (true, true),
                _ => (request, response),
            };
            hooks.push(Hook {
                id: s.id.clone(),
                event: s.event,
                request,
                response,
                methods: s.methods.clone(),
                matcher,
                timeout: s.timeout,
                on_error: s.on_error,
                kind,
            });
        }
        (
            Chain {
                hooks,
                cwd: cwd.to_path_buf(),
            },
            warnings,
        )
    }

    /// No hooks at all (the fast path).
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks, in order.
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// Does any of the first `depth` hooks select this phase and context?
    pub fn selects(&self, phase: Phase, ctx: &Ctx, depth: usize) -> bool {
        self.hooks[..depth.min(self.hooks.len())]
            .iter()
            .any(|h| h.selects(phase, ctx))
    }

    fn event(
        &self,
        phase: Phase,
        hook: &Hook,
        ctx: &Ctx,
        message: Message,
        request: Option<Message>,
    ) -> HookEvent {
        let event_name = match (hook.event, phase) {
            (
                HookEventKind::PreToolUse
                | HookEventKind::PostToolUse
                | HookEventKind::SessionStart,
                _,
            ) => hook.event.name(),
            (_, Phase::Request) => "Request",
            (_, Phase::Response) => "Response",
        };
        HookEvent {
            phase,
            event_name,
            method: ctx.method.to_string(),
            session_id: ctx.session_id.to_string(),
            tool_name: ctx.tool_name.map(str::to_string),
            upstream: ctx.upstream.map(str::to_string),
            message,
            request,
            era: ctx.era,
            cwd: self.cwd.clone(),
        }
    }

    /// Run the request phase. Returns the outcome and the depth the request reached (how many
    /// hooks, from the head, its reply travels back through).
    pub async fn request(
        &self,
        ctx: &Ctx<'_>,
        mut msg: Message,
        trace: &mut Trace,
    ) -> (RequestOutcome, usize) {
        let original_id = msg.id().cloned();
        for (i, hook) in self.hooks.iter().enumerate() {
            if !hook.selects(Phase::Request, ctx) {
                continue;
            }
            let started = Instant::now();
            let ev = self.event(Phase::Request, hook, ctx, msg, None);
            let result = hook.decide(&ev, trace).await;
            msg = ev.message;
            let micros = started.elapsed().as_micros() as u64;
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace.records.push(HookRecord {
                    id: hook.id.clone(),
                    phase: Phase::Request,
                    decision,
                    reason,
                    micros,
                });
            };
            match result {
                Ok(Decision::Pass) => record("pass", None),
                Ok(Decision::Modify(mut m)) => {
                    record("modify", None);
                    if let Some(id) = &original_id {
                        m.set_id(id.clone());
                    }
                    msg = m;
                }
                Ok(Decision::Answer(mut m)) => {
                    record("answer", None);
                    if let Some(id) = &original_id {
                        m.set_id(id.clone());
                    }
                    return (RequestOutcome::Answer(m), i + 1);
                }
                Ok(Decision::Refuse(r)) => {
                    tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "request refused by hook");
                    record("refuse", Some(r.reason.clone()));
                    return (RequestOutcome::Refuse(r), i + 1);
                }
                Err(HookFailure(why)) => {
                    tracing::warn!(hook = %hook.id, method = ctx.method, "hook failed: {why}");
                    record("error", Some(why.clone()));
                    if hook.on_error == OnError::Refuse {
                        return (
                            RequestOutcome::Refuse(Refusal {
                                reason: format!("hook {} failed: {why}", hook.id),
                                for_agent: false,
                            }),
                            i + 1,
                        );
                    }
                }
            }
        }
        (RequestOutcome::Forward(msg), self.hooks.len())
    }

    /// Run the response phase through the first `depth` hooks, tail → head. `request` is the
    /// request the message answers (shown to hooks as `tool_input` and `request`).
    pub async fn response(
        &self,
        ctx: &Ctx<'_>,
        mut msg: Message,
        request: Option<&Message>,
        depth: usize,
        trace: &mut Trace,
    ) -> Result<Message, Refusal> {
        let original_id = msg.id().cloned();
        for hook in self.hooks[..depth.min(self.hooks.len())].iter().rev() {
            if !hook.selects(Phase::Response, ctx) {
                continue;
            }
            let started = Instant::now();
            let ev = self.event(Phase::Response, hook, ctx, msg, request.cloned());
            let result = hook.decide(&ev, trace).await;
            msg = ev.message;
            let micros = started.elapsed().as_micros() as u64;
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace.records.push(HookRecord {
                    id: hook.id.clone(),
                    phase: Phase::Response,
                    decision,
                    reason,
                    micros,
                });
            };
            match result {
                Ok(Decision::Pass) => record("pass", None),
                Ok(Decision::Modify(mut m)) | Ok(Decision::Answer(mut m)) => {
                    record("modify", None);
                    if let Some(id) = &original_id {
                        m.set_id(id.clone());
                    }
                    msg = m;
                }
                Ok(Decision::Refuse(r)) => {
                    tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "response refused by hook");
                    record("refuse", Some(r.reason.clone()));
                    return Err(r);
                }
                Err(HookFailure(why)) => {
                    tracing::warn!(hook = %hook.id, method = ctx.method, "hook failed: {why}");
                    record("error", Some(why.clone()));
                    if hook.on_error == OnError::Refuse {
                        return Err(Refusal {
                            reason: format!("hook {} failed: {why}", hook.id),
                            for_agent: false,
                        });
                    }
                }
            }
        }
        Ok(msg)
    }

    /// Fire the `Stop` hooks for a session that ended (decisions are only logged).
    pub async fn stop(&self, session_id: &str) {
        for hook in self.hooks.iter().filter(|h| h.event == HookEventKind::Stop) {
            let ctx = Ctx {
                session_id,
                method: "notifications/stop",
                tool_name: None,
                upstream: None,
                era: "legacy",
            };
            let msg = Message::notification("notifications/stop", None);
            let mut ev = self.event(Phase::Request, hook, &ctx, msg, None);
            ev.event_name = "Stop";
            let mut trace = Trace::default();
            match hook.decide(&ev, &mut trace).await {
                Ok(d) => tracing::debug!(hook = %hook.id, session = session_id, "Stop hook: {d:?}"),
                Err(e) => {
                    tracing::warn!(hook = %hook.id, session = session_id, "Stop hook failed: {e}")
                }
            }
        }
    }

    /// Stop the long-lived hook processes.
    pub async fn shutdown(&self) {
        for h in &self.hooks {
            if let Kind::Process(p) = &h.kind {
                p.shutdown().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*", "tools/call"));
        assert!(glob_match("tools/*", "tools/call"));
        assert!(!glob_match("tools/*", "prompts/get"));
        assert!(glob_match(
            "notifications/*/list_changed",
            "notifications/tools/list_changed"
        ));
        assert!(glob_match("tools/call", "tools/call"));
        assert!(!glob_match("tools/call", "tools/list"));
    }
}
