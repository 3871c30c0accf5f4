//! The chain: the enabled hooks in manifest order. The request phase runs head → tail; a hook
//! that answers or refuses stops it, and the reply then travels back tail → head only through
//! the hooks the request reached (the onion). Each hook selects by phase, method glob and
//! tool-name matcher, and has a timeout and an `on_error`.
//!
//! A matcher matches the client-facing tool name or its Claude Code form
//! `mcp__<upstream>__<tool>`, so matchers written for Claude Code work unchanged; it is read as
//! Claude Code reads it (exact names or a list, else a regex: see `chain/matcher.rs`), and so is
//! a hook's `if` (one permission rule on the call). A hook that answers `ask` does not stop the
//! phase: a later refusal still wins (deny > defer > ask > allow), and when the phase ends with
//! asks the outcome is [`RequestOutcome::Ask`] (the server asks a person through the client); a
//! `defer` no one can resume behind a gateway refuses the call. PostToolUse hooks see
//! successful calls, PostToolUseFailure hooks failed ones (an error reply or `isError: true`).
//!
//! Claude Code's handler settings: `once` runs a hook once per session; `async` runs a command,
//! http or mcp_tool hook in the background (it never decides, and the message does not wait for
//! it; recorded as `async`); `on_failure: "block"` makes a hook that cannot decide refuse the
//! message, naming the hook, whatever its `on_error`.
//!
//! Response controls (the `mask`, `pii` and `size-cap` builtins) are a stage of their own: they
//! run first in [`Chain::response`], whatever their place in the manifest, so every other
//! response hook sees what the agent will see (as Zato-style hook services expect). What they changed is counted in
//! [`Trace::controls`].

use crate::builtin::{Builtin, Selection};
use crate::civic::CivicHook;
use crate::command::CommandHook;
pub use crate::ctx::{Ctx, HookRecord, Trace};
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{is_failure, ClaudeFields, HookEvent, Phase};
use crate::http::HttpHook;
use crate::mcp_tool::{McpToolHook, ToolRunner};
use crate::process::ProcessHook;
use crate::transcript::Transcripts;
use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_config::{AskFallback, ClaudeSettings, HookEventKind, OnError, OnFailure, ToolNameForm};
use sluice_core::Message;
use sluice_core::{codes, RpcError};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod build;
mod matcher;
mod session;
use matcher::{IfRule, Matcher};
pub use session::EndReason;

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
    /// A server built on Civic's `@civic/hook-common`.
    Civic(CivicHook),
    /// A tool of one of the gateway's upstreams (Claude Code's `mcp_tool`).
    McpTool(McpToolHook),
}

/// One hook in the chain.
pub struct Hook {
    /// Its id.
    pub id: String,
    /// Its id again, for its records (a reference count per call, not a copy).
    record_id: std::sync::Arc<str>,
    /// Its lifecycle event.
    pub event: HookEventKind,
    request: bool,
    response: bool,
    methods: Vec<String>,
    matcher: Matcher,
    if_rule: Option<IfRule>,
    timeout: Duration,
    on_error: OnError,
    claude: ClaudeSettings,
    kind: Kind,
}

/// A hook's `ask`: who asked, why, and what it becomes when no one can be asked.
#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    /// The hook id.
    pub hook: String,
    /// The hook's reason (`permissionDecisionReason`).
    pub reason: String,
    /// The hook's `ask_fallback`.
    pub fallback: AskFallback,
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
    /// Go on with this message only if a person allows it (hooks answered `ask` and none
    /// refused).
    Ask(Message, Vec<AskRequest>),
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
        if matches!(
            self.event,
            HookEventKind::Elicitation | HookEventKind::ElicitationResult
        ) {
            // Claude Code matches elicitation hooks on the server's name.
            return match &self.matcher {
                Matcher::Always => true,
                m => ctx.upstream.is_some_and(|u| m.is_match(u)),
            };
        }
        match &self.matcher {
            Matcher::Always => true,
            m => {
                ctx.tool_name.is_some_and(|t| m.is_match(t))
                    || ctx.mcp_tool_name().is_some_and(|n| m.is_match(&n))
            }
        }
    }

    /// Does its `if` let it run on this call (`input`: reads the call's arguments, only for a
    /// hook with an `if`)? A hook without one runs.
    fn if_allows<'m>(
        &self,
        ctx: &Ctx,
        input: impl FnOnce() -> Option<&'m Value>,
        cwd: &std::path::Path,
    ) -> bool {
        let Some(rule) = &self.if_rule else {
            return true;
        };
        let mcp = ctx.mcp_tool_name();
        let names: Vec<&str> = ctx.tool_name.into_iter().chain(mcp.as_deref()).collect();
        rule.matches(&names, input(), cwd)
    }

    /// Does it run as every hook does (no `if`, not `once`, not `async`)? Then nothing of
    /// [`Chain::passes_over`] or [`Chain::ran_detached`] applies, and the call's arguments are
    /// not read for it.
    fn is_plain(&self) -> bool {
        self.if_rule.is_none() && !self.claude.once && !self.claude.run_async
    }

    /// The refusal its failure means: with `on_failure: "block"` one naming the hook for the
    /// agent (as Claude Code blocks then); else its `on_error`'s.
    fn failure_refusal(&self, why: &str) -> Option<Refusal> {
        if self.claude.on_failure == OnFailure::Block {
            return Some(Refusal::for_agent(format!(
                "hook {} failed (on_failure: block): {why}",
                self.id
            )));
        }
        (self.on_error == OnError::Refuse).then(|| Refusal {
            reason: format!("hook {} failed: {why}", self.id),
            for_agent: false,
            error: None,
        })
    }

    /// Does its event take this reply of a call? PostToolUse takes successes,
    /// PostToolUseFailure failures; every other event takes both.
    fn takes_reply(&self, ctx: &Ctx, reply: &Message) -> bool {
        if self.event == HookEventKind::Elicitation {
            return reply.kind() == sluice_core::Kind::Request;
        }
        if ctx.method != "tools/call" {
            return self.event != HookEventKind::PostToolUseFailure;
        }
        match self.event {
            HookEventKind::PostToolUse => !is_failure(reply),
            HookEventKind::PostToolUseFailure => is_failure(reply),
            _ => true,
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
            id: self.record_id.clone(),
            phase,
            decision,
            reason,
            micros: started.elapsed().as_micros() as u64,
            started,
        }
    }

    /// Decide on `ev`; a builtin may move its message into a `Modify`.
    async fn decide(
        &self,
        ev: &mut HookEvent,
        ctx: &Ctx<'_>,
        trace: &mut Trace,
        tools: Option<&Arc<dyn ToolRunner>>,
    ) -> Result<Decision, HookFailure> {
        // A builtin that does no I/O answers at once: no timeout to arm.
        if let Kind::Builtin(b) = &self.kind {
            if b.is_immediate() {
                return b.decide(ev, ctx, trace).await;
            }
        }
        let run = async {
            match &self.kind {
                Kind::Builtin(b) => b.decide(ev, ctx, trace).await,
                Kind::Command(c) => c.decide(ev).await,
                Kind::Process(p) => p.decide(ev).await,
                Kind::Http(h) => h.decide(ev).await,
                Kind::Civic(c) => c.decide(ev).await,
                Kind::McpTool(m) => m.decide(ev, tools).await,
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
    /// Calls the upstreams' tools for `mcp_tool` hooks (given by the server).
    tools: Option<Arc<dyn ToolRunner>>,
    /// The `once` hooks that ran, by hook id and session.
    once_ran: Mutex<HashSet<(Arc<str>, String)>>,
    hooks: Vec<Hook>,
    controls: Vec<Hook>,
    cwd: PathBuf,
    /// The session transcripts, when a hook is shown payloads (a command, process, http or
    /// civic hook).
    transcripts: Option<Transcripts>,
    /// Keep a session's transcript when it ends (the `keep_transcripts` setting).
    keep_transcripts: bool,
}

impl Chain {
    /// Call the upstreams' tools for `mcp_tool` hooks with `runner`.
    pub fn with_tool_runner(mut self, runner: Arc<dyn ToolRunner>) -> Chain {
        self.tools = Some(runner);
        self
    }

    /// The runner `mcp_tool` hooks call tools with (a rebuilt chain keeps it).
    pub fn tool_runner(&self) -> Option<Arc<dyn ToolRunner>> {
        self.tools.clone()
    }

    /// Has a `once` hook yet to run in this session? Marks it as run.
    fn first_run(&self, hook: &Hook, session_id: &str) -> bool {
        self.once_ran
            .lock()
            .insert((hook.record_id.clone(), session_id.to_string()))
    }

    /// Forget which `once` hooks ran in a session that ended.
    fn forget_session(&self, session_id: &str) {
        self.once_ran.lock().retain(|(_, s)| s != session_id);
    }

    /// Does `hook` not run on this call: its `if` does not match the call's arguments (read by
    /// `input` only then), or it is a `once` hook that ran in this session already (else it is
    /// marked as run)?
    fn passes_over<'m>(
        &self,
        hook: &Hook,
        ctx: &Ctx,
        input: impl FnOnce() -> Option<&'m Value>,
    ) -> bool {
        !hook.if_allows(ctx, input, &self.cwd)
            || (hook.claude.once && !self.first_run(hook, ctx.session_id))
    }

    /// Claude Code's `async`: run `hook` on `msg` in the background, recorded as `async`.
    /// `false` when it is not an async hook (or cannot run detached): it runs in line.
    fn ran_detached(
        &self,
        phase: Phase,
        hook: &Hook,
        ctx: &Ctx,
        msg: &Message,
        request: Option<&Message>,
        trace: &mut Trace,
    ) -> bool {
        if !hook.claude.run_async {
            return false;
        }
        let started = Instant::now();
        let ev = self.event(phase, hook, ctx, msg.clone(), request.cloned(), trace);
        if !self.detach(hook, ev) {
            return false;
        }
        trace
            .records
            .push(hook.record(phase, started, "async", None));
        true
    }

    /// Run `hook` on `ev` in the background (Claude Code's `async`): its decision is only
    /// logged. `false` for a kind that cannot run detached (it then runs in line).
    fn detach(&self, hook: &Hook, ev: HookEvent) -> bool {
        type Run = futures_util::future::BoxFuture<'static, Result<Decision, HookFailure>>;
        let run: Run = match &hook.kind {
            Kind::Command(c) => {
                let c = c.clone();
                Box::pin(async move { c.decide(&ev).await })
            }
            Kind::Http(h) => {
                let h = h.clone();
                Box::pin(async move { h.decide(&ev).await })
            }
            Kind::McpTool(m) => {
                let (m, tools) = (m.clone(), self.tools.clone());
                Box::pin(async move { m.decide(&ev, tools.as_ref()).await })
            }
            _ => return false,
        };
        let (id, limit) = (
            hook.record_id.clone(),
            hook.timeout + Duration::from_secs(1),
        );
        tokio::spawn(async move {
            match tokio::time::timeout(limit, run).await {
                Ok(Ok(d)) => tracing::info!(hook = %id, "async hook decided (not applied): {d:?}"),
                Ok(Err(e)) => tracing::warn!(hook = %id, "async hook failed: {e}"),
                Err(_) => tracing::warn!(hook = %id, "async hook timed out"),
            }
        });
        true
    }

    /// Keep each session's transcript when the session ends (else it is removed after its Stop
    /// and SessionEnd hooks ran).
    pub fn keeping_transcripts(mut self, keep: bool) -> Chain {
        self.keep_transcripts = keep;
        self
    }

    /// The transcript file of `session_id` (see [`crate::transcript`]), when hooks are shown
    /// payloads.
    pub fn transcript_path(&self, session_id: &str) -> Option<PathBuf> {
        self.transcripts.as_ref().map(|t| t.path(session_id))
    }

    /// Is a hook shown payloads (a command, process, http or civic hook)? Only those see a
    /// call's `tool_use_id` and the session's transcript.
    pub fn shows_payloads(&self) -> bool {
        self.transcripts.is_some()
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

    /// Does a hook read the catalog's names in [`Ctx::catalog`] (a `tool-scan` builtin)?
    pub fn wants_catalog_names(&self) -> bool {
        self.hooks
            .iter()
            .any(|h| matches!(&h.kind, Kind::Builtin(b) if b.wants_catalog_names()))
    }

    /// Is what the chain does to the request in `ctx` and its reply a function of the reply
    /// alone: no hook sees the request, no response control the reply, and every hook that
    /// sees the reply is a builtin that only reshapes list items from its options (`explain`,
    /// `describe` on tools/list, `tool-scan` on the four lists)? Then a list page can be transformed once and reused.
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

    #[allow(clippy::too_many_arguments)]
    fn event(
        &self,
        phase: Phase,
        hook: &Hook,
        ctx: &Ctx,
        message: Message,
        request: Option<Message>,
        trace: &Trace,
    ) -> HookEvent {
        let mut ev = HookEvent {
            phase,
            event_name: "",
            method: ctx.method.to_string(),
            session_id: ctx.session_id.to_string(),
            tool_name: Self::tool_name(hook, ctx),
            upstream: ctx.upstream.map(str::to_string),
            message,
            request,
            era: ctx.era,
            cwd: self.cwd.clone(),
            principal: ctx.principal.clone(),
            upstream_sub: ctx.upstream_sub.map(str::to_string),
            claude: ClaudeFields::default(),
        };
        self.refit(&mut ev, hook, ctx, trace);
        ev
    }

    /// The tool name `hook` is shown: Claude Code's `mcp__<upstream>__<tool>` or the gateway's.
    fn tool_name(hook: &Hook, ctx: &Ctx) -> Option<String> {
        match hook.claude.tool_name {
            ToolNameForm::Mcp => ctx.mcp_tool_name().or(ctx.tool_name.map(str::to_string)),
            ToolNameForm::Gateway => ctx.tool_name.map(str::to_string),
        }
    }

    /// Make the event one hook was shown into the next one's (of the same phase and message):
    /// what differs from hook to hook is the event name, the Claude Code fields and the tool
    /// name's form; the rest is kept (no copies per hook).
    fn reuse(&self, ev: &mut HookEvent, last: &Hook, hook: &Hook, ctx: &Ctx, trace: &Trace) {
        if hook.claude.tool_name != last.claude.tool_name {
            ev.tool_name = Self::tool_name(hook, ctx);
        }
        self.refit(ev, hook, ctx, trace);
    }

    /// Set what is `hook`'s own in `ev`: the event name and the Claude Code fields.
    fn refit(&self, ev: &mut HookEvent, hook: &Hook, ctx: &Ctx, trace: &Trace) {
        let phase = ev.phase;
        ev.event_name = match (hook.event, phase) {
            (
                HookEventKind::PreToolUse
                | HookEventKind::PostToolUse
                | HookEventKind::PostToolUseFailure
                | HookEventKind::Elicitation
                | HookEventKind::ElicitationResult
                | HookEventKind::SessionStart,
                _,
            ) => hook.event.name(),
            (_, Phase::Request) => "Request",
            (_, Phase::Response) => "Response",
        };
        ev.claude = if hook.is_builtin() {
            ClaudeFields::default()
        } else {
            ClaudeFields {
                transcript_path: self.transcripts.as_ref().map(|t| t.touch(ctx.session_id)),
                permission_mode: Some(hook.claude.permission_mode.clone()),
                tool_use_id: ctx.tool_use_id.map(str::to_string),
                duration_ms: match phase {
                    Phase::Response => trace.dispatched.map(|d| d.elapsed().as_millis() as u64),
                    Phase::Request => None,
                },
                continue_on_block: hook.claude.continue_on_block,
            }
        };
    }

    /// The transcript line of a call, before its request hooks.
    fn transcript_use(&self, ctx: &Ctx, msg: &Message) {
        let (Some(t), Some(id), Some(name)) = (&self.transcripts, ctx.tool_use_id, ctx.tool_name)
        else {
            return;
        };
        t.tool_use(ctx.session_id, &self.cwd, id, name, msg.param("arguments"));
    }

    /// The transcript line of a call's reply, after its response hooks.
    fn transcript_result(&self, ctx: &Ctx, reply: &Message) {
        if let (Some(t), Some(id), "tools/call") = (&self.transcripts, ctx.tool_use_id, ctx.method)
        {
            t.tool_result(ctx.session_id, id, reply);
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
        if ctx.method == "tools/call" && msg.method() == Some("tools/call") {
            self.transcript_use(ctx, &msg);
        }
        let mut asks = Vec::new();
        let mut defers: Vec<(&str, String)> = Vec::new();
        // The event the last hook was shown, and that hook: the next one is shown it refitted
        // (in place: the event is large, and moving it per hook copied it whole).
        let mut spare: Option<HookEvent> = None;
        let mut last: Option<&Hook> = None;
        for (i, hook) in self.hooks.iter().enumerate() {
            if !hook.selects(Phase::Request, ctx) {
                continue;
            }
            // ElicitationResult: only the client's answer to an elicitation (it has `action`).
            if hook.event == HookEventKind::ElicitationResult
                && msg.result().and_then(|r| r.get("action")).is_none()
            {
                continue;
            }
            if !hook.is_plain()
                && (self.passes_over(hook, ctx, || msg.param("arguments"))
                    || self.ran_detached(Phase::Request, hook, ctx, &msg, ctx.answers, trace))
            {
                continue;
            }
            let started = Instant::now();
            let ev = match (&mut spare, last) {
                (Some(ev), Some(last)) => {
                    ev.message = msg;
                    self.reuse(ev, last, hook, ctx, trace);
                    ev
                }
                _ => spare.insert(self.event(
                    Phase::Request,
                    hook,
                    ctx,
                    msg,
                    ctx.answers.cloned(),
                    trace,
                )),
            };
            let result = hook.decide(ev, ctx, trace, self.tools.as_ref()).await;
            msg = ev.message.take();
            last = Some(hook);
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace
                    .records
                    .push(hook.record(Phase::Request, started, decision, reason));
            };
            match result {
                Ok(Decision::Pass) => record("pass", None),
                Ok(Decision::Ask(reason, updated)) => {
                    record("ask", Some(reason.clone()));
                    // The ask's `updatedInput`: the person is asked about the changed call.
                    if let Some(mut m) = updated {
                        if let Some(id) = &original_id {
                            m.set_id(id.clone());
                        }
                        msg = m;
                    }
                    asks.push(AskRequest {
                        hook: hook.id.clone(),
                        reason,
                        fallback: hook.claude.ask_fallback,
                    });
                }
                Ok(Decision::Defer(reason)) => {
                    record("defer", Some(reason.clone()));
                    defers.push((hook.id.as_str(), reason));
                }
                Ok(Decision::Modify(mut m)) | Ok(Decision::Feedback(mut m, _)) => {
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
                    if let Some(r) = hook.failure_refusal(&why) {
                        return (RequestOutcome::Refuse(r), i + 1);
                    }
                }
            }
        }
        if let Some((hook, reason)) = defers.first() {
            // deny > defer > ask: no hook refused, so the first defer decides.
            let reason = format!("hook {hook} deferred the call: {reason} (a deferred call waits for its caller to decide and resume it; behind the gateway no one can, so it is not run)");
            tracing::info!(hook = %hook, method = ctx.method, session = ctx.session_id, "request deferred by hook, so refused");
            let error = RpcError::new(codes::REQUEST_REJECTED, "Request rejected")
                .with_data(json!({"reason": reason, "deferred": true}));
            return (
                RequestOutcome::Refuse(Refusal {
                    reason,
                    for_agent: true,
                    error: Some(Box::new(error)),
                }),
                self.hooks.len(),
            );
        }
        trace.dispatched = Some(Instant::now());
        if asks.is_empty() {
            (RequestOutcome::Forward(msg), self.hooks.len())
        } else {
            (RequestOutcome::Ask(msg, asks), self.hooks.len())
        }
    }

    /// Run the response phase: the response controls first, then the first `depth` hooks,
    /// tail → head. `request` is the request the message answers (shown to hooks as
    /// `tool_input` and `request`).
    pub async fn response(
        &self,
        ctx: &Ctx<'_>,
        msg: Message,
        request: Option<&Message>,
        depth: usize,
        trace: &mut Trace,
    ) -> Result<Message, Refusal> {
        let r = self.response_hooks(ctx, msg, request, depth, trace).await;
        match &r {
            Ok(reply) => self.transcript_result(ctx, reply),
            Err(refusal) => {
                self.transcript_result(ctx, &refusal.to_error(Phase::Response, Value::Null))
            }
        }
        r
    }

    async fn response_hooks(
        &self,
        ctx: &Ctx<'_>,
        mut msg: Message,
        request: Option<&Message>,
        depth: usize,
        trace: &mut Trace,
    ) -> Result<Message, Refusal> {
        self.run_controls(ctx, &mut msg, trace)?;
        let original_id = msg.id().cloned();
        let was_request = msg.kind() == sluice_core::Kind::Request;
        for hook in self.hooks[..depth.min(self.hooks.len())].iter().rev() {
            if !hook.selects(Phase::Response, ctx) || !hook.takes_reply(ctx, &msg) {
                continue;
            }
            if !hook.is_plain()
                && (self.passes_over(hook, ctx, || request.and_then(|r| r.param("arguments")))
                    || self.ran_detached(Phase::Response, hook, ctx, &msg, request, trace))
            {
                continue;
            }
            let started = Instant::now();
            let mut ev = self.event(Phase::Response, hook, ctx, msg, request.cloned(), trace);
            let result = hook.decide(&mut ev, ctx, trace, self.tools.as_ref()).await;
            msg = ev.message;
            let mut record = |decision: &'static str, reason: Option<String>| {
                trace
                    .records
                    .push(hook.record(Phase::Response, started, decision, reason));
            };
            match result {
                Ok(Decision::Pass) | Ok(Decision::Defer(_)) => record("pass", None),
                Ok(Decision::Ask(reason, _)) => {
                    tracing::info!(hook = %hook.id, method = ctx.method, reason = %reason, "a response hook asked; there is nothing left to allow (the call ran), so it passes");
                    record("pass", None);
                }
                Ok(Decision::Feedback(mut m, reason)) => {
                    record("feedback", Some(reason));
                    if let Some(id) = &original_id {
                        m.set_id(id.clone());
                    }
                    msg = m;
                }
                Ok(Decision::Modify(mut m)) | Ok(Decision::Answer(mut m)) => {
                    record("modify", None);
                    if let Some(id) = &original_id {
                        m.set_id(id.clone());
                    }
                    msg = m;
                    // An upstream's request to the client answered by the hook: the answer
                    // goes back to the upstream, and the hooks nearer the client never see it.
                    if was_request && msg.kind() != sluice_core::Kind::Request {
                        return Ok(msg);
                    }
                }
                Ok(Decision::Refuse(r)) => {
                    record("refuse", Some(r.reason.clone()));
                    tracing::info!(hook = %hook.id, method = ctx.method, session = ctx.session_id, reason = %r.reason, "response refused by hook");
                    return Err(r);
                }
                Err(HookFailure(why)) => {
                    record("error", Some(why.clone()));
                    tracing::warn!(hook = %hook.id, method = ctx.method, "hook failed: {why}");
                    if let Some(r) = hook.failure_refusal(&why) {
                        return Err(r);
                    }
                }
            }
        }
        Ok(msg)
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
#[path = "chain_tests.rs"]
mod tests;
