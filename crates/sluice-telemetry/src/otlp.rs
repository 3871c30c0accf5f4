//! The span model and its OTLP/HTTP JSON encoding (an `ExportTraceServiceRequest`).
//!
//! The OTLP JSON mapping: ids as lowercase hex, times as string nanoseconds, attributes as
//! `{key, value: {stringValue|intValue}}` (an `intValue` is a string too), status code 2 for an
//! error. Written with serde derives over borrowed wire structs, not with `opentelemetry-proto`:
//! its message types pull `prost` and `tonic` even for JSON over HTTP, minutes of build on a
//! 2-core CI for a format this small.

use crate::context::{hex, SpanContext};
use serde::{Serialize, Serializer};

/// `SPAN_KIND_INTERNAL`.
pub(crate) const KIND_INTERNAL: u8 = 1;
/// `SPAN_KIND_SERVER`.
pub(crate) const KIND_SERVER: u8 = 2;
/// `SPAN_KIND_CLIENT`.
pub(crate) const KIND_CLIENT: u8 = 3;

/// One attribute value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attr {
    Str(String),
    Int(i64),
}

/// A finished span, as queued for export.
#[derive(Debug, Clone)]
pub(crate) struct SpanData {
    pub ctx: SpanContext,
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: u8,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attrs: Vec<(&'static str, Attr)>,
    /// Status `error` with this message.
    pub error: Option<String>,
}

/// The resource every exported span belongs to: `service.name` and the SDK's facts.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    attributes: Vec<(&'static str, String)>,
}

impl Resource {
    /// The resource of a Sluice named `service_name`.
    pub(crate) fn new(service_name: &str) -> Resource {
        Resource {
            attributes: vec![
                ("service.name", service_name.to_string()),
                ("service.version", env!("CARGO_PKG_VERSION").to_string()),
                ("telemetry.sdk.name", "sluice".into()),
                ("telemetry.sdk.language", "rust".into()),
            ],
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    resource_spans: [ResourceSpans<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceSpans<'a> {
    resource: WireResource<'a>,
    scope_spans: [ScopeSpans<'a>; 1],
}

#[derive(Serialize)]
struct WireResource<'a> {
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Serialize)]
struct ScopeSpans<'a> {
    scope: Scope,
    spans: &'a [SpanData],
}

#[derive(Serialize)]
struct Scope {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireSpan<'a> {
    trace_id: String,
    span_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<String>,
    name: &'a str,
    kind: u8,
    start_time_unix_nano: String,
    end_time_unix_nano: String,
    attributes: Vec<KeyValue<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
}

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'a str,
    value: AnyValue<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum AnyValue<'a> {
    StringValue(&'a str),
    IntValue(String),
}

#[derive(Serialize)]
struct Status<'a> {
    code: u8,
    message: &'a str,
}

impl Serialize for SpanData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireSpan {
            trace_id: hex(&self.ctx.trace_id),
            span_id: hex(&self.ctx.span_id),
            parent_span_id: self.parent.as_ref().map(|p| hex(p)),
            name: &self.name,
            kind: self.kind,
            start_time_unix_nano: self.start_ns.to_string(),
            end_time_unix_nano: self.end_ns.to_string(),
            attributes: self
                .attrs
                .iter()
                .map(|(key, v)| KeyValue {
                    key,
                    value: match v {
                        Attr::Str(s) => AnyValue::StringValue(s),
                        Attr::Int(n) => AnyValue::IntValue(n.to_string()),
                    },
                })
                .collect(),
            status: self
                .error
                .as_deref()
                .map(|message| Status { code: 2, message }),
        }
        .serialize(s)
    }
}

/// One `ExportTraceServiceRequest` body: `resource` and its spans.
pub(crate) fn export_body(resource: &Resource, spans: &[SpanData]) -> Vec<u8> {
    let request = Request {
        resource_spans: [ResourceSpans {
            resource: WireResource {
                attributes: resource
                    .attributes
                    .iter()
                    .map(|(key, v)| KeyValue {
                        key,
                        value: AnyValue::StringValue(v),
                    })
                    .collect(),
            },
            scope_spans: [ScopeSpans {
                scope: Scope {
                    name: "sluice",
                    version: env!("CARGO_PKG_VERSION"),
                },
                spans,
            }],
        }],
    };
    serde_json::to_vec(&request).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

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
        let one = serde_json::to_value(&span).unwrap();
        assert_eq!(
            one,
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
        let root = SpanData {
            parent: None,
            error: None,
            attrs: vec![],
            kind: KIND_INTERNAL,
            ..span.clone()
        };
        let root_json = serde_json::to_value(&root).unwrap();
        assert!(root_json.get("parentSpanId").is_none() && root_json.get("status").is_none());
        let resource = Resource::new("edge");
        let body = export_body(&resource, &[span.clone(), span]);
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"resourceSpans": [{
                "resource": {"attributes": [
                    {"key": "service.name", "value": {"stringValue": "edge"}},
                    {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
                    {"key": "telemetry.sdk.name", "value": {"stringValue": "sluice"}},
                    {"key": "telemetry.sdk.language", "value": {"stringValue": "rust"}},
                ]},
                "scopeSpans": [{
                    "scope": {"name": "sluice", "version": env!("CARGO_PKG_VERSION")},
                    "spans": [one.clone(), one]
                }]
            }]})
        );
    }
}
