//! `sluice.json`: server settings (listen address, limits, timeouts). Optional; every field has
//! a default.

use crate::error::ConfigError;
use crate::fields::{expand_env, read_object, Fields};
use std::collections::BTreeMap;
use std::path::Path;

/// Server settings. Every field is optional in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where the MCP listener binds (`--listen` overrides it). Default `127.0.0.1:8750`.
    pub listen: String,
    /// Largest accepted request body, bytes. Default 4 MiB; larger is HTTP 413.
    pub max_body_bytes: u64,
    /// How long a forwarded request may wait for its upstream, ms. Default 60 000.
    pub request_timeout_ms: u64,
    /// How long an upstream may take to start and initialise, ms. Default 30 000.
    pub connect_timeout_ms: u64,
    /// Extra allowed `Origin` values besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Items per page of the gateway's list results. Default 500.
    pub page_size: u64,
    /// A legacy session unused this long is ended, seconds. Default 3600.
    pub session_idle_secs: u64,
    /// First restart delay of a crashed upstream, ms (doubles up to `restart_max_ms`). Default 500.
    pub restart_initial_ms: u64,
    /// Longest restart delay, ms. Default 30 000.
    pub restart_max_ms: u64,
    /// SSE events kept per stream for `Last-Event-ID` resumption. Default 256.
    pub replay_events: u64,
    /// Bytes of SSE event data kept per stream for resumption (the oldest events beyond it are
    /// dropped; the newest is always kept). Default 1 MiB.
    pub replay_bytes: u64,
    /// `Host` values accepted on the MCP listener (empty: any). An entry matches the whole
    /// value or its host part without the port. Others: 403.
    pub allowed_hosts: Vec<String>,
    /// A connection must deliver a complete request head within this long of opening, or of
    /// the first byte of its next request on a kept-alive connection, ms. Default 10 000.
    pub header_timeout_ms: u64,
    /// A connection with no request in flight and no bytes received this long is closed, ms.
    /// Default 60 000.
    pub idle_timeout_ms: u64,
    /// A POST body not fully received this long after its head is answered 408, ms. Default 30 000.
    pub body_timeout_ms: u64,
    /// Connections served at once on the MCP listener; at it the connection idle the longest
    /// is closed for a new one, and when every one is busy new ones wait in the kernel's
    /// backlog. Default 1024.
    pub max_connections: u64,
    /// Live HTTP sessions at once; past it `initialize` is answered 429. Default 10 000.
    pub max_sessions: u64,
    /// Live HTTP sessions per authenticated principal. Default 1 000.
    pub max_sessions_per_principal: u64,
    /// At shutdown, how long calls in flight may take to finish, ms. Default 10 000.
    pub drain_ms: u64,
    /// Connections from one peer address at once on the MCP listener (past it a new one is
    /// closed at once; behind a trusted proxy, requests in flight per forwarded address are
    /// answered 429 past it). None (the default): no cap.
    pub max_connections_per_ip: Option<u64>,
    /// Proxies (addresses or CIDR blocks) whose `X-Forwarded-For` names the real peer; their own
    /// connections are not capped per address.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The slowest a POST body may arrive, bytes per second on average, after an allowance of
    /// the header timeout; slower is cut (408). 0: off. Default 1 024.
    pub min_body_bytes_per_sec: u64,
    /// `overload`: shorter header and idle timeouts as connections near `max_connections`.
    pub overload: crate::overload::OverloadSettings,
    /// Requests in flight per authenticated principal; past it -32029 with `retryAfterMs`.
    /// None (the default): no cap.
    pub max_inflight_per_principal: Option<u64>,
    /// The memory ceiling, MB of resident memory: past it new sessions are answered 503 with
    /// `Retry-After` and kept replay buffers are dropped, oldest first. None: no ceiling.
    pub max_memory_mb: Option<u64>,
    /// List the funnel's meta-tools (`<prefix>_list_tools`, `_tool_instructions`, `_run_tool`).
    /// Default: on when the tree has a `tools/` folder.
    pub funnel: Option<bool>,
    /// The meta-tools' name prefix. Default `sluice`.
    pub funnel_prefix: String,
    /// Also list first-party register tools directly in tools/list (under their ids).
    /// Default false (they are reached through the funnel, as in toolfunnel).
    pub list_register_tools: bool,
    /// Keep a session's transcript file (`transcripts/<session>.jsonl`) when the session ends.
    /// Default false: it is removed after the session's Stop and SessionEnd hooks ran.
    pub keep_transcripts: bool,
    /// List the management tools (`<prefix>_list`, `_tool_add`, `_tool_set`, `_hook_add`,
    /// `_hook_set`, `_upstream_add`, `_upstream_set`, `_log`: toolfunnel's `tf_*` set). Default false.
    pub management_tools: bool,
    /// List `<prefix>_search_tools`, which ranks the caller's tools for a query (BM25).
    /// Default false.
    pub tool_search: bool,
    /// What `tools/list` shows: every tool (`all`, the default) or only the search tool and
    /// the funnel's run tool (`search`, progressive discovery; turns the search tool on).
    pub discovery: Discovery,
    /// Where the admin listener binds (`--admin` overrides it). Default `127.0.0.1:8751`.
    pub admin: Option<String>,
    /// The admin token (`SLUICE_ADMIN_TOKEN` is used when absent; else one is generated at
    /// start and printed on stderr).
    pub admin_token: Option<String>,
    /// `telemetry`: OpenTelemetry trace export (off without an endpoint here or in the
    /// standard `OTEL_*` environment variables).
    pub telemetry: TelemetrySettings,
    /// `cluster`: replicas that share sessions through sealed session ids and Redis (None: this
    /// process alone, as without it).
    pub cluster: Option<crate::cluster::ClusterSettings>,
    /// The gateway's public base URL (`https://gateway.example.com`): the OAuth callback and
    /// the client ID metadata document are served under it on the MCP listener. Default: the
    /// origin of `auth.resource` when set, else `http://` + `listen`.
    pub public_url: Option<String>,
    /// `vault`: where grants and client registrations toward upstreams are kept, and the keys
    /// that seal them (required when an upstream has `oauth`).
    pub vault: Option<crate::oauth::VaultSettings>,
    /// Hosts the OAuth client may reach over plain http besides loopback (tests, labs).
    pub oauth_http_hosts: Vec<String>,
}

/// What `tools/list` shows (`discovery` in `sluice.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Discovery {
    /// Every tool (today's lists).
    #[default]
    All,
    /// Only the search tool and the funnel's run tool (every tool is still reachable through
    /// them, and by name).
    Search,
}

/// The `telemetry` object of `sluice.json`: where traces go (OTLP over HTTP, JSON encoding).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetrySettings {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are POSTed to
    /// `<endpoint>/v1/traces`. None: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` decide, else tracing is off.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported resource. None: `OTEL_SERVICE_NAME`, else `sluice`.
    pub service_name: Option<String>,
    /// Extra headers on every export request (`${env:NAME}` expanded), e.g. a collector key.
    pub headers: BTreeMap<String, String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            listen: "127.0.0.1:8750".into(),
            max_body_bytes: 4 * 1024 * 1024,
            request_timeout_ms: 60_000,
            connect_timeout_ms: 30_000,
            allowed_origins: Vec::new(),
            page_size: 500,
            session_idle_secs: 3600,
            restart_initial_ms: 500,
            restart_max_ms: 30_000,
            replay_events: 256,
            replay_bytes: 1024 * 1024,
            allowed_hosts: Vec::new(),
            header_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            body_timeout_ms: 30_000,
            max_connections: 1024,
            max_sessions: 10_000,
            max_sessions_per_principal: 1_000,
            drain_ms: 10_000,
            max_connections_per_ip: None,
            trusted_proxies: Vec::new(),
            min_body_bytes_per_sec: crate::overload::MIN_BODY_BYTES_PER_SEC,
            overload: crate::overload::OverloadSettings::default(),
            max_inflight_per_principal: None,
            max_memory_mb: None,
            funnel: None,
            funnel_prefix: "sluice".into(),
            list_register_tools: false,
            keep_transcripts: false,
            management_tools: false,
            tool_search: false,
            discovery: Discovery::All,
            admin: None,
            admin_token: None,
            telemetry: TelemetrySettings::default(),
            cluster: None,
            public_url: None,
            vault: None,
            oauth_http_hosts: Vec::new(),
        }
    }
}

/// The keys the loader accepts (`$schema` first); `sluice schema settings` lists the same.
pub(crate) const KNOWN: &[&str] = &[
    "$schema",
    "listen",
    "max_body_bytes",
    "request_timeout_ms",
    "connect_timeout_ms",
    "allowed_origins",
    "page_size",
    "session_idle_secs",
    "restart_initial_ms",
    "restart_max_ms",
    "replay_events",
    "replay_bytes",
    "allowed_hosts",
    "header_timeout_ms",
    "idle_timeout_ms",
    "body_timeout_ms",
    "max_connections",
    "max_sessions",
    "max_sessions_per_principal",
    "drain_ms",
    "max_connections_per_ip",
    "trusted_proxies",
    "min_body_bytes_per_sec",
    "overload",
    "max_inflight_per_principal",
    "max_memory_mb",
    "funnel",
    "funnel_prefix",
    "list_register_tools",
    "keep_transcripts",
    "management_tools",
    "tool_search",
    "discovery",
    "admin",
    "admin_token",
    "telemetry",
    "cluster",
    "public_url",
    "vault",
    "oauth_http_hosts",
];

pub(crate) const TELEMETRY_KNOWN: &[&str] = &["otlp_endpoint", "service_name", "headers"];

pub(crate) fn load(
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
) -> Settings {
    let mut s = Settings::default();
    let Some(obj) = read_object(file, errors) else {
        return s;
    };
    let obj = &obj;
    let mut f = Fields {
        file,
        path: String::new(),
        obj,
        errors,
    };
    for key in obj.keys() {
        if !KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!("unknown setting (known: {})", KNOWN[1..].join(", ")),
            );
        }
    }
    if let Some(l) = f.string("listen") {
        if l.parse::<std::net::SocketAddr>().is_err() {
            f.err(
                "listen",
                format!("{l:?} is not HOST:PORT with an IP address"),
            );
        }
        s.listen = l;
    }
    let positive = |f: &mut Fields, key: &str, slot: &mut u64| {
        if let Some(v) = f.u64(key) {
            if v == 0 {
                f.err(key, "must be greater than 0");
            } else {
                *slot = v;
            }
        }
    };
    positive(&mut f, "max_body_bytes", &mut s.max_body_bytes);
    positive(&mut f, "request_timeout_ms", &mut s.request_timeout_ms);
    positive(&mut f, "connect_timeout_ms", &mut s.connect_timeout_ms);
    positive(&mut f, "page_size", &mut s.page_size);
    positive(&mut f, "session_idle_secs", &mut s.session_idle_secs);
    positive(&mut f, "restart_initial_ms", &mut s.restart_initial_ms);
    positive(&mut f, "restart_max_ms", &mut s.restart_max_ms);
    positive(&mut f, "replay_events", &mut s.replay_events);
    positive(&mut f, "replay_bytes", &mut s.replay_bytes);
    positive(&mut f, "header_timeout_ms", &mut s.header_timeout_ms);
    positive(&mut f, "idle_timeout_ms", &mut s.idle_timeout_ms);
    positive(&mut f, "body_timeout_ms", &mut s.body_timeout_ms);
    positive(&mut f, "max_connections", &mut s.max_connections);
    positive(&mut f, "max_sessions", &mut s.max_sessions);
    positive(
        &mut f,
        "max_sessions_per_principal",
        &mut s.max_sessions_per_principal,
    );
    positive(&mut f, "drain_ms", &mut s.drain_ms);
    let limits = crate::overload::load(&mut f);
    s.max_connections_per_ip = limits.max_connections_per_ip;
    s.max_inflight_per_principal = limits.max_inflight_per_principal;
    s.max_memory_mb = limits.max_memory_mb;
    s.min_body_bytes_per_sec = limits.min_body_bytes_per_sec;
    s.trusted_proxies = limits.trusted_proxies;
    s.overload = limits.overload;
    s.allowed_origins = f.strings("allowed_origins");
    s.allowed_hosts = f.strings("allowed_hosts");
    for (i, h) in s.allowed_hosts.iter().enumerate() {
        if h.is_empty() || h.chars().any(|c| c.is_whitespace() || c == '/') {
            f.err(
                &format!("allowed_hosts[{i}]"),
                format!("{h:?} is not a host or host:port"),
            );
        }
    }
    if obj.contains_key("funnel") {
        s.funnel = Some(f.bool("funnel", true));
    }
    if let Some(p) = f.string("funnel_prefix") {
        if p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            f.err(
                "funnel_prefix",
                format!("{p:?} is not a valid tool-name prefix"),
            );
        } else {
            s.funnel_prefix = p;
        }
    }
    s.list_register_tools = f.bool("list_register_tools", false);
    s.keep_transcripts = f.bool("keep_transcripts", false);
    s.management_tools = f.bool("management_tools", false);
    s.tool_search = f.bool("tool_search", false);
    match f.string("discovery").as_deref() {
        None | Some("all") => {}
        Some("search") => s.discovery = Discovery::Search,
        Some(other) => f.err(
            "discovery",
            format!("{other:?} is not \"all\" or \"search\""),
        ),
    }
    if let Some(a) = f.string("admin") {
        if a.parse::<std::net::SocketAddr>().is_err() {
            f.err(
                "admin",
                format!("{a:?} is not HOST:PORT with an IP address"),
            );
        }
        s.admin = Some(a);
    }
    if let Some(t) = f.string("admin_token") {
        if t.len() < 16 {
            f.err("admin_token", "must be at least 16 characters");
        }
        s.admin_token = Some(t);
    }
    match obj.get("telemetry") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(t)) => {
            let mut tf = Fields {
                file,
                path: "telemetry".into(),
                obj: t,
                errors: &mut *f.errors,
            };
            s.telemetry = telemetry(&mut tf, env);
        }
        Some(_) => f.err("telemetry", "must be an object"),
    }
    match obj.get("cluster") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(c)) => {
            let mut cf = Fields {
                file,
                path: "cluster".into(),
                obj: c,
                errors: &mut *f.errors,
            };
            s.cluster = crate::cluster::load(&mut cf, env);
        }
        Some(_) => f.err("cluster", "must be an object"),
    }
    if let Some(u) = f.string("public_url") {
        match url_origin_ok(&u) {
            Ok(()) => s.public_url = Some(u.trim_end_matches('/').to_string()),
            Err(e) => f.err("public_url", e),
        }
    }
    let home = file.parent().unwrap_or(Path::new("."));
    match obj.get("vault") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(v)) => {
            let mut vf = Fields {
                file,
                path: "vault".into(),
                obj: v,
                errors: &mut *f.errors,
            };
            s.vault = crate::oauth::load_vault(&mut vf, home, env);
        }
        Some(_) => f.err("vault", "must be an object"),
    }
    s.oauth_http_hosts = f.strings("oauth_http_hosts");
    s
}

/// A public URL: http(s), a host, no query or fragment.
fn url_origin_ok(u: &str) -> Result<(), String> {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"))
        .ok_or_else(|| format!("{u:?} is not an http:// or https:// URL"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(['?', '#', ' ']) {
        return Err(format!(
            "{u:?} is not a base URL (scheme, host, optional path)"
        ));
    }
    Ok(())
}

/// The `telemetry` object's fields.
fn telemetry(f: &mut Fields, env: &dyn Fn(&str) -> Option<String>) -> TelemetrySettings {
    let mut t = TelemetrySettings::default();
    for key in f.obj.keys() {
        if !TELEMETRY_KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!(
                    "unknown telemetry setting (known: {})",
                    TELEMETRY_KNOWN.join(", ")
                ),
            );
        }
    }
    if let Some(e) = f.string("otlp_endpoint") {
        let rest = e
            .strip_prefix("http://")
            .or_else(|| e.strip_prefix("https://"));
        match rest {
            Some(r) if !r.is_empty() && !r.starts_with('/') && !e.contains(char::is_whitespace) => {
                t.otlp_endpoint = Some(e)
            }
            _ => f.err(
                "otlp_endpoint",
                format!("{e:?} is not an http:// or https:// URL (the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318)"),
            ),
        }
    }
    if let Some(n) = f.string("service_name") {
        if n.trim().is_empty() {
            f.err("service_name", "must be a non-empty string");
        } else {
            t.service_name = Some(n);
        }
    }
    for (name, value) in f.string_map("headers") {
        let field = format!("headers.{name}");
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            f.err(&field, "is not a valid HTTP header name");
            continue;
        }
        match expand_env(&value, env) {
            Ok(v) if v.chars().any(|c| c.is_control() && c != '\t') => {
                f.err(&field, "the value holds a control character");
            }
            Ok(v) => {
                t.headers.insert(name, v);
            }
            Err(e) => f.err(&field, e),
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(label: &str, text: &str) -> (Settings, Vec<String>) {
        let dir =
            std::env::temp_dir().join(format!("sluice-settings-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sluice.json");
        std::fs::write(&file, text).unwrap();
        let env = |n: &str| (n == "COLLECTOR_KEY").then(|| "k3y".to_string());
        let mut errors = Vec::new();
        let s = load(&file, &env, &mut errors);
        let _ = std::fs::remove_dir_all(&dir);
        let errors = errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        (s, errors)
    }

    #[test]
    fn telemetry_is_read_with_env_expanded_headers() {
        let (s, errors) = load_text(
            "telemetry-ok",
            r#"{"telemetry": {"otlp_endpoint": "http://127.0.0.1:4318", "service_name": "edge",
                "headers": {"x-api-key": "${env:COLLECTOR_KEY}"}}}"#,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            s.telemetry,
            TelemetrySettings {
                otlp_endpoint: Some("http://127.0.0.1:4318".into()),
                service_name: Some("edge".into()),
                headers: [("x-api-key".to_string(), "k3y".to_string())].into(),
            }
        );
        let (s, errors) = load_text("telemetry-none", "{}");
        assert!(errors.is_empty());
        assert_eq!(s.telemetry, TelemetrySettings::default());
    }

    #[test]
    fn the_limits_are_read_and_must_be_positive() {
        let (s, errors) = load_text(
            "limits-ok",
            r#"{"header_timeout_ms": 300, "idle_timeout_ms": 400, "body_timeout_ms": 500,
                "max_connections": 2, "max_sessions": 3, "max_sessions_per_principal": 1,
                "replay_bytes": 4096, "drain_ms": 700, "allowed_hosts": ["gw.example.com"]}"#,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (
                s.header_timeout_ms,
                s.idle_timeout_ms,
                s.body_timeout_ms,
                s.drain_ms
            ),
            (300, 400, 500, 700)
        );
        assert_eq!(
            (
                s.max_connections,
                s.max_sessions,
                s.max_sessions_per_principal
            ),
            (2, 3, 1)
        );
        assert_eq!(s.replay_bytes, 4096);
        assert_eq!(s.allowed_hosts, ["gw.example.com"]);
        let (s, errors) = load_text(
            "limits-bad",
            r#"{"max_connections": 0, "drain_ms": 0, "allowed_hosts": ["a b"]}"#,
        );
        assert_eq!(
            errors,
            [
                "max_connections: must be greater than 0",
                "drain_ms: must be greater than 0",
                "allowed_hosts[0]: \"a b\" is not a host or host:port",
            ]
        );
        assert_eq!(s.max_connections, 1024);
    }

    #[test]
    fn bad_telemetry_fields_are_named() {
        let (_, errors) = load_text(
            "telemetry-bad",
            r#"{"telemetry": {"otlp_endpoint": "127.0.0.1:4318", "service_name": " ", "sampler": 1,
                "headers": {"bad name": "x", "x-key": "${env:MISSING}"}}}"#,
        );
        assert_eq!(
            errors,
            [
                "telemetry.sampler: unknown telemetry setting (known: otlp_endpoint, service_name, headers)",
                "telemetry.otlp_endpoint: \"127.0.0.1:4318\" is not an http:// or https:// URL (the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318)",
                "telemetry.service_name: must be a non-empty string",
                "telemetry.headers.bad name: is not a valid HTTP header name",
                "telemetry.headers.x-key: environment variable MISSING is not set",
            ]
        );
        let (_, errors) = load_text("telemetry-type", r#"{"telemetry": "http://x"}"#);
        assert_eq!(errors, ["telemetry: must be an object"]);
    }

    #[test]
    fn tool_search_and_discovery_are_off_by_default_and_read() {
        let (s, errors) = load_text("search-none", "{}");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!((s.tool_search, s.discovery), (false, Discovery::All));
        let (s, errors) = load_text(
            "search-on",
            r#"{"tool_search": true, "discovery": "search"}"#,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!((s.tool_search, s.discovery), (true, Discovery::Search));
        let (s, errors) = load_text("search-all", r#"{"discovery": "all"}"#);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.discovery, Discovery::All);
        let (s, errors) = load_text(
            "search-bad",
            r#"{"tool_search": "yes", "discovery": "some"}"#,
        );
        assert_eq!(
            errors,
            [
                "tool_search: must be true or false",
                "discovery: \"some\" is not \"all\" or \"search\"",
            ]
        );
        assert_eq!((s.tool_search, s.discovery), (false, Discovery::All));
    }
}
