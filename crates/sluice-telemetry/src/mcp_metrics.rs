//! The MCP duration histograms of OpenTelemetry's semantic conventions
//! (`mcp.server.operation.duration`, `mcp.client.operation.duration`, unit `s`), in their
//! Prometheus form beside Sluice's own names on `/metrics`.
//!
//! The Prometheus names follow OpenTelemetry's Prometheus compatibility rules: dots become
//! underscores and the unit `s` becomes the suffix `_seconds` (`mcp_server_operation_duration_seconds`);
//! attribute keys become label names the same way (`mcp.method.name` → `mcp_method_name`).
//! Buckets are the spec's advisory `ExplicitBucketBoundaries` ([`OPERATION_BUCKETS`]).
//!
//! The gateway records into one process-wide registry ([`global`]), as an OpenTelemetry SDK
//! records into its global meter provider: requests are handled far from where `/metrics` is
//! rendered. A family appears once it has a series.

use crate::exposition::{esc, hist, Hist};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::OnceLock;

/// The advisory bucket boundaries (seconds) of both operation-duration histograms.
pub const OPERATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Which side of an operation the gateway measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A request a client sent the gateway (`mcp.server.operation.duration`).
    Server,
    /// A request the gateway sent an upstream (`mcp.client.operation.duration`).
    Client,
}

/// One series' labels: OpenTelemetry attribute keys and values, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// The MCP operation-duration histograms.
#[derive(Default)]
pub struct McpMetrics {
    server: Mutex<BTreeMap<Labels, Hist>>,
    client: Mutex<BTreeMap<Labels, Hist>>,
}

/// The process-wide registry the gateway records into and `/metrics` renders.
pub fn global() -> &'static McpMetrics {
    static GLOBAL: OnceLock<McpMetrics> = OnceLock::new();
    GLOBAL.get_or_init(McpMetrics::default)
}

/// An OpenTelemetry attribute key as a Prometheus label name.
fn label_name(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

impl McpMetrics {
    /// Record one operation of `secs` seconds.
    pub fn observe(&self, side: Side, labels: Labels, secs: f64) {
        let map = match side {
            Side::Server => &self.server,
            Side::Client => &self.client,
        };
        map.lock()
            .entry(labels)
            .or_default()
            .observe(OPERATION_BUCKETS, secs);
    }

    /// Append the Prometheus text of each family that has a series.
    pub fn render(&self, o: &mut String) {
        for (side, name, help) in [
            (
                Side::Server,
                "mcp_server_operation_duration_seconds",
                "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent (OpenTelemetry mcp.server.operation.duration).",
            ),
            (
                Side::Client,
                "mcp_client_operation_duration_seconds",
                "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received (OpenTelemetry mcp.client.operation.duration).",
            ),
        ] {
            let map = match side {
                Side::Server => self.server.lock(),
                Side::Client => self.client.lock(),
            };
            if map.is_empty() {
                continue;
            }
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} histogram");
            for (labels, h) in map.iter() {
                let l = labels
                    .iter()
                    .map(|(k, v)| format!("{}=\"{}\"", label_name(k), esc(v)))
                    .collect::<Vec<_>>()
                    .join(",");
                hist(o, name, &l, OPERATION_BUCKETS, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_otel_histograms_in_their_prometheus_form() {
        let m = McpMetrics::default();
        let mut o = String::new();
        m.render(&mut o);
        assert_eq!(o, "", "no series, no family");
        let call = vec![
            ("mcp.method.name", "tools/call".to_string()),
            ("gen_ai.operation.name", "execute_tool".to_string()),
            ("gen_ai.tool.name", "fx_echo".to_string()),
            ("network.transport", "tcp".to_string()),
        ];
        m.observe(Side::Server, call.clone(), 0.015);
        m.observe(Side::Server, call, 0.5);
        let mut failed = vec![("mcp.method.name", "tools/call".to_string())];
        failed.push(("error.type", "-32602".to_string()));
        failed.push(("rpc.response.status_code", "-32602".to_string()));
        m.observe(Side::Server, failed, 0.001);
        m.observe(
            Side::Client,
            vec![
                ("mcp.method.name", "initialize".to_string()),
                ("server.address", "127.0.0.1".to_string()),
                ("server.port", "8080".to_string()),
            ],
            400.0,
        );
        m.render(&mut o);
        let lines: Vec<&str> = o.lines().collect();
        let l = r#"mcp_method_name="tools/call",gen_ai_operation_name="execute_tool",gen_ai_tool_name="fx_echo",network_transport="tcp""#;
        for want in [
            "# TYPE mcp_server_operation_duration_seconds histogram".to_string(),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.01"}} 0"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.02"}} 1"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.5"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="300"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="+Inf"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_sum{{{l}}} 0.515"#),
            format!(r#"mcp_server_operation_duration_seconds_count{{{l}}} 2"#),
            r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",error_type="-32602",rpc_response_status_code="-32602"} 1"#.to_string(),
            "# TYPE mcp_client_operation_duration_seconds histogram".to_string(),
            r#"mcp_client_operation_duration_seconds_bucket{mcp_method_name="initialize",server_address="127.0.0.1",server_port="8080",le="300"} 0"#.to_string(),
            r#"mcp_client_operation_duration_seconds_bucket{mcp_method_name="initialize",server_address="127.0.0.1",server_port="8080",le="+Inf"} 1"#.to_string(),
        ] {
            assert!(lines.contains(&want.as_str()), "missing {want:?} in\n{o}");
        }
        assert_eq!(o.lines().filter(|l| l.starts_with("# HELP")).count(), 2);
    }
}
