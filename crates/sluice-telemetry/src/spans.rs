//! Sluice's spans: one per client request (its hooks as children) and one per upstream call,
//! under a task-local parent, named and attributed by OpenTelemetry's MCP conventions
//! ([`semconv`]); and the operation durations ([`ServerOp`], [`ClientOp`]) they share.
//!
//! The trace a request joins: the enclosing request's span (a funnel `run_tool` call inside a
//! meta-call), else the client's `params._meta.traceparent`, else the `traceparent` header of
//! its HTTP POST, else a new trace. An unsampled parent (`-00`) is continued and propagated but
//! nothing is exported. Off (no [`Telemetry`]), none of this runs on the call path.

use crate::context::SpanContext;
use crate::exporter::Telemetry;
use crate::mcp_metrics::{self, Side};
use crate::otlp::{Attr, SpanData, KIND_CLIENT, KIND_INTERNAL, KIND_SERVER};
use crate::semconv::{self, Failure, Net, Operation, Peer};
use serde_json::{json, Value};
use sluice_config::{Transport, UpstreamSpec};
use sluice_core::Message;
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
///
/// A plain function returning the task-local future (not an `async fn`, which would hold `fut`
/// twice: as its argument and as the future it awaits); the caller awaits `fut` itself when
/// there is no parent.
pub fn with_http_parent<F: Future>(parent: SpanContext, fut: F) -> impl Future<Output = F::Output> {
    PARENT.scope(Parent::Remote(parent), fut)
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

tokio::task_local! {
    /// Set while a client request's operation is measured: a request nested in it (the
    /// funnel's `run_tool`) is not a second operation.
    static IN_OPERATION: ();
}

/// An operation's duration series, borrowed: its common attributes, its failure's (if any) and
/// the network's, in the order the metric writes them.
fn series<'a>(
    op: &'a Operation,
    failure: Option<&'a [(&'static str, String)]>,
    net: &'a [(&'static str, String)],
) -> Vec<(&'static str, &'a str)> {
    let mut labels = op.common_refs();
    let owned = failure.into_iter().flatten().chain(net);
    labels.extend(owned.map(|(k, v)| (*k, v.as_str())));
    labels
}

/// One client request's `mcp.server.operation.duration`, measured whether or not traces are on
/// (and only when the metrics are recorded: [`mcp_metrics::McpMetrics::is_recording`]).
#[derive(Debug)]
pub struct ServerOp {
    /// What is measured; `None` when nothing is (not recording, or nested in an operation).
    /// Boxed: an operation that measures nothing is a pointer's size, as every call carries one.
    measured: Option<Box<Measured>>,
}

#[derive(Debug)]
struct Measured {
    op: Operation,
    net: Vec<(&'static str, String)>,
    started: Instant,
}

impl ServerOp {
    /// Start measuring the handling of `msg` from `peer`.
    pub fn start(msg: &Message, peer: &Peer<'_>) -> ServerOp {
        let nested = IN_OPERATION.try_with(|_| ()).is_ok();
        let measured = (!nested && mcp_metrics::global().is_recording()).then(|| {
            Box::new(Measured {
                op: Operation::of(msg),
                net: semconv::network(peer.net, Some(peer.protocol_version)),
                started: Instant::now(),
            })
        });
        ServerOp { measured }
    }

    /// Run the request's dispatch inside this operation (the task-local future itself: no
    /// `async fn` around it, which would hold `fut` twice).
    pub fn scope<F: Future>(&self, fut: F) -> tokio::task::futures::TaskLocalFuture<(), F> {
        IN_OPERATION.scope((), fut)
    }

    /// Record the operation, answered with `reply`.
    pub fn finish(self, reply: &Message) {
        let Some(m) = self.measured else {
            return;
        };
        let failure = Failure::of_reply(&m.op, reply).map(|f| f.attrs());
        let labels = series(&m.op, failure.as_deref(), &m.net);
        mcp_metrics::global().observe(Side::Server, &labels, m.started.elapsed().as_secs_f64());
    }
}

fn push_str(attrs: &mut Vec<(&'static str, Attr)>, pairs: Vec<(&'static str, String)>) {
    attrs.extend(pairs.into_iter().map(|(k, v)| (k, Attr::Str(v))));
}

impl Telemetry {
    /// Open the span of one client request (from `peer`, going to `upstream` when known).
    pub fn start_request(
        self: &Arc<Telemetry>,
        msg: &Message,
        peer: &Peer<'_>,
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
        RequestSpan {
            tel: self.clone(),
            ctx,
            parent: parent.map(|p| p.span_id),
            kind,
            clock: Clock::now(),
            op: Operation::of(msg),
            session_id: peer.session_id.map(str::to_string),
            net: semconv::network(peer.net, Some(peer.protocol_version)),
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
    op: Operation,
    session_id: Option<String>,
    net: Vec<(&'static str, String)>,
    upstream: Option<String>,
}

/// The attributes of an MCP span (server or client side) other than the peer's.
fn mcp_attrs(op: &Operation, failure: Option<&Failure>) -> Vec<(&'static str, Attr)> {
    let mut attrs = Vec::with_capacity(12);
    push_str(&mut attrs, op.common());
    if let Some(t) = &op.tool {
        // Sluice's name before the conventions' gen_ai.tool.name.
        attrs.push(("mcp.tool.name", Attr::Str(t.clone())));
    }
    if let Some(u) = &op.resource_uri {
        attrs.push(("mcp.resource.uri", Attr::Str(u.clone())));
    }
    if let Some(id) = &op.request_id {
        attrs.push(("jsonrpc.request.id", Attr::Str(id.clone())));
    }
    if let Some(f) = failure {
        push_str(&mut attrs, f.attrs());
        if let Some(code) = f.status_code {
            // Sluice's integer code before the conventions' rpc.response.status_code.
            attrs.push(("rpc.jsonrpc.error_code", Attr::Int(code)));
        }
    }
    attrs
}

impl RequestSpan {
    /// Name the endpoint of `mcp/endpoints.json` the request came to (`sluice.endpoint`; none
    /// for `/mcp`).
    pub fn on_endpoint(mut self, endpoint: Option<&str>) -> RequestSpan {
        if let Some(e) = endpoint {
            self.net.push(("sluice.endpoint", e.to_string()));
        }
        self
    }

    /// Run the router under this span (its upstream call becomes a child). The task-local
    /// future itself: no `async fn` around it, which would hold `fut` twice.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        PARENT.scope(Parent::Local(self.ctx), fut)
    }

    /// End the span: `outcome` is `ok`, `error`, `refused` or `cancelled`; `reply` what the
    /// client got; the hooks that ran become child spans.
    pub fn finish(self, outcome: &str, reply: Option<&Message>, trace: &Trace) {
        if !self.ctx.sampled {
            return;
        }
        let end_ns = self.clock.ns(Instant::now());
        let name = self.op.span_name();
        let failure = reply.and_then(|r| Failure::of_reply(&self.op, r));
        let mut attrs = mcp_attrs(&self.op, failure.as_ref());
        if let Some(s) = self.session_id {
            attrs.push(("mcp.session.id", Attr::Str(s)));
        }
        push_str(&mut attrs, self.net);
        if let Some(u) = self.upstream {
            attrs.push(("sluice.upstream", Attr::Str(u)));
        }
        attrs.push(("sluice.outcome", Attr::Str(outcome.to_string())));
        let error = failure.map(|f| f.message);
        let mut spans = Vec::with_capacity(trace.records.len() + 1);
        for r in &trace.records {
            let start_ns = self.clock.ns(r.started);
            let mut attrs = vec![
                ("sluice.hook.id", Attr::Str(r.id.to_string())),
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

/// What a call upstream came to: a reply, or no reply (`error.type`, and the error).
pub type UpstreamResult<'a> = Result<&'a Message, (&'a str, &'a dyn std::fmt::Display)>;

/// One call to an upstream, as the conventions see it: its `mcp.client.operation.duration`
/// (recorded whether or not traces are on) and the attributes of its span.
#[derive(Debug)]
pub struct ClientOp {
    op: Operation,
    net: Vec<(&'static str, String)>,
    server: Option<Arc<Server>>,
    started: Instant,
}

/// An upstream's `server.address` and `server.port`.
#[derive(Debug)]
struct Server {
    host: String,
    port: u16,
    /// `port` as a label value.
    port_text: String,
}

/// `server.address` and `server.port` of an upstream URL, parsed once per thread and URL (the
/// last one kept: a call parses nothing when its thread served the same upstream last).
fn server_of(url: &str) -> Option<Arc<Server>> {
    type Found = Option<Arc<Server>>;
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, Found)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((u, server)) = last.as_ref() {
            if u == url {
                return server.clone();
            }
        }
        let server = reqwest::Url::parse(url).ok().and_then(|u| {
            let port = u.port_or_known_default()?;
            Some(Arc::new(Server {
                host: u.host_str()?.to_string(),
                port,
                port_text: port.to_string(),
            }))
        });
        *last = Some((url.to_string(), server.clone()));
        server
    })
}

impl ClientOp {
    /// Start measuring `msg` (as it goes upstream) sent to `spec`, which negotiated
    /// `protocol_version`.
    pub fn start(spec: &UpstreamSpec, msg: &Message, protocol_version: Option<&str>) -> ClientOp {
        let http = matches!(spec.transport, Transport::Http | Transport::Sse);
        let server = if http { server_of(&spec.url) } else { None };
        let net = if http { Net::Http } else { Net::Stdio };
        ClientOp {
            op: Operation::of(msg),
            net: semconv::network(net, protocol_version),
            server,
            started: Instant::now(),
        }
    }

    fn failure(&self, result: UpstreamResult<'_>) -> Option<Failure> {
        match result {
            Ok(reply) => Failure::of_reply(&self.op, reply),
            Err((kind, e)) => Some(Failure::transport(kind, e.to_string())),
        }
    }

    /// Is anything to measure a call upstream: the metrics recorded, or a span open (`span`)?
    /// A call makes no [`ClientOp`] otherwise.
    pub fn wanted(span: bool) -> bool {
        span || mcp_metrics::global().is_recording()
    }

    /// Record the call's duration (when the metrics are recorded).
    pub fn finish(&self, result: UpstreamResult<'_>) {
        if !mcp_metrics::global().is_recording() {
            return;
        }
        let failure = self.failure(result).map(|f| f.attrs());
        let mut labels = series(&self.op, failure.as_deref(), &self.net);
        if let Some(server) = &self.server {
            labels.push(("server.address", server.host.as_str()));
            labels.push(("server.port", server.port_text.as_str()));
        }
        mcp_metrics::global().observe(Side::Client, &labels, self.started.elapsed().as_secs_f64());
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

    /// End the span of `call` (to `spec`) with what the upstream answered.
    pub fn finish(self, spec: &UpstreamSpec, call: &ClientOp, result: UpstreamResult<'_>) {
        if !self.ctx.sampled {
            return;
        }
        let end_ns = self.clock.ns(Instant::now());
        let failure = call.failure(result);
        let mut attrs = mcp_attrs(&call.op, failure.as_ref());
        attrs.push(("sluice.upstream", Attr::Str(spec.id.clone())));
        push_str(&mut attrs, call.net.clone());
        if let Some(server) = &call.server {
            attrs.push(("server.address", Attr::Str(server.host.clone())));
            attrs.push(("server.port", Attr::Int(i64::from(server.port))));
        }
        self.tel.export([SpanData {
            ctx: self.ctx,
            parent: Some(self.parent),
            name: call.op.span_name(),
            kind: KIND_CLIENT,
            start_ns: self.clock.wall_ns,
            end_ns,
            attrs,
            error: failure.map(|f| f.message),
        }]);
    }
}
