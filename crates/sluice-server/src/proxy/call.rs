//! One client exchange as one value, [`Call`]: built once when a message arrives, it holds what
//! every phase reads — the snapshot, the session, the sink, the catalog the client sees, the
//! resolved target, the facts hooks select on, the trace, the start time, the span and the
//! operation — runs the phases (access, request hooks, response hooks) and ends in exactly one
//! [`Call::finish`], which records the exchange, closes the span and measures the operation.
//! `finish` takes the call by value, so no path can record twice; every strategy in
//! [`super`] (a client request, `initialize`, a 2026-07-28 request's session start, a client's
//! notification or reply, a message toward the client, a task's collected result, a list
//! answered from the cache) ends through it.

use super::hooks::Facts;
use super::route::{self, Target};
use crate::access::{self, Named};
use crate::catalog::Catalog;
use crate::channel::Sink;
use crate::session::Session;
use crate::state::{Snapshot, State};
use sluice_core::{Kind, Message};
use sluice_hooks::{Phase, Refusal, RequestOutcome, Trace};
use sluice_telemetry::{Ended, RequestSpan, ServerOp};
use std::sync::Arc;
use std::time::Instant;

/// How a call ended, for [`Call::finish`].
pub(crate) enum End<'r> {
    /// Answered with `reply`; `refused` says why when a rule or hook refused it.
    Reply {
        /// What the client (or the upstream, for a client's reply) gets.
        reply: &'r Message,
        /// The refusal's reason.
        refused: Option<String>,
    },
    /// A task's collected result: like [`End::Reply`], a result with `isError` is an error,
    /// and it is always recorded, under the method that collected it.
    ToolResult {
        /// What the client gets.
        reply: &'r Message,
        /// The refusal's reason.
        refused: Option<String>,
        /// `tasks/get` or `tasks/result`.
        method: &'r str,
    },
    /// Refused with nothing answered (a dropped notification, a message toward the client).
    Dropped(String),
    /// The client cancelled it; nothing is answered.
    Cancelled,
    /// It went on with nothing to tell (a session start that let the request through, a
    /// message toward the client the hooks passed).
    Passed,
}

/// What is kept of a call when someone watches it (hooks, the audit log, counters, live
/// traffic, tracing): boxed, so an unwatched call is only as large as its dispatch needs.
struct Watch {
    facts: Facts,
    trace: Trace,
    /// Boxed: most calls are not traced, and the watch is moved with every call.
    span: Option<Box<RequestSpan>>,
    op: Option<ServerOp>,
    /// A task the exchange created or collected (its gateway id), for the audit line.
    task: Option<String>,
    /// When the exchange began (only what is watched reads the clock for it).
    started: Instant,
}

/// One client exchange (see the module's doc).
pub(crate) struct Call<'c> {
    /// The gateway.
    pub st: &'c Arc<State>,
    /// The snapshot in force for the whole exchange.
    pub snap: &'c Snapshot,
    /// The session it belongs to.
    pub session: &'c Arc<Session>,
    /// Where messages related to it go (None: nothing is related, e.g. a notification).
    pub sink: Option<&'c Sink>,
    /// The catalog the client sees (its own view, `views.rs`), for a request.
    catalog: Option<&'c Arc<Catalog>>,
    /// What the request targets, resolved once (taken by the dispatch).
    target: Option<Target<'c>>,
    /// What the request names (tool, prompt or resource), decoded once for the access rules
    /// and the facts.
    named: Option<Named>,
    /// The definition of the tool the facts name, looked up once for every phase's hook
    /// context (when a hook wants it: the facts keep the catalog then).
    tool: Option<&'c serde_json::Value>,
    watch: Option<Box<Watch>>,
}

impl<'c> Call<'c> {
    /// A call with no target: `initialize`, a notification or reply, a message toward the
    /// client. `facts` are what hooks select on; the span and operation are started by
    /// [`Call::measured`].
    pub(crate) fn plain(
        st: &'c Arc<State>,
        snap: &'c Snapshot,
        session: &'c Arc<Session>,
        facts: Facts,
    ) -> Call<'c> {
        Call {
            st,
            snap,
            session,
            sink: None,
            catalog: None,
            target: None,
            named: None,
            tool: None,
            watch: Some(Box::new(Watch {
                facts,
                trace: Trace::default(),
                span: None,
                op: None,
                task: None,
                started: Instant::now(),
            })),
        }
    }

    /// A client request, resolved against `catalog` (the client's view). It is watched when
    /// hooks run, someone records exchanges, or tracing is on; then its facts are built here,
    /// from what was decoded once.
    pub(crate) fn request(
        st: &'c Arc<State>,
        snap: &'c Snapshot,
        session: &'c Arc<Session>,
        sink: &'c Sink,
        catalog: &'c Arc<Catalog>,
        msg: &Message,
    ) -> Call<'c> {
        let principal = session.principal();
        let target = route::resolve_in(snap, catalog, principal.as_deref(), msg);
        let tel = st.rt.telemetry().as_ref();
        let watched = !snap.chain.is_empty() || st.observed(snap) || tel.is_some();
        let named = (watched || !snap.policy.is_open())
            .then(|| access::named(msg))
            .flatten();
        let mut call = Call {
            st,
            snap,
            session,
            sink: Some(sink),
            catalog: Some(catalog),
            target: Some(target),
            named,
            tool: None,
            watch: None,
        };
        if watched {
            let started = Instant::now();
            let facts = call.request_facts(msg);
            let peer = super::peer(session);
            call.tool = match (&facts.tool_name, &facts.catalog) {
                (Some(name), Some(_)) => catalog.tool_definition(name),
                _ => None,
            };
            // Room for a record of every hook the call can pass (one allocation, no growth).
            let trace = Trace {
                records: Vec::with_capacity(snap.chain.hooks().len() + snap.chain.controls().len()),
                ..Trace::default()
            };
            call.watch = Some(Box::new(Watch {
                span: tel.map(|t| {
                    Box::new(
                        t.start_request(msg, &peer, facts.upstream.as_deref())
                            .on_endpoint(snap.endpoint_name()),
                    )
                }),
                op: Some(ServerOp::start(msg, &peer)),
                facts,
                trace,
                task: None,
                started,
            }));
        }
        call
    }

    /// Start the span (when tracing) and the operation of a call made by [`Call::plain`] for
    /// `msg` (`initialize`).
    pub(crate) fn measured(mut self, msg: &Message) -> Call<'c> {
        let peer = super::peer(self.session);
        let tel = self.st.rt.telemetry().as_ref();
        if let Some(w) = self.watch.as_mut() {
            let endpoint = self.snap.endpoint_name();
            w.span = tel.map(|t| Box::new(t.start_request(msg, &peer, None).on_endpoint(endpoint)));
            w.op = Some(ServerOp::start(msg, &peer));
        }
        self
    }

    /// The facts of the request `msg`: its tool from what was decoded once, the upstream and
    /// the upstream's own tool name from the resolved target.
    fn request_facts(&self, msg: &Message) -> Facts {
        let (upstream, upstream_name) = match &self.target {
            Some(Target::Upstream(u)) => (Some(u.slot.spec.id.as_str()), u.name.as_deref()),
            _ => (None, None),
        };
        let identity = match &self.target {
            Some(Target::Upstream(u)) if self.snap.chain.shows_payloads() => {
                super::hooks::serving_identity(u.slot, self.session)
            }
            _ => None,
        };
        let tool = match &self.named {
            Some(Named {
                item: sluice_auth::Item::Tool,
                name,
                ..
            }) => Some(name.as_str()),
            _ => None,
        };
        let catalog = self.catalog.expect("a request has a catalog");
        Facts::of_request(
            self.snap,
            catalog,
            msg.method().unwrap_or(""),
            tool,
            upstream,
            upstream_name,
            identity,
        )
    }

    /// Where messages related to the request go (a request always has one).
    pub(crate) fn sink(&self) -> &'c Sink {
        self.sink.expect("a request call carries its sink")
    }

    /// Is anything watching (hooks, records, tracing)?
    pub(crate) fn watched(&self) -> bool {
        self.watch.is_some()
    }

    /// The facts hooks select on (a watched call's).
    pub(crate) fn facts(&self) -> Option<&Facts> {
        self.watch.as_ref().map(|w| &w.facts)
    }

    /// Mark the exchange as the one that created or collected `task`.
    pub(crate) fn set_task(&mut self, task: Option<String>) {
        if let Some(w) = self.watch.as_mut() {
            w.task = task;
        }
    }

    /// Take the resolved target, for the dispatch.
    pub(crate) fn take_target(&mut self) -> Target<'c> {
        self.target
            .take()
            .unwrap_or_else(|| Target::Local(Ok(serde_json::json!({}))))
    }

    /// Resolve the request again (a hook changed what it names).
    pub(crate) fn resolve_again(&mut self, msg: &Message) {
        let catalog = self.catalog.expect("a request has a catalog");
        let principal = self.session.principal();
        self.target = Some(route::resolve_in(
            self.snap,
            catalog,
            principal.as_deref(),
            msg,
        ));
    }

    /// The access phase: `Err` (the reply and the reason) when the caller may not use what the
    /// request names; answered exactly like a target that does not exist.
    pub(crate) fn access(&self) -> Result<(), Box<access::Refused>> {
        if self.snap.policy.is_open() {
            return Ok(());
        }
        let principal = self.session.principal();
        access::check(&self.snap.policy, principal.as_deref(), self.named.as_ref())
    }

    /// The request phase: the request hooks, head to tail (a watched call; an unwatched one
    /// forwards). The depth is how far the request went, for the response hooks.
    pub(crate) async fn request_hooks(&mut self, msg: Message) -> (RequestOutcome, usize) {
        let Some(w) = self.watch.as_mut() else {
            return (RequestOutcome::Forward(msg), 0);
        };
        w.facts.see_identity().await;
        let cx = w.facts.ctx_with(self.session, self.tool);
        self.snap.chain.request(&cx, msg, &mut w.trace).await
    }

    /// [`Call::request_hooks`], keeping a copy of the request when a response hook wants to
    /// see it with the reply (decided on the same hook context).
    pub(crate) async fn request_hooks_keeping(
        &mut self,
        msg: Message,
    ) -> (RequestOutcome, usize, Option<Message>) {
        let Some(w) = self.watch.as_mut() else {
            return (RequestOutcome::Forward(msg), 0, None);
        };
        w.facts.see_identity().await;
        let cx = w.facts.ctx_with(self.session, self.tool);
        // Kept only for hooks that see replies (the response controls never read the request).
        let copy = self
            .snap
            .chain
            .hooks_select(Phase::Response, &cx, usize::MAX)
            .then(|| msg.clone());
        let (outcome, depth) = self.snap.chain.request(&cx, msg, &mut w.trace).await;
        (outcome, depth, copy)
    }

    /// The session-start phase of a 2026-07-28 request: `Some` when a SessionStart hook
    /// refused the `initialize` made of its `_meta`.
    pub(crate) async fn session_start(&mut self, init: Message) -> Option<Refusal> {
        let w = self.watch.as_mut()?;
        let cx = w.facts.ctx_with(self.session, self.tool);
        self.snap.chain.session_start(&cx, init, &mut w.trace).await
    }

    /// The response phase: the response hooks the request reached (`depth`), tail to head.
    /// `Err` = refused.
    pub(crate) async fn response_hooks(
        &mut self,
        reply: Message,
        request: Option<&Message>,
        depth: usize,
    ) -> Result<Message, Refusal> {
        let Some(w) = self.watch.as_mut() else {
            return Ok(reply);
        };
        w.facts.see_identity().await;
        let cx = w.facts.ctx_with(self.session, self.tool);
        self.snap
            .chain
            .response(&cx, reply, request, depth, &mut w.trace)
            .await
    }

    /// `fut` (the dispatch) under the call's span and operation, so what it starts (the
    /// upstream call) is their child. Not an `async fn`: one would hold `fut` twice (its
    /// argument and the scope future it awaits), and the dispatch's future is the largest part
    /// of a call's; the caller awaits what this returns.
    pub(crate) fn scoped<F: std::future::Future>(
        &self,
        fut: F,
    ) -> impl std::future::Future<Output = F::Output> + use<'_, 'c, F> {
        use futures_util::future::Either;
        let w = self.watch.as_deref();
        match (
            w.and_then(|w| w.span.as_ref()),
            w.and_then(|w| w.op.as_ref()),
        ) {
            (Some(s), Some(op)) => Either::Left(s.scope(op.scope(fut))),
            (None, Some(op)) => Either::Right(Either::Left(op.scope(fut))),
            _ => Either::Right(Either::Right(fut)),
        }
    }

    /// The end: record the exchange (a tool call, a task, or anything refused or cancelled),
    /// close the span, measure the operation. Exactly once: it takes the call.
    pub(crate) fn finish(self, end: End<'_>) {
        let Some(mut w) = self.watch else {
            return;
        };
        // Read in place: moving the watch out of its box would copy it whole.
        let (span, op) = (w.span.take(), w.op.take());
        let Watch {
            facts,
            trace,
            task,
            started,
            ..
        } = &*w;
        let (outcome, reply, error) = match &end {
            End::Reply { reply, refused } | End::ToolResult { reply, refused, .. } => {
                let failed = matches!(end, End::ToolResult { .. })
                    && reply.result().and_then(|r| r.get("isError"))
                        == Some(&serde_json::Value::Bool(true));
                let outcome = match (refused, reply.kind()) {
                    (Some(_), _) => "refused",
                    (None, Kind::Error) => "error",
                    _ if failed => "error",
                    _ => "ok",
                };
                let error = refused.clone().or_else(|| {
                    reply
                        .error_obj()
                        .and_then(|e| e.get("message"))
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string)
                });
                (outcome, Some(*reply), error)
            }
            End::Dropped(reason) => ("refused", None, Some(reason.clone())),
            End::Cancelled => ("cancelled", None, None),
            End::Passed => return,
        };
        let method = match &end {
            End::ToolResult { method, .. } => Some(*method),
            _ => None,
        };
        if method.is_some()
            || facts.method == "tools/call"
            || outcome == "refused"
            || outcome == "cancelled"
            || trace.has_findings()
        {
            let task = task.as_deref();
            self.st.record(
                self.snap,
                self.session,
                Ended {
                    method: method.unwrap_or(&facts.method),
                    tool: facts.tool_name.as_deref(),
                    upstream: facts.upstream.as_deref(),
                    started: *started,
                    outcome,
                    error,
                    trace,
                },
                task,
            );
        }
        if let Some(s) = span {
            (*s).finish(outcome, reply, trace);
        }
        if let (Some(op), Some(reply)) = (op, reply) {
            op.finish(reply);
        }
    }
}
