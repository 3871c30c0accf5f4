//! OpenTelemetry traces: request, hook and upstream-call spans, exported as OTLP/HTTP JSON.
//!
//! Off (no endpoint in `sluice.json`'s `telemetry` nor in `OTEL_EXPORTER_OTLP_*`), nothing here
//! runs on the call path: the runtime's `telemetry` is `None` and no
//! span is built. On, a request's spans are plain structs pushed, once the request ends, onto a
//! bounded queue (2,048; a full queue drops and counts, never blocks a call); one task sends them
//! in batches (every second, or as soon as 256 wait) to `<endpoint>/v1/traces`.
//!
//! The encoding is written by hand, with serde_json only escaping strings (the OTLP JSON
//! mapping: ids as lowercase hex, times as string nanoseconds, attributes as `{key, value:
//! {stringValue|intValue}}`, status code 2 for an error). The `opentelemetry-otlp` crate would
//! pull prost and tonic and add minutes to a build on our 2-core CI, for a format this small.
//!
//! The trace a request joins: the enclosing request's span (a funnel `run_tool` call inside a
//! meta-call), else the client's `params._meta.traceparent`, else the `traceparent` header of
//! its HTTP POST, else a new trace. An unsampled parent (`-00`) is continued and propagated but
//! nothing is exported.

use serde_json::{json, Value};
use sluice_config::{TelemetrySettings, Transport, UpstreamSpec};
use sluice_core::{Kind, Message};
use sluice_hooks::Trace;
use sluice_upstream::{ExtraHeaders, UpstreamError};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, Notify};

/// Spans waiting for the exporter; past this, new spans are dropped (and counted).
const QUEUE: usize = 2048;
/// A batch is sent when it holds this many spans…
const BATCH: usize = 256;
/// …or this long after the last send.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// One export request may take this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

const KIND_INTERNAL: u8 = 1;
const KIND_SERVER: u8 = 2;
const KIND_CLIENT: u8 = 3;

/// The W3C trace context of one span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    /// The trace id (never all zeros).
    pub trace_id: [u8; 16],
    /// The span id (never all zeros).
    pub span_id: [u8; 8],
    /// Is the trace recorded (the `01` flag)?
    pub sampled: bool,
}

impl SpanContext {
    /// Parse a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`; a later version may append
    /// fields). Invalid or all-zero ids: None.
    pub fn parse(s: &str) -> Option<SpanContext> {
        let s = s.trim();
        let mut parts = s.split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || !is_lower_hex(version) {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        let mut flag = [0u8; 1];
        if !(unhex(trace, &mut trace_id) && unhex(span, &mut span_id) && unhex(flags, &mut flag)) {
            return None;
        }
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flag[0] & 1 == 1,
        })
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            hex(&self.trace_id),
            hex(&self.span_id),
            if self.sampled { "01" } else { "00" }
        )
    }

    /// A new span in the same trace.
    fn child(&self) -> SpanContext {
        SpanContext {
            span_id: span_id(),
            ..*self
        }
    }

    /// The first span of a new, sampled trace.
    fn root() -> SpanContext {
        let mut trace_id = [0u8; 16];
        trace_id[..8].copy_from_slice(&nonzero_u64().to_be_bytes());
        trace_id[8..].copy_from_slice(&random_u64().to_be_bytes());
        SpanContext {
            trace_id,
            span_id: span_id(),
            sampled: true,
        }
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn unhex(s: &str, out: &mut [u8]) -> bool {
    if s.len() != out.len() * 2 || !is_lower_hex(s) {
        return false;
    }
    for (i, o) in out.iter_mut().enumerate() {
        match u8::from_str_radix(&s[i * 2..i * 2 + 2], 16) {
            Ok(b) => *o = b,
            Err(_) => return false,
        }
    }
    true
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// SplitMix64 per thread, seeded from the OS (through a v4 UUID): ids need to be unique, not
/// secret, and this costs nanoseconds instead of a system call per id.
fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let b = uuid::Uuid::new_v4().into_bytes();
            u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
        });
    }
    STATE.with(|s| {
        let mut z = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

fn nonzero_u64() -> u64 {
    loop {
        let v = random_u64();
        if v != 0 {
            return v;
        }
    }
}

fn span_id() -> [u8; 8] {
    nonzero_u64().to_be_bytes()
}

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
    headers: &axum::http::HeaderMap,
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

/// One attribute value.
#[derive(Debug, Clone, PartialEq)]
enum Attr {
    Str(String),
    Int(i64),
}

/// A finished span, as queued for export.
#[derive(Debug, Clone)]
struct SpanData {
    ctx: SpanContext,
    parent: Option<[u8; 8]>,
    name: String,
    kind: u8,
    start_ns: u64,
    end_ns: u64,
    attrs: Vec<(&'static str, Attr)>,
    /// Status `error` with this message.
    error: Option<String>,
}

impl SpanData {
    /// Append this span's OTLP JSON object to `out`.
    fn write_json(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let string = |out: &mut Vec<u8>, s: &str| {
            let _ = serde_json::to_writer(&mut *out, s);
        };
        let _ = write!(
            out,
            r#"{{"traceId":"{}","spanId":"{}","#,
            hex(&self.ctx.trace_id),
            hex(&self.ctx.span_id)
        );
        if let Some(p) = &self.parent {
            let _ = write!(out, r#""parentSpanId":"{}","#, hex(p));
        }
        out.extend_from_slice(br#""name":"#);
        string(out, &self.name);
        let _ = write!(
            out,
            r#","kind":{},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":["#,
            self.kind, self.start_ns, self.end_ns
        );
        for (i, (k, v)) in self.attrs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"key":"#);
            string(out, k);
            match v {
                Attr::Str(s) => {
                    out.extend_from_slice(br#","value":{"stringValue":"#);
                    string(out, s);
                    out.extend_from_slice(b"}}");
                }
                Attr::Int(n) => {
                    let _ = write!(out, r#","value":{{"intValue":"{n}"}}}}"#);
                }
            }
        }
        out.push(b']');
        if let Some(message) = &self.error {
            out.extend_from_slice(br#","status":{"code":2,"message":"#);
            string(out, message);
            out.push(b'}');
        }
        out.push(b'}');
    }
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

/// Where traces go, resolved from `sluice.json` and the `OTEL_*` environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportConfig {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub url: String,
    /// `service.name`.
    pub service_name: String,
    /// Headers on every export request.
    pub headers: Vec<(String, String)>,
}

impl ExportConfig {
    /// `telemetry.otlp_endpoint` (plus `/v1/traces`), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// (as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`); None: tracing is off
    /// (also with `OTEL_SDK_DISABLED=true`). The service name: `telemetry.service_name`, else
    /// `OTEL_SERVICE_NAME`, else `sluice`. Headers: `telemetry.headers`, else
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`).
    pub fn resolve(
        settings: &TelemetrySettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<ExportConfig> {
        let var = |n: &str| {
            env(n)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let with_path = |base: &str| {
            let base = base.trim_end_matches('/');
            if base.ends_with("/v1/traces") {
                base.to_string()
            } else {
                format!("{base}/v1/traces")
            }
        };
        let (url, from_env) = match &settings.otlp_endpoint {
            Some(e) => (with_path(e), false),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(u) => (u, true),
                None => (with_path(&var("OTEL_EXPORTER_OTLP_ENDPOINT")?), true),
            },
        };
        if from_env && !(url.starts_with("http://") || url.starts_with("https://")) {
            tracing::warn!(
                "the OTLP endpoint {url:?} from the environment is not an http(s) URL; traces are off"
            );
            return None;
        }
        if from_env
            && var("OTEL_EXPORTER_OTLP_PROTOCOL").is_some_and(|p| p.eq_ignore_ascii_case("grpc"))
        {
            tracing::warn!("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: Sluice exports OTLP over HTTP (JSON) only, to {url}");
        }
        let service_name = settings
            .service_name
            .clone()
            .or_else(|| var("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "sluice".into());
        let headers = if settings.headers.is_empty() {
            var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
                .map(|h| parse_env_headers(&h))
                .unwrap_or_default()
        } else {
            settings
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Some(ExportConfig {
            url,
            service_name,
            headers,
        })
    }
}

/// `k=v,k2=v2` with percent-encoded values (the OTel environment format).
fn parse_env_headers(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            out.push(digit(b[i + 1]) << 4 | digit(b[i + 2]));
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Finished spans waiting for the exporter (bounded: past [`QUEUE`] new spans are dropped and
/// counted). A mutex-guarded vector rather than a channel: a call only takes a short lock and
/// pushes; the exporter is woken once per [`BATCH`] spans (or by its timer), not per span.
struct Queue {
    spans: parking_lot::Mutex<Vec<SpanData>>,
    /// Rung when a batch is full.
    full: Notify,
    dropped: AtomicU64,
}

/// The trace exporter: the queue and the task that drains it.
pub struct Telemetry {
    queue: Arc<Queue>,
    /// Asks the exporter to send what is queued now; dropping it stops the exporter.
    flush: mpsc::Sender<oneshot::Sender<()>>,
    /// The endpoint, for logs.
    pub url: String,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("url", &self.url).finish()
    }
}

impl Telemetry {
    /// Start exporting when an endpoint is configured (in `settings` or the environment) and a
    /// tokio runtime is running; else None (tracing off).
    pub fn start(settings: &TelemetrySettings) -> Option<Arc<Telemetry>> {
        let config = ExportConfig::resolve(settings, &|n| std::env::var(n).ok())?;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("traces are off: no async runtime to export them from");
            return None;
        };
        let client = match reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("traces are off: cannot build the HTTP client: {e}");
                return None;
            }
        };
        let queue = Arc::new(Queue {
            spans: parking_lot::Mutex::new(Vec::with_capacity(BATCH)),
            full: Notify::new(),
            dropped: AtomicU64::new(0),
        });
        let (flush, flushes) = mpsc::channel(4);
        tracing::info!(
            "exporting traces to {} (OTLP/HTTP JSON, service.name {})",
            config.url,
            config.service_name
        );
        let url = config.url.clone();
        rt.spawn(export_loop(queue.clone(), flushes, client, config));
        Some(Arc::new(Telemetry { queue, flush, url }))
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Queue finished spans (never waits).
    fn export(&self, spans: impl IntoIterator<Item = SpanData>) {
        let mut q = self.queue.spans.lock();
        let before = q.len();
        for s in spans {
            if q.len() >= QUEUE {
                self.queue.dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                q.push(s);
            }
        }
        if before < BATCH && q.len() >= BATCH {
            self.queue.full.notify_one();
        }
    }

    /// Send what is queued now (bounded by `within`; best effort, for shutdown).
    pub async fn flush(&self, within: Duration) {
        let _ = tokio::time::timeout(within, async {
            let (done, wait) = oneshot::channel();
            if self.flush.send(done).await.is_ok() {
                let _ = wait.await;
            }
        })
        .await;
    }

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

    /// Carry this span's context upstream: a `traceparent` header for HTTP upstreams, and
    /// `params._meta.traceparent` replaced when the client put one there.
    pub fn propagate(&self, spec: &UpstreamSpec, msg: &mut Message, extra: &mut ExtraHeaders) {
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
        if matches!(spec.transport, Transport::Http | Transport::Sse) {
            extra.push("traceparent", value);
        }
    }

    /// End the span with what the upstream answered.
    pub fn finish(
        self,
        spec: &UpstreamSpec,
        method: &str,
        upstream_id: u64,
        tool: Option<&str>,
        result: &Result<Message, UpstreamError>,
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

/// One ExportTraceServiceRequest body: `resource` (its JSON object, encoded once) and spans.
fn export_body(resource: &[u8], spans: &[SpanData]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + spans.len() * 600);
    out.extend_from_slice(br#"{"resourceSpans":[{"resource":"#);
    out.extend_from_slice(resource);
    out.extend_from_slice(br#","scopeSpans":[{"scope":{"name":"sluice","version":""#);
    out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    out.extend_from_slice(br#""},"spans":["#);
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        s.write_json(&mut out);
    }
    out.extend_from_slice(b"]}]}]}");
    out
}

async fn export_loop(
    queue: Arc<Queue>,
    mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
    client: reqwest::Client,
    config: ExportConfig,
) {
    let resource = json!({"attributes": [
        {"key": "service.name", "value": {"stringValue": config.service_name}},
        {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
        {"key": "telemetry.sdk.name", "value": {"stringValue": "sluice"}},
        {"key": "telemetry.sdk.language", "value": {"stringValue": "rust"}},
    ]});
    let mut exporter = Exporter {
        client,
        resource: serde_json::to_vec(&resource).unwrap_or_default(),
        config,
        failing: false,
        dropped_seen: 0,
    };
    loop {
        let done = tokio::select! {
            _ = queue.full.notified() => None,
            _ = tokio::time::sleep(FLUSH_EVERY) => None,
            f = flushes.recv() => match f {
                Some(done) => Some(done),
                // The gateway is gone: send what is left and stop.
                None => {
                    exporter.drain(&queue).await;
                    return;
                }
            },
        };
        exporter.drain(&queue).await;
        if let Some(done) = done {
            let _ = done.send(());
        }
    }
}

struct Exporter {
    client: reqwest::Client,
    config: ExportConfig,
    resource: Vec<u8>,
    /// The last export failed (logged once until one works again).
    failing: bool,
    dropped_seen: u64,
}

impl Exporter {
    /// Send everything queued, [`BATCH`] spans per request.
    async fn drain(&mut self, queue: &Queue) {
        let dropped = queue.dropped.load(Ordering::Relaxed);
        let before = std::mem::replace(&mut self.dropped_seen, dropped);
        if dropped > before {
            tracing::warn!(
                "{} spans dropped: the export queue ({QUEUE}) was full",
                dropped - before
            );
        }
        let fresh = Vec::with_capacity(BATCH);
        let spans = std::mem::replace(&mut *queue.spans.lock(), fresh);
        if spans.is_empty() {
            return;
        }
        for batch in spans.chunks(BATCH) {
            self.send(batch).await;
        }
    }

    async fn send(&mut self, batch: &[SpanData]) {
        let n = batch.len();
        let mut rb = self
            .client
            .post(&self.config.url)
            .header("content-type", "application/json")
            .body(export_body(&self.resource, batch));
        for (k, v) in &self.config.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        let problem = match rb.send().await {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status())),
            Err(e) => Some(e.to_string()),
        };
        match problem {
            Some(p) if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    "exporting {n} spans to {} failed: {p} (they are dropped; logged again when exports recover)",
                    self.config.url
                );
            }
            Some(p) => tracing::debug!("exporting {n} spans failed: {p}"),
            None if self.failing => {
                self.failing = false;
                tracing::info!("exporting traces to {} works again", self.config.url);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_bad_values() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let ctx = SpanContext::parse(tp).unwrap();
        assert!(ctx.sampled);
        assert_eq!(ctx.traceparent(), tp);
        let unsampled =
            SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(SpanContext::parse(bad), None, "{bad}");
        }
        // A later version may append fields.
        assert!(
            SpanContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
        let child = ctx.child();
        assert_eq!(child.trace_id, ctx.trace_id);
        assert_ne!(child.span_id, ctx.span_id);
        let (a, b) = (SpanContext::root(), SpanContext::root());
        assert_ne!(a.trace_id, b.trace_id);
    }

    #[test]
    fn export_config_prefers_the_file_then_the_environment() {
        let none = |_: &str| None;
        assert_eq!(
            ExportConfig::resolve(&TelemetrySettings::default(), &none),
            None
        );
        let file = TelemetrySettings {
            otlp_endpoint: Some("http://127.0.0.1:4318/".into()),
            service_name: None,
            headers: [("x-api-key".to_string(), "k".to_string())].into(),
        };
        let env = |n: &str| match n {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("https://collector:4318".to_string()),
            "OTEL_SERVICE_NAME" => Some("edge".to_string()),
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("a=1, b=x%20y".to_string()),
            _ => None,
        };
        assert_eq!(
            ExportConfig::resolve(&file, &env),
            Some(ExportConfig {
                url: "http://127.0.0.1:4318/v1/traces".into(),
                service_name: "edge".into(),
                headers: vec![("x-api-key".into(), "k".into())],
            })
        );
        assert_eq!(
            ExportConfig::resolve(&TelemetrySettings::default(), &env),
            Some(ExportConfig {
                url: "https://collector:4318/v1/traces".into(),
                service_name: "edge".into(),
                headers: vec![("a".into(), "1".into()), ("b".into(), "x y".into())],
            })
        );
        let traces = |n: &str| match n {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://c:9/custom".to_string()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://ignored:1".to_string()),
            _ => None,
        };
        let c = ExportConfig::resolve(&TelemetrySettings::default(), &traces).unwrap();
        assert_eq!(
            (c.url.as_str(), c.service_name.as_str()),
            ("http://c:9/custom", "sluice")
        );
        let off = |n: &str| match n {
            "OTEL_SDK_DISABLED" => Some("true".to_string()),
            _ => None,
        };
        assert_eq!(ExportConfig::resolve(&file, &off), None);
    }

    #[test]
    fn spans_encode_as_otlp_json() {
        let ctx =
            SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let span = SpanData {
            ctx,
            parent: Some([1, 2, 3, 4, 5, 6, 7, 8]),
            name: "tools/call fx_echo".into(),
            kind: KIND_SERVER,
            start_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_000_000_000_002,
            attrs: vec![
                ("mcp.method.name", Attr::Str("tools/call".into())),
                (
                    "sluice.hook.reason",
                    Attr::Str("a \"quoted\"\nreason".into()),
                ),
                ("rpc.jsonrpc.error_code", Attr::Int(-32030)),
            ],
            error: Some("refused".into()),
        };
        let mut out = Vec::new();
        span.write_json(&mut out);
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            json!({
                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                "spanId": "00f067aa0ba902b7",
                "parentSpanId": "0102030405060708",
                "name": "tools/call fx_echo",
                "kind": 2,
                "startTimeUnixNano": "1700000000000000001",
                "endTimeUnixNano": "1700000000000000002",
                "attributes": [
                    {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
                    {"key": "sluice.hook.reason", "value": {"stringValue": "a \"quoted\"\nreason"}},
                    {"key": "rpc.jsonrpc.error_code", "value": {"intValue": "-32030"}}
                ],
                "status": {"code": 2, "message": "refused"}
            })
        );
        let one = serde_json::from_slice::<Value>(&out).unwrap();
        let body = export_body(br#"{"attributes":[]}"#, &[span.clone(), span]);
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"resourceSpans": [{
                "resource": {"attributes": []},
                "scopeSpans": [{
                    "scope": {"name": "sluice", "version": env!("CARGO_PKG_VERSION")},
                    "spans": [one.clone(), one]
                }]
            }]})
        );
    }
}
