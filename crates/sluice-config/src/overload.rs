//! The overload settings of `sluice.json`: what the MCP listener does as its connections near
//! `max_connections` (the `overload` object: shorter header and idle timeouts), the slowest a
//! body may arrive, the cap per peer address and the proxies trusted to name the peer, the cap
//! on calls in flight per principal, and the memory ceiling.

use crate::fields::Fields;
use ipnet::IpNet;
use serde_json::Value;

/// Keys the loader accepts in `overload`.
pub(crate) const OVERLOAD_KNOWN: &[&str] = &["at_percent", "header_timeout_ms", "idle_timeout_ms"];

/// The `overload` object: from `at_percent` of `max_connections` on, the MCP listener's header
/// and idle timeouts become these (when shorter), and at the cap the connection idle the
/// longest (nothing in flight: a kept-alive one, or one whose head is not complete) is closed
/// to let a new one in.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadSettings {
    /// Open connections, in percent of `max_connections`, from which the timeouts shrink.
    /// Default 80.
    pub at_percent: u64,
    /// The header timeout under overload, ms. Default 1 000.
    pub header_timeout_ms: u64,
    /// The idle timeout of kept-alive connections under overload, ms. Default 1 000.
    pub idle_timeout_ms: u64,
}

impl Default for OverloadSettings {
    fn default() -> OverloadSettings {
        OverloadSettings {
            at_percent: 80,
            header_timeout_ms: 1_000,
            idle_timeout_ms: 1_000,
        }
    }
}

impl OverloadSettings {
    /// The number of open connections from which the overload timeouts apply, for a cap of
    /// `max_connections` (at least 1).
    pub fn threshold(&self, max_connections: u64) -> u64 {
        (max_connections.saturating_mul(self.at_percent) / 100).max(1)
    }
}

/// The default of `min_body_bytes_per_sec`.
pub(crate) const MIN_BODY_BYTES_PER_SEC: u64 = 1024;

/// The overload fields of `sluice.json`, as read (the settings loader puts them in `Settings`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limits {
    /// `max_connections_per_ip`.
    pub max_connections_per_ip: Option<u64>,
    /// `max_inflight_per_principal`.
    pub max_inflight_per_principal: Option<u64>,
    /// `max_memory_mb`.
    pub max_memory_mb: Option<u64>,
    /// `min_body_bytes_per_sec`.
    pub min_body_bytes_per_sec: u64,
    /// `trusted_proxies`.
    pub trusted_proxies: Vec<IpNet>,
    /// `overload`.
    pub overload: OverloadSettings,
}

/// The overload fields of `sluice.json` (called by the settings loader).
pub(crate) fn load(f: &mut Fields) -> Limits {
    let mut s = Limits {
        max_connections_per_ip: None,
        max_inflight_per_principal: None,
        max_memory_mb: None,
        min_body_bytes_per_sec: MIN_BODY_BYTES_PER_SEC,
        trusted_proxies: Vec::new(),
        overload: OverloadSettings::default(),
    };
    let optional_positive = |f: &mut Fields, key: &str| -> Option<u64> {
        match f.u64(key) {
            Some(0) => {
                f.err(key, "must be greater than 0 (leave it out for no limit)");
                None
            }
            v => v,
        }
    };
    s.max_connections_per_ip = optional_positive(f, "max_connections_per_ip");
    s.max_inflight_per_principal = optional_positive(f, "max_inflight_per_principal");
    s.max_memory_mb = optional_positive(f, "max_memory_mb");
    if let Some(v) = f.u64("min_body_bytes_per_sec") {
        s.min_body_bytes_per_sec = v;
    }
    for (i, text) in f.strings("trusted_proxies").into_iter().enumerate() {
        match parse_net(&text) {
            Some(net) => s.trusted_proxies.push(net),
            None => f.err(
                &format!("trusted_proxies[{i}]"),
                format!("{text:?} is not an IP address or CIDR block (10.0.0.0/8, ::1)"),
            ),
        }
    }
    match f.obj.get("overload") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            let mut of = Fields {
                file: f.file,
                path: "overload".into(),
                obj: o,
                errors: &mut *f.errors,
            };
            s.overload = overload(&mut of);
        }
        Some(_) => f.err("overload", "must be an object"),
    }
    s
}

/// An address (`10.1.2.3`, `::1`: that one address) or a CIDR block (`10.0.0.0/8`).
fn parse_net(text: &str) -> Option<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<std::net::IpAddr>().ok().map(IpNet::from))
}

fn overload(f: &mut Fields) -> OverloadSettings {
    let mut o = OverloadSettings::default();
    for key in f.obj.keys() {
        if !OVERLOAD_KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!(
                    "unknown overload setting (known: {})",
                    OVERLOAD_KNOWN.join(", ")
                ),
            );
        }
    }
    match f.u64("at_percent") {
        Some(p) if (1..=100).contains(&p) => o.at_percent = p,
        Some(_) => f.err("at_percent", "must be from 1 to 100"),
        None => {}
    }
    for (key, slot) in [
        ("header_timeout_ms", &mut o.header_timeout_ms),
        ("idle_timeout_ms", &mut o.idle_timeout_ms),
    ] {
        match f.u64(key) {
            Some(0) => f.err(key, "must be greater than 0"),
            Some(v) => *slot = v,
            None => {}
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ConfigError;

    fn load_text(text: &str) -> (Limits, Vec<String>) {
        let obj: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
        let mut errors: Vec<ConfigError> = Vec::new();
        let file = std::path::Path::new("sluice.json");
        let mut f = Fields {
            file,
            path: String::new(),
            obj: &obj,
            errors: &mut errors,
        };
        let s = load(&mut f);
        let errors = errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        (s, errors)
    }

    #[test]
    fn off_by_default_and_read_when_given() {
        let (s, errors) = load_text("{}");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (
                s.max_connections_per_ip,
                s.max_inflight_per_principal,
                s.max_memory_mb
            ),
            (None, None, None)
        );
        assert!(s.trusted_proxies.is_empty());
        assert_eq!(s.min_body_bytes_per_sec, 1024);
        assert_eq!(s.overload, OverloadSettings::default());
        assert_eq!(s.overload.threshold(1024), 819);
        let (s, errors) = load_text(
            r#"{"max_connections_per_ip": 64, "max_inflight_per_principal": 4,
                "max_memory_mb": 512, "min_body_bytes_per_sec": 0,
                "trusted_proxies": ["10.0.0.0/8", "::1", "127.0.0.1"],
                "overload": {"at_percent": 50, "header_timeout_ms": 500, "idle_timeout_ms": 200}}"#,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (
                s.max_connections_per_ip,
                s.max_inflight_per_principal,
                s.max_memory_mb,
                s.min_body_bytes_per_sec
            ),
            (Some(64), Some(4), Some(512), 0)
        );
        let nets: Vec<String> = s.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(nets, ["10.0.0.0/8", "::1/128", "127.0.0.1/32"]);
        assert_eq!(
            s.overload,
            OverloadSettings {
                at_percent: 50,
                header_timeout_ms: 500,
                idle_timeout_ms: 200
            }
        );
    }

    #[test]
    fn bad_values_are_named() {
        let (_, errors) = load_text(
            r#"{"max_connections_per_ip": 0, "trusted_proxies": ["10.0.0.0/33", "proxy"],
                "overload": {"at_percent": 101, "idle_timeout_ms": 0, "shed": true}}"#,
        );
        assert_eq!(
            errors,
            [
                "max_connections_per_ip: must be greater than 0 (leave it out for no limit)",
                "trusted_proxies[0]: \"10.0.0.0/33\" is not an IP address or CIDR block (10.0.0.0/8, ::1)",
                "trusted_proxies[1]: \"proxy\" is not an IP address or CIDR block (10.0.0.0/8, ::1)",
                "overload.shed: unknown overload setting (known: at_percent, header_timeout_ms, idle_timeout_ms)",
                "overload.at_percent: must be from 1 to 100",
                "overload.idle_timeout_ms: must be greater than 0",
            ]
        );
        let (_, errors) = load_text(r#"{"overload": 80}"#);
        assert_eq!(errors, ["overload: must be an object"]);
    }
}
