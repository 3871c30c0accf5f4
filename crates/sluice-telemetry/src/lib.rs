//! Sluice's telemetry: what the gateway tells the world about the traffic it carries.
//!
//! - traces: W3C context and ids ([`context`]), where to send them ([`config`]), the span model
//!   and its OTLP/HTTP JSON ([`otlp`]), the bounded exporter ([`exporter`]) and Sluice's own
//!   spans with the task-local parent ([`spans`]), named and attributed by OpenTelemetry's MCP
//!   semantic conventions ([`semconv`]);
//! - the typed record of one exchange ([`exchange`]), written by the audit log ([`audit`]) and
//!   counted by the metrics ([`metrics`]), which render `/metrics` and the admin page's series,
//!   with the conventions' MCP duration histograms ([`mcp_metrics`]).
//!
//! The crate knows nothing of sessions or upstream connections: the server passes plain values
//! (a session's id, client name and principal; the gauges it owns).

pub mod audit;
pub mod config;
pub mod context;
pub mod exchange;
pub mod exporter;
mod exposition;
pub mod mcp_metrics;
pub mod metrics;
pub mod otlp;
pub mod overload;
pub mod semconv;
pub mod spans;

pub use audit::Audit;
pub use config::ExportConfig;
pub use context::SpanContext;
pub use exchange::{Caller, Ended, Exchange, HookLine};
pub use exporter::Telemetry;
pub use metrics::{Gauges, Metrics, UpstreamGauge};
pub use overload::{Action, OverloadActions, OverloadCounts};
pub use semconv::{Net, Peer};
pub use spans::{
    http_parent, with_http_parent, ClientOp, RequestSpan, ServerOp, UpstreamResult, UpstreamSpan,
};
