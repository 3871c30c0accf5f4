//! Sluice's spans: one per client request (its hooks as children) and one per upstream call,
//! under a task-local parent.
//!
//! The trace a request joins: the enclosing request's span (a funnel `run_tool` call inside a
//! meta-call), else the client's `params._meta.traceparent`, else the `traceparent` header of
//! its HTTP POST, else a new trace. An unsampled parent (`-00`) is continued and propagated but
//! nothing is exported. Off (no [`Telemetry`]), none of this runs on the call path.

use crate::context::SpanContext;
use crate::exporter::Telemetry;
use crate::otlp::{Attr, SpanData, KIND_CLIENT, KIND_INTERNAL, KIND_SERVER};
use serde_json::{json, Value};
use sluice_config::{Transport, UpstreamSpec};
use sluice_core::{Kind, Message};
use sluice_hooks::Trace;
use std::future::Future;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where the running request's trace comes from, for the code it calls.
#[derive(Debug, Clone, Copy)]
enum Parent {
    /// The `traceparent` header of the client's HTTP request.
    Remote(SpanContext),
    /// The span of the client request being handled.
    Local(SpanContext),
}

tokio::task_local! {
    static PARENT: Parent;
}

/// The `traceparent` header of a client's HTTP request, when tracing is on and it is valid.
pub fn http_parent(
    tel: Option<&Telemetry>,
    headers: &reqwest::header::HeaderMap,
) -> Option<SpanContext> {
    tel?;
    SpanContext::parse(headers.get("traceparent")?.to_str().ok()?)
}

/// Run `fut` (the handling of one HTTP request) with the client's trace context from
/// [`http_parent`]: the requests it carries join that trace.
pub async fn with_http_parent<F: Future>(parent: Option<SpanContext>, fut: F) -> F::Output {
    match parent {
        Some(ctx) => PARENT.scope(Parent::Remote(ctx), fut).await,
        None => fut.await,
    }
}

/// Which parts of a message's `_meta` the tracer reads and rewrites.
const META_TRACEPARENT: &str = "traceparent";

fn meta_traceparent(msg: &Message) -> Option<SpanContext> {
    msg.params()?
        .get("_meta")?
        .get(META_TRACEPARENT)?
        .as_str()
        .and_then(SpanContext::parse)
}

/// The wall clock of a span's start, to place what happened during it (measured with
/// `Instant`) on the Unix timeline.
#[derive(Debug, Clone, Copy)]
struct Clock {
    wall_ns: u64,
    at: Instant,
}

impl Clock {
    fn now() -> Clock {
        Clock {
            wall_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            at: Instant::now(),
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        self.wall_ns + t.saturating_duration_since(self.at).as_nanos() as u64
    }
}

impl Telemetry {
    /// Open the span of one client request (`session_id`'s, going to `upstream` when known).
    pub fn start_request(
        self: &Arc<Telemetry>,
        msg: &Message,
        session_id: &str,
        upstream: Option<&str>,
    ) -> RequestSpan {
        let current = PARENT.try_with(|p| *p).ok();
        let (parent, kind) = match (current, meta_traceparent(msg)) {
            (Some(Parent::Local(p)), _) => (Some(p), KIND_INTERNAL),
            (_, Some(p)) | (Some(Parent::Remote(p)), None) => (Some(p), KIND_SERVER),
            (None, None) => (None, KIND_SERVER),
        };
        let ctx = match parent {
            Some(p) => p.child(),
            None => SpanContext::root(),
        };
        let method = msg.method().unwrap_or("").to_string();
        let tool = (method == "tools/call")
            .then(|| msg.param_str("name").map(str::to_string))
            .flatten();
        let request_id = match msg.id() {
            Some(Value::String(s)) => s.clone(),
            Some(v) => sluice_core::exact::to_string(v),
            None => String::new(),
        };
        RequestSpan {
            tel: self.clone(),
            ctx,
            parent: parent.map(|p| p.span_id),
            kind,
            clock: Clock::now(),
            method,
            tool,
            request_id,
            session_id: session_id.to_string(),
            upstream: upstream.map(str::to_string),
        }
    }
}

/// The open span of one client request.
#[derive(Debug)]
pub struct RequestSpan {
    tel: Arc<Telemetry>,
    ctx: SpanContext,
    parent: Option<[u8; 8]>,
    kind: u8,
    clock: Clock,
    method: String,
    tool: Option<String>,
    request_id: String,
    session_id: String,
    upstream: Option<String>,
}

impl RequestSpan {
    /// Run the router under this span (its upstream call becomes a child).
    pub async fn scope<F: Future>(&self, fut: F) -> F::Output {
        PARENT.scope(Parent::Local(self.ctx), fut).await
    }

    /// End the span: `outcome` is `ok`, `error`, `refused` or `cancelled`; `reply` what the
    /// client got; the hooks that ran become child spans.
    pub fn finish(self, outcome: &str, reply: Option<&Message>, trace: &Trace) {
        if !self.ctx.sampled {
            return;
        }
        let end_ns = self.clock.ns(Instant::now());
        let name = match &self.tool {
            Some(t) => format!("{} {t}", self.method),
            None => self.method.clone(),
        };
        let mut attrs = vec![
            ("mcp.method.name", Attr::Str(self.method)),
            ("mcp.session.id", Attr::Str(self.session_id)),
        ];
        if let Some(t) = self.tool {
            attrs.push(("mcp.tool.name", Attr::Str(t)));
        }
        if let Some(u) = self.upstream {
            attrs.push(("sluice.upstream", Attr::Str(u)));
        }
        attrs.push(("jsonrpc.request.id", Attr::Str(self.request_id)));
        attrs.push(("sluice.outcome", Attr::Str(outcome.to_string())));
        let mut error = None;
        if let Some(e) = reply
            .filter(|r| r.kind() == Kind::Error)
            .and_then(Message::error_obj)
        {
            if let Some(code) = e.get("code").and_then(Value::as_i64) {
                attrs.push(("rpc.jsonrpc.error_code", Attr::Int(code)));
            }
            error = Some(
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or(outcome)
                    .to_string(),
            );
        }
        let mut spans = Vec::with_capacity(trace.records.len() + 1);
        for r in &trace.records {
            let start_ns = self.clock.ns(r.started);
            let mut attrs = vec![
                ("sluice.hook.id", Attr::Str(r.id.clone())),
                ("sluice.hook.phase", Attr::Str(r.phase.as_str().to_string())),
                ("sluice.hook.decision", Attr::Str(r.decision.to_string())),
            ];
            if let Some(reason) = &r.reason {
                attrs.push(("sluice.hook.reason", Attr::Str(reason.clone())));
            }
            spans.push(SpanData {
                ctx: self.ctx.child(),
                parent: Some(self.ctx.span_id),
                name: format!("hook {}", r.id),
                kind: KIND_INTERNAL,
                start_ns,
                end_ns: start_ns + r.micros * 1000,
                attrs,
                error: (r.decision == "error").then(|| r.reason.clone().unwrap_or_default()),
            });
        }
        spans.push(SpanData {
            ctx: self.ctx,
            parent: self.parent,
            name,
            kind: self.kind,
            start_ns: self.clock.wall_ns,
            end_ns,
            attrs,
            error,
        });
        self.tel.export(spans);
    }
}
/// The open span of one call to an upstream.
#[derive(Debug)]
pub struct UpstreamSpan {
    tel: Arc<Telemetry>,
    ctx: SpanContext,
    parent: [u8; 8],
    clock: Clock,
}

impl UpstreamSpan {
    /// A child of the request being handled, when tracing is on and a request span is open.
    pub fn start(tel: Option<&Arc<Telemetry>>) -> Option<UpstreamSpan> {
        let tel = tel?;
        let Ok(Parent::Local(parent)) = PARENT.try_with(|p| *p) else {
            return None;
        };
        Some(UpstreamSpan {
            tel: tel.clone(),
            ctx: parent.child(),
            parent: parent.span_id,
            clock: Clock::now(),
        })
    }

    /// Carry this span's context upstream: `params._meta.traceparent` replaced when the client
    /// put one there, and the `traceparent` header value to send (HTTP and SSE upstreams).
    pub fn propagate(&self, spec: &UpstreamSpec, msg: &mut Message) -> Option<String> {
        let value = self.ctx.traceparent();
        if matches!(msg.params().and_then(|p| p.get("_meta")), Some(m) if m.get(META_TRACEPARENT).is_some())
        {
            if let Some(meta) = msg
                .params_mut()
                .get_mut("_meta")
                .and_then(Value::as_object_mut)
            {
                meta.insert(META_TRACEPARENT.into(), json!(value));
            }
        }
        matches!(spec.transport, Transport::Http | Transport::Sse).then_some(value)
    }

    /// End the span with what the upstream answered (`Err`: the call failed, no reply).
    pub fn finish(
        self,
        spec: &UpstreamSpec,
        method: &str,
        upstream_id: u64,
        tool: Option<&str>,
        result: Result<&Message, &dyn std::fmt::Display>,
    ) {
        if !self.ctx.sampled {
            return;
        }
        let end_ns = self.clock.ns(Instant::now());
        let mut attrs = vec![
            ("sluice.upstream", Attr::Str(spec.id.clone())),
            ("mcp.method.name", Attr::Str(method.to_string())),
            ("jsonrpc.request.id", Attr::Str(upstream_id.to_string())),
        ];
        if let Some(t) = tool {
            attrs.push(("mcp.tool.name", Attr::Str(t.to_string())));
        }
        if matches!(spec.transport, Transport::Http | Transport::Sse) {
            if let Ok(url) = reqwest::Url::parse(&spec.url) {
                if let Some(host) = url.host_str() {
                    attrs.push(("server.address", Attr::Str(host.to_string())));
                }
                if let Some(port) = url.port_or_known_default() {
                    attrs.push(("server.port", Attr::Int(i64::from(port))));
                }
            }
        }
        let error = match result {
            Ok(reply) => reply.error_obj().map(|e| {
                if let Some(code) = e.get("code").and_then(Value::as_i64) {
                    attrs.push(("rpc.jsonrpc.error_code", Attr::Int(code)));
                }
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string()
            }),
            Err(e) => Some(e.to_string()),
        };
        let name = match tool {
            Some(t) => format!("{method} {t}"),
            None => method.to_string(),
        };
        self.tel.export([SpanData {
            ctx: self.ctx,
            parent: Some(self.parent),
            name,
            kind: KIND_CLIENT,
            start_ns: self.clock.wall_ns,
            end_ns,
            attrs,
            error,
        }]);
    }
}
