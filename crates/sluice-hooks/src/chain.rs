//! The chain: the enabled hooks in manifest order. The request phase runs head → tail; a hook
//! that answers or refuses stops it, and the reply then travels back tail → head only through
//! the hooks the request reached (the onion). Each hook selects by phase, method glob and
//! tool-name matcher, and has a timeout and an `on_error`.
//!
//! Response controls (the `mask`, `pii` and `size-cap` builtins) are a stage of their own: they
//! run first in [`Chain::response`], whatever their place in the manifest, so every other
//! response hook sees what the agent will see (as Zato-style hook services expect). What they changed is counted in
//! [`Trace::controls`].

use crate::builtin::{Builtin, Selection};
use crate::command::CommandHook;
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use crate::http::HttpHook;
use crate::process::ProcessHook;
use regex::Regex;
use serde_json::{Map, Value};
use sluice_config::{HookEventKind, HookKindSpec, HookSpec, OnError};
use sluice_core::{Message, Principal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a hook runs.
pub enum Kind {
    /// Rust, in process (it chooses its own phases and messages).
    Builtin(Builtin),
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
    /// When it started (places it on a trace's timeline).
    pub started: Instant,
}

/// What the hooks did to one exchange.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// Each hook's decision, in the order they ran.
    pub records: Vec<HookRecord>,
    /// The reason the explain hook recorded.
    pub explain_reason: Option<String>,
    /// What the response controls changed, by builtin: `{"mask": 2, "pii": {"EMAIL": 1,
    /// "CARD": 1}, "size-cap": {"blocks": 1, "bytes": 1234}}` (a refused reply counts
    /// `"size-cap": {"refused": 1}`). Empty when they changed nothing.
    pub controls: Map<String, Value>,
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
    /// The tool's definition from the catalog (tools/call), when the chain asks for it
    /// ([`Chain::wants_tool_definitions`]; the `validate` builtin checks arguments against its
    /// `inputSchema`).
    pub tool: Option<&'a Value>,
    /// Who is calling, when the listener authenticates.
    pub principal: Option<Arc<Principal>>,
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

pub use sluice_core::glob_match;

impl Hook {
    fn selects(&self, phase: Phase, ctx: &Ctx) -> bool {
        let phase_ok = match phase {
            Phase::Request => self.request,
            Phase::Response => self.response,
        };
        if !phase_ok {
            return false;
        }
        let selection = match &self.kind {
            Kind::Builtin(b) => b.selects(phase, ctx.method),
            _ => Selection::Hook,
        };
        let method_ok = match selection {
            Selection::Fixed(fixed) => return fixed,
            Selection::Method(ok) => ok,
            Selection::Hook => self.methods.iter().any(|g| glob_match(g, ctx.method)),
        };
        if !method_ok {
            return false;
        }
        match &self.matcher {
            Matcher::Always => true,
            Matcher::Never => false,
            Matcher::Regex(r) => ctx.tool_name.is_some_and(|t| r.is_match(t)),
        }
    }

    /// Is it Rust, in process?
    fn is_builtin(&self) -> bool {
        matches!(self.kind, Kind::Builtin(_))
    }

    /// What it did, for the trace (its time runs from `started` to now).
    fn record(
        &self,
        phase: Phase,
        started: Instant,
        decision: &'static str,
        reason: Option<String>,
    ) -> HookRecord {
        HookRecord {
            id: self.id.clone(),
            phase,
            decision,
            reason,
            micros: started.elapsed().as_micros() as u64,
            started,
        }
    }

    async fn decide(
        &self,
        ev: &HookEvent,
        ctx: &Ctx<'_>,
        trace: &mut Trace,
    ) -> Result<Decision, HookFailure> {
        // A builtin that does no I/O answers at once: no timeout to arm.
        if let Kind::Builtin(b) = &self.kind {
            if b.is_immediate() {
                return b.decide(ev, ctx.tool, &mut trace.explain_reason).await;
            }
        }
        let run = async {
            match &self.kind {
                Kind::Builtin(b) => b.decide(ev, ctx.tool, &mut trace.explain_reason).await,
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

/// The enabled hooks, in order, and the response controls.
#[derive(Default)]
pub struct Chain {
    hooks: Vec<Hook>,
    controls: Vec<Hook>,
    cwd: PathBuf,
}

impl Chain {
    /// Build from the manifest (only enabled hooks that can fire). Returns the chain and
    /// warnings.
    pub fn build(specs: &[HookSpec], cwd: &Path) -> (Chain, Vec<String>) {
        let mut hooks = Vec::new();
        let mut controls = Vec::new();
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
                HookKindSpec::Builtin { name, options } => match Builtin::build(options, s.timeout)
                {
                    Ok(b) => Kind::Builtin(b),
                    Err(e) => {
                        warnings.push(format!("hook {:?}: builtin {name:?}: {e}; skipped", s.id));
                        continue;
                    }
                },
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
            // Builtins choose their own phases.
            let (request, response) = match &kind {
                Kind::Builtin(b) => (b.phases().request, b.phases().response),
                _ => (request, response),
            };
            let stage = if matches!(&kind, Kind::Builtin(b) if b.control().is_some()) {
                &mut controls
            } else {
                &mut hooks
            };
            stage.push(Hook {
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
                controls,
                cwd: cwd.to_path_buf(),
            },
            warnings,
        )
    }

    /// No hooks at all (the fast path).
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty() && self.controls.is_empty()
    }

    /// The hooks, in order (without the response controls).
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// The response controls, in manifest order.
    pub fn controls(&self) -> &[Hook] {
        &self.controls
    }

    /// Does a hook need the tool's definition in [`Ctx::tool`] (a `validate` builtin)?
    pub fn wants_tool_definitions(&self) -> bool {
        self.hooks
            .iter()
            .any(|h| matches!(&h.kind, Kind::Builtin(b) if b.wants_tool_definition()))
    }

    /// Is what the chain does to the request in `ctx` and its reply a function of the reply
    /// alone: no hook sees the request, no response control the reply, and every hook that
    /// sees the reply is a builtin that only reshapes list items from its options (`explain`,
    /// `describe` on tools/list)? Then a list page can be transformed once and reused.
    pub fn is_pure_for(&self, ctx: &Ctx) -> bool {
        !self.selects(Phase::Request, ctx, usize::MAX)
            && !self
                .controls
                .iter()
                .any(|h| h.selects(Phase::Response, ctx))
            && self
                .hooks
                .iter()
                .filter(|h| h.selects(Phase::Response, ctx))
                .all(|h| matches!(&h.kind, Kind::Builtin(b) if b.is_pure_list_transform()))
    }

    /// Does any of the first `depth` hooks (the response controls aside: they never see the
    /// request) select this phase and context? The request a reply answers is kept for the
    /// response phase only then.
    pub fn hooks_select(&self, phase: Phase, ctx: &Ctx, depth: usize) -> bool {
        self.hooks[..depth.min(self.hooks.len())]
            .iter()
            .any(|h| h.selects(phase, ctx))
    }

    /// Does any of the first `depth` hooks (or, in the response phase, a response control)
    /// select this phase and context?
    pub fn selects(&self, phase: Phase, ctx: &Ctx, depth: usize) -> bool {
        (phase == Phase::Response && self.controls.iter().any(|h| h.selects(phase, ctx)))
            || self.hooks[..depth.min(self.hooks.len())]
                .iter()
                .any(|h| h.selects(phase, ctx))
    }

    /// The controls stage: every response control that selects the message, in manifest
    /// order, changing it in place. A refusal stops it.
    fn run_controls(
        &self,
        ctx: &Ctx<'_>,
        msg: &mut Message,
        trace: &mut Trace,
    ) -> Result<(), Refusal> {
        for hook in &self.controls {
            let Some(control) = (match &hook.kind {
                Kind::Builtin(b) => b.control(),
                _ => None,
            }) else {
                continue;
            };
            if !hook.selects(Phase::Response, ctx) {
                continue;
            }
            let started = Instant::now();
            let result = control.apply(ctx.tool_name, msg, &mut trace.controls);
            let (decision, reason) = match &result {
                Ok(true) => ("modify", None),
                Ok(false) => ("pass", None),
                Err(r) => ("refuse", Some(r.reason.clone())),
            };
            trace
                .records
                .push(hook.record(Phase::Response, started, decision, reason));
            if let Err(r) = result {
                tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "response refused by a control");
                return Err(r);
            }
        }
        Ok(())
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
            principal: ctx.principal.clone(),
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
            let result = hook.decide(&ev, ctx, trace).await;
            msg = ev.message;
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace
                    .records
                    .push(hook.record(Phase::Request, started, decision, reason));
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
                    record("refuse", Some(r.reason.clone()));
                    tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "request refused by hook");
                    return (RequestOutcome::Refuse(r), i + 1);
                }
                Err(HookFailure(why)) => {
                    record("error", Some(why.clone()));
                    tracing::warn!(hook = %hook.id, method = ctx.method, "hook failed: {why}");
                    if hook.on_error == OnError::Refuse {
                        return (
                            RequestOutcome::Refuse(Refusal {
                                reason: format!("hook {} failed: {why}", hook.id),
                                for_agent: false,
                                error: None,
                            }),
                            i + 1,
                        );
                    }
                }
            }
        }
        (RequestOutcome::Forward(msg), self.hooks.len())
    }

    /// Run the response phase: the response controls first, then the first `depth` hooks,
    /// tail → head. `request` is the request the message answers (shown to hooks as
    /// `tool_input` and `request`).
    pub async fn response(
        &self,
        ctx: &Ctx<'_>,
        mut msg: Message,
        request: Option<&Message>,
        depth: usize,
        trace: &mut Trace,
    ) -> Result<Message, Refusal> {
        self.run_controls(ctx, &mut msg, trace)?;
        let original_id = msg.id().cloned();
        for hook in self.hooks[..depth.min(self.hooks.len())].iter().rev() {
            if !hook.selects(Phase::Response, ctx) {
                continue;
            }
            let started = Instant::now();
            let ev = self.event(Phase::Response, hook, ctx, msg, request.cloned());
            let result = hook.decide(&ev, ctx, trace).await;
            msg = ev.message;
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace
                    .records
                    .push(hook.record(Phase::Response, started, decision, reason));
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
                    record("refuse", Some(r.reason.clone()));
                    tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "response refused by hook");
                    return Err(r);
                }
                Err(HookFailure(why)) => {
                    record("error", Some(why.clone()));
                    tracing::warn!(hook = %hook.id, method = ctx.method, "hook failed: {why}");
                    if hook.on_error == OnError::Refuse {
                        return Err(Refusal {
                            reason: format!("hook {} failed: {why}", hook.id),
                            for_agent: false,
                            error: None,
                        });
                    }
                }
            }
        }
        Ok(msg)
    }

    /// Fire the `Stop` hooks for a session that ended (decisions are only logged).
    pub async fn stop(&self, session_id: &str) {
        for hook in self
            .hooks
            .iter()
            .filter(|h| h.event == HookEventKind::Stop && !h.is_builtin())
        {
            let ctx = Ctx {
                session_id,
                method: "notifications/stop",
                tool_name: None,
                upstream: None,
                era: "legacy",
                tool: None,
                principal: None,
            };
            let msg = Message::notification("notifications/stop", None);
            let mut ev = self.event(Phase::Request, hook, &ctx, msg, None);
            ev.event_name = "Stop";
            let mut trace = Trace::default();
            match hook.decide(&ev, &ctx, &mut trace).await {
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

    fn builtin(id: &str, name: &str, options: Value, methods: &[&str]) -> HookSpec {
        HookSpec {
            id: id.into(),
            event: HookEventKind::Request,
            matcher: String::new(),
            methods: methods.iter().map(|m| m.to_string()).collect(),
            kind: HookKindSpec::Builtin {
                name: name.into(),
                options: crate::builtin::parsed(name, options),
            },
            timeout: Duration::from_secs(1),
            on_error: OnError::Refuse,
            enabled: true,
            description: String::new(),
        }
    }

    fn ctx<'a>(method: &'a str, tool: Option<&'a str>) -> Ctx<'a> {
        Ctx {
            session_id: "s",
            method,
            tool_name: tool,
            upstream: None,
            era: "legacy",
            tool: None,
            principal: None,
        }
    }

    /// What the configuration accepts, the chain builds.
    #[test]
    fn every_option_the_configuration_accepts_builds() {
        use serde_json::json;
        let home =
            std::env::temp_dir().join(format!("sluice-hooks-accepts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("hooks")).unwrap();
        let b = |id: &str, name: &str, options: Value| json!({"id": id, "type": "builtin", "builtin": name, "options": options, "enabled": true});
        let hooks = json!([
            b("explain", "explain", json!({})),
            b(
                "deny",
                "deny",
                json!({"tools": ["a", "b.*"], "arguments": [{"pattern": "x"}, {"path": "/a/b", "pattern": "^y$", "tool": "t", "reason": "r"}], "reason": "no"})
            ),
            b(
                "deny-args",
                "deny",
                json!({"tools": [], "arguments": [{"path": "a.*.b", "pattern": "z"}]})
            ),
            b(
                "rewrite",
                "rewrite",
                json!({"rules": [{"tool": "t", "set": {"a": 1, "/b/c": [1]}, "default": {"d": null}, "remove": ["e", "f.*"]}, {"remove": ["x"]}]})
            ),
            b("validate", "validate", Value::Null),
            b(
                "describe",
                "describe",
                json!({"tools": {"t": {"title": "T", "description": "D", "properties": {"p": {"type": "string"}}, "hide": ["h"]}, "u": {}}})
            ),
            b("describe-empty", "describe", json!({"tools": {}})),
            b(
                "mask",
                "mask",
                json!({"paths": ["/a", "b.c", "d.*"], "keys": [], "replacement": "[x]"})
            ),
            b("mask-keys", "mask", json!({"keys": ["k"]})),
            b(
                "pii",
                "pii",
                json!({"kinds": ["email", "Card", "PRIVATE_KEY"], "allow_tools": ["t.*"]})
            ),
            b("pii-all", "pii", Value::Null),
            b(
                "cap",
                "size-cap",
                json!({"max_bytes": 1, "mode": "truncate", "per_tool": {"a*": 2, "b\\..*": 3}})
            ),
            b(
                "cap-tools",
                "size-cap",
                json!({"per_tool": {"x": 5}, "mode": "refuse"})
            ),
            b(
                "rate",
                "rate-limit",
                json!({"global": {"rate": 1.5, "per": "second", "burst": 3}, "per_principal": {"rate": 1, "per": "hour"}, "per_tool": {"*": {"rate": 2, "per": "minute"}, "a\\..*": {"rate": 1, "per": "second"}}, "key_prefix": "test:accepts:"})
            ),
            b(
                "rate-redis",
                "rate-limit",
                json!({"per_tool": {"x": {"rate": 1, "per": "second"}}, "redis": "redis://u:p@[::1]:6379/2"})
            )
        ]);
        std::fs::write(
            home.join("hooks/hooks.manifest.json"),
            json!({"hooks": hooks}).to_string(),
        )
        .unwrap();
        let loaded = sluice_config::Config::load(&home, &|_| None);
        let _ = std::fs::remove_dir_all(&home);
        let (config, _) = loaded.unwrap_or_else(|e| panic!("{e}"));
        let (chain, warnings) = Chain::build(&config.hooks.hooks, Path::new("/"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((chain.hooks().len(), chain.controls().len()), (9, 6));
        assert!(chain.wants_tool_definitions());
    }

    #[tokio::test]
    async fn controls_run_first_whatever_their_place_and_are_counted() {
        use serde_json::json;
        let specs = [
            builtin("deny", "deny", json!({"tools": ["blocked"]}), &["*"]),
            builtin("mask", "mask", json!({"keys": ["token"]}), &["tools/call"]),
            builtin(
                "pii",
                "pii",
                json!({"allow_tools": ["trusted"]}),
                &["tools/call"],
            ),
        ];
        let (chain, warnings) = Chain::build(&specs, Path::new("/"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((chain.hooks().len(), chain.controls().len()), (1, 2));
        let reply = || {
            Message::response(
                json!(7),
                json!({"content": [{"type": "text", "text": "{\"token\":\"t\",\"mail\":\"a@b.io\"}"}]}),
            )
        };
        // Depth 0 (refused at the head, say): the controls still run.
        let mut trace = Trace::default();
        let cx = ctx("tools/call", Some("fx_echo"));
        let out = chain
            .response(&cx, reply(), None, 0, &mut trace)
            .await
            .unwrap();
        assert_eq!(
            out.result().unwrap()["content"][0]["text"],
            json!("{\"token\":\"***\",\"mail\":\"[EMAIL]\"}")
        );
        assert_eq!(
            Value::Object(trace.controls.clone()),
            json!({"mask": 1, "pii": {"EMAIL": 1}})
        );
        let decisions: Vec<(&str, &str)> = trace
            .records
            .iter()
            .map(|r| (r.id.as_str(), r.decision))
            .collect();
        assert_eq!(decisions, [("mask", "modify"), ("pii", "modify")]);
        // An allowed tool skips pii; another method skips both.
        let mut trace = Trace::default();
        let cx = ctx("tools/call", Some("trusted"));
        let out = chain
            .response(&cx, reply(), None, 1, &mut trace)
            .await
            .unwrap();
        assert!(out.result().unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("a@b.io"));
        assert_eq!(Value::Object(trace.controls), json!({"mask": 1}));
        let mut trace = Trace::default();
        let cx = ctx("prompts/get", None);
        assert_eq!(
            chain
                .response(&cx, reply(), None, 1, &mut trace)
                .await
                .unwrap(),
            reply()
        );
        assert!(trace.records.is_empty());
        assert!(chain.selects(Phase::Response, &ctx("tools/call", None), 0));
        assert!(!chain.selects(Phase::Response, &ctx("tools/list", None), 0));
    }

    #[tokio::test]
    async fn a_size_cap_refusal_stops_the_response_phase() {
        use serde_json::json;
        let specs = [builtin(
            "cap",
            "size-cap",
            json!({"max_bytes": 4, "mode": "refuse"}),
            &["tools/call"],
        )];
        let (chain, _) = Chain::build(&specs, Path::new("/"));
        let mut trace = Trace::default();
        let msg = Message::response(
            json!(1),
            json!({"content": [{"type": "text", "text": "hello"}]}),
        );
        let r = chain
            .response(
                &ctx("tools/call", Some("t")),
                msg,
                None,
                usize::MAX,
                &mut trace,
            )
            .await
            .unwrap_err();
        assert!(r.for_agent && r.reason.contains("5 bytes, over the 4-byte cap"));
        assert_eq!(trace.records[0].decision, "refuse");
        assert_eq!(
            Value::Object(trace.controls),
            json!({"size-cap": {"blocks": 0, "bytes": 0, "refused": 1}})
        );
    }

    #[tokio::test]
    async fn request_builtins_select_tools_call_and_honour_the_matcher() {
        use serde_json::json;
        let mut deny = builtin(
            "deny",
            "deny",
            json!({"arguments": [{"pattern": "x"}]}),
            &["*"],
        );
        deny.matcher = "fx_.*".into();
        let specs = [
            deny,
            builtin(
                "rw",
                "rewrite",
                json!({"rules": [{"set": {"r": 1}}]}),
                &["*"],
            ),
            HookSpec {
                kind: HookKindSpec::Builtin {
                    name: "rewrite".into(),
                    options: sluice_config::BuiltinOptions::Rewrite(Default::default()),
                },
                ..builtin("bad", "explain", Value::Null, &["*"])
            },
        ];
        let (chain, warnings) = Chain::build(&specs, Path::new("/"));
        assert_eq!(
            warnings,
            ["hook \"bad\": builtin \"rewrite\": options.rules: is required (an array of rules); skipped"]
        );
        let call = |tool: &str| {
            Message::request(
                json!(1),
                "tools/call",
                Some(json!({"name": tool, "arguments": {"a": "x"}})),
            )
        };
        let mut trace = Trace::default();
        let (out, depth) = chain
            .request(&ctx("tools/call", Some("fx_a")), call("fx_a"), &mut trace)
            .await;
        assert!(matches!(out, RequestOutcome::Refuse(_)));
        assert_eq!(depth, 1);
        let (out, _) = chain
            .request(&ctx("tools/call", Some("other")), call("other"), &mut trace)
            .await;
        let RequestOutcome::Forward(m) = out else {
            panic!("{out:?}")
        };
        assert_eq!(m.params().unwrap()["arguments"], json!({"a": "x", "r": 1}));
        // Other methods are not theirs.
        let list = Message::request(json!(2), "tools/list", None);
        let (out, _) = chain
            .request(&ctx("tools/list", None), list.clone(), &mut trace)
            .await;
        assert!(matches!(out, RequestOutcome::Forward(m) if m == list));
    }
}
